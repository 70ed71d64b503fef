"""metrics.curve_counts: ``curve.parquet`` written a category batch at a time has one schema, the declared one,
whatever dtypes a batch's frames come with (the match table's ``dt_rank`` is Int32, its ``category_id`` may be
Int32, a batch is read back from the spill or is the match table's empty frame), and the same rows as one batch of
every category."""

import polars as pl
import pyarrow.parquet as pq
import pytest

from evalengine.api import ingest_coco
from evalengine.match.coco import CocoProtocol
from evalengine.metrics import curve_counts
from tests.generators import random_coco
from tests.helpers import write_inputs

KEYS = ["category_id", "area_index", "max_dets", "score", "image_id", "dt_rank"]


@pytest.mark.parametrize("seed", [1, 2, 5, 7])
@pytest.mark.parametrize("narrow", [False, True])
def test_batches_of_mixed_dtypes_write_one_schema(tmp_path, monkeypatch, seed, narrow):
    gt, dt = random_coco(seed)
    store = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=2)
    evaluation = store.evaluate(CocoProtocol())
    dt_rows, gt_rows = evaluation.dt_matches(), evaluation.gt_matches()
    if narrow:  # the categories' column as another match table may have it
        dt_rows, gt_rows = (rows.with_columns(pl.col("category_id").cast(pl.Int32)) for rows in (dt_rows, gt_rows))
    present = sorted({c["id"] for c in gt["categories"]})
    # categories without rows first, between and last: batches of one category, or of none but those
    category_ids = sorted({min(present) - 1, *present, *range(min(present) + 1, max(present)), max(present) + 7})
    monkeypatch.setattr(curve_counts, "BATCH_ROWS", 1)
    path = tmp_path / "curve.parquet"
    curve_counts.write_curve_counts(str(path), dt_rows, gt_rows, evaluation.protocol, category_ids)

    written = pl.read_parquet(path)
    declared = {**curve_counts.COLUMNS, "tp": pl.Array(pl.Int64, 10), "fp": pl.Array(pl.Int64, 10)}
    assert dict(written.schema) == declared
    assert pq.ParquetFile(path).metadata.num_row_groups > 1
    monkeypatch.undo()  # every category in one batch, from the match table as it is
    whole_path = tmp_path / "whole.parquet"
    curve_counts.write_curve_counts(str(whole_path), evaluation.dt_matches(), evaluation.gt_matches(),
                                    evaluation.protocol, category_ids)
    whole = pl.read_parquet(whole_path)
    assert dict(whole.schema) == declared
    assert whole.height > 0 and written.height == whole.height
    assert written.sort(KEYS).equals(whole.sort(KEYS))
