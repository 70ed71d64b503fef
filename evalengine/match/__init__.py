"""Matching protocols on one contract (:mod:`evalengine.match.protocol`): parameters, key, sides, shard task.

Similarity comes from :mod:`evalengine.geometry`; the assignment kernels (``greedy_score``: COCO's greedy by
detection score; ``greedy_iou``: Hosang's greedy by largest IoU) are shared by the protocols that need them.
"""

from evalengine.match.analyze import AnalyzeProtocol
from evalengine.match.borji import BorjiProtocol
from evalengine.match.coco import CocoProtocol
from evalengine.match.lvis import LvisProtocol
from evalengine.match.confusion import ConfusionProtocol
from evalengine.match.pairs import PairsProtocol
from evalengine.match.partitions import PartitionProtocol
from evalengine.match.partition_boundaries import PartitionBoundaryProtocol
from evalengine.match.proposals import ProposalProtocol
from evalengine.match.repeatability import RepeatabilityProtocol
from evalengine.match.tide import TideProtocol
from evalengine.match.voc import VocProtocol
from evalengine.match.openimages import OpenImagesProtocol

# every protocol family: its match tables' SQL views come from these (see evalengine.sql)
PROTOCOLS = (CocoProtocol, ProposalProtocol, RepeatabilityProtocol, VocProtocol, PairsProtocol, TideProtocol,
             AnalyzeProtocol, BorjiProtocol, ConfusionProtocol, LvisProtocol, PartitionProtocol, OpenImagesProtocol,
             PartitionBoundaryProtocol)
