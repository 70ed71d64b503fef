"""Every partition measure but Fb on SEISM's 2,126 BSDS500 human-vs-human pairs (tests/data/seism/), end to end:
label maps → partition store (runs) → contingency match table → per-image measures (sc … fop), with the peak RSS of
the process; then the peer, the SEISM transcription of the tests (dense intersection matrices, NumPy/SciPy), on the
first ``--peer-pairs`` pairs, as a same-run time ratio per pair. On a loaded machine the CPU time says more than the wall time.

    python benchmarks/bench_partitions.py --shards 4 --peer-pairs 50
"""

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from evalengine.api.segmentation import evaluate_partitions, ingest_partition_arrays  # noqa: E402
from evalengine.metrics.partition.combine import CONTINGENCY_MEASURES  # noqa: E402
from tests.metrics import seism_reference  # noqa: E402

DATA = ROOT / "tests" / "data" / "seism"


def human_pairs():
    """``(stem, annotators, partition)`` of every pair of SEISM's ``eval_human_disc.m``."""
    ground_truth = np.load(DATA / "bsds500_test_gt.npz")
    ground_truth = {key: ground_truth[key] for key in ground_truth.files}
    for pair in json.loads((DATA / "expected_seism_human_test_pairs.json").read_text())["pairs"]:
        gts = ground_truth[str(pair["gt_image_id"])][np.array(pair["gt_indices"]) - 1]
        if pair["gt_rotated90"]:
            gts = np.rot90(gts, 1, axes=(1, 2))
        yield f"{pair['set']}_{pair['row']}", gts, ground_truth[str(pair["image_id"])][pair["partition_gt_index"] - 1]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--peer-pairs", type=int, default=50)
    parser.add_argument("--scratch", default=None, help="folder of the temporary store")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(dir=args.scratch))
    try:
        start, cpu_start = time.perf_counter(), time.process_time()
        store = ingest_partition_arrays(((stem, gts, {"human": {0.0: seg}}) for stem, gts, seg in human_pairs()),
                                        folder / "store", {"human": [0.0]}, n_shards=args.shards)
        ingested, cpu_ingested = time.perf_counter(), time.process_time()
        per_image = evaluate_partitions(store, "human", CONTINGENCY_MEASURES).per_image
        done, cpu_done = time.perf_counter(), time.process_time()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        print(f"evalengine: {per_image.height} pairs, {per_image.width - 3} measure columns: ingest {ingested - start:.1f} s "
              f"({cpu_ingested - cpu_start:.1f} s CPU), match + measures {done - ingested:.1f} s "
              f"({cpu_done - cpu_ingested:.1f} s CPU), total {done - start:.1f} s wall "
              f"({usage.ru_utime + usage.ru_stime:.1f} s CPU, imports included); peak RSS {usage.ru_maxrss / 1024:.0f} MB")
        sql_start, sql_cpu = time.perf_counter(), _cpu()
        dataset = store.sql("SELECT fop, pri, sc FROM dataset_measures").row(0, named=True)
        print(f"SQL dataset_measures over the match table (every measure, fop included): "
              f"{time.perf_counter() - sql_start:.1f} s ({_cpu() - sql_cpu:.1f} s CPU, DuckDB threads included); "
              f"fop {dataset['fop']:.5f}, pri {dataset['pri']:.5f}")
        peer_start = time.perf_counter()
        for _, (_, gts, seg) in zip(range(args.peer_pairs), human_pairs()):
            seism_reference.eval_segm(seg, list(gts))
        per_pair_peer = (time.perf_counter() - peer_start) / args.peer_pairs
        per_pair_ours = (done - start) / per_image.height
        print(f"peer (SEISM transcription, NumPy/SciPy): {per_pair_peer * 1000:.1f} ms per pair on {args.peer_pairs} "
              f"pairs; evalengine {per_pair_ours * 1000:.1f} ms per pair: {per_pair_peer / per_pair_ours:.1f}x")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
