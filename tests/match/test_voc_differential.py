"""The VOC protocol against an independent transcription of py-faster-rcnn's ``voc_eval`` (``lib/datasets/
voc_eval.py``: ``parse_rec``, the per-class greedy loop, ``voc_ap``) written here from reading it, on hundreds of
random datasets written as VOC XML and devkit result files: tied scores (both sides use the stable order; the
reference's ``np.argsort(-confidence)`` is not stable), difficult objects, empty images, classes whose objects are all
difficult, duplicates, integer and non-integer boxes, VOC07 and VOC12 AP, ``>`` and ``>=``, ``use_diff``. AP, TP and
FP equal to 1e-12; and the same through the store and the command on a real VOC2012 subset with difficult objects."""

import xml.etree.ElementTree as ET

import numpy as np
import polars as pl
import pytest

from evalengine.api import VocProtocol, evaluate_voc
from evalengine.io.voc import iter_devkit_results, read_voc_annotations
from evalengine.match.voc import match_shard
from evalengine.metrics.voc import accumulate
from tests.conftest import DATA
from tests.voc_files import padilla_to_voc, write_annotations, write_results

CLASSES = ("cat", "dog", "bird")
THRESHOLDS = (0.3, 0.5, 0.7)


# ---- the reference: voc_eval.py, transcribed -------------------------------------------------------------------
def parse_rec(path):
    objects = []
    for obj in ET.parse(path).findall("object"):
        box = obj.find("bndbox")
        objects.append({"name": obj.find("name").text, "difficult": int(obj.find("difficult").text),
                        "bbox": [float(box.find(c).text) for c in ("xmin", "ymin", "xmax", "ymax")]})
    return objects


def voc_ap(rec, prec, use_07_metric):
    if use_07_metric:
        ap = 0.0
        for t in np.arange(0.0, 1.1, 0.1):
            p = 0 if np.sum(rec >= t) == 0 else np.max(prec[rec >= t])
            ap = ap + p / 11.0
        return ap
    mrec = np.concatenate(([0.0], rec, [1.0]))
    mpre = np.concatenate(([0.0], prec, [0.0]))
    for i in range(mpre.size - 1, 0, -1):
        mpre[i - 1] = np.maximum(mpre[i - 1], mpre[i])
    i = np.where(mrec[1:] != mrec[:-1])[0]
    return np.sum((mrec[i + 1] - mrec[i]) * mpre[i + 1])


def voc_outcomes(recs, lines, classname, ovthresh, strict, use_diff):
    """voc_eval's per-detection arrays in its (stable) ranking: ``(scores, tp, fp, ovmax, npos)``; ``lines`` the
    class's result file as ``(image, score, x1, y1, x2, y2)``."""
    class_recs, npos = {}, 0
    for imagename, objects in recs.items():
        R = [obj for obj in objects if obj["name"] == classname]
        bbox = np.array([x["bbox"] for x in R])
        difficult = np.array([x["difficult"] for x in R]).astype(bool)
        if use_diff:
            difficult = np.zeros(len(R), bool)
        npos = npos + sum(~difficult)
        class_recs[imagename] = {"bbox": bbox, "difficult": difficult, "det": [False] * len(R)}
    image_ids = [x[0] for x in lines]
    confidence = np.array([x[1] for x in lines], dtype=float)
    BB = np.array([x[2:] for x in lines], dtype=float).reshape(-1, 4)
    sorted_ind = np.argsort(-confidence, kind="stable")  # the devkit's (MATLAB's) stable sort
    BB = BB[sorted_ind, :]
    image_ids = [image_ids[x] for x in sorted_ind]
    nd = len(image_ids)
    tp, fp, best = np.zeros(nd), np.zeros(nd), np.zeros(nd)
    for d in range(nd):
        R = class_recs[image_ids[d]]
        bb = BB[d, :].astype(float)
        ovmax = -np.inf
        BBGT = R["bbox"].astype(float)
        if BBGT.size > 0:
            ixmin = np.maximum(BBGT[:, 0], bb[0])
            iymin = np.maximum(BBGT[:, 1], bb[1])
            ixmax = np.minimum(BBGT[:, 2], bb[2])
            iymax = np.minimum(BBGT[:, 3], bb[3])
            iw = np.maximum(ixmax - ixmin + 1.0, 0.0)
            ih = np.maximum(iymax - iymin + 1.0, 0.0)
            inters = iw * ih
            uni = ((bb[2] - bb[0] + 1.0) * (bb[3] - bb[1] + 1.0)
                   + (BBGT[:, 2] - BBGT[:, 0] + 1.0) * (BBGT[:, 3] - BBGT[:, 1] + 1.0) - inters)
            overlaps = inters / uni
            ovmax = np.max(overlaps)
            jmax = np.argmax(overlaps)
            best[d] = ovmax
        if (ovmax > ovthresh) if strict else (ovmax >= ovthresh):
            if not R["difficult"][jmax]:
                if not R["det"][jmax]:
                    tp[d] = 1.0
                    R["det"][jmax] = 1
                else:
                    fp[d] = 1.0
        else:
            fp[d] = 1.0
    return confidence[sorted_ind], tp, fp, best, npos


def voc_eval(recs, lines, classname, ovthresh, use_07_metric, strict, use_diff):
    """``(ap, tp, fp)`` of one class (py-faster-rcnn ``voc_eval``, with the devkit's stable sort)."""
    _, tp, fp, _, npos = voc_outcomes(recs, lines, classname, ovthresh, strict, use_diff)
    n_fp, n_tp = int(fp.sum()), int(tp.sum())
    if npos == 0:  # voc_eval divides by zero; evalengine reports -1
        return -1.0, n_tp, n_fp
    fp, tp = np.cumsum(fp), np.cumsum(tp)
    rec = tp / float(npos)
    prec = tp / np.maximum(tp + fp, np.finfo(np.float64).eps)
    return float(voc_ap(rec, prec, use_07_metric)), n_tp, n_fp


# ---- random datasets ---------------------------------------------------------------------------------------------
def _box(rng, integer):
    x1, y1 = rng.uniform(1, 80, 2)
    w, h = rng.uniform(2, 40, 2)
    box = np.array([x1, y1, x1 + w, y1 + h])
    return tuple(int(v) for v in np.round(box)) if integer else tuple(float(v) for v in np.round(box, 3))


def _jitter(rng, box, integer):
    moved = np.array(box, dtype=float) + rng.normal(0, 3, 4)
    moved[2:] = np.maximum(moved[2:], moved[:2])
    return tuple(int(v) for v in np.round(moved)) if integer else tuple(float(v) for v in np.round(moved, 3))


def random_dataset(rng):
    """``(images, detections)`` in the helpers' forms: some empty images, difficult objects, a class whose objects
    are all difficult, detections near objects, duplicates, background boxes, scores from a few values (ties)."""
    integer = rng.random() < 0.5
    n_images = int(rng.integers(1, 8))
    all_difficult = CLASSES[int(rng.integers(len(CLASSES)))] if rng.random() < 0.3 else None
    images, detections = {}, {name: [] for name in CLASSES}
    scores = np.round(rng.uniform(0, 1, 6), 2) if rng.random() < 0.6 else None
    for i in range(n_images):
        stem = f"{i + 1:06d}" if rng.random() < 0.5 or i == 0 else f"img_{i}"
        objects = []
        for _ in range(int(rng.integers(0, 6))):
            name = CLASSES[int(rng.integers(len(CLASSES)))]
            objects.append((name, *_box(rng, integer), name == all_difficult or rng.random() < 0.2))
        images[stem] = objects
        for name, *box, _ in objects:
            for _ in range(int(rng.integers(0, 3))):
                detections[name].append((stem, *_jitter(rng, box, integer)))
        for _ in range(int(rng.integers(0, 3))):
            detections[CLASSES[int(rng.integers(len(CLASSES)))]].append((stem, *_box(rng, integer)))
    for name, rows in detections.items():
        rows += [rows[int(j)] for j in rng.integers(0, len(rows), int(rng.integers(0, 3)))] if rows else []
        rng.shuffle(rows)
        detections[name] = [(stem, float(scores[rng.integers(len(scores))]) if scores is not None
                             else round(float(rng.random()), 6), *box) for stem, *box in rows]
    first = next(iter(images))
    if not any(images.values()):
        images[first].append(("cat", *_box(rng, integer), False))
    present = sorted({obj[0] for objects in images.values() for obj in objects})
    if not any(detections[name] for name in present):
        detections[present[0]].append((first, 0.5, *_box(rng, integer)))
    return images, {name: rows for name, rows in detections.items() if name in present and rows}


def _check(acc, names, reference_inputs, protocol, metric):
    """Every class's AP, TP and FP at every threshold of ``acc`` equal the reference's."""
    recs, lines = reference_inputs
    for t, threshold in enumerate(protocol.iou_thresholds):
        for k, name in enumerate(names):
            ap, tp, fp = voc_eval(recs, lines.get(name, []), name, threshold, metric == "voc07", protocol.strict,
                                  protocol.use_difficult)
            assert (acc.tp[k, t], acc.fp[k, t]) == (tp, fp), (name, threshold)
            assert acc.ap[k, t] == pytest.approx(ap, abs=1e-12), (name, threshold, metric)


@pytest.mark.parametrize("seed", range(300))
def test_random_datasets(tmp_path, seed):
    """Readers, matching and accumulation, without a store: files → frames → match_shard → accumulate."""
    rng = np.random.default_rng(seed)
    images, detections = random_dataset(rng)
    annotations = write_annotations(tmp_path / "Annotations", images)
    results = write_results(tmp_path / "results", detections)
    dataset = read_voc_annotations(annotations)
    dt = pl.concat(list(iter_devkit_results(results, dataset)))
    recs = {path.stem: parse_rec(path) for path in sorted(annotations.glob("*.xml"))}
    lines = dict(detections)
    protocol = VocProtocol(iou_thresholds=THRESHOLDS, strict=bool(seed % 2), use_difficult=seed % 4 == 3)
    category_ids = dataset.categories.get_column("category_id").to_list()
    dt_matches, gt_matches = match_shard(dataset.gt, dt, category_ids, protocol)
    names = dataset.categories.get_column("name").to_list()
    for metric in ("voc07", "voc12"):
        acc = accumulate(dt_matches.lazy(), gt_matches.lazy(), category_ids, protocol, metric=metric)
        _check(acc, names, (recs, lines), protocol, metric)


@pytest.mark.parametrize("strict", [False, True])
def test_real_voc2012_subset(tmp_path, strict):
    """100 VOC2012 images (273 objects, 38 difficult) with a detector's results, through the store and 3 shards."""
    database = DATA / "voc" / "padilla_database"
    names = (database / "voc.names").read_text().split()
    dets = tmp_path / "dets"
    dets.mkdir()
    for path in (database / "dets").glob("*.txt"):  # class given by its 0-based index into voc.names
        lines = [line.split() for line in path.read_text().splitlines() if line.strip()]
        (dets / path.name).write_text("".join(" ".join([names[int(f[0])], *f[1:]]) + "\n" for f in lines))
    _, results = padilla_to_voc(None, dets, tmp_path, box="xyxy")
    annotations = database / "Annotations"
    recs = {path.stem: parse_rec(path) for path in sorted(annotations.glob("*.xml"))}
    lines = {}
    for path in sorted(results.glob("*.txt")):
        name = path.stem.split("_", 3)[3]
        lines[name] = [(f[0], float(f[1]), *map(float, f[2:])) for f in map(str.split, path.read_text().splitlines())]
    protocol = VocProtocol(iou_thresholds=(0.5, 0.75), strict=strict)
    evaluation = evaluate_voc(annotations, results, protocol, n_shards=3)
    assert evaluation.accumulate().n_gt.sum() == 235  # 273 objects, 38 difficult

    names = evaluation.layout.read("categories").get_column("name").to_list()
    for metric in ("voc07", "voc12"):
        _check(evaluation.accumulate(metric), names, (recs, lines), protocol, metric)
