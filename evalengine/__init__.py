"""evalengine: columnar, distributed evaluation of object detectors, proposals and segmentations.

``store = evalengine.open(path)``; ``evaluation = store.evaluate(CocoProtocol())``; metrics come back
as Polars frames (``evaluation.summary()``, ``.per_class()``, ``.ap_table()``, ``.per_image_counts()``).
"""

__version__ = "0.1.0"

from evalengine.api import (  # noqa: E402
    Evaluation, Store, evaluate_coco, ingest_coco, ingest_gt, ingest_proposals, open,
)
from evalengine.match.proposals import ProposalProtocol  # noqa: E402
from evalengine.match.protocol import CocoProtocol  # noqa: E402
from evalengine.proposal_evaluation import ProposalEvaluation  # noqa: E402
from evalengine.store.ranking import ProposalOrder  # noqa: E402

__all__ = ["CocoProtocol", "Evaluation", "ProposalEvaluation", "ProposalOrder", "ProposalProtocol", "Store",
           "evaluate_coco", "ingest_coco", "ingest_gt", "ingest_proposals", "open", "__version__"]
