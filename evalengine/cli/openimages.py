"""The ``openimages`` command: the OpenImages challenge's CSV files in, the TF evaluator's metrics out (one
``name,value`` line each, as ``oid_challenge_evaluation.py`` writes them) or ``--json``."""

from evalengine import api
from evalengine.cli import options
from evalengine.cli.options import STORE_HELP
from evalengine.errors import EvalEngineError


def _cmd_openimages(args) -> str:
    if args.v2:
        protocol = api.OpenImagesProtocol.v2(iou_threshold=args.iou, iou_type=args.iou_type)
    else:
        if args.gt_labels is None:
            raise EvalEngineError("openimages: --gt-labels is needed by the challenge protocol (or pass --v2)")
        protocol = api.OpenImagesProtocol(iou_threshold=args.iou, group_of_weight=args.group_of_weight,
                                          iou_type=args.iou_type)
    if args.gt_masks is not None and args.iou_type != "segm":
        raise EvalEngineError("openimages: --gt-masks needs --iou-type segm")
    timed = options.phases(args)
    evaluation = api.evaluate_openimages(args.gt_boxes, args.gt_labels, args.hierarchy, args.dt, protocol,
                                         class_descriptions=args.class_descriptions, expand=not args.expanded,
                                         store=args.store, n_shards=args.shards, phases=timed, masks=args.gt_masks,
                                         **options.schedule(args))
    return options.profiled(args, timed, api.openimages_output(evaluation, args.json, args.store, args.corloc))


def add_openimages(sub) -> None:
    parser = sub.add_parser("openimages", help="evaluate OpenImages challenge CSV files as the TF Object Detection API's "
                                               "OpenImagesChallengeEvaluator (group-of boxes, hierarchy, verified labels)")
    parser.add_argument("--gt-boxes", required=True,
                        help="ground-truth boxes CSV: ImageID, LabelName, XMin, XMax, YMin, YMax, IsGroupOf")
    parser.add_argument("--gt-labels", default=None,
                        help="image-level labels CSV: ImageID, LabelName, Confidence (0 or 1)")
    parser.add_argument("--hierarchy", required=True, help="the class hierarchy JSON (bbox_labels_600_hierarchy.json)")
    parser.add_argument("--dt", required=True,
                        help="predictions: CSV or Parquet with ImageID, LabelName, Score, XMin, XMax, YMin, YMax")
    parser.add_argument("--class-descriptions", default=None,
                        help="LabelName,DisplayName CSV without a header (class-descriptions-boxable.csv)")
    parser.add_argument("--expanded", action="store_true",
                        help="the ground truth is already expanded along the hierarchy (the reference's "
                             "oid_hierarchical_labels_expansion.py output): do not expand it again")
    parser.add_argument("--v2", action="store_true",
                        help="the OpenImages V2 metric: no image-level labels, group-of boxes only ignore")
    parser.add_argument("--iou", type=options.iou, default=0.5, help="matching IoU threshold (default 0.5)")
    parser.add_argument("--group-of-weight", type=float, default=1.0,
                        help="weight of a group-of box (default 1, the detection challenge)")
    parser.add_argument("--iou-type", choices=("bbox", "segm"), default="bbox",
                        help="bbox (default); segm: the instance-segmentation track (masks: ImageWidth, ImageHeight, "
                             "Mask columns, base64 of zlib of COCO RLE, in the boxes file or --gt-masks and in --dt)")
    parser.add_argument("--gt-masks", default=None,
                        help="segm: ground-truth masks CSV merged with the boxes as the reference does (ImageID, "
                             "LabelName, XMin, XMax, YMin, YMax, IsGroupOf, ImageWidth, ImageHeight, Mask)")
    parser.add_argument("--store", default=None, help=f"keep the store: {STORE_HELP} (default: a temporary folder)")
    parser.add_argument("--shards", type=options.positive_int, default=None, help="image shards")
    options.schedule_args(parser)
    parser.add_argument("--corloc", action="store_true",
                        help="also CorLoc per class and its mean (the TF evaluator's evaluate_corlocs)")
    parser.add_argument("--json", action="store_true",
                        help='print {"map": x, "per_class": {"<LabelName>": ap}} (classes with ground truth; with '
                             '--corloc also "mean_corloc" and "corloc": {"<LabelName>": corloc})')
    options.run_args(parser)
    parser.set_defaults(func=_cmd_openimages)
