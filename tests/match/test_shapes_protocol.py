"""The segm and keypoints parameters of the COCO protocol: pycocotools' defaults per iou type, distinct match keys,
the keypoint sigmas and their refusals."""

import dataclasses

import numpy as np

import pytest

from evalengine.errors import ProtocolError
from evalengine.geometry.oks import COCO_PERSON_SIGMAS
from evalengine.match.coco import COCO_AREA_RANGES, COCO_MAX_DETS, KEYPOINT_AREA_RANGES, CocoProtocol


def test_defaults_follow_the_iou_type():
    assert CocoProtocol(iou_type="segm").max_dets == COCO_MAX_DETS
    assert CocoProtocol(iou_type="segm").area_ranges == COCO_AREA_RANGES
    keypoints = CocoProtocol(iou_type="keypoints")
    assert keypoints.max_dets == (20,) and keypoints.area_ranges == KEYPOINT_AREA_RANGES
    assert keypoints.kpt_oks_sigmas == ((None, COCO_PERSON_SIGMAS),)
    assert CocoProtocol(iou_type="keypoints", max_dets=(1, 20)).max_dets == (1, 20)


def test_match_keys_differ_per_iou_type_and_sigmas():
    keys = {CocoProtocol().match_key(), CocoProtocol(iou_type="segm").match_key(),
            CocoProtocol(iou_type="keypoints").match_key(), CocoProtocol(iou_type="boundary").match_key(),
            CocoProtocol(iou_type="keypoints", kpt_oks_sigmas=[0.1] * 17).match_key(),
            CocoProtocol(iou_type="keypoints", kpt_oks_sigmas={3: [0.1] * 4}).match_key(),
            CocoProtocol(iou_type="keypoints", use_cats=False, kpt_use_cats_quirk=False).match_key()}
    assert len(keys) == 7 and CocoProtocol().match_key() == "coco"
    assert "kpt_oks_sigmas" not in CocoProtocol(iou_type="segm").match_params()


def test_sigmas_are_normalised_and_survive_replace():
    protocol = CocoProtocol(iou_type="keypoints", kpt_oks_sigmas={"7": [0.1, 0.2], 3: (1, 2, 3)})
    assert protocol.kpt_oks_sigmas == ((None, COCO_PERSON_SIGMAS), (3, (1.0, 2.0, 3.0)), (7, (0.1, 0.2)))
    assert dataclasses.replace(protocol, iou_thresholds=(0.5,)).kpt_oks_sigmas == protocol.kpt_oks_sigmas


@pytest.mark.parametrize("kwargs, message", [
    ({"iou_type": "keypoints", "kpt_oks_sigmas": [0.1, 0.0]}, "kpt_oks_sigmas: 0.0 is not a positive number"),
    ({"iou_type": "keypoints", "kpt_oks_sigmas": []}, "kpt_oks_sigmas: at least one sigma is needed"),
    ({"iou_type": "keypoints", "kpt_oks_sigmas": {"a": [0.1]}}, "kpt_oks_sigmas: a category id is an integer"),
    ({"iou_type": "keypoints", "kpt_oks_sigmas": {1: "abc"}}, "kpt_oks_sigmas[1]: expected a list"),
    ({"iou_type": "segm", "kpt_oks_sigmas": [0.1]}, "only iou_type 'keypoints' uses them"),
    ({"iou_type": "keypoints", "use_cats": False, "kpt_oks_sigmas": {1: [0.1]}}, "with use_cats off"),
    ({"iou_type": "polygon"}, "iou_type must be one of ('bbox', 'segm', 'keypoints', 'boundary')"),
])
def test_bad_parameters_are_refused(kwargs, message):
    with pytest.raises(ProtocolError) as info:
        CocoProtocol(**kwargs)
    assert message in str(info.value)


def test_only_masks_that_share_a_group_are_decoded():
    """``_paired``: the rows of a side in a group where the other side has rows (group k: ``starts[k]``, ``lengths[k]``
    rows); the others are never compared, so their masks are not decoded."""
    from evalengine.match.shapes import _paired

    starts, lengths, other = np.array([0, 2, 2, 5]), np.array([2, 0, 3, 1]), np.array([1, 4, 0, 2])
    assert _paired(6, starts, lengths, other).tolist() == [True, True, False, False, False, True]
    assert _paired(0, starts[:0], lengths[:0], other[:0]).tolist() == []


def test_a_store_of_run_lengths_is_refused_with_what_to_do(tmp_path):
    """Stores written before masks were kept as compressed strings hold ``mask_counts``: a located error says to ingest
    again (bbox evaluation of such a store is unaffected)."""
    import shutil
    import warnings

    import polars as pl

    import evalengine
    from evalengine.errors import StoreError
    from evalengine.io import rle
    from tests.conftest import DATA, PACKAGE_DATA

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = evalengine.ingest_coco(PACKAGE_DATA / "instances_val2014_100.json", DATA / "cocoapi_fakesegm100_dt.json",
                                       tmp_path / "store", n_shards=2)
    boxes = store.evaluate(CocoProtocol()).summary()
    shutil.rmtree(tmp_path / "store" / "matches")
    for part in sorted((tmp_path / "store" / "gt").rglob("*.parquet")):  # as the earlier version wrote them
        frame = pl.read_parquet(part)
        counts, offsets = rle.decode_strings(frame.get_column("mask_rle").to_arrow())
        runs = pl.Series("mask_counts", np.split(counts, offsets[1:-1]) if frame.height else [],
                         dtype=pl.List(pl.UInt32))
        frame.drop("mask_rle").with_columns(runs).write_parquet(part)
    with pytest.raises(StoreError, match=r"gt: masks stored as run lengths \('mask_counts'\) by an earlier evalengine.*"
                                         r"ingest the files again"):
        store.evaluate(CocoProtocol(iou_type="segm"))
    assert store.evaluate(CocoProtocol()).summary().equals(boxes)
