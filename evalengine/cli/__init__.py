"""The ``evalengine`` command: one module per command family (``coco``, ``proposals``, ``query``, ``demo``), each
declaring its subcommands and calling the API only."""

import argparse
import atexit
import os
import sys
import warnings

from evalengine.cli import coco, demo, fsck, proposals, query
from evalengine.errors import EvalEngineError

# the subcommands, in the order the help lists them
SUBCOMMANDS = (coco.add_coco, coco.add_ingest, coco.add_evaluate, coco.add_add_run, coco.add_compare, query.add_plot,
               coco.add_report, query.add_sql, proposals.add_proposals, proposals.add_add_proposals,
               proposals.add_repeatability, proposals.add_baseline, fsck.add_fsck, demo.add_demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalengine", description="The ``evalengine`` command.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(sub)
    return parser


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"evalengine: warning: {message}", file=sys.stderr)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    warnings.showwarning = _one_line_warning
    try:
        print(args.func(args))
    except EvalEngineError as exc:
        print(f"evalengine: error: {exc}", file=sys.stderr)
        return 2
    return 0


def run() -> None:
    """The ``evalengine`` command: :func:`main`, then :func:`end_process`."""
    end_process(main())


def end_process(code: int) -> None:
    """End the process without tearing the interpreter down module by module (numba's and Polars' teardown took
    ~0.6 s of every command); exit handlers run and output is flushed first, every file is already closed."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


