"""The OpenImages challenge protocol at scale: an OpenImages-challenge-shaped dataset (500 classes of the real
hierarchy, group-of boxes, verified positive and negative image-level labels, predictions near the boxes with their
classes or an ancestor's) evaluated by each tool in its own process, with wall time, peak RSS and mAP.

Tools:
- ``evalengine``: ``evalengine openimages`` on the CSV files (ingest, match, accumulate);
- ``evalengine-store``: the same from a store ingested beforehand (match and accumulate);
- ``reference``: the TF Object Detection API's NumPy evaluator (tests/openimages_reference.py, its transcription) on
  the files expanded by its expansion tool, fed image by image; its driver groups the predictions by image once
  (``oid_challenge_evaluation.py`` selects them with ``.loc`` per image: quadratic, hours at 100k images), so the
  reference's time here is a lower bound of the official script's.

    python benchmarks/bench_openimages.py --images 100000 --tools evalengine-store evalengine reference
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

HERE = Path(__file__).parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from bench_coco import run_child  # noqa: E402

DATA = ROOT / "tests" / "data" / "openimages"
HIERARCHY = DATA / "bbox_labels_600_hierarchy.json"
DESCRIPTIONS = DATA / "class-descriptions-boxable.csv"


def generate(out: Path, n_images: int, n_classes: int = 500, boxes_per_image: float = 7.0,
             dets_per_image: int = 40, seed: int = 0) -> None:
    """boxes.csv, labels.csv, predictions.csv (normalised corners; 6-decimal scores and coordinates)."""
    from evalengine.io.openimages import read_hierarchy
    rng = np.random.default_rng(seed)
    tree = read_hierarchy(HIERARCHY)
    classes = np.array(sorted(tree.classes)[:n_classes])
    weights = 1.0 / np.arange(1, n_classes + 1) ** 0.8
    weights /= weights.sum()
    ids = np.array([f"{i:016x}" for i in rng.choice(2**62, n_images, replace=False)])
    n_box = rng.poisson(boxes_per_image, n_images)
    image_of_box = np.repeat(np.arange(n_images), n_box)
    m = image_of_box.shape[0]
    box_class = rng.choice(n_classes, m, p=weights)
    lo = rng.random((m, 2)) * 0.8
    hi = np.minimum(lo + rng.random((m, 2)) * 0.4 + 0.02, 1.0)
    group_of = rng.random(m) < 0.1
    pl.DataFrame({"ImageID": ids[image_of_box], "LabelName": classes[box_class], "XMin": lo[:, 0].round(6),
                  "XMax": hi[:, 0].round(6), "YMin": lo[:, 1].round(6), "YMax": hi[:, 1].round(6),
                  "IsGroupOf": group_of.astype(int)}).write_csv(out / "boxes.csv")
    # verified labels: the box classes (positive), a few other positives and negatives per image
    extra = rng.poisson(2.0, n_images)
    image_of_extra = np.repeat(np.arange(n_images), extra)
    labels = pl.concat([
        pl.DataFrame({"ImageID": ids[image_of_box], "LabelName": classes[box_class], "Confidence": 1}),
        pl.DataFrame({"ImageID": ids[image_of_extra], "LabelName": classes[rng.choice(n_classes, len(image_of_extra))],
                      "Confidence": (rng.random(len(image_of_extra)) < 0.4).astype(np.int32)})]).unique(maintain_order=True)
    labels.write_csv(out / "labels.csv")
    # predictions: near a box of the image (its class, or an ancestor of it), or anywhere
    n_det = rng.poisson(dets_per_image, n_images)
    image_of_det = np.repeat(np.arange(n_images), n_det)
    k = image_of_det.shape[0]
    first_box = np.concatenate([[0], np.cumsum(n_box)])[:-1]
    has_box = n_box[image_of_det] > 0
    near = has_box & (rng.random(k) < 0.6)
    pick = first_box[image_of_det] + (rng.random(k) * np.maximum(n_box[image_of_det], 1)).astype(int)
    pick = np.where(near, pick, 0)
    det_class = np.where(near, box_class[np.minimum(pick, m - 1)], rng.choice(n_classes, k, p=weights))
    det_lo = np.where(near[:, None], lo[np.minimum(pick, m - 1)] + rng.normal(0, 0.03, (k, 2)), rng.random((k, 2)) * 0.8)
    det_hi = np.where(near[:, None], hi[np.minimum(pick, m - 1)] + rng.normal(0, 0.03, (k, 2)),
                      det_lo + rng.random((k, 2)) * 0.3 + 0.01)
    det_lo, det_hi = np.clip(det_lo, 0, 1), np.clip(det_hi, 0, 1)
    labels_of = classes[det_class]
    ancestors = {c: sorted(tree.ancestors[c]) for c in classes}
    up = near & (rng.random(k) < 0.15)
    labels_of[up] = [ancestors[c][0] if ancestors[c] else c for c in labels_of[up]]
    pl.DataFrame({"ImageID": ids[image_of_det], "LabelName": labels_of, "Score": rng.random(k).round(6),
                  "XMin": det_lo[:, 0].round(6), "XMax": det_hi[:, 0].round(6), "YMin": det_lo[:, 1].round(6),
                  "YMax": det_hi[:, 1].round(6)}).write_csv(out / "predictions.csv")


# --- the tools, in the child -------------------------------------------------------------------------------------

def _evalengine(data: Path) -> dict:
    from evalengine.api.openimages import evaluate_openimages
    evaluation = evaluate_openimages(data / "boxes.csv", data / "labels.csv", HIERARCHY, data / "predictions.csv",
                                     class_descriptions=DESCRIPTIONS)
    return {"map": evaluation.mean_ap()}


def _evalengine_store(data: Path) -> dict:
    import shutil

    from evalengine.api import open as open_store
    from evalengine.api.openimages import evaluate_store_openimages
    shutil.rmtree(data / "store" / "matches", ignore_errors=True)
    return {"map": evaluate_store_openimages(open_store(data / "store")).mean_ap()}


def _reference(data: Path) -> dict:
    """The reference's CSV path (tests/openimages_reference.py), predictions grouped by image once."""
    import io

    import pandas as pd

    from tests import openimages_reference as ref
    hierarchy = json.loads(HIERARCHY.read_text())
    mids = [line.split(",")[0] for line in DESCRIPTIONS.read_text().splitlines()]
    label_map = {mid: i + 1 for i, mid in enumerate(mids)}

    def expanded(name, labels_file):
        with open(data / name) as handle:
            return io.StringIO("".join(ref.expand_csv(handle.readlines(), hierarchy, labels_file)))

    locations = pd.read_csv(expanded("boxes.csv", False))
    labels = pd.read_csv(expanded("labels.csv", True)).rename(columns={"Confidence": "ConfidenceImageLabel"})
    annotations = pd.concat([locations, labels])
    predictions = dict(list(pd.read_csv(data / "predictions.csv").groupby("ImageID")))
    empty = pd.DataFrame({c: [] for c in ("LabelName", "Score", "YMin", "XMin", "YMax", "XMax")})
    groundtruth, detections = [], []
    for image_id, frame in annotations.groupby("ImageID"):
        boxes = frame[frame.XMin.notnull()]
        verified = frame[frame.ConfidenceImageLabel.notnull()]
        groundtruth.append({"image_key": image_id,
                            "groundtruth_boxes": boxes[["YMin", "XMin", "YMax", "XMax"]].to_numpy().astype(float),
                            "groundtruth_classes": boxes["LabelName"].map(lambda x: label_map[x]).to_numpy(),
                            "groundtruth_group_of": boxes["IsGroupOf"].to_numpy().astype(int).astype(bool),
                            "groundtruth_image_classes": verified["LabelName"].map(lambda x: label_map[x]).to_numpy()})
        mine = predictions.get(image_id, empty)
        detections.append({"image_key": image_id,
                           "detection_classes": mine["LabelName"].map(lambda x: label_map[x]).to_numpy().astype(int),
                           "detection_scores": mine["Score"].to_numpy().astype(float),
                           "detection_boxes": mine[["YMin", "XMin", "YMax", "XMax"]].to_numpy().astype(float)})
    ap, mean_ap = ref.evaluate(max(label_map.values()), groundtruth, detections, challenge=True)
    return {"map": float(mean_ap), "per_class": {m: float(ap[i - 1]) for m, i in label_map.items()
                                                 if not np.isnan(ap[i - 1])}}


TOOLS = {"evalengine": _evalengine, "evalengine-store": _evalengine_store, "reference": _reference}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/openimages"))
    parser.add_argument("--tools", nargs="+", default=list(TOOLS), choices=list(TOOLS))
    parser.add_argument("--max-rss-gib", type=float, default=6.0)
    parser.add_argument("--tool", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tool:  # the child
        started = time.perf_counter()
        result = TOOLS[args.tool](args.data)
        print(json.dumps({**result, "tool": args.tool, "work_seconds": time.perf_counter() - started}))
        return
    data = args.out / f"images={args.images}"
    if not (data / "predictions.csv").is_file():
        data.mkdir(parents=True, exist_ok=True)
        generate(data, args.images)
    if "evalengine-store" in args.tools and not (data / "store").exists():
        from evalengine.api.openimages import ingest_openimages
        ingest_openimages(data / "boxes.csv", data / "labels.csv", HIERARCHY, data / "predictions.csv", data / "store",
                          class_descriptions=DESCRIPTIONS)
    results = []
    for tool in args.tools:
        result = run_child([sys.executable, __file__, "--tool", tool, "--data", str(data)], args.max_rss_gib * 2**30)
        result.setdefault("tool", tool)
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "per_class"}), flush=True)
    maps = {r["tool"]: r["map"] for r in results if "map" in r}
    if len(set(round(v, 12) for v in maps.values())) > 1:
        print(f"mAP differ: {maps}", flush=True)


if __name__ == "__main__":
    main()
