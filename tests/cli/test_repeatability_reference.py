"""Issue 18: a perturbed proposal run keeps the reference run it was added with (``add-proposals --reference``);
``repeatability`` uses it without the flag, an explicit other one wins with a warning (through the command, as a
subprocess: exit status and stderr are the process's)."""

import json
import subprocess
import sys

import pytest

from evalengine import api
from evalengine.errors import InputWarning
from tests.helpers import write_proposals_near_objects


def command(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalengine.cli", *map(str, argv)], capture_output=True, text=True,
                          timeout=600)


def test_repeatability_uses_the_reference_the_run_was_added_with(tmp_path):
    gt, props = write_proposals_near_objects(tmp_path)
    store = tmp_path / "store"
    api.ingest_gt(gt, store)
    assert command("baseline", "--gt", gt, "--kind", "uniform", "--per-image", "20", "--store", store,
                   "--run", "other").returncode == 0
    for argv in (("--run", "eb"),
                 ("--run", "eb-light", "--perturbation", "light", "--reference", "eb"),
                 ("--run", "eb-blur", "--perturbation", "blur", "--reference", "eb")):
        result = command("add-proposals", store, "--proposals", props, *argv)
        assert (result.returncode, result.stderr) == (0, "")
    runs = ["eb-light", "eb-blur"]
    result = command("repeatability", store, "--runs", *runs, "--json")
    assert (result.returncode, result.stderr) == (0, "")
    rows = json.loads(result.stdout)
    want = api.open(store).repeatability(runs, reference="eb")
    assert want.get_column("repeatability").to_list() == [1.0, 1.0]  # identity homographies
    assert [(r["run"], r["kind"], r["repeatability"]) for r in rows] == want.select("run", "kind",
                                                                                 "repeatability").rows()
    # the stored reference, not the default run name "proposals" (which this store does not have)
    assert api.open(store).repeatability(runs).equals(want)
    result = command("repeatability", store, "--runs", *runs, "--reference", "eb", "--json")
    assert (result.returncode, result.stderr, json.loads(result.stdout)) == (0, "", rows)
    # another reference wins, said once per run
    result = command("repeatability", store, "--runs", *runs, "--reference", "other", "--json")
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        f"evalengine: warning: proposal run '{run}' was added with reference 'eb'; measured against 'other' as asked"
        for run in runs]
    with pytest.warns(InputWarning, match="added with reference 'eb'; measured against 'other'"):
        other = api.open(store).repeatability(runs, reference="other")
    assert [r["repeatability"] for r in json.loads(result.stdout)] == other.get_column("repeatability").to_list()
    assert other.get_column("repeatability").to_list() != want.get_column("repeatability").to_list()
    result = command("repeatability", store, "--runs", "eb-light", "--reference", "nope")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"evalengine: error: {store}: no proposal run 'nope' (proposal runs: eb, eb-blur, " \
                            "eb-light, other)\n"
    result = command("repeatability", store, "--runs", "eb")
    assert (result.returncode, result.stderr) == (2, "evalengine: error: proposal run 'eb' has no homographies: add "
                                                     "it as a perturbed run\n")
