"""``evalengine segmentation``, ``ingest partitions``, ``evaluate --protocol partitions`` and the SQL views of a
partition store: the SEISM demo's numbers through every door, and bad input as one located line."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image

from evalengine import api
from evalengine.api.segmentation import evaluate_partitions, ingest_partition_arrays, values_at_ods
from evalengine.cli import main
from evalengine.errors import InputError
from evalengine.io.quadtree import QUADTREE_REGIONS
from evalengine.metrics.partition.combine import MEASURES
from evalengine.metrics.partition.meta import sabd

DATA = Path(__file__).resolve().parent.parent / "data" / "seism"
DEMO = np.load(DATA / "demo_partitions.npz")
EXPECTED = json.loads((DATA / "expected_seism_measures.json").read_text())["demo_multi_gt"]


@pytest.fixture()
def folders(tmp_path):
    """The demo as files: the partition as .npy, its two annotators as <stem>_<k>.png; a second image as PNG
    against an .npz of its annotators."""
    pred, gt = tmp_path / "pred", tmp_path / "gt"
    pred.mkdir(), gt.mkdir()
    np.save(pred / "demo.npy", DEMO["partition"])
    for k, name in enumerate(("gt1", "gt2"), 1):
        Image.fromarray(DEMO[name].astype(np.uint8)).save(gt / f"demo_{k}.png")
    Image.fromarray(DEMO["gt2"].astype(np.uint8)).save(pred / "swapped.png")
    np.savez(gt / "swapped.npz", annotators=np.stack([DEMO["gt1"], DEMO["partition"]]))
    return pred, gt


def test_segmentation_json_equals_seism_demo(folders, capsys):
    pred, gt = folders
    assert main(["segmentation", "--pred", str(pred), "--gt", str(gt), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert set(payload["per_image"]) == {"demo", "swapped"}
    assert list(payload["dataset"]) == list(MEASURES)
    for measure, values in EXPECTED.items():
        got = np.array(payload["per_image"]["demo"][measure], ndmin=1)
        assert np.abs(got - values).max() <= 1e-12, measure
    both = [payload["per_image"][stem]["pri"] for stem in ("demo", "swapped")]
    assert payload["dataset"]["pri"] == pytest.approx(sum(both) / 2, abs=1e-15)
    assert main(["segmentation", "--pred", str(pred), "--gt", str(gt), "--measures", "fop", "sc"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "2 images" and [line.split()[0] for line in out[2:]] == ["sc", "fop"]


def test_store_commands_and_sql_views(folders, tmp_path, capsys):
    pred, gt = folders
    sweep = tmp_path / "sweep"
    for parameter, source in (("0.5", pred), ("2", pred)):
        (sweep / parameter).mkdir(parents=True)
        for path in source.iterdir():
            (sweep / parameter / path.name).write_bytes(path.read_bytes())
    store = tmp_path / "store"
    assert main(["ingest", "partitions", "--gt", str(gt), "--pred", f"human={pred}", f"sweep={sweep}",
                 "--store", str(store), "--shards", "2", "--quadtree"]) == 0
    assert "partition runs: human, quadtree, sweep" in capsys.readouterr().out
    assert main(["fsck", str(store)]) == 0 and "no problems found" in capsys.readouterr().out
    assert main(["evaluate", str(store), "--protocol", "partitions", "--run", "sweep", "--json"]) == 0
    summary = {row["measure"]: row for row in json.loads(capsys.readouterr().out)["summary"]}
    assert summary["fop"]["ods_parameter"] == 0.5 and summary["fop"]["ap"] == 0.0  # one distinct recall
    evaluation = evaluate_partitions(api.open(store), "human")
    python = {row["file_name"]: row for row in evaluation.per_image.iter_rows(named=True)}
    sql = api.open(store).sql("SELECT * FROM partition_measures WHERE run = 'human'")
    columns = [c for c in sql.columns if c in python["demo"] and c not in ("image_id", "file_name", "parameter")]
    assert len(columns) == 25 and "bgm" in columns  # every measure, fr's, fop's and fb's P and R, fb's counts
    for row in sql.iter_rows(named=True):
        for column in columns:
            assert row[column] == pytest.approx(python[row["file_name"]][column], abs=1e-12, rel=0), column
    dataset = api.open(store).sql("SELECT * FROM dataset_measures WHERE run = 'human'").row(0, named=True)
    assert dataset["fr"] == pytest.approx(evaluation.dataset["fr"][0], abs=1e-12)
    assert dataset["fop"] == pytest.approx(evaluation.dataset["fop"][0], abs=1e-12)
    curve = api.open(store).sql("SELECT * FROM pr_curve_segmentation WHERE run = 'sweep' ORDER BY measure, "
                                "parameter")
    assert curve["parameter"].to_list() == [0.5, 2.0] * 3
    assert curve["measure"].to_list() == ["fb"] * 2 + ["fop"] * 2 + ["fr"] * 2
    fb = evaluate_partitions(api.open(store), "sweep", ["fb"]).pr_curve("fb")
    assert curve["f"].to_list()[:2] == pytest.approx(fb["f"].to_list(), abs=1e-12, rel=0)
    assert main(["fsck", str(store)]) == 0  # the match tables of partition runs are the store's
    # SABD of the human run against the quadtree baseline, each at its own ODS
    quadtree = evaluate_partitions(api.open(store), "quadtree", ["sc"])
    assert quadtree.dataset["parameter"].to_list() == [float(n) for n in QUADTREE_REGIONS]
    human, baseline = values_at_ods(evaluation, "sc"), values_at_ods(quadtree, "sc")
    judged = human.join(baseline, on="image_id", suffix="_baseline")
    want = 1.0 - float(np.mean(judged["value"].to_numpy() < judged["value_baseline"].to_numpy()))
    assert sabd(human.with_columns(method=pl.lit("human")), baseline.with_columns(baseline=pl.lit("q"))) == want


def _bad(tmp_path, pred_arrays: dict, gt_arrays: dict, *extra, run=None) -> str:
    """``evalengine segmentation`` on these files; in-process by default, else ``run(argv)``."""
    pred, gt = tmp_path / "p", tmp_path / "g"
    pred.mkdir(exist_ok=True), gt.mkdir(exist_ok=True)
    for folder, arrays in ((pred, pred_arrays), (gt, gt_arrays)):
        for name, array in arrays.items():
            if name.endswith(".png"):
                Image.fromarray(array).save(folder / name)
            else:
                np.save(folder / name, array)
    return (run or main)(["segmentation", "--pred", str(pred), "--gt", str(gt), *extra])


def _bad_case(case: str) -> tuple:
    """``(ok, pred, gt, extra flags)`` of a bad-input case on one 4×5 image (``ok``: its good label map)."""
    ok = np.arange(20).reshape(4, 5) % 3
    pred, gt, extra = {"a.npy": ok}, {"a.npy": np.stack([ok, ok])}, []
    if case == "size":
        gt = {"a.npy": np.zeros((2, 5, 4), int)}
    elif case == "alpha":
        pred = {"a.png": np.zeros((4, 5, 4), np.uint8)}
    elif case == "void":
        gt = {"a.npy": np.stack([ok, (ok + 1) % 3])}
        extra = ["--void-label", "0"]
    return ok, pred, gt, extra


@pytest.mark.parametrize("case, message", [
    ("size", "label map is 4×5 (height×width), its ground truth"),
    ("alpha", "PNG with an alpha channel (mode RGBA)"),
    ("void", "annotator 2 has void label 0 at other pixels than annotator 1"),
    ("missing", "has no label map for image 'b'"),
    ("float", "labels must be integers, got float64 values"),
    ("measure", "--measures: unknown measure 'fbt'"),
])
def test_bad_input_is_one_located_line(tmp_path, capsys, case, message):
    ok, pred, gt, extra = _bad_case(case)
    if case == "missing":
        gt["b.npy"] = gt["a.npy"]
    elif case == "float":
        pred = {"a.npy": ok + 0.5}
    elif case == "measure":
        extra = ["--measures", "fbt"]
    assert _bad(tmp_path, pred, gt, *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("evalengine: error: ") and message in err and len(err.strip().splitlines()) == 1, err
    if case in ("size", "alpha", "float"):
        assert "a." in err  # names the file


@pytest.mark.parametrize("case, message", [
    ("size", "g/a.npy is 5×4"),
    ("alpha", "p/a.png: PNG with an alpha channel (mode RGBA)"),
    ("void", "g/a.npy: annotator 2 has void label 0 at other pixels than annotator 1"),
])
def test_bad_input_from_the_command_line(tmp_path, case, message):
    """The issue's bad inputs through the installed command: exit status 2, one located line, no traceback."""
    _, pred, gt, extra = _bad_case(case)

    def run(argv):
        return subprocess.run([sys.executable, "-m", "evalengine.cli", *argv], capture_output=True, text=True)

    result = _bad(tmp_path, pred, gt, *extra, run=run)
    assert result.returncode == 2 and result.stdout == "", result
    assert result.stderr.startswith("evalengine: error: ") and len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_a_failed_ingest_leaves_no_store(tmp_path):
    ok = np.arange(20).reshape(4, 5) % 3

    def images():
        yield "a", ok[None], {"seg": {0.0: ok}}
        yield "b", ok[None], {"seg": {0.0: ok[:, :4]}}

    with pytest.raises(InputError, match="image 'b'"):
        ingest_partition_arrays(images(), tmp_path / "store", {"seg": [0.0]})
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())


def test_plots(folders, tmp_path):
    from evalengine.plots.figure import close
    from evalengine.plots.segmentation import measure_boxplots, segmentation_pr_curves

    pred, gt = folders
    evaluation = api.segmentation.segmentation(pred, gt, ["fr", "fop", "sc", "fb"])
    for figure in (segmentation_pr_curves({"human": evaluation}, "fop"), segmentation_pr_curves({"h": evaluation}, "fb"),
                   measure_boxplots(evaluation.per_image, evaluation.measures)):
        figure.savefig(tmp_path / "figure.png")
        assert (tmp_path / "figure.png").stat().st_size > 1000
        close(figure)
