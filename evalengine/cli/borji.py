"""``evalengine diagnose``: Borji & Iranmanesh's error diagnosis — the paper's Table 3 row (AP after each cumulative
fix: − Cls (Type I), + Local., − Duplicates, + Misses) and the errors per object size."""

import json

from evalengine import api
from evalengine.cli import options


def _cmd_diagnose(args) -> str:
    protocol = api.BorjiProtocol(args.variant, args.duplicates, args.background_threshold, args.foreground_threshold,
                                 api.CocoProtocol(iou_type=args.iou_type))
    options.check_store_or_files(args)
    store = (args.gt, args.dt) if args.store is None else api.open(args.store)
    diagnosis = api.borji(store, args.run, protocol=protocol, **options.schedule(args))
    return json.dumps(diagnosis.as_dict()) if args.json else api.borji_summary(diagnosis)


def add_diagnose(sub) -> None:
    diagnose = sub.add_parser("diagnose", help="Borji & Iranmanesh's error diagnosis: AP after removing Type I "
                                               "errors, fixing localisation, removing duplicates and adding misses; "
                                               "the errors per object size")
    options.store_or_files_args(diagnose)
    diagnose.add_argument("--variant", choices=api.BORJI_VARIANTS, default="borji_ref",
                          help="borji_ref: the authors' notebook (targets claimed in score order; default); paper: "
                               "the paper's rule (the target of largest IoU, nothing claimed)")
    diagnose.add_argument("--duplicates", choices=api.BORJI_DUPLICATES, default="coco",
                          help="the matching that finds duplicates: coco (pycocotools' greedy by score; default) or "
                               "gt_major (the notebook's cell: targets in file order)")
    diagnose.add_argument("--background-threshold", type=options.iou, default=0.1, metavar="T",
                          help="IoU at or below which a detection is a Type I error (default 0.1)")
    diagnose.add_argument("--foreground-threshold", type=options.iou, default=0.5, metavar="T",
                          help="IoU of a correct detection (default 0.5)")
    diagnose.add_argument("--iou-type", choices=api.BORJI_IOU_TYPES, default="bbox",
                          help="what is compared, moved and evaluated: boxes (default), masks (segm, pycocotools' "
                               "maskUtils.iou; a moved detection takes its target's mask and that mask's area) or "
                               "mask boundaries (boundary, Cheng et al.'s boundary IoU)")
    options.schedule_args(diagnose)
    diagnose.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    diagnose.set_defaults(func=_cmd_diagnose)
