"""The proposal commands (Hosang et al.): ``proposals`` (recall, AR, OMA), ``add-proposals``, ``repeatability``,
``baseline``."""

import argparse
import json
import tempfile
from pathlib import Path

from evalengine import api
from evalengine.cli import options
from evalengine.cli.options import STORE_HELP
from evalengine.errors import EvalEngineError


def _evaluate_proposals(store, args, timed) -> dict:
    default = api.PONT_TUSET_BUDGETS if args.iou_type == "segm" else api.HOSANG_BUDGETS
    budgets = tuple(args.budgets or default)
    schedule = options.schedule(args)
    if args.protocol == "coco":
        protocol = api.CocoProtocol(use_cats=False, max_dets=budgets)
        with timed.phase("match", total=store.layout.n_shards, unit="shards") as advance:
            evaluation = store.evaluate(protocol, run=args.run, on_shard_done=advance, **schedule)
        return api.report.coco_proposal_payload(evaluation, store.mean_proposals(args.run, budgets), args.iou)
    boundary_f = "boundary_f" in args.quality_measure
    if boundary_f and args.iou_type != "segm":
        raise EvalEngineError("--quality-measure boundary_f: F̃b compares mask boundaries; give --iou-type segm")
    protocol = api.ProposalProtocol(budgets=budgets, drop_crowd=not args.keep_crowd,
                                    include_difficult=not args.exclude_difficult, iou_type=args.iou_type,
                                    boundary_f=boundary_f, fb_tolerance=args.fb_tolerance)
    with timed.phase("match", total=store.layout.n_shards, unit="shards") as advance:
        evaluation = store.evaluate_proposals(args.run, protocol, on_shard_done=advance, **schedule)
    matcher = "best" if args.protocol == "best-overlap" else "greedy"
    payload = api.report.proposal_payload(evaluation, args.iou, matcher=matcher, aggregation=args.aggregation)
    if args.iou_type == "segm":
        payload["iou_type"] = "segm"
    if args.iou_type == "segm" or args.quality:
        payload["achievable"] = api.report.achievable_payload(evaluation, args.quality_at)
    if boundary_f:
        payload["achievable_boundary_f"] = api.report.achievable_payload(evaluation, args.quality_at, "boundary_f")
    if args.oma:
        with timed.phase("oma"):
            payload["oma"] = api.report.oma_payload(evaluation, args.iou, lattice=args.lattice)
        payload["oma_lattice"] = args.lattice
    return payload


def _cmd_proposals(args) -> str:
    timed = options.phases(args)
    order = api.ProposalOrder(args.ordering, args.seed, dedup=not args.no_dedup)
    if args.gt is None and args.proposals is None:  # re-evaluate a stored run (other budgets, protocol, …)
        if not args.store:
            raise EvalEngineError("proposals: give --gt and --proposals, or --store of an existing store")
        payload = _evaluate_proposals(api.open(args.store), args, timed)
    elif args.gt is None or args.proposals is None:
        raise EvalEngineError("proposals: --gt and --proposals go together")
    else:
        with tempfile.TemporaryDirectory(prefix="evalengine-") as tmp:
            target = args.store or Path(tmp) / "store"
            with timed.phase("ingest", unit="proposals") as advance:
                store = api.ingest_proposals(args.gt, args.proposals, target, run=args.run, order=order,
                                             box_convention=args.box_convention, n_shards=args.shards,
                                             overwrite=args.overwrite, progress=advance)
            payload = _evaluate_proposals(store, args, timed)
    if args.store:
        payload["store"] = str(args.store)
    return options.profiled(args, timed, json.dumps(payload) if args.json else api.report.proposal_table(payload))


def _perturbation(text: str) -> tuple:
    kind, _, level = text.partition(":")
    try:
        return kind, options.number(level) if level else None
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected KIND[:LEVEL] (e.g. scale:1.1, rotate:5, flip), got {text!r}") from None


def _cmd_add_proposals(args) -> str:
    tags = api.parse_tags(args.tag)
    store = api.open(args.store)
    order = api.ProposalOrder(args.ordering, args.seed, dedup=not args.no_dedup)
    if args.perturbation or args.homographies:
        kind, level = args.perturbation or ("custom", None)
        store = store.add_perturbed_proposals(args.proposals, args.run, kind, level, homographies=args.homographies,
                                              reference=args.reference, order=order,
                                              box_convention=args.box_convention, overwrite=args.overwrite, tags=tags)
    else:
        store = store.add_proposals(args.proposals, args.run, order, args.box_convention, overwrite=args.overwrite,
                                    tags=tags)
    return f"store: {store.path} (proposal runs: {', '.join(sorted(store.layout.proposal_runs))})"


def _cmd_repeatability(args) -> str:
    table = api.open(args.store).repeatability(args.runs, reference=args.reference, top_n=args.top_n,
                                               method=args.method, empty_bins=args.empty_bins,
                                               touching_gt=args.touching_gt, **options.schedule(args))
    return table.write_json() if args.json else api.report.table(table)


def _cmd_baseline(args) -> str:
    params = None
    if args.params:
        params = options.read_json_object(args.params)
        params = params.get(f"{args.kind}_params", params)  # the toolbox's file holds both baselines
    if args.store or not args.out:  # the ground truth is read (and a bad one reported) before anything else
        params = api.baseline_params(args.gt, args.kind, params)
    if args.store:
        store = api.open(args.store).add_baseline(args.kind, args.per_image, run=args.run, params=params,
                                                  seed=args.seed, overwrite=args.overwrite)
        return f"store: {store.path} (proposal runs: {', '.join(sorted(store.layout.proposal_runs))})"
    if not args.out:
        raise EvalEngineError("baseline: give --out FILE.parquet or --store STORE")
    if Path(args.out).suffix and Path(args.out).suffix.lower() != ".parquet":
        raise EvalEngineError(f"{args.out}: baseline writes Parquet; name the file .parquet")
    table, n_images = api.generate_baseline(args.gt, args.kind, args.per_image, params, args.seed)
    table.write_parquet(args.out)
    return (f"{args.out}: {table.height} {args.kind} proposals for {n_images} images (continuous x1 y1 x2 y2, no "
            "scores: evaluate them with --ordering given)")


def add_proposals(sub) -> None:
    proposals = sub.add_parser("proposals", help="recall and average recall of object proposals (Hosang et al.)")
    proposals.add_argument("--gt", default=None, help="COCO ground-truth JSON")
    proposals.add_argument("--proposals", default=None,
                           help="COCO result JSON, JSON Lines, Parquet or CSV (image_id, x1, y1, x2, y2[, score]) "
                                "or a folder of per-image .npz files (boxes[, scores]); segmented proposals: JSON, "
                                "JSON Lines or Parquet with a COCO segmentation, or a folder of PNG masks; without "
                                "--gt and "
                                "--proposals, --store names an existing store whose --run is evaluated again")
    proposals.add_argument("--protocol", choices=["hosang", "best-overlap", "coco"], default="hosang",
                           help="hosang: greedy one-to-one matching per budget; best-overlap: best IoU of each "
                                "ground truth (ABO); coco: pycocotools with useCats=0 and maxDets = the budgets")
    proposals.add_argument("--budgets", type=options.positive_int, nargs="+", default=None, metavar="N",
                           help="proposals per image (default: round(10^(0:0.5:4)); with --iou-type segm MCG's "
                                "10:5:100, 125:25:1000, 1500:500:6000, 100000)")
    proposals.add_argument("--iou-type", choices=api.PROPOSAL_IOU_TYPES, default="bbox",
                           help="segm: segmented proposals (masks) against the ground truth's masks, with Pont-Tuset "
                                "& Marques' achievable quality")
    proposals.add_argument("--quality", action="store_true",
                           help="also the achievable quality for boxes (always given with --iou-type segm)")
    proposals.add_argument("--quality-at", type=options.iou, nargs="+", default=[0.5, 0.7, 0.85], metavar="T",
                           help="Jaccard thresholds of the achievable quality's recall, strict > (default 0.5 0.7 0.85)")
    proposals.add_argument("--quality-measure", choices=["jaccard", "boundary_f"], nargs="+", default=["jaccard"],
                           help="boundary_f (with --iou-type segm): the achievable quality of F̃b too (Pont-Tuset & "
                                "Marques' morphological boundary F, DAVIS's dilation), at the --quality-at thresholds")
    proposals.add_argument("--fb-tolerance", type=options.number, default=api.ProposalProtocol.fb_tolerance,
                           metavar="TAU",
                           help="F̃b's dilation radius: a fraction of the image diagonal below 1, pixels from 1 "
                                "(default 0.008, DAVIS's; the paper's text says 8 %%)")
    proposals.add_argument("--iou", type=options.iou, nargs="+", default=[0.5, 0.7], metavar="T",
                           help="IoU thresholds of the recall-vs-budget tables (default: 0.5 0.7)")
    proposals.add_argument("--aggregation", choices=["instances", "images"], default="instances",
                           help="pool all annotations (Hosang et al.) or average per-image recall (Wang et al.)")
    proposals.add_argument("--oma", action="store_true",
                           help="also Wang et al.'s OMA at each --iou (per-image, non-exclusive hits, HPRS removed)")
    proposals.add_argument("--lattice", choices=["edges", "wang"], default="edges",
                           help="HPRS box lattice: corners 0..W (edges, default) or 1..W as Wang et al. write it")
    proposals.add_argument("--ordering", choices=api.ORDERINGS, default="score-desc",
                           help="how each image's proposals are ranked before the top-N cut")
    proposals.add_argument("--seed", type=int, default=0, help="seed of --ordering random")
    proposals.add_argument("--no-dedup", action="store_true",
                           help="keep duplicate boxes (by default they are removed after ordering, as the toolbox)")
    proposals.add_argument("--box-convention", choices=api.BOX_CONVENTIONS, default="continuous",
                           help="pixel-inclusive: x1 y1 x2 y2 are 1-based inclusive pixels (VOC, the toolbox)")
    proposals.add_argument("--keep-crowd", action="store_true", help="count crowd annotations (dropped by default)")
    proposals.add_argument("--exclude-difficult", action="store_true",
                           help="drop ground truth marked difficult (included by default, as Hosang et al.)")
    proposals.add_argument("--store", default=None, help=f"keep the store: {STORE_HELP} (default: a temporary folder)")
    proposals.add_argument("--run", default=api.DEFAULT_PROPOSAL_RUN, help="name of the proposal run")
    proposals.add_argument("--overwrite", action="store_true", help="replace an existing store")
    proposals.add_argument("--shards", type=options.positive_int, default=None)
    options.schedule_args(proposals)
    proposals.add_argument("--json", action="store_true", help="print one JSON object")
    options.run_args(proposals)
    proposals.set_defaults(func=_cmd_proposals)


def add_add_proposals(sub) -> None:
    add_proposals = options.store_command(
        sub, "add-proposals", "add a proposal run (or a perturbed one) to a store", _cmd_add_proposals)
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
    add_proposals.add_argument("--ordering", choices=api.ORDERINGS, default="score-desc")
    add_proposals.add_argument("--seed", type=int, default=0)
    add_proposals.add_argument("--no-dedup", action="store_true")
    add_proposals.add_argument("--box-convention", choices=api.BOX_CONVENTIONS, default="continuous")
    add_proposals.add_argument("--overwrite", action="store_true")
    options.tag_args(add_proposals)


def add_repeatability(sub) -> None:
    repeat = options.store_command(
        sub, "repeatability", "repeatability of proposals under image perturbations (Hosang §3)", _cmd_repeatability)
    repeat.add_argument("--runs", nargs="+", required=True, help="perturbed proposal runs")
    repeat.add_argument("--reference", default=None,
                        help="the unperturbed proposal run (default: the one each run was added with; another one "
                             "wins, with a warning)")
    repeat.add_argument("--top-n", type=options.positive_int, default=1000,
                        help="proposals per image on each side (default 1000)")
    repeat.add_argument("--method", choices=["exact", "trapezoid"], default="exact",
                        help="area under recall-vs-IoU per size bin: exact (mean IoU) or the toolbox's trapezoid")
    repeat.add_argument("--empty-bins", choices=["skip", "zero"], default="skip",
                        help="size bins without proposals: left out (default) or averaged as 0 (the toolbox)")
    repeat.add_argument("--touching-gt", action="store_true",
                        help="only reference proposals with IoU >= 0.5 to some ground truth")
    options.schedule_args(repeat)
    repeat.add_argument("--json", action="store_true")


def add_baseline(sub) -> None:
    baseline = sub.add_parser("baseline", help="generate Uniform, Gaussian or SlidingWindow proposals (Hosang et al.)")
    baseline.add_argument("--gt", required=True, help="COCO ground truth: the images to cover and the boxes to fit")
    baseline.add_argument("--kind", choices=["uniform", "gaussian", "sliding-window"], required=True)
    baseline.add_argument("--per-image", type=options.positive_int, default=1000,
                          help="proposals per image (default 1000)")
    baseline.add_argument("--params", default=None,
                          help="JSON of fitted parameters (ours or the toolbox's uniform_params/gaussian_params); "
                               "default: fitted on --gt")
    baseline.add_argument("--seed", type=options.non_negative_int, default=0)
    baseline.add_argument("--out", type=options.output_file, default=None,
                          help="Parquet file of proposals (image_id, x1, y1, x2, y2)")
    baseline.add_argument("--store", default=None, help="or add the baseline as a proposal run of this store")
    baseline.add_argument("--run", default=None, help="name of that run (default: the kind)")
    baseline.add_argument("--overwrite", action="store_true")
    baseline.set_defaults(func=_cmd_baseline)
