"""Out-of-core scale run (issue 17 item 5): a COCO-shaped set of N images × 100 detections generated a chunk at a time
straight to Parquet (``generate.py --chunk-images``), ingested from Parquet and evaluated (match + AP) by the
``evalengine`` command, each phase in its own process; then, with ``--s3``, the same on a 2-process
``dask.distributed`` LocalCluster with the store on an S3 server on loopback (moto, as the object-store tests use).

Per size and phase: wall, CPU (user+sys of the process tree: ``wait4``; on the cluster, the workers' too), peak RSS
(``wait4``'s and the tree's, sampled; on the cluster, the sum of the workers' peaks), the store and match table
sizes and the peak scratch (the store's folder, sampled). CPU per detection is compared with the first size's.
``--peers`` also runs hotcoco, vernier and ultrafast-pycocotools on the first size (its results written as JSON)
for their peak RSS. Data and stores go under ``--root`` and are deleted unless ``--keep``.

    nice -n 5 python benchmarks/bench_scale.py --images 100000 1000000 --root /tmp/scale --s3 100000 --peers
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_coco import compile_bytecode, run_child  # noqa: E402
from generate import write_chunked  # noqa: E402

BUCKET = "evalengine-scale"
PEERS = ["hotcoco", "ultrafast-pycocotools", "vernier"]


def folder_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (0 if it is gone)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


class Sampler:
    """Samples, every ``period`` s until stopped: the summed RSS of ``roots`` (and their descendants if ``tree``)
    (peak), each process's own peak RSS, the bytes under ``folder`` (peak) and the growth of the used bytes of the
    file system holding ``disk`` (peak; a shared disk: others' writes count too). Below ``min_available`` bytes of
    available memory it kills the sampled processes (``self.starved``)."""

    def __init__(self, roots, folder: Path | None = None, period: float = 0.25, tree: bool = True,
                 disk: Path | None = None, min_available: float = 0):
        self.roots, self.folder, self.period, self.tree = roots, folder, period, tree
        self.disk, self.min_available, self.starved = disk, min_available, False
        self.disk_base = shutil.disk_usage(disk).used if disk else 0
        self.tree_peak = self.scratch_peak = self.disk_peak = 0
        self.peaks = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        ticks = 0
        while not self._stop.wait(self.period):
            procs = []
            for root in self.roots():
                try:
                    procs += [root, *(root.children(recursive=True) if self.tree else [])]
                except psutil.Error:
                    pass
            total = 0
            for proc in procs:
                try:
                    rss = proc.memory_info().rss
                except psutil.Error:
                    continue
                total += rss
                self.peaks[proc.pid] = max(self.peaks.get(proc.pid, 0), rss)
            self.tree_peak = max(self.tree_peak, total)
            if psutil.virtual_memory().available < self.min_available:
                self.starved = True
                for proc in procs:
                    try:
                        proc.kill()
                    except psutil.Error:
                        pass
            ticks += 1
            if ticks % 8 == 0:  # every 2 s: a walk of a few thousand files
                self._sizes()

    def _sizes(self):
        if self.folder is not None:
            self.scratch_peak = max(self.scratch_peak, folder_bytes(self.folder))
        if self.disk is not None:
            self.disk_peak = max(self.disk_peak, shutil.disk_usage(self.disk).used - self.disk_base)

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._sizes()


def command(argv: list, folder: Path | None, env=None, cluster=None, server=None, disk=None,
            min_available: float = 0) -> dict:
    """Run ``evalengine ARGV`` in a child process: wall, CPU (its tree's; plus the ``cluster`` processes' CPU over
    the same time), peak RSS (``wait4``'s, the sampled tree's; the cluster workers' summed peaks), peak scratch
    bytes under ``folder``, the ``--profile`` lines, the load average before and after; with ``server`` (this
    process: the S3 server and the cluster's scheduler) its own CPU and peak RSS over the same time; with ``disk``
    the peak growth of that file system's used bytes. Stops it (and the run) below ``min_available`` bytes free."""
    cluster = cluster or []
    before = {p.pid: sum(p.cpu_times()[:4]) for p in cluster}
    server_before = sum(server.cpu_times()[:2]) if server else 0
    load_before = os.getloadavg()
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "evalengine.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    handle = psutil.Process(proc.pid)
    sampler = Sampler(lambda: [handle], folder, disk=disk, min_available=min_available)
    workers = Sampler(lambda: cluster, min_available=min_available) if cluster else None
    own = Sampler(lambda: [server], tree=False) if server else None
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    for each in (sampler, workers, own):
        if each:
            each.stop()
    if sampler.starved or (workers and workers.starved):
        raise SystemExit(f"evalengine {' '.join(argv)} stopped: less than {min_available / 2**30:.0f} GiB available")
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"evalengine {' '.join(argv)} failed: {err.decode().strip()[-2000:]}")
    result = {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mib": usage.ru_maxrss / 1024,
              "tree_peak_rss_mib": sampler.tree_peak / 2**20, "scratch_peak_gb": sampler.scratch_peak / 1e9,
              "disk_peak_gb": sampler.disk_peak / 1e9, "load_before": load_before, "load_after": os.getloadavg(),
              "profile": [line for line in err.decode().splitlines() if " s" in line][-12:]}
    if workers:
        result["cluster_cpu_s"] = sum(sum(p.cpu_times()[:4]) - before[p.pid] for p in cluster)
        result["workers_peak_rss_mib"] = sum(workers.peaks.values()) / 2**20
        result["workers_peaks_mib"] = sorted(v / 2**20 for v in workers.peaks.values())
    if own:
        result["server_cpu_s"] = sum(server.cpu_times()[:2]) - server_before
        result["server_peak_rss_mib"] = own.tree_peak / 2**20
    lines = out.decode().strip().splitlines()
    if lines and lines[-1].startswith("{"):
        result["stats"] = json.loads(lines[-1])["stats"]
    return result


def ensure_data(root: Path, images: int, args) -> Path:
    data = root / f"coco{images}"
    if not (data / "dt.parquet").is_file():
        shutil.rmtree(data, ignore_errors=True)
        started = time.perf_counter()
        counts = write_chunked(data, images, args.classes, args.gt_per_image, args.dets_per_image, args.seed,
                               args.chunk_images)
        print(f"generated {data}: {counts} in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return data


def run_size(data: Path, store: str, scratch: Path | None, args, env=None, address=None, cluster=None,
             server=None) -> dict:
    """Ingest ``data`` (GT JSON, Parquet results) into ``store``, then evaluate it (match + AP)."""
    common = {"disk": args.root, "min_available": args.min_free_gib * 2**30, "server": server}
    ingest = command(["ingest", "coco", "--gt", str(data / "gt.json"), "--dt", str(data / "dt.parquet"),
                      "--store", store, "--quiet", "--profile"], scratch, env, **common)
    extra = ["--address", address] if address else []
    evaluate = command(["evaluate", store, "--json", "--quiet", "--profile", *extra], scratch, env, cluster, **common)
    return {"ingest": ingest, "evaluate": evaluate}


def local_row(root: Path, images: int, args) -> dict:
    data = ensure_data(root, images, args)
    work = root / f"work{images}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    store = work / "store"
    row = {"images": images, "where": "local, threads", **run_size(data, str(store), work, args)}
    row.update(n_dets=_n_rows(data), input_gb=folder_bytes(data) / 1e9, store_gb=folder_bytes(store) / 1e9,
               matches_gb=folder_bytes(store / "matches") / 1e9)
    shutil.rmtree(work)
    return row


def s3_row(root: Path, images: int, args) -> dict:
    """The same set with the store on moto's S3 server (in this process) and matching on a 2-process LocalCluster.
    moto keeps an object in memory up to ``MOTO_S3_DEFAULT_KEY_BUFFER_SIZE`` bytes (default 5 MiB - 1 KiB) and in an
    unlinked temporary file beyond (``tempfile.SpooledTemporaryFile``): set to 64 KiB, with the temporary folder
    under ``root``, the store lives on disk, not in this process."""
    import logging
    import tempfile

    import boto3
    from distributed import LocalCluster
    from moto.server import ThreadedMotoServer

    data = ensure_data(root, images, args)
    spool = root / "moto"
    spool.mkdir(exist_ok=True)
    tempfile.tempdir = str(spool)  # this process only: moto's spooled objects; the children keep TMPDIR
    os.environ["MOTO_S3_DEFAULT_KEY_BUFFER_SIZE"] = str(64 * 1024)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}
    os.environ.update(env)  # the cluster's workers inherit it
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    me = psutil.Process()
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            procs = [p for p in me.children(recursive=True)]
            row = {"images": images, "where": "S3 (moto), 2-process LocalCluster",
                   **run_size(data, f"s3://{BUCKET}/store{images}", None, args, dict(os.environ),
                              cluster.scheduler_address, procs, me)}
        sizes = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"store{images}/"):
            for item in page.get("Contents", []):
                top = "matches" if "/matches/" in item["Key"] else "store"
                sizes[top] = sizes.get(top, 0) + item["Size"]
        row.update(n_dets=_n_rows(data), input_gb=folder_bytes(data) / 1e9,
                   store_gb=(sizes.get("store", 0) + sizes.get("matches", 0)) / 1e9,
                   matches_gb=sizes.get("matches", 0) / 1e9, moto_rss_mib=me.memory_info().rss / 2**20)
    finally:
        server.stop()
        tempfile.tempdir = None
        shutil.rmtree(spool, ignore_errors=True)
    return row


def peer_rows(root: Path, images: int, args) -> list:
    """The peers on the same set, its results as a COCO JSON result file (they read JSON only)."""
    import polars as pl

    data = ensure_data(root, images, args)
    results = data / "dt.json"
    if not results.is_file():
        pl.read_parquet(data / "dt.parquet").write_json(results)
    rows = []
    for tool in args.peers:
        got = run_child([sys.executable, str(HERE / "run_tool.py"), tool, str(data / "gt.json"), str(results)],
                        args.max_rss_gib * 2**30)
        rows.append({"tool": tool, "images": images, **got})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    results.unlink()
    return rows


def _n_rows(data: Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(data / "dt.parquet").metadata.num_rows


def table(rows: list) -> str:
    base = rows[0]
    lines = ["| images | dets | where | phase | wall s | CPU s | CPU µs/det | × first | wall × first "
             "| peak RSS MiB (tree) | scratch GB |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for phase in ("ingest", "evaluate", "total"):
            if phase == "total":
                got = {k: row["ingest"][k] + row["evaluate"][k] for k in ("wall_s", "cpu_s")}
                got["cpu_s"] += row["evaluate"].get("cluster_cpu_s", 0)
                rss = max(row["ingest"]["tree_peak_rss_mib"], row["evaluate"]["tree_peak_rss_mib"]
                          + row["evaluate"].get("workers_peak_rss_mib", 0))
                first = (base["ingest"]["cpu_s"] + base["evaluate"]["cpu_s"]
                         + base["evaluate"].get("cluster_cpu_s", 0)) / base["n_dets"]
                first_wall = (base["ingest"]["wall_s"] + base["evaluate"]["wall_s"]) / base["n_dets"]
                scratch = max(row["ingest"]["scratch_peak_gb"], row["evaluate"]["scratch_peak_gb"])
            else:
                got = dict(row[phase], cpu_s=row[phase]["cpu_s"] + row[phase].get("cluster_cpu_s", 0))
                rss = row[phase]["tree_peak_rss_mib"] + row[phase].get("workers_peak_rss_mib", 0)
                first = (base[phase]["cpu_s"] + base[phase].get("cluster_cpu_s", 0)) / base["n_dets"]
                first_wall = base[phase]["wall_s"] / base["n_dets"]
                scratch = row[phase]["scratch_peak_gb"]
            per = got["cpu_s"] / row["n_dets"]
            lines.append(f"| {row['images']:,} | {row['n_dets']:,} | {row['where']} | {phase} | {got['wall_s']:.1f} | "
                         f"{got['cpu_s']:.1f} | {per * 1e6:.2f} | {per / first:.2f} | "
                         f"{got['wall_s'] / row['n_dets'] / first_wall:.2f} | {rss:.0f} | {scratch:.2f} |")
    sizes = [f"- {r['images']:,} images ({r['where']}): input {r['input_gb']:.2f} GB, store {r['store_gb']:.2f} GB "
             f"of which match tables {r['matches_gb']:.2f} GB; file system growth (shared disk) ingest "
             f"{r['ingest'].get('disk_peak_gb', 0):.2f} / evaluate {r['evaluate'].get('disk_peak_gb', 0):.2f} GB; load "
             f"{_load(r['ingest'])} / {_load(r['evaluate'])}" for r in rows]
    servers = [f"- {r['images']:,} images ({r['where']}): this process (S3 server + scheduler) ingest "
               f"{r['ingest']['server_cpu_s']:.1f} CPU s, {r['ingest']['server_peak_rss_mib']:.0f} MiB; evaluate "
               f"{r['evaluate']['server_cpu_s']:.1f} CPU s, {r['evaluate']['server_peak_rss_mib']:.0f} MiB; workers' "
               f"peaks {', '.join(f'{v:.0f}' for v in r['evaluate']['workers_peaks_mib'])} MiB"
               for r in rows if "server_cpu_s" in r["evaluate"]]
    return "\n".join(lines + [""] + sizes + servers)


def _load(phase: dict) -> str:
    return f"{phase['load_before'][0]:.1f}→{phase['load_after'][0]:.1f}" if "load_before" in phase else "?"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, nargs="+", default=[100000, 1000000])
    parser.add_argument("--s3", type=int, nargs="*", default=[], help="sizes also run with the store on S3")
    parser.add_argument("--peers", nargs="*", help=f"peers on the first size (default: {' '.join(PEERS)})")
    parser.add_argument("--root", type=Path, required=True, help="folder for the data and the stores")
    parser.add_argument("--classes", type=int, default=80)
    parser.add_argument("--gt-per-image", type=float, default=7.3)
    parser.add_argument("--dets-per-image", type=int, default=100)
    parser.add_argument("--chunk-images", type=int, default=25000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-rss-gib", type=float, default=20.0, help="a peer above this is stopped")
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    parser.add_argument("--min-free-gib", type=float, default=8.0,
                        help="stop the run when the machine's available memory falls below this")
    args = parser.parse_args(argv)
    if args.peers == []:
        args.peers = PEERS
    compile_bytecode()
    args.root.mkdir(parents=True, exist_ok=True)
    warm = ensure_data(args.root, 2000, args)  # numba's kernels compiled and cached, untimed
    local_row(args.root, 2000, args)
    shutil.rmtree(warm)
    report = {"load_before": os.getloadavg(), "rows": [], "peers": []}
    for images in args.images:
        report["rows"].append(local_row(args.root, images, args))
        print(json.dumps(report["rows"][-1]), file=sys.stderr, flush=True)
    for images in args.s3:
        report["rows"].append(s3_row(args.root, images, args))
        print(json.dumps(report["rows"][-1]), file=sys.stderr, flush=True)
        stats = {tuple(r["evaluate"]["stats"]) for r in report["rows"] if r["images"] == images}
        report["rows"][-1]["same_stats_as_local"] = len(stats) == 1
    if args.peers:
        report["peers"] = peer_rows(args.root, args.images[0], args)
    report["load_after"] = os.getloadavg()
    if not args.keep:
        for images in {*args.images, *args.s3}:
            shutil.rmtree(args.root / f"coco{images}", ignore_errors=True)
    text = table(report["rows"])
    print(text)
    print(f"\nload (1, 5, 15 min) before {report['load_before']}, after {report['load_after']}")
    for peer in report["peers"]:
        print(f"- {peer['tool']} at {peer['images']:,} images: " + (peer.get("error") or
              f"{peer['cpu_seconds']:.1f} CPU s, {peer['wall_seconds']:.1f} s wall, {peer['peak_rss_mib']:.0f} MiB"))
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    (out / "bench_scale.json").write_text(json.dumps(report, indent=1))
    (out / "bench_scale.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
