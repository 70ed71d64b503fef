"""The command's one error boundary (``evalengine.cli.main``): every failure ends it with one line on stderr and no
traceback. ``evalengine: error: <where>: <what>`` and exit status 2 for bad options, inputs, stores, the file system
and memory; ``evalengine: interrupted`` and 130 for Ctrl-C; nothing and 141 when stdout's reader goes away;
``evalengine: internal error: …`` and 70 for a bug; ``--debug`` shows the traceback.

What a process does (signals, resource limits, pipes, /dev/full) is run as a subprocess, as a user would."""

import errno
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalengine import api
from evalengine.cli import _interrupt_again, main
from tests.cli import cli_snapshot
from tests.conftest import SAMPLE_DT, SAMPLE_GT

REPO = Path(__file__).resolve().parents[2]
GT, DT = str(SAMPLE_GT), str(SAMPLE_DT)
GD = ["--gt", GT, "--dt", DT]
ENV = dict(os.environ, PYTHONPATH=str(REPO), RUST_BACKTRACE="0")
ERROR = "evalengine: error: "


def run(capsys, *argv):
    """``main(argv)`` in-process: (exit status, stdout, stderr lines)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def command(*argv) -> list:
    return [sys.executable, "-m", "evalengine.cli", *argv]


def default_sigint():
    """A child of a shell's background job inherits SIGINT ignored (Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def assert_one_line(err, prefix=ERROR) -> str:
    lines = err.splitlines() if isinstance(err, str) else err
    assert len(lines) == 1 and lines[0].startswith(prefix) and "Traceback" not in lines[0], lines
    return lines[0]


@pytest.fixture(scope="module")
def gen5k(tmp_path_factory):
    """5000 generated images, 100 detections each (500k): a run that lasts a few seconds, and its store."""
    folder = tmp_path_factory.mktemp("gen5k")
    cli_snapshot.generate_gen5k(folder)
    store = api.ingest_coco(folder / "gt.json", folder / "dt.json", folder / "store", n_shards=4)
    return SimpleNamespace(gt=str(folder / "gt.json"), dt=str(folder / "dt.json"), store=str(store.path))


# -- numeric and file options: argparse errors, one line ---------------------------------------------------------


@pytest.mark.parametrize("argv, where, message", [
    (["coco", *GD, "--shards", "0"], "coco", "argument --shards: must be at least 1, got 0"),
    (["coco", *GD, "--workers", "0"], "coco", "argument --workers: must be at least 1, got 0"),
    (["coco", *GD, "--workers", "-1"], "coco", "argument --workers: must be at least 1, got -1"),
    (["coco", *GD, "--workers", "two"], "coco", "argument --workers: expected an integer, got 'two'"),
    (["coco", *GD, "--max-dets", "-1", "10", "100"], "coco", "argument --max-dets: must be at least 1, got -1"),
    (["coco", *GD, "--max-dets", "0"], "coco", "argument --max-dets: must be at least 1, got 0"),
    (["coco", *GD, "--iou-thresholds", "nan"], "coco", "argument --iou-thresholds: expected a number, got 'nan'"),
    (["coco", *GD, "--iou-thresholds", "0.5", "1.5"], "coco",
     "argument --iou-thresholds: an IoU threshold is between 0 and 1, got 1.5"),
    (["coco", *GD, "--iou-thresholds", "-0.1"], "coco",
     "argument --iou-thresholds: an IoU threshold is between 0 and 1, got -0.1"),
    (["coco", *GD, "--area-ranges", "all:0:nan"], "coco", "argument --area-ranges: expected a number, got 'nan'"),
    (["coco", *GD, "--area-ranges", "small"], "coco",
     "argument --area-ranges: expected LABEL:LO:HI (e.g. small:0:1024), got 'small'"),
    (["ingest", "coco", *GD, "--store", "s", "--shards", "-3"], "ingest coco",
     "argument --shards: must be at least 1, got -3"),
    (["evaluate", "s", "--workers", "0"], "evaluate", "argument --workers: must be at least 1, got 0"),
    (["proposals", "--gt", GT, "--proposals", DT, "--iou", "nan"], "proposals",
     "argument --iou: expected a number, got 'nan'"),
    (["proposals", "--gt", GT, "--proposals", DT, "--budgets", "10", "0"], "proposals",
     "argument --budgets: must be at least 1, got 0"),
    (["proposals", "--gt", GT, "--proposals", DT, "--shards", "0"], "proposals",
     "argument --shards: must be at least 1, got 0"),
    (["repeatability", "s", "--runs", "r", "--top-n", "0"], "repeatability",
     "argument --top-n: must be at least 1, got 0"),
    (["baseline", "--gt", GT, "--kind", "uniform", "--per-image", "0", "--out", "x.parquet"], "baseline",
     "argument --per-image: must be at least 1, got 0"),
    (["baseline", "--gt", GT, "--kind", "uniform", "--seed", "-1", "--out", "x.parquet"], "baseline",
     "argument --seed: must be at least 0, got -1"),
    (["add-proposals", "s", "--run", "r", "--proposals", DT, "--perturbation", "scale:nan"], "add-proposals",
     "argument --perturbation: expected KIND[:LEVEL] (e.g. scale:1.1, rotate:5, flip), got 'scale:nan'"),
    (["coco", *GD, "--use-cats", "2"], "coco", "argument --use-cats: invalid choice: 2 (choose from 0, 1)"),
    (["coco", "--gt", GT], "coco", "the following arguments are required: --dt"),
    (["coco", *GD, "--no-such-option"], "", "unrecognized arguments: --no-such-option"),  # found by the top level
    ([], "", "the following arguments are required: command"),
])
def test_bad_option_is_one_line(capsys, argv, where, message):
    line = f"{ERROR}{where}: {message}; see evalengine {where} --help" if where else \
        f"{ERROR}{message}; see evalengine --help"
    assert run(capsys, *argv) == (2, "", [line])


def _positive(text: str) -> bool:
    try:
        return int(text) >= 1
    except ValueError:
        return False


@given(value=st.one_of(st.integers(max_value=0).map(str), st.text(min_size=1).filter(lambda t: not _positive(t))))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_count_that_is_not_positive_is_one_line(capsys, value):
    for option in ("--shards", "--workers"):
        code, out, err = run(capsys, "coco", *GD, option, value)
        assert code == 2 and out == ""
        line = assert_one_line(err)
        assert line.startswith(f"{ERROR}coco: argument {option}: ") and line.endswith("; see evalengine coco --help")


@pytest.mark.parametrize("out, message", [
    ("{tmp}/no-such-folder/x.parquet", "{tmp}/no-such-folder/x.parquet: no folder '{tmp}/no-such-folder' to write it in"),
    ("{tmp}", "{tmp}: is a folder, where a file is needed"),
])
def test_out_into_a_missing_folder_or_onto_a_folder(capsys, tmp_path, out, message):
    code, stdout, err = run(capsys, "baseline", "--gt", GT, "--kind", "uniform", "--out", out.format(tmp=tmp_path))
    assert (code, stdout) == (2, "")
    assert err == [f"{ERROR}baseline: argument --out: {message.format(tmp=tmp_path)}; see evalengine baseline --help"]


def test_help_is_not_an_error(capsys):
    code, out, err = run(capsys, "coco", "--help")
    assert code == 0 and out.startswith("usage: evalengine coco") and err == []


# -- files given by the user ---------------------------------------------------------------------------------


def test_binary_query_file(capsys, tmp_path, gen5k):
    query = tmp_path / "query.sql"
    query.write_bytes(b"SELECT 1 \xff\xfe")
    code, out, err = run(capsys, "sql", gen5k.store, "--file", str(query))
    assert (code, out, err) == (2, "", [f"{ERROR}{query}: not UTF-8 text (byte 10: invalid start byte)"])


def test_query_file_with_a_byte_order_mark(capsys, tmp_path, gen5k):
    query = tmp_path / "query.sql"
    query.write_bytes("\ufeffSELECT 42 AS answer".encode())
    code, out, err = run(capsys, "sql", gen5k.store, "--file", str(query), "--format", "csv")
    assert (code, out, err) == (0, "answer\n42\n", [])


@pytest.mark.parametrize("content, problem", [
    ("{", "not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
    ("[1, 2]", "expected a JSON object, got list"),
])
def test_bad_baseline_params_file(capsys, tmp_path, content, problem):
    params = tmp_path / "params.json"
    params.write_text(content)
    code, out, err = run(capsys, "baseline", "--gt", GT, "--kind", "gaussian", "--params", str(params), "--out",
                         str(tmp_path / "x.parquet"))
    assert (code, out, err) == (2, "", [f"{ERROR}{params}: {problem}"])
    assert not (tmp_path / "x.parquet").exists()


def test_inputs_that_libraries_reject_are_one_line(capsys, tmp_path):
    """A corrupt Parquet file, a Parquet bbox of strings, a proposal CSV with a string coordinate: whichever layer
    finds it, one line and exit 2."""
    import polars as pl

    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1" + b"x" * 100)
    strings = tmp_path / "strings.parquet"
    pl.DataFrame({"image_id": [42], "category_id": [18], "score": [0.5], "bbox": [["a", "b", "c", "d"]]}).write_parquet(
        strings)
    csv = tmp_path / "proposals.csv"
    csv.write_text("image_id,x1,y1,x2,y2\n42,a,1,5,5\n")
    no_categories = tmp_path / "gt.json"
    no_categories.write_text(json.dumps(dict(json.loads(Path(GT).read_text()), categories=[])))
    for argv in (["coco", "--gt", GT, "--dt", str(corrupt)], ["coco", "--gt", GT, "--dt", str(strings)],
                 ["proposals", "--gt", GT, "--proposals", str(csv)], ["coco", "--gt", str(no_categories), "--dt", DT]):
        code, out, err = run(capsys, *argv)
        assert (code, out) == (2, ""), argv
        assert_one_line(err)


# -- the file system -----------------------------------------------------------------------------------------


def test_store_below_a_regular_file(capsys, tmp_path):
    regular = tmp_path / "notes.txt"
    regular.write_text("mine")
    code, out, err = run(capsys, "ingest", "coco", *GD, "--store", str(regular / "store"))
    assert (code, out, err) == (2, "", [f"{ERROR}{regular}: is a file, where a folder is needed"])
    code, out, err = run(capsys, "ingest", "coco", *GD, "--store", str(regular / "deeper" / "store"))
    assert (code, out, err) == (2, "", [f"{ERROR}{regular / 'deeper'}: not a directory"])
    assert regular.read_text() == "mine"


def test_unwritable_parent(capsys, tmp_path, monkeypatch):
    """What mkdir raises in a folder the user may not write to (simulated: root may write anywhere)."""
    parent = tmp_path / "readonly"

    def refuse(self, *args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    code, out, err = run(capsys, "ingest", "coco", *GD, "--store", str(parent / "store"))
    assert (code, out) == (2, "")
    line = assert_one_line(err)
    assert line.startswith(f"{ERROR}{parent}") and line.endswith(": permission denied")


def test_disk_full_while_committing_a_store(capsys, tmp_path, monkeypatch):
    """ENOSPC with the file it hit (simulated on the manifest, the store's last write): the path and the reason."""
    real = Path.write_text

    def full(self, *args, **kwargs):
        if self.name == "manifest.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    code, out, err = run(capsys, "ingest", "coco", *GD, "--store", str(tmp_path / "store"))
    assert (code, out) == (2, "")
    line = assert_one_line(err)
    assert line.startswith(f"{ERROR}{tmp_path}/.store.tmp-") and line.endswith("/manifest.json: no space left on device")
    assert os.listdir(tmp_path) == []  # nothing half-written left


def test_disk_full_for_real(tmp_path):
    """/dev/full: every write is ENOSPC, for an output file and for stdout."""
    result = subprocess.run(command("baseline", "--gt", GT, "--kind", "uniform", "--per-image", "10", "--out",
                                    "/dev/full"), env=ENV, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert "No space left on device" in assert_one_line(result.stderr, f"{ERROR}baseline: ")
    with open("/dev/full", "w") as full:
        result = subprocess.run(command("coco", *GD), env=ENV, stdout=full, stderr=subprocess.PIPE, text=True,
                                timeout=120)
    assert result.returncode == 2
    assert result.stderr == f"{ERROR}stdout: [Errno 28] No space left on device\n"


def test_file_size_limit_while_writing_a_store(tmp_path, gen5k):
    """The file system refusing a write in the middle of an ingest (RLIMIT_FSIZE: EFBIG): one line, and neither a
    store nor a temporary folder left."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))

    result = subprocess.run(command("ingest", "coco", "--gt", gen5k.gt, "--dt", gen5k.dt, "--store",
                                    str(tmp_path / "store")), env=ENV, capture_output=True, text=True, timeout=300,
                            preexec_fn=limit)
    assert result.returncode == 2 and result.stdout == ""
    assert "File too large" in assert_one_line(result.stderr, f"{ERROR}ingest: ")
    assert os.listdir(tmp_path) == []


# -- memory --------------------------------------------------------------------------------------------------

TWO_GIB = 2 * 2**30


def _address_space(limit):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_memory_error_under_an_address_space_limit(tmp_path):
    """An allocation Python makes (numpy's: one 16 GB draw) fails under a 4 GiB address space, room enough for the
    command's own mappings (~2.6 GB of reservations: under 2 GiB an allocation in Polars' Rust code may fail first,
    which aborts, see below): one line, nothing written."""
    out = tmp_path / "x.parquet"
    result = subprocess.run(command("baseline", "--gt", GT, "--kind", "uniform", "--per-image", "2000000000", "--out",
                                    str(out)), env=ENV, capture_output=True, text=True, timeout=300,
                            preexec_fn=_address_space(2 * TWO_GIB))
    assert (result.returncode, result.stdout, result.stderr) == (2, "", f"{ERROR}baseline: out of memory\n")
    assert not out.exists()


def test_running_out_of_memory_in_a_whole_run(gen5k):
    """Under a 2 GiB address space a run fails wherever an allocation fails first. In Python code (numpy, the JSON
    reader): one line, exit 2. In Polars' Rust code (on one of its threads, also after that line): Rust aborts the
    process (SIGABRT, exit 134 in a shell) with its own "memory allocation of N bytes failed"; that cannot be caught
    from Python (documented)."""
    result = subprocess.run(command("coco", "--gt", gen5k.gt, "--dt", gen5k.dt, "--shards", "2"), env=ENV,
                            capture_output=True, text=True, timeout=300, preexec_fn=_address_space(TWO_GIB))
    ours = f"{ERROR}coco: out of memory; try more --shards or fewer --workers"
    if result.returncode == 2:
        assert result.stderr == ours + "\n"
    elif result.returncode == -signal.SIGABRT:
        rust = ("memory allocation of ", "note: run with `RUST_BACKTRACE=1`",
                "skipping backtrace printing to avoid potential recursion")  # Rust's abort, as it words it
        assert all(line == ours or line.startswith(rust) for line in result.stderr.splitlines() if line), \
            result.stderr
    else:  # a machine with fewer threads (less address space reserved per thread) fits the run
        assert result.returncode == 0 and result.stderr == ""


# -- Ctrl-C ----------------------------------------------------------------------------------------------------


def _interrupt(argv, ready, timeout=120, **popen):
    """Start the command, wait until ``ready(process)`` (polled), send SIGINT; (exit status, stdout, stderr)."""
    process = subprocess.Popen(command(*argv), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=default_sigint, **popen)
    deadline = time.monotonic() + timeout
    while not ready(process):
        assert process.poll() is None, f"the command ended before it could be interrupted: {process.communicate()}"
        assert time.monotonic() < deadline, "the command never reached the moment to interrupt"
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def test_interrupted_while_loading_the_libraries(tmp_path):
    """SIGINT while numpy, Polars, Dask and numba are imported (the command's parser imports them inside the
    boundary); ``-X importtime`` says when numpy is in."""
    seen = []

    def numpy_loaded(process):
        line = process.stderr.readline()
        seen.append(line)
        return line.split("|")[-1].strip() == "numpy"

    process = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "evalengine.cli", "coco", *GD], env=ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    while not numpy_loaded(process):
        assert seen[-1], "numpy was never imported"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    lines = [line for line in err.splitlines() if not line.startswith("import time:")]
    assert (process.returncode, out, lines) == (130, "", ["evalengine: interrupted"])


def test_interrupted_while_ingesting(tmp_path, gen5k):
    """SIGINT while the detections stream into a new store's temporary folder: 130, one line, no store and no
    temporary folder left."""
    target = tmp_path / "store"
    code, out, err = _interrupt(["ingest", "coco", "--gt", gen5k.gt, "--dt", gen5k.dt, "--store", str(target)],
                                lambda _: any(tmp_path.glob(".store.tmp-*/dt")))
    assert (code, out, err) == (130, "", "evalengine: interrupted\n")
    assert os.listdir(tmp_path) == []


def test_interrupted_while_matching(tmp_path, gen5k):
    """SIGINT while the shard tasks run (the threads of Dask's scheduler): 130, one line."""
    store = shutil.copytree(gen5k.store, tmp_path / "store")
    code, out, err = _interrupt(["evaluate", str(store)],
                                lambda _: any((store / "matches").glob("protocol=*/.run=default.tmp-*")))
    assert (code, out, err) == (130, "", "evalengine: interrupted\n")


def test_an_interruption_swallowed_by_a_callback_comes_back():
    """A Ctrl-C that lands in a Python callback of C code (numba's LLVM cache) is reported to the unraisable hook;
    the command's hook interrupts the main thread again."""
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)  # ignored when pytest runs in the background
    try:
        with pytest.raises(KeyboardInterrupt):
            _interrupt_again(SimpleNamespace(exc_type=KeyboardInterrupt))
            time.sleep(5)
    finally:
        signal.signal(signal.SIGINT, handler)


def test_an_error_caused_by_an_interruption_is_an_interruption(capsys, monkeypatch):
    """numba reports a KeyboardInterrupt raised in its C code as a SystemError caused by it."""
    def interrupted_in_c(*args, **kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise SystemError("CPUDispatcher(<function _accumulate_kernel>) returned a result with an exception set") \
                from exc

    monkeypatch.setattr(api, "evaluate_coco", interrupted_in_c)
    assert run(capsys, "coco", *GD) == (130, "", ["evalengine: interrupted"])


# -- stdout's reader goes away -------------------------------------------------------------------------------


def test_output_piped_to_a_reader_that_stops(gen5k):
    """``evalengine sql STORE … | head -1``: quiet, exit status 141 (128 + SIGPIPE)."""
    process = subprocess.Popen(command("sql", gen5k.store, "SELECT * FROM gt", "--format", "csv"), env=ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout.readline().startswith(b"gt_id,")
    process.stdout.close()
    err = process.stderr.read()
    assert (process.wait(timeout=120), err) == (141, b"")


def test_output_piped_through_head(gen5k):
    result = subprocess.run(f"{sys.executable} -m evalengine.cli sql {gen5k.store} 'SELECT * FROM gt' --format csv "
                            "| head -2; echo status ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", env=ENV,
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.splitlines()[2] == "status 141" and result.stderr == ""


# -- the scheduler ---------------------------------------------------------------------------------------------


def test_unreachable_scheduler_address(capsys, gen5k, monkeypatch):
    """Nothing listens on port 1: a one-line error after the connect timeout (10 s; 1 s here)."""
    from evalengine.engine import runner

    assert runner.CONNECT_TIMEOUT == "10s"
    monkeypatch.setattr(runner, "CONNECT_TIMEOUT", "1s")
    started = time.monotonic()
    code, out, err = run(capsys, "evaluate", gen5k.store, "--address", "tcp://127.0.0.1:1")
    assert (code, out, err) == (2, "", [f"{ERROR}tcp://127.0.0.1:1: cannot reach the Dask scheduler (Timed out trying "
                                        "to connect to tcp://127.0.0.1:1 after 1 s)"])
    assert time.monotonic() - started < 30


# -- bugs, and --debug ---------------------------------------------------------------------------------------


def _bug(*args, **kwargs):
    raise RuntimeError("something nobody expected\nits second line")


def test_internal_error_is_one_line_with_exit_status_70(capsys, monkeypatch):
    monkeypatch.setattr(api, "evaluate_coco", _bug)
    assert run(capsys, "coco", *GD) == (70, "", [
        "evalengine: internal error: RuntimeError: something nobody expected (run with evalengine --debug for the "
        "traceback; please report it)"])


def test_debug_lets_the_exception_through(capsys, monkeypatch):
    monkeypatch.setattr(api, "evaluate_coco", _bug)
    with pytest.raises(RuntimeError, match="something nobody expected"):
        main(["--debug", "coco", *GD])
    monkeypatch.setenv("EVALENGINE_DEBUG", "1")
    with pytest.raises(RuntimeError, match="something nobody expected"):
        main(["coco", *GD])
    monkeypatch.setenv("EVALENGINE_DEBUG", "0")
    assert main(["coco", *GD]) == 70


def test_debug_shows_the_traceback(tmp_path):
    query = tmp_path / "q.sql"
    query.write_bytes(b"\xff")
    result = subprocess.run(command("--debug", "sql", str(tmp_path / "nowhere"), "--file", str(query)), env=ENV,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and result.stderr.startswith("Traceback (most recent call last):")
    assert result.stderr.rstrip().splitlines()[-1].startswith("evalengine.errors.")


# -- whatever the input: never a traceback ---------------------------------------------------------------------


def test_inputs_with_bugs_left_elsewhere_are_still_one_line(capsys, tmp_path, gen5k):
    """Inputs that another layer does not check yet (an empty proposal list; an empty SQL query) still end in one
    line: the internal-error line (exit 70) until that layer reports them (exit 2)."""
    empty = tmp_path / "proposals.json"
    empty.write_text("[]")
    for argv in (["proposals", "--gt", GT, "--proposals", str(empty)], ["sql", gen5k.store, ""]):
        code, out, err = run(capsys, *argv)
        assert code in (2, 70) and out == "", argv
        assert_one_line(err, ERROR if code == 2 else "evalengine: internal error: ")
