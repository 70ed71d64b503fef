"""Slices of a store equal a full pycocotools run restricted the same way (params.imgIds, catIds, areaRng)."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine.api import ingest_coco
from evalengine.cli import main
from evalengine.errors import InputError
from evalengine.match.coco import CocoProtocol
from tests.conftest import PACKAGE_DATA
from tests.reference import per_class, pycocotools_eval

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
GT_DICT = json.loads(GT.read_text())
DT_LIST = json.loads(DT.read_text())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("slices")
    meta = folder / "meta.csv"
    ids = sorted(image["id"] for image in GT_DICT["images"])
    pl.DataFrame({"image_id": ids, "split": ["night" if i % 3 == 0 else "day" for i in range(len(ids))]}).write_csv(meta)
    return ingest_coco(GT, DT, folder / "store", n_shards=3, image_metadata=meta)


def _reference_ids(predicate):
    return sorted(image["id"] for image in GT_DICT["images"] if predicate(image))


def _check(acc, reference):
    np.testing.assert_allclose(acc.stats(), reference.stats, rtol=0, atol=1e-12)
    mine = {row["category_id"]: (row["ap"], row["ap50"], row["ar"]) for row in acc.class_metrics().iter_rows(named=True)}
    theirs = per_class(reference)
    assert mine.keys() == theirs.keys()
    for k in theirs:
        np.testing.assert_allclose(mine[k], theirs[k], rtol=0, atol=1e-12)


def test_image_subset_by_coco_attribute(store):
    acc = store.report(where="width >= 600 AND license IN (1, 3, 4)")
    ids = _reference_ids(lambda im: im["width"] >= 600 and im["license"] in (1, 3, 4))
    assert 0 < len(ids) < 100
    _check(acc, pycocotools_eval(GT_DICT, DT_LIST, image_ids=ids))


def test_image_subset_by_user_metadata(store):
    night = store.image_ids("split = 'night'")
    assert len(night) == 34
    _check(store.report(where="split = 'night'"), pycocotools_eval(GT_DICT, DT_LIST, image_ids=night))


def test_category_subset(store):
    cats = [1, 3, 18, 44, 62]
    _check(store.report(category_ids=cats), pycocotools_eval(GT_DICT, DT_LIST, category_ids=cats))


def test_custom_size_buckets_rematch_automatically(store):
    buckets = (("all", 0, 1e10), ("small", 0, 16 ** 2), ("medium", 16 ** 2, 64 ** 2), ("large", 64 ** 2, 1e10))
    protocol = CocoProtocol(area_ranges=buckets)
    ids = store.image_ids("split = 'day'")
    acc = store.report(protocol, where="split = 'day'")
    _check(acc, pycocotools_eval(GT_DICT, DT_LIST, area_ranges=buckets, image_ids=ids))
    assert protocol.match_key() != "coco"
    assert (store.path / "matches" / f"protocol={protocol.match_key()}").is_dir()


def test_report_command(capsys, store):
    assert main(["report", str(store.path), "--where", "split = 'night'", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    night = store.image_ids("split = 'night'")
    np.testing.assert_allclose(stats, pycocotools_eval(GT_DICT, DT_LIST, image_ids=night).stats, rtol=0, atol=1e-12)
    assert main(["report", str(store.path), "--where", "no_such_column = 1"]) == 2
    assert "SQL error" in capsys.readouterr().err


def test_bad_metadata_tables(tmp_path):
    bad = tmp_path / "meta.csv"
    pl.DataFrame({"image_id": [42, 42], "x": [1, 2]}).write_csv(bad)
    with pytest.raises(InputError, match="image_id 42 appears more than once"):
        ingest_coco(GT, DT, tmp_path / "s1", image_metadata=bad)
    pl.DataFrame({"image_id": [5], "x": [1]}).write_csv(bad)
    with pytest.raises(InputError, match="image_id 5 not in the ground truth's images"):
        ingest_coco(GT, DT, tmp_path / "s2", image_metadata=bad)
    pl.DataFrame({"image_id": [42], "width": [1]}).write_csv(bad)
    with pytest.raises(InputError, match="width already exist"):
        ingest_coco(GT, DT, tmp_path / "s3", image_metadata=bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.csv"]
