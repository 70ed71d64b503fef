"""One-shot COCO bbox from JSON, cold and warm, against the peers in the same run (issue 17 items 3 and 4).

- **cold**: the whole process (``run_tool.py TOOL GT DT``; for evalengine ``python -m evalengine.cli coco --json``,
  the command as a user runs it), start to exit: imports, numba's runtime start, parsing, matching, metrics.
- **warm**: one process evaluating the same files ``--calls`` times (evalengine: ``evaluate_coco(gt, dt).stats()``,
  the notebook case; a peer: its whole evaluation, as ``run_tool.py`` drives it), the second call timed.

Each tool runs in its own process on the files of ``bench_coco.py`` (generated once), the 12 numbers are checked
against the first evalengine row (≤ 1e-12); wall time, CPU time (user + system of every thread, and of children)
and peak RSS are reported. The peers are ``run_tool.TOOLS``' (the installed ones).

    python benchmarks/bench_oneshot.py --images 5000 --repeat 3
    python benchmarks/bench_oneshot.py --images 50000 --tools evalengine hotcoco ultrafast-pycocotools vernier
"""

import argparse
import importlib.util
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_coco import compile_bytecode, run_child  # noqa: E402
from generate import add_size_arguments, generate, write  # noqa: E402

PEERS = {"hotcoco": "hotcoco", "ultrafast-pycocotools": "ultrafast_pycocotools", "vernier": "vernier",
         "faster-coco-eval": "faster_coco_eval", "pycocotools": "pycocotools"}
DEFAULT_TOOLS = ["evalengine", "hotcoco", "ultrafast-pycocotools", "vernier"]
BASELINE = " (baseline)"  # evalengine run by --baseline-python: another checkout, in the same run


def _cpu_seconds() -> float:
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def warm_child(tool: str, gt: str, dt: str, calls: int) -> None:
    """In this process: ``calls`` whole evaluations of the same files; print each call's wall and CPU time."""
    if tool == "evalengine":
        import evalengine

        def evaluate():
            return evalengine.evaluate_coco(gt, dt).stats()
    else:
        from run_tool import TOOLS

        def evaluate():
            return TOOLS[tool](gt, dt, "bbox")
    times = []
    for _ in range(calls):
        wall, cpu = time.perf_counter(), _cpu_seconds()
        stats = evaluate()
        times.append({"wall": time.perf_counter() - wall, "cpu": _cpu_seconds() - cpu})
    print(json.dumps({"tool": tool, "stats": [float(s) for s in stats], "calls": times}), flush=True)
    if tool == "evalengine":
        from evalengine.cli import end_process

        end_process(0)


def _cold(tool: str, gt: Path, dt: Path, max_rss: float, python: str = sys.executable) -> dict:
    """evalengine: the ``evalengine coco`` command itself (its ``--json`` line holds the 12 numbers); a peer: its
    whole evaluation in ``run_tool.py``."""
    argv = ([python, "-m", "evalengine.cli", "coco", "--gt", str(gt), "--dt", str(dt), "--json", "--quiet"]
            if tool.startswith("evalengine") else [python, str(HERE / "run_tool.py"), tool, str(gt), str(dt), "bbox"])
    return {"tool": tool, **run_child(argv, max_rss)}


def _warm(tool: str, gt: Path, dt: Path, max_rss: float, calls: int, python: str = sys.executable) -> dict:
    result = run_child([python, __file__, "--warm-child", tool.removesuffix(BASELINE), str(gt), str(dt), str(calls)],
                       max_rss)
    if "error" in result:
        return {"tool": tool, **result}
    second = result["calls"][-1]
    return {**result, "warm_wall": second["wall"], "warm_cpu": second["cpu"]}


def runnable(tools: list) -> list:
    """The tools installed and known to ``run_tool.py``."""
    from run_tool import TOOLS

    return [t for t in tools if t in TOOLS and importlib.util.find_spec(PEERS.get(t, "evalengine")) is not None]


def _median(runs: list, key: str) -> float:
    return statistics.median(r[key] for r in runs)


def table(cold: dict, warm: dict, title: str) -> str:
    """The Markdown table: per tool the median cold and warm figures and the 12 numbers' agreement."""
    ours = cold.get("evalengine", [{}])[0].get("stats")
    lines = [title, "", "| tool | cold wall s | cold CPU s | cold peak RSS MiB | warm 2nd call wall s | warm 2nd call CPU s "
             "| warm peak RSS MiB | same 12 stats (≤1e-12) |", "|---|---|---|---|---|---|---|---|"]
    for tool in cold:
        failed = [r["error"] for r in cold[tool] + warm[tool] if "error" in r]
        if failed:
            lines.append(f"| {tool} | – | – | – | – | – | – | {failed[0]} |")
            continue
        stats = [r["stats"] for r in cold[tool] + warm[tool]]
        same = "–" if ours is None else str(all(max(abs(a - b) for a, b in zip(s, ours)) <= 1e-12 for s in stats))
        lines.append(f"| {tool} | {_median(cold[tool], 'wall_seconds'):.2f} | {_median(cold[tool], 'cpu_seconds'):.2f} "
                     f"| {max(r['peak_rss_mib'] for r in cold[tool]):.0f} | {_median(warm[tool], 'warm_wall'):.2f} "
                     f"| {_median(warm[tool], 'warm_cpu'):.2f} | {max(r['peak_rss_mib'] for r in warm[tool]):.0f} "
                     f"| {same} |")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--warm-child"]:
        return warm_child(argv[1], argv[2], argv[3], int(argv[4]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_arguments(parser)
    parser.add_argument("--tools", nargs="+", default=DEFAULT_TOOLS, choices=["evalengine", *PEERS])
    parser.add_argument("--repeat", type=int, default=1, help="cold and warm runs of each tool (interleaved)")
    parser.add_argument("--calls", type=int, default=2, help="evaluations per warm process (the last one is timed)")
    parser.add_argument("--max-rss-gib", type=float, default=21.0)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--baseline-python", default=None, metavar="PYTHON",
                        help="also run evalengine with this interpreter (an environment with an earlier checkout)")
    args = parser.parse_args(argv)

    data = args.out / f"coco_{args.images}img_{args.classes}cls_{args.dets_per_image}det"
    if not (data / "dt.json").is_file():
        write(data, *generate(args.images, args.classes, args.gt_per_image, args.dets_per_image, args.seed),
              parquet=True)
    compile_bytecode()
    gt, dt, max_rss = data / "gt.json", data / "dt.json", args.max_rss_gib * 2**30
    tools = runnable(args.tools)
    pythons = {tool: sys.executable for tool in tools}
    if args.baseline_python:
        pythons["evalengine" + BASELINE] = args.baseline_python
    for tool, python in pythons.items():
        if tool.startswith("evalengine"):
            _cold(tool, gt, dt, max_rss, python)  # numba's cache, compiled once
    tools = list(pythons)
    load = [os.getloadavg()[0]]
    cold, warm = {tool: [] for tool in tools}, {tool: [] for tool in tools}
    for _ in range(args.repeat):
        for tool in tools:
            cold[tool].append(_cold(tool, gt, dt, max_rss, pythons[tool]))
            warm[tool].append(_warm(tool, gt, dt, max_rss, args.calls, pythons[tool]))
            print(json.dumps({"cold": cold[tool][-1], "warm": warm[tool][-1]}), file=sys.stderr, flush=True)
    load.append(os.getloadavg()[0])
    import pyarrow.parquet as pq

    n_dets = pq.ParquetFile(data / "dt.parquet").metadata.num_rows
    title = (f"### one-shot, {args.images} images, {n_dets} detections, {args.classes} classes "
             f"(median of {args.repeat}; load average {load[0]:.1f} → {load[1]:.1f}; missing: "
             f"{', '.join(sorted(set(args.tools) - set(tools))) or 'none'})")
    text = table(cold, warm, title)
    print(text)
    out = args.out / f"oneshot_{args.images}img"
    out.with_suffix(".md").write_text(text + "\n")
    out.with_suffix(".json").write_text(json.dumps({"cold": cold, "warm": warm, "n_detections": n_dets, "load": load},
                                                   indent=2))


if __name__ == "__main__":
    main()
