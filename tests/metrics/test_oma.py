"""HPRS / OMA (Wang et al.): exact hit counts against enumeration of every lattice box, the spec's fixtures."""

import itertools

import numpy as np
import polars as pl
import pytest

from evalengine.metrics.oma import hprs, n_hit, n_total

# spec-proposals.md §3.4 fixtures, Wang's lattice (corners 1..W), brute-forced up to 120×90
FIXTURES = [
    (20, 16, (5, 4, 13, 11), 0.5, 22_800, 763),
    (20, 16, (5, 4, 13, 11), 0.7, 22_800, 69),
    (20, 16, (5, 4, 13, 11), 0.9, 22_800, 1),
    (20, 16, (1, 1, 20, 16), 0.5, 22_800, 748),
    (30, 24, (3, 5, 17, 20), 0.7, 120_060, 566),
    (30, 24, (10, 8, 14, 12), 0.5, 120_060, 95),
    (25, 25, (2, 2, 24, 24), 0.8, 90_000, 207),
    (120, 90, (30, 20, 80, 70), 0.5, 28_595_700, 1_167_236),
    (120, 90, (1, 1, 120, 90), 0.7, 28_595_700, 62_148),
    (120, 90, (100, 5, 119, 30), 0.6, 28_595_700, 7_423),
]


@pytest.mark.parametrize("width,height,box,tau,tol,hit", FIXTURES)
def test_spec_fixtures(width, height, box, tau, tol, hit):
    assert n_total(width, height, "wang") == tol
    assert n_hit([box], width, height, tau, "wang")[0] == hit


def test_thresholds_of_one_object():
    taus = [0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    got = [n_hit([(5, 4, 13, 11)], 20, 16, t, "wang")[0] for t in taus]
    assert got == [415, 250, 112, 69, 38, 12, 9, 1, 1]


def _brute_force(width, height, box, tau, lo):
    ox1, oy1, ox2, oy2 = box
    area = (ox2 - ox1) * (oy2 - oy1)
    hits = 0
    xs = list(itertools.combinations(range(lo, width + 1), 2))
    ys = list(itertools.combinations(range(lo, height + 1), 2))
    for a, b in xs:
        iw = min(b, ox2) - max(a, ox1)
        if iw <= 0:
            continue
        for c, d in ys:
            ih = min(d, oy2) - max(c, oy1)
            if ih > 0:
                inter = iw * ih
                # exact: inter / union >= tau  ⇔  inter >= tau * union (tau a short decimal, scaled to integers)
                if inter * 1000 >= round(tau * 1000) * ((b - a) * (d - c) + area - inter):
                    hits += 1
    return hits, len(xs) * len(ys)


@pytest.mark.parametrize("seed", range(12))
def test_random_objects_equal_enumeration(seed):
    rng = np.random.default_rng(seed)
    width, height = int(rng.integers(3, 18)), int(rng.integers(3, 18))
    lattice = "edges" if seed % 2 else "wang"
    lo = 0 if lattice == "edges" else 1
    x1, x2 = sorted(rng.choice(np.arange(lo, width + 1), 2, replace=False))
    y1, y2 = sorted(rng.choice(np.arange(lo, height + 1), 2, replace=False))
    for tau in (0.3, 0.5, 0.55, 0.7, 0.95, 1.0):
        hits, tol = _brute_force(width, height, (x1, y1, x2, y2), tau, lo)
        assert n_total(width, height, lattice) == tol
        assert n_hit([(x1, y1, x2, y2)], width, height, tau, lattice)[0] == hits, (tau, lattice)


def test_hprs_values_of_the_spec():
    tol = n_total(500, 375, "wang")
    assert tol == 8_748_093_750
    hits = n_hit([(200, 150, 300, 250)] * 3, 500, 375, 0.5, "wang")
    assert hits[0] == 22_111_309
    assert n_hit([(200, 150, 300, 250)], 500, 375, 0.7, "wang")[0] == 1_278_852
    np.testing.assert_allclose(hprs(tol, 22_111_309, [100, 1000, 10000]), [0.2236, 0.9204, 1.0000], atol=5e-5)
    np.testing.assert_allclose(hprs(tol, 1_278_852, [100, 1000, 10000]), [0.0145, 0.1360, 0.7682], atol=5e-5)
    # Eq. 7 exactly on a small case: 1 − C(N−h, k)/C(N, k)
    from math import comb
    assert hprs(22_800, 763, 50) == pytest.approx(1 - comb(22_800 - 763, 50) / comb(22_800, 50), abs=1e-13)
    assert hprs(100, 0, 5) == 0.0 and hprs(100, 99, 5) == 1.0 and hprs(100, 5, 0) == 0.0


def test_oma_end_to_end_equals_direct_computation(tmp_path):
    """OMA of a proposal run on small images: per image mean of (hit − HPRS) with enumerated N_hit and Eq. 7
    written with binomials, over images with objects; hits by best IoU over the top-k, k_i = min(k, n_i)."""
    import json
    from math import comb

    from evalengine import api
    from evalengine.store.ranking import ProposalOrder

    rng = np.random.default_rng(5)
    images, anns, props = [], [], []
    for image_id in range(1, 9):
        width, height = int(rng.integers(6, 12)), int(rng.integers(6, 12))
        images.append({"id": image_id, "width": width, "height": height})
        for _ in range(int(rng.integers(0, 3))):
            x1, x2 = sorted(rng.choice(width + 1, 2, replace=False))
            y1, y2 = sorted(rng.choice(height + 1, 2, replace=False))
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": 1,
                         "bbox": [float(x1), float(y1), float(x2 - x1), float(y2 - y1)], "area": 1.0, "iscrowd": 0})
        for _ in range(int(rng.integers(0, 6))):
            x1, x2 = sorted(rng.choice(width + 1, 2, replace=False))
            y1, y2 = sorted(rng.choice(height + 1, 2, replace=False))
            props.append({"image_id": image_id, "bbox": [float(x1), float(y1), float(x2 - x1), float(y2 - y1)]})
    gt = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "a"}]}
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "p.json").write_text(json.dumps(props))
    store = api.ingest_proposals(tmp_path / "gt.json", tmp_path / "p.json", tmp_path / "s",
                                 order=ProposalOrder("given", dedup=False))
    from evalengine.match.proposals import ProposalProtocol
    ev = store.evaluate_proposals(protocol=ProposalProtocol(budgets=(1, 2, 4)))
    got = ev.oma((0.5, 0.7))
    cache = pl.read_parquet(store.layout.paths.hit_counts("edges"))  # every distinct (size, box, τ) counted once
    sizes = {im["id"]: (im["width"], im["height"]) for im in images}
    keys = {(*sizes[a["image_id"]], a["bbox"][0], a["bbox"][1], a["bbox"][0] + a["bbox"][2], a["bbox"][1] + a["bbox"][3])
            for a in anns}
    assert cache.height == len(keys) * 2
    for row in cache.iter_rows(named=True):
        box = (row["x1"], row["y1"], row["x2"], row["y2"])
        assert row["n_hit"] == _brute_force(row["width"], row["height"], box, row["iou_threshold"], 0)[0]
    assert ev.oma((0.5, 0.7)).equals(got)  # from the cache

    def iou(a, b):
        iw = min(a[2], b[2]) - max(a[0], b[0])
        ih = min(a[3], b[3]) - max(a[1], b[1])
        if iw <= 0 or ih <= 0:
            return 0.0
        return iw * ih / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - iw * ih)

    for budget in (1, 2, 4):
        for tau in (0.5, 0.7):
            per_image = []
            for image in images:
                objects = [a["bbox"] for a in anns if a["image_id"] == image["id"]]
                if not objects:
                    continue
                top = [p["bbox"] for p in props if p["image_id"] == image["id"]][:budget]
                corners = [(x, y, x + w, y + h) for x, y, w, h in top]
                terms = []
                for x, y, w, h in objects:
                    box = (x, y, x + w, y + h)
                    hit = max((iou(box, c) for c in corners), default=0.0) >= tau
                    hits, tol = _brute_force(image["width"], image["height"], tuple(int(v) for v in box), tau, 0)
                    chance = 1 - comb(tol - hits, len(top)) / comb(tol, len(top))
                    terms.append(hit - chance)
                per_image.append(np.mean(terms))
            row = got.filter(budget=budget, iou_threshold=tau)
            assert row.get_column("oma").item() == pytest.approx(np.mean(per_image), abs=1e-12)
