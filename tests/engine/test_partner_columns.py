"""Which columns a match table keeps (issue 17, :func:`evalengine.engine.planner.match`): held in memory for AP
alone, the detections' table leaves out the partner columns (:data:`evalengine.schema.PARTNER_COLUMNS`), its other
columns and every number unchanged; a stored table keeps every column (its schema and ``protocol.json`` as before)
whatever the call asks; every reader of the partner columns gets them, the table matched again when it needs."""

import json

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from evalengine import schema
from evalengine.api import Store, evaluate_coco, ingest_coco
from evalengine.api.diagnosis import tide
from evalengine.engine.planner import match, matched
from evalengine.evaluation.detection import Evaluation
from evalengine.match.coco import CocoProtocol
from evalengine.store.paths import PROTOCOL_FILE, shard_file
from tests.generators import random_coco
from tests.helpers import write_inputs
from tests.shape_generators import random_keypoints, random_masks

PROTOCOLS = [CocoProtocol(), CocoProtocol(use_cats=False, max_dets=(1, 10, 1000)),
             CocoProtocol(iou_thresholds=(0.25, 0.5, 0.75), area_ranges=(("all", 0.0, 1e10), ("mid", 100.0, 5000.0))),
             CocoProtocol(zero_id_quirk=False)]
N_RANDOM = 16
RUN = "default"


def _dt(folder_evaluation, partners=True) -> pl.DataFrame:
    return folder_evaluation.dt_matches(partners).drop("shard").collect()


def _both(tmp_path, gt, dt, protocol, n_shards):
    """The same run held in memory, matched for AP alone, and in a store on disk: (memory evaluation, disk one)."""
    gt_path, dt_path = write_inputs(tmp_path, gt, dt)
    memory = ingest_coco(gt_path, dt_path, None, n_shards=n_shards, masks=protocol.iou_type == "segm")
    disk = ingest_coco(gt_path, dt_path, tmp_path / "store", n_shards=n_shards)
    slim = Evaluation(memory.layout, RUN, protocol, match(memory.layout, RUN, protocol, partners=False))
    return slim, Evaluation(disk.layout, RUN, protocol, match(disk.layout, RUN, protocol, partners=False))


def _assert_slim_then_widened(slim: Evaluation, disk: Evaluation) -> None:
    """``slim`` holds the table without the partner columns, equal to ``disk``'s other columns, and gives its
    numbers; read with them, it is matched again and equals ``disk``'s whole."""
    layout, folder, protocol = slim.layout, slim.matches_dir, slim.protocol
    assert layout.recorded(folder)["partners"] is False
    assert matched(folder, protocol, layout, partners=False) and not matched(folder, protocol, layout)
    full = _dt(disk)
    assert set(schema.PARTNER_COLUMNS) <= set(full.columns)
    assert_frame_equal(_dt(slim, partners=False), full.drop(schema.PARTNER_COLUMNS), check_exact=True)
    assert slim.stats() == disk.stats()
    assert_frame_equal(slim.precision_recall(), disk.precision_recall(), check_exact=True)
    assert_frame_equal(slim.per_image_counts(), disk.per_image_counts(), check_exact=True)
    assert "partners" in layout.recorded(folder)  # the numbers above did not widen it
    assert_frame_equal(_dt(slim), full, check_exact=True)  # a reader of the partners: matched again with them
    assert "partners" not in layout.recorded(folder) and matched(folder, protocol, layout)
    assert_frame_equal(slim.gt_matches().collect(), disk.gt_matches().collect(), check_exact=True)


@pytest.mark.parametrize("seed", range(N_RANDOM))
def test_random_box_sets(tmp_path, seed):
    _assert_slim_then_widened(*_both(tmp_path, *random_coco(seed), PROTOCOLS[seed % len(PROTOCOLS)], 1 + seed % 3))


@pytest.mark.parametrize("seed", range(4))
def test_random_masks_and_keypoints(tmp_path, seed):
    for name, generate in (("segm", random_masks), ("keypoints", random_keypoints)):
        (tmp_path / name).mkdir()
        _assert_slim_then_widened(*_both(tmp_path / name, *generate(seed), CocoProtocol(iou_type=name), 1 + seed % 2))


def test_a_stored_table_keeps_every_column(tmp_path):
    """Asked for AP alone, a store on disk still writes the whole table: the schema of
    :func:`~evalengine.schema.dt_matches_schema` in its order, and ``protocol.json`` as it always was."""
    protocol = CocoProtocol()
    _, disk = _both(tmp_path, *random_coco(4), protocol, 2)
    written = pl.read_parquet(shard_file(disk.matches_dir / "dt", 0))
    assert dict(written.schema) == schema.dt_matches_schema(len(protocol.area_ranges), len(protocol.iou_thresholds))
    recorded = json.loads((disk.matches_dir / PROTOCOL_FILE).read_text())
    assert recorded == {**json.loads(json.dumps(protocol.description())), "table_version": protocol.table_version}


def test_the_one_shot_keeps_a_table_for_ap_unless_asked(tmp_path):
    """``evaluate_coco`` held in memory matches for AP alone (the command's summary), with ``partners`` the whole
    table from the start; a kept store has every column either way."""
    gt, dt = write_inputs(tmp_path, *random_coco(9))
    slim = evaluate_coco(gt, dt, in_memory=True)
    whole = evaluate_coco(gt, dt, in_memory=True, partners=True)
    kept = evaluate_coco(gt, dt, store=tmp_path / "kept")
    assert slim.layout.recorded(slim.matches_dir)["partners"] is False
    assert "partners" not in whole.layout.recorded(whole.matches_dir)
    assert slim.stats() == whole.stats() == kept.stats()
    assert_frame_equal(_dt(whole), _dt(kept), check_exact=True)


def test_readers_of_a_table_written_out_without_partners(tmp_path):
    """A store in memory written out while its table had no partner columns (for a protocol that reads files): the
    TIDE table that reads the COCO one is matched on a whole copy, and equals the disk store's."""
    gt, dt = write_inputs(tmp_path, *random_coco(6))
    slim = evaluate_coco(gt, dt, in_memory=True)
    slim.layout.stored()  # the copy on disk holds the table as it is now: without the partners
    disk = ingest_coco(gt, dt, tmp_path / "store")
    for mode in ("coco", "tide"):
        got, want = tide(Store(slim.layout), mode=mode), tide(disk, mode=mode)
        assert got.result.as_dict() == want.result.as_dict()
        assert_frame_equal(got.dt_matches().drop("shard").collect(), want.dt_matches().drop("shard").collect(),
                           check_exact=True)
