"""The ``evalengine`` command: one module per command family (``coco``, ``proposals``, ``query``, ``demo``), each
declaring its subcommands and calling the API only.

:func:`main` is the command's one error boundary: whatever goes wrong ends it with one line on stderr.

- ``evalengine: error: <where>: <what>``, exit status 2: what the user can act on. Bad input and options
  (:class:`~evalengine.errors.EvalEngineError`, argparse), the file system (``OSError``: the path and the system's
  reason: no space left, permission denied, …), memory, and the errors of the libraries that read and write the
  files (Polars, pyarrow, DuckDB, numba, JSON, text decoding: their first line). ``<where>`` is the file when the
  error names one, else the subcommand.
- ``evalengine: interrupted``, exit status 130 (128 + SIGINT): Ctrl-C.
- nothing, exit status 141 (128 + SIGPIPE, what a shell reports for a tool its reader left): stdout's reader
  went away (``evalengine sql … | head``).
- ``evalengine: internal error: <type>: <first line> (…)``, exit status 70 (``EX_SOFTWARE`` of sysexits.h): any
  other exception, which is a bug of evalengine.

``evalengine --debug <command>`` (or ``EVALENGINE_DEBUG=1``) lets the exception through, with its traceback.
"""

import argparse
import atexit
import errno
import importlib
import importlib.machinery
import os
import signal
import sys
import threading
import warnings
from pathlib import Path

from evalengine import __version__, kernel_loading
from evalengine.errors import EvalEngineError, first_line

EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 2, 70, 130, 141
# libraries whose errors are about the data they read or write, by top-level module (not imported here: DuckDB
# and numba load only for the commands that use them)
LIBRARIES = ("polars", "pyarrow", "duckdb", "_duckdb", "numba", "json")


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``evalengine: error: <subcommand>: <message>; see evalengine <subcommand>
    --help`` (exit status 2), instead of the usage text and the message."""

    def error(self, message):
        command = self.prog.removeprefix("evalengine").strip()
        self.exit(EXIT_ERROR, f"evalengine: error: {command + ': ' if command else ''}{message}; "
                              f"see {self.prog} --help\n")


# the subcommands, in the order the help lists them: (name, module of evalengine.cli, the function adding it)
SUBCOMMANDS = (
    ("coco", "coco", "add_coco"), ("voc", "voc", "add_voc"), ("openimages", "openimages", "add_openimages"),
    ("ingest", "coco", "add_ingest"), ("evaluate", "coco", "add_evaluate"), ("add-run", "coco", "add_add_run"),
    ("compare", "coco", "add_compare"), ("plot", "query", "add_plot"), ("report", "coco", "add_report"),
    ("lrp", "lrp", "add_lrp"), ("thresholds", "lrp", "add_thresholds"), ("tide", "diagnosis", "add_tide"),
    ("confusion", "confusion", "add_confusion"), ("analyze", "analyze", "add_analyze"),
    ("diagnose", "borji", "add_diagnose"), ("upper-bound", "upper_bound", "add_upper_bound"),
    ("invariance", "invariance", "add_invariance"), ("density", "density", "add_density"),
    ("lvis", "lvis", "add_lvis"), ("sql", "query", "add_sql"), ("proposals", "proposals", "add_proposals"),
    ("segmentation", "segmentation", "add_segmentation"), ("add-proposals", "proposals", "add_add_proposals"),
    ("repeatability", "proposals", "add_repeatability"), ("baseline", "proposals", "add_baseline"),
    ("fsck", "fsck", "add_fsck"), ("demo", "demo", "add_demo"), ("export", "export", "add_export"),
    ("warmup", "warmup", "add_warmup"),
)


def build_parser(argv=None) -> argparse.ArgumentParser:
    """The command's parser; it imports the commands, hence the libraries (inside :func:`main`'s boundary: a Ctrl-C
    while they load is an interruption too). Given ``argv`` naming a subcommand, only that one is declared, so that a
    command imports its own family alone (every one without ``argv``, for the top-level help or a name that is none
    of them)."""
    named = None if argv is None else _subcommand(argv)
    parser = Parser(prog="evalengine", description="The ``evalengine`` command.")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an error (also EVALENGINE_DEBUG=1)")
    parser.add_argument("--version", action="version", version=f"evalengine {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module, add in SUBCOMMANDS:
        if named is None or name == named:
            getattr(importlib.import_module(f"evalengine.cli.{module}"), add)(sub)
    return parser


def _subcommand(argv) -> str | None:
    """The subcommand ``argv`` runs: its first word after the top-level options (None before a ``--help`` or
    ``--version``, or when it names none)."""
    for word in argv:
        if word == "--debug":
            continue
        return word if word in {name for name, _, _ in SUBCOMMANDS} else None
    return None


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"evalengine: warning: {message}", file=sys.stderr)


def compile_notice() -> None:
    """On a terminal, say once that the first run compiles the numba kernels (cached for the next runs): when no
    cached kernel exists yet (numba's ``.nbi`` index files, beside the modules or under ``NUMBA_CACHE_DIR``)."""
    cache = os.environ.get("NUMBA_CACHE_DIR")
    root = Path(cache) if cache else Path(__file__).parent.parent
    if sys.stderr.isatty() and not any(root.rglob("*.nbi")):
        print("evalengine: compiling kernels, once (20-40 s; later runs reuse them; evalengine warmup does it ahead)",
              file=sys.stderr)


def main(argv=None, imported=None) -> int:
    """Run the command of ``argv``; return its exit status (see the module's docstring). ``imported`` is called once
    the command's modules are imported."""
    args = None
    try:
        argv = sys.argv[1:] if argv is None else argv
        args = build_parser(argv).parse_args(argv)
        if imported is not None:
            imported()
        warnings.showwarning = _one_line_warning
        compile_notice()
        text = args.func(args)
    except SystemExit as exc:  # argparse printed the help or its one-line error
        return exc.code if isinstance(exc.code, int) else 0
    except BaseException as exc:  # noqa: BLE001 - the boundary: every exception ends as one line
        return _report(exc, args, getattr(args, "command", "evalengine"))
    try:
        print(text)
        sys.stdout.flush()  # a full disk or a reader that went away shows here, not in the flush at exit
    except BaseException as exc:  # noqa: BLE001
        _silence_stdout()
        return EXIT_BROKEN_PIPE if isinstance(exc, BrokenPipeError) else _report(exc, args, "stdout")
    return 0


def _report(exc: BaseException, args, where: str) -> int:
    """Print the one line of ``exc`` and return the exit status; with ``--debug``, raise it."""
    if getattr(args, "debug", False) or os.environ.get("EVALENGINE_DEBUG", "0") not in ("", "0"):
        raise exc
    code, line = failure(exc, args, where)
    print(line, file=sys.stderr)
    return code


def failure(exc: BaseException, args, where: str) -> tuple:
    """``(exit status, line)`` of an exception that ended the command of ``args`` (None before they were read) in
    ``where`` (the subcommand, or ``stdout`` when its output could not be written)."""
    if _interrupted(exc):
        return EXIT_INTERRUPTED, "evalengine: interrupted"
    if isinstance(exc, EvalEngineError):
        return EXIT_ERROR, f"evalengine: error: {first_line(exc)}"
    if isinstance(exc, MemoryError):
        hint = " or ".join(f"{way} {option}" for way, option in (("more", "--shards"), ("fewer", "--workers"))
                           if hasattr(args, option[2:]))
        return EXIT_ERROR, f"evalengine: error: {where}: out of memory" + (f"; try {hint}" if hint else "")
    if isinstance(exc, OSError):
        return EXIT_ERROR, f"evalengine: error: {_os_error(exc, where)}"
    if isinstance(exc, UnicodeError) or type(exc).__module__.split(".")[0] in LIBRARIES:
        return EXIT_ERROR, f"evalengine: error: {where}: {first_line(exc)}"
    return EXIT_INTERNAL, (f"evalengine: internal error: {type(exc).__name__}: {first_line(exc)} (run with "
                           "evalengine --debug for the traceback; please report it)")


def _interrupted(exc: BaseException | None) -> bool:
    """Whether a Ctrl-C caused ``exc``: a KeyboardInterrupt, or an error raised from one (a numba function
    interrupted in its C code is a SystemError caused by it; a cleanup failing after one has it as context)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _os_error(exc: OSError, where: str) -> str:
    """``<path>: <reason>`` of a failed file operation (the system's reason: no space left on device, permission
    denied, …); the library's first line when it names no path."""
    if exc.filename is None:
        return f"{where}: {first_line(exc)}"
    path = f"{exc.filename} -> {exc.filename2}" if exc.filename2 is not None else str(exc.filename)
    if exc.errno == errno.EEXIST and os.path.isfile(exc.filename):  # mkdir of a folder below a regular file
        return f"{path}: is a file, where a folder is needed"
    return f"{path}: {(exc.strerror or first_line(exc)).lower()}"


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the flush at exit finds no closed pipe to complain about."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no file (a test's capture): nothing will flush to a pipe
        pass


def run() -> None:
    """The ``evalengine`` command: :func:`main`, then :func:`end_process`."""
    sys.unraisablehook = _interrupt_again
    _without_blas_probe()
    _numba_without_optional_imports()
    _passive_kernel_threads()
    code = EXIT_INTERRUPTED
    try:
        code = main(imported=kernel_loading.load_lean)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command is done: a Ctrl-C now would only cut its exit short
    except KeyboardInterrupt:  # in the instant between the two
        pass
    end_process(code)


def _without_blas_probe() -> None:
    """numba's start (its typing registries, loaded with the first kernel) imports ``scipy.linalg.cython_blas`` to
    look for a BLAS where SciPy is installed: ~0.3 CPU s, more than NumPy's import. No kernel of evalengine calls
    BLAS, so the command's own process tells numba there is none (only here: a notebook's numba keeps its BLAS)."""
    if "scipy.linalg" not in sys.modules:
        sys.modules.setdefault("scipy.linalg.cython_blas", None)  # imports of it raise ModuleNotFoundError


def _numba_without_optional_imports() -> None:
    """numba's import imports PyYAML (to read a ``.numba_config.yaml`` of the working folder) and SciPy (to check that
    its version is at least 1.0): ~0.03 CPU s of the command's start for modules no kernel of evalengine uses. The
    command's own process has numba imported with both missing (when no such file is there and neither is imported
    yet); they import as usual afterwards."""
    if "numba" not in sys.modules and not os.path.isfile(".numba_config.yaml"):
        sys.meta_path.insert(0, _NumbaWithout(name for name in ("yaml", "scipy") if name not in sys.modules))


class _NumbaWithout:
    """Finds ``numba`` as the path finder does, and imports it with the modules ``missing`` absent."""

    def __init__(self, missing):
        self.missing = tuple(missing)

    def find_spec(self, name, path, target=None):
        if name != "numba":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _ImportedWithout(spec.loader, self.missing)
        return spec


class _ImportedWithout:
    def __init__(self, loader, missing):
        self.loader, self.missing = loader, missing

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        for name in self.missing:
            sys.modules.setdefault(name, None)  # an import of it raises ModuleNotFoundError
        try:
            self.loader.exec_module(module)
        finally:
            for name in self.missing:
                if name in sys.modules and sys.modules[name] is None:
                    del sys.modules[name]


def _passive_kernel_threads() -> None:
    """numba's parallel kernels run on OpenMP threads (its ``omp`` layer here) that spin after each kernel, waiting for
    the next: CPU time the command's serial parts then share the cores with (~0.02-0.04 CPU s of a 5k accumulation,
    measured under load). The command's own process lets them sleep at once, unless ``OMP_WAIT_POLICY`` is set (read
    when the layer loads, at the first parallel kernel); a notebook's threads are left alone."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _interrupt_again(unraisable) -> None:
    """A Ctrl-C that lands in a Python callback of C code (numba's LLVM object cache) is swallowed there and printed
    as "Exception ignored …" while the command goes on: send the main thread SIGINT again once it is out of the
    callback (from another thread, or the interruption would land in this hook)."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        threading.Timer(0.01, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
    else:
        sys.__unraisablehook__(unraisable)


def end_process(code: int) -> None:
    """End the process without tearing the interpreter down module by module (numba's and Polars' teardown took
    ~0.6 s of every command); exit handlers run and output is flushed first, every file is already closed."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a reader gone or a full disk: already reported, nothing more can be said
            pass
    os._exit(code)
