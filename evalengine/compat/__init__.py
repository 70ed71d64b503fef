"""A pycocotools drop-in on the engine: ``from evalengine.compat import COCO, COCOeval``, or
:func:`patch_pycocotools` so that code importing pycocotools (torchvision's ``CocoEvaluator``, detectron2,
mmdetection, torchmetrics' ``MeanAveragePrecision``) runs on it unchanged."""

from evalengine.compat.coco import COCO
from evalengine.compat.cocoeval import COCOeval, Params
from evalengine.compat.patch import patch_pycocotools

__all__ = ["COCO", "COCOeval", "Params", "patch_pycocotools"]
