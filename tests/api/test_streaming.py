"""The streaming evaluator: any batch split, any number of ranks (merged objects, or parts saved by 2 processes)
gives exactly the one-shot evaluation of the same images (stats, per-class values and every precision / score)."""

import multiprocessing
import pickle

import numpy as np
import pytest

from evalengine.api import evaluate_coco
from evalengine.api.streaming import StreamingEvaluator
from evalengine.errors import InputError
from evalengine.match.coco import CocoProtocol
from tests.generators import random_coco


def _per_image(seed: int, box_format: str):
    """random_coco(seed) as per-image targets and predictions (boxes in ``box_format``), and the one-shot inputs (a
    COCO dict and result list) built from the same arrays by hand."""
    gt, dt = random_coco(seed)
    rng = np.random.default_rng(seed)
    images = [image["id"] for image in gt["images"]]
    rng.shuffle(images)  # arrival order is not id order

    def boxes(anns):
        b = np.array([a["bbox"] for a in anns], dtype=np.float64).reshape(-1, 4)
        return np.column_stack([b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]]) if box_format == "xyxy" else b

    targets, predictions = [], []
    for image_id in images:
        anns = [a for a in gt["annotations"] if a["image_id"] == image_id]
        dets = [d for d in dt if d["image_id"] == image_id]
        targets.append({"image_id": image_id, "boxes": boxes(anns), "labels": np.array([a["category_id"] for a in anns]),
                        "iscrowd": np.array([a.get("iscrowd", 0) for a in anns]),
                        "area": np.array([a["area"] for a in anns], dtype=np.float64)})
        predictions.append({"boxes": boxes(dets), "scores": np.array([d["score"] for d in dets]),
                            "labels": np.array([d["category_id"] for d in dets])})

    def xywh(b):
        return [b[0], b[1], b[2] - b[0], b[3] - b[1]] if box_format == "xyxy" else list(b)

    categories = sorted({a["category_id"] for a in gt["annotations"]} | {d["category_id"] for d in dt})
    anns, results = [], []
    for image_id in sorted(images):
        n = images.index(image_id)
        t, p = targets[n], predictions[n]
        for b, c, crowd, area in zip(t["boxes"].tolist(), t["labels"].tolist(), t["iscrowd"].tolist(), t["area"].tolist()):
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": c, "bbox": xywh(b), "area": area,
                         "iscrowd": crowd})
        results += [{"image_id": image_id, "category_id": c, "bbox": xywh(b), "score": s}
                    for b, c, s in zip(p["boxes"].tolist(), p["labels"].tolist(), p["scores"].tolist())]
    one_shot = ({"images": [{"id": i} for i in sorted(images)], "annotations": anns,
                 "categories": [{"id": c, "name": str(c)} for c in categories]}, results)
    return targets, predictions, one_shot


def _splits(n: int, rng, parts: int) -> list:
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(parts - 1, n - 1), replace=False)) if n > 1 else []
    return np.split(np.arange(n), cuts)


def _assert_same(got, expected):
    assert got.stats() == expected.stats()
    assert got.class_metrics().equals(expected.class_metrics())
    a, b = got.accumulate(want_curve=True), expected.accumulate(want_curve=True)
    for key in ("ap", "recall", "precision", "scores"):
        assert np.array_equal(getattr(a, key), getattr(b, key)), key


PROTOCOLS = [CocoProtocol(), CocoProtocol(use_cats=False), CocoProtocol(max_dets=(1, 5, 10))]


@pytest.mark.parametrize("seed", range(12))
def test_any_batch_split_and_ranks_equal_one_shot(seed):
    box_format = ("xyxy", "xywh")[seed % 2]
    targets, predictions, (gt, results) = _per_image(seed, box_format)
    protocol = PROTOCOLS[seed % len(PROTOCOLS)]
    expected = evaluate_coco(gt, results, protocol)
    rng = np.random.default_rng(100 + seed)
    n_ranks = 1 + seed % 3
    ranks = [StreamingEvaluator(protocol, box_format=box_format) for _ in range(n_ranks)]
    owner = rng.integers(0, n_ranks, len(targets))
    for rank, evaluator in enumerate(ranks):
        mine = np.flatnonzero(owner == rank)
        for batch in _splits(len(mine), rng, 1 + seed % 5):
            evaluator.update([predictions[i] for i in mine[batch]], [targets[i] for i in mine[batch]])
    merged = ranks[-1].merge(*[pickle.loads(pickle.dumps(r.state())) for r in ranks[:-1]])
    _assert_same(merged.compute(), expected)


def _rank_process(folder, seed, rank, n_ranks):
    targets, predictions, _ = _per_image(seed, "xyxy")
    evaluator = StreamingEvaluator()
    mine = list(range(rank, len(targets), n_ranks))
    for lo in range(0, len(mine), 3):  # batches of 3 images
        batch = mine[lo:lo + 3]
        evaluator.update({targets[i]["image_id"]: predictions[i] for i in batch},
                         {targets[i]["image_id"]: {k: v for k, v in targets[i].items() if k != "image_id"}
                          for i in batch})
    evaluator.save(folder)


def test_two_processes_saving_to_one_folder_equal_one_shot(tmp_path):
    seed = 21
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_rank_process, args=(tmp_path / "parts", seed, rank, 2)) for rank in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
        assert worker.exitcode == 0
    assert len(list((tmp_path / "parts").glob("images-*.parquet"))) == 2
    _, _, (gt, results) = _per_image(seed, "xyxy")
    _assert_same(StreamingEvaluator.load(tmp_path / "parts").compute(), evaluate_coco(gt, results))


def test_tensors_through_dlpack():
    torch = pytest.importorskip("torch")
    targets, predictions, (gt, results) = _per_image(4, "xyxy")
    evaluator = StreamingEvaluator()
    evaluator.update([{k: torch.from_numpy(np.asarray(v)) for k, v in p.items()} for p in predictions],
                     [{k: torch.as_tensor(v) for k, v in t.items()} for t in targets])
    _assert_same(evaluator.compute(), evaluate_coco(gt, results))


class _DLPackOnly:
    """An array seen only through the DLPack protocol (what a tensor of another library offers)."""

    def __init__(self, values):
        self._values = np.asarray(values)

    def __dlpack__(self, **kwargs):
        return self._values.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._values.__dlpack_device__()


def test_arrays_through_dlpack_without_torch():
    targets, predictions, (gt, results) = _per_image(6, "xyxy")
    evaluator = StreamingEvaluator()
    evaluator.update([{k: _DLPackOnly(v) for k, v in p.items()} for p in predictions],
                     [{k: _DLPackOnly(v) if k != "image_id" else v for k, v in t.items()} for t in targets])
    _assert_same(evaluator.compute(), evaluate_coco(gt, results))


def test_bad_batches_are_located():
    evaluator = StreamingEvaluator()
    with pytest.raises(InputError, match=r"update 1, prediction 0 \(image_id 7\): 2 'scores' for 1 boxes"):
        evaluator.update([{"boxes": [[0, 0, 1, 1]], "scores": [0.5, 0.2], "labels": [1]}],
                         [{"image_id": 7, "boxes": [[0, 0, 1, 1]], "labels": [1]}])
    with pytest.raises(InputError, match=r"update 2, target 0 \(image_id 7\): 'boxes' must be n x 4"):
        evaluator.update([{"boxes": [[0, 0, 1, 1]], "scores": [0.5], "labels": [1]}],
                         [{"image_id": 7, "boxes": [[0, 0, 1]], "labels": [1]}])
    evaluator = StreamingEvaluator()
    batch = ([{"boxes": [[0, 0, 1, 1]], "scores": [0.5], "labels": [1]}], [{"image_id": 7, "boxes": [[0, 0, 1, 1]],
                                                                             "labels": [1]}])
    evaluator.update(*batch)
    evaluator.update(*batch)
    with pytest.raises(InputError, match="image_id 7 was given more than once"):
        evaluator.compute()
