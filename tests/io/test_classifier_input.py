"""The upper bound's classifier table: CSV, JSON Lines and Parquet read alike; bad tables get one located line."""

import json

import polars as pl
import pytest

from evalengine.api import ingest_gt, upper_bound
from evalengine.errors import InputError
from evalengine.io.classifier import read_classifier_table
from tests.helpers import coco_gt

# three annotations (ids 11, 12, 13) of images 1, 1, 2 and categories 1, 2, 1; 13 is a crowd
GT = coco_gt([[0, 0, 10, 10], [20, 20, 10, 10], [0, 0, 30, 30]], image_ids=[1, 1, 2], id=[11, 12, 13],
             category_id=[1, 2, 1], iscrowd=[0, 0, 1])
GOOD = {"image_id": [1, 1, 2], "gt_id": [11, 12, 13], "category_id": [1, 1, 2], "score": [0.9, 0.4, 0.7]}


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(GT))
    return ingest_gt(path, tmp_path / "store")


def write(tmp_path, columns: dict, suffix: str = ".csv"):
    path = tmp_path / f"classifier{suffix}"
    frame = pl.DataFrame(columns, strict=False)
    if suffix == ".csv":
        frame.write_csv(path)
    elif suffix == ".parquet":
        frame.write_parquet(path)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in frame.to_dicts()))
    return path


def error(store, path, **options) -> str:
    with pytest.raises(InputError) as info:
        upper_bound(store, path, **options)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    return message.removeprefix(f"{path}: ")


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_formats_read_alike(tmp_path, suffix):
    table = read_classifier_table(write(tmp_path, GOOD, suffix))
    assert table.to_dict(as_series=False) == {"row": [1, 2, 3], **{k: GOOD[k] for k in ("gt_id", "category_id",
                                                                                        "score", "image_id")}}


def test_spec_column_names_and_optional_image(tmp_path):
    path = write(tmp_path, {"ann_id": [12, 11], "pred_category_id": [2, 1], "pred_score": [0.5, 1]})
    table = read_classifier_table(path)
    assert table.select("row", "gt_id", "category_id", "score").rows() == [(1, 12, 2, 0.5), (2, 11, 1, 1.0)]
    assert table.get_column("image_id").null_count() == 2


def test_unknown_gt_id_names_row_and_id(store, tmp_path):
    rows = dict(GOOD, gt_id=[11, 99, 13])
    assert error(store, write(tmp_path, rows)) == "row 2: gt_id 99 is not an annotation of the store's ground truth"


def test_gt_id_listed_twice(store, tmp_path):
    rows = {k: v + [v[0]] for k, v in GOOD.items()}
    assert error(store, write(tmp_path, rows)) == ("rows 1, 4: gt_id 11 listed more than once (strategy s1 takes one "
                                                   "row per annotation; s2_mcb and s2_mfl take several)")


def test_strategy_2_takes_several_rows_but_each_box_once(store, tmp_path):
    """Under s2_* a gt_id may repeat (one row per sampled box); a (gt_id, box_id) pair may not; an unknown strategy
    is refused."""
    rows = {"gt_id": [11, 11, 12, 13, 11], "box_id": [0, 1, 0, 0, 1], "category_id": [1, 2, 2, 1, 1],
            "score": [0.5, 0.6, 0.7, 0.8, 0.9]}
    assert error(store, write(tmp_path, rows), strategy="s2_mcb") == "rows 2, 5: gt_id 11, box_id 1 listed more than once"
    table = read_classifier_table(write(tmp_path, {k: v[:4] for k, v in rows.items()}), "s2_mfl")
    assert table.get_column("gt_id").to_list() == [11, 11, 12, 13]
    path = write(tmp_path, {k: v for k, v in rows.items() if k != "box_id"})
    assert read_classifier_table(path, "s2_mcb").height == 5  # without box ids, repeated rows are several boxes
    with pytest.raises(InputError, match=r"^strategy must be one of \('s1', 's2_mcb', 's2_mfl'\), got 's3'$"):
        upper_bound(store, path, strategy="s3")


def test_unknown_category(store, tmp_path):
    rows = dict(GOOD, category_id=[1, 7, 8])
    assert error(store, write(tmp_path, rows)) == "row 2: category_id 7 is not a category of the store " \
                                                  "(and 1 more rows)"


def test_image_of_another_annotation(store, tmp_path):
    rows = dict(GOOD, image_id=[1, 2, 2])
    assert error(store, write(tmp_path, rows)) == "row 2: gt_id 12 is an annotation of image 1, not of image_id 2"


def test_missing_annotation_is_an_error_unless_allowed(store, tmp_path):
    rows = {k: v[:1] + v[2:] for k, v in GOOD.items()}
    path = write(tmp_path, rows)
    assert error(store, path) == ("gt_id 12 (1 of 3 annotations) have no row: the upper bound emits one detection "
                                  "per annotation (allow missing rows to count them as missed)")
    result = upper_bound(store, path, allow_missing=True)
    assert result.evaluation.layout.read("runs").filter(pl.col("run") == "uap")["n_detections"].to_list() == [2]
    # category 1 has one regular object, detected; category 2's object is missed: AP 0
    per_class = {row["category_id"]: row["ap"] for row in result.per_class().iter_rows(named=True)}
    assert per_class[1] == pytest.approx(1, abs=1e-12) and per_class[2] == 0


@pytest.mark.parametrize("columns, message", [
    ({"gt_id": [11], "score": [1.0]}, "missing column category_id or pred_category_id (found gt_id, score; "
                                      "expected gt_id, category_id, score and optionally image_id, box_id)"),
    ({"gt_id": [11], "ann_id": [11], "category_id": [1], "score": [1.0]}, "columns gt_id and ann_id both give the "
                                                                          "gt_id; keep one"),
    ({"gt_id": [11, 12.5], "category_id": [1, 1], "score": [1.0, 1.0]}, "row 2: 'gt_id' is 12.5, not an integer"),
    ({"gt_id": [11, 12], "category_id": [1, 1], "score": ["0.5", "low"]}, "row 2: 'score' is 'low', not a number"),
    ({"gt_id": [11, 12], "category_id": [1, 1], "score": [1.0, float("nan")]}, "row 2: 'score' is not finite"),
    ({"gt_id": [11, None], "category_id": [1, 1], "score": [1.0, 0.5]}, "row 2: missing field 'gt_id'"),
])
def test_malformed_tables(store, tmp_path, columns, message):
    assert error(store, write(tmp_path, columns)) == message


def test_empty_table_and_unknown_format(store, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("gt_id,category_id,score\n")
    assert error(store, empty) == "the table holds no rows (one per annotation is expected)"
    assert error(store, write(tmp_path, GOOD, ".txt")).startswith("unknown classifier table format '.txt'")
    assert error(store, tmp_path / "none.csv") == "no such file"


def test_json_lines_type_error_is_located(store, tmp_path):
    path = tmp_path / "classifier.jsonl"
    path.write_text('{"gt_id": 11, "category_id": 1, "score": 0.5}\n{"gt_id": "x", "category_id": 1, "score": 0.5}\n')
    assert error(store, path).startswith("row at position 2 (line 2, column ")
