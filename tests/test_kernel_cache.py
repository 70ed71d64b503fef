"""numba's kernel cache keyed on the sources a kernel can call (evalengine.kernel_cache): after a change in a module
whose njit function a cached kernel calls, the kernel runs the new code (numba alone keeps the stale one)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evalengine import kernel_cache
from tests.test_layout import LAYERS

LOW = """
from numba import njit


@njit(cache=True)
def helper(x):
    return x + {value}
"""
HIGH = """
from numba import njit

from pkg.low import helper


@njit(cache=True)
def kernel(x):
    return helper(x) * 10
"""
RUN = """
import sys
sys.path.insert(0, {tmp!r})
{before}
from evalengine import kernel_cache
if {stamped}:
    kernel_cache.install({root!r}, (("low",), ("high",)))
from pkg.high import kernel
print(kernel(1), len(kernel.stats.cache_hits))
"""


def _package(tmp: Path) -> Path:
    root = tmp / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "low.py").write_text(LOW.format(value=1))
    (root / "high.py").write_text(HIGH)
    return root


def _run(tmp: Path, root: Path, stamped: bool, numba_first: bool) -> tuple:
    """``(kernel(1), cache hits)`` in a fresh process (numba's cache under ``root``'s ``__pycache__``)."""
    code = RUN.format(tmp=str(tmp), root=str(root), stamped=stamped, before="import numba" if numba_first else "")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    value, hits = out.split()
    return int(value), int(hits)


def _change_low(root: Path, value: int) -> None:
    """A ``git pull`` that changes the called module only (a later modification time than the cache's)."""
    low = root / "low.py"
    low.write_text(LOW.format(value=value))
    stat = low.stat()
    os.utime(low, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


@pytest.mark.parametrize("numba_first", [False, True])
def test_a_change_in_a_called_module_recompiles_the_caller(tmp_path, numba_first):
    root = _package(tmp_path)
    assert _run(tmp_path, root, True, numba_first) == (20, 0)  # compiled and cached
    assert _run(tmp_path, root, True, numba_first) == (20, 1)  # loaded from the cache
    _change_low(root, 22)
    assert _run(tmp_path, root, True, numba_first) == (230, 0)  # stale: compiled again
    assert _run(tmp_path, root, True, numba_first) == (230, 1)


def test_numba_alone_runs_the_stale_kernel(tmp_path):
    """What the stamp mends: numba's own stamp is the kernel's file, so the old helper's machine code is kept."""
    root = _package(tmp_path)
    assert _run(tmp_path, root, False, False) == (20, 0)
    _change_low(root, 22)
    assert _run(tmp_path, root, False, False) == (20, 1)


def test_the_stamp_covers_the_own_layer_and_those_below_only(tmp_path):
    root = _package(tmp_path)
    layers = (("low",), ("high",))
    before = kernel_cache.kernel_stamp(str(root / "low.py")), kernel_cache.kernel_stamp(str(root / "high.py"))
    kernel_cache.install(root, layers)
    low, high = kernel_cache.kernel_stamp(str(root / "low.py")), kernel_cache.kernel_stamp(str(root / "high.py"))
    assert before == (None, None) and low != high
    (root / "high.py").write_text(HIGH + "\n")
    kernel_cache.layer_digest.cache_clear()
    kernel_cache._name_digest.cache_clear()
    assert kernel_cache.kernel_stamp(str(root / "low.py")) == low  # a change above does not touch a lower kernel
    assert kernel_cache.kernel_stamp(str(root / "high.py")) != high


def test_the_kernel_layers_are_the_layout_layers():
    """Every top-level module or package of the layers holding kernels is in ``KERNEL_LAYERS`` at its layer."""
    assert {name: layer for layer, names in enumerate(kernel_cache.KERNEL_LAYERS) for name in names} == {
        name: layer for name, layer in LAYERS.items() if layer < len(kernel_cache.KERNEL_LAYERS)}


def test_every_kernel_of_evalengine_is_stamped():
    code = textwrap.dedent("""
        from evalengine.cli.warmup import cacheable_kernels
        names = {type(d._cache._impl.locator).__name__ for _, d in cacheable_kernels()}
        print(sorted(names))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() in ("['StampedInTreeCacheLocator']", "['StampedUserProvidedCacheLocator']")


def test_the_cache_folder_is_checked_once_per_process(tmp_path):
    """numba checks a kernel's cache folder (create it, write a temporary file) as the kernel is defined: the stamped
    locators do it once per folder, and the kernels still load from the cache."""
    root = _package(tmp_path)
    _run(tmp_path, root, True, False)  # compiled and cached
    code = RUN.format(tmp=str(tmp_path), root=str(root), stamped=True,
                      before="import tempfile\nmade = []\nbase = tempfile.TemporaryFile\n"
                             "tempfile.TemporaryFile = lambda *a, **k: made.append(k.get('dir')) or base(*a, **k)")
    code += "print(len(made), len(set(made)))\n"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["20", "1", "1", "1"]  # kernel(1), a cache hit, one check of the one folder
