"""``--tag KEY=VALUE`` on every command that adds a run: ``ingest coco``, ``ingest voc``, ``add-run`` and
``add-proposals`` (plain and perturbed); the tags in the ``runs`` / ``run_tags`` views, tagged proposal runs in the
invariance table, and one-line located errors that leave nothing written."""

import json

import pytest

from evalengine import api
from tests.conftest import PACKAGE_DATA, SAMPLE_DT, SAMPLE_GT
from tests.helpers import run_cli, write_proposals_near_objects

VOC = PACKAGE_DATA / "voc_sample"


def _tags(store_path) -> list:
    return api.open(store_path).sql("SELECT run, key, value FROM run_tags ORDER BY run, key").rows()


def test_ingest_coco_and_voc_tag_their_run(capsys, tmp_path):
    status, _, err = run_cli(capsys, "ingest", "coco", "--gt", SAMPLE_GT, "--dt", SAMPLE_DT, "--store", tmp_path / "c",
                             "--run", "frcnn", "--tag", "model=frcnn", "--tag", "split=val2014")
    assert (status, err) == (0, "")
    assert _tags(tmp_path / "c") == [("frcnn", "model", "frcnn"), ("frcnn", "split", "val2014")]
    runs = api.open(tmp_path / "c").sql("SELECT run, kind, tags['model'] AS model, cardinality(tags) AS n FROM runs")
    assert runs.rows() == [("frcnn", "detections", "frcnn", 2)]
    status, _, err = run_cli(capsys, "ingest", "voc", "--gt", VOC / "Annotations", "--dt", VOC / "results",
                             "--store", tmp_path / "v", "--tag", "perturbation=none", "--tag", "model=ssd")
    assert (status, err) == (0, "")
    assert _tags(tmp_path / "v") == [("default", "model", "ssd"), ("default", "perturbation", "none")]


def test_ingest_api_tags(tmp_path):
    store = api.ingest_coco(SAMPLE_GT, SAMPLE_DT, tmp_path / "s", tags={"model": "m"})
    assert _tags(store.path) == [("default", "model", "m")]
    store = api.ingest_voc(VOC / "Annotations", VOC / "results", tmp_path / "v", run="r", tags={"model": "m"})
    assert _tags(store.path) == [("r", "model", "m")]


@pytest.fixture
def proposal_store(tmp_path):
    """A store of a ground truth, and a proposal file whose boxes sit near its objects (3 per object)."""
    gt, props = write_proposals_near_objects(tmp_path)
    return api.ingest_gt(gt, tmp_path / "store"), props


def test_add_proposals_tags_and_invariance(capsys, proposal_store):
    """A proposal run's own tags sit beside a perturbed run's derived ones; the invariance table reads its model
    tag (before: the reference run's name stood in for the model)."""
    store, props = proposal_store
    for argv in (("--run", "eb", "--tag", "model=edgeboxes"),
                 ("--run", "eb-scaled", "--perturbation", "scale:0.5", "--reference", "eb", "--tag", "model=edgeboxes"),
                 ("--run", "eb-light", "--perturbation", "light", "--reference", "eb", "--tag", "model=edgeboxes",
                  "--tag", "note=gamma 1.5")):
        status, _, err = run_cli(capsys, "add-proposals", store.path, "--proposals", props, *argv)
        assert (status, err) == (0, "")
    assert _tags(store.path) == [
        ("eb", "model", "edgeboxes"),
        ("eb-light", "model", "edgeboxes"), ("eb-light", "note", "gamma 1.5"), ("eb-light", "perturbation", "light"),
        ("eb-light", "reference", "eb"),
        ("eb-scaled", "level", "0.5"), ("eb-scaled", "model", "edgeboxes"), ("eb-scaled", "perturbation", "scale"),
        ("eb-scaled", "reference", "eb")]
    status, out, err = run_cli(capsys, "invariance", store.path, "--json")
    assert status == 0 and err == f"evalengine: warning: left out (no perturbation tag): {store.path}:eb\n"
    rows = json.loads(out)["metrics"]
    want = api.open(store.path).repeatability(["eb-scaled", "eb-light"], reference="eb")
    assert [(r["model"], r["perturbation"], r["level"], r["run"], r["metric"]) for r in rows] == [
        ("edgeboxes", "scale", "0.5", "eb-scaled", "repeatability"),
        ("edgeboxes", "light", None, "eb-light", "repeatability")]
    assert [r["value"] for r in rows] == want.get_column("repeatability").to_list()


def test_ingest_proposals_api_tags(tmp_path, proposal_store):
    _, props = proposal_store
    store = api.ingest_proposals(tmp_path / "gt.json", props, tmp_path / "p", run="eb", tags={"model": "edgeboxes"})
    assert _tags(store.path) == [("eb", "model", "edgeboxes")]


@pytest.mark.parametrize("command, message", [
    (("ingest", "coco", "--gt", SAMPLE_GT, "--dt", SAMPLE_DT, "--store", "{new}", "--tag", "blur"),
     "--tag 'blur': expected KEY=VALUE (e.g. --tag perturbation=blur)"),
    (("ingest", "coco", "--gt", SAMPLE_GT, "--dt", SAMPLE_DT, "--store", "{new}", "--tag", "a b=1"),
     "tag name 'a b' is not allowed: use 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"),
    (("ingest", "voc", "--gt", VOC / "Annotations", "--dt", VOC / "results", "--store", "{new}", "--tag", "m=1",
      "--tag", "m=2"), "--tag m: given twice (m=1, m=2)"),
    (("add-proposals", "{store}", "--run", "x", "--proposals", "{props}", "--tag", "perturbation=blur"),
     ("proposal run 'x': tag perturbation=blur is not allowed: a proposal run's perturbation, level, reference tags "
      "come from its perturbation (add-proposals --perturbation or --homographies, and --reference)")),
    (("add-proposals", "{store}", "--run", "x", "--proposals", "{props}", "--perturbation", "scale:2",
      "--reference", "p", "--tag", "level=3"),
     ("proposal run 'x': tag level=3 is not allowed: a proposal run's perturbation, level, reference tags come from "
      "its perturbation (add-proposals --perturbation or --homographies, and --reference)")),
    (("add-proposals", "{store}", "--run", "x", "--proposals", "{props}", "--tag", "model=two\u2028lines"),
     "tag model: the value 'two\\u2028lines' is not allowed: use 1 to 200 printable characters on one line"),
])
def test_bad_tags_are_located_one_line_errors_and_write_nothing(capsys, tmp_path, proposal_store, command, message):
    store, props = proposal_store
    store = store.add_proposals(props, run="p")
    argv = [str(a).format(new=tmp_path / "new", store=store.path, props=props) for a in command]
    status, out, err = run_cli(capsys, *argv)
    assert (status, out, err) == (2, "", f"evalengine: error: {message}\n")
    assert not (tmp_path / "new").exists()
    assert api.open(store.path).layout.proposal_runs.keys() == {"p"}
