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


def _write(path, value):
    path.write_text(json.dumps(value))
    return str(path)


def test_results_in_an_object_say_what_the_file_is_and_how_to_fix_it(tmp_path):
    results = json.loads(SAMPLE_DT.read_text())
    wrapped = _write(tmp_path / "wrapped.json", {"annotations": results})
    result = command("coco", "--gt", GT, "--dt", wrapped)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f"evalengine: error: {wrapped}: a JSON object whose 'annotations' hold the results, where "
                             f"a COCO result file is that list alone; write it alone, e.g. jq .annotations {wrapped} > "
                             "results.json\n")
    result = command("coco", "--gt", GT, "--dt", GT)
    assert result.returncode == 2
    assert result.stderr == (f"evalengine: error: {GT}: a COCO ground-truth file (images, annotations), where "
                             "detections are expected: a JSON list of results (image_id, category_id, bbox or "
                             "segmentation, score)\n")


def test_a_voc_folder_as_gt(capsys, tmp_path):
    voc = SAMPLE_GT.parent / "voc_sample"
    code, _, err = run(capsys, "coco", "--gt", str(voc), "--dt", DT)
    assert code == 2 and err == (f"evalengine: error: {voc}: a PASCAL VOC folder (Annotations/), where a COCO "
                                 "ground-truth JSON file is expected; evaluate it with `evalengine voc`\n")
    code, _, err = run(capsys, "coco", "--gt", str(tmp_path), "--dt", DT)
    assert code == 2 and err == (f"evalengine: error: {tmp_path}: a folder, where a COCO ground-truth JSON file is "
                                 "expected\n")


def test_nan_scores_are_refused_with_the_fix(tmp_path):
    results = json.loads(SAMPLE_DT.read_text())[:5]
    results[2]["score"] = float("nan")
    path = _write(tmp_path / "nan.json", results)  # json.dumps writes NaN
    result = command("coco", "--gt", GT, "--dt", path)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"evalengine: error: {path}: detection at position 3 (line 1, column ")
    assert ("'score' is NaN, not a finite number (JSON has none; Python's json.dump writes it for a float NaN or inf: "
            "drop those results or give them a number)") in result.stderr


def test_lvis_ground_truth_evaluated_as_coco_is_said(capsys, tmp_path):
    gt = json.loads(SAMPLE_GT.read_text())
    for image in gt["images"]:
        image.update(neg_category_ids=[], not_exhaustive_category_ids=[])
    code, out, err = run(capsys, "coco", "--gt", _write(tmp_path / "lvis.json", gt), "--dt", DT)
    _, coco, _ = run(capsys, "coco", "--gt", GT, "--dt", DT)
    assert code == 0 and out == coco
    assert err.splitlines() == ["evalengine: warning: the ground truth is LVIS' (its images have 'neg_category_ids'), "
                                "evaluated here as COCO; `evalengine lvis` (evaluate_lvis) applies LVIS' federated "
                                "rules"]


ZERO_ID = ("evalengine: warning: {gt}: annotation id 0 found; pycocotools can never count it as matched (the 'coco' "
           "protocol keeps that quirk; --keep-zero-id-quirk 0, or zero_id_quirk=False in Python, fixes it)")


def test_messages_name_the_flags(capsys, tmp_path):
    gt = json.loads(SAMPLE_GT.read_text())
    gt["annotations"][0]["id"] = 0
    path = _write(tmp_path / "gt0.json", gt)
    code, _, err = run(capsys, "coco", "--gt", path, "--dt", DT)
    assert code == 0 and err.splitlines() == [ZERO_ID.format(gt=path)]
    code, _, err = run(capsys, "coco", "--gt", path, "--dt", DT, "--keep-zero-id-quirk", "0")
    assert code == 0 and err == ""
    store = str(tmp_path / "store")
    assert run(capsys, "ingest", "coco", "--gt", GT, "--dt", DT, "--store", store)[0] == 0
    code, _, err = run(capsys, "ingest", "coco", "--gt", GT, "--dt", DT, "--store", store)
    assert code == 2 and err == f"evalengine: error: {store}: already exists (--overwrite, or overwrite=True in " \
                                "Python, replaces it)\n"
    code, _, err = run(capsys, "add-run", store, "--run", "default", "--dt", DT)
    assert code == 2 and err == f"evalengine: error: {store}: run 'default' already exists (--overwrite, or " \
                                "overwrite=True in Python, replaces it)\n"


def test_compare_overall_row_sorted_by_difference_and_limit(capsys, tmp_path):
    """The overall rows are pycocotools' AP per area range (stats 0, 3, 4, 5) of each run and their difference; the
    categories follow by |ΔAP|; --limit keeps the first rows."""
    gt, base = json.loads(SAMPLE_GT.read_text()), json.loads(SAMPLE_DT.read_text())
    shifted = [{**d, "bbox": [d["bbox"][0] + 3, *d["bbox"][1:]]} for d in base]
    store = str(tmp_path / "store")
    evalengine.ingest_coco(GT, DT, store).add_run(_write(tmp_path / "shifted.json", shifted), "shifted")
    code, out, _ = run(capsys, "compare", store, "default", "shifted", "--json")
    assert code == 0
    rows = json.loads(out)
    stats = {name: pycocotools_eval(gt, dt).stats for name, dt in (("default", base), ("shifted", shifted))}
    overall = {row["area_range"]: row for row in rows[:4]}
    assert [row["category_id"] for row in rows[:4]] == [None] * 4 and {row["name"] for row in rows[:4]} == {"(all)"}
    for area, index in (("all", 0), ("small", 3), ("medium", 4), ("large", 5)):
        assert overall[area]["ap_default"] == pytest.approx(stats["default"][index], abs=1e-12)
        assert overall[area]["ap_shifted"] == pytest.approx(stats["shifted"][index], abs=1e-12)
        assert overall[area]["diff_shifted"] == pytest.approx(stats["shifted"][index] - stats["default"][index],
                                                              abs=1e-12)
    rest = [abs(row["diff_shifted"]) if row["diff_shifted"] is not None else -1.0 for row in rows[4:]]
    assert rest == sorted(rest, reverse=True) and len(rows) > 100 and None not in [r["category_id"] for r in rows[4:]]
    code, out, _ = run(capsys, "compare", store, "default", "shifted", "--limit", "7", "--json")
    assert code == 0 and json.loads(out) == rows[:7]
    code, out, _ = run(capsys, "compare", store, "default", "shifted")
    assert code == 0 and len(out.splitlines()) == len(rows) + 4  # every row (no cut at 100), the table's 4 rules


def test_short_reprs(sample_store):
    """A notebook shows what the objects are, not the manifest."""
    path = sample_store.path
    assert repr(sample_store) == f"Store('{path}': {sample_store.layout.n_shards} shards, runs: default)"
    assert sample_store._repr_html_() == f"<code>Store(&#x27;{path}&#x27;: {sample_store.layout.n_shards} shards, " \
                                         "runs: default)</code>"
    evaluation = sample_store.evaluate()
    assert repr(evaluation) == (f"Evaluation(run 'default', coco bbox (coco), store '{path}': "
                                f"{sample_store.layout.n_shards} shards, runs: default)")
    sliced = sample_store.report(where="width > 500", category_ids=[1, 2])
    assert repr(sliced).endswith(f"slice of {len(sliced.image_subset)} images and 2 categories)")
    html = evaluation._repr_html_()
    assert html.startswith("<code>Evaluation(run &#x27;default&#x27;") and "AR100" in html and len(html) < 6000
    assert len(repr(sample_store.layout)) < 200


def test_proposal_evaluation_repr(tmp_path):
    store = evalengine.ingest_gt(GT, tmp_path / "store").add_baseline("uniform", 20)
    assert repr(store.evaluate_proposals("uniform")) == (
        f"ProposalEvaluation(run 'uniform', hosang bbox (hosang), store '{store.path}': {store.layout.n_shards} "
        "shards, runs: none, proposal runs: uniform)")


def test_demo_reuses_one_store(tmp_path):
    """Without --store the demo writes evalengine-demo-USER in the temporary folder, replaced by the next run."""
    import getpass
    import os

    env = dict(os.environ, TMPDIR=str(tmp_path))
    target = tmp_path / f"evalengine-demo-{getpass.getuser()}"
    for _ in range(2):
        result = subprocess.run([sys.executable, "-m", "evalengine.cli", "demo"], capture_output=True, text=True,
                                env=env, timeout=900)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[-1] == f"the next demo replaces it; remove it with: rm -r {target}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]
    assert (target / "manifest.json").is_file()


def test_compile_notice(tmp_path, monkeypatch, capsys):
    """Said on a terminal when no kernel is cached yet; not when one is, nor off a terminal."""
    from evalengine.cli import compile_notice

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    compile_notice()
    assert capsys.readouterr().err == ("evalengine: compiling kernels, once (20-40 s; later runs reuse them; evalengine "
                                       "warmup does it ahead)\n")
    (tmp_path / "evalengine" / "match").mkdir(parents=True)
    (tmp_path / "evalengine" / "match" / "groups.rank_in_group-10.py311.nbi").write_bytes(b"")
    compile_notice()
    assert capsys.readouterr().err == ""
    (tmp_path / "evalengine" / "match" / "groups.rank_in_group-10.py311.nbi").unlink()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    compile_notice()
    assert capsys.readouterr().err == ""


def test_plot_out_with_an_unknown_format_fails_before_the_work(sample_store, tmp_path):
    out = tmp_path / "x.jpgg"
    result = command("plot", str(sample_store.path), "pr", "--out", str(out))
    assert result.returncode == 2 and not out.exists()
    from evalengine.plots import figure_formats

    formats = ", ".join(sorted(figure_formats()))
    assert {"png", "pdf", "svg", "jpg"} <= set(figure_formats())
    assert result.stderr == f"evalengine: error: {out}: no figure format .jpgg (one of {formats})\n"


def test_plot_help_lists_only_its_options():
    result = command("plot", "--help")
    assert result.returncode == 0
    for flag in ("--scheduler", "--workers", "--address", "--json", "--quiet", "--profile"):
        assert flag not in result.stdout
    assert "COCO protocol:" in result.stdout and "--iou-type" in result.stdout


def test_baseline_output_and_proposal_ordering_fit_together(capsys, tmp_path):
    out = tmp_path / "uniform.parquet"
    code, text, _ = run(capsys, "baseline", "--gt", GT, "--kind", "uniform", "--per-image", "10", "--out", str(out))
    assert code == 0 and text.strip().endswith("no scores: evaluate them with --ordering given)")
    code, _, err = run(capsys, "proposals", "--gt", GT, "--proposals", str(out), "--quiet")
    assert code == 2 and err.startswith(f"evalengine: error: {out}: ordering 'score-desc' needs a score") and \
        err.endswith("(use ordering 'given' or 'random': --ordering given, or ProposalOrder('given') in Python; "
                     "baseline runs have no scores)\n")
    code, text, err = run(capsys, "proposals", "--gt", GT, "--proposals", str(out), "--ordering", "given", "--quiet")
    assert code == 0 and err == "" and "AR" in text
    code, _, err = run(capsys, "baseline", "--gt", GT, "--kind", "uniform", "--out", str(tmp_path / "b.json"))
    assert code == 2 and err == f"evalengine: error: {tmp_path / 'b.json'}: baseline writes Parquet; name the file " \
                                ".parquet\n"


def test_warmup_compiles_and_caches_the_kernels(tmp_path, monkeypatch, capsys):
    """``evalengine warmup`` (a subprocess, its own numba cache folder) compiles the kernels the common commands use
    and leaves numba's index files behind; the compile notice is then not given."""
    import os
    import re

    from evalengine.cli import compile_notice

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "evalengine.cli", "warmup"], capture_output=True, text=True,
                            timeout=1800, env=env)
    assert (result.returncode, result.stderr) == (0, "")
    found = re.fullmatch(r"warmup: (\d+) of (\d+) cached numba kernels compiled; later runs reuse them\. "
                         r"Compiled on first use: (.+)\n", result.stdout)
    assert found, result.stdout
    compiled, total = int(found[1]), int(found[2])
    assert total >= 60 and compiled >= total // 3
    indexes = {path.name.split("-")[0] for path in tmp_path.rglob("*.nbi")}
    for kernel in ("greedy_score.assign_by_score", "box_iou.box_iou_blocks", "groups.rank_in_group"):
        assert any(name.startswith(kernel) for name in indexes), (kernel, sorted(indexes))
    assert len(indexes) >= compiled // 2
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    compile_notice()
    assert capsys.readouterr().err == ""


def test_segmentation_only_results_and_a_string_image_id(tmp_path):
    """Results with only a segmentation (no 'missing field bbox') are evaluated as boxes of their masks (loadRes'
    toBbox), as pycocotools does; a string image id is named with its position, line and column."""
    from pycocotools import mask as mask_utils

    gt = json.loads(SAMPLE_GT.read_text())
    sizes = {image["id"]: (image["height"], image["width"]) for image in gt["images"]}

    def rle(ann):  # pycocotools' loadRes reads result masks as RLE only
        merged = mask_utils.merge(mask_utils.frPyObjects(ann["segmentation"], *sizes[ann["image_id"]]))
        return {"size": merged["size"], "counts": merged["counts"].decode("ascii")}

    masks = [{"image_id": a["image_id"], "category_id": a["category_id"], "segmentation": rle(a),
              "score": round(0.3 + 0.01 * n, 2)} for n, a in enumerate(gt["annotations"][:50]) if not a["iscrowd"]]
    result = command("coco", "--gt", GT, "--dt", _write(tmp_path / "masks.json", masks), "--json")
    assert (result.returncode, result.stderr) == (0, "")
    ev = pycocotools_eval(gt, masks)
    assert json.loads(result.stdout)["stats"][:2] == pytest.approx(list(ev.stats[:2]), abs=1e-12)
    results = json.loads(SAMPLE_DT.read_text())
    results[3]["image_id"] = str(results[3]["image_id"])
    bad = _write(tmp_path / "string_id.json", results)
    result = command("coco", "--gt", GT, "--dt", bad)
    assert result.returncode == 2
    assert result.stderr.startswith(f"evalengine: error: {bad}: detection at position 4 (line 1, column ")
    assert f"'image_id' is \"{results[3]['image_id']}\", not an integer" in result.stderr
