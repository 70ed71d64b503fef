"""The command's process loads cached kernels lean (``kernel_loading.load_lean``): environments
without importing numba's modules for their globals, the linking bitcode parsed only when a later compilation links
the library. A cached kernel gives the same values; a kernel compiled afterwards that calls it links it and gives the
same values as in a process that loaded it numba's way; the ELF symbols equal those numba lists from the bitcode."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

MODULE = """
import numpy as np
from numba import njit


@njit(cache=True)
def inner(values):
    out = np.empty(len(values) + 1)  # numba.np.arrayobj's helpers, their environments in the cache
    out[:-1] = np.sqrt(np.abs(values)) * 2.0
    out[-1] = values.sum()
    return out


@njit(cache=True)
def total(values):
    return inner(values).sum()
"""
RUN = """
import sys
sys.path.insert(0, {tmp!r})
import numpy as np
from numba import njit
from evalengine import cli, kernel_loading
if {lean}:
    cli._without_blas_probe()
    import numba
    kernel_loading.load_lean()
from lean_kernels import inner, total
values = np.arange(-5.0, 7.0) / 3.0
print(repr(inner(values).tolist()), repr(total(values)), len(inner.stats.cache_hits) + len(total.stats.cache_hits))
print("arrayobj imported:", "numba.np.arrayobj" in sys.modules)
library = inner.overloads[inner.signatures[0]].library
print("bitcode parsed:", library._shared_module is not None)


@njit
def outer(values):  # compiled here: links inner's library
    return inner(values)[-1] + total(values)


print(repr(outer(values)), "bitcode parsed:", library._shared_module is not None)
"""


def _run(tmp: Path, lean: bool) -> list:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    result = subprocess.run([sys.executable, "-c", RUN.format(tmp=str(tmp), lean=lean)], capture_output=True,
                            text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.fixture
def cached(tmp_path):
    (tmp_path / "lean_kernels.py").write_text(MODULE)
    first = _run(tmp_path, False)  # compiles and caches inner and total
    assert first[0].endswith(" 0")
    return tmp_path, first


def test_cached_kernels_loaded_lean_give_the_same_values(cached):
    tmp, _ = cached
    usual, lean = _run(tmp, False), _run(tmp, True)
    assert usual[0] == lean[0] and lean[0].endswith(" 2")  # both kernels from the cache, the same values
    assert usual[1:3] == ["arrayobj imported: True", "bitcode parsed: True"]
    assert lean[1:3] == ["arrayobj imported: False", "bitcode parsed: False"]
    assert lean[3] == usual[3] and lean[3].endswith("bitcode parsed: True")  # linked on demand, the same value


def test_elf_symbols_are_the_ones_numba_lists_from_the_bitcode(cached, monkeypatch):
    import llvmlite.binding as ll
    import numpy as np
    from numba.core import codegen

    from evalengine.kernel_loading import elf_defined_symbols

    unserialize, states = codegen.CPUCodeLibrary._unserialize.__func__, []
    monkeypatch.setattr(codegen.CPUCodeLibrary, "_unserialize",
                        classmethod(lambda cls, code, state: states.append(state) or unserialize(cls, code, state)))
    monkeypatch.syspath_prepend(str(cached[0]))
    from lean_kernels import total

    total(np.ones(3))  # loaded from the cache: its library's state as stored
    (_, kind, (code, bitcode)), = states
    module = ll.parse_bitcode(bitcode)
    expected = {v.name for values in (module.functions, module.global_variables) for v in values
                if not v.is_declaration}
    assert kind == "object" and len(expected) > 2
    assert elf_defined_symbols(code) == expected
    assert elf_defined_symbols(b"\xcf\xfa\xed\xfe" + code[4:]) is None  # not ELF (Mach-O's magic): numba's way
