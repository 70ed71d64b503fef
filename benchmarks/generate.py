"""Generate a COCO-shaped ground truth and result set of any size (vectorised, seeded).

Ground truth: Poisson(gt_per_image) boxes per image with COCO-like sizes (roughly 40 % small, 35 %
medium, 25 % large), 1 % crowd. Detections, ``dets_per_image`` per image: jittered copies of ground
truths (a realistic IoU spread, duplicates), some with the wrong class, the rest background boxes;
scores rounded to 3 decimals so that ties occur, as in real result files.

    python benchmarks/generate.py --images 5000 --classes 80 --out benchmarks/out/coco5k
"""

import argparse
from pathlib import Path

import numpy as np
import polars as pl


def generate(n_images: int, n_classes: int, gt_per_image: float, dets_per_image: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    width = rng.choice([480, 500, 612, 640], n_images)
    height = rng.choice([360, 427, 480, 640], n_images)
    image_ids = np.arange(1, n_images + 1)

    n_gt = rng.poisson(gt_per_image, n_images)
    gt_image = np.repeat(np.arange(n_images), n_gt)
    total_gt = gt_image.size
    side = np.exp(rng.normal(3.7, 1.0, total_gt)).clip(2, 600)
    aspect = np.exp(rng.normal(0, 0.5, total_gt))
    gw = np.minimum(side * np.sqrt(aspect), width[gt_image] - 1)
    gh = np.minimum(side / np.sqrt(aspect), height[gt_image] - 1)
    gx = rng.random(total_gt) * (width[gt_image] - gw)
    gy = rng.random(total_gt) * (height[gt_image] - gh)
    gt_box = np.round(np.stack([gx, gy, gw, gh], 1), 2)
    gt_cat = rng.integers(1, n_classes + 1, total_gt)
    crowd = rng.random(total_gt) < 0.01
    area = np.round(gt_box[:, 2] * gt_box[:, 3] * rng.uniform(0.55, 0.8, total_gt), 2)  # segmentation area

    # detections: up to 3 per ground truth, capped at dets_per_image per image, background fills the rest
    copies = rng.integers(0, 4, total_gt)
    src = np.repeat(np.arange(total_gt), copies)
    src_image = gt_image[src]
    keep = np.zeros(src.size, bool)
    order = np.argsort(src_image, kind="stable")
    rank = np.arange(src.size) - np.searchsorted(src_image[order], src_image[order])
    keep[order] = rank < dets_per_image
    src = src[keep]
    jitter = rng.normal(0, rng.choice([0.03, 0.1, 0.25], src.size)[:, None], (src.size, 4))
    b = gt_box[src]
    tp_box = np.stack([b[:, 0] + jitter[:, 0] * b[:, 2], b[:, 1] + jitter[:, 1] * b[:, 3],
                       b[:, 2] * np.exp(jitter[:, 2]), b[:, 3] * np.exp(jitter[:, 3])], 1)
    tp_cat = np.where(rng.random(src.size) < 0.85, gt_cat[src], rng.integers(1, n_classes + 1, src.size))
    tp_score = rng.beta(4, 2, src.size)

    per_image = np.bincount(gt_image[src], minlength=n_images)
    n_bg = dets_per_image - per_image
    bg_image = np.repeat(np.arange(n_images), n_bg)
    bw = np.minimum(np.exp(rng.normal(3.5, 1.0, bg_image.size)), width[bg_image] - 1)
    bh = np.minimum(np.exp(rng.normal(3.5, 1.0, bg_image.size)), height[bg_image] - 1)
    bg_box = np.stack([rng.random(bg_image.size) * (width[bg_image] - bw),
                       rng.random(bg_image.size) * (height[bg_image] - bh), bw, bh], 1)
    bg_cat = rng.integers(1, n_classes + 1, bg_image.size)
    bg_score = rng.beta(1.2, 5, bg_image.size)

    dt_image = np.concatenate([gt_image[src], bg_image])
    dt_box = np.round(np.concatenate([tp_box, bg_box]), 2)
    dt_cat = np.concatenate([tp_cat, bg_cat])
    dt_score = np.round(np.concatenate([tp_score, bg_score]), 3)
    shuffle = rng.permutation(dt_image.size)

    images = pl.DataFrame({"id": image_ids, "width": width, "height": height,
                           "file_name": [f"{i:012d}.jpg" for i in image_ids]})
    annotations = pl.DataFrame({
        "id": np.arange(1, total_gt + 1), "image_id": image_ids[gt_image], "category_id": gt_cat,
        "bbox": gt_box, "area": area, "iscrowd": crowd.astype(np.int64),
    }).with_columns(pl.col("bbox").arr.to_list())
    categories = pl.DataFrame({"id": np.arange(1, n_classes + 1), "name": [f"class{c}" for c in range(1, n_classes + 1)],
                               "supercategory": "thing"})
    detections = pl.DataFrame({
        "image_id": image_ids[dt_image[shuffle]], "category_id": dt_cat[shuffle],
        "bbox": dt_box[shuffle], "score": dt_score[shuffle],
    }).with_columns(pl.col("bbox").arr.to_list())
    return images, annotations, categories, detections


def write(out: Path, images, annotations, categories, detections, parquet: bool = False) -> None:
    """``out/gt.json`` (COCO), ``out/dt.json`` (a COCO result list) and, if asked, ``out/dt.parquet``."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "gt.json", "w") as handle:
        handle.write('{"images":')
        handle.write(images.write_json())
        handle.write(',"annotations":')
        handle.write(annotations.write_json())
        handle.write(',"categories":')
        handle.write(categories.write_json())
        handle.write("}")
    detections.write_json(out / "dt.json")
    if parquet:
        detections.write_parquet(out / "dt.parquet")


def write_chunked(out: Path, n_images: int, n_classes: int, gt_per_image: float, dets_per_image: int, seed: int = 0,
                  chunk_images: int = 50000) -> tuple:
    """A set of any size written a chunk of images at a time, never whole in memory: ``out/gt.json`` (COCO) and
    ``out/dt.parquet`` (the results; no JSON copy). Chunk ``c`` is :func:`generate` of its images with seed
    ``(seed, c)``, its image and annotation ids moved past the earlier chunks'. Returns (images, ground truths,
    detections)."""
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    n_gt = n_dt = 0
    images_part, annotations_part = out / "gt.images.part", out / "gt.annotations.part"
    with open(images_part, "w") as images_file, open(annotations_part, "w") as annotations_file:
        writer = None
        for c, first in enumerate(range(0, n_images, chunk_images)):
            size = min(chunk_images, n_images - first)
            images, annotations, categories, detections = generate(size, n_classes, gt_per_image, dets_per_image,
                                                                   seed=[seed, c])
            images = images.with_columns(pl.col("id") + first, pl.format("{}.jpg", (pl.col("id") + first)
                                                                         .cast(pl.String).str.zfill(12)).alias("file_name"))
            annotations = annotations.with_columns(pl.col("id") + n_gt, pl.col("image_id") + first)
            detections = detections.with_columns(pl.col("image_id") + first)
            for handle, frame in ((images_file, images), (annotations_file, annotations)):
                if frame.height:
                    handle.write(("," if handle.tell() else "") + frame.write_json()[1:-1])
            table = detections.to_arrow()
            writer = writer or pq.ParquetWriter(out / "dt.parquet", table.schema)
            writer.write_table(table)
            n_gt, n_dt = n_gt + annotations.height, n_dt + detections.height
        writer.close()
    with open(out / "gt.json", "w") as handle:
        for key, part in (("images", images_part), ("annotations", annotations_part)):
            handle.write(("{" if key == "images" else ",") + f'"{key}":[')
            with open(part) as source:
                while block := source.read(1 << 24):
                    handle.write(block)
            handle.write("]")
            part.unlink()
        handle.write(',"categories":' + categories.write_json() + "}")
    return n_images, n_gt, n_dt


# named sets: their sizes are the defaults of the size options (an option given still wins)
SHAPES = {"coco": {"images": 5000, "classes": 80, "gt_per_image": 7.3, "dets_per_image": 100},
          # Objects365 val: 80k images, 365 classes, ~15 boxes per image, ~1.2M results
          "objects365": {"images": 80000, "classes": 365, "gt_per_image": 13.0, "dets_per_image": 15}}


def parse_sizes(parser: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """Parse ``argv`` with ``--shape``'s sizes as the defaults of the size options."""
    shape = parser.parse_args(argv).shape
    parser.set_defaults(**SHAPES[shape])
    return parser.parse_args(argv)


def add_size_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", choices=list(SHAPES), default="coco",
                        help="a named set's sizes (objects365: 80k images, 365 classes, 15 results per image)")
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--classes", type=int, default=80)
    parser.add_argument("--gt-per-image", type=float, default=7.3)
    parser.add_argument("--dets-per-image", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_arguments(parser)
    parser.add_argument("--parquet", action="store_true", help="also write the detections as dt.parquet")
    parser.add_argument("--out", type=Path, required=True, help="folder for gt.json and dt.json")
    parser.add_argument("--chunk-images", type=int, default=0,
                        help="write a chunk of this many images at a time (any size in bounded memory): gt.json and "
                             "dt.parquet only")
    args = parse_sizes(parser, argv)
    if args.chunk_images:
        counts = write_chunked(args.out, args.images, args.classes, args.gt_per_image, args.dets_per_image,
                               args.seed, args.chunk_images)
        print(f"{args.out}: {counts[0]} images, {counts[1]} ground truths, {counts[2]} detections")
        return
    tables = generate(args.images, args.classes, args.gt_per_image, args.dets_per_image, args.seed)
    write(args.out, *tables, parquet=args.parquet)
    print(f"{args.out}: {tables[0].height} images, {tables[1].height} ground truths, {tables[3].height} detections")


if __name__ == "__main__":
    main()
