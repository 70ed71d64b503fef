"""Error diagnosis benchmark: TIDE against tidecv on the same files, and the diagnosis tables of a stored run at scale.

Peers (default): each tool in its own process, the tools interleaved (one run of each, then again, ``--repeat``
times), on a generated COCO-shaped set (benchmarks/generate.py):

- ``tidecv``: tidecv 1.0.1, the official TIDE — its ``Data`` built from the two JSON files as its COCO loaders build
  it (boxes only: the generated ground truth has no masks), ``TIDE().evaluate(…, mode=TIDE.BOX)``, its main and
  special errors and counts;
- ``evalengine``: the command ``evalengine tide --gt GT.json --dt DT.json --json``, what a user runs;
- ``evalengine-store``: ``evalengine tide STORE --json`` on the same set ingested once (its pairs and TIDE tables
  removed first, so both are made in the run).

Reports the median wall time (process start to exit) and its range, the largest peak RSS, tidecv's time over each,
and whether each printed tidecv's numbers (ΔAP within 1e-9, counts equal).

Steps (``--steps``): each in its own process on a stored run matched under the COCO protocol (``--store``; its
pairs, TIDE and confusion tables are removed before the step that makes them): ``pairs`` (the pairs table),
``tide`` (the TIDE table from it, then the ΔAP step), ``confusion`` (the confusion table at IoU 0.5 and score 0.05,
then the matrix). Reports wall time, the step's in-process wall and CPU time, its phases and peak RSS.

    python benchmarks/bench_diagnosis.py --images 5000 --repeat 5
    python benchmarks/bench_diagnosis.py --store /work/bench/lrp/lrp_100000img_80cls_100det/store --repeat 2
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_coco import run_child  # noqa: E402
from bench_lrp import Clock  # noqa: E402
from generate import add_size_arguments, generate, write  # noqa: E402

TOOLS = ("tidecv", "evalengine", "evalengine-store")
STEPS = ("pairs", "tide", "confusion")


# --- the children -------------------------------------------------------------------------------------------------

def tidecv_child(gt_path: str, dt_path: str) -> dict:
    """tidecv's numbers for two COCO files (``tidecv.datasets.COCO`` / ``COCOResult``, without masks)."""
    from tidecv import TIDE, Data
    from tidecv.datasets import default_name

    with open(gt_path) as handle:
        gt = json.load(handle)
    with open(dt_path) as handle:
        dt = json.load(handle)
    truth, preds = Data(default_name(gt_path), max_dets=100), Data(default_name(dt_path))
    for image in gt["images"]:
        truth.add_image(image["id"], image["file_name"])
    for category in gt["categories"]:
        truth.add_class(category["id"], category["name"])
    for ann in gt["annotations"]:
        add = truth.add_ignore_region if ann["iscrowd"] else truth.add_ground_truth
        add(ann["image_id"], ann["category_id"], ann["bbox"], None)
    for det in dt:
        preds.add_detection(det["image_id"], det["category_id"], det["score"], det["bbox"], None)
    tide = TIDE()
    run = tide.evaluate(truth, preds, mode=TIDE.BOX)
    name = preds.name
    return {"ap50": run.ap, "main": tide.get_main_errors()[name], "special": tide.get_special_errors()[name],
            "counts": {error.short_name: n for error, n in run.count_errors().items()}}


def _remove(store: Path, prefix: str) -> None:
    """Remove the store's match tables of a protocol family (``protocol=<prefix>…``)."""
    for folder in (store / "matches").glob(f"protocol={prefix}*"):
        shutil.rmtree(folder)


def step_pairs(store: Path, clock: Clock) -> dict:
    from evalengine import api
    from evalengine.engine.planner import match
    from evalengine.match.pairs import PairsProtocol

    opened = api.open(store)
    _remove(store, "pairs")
    clock.start()
    folder = match(opened.layout, api.DEFAULT_RUN, PairsProtocol())
    clock.lap("match")
    rows = sum(_rows(path) for path in (folder / "pairs").rglob("*.parquet"))
    return clock.result(rows=rows)


def _tide_numbers(diagnosis) -> dict:
    """tidecv's ΔAP from the TIDE table, and the error counts."""
    result = diagnosis.result
    return {"ap50": result.ap50, "counts": result.counts}


def _confusion_numbers(result) -> dict:
    """The matrix from the confusion table: its diagonal (background left out) and its total."""
    matrix = result.array()
    return {"diagonal": int(matrix.diagonal()[:-1].sum()), "total": int(matrix.sum())}


# a diagnosis step: its protocol family (the match table and ``api.<family>``), the phase that reads the table, and
# what that phase computes and reports
DIAGNOSES = {"tide": ("delta_ap", _tide_numbers), "confusion": ("matrix", _confusion_numbers)}


def step_diagnosis(store: Path, clock: Clock, family: str) -> dict:
    """``api.<family>(store)`` with its table removed first (phase ``match``), then the phase that reads it."""
    from evalengine import api

    phase, numbers = DIAGNOSES[family]
    opened = api.open(store)
    _remove(store, family)
    clock.start()
    diagnosis = getattr(api, family)(opened)
    clock.lap("match")
    reported = numbers(diagnosis)
    clock.lap(phase)
    return clock.result(**reported)


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


STEP_FUNCTIONS = {"pairs": step_pairs, **{family: partial(step_diagnosis, family=family) for family in DIAGNOSES}}


def _child(args) -> None:
    if args.tool == "tidecv":
        print(json.dumps(tidecv_child(args.gt, args.dt)), flush=True)
        return
    result = STEP_FUNCTIONS[args.step](Path(args.store), Clock())
    print(json.dumps(result), flush=True)
    from evalengine.cli import end_process

    end_process(0)  # as the evalengine command ends


# --- the parent ---------------------------------------------------------------------------------------------------

def run_tool(tool: str, data: Path, max_rss: float) -> dict:
    """One peer in a child process (bench_coco's :func:`run_child`)."""
    gt, dt, store = str(data / "gt.json"), str(data / "dt.json"), data / "store"
    if tool == "tidecv":
        argv = [sys.executable, __file__, "--tool", "tidecv", "--gt", gt, "--dt", dt]
    elif tool == "evalengine":
        argv = [sys.executable, "-m", "evalengine.cli", "tide", "--gt", gt, "--dt", dt, "--json"]
    else:
        _remove(store, "pairs")
        _remove(store, "tide")
        argv = [sys.executable, "-m", "evalengine.cli", "tide", str(store), "--json"]
    return {"tool": tool, **run_child(argv, max_rss)}


def run_step(step: str, store: Path, max_rss: float) -> dict:
    return {"step": step, **run_child([sys.executable, __file__, "--step", step, "--store", str(store)], max_rss)}


def _prepare(data: Path, sizes: tuple) -> None:
    """The generated files and their store (a child: this process must stay small)."""
    if not (data / "dt.json").is_file():
        write(data, *generate(*sizes), parquet=True)
    if not (data / "store" / "manifest.json").is_file():
        import evalengine

        evalengine.ingest_coco(data / "gt.json", data / "dt.parquet", data / "store")


def _same(got: dict, want: dict) -> bool:
    """ΔAP (and AP50) within 1e-9, counts equal."""
    close = all(abs(got[kind][name] - want[kind][name]) <= 1e-9 for kind in ("main", "special") for name in want[kind])
    return close and abs(got["ap50"] - want["ap50"]) <= 1e-9 and got["counts"] == want["counts"]


def _median_row(runs: list, key: str) -> dict:
    """Median times (every ``*_seconds``), the wall range and the largest peak RSS; a failed run wins."""
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]
    walls = sorted(r["wall_seconds"] for r in runs)
    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k.endswith("_seconds")}
    return {**runs[0], **medians, "wall_min": walls[0], "wall_max": walls[-1], "n_runs": len(runs),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in runs), key: runs[0][key]}


def peers(args, max_rss: float) -> str:
    name = f"coco_{args.images}img_{args.classes}cls_{args.dets_per_image}det"
    data = args.out / name
    subprocess.run([sys.executable, __file__, "--prepare", str(data), *_size_argv(args)], check=True)
    run_tool("evalengine", data, max_rss)  # compile and cache the numba kernels, untimed
    runs, load_before = {tool: [] for tool in args.tools}, os.getloadavg()[0]
    for _ in range(args.repeat):
        for tool in args.tools:
            runs[tool].append(run_tool(tool, data, max_rss))
            print(json.dumps(runs[tool][-1]), file=sys.stderr, flush=True)
    rows = {tool: _median_row(runs[tool], "tool") for tool in args.tools}
    reference = rows.get("tidecv")
    lines = [f"### TIDE, {args.images} images, {args.classes} classes, {args.dets_per_image} detections per image "
             f"(median of {args.repeat} interleaved runs, wall range in brackets)", "",
             "| tool | wall s | peak RSS MiB | tidecv ÷ tool (wall) | same numbers as tidecv |",
             "|---|---|---|---|---|"]
    for tool, r in rows.items():
        if "error" in r:
            lines.append(f"| {tool} | – | – | – | {r['error']} |")
            continue
        ok = reference is not None and "error" not in reference
        ratio = f"{reference['wall_seconds'] / r['wall_seconds']:.1f}" if ok else "–"
        pairs = [f"{a['wall_seconds'] / b['wall_seconds']:.1f}" for a, b in zip(runs["tidecv"], runs[tool])
                 if "error" not in a and "error" not in b] if ok and tool != "tidecv" else []
        same = all(_same(b, a) for a, b in zip(runs["tidecv"], runs[tool])) if ok else "–"
        per_run = f" (per run: {', '.join(pairs)})" if pairs else ""
        lines.append(f"| {tool} | {r['wall_seconds']:.2f} [{r['wall_min']:.2f}–{r['wall_max']:.2f}] | "
                     f"{r['peak_rss_mib']:.0f} | {ratio}{per_run} | {same} |")
    lines += ["", f"Load average (1 min) {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on "
              f"{os.cpu_count()} cores."]
    table = "\n".join(lines)
    _save(args.out / f"tide_{name}", table, {"dataset": name, "results": rows, "runs": runs})
    return table


def steps(args, max_rss: float) -> str:
    store = args.store.resolve()
    manifest = json.loads((store / "manifest.json").read_text())
    runs, load_before = {step: [] for step in args.steps}, os.getloadavg()[0]
    for step in args.steps:  # warm-up: compile and cache the kernels, make the tables the next steps read
        run_step(step, store, max_rss)
    for _ in range(args.repeat):
        for step in args.steps:
            runs[step].append(run_step(step, store, max_rss))
            print(json.dumps(runs[step][-1]), file=sys.stderr, flush=True)
    rows = [_median_row(runs[step], "step") for step in args.steps]
    lines = [f"### {store} ({manifest.get('n_shards')} shards; median of {args.repeat} runs, wall range in brackets)",
             "", "| step | wall s | in-process s | in-process CPU s | phases s | peak RSS MiB | result |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['step']} | – | – | – | – | – | {r['error']} |")
            continue
        phases = ", ".join(f"{k.removesuffix('_seconds')} {v:.2f}" for k, v in r.items()
                           if k.endswith("_seconds") and not k.startswith(("wall", "in_process")))
        result = {k: v for k, v in r.items() if k in ("rows", "ap50", "counts", "diagonal", "total")}
        lines.append(f"| {r['step']} | {r['wall_seconds']:.2f} [{r['wall_min']:.2f}–{r['wall_max']:.2f}] | "
                     f"{r['in_process_seconds']:.2f} | {r['in_process_cpu_seconds']:.2f} | {phases} | "
                     f"{r['peak_rss_mib']:.0f} | {json.dumps(result)} |")
    lines += ["", f"Load average (1 min) {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on "
              f"{os.cpu_count()} cores."]
    table = "\n".join(lines)
    _save(args.out / f"diagnosis_{store.parent.name}", table, {"store": str(store), "results": rows, "runs": runs})
    return table


def _save(stem: Path, table: str, payload: dict) -> None:
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".md").write_text(table + "\n")
    stem.with_suffix(".json").write_text(json.dumps(payload, indent=2))


def _size_argv(args) -> list:
    return ["--images", str(args.images), "--classes", str(args.classes), "--gt-per-image", str(args.gt_per_image),
            "--dets-per-image", str(args.dets_per_image), "--seed", str(args.seed)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_arguments(parser)
    parser.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    parser.add_argument("--store", type=Path, default=None, help="run --steps on this COCO-matched store instead")
    parser.add_argument("--steps", nargs="+", default=list(STEPS), choices=STEPS)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tool or step, interleaved: median, range")
    parser.add_argument("--max-rss-gib", type=float, default=21.0)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--tool", choices=["tidecv"], help=argparse.SUPPRESS)
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)
    parser.add_argument("--gt", help=argparse.SUPPRESS)
    parser.add_argument("--dt", help=argparse.SUPPRESS)
    parser.add_argument("--prepare", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tool or args.step:
        return _child(args)
    if args.prepare:
        return _prepare(args.prepare, (args.images, args.classes, args.gt_per_image, args.dets_per_image, args.seed))
    max_rss = args.max_rss_gib * 2**30
    started = time.perf_counter()
    print(steps(args, max_rss) if args.store else peers(args, max_rss))
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
