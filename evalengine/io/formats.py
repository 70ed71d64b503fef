"""The annotation and detection formats any protocol reads, by name or recognised from the path: one reader per format
(:mod:`evalengine.io.coco`, ``voc``, ``yolo``, ``cvat``, ``labelme``, ``openimages_boxes``, ``detections``)."""

from pathlib import Path

from evalengine.errors import InputError
from evalengine.io.coco import CocoDataset, read_coco_gt
from evalengine.io.cvat import read_cvat
from evalengine.io.detections import estimate_rows, iter_detections
from evalengine.io.labelme import read_labelme
from evalengine.io.openimages_boxes import iter_openimages_predictions, read_openimages_gt
from evalengine.io.voc import RESULT_FILE, estimate_result_rows, iter_devkit_results, read_voc_annotations
from evalengine.io.yolo import is_yolo_folder, iter_yolo_predictions, read_yolo_gt

GT_FORMATS = ("coco", "voc", "yolo", "cvat", "labelme", "openimages")
DT_FORMATS = ("coco", "voc", "yolo", "openimages")
NORMALISED = ("yolo", "openimages")  # formats that need the image sizes


def _is_openimages_csv(path: Path) -> bool:
    """A CSV file whose header names ``ImageID`` and ``LabelName`` (the OpenImages layouts)."""
    if path.suffix.lower() != ".csv" or not path.is_file():
        return False
    with open(path, encoding="utf-8-sig", errors="replace") as handle:
        header = handle.readline().strip().split(",")
    return "ImageID" in header and "LabelName" in header


def _known(given: str, allowed: tuple, what: str) -> str:
    if given not in allowed:
        raise InputError(f"{what} format must be one of {', '.join(allowed)}, got {given!r}")
    return given


def gt_format(path, given: str | None = None) -> str:
    """``given``, else the format ``path`` looks like: a folder of YOLO labels, VOC XML or LabelMe JSON; a CVAT XML,
    an OpenImages CSV or a COCO JSON file."""
    if given is not None:
        return _known(given, GT_FORMATS, "ground-truth")
    path = Path(path)
    if path.is_dir():
        if any(path.glob("*.xml")):
            return "voc"
        if is_yolo_folder(path):
            return "yolo"
        if any(path.glob("*.json")):
            return "labelme"
        return "coco"  # whose reader says what a folder is not
    if path.suffix.lower() == ".xml":
        return "cvat"
    return "openimages" if _is_openimages_csv(path) else "coco"


def dt_format(path, given: str | None = None) -> str:
    """``given``, else: a folder of YOLO prediction files (with ``labels/`` or ``.txt`` files, none a devkit result
    file), else of devkit result files (voc); an OpenImages CSV; else a COCO result file, JSON Lines or Parquet."""
    if given is not None:
        return _known(given, DT_FORMATS, "detection")
    path = Path(path)
    if path.is_dir():
        devkit = any(RESULT_FILE.fullmatch(p.name) for p in path.iterdir())
        return "yolo" if is_yolo_folder(path) and not devkit else "voc"
    return "openimages" if _is_openimages_csv(path) else "coco"


def read_gt(path, fmt: str, images=None, names=None) -> CocoDataset:
    """The ground truth of ``path`` in format ``fmt`` (:func:`gt_format`); ``images``: the image sizes of a normalised
    format (a folder of images or a table); ``names``: YOLO's ``data.yaml`` / ``classes.txt``."""
    if fmt == "openimages" and images is None:
        raise InputError(f"{path}: OpenImages boxes are normalised: give the image sizes (--images TABLE with columns "
                         "image, width, height, or a folder of images)")
    if fmt == "yolo":
        return read_yolo_gt(path, images, names)
    if fmt == "openimages":
        return read_openimages_gt(path, images)
    return {"coco": read_coco_gt, "voc": read_voc_annotations, "cvat": read_cvat, "labelme": read_labelme}[fmt](path)


def iter_dt(path, dataset: CocoDataset, fmt: str):
    """The detection frames of ``path`` in format ``fmt`` (:func:`dt_format`) against ``dataset``."""
    readers = {"coco": iter_detections, "voc": iter_devkit_results, "yolo": iter_yolo_predictions,
               "openimages": iter_openimages_predictions}
    return readers[fmt](path, dataset)


def estimate_dt_rows(path, fmt: str) -> int:
    """About how many detections ``path`` holds (to choose a shard count)."""
    path = Path(path)
    if fmt == "coco":
        return estimate_rows(path)
    if fmt == "voc":
        return estimate_result_rows(path)
    files = path.rglob("*.txt") if path.is_dir() else [path]
    return sum(p.stat().st_size for p in files) // 40
