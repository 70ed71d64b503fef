"""The LRP commands: ``lrp`` (optimal LRP of files or of a stored run) and ``thresholds`` (per-category deployment
thresholds of a stored run, and the detections they keep)."""

from evalengine import api
from evalengine.cli import options
from evalengine.cli.query import _target, _write


def _evaluation(args):
    """The matched run the command reads: of ``STORE`` (``--run``), or of ``--gt``/``--dt`` (a temporary store)."""
    options.check_store_or_files(args)
    protocol = api.lrp_protocol(args.iou, args.max_dets, args.protocol, args.strict, args.iou_type,
                                options.kpt_sigmas(args.kpt_sigmas))
    return api.evaluate_thresholds(protocol, args.store, args.run, args.gt, args.dt, **options.schedule(args))


def _cmd_lrp(args) -> str:
    evaluation = _evaluation(args)
    result = evaluation.lrp(search=args.search, compare=args.compare)
    return api.report.lrp_output(result, evaluation.layout.read("categories"),
                                 getattr(evaluation.protocol, "max_det_cap", None), args.json)


def _cmd_thresholds(args) -> str:
    store = api.open(args.store)
    target = _target(args, store) if args.out else None
    evaluation = _evaluation(args)
    best = evaluation.thresholds(args.criterion)
    if target is not None:
        kept = evaluation.kept_detections(best).collect()
        _write(args, target, kept.write_parquet)
    return api.report.thresholds_output(best, args.criterion, evaluation.protocol.iou_thresholds[0], args.json)


def _lrp_args(parser) -> None:
    parser.add_argument("--protocol", choices=["coco", "voc"], default="coco",
                        help="matching: pycocotools' (default) or the PASCAL devkit's (difficult objects ignored)")
    parser.add_argument("--strict", action="store_true",
                        help="voc: a true positive needs IoU > threshold (voc_eval.py, the VOC LRP code), not >=")
    parser.add_argument("--iou", type=options.iou, default=0.5, help="IoU threshold of a true positive (default 0.5)")
    parser.add_argument("--max-dets", type=options.positive_int, default=None, metavar="N",
                        help="detections kept per image and category (default 100; keypoints 20)")
    options.iou_type_args(parser, "coco: ")
    options.schedule_args(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def add_lrp(sub) -> None:
    lrp = sub.add_parser("lrp", help="optimal LRP (Oksuz et al.) per category and size, as the official code")
    options.store_or_files_args(
        lrp, gt_help="COCO ground-truth JSON (voc: also an Annotations/ folder)",
        dt_help="detections: COCO result JSON, JSON Lines, Parquet or CSV (voc: also a devkit results folder)")
    _lrp_args(lrp)
    lrp.add_argument("--search", choices=api.LRP_SEARCHES, default="rank",
                     help="rank: the official TPAMI'21 code (default); score: thresholds keep tied scores together; "
                          "grid: the ECCV'18 code's 0.01 grid")
    lrp.add_argument("--compare", choices=[">=", ">"], default=">=",
                     help="grid search: keep score >= s (the ECCV'18 COCO code) or > s (its VOC code)")
    lrp.set_defaults(func=_cmd_lrp)


def add_thresholds(sub) -> None:
    thresholds = options.store_command(
        sub, "thresholds", "per-category score thresholds that minimise LRP or maximise F1", _cmd_thresholds)
    thresholds.set_defaults(gt=None, dt=None)
    thresholds.add_argument("--run", default=api.DEFAULT_RUN, help="the stored run")
    _lrp_args(thresholds)
    thresholds.add_argument("--criterion", choices=["lrp", "f1"], default="lrp",
                            help="lrp: least LRP (default); f1: greatest F1")
    thresholds.add_argument("--out", default=None, metavar="FILE",
                            help="write the detections kept at the thresholds (Parquet) to FILE, outside the store")
    thresholds.add_argument("--force", action="store_true", help="replace FILE if it exists")
