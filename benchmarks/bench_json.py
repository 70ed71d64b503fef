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
"""

import argparse
import io
import os
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a folder of bench_coco.py (gt.json, dt.json)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--file", choices=["dt", "gt"], default="dt", help="the result file (dt) or ground truth (gt)")
    parser.add_argument("--float32", action="store_true", help="the results as float32 values (see above)")
    args = parser.parse_args(argv)
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
