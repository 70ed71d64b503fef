"""Matching and accumulation of an ingested store under each local Dask scheduler and worker count.

The match table is removed before each run so that every run matches from scratch; the numba kernels
are compiled once, untimed. Prints a Markdown table of wall time, the match phase alone (from ``--profile``; the
workers run only this phase), peak RSS and the speed-ups over 1 worker.

    python benchmarks/bench_scaling.py STORE
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

CONFIGS = [("sync", 1), ("threads", 1), ("threads", 2), ("processes", 1), ("processes", 2)]


def timed(store: Path, scheduler: str, workers: int) -> tuple:
    shutil.rmtree(store / "matches", ignore_errors=True)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "evalengine.cli", "evaluate", str(store), "--json", "--quiet",
                             "--profile", "--scheduler", scheduler, "--workers", str(workers)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{scheduler}/{workers} failed with status {status}: {err}")
    match = float(re.search(r"match ([0-9.]+) s", err).group(1))
    return time.perf_counter() - started, match, usage.ru_maxrss / 1024


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path)
    args = parser.parse_args(argv)
    timed(args.store, "threads", 2)  # compile and cache the kernels
    rows = [(scheduler, workers, *timed(args.store, scheduler, workers)) for scheduler, workers in CONFIGS]
    base = {s: (t, m) for s, w, t, m, _ in rows if w == 1}
    print(f"### evaluate {args.store} (match + accumulate)\n")
    print("| scheduler | workers | wall s | match s | peak RSS MiB (parent) | speed-up: wall | speed-up: match |")
    print("|---|---|---|---|---|---|---|")
    for scheduler, workers, seconds, match, rss in rows:
        print(f"| {scheduler} | {workers} | {seconds:.2f} | {match:.2f} | {rss:.0f} | "
              f"{base[scheduler][0] / seconds:.2f} | {base[scheduler][1] / match:.2f} |")


if __name__ == "__main__":
    main()
