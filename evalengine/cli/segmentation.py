"""``evalengine segmentation`` (label-map folders, SEISM's measures), ``ingest partitions`` and
``evaluate STORE --protocol partitions``."""

import json
import math

from evalengine import api
from evalengine.api import segmentation as seg
from evalengine.cli import options
from evalengine.errors import InputError
from evalengine.geometry.boundary_pr import GRIDS
from evalengine.geometry.correspond import OUTLIERS
from evalengine.metrics.partition.combine import MEASURES, PR_MEASURES

MEASURES_HELP = f"SEISM measures to compute (default: all of them, fb included): {' '.join(MEASURES)}"
VOID_HELP = ("the label of void pixels in the ground truth (left out of every count); default: none, every label "
             "is a region")


def add_segmentation(sub) -> None:
    parser = sub.add_parser("segmentation", help="partition measures (SEISM) of label maps against ground truths")
    parser.add_argument("--pred", required=True, metavar="PRED_DIR",
                        help="one label map per image (.png, .npy, .npz), named as its ground truth")
    parser.add_argument("--gt", required=True, metavar="GT_DIR",
                        help="per image every annotator: a (K, H, W) .npy / .npz, or <stem>_<k>.png files")
    _measure_args(parser)
    parser.add_argument("--void-label", type=int, default=None, metavar="L", help=VOID_HELP)
    parser.add_argument("--json", action="store_true", help='print {"dataset": {…}, "per_image": {stem: {…}}}')
    parser.set_defaults(func=_cmd_segmentation)


def add_ingest_partitions(ingest_sub) -> None:
    """``ingest partitions``: a partition store (ground truth and machine partition runs)."""
    ingest = ingest_sub.add_parser("partitions", help="label maps: ground-truth annotators and partition runs")
    ingest.add_argument("--gt", required=True, metavar="GT_DIR", help="ground truth, as for `segmentation`")
    ingest.add_argument("--pred", required=True, nargs="+", metavar="RUN=DIR",
                        help="a run's label maps: DIR holds them (parameter 0) or sub-folders named by parameter "
                             "values (a sweep, e.g. DIR/0.25/<stem>.png)")
    ingest.add_argument("--store", required=True, help=options.STORE_HELP)
    ingest.add_argument("--void-label", type=int, default=None, metavar="L", help=VOID_HELP)
    ingest.add_argument("--quadtree", action="store_true",
                        help="add the run 'quadtree': SEISM's baseline at its 17 parameters, 2 … 800 regions (SABD)")
    ingest.add_argument("--shards", type=options.positive_int, default=None)
    ingest.add_argument("--overwrite", action="store_true", help="replace an existing store")
    ingest.set_defaults(func=_cmd_ingest)


def add_evaluate_args(evaluate) -> None:
    """The partition options of ``evaluate`` (``--protocol partitions``)."""
    evaluate.add_argument("--measures", nargs="+", default=None, metavar="M",
                          help=f"with --protocol partitions: {MEASURES_HELP}")
    _fb_args(evaluate, "with --protocol partitions: ")


def cmd_evaluate(args) -> str:
    """``evaluate STORE --protocol partitions``: per measure ODS, OIS (and P/R at ODS, AP) of a partition run."""
    run = None if args.run == api.DEFAULT_RUN else args.run
    evaluation = seg.evaluate_partitions(api.open(args.store), run, args.measures, fb_grid=args.fb_grid,
                                         fb_outliers=args.fb_outliers, **options.schedule(args))
    summary = evaluation.summary()
    if args.json:
        return _dumps({"run": evaluation.run, "summary": summary.to_dicts()})
    return api.report.table(summary)


def _measure_args(parser) -> None:
    parser.add_argument("--measures", nargs="+", default=None, metavar="M", help=MEASURES_HELP)
    _fb_args(parser)


def _fb_args(parser, prefix: str = "") -> None:
    parser.add_argument("--fb-grid", choices=GRIDS, default="pixel",
                        help=f"{prefix}fb's boundary maps: thinned pixel boundaries (BSDS500, SEISM HEAD) or the "
                             "CVPR-2013 contour grid (default: pixel)")
    parser.add_argument("--fb-outliers", choices=OUTLIERS, default="bsds",
                        help=f"{prefix}fb's outlier model: the reference's random sparse graph, seeded (bsds), or "
                             "its deterministic optimum (complete); default: bsds")


def _cmd_segmentation(args) -> str:
    evaluation = seg.segmentation(args.pred, args.gt, args.measures, args.void_label, fb_grid=args.fb_grid,
                                  fb_outliers=args.fb_outliers)
    payload = seg.segmentation_payload(evaluation)
    if args.json:
        return _dumps(payload)
    rows = [f"{'measure':<8}{'value':>12}{'precision':>12}{'recall':>12}"]
    for measure, value in payload["dataset"].items():
        values = value if measure in PR_MEASURES else [value]
        rows.append(f"{measure:<8}" + "".join(f"{v:>12.6f}" for v in values))
    return f"{len(payload['per_image'])} images\n" + "\n".join(rows)


def _cmd_ingest(args) -> str:
    runs = {}
    for text in args.pred:
        run, equals, folder = text.partition("=")
        if not equals or not run or not folder:
            raise InputError(f"--pred {text!r}: expected RUN=DIR")
        if run in runs:
            raise InputError(f"--pred: run '{run}' given twice")
        runs[run] = folder
    store = seg.ingest_partitions(args.gt, runs, args.store, args.void_label, args.shards, args.overwrite,
                                  args.quadtree)
    return f"store: {store.path} (partition runs: {', '.join(sorted(store.layout.partition_runs))})"


def _dumps(payload) -> str:
    """JSON with NaN (a 0/0 precision of SEISM's) as null."""
    def clean(value):
        if isinstance(value, float) and math.isnan(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value
    return json.dumps(clean(payload))
