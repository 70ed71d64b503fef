"""Issue 18 item 3: the command as a newcomer meets it (version, slices, area ranges, messages); what is the
process's (exit status, stderr) is run as a subprocess."""

import json
import subprocess
import sys

import numpy as np
import pytest

import evalengine
from evalengine.cli import main
from tests.conftest import SAMPLE_DT, SAMPLE_GT
from tests.generators import random_coco
from tests.reference import pycocotools_eval

GT, DT = str(SAMPLE_GT), str(SAMPLE_DT)


def command(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalengine.cli", *argv], capture_output=True, text=True,
                          timeout=600)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory):
    return evalengine.ingest_coco(GT, DT, tmp_path_factory.mktemp("sample") / "store")


def test_version():
    result = command("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"evalengine {evalengine.__version__}\n", "")


def test_an_empty_slice_is_said(capsys, sample_store):
    code, out, err = run(capsys, "report", str(sample_store.path), "--where", "width > 5000")
    assert code == 0
    assert err.splitlines() == [f"evalengine: warning: {sample_store.path}: no image satisfies 'width > 5000': "
                                "every number of the slice is -1"]
    assert len(out.splitlines()) == 12
    _, _, err = run(capsys, "report", str(sample_store.path), "--where", "width > 500")
    assert err == ""


def _printed(out: str) -> list:
    """(area label, AP or AR, value) of each printed summary line."""
    return [(line.split("area=")[1].split("|")[0].strip(), line.split("(")[1][:2], float(line.rsplit("= ", 1)[1]))
            for line in out.splitlines()]


@pytest.mark.parametrize("seed", [None, *range(6)])
def test_custom_area_ranges_print_the_ranges_asked_for(capsys, tmp_path, seed):
    """Each asked range gets its AP and AR row (area ranges' mean over the defined categories and thresholds at the
    size rows' cap, as pycocotools' summarize reads a range), compared with pycocotools' arrays."""
    if seed is None:
        gt, dt = json.loads(SAMPLE_GT.read_text()), json.loads(SAMPLE_DT.read_text())
        gt_file, dt_file = GT, DT
    else:
        gt, dt = random_coco(seed)
        if not dt:
            dt = [{"image_id": gt["images"][0]["id"], "category_id": gt["categories"][0]["id"],
                   "bbox": [1, 1, 5, 5], "score": 0.5}]
        gt_file, dt_file = tmp_path / "gt.json", tmp_path / "dt.json"
        gt_file.write_text(json.dumps(gt))
        dt_file.write_text(json.dumps(dt))
    ranges = (("all", 0.0, 1e10), ("tiny", 0.0, 256.0), ("medium", 1024.0, 9216.0), ("huge", 9216.0, 1e10))
    code, out, _ = run(capsys, "coco", "--gt", str(gt_file), "--dt", str(dt_file), "--area-ranges",
                       *(f"{label}:{lo}:{hi}" for label, lo, hi in ranges))
    assert code == 0
    ev = pycocotools_eval(gt, dt, area_ranges=ranges, summarize=False)

    def mean(values):
        return float(np.mean(values[values > -1])) if (values > -1).any() else -1.0

    expected = [("all", "AP", mean(ev.eval["precision"][:, :, :, 0, 2])),
                ("all", "AP", mean(ev.eval["precision"][0, :, :, 0, 2])),
                ("all", "AP", mean(ev.eval["precision"][5, :, :, 0, 2])),
                ("medium", "AP", mean(ev.eval["precision"][:, :, :, 2, 2])),
                ("tiny", "AP", mean(ev.eval["precision"][:, :, :, 1, 2])),
                ("huge", "AP", mean(ev.eval["precision"][:, :, :, 3, 2])),
                *[("all", "AR", mean(ev.eval["recall"][:, :, 0, m])) for m in range(3)],
                ("medium", "AR", mean(ev.eval["recall"][:, :, 2, 2])),
                ("tiny", "AR", mean(ev.eval["recall"][:, :, 1, 2])),
                ("huge", "AR", mean(ev.eval["recall"][:, :, 3, 2]))]
    printed = _printed(out)
    assert [row[:2] for row in printed] == [row[:2] for row in expected]
    assert [row[2] for row in printed] == pytest.approx([round(row[2], 3) for row in expected], abs=5e-4 + 1e-12)


def test_default_area_ranges_print_pycocotools_summary(capsys):
    code, out, _ = run(capsys, "coco", "--gt", GT, "--dt", DT, "--area-ranges", "all:0:1e10", "small:0:1024",
                       "medium:1024:9216", "large:9216:1e10")
    _, default, _ = run(capsys, "coco", "--gt", GT, "--dt", DT)
    assert code == 0 and out == default and len(out.splitlines()) == 12
