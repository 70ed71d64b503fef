"""The ``lvis`` command: an LVIS ground truth and results (or a stored run) in, lvis-api's printed results or JSON
out."""

from evalengine import api
from evalengine.cli import options
from evalengine.cli.options import STORE_HELP
from evalengine.errors import EvalEngineError
from evalengine.match.lvis import LVIS_MAX_DETS


INGEST_HELP = ("LVIS ground truth (COCO-shaped; the images' neg_category_ids and not_exhaustive_category_ids and the "
               "categories' frequency are checked and kept) and results")


def _protocol(args, max_dets: int) -> api.LvisProtocol:
    return api.LvisProtocol(iou_type=args.iou_type, max_dets=(max_dets,), zero_id_quirk=bool(args.keep_zero_id_quirk))


def _stored(args, protocol: api.LvisProtocol) -> str:
    timed = options.phases(args)
    evaluation = api.evaluate_store_lvis(api.open(args.store), protocol, run=args.run, phases=timed,
                                         **options.schedule(args))
    return options.profiled(args, timed, api.lvis_output(evaluation, args.json))


def stored_protocol(args) -> api.LvisProtocol:
    """The LVIS protocol of a store command (``evaluate``, ``export``): ``--iou-type``, one ``--max-dets`` and
    ``--keep-zero-id-quirk`` apply; COCO's thresholds and ranges do not."""
    fixed = [option for option, given in (("--area-ranges", args.area_ranges is not None),
                                          ("--use-cats", args.use_cats != 1),
                                          ("--iou-thresholds", args.iou_thresholds is not None),
                                          ("--kpt-sigmas", args.kpt_sigmas is not None)) if given]
    if fixed:
        raise EvalEngineError(f"{args.command}: {fixed[0]} is an option of the coco protocol, not of lvis "
                              "(lvis-api's thresholds and area ranges are fixed)")
    max_dets = args.max_dets or [LVIS_MAX_DETS]
    if len(max_dets) != 1:
        raise EvalEngineError(f"{args.command}: --max-dets takes one cap under lvis (detections per image), got "
                              f"{max_dets}")
    return _protocol(args, max_dets[0])


def cmd_evaluate(args) -> str:
    """``evaluate STORE --protocol lvis``: match (or reuse) the LVIS table of a stored run, print lvis-api's results."""
    return _stored(args, stored_protocol(args))


def _cmd_lvis(args) -> str:
    options.check_store_or_files(args)
    protocol = _protocol(args, args.max_dets)
    if args.store is not None:
        return _stored(args, protocol)
    timed = options.phases(args)
    evaluation = api.evaluate_lvis(args.gt, args.dt, protocol, store=args.keep_store, n_shards=args.shards,
                                   phases=timed, **options.schedule(args))
    return options.profiled(args, timed, api.lvis_output(evaluation, args.json, args.keep_store))


def add_lvis(sub) -> None:
    lvis = sub.add_parser("lvis", help="evaluate LVIS files (federated: negative and not-exhaustive categories, 300 "
                                       "detections per image) as lvis-api would")
    options.store_or_files_args(lvis, gt_help="LVIS ground-truth JSON (COCO-shaped, with the images' "
                                              "neg_category_ids and not_exhaustive_category_ids and the categories' "
                                              "frequency)")
    lvis.add_argument("--iou-type", choices=["bbox", "segm"], default="bbox", help="boxes (default) or masks")
    lvis.add_argument("--max-dets", type=options.positive_int, default=300, metavar="N",
                      help="detections kept per image over all categories (lvis-api's 300)")
    lvis.add_argument("--keep-zero-id-quirk", type=int, choices=[0, 1], default=1,
                      help="1 (default) reproduces lvis-api never matching ground-truth id 0; 0 corrects it")
    lvis.add_argument("--keep-store", default=None, metavar="STORE",
                      help=f"with --gt/--dt, keep the store: {STORE_HELP} (default: held in memory; in a temporary "
                           "folder above evalengine.api.lvis.IN_MEMORY_DETECTIONS results or with --scheduler processes)")
    lvis.add_argument("--shards", type=options.positive_int, default=None, help="image shards")
    options.schedule_args(lvis)
    lvis.add_argument("--json", action="store_true",
                      help='print {"stats": {"AP": …, "AR@300": …}, "per_class": {"<category_id>": ap}}')
    options.run_args(lvis)
    lvis.set_defaults(func=_cmd_lvis)
