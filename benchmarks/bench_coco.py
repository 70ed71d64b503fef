"""End-to-end COCO bbox benchmark: each tool in its own process on the same files, JSON in, 12 stats out.

Reports wall time (process start to exit, what a user waits for), in-process time (JSON load to stats),
peak RSS, the ratio to evalengine, and whether each tool printed the same 12 numbers (|diff| <= 1e-12).

    python benchmarks/bench_coco.py --images 5000 --tools evalengine pycocotools
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from generate import generate  # noqa: E402

MODULES = {"evalengine": "evalengine", "pycocotools": "pycocotools", "faster-coco-eval": "faster_coco_eval",
           "hotcoco": "hotcoco"}


def peak_rss_run(tool: str, gt: Path, dt: Path) -> dict:
    """Run the tool and read the child's peak RSS from wait4 (KiB on Linux)."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(HERE / "run_tool.py"), tool, str(gt), str(dt)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status):
        text = err.decode().strip()
        return {"tool": tool, "error": text.splitlines()[-1] if text else f"status {status}"}
    result = json.loads(out.decode().strip().splitlines()[-1])
    result.update(wall_seconds=wall, peak_rss_mib=usage.ru_maxrss / 1024)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--classes", type=int, default=80)
    parser.add_argument("--gt-per-image", type=float, default=7.3)
    parser.add_argument("--dets-per-image", type=int, default=100)
    parser.add_argument("--tools", nargs="+", default=list(MODULES), choices=list(MODULES))
    parser.add_argument("--out", type=Path, default=HERE / "out")
    args = parser.parse_args(argv)

    import orjson

    name = f"coco_{args.images}img_{args.classes}cls_{args.dets_per_image}det"
    data = args.out / name
    gt_path, dt_path = data / "gt.json", data / "dt.json"
    if not dt_path.is_file():
        gt, dets = generate(args.images, args.classes, args.gt_per_image, args.dets_per_image)
        data.mkdir(parents=True, exist_ok=True)
        gt_path.write_bytes(orjson.dumps(gt))
        dt_path.write_bytes(orjson.dumps(dets))
    n_dets = len(orjson.loads(dt_path.read_bytes()))

    results = []
    for tool in args.tools:
        if importlib.util.find_spec(MODULES[tool]) is None:
            results.append({"tool": tool, "error": "not installed"})
            continue
        if tool == "evalengine":
            peak_rss_run(tool, gt_path, dt_path)  # compile and cache the numba kernels once, untimed
        results.append(peak_rss_run(tool, gt_path, dt_path))
        print(json.dumps(results[-1]), file=sys.stderr)

    ours = next((r for r in results if r["tool"] == "evalengine" and "stats" in r), None)
    lines = [f"### {name}: {args.images} images, {args.classes} classes, {n_dets} detections", "",
             "| tool | wall s | in-process s | peak RSS MiB | wall ÷ evalengine | same 12 stats (≤1e-12) |",
             "|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['tool']} | – | – | – | – | {r['error']} |")
            continue
        ratio = r["wall_seconds"] / ours["wall_seconds"] if ours else float("nan")
        same = "–" if not ours else str(max(abs(a - b) for a, b in zip(r["stats"], ours["stats"])) <= 1e-12)
        lines.append(f"| {r['tool']} | {r['wall_seconds']:.2f} | {r['in_process_seconds']:.2f} | "
                     f"{r['peak_rss_mib']:.0f} | {ratio:.2f} | {same} |")
    table = "\n".join(lines)
    print(table)
    (args.out / f"{name}.md").write_text(table + "\n")
    (args.out / f"{name}.json").write_text(json.dumps({"dataset": name, "n_detections": n_dets, "results": results},
                                                      indent=2))


if __name__ == "__main__":
    main()
