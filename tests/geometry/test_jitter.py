"""Boxes at an exact IoU (spec §3.3.3, Eqs. 1–8; §7 T11): a ground truth shifted to IoU γ is a TP for every τ ≤ γ and
an FP for every τ > γ under the COCO protocol, exactly where the arithmetic is exact and with 1e-9 margins elsewhere."""

import json
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from evalengine.api import ingest_coco
from evalengine.errors import InputError
from evalengine.geometry.box_iou import coco_box_iou
from evalengine.geometry.jitter import FAMILIES, jittered_boxes, overlap_product
from evalengine.match.coco import COCO_IOU_THRESHOLDS, CocoProtocol

# (α, β) whose shifted boxes are exact in binary floating point on a 32 × 64 box at (64, 128): the IoU computed by
# pycocotools' arithmetic is then the double nearest to αβ / (2 − αβ), the same double as γ
EXACT = [(Fraction(1, 2), Fraction(1)), (Fraction(3, 4), Fraction(3, 4)), (Fraction(7, 8), Fraction(7, 8)),
         (Fraction(3, 4), Fraction(5, 8)), (Fraction(15, 16), Fraction(7, 8)), (Fraction(1), Fraction(7, 8)),
         (Fraction(1), Fraction(3, 4)), (Fraction(1, 2), Fraction(1, 2)), (Fraction(7, 8), Fraction(1, 2)),
         (Fraction(3, 4), Fraction(1, 2))]
TARGET = {"x": 64.0, "y": 128.0, "w": 32.0, "h": 64.0}


def gamma_of(alpha: Fraction, beta: Fraction) -> Fraction:
    return alpha * beta / (2 - alpha * beta)


def outcomes(tmp_path, targets: pl.DataFrame, shifted: pl.DataFrame, protocol: CocoProtocol) -> dict:
    """``{(image_id, τ): (tp, fp)}``: each image holds one target (ground truth) and its one shifted box (detection)."""
    gt = {"images": [{"id": int(i), "width": 1000, "height": 1000} for i in targets.get_column("image_id")],
          "annotations": [{"id": int(r["image_id"]), "image_id": int(r["image_id"]), "category_id": 1,
                           "bbox": [r["x"], r["y"], r["w"], r["h"]], "area": r["w"] * r["h"], "iscrowd": 0}
                          for r in targets.iter_rows(named=True)],
          "categories": [{"id": 1, "name": "object"}]}
    dt = [{"image_id": int(r["image_id"]), "category_id": 1, "bbox": [r["x"], r["y"], r["w"], r["h"]], "score": 0.5}
          for r in shifted.iter_rows(named=True)]
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(dt))
    evaluation = ingest_coco(tmp_path / "gt.json", tmp_path / "dt.json", tmp_path / "store").evaluate(protocol)
    return {(row["image_id"], tau): (row["tp"], row["fp"]) for tau in protocol.iou_thresholds
            for row in evaluation.per_image_counts(tau).iter_rows(named=True)}


def test_overlap_product_and_the_notebook_sample():
    """Eq. 3: αβ = 2/3 at γ = 0.5; the notebook's α = 0.8 gives β = 5/6; four families, each at IoU γ."""
    assert overlap_product(0.5) == pytest.approx(2 / 3, abs=1e-15) and overlap_product(1.0) == 1.0
    boxes = jittered_boxes(pl.DataFrame(TARGET), 0.5, [0.8])
    assert boxes.get_column("family").to_list() == list(FAMILIES)
    assert boxes.get_column("beta").to_list() == pytest.approx([5 / 6] * 4, abs=1e-15)
    # up-left moves left and up (y grows down), down-right right and down; width and height are kept
    np.testing.assert_allclose(boxes.select("x", "y").to_numpy(), [(57.6, 128 - 64 / 6), (70.4, 128 - 64 / 6),
                                                                   (70.4, 128 + 64 / 6), (57.6, 128 + 64 / 6)],
                               rtol=0, atol=1e-12)
    assert set(boxes.get_column("w")) == {32.0} and set(boxes.get_column("h")) == {64.0}
    for row in boxes.iter_rows(named=True):
        assert coco_box_iou(row["x"], row["y"], 32.0, 64.0, 64.0, 128.0, 32.0, 64.0, False) == pytest.approx(
            0.5, abs=1e-15)


@pytest.mark.parametrize("gamma, alphas, message", [
    (0.0, None, "jitter: IoU γ must be in (0, 1], got 0.0"),
    (1.5, None, "jitter: IoU γ must be in (0, 1], got 1.5"),
    (0.5, [0.5], "jitter: α = 0.5 is outside [2γ/(1+γ), 1] = [0.666667, 1] at γ = 0.5 (β = αβ/α would exceed 1)"),
    (0.5, [1.2], "jitter: α = 1.2 is outside [2γ/(1+γ), 1] = [0.666667, 1] at γ = 0.5 (β = αβ/α would exceed 1)"),
])
def test_bad_parameters(gamma, alphas, message):
    with pytest.raises(InputError) as info:
        jittered_boxes(pl.DataFrame(TARGET), gamma, alphas)
    assert str(info.value) == message


def test_exact_gamma_is_a_tp_up_to_gamma_and_an_fp_above(tmp_path):
    """Exact cases: the shifted box's IoU is the double γ itself; τ = γ (and the next double below) gives a TP, the
    next double above an FP; every other case's γ is a threshold too (TP iff τ ≤ γ). Then COCO's own thresholds: the
    case at γ = 0.6 is a TP at .50, .55 and .60, an FP from .65 on."""
    targets, shifted, gammas = [], [], {}
    for k, (alpha, beta) in enumerate(EXACT):
        gamma = float(gamma_of(alpha, beta))
        boxes = jittered_boxes(pl.DataFrame(TARGET), gamma, [float(alpha)])
        expected_x = [TARGET["x"] + s * float((1 - alpha) * 32) for s in (-1, 1, 1, -1)]
        expected_y = [TARGET["y"] + s * float((1 - beta) * 64) for s in (-1, -1, 1, 1)]
        assert boxes.get_column("x").to_list() == expected_x and boxes.get_column("y").to_list() == expected_y
        for f, row in enumerate(boxes.iter_rows(named=True)):
            image_id = 10 * k + f + 1
            gammas[image_id] = gamma
            assert coco_box_iou(row["x"], row["y"], 32.0, 64.0, 64.0, 128.0, 32.0, 64.0, False) == gamma
            targets.append({"image_id": image_id, **TARGET})
            shifted.append({"image_id": image_id, "x": row["x"], "y": row["y"], "w": 32.0, "h": 64.0})
    targets, shifted = pl.DataFrame(targets), pl.DataFrame(shifted)
    taus = sorted({t for g in set(gammas.values()) for t in (np.nextafter(g, 0), g, np.nextafter(g, 1))})
    assert len(taus) == 3 * len(EXACT)
    got = outcomes(tmp_path / "exact", targets, shifted, CocoProtocol(iou_thresholds=tuple(float(t) for t in taus)))
    for image_id, gamma in gammas.items():
        for tau in taus:
            assert got[(image_id, float(tau))] == ((1, 0) if tau <= gamma else (0, 1)), (image_id, gamma, tau)
    got = outcomes(tmp_path / "coco", targets, shifted, CocoProtocol())
    sixty = [i for i, g in gammas.items() if g == 0.6]
    assert len(sixty) == 4
    for image_id in sixty:
        assert [got[(image_id, tau)] for tau in COCO_IOU_THRESHOLDS] == [(1, 0)] * 3 + [(0, 1)] * 7


def test_random_boxes_at_gamma_within_margins(tmp_path):
    """Random boxes, γ and α, every family: the IoU is γ to 1e-12, a TP at γ − 1e-9 and an FP at γ + 1e-9 (T11)."""
    rng = np.random.default_rng(7)
    gammas = [0.12, 0.3, 0.5, 0.75, 0.93]
    n = 40
    targets = pl.DataFrame({"image_id": np.arange(1, n + 1), "x": rng.uniform(0, 500, n), "y": rng.uniform(0, 500, n),
                            "w": rng.uniform(1, 300, n), "h": rng.uniform(1, 300, n)})
    parts = []
    for k, gamma in enumerate(gammas):
        low = overlap_product(gamma)
        mine = targets.filter(pl.col("image_id") % len(gammas) == k)
        for row in mine.iter_rows(named=True):
            family = list(FAMILIES)[row["image_id"] % 4]
            box = jittered_boxes(pl.DataFrame([row]), gamma, [rng.uniform(low, 1)], [family])
            parts.append(box.with_columns(gamma=pl.lit(gamma)))
    shifted = pl.concat(parts)
    for row, target in zip(shifted.sort("image_id").iter_rows(named=True), targets.iter_rows(named=True)):
        iou = coco_box_iou(row["x"], row["y"], row["w"], row["h"], target["x"], target["y"], target["w"],
                           target["h"], False)
        assert iou == pytest.approx(row["gamma"], rel=1e-12, abs=0)
    taus = tuple(sorted(g + s * 1e-9 for g in gammas for s in (-1, 1)))
    got = outcomes(tmp_path, targets, shifted, CocoProtocol(iou_thresholds=taus))
    for row in shifted.iter_rows(named=True):
        for tau in taus:
            assert got[(row["image_id"], tau)] == ((1, 0) if tau < row["gamma"] else (0, 1))
