"""The LVIS rules one at a time, each value asserted and equal to lvis-api's: the 300-per-image cap (counted before
the zero-area and category filters, file order winning ties at the cut), the federated filter, not-exhaustive
categories, no crowd, the zero-id quirk and its correction; the protocol's parameters; bad LVIS input."""

import numpy as np
import pytest

from evalengine.api import LvisProtocol, evaluate_lvis
from evalengine.errors import InputError, InputWarning, ProtocolError
from tests.helpers import write_inputs
from tests.lvis_reference import lvis_api


def lvis_gt(anns, neg=(), not_exhaustive=(), frequencies=("f", "c", "r")) -> dict:
    """One 500×500 image; ``anns``: (id, category, box, extra fields); categories 1..len(frequencies)."""
    return {"images": [{"id": 7, "width": 500, "height": 500, "neg_category_ids": list(neg),
                        "not_exhaustive_category_ids": list(not_exhaustive)}],
            "annotations": [{"id": i, "image_id": 7, "category_id": c, "bbox": list(box), "area": box[2] * box[3],
                             **extra} for i, c, box, extra in anns],
            "categories": [{"id": k + 1, "name": f"c{k + 1}", "frequency": f} for k, f in enumerate(frequencies)]}


def det(category, box, score) -> dict:
    return {"image_id": 7, "category_id": category, "bbox": list(box), "score": score}


BOX = (10.0, 10.0, 50.0, 50.0)
FAR = (300.0, 300.0, 40.0, 40.0)


def both(tmp_path, gt, dt, protocol=None):
    tmp_path.mkdir(exist_ok=True)
    evaluation = evaluate_lvis(*write_inputs(tmp_path, gt, dt), protocol)
    return evaluation.results(), lvis_api(gt, dt).results


def test_cap_counts_what_is_dropped_later_and_file_order_wins_ties(tmp_path):
    """300 zero-area results and results of unknown categories above the one good result push it out of the cap;
    at a tie the first 300 in file order are kept."""
    gt = lvis_gt([(1, 1, BOX, {})])
    crowd = [det(1, (5, 5, 0, 9), 0.9)] * 150 + [det(3, BOX, 0.9)] * 150
    got, ref = both(tmp_path / "a", gt, crowd + [det(1, BOX, 0.5)])
    assert got["AP"] == ref["AP"] == 0.0
    got, ref = both(tmp_path / "b", gt, crowd[:-1] + [det(1, BOX, 0.5)])
    assert got["AP"] == pytest.approx(ref["AP"], abs=1e-12) and got["AP"] > 0.99
    tied = [det(1, FAR, 0.5)] * 299 + [det(1, BOX, 0.5), det(1, BOX, 0.5)]
    got, ref = both(tmp_path / "c", gt, tied)
    assert got["AR@300"] == ref["AR@300"] == 1.0  # the 300th (in file order) is kept, the 301st dropped
    got, ref = both(tmp_path / "d", gt, [det(1, FAR, 0.5)] * 300 + [det(1, BOX, 0.5)])
    assert got["AR@300"] == ref["AR@300"] == 0.0


def test_federated_filter_and_not_exhaustive(tmp_path):
    """A false positive of a category the image neither has nor lists as negative is not evaluated; one of a negative
    category counts; on a not-exhaustive category an unmatched result is ignored."""
    gt = lvis_gt([(1, 1, BOX, {}), (2, 2, BOX, {})], neg=[3])
    dt = [det(1, FAR, 0.9), det(1, BOX, 0.8), det(2, BOX, 0.5), det(3, FAR, 0.4)]
    got, ref = both(tmp_path / "a", gt, dt)
    np.testing.assert_allclose(list(got.values()), list(ref.values()), rtol=0, atol=1e-12)
    assert got["APf"] == pytest.approx(0.5, abs=1e-12) and got["APc"] == pytest.approx(1.0, abs=1e-12)
    got, ref = both(tmp_path / "b", lvis_gt([(1, 1, BOX, {})], not_exhaustive=[1]), dt[:2])
    assert got["AP"] == pytest.approx(ref["AP"], abs=1e-12) and got["AP"] == pytest.approx(1.0, abs=1e-12)
    got, ref = both(tmp_path / "c", lvis_gt([(1, 1, BOX, {})], frequencies=("f", "c", "r")), [det(2, FAR, 0.9)])
    assert got["APc"] == ref["APc"] == -1  # category 2 is unknown on the image: nothing evaluated


def test_no_crowd_ignore_honoured_and_zero_area_ground_truth_dropped(tmp_path):
    """``iscrowd`` is not read (a crowd ground truth is matched once, a second result is a false positive), the
    ``ignore`` field is, and a ground truth of area 0 is not evaluated (nor makes its category known)."""
    gt = lvis_gt([(1, 1, BOX, {"iscrowd": 1}), (2, 2, BOX, {"ignore": 1}), (3, 3, (1, 1, 0, 5), {})])
    dt = [det(1, BOX, 0.9), det(1, BOX, 0.8), det(2, BOX, 0.7), det(3, (1, 1, 3, 5), 0.6)]
    got, ref = both(tmp_path, gt, dt)
    np.testing.assert_allclose(list(got.values()), list(ref.values()), rtol=0, atol=1e-12)
    assert got["APf"] == pytest.approx(1.0, abs=1e-12) and got["APc"] == got["APr"] == -1


def test_zero_id_quirk_and_its_correction(tmp_path):
    gt = lvis_gt([(0, 1, BOX, {})])
    with pytest.warns(InputWarning, match="annotation id 0 found"):
        got, ref = both(tmp_path / "a", gt, [det(1, BOX, 0.9)])
    assert got["AP"] == ref["AP"] == 0.0  # lvis-api reads the partner id 0 as unmatched
    with pytest.warns(InputWarning, match="annotation id 0 found"):
        got, _ = both(tmp_path / "b", gt, [det(1, BOX, 0.9)], LvisProtocol(zero_id_quirk=False))
    assert got["AP"] == pytest.approx(1.0, abs=1e-12)


def test_protocol_parameters():
    assert LvisProtocol().match_key() == "lvis" and LvisProtocol().max_dets == (300,)
    assert LvisProtocol(iou_type="segm").match_key().startswith("lvis-")
    with pytest.raises(ProtocolError, match="iou_type must be one of"):
        LvisProtocol(iou_type="keypoints")
    with pytest.raises(ProtocolError, match="use_cats"):
        LvisProtocol(use_cats=False)
    with pytest.raises(ProtocolError, match="one cap"):
        LvisProtocol(max_dets=(100, 300))


@pytest.mark.parametrize("change, message", [
    (lambda gt: gt["images"][0].pop("neg_category_ids"), "the images have no 'neg_category_ids'"),
    (lambda gt: gt["images"][0].update(not_exhaustive_category_ids=None),
     "image 7: 'not_exhaustive_category_ids' is missing or not a list of category ids"),
    (lambda gt: gt["images"][0].update(neg_category_ids=["a"]), "images' 'neg_category_ids' must be lists of category"),
    (lambda gt: gt["categories"][1].update(frequency="x"), "category 2: 'frequency' must be 'r', 'c' or 'f', got 'x'"),
    (lambda gt: [c.pop("frequency") for c in gt["categories"]], "the categories have no 'frequency'"),
])
def test_bad_lvis_input_is_located(tmp_path, change, message):
    gt = lvis_gt([(1, 1, BOX, {})])
    change(gt)
    with pytest.raises(InputError, match=message) as error:
        evaluate_lvis(*write_inputs(tmp_path, gt, [det(1, BOX, 0.9)]))
    assert str(error.value).startswith(str(tmp_path / "gt.json"))


def test_each_shard_task_gets_only_its_images_labels(tmp_path):
    """The images table is read once when the tasks are planned: each shard task's inputs hold the (image, category)
    pairs of its own images' ``neg_category_ids`` and ``not_exhaustive_category_ids``, and together all of them."""
    from evalengine.api import ingest_lvis
    from evalengine.store.sharding import shard_of

    rng = np.random.default_rng(3)
    images = [{"id": int(i), "width": 100, "height": 100, "neg_category_ids": [int(c) for c in rng.choice(9, 3) + 1],
               "not_exhaustive_category_ids": [int(c) for c in rng.choice(9, int(rng.integers(0, 3))) + 1]}
              for i in rng.choice(10_000, 40, replace=False)]
    gt = {"images": images, "annotations": [{"id": 1, "image_id": images[0]["id"], "category_id": 1,
                                             "bbox": list(BOX), "area": 2500.0}],
          "categories": [{"id": k, "name": f"c{k}", "frequency": "f"} for k in range(1, 10)]}
    dt = [{"image_id": images[0]["id"], "category_id": 1, "bbox": list(BOX), "score": 0.5}]
    store = ingest_lvis(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=5)
    inputs, _ = LvisProtocol().shard_inputs(store.layout, "default")
    assert len(inputs) == 5
    for side, key in (("negative", "neg_category_ids"), ("not_exhaustive", "not_exhaustive_category_ids")):
        expected = sorted((i["id"], c) for i in images for c in i[key])
        got = sorted(pair for files in inputs for pair in files[side].rows())
        assert got == expected
        for k, files in enumerate(inputs):
            ids = files[side].get_column("image_id").to_numpy()
            assert files[side].columns == ["image_id", "category_id"]
            assert (shard_of(ids, 5) == k).all()


def test_processes_scheduler_equals_threads(tmp_path):
    """The shard tasks' label pairs travel with the task to other processes: the same results as threads in memory."""
    from tests.lvis_reference import random_lvis

    gt, dt = random_lvis(7)
    files = write_inputs(tmp_path, gt, dt)
    threads = evaluate_lvis(*files, n_shards=3)
    processes = evaluate_lvis(*files, n_shards=3, scheduler="processes", workers=2)
    assert not threads.layout.persistent and processes.layout.persistent
    assert processes.results() == threads.results() == pytest.approx(lvis_api(gt, dt).results, abs=1e-12)


def _federated_by_polars(gt, dt, negative, categories, max_dets):
    """The detections lvis-api keeps, by Polars joins (the rules as written): the per-image cap by a stable sort of
    the whole shard, then the category and area filters, then a semi-join with the known (image, category) pairs."""
    import polars as pl

    kept = pl.col("category_id").is_in(pl.Series(categories).implode()) & (pl.col("area") > 0) & (
        pl.col("area") < np.inf)
    gt = gt.filter(kept)
    ranked = dt.with_columns((pl.col("score") + 0.0).alias("key")).sort(
        ["image_id", "key", "det_id"], descending=[False, True, False]).with_columns(
        pl.int_range(pl.len()).over("image_id").alias("rank"))
    known = pl.concat([negative, gt.select("image_id", "category_id")])
    return (ranked.filter(pl.col("rank") < max_dets).filter(kept)
            .join(known, on=["image_id", "category_id"], how="semi").sort("det_id").get_column("det_id").to_list())


@pytest.mark.parametrize("seed", range(12))
def test_federated_kernel_equals_the_joins(seed):
    """The fused shard kernel (cap, filters, federated semi-join) and the not-exhaustive lookup against Polars joins
    on random shards: ids of any sign and size, crowded images with tied scores (and −0.0 against 0.0) at the cut,
    areas of 0, inf and NaN, categories outside the evaluated ones, duplicate label pairs; the pair lookup both as a
    flag table (a shard's images by the categories) and as a hash table (so many categories that it is not dense)."""
    import polars as pl

    from evalengine.match import coco
    from evalengine.match.lvis import _pairs_in, federated
    from evalengine.match.score_order import category_index

    rng = np.random.default_rng(seed)
    images = rng.choice(np.array([-(2**62), -3, 0, 5, 2**40, 2**62 + 7, *rng.integers(-10**6, 10**6, 30)]), 12)
    categories = np.unique(rng.choice(np.array([-5, 0, 3, 2**50, *rng.integers(1, 1000, 40)]), 20))
    pool = np.concatenate([categories, [7777, -99]])
    n = int(rng.integers(0, 3000))
    dt = pl.DataFrame({"det_id": np.arange(n) + 1, "image_id": rng.choice(images, n),
                       "category_id": rng.choice(pool, n),
                       "score": rng.choice([-0.0, 0.0, 0.25, 0.5, *rng.random(4)], n),
                       "area": rng.choice([0.0, np.inf, np.nan, 1.0, 2.5, 900.0], n)})
    m = int(rng.integers(0, 200))
    gt = pl.DataFrame({"image_id": rng.choice(images, m), "category_id": rng.choice(pool, m),
                       "area": rng.choice([0.0, 4.0, np.inf, np.nan], m), "iscrowd": rng.random(m) < 0.5,
                       "gt_order": rng.permutation(m)})
    pairs = {side: pl.DataFrame({"image_id": rng.choice(images, k), "category_id": rng.choice(pool, k)})
             for side, k in (("negative", int(rng.integers(0, 60))), ("flagged", int(rng.integers(0, 60))))}
    max_dets = int(rng.choice([1, 5, 40, 300]))
    no_crowd, gt_rows, rows = federated(gt, dt, pairs["negative"], categories, max_dets)
    assert (np.diff(rows) > 0).all()
    assert dt[rows].get_column("det_id").to_list() == _federated_by_polars(gt, dt, pairs["negative"], categories,
                                                                           max_dets)
    assert not no_crowd.get_column("iscrowd").any() and no_crowd.drop("iscrowd").equals(gt.drop("iscrowd"))
    # the kept ground truths in prepare_gt's order (category, image, file order)
    assert no_crowd[gt_rows].equals(coco.prepare_gt(no_crowd.filter((pl.col("area") > 0) & (pl.col("area") < np.inf)),
                                                    categories))
    expected = dt.with_row_index().join(pairs["flagged"].filter(pl.col("category_id").is_in(
        pl.Series(categories).implode())), on=["image_id", "category_id"], how="semi").get_column("index")
    for n_cat in (categories.shape[0], categories.shape[0] + 10**6):  # the flag table, the hash table
        flagged = _pairs_in(dt.get_column("image_id").to_numpy(), category_index(categories, dt.get_column(
            "category_id").to_numpy()), pairs["flagged"].get_column("image_id").to_numpy(), category_index(
            categories, pairs["flagged"].get_column("category_id").to_numpy()), n_cat)
        assert np.flatnonzero(flagged).tolist() == expected.to_list()
