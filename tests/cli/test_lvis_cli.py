"""The ``lvis`` command: lvis-api's printed lines and ``get_results`` (JSON) from files, as a subprocess; a kept store
evaluated again and queried with SQL (the ``lvis_*`` views equal to the Python results, 1e-12); bad input as one line
with exit status 2."""

import json
import subprocess
import sys

import numpy as np
import pytest

from evalengine.api import open as open_store
from tests.helpers import write_inputs
from tests.io.test_bad_input_corpus import cli
from tests.lvis_reference import lvis_api, per_class, printed, random_lvis


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A random federated set (seed 2: 10 negative and 2 not-exhaustive labels, 405 results on one image) and
    lvis-api run on it."""
    gt, dt = random_lvis(2)
    return write_inputs(tmp_path_factory.mktemp("lvis"), gt, dt), lvis_api(gt, dt)


def evalengine(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalengine.cli", *map(str, argv)], capture_output=True, text=True)


def test_printed_and_json_as_lvis_api(inputs):
    (gt, dt), ref = inputs
    result = evalengine("lvis", "--gt", gt, "--dt", dt, "--quiet")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.rstrip("\n") == printed(ref)
    payload = json.loads(evalengine("lvis", "--gt", gt, "--dt", dt, "--json").stdout)
    assert list(payload["stats"]) == list(ref.results)
    np.testing.assert_allclose(list(payload["stats"].values()), [float(v) for v in ref.results.values()], rtol=0,
                               atol=1e-12)
    expected = per_class(ref)
    assert payload["per_class"].keys() == {str(c) for c in expected}
    np.testing.assert_allclose([payload["per_class"][str(c)] for c in expected], list(expected.values()), rtol=0,
                               atol=1e-12)


def test_kept_store_evaluated_again_and_sql(tmp_path, inputs):
    (gt, dt), ref = inputs
    store = tmp_path / "store"
    code, out, err = cli(tmp_path, "lvis", "--gt", gt, "--dt", dt, "--keep-store", store, "--shards", "3")
    assert code == 0 and out.rstrip("\n").endswith(f"store: {store}"), err
    code, out, _ = cli(tmp_path, "lvis", store, "--json", "--scheduler", "sync")
    stats = json.loads(out)["stats"]
    np.testing.assert_allclose(list(stats.values()), [float(v) for v in ref.results.values()], rtol=0, atol=1e-12)
    views = open_store(store)
    rows = views.sql("SELECT metric, value FROM lvis_results WHERE protocol = 'lvis'")
    assert rows["metric"].to_list() == list(ref.results)
    np.testing.assert_allclose(rows["value"].to_numpy(), list(stats.values()), rtol=0, atol=1e-12)
    classes = views.sql("SELECT category_id, ap FROM lvis_per_class_ap")
    expected = per_class(ref)
    np.testing.assert_allclose(classes["ap"].to_numpy(), [expected[c] for c in classes["category_id"]], rtol=0,
                               atol=1e-12)
    labels = views.sql("SELECT label, count(*) AS n FROM lvis_image_labels GROUP BY label ORDER BY label")
    gt_json = json.loads(gt.read_text())
    assert labels.rows() == [("negative", sum(len(i["neg_category_ids"]) for i in gt_json["images"])),
                             ("not_exhaustive", sum(len(i["not_exhaustive_category_ids"]) for i in gt_json["images"]))]


def test_bad_input_is_one_line(tmp_path, inputs):
    (gt, dt), _ = inputs
    bad = json.loads(gt.read_text())
    del bad["images"][1]["neg_category_ids"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    result = evalengine("lvis", "--gt", path, "--dt", dt)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f"evalengine: error: {path}: image {bad['images'][1]['id']}: 'neg_category_ids' is "
                             "missing or not a list of category ids (1 image(s))\n")
    code, _, err = cli(tmp_path, "lvis", "--gt", gt)
    assert code == 2 and err == ["evalengine: error: lvis: give a STORE, or --gt and --dt (not both)"]
    code, _, err = cli(tmp_path, "lvis", "--gt", gt, "--dt", dt, "--iou-type", "keypoints")
    assert code == 2 and "invalid choice: 'keypoints'" in err[0]


def test_ingest_lvis_then_evaluate_protocol_lvis(tmp_path, inputs):
    """``ingest lvis`` keeps the LVIS labels in the store; ``evaluate STORE --protocol lvis`` prints lvis-api's lines
    and JSON, equal to ``evalengine lvis`` from the files; the ``lvis_*`` views serve it."""
    (gt, dt), ref = inputs
    store = tmp_path / "store"
    result = evalengine("ingest", "lvis", "--gt", gt, "--dt", dt, "--store", store, "--shards", "2", "--quiet")
    assert result.returncode == 0 and result.stdout.startswith(f"store: {store} (2 shards"), result.stderr
    result = evalengine("evaluate", store, "--protocol", "lvis", "--quiet")
    assert result.returncode == 0 and result.stdout.rstrip("\n") == printed(ref), result.stderr
    stored = json.loads(evalengine("evaluate", store, "--protocol", "lvis", "--json").stdout)
    from_files = json.loads(evalengine("lvis", "--gt", gt, "--dt", dt, "--json").stdout)
    assert stored == from_files
    np.testing.assert_allclose(list(stored["stats"].values()), [float(v) for v in ref.results.values()], rtol=0,
                               atol=1e-12)
    images = open_store(store).layout.read("images")
    gt_json = json.loads(gt.read_text())
    assert images.sort("image_id").get_column("neg_category_ids").to_list() == [
        i["neg_category_ids"] for i in sorted(gt_json["images"], key=lambda i: i["id"])]
    rows = open_store(store).sql("SELECT metric, value FROM lvis_results WHERE protocol = 'lvis'")
    np.testing.assert_allclose(rows["value"].to_numpy(), list(stored["stats"].values()), rtol=0, atol=1e-12)


def test_evaluate_protocol_lvis_refuses_coco_options(tmp_path, inputs):
    (gt, dt), _ = inputs
    store = tmp_path / "store"
    assert cli(tmp_path, "ingest", "lvis", "--gt", gt, "--dt", dt, "--store", store, "--quiet")[0] == 0
    code, _, err = cli(tmp_path, "evaluate", store, "--protocol", "lvis", "--area-ranges", "all:0:1e10")
    assert code == 2 and err == ["evalengine: error: evaluate: --area-ranges is an option of the coco protocol, not of "
                                 "lvis (lvis-api's thresholds and area ranges are fixed)"]
    code, _, err = cli(tmp_path, "evaluate", store, "--protocol", "lvis", "--max-dets", "1", "10")
    assert code == 2 and "--max-dets takes one cap under lvis" in err[0]


def test_ingest_lvis_refuses_a_coco_ground_truth_before_writing(tmp_path, inputs):
    """A ground truth without the LVIS fields is a located error at ingest, and no store is left behind."""
    (gt, dt), _ = inputs
    bad = json.loads(gt.read_text())
    for category in bad["categories"]:
        category.pop("frequency")
    path = tmp_path / "coco.json"
    path.write_text(json.dumps(bad))
    store = tmp_path / "store"
    result = evalengine("ingest", "lvis", "--gt", path, "--dt", dt, "--store", store)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr == f"evalengine: error: {path}: the categories have no 'frequency' (LVIS: 'r', 'c' or 'f')\n"
    assert not store.exists()
