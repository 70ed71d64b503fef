"""Never write outside the store, never replace what is not a store: the name rule, safe overwrite, fsck."""

import os
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evalengine
from evalengine.api import check_store, ingest_coco
from evalengine.cli import main
from evalengine.errors import InputError, StoreError, StoreWarning
from evalengine.store.paths import check_name
from tests.conftest import PACKAGE_DATA

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def tree(folder) -> dict:
    """Every file and folder under ``folder`` with its size (folders: -1)."""
    found = {}
    for base, dirs, files in os.walk(folder):
        for name in dirs:
            found[os.path.relpath(os.path.join(base, name), folder)] = -1
        for name in files:
            path = os.path.join(base, name)
            found[os.path.relpath(path, folder)] = os.path.getsize(path)
    return found


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory):
    return ingest_coco(GT, DT, tmp_path_factory.mktemp("sample") / "store", n_shards=2)


@pytest.fixture
def store(sample_store, tmp_path):
    """A fresh copy of the sample store, in ``tmp_path/work/store`` (``tmp_path/work`` holds nothing else)."""
    target = tmp_path / "work" / "store"
    shutil.copytree(sample_store.path, target)
    return evalengine.open(target)


def cli(capsys, *argv):
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("run", ["x/../../../victim", "a/../../../../x", "*", "a/b", "x=y", "[", "a" * 101, "",
                                 "a\nb", ".hidden", "-flag", "a b", "é", "a\\b", "..", "run?", "a'b", "C:x"])
def test_names_outside_the_rule_are_refused_everywhere(store, tmp_path, capsys, run):
    before = tree(tmp_path)
    for argv in (["add-run", store.path, f"--run={run}", "--dt", DT, "--overwrite", "--quiet"],
                 ["ingest", "coco", "--gt", GT, "--dt", DT, "--store", tmp_path / "new", f"--run={run}", "--quiet"],
                 ["add-proposals", store.path, f"--run={run}", "--proposals", DT],
                 ["baseline", "--gt", GT, "--kind", "uniform", "--per-image", "5", "--store", store.path, f"--run={run}"]):
        code, out, err = cli(capsys, *argv)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith(f"evalengine: error: run name {run!r} is not allowed")
    assert tree(tmp_path) == before


@given(st.text(min_size=0, max_size=120))
@settings(max_examples=300, deadline=None)
def test_name_rule(name):
    allowed = (1 <= len(name) <= 100 and set(name) <= NAME_CHARS and name[0] not in "._-")
    if allowed:
        assert check_name("run", name) == name
    else:
        with pytest.raises(InputError, match="is not allowed"):
            check_name("run", name)


def test_names_inside_the_rule_work_end_to_end(store):
    reference = store.evaluate().stats()
    for run in ["a", "model.v2", "A_b-3", "9" * 100]:
        with_run = store.add_run(DT, run)
        assert with_run.evaluate(run=run).stats() == reference
        assert with_run.sql(f"SELECT count(*) AS n FROM dt WHERE run = '{run}'")["n"].item() == 734


def test_overwrite_refuses_a_folder_that_is_not_a_store(tmp_path, capsys):
    thesis = tmp_path / "mydata" / "thesis"
    thesis.mkdir(parents=True)
    (thesis / "chapter1.tex").write_text("precious")
    before = tree(tmp_path)
    code, _, err = cli(capsys, "ingest", "coco", "--gt", GT, "--dt", DT, "--store", tmp_path / "mydata",
                       "--overwrite", "--quiet")
    assert code == 2
    assert err == f"evalengine: error: {tmp_path / 'mydata'}: exists and is not an evalengine store (no manifest.json);" \
                  " refusing to replace it\n"
    assert tree(tmp_path) == before


def test_overwrite_refuses_a_store_holding_an_input_or_another_file(store, tmp_path, capsys):
    gt = store.path / "gt.json"
    shutil.copy(GT, gt)
    before = tree(tmp_path)
    code, _, err = cli(capsys, "ingest", "coco", "--gt", gt, "--dt", DT, "--store", store.path, "--overwrite", "--quiet")
    assert code == 2 and "holds 'gt.json', which is not part of a store; refusing to replace it" in err
    gt.unlink()
    dt = store.path / "dt" / "run=default" / "shard=0" / "part-0.parquet"  # an input inside the store's own tables
    code, _, err = cli(capsys, "ingest", "coco", "--gt", GT, "--dt", dt, "--store", store.path, "--overwrite", "--quiet")
    assert code == 2 and err == f"evalengine: error: {store.path}: holds the input {dt}; refusing to replace it\n"
    del before["work/store/gt.json"]
    assert tree(tmp_path) == before


def test_overwrite_replaces_a_store_and_says_what_it_replaced(store, tmp_path):
    with pytest.warns(StoreWarning, match=r"store: replaced the store of 2 shards and runs: default$"):
        replaced = ingest_coco(GT, DT, store.path, n_shards=3, run="other", overwrite=True)
    assert replaced.runs == ["other"] and replaced.layout.n_shards == 3
    assert sorted(os.listdir(tmp_path / "work")) == ["store"]  # no temporary folder, no lock file left beside it


def test_an_empty_folder_is_a_new_store_and_a_file_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    assert ingest_coco(GT, DT, tmp_path / "empty").runs == ["default"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="file: is a file, not a store"):
        ingest_coco(GT, DT, tmp_path / "file", overwrite=True)
    assert (tmp_path / "file").read_text() == "x"


def test_run_overwrite_says_what_it_replaced(store):
    with pytest.warns(StoreWarning, match=r"replaced run 'default' \(734 detections from .*fakebbox100_results.json\)"):
        store.add_run(DT, "default", overwrite=True)


def test_fsck_finds_and_repairs_what_interrupted_writes_left(store, capsys):
    root = store.path
    reference = store.evaluate().stats()
    planted = [root.parent / ".store.tmp-0123abcd", root / "dt" / ".run=x.old-89abcdef",
               root / "matches" / "protocol=coco" / ".run=default.tmp-00000000", root / "dt" / "run=lost",
               root / "matches" / "protocol=coco" / "run=gone"]
    for folder in planted:
        (folder / "shard=0").mkdir(parents=True)
        (folder / "shard=0" / "part-0.parquet").write_bytes(b"PAR1 truncated")
    (root / "runs" / ".part-0.parquet.tmp-0a0b0c0d").write_bytes(b"x")
    unfinished = root / "matches" / "protocol=coco-0123456789" / "run=default"
    shutil.copytree(root / "matches" / "protocol=coco" / "run=default", unfinished)
    (unfinished / "protocol.json").unlink()
    findings = check_store(root)
    assert sorted(findings["path"]) == sorted(map(str, [*planted, root / "runs" / ".part-0.parquet.tmp-0a0b0c0d",
                                                        unfinished]))
    assert set(findings["repair"]) == {"remove"}
    assert store.sql("SELECT count(*) AS n FROM dt")["n"].item() == 734  # readers never see them
    code, out, err = cli(capsys, "fsck", root)
    assert code == 2 and err == f"evalengine: error: {root}: 7 problem(s) found; `evalengine fsck {root} --repair` " \
                                "removes 7 of them\n"
    code, out, err = cli(capsys, "fsck", root, "--repair")
    assert code == 0 and out.endswith(f"{root}: 7 problem(s) repaired\n")
    assert check_store(root).is_empty()
    assert not any(path.exists() for path in [*planted, unfinished])
    assert evalengine.open(root).evaluate().stats() == reference


def test_fsck_reports_what_it_cannot_repair(store, capsys):
    (store.path / "gt" / "shard=1" / "part-0.parquet").unlink()
    shard = store.path / "dt" / "run=default" / "shard=0" / "part-0.parquet"
    shard.write_bytes(shard.read_bytes()[:100])
    findings = check_store(store.path, repair=True)
    assert findings.rows() == [
        (str(store.path / "gt" / "shard=1" / "part-0.parquet"), "missing", "re-ingest the store"),
        (str(shard), findings["problem"][1], "add run 'default' again with overwrite"),
    ]
    assert findings["problem"][1].startswith("unreadable (")
    code, _, err = cli(capsys, "fsck", store.path, "--repair")
    assert code == 2 and err == f"evalengine: error: {store.path}: 2 problem(s) cannot be repaired here (see above)\n"


def test_fsck_of_a_folder_that_is_no_store_writes_nothing(tmp_path, capsys):
    code, out, err = cli(capsys, "fsck", tmp_path / "a" / "b" / "store")
    assert (code, out) == (2, "")
    assert err == f"evalengine: error: {tmp_path / 'a' / 'b' / 'store'}: not an evalengine store (no manifest.json)\n"
    assert list(tmp_path.iterdir()) == []
