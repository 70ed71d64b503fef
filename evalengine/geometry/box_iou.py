"""Box IoU in the COCO convention (continuous ``xywh``, no +1).

Bit-for-bit the arithmetic of pycocotools ``maskApi.c`` ``bbIou``: the intersection width is
``min(x_d + w_d, x_g + w_g) - max(x_d, x_g)``, a non-positive width or height gives 0, and for a
crowd ground truth the union is the detection's own area (intersection over detection area).
"""

import numba


@numba.njit(cache=True, nogil=True, inline="always")
def coco_box_iou(dx, dy, dw, dh, gx, gy, gw, gh, crowd):
    """IoU of one detection and one ground-truth box (pycocotools ``bbIou``)."""
    w = min(dw + dx, gw + gx) - max(dx, gx)
    if w <= 0.0:
        return 0.0
    h = min(dh + dy, gh + gy) - max(dy, gy)
    if h <= 0.0:
        return 0.0
    inter = w * h
    det_area = dw * dh
    union = det_area if crowd else det_area + gw * gh - inter
    return inter / union
