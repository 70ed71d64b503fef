"""evalengine: columnar, distributed evaluation of object detectors, proposals and segmentations.

``store = evalengine.open(path)``; ``evaluation = store.evaluate(CocoProtocol())``; metrics come back
as Polars frames (``evaluation.summary()``, ``.per_class()``, ``.ap_table()``, ``.per_image_counts()``).
"""

from evalengine import kernel_cache

__version__ = "0.1.0"

kernel_cache.install()  # before any kernel is defined: numba's cache keyed on the sources a kernel can call

__all__ = ["CocoProtocol", "Evaluation", "ProposalEvaluation", "ProposalOrder", "ProposalProtocol", "Store",
           "StreamingEvaluator",
           "VocEvaluation", "VocProtocol", "evaluate_coco", "evaluate_voc", "ingest_coco", "ingest_gt",
           "ingest_proposals", "ingest_voc", "open", "__version__"]


def __getattr__(name: str):
    """The API's names, imported on first use (PEP 562): the command imports the libraries inside its error
    boundary, so that a Ctrl-C while they load ends it with one line too."""
    if name in __all__:
        from evalengine import api

        return getattr(api, name)
    raise AttributeError(f"module 'evalengine' has no attribute {name!r}")
