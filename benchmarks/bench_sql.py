"""The SQL views against the Python metrics they equal, on one matched COCO-shaped store: each query in its own process.

For every case, the view's query and the Python metric giving the same numbers each run in a child process
(bench_coco's :func:`run_child`: wall and CPU time of the whole process, peak RSS); the child also reports the
in-process wall and CPU time of the call alone (for SQL also the CPU time of the query alone, the connection and
DuckDB's import excluded), the CPU time of the same call made again in that process ("warm": both sides with their
libraries imported, numba's kernels loaded, the connection open — a notebook's second query; the fair comparison for
the views whose Python side reads a small stored table, where a cold SQL call is mostly DuckDB's import) and its
numbers, and the table says whether SQL and Python agree to 1e-12. Like with like, three ways: the cold call (SQL:
``store.duckdb()`` and the query, DuckDB's import included; Python: the metric's call, the modules it imports
included, after ``evalengine.open``), the whole process of one call (interpreter start, imports, the call: the
process's CPU time less the warm call's, as a command-line user pays it) and the warm call. Cases are grouped by
family (coco, lrp, tide, confusion, voc, analyze, borji, proposals, repeatability, invariance, openimages, partitions,
lvis); those needing tables a matched COCO store lacks (``OPT_IN``: a second run, proposal runs, tagged runs, or
another kind of store) are run only when named. Before the timed runs, each
case's Python side runs once, untimed, so that the store holds every table the view reads (the match tables, and the
run's AP table that `evalengine evaluate` keeps for `ap` and `coco_summary`).

The SQL child queries through ``store.duckdb(allow_external=True)`` so that ``--memory-limit`` and ``--threads`` can
be set (DuckDB's ``SET memory_limit`` / ``SET threads``; the locked door refuses SET; its defaults are 80 % of the
RAM and one thread per core); it spills to the connection's temporary folder beyond the limit. The view catalog is
made once before the timed runs (a first connection), as it is after a user's first query.

    python benchmarks/bench_sql.py STORE                                   # every case of a COCO store
    python benchmarks/bench_sql.py STORE --cases coco_summary slice --repeat 3 --memory-limit 2GB --threads 2
    python benchmarks/bench_sql.py STORE --cases proposal_recall repeatability invariance_metrics run_comparison
    python benchmarks/bench_sql.py LVIS_STORE --cases lvis_results      # an LVIS store (bench_lvis.py writes one)
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_coco import run_child  # noqa: E402

SLICE = "width >= 600"
# an ad-hoc image slice through SQL: the accumulation macros over the filtered match tables (sql/09_*.sql)
SLICE_SQL = f"""
WITH kept AS (SELECT image_id FROM images WHERE {SLICE}),
sliced_params AS (SELECT * FROM coco_accumulation_protocols WHERE protocol = 'coco' AND run = 'default'),
sliced_dt AS (SELECT * FROM coco_accumulation_matches WHERE protocol = 'coco' AND run = 'default'
              AND image_id IN (SELECT image_id FROM kept)),
sliced_gt AS (SELECT * FROM coco_accumulation_gt_matches WHERE protocol = 'coco' AND run = 'default'
              AND image_id IN (SELECT image_id FROM kept)),
sliced_ap AS (SELECT * FROM coco_ap(sliced_dt, sliced_gt, sliced_params))
SELECT value FROM coco_summary_of(sliced_ap, sliced_params)"""
DEFAULT = "protocol = 'coco' AND run = 'default'"
# run_comparison: the store's default run and a second one (e.g. `evalengine add-run STORE --run shifted --dt …`)
COMPARED = ("default", "shifted")
# proposal_recall and repeatability: a proposal run and a perturbed one added with it as reference
PROPOSALS = ("proposals", "flipped")
# the cases run by default on a COCO store (the others need tables it lacks unless added: see CASES)
OTHER_STORES = ("lvis_results", "openimages_map", "partition_measures")
OPT_IN = ("run_comparison", "proposal_recall", "repeatability", "invariance_metrics", *OTHER_STORES)


def _ap_small(store) -> list:
    import polars as pl

    table = store.evaluate().ap_table().filter((pl.col("area_range") == "small") & (pl.col("max_dets") == 100))
    return (table.group_by("category_id").agg(pl.col("ap").filter(pl.col("ap") > -1).mean()).sort("category_id")
            .get_column("ap").to_list())


def _outcomes(store) -> list:
    """Detections per IoU threshold and outcome (fp, ignored, tp), area 'all', every evaluated detection."""
    evaluation = store.evaluate()
    numbers = []
    for t in evaluation.protocol.iou_thresholds:
        counts = evaluation.per_image_counts(iou_threshold=t, area_range="all").select("fp", "ignored_dt", "tp").sum()
        numbers += [t, *counts.row(0)]
    return numbers


def _final_recall(store) -> list:
    import polars as pl

    table = store.evaluate().ap_table().filter(pl.col("recall") > -1)
    return table.sort("category_id", "iou_threshold", "area_range", "max_dets").get_column("recall").to_list()


def _operating_points(store) -> list:
    from evalengine import api

    points = api.evaluate_thresholds(api.lrp_protocol(), store.path).operating_points()
    return [v for row in points.sort("category_id", "threshold", descending=[False, True])
            .select("n_tp", "n_fp", "lrp").rows() for v in row]


def _tide(store) -> list:
    from evalengine import api

    counts = api.tide(store).result.counts  # the view has a row per error that occurs, and Miss
    return [counts[name] for name in sorted(counts) if counts[name] or name == "Miss"]


def _confusion(store) -> list:
    import polars as pl

    from evalengine import api

    matrix = api.confusion(store).matrix().filter(pl.col("count") > 0)
    return [v for row in matrix.sort("gt_category_id", "dt_category_id", nulls_last=True)
            .select("count", "fraction").rows() for v in row]


def _voc(store) -> list:
    from evalengine import api

    table = api.evaluate_store_voc(store).per_class("voc12")
    return table.sort("category_id", "iou_threshold").get_column("ap").to_list()


def _analyze(store) -> list:
    """Each curve's overall AP per area range, in (area range, curve) name order."""
    from evalengine import api
    from evalengine.match.analyze import CURVES

    frame = api.analyze(store).result.ap_frame("overall")
    return [v for _, _, v in sorted((row["area_range"], curve, row[curve]) for row in frame.iter_rows(named=True)
                                    for curve in CURVES)]


def _borji_summary(store) -> list:
    from evalengine import api

    return api.borji(store).summary().sort("stage", "metric").get_column("value").to_list()


def _borji_errors(store) -> list:
    from evalengine import api

    return api.borji(store).error_counts().sort("area_range", "error").get_column("count").to_list()


def _run_comparison(store) -> list:
    import polars as pl

    table = store.compare(list(COMPARED)).sort("category_id", "area_range")
    both = pl.all_horizontal(pl.col(f"ap_{run}").is_not_null() for run in COMPARED)
    return table.filter(both).get_column(f"diff_{COMPARED[1]}").to_list()


def _proposal_recall(store) -> list:
    return store.evaluate_proposals(PROPOSALS[0]).average_recall().sort("budget").get_column("ar").to_list()


def _repeatability(store) -> list:
    return store.repeatability([PROPOSALS[1]]).get_column("repeatability").to_list()


def _invariance(store) -> list:
    import polars as pl

    from evalengine import api

    metrics = api.invariance(store, scheduler="sync").metrics().filter(  # the detection runs (the view's)
        pl.col("category_id").is_null() & pl.col("run").is_in(store.runs))
    return metrics.sort("run", "metric").get_column("value").to_list()


def _openimages(store) -> list:
    from evalengine import api

    return [api.evaluate_store_openimages(store).mean_ap()]


def _partitions(store) -> list:
    from evalengine.api.segmentation import evaluate_partitions

    dataset = evaluate_partitions(store).dataset  # a store of one machine run
    return [v for row in dataset.sort("parameter").select("sc", "pri", "voi").rows() for v in row]


def _lvis(store) -> list:
    from evalengine import api

    return list(api.evaluate_store_lvis(store).results().values())


CASES = {  # name: (family, SQL, Python: a function of the store returning the numbers in the SQL's row order)
    "coco_summary": ("coco", f"SELECT value FROM coco_summary WHERE {DEFAULT}", lambda store: list(store.evaluate().stats())),
    "ap_small": ("coco", "SELECT avg(ap) FILTER (WHERE ap > -1) AS ap FROM ap WHERE protocol = 'coco' AND "
                 "run = 'default' AND area_range = 'small' AND max_dets = 100 GROUP BY category_id ORDER BY category_id",
                 _ap_small),
    "image_counts": ("coco", f"SELECT sum(tp)::BIGINT, sum(fp)::BIGINT, sum(fn)::BIGINT FROM image_counts WHERE {DEFAULT} "
                     "AND iou_threshold = 0.5",
                     lambda store: store.evaluate().per_image_counts(iou_threshold=0.5, area_range="all")
                     .select("tp", "fp", "fn").sum().row(0)),
    "detection_outcomes": ("coco", f"SELECT iou_threshold, count(*) FILTER (WHERE outcome = 'fp'), "
                           "count(*) FILTER (WHERE outcome = 'ignored'), count(*) FILTER (WHERE outcome = 'tp') "
                           f"FROM detection_outcomes WHERE {DEFAULT} GROUP BY ALL ORDER BY iou_threshold", _outcomes),
    "pr_curve": ("coco", "SELECT max(recall) FROM pr_curve WHERE protocol = 'coco' AND run = 'default' GROUP BY "
                 "category_id, iou_threshold, area_range, max_dets ORDER BY category_id, iou_threshold, area_range, "
                 "max_dets", _final_recall),
    "slice": ("coco", SLICE_SQL, lambda store: list(store.report(where=SLICE).stats())),
    "operating_points": ("lrp", f"SELECT n_tp, n_fp, lrp FROM operating_points WHERE {DEFAULT} AND iou_threshold = 0.5 "
                         "ORDER BY category_id, threshold DESC", _operating_points),
    "tide_error_counts": ("tide", "SELECT count FROM tide_error_counts WHERE protocol = 'tide' ORDER BY error", _tide),
    "confusion_matrix": ("confusion", "SELECT count, fraction FROM confusion_matrix WHERE protocol = 'confusion' "
                         "ORDER BY gt_category_id NULLS LAST, dt_category_id NULLS LAST", _confusion),
    "voc_ap": ("voc", "SELECT ap_voc12 FROM voc_ap WHERE protocol = 'voc' AND run = 'default' "
               "ORDER BY category_id, iou_threshold", _voc),
    "analyze_summary": ("analyze", "SELECT ap FROM analyze_summary WHERE protocol = 'analyze' AND run = 'default' "
                        "AND scope = 'overall' ORDER BY area_range, curve", _analyze),
    "borji_stage_summary": ("borji", "SELECT value FROM borji_stage_summary WHERE protocol = 'borji' AND run = 'default' "
                            "ORDER BY stage, metric", _borji_summary),
    "borji_error_counts": ("borji", "SELECT count FROM borji_error_counts WHERE protocol = 'borji' AND run = 'default' "
                           "ORDER BY area_range, error", _borji_errors),
    "run_comparison": ("coco", f"SELECT ap_difference FROM run_comparison WHERE run_a = '{COMPARED[0]}' AND "
                       f"run_b = '{COMPARED[1]}' AND ap_a IS NOT NULL AND ap_b IS NOT NULL "
                       "ORDER BY category_id, area_range", _run_comparison),
    # proposals and repeatability: proposal runs of the store (PROPOSALS: `evalengine add-proposals STORE --run
    # proposals --proposals …`, and a perturbed run `--run flipped --perturbation flip --reference proposals`)
    "proposal_recall": ("proposals", f"SELECT ar FROM proposal_recall WHERE run = '{PROPOSALS[0]}' ORDER BY budget",
                        _proposal_recall),
    "repeatability": ("repeatability", f"SELECT repeatability FROM repeatability WHERE run = '{PROPOSALS[1]}'",
                      _repeatability),
    # invariance: runs tagged with a model and a perturbation (`evalengine add-run STORE --tag model=… --tag
    # perturbation=…`), each matched (the Python side matches them)
    "invariance_metrics": ("invariance", "SELECT value FROM invariance_metrics WHERE category_id IS NULL "
                           "ORDER BY run, metric", _invariance),
    # on an OpenImages store (benchmarks/bench_openimages.py writes one): --cases openimages_map
    "openimages_map": ("openimages", "SELECT map FROM openimages_map WHERE protocol = 'openimages'", _openimages),
    # on a partition store (`evalengine ingest partitions`): --cases partition_measures
    "partition_measures": ("partitions", "SELECT sc, pri, voi FROM dataset_measures ORDER BY parameter",
                           _partitions),
    # on an LVIS store (benchmarks/bench_lvis.py writes one): --cases lvis_results
    "lvis_results": ("lvis", "SELECT value FROM lvis_results WHERE protocol = 'lvis' AND run = 'default'", _lvis),
}


def child(store_path: str, case: str, side: str, settings: list) -> None:
    """In the child: open the store (imports and start-up are part of the process's time, not of the call's), run
    one side of one case, print ``{"seconds", "cpu", "numbers"}``."""
    import evalengine

    def cpu_seconds():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    store = evalengine.open(store_path)
    started, cpu = time.perf_counter(), cpu_seconds()
    if side == "sql":
        con = store.duckdb(allow_external=True)
        for setting in settings:
            con.execute(f"SET {setting}")
        query_started, query_cpu = time.perf_counter(), cpu_seconds()  # the connection (DuckDB's import) excluded

        def call():
            return [v for row in con.sql(CASES[case][1]).fetchall() for v in row]
    else:
        query_started, query_cpu = started, cpu

        def call():
            return list(CASES[case][2](store))
    numbers = call()
    end, end_cpu = time.perf_counter(), cpu_seconds()
    call()  # warm: the same call again in this process (libraries loaded, kernels compiled, connection open)
    warm_cpu = cpu_seconds() - end_cpu
    print(json.dumps({"seconds": end - started, "numbers": numbers, "cpu": end_cpu - cpu,
                      "query_cpu": end_cpu - query_cpu, "query_seconds": end - query_started, "warm_cpu": warm_cpu}))


def _agree(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        (x is None and y is None) or (x is not None and y is not None and abs(x - y) <= 1e-12) for x, y in zip(a, b))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", nargs="?")
    parser.add_argument("--cases", nargs="+", choices=list(CASES),
                        default=[case for case in CASES if case not in OPT_IN])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--max-rss-gib", type=float, default=12.0)
    parser.add_argument("--memory-limit", default=None, help="DuckDB's memory_limit for the SQL side, e.g. 2GB")
    parser.add_argument("--threads", type=int, default=None, help="DuckDB's threads for the SQL side")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "SIDE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    settings = [*([f"memory_limit = '{args.memory_limit}'"] if args.memory_limit else []),
                *([f"threads = {args.threads}"] if args.threads else [])]
    if args.child:
        child(args.store, *args.child, settings)
        return 0
    limit = args.max_rss_gib * 2**30

    def run(case, side):
        extra = [*(["--memory-limit", args.memory_limit] if args.memory_limit else []),
                 *(["--threads", str(args.threads)] if args.threads else [])]
        return run_child([sys.executable, __file__, args.store, "--child", case, side, *extra], limit)

    for case in args.cases:  # the store as its Python metrics leave it, and the view catalog made
        prepared = run(case, "python")
        if "error" in prepared:
            print(f"{case}: Python side failed: {prepared['error']}", file=sys.stderr)
    run(args.cases[0], "sql")
    print(f"SQL settings: {', '.join(settings) or 'DuckDB defaults'}\n\n"
          "| family | view | cold call CPU s: SQL (query alone) / Python (ratio) | process CPU s, one call: SQL / "
          "Python (ratio) | warm CPU s: SQL / Python (ratio) | call wall s: SQL / Python | peak RSS: SQL / Python | "
          "equal to 1e-12 | load |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    for case in args.cases:
        runs = {"sql": [], "python": []}
        for _ in range(args.repeat):
            for side in runs:  # interleaved, so that both see the same load
                runs[side].append(run(case, side))
        if any("error" in r for side in runs.values() for r in side):
            print(f"| {CASES[case][0]} | {case} | {[r.get('error') for side in runs.values() for r in side]} |",
                  flush=True)
            continue

        def median(key, side):
            return statistics.median(key(r) for r in runs[side])

        cpu, warm, process, inner = ({side: median(key, side) for side in runs} for key in (
            lambda r: r["cpu"], lambda r: r["warm_cpu"], lambda r: r["cpu_seconds"] - r["warm_cpu"],
            lambda r: r["seconds"]))
        query_cpu = median(lambda r: r["query_cpu"], "sql")
        rss = {side: max(r["peak_rss_mib"] for r in rs) for side, rs in runs.items()}
        same = _agree(runs["sql"][0]["numbers"], runs["python"][0]["numbers"])
        print(f"| {CASES[case][0]} | {case} | {cpu['sql']:.2f} ({query_cpu:.2f}) / {cpu['python']:.2f} "
              f"({cpu['sql'] / cpu['python']:.2f}) | {process['sql']:.2f} / {process['python']:.2f} "
              f"({process['sql'] / process['python']:.2f}) | {warm['sql']:.2f} / {warm['python']:.2f} "
              f"({warm['sql'] / max(warm['python'], 1e-3):.2f}) | {inner['sql']:.2f} / {inner['python']:.2f} | "
              f"{rss['sql'] / 1024:.2f} / {rss['python'] / 1024:.2f} GB | {'yes' if same else 'NO'} | "
              f"{os.getloadavg()[0]:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
