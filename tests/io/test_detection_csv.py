"""Issue 18: detections as CSV (``x, y, w, h`` or ``x1, y1, x2, y2``, category ids or names; the header decides) read
exactly as the same detections in COCO JSON, on the bundled sample and random datasets, through every command that
takes ``--dt``; bad rows give a located error (file, row and line, column). Proposal CSV shares the reader."""

import csv
import json

import numpy as np
import polars as pl
import pytest

from evalengine.api import evaluate_coco, ingest_coco, ingest_gt
from evalengine.errors import InputError
from evalengine.io.coco import read_coco_gt
from evalengine.io.detections import iter_detections, read_detections
from evalengine.io.proposals import iter_proposals
from tests.conftest import PACKAGE_DATA
from tests.generators import random_coco
from tests.helpers import run_cli

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
LAYOUTS = ["xywh", "corners", "names", "category_name", "shuffled"]


def write_csv(path, dets: list, categories: list, layout: str, rng=None, number=repr, line_end="\n") -> list:
    """``dets`` (COCO result dicts) as a CSV file in ``layout``; returns the detections as the CSV gives them (a
    corner box's w = x2 - x1, as the reader computes it), for the JSON side."""
    names = {c["id"]: c["name"] for c in categories}
    corners = layout in ("corners", "names", "shuffled")
    box_columns = ["x1", "y1", "x2", "y2"] if corners else ["x", "y", "w", "h"]
    category = {"names": "category", "category_name": "category_name"}.get(layout, "category_id")
    header = ["image_id", category, "score", *box_columns]
    if layout == "shuffled":  # any column order, columns the reader ignores, quoted values
        header = [header[i] for i in rng.permutation(len(header))] + ["note"]
    rows, given = [], []
    for det in dets:
        x, y, w, h = det["bbox"]
        box = [x, y, x + w, y + h] if corners else [x, y, w, h]
        values = {"image_id": det["image_id"], "category_id": det["category_id"], "score": number(det["score"]),
                  "category": names[det["category_id"]], "category_name": names[det["category_id"]],
                  "note": "a, b", **dict(zip(box_columns, map(number, box)))}
        rows.append([values[c] for c in header])
        x1, y1, x2, y2 = (float(number(v)) for v in box)
        given.append({**det, "score": float(number(det["score"])),
                      "bbox": [x1, y1, x2 - x1, y2 - y1] if corners else [x1, y1, x2, y2]})
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator=line_end,
                            quoting=csv.QUOTE_NONNUMERIC if layout == "shuffled" else csv.QUOTE_MINIMAL)
        writer.writerow(header)
        writer.writerows(rows)
    return given


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_reads_as_the_json(tmp_path, layout):
    dets, gt = json.loads(DT.read_text()), json.loads(GT.read_text())
    given = write_csv(tmp_path / "dt.csv", dets, gt["categories"], layout, np.random.default_rng(0))
    (tmp_path / "dt.json").write_text(json.dumps(given))
    dataset = read_coco_gt(GT)
    assert read_detections(tmp_path / "dt.csv", dataset).equals(read_detections(tmp_path / "dt.json", dataset))
    if layout == "xywh":  # the very file: the same numbers as the bundled results
        assert read_detections(tmp_path / "dt.csv", dataset).equals(read_detections(DT, dataset))


@pytest.mark.parametrize("seed", range(40))
def test_random_datasets_read_and_evaluate_as_the_json(tmp_path, seed):
    gt, dets = random_coco(seed)
    rng = np.random.default_rng(seed)
    layout = LAYOUTS[seed % len(LAYOUTS)]
    number = [repr, lambda v: format(v, ".17g"), lambda v: format(v, ".3f")][seed % 3]
    given = write_csv(tmp_path / "dt.csv", dets, gt["categories"], layout, rng, number,
                      line_end="\r\n" if seed % 4 == 1 else "\n")
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(given))
    dataset = read_coco_gt(tmp_path / "gt.json")
    batch_rows = int(rng.integers(1, 40))  # batches: positions and names carry over
    from_csv = pl.concat(iter_detections(tmp_path / "dt.csv", dataset, batch_rows=batch_rows))
    assert from_csv.equals(read_detections(tmp_path / "dt.json", dataset))
    if seed % 4 == 0:
        csv_ev = evaluate_coco(tmp_path / "gt.json", tmp_path / "dt.csv")
        json_ev = evaluate_coco(tmp_path / "gt.json", tmp_path / "dt.json")
        assert csv_ev.stats() == json_ev.stats()
        assert csv_ev.per_class().equals(json_ev.per_class())


@pytest.fixture(scope="module")
def sample_csv(tmp_path_factory):
    folder = tmp_path_factory.mktemp("csv")
    gt = json.loads(GT.read_text())
    given = write_csv(folder / "dt.csv", json.loads(DT.read_text()), gt["categories"], "names")
    (folder / "dt.json").write_text(json.dumps(given))
    return folder


@pytest.mark.parametrize("argv", [("coco", "--json"), ("lrp", "--json"), ("tide", "--json"),
                                  ("voc", "--json", "--metric", "voc07"), ("confusion", "--json")])
def test_commands_that_take_dt_read_csv(capsys, sample_csv, argv):
    outputs = []
    for dt in ("dt.csv", "dt.json"):
        status, out, err = run_cli(capsys, argv[0], "--gt", GT, "--dt", sample_csv / dt, *argv[1:])
        assert (status, err) == (0, "")
        outputs.append(out)
    assert outputs[0] == outputs[1]


def test_ingest_and_add_run_read_csv(capsys, sample_csv, tmp_path):
    store = tmp_path / "store"
    status, _, err = run_cli(capsys, "ingest", "coco", "--gt", GT, "--dt", sample_csv / "dt.csv", "--store", store)
    assert (status, err) == (0, "")
    status, _, err = run_cli(capsys, "add-run", store, "--run", "json", "--dt", sample_csv / "dt.json")
    assert (status, err) == (0, "")
    status, _, err = run_cli(capsys, "add-run", store, "--run", "csv", "--dt", sample_csv / "dt.csv")
    assert (status, err) == (0, "")
    stats = [json.loads(run_cli(capsys, "evaluate", store, "--run", run, "--json")[1])["stats"]
             for run in ("default", "json", "csv")]
    assert stats[0] == stats[1] == stats[2]
    opened = ingest_coco(GT, sample_csv / "dt.csv", tmp_path / "api").add_run(sample_csv / "dt.csv", "again")
    assert opened.evaluate(run="again").stats() == opened.evaluate().stats()


HEADER = "image_id,category_id,score,x,y,w,h\n"
BAD = [
    (HEADER + "139,1,0.5,1,2,3,4\n139,1,abc,1,2,3,4\n",
     "detection at position 2 (line 3): 'score' is 'abc', not a number"),
    (HEADER + "139,1,0.5,1,2,3,4\n139x,1,0.5,1,2,3,4\n",
     "detection at position 2 (line 3): 'image_id' is '139x', not an integer"),
    (HEADER + "139,1,0.5,1,2,3,4\n139.5,1,0.5,1,2,3,4\n", "detection at position 2: 'image_id' is 139.5, not an integer"),
    (HEADER + "139,1,0.5,1,2,3,4\n139,1,,1,2,3,4\n", "detection at position 2: missing field 'score'"),
    (HEADER + "139,1,0.5,1,2,3,4\n139,1,0.5,1,2,3\n", "detection at position 2: missing field 'h'"),
    (HEADER + "139,1,0.5,1,2,-3,4\n", "detection at position 1: 'bbox' has a negative width or height"),
    (HEADER + "139,1,nan,1,2,3,4\n", "detection at position 1: 'score' is not finite"),
    (HEADER + "7,1,0.5,1,2,3,4\n", "image_id 7 not in the ground truth's images"),
    (HEADER + "139,1,0.5,1,2,3,4,5\n", "line 2: 8 fields where the header has 7 (a value with a comma must be quoted)"),
    (HEADER + '"139,1,0.5,1,2,3,4\n', "line 2: not CSV (unexpected end of data)"),
    (HEADER, "the file holds no detections"),
    ("", "not a readable CSV file (empty CSV)"),
    ("image_id,category_id,score,x,y,x,h\n", "line 1: column(s) x appear more than once"),
    ("image_id,category_id,score,x1,y1,x2,y2\n139,1,0.5,1,2,3,4\n139,1,0.5,5,2,3,4\n",
     "detection at position 2 (line 3): 'x2' is 3.0, less than x1 (corners x1, y1, x2, y2: the header says so)"),
    ("image_id,category,score,x,y,w,h\n139,person,0.5,1,2,3,4\n139,unicorn,0.5,1,2,3,4\n",
     "detection at position 2 (line 3): 'category' is 'unicorn', not a category name of the ground truth "
     "(airplane, apple, backpack, banana, baseball bat and 75 more)"),
    ("image_id,category,score,x,y,w,h\n139,,0.5,1,2,3,4\n",
     "detection at position 1 (line 2): missing field 'category'"),
    ("image_id,category_id,score,x,y,w\n139,1,0.5,1,2,3\n",
     "missing column(s) x, y, w, h or x1, y1, x2, y2 (found image_id, category_id, score, x, y, w; expected "
     "image_id; category_id or category or category_name; score; x, y, w, h or x1, y1, x2, y2)"),
    ("image_id,label,x,y,w,h\n139,1,1,2,3,4\n",
     "missing column(s) category_id or category or category_name; score (found image_id, label, x, y, w, h; expected "
     "image_id; category_id or category or category_name; score; x, y, w, h or x1, y1, x2, y2)"),
]


@pytest.mark.parametrize("text, message", BAD)
def test_bad_rows_are_located(tmp_path, text, message):
    path = tmp_path / "dt.csv"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        read_detections(path, read_coco_gt(GT))
    assert str(caught.value) == f"{path}: {message}"


def test_the_command_says_it_in_one_line(capsys, tmp_path):
    path = tmp_path / "dt.csv"
    path.write_text(BAD[0][0])
    status, out, err = run_cli(capsys, "coco", "--gt", GT, "--dt", path)
    assert (status, out, err) == (2, "", f"evalengine: error: {path}: {BAD[0][1]}\n")


def test_a_category_name_given_twice_in_the_ground_truth(tmp_path):
    gt = json.loads(GT.read_text())
    gt["categories"][1]["name"] = gt["categories"][0]["name"]
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    first = gt["categories"][0]
    (tmp_path / "dt.csv").write_text(f"image_id,category,score,x,y,w,h\n139,{first['name']},0.5,1,2,3,4\n")
    with pytest.raises(InputError, match=f"category name '{first['name']}' names categories 1, 2 of the ground truth: "
                                         "give category_id instead"):
        read_detections(tmp_path / "dt.csv", read_coco_gt(tmp_path / "gt.json"))


def test_ids_written_as_floats_and_spaces(tmp_path):
    (tmp_path / "a.csv").write_text(HEADER + "139, 1, 0.5, 1, 2, 3, 4\n")
    (tmp_path / "b.csv").write_text(HEADER + "139.0,1.0,0.5,1,2,3,4\n")
    dataset = read_coco_gt(GT)
    assert read_detections(tmp_path / "a.csv", dataset).equals(read_detections(tmp_path / "b.csv", dataset))
    assert read_detections(tmp_path / "a.csv", dataset).row(0) == (1, 139, 1, 0.5, 1.0, 2.0, 3.0, 4.0, 12.0)


@pytest.mark.parametrize("box", ["corners", "xywh"])
def test_proposal_csv_shares_the_reader(tmp_path, box):
    """Proposal CSV takes either box layout, with the same located errors."""
    images = read_coco_gt(GT).images
    boxes = [(139, 1.5, 2.0, 30.25, 40.0, 0.9), (285, 0.0, 0.0, 10.0, 10.0, 0.1)]
    corners = "image_id,x1,y1,x2,y2,score\n" + "".join(f"{i},{a},{b},{c},{d},{s}\n" for i, a, b, c, d, s in boxes)
    xywh = "score,image_id,x,y,w,h\n" + "".join(f"{s},{i},{a},{b},{c - a},{d - b}\n" for i, a, b, c, d, s in boxes)
    path = tmp_path / "p.csv"
    path.write_text(corners if box == "corners" else xywh)
    frame = pl.concat(iter_proposals(path, images))
    assert frame.select("image_id", "x", "y", "w", "h", "score").rows() == [
        (139, 1.5, 2.0, 28.75, 38.0, 0.9), (285, 0.0, 0.0, 10.0, 10.0, 0.1)]
    path.write_text("image_id,x1,y1,x2,y2\n139,1,2,3,4\n139,1,2,3,four\n")
    with pytest.raises(InputError, match=r"p.csv: proposal at position 2 \(line 3\): 'y2' is 'four', not a number$"):
        list(iter_proposals(path, images))
    path.write_text("image_id,x1,y1,x2\n139,1,2,3\n")
    with pytest.raises(InputError, match=r"missing column\(s\) x, y, w, h or x1, y1, x2, y2 \(found image_id, x1, y1, "
                                         r"x2; expected image_id; x, y, w, h or x1, y1, x2, y2; optional score, "
                                         r"category_id\)"):
        list(iter_proposals(path, images))


def test_proposal_store_from_csv_equals_parquet(tmp_path):
    gt = tmp_path / "gt.json"
    gt.write_text(GT.read_text())
    frame = pl.DataFrame({"image_id": [139, 139, 285], "x1": [1.0, 5.5, 0.0], "y1": [2.0, 1.0, 3.0],
                          "x2": [40.0, 100.25, 50.0], "y2": [30.0, 60.0, 70.0], "score": [0.3, 0.9, 0.5]})
    frame.write_csv(tmp_path / "p.csv")
    frame.write_parquet(tmp_path / "p.parquet")
    a = ingest_gt(gt, tmp_path / "a").add_proposals(tmp_path / "p.csv")
    b = ingest_gt(gt, tmp_path / "b").add_proposals(tmp_path / "p.parquet")
    assert a.evaluate_proposals().recall().equals(b.evaluate_proposals().recall())
