"""The SQL views against the Python metrics they equal, on one matched store: each query in its own process.

For every case, the view's query (``store.sql``) and the Python metric that gives the same numbers each run in a
child process (bench_coco's :func:`run_child`: wall time from process start to exit, peak RSS); the child also
reports the in-process time of the query alone and a digest of its numbers, and the table says whether SQL and
Python agree to 1e-12. The load average is printed with each row (the machine is shared: read the ratios).

    python benchmarks/bench_sql.py STORE                      # a store matched under the default COCO protocol
    python benchmarks/bench_sql.py STORE --cases coco_summary ap_small --repeat 3

The store is first evaluated once (as ``evalengine evaluate STORE`` does), which stores the run's AP table that
``ap`` and ``coco_summary`` read; the image slice goes through the accumulation macros.
"""

import argparse
import json
import os
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
CASES = {  # name: (SQL, Python: a function of the store returning the numbers in the SQL's row order)
    "coco_summary": ("SELECT value FROM coco_summary WHERE protocol = 'coco' AND run = 'default'",
                     lambda store: list(store.evaluate().stats())),
    "ap_small": ("SELECT avg(ap) FILTER (WHERE ap > -1) AS ap FROM ap WHERE protocol = 'coco' AND "
                 "run = 'default' AND area_range = 'small' AND max_dets = 100 GROUP BY category_id ORDER BY category_id",
                 lambda store: _ap_small(store)),
    "image_counts": ("SELECT sum(tp)::BIGINT, sum(fp)::BIGINT, sum(fn)::BIGINT FROM image_counts WHERE protocol = 'coco' AND run = 'default' "
                     "AND iou_threshold = 0.5",
                     lambda store: store.evaluate().per_image_counts(iou_threshold=0.5, area_range="all")
                     .select("tp", "fp", "fn").sum().row(0)),
    "slice": (SLICE_SQL, lambda store: list(store.report(where=SLICE).stats())),
}


def _ap_small(store) -> list:
    import polars as pl

    table = store.evaluate().ap_table().filter((pl.col("area_range") == "small") & (pl.col("max_dets") == 100))
    return (table.group_by("category_id").agg(pl.col("ap").filter(pl.col("ap") > -1).mean()).sort("category_id")
            .get_column("ap").to_list())


def child(store_path: str, case: str, side: str) -> None:
    """In the child: open the store (imports and start-up are part of the wall time, not of the in-process time),
    run one side of one case, print ``{"seconds", "numbers"}``."""
    import evalengine

    store = evalengine.open(store_path)
    started = time.perf_counter()
    if side == "sql":
        frame = store.sql(CASES[case][0])
        numbers = [v for row in frame.rows() for v in row]
    else:
        numbers = list(CASES[case][1](store))
    print(json.dumps({"seconds": time.perf_counter() - started, "numbers": numbers}))


def _agree(a: list, b: list) -> bool:
    return len(a) == len(b) and all((x is None and y is None) or (x is not None and y is not None and abs(x - y) <= 1e-12)
                                    for x, y in zip(a, b))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", nargs="?")
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--max-rss-gib", type=float, default=12.0)
    parser.add_argument("--child", nargs=2, metavar=("CASE", "SIDE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.store, *args.child)
        return 0
    # the store as `evalengine evaluate STORE` leaves it: the run's AP table stored beside its match table
    run_child([sys.executable, __file__, args.store, "--child", "coco_summary", "python"], args.max_rss_gib * 2**30)
    print("| view | SQL s (in-process) | Python s (in-process) | SQL ÷ Python | SQL peak RSS | Python peak RSS | "
          "equal to 1e-12 | load |\n|---|---|---|---|---|---|---|---|", flush=True)
    for case in args.cases:
        runs = {"sql": [], "python": []}
        for _ in range(args.repeat):
            for side in runs:  # interleaved, so that both see the same load
                runs[side].append(run_child([sys.executable, __file__, args.store, "--child", case, side],
                                            args.max_rss_gib * 2**30))
        if any("error" in r for side in runs.values() for r in side):
            print(f"| {case} | {[r.get('error') for side in runs.values() for r in side]} |", flush=True)
            continue
        wall = {side: statistics.median(r["wall_seconds"] for r in rs) for side, rs in runs.items()}
        inner = {side: statistics.median(r["seconds"] for r in rs) for side, rs in runs.items()}
        rss = {side: max(r["peak_rss_mib"] for r in rs) for side, rs in runs.items()}
        same = _agree(runs["sql"][0]["numbers"], runs["python"][0]["numbers"])
        print(f"| {case} | {wall['sql']:.2f} ({inner['sql']:.2f}) | {wall['python']:.2f} ({inner['python']:.2f}) | "
              f"{inner['sql'] / inner['python']:.1f} | {rss['sql'] / 1024:.2f} GB | {rss['python'] / 1024:.2f} GB | "
              f"{'yes' if same else 'NO'} | {os.getloadavg()[0]:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
