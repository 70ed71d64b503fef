"""Repeatability end to end against a plain transcription of the toolbox's procedure."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine import api
from evalengine.geometry.homography import project_boxes
from evalengine.metrics.repeatability import _trapezoid_area
from evalengine.store.ranking import ProposalOrder
from tests.match.test_proposal_matching import brute_force_greedy


def _images(rng, n):
    return [{"id": i, "width": int(rng.integers(60, 140)), "height": int(rng.integers(60, 140))} for i in range(1, n + 1)]


def _boxes(rng, image, n):
    out = []
    for _ in range(n):
        x, y = rng.integers(0, image["width"] - 5), rng.integers(0, image["height"] - 5)
        w = rng.integers(3, image["width"] - x + 1)
        h = rng.integers(3, image["height"] - y + 1)
        out.append([float(x), float(y), float(w), float(h)])
    return out


@pytest.fixture
def setup(tmp_path):
    rng = np.random.default_rng(11)
    images = _images(rng, 12)
    anns = [{"id": i + 1, "image_id": im["id"], "category_id": 1, "bbox": b, "area": b[2] * b[3], "iscrowd": 0}
            for i, (im, b) in enumerate((im, b) for im in images for b in _boxes(rng, im, 2))]
    gt = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "a"}]}
    reference = [{"image_id": im["id"], "bbox": b} for im in images[:-1] for b in _boxes(rng, im, 30)]
    perturbed = [{"image_id": im["id"], "bbox": b} for im in images[1:] for b in _boxes(rng, im, 25)]
    for name, data in (("gt", gt), ("ref", reference), ("pert", perturbed)):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    store = api.ingest_proposals(tmp_path / "gt.json", tmp_path / "ref.json", tmp_path / "s", n_shards=3,
                                 order=ProposalOrder("given", dedup=False))
    return store, gt, reference, perturbed


def _toolbox(gt, reference, perturbed, table, top_n):
    """repeatability_matching.m written out: per image, project, filter by centres, greedy match, bin."""
    by_bin = {b: [] for b in range(10)}
    for image in gt["images"]:
        ref = [p["bbox"] for p in reference if p["image_id"] == image["id"]][:top_n]
        pert = [p["bbox"] for p in perturbed if p["image_id"] == image["id"]][:top_n]
        if not ref or not pert:
            continue
        row = table.filter(pl.col("image_id") == image["id"]).row(0, named=True)
        h = np.array(row["homography"]).reshape(3, 3)

        def project(boxes, matrix):
            arrays = [np.array([b[i] for b in boxes]) for i in range(4)]
            return list(zip(*project_boxes(*arrays, matrix)))

        def inside(box, width, height):
            cx, cy = box[0] + (box[2] + 1) / 2, box[1] + (box[3] + 1) / 2
            return 1 <= cx <= width and 1 <= cy <= height

        back = [b for b in project(pert, np.linalg.inv(h)) if inside(b, row["ref_width"], row["ref_height"])]
        kept = [r for r, f in zip(ref, project(ref, h)) if inside(f, row["width"], row["height"])]
        ious, _ = brute_force_greedy([(x, y, x + w, y + hh) for x, y, w, hh in kept],
                                     [(x, y, x + w, y + hh) for x, y, w, hh in back])
        for (x, y, w, hh), iou in zip(kept, ious):
            size = np.sqrt(w * hh / (row["ref_width"] * row["ref_height"]))
            by_bin[min(int(np.floor(size * 10 + 1e-12)), 9)].append(iou)
    return by_bin


@pytest.mark.parametrize("kind,level", [("scale", 0.7), ("scale", 1.3), ("rotate", 10.0), ("flip", None),
                                        ("blur", 2.0)])
def test_repeatability_equals_the_toolbox_procedure(tmp_path, setup, kind, level):
    store, gt, reference, perturbed = setup
    store = store.add_perturbed_proposals(tmp_path / "pert.json", run=f"{kind}", kind=kind, level=level,
                                          order=ProposalOrder("given", dedup=False))
    table = pl.read_parquet(store.layout.paths.perturbation(kind))
    for top_n in (10, 1000):
        by_bin = _toolbox(gt, reference, perturbed, table, top_n)
        got = store.repeatability([kind], top_n=top_n, by_bin=True)
        for b, values in by_bin.items():
            row = got.filter(pl.col("size_bin") == b)
            assert row.get_column("n").item() == len(values)
            if values:
                assert row.get_column("area").item() == pytest.approx(np.mean(values), abs=1e-12)
        summary = store.repeatability([kind], top_n=top_n)
        expected = np.mean([np.mean(v) for v in by_bin.values() if v])
        assert summary.get_column("repeatability").item() == pytest.approx(expected, abs=1e-12)
        assert summary.get_column("kind").item() == kind
        toolbox = store.repeatability([kind], top_n=top_n, method="trapezoid", empty_bins="zero")
        assert toolbox.get_column("repeatability").item() == pytest.approx(
            np.mean([_trapezoid_area(np.array(v)) for v in by_bin.values()]), abs=1e-12)


def test_a_perfectly_repeatable_method_scores_one(tmp_path, setup):
    store, gt, reference, _ = setup
    table = pl.read_parquet(store.add_perturbed_proposals(tmp_path / "ref.json", "probe", "scale", 1.5,
                                                                      order=ProposalOrder("given"))
                            .layout.paths.perturbation("probe"))
    h = {row["image_id"]: np.array(row["homography"]).reshape(3, 3) for row in table.iter_rows(named=True)}
    moved = []
    for p in reference:
        box = project_boxes(*(np.array([v]) for v in p["bbox"]), h[p["image_id"]])
        moved.append({"image_id": p["image_id"], "bbox": [float(v[0]) for v in box]})
    (tmp_path / "moved.json").write_text(json.dumps(moved))
    store = store.add_perturbed_proposals(tmp_path / "moved.json", "scaled", "scale", 1.5,
                                          order=ProposalOrder("given", dedup=False))
    assert store.repeatability(["scaled"]).get_column("repeatability").item() == pytest.approx(1.0, abs=1e-12)
    # a perturbed run's proposals read back like any run's (its homographies file is not one of its shards)
    stored = store.proposals("scaled").sort("image_id", "proposal_id").collect()
    assert stored.height == len(moved)
    assert stored.select("x", "y", "w", "h").rows() == [tuple(p["bbox"]) for p in moved]


def test_trapezoid_area_definition():
    assert _trapezoid_area(np.array([1.0, 1.0])) == pytest.approx(1.0)
    # points (0,1), (0.2, 1), (0.6, 0.5), (0.601, 0)
    assert _trapezoid_area(np.array([0.6, 0.2])) == pytest.approx(0.2 + 0.4 * 0.75 + 0.001 * 0.25)


def test_sql_view_equals_api(tmp_path, setup):
    store, *_ = setup
    store = store.add_perturbed_proposals(tmp_path / "pert.json", "rot", "rotate", 5.0,
                                          order=ProposalOrder("given", dedup=False))
    api_table = store.repeatability(["rot"])
    view = store.sql("SELECT run, repeatability, n_evaluated, n_bins FROM repeatability")
    assert view.get_column("run").to_list() == ["rot"]
    assert view.get_column("repeatability").item() == pytest.approx(api_table.get_column("repeatability").item(),
                                                                     abs=1e-12)
    assert view.get_column("n_evaluated").item() == api_table.get_column("n_evaluated").item()
    assert view.get_column("n_bins").item() == api_table.get_column("n_bins").item()


def test_homographies_given_as_a_table_are_validated(tmp_path, setup):
    from evalengine.errors import InputError

    store, *_ = setup
    images = store.images().collect()
    table = pl.DataFrame({"image_id": images["image_id"], "homography": [np.eye(3).reshape(-1).tolist()] * images.height,
                          "width": images["width"], "height": images["height"]})
    same = store.add_perturbed_proposals(tmp_path / "ref.json", "same", "custom", homographies=table,
                                         order=ProposalOrder("given", dedup=False))
    assert same.repeatability(["same"]).get_column("repeatability").item() == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(InputError, match="missing column"):
        store.add_perturbed_proposals(tmp_path / "ref.json", "bad", "custom", homographies=table.drop("width"))
    table.with_columns(pl.lit(999).alias("image_id")).head(1).write_parquet(tmp_path / "h.parquet")
    with pytest.raises(InputError, match="image_id 999 not in the store's images"):
        store.add_perturbed_proposals(tmp_path / "ref.json", "bad", "custom", homographies=tmp_path / "h.parquet")
    assert "bad" not in api.open(store.path).layout.proposal_runs  # nothing half-written
