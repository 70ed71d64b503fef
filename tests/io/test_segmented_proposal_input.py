"""Segmented-proposal input: every form of mask and every file format stores the same run (PNG masks, per-image
folders and label maps, included), masks are de-duplicated by mask, and bad input is one located line (exit 2 through
the command, nothing left behind)."""

import json

import numpy as np
import polars as pl
import pytest
from PIL import Image
from pycocotools import mask as mask_utils

import evalengine
from evalengine.api import ProposalOrder
from evalengine.errors import InputError
from tests.io.test_bad_input_corpus import cli
from tests.shape_generators import _rle

H, W = 6, 8
GT = {"images": [{"id": 1, "height": H, "width": W, "file_name": "a.jpg"},
                 {"id": 2, "height": H, "width": W + 1, "file_name": "b.jpg"}],
      "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 3, 2], "area": 6, "iscrowd": 0,
                       "segmentation": [[1, 1, 4, 1, 4, 3, 1, 3]]},
                      {"id": 2, "image_id": 2, "category_id": 1, "bbox": [0, 0, 2, 2], "area": 4, "iscrowd": 0,
                       "segmentation": _rle(np.pad(np.ones((2, 2)), ((0, H - 2), (0, W - 1))), "compressed")}],
      "categories": [{"id": 1, "name": "object"}]}


def _bitmaps():
    """Per image, three masks (the first two equal: a duplicate) and a 1-pixel one."""
    out = {}
    for image in GT["images"]:
        a = np.zeros((image["height"], image["width"]), np.uint8)
        a[1:4, 1:5] = 1
        b = np.zeros_like(a)
        b[0, 0] = 1
        c = np.zeros_like(a)
        c[2:, 3:] = 1
        out[image["id"]] = [a, a.copy(), b, c]
    return out


@pytest.fixture()
def gt_path(tmp_path):
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(GT))
    return path


def _stored(store) -> pl.DataFrame:
    return (store.proposals().collect().sort("image_id", "proposal_id")
            .select("image_id", "proposal_id", "rank", "x", "y", "w", "h", "mask_h", "mask_w", "mask_rle"))


def test_every_form_and_format_stores_the_same_masks(tmp_path, gt_path):
    rows = [(image_id, bitmap) for image_id, bitmaps in _bitmaps().items() for bitmap in bitmaps]
    forms = [_rle(m, ("compressed", "uncompressed")[k % 2]) for k, (_, m) in enumerate(rows)]
    records = [{"image_id": i, "segmentation": s} for (i, _), s in zip(rows, forms)]
    (tmp_path / "p.json").write_text(json.dumps(records))
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    pl.DataFrame({"image_id": [r["image_id"] for r in records],
                  "segmentation": [json.dumps(r["segmentation"]) for r in records]}).write_parquet(tmp_path / "p.parquet")
    for image_id, bitmaps in _bitmaps().items():  # one PNG per proposal, in name order
        (tmp_path / "png" / f"img{image_id}").mkdir(parents=True)
        for k, m in enumerate(bitmaps):
            Image.fromarray(m * 255).save(tmp_path / "png" / f"img{image_id}" / f"{k:03d}.png")
    (tmp_path / "png" / "img1").rename(tmp_path / "png" / "1")  # by id, or by the file name's stem
    (tmp_path / "png" / "img2").rename(tmp_path / "png" / "b")
    order = ProposalOrder("given")
    stores = [evalengine.ingest_proposals(gt_path, tmp_path / name, tmp_path / f"s{k}", order=order, n_shards=2)
              for k, name in enumerate(("p.json", "p.jsonl", "p.parquet", "png"))]
    first = _stored(stores[0])
    assert first.get_column("rank").to_list() == [1, None, 2, 3] * 2  # the equal mask is a duplicate
    for image_id, bitmaps in _bitmaps().items():
        mine = first.filter(pl.col("image_id") == image_id)
        for k, m in enumerate(bitmaps):
            rle = mask_utils.encode(np.asfortranarray(m))
            assert mine.row(k, named=True)["mask_rle"] == _rle(m, "compressed")["counts"]
            assert [mine.item(k, c) for c in "xywh"] == mask_utils.toBbox(rle).tolist()
    for store in stores[1:]:
        assert _stored(store).equals(first)


def test_label_maps_and_no_dedup(tmp_path, gt_path):
    labels = np.zeros((H, W), np.uint16)
    labels[:3, :4], labels[3:, :], labels[0, 7] = 7, 300, 2
    (tmp_path / "maps").mkdir()
    Image.fromarray(labels).save(tmp_path / "maps" / "1.png")
    rgb = np.zeros((H, W + 1, 3), np.uint8)
    rgb[:2, :2] = (1, 1, 0)  # label 257
    Image.fromarray(rgb).save(tmp_path / "maps" / "b.png")
    store = evalengine.ingest_proposals(gt_path, tmp_path / "maps", tmp_path / "s", order=ProposalOrder("given"))
    table = _stored(store)
    expected = [labels == 2, labels == 7, labels == 300, np.pad(np.ones((2, 2)), ((0, H - 2), (0, W - 1)))]
    assert table.get_column("mask_rle").to_list() == [_rle(m, "compressed")["counts"] for m in expected]
    assert table.get_column("rank").to_list() == [1, 2, 3, 1]
    ev = store.evaluate_proposals(protocol=evalengine.api.ProposalProtocol(budgets=(1, 3), iou_type="segm"))
    best = ev.gt_matches().collect().sort("gt_id", "budget").get_column("best_iou").to_list()
    assert best == [0.0, 6 / 12, 1.0, 1.0]  # object 1 (rows 1-2, columns 1-3) against label 7; object 2 is label 257


@pytest.mark.parametrize("segmentation, message", [
    ({"size": [H, W + 1], "counts": [H * (W + 1)]},
     "p.json: proposal at position 2: 'segmentation' RLE size differs from its image's [height, width] ([6, 9], "
     "the image's [6, 8])"),
    ({"size": [H, W], "counts": [5, 3]}, "p.json: proposal at position 2: 'segmentation' RLE counts sum to 8, not "
                                          "height x width = 48"),
    ({"size": [H, W], "counts": "0{"}, "p.json: proposal at position 2: 'segmentation' counts is not a compressed "
                                      "RLE string (0{)"),
    ([[1, 2, 3]], "p.json: proposal at position 2: 'segmentation' polygon 1 has an odd number of coordinates (3)"),
    (None, "p.json: proposal at position 2: missing field 'segmentation'"),
])
def test_bad_masks_are_located(tmp_path, gt_path, segmentation, message):
    good = {"image_id": 1, "segmentation": _rle(np.ones((H, W)), "compressed"), "score": 0.5}
    (tmp_path / "p.json").write_text(json.dumps([good, {**good, "segmentation": segmentation}]))
    code, out, err = cli(tmp_path, "proposals", "--gt", gt_path, "--proposals", tmp_path / "p.json", "--iou-type",
                         "segm", "--store", tmp_path / "store")
    assert code == 2 and out == ""
    assert err == [f"evalengine: error: {tmp_path / message}"]
    assert not (tmp_path / "store").exists()


def test_bad_png_input_is_located(tmp_path, gt_path):
    folder = tmp_path / "png"
    (folder / "1").mkdir(parents=True)
    Image.fromarray(np.ones((H, W + 2), np.uint8)).save(folder / "1" / "0.png")
    with pytest.raises(InputError, match=r"png/1/0.png: mask size \[6, 10\] differs from its image's \[height, width\] "
                                         r"\[6, 8\]$"):
        list(evalengine.io.proposals.iter_proposals(folder, evalengine.open(_empty(tmp_path, gt_path)).layout.read("images")))
    (folder / "1" / "0.png").write_bytes(b"not a png")
    with pytest.raises(InputError, match=r"png/1/0.png: not a readable PNG"):
        evalengine.ingest_proposals(gt_path, folder, tmp_path / "s", order=ProposalOrder("given"))
    (folder / "1" / "0.png").unlink()
    (folder / "9").mkdir()
    with pytest.raises(InputError, match=r"png/1: a proposal folder of an image must hold .png masks"):
        evalengine.ingest_proposals(gt_path, folder, tmp_path / "s", order=ProposalOrder("given"))
    (folder / "1").rmdir()
    with pytest.raises(InputError, match=r"png/9: no image with id or file name '9' in the ground truth"):
        evalengine.ingest_proposals(gt_path, folder, tmp_path / "s", order=ProposalOrder("given"))
    assert not (tmp_path / "s").exists()


def _empty(tmp_path, gt_path):
    return evalengine.ingest_gt(gt_path, tmp_path / "gt_store").path


def test_segm_needs_masks_on_both_sides(tmp_path, gt_path):
    boxes = tmp_path / "boxes.json"
    boxes.write_text(json.dumps([{"image_id": 1, "bbox": [0, 0, 2, 2], "score": 1.0}]))
    code, _, err = cli(tmp_path, "proposals", "--gt", gt_path, "--proposals", boxes, "--iou-type", "segm")
    assert code == 2
    assert err == [f"evalengine: error: {boxes}: proposal run 'proposals' has no masks ('segmentation'), which "
                   "iou_type 'segm' needs (missing: mask_h, mask_w, mask_rle)"]


def test_box_convention_is_for_boxes(tmp_path, gt_path):
    (tmp_path / "p.json").write_text(json.dumps([{"image_id": 1, "segmentation": _rle(np.ones((H, W)), "compressed")}]))
    with pytest.raises(InputError, match=r"p.json: box convention 'pixel-inclusive' is for proposal boxes; segmented "
                                         r"proposals' boxes are their masks' \(toBbox\)$"):
        evalengine.ingest_proposals(gt_path, tmp_path / "p.json", tmp_path / "s", order=ProposalOrder("given"),
                                    box_convention="pixel-inclusive")


def test_oma_is_for_boxes(tmp_path, gt_path):
    (tmp_path / "p.json").write_text(json.dumps([{"image_id": 1, "segmentation": _rle(np.ones((H, W)), "compressed")}]))
    code, out, err = cli(tmp_path, "proposals", "--gt", gt_path, "--proposals", tmp_path / "p.json", "--iou-type",
                         "segm", "--ordering", "given", "--oma")
    assert code == 2 and out == ""
    assert err == ["evalengine: error: OMA is defined on boxes (Wang et al.'s HPRS of a box lattice), not on iou_type "
                   "'segm'"]
