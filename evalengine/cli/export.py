"""``evalengine export``: a stored run's COCO match table per object, as COCO-style results or FiftyOne's evaluation
fields (:mod:`evalengine.evaluation.export`)."""

from evalengine import api
from evalengine.api import formats
from evalengine.cli import lvis, options, voc
from evalengine.errors import EvalEngineError
from evalengine.evaluation.export import EXPORT_PROTOCOLS

PROTOCOLS = {"coco": options.protocol, "voc": voc.stored_protocol, "lvis": lvis.stored_protocol}


def _cmd_export(args) -> str:
    if args.protocol != "voc" and (args.strict or args.use_difficult):
        raise EvalEngineError(f"export: --{'strict' if args.strict else 'use-difficult'} is an option of the voc "
                              f"protocol, not of {args.protocol}")
    protocol = PROTOCOLS[args.protocol](args)
    out = formats.export(args.store, args.out, args.format, run=args.run, iou_threshold=args.iou_threshold,
                         protocol=protocol, **options.schedule(args))
    return f"{out}: {args.format} of run '{args.run}' at IoU {args.iou_threshold}"


def add_export(sub) -> None:
    export = options.store_command(
        sub, "export", "write a run's matches per object: COCO-style results or FiftyOne evaluation fields",
        _cmd_export)
    export.add_argument("--run", default=api.DEFAULT_RUN)
    export.add_argument("--format", choices=formats.EXPORT_FORMATS, default="coco-results",
                        help="coco-results: the detections with matched_gt_id, iou, tp, ignored; fiftyone: one row "
                             "per detection and ground truth with eval (tp/fp/fn), eval_id, eval_iou")
    export.add_argument("--iou-threshold", type=options.iou, default=0.5, metavar="T",
                        help="the IoU threshold of the outcomes (one of the protocol's; default 0.5)")
    export.add_argument("--out", required=True, type=options.output_file,
                        help="the file: .parquet, .jsonl (JSON Lines) or .json (one JSON list)")
    export.add_argument("--protocol", choices=EXPORT_PROTOCOLS, default="coco",
                        help="the match table's protocol (default coco; voc: --iou-thresholds, --strict, "
                             "--use-difficult; lvis: --iou-type, one --max-dets per image, --keep-zero-id-quirk)")
    options.matching_args(export)  # the match table's protocol; its largest --max-dets is the cap
    voc.matching_args(export)
    options.schedule_args(export)
