"""The JSON floor: the fastest parses of a COCO result file's bytes on this machine, beside evalengine's reader.

Each parser reads the same bytes already in memory (the file read is not timed); best of ``--repeat`` for wall and
CPU time (user + system of the process, every thread). Parsers: orjson and msgspec (Python objects; msgspec also into
typed Structs), pysimdjson (its tape only, no values), Polars' JSON reader, Polars' and pyarrow's JSON Lines readers
(on the list already rewritten as lines, the rewrite timed apart), and evalengine's kernel
(:mod:`evalengine.io.json_results`: typed columns) and its whole reader (:func:`evalengine.io.detections.iter_detections`:
columns checked against the ground truth, from the file).

    python benchmarks/bench_json.py benchmarks/out/coco_5000img_80cls_100det
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


def parsers(data: bytes, folder: Path) -> dict:
    """``{name: function}`` of every installed parser, each reading ``data``."""
    import numpy as np

    found = {}
    try:
        import orjson
        found["orjson.loads"] = lambda: orjson.loads(data)
    except ImportError:
        pass
    try:
        import msgspec

        class Result(msgspec.Struct):
            image_id: int
            category_id: int
            bbox: list[float]
            score: float

        typed = msgspec.json.Decoder(list[Result])
        found["msgspec.json.decode"] = lambda: msgspec.json.decode(data)
        found["msgspec, typed Structs"] = lambda: typed.decode(data)
    except ImportError:
        pass
    try:
        import simdjson
        found["pysimdjson parse (tape only)"] = lambda: simdjson.Parser().parse(data)
    except ImportError:
        pass
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
        b.height for b in iter_detections(folder / "dt.json", dataset, masks=False))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a folder of bench_coco.py (gt.json, dt.json)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    data = (args.folder / "dt.json").read_bytes()
    print(f"{args.folder / 'dt.json'}: {len(data) / 2**20:.0f} MiB; load average {os.getloadavg()[0]:.1f}\n")
    print("| parser | wall s | CPU s |\n|---|---|---|")
    for name, function in parsers(data, args.folder).items():
        function()  # warm (numba's cache, allocator)
        wall, cpu = _timed(function, args.repeat)
        print(f"| {name} | {wall:.3f} | {cpu:.3f} |", flush=True)


if __name__ == "__main__":
    main()
