"""The COCO commands: ``coco`` (files in, summary out), ``ingest coco``, ``evaluate``, ``add-run``, ``compare``,
``report``."""

from evalengine import api
from evalengine.api import formats
from evalengine.cli import options
from evalengine.cli.options import STORE_HELP


def _cmd_coco(args) -> str:
    timed = options.phases(args)
    if options.foreign_formats(args):  # YOLO, CVAT, LabelMe, OpenImages CSV, VOC (evalengine.api.formats)
        evaluation = formats.evaluate_formats(args.gt, args.dt, options.protocol(args), **options.format_inputs(args),
                                              store=args.store, n_shards=args.shards, phases=timed,
                                              **options.schedule(args))
        return options.profiled(args, timed, api.report.coco_output(evaluation, args.json, args.store))
    evaluation = api.evaluate_coco(args.gt, args.dt, options.protocol(args), store=args.store, n_shards=args.shards,
                                   phases=timed, **options.schedule(args))
    return options.profiled(args, timed, api.report.coco_output(evaluation, args.json, args.store))


def _cmd_ingest(args) -> str:
    timed = options.phases(args)
    if args.format == "coco" and options.foreign_formats(args):
        with timed.phase("ingest", unit="detections") as advance:
            store = formats.ingest_formats(args.gt, args.dt, args.store, **options.format_inputs(args),
                                           n_shards=args.shards, run=args.run, overwrite=args.overwrite,
                                           progress=advance, tags=api.parse_tags(args.tag))
        return options.profiled(args, timed, f"store: {store.path} ({store.layout.n_shards} shards, runs: "
                                             f"{', '.join(store.runs)})")
    ingest = api.ingest_lvis if args.format == "lvis" else api.ingest_coco
    with timed.phase("ingest", total=api.count_rows(args.dt), unit="detections") as advance:
        store = ingest(args.gt, args.dt, args.store, n_shards=args.shards, run=args.run, overwrite=args.overwrite,
                       progress=advance, image_metadata=args.image_metadata, tags=api.parse_tags(args.tag),
                       masks=not args.no_masks)
    text = f"store: {store.path} ({store.layout.n_shards} shards, runs: {', '.join(store.runs)})"
    return options.profiled(args, timed, text)


def _cmd_evaluate(args) -> str:
    from evalengine.cli import lvis, segmentation, voc  # the other protocols' commands, loaded for them only

    if args.protocol == "voc":
        return voc.cmd_evaluate(args)
    if args.protocol == "partitions":
        return segmentation.cmd_evaluate(args)
    if args.protocol == "lvis":
        return lvis.cmd_evaluate(args)
    timed = options.phases(args)
    evaluation = api.evaluate_store(api.open(args.store), options.protocol(args), run=args.run, phases=timed,
                                    **options.schedule(args))
    return options.profiled(args, timed, api.report.coco_output(evaluation, args.json))


def _cmd_add_run(args) -> str:
    timed = options.phases(args)
    with timed.phase("ingest", total=formats.count_rows(args.dt, args.dt_format), unit="detections") as advance:
        store = formats.add_run_formats(args.store, args.dt, args.run, args.dt_format, overwrite=args.overwrite,
                                        progress=advance, tags=api.parse_tags(args.tag))
    return options.profiled(args, timed, f"store: {store.path} (runs: {', '.join(store.runs)})")


def _cmd_compare(args) -> str:
    table = api.open(args.store).compare(args.runs, options.protocol(args), overall=True, **options.schedule(args))
    if args.area_range:
        table = table.filter(table["area_range"] == args.area_range)
    table = table.head(args.limit) if args.limit is not None else table
    return table.write_json() if args.json else api.report.table(table)


def _cmd_report(args) -> str:
    evaluation = api.open(args.store).report(options.protocol(args), run=args.run, where=args.where,
                                             category_ids=args.categories, **options.schedule(args))
    return api.report.coco_output(evaluation, args.json)


def add_coco(sub) -> None:
    coco = sub.add_parser("coco", help="evaluate COCO JSON files as pycocotools would (bbox, segm, keypoints, boundary)")
    coco.add_argument("--gt", required=True, help="COCO ground-truth JSON")
    coco.add_argument("--dt", required=True,
                      help="detections: COCO result JSON, JSON Lines, Parquet or CSV (image_id, category_id, "
                           "score, bbox or x, y, w, h; CSV: x, y, w, h or x1, y1, x2, y2)")
    coco.add_argument("--store", default=None,
                      help=f"keep the store: {STORE_HELP} (default: held in memory for the command; a temporary "
                           f"folder above {api.IN_MEMORY_DETECTIONS:,} detections)")
    coco.add_argument("--shards", type=options.positive_int, default=None,
                      help="image shards (default: ~100k detections each)")
    options.protocol_args(coco)
    options.format_args(coco)
    coco.set_defaults(func=_cmd_coco)


def add_ingest(sub) -> None:
    from evalengine.cli import lvis, segmentation, voc

    ingest = sub.add_parser("ingest", help="build a store from input files")
    ingest_sub = ingest.add_subparsers(dest="format", required=True)
    for name, text in (("coco", "COCO ground truth and results"), ("lvis", lvis.INGEST_HELP)):
        ingest_coco = ingest_sub.add_parser(name, help=text)
        ingest_coco.add_argument("--gt", required=True)
        ingest_coco.add_argument("--dt", required=True)
        ingest_coco.add_argument("--store", required=True, help=STORE_HELP)
        ingest_coco.add_argument("--shards", type=options.positive_int, default=None)
        ingest_coco.add_argument("--run", default=api.DEFAULT_RUN, help="name of the detection run")
        ingest_coco.add_argument("--overwrite", action="store_true", help="replace an existing store")
        ingest_coco.add_argument("--no-masks", action="store_true",
                                 help="store no result masks (box evaluation only: a file of box results parses none)")
        ingest_coco.add_argument("--image-metadata", default=None, metavar="FILE",
                                 help="CSV or Parquet table keyed by image_id whose columns are added to the images")
        options.tag_args(ingest_coco)
        options.run_args(ingest_coco)
        if name == "coco":
            options.format_args(ingest_coco)
        ingest_coco.set_defaults(func=_cmd_ingest)
    voc.add_ingest_voc(ingest_sub)
    segmentation.add_ingest_partitions(ingest_sub)


def add_evaluate(sub) -> None:
    from evalengine.cli import segmentation, voc

    evaluate = options.store_command(sub, "evaluate", "match a stored run and print its COCO summary", _cmd_evaluate)
    evaluate.add_argument("--protocol", choices=["coco", "voc", "partitions", "lvis"], default="coco",
                          help="matching protocol (partitions: the contingency tables of a partition store; lvis: "
                               "federated, of a store made by ingest lvis)")
    evaluate.add_argument("--run", default=api.DEFAULT_RUN)
    options.protocol_args(evaluate)
    voc.add_evaluate_args(evaluate)
    segmentation.add_evaluate_args(evaluate)


def add_add_run(sub) -> None:
    add_run = options.store_command(
        sub, "add-run", "add a detection run (a model or a perturbation) to a store", _cmd_add_run)
    add_run.add_argument("--run", required=True, help="name of the new run")
    add_run.add_argument("--dt", required=True, help="detections: COCO result JSON, JSON Lines, Parquet or CSV")
    add_run.add_argument("--overwrite", action="store_true", help="replace a run of that name")
    add_run.add_argument("--dt-format", choices=formats.DT_FORMATS, default=None,
                         help="the detections' format (default: recognised; YOLO boxes are sized by the store's "
                              "images)")
    options.tag_args(add_run)
    options.run_args(add_run)


def add_compare(sub) -> None:
    compare = options.store_command(
        sub, "compare", "AP per class and size of two or more runs, with differences", _cmd_compare)
    compare.add_argument("runs", nargs="+", metavar="RUN", help="runs to compare; differences are to the first")
    compare.add_argument("--area-range", default=None, help="only this area range (e.g. all, small)")
    compare.add_argument("--limit", type=options.positive_int, default=None, metavar="N",
                         help="only the first N rows: the overall AP per area range (category null, name (all)), "
                              "then the largest |AP difference| of the second run (default: every row)")
    options.protocol_args(compare)


def add_report(sub) -> None:
    report = options.store_command(
        sub, "report", "COCO summary of a slice of a store: images by metadata, categories", _cmd_report)
    report.add_argument("--run", default=api.DEFAULT_RUN)
    report.add_argument("--where", default=None, metavar="PREDICATE",
                        help="SQL predicate over the images table, e.g. \"width > 500 AND weather = 'rain'\"")
    report.add_argument("--categories", type=int, nargs="+", default=None, metavar="ID",
                        help="only these category ids (pycocotools params.catIds)")
    options.protocol_args(report)
