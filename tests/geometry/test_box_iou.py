"""Box IoU is bit-for-bit pycocotools' (``maskApi.c`` ``bbIou``), crowd and degenerate boxes included."""

import numpy as np
from pycocotools import mask as mask_utils

from evalengine.geometry.box_iou import coco_box_iou


def test_box_iou_equals_pycocotools_bit_for_bit():
    rng = np.random.default_rng(1)
    dt = np.round(rng.random((120, 4)) * 50, 2)
    gt = np.round(rng.random((80, 4)) * 50, 2)
    gt[:5, 2] = 0.0
    dt[:3, 3] = 0.0
    crowd = rng.random(80) < 0.2
    want = mask_utils.iou(dt.tolist(), gt.tolist(), crowd.astype(np.uint8).tolist())
    got = np.array([[coco_box_iou(*d, *g, c) for g, c in zip(gt, crowd)] for d in dt])
    np.testing.assert_array_equal(got, want)
