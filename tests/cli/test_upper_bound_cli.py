"""``evalengine upper-bound``, ``add-run --tag`` and ``evalengine invariance``: tables, JSON, one-line errors."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine.api import ingest_coco
from tests.conftest import SAMPLE_DT as DT
from tests.conftest import SAMPLE_GT as GT
from tests.helpers import run_cli as _run


@pytest.fixture
def store(tmp_path):
    return ingest_coco(GT, DT, tmp_path / "store")


def classifier(tmp_path, wrong_every: int = 5):
    """True labels but every ``wrong_every``-th annotation labelled person (1), or bicycle (2) if it is a person."""
    anns = json.loads(GT.read_text())["annotations"]
    labels = [(2 if a["category_id"] == 1 else 1) if i % wrong_every == 0 else a["category_id"]
              for i, a in enumerate(anns)]
    path = tmp_path / "classifier.csv"
    pl.DataFrame({"gt_id": [a["id"] for a in anns], "category_id": labels,
                  "score": np.random.default_rng(0).random(len(anns))}).write_csv(path)
    return path, anns, labels


def test_upper_bound_text_and_json(capsys, tmp_path, store):
    path, anns, labels = classifier(tmp_path)
    status, out, err = _run(capsys, "upper-bound", store.path, "--classifier", path)
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == 13 and lines[0].startswith(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all")
    objects = [(a["category_id"], x) for a, x in zip(anns, labels) if not a["iscrowd"]]
    accuracy = sum(t == x for t, x in objects) / len(objects)
    assert lines[12] == (f"classifier accuracy {accuracy:.4f} on {len(objects)} objects (crowd left out); run 'uap' "
                         f"of {store.path}")
    status, out, err = _run(capsys, "upper-bound", store.path, "--classifier", path, "--run", "uap1", "--unit-score",
                            "--json")
    got = json.loads(out)
    assert status == 0 and list(got) == ["run", "strategy", "stats", "stat_names", "accuracy", "n_objects",
                                         "per_class"]
    assert got["strategy"] == "s1"
    assert got["run"] == "uap1" and got["n_objects"] == len(objects) and got["accuracy"] == pytest.approx(accuracy)
    assert list(got["per_class"]["1"]) == ["name", "ap", "ap50", "ar", "accuracy", "n_objects"]
    # AP50 and AP75 differ only where a mislabelled box overlaps an object of its label at 0.5 <= IoU < 0.75 (§3.3.1)
    assert 0 < got["stats"][1] - got["stats"][2] < 1e-4
    status, out, _ = _run(capsys, "sql", store.path, "SELECT run, tags['upper_bound'] AS score FROM runs")
    assert "uap1" in out and "unit-score" in out and "classifier-score" in out
    status, out, _ = _run(capsys, "upper-bound", store.path, "--classifier", path, "--per-class", "--overwrite")
    assert status == 0 and "│ 1           ┆ person" in out and "accuracy" in out.splitlines()[14]


def test_upper_bound_strategy_2(capsys, tmp_path, store):
    """Two rows per annotation (the true label at a random score, and person at 0.5): s2_mcb takes the more confident,
    s2_mfl ties on counts and takes the label of the higher score; s1 refuses the table."""
    anns = json.loads(GT.read_text())["annotations"]
    scores = np.random.default_rng(1).random(len(anns))
    path = tmp_path / "boxes.csv"
    pl.DataFrame({"gt_id": [a["id"] for a in anns] * 2, "box_id": [1] * len(anns) + [2] * len(anns),
                  "category_id": [a["category_id"] for a in anns] + [1] * len(anns),
                  "score": [*scores, *[0.5] * len(anns)]}).write_csv(path)
    objects = [(a["category_id"], s) for a, s in zip(anns, scores) if not a["iscrowd"]]
    accuracy = sum(c == 1 or s >= 0.5 for c, s in objects) / len(objects)
    for strategy in ("s2_mcb", "s2_mfl"):
        status, out, err = _run(capsys, "upper-bound", store.path, "--classifier", path, "--strategy", strategy,
                                "--run", strategy, "--json")
        got = json.loads(out)
        assert (status, err, got["strategy"]) == (0, "", strategy)
        assert got["accuracy"] == pytest.approx(accuracy, abs=1e-12)
    status, out, _ = _run(capsys, "upper-bound", store.path, "--classifier", path, "--strategy", "s2_mcb")
    assert status == 0 and out.splitlines()[-1] == f"labels chosen by s2_mcb from {2 * len(anns):,} rows of the " \
                                                   "classifier table"
    status, out, err = _run(capsys, "upper-bound", store.path, "--classifier", path)
    assert status == 2 and err.startswith(f"evalengine: error: {path}: rows 1, {len(anns) + 1}: gt_id {anns[0]['id']} "
                                          "listed more than once (strategy s1 takes one row per annotation")


def test_upper_bound_errors_are_one_line(capsys, tmp_path, store):
    path, anns, labels = classifier(tmp_path)
    table = pl.read_csv(path)
    bad = tmp_path / "bad.csv"
    table.with_columns(pl.when(pl.int_range(pl.len()) == 3).then(424242).otherwise(pl.col("gt_id"))
                       .alias("gt_id")).write_csv(bad)
    cases = [
        (("--classifier", bad), f"{bad}: row 4: gt_id 424242 is not an annotation of the store's ground truth"),
        (("--classifier", path, "--run", "default"), f"{store.path}: run 'default' already exists (--overwrite, or overwrite=True in Python, "
                                                     "replaces it)"),
        (("--classifier", tmp_path / "none.csv"), f"{tmp_path / 'none.csv'}: no such file"),
    ]
    short = tmp_path / "short.csv"
    table.head(5).write_csv(short)
    cases.append((("--classifier", short), f"{short}: gt_id {', '.join(map(str, [a['id'] for a in anns][5:10]))} "
                                           f"and {len(anns) - 10} more ({len(anns) - 5} of {len(anns)} annotations) "
                                           "have no row: the upper bound emits one detection per annotation (allow "
                                           "missing rows to count them as missed)"))
    for argv, message in cases:
        status, out, err = _run(capsys, "upper-bound", store.path, *argv)
        assert (status, out, err) == (2, "", f"evalengine: error: {message}\n")
    status, out, err = _run(capsys, "upper-bound", store.path, "--classifier", short, "--allow-missing", "--json")
    assert status == 0 and json.loads(out)["n_objects"] == 5 - sum(a["iscrowd"] for a in anns[:5])


def test_add_run_tags_and_invariance(capsys, tmp_path, store):
    for model in ("m1", "m2"):
        for perturbation in ("orig", "blur"):
            status, _, err = _run(capsys, "add-run", store.path, "--run", f"{model}-{perturbation}", "--dt", DT,
                                  "--tag", f"model={model}", "--tag", f"perturbation={perturbation}")
            assert status == 0 and err == ""
    status, out, err = _run(capsys, "invariance", store.path, "--baseline", "orig")
    assert status == 0
    assert err == f"evalengine: warning: left out (no perturbation tag): {store.path}:default\n"
    lines = out.splitlines()
    assert lines[0] == "AP, AP50, AP75 (class mean)"
    header = [cell.strip() for cell in lines[2].split("┆")]
    assert header == ["│ model", "orig AP", "orig AP50", "orig AP75", "blur AP", "blur AP50", "blur AP75 │"]
    assert "APs, APm, APl (class mean)" in lines and "objects against 'orig' (IoU 0.5, regular objects paired by id)" \
        in lines
    assert lines[-3].split("┆")[1:] == [" blur         ", " 830       ", " 649               ", " 649      ",
                                        " 0    ", " 0      │"]
    status, out, err = _run(capsys, "invariance", store.path, "--perturbation", "blur", "--model", "m2", "--json")
    got = json.loads(out)
    assert status == 0 and list(got) == ["metrics", "untagged"] and got["untagged"] == [f"{store.path}:default"]
    assert {row["run"] for row in got["metrics"]} == {"m2-blur"}
    assert got["metrics"][0] == {"store": str(store.path), "model": "m2", "perturbation": "blur", "level": None,
                                 "run": "m2-blur", "metric": "AP", "size": "all", "category_id": None,
                                 "value": pytest.approx(0.5046, abs=5e-5)}


@pytest.mark.parametrize("argv, message", [
    (("add-run", "{store}", "--run", "x", "--dt", DT, "--tag", "blur"),
     "--tag 'blur': expected KEY=VALUE (e.g. --tag perturbation=blur)"),
    (("add-run", "{store}", "--run", "x", "--dt", DT, "--tag", "=blur"),
     "--tag '=blur': expected KEY=VALUE (e.g. --tag perturbation=blur)"),
    (("add-run", "{store}", "--run", "x", "--dt", DT, "--tag", "a=1", "--tag", "a=2"),
     "--tag a: given twice (a=1, a=2)"),
    (("add-run", "{store}", "--run", "x", "--dt", DT, "--tag", "a/b=1"),
     "tag name 'a/b' is not allowed: use 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"),
    (("invariance", "{store}"),
     "{store}: no run has a 'perturbation' tag (runs: {store}:default); tag them: evalengine add-run STORE --run R "
     "--dt FILE --tag perturbation=NAME --tag model=NAME"),
])
def test_tag_and_invariance_errors_are_one_line(capsys, store, argv, message):
    status, out, err = _run(capsys, *[str(a).format(store=store.path) for a in argv])
    assert (status, out, err) == (2, "", f"evalengine: error: {message.format(store=store.path)}\n")
    assert store.runs == ["default"]


def test_unknown_perturbation_names_the_known_ones(capsys, store):
    _run(capsys, "add-run", store.path, "--run", "b", "--dt", DT, "--tag", "perturbation=blur")
    status, out, err = _run(capsys, "invariance", store.path, "--perturbation", "fog")
    assert (status, out) == (2, "")
    assert err.splitlines()[-1] == "evalengine: error: perturbation 'fog' is not a tag of any run (known: blur)"
