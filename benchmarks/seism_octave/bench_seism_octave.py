"""SEISM's own time on the 2,126 BSDS500 human pairs, in GNU Octave (apt ``octave liboctave-dev``), beside
``bench_partitions.py``: exports the pairs for ``run_seism.m``, then checks its output against the stored values.

    git --git-dir=$(fetch github:jponttuset/seism) archive HEAD src/measures src/misc src/Eigen | tar x -C SEISM
    (cd SEISM/src/measures && mkoctfile --mex -O2 -I.. mex_eval_segm.cpp -o mex_eval_segm.mex)
    python benchmarks/seism_octave/bench_seism_octave.py export SEISM            # SEISM/pairs.mat
    (cd SEISM && cp .../run_seism.m . && octave-cli --eval "limit = 200; run_seism")
    python benchmarks/seism_octave/bench_seism_octave.py check SEISM 200         # |SEISM - stored| per measure
"""

import json
import sys
from pathlib import Path

import numpy as np
import scipy.io as sio

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "seism"
MEASURES = ("sc", "ssc", "pri", "voi", "nvoi", "bce", "gce", "lce", "dhd", "sdhd", "vd", "bgm", "fr", "fop")


def export(folder: Path) -> None:
    """``pairs.mat``: the 200 images' annotators (H, W, K), one row per pair (image, partition's annotator, GT
    image, rotated) and its GT annotators."""
    gt = np.load(DATA / "bsds500_test_gt.npz")
    pairs = json.loads((DATA / "expected_seism_human_test_pairs.json").read_text())["pairs"]
    keys = sorted(gt.files, key=int)
    index = {k: i + 1 for i, k in enumerate(keys)}
    stacks = np.empty(len(keys), dtype=object)
    for k in keys:
        stacks[index[k] - 1] = np.ascontiguousarray(np.moveaxis(gt[k], 0, -1)).astype(np.uint16)
    table = np.array([[index[str(p["image_id"])], p["partition_gt_index"], index[str(p["gt_image_id"])],
                       int(p["gt_rotated90"])] for p in pairs], float)
    indices = np.empty(len(pairs), dtype=object)
    for i, p in enumerate(pairs):
        indices[i] = np.array(p["gt_indices"], float)
    sio.savemat(folder / "pairs.mat", {"gts": stacks, "table": table, "gt_indices": indices})


def check(folder: Path, n: int) -> dict:
    """The largest |SEISM in Octave − stored full-precision value| per measure over the first ``n`` pairs."""
    out = sio.loadmat(folder / f"seism_out_{n}.mat")["out"]
    pairs = json.loads((DATA / "expected_seism_human_test_pairs.json").read_text())["pairs"][:n]
    worst = {}
    for row, pair in zip(out, pairs):
        c = 0
        for measure in MEASURES:
            width = 3 if measure in ("fr", "fop") else 1
            if measure in pair["computed"]:
                diff = np.abs(row[c:c + width] - np.array(pair["computed"][measure], ndmin=1)).max()
                worst[measure] = max(worst.get(measure, 0.0), float(diff))
            c += width
    return worst


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(Path(sys.argv[2]))
    else:
        print(check(Path(sys.argv[2]), int(sys.argv[3])))
