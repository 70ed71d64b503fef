"""Matching protocols on one contract (:mod:`evalengine.match.protocol`): parameters, key, sides, shard task.

Similarity comes from :mod:`evalengine.geometry`; the assignment kernels (``greedy_score``: COCO's greedy by
detection score; ``greedy_iou``: Hosang's greedy by largest IoU) are shared by the protocols that need them.

The protocol classes and :data:`PROTOCOLS` are imported on first use (PEP 562): importing one protocol's module
(``evalengine.match.coco``) runs this file first, and a command that matches COCO should not load every family.
"""

import importlib

# every protocol family, by class and module: its match tables' SQL views come from these (see evalengine.sql)
_PROTOCOL_MODULES = {
    "CocoProtocol": "coco", "ProposalProtocol": "proposals", "RepeatabilityProtocol": "repeatability",
    "VocProtocol": "voc", "PairsProtocol": "pairs", "TideProtocol": "tide", "AnalyzeProtocol": "analyze",
    "BorjiProtocol": "borji", "ConfusionProtocol": "confusion", "LvisProtocol": "lvis",
    "PartitionProtocol": "partitions", "OpenImagesProtocol": "openimages",
    "PartitionBoundaryProtocol": "partition_boundaries",
}

__all__ = ["PROTOCOLS", *_PROTOCOL_MODULES]


def __getattr__(name: str):
    if name == "PROTOCOLS":
        return tuple(__getattr__(protocol) for protocol in _PROTOCOL_MODULES)
    if name in _PROTOCOL_MODULES:
        return getattr(importlib.import_module(f"evalengine.match.{_PROTOCOL_MODULES[name]}"), name)
    raise AttributeError(f"module 'evalengine.match' has no attribute {name!r}")
