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
import os
import signal
import sys
import threading
import warnings
from pathlib import Path

from evalengine import __version__
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
    _passive_kernel_threads()
    code = EXIT_INTERRUPTED
    try:
        code = main(imported=_cached_kernels_without_registries)
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


def _passive_kernel_threads() -> None:
    """numba's parallel kernels run on OpenMP threads (its ``omp`` layer here) that spin after each kernel, waiting for
    the next: CPU time the command's serial parts then share the cores with (~0.02-0.04 CPU s of a 5k accumulation,
    measured under load). The command's own process lets them sleep at once, unless ``OMP_WAIT_POLICY`` is set (read
    when the layer loads, at the first parallel kernel); a notebook's threads are left alone."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


NUMBA_INTERNALS_CHECKED = "0.68."  # the numba release whose private caching API the tweak below was checked on


def _cached_kernels_without_registries() -> None:
    """numba's ``Cache.load_overload`` refreshes its typing and lowering registries before it loads a cached kernel:
    ~0.2 CPU s of imports and template set-up per process (cffi's C parser among them), though a cached kernel is
    machine code that needs none of them (the modules its environment names are imported as it is unpickled, and a
    kernel that does compile refreshes them then, in ``CompilerBase.__init__``). The command's process, once its
    modules are imported, loads cached kernels with the runtime alone (``load_overload`` less the refresh, only on
    the numba of ``NUMBA_INTERNALS_CHECKED``); a command that imports no numba is left without it."""
    numba = sys.modules.get("numba")
    if numba is None or not numba.__version__.startswith(NUMBA_INTERNALS_CHECKED):
        return
    from numba.core import caching
    from numba.core.runtime import rtsys

    def load_overload(cache, signature, target_context):
        rtsys.initialize(target_context)  # what the refresh's first step does: the runtime the kernels call
        with cache._guard_against_spurious_io_errors():
            return cache._load_overload(signature, target_context)

    caching.Cache.load_overload = load_overload
    _environments_without_imports()
    _libraries_linked_on_demand()


def _environments_without_imports() -> None:
    """A cached kernel's environments (one per function compiled into it, numba's own array and ufunc helpers among
    them) are unpickled with the globals of the module that defined each, imported for it: ``numba.np.arrayobj``,
    ``arraymath``, ``npyimpl`` (and its ufunc table), ~0.1 CPU s, though only object-mode code reads those globals
    (``pylowering``: no kernel of evalengine is object mode). A module not imported yet gets a namespace with its
    name alone; any other environment is numba's own."""
    from numba.core import environment

    rebuild = environment._rebuild_env

    def rebuild_env(modname, consts, env_name):
        if modname in sys.modules or environment.lookup_environment(env_name) is not None:
            return rebuild(modname, consts, env_name)
        env = environment.Environment({"__name__": modname})
        env.consts[:] = consts
        env.env_name = env_name
        environment.Environment._memo[env_name] = env
        return env

    environment._rebuild_env = rebuild_env  # what the pickled environments name, looked up as they are loaded


def _libraries_linked_on_demand() -> None:
    """A cached kernel's library holds its machine code and the LLVM bitcode another kernel would inline it from;
    numba parses that bitcode as it loads the kernel to list the symbols the code defines (~0.15 CPU s for the bbox
    command's kernels), though only a kernel compiled later in the process links it. Here the symbols are read from
    the machine code's ELF symbol table (the same names) and the bitcode is parsed when first linked
    (``_get_module_for_linking``, the one reader of ``_shared_module``); other object formats load numba's way."""
    import llvmlite.binding as ll
    from numba.core import codegen

    library_class, unserialize = codegen.CPUCodeLibrary, codegen.CPUCodeLibrary._unserialize.__func__
    module_for_linking = library_class._get_module_for_linking

    def _unserialize(cls, code, state):
        name, kind, data = state
        symbols = _elf_defined_symbols(data[0]) if kind == "object" else None
        if symbols is None:
            return unserialize(cls, code, state)
        library = code.create_library(name)
        library.enable_object_caching()
        library._set_compiled_object(data[0])
        library._shared_bitcode = data[1]
        library._finalize_final_module()
        code._engine._defined_symbols |= symbols
        return library

    def _get_module_for_linking(library):
        bitcode = library.__dict__.pop("_shared_bitcode", None)
        if bitcode is not None:
            library._shared_module = ll.parse_bitcode(bitcode)
        return module_for_linking(library)

    library_class._unserialize = classmethod(_unserialize)
    library_class._get_module_for_linking = _get_module_for_linking


_ELF_SECTION = [("name", "<u4"), ("type", "<u4"), ("flags", "<u8"), ("addr", "<u8"), ("offset", "<u8"),
                ("size", "<u8"), ("link", "<u4"), ("info", "<u4"), ("addralign", "<u8"), ("entsize", "<u8")]
_ELF_SYMBOL = [("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"), ("value", "<u8"), ("size", "<u8")]


def _elf_defined_symbols(code: bytes) -> set | None:
    """The names of the functions and data an ELF64 little-endian object defines (symbol types none, object,
    function; section index not undefined), or None for another format."""
    import numpy as np

    if code[:6] != b"\x7fELF\x02\x01":
        return None
    sections = np.frombuffer(code, _ELF_SECTION, int.from_bytes(code[0x3C:0x3E], "little"),
                             int.from_bytes(code[0x28:0x30], "little"))
    names = set()
    for table in sections[sections["type"] == 2]:  # SHT_SYMTAB
        symbols = np.frombuffer(code, _ELF_SYMBOL, int(table["size"]) // 24, int(table["offset"]))
        strings = sections[table["link"]]
        text = code[int(strings["offset"]):int(strings["offset"] + strings["size"])]
        for start in symbols["name"][(symbols["shndx"] != 0) & (symbols["info"] & 0xF <= 2)].tolist():
            names.add(text[start:text.index(b"\0", start)].decode())
    return names


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
