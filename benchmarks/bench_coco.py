"""End-to-end COCO bbox benchmark: each tool in its own process on the same files, 12 stats out.

Tools: ``evalengine`` (COCO JSON in), ``evalengine-parquet`` (Parquet detections in),
``evalengine-store`` (an already ingested store: matching and metrics only), ``evalengine-compat`` (the pycocotools
drop-in, driven as pycocotools), ``pycocotools``,
``faster-coco-eval``, ``hotcoco``, ``ultrafast-pycocotools`` (COCO JSON in, driven as pycocotools) and ``vernier``
(its native evaluator on the files' bytes, strict parity, every core). Reports wall time (process start to exit, what
a user waits for), in-process time, peak RSS, the ratio to evalengine and whether each tool printed the
same 12 numbers (|diff| <= 1e-12) as pycocotools (as the first evalengine row where pycocotools was not run), and its
CPU time (user + system, of every thread: steadier than wall time on a shared machine). A tool whose RSS passes
``--max-rss-gib`` is stopped and reported so.

    python benchmarks/bench_coco.py --images 5000
    python benchmarks/bench_coco.py --images 100000 --classes 500 --tools evalengine-parquet hotcoco
    python benchmarks/bench_coco.py --shape objects365 --tools evalengine hotcoco vernier ultrafast-pycocotools
"""

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from generate import add_size_arguments, generate, parse_sizes, write  # noqa: E402

MODULES = {"evalengine": "evalengine", "evalengine-parquet": "evalengine", "evalengine-store": "evalengine",
           "evalengine-compat": "evalengine", "pycocotools": "pycocotools", "faster-coco-eval": "faster_coco_eval", "hotcoco": "hotcoco",
           "ultrafast-pycocotools": "ultrafast_pycocotools", "vernier": "vernier"}


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_child(argv: list, max_rss: float) -> dict:
    """Run ``argv`` in a child process and return the JSON object its last stdout line prints, with its wall time and
    peak RSS (from wait4, KiB on Linux); with ``"error"`` when the child failed or passed ``max_rss`` (it is killed)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killed, reaped = threading.Event(), threading.Event()

    def watch():  # never polls the child: that would reap it before wait4 reads its resource usage
        while not reaped.wait(0.2):
            if _rss_bytes(proc.pid) > max_rss:
                killed.set()
                proc.kill()

    threading.Thread(target=watch, daemon=True).start()
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    reaped.set()
    figures = {"wall_seconds": time.perf_counter() - started, "cpu_seconds": usage.ru_utime + usage.ru_stime,
               "peak_rss_mib": usage.ru_maxrss / 1024}  # a failed run's too: how far it got
    if killed.is_set():
        return {"error": f"stopped: RSS above {max_rss / 2**30:.0f} GiB", **figures}
    if os.waitstatus_to_exitcode(status):
        text = err.decode().strip()
        return {"error": text.splitlines()[-1] if text else f"exit status {status}", **figures}
    return {**json.loads(out.decode().strip().splitlines()[-1]), **figures}


def run(tool: str, gt: Path, dt: Path, max_rss: float, iou_type: str = "bbox") -> dict:
    """Run one tool in a child process (:func:`run_child`). A store's match tables are removed first, so that
    ``evalengine-store`` always matches."""
    if tool == "evalengine-store":
        shutil.rmtree(dt / "matches", ignore_errors=True)
    result = run_child([sys.executable, str(HERE / "run_tool.py"), tool, str(gt), str(dt), iou_type], max_rss)
    return {"tool": tool, **result} if "error" in result else result


def run_tools(tools: list, gt: Path, input_of, args, iou_type: str = "bbox") -> tuple:
    """Every installed tool ``args.repeat`` times, in turn, after one untimed evalengine run (numba's cache):
    ``(rows of _summary, every run by tool)``."""
    runnable = []
    results = {}
    for tool in tools:
        if importlib.util.find_spec(MODULES[tool]) is None:
            results[tool] = [{"tool": tool, "error": "not installed"}]
        else:
            runnable.append(tool)
    first = next((t for t in runnable if t.startswith("evalengine")), None)
    if first:
        run(first, gt, input_of(first), args.max_rss_gib * 2**30, iou_type)  # compile and cache numba's kernels
    for _ in range(args.repeat):
        for tool in runnable:
            if "error" in (results.get(tool) or [{}])[-1]:
                continue
            results.setdefault(tool, []).append(run(tool, gt, input_of(tool), args.max_rss_gib * 2**30, iou_type))
            print(json.dumps(results[tool][-1]), file=sys.stderr, flush=True)
    return [_summary(results[tool]) for tool in tools], results


def compile_bytecode() -> None:
    """Byte-compile the installed packages and evalengine, as pip does on install: where they are not (uv installs
    without, and PYTHONDONTWRITEBYTECODE keeps Python from caching them), every child compiles its imports again
    (~3 s for evalengine's, Polars' and numba's), a cost no installed tool pays. Quick once they are compiled."""
    import compileall
    import sysconfig

    for folder in sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], str(HERE.parent / "evalengine")}):
        compileall.compile_dir(folder, quiet=2, workers=0)


def _prepare(args, data: Path) -> None:
    compile_bytecode()
    if not (data / "dt.parquet").is_file():
        write(data, *generate(args.images, args.classes, args.gt_per_image, args.dets_per_image, args.seed),
              parquet=True)
    if "evalengine-store" in args.tools and not (data / "store" / "manifest.json").is_file():
        import evalengine

        evalengine.ingest_coco(data / "gt.json", data / "dt.parquet", data / "store")


def add_run_arguments(parser: argparse.ArgumentParser, tools: list) -> None:
    """The runner's options, shared by this folder's benchmarks: tools, RSS limit, repeats, output folder."""
    parser.add_argument("--tools", nargs="+", default=tools, choices=tools)
    parser.add_argument("--max-rss-gib", type=float, default=21.0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every tool this many times, in turn (this VM's timings drift): median and range")
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--prepare-only", action="store_true", help=argparse.SUPPRESS)


def prepare_in_child(script: str, argv) -> None:
    """``script --prepare-only`` with this command's arguments: data are prepared in a child, since a forked child's
    peak RSS counts this process's pages until it execs, and this process must stay small for the peers' peak RSS to
    be theirs."""
    subprocess.run([sys.executable, script, "--prepare-only", *(argv if argv is not None else sys.argv[1:])],
                   check=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_arguments(parser)
    add_run_arguments(parser, list(MODULES))
    args = parse_sizes(parser, argv)

    name = f"coco_{args.images}img_{args.classes}cls_{args.dets_per_image}det"
    data = args.out / name
    if args.prepare_only:
        _prepare(args, data)
        return
    prepare_in_child(__file__, argv)
    import pyarrow.parquet as pq

    n_dets = pq.ParquetFile(data / "dt.parquet").metadata.num_rows
    gt_path = data / "gt.json"
    inputs = {"evalengine": data / "dt.json", "evalengine-parquet": data / "dt.parquet",
              "evalengine-store": data / "store"}

    rows, results = run_tools(args.tools, gt_path, lambda tool: inputs.get(tool, data / "dt.json"), args)
    write_table(rows, f"### {args.images} images, {args.classes} classes, {n_dets} detections", args.repeat,
                args.out / name, {"dataset": name, "n_detections": n_dets, "runs": results})


def write_table(rows: list, title: str, repeat: int, out: Path, extra: dict) -> None:
    """Print the Markdown table of :func:`_summary` rows (ratios and 12-number agreement against the first evalengine
    row) and write it to ``out.md``, with a JSON copy (``extra`` and the rows) to ``out.json``."""
    ours = next((r for r in rows if r["tool"].startswith("evalengine") and "stats" in r), None)
    reference = next((r for r in rows if r["tool"] == "pycocotools" and "stats" in r), ours)
    lines = [title + (f" (median of {repeat} runs, range in brackets)" if repeat > 1 else ""), "",
             "| tool | wall s | in-process s | CPU s | peak RSS MiB | wall ÷ first evalengine | CPU ÷ first evalengine "
             f"| same 12 stats as {reference['tool'] if reference else '–'} (≤1e-12) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(failed_row(r))
            continue
        ratio = r["wall_seconds"] / ours["wall_seconds"] if ours else float("nan")
        cpu_ratio = r["cpu_seconds"] / ours["cpu_seconds"] if ours else float("nan")
        same = "–" if not reference else str(max(abs(a - b) for a, b in zip(r["stats"], reference["stats"])) <= 1e-12)
        spread = f" [{r['wall_min']:.2f}–{r['wall_max']:.2f}]" if repeat > 1 else ""
        lines.append(f"| {r['tool']} | {r['wall_seconds']:.2f}{spread} | {r['in_process_seconds']:.2f} | "
                     f"{r['cpu_seconds']:.2f} | {r['peak_rss_mib']:.0f} | {ratio:.2f} | {cpu_ratio:.2f} | {same} |")
    table = "\n".join(lines)
    print(table)
    out.with_suffix(".md").write_text(table + "\n")
    out.with_suffix(".json").write_text(json.dumps({**extra, "results": rows}, indent=2))


def failed_row(r: dict) -> str:
    """The table row of a failed run: its figures up to the failure (none where it never ran) and its error."""
    got = (f"{r['wall_seconds']:.2f} | – | {r['cpu_seconds']:.2f} | {r['peak_rss_mib']:.0f}" if "wall_seconds" in r
           else "– | – | – | –")
    return f"| {r['tool']} | {got} | – | – | failed: {r['error']} |"


def _summary(runs: list) -> dict:
    """One row per tool: median wall and in-process time, their range, the largest peak RSS; a failed run wins."""
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]
    walls = sorted(r["wall_seconds"] for r in runs)
    return {**runs[0], "wall_seconds": statistics.median(walls), "wall_min": walls[0], "wall_max": walls[-1],
            "in_process_seconds": statistics.median(r["in_process_seconds"] for r in runs),
            "cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in runs), "n_runs": len(runs)}


if __name__ == "__main__":
    main()
