"""LVIS federated benchmark: each tool in its own process on the same files, lvis-api's 13 results out.

An LVIS-shaped dataset (``lvis_generate``): 1,203 classes with LVIS v1's frequency mix (337 rare, 461 common, 405
frequent; a frequent class is far more often on an image, some rare classes on one image only), ~12 objects per image,
every image with ``neg_category_ids`` (Poisson 8, categories it lacks) and ``not_exhaustive_category_ids`` (about one
in ten of its categories), no crowd, and ``--dets-per-image`` results per image (300: LVIS's cap) over its categories
and any others. Tools: ``evalengine`` (the ``evalengine lvis --gt --dt`` command itself, JSON in, its process
started as the console script starts it), ``evalengine-store`` (the command on a store made by ``ingest_lvis``:
matching and metrics only), ``lvis-api`` (0.5.3, ``np.float`` lent as ``float``) and ``hotcoco`` (``COCOeval(...,
lvis_style=True)``). Wall time, in-process time (the peers'), peak RSS, the ratio to the first evalengine, and
CPU time (every thread's, imports included: on a shared, loaded machine the wall time is mostly waiting), and
whether the 13 results equal the first evalengine's (|diff| <= 1e-12, by ``get_results`` key).

    python benchmarks/bench_lvis.py --images 20000 --tools evalengine evalengine-store hotcoco
    python benchmarks/bench_lvis.py --images 1000            # every tool, lvis-api included
    python benchmarks/bench_lvis.py --images 20000 --tools evalengine evalengine-store hotcoco lvis-api \
        --max-rss-gib 18 --lvis-api-as-gib 18                # lvis-api under prlimit --as (it needs more at 20k)
    python benchmarks/bench_lvis.py --images 20000 --tools evalengine hotcoco --repeat 3 \
        --baseline-path /tmp/base                           # also an earlier checkout's evalengine, interleaved

``--repeat N`` runs the tools in turn N times (medians of wall, in-process and CPU time; the largest peak RSS; the 13
results compared on every run); ``--baseline-path CHECKOUT`` adds ``evalengine (baseline)``: the one-shot of another
checkout (``git worktree add CHECKOUT COMMIT``) on ``PYTHONPATH``, same interpreter, in the same turns.
"""

import argparse
import contextlib
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_coco import _summary, compile_bytecode, failed_row, run_child  # noqa: E402
from generate import generate, write  # noqa: E402

TOOLS = ("evalengine", "evalengine-store", "lvis-api", "hotcoco")
BASELINE = "evalengine (baseline)"  # --baseline-path: another checkout's one-shot, in the same run
FREQUENCY_MIX = (("r", 337, 1.0), ("c", 461, 12.0), ("f", 405, 150.0))  # LVIS v1: count and a relative weight


def lvis_generate(n_images: int, dets_per_image: int, seed: int = 0):
    """COCO-shaped tables from :func:`generate.generate`, made LVIS-shaped (the module's description)."""
    rng = np.random.default_rng(seed + 1)
    images, annotations, categories, detections = generate(n_images, 1203, 12.3, dets_per_image, seed)
    frequency = np.concatenate([[f] * n for f, n, _ in FREQUENCY_MIX])
    weight = np.concatenate([[w] * n for _, n, w in FREQUENCY_MIX])
    # ground-truth classes by frequency (the detections' classes follow theirs: generate copies them)
    remap = rng.choice(1203, size=1203 + 1, p=weight / weight.sum()) + 1
    annotations = annotations.with_columns(pl.Series("category_id", remap[annotations["category_id"].to_numpy()]),
                                           pl.lit(0).alias("iscrowd"))
    detections = detections.with_columns(pl.Series("category_id", remap[detections["category_id"].to_numpy()]))
    present = annotations.group_by("image_id").agg(pl.col("category_id").unique().alias("present"))
    images = images.join(present, left_on="id", right_on="image_id", how="left", maintain_order="left")
    negatives, not_exhaustive = [], []
    for has in images["present"].to_list():
        has = set(has or [])
        negatives.append([int(c) for c in rng.choice(1203, rng.poisson(8)) + 1 if c not in has])
        not_exhaustive.append([int(c) for c in sorted(has) if rng.random() < 0.1])
    images = images.drop("present").with_columns(pl.Series("neg_category_ids", negatives),
                                                 pl.Series("not_exhaustive_category_ids", not_exhaustive))
    categories = categories.with_columns(pl.Series("frequency", frequency))
    return images, annotations, categories, detections


def _lvis_api(gt: str, dt: str) -> dict:
    import lvis

    np.float = float  # lvis-api's accumulate calls np.float (NumPy < 1.24), this process only
    with contextlib.redirect_stdout(io.StringIO()):
        ev = lvis.LVISEval(gt, dt, "bbox")
        ev.run()
    return {k: float(v) for k, v in ev.get_results().items()}


def _hotcoco(gt: str, dt: str) -> dict:
    from hotcoco import COCO, COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO(gt)
        ev = COCOeval(coco_gt, coco_gt.load_res(dt), "bbox", lvis_style=True)
        ev.run()
    return {k: float(v) for k, v in ev.get_results().items()}


def child(tool: str, gt: str, dt: str) -> None:
    """A peer's run in this process: its results and in-process time as a JSON line."""
    started = time.perf_counter()
    stats = (_lvis_api if tool == "lvis-api" else _hotcoco)(gt, dt)
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread's CPU time, imports included
    print(json.dumps({"tool": tool, "stats": stats, "in_process_seconds": time.perf_counter() - started,
                      "cpu_seconds": usage.ru_utime + usage.ru_stime}), flush=True)


def command(gt: str, dt: str) -> list:
    """``evalengine lvis`` itself (``python -m evalengine.cli``: the console script's process, its start-up included);
    its ``--json`` line holds the 13 results. ``dt``: a result file, or a store (``evalengine-store``)."""
    inputs = ["--gt", gt, "--dt", dt] if dt.endswith(".json") else [dt]
    return ["-m", "evalengine.cli", "lvis", *inputs, "--json", "--quiet"]


def _prepare(data: Path, images: int, dets_per_image: int, store: bool) -> None:
    compile_bytecode()
    if not (data / "dt.json").is_file():
        write(data, *lvis_generate(images, dets_per_image))
    if store and not (data / "store" / "manifest.json").is_file():
        from evalengine.api import ingest_lvis

        ingest_lvis(data / "gt.json", data / "dt.json", data / "store")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--dets-per-image", type=int, default=300)
    parser.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    parser.add_argument("--max-rss-gib", type=float, default=12.0)
    parser.add_argument("--lvis-api-as-gib", type=float, default=None, metavar="GIB",
                        help="run lvis-api under prlimit --as (its address space; at 20k images it may not fit)")
    parser.add_argument("--no-warm-up", action="store_true",
                        help="numba's kernels are already compiled and cached (a run of this script did it)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tool, interleaved (medians)")
    parser.add_argument("--baseline-path", type=Path, default=None, metavar="CHECKOUT",
                        help="also run the one-shot of this checkout (on PYTHONPATH), in the same turns")
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--child", nargs=3, metavar=("TOOL", "GT", "DT"), help=argparse.SUPPRESS)
    parser.add_argument("--prepare-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(*args.child)
    name = f"lvis_{args.images}img_{args.dets_per_image}det"
    data = args.out / name
    if args.prepare_only:
        return _prepare(data, args.images, args.dets_per_image, "evalengine-store" in args.tools)
    # prepared in a child, so that this process stays small (a forked child's peak RSS counts its pages)
    subprocess.run([sys.executable, __file__, "--prepare-only", *(argv if argv is not None else sys.argv[1:])],
                   check=True)
    tools = [*args.tools, *([BASELINE] if args.baseline_path else [])]
    inputs = {tool: str(data / ("store" if tool == "evalengine-store" else "dt.json")) for tool in tools}

    def run(tool: str) -> dict:
        if tool == "evalengine-store":
            shutil.rmtree(data / "store" / "matches", ignore_errors=True)
        limit = (["prlimit", f"--as={int(args.lvis_api_as_gib * 2**30)}"]
                 if tool == "lvis-api" and args.lvis_api_as_gib else [])
        checkout = ["env", f"PYTHONPATH={args.baseline_path.resolve()}"] if tool == BASELINE else []  # exec: same pid
        gt = str(data / "gt.json")
        argv = [*limit, *checkout, sys.executable, *(command(gt, inputs[tool]) if tool.startswith("evalengine")
                                                     else [__file__, "--child", tool, gt, inputs[tool]])]
        result = {**run_child(argv, args.max_rss_gib * 2**30), "tool": tool}
        result.pop("per_class", None)
        return {"in_process_seconds": float("nan"), **result}  # the command's own: not timed apart

    for tool in tools:
        if tool.startswith("evalengine") and not args.no_warm_up:  # numba's kernels compiled and cached, untimed
            run(tool)
    load = [os.getloadavg()[0]]
    runs = {tool: [] for tool in tools}
    for _ in range(args.repeat):
        for tool in tools:
            runs[tool].append(run(tool))
            print(json.dumps(runs[tool][-1]), file=sys.stderr, flush=True)
    load.append(os.getloadavg()[0])
    first = next((t for t in tools if t.startswith("evalengine")), None)
    rows = [_summary(runs[tool]) for tool in tools]
    ours = next((r for r in rows if r["tool"] == first and "stats" in r), None)
    lines = [f"### LVIS-shaped: {args.images} images, 1203 classes, {args.dets_per_image} results per image "
             f"(median of {args.repeat}; load average {load[0]:.1f} → {load[1]:.1f})", "",
             "| tool | wall s | in-process s | CPU s | peak RSS MiB | wall ÷ first evalengine | CPU ÷ first evalengine "
             "| same 13 results (≤1e-12) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(failed_row(r))
            continue
        same = "–" if not ours else str(all(one["stats"].keys() == ours["stats"].keys() and max(
            abs(one["stats"][k] - v) for k, v in ours["stats"].items()) <= 1e-12 for one in runs[r["tool"]]))
        ratio = r["wall_seconds"] / ours["wall_seconds"] if ours else float("nan")
        cpu_ratio = r["cpu_seconds"] / ours["cpu_seconds"] if ours else float("nan")
        in_process = "–" if np.isnan(r["in_process_seconds"]) else f"{r['in_process_seconds']:.2f}"
        lines.append(f"| {r['tool']} | {r['wall_seconds']:.2f} | {in_process} | "
                     f"{r['cpu_seconds']:.2f} | {r['peak_rss_mib']:.0f} | {ratio:.2f} | {cpu_ratio:.2f} | {same} |")
    table = "\n".join(lines)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.md").write_text(table + "\n")
    (args.out / f"{name}.json").write_text(json.dumps({"dataset": name, "results": rows, "runs": runs, "load": load},
                                                     indent=2))


if __name__ == "__main__":
    main()
