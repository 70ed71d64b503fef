"""evalengine: columnar, distributed evaluation of object detectors, proposals and segmentations.

``store = evalengine.open(path)``; ``evaluation = store.evaluate(CocoProtocol())``; metrics come back
as Polars frames (``evaluation.summary()``, ``.per_class()``, ``.ap_table()``, ``.per_image_counts()``).
"""

__version__ = "0.1.0"

from evalengine.api import Evaluation, Store, evaluate_coco, ingest_coco, open  # noqa: E402
from evalengine.match.protocol import CocoProtocol  # noqa: E402

__all__ = ["CocoProtocol", "Evaluation", "Store", "evaluate_coco", "ingest_coco", "open", "__version__"]
