"""``OidUtilTest`` (oid_challenge_evaluation_utils_test.py of tf-models-research-object-detection 2.8.0.post1,
Apache-2.0; not recorded in the testdata: the masks and expected boxes below are copied from it) through our
OpenImages mask reader: ``_to_normalized_box`` (a mask's extent over the image's size, [0, 0, 0, 0] when empty) and
``_decode_raw_data_into_masks_and_boxes`` (base64 of zlib of a COCO RLE string decoded; no mask at all for empty
fields)."""

import base64
import zlib

import numpy as np
import polars as pl
from pycocotools import mask as mask_utils

from evalengine.io.openimages import iter_predictions, read_ground_truth
from tests.openimages_cases import compressed


def _encode(mask: np.ndarray) -> str:
    """The TF test's ``encode_mask``: COCO RLE, zlib at its best compression, base64."""
    counts = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8).reshape(*mask.shape, 1)))[0]["counts"]
    return base64.b64encode(zlib.compress(counts, zlib.Z_BEST_COMPRESSION)).decode()


def _dataset(tmp_path):
    (tmp_path / "h.json").write_text('{"LabelName": "root", "Subcategory": [{"LabelName": "/m/a"}]}')
    (tmp_path / "b.csv").write_text("ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf\nimg,/m/a,0.1,0.2,0.3,0.4,0\n")
    return read_ground_truth(tmp_path / "b.csv", None, tmp_path / "h.json")


def _predicted(tmp_path, masks) -> pl.DataFrame:
    """Predictions of ``masks`` read with their masks: the stored masks and the boxes made from them."""
    rows = [{"ImageID": "img", "LabelName": "/m/a", "Score": 0.5, "ImageWidth": m.shape[1], "ImageHeight": m.shape[0],
             "Mask": _encode(m)} for m in masks]
    pl.DataFrame(rows).write_csv(tmp_path / "p.csv")
    return pl.concat(list(iter_predictions(tmp_path / "p.csv", _dataset(tmp_path), with_masks=True)))


def test_mask_to_normalized_box(tmp_path):
    masks = [np.array([[0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]]),
             np.array([[0, 0, 0, 0], [0, 1, 0, 1], [0, 1, 0, 1], [0, 1, 1, 1]]),
             np.zeros((4, 4), int)]
    found = _predicted(tmp_path, masks).select("y", "x", "y_max", "x_max").to_numpy()
    np.testing.assert_array_equal(found, [[0.25, 0.25, 0.75, 0.5], [0.25, 0.25, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])


def test_decode_to_tensors(tmp_path):
    mask1 = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0]], dtype=np.uint8)
    mask2 = np.zeros((3, 4), dtype=np.uint8)
    dt = _predicted(tmp_path, [mask1, mask2])
    np.testing.assert_array_equal(dt.select("y", "x", "y_max", "x_max").to_numpy(),
                                  [[0.0, 0.5, 2.0 / 3.0, 1.0], [0, 0, 0, 0]])
    assert dt.get_column("mask_rle").to_list() == [compressed(mask1), compressed(mask2)]
    assert dt.select("mask_h", "mask_w").rows() == [(3, 4), (3, 4)]


def test_decode_to_tensors_no_masks(tmp_path):
    """Rows whose Mask (and size) are empty: the reference's 1 × 1 zero masks, which it never evaluates; here no mask
    (a null ``mask_rle``), which the evaluator's mask mode treats the same way (README, "Instance segmentation")."""
    (tmp_path / "h.json").write_text('{"LabelName": "root", "Subcategory": [{"LabelName": "/m/a"}]}')
    (tmp_path / "b.csv").write_text("ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf,ImageWidth,ImageHeight,Mask\n"
                                    "img,/m/a,0.1,0.2,0.3,0.4,0,,,\nimg,/m/a,0.5,0.6,0.3,0.4,1,,,\n")
    dataset = read_ground_truth(tmp_path / "b.csv", None, tmp_path / "h.json", with_masks=True)
    assert dataset.gt.get_column("mask_rle").null_count() == 2
