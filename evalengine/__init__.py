"""evalengine: columnar, distributed evaluation of object detectors, proposals and segmentations."""

__version__ = "0.1.0"
