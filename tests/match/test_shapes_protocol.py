"""The segm and keypoints parameters of the COCO protocol: pycocotools' defaults per iou type, distinct match keys,
the keypoint sigmas and their refusals."""

import dataclasses

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
