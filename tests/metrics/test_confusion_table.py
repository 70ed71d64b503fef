"""The ``confusion`` table (a protocol on the match contract, one shard task per image shard): the same rows whatever
the shard count or scheduler, reused once matched, sliced by image without matching again, and its SQL views equal to
the Python matrices."""

import polars as pl
import pytest

from evalengine import api
from evalengine.errors import InputError
from evalengine.match.confusion import ConfusionProtocol
from tests.conftest import PACKAGE_DATA
from tests.generators import random_coco
from tests.helpers import ours_evaluation, write_inputs

GT, DT = PACKAGE_DATA / "instances_val2014_100.json", PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


@pytest.mark.parametrize("seed", range(6))
def test_rows_identical_whatever_the_shards_and_scheduler(tmp_path, seed):
    gt, dt = random_coco(100 + seed)
    paths = write_inputs(tmp_path, gt, dt)
    tables = []
    for n_shards, scheduler in ((1, "sync"), (4, "threads"), (3, "processes")):
        result = api.confusion(paths, 0.5, 0.1, n_shards=n_shards, scheduler=scheduler)
        tables.append(result.assignments().drop("shard").sort("image_id", "det_id", "gt_id", nulls_last=True)
                      .collect())
    assert tables[0].height and all(t.equals(tables[0]) for t in tables[1:]), f"seed {seed}"


def test_matched_once_per_parameters_and_recorded(tmp_path):
    store = api.ingest_coco(GT, DT, tmp_path / "s", n_shards=2)
    first = api.confusion(store)
    assert first.folder.name == "run=default" and first.folder.parent.name == "protocol=confusion"
    stamp = (first.folder / "protocol.json").stat().st_mtime_ns
    assert api.confusion(api.open(tmp_path / "s")).folder == first.folder
    assert (first.folder / "protocol.json").stat().st_mtime_ns == stamp  # reused, not matched again
    other = api.confusion(store, score_threshold=0.3)
    assert other.folder.parent.name.startswith("protocol=confusion-")
    recorded = store.sql("SELECT protocol, iou_threshold, CAST(score_threshold AS VARCHAR) AS score "
                         "FROM confusion_protocols ORDER BY protocol")
    assert recorded.rows() == [("confusion", 0.5, "0.05"), (other.folder.parent.name[9:], 0.5, "0.3")]


def test_sql_views_equal_the_python_matrices(tmp_path):
    store = api.ingest_coco(GT, DT, tmp_path / "s", n_shards=3)
    result = api.confusion(store, thresholds="f1")
    key = result.folder.parent.name.removeprefix("protocol=")
    matrix = result.matrix().filter(pl.col("count") > 0)
    view = store.sql(f"SELECT gt_category_id, dt_category_id, count, fraction FROM confusion_matrix "
                     f"WHERE protocol = '{key}' AND run = 'default'")
    joined = matrix.join(view, on=["gt_category_id", "dt_category_id"], how="full", nulls_equal=True)
    assert joined.height == matrix.height == view.height
    assert (joined["count"] == joined["count_right"]).all()
    assert (joined["fraction"] - joined["fraction_right"]).abs().max() < 1e-12
    cells = store.sql(f"SELECT image_id, gt_category_id, dt_category_id, count FROM confusion_image_cells "
                      f"WHERE protocol = '{key}' ORDER BY ALL")
    assert cells.equals(result.per_image().sort(pl.all(), nulls_last=True), null_equal=True)
    assignments = store.sql(f"SELECT * EXCLUDE (protocol, run) FROM confusion_assignments WHERE protocol = '{key}'")
    assert assignments.height == result.assignments().collect().height == int(result.array().sum())


def test_an_image_slice_reads_the_same_table(tmp_path):
    gt, dt = random_coco(100)
    evaluation = ours_evaluation(tmp_path, gt, dt, n_shards=2)
    images = [i["id"] for i in gt["images"]][::2]
    whole, part = evaluation.confusion(0.5, 0.2), evaluation.slice(image_ids=images).confusion(0.5, 0.2)
    assert part.folder == whole.folder
    want = whole.per_image().filter(pl.col("image_id").is_in(images))
    assert part.per_image().equals(want, null_equal=True)
    assert int(part.array().sum()) == int(want["count"].sum())


def test_a_class_slice_has_its_own_table_and_bad_thresholds_are_refused(tmp_path):
    gt, dt = random_coco(100)  # 4 classes
    evaluation = ours_evaluation(tmp_path, gt, dt)
    ids = [c["id"] for c in gt["categories"]][:2]
    sliced = evaluation.slice(category_ids=ids).confusion(0.5, 0.0)
    assert sliced.folder != evaluation.confusion(0.5, 0.0).folder
    assert sliced.array().shape == (3, 3)
    assert set(sliced.assignments().collect()["gt_category_id"].drop_nulls()) <= set(ids)
    with pytest.raises(InputError, match="finite number"):
        ConfusionProtocol(score_threshold="0.5")
    with pytest.raises(InputError, match="finite number"):
        ConfusionProtocol(score_threshold=[(1, "high")])
