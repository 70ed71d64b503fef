"""Proposal-recall benchmark (issue 5): the ``hosang`` protocol at all 9 budgets on the real VOC07 test ground
truth (4,952 images, 14,976 boxes) with Uniform-baseline proposals (the toolbox's fitted parameters),
10,000 per image — about 50M boxes. Times ``evalengine proposals`` end to end (Parquet proposals in, recall
and AR out) in its own process, with peak RSS from wait4, and writes a Markdown table and a JSON file.

    python benchmarks/bench_proposals.py [--per-image 10000]
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from voc07 import voc07_coco  # noqa: E402

PARAMS = HERE.parents[1] / "shared" / "testdata" / "hosang_detection_proposals" / "voc07_random_sampling_params.json"


def _prepare(out: Path, per_image: int) -> tuple:
    from evalengine import baselines
    from evalengine.io.coco import read_coco_gt

    gt = out / "voc07_test_gt.json"
    if not gt.is_file():
        gt.write_text(json.dumps(voc07_coco()))
    proposals = out / f"voc07_uniform_{per_image}.parquet"
    if not proposals.is_file():
        images = read_coco_gt(gt).images
        params = json.loads(PARAMS.read_text())["uniform_params"]
        frames = baselines.generate("uniform", images, per_image, params, seed=0)
        table = pl.concat(list(frames)).select("image_id", pl.col("x").alias("x1"), pl.col("y").alias("y1"),
                                               (pl.col("x") + pl.col("w")).alias("x2"),
                                               (pl.col("y") + pl.col("h")).alias("y2"))
        table.write_parquet(proposals)
    return gt, proposals


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-image", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--prepare-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.prepare_only:
        _prepare(args.out, args.per_image)
        return
    # the data are generated in a child, so that this process stays small: a forked child's peak RSS counts
    # the parent's pages until it execs
    subprocess.run([sys.executable, __file__, "--prepare-only", "--per-image", str(args.per_image),
                    "--out", str(args.out)], check=True)
    gt, proposals = args.out / "voc07_test_gt.json", args.out / f"voc07_uniform_{args.per_image}.parquet"
    n_boxes = pl.scan_parquet(proposals).select(pl.len()).collect().item()
    command = [sys.executable, "-m", "evalengine.cli", "proposals", "--gt", str(gt), "--proposals", str(proposals),
               "--ordering", "given", "--json", "--quiet", "--profile"]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(err.decode())
    peak_gib = round(usage.ru_maxrss / 2**20, 2)
    payload = json.loads(out.decode().strip().splitlines()[-1])
    result = {"boxes": n_boxes, "images": 4952, "budgets": payload["budgets"], "wall_seconds": round(wall, 1),
              "peak_rss_gib": peak_gib, "ar": payload["ar"], "mean_proposals": payload["mean_proposals"],
              "profile": err.decode().strip()}
    (args.out / "bench_proposals.json").write_text(json.dumps(result, indent=2))
    rows = "\n".join(f"| {b} | {m:.1f} | {a:.4f} | {r5:.4f} | {r7:.4f} |" for b, m, a, r5, r7 in
                     zip(payload["budgets"], payload["mean_proposals"], payload["ar"], payload["recall"]["0.5"],
                         payload["recall"]["0.7"]))
    print(f"hosang protocol, {n_boxes:,} Uniform proposals on VOC07 test: {wall:.1f} s wall, "
          f"peak RSS {peak_gib:.2f} GiB\n\n| budget | mean #proposals | AR | recall@0.5 | recall@0.7 |\n"
          f"|---|---|---|---|---|\n{rows}\n\n{result['profile']}")


if __name__ == "__main__":
    main()
