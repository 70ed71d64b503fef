"""The ``upper-bound`` command: the empirical upper-bound AP of a store's ground truth labelled by a classifier (Borji
& Iranmanesh §4, strategies 1 and 2), added as a run and evaluated by the COCO protocol."""

from evalengine import api
from evalengine.cli import options


def _cmd_upper_bound(args) -> str:
    result = api.upper_bound(api.open(args.store), args.classifier, run=args.run, unit_score=args.unit_score,
                             allow_missing=args.allow_missing, overwrite=args.overwrite, strategy=args.strategy,
                             **options.schedule(args))
    return api.upper_bound_output(result, args.json, args.per_class)


def add_upper_bound(sub) -> None:
    parser = options.store_command(
        sub, "upper-bound", "empirical upper-bound AP: the ground-truth boxes labelled by a classifier, as a run",
        _cmd_upper_bound)
    parser.add_argument("--classifier", required=True, metavar="TABLE",
                        help="CSV, JSON Lines or Parquet: gt_id (or ann_id), category_id (the predicted label), "
                             "score, optionally image_id and box_id; one row per annotation (s1) or per sampled box "
                             "(s2_*)")
    parser.add_argument("--strategy", choices=api.UPPER_BOUND_STRATEGIES, default="s1",
                        help="s1: the target box's label (one row per annotation); s2_mcb: the label and score of "
                             "the most confident row; s2_mfl: the most frequent label, scored by its best row")
    parser.add_argument("--run", default=api.UPPER_BOUND_RUN, help=f"name of the run (default {api.UPPER_BOUND_RUN})")
    parser.add_argument("--unit-score", action="store_true",
                        help="score every detection 1 instead of the classifier's score (the paper's variant)")
    parser.add_argument("--allow-missing", action="store_true",
                        help="accept annotations without a row (missed) instead of refusing the table")
    parser.add_argument("--overwrite", action="store_true", help="replace a run of that name")
    parser.add_argument("--per-class", action="store_true", help="also print AP, AP50, AR and accuracy per class")
    options.schedule_args(parser)
    parser.add_argument("--json", action="store_true",
                        help='print {"run", "strategy", "stats", "stat_names", "accuracy", "n_objects", "per_class"}')
