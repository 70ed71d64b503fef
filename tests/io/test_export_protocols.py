"""The per-object export of the LVIS and VOC match tables, against their references: lvis-api 0.5.3's ``eval_imgs``
(area all) on random federated sets, and the per-detection outcomes of the ``voc_eval.py`` transcription of
``tests/match/test_voc_differential.py``, on random sets (difficult objects, ties); the export refuses what the
protocol does not have."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine.api import LvisProtocol, VocProtocol, ingest_lvis, ingest_voc
from evalengine.api.formats import export
from evalengine.errors import ProtocolError
from tests.generators import random_coco
from tests.helpers import write_inputs
from tests.lvis_reference import lvis_api, random_lvis
from tests.match.test_voc_differential import voc_outcomes

THRESHOLDS = ((0, 0.5), (5, 0.75))


def _exported(store, path, protocol, threshold) -> tuple:
    """``({det_id: (eval, eval_id)}, {gt_id: (eval, eval_id)})`` of the fiftyone export; detections not evaluated
    (null ``eval``) left out."""
    rows = pl.read_parquet(export(store, path, "fiftyone", iou_threshold=threshold, protocol=protocol))
    dt = {r["id"]: (r["eval"], r["eval_id"]) for r in rows.filter(pl.col("kind") == "prediction").iter_rows(named=True)
          if r["eval"] is not None}
    gt = {r["id"]: (r["eval"], r["eval_id"]) for r in rows.filter(pl.col("kind") == "ground_truth").iter_rows(named=True)}
    return dt, gt


@pytest.mark.parametrize("seed", range(16))
def test_lvis_export_equals_lvis_api_eval_imgs(tmp_path, seed):
    gt, dt = random_lvis(seed)
    files = write_inputs(tmp_path, gt, dt)
    store = ingest_lvis(*files, tmp_path / "store")
    stored = store.dt().sort("det_id").collect()
    assert stored.select("image_id", "category_id", "score").rows() == [
        (d["image_id"], d["category_id"], d["score"]) for d in dt]  # det_id k: the file's k-th result
    # lvis-api renumbers the results after its cap; "row" (kept in its annotations) gives back the file's order
    ev = lvis_api(gt, [{**d, "row": k + 1} for k, d in enumerate(dt)])
    det_id = {i: ann["row"] for i, ann in ev.lvis_dt.anns.items()}
    for t_index, threshold in THRESHOLDS:
        expected_dt, expected_gt = {}, {}
        for entry in ev.eval_imgs:
            if entry is None or list(entry["area_rng"]) != [0, 1e10]:
                continue
            for k, det in enumerate(entry["dt_ids"]):
                partner, ignored = int(entry["dt_matches"][t_index, k]), bool(entry["dt_ignore"][t_index, k])
                expected_dt[det_id[det]] = ("ignored" if ignored else "tp" if partner else "fp",
                                            str(partner) if partner and not ignored else "")
            for k, gt_id in enumerate(entry["gt_ids"]):
                partner, ignored = int(entry["gt_matches"][t_index, k]), bool(entry["gt_ignore"][k])
                expected_gt[gt_id] = ("ignored" if ignored else "tp" if partner else "fn",
                                      str(det_id[partner]) if partner and not ignored else "")
        got_dt, got_gt = _exported(store, tmp_path / f"f{t_index}.parquet", LvisProtocol(), threshold)
        assert got_dt == expected_dt, seed
        assert got_gt == expected_gt, seed
    with pytest.raises(ProtocolError, match="max_dets 301 is above the match table's cap 300"):
        export(store, tmp_path / "x.json", max_dets=301, protocol=LvisProtocol())


def _voc_inputs(seed: int) -> tuple:
    """A random COCO pair for the VOC protocol: no crowd, some objects ``difficult``."""
    gt, dt = random_coco(seed)
    rng = np.random.default_rng(seed)
    for ann in gt["annotations"]:
        ann["iscrowd"] = 0
        ann["difficult"] = int(rng.random() < 0.2)
    return gt, dt


@pytest.mark.parametrize("seed", range(16))
def test_voc_export_equals_voc_eval_outcomes(tmp_path, seed):
    gt, dt = _voc_inputs(seed)
    store = ingest_voc(*write_inputs(tmp_path, gt, dt), tmp_path / "store")
    stored = store.dt().sort("det_id").collect()
    assert stored.select("image_id", "category_id", "score").rows() == [
        (d["image_id"], d["category_id"], d["score"]) for d in dt]

    def corners(box):  # the devkit's 1-based inclusive corners of a continuous COCO box
        return [box[0] + 1, box[1] + 1, box[0] + box[2], box[1] + box[3]]

    recs = {image["id"]: [{"name": a["category_id"], "bbox": corners(a["bbox"]), "difficult": a["difficult"]}
                          for a in gt["annotations"] if a["image_id"] == image["id"]] for image in gt["images"]}
    for threshold in (0.5, 0.75):
        expected = {}
        for category in (c["id"] for c in gt["categories"]):
            rows = [(k + 1, d) for k, d in enumerate(dt) if d["category_id"] == category]
            lines = [(d["image_id"], d["score"], *corners(d["bbox"])) for _, d in rows]
            _, tp, fp, _, _ = voc_outcomes(recs, lines, category, threshold, False, False)
            order = np.argsort(-np.array([d["score"] for _, d in rows], dtype=float), kind="stable")
            for position, index in enumerate(order):
                expected[rows[index][0]] = "tp" if tp[position] else "fp" if fp[position] else "ignored"
        got, _ = _exported(store, tmp_path / "v.parquet", VocProtocol(iou_thresholds=(0.5, 0.75)), threshold)
        assert {k: v[0] for k, v in got.items()} == expected, seed


def test_export_of_each_protocol_through_the_command(tmp_path):
    """``export --protocol voc|lvis`` writes the table of that protocol; options of another protocol are refused."""
    from tests.cli.test_formats_cli import command

    gt, dt = random_lvis(3)
    files = write_inputs(tmp_path, gt, dt)
    store = tmp_path / "store"
    ingest_lvis(*files, store)
    for protocol in ("voc", "lvis"):
        result = command("export", store, "--protocol", protocol, "--out", tmp_path / f"{protocol}.json")
        assert result.returncode == 0, result.stderr
        rows = json.loads((tmp_path / f"{protocol}.json").read_text())
        assert len(rows) == len(dt) and {"matched_gt_id", "iou", "tp", "ignored"} <= rows[0].keys()
    for argv, message in ((["--protocol", "lvis", "--strict"], "--strict is an option of the voc protocol, not of lvis"),
                          (["--protocol", "voc", "--max-dets", "10"], "--max-dets is an option of the coco protocol"),
                          (["--protocol", "lvis", "--area-ranges", "all:0:1"], "--area-ranges is an option of the "
                                                                              "coco protocol, not of lvis")):
        result = command("export", store, *argv, "--out", tmp_path / "x.json")
        assert result.returncode == 2 and message in result.stderr and result.stderr.count("\n") == 1
        assert not (tmp_path / "x.json").exists()
