"""The COCOeval drop-in against pycocotools: stats, eval arrays and evalImgs array-equal on the golden cases and on
100 random datasets, under edited params (imgIds / catIds subsets, useCats 0, custom areaRng, maxDets, IoU and
recall thresholds); accumulate over an evalImgs list given back (torchvision's merge) equal too."""

import contextlib
import io
import json

import numpy as np
import pytest
from pycocotools.coco import COCO as RefCOCO
from pycocotools.cocoeval import COCOeval as RefCOCOeval

from evalengine.compat import COCO, COCOeval
from evalengine.errors import InputError
from tests.compat.pycocotools_parity import (assert_accumulated_equal, assert_eval_images_equal, assert_ious_equal,
                                            run_cocoeval)
from tests.conftest import DATA, SAMPLE_DT, SAMPLE_GT
from tests.generators import random_coco
from tests.shape_generators import random_keypoints, random_masks


def _set(**values):
    def edit(params):
        for name, value in values.items():
            setattr(params, name, value(params) if callable(value) else value)
    return edit


EDITS = [
    None,
    _set(useCats=0),
    _set(maxDets=[1, 5, 10]),
    _set(catIds=lambda p: p.catIds[:2]),
    _set(imgIds=lambda p: p.imgIds[::2] + [10**6]),
    _set(areaRng=[[0, 1e10], [0, 400], [400, 2500], [2500, 1e10]]),
    _set(iouThrs=np.array([0.1, 0.3, 0.5, 0.75, 0.9]), recThrs=np.linspace(0, 1, 11)),
    _set(useCats=0, maxDets=[1, 10, 1000], catIds=lambda p: p.catIds[1:]),
    _set(areaRng=[[0, 1e10], [0, 100], [100, 1e10]], areaRngLbl=["all", "small", "large"], maxDets=[100, 1, 10]),
]


def _compare(gt, dt, edit=None, iou_type="bbox"):
    ref = run_cocoeval(RefCOCO, RefCOCOeval, gt, dt, edit, iou_type)
    ours = run_cocoeval(COCO, COCOeval, gt, dt, edit, iou_type)
    assert_accumulated_equal(ours, ref)
    assert_eval_images_equal(ours.evalImgs, ref.evalImgs)
    assert_ious_equal(ours.ious, ref.ious)
    assert ours.params.imgIds == ref.params.imgIds and ours.params.catIds == ref.params.catIds
    ours.evalImgs = list(ours.evalImgs)  # another list: accumulate reads it, as pycocotools does
    with contextlib.redirect_stdout(io.StringIO()):
        ours.accumulate()
        ours.summarize()
    assert_accumulated_equal(ours, ref)
    return ours, ref


@pytest.mark.parametrize("batch", range(10))
def test_random_datasets_equal_pycocotools(batch):
    for seed in range(batch * 10, batch * 10 + 10):
        gt, dt = random_coco(seed)
        try:
            _compare(gt, dt, EDITS[seed % len(EDITS)])
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}: {exc}") from None


def test_golden_bbox_sample():
    gt, dt = json.loads(SAMPLE_GT.read_text()), json.loads(SAMPLE_DT.read_text())
    ours, _ = _compare(gt, dt)
    expected = json.loads((DATA / "cocoapi_fake100_expected.json").read_text())
    np.testing.assert_allclose(ours.stats, list(expected["runs"]["default"]["stats"].values()), rtol=0, atol=1e-12)


def test_golden_segm_sample():
    gt, dt = json.loads(SAMPLE_GT.read_text()), json.loads((DATA / "cocoapi_fakesegm100_dt.json").read_text())
    ours, _ = _compare(gt, dt, iou_type="segm")
    expected = json.loads((DATA / "cocoapi_fakesegm100_expected.json").read_text())
    np.testing.assert_allclose(ours.stats, list(expected["runs"]["default"]["stats"].values()), rtol=0, atol=1e-12)


def test_golden_keypoints():
    gt = json.loads((DATA / "fce_keypoints_gt.json").read_text())
    dt = json.loads((DATA / "fce_keypoints_dt.json").read_text())
    _compare(gt, dt, iou_type="keypoints")


@pytest.mark.parametrize("name", ["detectron2", "review_coco_eval", "torchmetrics"])
def test_golden_bbox_cases(name):
    gt = json.loads((DATA / f"{name}_gt.json").read_text())
    dt = json.loads((DATA / f"{name}_dt.json").read_text())
    _compare(gt, dt)


def test_load_res_from_file_list_and_array(tmp_path):
    gt, dt = random_coco(7)
    path = tmp_path / "dt.json"
    path.write_text(json.dumps(dt))
    array = np.array([[d["image_id"], *d["bbox"], d["score"], d["category_id"]] for d in dt])
    ref = run_cocoeval(RefCOCO, RefCOCOeval, gt, dt)
    for source in (str(path), dt, array):
        ours = run_cocoeval(COCO, COCOeval, gt, source)
        assert_accumulated_equal(ours, ref)
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO(str(tmp_path / "gt.json") if (tmp_path / "gt.json").write_text(json.dumps(gt)) else None)
        res, ref_res = coco_gt.loadRes(dt), RefCOCO(str(tmp_path / "gt.json")).loadRes(json.loads(json.dumps(dt)))
    assert res.dataset["annotations"] == ref_res.dataset["annotations"]
    assert res.getAnnIds(imgIds=[dt[0]["image_id"]]) == ref_res.getAnnIds(imgIds=[dt[0]["image_id"]])
    assert sorted(res.getImgIds(catIds=[1])) == sorted(ref_res.getImgIds(catIds=[1]))
    assert coco_gt.getCatIds() == ref_res.getCatIds()


def test_index_and_masks_as_pycocotools():
    with contextlib.redirect_stdout(io.StringIO()):
        ours, ref = COCO(str(SAMPLE_GT)), RefCOCO(str(SAMPLE_GT))
    assert ours.getAnnIds(catIds=[1], areaRng=[100, 5000], iscrowd=0) == ref.getAnnIds(catIds=[1], areaRng=[100, 5000], iscrowd=0)
    assert ours.getCatIds(supNms=["animal"]) == ref.getCatIds(supNms=["animal"])
    assert ours.loadImgs(ours.getImgIds()[3]) == ref.loadImgs(ref.getImgIds()[3])
    for ann in ours.loadAnns(ours.getAnnIds()[:60]):
        assert ours.annToRLE(ann) == ref.annToRLE(ann)
        assert np.array_equal(ours.annToMask(ann), ref.annToMask(ann))


def test_bad_results_are_located():
    gt, dt = random_coco(3)
    dt[4]["score"] = float("nan")
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = gt
        coco_gt.createIndex()
        with pytest.raises(InputError, match="results: detection at position 5"):
            coco_gt.loadRes(dt)


def test_corrected_mode_says_so():
    gt, dt = random_coco(3)
    gt["annotations"][0]["id"] = 0
    with pytest.warns(UserWarning, match="corrected mode"):
        run_cocoeval(COCO, lambda g, d, t: COCOeval(g, d, t, zero_id_quirk=False), gt, dt)


@pytest.mark.parametrize("batch", range(3))
def test_random_mask_datasets_equal_pycocotools(batch):
    """segm on random masks (polygons, compressed and uncompressed RLE, crowds, empty and border masks; results with
    and without boxes)."""
    for seed in range(batch * 10, batch * 10 + 10):
        gt, dt = random_masks(seed)
        try:
            _compare(gt, dt, EDITS[seed % len(EDITS)] if seed % 3 else None, iou_type="segm")
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}: {exc}") from None


@pytest.mark.parametrize("batch", range(2))
def test_random_keypoint_datasets_equal_pycocotools(batch):
    kps_edits = [None, _set(useCats=0), _set(maxDets=[5, 20]), _set(imgIds=lambda p: p.imgIds[:2])]
    for seed in range(batch * 10, batch * 10 + 10):
        gt, dt = random_keypoints(seed)
        try:
            _compare(gt, dt, kps_edits[seed % len(kps_edits)], iou_type="keypoints")
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}: {exc}") from None


def test_segm_of_box_results_uses_their_polygons():
    """pycocotools evaluates box results under segm by the polygon ``loadRes`` gives each box."""
    for seed in range(3):
        gt, dt = random_masks(seed)
        dt = [{"image_id": d["image_id"], "category_id": d["category_id"], "score": d["score"],
               "bbox": d.get("bbox", [1.0, 2.0, 5.5, 4.0])} for d in dt]
        _compare(gt, dt, iou_type="segm")


def test_no_results_at_all():
    """torchvision's evaluator gives COCOeval an empty ``COCO()`` for a batch without results."""
    gt, _ = random_coco(2)
    runs = []
    for coco_class, eval_class in ((RefCOCO, RefCOCOeval), (COCO, COCOeval)):
        with contextlib.redirect_stdout(io.StringIO()):
            coco_gt = coco_class()
            coco_gt.dataset = json.loads(json.dumps(gt))
            coco_gt.createIndex()
            ev = eval_class(coco_gt, coco_class(), "bbox")
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
        runs.append(ev)
    assert_accumulated_equal(runs[1], runs[0])
    assert_eval_images_equal(runs[1].evalImgs, runs[0].evalImgs)
    assert_ious_equal(runs[1].ious, runs[0].ious)
