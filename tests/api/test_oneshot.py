"""The one-shot path held in memory (``evaluate_coco`` without a store: :mod:`evalengine.store.memory`) gives the
match table and every number of the path through a store on disk, bit for bit: every golden COCO case (bbox under
five parameter sets, segm, keypoints) and random box, mask and keypoint sets, on one and several shards."""

import pytest
from polars.testing import assert_frame_equal

from evalengine.api import evaluate_coco
from evalengine.errors import InputError, ZeroIdWarning
from evalengine.match.coco import CocoProtocol
from evalengine.store.memory import MemoryLayout
from tests.generators import random_coco
from tests.helpers import write_inputs
from tests.metrics.test_golden_coco import CASES, RUNS
from tests.metrics.test_golden_shapes import KEYPOINTS, SEGM_CASES
from tests.shape_generators import random_keypoints, random_masks

N_RANDOM = 40


def _assert_same(gt, dt, protocol, n_shards):
    """The in-memory and the on-disk evaluation give equal numbers (``==``, not close), the first from its table
    matched for AP alone, and hold equal match tables (the first matched again with the partner columns)."""
    memory = evaluate_coco(gt, dt, protocol, n_shards=n_shards, in_memory=True)
    disk = evaluate_coco(gt, dt, protocol, n_shards=n_shards, in_memory=False)
    assert isinstance(memory.layout, MemoryLayout) and disk.layout.persistent
    assert memory.stats() == disk.stats()
    assert_frame_equal(memory.precision_recall(), disk.precision_recall(), check_exact=True)
    assert_frame_equal(memory.per_class(), disk.per_class(), check_exact=True)
    assert_frame_equal(memory.per_image_counts(), disk.per_image_counts(), check_exact=True)
    assert memory.layout.recorded(memory.matches_dir)["partners"] is False  # the numbers came from the AP table
    for side in ("dt_matches", "gt_matches"):
        assert_frame_equal(getattr(memory, side)().collect(), getattr(disk, side)().collect(), check_exact=True)
    return memory


@pytest.mark.parametrize("n_shards", [1, 3])
@pytest.mark.parametrize("run", ["default", "iouThrs_0.25_0.5_0.75", "useCats_0_maxDets_1_10_1000"])
@pytest.mark.parametrize("case", list(CASES))
def test_golden_bbox_cases(case, run, n_shards):
    _assert_same(*CASES[case], RUNS[run], n_shards)


@pytest.mark.parametrize("case", list(SEGM_CASES))
def test_golden_segm_cases(case):
    _assert_same(*SEGM_CASES[case], CocoProtocol(iou_type="segm"), 3)


def test_golden_keypoint_case():
    _assert_same(*KEYPOINTS, CocoProtocol(iou_type="keypoints"), 2)


@pytest.mark.parametrize("seed", range(N_RANDOM))
def test_random_box_sets(tmp_path, seed):
    gt, dt = write_inputs(tmp_path, *random_coco(seed))
    _assert_same(gt, dt, CocoProtocol(), 1 + seed % 3)


@pytest.mark.parametrize("seed", range(N_RANDOM // 2))
def test_random_mask_sets(tmp_path, seed):
    gt, dt = write_inputs(tmp_path, *random_masks(seed))
    _assert_same(gt, dt, CocoProtocol(iou_type="segm"), 1 + seed % 2)


@pytest.mark.parametrize("seed", range(N_RANDOM // 2))
def test_random_keypoint_sets(tmp_path, seed):
    gt, dt = write_inputs(tmp_path, *random_keypoints(seed))
    _assert_same(gt, dt, CocoProtocol(iou_type="keypoints"), 1 + seed % 2)


def test_objects_in_memory_and_other_metrics(tmp_path):
    """Results given as objects; LRP, operating points, thresholds and the detections they keep, and the confusion
    matrix (matched on a store written out once, with the COCO table held in memory) equal the disk path's."""
    gt, dt = random_coco(7)
    memory = evaluate_coco(gt, dt, in_memory=True)
    disk = evaluate_coco(gt, dt, in_memory=False)
    assert memory.stats() == disk.stats()
    assert_frame_equal(memory.operating_points(), disk.operating_points(), check_exact=True)
    thresholds = memory.thresholds()
    assert_frame_equal(thresholds, disk.thresholds(), check_exact=True)
    order = ["det_id"]
    assert_frame_equal(memory.kept_detections(thresholds).collect().sort(order),
                       disk.kept_detections(thresholds).collect().sort(order), check_exact=True)
    assert_frame_equal(memory.lrp().table, disk.lrp().table, check_exact=True)
    assert_frame_equal(memory.confusion().matrix(), disk.confusion().matrix(), check_exact=True)


def test_a_large_run_goes_through_a_temporary_store(tmp_path, monkeypatch):
    """Above IN_MEMORY_DETECTIONS (or on a scheduler of other processes) the one-shot uses a store on disk."""
    from evalengine.api import coco

    gt, dt = write_inputs(tmp_path, *random_coco(3))
    monkeypatch.setattr(coco, "IN_MEMORY_DETECTIONS", 0)
    assert evaluate_coco(gt, dt).layout.persistent
    monkeypatch.undo()
    assert not evaluate_coco(gt, dt).layout.persistent
    assert evaluate_coco(gt, dt, scheduler="processes", workers=1).layout.persistent


def test_a_temporary_store_keeps_no_sql_tables(tmp_path):
    """The tables kept for the SQL views (AP, curve counts, OpenImages' order) are written into a kept store only: a
    one-shot's temporary folder goes with its evaluation; a store the user keeps has them, the same numbers."""
    from evalengine.api import evaluate_lvis
    from evalengine.store.paths import ACCUMULATION_FILE, CURVE_FILE
    from tests.lvis_reference import random_lvis

    gt, dt = write_inputs(tmp_path, *random_coco(5))
    temporary = evaluate_coco(gt, dt, in_memory=False)
    kept = evaluate_coco(gt, dt, store=tmp_path / "store")
    assert temporary.layout.persistent and temporary.stats() == kept.stats()
    assert not any((temporary.matches_dir / name).exists() for name in (ACCUMULATION_FILE, CURVE_FILE))
    assert all((kept.matches_dir / name).exists() for name in (ACCUMULATION_FILE, CURVE_FILE))
    (tmp_path / "lvis").mkdir()
    lvis_gt, lvis_dt = write_inputs(tmp_path / "lvis", *random_lvis(5))
    temporary = evaluate_lvis(lvis_gt, lvis_dt, in_memory=False)
    kept = evaluate_lvis(lvis_gt, lvis_dt, store=tmp_path / "lvis_store")
    assert temporary.results() == kept.results()
    assert not (temporary.matches_dir / ACCUMULATION_FILE).exists() and (kept.matches_dir / ACCUMULATION_FILE).exists()


def test_bad_input_fails_alike(tmp_path):
    """A located error is the same whichever path reads the run."""
    gt, dt = random_coco(1)
    dt = [*dt, {**dt[0], "image_id": 10_000}]
    messages = []
    for in_memory in (True, False):
        with pytest.raises(InputError) as raised:
            evaluate_coco(gt, dt, in_memory=in_memory)
        messages.append(str(raised.value))
    assert messages[0] == messages[1] and "10000" in messages[0]


def test_memory_store_reads_like_a_store():
    """Its tables read as a store's: images with their shard, the runs table, the hive columns of sharded tables."""
    gt, dt = random_coco(5)
    memory = evaluate_coco(gt, dt, n_shards=2, in_memory=True)
    disk = evaluate_coco(gt, dt, n_shards=2, in_memory=False)
    for table in ("images", "categories"):
        assert_frame_equal(memory.layout.read(table), disk.layout.read(table), check_exact=True)
    assert memory.layout.read("runs").select("run", "n_detections").rows() == [("default", len(dt))]
    assert_frame_equal(memory.layout.scan_gt().collect(), disk.layout.scan_gt().collect(), check_exact=True)
    assert_frame_equal(memory.dt_matches().collect(), disk.dt_matches().collect(), check_exact=True)


def test_ground_truth_kept_while_the_file_is_the_same(tmp_path):
    """A second evaluation against the same ground-truth file reuses its parse, and gives its warnings again; a
    rewritten file is read again."""
    from evalengine.api.coco import read_gt

    gt, dt = random_coco(2)
    gt["annotations"][0]["id"] = 0  # pycocotools' zero-id quirk: a warning
    gt_file, dt_file = write_inputs(tmp_path, gt, dt)
    with pytest.warns(ZeroIdWarning):
        first = read_gt(gt_file)
    with pytest.warns(ZeroIdWarning):
        assert read_gt(gt_file) is first
    with pytest.warns(ZeroIdWarning):
        stats = evaluate_coco(gt_file, dt_file).stats()
    gt["annotations"] = gt["annotations"][1:]
    write_inputs(tmp_path, gt, dt)
    assert read_gt(gt_file) is not first
    assert evaluate_coco(gt_file, dt_file, in_memory=False).stats() == evaluate_coco(gt_file, dt_file).stats()
    assert stats is not None


def test_a_confusion_of_files_outlives_its_evaluation(tmp_path):
    """``confusion((gt, dt))`` keeps the store written out for its pairs while the result lives (the one-shot's
    evaluation is gone by then)."""
    import gc

    from evalengine.api import confusion, ingest_coco

    gt, dt = write_inputs(tmp_path, *random_coco(11))
    result = confusion((gt, dt), score_threshold=0.1)
    gc.collect()
    stored = confusion(ingest_coco(gt, dt, tmp_path / "store"), score_threshold=0.1)
    assert_frame_equal(result.matrix(), stored.matrix(), check_exact=True)
