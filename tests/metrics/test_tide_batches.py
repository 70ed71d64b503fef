"""TIDE's ΔAP step reads the classes in batches, so that memory is bounded by a batch: every batch size gives the same
floats (==), equal to tidecv's, Cls fixes that count in a class of another batch included."""

import json

import polars as pl
import pytest

from evalengine import api
from evalengine.metrics.errors.tide import tide_errors
from tests.conftest import PACKAGE_DATA
from tests.generators import random_coco
from tests.helpers import write_inputs
from tests.metrics.tide_reference import tidecv_errors

BATCH_ROWS = (1, 7, 10**9)  # one class per batch, a few classes, all at once


def _by_batch_size(diagnosis, mode: str) -> dict:
    return {rows: tide_errors(diagnosis.dt_matches(), diagnosis.gt_matches(), diagnosis.layout.scan("images"), mode,
                              batch_rows=rows) for rows in BATCH_ROWS}


def _moved_fixes(diagnosis) -> int:
    """Fixed Cls errors whose true positive counts in another class."""
    return diagnosis.dt_matches().filter(pl.col("fix_category_id").is_not_null()
                                         & (pl.col("fix_category_id") != pl.col("category_id"))).collect().height


def test_batches_of_the_sample_give_the_golden_numbers():
    gt, dt = PACKAGE_DATA / "instances_val2014_100.json", PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
    for mode in ("tide", "coco"):
        diagnosis = api.tide((gt, dt), mode=mode, n_shards=3)
        assert _moved_fixes(diagnosis) >= 1
        results = _by_batch_size(diagnosis, mode)
        assert all(result == diagnosis.result for result in results.values()), mode
    # the golden values (tests/data/tide_official): AP50 64.20, Cls 22.25, Miss 8.52 in tidecv's summary
    tide = _by_batch_size(api.tide((gt, dt)), "tide")[1]
    assert (round(tide.ap50, 2), round(tide.main["Cls"], 2), round(tide.main["Miss"], 2)) == (64.20, 22.25, 8.52)


def test_any_batch_size_equals_tidecv_on_random_datasets(tmp_path):
    moved = 0
    for seed in range(0, 40, 3):
        gt, dt = random_coco(seed)
        if not any(not a.get("iscrowd") for a in gt["annotations"]):
            continue
        folder = tmp_path / str(seed)
        folder.mkdir()
        gt_path, dt_path = write_inputs(folder, gt, dt)
        want = tidecv_errors(json.loads(gt_path.read_text()), json.loads(dt_path.read_text()))
        for mode in ("tide", "coco"):
            diagnosis = api.tide((gt_path, dt_path), mode=mode, n_shards=1 + seed % 3)
            results = _by_batch_size(diagnosis, mode)
            assert len({json.dumps(r.as_dict()) for r in results.values()}) == 1, f"seed {seed} {mode}"
            moved += _moved_fixes(diagnosis)
            if mode == "tide":
                got = results[1].as_dict()
                assert got["ap50"] == pytest.approx(want["ap50"], abs=1e-9), f"seed {seed}"
                for kind in ("main", "special"):
                    assert got[kind] == pytest.approx(want[kind], abs=1e-9), f"seed {seed} {kind}"
                assert got["counts"] == want["counts"], f"seed {seed}"
    assert moved > 0  # the cases exercise fixes moving between batches
