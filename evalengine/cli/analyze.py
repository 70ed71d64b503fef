"""The ``analyze`` command: COCO analyze (MATLAB ``CocoEval.analyze``) of a stored run or of COCO files — the AP of
each curve per area range, overall, as a table; ``--json`` also per category and supercategory."""

import json

from evalengine import api
from evalengine.cli import options


def _cmd_analyze(args) -> str:
    options.check_store_or_files(args)
    source = (args.gt, args.dt) if args.store is None else api.open(args.store)
    protocol = api.AnalyzeProtocol(iou_type=args.iou_type)
    result = api.analyze(source, args.run, protocol, **options.schedule(args)).result
    if args.json:
        return json.dumps(result.as_dict())
    masks = f", iou type {args.iou_type}" if args.iou_type != "bbox" else ""
    return (f"COCO analyze (MATLAB CocoEval.analyze){masks}, maxDets 100: each curve's AP, mean over the "
            f"{result.categories.height} categories (--json: per category and supercategory)\n"
            f"{api.report.table(api.analyze_table(result))}")


def add_analyze(sub) -> None:
    parser = sub.add_parser("analyze", help="COCO analyze (Hoiem-style, MATLAB CocoEval.analyze): PR curves C75, C50, "
                                            "Loc, Sim, Oth, BG, FN and their AP")
    options.store_or_files_args(parser)
    options.schedule_args(parser)
    parser.add_argument("--iou-type", choices=api.ANALYZE_IOU_TYPES, default="bbox",
                        help="what is matched: boxes (default), masks (segm, pycocotools' maskUtils.iou) or mask "
                             "boundaries (boundary, Cheng et al.'s boundary IoU)")
    parser.add_argument("--json", action="store_true",
                        help='print {"curves", "area_ranges", "max_dets", "overall": {area: {curve: ap}}, '
                             '"per_supercategory": {name: {area: {curve: ap}}}, "per_category": {id: {"name", '
                             '"supercategory", "ap": {area: {curve: ap}}}}}')
    parser.set_defaults(func=_cmd_analyze)
