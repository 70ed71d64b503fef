"""The ``confusion`` command: the confusion matrix of a stored run or of COCO files in the COCO matching convention
(:mod:`evalengine.metrics.confusion`), as a table or JSON."""

import json

import polars as pl

from evalengine import api
from evalengine.cli import options


def _cmd_confusion(args) -> str:
    options.check_store_or_files(args)
    source = (args.gt, args.dt) if args.store is None else api.open(args.store)
    result = api.confusion(source, args.iou, args.score, args.thresholds, args.run, iou_type=args.iou_type,
                           **options.schedule(args))
    if args.json:
        return json.dumps(api.confusion_payload(result, args.thresholds or args.score, args.normalize))
    names = {**result.names, None: "background"}
    cells = (result.matrix().filter(pl.col("count") > 0)
             .select(pl.col("gt_category_id").replace_strict(names, return_dtype=pl.String).alias("ground truth"),
                     pl.col("dt_category_id").replace_strict(names, return_dtype=pl.String).alias("detected"),
                     "count", pl.col("fraction").round(4).alias("row fraction")))
    with pl.Config(tbl_rows=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True, fmt_str_lengths=40):
        text = str(cells)
    threshold = f"per-class {args.thresholds.upper()}-optimal" if args.thresholds else format(args.score, "g")
    return (f"confusion matrix at IoU >= {result.iou_threshold:g}, score >= {threshold} (non-zero cells; "
            f"--json for the matrix)\n{text}")


def add_confusion(sub) -> None:
    parser = sub.add_parser("confusion", help="confusion matrix (classes + background) in the COCO matching convention")
    options.store_or_files_args(parser)
    parser.add_argument("--iou-type", choices=("bbox", "segm"), default="bbox",
                        help="what is matched: boxes (default) or masks (segm)")
    parser.add_argument("--iou", type=options.iou, default=0.5, help="IoU threshold of a match (default 0.5)")
    score = parser.add_mutually_exclusive_group()
    score.add_argument("--score", type=options.number, default=0.05,
                       help="keep detections with score >= this (default 0.05)")
    score.add_argument("--thresholds", choices=api.CONFUSION_THRESHOLDS, default=None,
                       help="per-class LRP- or F1-optimal score thresholds (at the same IoU) instead of --score")
    parser.add_argument("--normalize", action="store_true",
                        help="--json: row fractions (each ground-truth row sums to 1) instead of counts")
    options.schedule_args(parser)
    parser.add_argument("--json", action="store_true",
                        help='print {"iou_threshold", "score_threshold", "normalized", "labels", "category_ids", '
                             '"matrix"}')
    parser.set_defaults(func=_cmd_confusion)
