"""One writer at a time, readers see a consistent store, and a process killed at any moment leaves the old store or
the new one: commands run as subprocesses, as users run them."""

import importlib.util
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import evalengine
from evalengine.api import check_store, ingest_coco
from evalengine.store.lock import writing

ROOT = Path(evalengine.__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A generated COCO set big enough for a command to take a few seconds (2000 images, 120k detections), and a
    second result file for the same images."""
    spec = importlib.util.spec_from_file_location("_generate", ROOT / "benchmarks" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    folder = tmp_path_factory.mktemp("inputs")
    generate.write(folder, *generate.generate(2000, 20, 6.0, 60, seed=1))
    other = folder / "other"
    generate.write(other, *generate.generate(2000, 20, 6.0, 60, seed=2))
    return {"gt": folder / "gt.json", "dt": folder / "dt.json", "dt2": other / "dt.json"}


@pytest.fixture(scope="module")
def reference(inputs, tmp_path_factory):
    """The COCO stats and detection count of each result file (by input key)."""
    store = ingest_coco(inputs["gt"], inputs["dt"], tmp_path_factory.mktemp("ref") / "store", n_shards=4)
    store = store.add_run(inputs["dt2"], "b")
    counts = dict(store.sql("SELECT run, count(*) AS n FROM dt GROUP BY run").iter_rows())
    return {"dt": store.evaluate().stats(), "dt2": store.evaluate(run="b").stats(),
            "n_dt": counts["default"], "n_dt2": counts["b"]}


def start(*argv) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "evalengine.cli", *map(str, argv)], env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(process: subprocess.Popen) -> tuple:
    out, err = process.communicate(timeout=300)
    return process.returncode, out, err


def state(store, inputs) -> dict | None:
    """The store's runs, each as the key of the input it came from (None: no store)."""
    if not (store / "manifest.json").is_file():
        return None
    sources = {str(path): key for key, path in inputs.items()}
    provenance = evalengine.open(store).layout.manifest["provenance"]
    return {run: sources[provenance[run]] for run in evalengine.open(store).runs}


def assert_sound(store, runs: dict, stats: dict) -> None:
    """The store opens, every listed run evaluates to the numbers of its input (``runs``: run → input key), SQL
    works and sees exactly the listed runs, fsck finds nothing it cannot repair and, after a write, nothing at all."""
    opened = evalengine.open(store)
    assert sorted(opened.runs) == sorted(runs)
    assert opened.sql("SELECT 1 AS one")["one"].item() == 1
    counts = dict(opened.sql("SELECT run, count(*) AS n FROM dt GROUP BY run").iter_rows())
    assert counts == {run: stats[f"n_{key}"] for run, key in runs.items()}
    assert all(finding == "remove" for finding in check_store(store)["repair"])
    for run, key in runs.items():
        assert opened.evaluate(run=run).stats() == pytest.approx(stats[key], abs=1e-12)
    assert check_store(store).is_empty()  # evaluate wrote a match table: what killed writers left is gone


def test_a_second_writer_waits_for_the_first(inputs, reference, tmp_path):
    store = tmp_path / "store"
    ingest_coco(inputs["gt"], inputs["dt"], store, n_shards=4)
    with writing(store):
        waiting = start("add-run", store, "--run", "b", "--dt", inputs["dt2"], "--quiet")
        # the lock is held until the second writer says it waits (its start-up may take long on a loaded machine)
        assert select.select([waiting.stderr], [], [], 300)[0], "the second writer said nothing in 300 s"
        first = waiting.stderr.readline()
        assert waiting.poll() is None
    code, out, err = finish(waiting)
    assert code == 0
    assert first + err == f"evalengine: warning: {store}: another evalengine process is writing to this store (or " \
                          "reading it); waiting for it to finish\n"
    assert_sound(store, {"default": "dt", "b": "dt2"}, reference)


def test_two_writers_at_once_both_land(inputs, reference, tmp_path):
    store = tmp_path / "store"
    ingest_coco(inputs["gt"], inputs["dt"], store, n_shards=4)
    processes = [start("add-run", store, "--run", run, "--dt", inputs[key], "--quiet")
                 for run, key in (("b", "dt2"), ("c", "dt"))]
    assert [finish(process)[0] for process in processes] == [0, 0]
    assert_sound(store, {"default": "dt", "b": "dt2", "c": "dt"}, reference)


def test_two_writers_of_one_name_one_wins(inputs, reference, tmp_path):
    store = tmp_path / "store"
    ingest_coco(inputs["gt"], inputs["dt"], store, n_shards=4)
    results = [finish(process) for process in [start("add-run", store, "--run", "b", "--dt", inputs["dt2"], "--quiet")
                                               for _ in range(2)]]
    assert sorted(code for code, _, _ in results) == [0, 2]
    assert any(err.endswith(f"evalengine: error: {store}: run 'b' already exists (--overwrite, or overwrite=True in Python, replaces it)\n")
               for _, _, err in results)
    assert_sound(store, {"default": "dt", "b": "dt2"}, reference)


def test_two_ingests_of_one_new_store_one_wins(inputs, reference, tmp_path):
    racing = [start("ingest", "coco", "--gt", inputs["gt"], "--dt", inputs[key], "--store", tmp_path / "new",
                    "--quiet") for key in ("dt", "dt2")]
    results = [finish(process) for process in racing]
    assert sorted(code for code, _, _ in results) == [0, 2]
    winner = "dt" if results[0][0] == 0 else "dt2"
    assert results[1 if winner == "dt" else 0][2].endswith(f"{tmp_path / 'new'}: already exists (--overwrite, or "
                                                           "overwrite=True in Python, replaces it)\n")
    assert_sound(tmp_path / "new", {"default": winner}, reference)


def test_readers_during_an_overwrite_see_the_old_run_or_the_new(inputs, reference, tmp_path):
    store = tmp_path / "store"
    ingest_coco(inputs["gt"], inputs["dt"], store, n_shards=4)
    writer = start("add-run", store, "--run", "default", "--dt", inputs["dt2"], "--overwrite", "--quiet")
    time.sleep(1.5)
    readers = [start("evaluate", store, "--json", "--quiet"),
               start("sql", store, "SELECT count(*) AS n FROM dt", "--format", "csv")]
    (code, out, err), (sql_code, sql_out, sql_err) = [finish(process) for process in readers]
    assert finish(writer)[0] == 0
    assert code == 0, err
    assert json.loads(out)["stats"] in (pytest.approx(reference["dt"], abs=1e-12),
                                        pytest.approx(reference["dt2"], abs=1e-12))
    assert sql_code == 0, sql_err
    assert int(sql_out.splitlines()[1]) in (reference["n_dt"], reference["n_dt2"])
    assert_sound(store, {"default": "dt2"}, reference)


# (command, the store's runs before it (None: no store), after it completes); a run as the input it came from
KILLED = [
    ("ingest-new", ["ingest", "coco", "--gt", "{gt}", "--dt", "{dt}", "--store", "{store}", "--quiet"], None,
     {"default": "dt"}),
    ("ingest-overwrite", ["ingest", "coco", "--gt", "{gt}", "--dt", "{dt2}", "--store", "{store}", "--overwrite",
                          "--quiet"], {"default": "dt"}, {"default": "dt2"}),
    ("add-run", ["add-run", "{store}", "--run", "b", "--dt", "{dt2}", "--quiet"], {"default": "dt"},
     {"default": "dt", "b": "dt2"}),
    ("add-run-overwrite", ["add-run", "{store}", "--run", "default", "--dt", "{dt2}", "--overwrite", "--quiet"],
     {"default": "dt"}, {"default": "dt2"}),
    ("evaluate", ["evaluate", "{store}", "--quiet", "--iou-thresholds", "0.5", "0.6"], {"default": "dt"},
     {"default": "dt"}),
]


@pytest.mark.parametrize("name, argv, before, after", KILLED, ids=[case[0] for case in KILLED])
def test_a_killed_command_leaves_the_old_store_or_the_new(inputs, reference, tmp_path, name, argv, before, after):
    """SIGKILL at random moments of the command's run (seeded per command; the moments are spread over the time a
    complete run took): the store is the old one or the new one, SQL works, no temporary folder is visible, and
    the next command that writes removes what the killed one left."""
    rng = random.Random(name)
    store = tmp_path / "store"
    command = [arg.format(store=store, **inputs) for arg in argv]

    def prepare():
        shutil.rmtree(store, ignore_errors=True)
        if before is not None:
            ingest_coco(inputs["gt"], inputs["dt"], store, n_shards=4)

    prepare()
    started = time.perf_counter()
    assert finish(start(*command))[0] == 0
    duration = time.perf_counter() - started
    killed = 0
    for attempt in range(6):
        prepare()
        process = start(*command)
        delay = duration * rng.uniform(0.5, 0.98)
        launched = time.perf_counter()
        try:  # a run that ends first (the machine got less busy) sets the time the next kills aim at
            process.wait(timeout=delay)
            duration = time.perf_counter() - launched
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
        process.communicate()
        killed += process.returncode == -signal.SIGKILL
        found = state(store, inputs)
        assert found in (before, after), (attempt, delay, found)
        if found is None:  # the new store never appeared: writing it now removes what the killed writer left
            assert not store.exists(), (attempt, delay)
            assert finish(start(*command))[0] == 0
            found = after
        assert_sound(store, found, reference)
        assert sorted(os.listdir(tmp_path)) == ["store"], (attempt, delay)
    assert killed >= 1, f"{name}: every run finished before its kill ({duration:.1f} s each)"
