"""End-to-end COCO segm benchmark: each tool in its own process on the same mask files, 12 stats out.

The mask set of :mod:`benchmarks.bench_mask_ingest` (COCO-val size by default: 5,000 images, ~36,000 ground-truth
polygons, 100 results per image as compressed RLE with their boxes, as detectron2 writes them). Tools: ``evalengine``
(``evalengine coco --iou-type segm`` on the JSON), ``evalengine-store`` (an already ingested store: matching and
metrics), ``pycocotools``, ``faster-coco-eval`` and ``hotcoco`` (``COCOeval(..., "segm")`` on the JSON). The table is
:func:`bench_coco.write_table`'s: median wall time, in-process time, peak RSS, the ratio to evalengine and whether the
12 numbers agree (|diff| <= 1e-12).

    python benchmarks/bench_segm.py --images 1000 --repeat 3
    python benchmarks/bench_segm.py --images 5000 --out /work/scratch/masks --tools evalengine hotcoco
"""

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_coco import (MODULES, add_run_arguments, compile_bytecode, prepare_in_child, run_tools,  # noqa: E402
                        write_table)
from generate import add_size_arguments  # noqa: E402

TOOLS = [tool for tool in MODULES if tool != "evalengine-parquet"]


def _prepare(args, data: Path) -> None:
    compile_bytecode()
    if not (data / "dt_masks.json").is_file():
        from bench_mask_ingest import write_masks

        write_masks(data, args)
    if "evalengine-store" in args.tools and not (data / "store_segm" / "manifest.json").is_file():
        import evalengine

        evalengine.ingest_coco(data / "gt_masks.json", data / "dt_masks.json", data / "store_segm")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_arguments(parser)
    add_run_arguments(parser, TOOLS)
    args = parser.parse_args(argv)

    name = f"masks_{args.images}img_{args.dets_per_image}det"  # bench_mask_ingest's folder: one generated set
    data = args.out / name
    if args.prepare_only:
        _prepare(args, data)
        return
    prepare_in_child(__file__, argv)
    inputs = {"evalengine-store": data / "store_segm"}
    rows, results = run_tools(args.tools, data / "gt_masks.json", lambda tool: inputs.get(tool, data / "dt_masks.json"),
                              args, "segm")
    write_table(rows, f"### segm, {args.images} images, {args.dets_per_image} mask results per image", args.repeat,
                args.out / f"segm_{args.images}img_{args.dets_per_image}det", {"dataset": name, "runs": results})


if __name__ == "__main__":
    main()
