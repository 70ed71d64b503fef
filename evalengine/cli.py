"""The ``evalengine`` command."""

import argparse
import atexit
import json
import os
import sys
import tempfile
import time
import warnings
from importlib import resources
from pathlib import Path

from evalengine import api
from evalengine.engine.runner import SCHEDULERS
from evalengine.errors import EvalEngineError
from evalengine.io.detections import count_rows
from evalengine.io.proposals import BOX_CONVENTIONS
from evalengine.match.proposals import HOSANG_BUDGETS, ProposalProtocol
from evalengine.match.protocol import COCO_AREA_RANGES, COCO_IOU_THRESHOLDS, COCO_MAX_DETS, CocoProtocol
from evalengine.metrics.ap import Accumulation
from evalengine.metrics.summary import STAT_NAMES, format_summary, per_class_frame, summary_stats
from evalengine.progress import Phases
from evalengine.proposal_evaluation import coco_mean_proposals, coco_report
from evalengine.store.location import location
from evalengine.store.ranking import ORDERINGS, ProposalOrder

STORE_HELP = "a store folder, or an s3:// or gs:// URL (credentials from the environment)"


def _protocol_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--iou-type", choices=["bbox"], default="bbox", help="what is matched (bbox)")
    parser.add_argument("--use-cats", type=int, choices=[0, 1], default=1,
                        help="0 pools all categories into one (class-agnostic, pycocotools useCats=0)")
    parser.add_argument("--max-dets", type=int, nargs="+", default=list(COCO_MAX_DETS), metavar="N",
                        help="detection caps per image and category (default: 1 10 100)")
    parser.add_argument("--iou-thresholds", type=float, nargs="+", default=None, metavar="T",
                        help="IoU thresholds (default: pycocotools' linspace(.5, .95, 10))")
    parser.add_argument("--area-ranges", nargs="+", default=None, metavar="LABEL:LO:HI", type=_area_range,
                        help="area ranges, bounds inclusive (default: all:0:1e10 small:0:1024 medium:1024:9216 "
                             "large:9216:1e10); the summary looks up the labels all/small/medium/large")
    parser.add_argument("--keep-zero-id-quirk", type=int, choices=[0, 1], default=1,
                        help="1 (default) reproduces pycocotools never matching ground-truth id 0; 0 corrects it")
    _schedule_args(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the summary table")
    _run_args(parser)


def _schedule_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scheduler", choices=SCHEDULERS, default="threads", help="Dask scheduler for matching")
    parser.add_argument("--workers", type=int, default=None,
                        help="threads or processes of the local scheduler (default: one per core)")
    parser.add_argument("--address", default=None, help="tcp://HOST:PORT of a dask.distributed scheduler")


def _run_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no progress bars (they show only on a terminal)")
    parser.add_argument("--profile", action="store_true", help="print the time of each phase on stderr")


def _phases(args) -> Phases:
    return Phases(quiet=args.quiet)


def _profiled(args, phases: Phases, text: str) -> str:
    if args.profile:
        print(phases.report(), file=sys.stderr)
    return text


def _area_range(text: str) -> tuple:
    try:
        label, lo, hi = text.split(":")
        return label, float(lo), float(hi)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LABEL:LO:HI (e.g. small:0:1024), got {text!r}") from None


def _protocol(args) -> CocoProtocol:
    return CocoProtocol(
        iou_thresholds=tuple(args.iou_thresholds) if args.iou_thresholds else COCO_IOU_THRESHOLDS,
        area_ranges=tuple(args.area_ranges) if args.area_ranges else COCO_AREA_RANGES,
        max_dets=tuple(args.max_dets),
        use_cats=bool(args.use_cats),
        zero_id_quirk=bool(args.keep_zero_id_quirk),
    )


def _report(acc: Accumulation, as_json: bool, store=None) -> str:
    stats = summary_stats(acc)
    if not as_json:
        text = format_summary(acc)
        return text + (f"\nstore: {store}" if store else "")
    per_class = {
        str(row["category_id"]): {"ap": row["ap"], "ap50": row["ap50"], "ar": row["ar"]}
        for row in per_class_frame(acc).iter_rows(named=True)
    }
    payload = {"stats": stats, "stat_names": list(STAT_NAMES), "per_class": per_class}
    if store:
        payload["store"] = str(store)
    return json.dumps(payload)


def _cmd_coco(args) -> str:
    phases = _phases(args)
    acc = api.evaluate_coco(args.gt, args.dt, _protocol(args), store=args.store, n_shards=args.shards,
                            scheduler=args.scheduler, address=args.address, phases=phases, workers=args.workers)
    return _profiled(args, phases, _report(acc, args.json, args.store))


def _cmd_ingest(args) -> str:
    phases = _phases(args)
    with phases.phase("ingest", total=count_rows(args.dt), unit="detections") as advance:
        store = api.ingest_coco(args.gt, args.dt, args.store, n_shards=args.shards, run=args.run,
                                overwrite=args.overwrite, progress=advance, image_metadata=args.image_metadata)
    return _profiled(args, phases, f"store: {store.path} ({store.layout.n_shards} shards, runs: {', '.join(store.runs)})")


def _cmd_evaluate(args) -> str:
    phases = _phases(args)
    acc = api.evaluate_store(api.open(args.store), _protocol(args), run=args.run, scheduler=args.scheduler,
                             address=args.address, phases=phases, workers=args.workers)
    return _profiled(args, phases, _report(acc, args.json))


def _cmd_add_run(args) -> str:
    phases = _phases(args)
    with phases.phase("ingest", total=count_rows(args.dt), unit="detections") as advance:
        store = api.open(args.store).add_run(args.dt, args.run, overwrite=args.overwrite, progress=advance)
    return _profiled(args, phases, f"store: {store.path} (runs: {', '.join(store.runs)})")


def _cmd_compare(args) -> str:
    table = api.open(args.store).compare(args.runs, _protocol(args), scheduler=args.scheduler,
                                         address=args.address, workers=args.workers)
    if args.area_range:
        table = table.filter(table["area_range"] == args.area_range)
    return table.write_json() if args.json else _table(table)


def _cmd_plot(args) -> str:
    from evalengine import plots

    store = api.open(args.store)
    if args.kind in ("proposal-recall-iou", "ar-budget"):
        runs = args.runs or [api.DEFAULT_PROPOSAL_RUN]
        evaluations = {run: store.evaluate_proposals(run) for run in runs}
        if args.kind == "ar-budget":
            figure = plots.ar_by_budget({run: ev.average_recall() for run, ev in evaluations.items()})
        else:
            figure = plots.proposal_recall_iou({run: ev.recall_iou_curve() for run, ev in evaluations.items()},
                                               args.budget)
        figure.savefig(args.out, dpi=120)
        return f"figure written to {args.out}"
    protocol = _protocol(args)
    runs = args.runs or [api.DEFAULT_RUN]
    if args.kind == "pr":
        evaluation = store.evaluate(protocol, run=runs[0])
        names = dict(store.categories().select("category_id", "name").collect().iter_rows())
        figure = plots.pr_curves(evaluation.precision_recall(), names, args.categories, args.iou)
    elif args.kind == "recall-iou":
        figure = plots.recall_iou({run: store.evaluate(protocol, run=run).ap_table() for run in runs})
    elif args.kind == "ap-by-size":
        figure = plots.ap_by_size({run: store.evaluate(protocol, run=run).summary() for run in runs})
    else:
        if len(runs) < 2:
            raise EvalEngineError("plot compare needs two runs: --runs BASELINE OTHER")
        figure = plots.run_differences(store.compare(runs, protocol), runs[1])
    figure.savefig(args.out, dpi=120)
    return f"figure written to {args.out}"


def _cmd_report(args) -> str:
    store = api.open(args.store)
    acc = store.report(_protocol(args), run=args.run, where=args.where, category_ids=args.categories,
                       scheduler=args.scheduler, address=args.address, workers=args.workers)
    return _report(acc, args.json)


def _cmd_sql(args) -> str:
    if (args.query is None) == (args.file is None):
        raise EvalEngineError("give either a query or --file FILE.sql")
    text = args.query if args.query is not None else _read_text(args.file)
    frame = api.open(args.store).sql(text)
    if args.format == "parquet" and not args.out:
        raise EvalEngineError("--format parquet needs --out FILE")
    if args.out:
        {"csv": frame.write_csv, "json": frame.write_json, "parquet": frame.write_parquet,
         "table": lambda out: Path(out).write_text(_table(frame) + "\n")}[args.format](args.out)
        return f"{frame.height} rows written to {args.out}"
    if args.format == "csv":
        return frame.write_csv().rstrip("\n")
    if args.format == "json":
        return frame.write_json()
    return _table(frame)


def _proposal_table(payload: dict) -> str:
    import polars as pl

    columns = {"budget": payload["budgets"], "mean #proposals": payload["mean_proposals"], "AR": payload["ar"],
               **{f"recall@{t}": values for t, values in payload["recall"].items()}}
    ar_range = "AR: mean recall over IoU .50:.05:.95" if payload["protocol"] == "coco" else "AR over IoU [0.5, 1]"
    title = f"protocol {payload['protocol']} (matcher: {payload['matcher']}, aggregation: {payload['aggregation']}; {ar_range})"
    table = pl.DataFrame(columns).with_columns(pl.exclude("budget").cast(pl.Float64).round(4))
    text = title + "\n" + _table(table)
    if "oma" in payload:
        oma = pl.DataFrame({"budget": payload["budgets"], **{f"OMA@{t}": v for t, v in payload["oma"].items()}})
        text += "\n" + _table(oma.with_columns(pl.exclude("budget").cast(pl.Float64).round(4)))
    if "stats" in payload:
        text += "\n" + "\n".join(f"{name:<26} {value:.4f}" for name, value in zip(payload["stat_names"], payload["stats"]))
    return text


def _evaluate_proposals(store, args, phases: Phases) -> dict:
    budgets = tuple(args.budgets)
    schedule = dict(scheduler=args.scheduler, address=args.address, workers=args.workers)
    if args.protocol == "coco":
        protocol = CocoProtocol(use_cats=False, max_dets=budgets)
        with phases.phase("match", total=store.layout.n_shards, unit="shards") as advance:
            evaluation = store.evaluate(protocol, run=args.run, on_shard_done=advance, **schedule)
        return coco_report(evaluation.accumulate(), coco_mean_proposals(store, args.run, budgets), args.iou)
    protocol = ProposalProtocol(budgets=budgets, drop_crowd=not args.keep_crowd,
                                include_difficult=not args.exclude_difficult)
    with phases.phase("match", total=store.layout.n_shards, unit="shards") as advance:
        evaluation = store.evaluate_proposals(args.run, protocol, on_shard_done=advance, **schedule)
    matcher = "best" if args.protocol == "best-overlap" else "greedy"
    payload = evaluation.report(args.iou, matcher=matcher, aggregation=args.aggregation)
    if args.oma:
        with phases.phase("oma"):
            payload["oma"] = evaluation.oma_report(args.iou, lattice=args.lattice)
        payload["oma_lattice"] = args.lattice
    return payload


def _cmd_proposals(args) -> str:
    phases = _phases(args)
    order = ProposalOrder(args.ordering, args.seed, dedup=not args.no_dedup)
    if args.gt is None and args.proposals is None:  # re-evaluate a stored run (other budgets, protocol, …)
        if not args.store:
            raise EvalEngineError("proposals: give --gt and --proposals, or --store of an existing store")
        payload = _evaluate_proposals(api.open(args.store), args, phases)
    elif args.gt is None or args.proposals is None:
        raise EvalEngineError("proposals: --gt and --proposals go together")
    else:
        with tempfile.TemporaryDirectory(prefix="evalengine-") as tmp:
            target = args.store or Path(tmp) / "store"
            with phases.phase("ingest", unit="proposals") as advance:
                store = api.ingest_proposals(args.gt, args.proposals, target, run=args.run, order=order,
                                             box_convention=args.box_convention, n_shards=args.shards,
                                             overwrite=args.overwrite, progress=advance)
            payload = _evaluate_proposals(store, args, phases)
    if args.store:
        payload["store"] = str(args.store)
    return _profiled(args, phases, json.dumps(payload) if args.json else _proposal_table(payload))


def _perturbation(text: str) -> tuple:
    kind, _, level = text.partition(":")
    try:
        return kind, float(level) if level else None
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KIND[:LEVEL] (e.g. scale:1.1, rotate:5, flip), got {text!r}") from None


def _cmd_add_proposals(args) -> str:
    store = api.open(args.store)
    order = ProposalOrder(args.ordering, args.seed, dedup=not args.no_dedup)
    if args.perturbation or args.homographies:
        kind, level = args.perturbation or ("custom", None)
        store = store.add_perturbed_proposals(args.proposals, args.run, kind, level, homographies=args.homographies,
                                              reference=args.reference, order=order,
                                              box_convention=args.box_convention, overwrite=args.overwrite)
    else:
        store = store.add_proposals(args.proposals, args.run, order, args.box_convention, overwrite=args.overwrite)
    return f"store: {store.path} (proposal runs: {', '.join(sorted(store.layout.proposal_runs))})"


def _cmd_repeatability(args) -> str:
    table = api.open(args.store).repeatability(args.runs, reference=args.reference, top_n=args.top_n,
                                               method=args.method, empty_bins=args.empty_bins,
                                               touching_gt=args.touching_gt, scheduler=args.scheduler,
                                               address=args.address, workers=args.workers)
    return table.write_json() if args.json else _table(table)


def _cmd_baseline(args) -> str:
    import polars as pl

    from evalengine import baselines
    from evalengine.io.coco import read_coco_gt

    dataset = read_coco_gt(args.gt)
    params = None
    if args.params:
        params = json.loads(_read_text(args.params))
        params = params.get(f"{args.kind}_params", params)  # the toolbox's file holds both baselines
    elif args.kind != "sliding-window":
        fit = baselines.fit_uniform if args.kind == "uniform" else baselines.fit_gaussian
        params = fit(dataset.gt, dataset.images)
    if args.store:
        store = api.open(args.store).add_baseline(args.kind, args.per_image, run=args.run, params=params,
                                                  seed=args.seed, overwrite=args.overwrite)
        return f"store: {store.path} (proposal runs: {', '.join(sorted(store.layout.proposal_runs))})"
    if not args.out:
        raise EvalEngineError("baseline: give --out FILE.parquet or --store STORE")
    frames = baselines.generate(args.kind, dataset.images, args.per_image, params, args.seed)
    table = pl.concat(list(frames)).select("image_id", pl.col("x").alias("x1"), pl.col("y").alias("y1"),
                                           (pl.col("x") + pl.col("w")).alias("x2"), (pl.col("y") + pl.col("h")).alias("y2"))
    table.write_parquet(args.out)
    return f"{args.out}: {table.height} {args.kind} proposals for {dataset.images.height} images (continuous x1 y1 x2 y2)"


def _table(frame) -> str:
    import polars as pl

    with pl.Config(tbl_rows=100, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        return str(frame)


def _read_text(path) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise EvalEngineError(f"{path}: cannot read ({exc.strerror})") from exc


DEMO_QUERY = """\
WITH per_class AS (              -- AP@[.50:.95] per class and size bucket, from the `ap` view
    SELECT category_id, area_range, avg(ap) FILTER (WHERE ap > -1) AS ap
    FROM ap WHERE max_dets = 100 GROUP BY ALL
), worst AS (
    SELECT category_id FROM per_class WHERE area_range = 'all' AND ap IS NOT NULL ORDER BY ap, category_id LIMIT 5
)
PIVOT (SELECT c.name AS class, p.area_range, round(p.ap, 3) AS ap
       FROM per_class AS p JOIN worst USING (category_id) JOIN categories AS c USING (category_id))
ON area_range IN ('all', 'small', 'medium', 'large') USING first(ap)
ORDER BY "all", class"""


def _cmd_demo(args) -> str:
    data = resources.files("evalengine.data")
    target = location(args.store) if args.store else Path(tempfile.mkdtemp(prefix="evalengine-demo-")) / "store"
    started = time.perf_counter()
    with resources.as_file(data / "instances_val2014_100.json") as gt, \
            resources.as_file(data / "instances_val2014_fakebbox100_results.json") as dt:
        # re-running the demo replaces its own earlier store, never another folder
        store = api.ingest_coco(gt, dt, target, n_shards=4, overwrite=(target / "manifest.json").is_file())
    evaluation = store.evaluate()
    with resources.as_file(data / "instances_val2014_fakebbox100_results.json") as dt:
        store = store.add_proposals(dt, run="proposals")
    proposals = store.evaluate_proposals(protocol=ProposalProtocol(budgets=(1, 10, 100)))
    lines = [
        "evalengine demo: COCO val2014, first 100 images, with the official fake bbox results (cocoapi)",
        "",
        evaluation.format_summary(),
        "",
        "The same store in SQL: AP by size bucket of the five worst classes (null: no ground truth of that size)",
        "",
        DEMO_QUERY,
        "",
        _table(store.sql(DEMO_QUERY)),
        "",
        "The detections as class-agnostic proposals (Hosang et al.: greedy one-to-one matching per budget, crowd "
        "left out; AR = 2 * mean(max(IoU - 0.5, 0)))",
        "",
        _proposal_table(proposals.report(iou_thresholds=(0.5, 0.7, 0.9))),
        "",
        f"store written to {store.path}  ({time.perf_counter() - started:.1f} s)",
        f'try: evalengine sql {store.path} "SELECT * FROM coco_summary"',
        f'     evalengine sql {store.path} "SELECT * FROM proposal_recall"',
    ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalengine", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    coco = sub.add_parser("coco", help="evaluate COCO JSON files as pycocotools would (bbox)")
    coco.add_argument("--gt", required=True, help="COCO ground-truth JSON")
    coco.add_argument("--dt", required=True,
                      help="detections: COCO result JSON, JSON Lines or Parquet (image_id, category_id, score, "
                           "bbox or x, y, w, h)")
    coco.add_argument("--store", default=None, help=f"keep the store: {STORE_HELP} (default: a temporary folder)")
    coco.add_argument("--shards", type=int, default=None, help="image shards (default: ~100k detections each)")
    _protocol_args(coco)
    coco.set_defaults(func=_cmd_coco)

    ingest = sub.add_parser("ingest", help="build a store from input files")
    ingest_sub = ingest.add_subparsers(dest="format", required=True)
    ingest_coco = ingest_sub.add_parser("coco", help="COCO ground truth and results")
    ingest_coco.add_argument("--gt", required=True)
    ingest_coco.add_argument("--dt", required=True)
    ingest_coco.add_argument("--store", required=True, help=STORE_HELP)
    ingest_coco.add_argument("--shards", type=int, default=None)
    ingest_coco.add_argument("--run", default=api.DEFAULT_RUN, help="name of the detection run")
    ingest_coco.add_argument("--overwrite", action="store_true", help="replace an existing store")
    ingest_coco.add_argument("--image-metadata", default=None, metavar="FILE",
                             help="CSV or Parquet table keyed by image_id whose columns are added to the images")
    _run_args(ingest_coco)
    ingest_coco.set_defaults(func=_cmd_ingest)

    evaluate = sub.add_parser("evaluate", help="match a stored run and print its COCO summary")
    evaluate.add_argument("store", help=STORE_HELP)
    evaluate.add_argument("--protocol", choices=["coco"], default="coco", help="matching protocol")
    evaluate.add_argument("--run", default=api.DEFAULT_RUN)
    _protocol_args(evaluate)
    evaluate.set_defaults(func=_cmd_evaluate)

    add_run = sub.add_parser("add-run", help="add a detection run (a model or a perturbation) to a store")
    add_run.add_argument("store", help=STORE_HELP)
    add_run.add_argument("--run", required=True, help="name of the new run")
    add_run.add_argument("--dt", required=True, help="detections: COCO result JSON, JSON Lines or Parquet")
    add_run.add_argument("--overwrite", action="store_true", help="replace a run of that name")
    _run_args(add_run)
    add_run.set_defaults(func=_cmd_add_run)

    compare = sub.add_parser("compare", help="AP per class and size of two or more runs, with differences")
    compare.add_argument("store", help=STORE_HELP)
    compare.add_argument("runs", nargs="+", metavar="RUN", help="runs to compare; differences are to the first")
    compare.add_argument("--area-range", default=None, help="only this area range (e.g. all, small)")
    _protocol_args(compare)
    compare.set_defaults(func=_cmd_compare)

    plot = sub.add_parser("plot", help="figures: precision-recall, recall-IoU, AP by size, per-class run differences, "
                                       "proposal recall-IoU and AR-budget curves")
    plot.add_argument("store", help=STORE_HELP)
    plot.add_argument("kind", choices=["pr", "recall-iou", "ap-by-size", "compare", "proposal-recall-iou", "ar-budget"])
    plot.add_argument("--out", required=True, help="image file (.png, .pdf, .svg)")
    plot.add_argument("--runs", nargs="+", default=None, help="runs to draw (compare: baseline first)")
    plot.add_argument("--categories", type=int, nargs="+", default=None, help="pr: one curve per category id")
    plot.add_argument("--iou", type=float, default=0.5, help="pr with --categories: the IoU threshold")
    plot.add_argument("--budget", type=int, default=1000, help="proposal-recall-iou: proposals per image")
    _protocol_args(plot)
    plot.set_defaults(func=_cmd_plot)

    report = sub.add_parser("report", help="COCO summary of a slice of a store: images by metadata, categories")
    report.add_argument("store", help=STORE_HELP)
    report.add_argument("--run", default=api.DEFAULT_RUN)
    report.add_argument("--where", default=None, metavar="PREDICATE",
                        help="SQL predicate over the images table, e.g. \"width > 500 AND weather = 'rain'\"")
    report.add_argument("--categories", type=int, nargs="+", default=None, metavar="ID",
                        help="only these category ids (pycocotools params.catIds)")
    _protocol_args(report)
    report.set_defaults(func=_cmd_report)

    sql = sub.add_parser("sql", help="query a store with SQL (DuckDB views of the sql/ folder)")
    sql.add_argument("store", help=STORE_HELP)
    sql.add_argument("query", nargs="?", default=None, help='e.g. "SELECT * FROM coco_summary"')
    sql.add_argument("--file", default=None, help="read the query from a .sql file")
    sql.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table")
    sql.add_argument("--out", default=None, help="write the result to this file")
    sql.set_defaults(func=_cmd_sql)

    proposals = sub.add_parser("proposals", help="recall and average recall of object proposals (Hosang et al.)")
    proposals.add_argument("--gt", default=None, help="COCO ground-truth JSON")
    proposals.add_argument("--proposals", default=None,
                           help="COCO result JSON, JSON Lines, Parquet or CSV (image_id, x1, y1, x2, y2[, score]) "
                                "or a folder of per-image .npz files (boxes[, scores]); without --gt and "
                                "--proposals, --store names an existing store whose --run is evaluated again")
    proposals.add_argument("--protocol", choices=["hosang", "best-overlap", "coco"], default="hosang",
                           help="hosang: greedy one-to-one matching per budget; best-overlap: best IoU of each "
                                "ground truth (ABO); coco: pycocotools with useCats=0 and maxDets = the budgets")
    proposals.add_argument("--budgets", type=int, nargs="+", default=list(HOSANG_BUDGETS), metavar="N",
                           help="proposals per image (default: round(10^(0:0.5:4)))")
    proposals.add_argument("--iou", type=float, nargs="+", default=[0.5, 0.7], metavar="T",
                           help="IoU thresholds of the recall-vs-budget tables (default: 0.5 0.7)")
    proposals.add_argument("--aggregation", choices=["instances", "images"], default="instances",
                           help="pool all annotations (Hosang et al.) or average per-image recall (Wang et al.)")
    proposals.add_argument("--oma", action="store_true",
                           help="also Wang et al.'s OMA at each --iou (per-image, non-exclusive hits, HPRS removed)")
    proposals.add_argument("--lattice", choices=["edges", "wang"], default="edges",
                           help="HPRS box lattice: corners 0..W (edges, default) or 1..W as Wang et al. write it")
    proposals.add_argument("--ordering", choices=ORDERINGS, default="score-desc",
                           help="how each image's proposals are ranked before the top-N cut")
    proposals.add_argument("--seed", type=int, default=0, help="seed of --ordering random")
    proposals.add_argument("--no-dedup", action="store_true",
                           help="keep duplicate boxes (by default they are removed after ordering, as the toolbox)")
    proposals.add_argument("--box-convention", choices=BOX_CONVENTIONS, default="continuous",
                           help="pixel-inclusive: x1 y1 x2 y2 are 1-based inclusive pixels (VOC, the toolbox)")
    proposals.add_argument("--keep-crowd", action="store_true", help="count crowd annotations (dropped by default)")
    proposals.add_argument("--exclude-difficult", action="store_true",
                           help="drop ground truth marked difficult (included by default, as Hosang et al.)")
    proposals.add_argument("--store", default=None, help=f"keep the store: {STORE_HELP} (default: a temporary folder)")
    proposals.add_argument("--run", default=api.DEFAULT_PROPOSAL_RUN, help="name of the proposal run")
    proposals.add_argument("--overwrite", action="store_true", help="replace an existing store")
    proposals.add_argument("--shards", type=int, default=None)
    _schedule_args(proposals)
    proposals.add_argument("--json", action="store_true", help="print one JSON object")
    _run_args(proposals)
    proposals.set_defaults(func=_cmd_proposals)

    add_proposals = sub.add_parser("add-proposals", help="add a proposal run (or a perturbed one) to a store")
    add_proposals.add_argument("store", help=STORE_HELP)
    add_proposals.add_argument("--run", required=True, help="name of the new proposal run")
    add_proposals.add_argument("--proposals", required=True, help="proposal file or .npz folder (see proposals)")
    add_proposals.add_argument("--perturbation", type=_perturbation, default=None, metavar="KIND[:LEVEL]",
                               help="proposals of perturbed images: scale:F, rotate:DEG (common crop of ±20°), flip, "
                                    "light, jpeg, blur, saltnpepper (identity homographies)")
    add_proposals.add_argument("--homographies", default=None,
                               help="Parquet/JSON of image_id, homography (9 numbers, reference → perturbed, 1-based "
                                    "pixels), width, height[, ref_width, ref_height] instead of --perturbation")
    add_proposals.add_argument("--reference", default=api.DEFAULT_PROPOSAL_RUN,
                               help="the proposal run of the unperturbed images")
    add_proposals.add_argument("--ordering", choices=ORDERINGS, default="score-desc")
    add_proposals.add_argument("--seed", type=int, default=0)
    add_proposals.add_argument("--no-dedup", action="store_true")
    add_proposals.add_argument("--box-convention", choices=BOX_CONVENTIONS, default="continuous")
    add_proposals.add_argument("--overwrite", action="store_true")
    add_proposals.set_defaults(func=_cmd_add_proposals)

    repeat = sub.add_parser("repeatability", help="repeatability of proposals under image perturbations (Hosang §3)")
    repeat.add_argument("store", help=STORE_HELP)
    repeat.add_argument("--runs", nargs="+", required=True, help="perturbed proposal runs")
    repeat.add_argument("--reference", default=api.DEFAULT_PROPOSAL_RUN)
    repeat.add_argument("--top-n", type=int, default=1000, help="proposals per image on each side (default 1000)")
    repeat.add_argument("--method", choices=["exact", "trapezoid"], default="exact",
                        help="area under recall-vs-IoU per size bin: exact (mean IoU) or the toolbox's trapezoid")
    repeat.add_argument("--empty-bins", choices=["skip", "zero"], default="skip",
                        help="size bins without proposals: left out (default) or averaged as 0 (the toolbox)")
    repeat.add_argument("--touching-gt", action="store_true",
                        help="only reference proposals with IoU >= 0.5 to some ground truth")
    _schedule_args(repeat)
    repeat.add_argument("--json", action="store_true")
    repeat.set_defaults(func=_cmd_repeatability)

    baseline = sub.add_parser("baseline", help="generate Uniform, Gaussian or SlidingWindow proposals (Hosang et al.)")
    baseline.add_argument("--gt", required=True, help="COCO ground truth: the images to cover and the boxes to fit")
    baseline.add_argument("--kind", choices=["uniform", "gaussian", "sliding-window"], required=True)
    baseline.add_argument("--per-image", type=int, default=1000, help="proposals per image (default 1000)")
    baseline.add_argument("--params", default=None,
                          help="JSON of fitted parameters (ours or the toolbox's uniform_params/gaussian_params); "
                               "default: fitted on --gt")
    baseline.add_argument("--seed", type=int, default=0)
    baseline.add_argument("--out", default=None, help="Parquet file of proposals (image_id, x1, y1, x2, y2)")
    baseline.add_argument("--store", default=None, help="or add the baseline as a proposal run of this store")
    baseline.add_argument("--run", default=None, help="name of that run (default: the kind)")
    baseline.add_argument("--overwrite", action="store_true")
    baseline.set_defaults(func=_cmd_baseline)

    demo = sub.add_parser("demo", help="run the whole pipeline on the bundled COCO sample")
    demo.add_argument("--store", default=None, help="where to write the demo store (default: a new temporary folder)")
    demo.set_defaults(func=_cmd_demo)
    return parser


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"evalengine: warning: {message}", file=sys.stderr)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    warnings.showwarning = _one_line_warning
    try:
        print(args.func(args))
    except EvalEngineError as exc:
        print(f"evalengine: error: {exc}", file=sys.stderr)
        return 2
    return 0


def run() -> None:
    """The ``evalengine`` command: :func:`main`, then :func:`end_process`."""
    end_process(main())


def end_process(code: int) -> None:
    """End the process without tearing the interpreter down module by module (numba's and Polars' teardown took
    ~0.6 s of every command); exit handlers run and output is flushed first, every file is already closed."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
