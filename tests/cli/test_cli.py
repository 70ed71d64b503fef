"""The ``evalengine`` command, run as a user would."""

import json
import subprocess
import sys

import pytest

from evalengine.cli import main
from tests.conftest import DATA, SAMPLE_DT, SAMPLE_GT

GT, DT = str(SAMPLE_GT), str(SAMPLE_DT)
EXPECTED = json.loads((DATA / "cocoapi_fake100_expected.json").read_text())["runs"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_coco_prints_the_pycocotools_summary(capsys):
    code, out, _ = run(capsys, "coco", "--gt", GT, "--dt", DT)
    assert code == 0
    assert out.splitlines() == EXPECTED["default"]["summary_text"][5:]


def test_coco_use_cats_0_with_custom_max_dets(capsys):
    code, out, _ = run(capsys, "coco", "--gt", GT, "--dt", DT, "--use-cats", "0", "--max-dets", "1", "10", "1000")
    assert code == 0
    assert out.splitlines() == EXPECTED["useCats_0_maxDets_1_10_1000"]["summary_text"][5:]


def test_coco_json(capsys):
    code, out, _ = run(capsys, "coco", "--gt", GT, "--dt", DT, "--json")
    payload = json.loads(out)
    assert code == 0
    assert payload["stats"] == pytest.approx(list(EXPECTED["default"]["stats"].values()), abs=1e-12)
    per_category = EXPECTED["default"]["per_category"]
    assert payload["per_class"].keys() == per_category.keys()
    for cat, values in per_category.items():
        assert payload["per_class"][cat] == pytest.approx(
            {"ap": values["AP"], "ap50": values["AP50"], "ar": values["AR_maxDets_last"]}, abs=1e-12)


def test_ingest_then_evaluate_matches_coco(capsys, tmp_path):
    store = str(tmp_path / "store")
    code, out, _ = run(capsys, "ingest", "coco", "--gt", GT, "--dt", DT, "--store", store, "--shards", "3")
    assert code == 0 and "3 shards" in out
    code, out, _ = run(capsys, "evaluate", store, "--json", "--scheduler", "sync")
    _, direct, _ = run(capsys, "coco", "--gt", GT, "--dt", DT, "--json")
    assert code == 0 and json.loads(out) == json.loads(direct)


def test_bad_input_is_one_line_and_nonzero(capsys, tmp_path):
    bad = tmp_path / "dt.json"
    bad.write_text("[]")
    code, out, err = run(capsys, "coco", "--gt", GT, "--dt", str(bad))
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"evalengine: error: {bad}: the result list is empty (pycocotools cannot evaluate it either)"]


def test_demo_as_a_new_user_runs_it(tmp_path):
    result = subprocess.run([sys.executable, "-m", "evalengine.cli", "demo", "--store", str(tmp_path / "demo")],
                            capture_output=True, text=True, check=True)
    assert " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.505" in result.stdout
    assert f"store written to {tmp_path / 'demo'}" in result.stdout
    assert "│ dining table ┆ 0.286 ┆ 0.8   ┆ 0.0    ┆ 0.269 │" in result.stdout, result.stdout  # the SQL slice
    assert (tmp_path / "demo" / "manifest.json").is_file()
    # the class-agnostic proposal table: the stored run's AR and recall (tested against brute force elsewhere)
    from evalengine import api
    from evalengine.match.proposals import ProposalProtocol

    evaluation = api.open(tmp_path / "demo").evaluate_proposals(protocol=ProposalProtocol(budgets=(1, 10, 100)))
    report = api.report.proposal_payload(evaluation, (0.5, 0.7, 0.9))
    row = (f"│ 100    ┆ {report['mean_proposals'][2]:<15} ┆ {round(report['ar'][2], 4)} ┆ "
           f"{round(report['recall']['0.5'][2], 4)}")
    assert row in result.stdout, result.stdout


def test_proposal_commands_end_to_end(tmp_path, capsys):
    """baseline into a store, a perturbed copy, repeatability: a flipped copy of a run is perfectly repeatable."""
    import polars as pl

    gt, store = GT, str(tmp_path / "s")
    assert main(["proposals", "--gt", gt, "--proposals", DT, "--store", store, "--budgets", "10", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["proposals", "--store", store, "--budgets", "1", "10", "100", "--protocol", "coco", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)  # the stored run evaluated again, under another protocol
    assert again["protocol"] == "coco" and again["budgets"] == [1, 10, 100] and len(again["stats"]) == 12
    assert main(["proposals", "--store", store, "--budgets", "1", "100", "--protocol", "coco"]) == 2
    assert "need at least 3 budgets" in capsys.readouterr().err
    assert main(["baseline", "--gt", gt, "--kind", "uniform", "--per-image", "50", "--store", store]) == 0
    assert main(["baseline", "--gt", gt, "--kind", "sliding-window", "--per-image", "50",
                     "--out", str(tmp_path / "sw.parquet")]) == 0
    frame = pl.read_parquet(tmp_path / "sw.parquet")
    assert frame.columns == ["image_id", "x1", "y1", "x2", "y2"] and frame.height > 0
    # the uniform run as seen in a mirrored image: flip every box, add it as a perturbed run
    uniform = pl.scan_parquet(tmp_path / "s" / "proposals" / "run=uniform" / "**" / "*.parquet").collect()
    widths = pl.read_parquet(tmp_path / "s" / "images" / "part-0.parquet").select("image_id", "width")
    flipped = (uniform.join(widths, on="image_id").sort("proposal_id")
               .select("image_id", (pl.col("width") - pl.col("x") - pl.col("w")).alias("x1"), pl.col("y").alias("y1"),
                       (pl.col("width") - pl.col("x")).alias("x2"), (pl.col("y") + pl.col("h")).alias("y2")))
    flipped.write_parquet(tmp_path / "flipped.parquet")
    assert main(["add-proposals", store, "--run", "mirror", "--proposals", str(tmp_path / "flipped.parquet"),
                     "--perturbation", "flip", "--reference", "uniform", "--ordering", "given"]) == 0
    capsys.readouterr()
    assert main(["repeatability", store, "--runs", "mirror", "--reference", "uniform", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["kind"] == "flip" and rows[0]["repeatability"] == pytest.approx(1.0, abs=1e-12)


def test_the_command_flushes_its_output_and_exit_status_through_a_pipe(tmp_path):
    """The command ends without interpreter teardown (evalengine.cli.run): piped output is complete and the exit
    status is kept, for results and for errors."""
    result = subprocess.run([sys.executable, "-m", "evalengine.cli", "coco", "--gt", GT, "--dt", DT, "--json"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0
    assert json.loads(result.stdout)["stats"] == pytest.approx(list(EXPECTED["default"]["stats"].values()), abs=1e-12)
    bad = tmp_path / "bad.json"
    bad.write_text("[{]")
    result = subprocess.run([sys.executable, "-m", "evalengine.cli", "coco", "--gt", GT, "--dt", str(bad)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"evalengine: error: {bad}: line 1, column 3: not valid JSON")
