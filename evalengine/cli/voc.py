"""The PASCAL VOC commands: ``voc`` (files in, the devkit-style table out), ``ingest voc``, and the options of
``evaluate --protocol voc``."""

from evalengine import api
from evalengine.api import formats
from evalengine.cli import options
from evalengine.cli.options import STORE_HELP
from evalengine.errors import EvalEngineError

GT_HELP = "ground truth: a VOC Annotations/ folder of XML files, or a COCO ground-truth JSON"
DT_HELP = ("detections: a folder of devkit result files (comp4_det_test_<class>.txt: image score x1 y1 x2 y2), or "
           "a COCO result JSON, JSON Lines, Parquet or CSV")


def _protocol(args, thresholds) -> api.VocProtocol:
    return api.VocProtocol(iou_thresholds=tuple(thresholds) if thresholds else (0.5,), strict=args.strict,
                           use_difficult=args.use_difficult)


def _metric_arg(parser) -> None:
    parser.add_argument("--metric", choices=api.VOC_METRICS, default="voc12",
                        help="voc07: VOC2007 11-point AP; voc12 (default): VOC2010+ all-point AP")


def matching_args(parser) -> None:
    """The VOC matching options (what :func:`stored_protocol` reads beside ``--iou-thresholds``)."""
    parser.add_argument("--strict", action="store_true",
                        help="a TP needs IoU > threshold (py-faster-rcnn voc_eval.py); default IoU >= threshold "
                             "(the MATLAB devkit)")
    parser.add_argument("--use-difficult", action="store_true",
                        help="count difficult objects as regular ones (voc_eval.py use_diff)")


def _cmd_voc(args) -> str:
    if args.sample:
        args.gt, args.dt = api.voc_sample()
    elif args.gt is None or args.dt is None:
        raise EvalEngineError("voc: --gt and --dt are needed (or --sample)")
    timed = options.phases(args)
    if options.foreign_formats(args, native_gt=("voc", "coco"), native_dt=("voc", "coco")):  # evalengine.api.formats
        evaluation = formats.evaluate_formats(args.gt, args.dt, _protocol(args, args.iou), **options.format_inputs(args),
                                              metric=args.metric, store=args.store, n_shards=args.shards, phases=timed,
                                              **options.schedule(args))
    else:
        evaluation = api.evaluate_voc(args.gt, args.dt, _protocol(args, args.iou), metric=args.metric,
                                      store=args.store, n_shards=args.shards, phases=timed, **options.schedule(args))
    return options.profiled(args, timed, api.voc_output(evaluation, args.metric, args.json, args.store))


def _cmd_ingest_voc(args) -> str:
    timed = options.phases(args)
    foreign = options.foreign_formats(args, native_gt=("voc", "coco"), native_dt=("voc", "coco"))
    with timed.phase("ingest", unit="detections") as advance:
        kept = {"n_shards": args.shards, "run": args.run, "overwrite": args.overwrite, "progress": advance,
                "tags": api.parse_tags(args.tag)}
        store = (formats.ingest_formats(args.gt, args.dt, args.store, **options.format_inputs(args), **kept)
                 if foreign else api.ingest_voc(args.gt, args.dt, args.store, **kept))
    text = f"store: {store.path} ({store.layout.n_shards} shards, runs: {', '.join(store.runs)})"
    return options.profiled(args, timed, text)


def add_voc(sub) -> None:
    voc = sub.add_parser("voc", help="evaluate PASCAL VOC files as the devkit would (per-class AP, TP, FP, mAP)")
    voc.add_argument("--gt", help=GT_HELP)
    voc.add_argument("--dt", help=DT_HELP)
    voc.add_argument("--sample", action="store_true",
                     help="evaluate the bundled sample: 100 VOC2012 images (20 classes, difficult objects) and a "
                          "detector's devkit result files")
    voc.add_argument("--iou", type=options.iou, nargs="+", default=None, metavar="T",
                     help="IoU thresholds (default: 0.5, the devkit's minoverlap)")
    _metric_arg(voc)
    matching_args(voc)
    voc.add_argument("--store", default=None, help=f"keep the store: {STORE_HELP} (default: a temporary folder)")
    voc.add_argument("--shards", type=options.positive_int, default=None, help="image shards")
    options.schedule_args(voc)
    voc.add_argument("--json", action="store_true",
                     help='print {"map": x, "per_class": {"<name>": {"ap", "tp", "fp", "n_gt"}}} instead of the table')
    options.run_args(voc)
    options.format_args(voc)
    voc.set_defaults(func=_cmd_voc)


def add_ingest_voc(ingest_sub) -> None:
    """``ingest voc``: a store from VOC inputs, which any protocol then evaluates (``evaluate --protocol coco|voc``)."""
    ingest = ingest_sub.add_parser("voc", help="PASCAL VOC ground truth (Annotations/ or COCO JSON) and detections "
                                               "(devkit result files or any detection format)")
    ingest.add_argument("--gt", required=True, help=GT_HELP)
    ingest.add_argument("--dt", required=True, help=DT_HELP)
    ingest.add_argument("--store", required=True, help=STORE_HELP)
    ingest.add_argument("--shards", type=options.positive_int, default=None)
    ingest.add_argument("--run", default=api.DEFAULT_RUN, help="name of the detection run")
    ingest.add_argument("--overwrite", action="store_true", help="replace an existing store")
    options.tag_args(ingest)
    options.run_args(ingest)
    options.format_args(ingest)
    ingest.set_defaults(func=_cmd_ingest_voc)


def add_evaluate_args(evaluate) -> None:
    """The VOC options of ``evaluate`` (its ``--iou-thresholds`` are the VOC thresholds too)."""
    _metric_arg(evaluate)
    matching_args(evaluate)


def stored_protocol(args) -> api.VocProtocol:
    """The VOC protocol of a store command (``evaluate``, ``export``): ``--iou-thresholds``, ``--strict``,
    ``--use-difficult``; the COCO protocol's own options refused."""
    coco_only = [option for option, given in (("--area-ranges", args.area_ranges is not None),
                                              ("--use-cats", args.use_cats != 1),
                                              ("--max-dets", args.max_dets is not None),
                                              ("--iou-type", args.iou_type != "bbox"),
                                              ("--kpt-sigmas", args.kpt_sigmas is not None))
                 if given]
    if coco_only:
        raise EvalEngineError(f"{args.command}: {coco_only[0]} is an option of the coco protocol, not of voc")
    return _protocol(args, args.iou_thresholds)


def cmd_evaluate(args) -> str:
    """``evaluate STORE --protocol voc``: match (or reuse) the VOC table of a stored run and print its summary."""
    timed = options.phases(args)
    evaluation = api.evaluate_store_voc(api.open(args.store), stored_protocol(args), run=args.run,
                                        metric=args.metric, phases=timed, **options.schedule(args))
    return options.profiled(args, timed, api.voc_output(evaluation, args.metric, args.json))
