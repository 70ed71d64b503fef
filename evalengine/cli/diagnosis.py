"""The error-diagnosis commands: ``tide`` (Bolya et al.'s TIDE, as tidecv prints it)."""

import json
from pathlib import Path

from evalengine import api
from evalengine.cli import options


def _cmd_tide(args) -> str:
    protocol = api.TideProtocol(args.pos_threshold, args.background_threshold, args.max_dets,
                                iou_type=args.iou_type)
    options.check_store_or_files(args)
    if args.store is None:
        diagnosis = api.tide((args.gt, args.dt), mode=args.mode, protocol=protocol, **options.schedule(args))
        name = Path(args.dt).stem  # tidecv names a run loaded from a file by its stem
    else:
        diagnosis = api.tide(api.open(args.store), args.run, args.mode, protocol, **options.schedule(args))
        name = args.run
    if args.json:
        return json.dumps(diagnosis.result.as_dict())
    return api.tide_summary(diagnosis.result, name, protocol)


def add_tide(sub) -> None:
    tide = sub.add_parser("tide", help="TIDE error diagnosis (Bolya et al.): dAP of Cls, Loc, Both, Dupe, Bkg, Miss")
    options.store_or_files_args(tide)
    tide.add_argument("--mode", choices=api.TIDE_MODES, default="tide",
                      help="tide: tidecv's matching, AP50 and averaging (default); coco: pycocotools' (its AP50)")
    tide.add_argument("--iou-type", choices=api.TIDE_IOU_TYPES, default="bbox",
                      help="what is matched: boxes (default) or masks (segm, tidecv's mask mode)")
    tide.add_argument("--pos-threshold", type=options.iou, default=0.5, metavar="T",
                      help="IoU of a true positive (default 0.5)")
    tide.add_argument("--background-threshold", type=options.iou, default=0.1, metavar="T",
                      help="IoU at or below which a detection is background (default 0.1)")
    tide.add_argument("--max-dets", type=options.positive_int, default=100, metavar="N",
                      help="detections kept per image, all classes together (coco: per image and category; "
                           "default 100)")
    options.schedule_args(tide)
    tide.add_argument("--json", action="store_true", help="print one JSON object instead of tidecv's summary")
    tide.set_defaults(func=_cmd_tide)
