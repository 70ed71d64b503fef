"""Protocol parameters that pycocotools would take but that mean nothing are refused, naming the parameter and value;
the ones it gives a meaning to are kept as it does."""

import math

import numpy as np
import pytest

from evalengine.errors import ProtocolError
from evalengine.match.coco import COCO_AREA_RANGES, CocoProtocol
from evalengine.match.proposals import ProposalProtocol
from evalengine.match.repeatability import RepeatabilityProtocol


@pytest.mark.parametrize("params, message", [
    (dict(iou_thresholds=(math.nan,)), "iou_thresholds: nan is not a number"),
    (dict(iou_thresholds=(0.5, 1.5)), "iou_thresholds: 1.5 is not in (0, 1]"),
    (dict(iou_thresholds=(0.0, 0.5)), "iou_thresholds: 0.0 is not in (0, 1]"),
    (dict(iou_thresholds=(-0.5,)), "iou_thresholds: -0.5 is not in (0, 1]"),
    (dict(iou_thresholds=(math.inf,)), "iou_thresholds: inf is not in (0, 1]"),
    (dict(iou_thresholds=("0.5",)), "iou_thresholds: '0.5' is not a number"),
    (dict(iou_thresholds=(True,)), "iou_thresholds: True is not a number"),
    (dict(iou_thresholds=0.5), "iou_thresholds: expected a list, got 0.5"),
    (dict(iou_thresholds=(0.5, 0.5)), "iou_thresholds must be increasing, without repeats: got [0.5, 0.5]"),
    (dict(iou_thresholds=(0.75, 0.5)), "iou_thresholds must be increasing, without repeats: got [0.75, 0.5]"),
    (dict(iou_thresholds=()), "iou_thresholds: between 1 and 64 thresholds are supported, got 0"),
    (dict(recall_thresholds=(0.0, 1.01)), "recall_thresholds: 1.01 is not in [0, 1]"),
    (dict(recall_thresholds=(0.5, 0.2)), "recall_thresholds must be increasing, without repeats: got [0.5, 0.2]"),
    (dict(area_ranges=(("all", 100.0, 0.0),)), "area_ranges: 'all' has lo 100.0 > hi 0.0"),
    (dict(area_ranges=(("all", math.nan, 1.0),)), "area_ranges 'all': nan is not a number"),
    (dict(area_ranges=(("all", 0, 1e10), ("all", 0, 10))), "area_ranges: the label 'all' is used twice"),
    (dict(area_ranges=(("", 0, 1),)), "area_ranges: a label must be a non-empty string, got ''"),
    (dict(area_ranges=(("all", 0),)), "area_ranges: expected (label, lo, hi) triples, got ('all', 0)"),
    (dict(area_ranges=()), "area_ranges: between 1 and 64 ranges are supported, got 0"),
    (dict(max_dets=(0,)), "max_dets: positive integers are needed, got 0 in [0]"),
    (dict(max_dets=(1, 2.5)), "max_dets: positive integers are needed, got 2.5 in [1, 2.5]"),
    (dict(max_dets=(10, 10)), "max_dets: distinct positive integers are needed, got [10, 10]"),
    (dict(max_dets=()), "max_dets: distinct positive integers are needed, got []"),
])
def test_meaningless_coco_parameters_are_refused(params, message):
    with pytest.raises(ProtocolError) as error:
        CocoProtocol(**params)
    assert str(error.value) == message


def test_meaningful_coco_parameters_are_kept():
    """Numbers of any type, an infinite upper area bound, an IoU threshold of 1, caps in pycocotools' order (the last
    is the matching cap) and integral floats are fine."""
    protocol = CocoProtocol(iou_thresholds=np.array([0.5, 1.0]), area_ranges=[("all", 0, math.inf), ("one", 4, 4)],
                            max_dets=(100, 1, 10.0), recall_thresholds=[0, 1])
    assert protocol.iou_thresholds == (0.5, 1.0) and protocol.max_dets == (100, 1, 10)
    assert protocol.max_det_cap == 10 and protocol.area_ranges == (("all", 0.0, math.inf), ("one", 4.0, 4.0))
    assert CocoProtocol().area_ranges == tuple((label, float(lo), float(hi)) for label, lo, hi in COCO_AREA_RANGES)


@pytest.mark.parametrize("protocol, message", [
    (lambda: ProposalProtocol(budgets=(0, 10)), "budgets: positive integers are needed, got 0 in [0, 10]"),
    (lambda: ProposalProtocol(budgets=(10.5,)), "budgets: positive integers are needed, got 10.5 in [10.5]"),
    (lambda: ProposalProtocol(budgets=()), "budgets: positive integers are needed, got []"),
    (lambda: RepeatabilityProtocol(top_n=0), "top_n: positive integers are needed, got 0 in [0]"),
    (lambda: RepeatabilityProtocol(top_n=2.5), "top_n: positive integers are needed, got 2.5 in [2.5]"),
    (lambda: RepeatabilityProtocol(reference=""), "reference: the name of a proposal run is needed, got ''"),
])
def test_bad_proposal_parameters_are_refused(protocol, message):
    with pytest.raises(ProtocolError) as error:
        protocol()
    assert str(error.value) == message


def test_budgets_are_sorted_and_distinct():
    """As documented: the budgets are a set of sizes, in increasing order."""
    assert ProposalProtocol(budgets=(100, 1, 10, 10.0)).budgets == (1, 10, 100)
    assert RepeatabilityProtocol(top_n=10.0).top_n == 10
