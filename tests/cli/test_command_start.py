"""The command's process imports numba without PyYAML and SciPy (``cli._numba_without_optional_imports``): neither is
imported by numba's import, both import as usual afterwards, and a ``.numba_config.yaml`` in the working folder is
still read (PyYAML then imported for it)."""

import json
import subprocess
import sys

RUN = """
import json, sys
from evalengine import cli
cli._numba_without_optional_imports()
import numba
after_numba = {name: name in sys.modules for name in ("yaml", "scipy")}
import scipy, yaml  # importable afterwards
print(json.dumps({"after_numba": after_numba, "have_yaml": numba.core.config._HAVE_YAML,
                  "disable_jit": numba.core.config.DISABLE_JIT, "scipy": scipy.__version__, "yaml": yaml.__version__}))
"""


def _run(cwd) -> dict:
    result = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_numba_imported_without_yaml_and_scipy(tmp_path):
    seen = _run(tmp_path)
    assert seen["after_numba"] == {"yaml": False, "scipy": False}
    assert seen["have_yaml"] is False
    assert seen["scipy"] and seen["yaml"]


def test_a_numba_config_file_is_still_read(tmp_path):
    (tmp_path / ".numba_config.yaml").write_text("disable_jit: 1\n")
    seen = _run(tmp_path)
    assert seen["after_numba"]["yaml"] is True and seen["have_yaml"] is True
    assert seen["disable_jit"] == 1
