"""In-memory inputs: a COCO dict, a list of result dicts, Polars / pandas / Arrow tables, a mapping of columns and
pycocotools' N x 7 array give exactly the evaluation of the same files; errors name the object and the position;
nothing is left behind."""

import json
import tempfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import evalengine
from evalengine.errors import InputError
from tests.generators import random_coco
from tests.helpers import write_inputs


def _sources(dt: list) -> dict:
    frame = pl.DataFrame(dt)
    return {
        "list": dt,
        "polars": frame,
        "pandas": frame.to_pandas(),
        "arrow": frame.to_arrow(),
        "columns": {"image_id": np.array([d["image_id"] for d in dt]),
                    "category_id": np.array([d["category_id"] for d in dt]),
                    "x": np.array([d["bbox"][0] for d in dt]), "y": np.array([d["bbox"][1] for d in dt]),
                    "w": np.array([d["bbox"][2] for d in dt]), "h": np.array([d["bbox"][3] for d in dt]),
                    "score": np.array([d["score"] for d in dt])},
        "numpy": np.array([[d["image_id"], *d["bbox"], d["score"], d["category_id"]] for d in dt]),
    }


@pytest.mark.parametrize("seed", range(4))
def test_every_in_memory_input_equals_the_files(tmp_path, seed):
    gt, dt = random_coco(seed)
    expected = evaluate_files = evalengine.evaluate_coco(*write_inputs(tmp_path, gt, dt))
    for name, source in _sources(dt).items():
        got = evalengine.evaluate_coco(gt, source)
        assert got.stats() == evaluate_files.stats(), name
        assert got.class_metrics().equals(expected.class_metrics()), name


def test_ingest_and_add_run_in_memory(tmp_path):
    gt, dt = random_coco(5)
    store = evalengine.ingest_coco(gt, dt, tmp_path / "store")
    store = store.add_run(pl.DataFrame(dt[::2]), run="half")
    files = evalengine.ingest_coco(*write_inputs(tmp_path, gt, dt[::2]), tmp_path / "files")
    assert store.evaluate(run="half").stats() == files.evaluate().stats()
    provenance = json.loads((tmp_path / "store" / "manifest.json").read_text())["provenance"]
    assert provenance == {"gt": "in-memory dict", "default": "in-memory list", "half": "in-memory DataFrame"}
    store = evalengine.ingest_gt(gt, tmp_path / "gt_only").add_run(dt, run="all")
    assert store.evaluate(run="all").stats() == evalengine.evaluate_coco(gt, dt).stats()


def test_errors_name_the_object_and_leave_nothing(tmp_path):
    gt, dt = random_coco(3)
    before = set(Path(tempfile.gettempdir()).glob("evalengine-input-*"))
    bad = [dict(d) for d in dt]
    bad[6]["image_id"] = 10**9
    with pytest.raises(InputError, match=r"^results: image_id 1000000000 not in the ground truth's images"):
        evalengine.ingest_coco(gt, bad, tmp_path / "store")
    frame = pl.DataFrame(_sources(dt)["columns"]).with_columns(
        pl.when(pl.int_range(pl.len()) == 4).then(None).otherwise(pl.col("h")).alias("h"))
    with pytest.raises(InputError, match=r"^results: detection at position 5: missing field 'h'"):
        evalengine.evaluate_coco(gt, frame)
    wrong = json.loads(json.dumps(gt))
    wrong["annotations"][2]["category_id"] = 999
    with pytest.raises(InputError, match=r"^ground truth \(COCO dict\): annotation \d+: 'category_id' not in"):
        evalengine.evaluate_coco(wrong, dt)
    with pytest.raises(InputError, match=r"results: a NumPy array of results must be N x 7"):
        evalengine.evaluate_coco(gt, np.zeros((3, 6)))
    with pytest.raises(InputError, match="expected a path or a COCO dict"):
        evalengine.evaluate_coco([1, 2], dt)
    assert not (tmp_path / "store").exists()
    assert set(Path(tempfile.gettempdir()).glob("evalengine-input-*")) == before


def test_to_dict_is_flat_for_loggers():
    gt, dt = random_coco(4)
    evaluation = evalengine.evaluate_coco(gt, dt)
    flat = evaluation.to_dict()
    stats = evaluation.stats()
    assert [flat[f"bbox/{name}"] for name in ("AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100",
                                               "ARs", "ARm", "ARl")] == stats
    for row in evaluation.per_class().iter_rows(named=True):
        assert flat[f"bbox/AP/{row['name']}"] == row["ap"] and flat[f"bbox/AR/{row['name']}"] == row["ar"]
    assert len(flat) == 12 + 3 * evaluation.per_class().height
    assert all(isinstance(v, float) for v in flat.values())
    assert set(evaluation.to_dict(prefix="val", per_class=False)) == {f"val/{k.split('/')[1]}" for k in flat
                                                                      if k.count("/") == 1}
