"""Declarations and readings shared by the commands: the COCO protocol's options, scheduling, progress, output."""

import argparse
import json
import math
import sys
from pathlib import Path

from evalengine import api
from evalengine.api import formats
from evalengine.errors import EvalEngineError, first_line

STORE_HELP = "a store folder, or an s3:// or gs:// URL (credentials from the environment)"


def store_command(sub, name: str, help: str, func) -> argparse.ArgumentParser:
    """A subcommand whose first argument is a store, run by ``func(args)``."""
    parser = sub.add_parser(name, help=help)
    parser.add_argument("store", help=STORE_HELP)
    parser.set_defaults(func=func)
    return parser


def store_or_files_args(parser: argparse.ArgumentParser, gt_help: str = "COCO ground-truth JSON",
                        dt_help: str = "detections: COCO result JSON, JSON Lines, Parquet or CSV") -> None:
    """``STORE`` (and ``--run``) or ``--gt`` and ``--dt`` files (evaluated in a temporary store)."""
    parser.add_argument("store", nargs="?", default=None, help=f"a store: {STORE_HELP} (or --gt and --dt)")
    parser.add_argument("--gt", default=None, help=gt_help)
    parser.add_argument("--dt", default=None, help=dt_help)
    parser.add_argument("--run", default=api.DEFAULT_RUN, help="the stored run (with STORE)")


def check_store_or_files(args) -> None:
    """A command that reads a STORE or ``--gt``/``--dt`` files (a temporary store) is given exactly one of them."""
    if (args.store is None) == (args.gt is None or args.dt is None):
        raise EvalEngineError(f"{args.command}: give a STORE, or --gt and --dt (not both)")


def iou_type_args(parser: argparse.ArgumentParser, scope: str = "") -> None:
    """``--iou-type`` and ``--kpt-sigmas``: what a COCO protocol matches."""
    parser.add_argument("--iou-type", choices=api.IOU_TYPES, default="bbox",
                        help=f"{scope}what is matched: boxes (default), masks (segm), mask boundaries (boundary) or "
                             "keypoints (OKS, pycocotools' defaults: max dets 20, areas all/medium/large)")
    parser.add_argument("--kpt-sigmas", default=None, metavar="FILE.json",
                        help="keypoint sigmas: a JSON list (every category) or {category id: list} (the others: "
                             "COCO's 17 person sigmas, the default)")


def protocol_args(parser: argparse.ArgumentParser) -> None:
    """The COCO protocol's options (:func:`matching_args`), scheduling, ``--json`` and progress."""
    matching_args(parser)
    schedule_args(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the summary table")
    run_args(parser)


def matching_args(parser) -> None:
    """The COCO protocol's options (a parser or an argument group): what :func:`protocol` reads."""
    iou_type_args(parser)
    parser.add_argument("--use-cats", type=int, choices=[0, 1], default=1,
                        help="0 pools all categories into one (class-agnostic, pycocotools useCats=0)")
    parser.add_argument("--max-dets", type=positive_int, nargs="+", default=None, metavar="N",
                        help="detection caps per image and category (default: 1 10 100; keypoints: 20)")
    parser.add_argument("--iou-thresholds", type=iou, nargs="+", default=None, metavar="T",
                        help="IoU thresholds (default: pycocotools' linspace(.5, .95, 10))")
    parser.add_argument("--area-ranges", nargs="+", default=None, metavar="LABEL:LO:HI", type=_area_range,
                        help="area ranges, bounds inclusive (default: all:0:1e10 small:0:1024 medium:1024:9216 "
                             "large:9216:1e10; keypoints: no small); the summary prints an AP and an AR row for each range "
                             "(pycocotools' own rows for all/small/medium/large)")
    parser.add_argument("--keep-zero-id-quirk", type=int, choices=[0, 1], default=1,
                        help="1 (default) reproduces pycocotools never matching ground-truth id 0; 0 corrects it")


def schedule_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scheduler", choices=api.SCHEDULERS, default="threads", help="Dask scheduler for matching")
    parser.add_argument("--workers", type=positive_int, default=None,
                        help="threads or processes of the local scheduler (default: one per core)")
    parser.add_argument("--address", default=None, help="tcp://HOST:PORT of a dask.distributed scheduler")


def tag_args(parser: argparse.ArgumentParser) -> None:
    """``--tag KEY=VALUE`` (repeatable): labels of the run the command adds (:mod:`evalengine.store.tags`)."""
    parser.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                        help="label the run (repeatable), e.g. --tag model=frcnn --tag perturbation=blur")


def run_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no progress bars (they show only on a terminal)")
    parser.add_argument("--profile", action="store_true", help="print the time of each phase on stderr")


def schedule(args) -> dict:
    """The scheduling options as the API takes them."""
    return {"scheduler": args.scheduler, "address": args.address, "workers": args.workers}


def phases(args) -> api.Phases:
    return api.Phases(quiet=args.quiet)


def profiled(args, timed: api.Phases, text: str) -> str:
    if args.profile:
        print(timed.report(), file=sys.stderr)
    return text


def _area_range(text: str) -> tuple:
    try:
        label, lo, hi = text.split(":")
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LABEL:LO:HI (e.g. small:0:1024), got {text!r}") from None
    return label, number(lo), number(hi)


def at_least(minimum: int):
    """The type of an integer option that must be ``>= minimum`` (a count of shards, workers, detections, …)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


positive_int, non_negative_int = at_least(1), at_least(0)


def number(text: str) -> float:
    """A float that is a number (``nan`` is not; ``inf`` is, e.g. an open upper area bound)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    return value


def iou(text: str) -> float:
    """An IoU threshold: a number in [0, 1]."""
    value = number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"an IoU threshold is between 0 and 1, got {text}")
    return value


def output_file(text: str) -> str:
    """A file the command writes: in an existing folder, and not itself a folder (checked before the work)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder, where a file is needed")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no folder {str(path.parent)!r} to write it in")
    return text


def protocol(args) -> api.CocoProtocol:
    return api.CocoProtocol(
        iou_thresholds=tuple(args.iou_thresholds) if args.iou_thresholds else api.COCO_IOU_THRESHOLDS,
        area_ranges=tuple(args.area_ranges) if args.area_ranges else None,
        max_dets=tuple(args.max_dets) if args.max_dets else None,
        use_cats=bool(args.use_cats),
        zero_id_quirk=bool(args.keep_zero_id_quirk),
        iou_type=args.iou_type,
        kpt_oks_sigmas=kpt_sigmas(args.kpt_sigmas),
    )


def kpt_sigmas(path):
    """``--kpt-sigmas FILE.json``: a list, or an object of lists keyed by category id."""
    if path is None:
        return None
    try:
        value = json.loads(read_text(path))
    except ValueError as exc:
        raise EvalEngineError(f"{path}: not valid JSON ({first_line(exc)})") from None
    if not isinstance(value, (list, dict)):
        raise EvalEngineError(f"{path}: expected a list of sigmas or an object {{category id: list}}, "
                              f"got {type(value).__name__}")
    try:
        return api.CocoProtocol(iou_type="keypoints", kpt_oks_sigmas=value).kpt_oks_sigmas
    except EvalEngineError as exc:
        raise EvalEngineError(f"{path}: {exc}") from None


def read_text(path) -> str:
    """A text file the user gave (a query, parameters): UTF-8, a byte-order mark skipped; or a located error."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise EvalEngineError(f"{path}: cannot read ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise EvalEngineError(f"{path}: not UTF-8 text (byte {exc.start + 1}: {exc.reason})") from None


def read_json_object(path) -> dict:
    """A JSON object the user gave in a file, or a located error."""
    try:
        value = json.loads(read_text(path))
    except ValueError as exc:
        raise EvalEngineError(f"{path}: not valid JSON ({first_line(exc)})") from None
    if not isinstance(value, dict):
        raise EvalEngineError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def format_args(parser: argparse.ArgumentParser) -> None:
    """``--gt-format``, ``--dt-format``, ``--images``, ``--names``: inputs in the formats users have (YOLO, CVAT,
    LabelMe, OpenImages CSV; :mod:`evalengine.io.formats`), recognised from the paths unless named."""
    parser.add_argument("--gt-format", choices=formats.GT_FORMATS, default=None,
                        help="the ground truth's format (default: recognised: a folder with labels/ is YOLO, a .xml "
                             "file CVAT, a folder of .json LabelMe, a CSV with ImageID,LabelName OpenImages)")
    parser.add_argument("--dt-format", choices=formats.DT_FORMATS, default=None,
                        help="the detections' format (default: recognised: a folder of .txt is YOLO, a CSV with "
                             "ImageID,LabelName OpenImages, else COCO results, JSON Lines or Parquet)")
    parser.add_argument("--images", default=None, metavar="FOLDER|TABLE",
                        help="image sizes of normalised boxes (YOLO, OpenImages): a folder of images (headers only "
                             "are read) or a CSV/Parquet table image,width,height (YOLO default: images/ beside labels/)")
    parser.add_argument("--names", default=None, metavar="FILE",
                        help="YOLO class names: data.yaml (names:) or classes.txt (default: found beside the labels)")


def foreign_formats(args, native_gt=("coco",), native_dt=("coco",)) -> bool:
    """Whether the ``--gt``/``--dt`` of ``args`` are in formats the command's own readers do not read (``native_*``),
    so that :func:`evalengine.api.formats.evaluate_formats` reads them."""
    gt_kind, dt_kind = formats.input_formats(args.gt, args.dt, args.gt_format, args.dt_format)
    given = args.images is not None or args.names is not None  # checked there: never ignored
    return gt_kind not in native_gt or dt_kind not in native_dt or given


def format_inputs(args) -> dict:
    """The format options as :func:`evalengine.api.formats.evaluate_formats` and ``ingest_formats`` take them."""
    return {"gt_format": args.gt_format, "dt_format": args.dt_format, "images": args.images, "names": args.names}
