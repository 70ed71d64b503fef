"""The ``evalengine`` command's output, byte for byte: every invocation of ``cli_snapshot.invocations("sample")``
against its golden file in ``tests/data/cli_snapshot/`` (see tests/data/README.md to regenerate them).

The invocations run in-process, in order, in one temporary folder shared by the module (later ones use the
stores earlier ones wrote); a test run alone runs the invocations before it first.
"""

import difflib
from pathlib import Path

import pytest

from tests.cli import cli_snapshot

GOLDEN = Path(__file__).parent.parent / "data" / "cli_snapshot"
INVOCATIONS = cli_snapshot.invocations("sample")


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return cli_snapshot.Session("sample", tmp_path_factory.mktemp("cli-snapshot"))


@pytest.mark.parametrize("invocation", INVOCATIONS, ids=[inv.id for inv in INVOCATIONS])
def test_output_is_unchanged(session, invocation):
    golden = GOLDEN / f"{invocation.id}.txt"
    actual = session.snapshot(invocation.id)
    assert golden.is_file(), f"no golden file {golden}; regenerate: python tests/cli/cli_snapshot.py --dataset " \
                             f"sample --out tests/data/cli_snapshot"
    expected = golden.read_bytes().decode()
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                            f"golden/{golden.name}", f"now/{golden.name}"))
        pytest.fail(f"`{invocation.id}` no longer prints what it did:\n{diff}", pytrace=False)


def test_every_golden_file_is_an_invocation():
    listed = {f"{inv.id}.txt" for inv in INVOCATIONS} | {"_inputs.txt"}
    assert sorted(p.name for p in GOLDEN.glob("*.txt") if p.name not in listed) == []
