"""evalengine: columnar, distributed evaluation of object detectors, proposals and segmentations.

``store = evalengine.open(path)``; ``evaluation = store.evaluate(CocoProtocol())``; metrics come back
as Polars frames (``evaluation.summary()``, ``.per_class()``, ``.ap_table()``, ``.per_image_counts()``).
"""

__version__ = "0.1.0"

from evalengine.api import (  # noqa: E402
    CocoProtocol, Evaluation, ProposalEvaluation, ProposalOrder, ProposalProtocol, Store, evaluate_coco, ingest_coco,
    ingest_gt, ingest_proposals, open,
)

__all__ = ["CocoProtocol", "Evaluation", "ProposalEvaluation", "ProposalOrder", "ProposalProtocol", "Store",
           "evaluate_coco", "ingest_coco", "ingest_gt", "ingest_proposals", "open", "__version__"]
