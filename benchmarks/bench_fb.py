"""Fb and F̃b on the 2,126 BSDS500 human-vs-human pairs of SEISM (``seism_bsds``): time, peak RSS, and the
agreement with the stored CVPR-2013 per-pair Fb and the dataset-level values (F of the mean P and the mean R).

    python benchmarks/bench_fb.py                           # all pairs, contour grid, both outlier models
    python benchmarks/bench_fb.py --limit 100 --outliers complete --workers 2 --out /work/scratch/fb/fb.json

Pairs run in a thread pool (the kernels release the GIL). The reference's outlier graph is random (clock-seeded),
so per-pair agreement is a distribution, reported as quantiles of |ours − stored|.
"""

import argparse
import json
import resource
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from evalengine.geometry.boundary_pr import (boundary_counts, boundary_precision_recall, morph_boundary_counts,
                                             morph_precision_recall)

# the BSDS500 human pairs and their stored values (copied from shared/testdata)
DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "seism"


def pair_inputs(gt, pair):
    """The partition and the ground truths of one stored record (``gt_rotated90``: ``rot90(gt, 1)``)."""
    partition = gt[str(pair["image_id"])][pair["partition_gt_index"] - 1]
    truths = [gt[str(pair["gt_image_id"])][k - 1] for k in pair["gt_indices"]]
    return partition, [np.rot90(t, 1) for t in truths] if pair["gt_rotated90"] else truths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, default=None, help="first N pairs of each set")
    parser.add_argument("--outliers", nargs="+", default=["complete", "bsds"])
    parser.add_argument("--grid", default="contour")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="per-pair counts as JSON")
    args = parser.parse_args()
    gt = dict(np.load(args.data / "bsds500_test_gt.npz"))
    pairs = json.loads((args.data / "expected_seism_human_test_pairs.json").read_text())["pairs"]
    if args.limit:
        pairs = [p for s in ("same", "diff") for p in [q for q in pairs if q["set"] == s][:args.limit]]
    stored = np.array([p["documented"]["fb"] for p in pairs])
    result = {}
    boundary_counts(*pair_inputs(gt, pairs[0]), grid=args.grid)  # compile
    for outliers in args.outliers:
        start, cpu = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(args.workers) as pool:
            counts = np.array(list(pool.map(
                lambda p: boundary_counts(*pair_inputs(gt, p), grid=args.grid, outliers=outliers), pairs)))
        seconds = time.perf_counter() - start
        ours = np.stack(boundary_precision_recall(counts), axis=1)
        diff = np.abs(ours - stored).max(axis=1)
        line = {"seconds": round(seconds, 1), "cpu_seconds": round(time.process_time() - cpu, 1), "pairs": len(pairs),
                "within_1e-6": float(np.mean(diff <= 1e-6)),
                "abs_diff_quantiles_50_90_99_max": [float(np.quantile(diff, q)) for q in (0.5, 0.9, 0.99, 1.0)]}
        for name in ("same", "diff"):
            rows = np.array([p["set"] == name for p in pairs])
            p_mean, r_mean = ours[rows, 1].mean(), ours[rows, 2].mean()
            s_p, s_r = stored[rows, 1].mean(), stored[rows, 2].mean()
            line[name] = {"F_of_means": 2 * p_mean * r_mean / (p_mean + r_mean),
                          "stored_F_of_means": 2 * s_p * s_r / (s_p + s_r),
                          "pooled_F": float(boundary_precision_recall(counts[rows].sum(axis=0))[0])}
        result[outliers] = line
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.with_suffix(f".{outliers}.json").write_text(json.dumps(counts.tolist()))
        print(outliers, json.dumps(line), flush=True)
    start = time.perf_counter()
    with ThreadPoolExecutor(args.workers) as pool:
        morph = np.array(list(pool.map(
            lambda p: sum(morph_boundary_counts(pair_inputs(gt, p)[0], t) for t in pair_inputs(gt, p)[1]), pairs)))
    print("morph", json.dumps({"seconds": round(time.perf_counter() - start, 1),
                               "mean_F": float(morph_precision_recall(morph)[0].mean())}))
    print("peak RSS MiB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)


if __name__ == "__main__":
    main()
