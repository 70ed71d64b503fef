"""``evalengine demo``: the whole pipeline on the bundled COCO sample."""

import tempfile
from getpass import getuser
import time
from importlib import resources
from pathlib import Path

from evalengine import api

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
    # one demo store per user, replaced by the next run (not a new folder each time)
    target = api.location(args.store) if args.store else Path(tempfile.gettempdir()) / f"evalengine-demo-{getuser()}"
    started = time.perf_counter()
    with resources.as_file(data / "instances_val2014_100.json") as gt, \
            resources.as_file(data / "instances_val2014_fakebbox100_results.json") as dt:
        # re-running the demo replaces its own earlier store, never another folder
        store = api.ingest_coco(gt, dt, target, n_shards=4, overwrite=(target / "manifest.json").is_file())
    evaluation = store.evaluate()
    with resources.as_file(data / "instances_val2014_fakebbox100_results.json") as dt:
        store = store.add_proposals(dt, run="proposals")
    proposals = store.evaluate_proposals(protocol=api.ProposalProtocol(budgets=(1, 10, 100)))
    lines = [
        "evalengine demo: COCO val2014, first 100 images, with the official fake bbox results (cocoapi)",
        "",
        api.report.coco_summary(evaluation),
        "",
        "The same store in SQL: AP by size bucket of the five worst classes (null: no ground truth of that size)",
        "",
        DEMO_QUERY,
        "",
        api.report.table(store.sql(DEMO_QUERY)),
        "",
        "The detections as class-agnostic proposals (Hosang et al.: greedy one-to-one matching per budget, crowd "
        "left out; AR = 2 * mean(max(IoU - 0.5, 0)))",
        "",
        api.report.proposal_table(api.report.proposal_payload(proposals, iou_thresholds=(0.5, 0.7, 0.9))),
        "",
        f"store written to {store.path}  ({time.perf_counter() - started:.1f} s)",
        f'try: evalengine sql {store.path} "SELECT * FROM coco_summary"',
        f'     evalengine sql {store.path} "SELECT * FROM proposal_recall"',
        *([] if args.store else [f"the next demo replaces it; remove it with: rm -r {store.path}"]),
    ]
    return "\n".join(lines)


def add_demo(sub) -> None:
    demo = sub.add_parser("demo", help="run the whole pipeline on the bundled COCO sample")
    demo.add_argument("--store", default=None, help="where to write the demo store (default: evalengine-demo-USER in the temporary folder, "
                           "replaced by each demo)")
    demo.set_defaults(func=_cmd_demo)
