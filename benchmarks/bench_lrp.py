"""LRP, operating points and VOC from a stored match table: each step in its own process on one ingested store.

The store is generated (benchmarks/generate.py), ingested and matched under the COCO protocol once; then each step
reads that match table: ``accumulate`` (pycocotools ``accumulate``, the reference), ``lrp-rank`` / ``lrp-score`` /
``lrp-grid`` (oLRP of every category and area range by each search), ``points`` (precision, recall, F1 and LRP of
every category at every distinct score, the LRP- and F1-optimal thresholds, the detections kept at the LRP ones) and
``voc`` (VOC matching, VOC2010+ and VOC2007 AP, and oLRP on the VOC match table where the VOC evaluation has
``lrp()``). ``ingest`` and ``match`` are measured once, outside the comparison (``ingest`` when the store is made:
remove its folder to measure it again; ``match`` on every run). Reports wall time (process start to
exit), in-process wall and CPU time (the step's work alone), peak RSS (bench_coco's watcher: a step whose RSS passes
``--max-rss-gib`` is stopped and reported so) and the ratios to ``accumulate``. The numba kernels are compiled on a
small store first, untimed.

    python benchmarks/bench_lrp.py --images 50000
    python benchmarks/bench_lrp.py --images 100000 --out /work/bench/lrp --repeat 3
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_coco import run_child  # noqa: E402
from generate import add_size_arguments, generate, write  # noqa: E402

STEPS = ("accumulate", "lrp-rank", "lrp-score", "lrp-grid", "points", "voc")
ONCE = ("ingest", "match")
WARM_UP_IMAGES = 2000


def run(step: str, data: Path, max_rss: float) -> dict:
    """Run one step in a child process (this script with ``--step``; bench_coco's :func:`run_child`)."""
    return {**run_child([sys.executable, __file__, "--step", step, "--data", str(data)], max_rss), "step": step}


# --- the steps, in the child ------------------------------------------------------------------------------------

class Clock:
    """The step's work alone: wall and CPU time from ``start()`` (after imports and setup); ``lap(name)`` records
    a phase's wall time as ``<name>_seconds``."""

    def start(self) -> None:
        self.wall, self.cpu, self.mark, self.laps = time.perf_counter(), time.process_time(), time.perf_counter(), {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[f"{name}_seconds"], self.mark = now - self.mark, now

    def result(self, **facts) -> dict:
        return {**facts, **self.laps, "in_process_seconds": time.perf_counter() - self.wall,
                "in_process_cpu_seconds": time.process_time() - self.cpu}


def _evaluation(store: Path):
    """The stored run's COCO evaluation, its match table reused (none is made here)."""
    from evalengine import api

    opened = api.open(store)
    protocol = api.CocoProtocol()
    if not (opened.layout.paths.matches_dir(protocol.match_key(), api.DEFAULT_RUN) / "protocol.json").is_file():
        raise SystemExit(f"{store}: no COCO match table (run the match step first)")
    return opened.evaluate(protocol)


def step_ingest(data: Path, clock: Clock) -> dict:
    from evalengine import api

    clock.start()
    api.ingest_coco(data / "gt.json", data / "dt.parquet", data / "store", overwrite=True)
    return clock.result()


def step_match(data: Path, clock: Clock) -> dict:
    from evalengine import api

    store = api.open(data / "store")
    protocol = api.CocoProtocol()
    shutil.rmtree(store.layout.paths.matches_dir(protocol.match_key(), api.DEFAULT_RUN), ignore_errors=True)
    clock.start()
    store.evaluate(protocol)
    return clock.result()


def step_accumulate(data: Path, clock: Clock) -> dict:
    evaluation = _evaluation(data / "store")
    clock.start()
    return clock.result(stats=evaluation.stats()[:2])


def _step_lrp(search: str):
    def step(data: Path, clock: Clock) -> dict:
        evaluation = _evaluation(data / "store")
        clock.start()
        summary = evaluation.lrp(search=search).summary()
        return clock.result(olrp=summary["olrp"], olrp_small=summary["olrp_small"],
                            thresholds={k: v["threshold"] for k, v in summary["per_class"].items()})
    return step


def step_points(data: Path, clock: Clock) -> dict:
    from evalengine.metrics.operating_points import optimal_thresholds

    evaluation = _evaluation(data / "store")
    clock.start()
    points = evaluation.operating_points()
    clock.lap("points")
    best = optimal_thresholds(points, "lrp")
    optimal_thresholds(points, "f1")
    clock.lap("thresholds")
    kept = evaluation.kept_detections(best).select("score").collect().height
    clock.lap("kept")
    return clock.result(n_points=points.height, n_kept=kept,
                        thresholds={str(c): t for c, t in best.select("category_id", "threshold").iter_rows()})


def step_voc(data: Path, clock: Clock) -> dict:
    """VOC matching (its match table removed first), VOC2010+ and VOC2007 AP, and oLRP on the VOC match table where
    the VOC evaluation has it."""
    from evalengine import api

    if not hasattr(api, "VocEvaluation"):
        raise SystemExit("not available: the VOC protocol is not on this branch (api.VocEvaluation)")
    store = api.open(data / "store")
    protocol = api.VocProtocol()
    shutil.rmtree(store.layout.paths.matches_dir(protocol.match_key(), api.DEFAULT_RUN), ignore_errors=True)
    clock.start()
    evaluation = api.VocEvaluation(store.layout, api.DEFAULT_RUN, protocol, store.match(protocol, api.DEFAULT_RUN))
    clock.lap("match")
    facts = {"map_voc12": evaluation.mean_ap("voc12")[0]}
    clock.lap("voc12")
    facts["map_voc07"] = evaluation.mean_ap("voc07")[0]
    clock.lap("voc07")
    if hasattr(evaluation, "lrp"):  # the hook for oLRP on the VOC match table
        facts["olrp"] = evaluation.lrp().summary()["olrp"]
        clock.lap("lrp")
    return clock.result(**facts)


STEP_FUNCTIONS = {"ingest": step_ingest, "match": step_match, "accumulate": step_accumulate,
                  "lrp-rank": _step_lrp("rank"), "lrp-score": _step_lrp("score"), "lrp-grid": _step_lrp("grid"),
                  "points": step_points, "voc": step_voc}


def _child(step: str, data: Path) -> None:
    result = STEP_FUNCTIONS[step](data, Clock())
    print(json.dumps(result), flush=True)
    from evalengine.cli import end_process

    end_process(0)  # as the evalengine command ends


# --- the parent ---------------------------------------------------------------------------------------------------

def _prepare(data: Path, sizes: tuple) -> None:
    """Generate ``gt.json`` and ``dt.parquet`` unless they exist (a child: this process must stay small)."""
    if not (data / "dt.parquet").is_file():
        write(data, *generate(*sizes), parquet=True)
        (data / "dt.json").unlink()  # not read here


def _warm_up(out: Path, args, max_rss: float) -> None:
    """Compile and cache every numba kernel on a small store, untimed."""
    data = out / f"warmup_{WARM_UP_IMAGES}img"
    subprocess.run([sys.executable, __file__, "--prepare", str(data), "--images", str(WARM_UP_IMAGES),
                    "--classes", str(args.classes)], check=True)
    for step in ("ingest", "match", *args.steps):
        if step == "ingest" and (data / "store" / "manifest.json").is_file():
            continue
        run(step, data, max_rss)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_arguments(parser)
    parser.add_argument("--steps", nargs="+", default=list(STEPS), choices=STEPS)
    parser.add_argument("--max-rss-gib", type=float, default=21.0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every step this many times, in turn (this VM's timings drift): median and range")
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--step", choices=[*ONCE, *STEPS], help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--prepare", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.step:
        return _child(args.step, args.data)
    if args.prepare:
        return _prepare(args.prepare, (args.images, args.classes, args.gt_per_image, args.dets_per_image, args.seed))

    max_rss = args.max_rss_gib * 2**30
    name = f"lrp_{args.images}img_{args.classes}cls_{args.dets_per_image}det"
    data = args.out / name
    sizes = ["--images", str(args.images), "--classes", str(args.classes), "--gt-per-image", str(args.gt_per_image),
             "--dets-per-image", str(args.dets_per_image), "--seed", str(args.seed)]
    started = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--prepare", str(data), *sizes], check=True)
    generated = time.perf_counter() - started
    _warm_up(args.out, args, max_rss)
    import pyarrow.parquet as pq

    n_dets = pq.ParquetFile(data / "dt.parquet").metadata.num_rows
    once_file = data / "once.json"
    once = json.loads(once_file.read_text()) if once_file.is_file() else {}
    if not (data / "store" / "manifest.json").is_file() or "ingest" not in once:
        once = {"generate_seconds": generated, "ingest": run("ingest", data, max_rss)}
    once["match"] = run("match", data, max_rss)  # always: the steps read the table this version makes
    once_file.write_text(json.dumps(once, indent=2))
    for step in ONCE:
        print(json.dumps(once[step]), file=sys.stderr, flush=True)

    results, load_before = {}, os.getloadavg()[0]
    for _ in range(args.repeat):
        for step in args.steps:
            if "error" in (results.get(step) or [{}])[-1]:
                continue
            results.setdefault(step, []).append(run(step, data, max_rss))
            print(json.dumps({k: v for k, v in results[step][-1].items() if k != "thresholds"}), file=sys.stderr,
                  flush=True)
    rows = [_summary(results[step]) for step in args.steps]
    table = _table(args, n_dets, once, rows, (load_before, os.getloadavg()[0]))
    print(table)
    (args.out / f"{name}.md").write_text(table + "\n")
    (args.out / f"{name}.json").write_text(json.dumps({"dataset": name, "n_detections": n_dets, "once": once,
                                                       "results": rows, "runs": results}, indent=2))


def _summary(runs: list) -> dict:
    """One row per step: median times (wall, in-process, CPU, phases), the wall range, the largest peak RSS; a failed
    run wins."""
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]
    walls = sorted(r["wall_seconds"] for r in runs)
    medians = {key: statistics.median(r[key] for r in runs) for key in runs[0] if key.endswith("_seconds")}
    return {**runs[0], **medians, "wall_min": walls[0], "wall_max": walls[-1],
            "peak_rss_mib": max(r["peak_rss_mib"] for r in runs), "n_runs": len(runs)}


def _notes(row: dict, by_step: dict) -> str:
    """What the step computed, and its cross-check: the score search's per-class thresholds are the operating
    points' LRP-optimal ones (same definition)."""
    step = row["step"]
    if step == "accumulate":
        return f"AP {row['stats'][0]:.4f}, AP50 {row['stats'][1]:.4f}"
    if step.startswith("lrp"):
        return f"moLRP {row['olrp']:.4f}, small {row['olrp_small']:.4f}"
    if step == "points":
        score = by_step.get("lrp-score", {}).get("thresholds")
        same = None if score is None else {c: t for c, t in score.items() if t is not None} == row["thresholds"]
        check = "" if same is None else f"; thresholds = lrp-score's: {same}"
        return (f"{row['n_points']:,} points ({row['points_seconds']:.2f} s), thresholds {row['thresholds_seconds']:.2f} s,"
                f" {row['n_kept']:,} kept ({row['kept_seconds']:.2f} s){check}")
    if step == "voc":
        lrp = (f", moLRP {row['olrp']:.4f} ({row['lrp_seconds']:.2f} s)" if "olrp" in row
               else "; oLRP: the VOC evaluation has no lrp() yet")
        return (f"match {row['match_seconds']:.2f} s; mAP VOC12 {row['map_voc12']:.4f} ({row['voc12_seconds']:.2f} s), "
                f"VOC07 {row['map_voc07']:.4f} ({row['voc07_seconds']:.2f} s){lrp}")
    return ""


def _cells(r: dict) -> str:
    cpu = r.get("in_process_cpu_seconds")
    return (f"{r['in_process_seconds']:.2f} | {'–' if cpu is None else f'{cpu:.2f}'} | {r['peak_rss_mib']:.0f}")


def _table(args, n_dets: int, once: dict, rows: list, load: tuple) -> str:
    by_step = {r["step"]: r for r in rows if "error" not in r}
    base = by_step.get("accumulate")
    lines = [f"### {args.images} images, {args.classes} classes, {n_dets:,} detections"
             + (f" (median of {args.repeat} runs, wall range in brackets)" if args.repeat > 1 else ""), "",
             "| step | wall s | in-process s | in-process CPU s | peak RSS MiB | ÷ accumulate: wall | in-process | CPU "
             "| result |", "|---|---|---|---|---|---|---|---|---|"]
    for step in ONCE:
        r = once[step]
        if "error" in r:
            lines.append(f"| {step} (once) | – | – | – | – | – | – | – | {r['error']} |")
        else:
            lines.append(f"| {step} (once) | {r['wall_seconds']:.2f} | {_cells(r)} | – | – | – | |")
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['step']} | – | – | – | – | – | – | – | {r['error']} |")
            continue
        spread = f" [{r['wall_min']:.2f}–{r['wall_max']:.2f}]" if args.repeat > 1 else ""
        ratios = " | ".join(f"{r[key] / base[key]:.2f}" if base else "–" for key in
                            ("wall_seconds", "in_process_seconds", "in_process_cpu_seconds"))
        lines.append(f"| {r['step']} | {r['wall_seconds']:.2f}{spread} | {_cells(r)} | {ratios} | {_notes(r, by_step)} |")
    lines += ["", f"Load average (1 min) {load[0]:.1f} before, {load[1]:.1f} after, on {os.cpu_count()} cores."]
    if "generate_seconds" in once:
        lines.append(f"Generating the files took {once['generate_seconds']:.0f} s.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
