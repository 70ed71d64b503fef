"""tidecv 1.0.1 (the official TIDE, a test extra) on in-memory COCO dicts, as its ``datasets.COCO`` /
``COCOResult`` load files (crowd annotations become ignore regions of their class; boxes only, no masks), and in
its mask mode on COCO files, read by its own loaders."""

from tidecv import TIDE, Data, datasets
from tidecv.quantify import TIDE as _TIDE


def tidecv_errors(gt: dict, dt: list) -> dict:
    """``{"ap50", "main", "special", "counts"}`` as tidecv computes them with its defaults."""
    truth, preds = Data("gt"), Data("run")
    for image in gt["images"]:
        truth.add_image(image["id"], image.get("file_name", str(image["id"])))
    for category in gt["categories"]:
        truth.add_class(category["id"], category.get("name", str(category["id"])))
    for ann in gt["annotations"]:
        if ann.get("iscrowd", 0):
            truth.add_ignore_region(ann["image_id"], ann["category_id"], ann["bbox"])
        else:
            truth.add_ground_truth(ann["image_id"], ann["category_id"], ann["bbox"])
    for det in dt:
        preds.add_detection(det["image_id"], det["category_id"], det["score"], det["bbox"])
    return _errors(truth, preds, TIDE.BOX)


def tidecv_mask_errors(gt_path, dt_path) -> dict:
    """``{"ap50", "main", "special", "counts"}`` of tidecv's ``TIDE.MASK`` mode on a COCO ground-truth file and a
    results file whose masks are compressed RLE (tidecv hands a result's ``segmentation`` to ``maskUtils.iou``
    unconverted)."""
    return _errors(datasets.COCO(str(gt_path)), datasets.COCOResult(str(dt_path), name="run"), TIDE.MASK)


def _errors(truth: Data, preds: Data, mode: str) -> dict:
    tide = TIDE()
    run = tide.evaluate(truth, preds, mode=mode)
    main = tide.get_main_errors()["run"]
    special = tide.get_special_errors()["run"]
    counts = {error.short_name: n for error, n in run.count_errors().items()}
    assert list(counts) == [e.short_name for e in _TIDE._error_types]
    return {"ap50": run.ap, "main": main, "special": special, "counts": counts}
