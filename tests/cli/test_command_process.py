"""The ``evalengine`` command's own process (``evalengine.cli.run``) loads cached numba kernels without numba's typing
and lowering registries (``kernel_loading.load_lean``): every kernel family the commands use gives the
same output as in a process that loads them with the registries (the tests' own, through ``main``)."""

import subprocess
import sys

import pytest

from evalengine.cli import main
from evalengine.cli.warmup import workloads
from tests.conftest import SAMPLE_DT, SAMPLE_GT

# run in the command's process; on exit, whether numba's registries were set up (cffi_utils is imported by the
# refresh alone) and whether any kernel had to compile there
COMMAND = """
import atexit, sys
from numba.core import dispatcher
from evalengine.cli import run
compiled = []
compile_core = dispatcher._FunctionCompiler._compile_core
dispatcher._FunctionCompiler._compile_core = lambda *a, **k: compiled.append(1) or compile_core(*a, **k)
atexit.register(lambda: print("registries:", "numba.core.typing.cffi_utils" in sys.modules, "compiled:", len(compiled),
                              file=sys.stderr))
sys.argv = ["evalengine", *sys.argv[1:]]
run()
"""


@pytest.mark.parametrize("name", ["coco", "segm", "boundary", "lrp", "tide", "voc"])
def test_cached_kernels_give_the_same_output_in_the_command_process(name, tmp_path, capsys):
    argv = {argv[0] if "--iou-type" not in argv else argv[argv.index("--iou-type") + 1]: argv
            for argv in workloads(SAMPLE_GT, SAMPLE_DT, tmp_path)}[name]
    assert main(argv) == 0  # compiles and caches the kernels if they were not yet
    expected = capsys.readouterr().out
    result = subprocess.run([sys.executable, "-c", COMMAND, *argv], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected
    assert "registries: False compiled: 0" in result.stderr
