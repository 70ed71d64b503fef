"""Detections from COCO JSON, JSON Lines and Parquet (bbox list or x, y, w, h) give the same store and numbers."""

import math

import polars as pl
import pytest

from evalengine.api import evaluate_coco, ingest_coco
from evalengine.errors import InputError
from evalengine.io.coco import read_coco_gt
from evalengine.io.detections import iter_detections, read_detections
from tests.conftest import PACKAGE_DATA

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


@pytest.fixture(scope="module")
def reference_stats():
    return evaluate_coco(GT, DT).stats()


def _frame():
    return pl.read_json(DT, schema={"image_id": pl.Int64, "category_id": pl.Int64, "bbox": pl.List(pl.Float64),
                                    "score": pl.Float64})


def write_variants(tmp_path):
    frame = _frame()
    xywh = frame.with_columns([pl.col("bbox").list.get(i).alias(c) for i, c in enumerate("xywh")]).drop("bbox")
    paths = {
        "parquet_bbox": tmp_path / "dt_bbox.parquet",
        "parquet_xywh": tmp_path / "dt_xywh.parquet",
        "jsonl_bbox": tmp_path / "dt.jsonl",
        "ndjson_xywh": tmp_path / "dt.ndjson",
    }
    frame.write_parquet(paths["parquet_bbox"])
    xywh.write_parquet(paths["parquet_xywh"], row_group_size=100)
    frame.write_ndjson(paths["jsonl_bbox"])
    xywh.write_ndjson(paths["ndjson_xywh"])
    return paths


def test_every_format_gives_the_same_detections(tmp_path):
    dataset = read_coco_gt(GT)
    want = read_detections(DT, dataset)
    for name, path in write_variants(tmp_path).items():
        assert read_detections(path, dataset).equals(want), name


def test_batches_keep_file_positions_as_ids(tmp_path):
    dataset = read_coco_gt(GT)
    path = write_variants(tmp_path)["parquet_xywh"]
    batches = list(iter_detections(path, dataset, batch_rows=100))
    assert len(batches) == math.ceil(734 / 100)
    assert pl.concat(batches)["det_id"].to_list() == list(range(1, 735))


@pytest.mark.parametrize("variant", ["parquet_bbox", "parquet_xywh", "jsonl_bbox", "ndjson_xywh"])
def test_every_format_gives_the_same_stats(tmp_path, variant, reference_stats):

    path = write_variants(tmp_path)[variant]
    assert evaluate_coco(GT, path, n_shards=3).stats() == reference_stats


def test_missing_columns_are_named(tmp_path):
    path = tmp_path / "dt.parquet"
    _frame().drop("score").write_parquet(path)
    with pytest.raises(InputError, match=r"dt.parquet: missing column\(s\) score"):
        read_detections(path, read_coco_gt(GT))


def test_non_finite_values_in_parquet(tmp_path):
    path = tmp_path / "dt.parquet"
    _frame().with_columns(pl.when(pl.int_range(pl.len()) == 3).then(float("nan")).otherwise(pl.col("score"))
                          .alias("score")).write_parquet(path)
    with pytest.raises(InputError, match="detection at position 4: 'score' is not finite"):
        read_detections(path, read_coco_gt(GT))
    xywh = tmp_path / "xywh.parquet"
    pl.DataFrame({"image_id": [42], "category_id": [1], "score": [0.5], "x": [1.0], "y": [float("inf")],
                  "w": [1.0], "h": [1.0]}).write_parquet(xywh)
    with pytest.raises(InputError, match="detection at position 1: 'bbox' has a non-finite value"):
        read_detections(xywh, read_coco_gt(GT))


def test_unknown_format_and_bad_types(tmp_path):
    with pytest.raises(InputError, match="unknown detection format '.txt'"):
        read_detections(tmp_path / "dt.txt", read_coco_gt(GT))
    path = tmp_path / "dt.parquet"
    _frame().with_columns(pl.col("image_id").cast(pl.String) + "x").write_parquet(path)
    with pytest.raises(InputError, match=r"position 1: 'image_id' is '42x', not an integer \(and 733 more"):
        read_detections(path, read_coco_gt(GT))


def test_failed_streaming_ingest_leaves_nothing(tmp_path):
    path = tmp_path / "dt.parquet"
    frame = _frame()
    bad_last = frame.with_columns(pl.when(pl.int_range(pl.len()) == frame.height - 1).then(999999)
                                  .otherwise(pl.col("image_id")).alias("image_id"))
    bad_last.write_parquet(path, row_group_size=50)
    with pytest.raises(InputError, match="image_id 999999 not in the ground truth's images"):
        ingest_coco(GT, path, tmp_path / "store")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dt.parquet"]


def test_prefetched_json_gives_the_same_batches_and_errors(tmp_path):
    """A small result file is parsed on a background thread while the ground truth is read: same detections,
    and a malformed file still fails with its located error when its batches are read."""
    from evalengine.io.detections import prefetch

    dataset = read_coco_gt(PACKAGE_DATA / "instances_val2014_100.json")
    path = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
    fetched = prefetch(path)
    assert fetched is not None
    assert pl.concat(list(iter_detections(path, dataset, prefetched=fetched))).equals(read_detections(path, dataset))
    bad = tmp_path / "bad.json"
    bad.write_text('[{"image_id": 42, "category_id": 1, "bbox": [0, 0, 1, 1], "score": NaN}]')
    with pytest.raises(InputError, match="bad.json: detection at position 1 \\(line 1, column 59\\): 'score' is NaN"):
        list(iter_detections(bad, dataset, prefetched=prefetch(bad)))
    pl.DataFrame({"image_id": [1]}).write_parquet(tmp_path / "d.parquet")
    assert prefetch(tmp_path / "d.parquet") is None


def test_a_large_json_is_read_ahead_in_chunks_with_the_same_batches_and_errors(tmp_path, monkeypatch):
    """A result file of several chunks is parsed on a thread, a chunk ahead, while the ground truth is read: the same
    detections, a located error where its chunk is read, and a reader that stops early stops the thread."""
    import functools
    import threading

    from evalengine.io import detections, json_scan

    monkeypatch.setattr(detections, "CHUNK_BYTES", 2000)  # the file is read ahead ...
    monkeypatch.setattr(detections, "json_list_chunks", functools.partial(json_scan.json_list_chunks,
                                                                          chunk_bytes=2000))  # ... in small chunks
    dataset = read_coco_gt(PACKAGE_DATA / "instances_val2014_100.json")
    fetched = detections.prefetch(DT)
    assert isinstance(fetched, detections._ReadAhead)
    batches = list(iter_detections(DT, dataset, batch_rows=50, prefetched=fetched))
    assert len(batches) > 10 and pl.concat(batches).equals(read_detections(DT, dataset))
    text = DT.read_text()
    bad = tmp_path / "bad.json"
    bad.write_text(text[:-1] + ', {"image_id": 42, "category_id": 1, "bbox": [0, 0, 1, 1], "score": NaN}]')
    with pytest.raises(InputError, match=r"bad.json: detection at position 735 \(line 1, column \d+\): 'score' is NaN"):
        list(iter_detections(bad, dataset, prefetched=detections.prefetch(bad)))
    before = threading.active_count()
    stopped = iter_detections(DT, dataset, prefetched=detections.prefetch(DT))
    next(stopped)
    stopped.close()
    for _ in range(100):
        if threading.active_count() <= before:
            break
        threading.Event().wait(0.05)
    assert threading.active_count() <= before


def test_json_list_layouts_parse_alike(tmp_path):
    """A result list of one-line objects is parsed as JSON Lines (on every core); any other layout as a list. Both
    give the same rows, and a separator inside a string cannot split an object."""
    import json

    from evalengine.io.coco import RESULT_FIELDS
    from evalengine.io.json_scan import json_list_chunks
    from evalengine.io.json_read import read_json_objects

    dataset = read_coco_gt(GT)
    objects = json.loads(DT.read_text())
    objects[0]["note"] = "a},{b}, {c"  # unused field: the separators inside a string
    objects[1]["note"] = "quote \" and unicode \u00e9 \\ },{"
    objects[2]["bbox"] = [int(v) for v in objects[2]["bbox"]]  # integers read as floats
    layouts = {
        "compact": json.dumps(objects, separators=(",", ":")),
        "default": json.dumps(objects),
        "indented": json.dumps(objects, indent=2),
        "one line per object": "[\n" + ",\n".join(json.dumps(o) for o in objects) + "\n]",
    }
    frames = {}
    for name, text in layouts.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        frames[name] = read_detections(path, dataset)
    for name in layouts:  # small chunks too: separators and whitespace straddle the blocks
        path = tmp_path / f"{name}.json"
        chunks = list(json_list_chunks(path, 97))
        assert len(chunks) > 100
        (offset, objects), = json_list_chunks(path)
        assert pl.concat([read_json_objects(path, RESULT_FIELDS, o, at) for at, o in chunks]).equals(
            read_json_objects(path, RESULT_FIELDS, objects, offset))
    want = read_detections(DT, dataset).with_columns(
        pl.when(pl.col("det_id") == 3).then(pl.col(c).floor()).otherwise(pl.col(c)).alias(c) for c in "xywh")
    for name, frame in frames.items():
        assert frame.drop("area").equals(want.drop("area")), name


def test_json_lines_fast_path_keeps_located_errors(tmp_path):
    """A value the JSON Lines parse refuses is read again by Python's json, whose error names the place in the file."""
    import json

    objects = json.loads(DT.read_text())[:5]
    text = json.dumps(objects).replace(str(objects[3]["score"]), "NaN", 1)
    path = tmp_path / "nan.json"
    path.write_text(text)
    column = text.index('"score": NaN') + 1
    with pytest.raises(InputError, match=rf"nan.json: detection at position 4 \(line 1, column {column}\): 'score' is "
                                         "NaN, not a finite number \\(JSON has none; .*\\), near '.*\"score\": NaN"):
        read_detections(path, read_coco_gt(GT))
