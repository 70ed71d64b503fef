"""Child process of the benchmark: evaluate with one tool, print its 12 stats and timing as JSON.

    python benchmarks/run_tool.py TOOL GT DT [IOU_TYPE]   (DT: JSON, or Parquet for evalengine; a store for
                                                           evalengine-store; IOU_TYPE bbox (default) or segm)
"""

import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path


def evalengine_stats(gt, dt, iou_type):
    return _evalengine_command(["coco", "--gt", gt, "--dt", dt, "--iou-type", iou_type])


def evalengine_store_stats(_gt, store, iou_type):
    return _evalengine_command(["evaluate", store, "--iou-type", iou_type])


def _evalengine_command(argv):
    """What the ``evalengine`` command does (its JSON output, parsed), with the command's process settings
    (``evalengine.cli.run``: no BLAS probe, cached kernels loaded without numba's registries)."""
    from evalengine.cli import _without_blas_probe, main
    from evalengine.kernel_loading import load_lean

    _without_blas_probe()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if main([*argv, "--json", "--quiet"], imported=load_lean) != 0:
            raise SystemExit(f"evalengine {' '.join(argv)} failed")
    return json.loads(out.getvalue())["stats"]


def pycocotools_stats(gt, dt, iou_type):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    return _cocoeval_stats(COCO, COCOeval, gt, dt, iou_type)


def faster_coco_eval_stats(gt, dt, iou_type):
    from faster_coco_eval import COCO, COCOeval_faster

    return _cocoeval_stats(COCO, COCOeval_faster, gt, dt, iou_type)


def hotcoco_stats(gt, dt, iou_type):
    from hotcoco import COCO, COCOeval

    return _cocoeval_stats(COCO, COCOeval, gt, dt, iou_type)


def ultrafast_stats(gt, dt, iou_type):
    """ultrafast-pycocotools, the Rust drop-in: its COCO and COCOeval, driven as pycocotools is."""
    from ultrafast_pycocotools import COCO, COCOeval

    return _cocoeval_stats(COCO, COCOeval, gt, dt, iou_type)


def vernier_stats(gt, dt, iou_type):
    """vernier's native evaluator (its fastest path: the files' bytes in, every core), in pycocotools' strict
    parity mode."""
    from vernier.instance import Bbox, Evaluator, Segm

    evaluator = Evaluator(iou={"bbox": Bbox, "segm": Segm}[iou_type](), parity_mode="strict")
    summary = evaluator.evaluate(Path(gt).read_bytes(), Path(dt).read_bytes(), num_threads=os.cpu_count())
    return [float(s) for s in summary.stats]


def evalengine_compat_stats(gt, dt, iou_type):
    """The pycocotools drop-in (``evalengine.compat``) driven as pycocotools is."""
    from evalengine.compat import COCO, COCOeval

    return _cocoeval_stats(COCO, COCOeval, gt, dt, iou_type)


def _cocoeval_stats(coco_cls, eval_cls, gt, dt, iou_type):
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = coco_cls(gt)
        coco_dt = coco_gt.loadRes(dt)
        ev = eval_cls(coco_gt, coco_dt, iou_type)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return [float(s) for s in ev.stats]


TOOLS = {
    "evalengine": evalengine_stats,
    "evalengine-parquet": evalengine_stats,
    "evalengine-store": evalengine_store_stats,
    "evalengine-compat": evalengine_compat_stats,
    "pycocotools": pycocotools_stats,
    "faster-coco-eval": faster_coco_eval_stats,
    "hotcoco": hotcoco_stats,
    "ultrafast-pycocotools": ultrafast_stats,
    "vernier": vernier_stats,
}

if __name__ == "__main__":
    tool, gt, dt = sys.argv[1:4]
    started = time.perf_counter()
    stats = TOOLS[tool](gt, dt, sys.argv[4] if len(sys.argv) > 4 else "bbox")
    print(json.dumps({"tool": tool, "stats": stats, "in_process_seconds": time.perf_counter() - started}), flush=True)
    if tool.startswith("evalengine"):
        from evalengine.cli import end_process

        end_process(0)  # as the evalengine command ends
