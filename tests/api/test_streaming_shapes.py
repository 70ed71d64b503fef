"""The streaming evaluator for masks (binary arrays per detection, as torchmetrics passes them, or COCO RLE dicts) and
keypoints: any batch split and any number of ranks (merged objects, or parts saved by 2 processes) gives exactly the
one-shot evaluation of the same images, whose COCO inputs are made here with pycocotools' own mask encoder."""

import multiprocessing
import pickle

import numpy as np
import pytest

from evalengine.api import evaluate_coco
from evalengine.api.streaming import StreamingEvaluator
from evalengine.errors import InputError
from evalengine.match.coco import CocoProtocol
from tests.api.test_streaming import _assert_same, _splits

mask_utils = pytest.importorskip("pycocotools.mask")


def _blob(rng, h: int, w: int) -> np.ndarray:
    """A random binary mask: a rectangle with holes and specks (sometimes empty, sometimes touching the border)."""
    mask = np.zeros((h, w), np.uint8)
    if rng.random() < 0.05:
        return mask
    y0, x0 = rng.integers(0, h - 2), rng.integers(0, w - 2)
    mask[y0:rng.integers(y0 + 1, h + 1), x0:rng.integers(x0 + 1, w + 1)] = 1
    mask[rng.random((h, w)) < 0.08] ^= 1
    return mask


def _rle(mask: np.ndarray) -> dict:
    rle = mask_utils.encode(np.asfortranarray(mask))
    return {"size": rle["size"], "counts": rle["counts"].decode("ascii")}


def _masks_case(seed: int):
    """Per-image targets and predictions with masks, and the one-shot COCO dict and results of the same objects."""
    rng = np.random.default_rng(seed)
    image_ids = rng.choice(np.arange(1, 200), size=int(rng.integers(2, 9)), replace=False).tolist()
    cats = [1, 2, 4][:int(rng.integers(1, 4))]
    given_boxes = seed % 3 == 1  # predictions with boxes: read as box results (loadRes' bbox branch)
    targets, predictions, anns, results = [], [], {}, {}
    for image_id in image_ids:
        h, w = int(rng.integers(8, 30)), int(rng.integers(8, 30))
        n_gt, n_dt = int(rng.integers(0, 5)), int(rng.integers(0, 7))
        gt_masks = np.array([_blob(rng, h, w) for _ in range(n_gt)], np.uint8).reshape(n_gt, h, w)
        dt_masks = np.array([_blob(rng, h, w) if rng.random() < 0.5 or not n_gt else
                             np.where(rng.random((h, w)) < 0.03, 1 - gt_masks[rng.integers(n_gt)],
                                      gt_masks[rng.integers(n_gt)]) for _ in range(n_dt)], np.uint8).reshape(n_dt, h, w)
        labels, dt_labels = rng.choice(cats, n_gt), rng.choice(cats, n_dt)
        crowd = (rng.random(n_gt) < 0.1).astype(int)
        scores = np.round(rng.random(n_dt), int(rng.choice([1, 3])))
        target = {"image_id": image_id, "masks": gt_masks.astype(bool), "labels": labels, "iscrowd": crowd}
        prediction = {"masks": dt_masks, "scores": scores, "labels": dt_labels}
        dt_boxes = [mask_utils.toBbox(mask_utils.encode(np.asfortranarray(m))).tolist() for m in dt_masks]
        if given_boxes:
            prediction["boxes"] = np.array([[x, y, x + bw, y + bh] for x, y, bw, bh in dt_boxes]).reshape(-1, 4)
        targets.append(target)
        predictions.append(prediction)
        anns[image_id] = [{"image_id": image_id, "category_id": int(c), "iscrowd": int(k), "segmentation": _rle(m),
                           "bbox": mask_utils.toBbox(mask_utils.encode(np.asfortranarray(m))).tolist(),
                           "area": float(mask_utils.area(mask_utils.encode(np.asfortranarray(m))))}
                          for m, c, k in zip(gt_masks, labels, crowd)]
        results[image_id] = [{"image_id": image_id, "category_id": int(c), "segmentation": _rle(m), "score": float(s),
                              **({"bbox": [x, y, (x + bw) - x, (y + bh) - y]} if given_boxes else {})}
                             for m, c, s, (x, y, bw, bh) in zip(dt_masks, dt_labels, scores, dt_boxes)]
    sizes = {t["image_id"]: t["masks"].shape[1:] for t in targets}
    gt = {"images": [{"id": i, "height": sizes[i][0], "width": sizes[i][1]} for i in sorted(image_ids)],
          "annotations": [dict(a, id=n + 1) for n, a in enumerate(a for i in sorted(image_ids) for a in anns[i])],
          "categories": [{"id": c, "name": str(c)} for c in sorted({int(c) for t in targets for c in t["labels"]}
                                                                  | {int(c) for p in predictions for c in p["labels"]})]}
    return targets, predictions, (gt, [r for i in sorted(image_ids) for r in results[i]])


def _keypoints_case(seed: int):
    """Per-image targets and predictions with 17 keypoints, and the one-shot COCO inputs."""
    rng = np.random.default_rng(seed)
    image_ids = rng.choice(np.arange(1, 200), size=int(rng.integers(2, 9)), replace=False).tolist()
    targets, predictions, anns, results = [], [], {}, {}
    for image_id in image_ids:
        n_gt, n_dt = int(rng.integers(0, 4)), int(rng.integers(0, 6))
        boxes = np.round(np.column_stack([rng.uniform(0, 300, (n_gt, 2)), rng.uniform(5, 200, (n_gt, 2))]), 2)
        keypoints = np.concatenate([boxes[:, None, :2] + rng.random((n_gt, 17, 2)) * boxes[:, None, 2:],
                                    rng.choice([0, 1, 2], (n_gt, 17, 1), p=[0.3, 0.2, 0.5])], axis=2)
        area = boxes[:, 2] * boxes[:, 3] * rng.uniform(0.3, 1.0, n_gt)
        source = rng.integers(0, max(n_gt, 1), n_dt)
        dt_keypoints = (keypoints[source] if n_gt else rng.random((n_dt, 17, 3)) * 300) + \
            np.concatenate([rng.normal(0, 6, (n_dt, 17, 2)), np.zeros((n_dt, 17, 1))], axis=2)
        scores = np.round(rng.random(n_dt), 2)
        crowd = (rng.random(n_gt) < 0.1).astype(int)
        targets.append({"image_id": image_id, "boxes": boxes, "keypoints": keypoints, "labels": np.ones(n_gt, int),
                        "area": area, "iscrowd": crowd})
        predictions.append({"keypoints": dt_keypoints.reshape(n_dt, 51), "scores": scores,
                            "labels": np.ones(n_dt, int)})
        anns[image_id] = [{"image_id": image_id, "category_id": 1, "bbox": b.tolist(), "area": float(a),
                           "iscrowd": int(k), "keypoints": kp.reshape(-1).tolist(),
                           "num_keypoints": int((kp[:, 2] > 0).sum())}
                          for b, a, k, kp in zip(boxes, area, crowd, keypoints)]
        results[image_id] = [{"image_id": image_id, "category_id": 1, "keypoints": kp.reshape(-1).tolist(),
                              "score": float(s)} for kp, s in zip(dt_keypoints, scores)]
    gt = {"images": [{"id": i} for i in sorted(image_ids)],
          "annotations": [dict(a, id=n + 1) for n, a in enumerate(a for i in sorted(image_ids) for a in anns[i])],
          "categories": [{"id": 1, "name": "1"}]}
    return targets, predictions, (gt, [r for i in sorted(image_ids) for r in results[i]])


CASES = {"segm": _masks_case, "keypoints": _keypoints_case}
BOX_FORMATS = {"segm": "xyxy", "keypoints": "xywh"}


def _streamed(protocol, targets, predictions, rng, n_ranks: int, n_batches: int):
    ranks = [StreamingEvaluator(protocol, box_format=BOX_FORMATS[protocol.iou_type]) for _ in range(n_ranks)]
    owner = rng.integers(0, n_ranks, len(targets))
    for rank, evaluator in enumerate(ranks):
        mine = np.flatnonzero(owner == rank)
        for batch in _splits(len(mine), rng, n_batches):
            evaluator.update([predictions[i] for i in mine[batch]], [targets[i] for i in mine[batch]])
    return ranks[-1].merge(*[pickle.loads(pickle.dumps(r.state())) for r in ranks[:-1]])


@pytest.mark.parametrize("iou_type", ["segm", "keypoints"])
@pytest.mark.parametrize("seed", range(10))
def test_any_batch_split_and_ranks_equal_one_shot(iou_type, seed):
    targets, predictions, (gt, results) = CASES[iou_type](seed)
    protocol = CocoProtocol(iou_type=iou_type)
    expected = evaluate_coco(gt, results, protocol)
    rng = np.random.default_rng(300 + seed)
    _assert_same(_streamed(protocol, targets, predictions, rng, 1 + seed % 3, 1 + seed % 4).compute(), expected)


def test_rle_dicts_equal_binary_masks():
    targets, predictions, (gt, results) = _masks_case(5)
    as_rle = [{k: v for k, v in p.items() if k != "masks"} | {"segmentation": [_rle(m) for m in p["masks"]]}
              for p in predictions]
    protocol = CocoProtocol(iou_type="segm")
    evaluator = StreamingEvaluator(protocol)
    evaluator.update(as_rle, targets)
    _assert_same(evaluator.compute(), evaluate_coco(gt, results, protocol))


def _rank_process(folder, iou_type, seed, rank, n_ranks):
    targets, predictions, _ = CASES[iou_type](seed)
    evaluator = StreamingEvaluator(CocoProtocol(iou_type=iou_type), box_format=BOX_FORMATS[iou_type])
    mine = list(range(rank, len(targets), n_ranks))
    for lo in range(0, len(mine), 2):  # batches of 2 images
        evaluator.update([predictions[i] for i in mine[lo:lo + 2]], [targets[i] for i in mine[lo:lo + 2]])
    evaluator.save(folder / iou_type)


def test_two_processes_saving_to_one_folder_equal_one_shot(tmp_path):
    seed = 8
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_rank_process, args=(tmp_path, iou_type, seed, rank, 2))
               for iou_type in CASES for rank in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
        assert worker.exitcode == 0
    for iou_type, case in CASES.items():
        assert len(list((tmp_path / iou_type).glob("images-*.parquet"))) == 2
        protocol = CocoProtocol(iou_type=iou_type)
        _, _, (gt, results) = case(seed)
        _assert_same(StreamingEvaluator.load(tmp_path / iou_type, protocol=protocol,
                                             box_format=BOX_FORMATS[iou_type]).compute(),
                     evaluate_coco(gt, results, protocol))


def test_bad_shapes_are_located():
    evaluator = StreamingEvaluator(CocoProtocol(iou_type="segm"))
    with pytest.raises(InputError, match=r"update 1, target 0 \(image_id 3\): 'masks' must be n x H x W for 2 labels, "
                                         r"got shape \(1, 4, 4\)"):
        evaluator.update([{"masks": np.zeros((0, 4, 4)), "scores": [], "labels": []}],
                         [{"image_id": 3, "masks": np.zeros((1, 4, 4)), "labels": [1, 1]}])
    with pytest.raises(InputError, match=r"update 2, prediction 0 \(image_id 3\): missing 'scores'"):
        evaluator.update([{"masks": np.zeros((1, 4, 4)), "labels": [1]}],
                         [{"image_id": 3, "masks": np.zeros((1, 4, 4)), "labels": [1]}])
    with pytest.raises(InputError, match=r"update 3, target 0 \(image_id 3\): missing 'boxes'"):
        evaluator.update([{"keypoints": np.zeros((1, 51)), "scores": [1], "labels": [1]}],
                         [{"image_id": 3, "keypoints": np.zeros((1, 17, 3)), "labels": [1]}])
