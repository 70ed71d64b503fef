"""Proposal inputs: every format gives the same stored run; ordering, de-duplication, conventions, errors."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine import api
from evalengine.errors import InputError
from evalengine.store.ranking import ProposalOrder


@pytest.fixture
def gt_path(tmp_path):
    gt = {"images": [{"id": 7, "width": 100, "height": 80, "file_name": "000007.jpg"},
                     {"id": 9, "width": 60, "height": 60, "file_name": "000009.jpg"}],
          "annotations": [{"id": 1, "image_id": 7, "category_id": 1, "bbox": [10, 10, 30, 20], "area": 600,
                           "iscrowd": 0, "difficult": 1},
                          {"id": 2, "image_id": 7, "category_id": 1, "bbox": [50, 40, 20, 20], "area": 400,
                           "iscrowd": 1},
                          {"id": 3, "image_id": 9, "category_id": 2, "bbox": [5, 5, 40, 40], "area": 1600,
                           "iscrowd": 0}],
          "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]}
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(gt))
    return path


CORNERS = [(7, 10.0, 10.0, 40.0, 30.0, 0.9), (7, 10.2, 10.4, 39.6, 29.1, 0.8), (7, 0.0, 0.0, 50.0, 50.0, 0.95),
           (9, 5.0, 5.0, 45.0, 45.0, 0.5), (9, 1.0, 1.0, 2.0, 2.0, 0.5)]


def _stored(store):
    return store.proposals().collect().sort("image_id", "rank", "proposal_id", nulls_last=True).select(
        "image_id", "proposal_id", "score", "x", "y", "w", "h", "rank")


def test_every_format_stores_the_same_run(tmp_path, gt_path):
    frame = pl.DataFrame(CORNERS, schema=["image_id", "x1", "y1", "x2", "y2", "score"], orient="row")
    frame.write_parquet(tmp_path / "p.parquet")
    frame.write_csv(tmp_path / "p.csv")
    frame.write_ndjson(tmp_path / "p.jsonl")
    (tmp_path / "p.json").write_text(json.dumps(
        [{"image_id": i, "bbox": [x1, y1, x2 - x1, y2 - y1], "score": s, "category_id": 1}
         for i, x1, y1, x2, y2, s in CORNERS]))
    folder = tmp_path / "npz"
    folder.mkdir()
    for image_id, name in ((7, "000007"), (9, "9")):  # by file-name stem, and by id
        rows = [r for r in CORNERS if r[0] == image_id]
        np.savez(folder / f"{name}.npz", boxes=np.array([r[1:5] for r in rows]), scores=np.array([r[5] for r in rows]))
    stores = [api.ingest_proposals(gt_path, tmp_path / name, tmp_path / f"s-{name}", n_shards=2)
              for name in ("p.parquet", "p.csv", "p.jsonl", "p.json", "npz")]
    first = _stored(stores[0])
    for store in stores[1:]:
        assert _stored(store).drop("x", "y", "w", "h").equals(first.drop("x", "y", "w", "h"))
        np.testing.assert_allclose(_stored(store).select("x", "y", "w", "h").to_numpy(),
                                   first.select("x", "y", "w", "h").to_numpy(), rtol=0, atol=1e-12)
    # score order, the near-copy of the first box (same rounding key) is a duplicate: kept, unranked
    assert first.filter(pl.col("image_id") == 7).get_column("rank").to_list() == [1, 2, None]
    assert first.filter(pl.col("image_id") == 7).get_column("proposal_id").to_list() == [3, 1, 2]


def test_orderings_and_pixel_convention(tmp_path, gt_path):
    frame = pl.DataFrame(CORNERS, schema=["image_id", "x1", "y1", "x2", "y2", "score"], orient="row")
    frame.write_parquet(tmp_path / "p.parquet")
    ranks = {}
    for ordering in ("score-desc", "score-asc", "given", "random"):
        store = api.ingest_proposals(gt_path, tmp_path / "p.parquet", tmp_path / f"s-{ordering}",
                                     order=ProposalOrder(ordering, seed=3, dedup=False))
        table = store.proposals().collect().filter(pl.col("image_id") == 7).sort("rank")
        ranks[ordering] = table.get_column("proposal_id").to_list()
    assert ranks["score-desc"] == [3, 1, 2] and ranks["score-asc"] == [2, 1, 3] and ranks["given"] == [1, 2, 3]
    assert sorted(ranks["random"]) == [1, 2, 3]
    store = api.ingest_proposals(gt_path, tmp_path / "p.parquet", tmp_path / "s-pix", box_convention="pixel-inclusive",
                                 order=ProposalOrder("given", dedup=False))
    box = store.proposals().collect().filter(pl.col("proposal_id") == 1).select("x", "y", "w", "h").row(0)
    assert box == (9.0, 9.0, 31.0, 21.0)  # pixels 10..40 × 10..30


def test_crowd_is_dropped_and_difficult_optional(tmp_path, gt_path):
    frame = pl.DataFrame(CORNERS, schema=["image_id", "x1", "y1", "x2", "y2", "score"], orient="row")
    frame.write_parquet(tmp_path / "p.parquet")
    store = api.ingest_proposals(gt_path, tmp_path / "p.parquet", tmp_path / "s")
    from evalengine.match.proposals import ProposalProtocol

    ids = lambda ev: sorted(ev.gt_matches().select("gt_id").unique().collect().get_column("gt_id").to_list())  # noqa: E731
    assert ids(store.evaluate_proposals()) == [1, 3]
    assert ids(store.evaluate_proposals(protocol=ProposalProtocol(include_difficult=False))) == [3]
    assert ids(store.evaluate_proposals(protocol=ProposalProtocol(drop_crowd=False))) == [1, 2, 3]


@pytest.mark.parametrize("content,message", [
    ([{"image_id": 8, "bbox": [0, 0, 1, 1], "score": 1}], "image_id 8 not in the ground truth's images"),
    ([{"image_id": 7, "bbox": [0, 0, -1, 1], "score": 1}], "proposal at position 1: 'bbox' has a negative"),
    ([{"image_id": 7, "bbox": [0, 0, 1], "score": 1}], "'bbox' must be a list of 4 numbers"),
    ([{"image_id": 7, "bbox": [0, 0, 1, 1]}], "ordering 'score-desc' needs a score, but proposal(s) at position 1"),
])
def test_bad_input_names_the_file_and_row(tmp_path, gt_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(content))
    with pytest.raises(InputError, match=None) as error:
        api.ingest_proposals(gt_path, path, tmp_path / "s")
    assert message in str(error.value) and str(path) in str(error.value)
    assert not (tmp_path / "s").exists()  # nothing half-written


def test_bad_npz_folder(tmp_path, gt_path):
    folder = tmp_path / "npz"
    folder.mkdir()
    np.savez(folder / "000007.npz", boxes=np.zeros((3, 3)))
    with pytest.raises(InputError, match="'boxes' must have shape"):
        api.ingest_proposals(gt_path, folder, tmp_path / "s")
    (folder / "000007.npz").unlink()
    np.savez(folder / "unknown.npz", boxes=np.zeros((1, 4)))
    with pytest.raises(InputError, match="no image with id or file name 'unknown'"):
        api.ingest_proposals(gt_path, folder, tmp_path / "s")


def test_a_failed_ingest_stops_its_threads(tmp_path, gt_path):
    """Reader and writer thread pools are shut down in the failing call itself, not later by the garbage
    collector from another thread (which once deadlocked a thread start-up in the test suite)."""
    import threading

    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"image_id": 7, "bbox": [0, 0, 1, 1], "score": 1}] * 50 +
                               [{"image_id": 8, "bbox": [0, 0, 1, 1], "score": 1}]))
    before = threading.active_count()
    with pytest.raises(InputError, match="image_id 8") as error:
        api.ingest_proposals(gt_path, path, tmp_path / "s")
    assert threading.active_count() == before
    del error


def test_streaming_ranking_and_the_sharded_fallback_store_the_same_run(tmp_path, gt_path, monkeypatch):
    """Image-contiguous sources are ranked while streaming; interleaved ones are sharded first, then ranked."""
    from evalengine.store import ranking

    rng = np.random.default_rng(3)
    rows = [(int(image), *map(float, rng.uniform(0, 40, 2)), *map(float, rng.uniform(1, 30, 2)), float(score))
            for image, score in zip(rng.choice([7, 9], 400), rng.permutation(400))]
    interleaved = pl.DataFrame(rows, schema=["image_id", "x1", "y1", "w", "h", "score"], orient="row").with_columns(
        x2=pl.col("x1") + pl.col("w"), y2=pl.col("y1") + pl.col("h")).drop("w", "h")
    interleaved.write_parquet(tmp_path / "interleaved.parquet")
    interleaved.sort("image_id", maintain_order=True).write_parquet(tmp_path / "sorted.parquet")
    fallback_calls = []
    original = ranking._rank_by_shard
    monkeypatch.setattr(ranking, "_rank_by_shard", lambda *a: fallback_calls.append(1) or original(*a))
    columns = ["image_id", "rank", "score", "x", "y", "w", "h"]
    stored = {}
    for name in ("sorted", "interleaved"):
        store = api.ingest_proposals(gt_path, tmp_path / f"{name}.parquet", tmp_path / name, n_shards=3)
        stored[name] = store.proposals().collect().select(columns).sort("image_id", "rank", "score", nulls_last=True)
        assert not list((tmp_path / name).rglob(".raw"))
    assert fallback_calls == [1]  # only the interleaved source needed it
    assert stored["sorted"].equals(stored["interleaved"])
    assert stored["sorted"].filter(pl.col("rank").is_null()).height == 0
