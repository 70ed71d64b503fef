"""``evalengine openimages``: challenge CSV files with the real class hierarchy, against the reference's whole CSV path
(tests/openimages_reference.py: the expansion tool, then ``oid_challenge_evaluation.py``); the printed metrics; located
errors and warnings for bad input."""

import json

import numpy as np
import pytest

from evalengine.cli import main
from tests import openimages_reference
from tests.openimages_cases import DATA

HIERARCHY = DATA / "bbox_labels_600_hierarchy.json"
DESCRIPTIONS = DATA / "class-descriptions-boxable.csv"
# leaves and inner classes of a few families (Spoon → Kitchen utensil → …, Crab → Shellfish → …, Person, Car)
CLASSES = ["/m/0cmx8", "/m/0n28_", "/m/01g317", "/m/0k4j", "/m/03_wxk", "/m/0fbdv", "/m/04brg2", "/m/07k1x"]
BOX_HEADER = "ImageID,Source,LabelName,Confidence,XMin,XMax,YMin,YMax,IsOccluded,IsTruncated,IsGroupOf\n"


def _box(rng):
    x, y = rng.integers(0, 7, 2) / 10
    w, h = rng.integers(1, 4, 2) / 10
    return x, min(x + w, 1.0), y, min(y + h, 1.0)


def write_challenge_files(folder, seed: int, n_images: int = 12):
    """Boxes in the layout of the full OpenImages release (extra columns, read by name), image-level labels, and
    predictions in the 2019 challenge layout (columns in another order)."""
    rng = np.random.default_rng(seed)
    boxes, labels, predictions = [BOX_HEADER], ["ImageID,Source,LabelName,Confidence\n"], [
        "ImageID,LabelName,Score,XMin,XMax,YMin,YMax\n"]
    for i in range(n_images):
        image = f"{rng.integers(0, 16**8):08x}{i:04d}"
        gt = []
        for _ in range(int(rng.integers(0, 5))):
            label, (x1, x2, y1, y2) = CLASSES[rng.integers(0, len(CLASSES))], _box(rng)
            gt.append((label, x1, x2, y1, y2))
            boxes.append(f"{image},xclick,{label},1,{x1},{x2},{y1},{y2},0,0,{int(rng.random() < 0.3)}\n")
        for label in rng.choice(CLASSES, int(rng.integers(0 if gt else 1, 4)), replace=False):
            labels.append(f"{image},verification,{label},{int(rng.random() < 0.7)}\n")
        for _ in range(int(rng.integers(0, 8))):
            if gt and rng.random() < 0.6:
                label, x1, x2, y1, y2 = gt[rng.integers(0, len(gt))]
                label = label if rng.random() < 0.7 else CLASSES[rng.integers(0, len(CLASSES))]
            else:
                label, (x1, x2, y1, y2) = CLASSES[rng.integers(0, len(CLASSES))], _box(rng)
            score = np.round(rng.random(), 1 if rng.random() < 0.5 else 6)
            predictions.append(f"{image},{label},{score},{x1},{x2},{y1},{y2}\n")
    paths = {name: folder / f"{name}.csv" for name in ("boxes", "labels", "predictions")}
    for name, lines in (("boxes", boxes), ("labels", labels), ("predictions", predictions)):
        paths[name].write_text("".join(lines))
    return paths


def _run(capsys, *argv):
    code = main(["openimages", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("seed", range(6))
def test_json_equals_reference_csv_path(tmp_path, capsys, seed):
    paths = write_challenge_files(tmp_path, seed)
    code, out, err = _run(capsys, "--gt-boxes", paths["boxes"], "--gt-labels", paths["labels"], "--hierarchy",
                          HIERARCHY, "--dt", paths["predictions"], "--class-descriptions", DESCRIPTIONS, "--json",
                          "--quiet")
    assert code == 0, err
    payload = json.loads(out)
    mids = [line.split(",")[0] for line in DESCRIPTIONS.read_text().splitlines()]
    label_map = {mid: i + 1 for i, mid in enumerate(mids)}
    ap, mean_ap = openimages_reference.evaluate_csv(paths["boxes"], paths["labels"], paths["predictions"],
                                                    json.loads(HIERARCHY.read_text()), label_map)
    expected = {mid: ap[label_map[mid] - 1] for mid in mids if not np.isnan(ap[label_map[mid] - 1])}
    assert payload["per_class"].keys() == expected.keys()
    for mid, value in expected.items():
        assert payload["per_class"][mid] == pytest.approx(value, abs=1e-12), mid
    assert payload["map"] == pytest.approx(mean_ap, abs=1e-12)


def test_printed_metrics(tmp_path, capsys):
    paths = write_challenge_files(tmp_path, 7)
    code, out, _ = _run(capsys, "--gt-boxes", paths["boxes"], "--gt-labels", paths["labels"], "--hierarchy",
                        HIERARCHY, "--dt", paths["predictions"], "--quiet")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("OpenImagesDetectionChallenge_Precision/mAP@0.5IOU,")
    assert len(lines) == 1 + 601
    assert all(line.startswith("OpenImagesDetectionChallenge_PerformanceByCategory/AP@0.5IOU/") for line in lines[1:])


def _bad(tmp_path, capsys, boxes=None, labels=None, predictions=None):
    paths = write_challenge_files(tmp_path, 3)
    for name, text in (("boxes", boxes), ("labels", labels), ("predictions", predictions)):
        if text is not None:
            paths[name].write_text(text)
    return _run(capsys, "--gt-boxes", paths["boxes"], "--gt-labels", paths["labels"], "--hierarchy", HIERARCHY,
                "--dt", paths["predictions"], "--json", "--quiet")


@pytest.mark.parametrize("boxes, message", [
    ("ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf\na,/m/nope,0.1,0.2,0.1,0.2,0\n",
     "line 2: LabelName '/m/nope' is not a class of the hierarchy"),
    ("ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf\na,/m/0cmx8,0.1,0.2,0.1,0.2,0\na,/m/0cmx8,0.1,1.5,0.1,0.2,0\n",
     "line 3: 'XMax' is 1.5, outside [0, 1]"),
    ("ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf\na,/m/0cmx8,0.1,0.2,0.1,0.2,2\n",
     "line 2: 'IsGroupOf' is 2.0, expected 0 or 1"),
    ("ImageID,LabelName,XMin,XMax,YMin,IsGroupOf\na,/m/0cmx8,0.1,0.2,0.1,0\n", "needs column(s) YMax"),
    ("ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf\na,/m/0cmx8,0.3,0.2,0.1,0.2,0\n", "line 2: XMin > XMax"),
    ("ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf\na,/m/0cmx8,x,0.2,0.1,0.2,0\n", "line 2: 'XMin' is 'x', not a number"),
])
def test_bad_boxes(tmp_path, capsys, boxes, message):
    code, out, err = _bad(tmp_path, capsys, boxes=boxes)
    assert code == 2 and not out
    assert message in err and "boxes.csv" in err and len(err.strip().splitlines()) == 1


def test_bad_labels_and_predictions(tmp_path, capsys):
    code, _, err = _bad(tmp_path, capsys, labels="ImageID,LabelName,Confidence\na,/m/0cmx8,0.5\n")
    assert code == 2 and "labels.csv: line 2: 'Confidence' is 0.5, expected 0 or 1" in err
    code, _, err = _bad(tmp_path, capsys, predictions="ImageID,LabelName,Score,XMin,XMax,YMin,YMax\nq,/m/zz,1,0,1,0,1\n")
    assert code == 2 and "predictions.csv: line 2: LabelName '/m/zz' is not a class of the hierarchy" in err


def test_predictions_on_unknown_images_are_counted_in_a_warning(tmp_path, capsys):
    paths = write_challenge_files(tmp_path, 4)
    with open(paths["predictions"], "a") as handle:
        handle.write("not-an-image,/m/0cmx8,0.9,0.1,0.2,0.1,0.2\nnot-either,/m/0cmx8,0.9,0.1,0.2,0.1,0.2\n")
    code, out, err = _run(capsys, "--gt-boxes", paths["boxes"], "--gt-labels", paths["labels"], "--hierarchy",
                          HIERARCHY, "--dt", paths["predictions"], "--json", "--quiet")
    assert code == 0 and json.loads(out)["map"] >= 0
    assert "2 prediction(s) on images without ground-truth rows are not evaluated" in err


def test_parquet_predictions_equal_csv(tmp_path, capsys):
    import polars as pl
    paths = write_challenge_files(tmp_path, 5)
    parquet = tmp_path / "predictions.parquet"
    pl.read_csv(paths["predictions"], infer_schema=False).with_columns(
        pl.col("Score", "XMin", "XMax", "YMin", "YMax").cast(pl.Float64)).write_parquet(parquet)
    outputs = []
    for dt in (paths["predictions"], parquet):
        code, out, err = _run(capsys, "--gt-boxes", paths["boxes"], "--gt-labels", paths["labels"], "--hierarchy",
                              HIERARCHY, "--dt", dt, "--json", "--quiet")
        assert code == 0, err
        outputs.append(json.loads(out))
    assert outputs[0] == outputs[1] and outputs[0]["per_class"]


def _mask_text(mask) -> str:
    """base64 of zlib of the compressed COCO RLE of a dense mask (the challenge's ``Mask`` column)."""
    import base64
    import zlib

    from evalengine.io import rle
    from tests.openimages_cases import rle_counts
    counts = rle_counts(mask)
    text = rle.encode_strings(np.array(counts, np.uint32), np.array([0, len(counts)]))[0]
    return base64.b64encode(zlib.compress(text.encode())).decode()


def test_instance_segmentation_track(tmp_path, capsys):
    """Masks in the boxes file and a --gt-masks file; a prediction of the right mask, one of a mask elsewhere scored
    higher, one inside a box without a mask (ignored), one of an empty mask (dropped: an invalid box)."""
    cat, person = "/m/01yrx", "/m/01g317"
    full, other, empty = np.zeros((4, 6), np.uint8), np.zeros((4, 6), np.uint8), np.zeros((4, 6), np.uint8)
    full[:2, :3] = 1
    other[2:, 3:] = 1
    (tmp_path / "boxes.csv").write_text(
        "ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf,ImageWidth,ImageHeight,Mask\n"
        f"img,{cat},0.0,0.5,0.0,0.5,0,6,4,{_mask_text(full)}\n"
        f"img,{person},0.5,1.0,0.5,1.0,0,,,\n")
    (tmp_path / "masks.csv").write_text(
        "ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf,ImageWidth,ImageHeight,Mask\n"
        f"img,{person},0.5,1.0,0.5,1.0,0,6,4,{_mask_text(empty)}\n")
    (tmp_path / "labels.csv").write_text(f"ImageID,LabelName,Confidence\nimg,{cat},1\nimg,{person},1\n")
    (tmp_path / "pred.csv").write_text(
        "ImageID,LabelName,Score,ImageWidth,ImageHeight,Mask\n"
        f"img,{cat},0.5,6,4,{_mask_text(full)}\nimg,{cat},0.9,6,4,{_mask_text(other)}\n"
        f"img,{person},0.8,6,4,{_mask_text(other)}\nimg,{person},0.7,6,4,{_mask_text(empty)}\n")
    code, out, err = _run(capsys, "--gt-boxes", tmp_path / "boxes.csv", "--gt-labels", tmp_path / "labels.csv",
                          "--gt-masks", tmp_path / "masks.csv", "--hierarchy", HIERARCHY, "--dt", tmp_path / "pred.csv",
                          "--iou-type", "segm", "--json", "--quiet")
    assert code == 0, err
    payload = json.loads(out)
    # cat: FP at 0.9, TP at 0.5 → precision [0, 0.5], recall [0, 1]: AP 0.5; person: no mask → not counted (NaN);
    # Cat's ancestors (Carnivore, Mammal, Animal) hold its expanded box, but the predictions are not expanded: AP 0
    assert payload["per_class"] == {cat: 0.5, "/m/01lrl": 0.0, "/m/04rky": 0.0, "/m/0jbk": 0.0}
    assert payload["map"] == 0.125


def test_corloc_lines_and_json(tmp_path, capsys):
    """``--corloc`` (the evaluator's ``evaluate_corlocs``): ``meanCorLoc`` second, each class's CorLoc after its AP, in
    the reference's metric order; the JSON's values equal the Python API's."""
    from evalengine.api import evaluate_openimages
    paths = write_challenge_files(tmp_path, 8)
    args = ("--gt-boxes", paths["boxes"], "--gt-labels", paths["labels"], "--hierarchy", HIERARCHY, "--dt",
            paths["predictions"], "--quiet", "--corloc")
    code, out, err = _run(capsys, *args)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1].startswith("OpenImagesDetectionChallenge_Precision/meanCorLoc@0.5IOU,")
    assert len(lines) == 2 + 2 * 601
    assert all("/AP@0.5IOU/" in a and "/CorLoc@0.5IOU/" in b and a.rsplit("/", 1)[1].split(",")[0]
               == b.rsplit("/", 1)[1].split(",")[0] for a, b in zip(lines[2::2], lines[3::2]))
    code, out, _ = _run(capsys, *args, "--json")
    payload = json.loads(out)
    evaluation = evaluate_openimages(paths["boxes"], paths["labels"], HIERARCHY, paths["predictions"])
    located = evaluation.cor_loc().filter(~evaluation.cor_loc()["corloc"].is_nan())
    assert payload["corloc"] == dict(zip(located["name"], located["corloc"])) and payload["corloc"]
    assert payload["mean_corloc"] == pytest.approx(np.mean(located["corloc"].to_numpy()), abs=1e-12)
    assert payload["mean_corloc"] == evaluation.mean_cor_loc()


@pytest.mark.parametrize("target, text, message", [
    ("boxes", "ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf\na,/m/nope,0.1,0.2,0.1,0.2,0\n",
     "boxes.csv: line 2: LabelName '/m/nope' is not a class of the hierarchy"),
    ("boxes", "ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf\na,/m/0cmx8,0.1,0.2,-0.1,0.2,0\n",
     "boxes.csv: line 2: 'YMin' is -0.1, outside [0, 1]"),
    ("predictions", "ImageID,LabelName,Score,XMin,XMax,YMin,YMax\na,/m/0cmx8,0.5,0.1,1.2,0.1,0.2\n",
     "predictions.csv: line 2: 'XMax' is 1.2, outside [0, 1]"),
    ("boxes", "ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf\na,/m/0cmx8,0.1,0.2,0.1,0.2,yes\n",
     "boxes.csv: line 2: 'IsGroupOf' is 'yes'"),
    ("hierarchy", '{"LabelName": "/m/0bl9f"}', "the hierarchy has no class under its root"),
], ids=["label-not-in-hierarchy", "box-outside-unit", "prediction-outside-unit", "group-of-not-0-1", "no-classes"])
def test_bad_input_as_a_subprocess(tmp_path, target, text, message):
    """The command as users run it: one located line on stderr, exit status 2, no traceback."""
    import subprocess
    import sys
    paths = write_challenge_files(tmp_path, 3)
    paths["hierarchy"] = tmp_path / "hierarchy.json"
    paths["hierarchy"].write_text(HIERARCHY.read_text())
    paths[target].write_text(text)
    result = subprocess.run([sys.executable, "-m", "evalengine.cli", "openimages", "--gt-boxes", paths["boxes"],
                             "--gt-labels", paths["labels"], "--hierarchy", paths["hierarchy"], "--dt",
                             paths["predictions"], "--json", "--quiet"], capture_output=True, text=True)
    assert result.returncode == 2 and not result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_predictions_without_labels_warn_as_a_subprocess(tmp_path):
    """A detection for an image without ground-truth rows (no box, no image-level label): not evaluated, as the
    reference (it never adds the image), and counted in one warning; the run succeeds."""
    import subprocess
    import sys
    paths = write_challenge_files(tmp_path, 4)
    with open(paths["predictions"], "a") as handle:
        handle.write("unlabelled-image,/m/0cmx8,0.9,0.1,0.2,0.1,0.2\n")
    result = subprocess.run([sys.executable, "-m", "evalengine.cli", "openimages", "--gt-boxes", paths["boxes"],
                             "--gt-labels", paths["labels"], "--hierarchy", HIERARCHY, "--dt", paths["predictions"],
                             "--json", "--quiet"], capture_output=True, text=True)
    assert result.returncode == 0 and json.loads(result.stdout)["map"] >= 0
    assert "1 prediction(s) on images without ground-truth rows are not evaluated" in result.stderr
    assert "Traceback" not in result.stderr
