"""Ingest time and peak memory of a result file of masks against the same results as boxes only.

The set of :mod:`benchmarks.generate` (COCO-val size by default: 5,000 images, 100 results per image) with a mask per
ground truth (a polygon) and per result (an ellipse in its box as compressed RLE, with the box, as detectron2 writes
them), rasterised once by pycocotools and cached in ``benchmarks/out``. Each ingest runs in a process of its own.

    python benchmarks/bench_mask_ingest.py --images 5000
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from pycocotools import mask as mask_utils

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import add_size_arguments, generate, write  # noqa: E402

_VERTICES = 16


def _ellipses(boxes: np.ndarray) -> np.ndarray:
    """An ellipse polygon (``_VERTICES`` points, rounded to 2 decimals) inscribed in each ``[x, y, w, h]``."""
    angle = np.linspace(0, 2 * np.pi, _VERTICES, endpoint=False)
    cx, cy = boxes[:, :1] + boxes[:, 2:3] / 2, boxes[:, 1:2] + boxes[:, 3:4] / 2
    xs, ys = cx + boxes[:, 2:3] / 2 * np.cos(angle), cy + boxes[:, 3:4] / 2 * np.sin(angle)
    return np.round(np.stack([xs, ys], 2).reshape(len(boxes), -1), 2)


def mask_set(args) -> Path:
    """The folder of the generated set of ``args`` (its size arguments), generated first if it is not there."""
    out = args.out / f"masks_{args.images}img_{args.dets_per_image}det"
    if not (out / "dt_masks.json").is_file():
        started = time.perf_counter()
        write_masks(out, args)
        print(f"generated {out} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return out


def write_masks(out: Path, args) -> None:
    images, annotations, categories, detections = generate(args.images, args.classes, args.gt_per_image,
                                                           args.dets_per_image, args.seed)
    write(out, images, annotations, categories, detections)
    size = {row["id"]: (row["height"], row["width"]) for row in images.iter_rows(named=True)}
    gt = json.loads((out / "gt.json").read_text())
    polygons = _ellipses(np.array([ann["bbox"] for ann in gt["annotations"]]))
    for ann, polygon in zip(gt["annotations"], polygons):
        ann["segmentation"] = [polygon.tolist()]
    (out / "gt_masks.json").write_text(json.dumps(gt))
    rows = detections.to_dicts()
    polygons = _ellipses(np.array([row["bbox"] for row in rows]))
    by_image = {}
    for i, row in enumerate(rows):
        by_image.setdefault(row["image_id"], []).append(i)
    for image_id, members in by_image.items():
        h, w = size[image_id]
        for i, rle in zip(members, mask_utils.frPyObjects([polygons[i].tolist() for i in members], h, w)):
            rows[i]["segmentation"] = {"size": [h, w], "counts": rle["counts"].decode()}
    with open(out / "dt_masks.json", "w") as handle:
        handle.write("[" + ",\n".join(json.dumps(row) for row in rows) + "]")


def ingest(gt: Path, dt: Path, store: Path) -> tuple:
    """``(seconds, peak RSS in MB)`` of ``evalengine ingest coco`` in a process of its own (its VmHWM: the peak of
    its own address space, not of the parent it was forked from)."""
    code = ("import sys, time, warnings; warnings.simplefilter('ignore'); import evalengine; t = time.perf_counter(); "
            "evalengine.ingest_coco(sys.argv[1], sys.argv[2], sys.argv[3], overwrite=True); "
            "print(time.perf_counter() - t); "
            "print(next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM')))")
    done = subprocess.run([sys.executable, "-c", code, str(gt), str(dt), str(store)], check=True, capture_output=True,
                          text=True)
    seconds, peak_kb = done.stdout.split()[-2:]
    return float(seconds), int(peak_kb) / 1024


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_arguments(parser)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    args = parser.parse_args(argv)
    out = mask_set(args)
    for kind, gt, dt in (("boxes", "gt.json", "dt.json"), ("masks", "gt_masks.json", "dt_masks.json")):
        seconds, rss = ingest(out / gt, out / dt, out / f"store_{kind}")
        print(f"{kind}: {gt} {(out / gt).stat().st_size / 2**20:.0f} MB + {dt} {(out / dt).stat().st_size / 2**20:.0f} "
              f"MB, ingest {seconds:.2f} s, peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
