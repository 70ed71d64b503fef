"""The JSON floor: the fastest parses of a COCO result file's bytes on this machine, beside evalengine's reader
(``--file gt``: of the ground-truth file, beside evalengine's ground-truth kernel and its whole reader).

Each parser reads the same bytes already in memory (the file read is not timed); best of ``--repeat`` for wall and
CPU time (user + system of the process, every thread). Parsers: orjson and msgspec (Python objects; msgspec also into
typed Structs), pysimdjson (its tape only, no values), Polars' JSON reader, Polars' and pyarrow's JSON Lines readers
(on the list already rewritten as lines, the rewrite timed apart), and evalengine's kernel
(:mod:`evalengine.io.json_results`: typed columns) and its whole reader (:func:`evalengine.io.detections.iter_detections`:
columns checked against the ground truth, from the file).

    python benchmarks/bench_json.py benchmarks/out/coco_5000img_80cls_100det
    python benchmarks/bench_json.py benchmarks/out/coco_80000img_365cls_15det --file gt
    python benchmarks/bench_json.py benchmarks/out/coco_5000img_80cls_100det --float32

``--float32`` reads the results as a detector writes them (box and score float32 values, printed as Python's json
prints them: up to 17 digits), written beside dt.json as dt_float32.json from dt.parquet.

``--baseline-path CHECKOUT`` compares two versions in one run: for each folder, the result and the ground-truth file,
a child process per version (this checkout, then CHECKOUT on ``PYTHONPATH``), interleaved ``--repeat`` times, each
timing the floor (pysimdjson's tape) and the readers once after a warm-up call; medians of CPU s (user + system, every
thread) and of each reader's ratio to the floor of its own process:

    python benchmarks/bench_json.py out/coco_5000img_80cls_100det out/objects365 --baseline-path ../base --repeat 3
"""

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _timed(function, repeat: int) -> tuple:
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def _general(data: bytes, typed_schema) -> dict:
    """orjson, msgspec (as Python objects, and typed by ``typed_schema(msgspec)``: the type to decode into) and
    pysimdjson's tape on ``data``, those installed."""
    found = {}
    try:
        import orjson
        found["orjson.loads"] = lambda: orjson.loads(data)
    except ImportError:
        pass
    try:
        import msgspec
        typed = msgspec.json.Decoder(typed_schema(msgspec))
        found["msgspec.json.decode"] = lambda: msgspec.json.decode(data)
        found["msgspec, typed Structs"] = lambda: typed.decode(data)
    except ImportError:
        pass
    try:
        import simdjson
        found["pysimdjson parse (tape only)"] = lambda: simdjson.Parser().parse(data)
    except ImportError:
        pass
    return found


def _results_type(msgspec):
    class Result(msgspec.Struct):
        image_id: int
        category_id: int
        bbox: list[float]
        score: float

    return list[Result]


def _ground_truth_type(msgspec):
    class Annotation(msgspec.Struct):
        id: int
        image_id: int
        category_id: int
        bbox: list[float]
        area: float = 0.0
        iscrowd: int = 0

    class GroundTruth(msgspec.Struct):
        images: list[dict]
        annotations: list[Annotation]
        categories: list[dict]

    return GroundTruth


def float32_results(folder: Path) -> Path:
    """``folder/dt_float32.json``: dt.parquet's results with box and score rounded to float32 (written once)."""
    import polars as pl

    path = folder / "dt_float32.json"
    if not path.is_file():
        frame = pl.read_parquet(folder / "dt.parquet")
        frame.with_columns(pl.col("bbox").cast(pl.List(pl.Float32)).cast(pl.List(pl.Float64)),
                           pl.col("score").cast(pl.Float32).cast(pl.Float64)).write_json(path)
    return path


def parsers(data: bytes, folder: Path, path: Path) -> dict:
    """``{name: function}`` of every installed parser, each reading ``data``."""
    import numpy as np

    found = _general(data, _results_type)
    import polars as pl
    import pyarrow.json as pa_json

    lines = data.strip()[1:-1].replace(b"},{", b"}\n{")
    found["polars.read_json"] = lambda: pl.read_json(io.BytesIO(data))
    found["rewrite as JSON Lines"] = lambda: data.strip()[1:-1].replace(b"},{", b"}\n{")
    found["polars.read_ndjson (lines)"] = lambda: pl.read_ndjson(io.BytesIO(lines))
    found["pyarrow.json.read_json (lines)"] = lambda: pa_json.read_json(io.BytesIO(lines))

    from evalengine.io.coco import read_coco_gt
    from evalengine.io.detections import iter_detections
    from evalengine.io.json_results import parse

    array = np.frombuffer(data, np.uint8)
    start = data.index(b"[") + 1
    found["evalengine kernel (typed columns, 1 thread)"] = lambda: parse(array, start, len(array) + 1, True)
    dataset = read_coco_gt(folder / "gt.json")
    found["evalengine iter_detections (from the file)"] = lambda: sum(
        b.height for b in iter_detections(path, dataset, masks=False))
    return found


def ground_truth_parsers(data: bytes, folder: Path, path: Path) -> dict:
    """``{name: function}`` of every installed parser, each reading ``data`` (a COCO ground truth)."""
    found = _general(data, _ground_truth_type)
    import polars as pl

    from evalengine.io.coco import read_coco_gt
    from evalengine.io.json_ground_truth import annotation_columns

    found["polars.read_json"] = lambda: pl.read_json(io.BytesIO(data))
    found["evalengine annotation_columns (kernel, every core, from the file)"] = lambda: annotation_columns(
        folder / "gt.json")
    found["evalengine read_coco_gt (checked tables, from the file)"] = lambda: read_coco_gt(folder / "gt.json")
    found["evalengine read_coco_gt, exact reader alone"] = lambda: read_coco_gt(folder / "gt.json", kernel=False)
    return found


def readers(folder: Path, file: str) -> dict:
    """``{name: function}``: the floor and evalengine's readers of ``folder``'s result (``dt``) or ground-truth file,
    as :func:`compare` times them."""
    import numpy as np
    import simdjson

    from evalengine.io.coco import read_coco_gt

    data = (folder / f"{file}.json").read_bytes()
    found = {"floor (pysimdjson tape)": lambda: simdjson.Parser().parse(data)}
    if file == "gt":
        from evalengine.io.json_ground_truth import annotation_columns

        found["annotation_columns"] = lambda: annotation_columns(folder / "gt.json")
        found["read_coco_gt"] = lambda: read_coco_gt(folder / "gt.json")
        return found
    from evalengine.io.detections import iter_detections
    from evalengine.io.json_results import parse

    dataset, array = read_coco_gt(folder / "gt.json"), np.frombuffer(data, np.uint8)
    found["results kernel (1 thread)"] = lambda: parse(array, data.index(b"[") + 1, len(array) + 1, False)
    found["iter_detections"] = lambda: sum(b.height for b in iter_detections(folder / "dt.json", dataset, masks=False))
    return found


def _child(folder: Path, file: str) -> None:
    """One version's figures (``{name: [cpu, wall]}``, JSON on stdout): each reader warmed, then timed once."""
    times = {}
    for name, function in readers(folder, file).items():
        function()
        times[name] = _timed(function, 1)[::-1]
    print(json.dumps(times))


def compare(folders: list, baseline: Path, repeat: int) -> None:
    """Medians over ``repeat`` interleaved child runs of this checkout and ``baseline`` (see the description)."""
    here = Path(__file__).resolve().parent.parent
    print(f"load average {os.getloadavg()[0]:.1f}; medians of {repeat}; CPU s (ratio to the floor, same process)\n")
    print("| file | reader | base CPU s (x floor) | this CPU s (x floor) | this / base |\n|---|---|---|---|---|")
    for folder in folders:
        for file in ("dt", "gt"):
            runs = {"base": [], "this": []}
            for _ in range(repeat):
                for side, root in (("base", baseline.resolve()), ("this", here)):
                    env = {**os.environ, "PYTHONPATH": str(root)}
                    out = subprocess.run([sys.executable, __file__, str(folder), "--child", file], env=env, cwd=root,
                                         check=True, capture_output=True, text=True).stdout
                    runs[side].append(json.loads(out.strip().splitlines()[-1]))
            for name in runs["this"][0]:
                cells = []
                for side in ("base", "this"):
                    cpu = statistics.median(r[name][0] for r in runs[side])
                    ratio = statistics.median(r[name][0] / next(iter(r.values()))[0] for r in runs[side])
                    cells.append((cpu, ratio))
                print(f"| {folder.name}/{file}.json | {name} | {cells[0][0]:.3f} ({cells[0][1]:.2f}x) | "
                      f"{cells[1][0]:.3f} ({cells[1][1]:.2f}x) | {cells[1][0] / cells[0][0]:.2f} |", flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, nargs="+", help="a folder of bench_coco.py (gt.json, dt.json)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--file", choices=["dt", "gt"], default="dt", help="the result file (dt) or ground truth (gt)")
    parser.add_argument("--float32", action="store_true", help="the results as float32 values (see above)")
    parser.add_argument("--baseline-path", type=Path, metavar="CHECKOUT", help="compare with CHECKOUT (see above)")
    parser.add_argument("--child", choices=["dt", "gt"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.folder[0], args.child)
    if args.baseline_path:
        return compare(args.folder, args.baseline_path, args.repeat)
    args.folder = args.folder[0]
    path = float32_results(args.folder) if args.float32 else args.folder / f"{args.file}.json"
    data = path.read_bytes()
    print(f"{path}: {len(data) / 2**20:.0f} MiB; load average {os.getloadavg()[0]:.1f}\n")
    print("| parser | wall s | CPU s |\n|---|---|---|")
    for name, function in (parsers if args.file == "dt" else ground_truth_parsers)(data, args.folder, path).items():
        function()  # warm (numba's cache, allocator)
        wall, cpu = _timed(function, args.repeat)
        print(f"| {name} | {wall:.3f} | {cpu:.3f} |", flush=True)


if __name__ == "__main__":
    main()
