"""numba's kernel cache keyed on the sources a kernel can call, not on its own file alone.

numba (``cache=True``) keys a cached kernel on a hash of the file that defines it: a kernel that calls an njit
function of another module keeps the machine code compiled from that module's old text after it changed (an
editable checkout after ``git pull``: a stale ``parse_results`` silently refused every compressed RLE). Here a
kernel's stamp is numba's own plus a digest of the sources of its layer and every layer below it (DESIGN.md's
order, enforced by ``tests/test_layout.py``: a kernel can only call down), built from the files' size and
modification time (``os.stat``, no file read; ~1 ms for the package, once per layer and process). A change there
makes the index stale, so numba compiles the kernel again and overwrites its files, where they were.

:func:`install` (called by ``evalengine/__init__.py``, before any kernel module is imported) registers the
locators as soon as ``numba.core.caching`` is imported, so that importing evalengine does not import numba.
"""

import functools
import importlib.machinery
import os
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# the package's top-level modules and packages by layer, lowest first (tests/test_layout.LAYERS up to metrics, where
# the kernels are); a kernel in a module of none of them is stamped with every layer
KERNEL_LAYERS = (("errors", "arrow", "schema", "progress", "numeric", "kernel_cache", "kernel_loading"),
                 ("io", "baselines"), ("store",),
                 ("geometry",), ("match",), ("engine",), ("metrics",))
_WRITABLE = set()  # cache folders found writable in this process
_ROOTS = {}  # resolved package folder -> its layers (evalengine's; a test registers a package of its own)
CACHING = "numba.core.caching"


def install(root: Path = PACKAGE, layers: tuple = KERNEL_LAYERS) -> None:
    """Stamp the kernels defined under ``root`` with the digest of their layer and the ones below (``layers``:
    top-level names of modules or packages under ``root``, lowest layer first)."""
    _ROOTS[str(Path(root).resolve())] = tuple(layers)
    _kernel_layers.cache_clear()
    caching = sys.modules.get(CACHING)
    if caching is not None:
        _register(caching)
    elif not any(isinstance(finder, _AfterCaching) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterCaching())


@functools.lru_cache(maxsize=None)
def layer_digest(root: str, layers: tuple, top: int) -> str:
    """Digest of the names, sizes and modification times (ns) of the ``.py`` files of ``layers[:top + 1]``."""
    import hashlib  # numba has imported it: importing evalengine alone does not

    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(n for layer in layers[:top + 1] for n in layer):
        digest.update(_name_digest(root, name))
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def _name_digest(root: str, name: str) -> bytes:
    return "".join(f"{os.path.relpath(path, root)}\0{size}\0{mtime}\n"
                   for path, size, mtime in _sources(os.path.join(root, name))).encode()


def _sources(path: str):
    """``(path, size, mtime_ns)`` of the module ``path.py``, or of every ``.py`` file under the package ``path``."""
    if os.path.isfile(path + ".py"):
        stat = os.stat(path + ".py")
        yield path + ".py", stat.st_size, stat.st_mtime_ns
    elif os.path.isdir(path):
        yield from _folder_sources(path)


def _folder_sources(folder: str):
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_dir() and entry.name != "__pycache__":
            yield from _folder_sources(entry.path)
        elif entry.name.endswith(".py") and entry.is_file():
            stat = entry.stat()
            yield entry.path, stat.st_size, stat.st_mtime_ns


def kernel_stamp(py_file: str):
    """The digest of the layers a kernel of ``py_file`` can call, or None when the file is in no registered root."""
    found = _kernel_layers(py_file)
    return None if found is None else layer_digest(*found)


@functools.lru_cache(maxsize=None)
def _kernel_layers(py_file: str):
    """``(root, layers, top)`` of ``py_file``, or None (once per file and process: numba asks three times for each of
    the ~140 kernels a command imports)."""
    path = os.path.realpath(py_file)
    for root, layers in _ROOTS.items():
        if path.startswith(root + os.sep):
            top_name = os.path.relpath(path, root).split(os.sep)[0].removesuffix(".py")
            return root, layers, next((i for i, layer in enumerate(layers) if top_name in layer), len(layers) - 1)
    return None


def _register(caching) -> None:
    """Put a stamped variant of each of numba's source-file locators (``NUMBA_CACHE_DIR``, beside the module, the
    user's cache folder) before it, once; numba's own handle every file outside the registered roots."""
    impl = caching.CacheImpl
    if any(getattr(cls, "evalengine_stamped", False) for cls in impl._locator_classes):
        return
    stamped = [_stamped(base) for base in (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator,
                                           caching.UserWideCacheLocator)]
    impl._locator_classes[:0] = stamped


def _stamped(base):
    class Stamped(base):
        evalengine_stamped = True

        def get_source_stamp(self):
            return super().get_source_stamp(), kernel_stamp(self._py_file)

        @classmethod
        def from_function(cls, py_func, py_file):
            return super().from_function(py_func, py_file) if kernel_stamp(py_file) is not None else None

        def ensure_cache_path(self):
            """numba's check (create the folder, write a temporary file in it), once per folder and process: it runs
            for every kernel as its module is imported."""
            path = self.get_cache_path()
            if path not in _WRITABLE:
                super().ensure_cache_path()
                _WRITABLE.add(path)

    Stamped.__name__ = Stamped.__qualname__ = f"Stamped{base.__name__}"
    return Stamped


class _AfterCaching:
    """Finds ``numba.core.caching`` as the path finder does, and registers the locators once it has run."""

    def find_spec(self, name, path, target=None):
        if name != CACHING:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisteringLoader(spec.loader)
        return spec


class _RegisteringLoader:
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        _register(module)
