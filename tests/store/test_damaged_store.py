"""A damaged store is a one-line StoreError that names the damaged file and points to ``evalengine fsck``, whether
the damage shows when the store is opened (its manifest, its shard count) or when a shard is read (in a shard task,
under any scheduler)."""

import json
import shutil

import polars as pl
import pytest

import evalengine
from evalengine.errors import StoreError
from evalengine.store.layout import read_stored
from tests.conftest import PACKAGE_DATA

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
N_SHARDS = 4


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    path = tmp_path_factory.mktemp("pristine") / "store"
    evalengine.ingest_coco(GT, DT, path, n_shards=N_SHARDS)
    return path


@pytest.fixture
def store(pristine, tmp_path):
    """A fresh copy of a 4-shard store, to damage."""
    return shutil.copytree(pristine, tmp_path / "store")


def _manifest(store) -> dict:
    return json.loads((store / "manifest.json").read_text())


def _write_manifest(store, manifest) -> None:
    (store / "manifest.json").write_text(json.dumps(manifest))


def _damage_error(call, path, store) -> str:
    """The message of the StoreError ``call()`` raises: one line, naming ``path`` first, pointing to fsck."""
    with pytest.raises(StoreError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert message.endswith(f"the store is damaged; run `evalengine fsck {store}`")
    return message


def _open(store):
    return lambda: evalengine.open(store)


# -- damage seen when the store is opened: the manifest and the shard count ------------------------------------


def test_truncated_manifest(store):
    text = (store / "manifest.json").read_text()
    (store / "manifest.json").write_text(text[:len(text) // 2])
    message = _damage_error(_open(store), store / "manifest.json", store)
    assert ": not valid JSON (" in message


def test_empty_manifest(store):
    (store / "manifest.json").write_text("")
    assert "not valid JSON (Expecting value: line 1 column 1 (char 0))" in _damage_error(
        _open(store), store / "manifest.json", store)


def test_binary_manifest(store):
    (store / "manifest.json").write_bytes(bytes(range(128, 256)) * 4)
    assert "not valid JSON ('utf-8' codec can't decode byte 0x80" in _damage_error(
        _open(store), store / "manifest.json", store)


@pytest.mark.parametrize("content, kind", [([1, 2], "a list"), ("store", "a string"), (None, "null"), (4, "an integer")])
def test_manifest_that_is_not_an_object(store, content, kind):
    _write_manifest(store, content)
    assert f": {kind}, not a JSON object —" in _damage_error(_open(store), store / "manifest.json", store)


@pytest.mark.parametrize("key", ["runs", "n_shards", "schema_version"])
def test_manifest_missing_a_key(store, key):
    manifest = _manifest(store)
    del manifest[key]
    _write_manifest(store, manifest)
    assert f": no '{key}' —" in _damage_error(_open(store), store / "manifest.json", store)


@pytest.mark.parametrize("key, value, problem", [
    ("n_shards", "4", "'n_shards' is a string, not an integer"),
    ("n_shards", 4.0, "'n_shards' is a number, not an integer"),
    ("n_shards", True, "'n_shards' is a boolean, not an integer"),
    ("n_shards", 0, "'n_shards' is 0, not a count of shards"),
    ("runs", "default", "'runs' is a string, not a list"),
    ("runs", [1], "'runs' holds something other than run names"),
    ("proposal_runs", [], "'proposal_runs' is a list, not an object"),
    ("proposal_runs", {"p": "x"}, "'proposal_runs' holds something other than run descriptions"),
    ("provenance", None, "'provenance' is null, not an object"),
])
def test_manifest_key_of_the_wrong_type(store, key, value, problem):
    _write_manifest(store, dict(_manifest(store), **{key: value}))
    assert f": {problem} —" in _damage_error(_open(store), store / "manifest.json", store)


def test_other_schema_version_says_re_ingest(store):
    """Not damage: a store of another version (whatever keys it holds) is to be ingested again."""
    _write_manifest(store, {"schema_version": 99})
    with pytest.raises(StoreError, match=r"store schema version 99 is not 1; re-ingest it$"):
        evalengine.open(store)


def test_manifest_says_more_shards_than_the_folders_hold(store):
    """n_shards 4, three shard folders: the first missing shard file is named."""
    shutil.rmtree(store / "gt" / "shard=3")
    shutil.rmtree(store / "dt" / "run=default" / "shard=3")
    message = _damage_error(_open(store), store / "gt" / "shard=3" / "part-0.parquet", store)
    assert ": missing (the manifest says 4 shards) —" in message


def test_manifest_says_fewer_shards_than_the_folders_hold(store):
    """Shards beyond the manifest's count would be left out of matching but read by the views: named."""
    _write_manifest(store, dict(_manifest(store), n_shards=3))
    assert ": a shard beyond the manifest's n_shards (3) —" in _damage_error(_open(store), store / "gt" / "shard=3", store)


def test_missing_ground_truth_shard_file(store):
    (store / "gt" / "shard=1" / "part-0.parquet").unlink()
    _damage_error(_open(store), store / "gt" / "shard=1" / "part-0.parquet", store)


# -- damage seen when a shard is read: in the shard tasks, whatever the scheduler ----------------------------------


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_missing_detection_shard(store, scheduler):
    shard = store / "dt" / "run=default" / "shard=2" / "part-0.parquet"
    shard.unlink()
    opened = evalengine.open(store)
    message = _damage_error(lambda: opened.evaluate(scheduler=scheduler), shard, store)
    assert f"{shard}: missing —" in message
    assert not list((store / "matches").glob("*/run=default")), "no match table from a damaged run"


@pytest.mark.parametrize("keep", [0, 300, -100])
def test_truncated_detection_shard(store, keep):
    """Cut to nothing, to its first 300 bytes, or without its footer."""
    shard = store / "dt" / "run=default" / "shard=1" / "part-0.parquet"
    data = shard.read_bytes()
    shard.write_bytes(data[:keep])
    opened = evalengine.open(store)
    assert f"{shard}: not a readable Parquet file (" in _damage_error(opened.evaluate, shard, store)


def test_truncated_ground_truth_shard(store):
    shard = store / "gt" / "shard=0" / "part-0.parquet"
    shard.write_bytes(shard.read_bytes()[:200])
    _damage_error(evalengine.open(store).evaluate, shard, store)


def test_truncated_categories_table(store):
    """The single-file tables are read through the same check."""
    table = store / "categories" / "part-0.parquet"
    table.write_bytes(b"PAR1 not a parquet file")
    _damage_error(evalengine.open(store).evaluate, table, store)


def test_read_stored_reads_a_sound_file_whole(pristine):
    shard = pristine / "gt" / "shard=0" / "part-0.parquet"
    assert read_stored(shard, pristine).equals(pl.read_parquet(shard))
    assert read_stored(shard, pristine, ["gt_id"]).columns == ["gt_id"]


def test_a_damaged_store_is_one_line_from_the_command(store, capsys):
    from evalengine.cli import main

    (store / "dt" / "run=default" / "shard=3" / "part-0.parquet").write_bytes(b"")
    assert main(["evaluate", str(store), "--scheduler", "sync"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [f"evalengine: error: {store}/dt/run=default/shard=3/part-0.parquet: not a readable "
                                f"Parquet file (parquet: File out of specification: A Parquet file must contain a "
                                f"header and footer with at least 12 bytes) — the store is damaged; run `evalengine fsck {store}`"]
