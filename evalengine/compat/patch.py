"""``patch_pycocotools()``: pycocotools' ``COCO``, ``COCOeval`` and ``Params`` replaced by the engine's, reversibly.

The classes are replaced in ``pycocotools.coco`` / ``pycocotools.cocoeval`` and wherever an imported module holds
them under a name of its own (``from pycocotools.cocoeval import COCOeval`` done before the patch, as torchvision's
and detectron2's evaluators do); ``undo()`` (or leaving the ``with`` block) puts every one back. Without pycocotools
installed, the two modules are provided (``pycocotools.mask`` is not)."""

import importlib
import sys
import types

from evalengine.compat.coco import COCO
from evalengine.compat.cocoeval import COCOeval, Params

_OURS = {"coco": {"COCO": COCO}, "cocoeval": {"COCOeval": COCOeval, "Params": Params}}


class PycocotoolsPatch:
    """The applied patch: ``undo()`` restores what it replaced; also a context manager."""

    def __init__(self):
        self._restore = []  # (module, name, original) in the order replaced
        self._added = []  # module names put into sys.modules
        originals = {}
        for module_name, classes in _OURS.items():
            full = f"pycocotools.{module_name}"
            try:
                module = importlib.import_module(full)
            except ImportError:
                module = self._provide(full)
            for name, ours in classes.items():
                original = getattr(module, name, None)
                if original is not None and original is not ours:
                    originals[id(original)] = ours
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict) or not isinstance(module, types.ModuleType):
                continue
            for name, value in list(namespace.items()):
                if id(value) in originals:  # (no attribute of a module's values is read: some warn when asked)
                    self._restore.append((module, name, value))
                    setattr(module, name, originals[id(value)])
        for module_name, classes in _OURS.items():  # a module provided above, or a name pycocotools lacks
            module = sys.modules[f"pycocotools.{module_name}"]
            for name, ours in classes.items():
                if getattr(module, name, None) is not ours:
                    self._restore.append((module, name, getattr(module, name, None)))
                    setattr(module, name, ours)

    def _provide(self, full: str) -> types.ModuleType:
        if "pycocotools" not in sys.modules:
            package = types.ModuleType("pycocotools")
            package.__path__ = []
            sys.modules["pycocotools"] = package
            self._added.append("pycocotools")
        module = types.ModuleType(full)
        sys.modules[full] = module
        setattr(sys.modules["pycocotools"], full.rsplit(".", 1)[1], module)
        self._added.append(full)
        return module

    def undo(self) -> None:
        for module, name, original in reversed(self._restore):
            if original is None:
                module.__dict__.pop(name, None)
            else:
                setattr(module, name, original)
        self._restore = []
        for name in reversed(self._added):
            sys.modules.pop(name, None)
        self._added = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.undo()
        return False


def patch_pycocotools() -> PycocotoolsPatch:
    """Run pycocotools' users on the engine until ``undo()`` (or the end of ``with patch_pycocotools():``)."""
    return PycocotoolsPatch()
