"""COCO evaluation for training loops: ``update(predictions, targets)`` per batch, ``compute()`` at the end (boxes,
masks, keypoints).

Batches are held as columnar tables (NumPy arrays of each image's boxes, labels and scores; tensors arrive through
DLPack or ``__array__``, torch is never imported). Partial states merge: objects with :meth:`StreamingEvaluator.merge`
(e.g. after ``torch.distributed.all_gather_object`` of :meth:`~StreamingEvaluator.state`), or several processes
:meth:`~StreamingEvaluator.save` theirs into one folder that :meth:`StreamingEvaluator.load` reads.

``compute`` puts the images in id order (each image's objects in the order given) and evaluates them as
:func:`evalengine.evaluate_coco` evaluates the COCO dict and result table they make: the same numbers whatever the
batch split, the number of ranks and the order in which they arrive. An image given twice is an error."""

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from evalengine.api import evaluate_coco
from evalengine.errors import InputError
from evalengine.io.memory import _plain
from evalengine.io.proposal_masks import run_lengths
from evalengine.io.rle import area as rle_area
from evalengine.io.rle import encode_strings, to_bbox
from evalengine.evaluation.detection import Evaluation
from evalengine.match.coco import CocoProtocol
from evalengine.store.commit import replace_file

BOX_FORMATS = ("xyxy", "xywh")
_GT = {"image_id": pl.Int64, "category_id": pl.Int64, "bbox": pl.List(pl.Float64), "area": pl.Float64,
       "iscrowd": pl.Int64}
_DT = {"image_id": pl.Int64, "category_id": pl.Int64, "bbox": pl.List(pl.Float64), "score": pl.Float64}
_SHAPES = {"segmentation": pl.String, "keypoints": pl.List(pl.Float64), "num_keypoints": pl.Int64}
_NAMES = {"category_id": "labels", "score": "scores", "segmentation": "masks"}  # a column's key in the inputs


def _image_size(target, key: str) -> int | None:
    """A target's ``width`` or ``height``: given, else its masks' (n x H x W)."""
    if key in target:
        return int(as_array(target[key]))
    return int(as_array(target["masks"]).shape[2 if key == "width" else 1]) if "masks" in target else None


def _shape_columns(item, n: int, where: str) -> dict:
    """The shape columns of one image's objects: ``masks`` (n x H x W, binary) as compressed RLE JSON text (with
    their toBbox ``_bbox`` and area ``_area``, pycocotools' ``rleToBbox`` / ``rleArea``, for targets without boxes
    or area), ``segmentation`` (COCO's: RLE dicts or polygons) as JSON text, ``keypoints`` (n x K x 3 or n x 3K)
    flat, with a target's ``num_keypoints`` (labelled ones, v > 0, as COCO files count them)."""
    columns = {}
    if "masks" in item:
        masks = as_array(item["masks"]).astype(bool)
        if masks.ndim != 3 or len(masks) != n:
            raise InputError(f"{where}: 'masks' must be n x H x W for {n} labels, got shape {masks.shape}")
        runs = [np.asarray(run_lengths(mask), np.uint32) for mask in masks]
        counts = np.concatenate(runs) if runs else np.zeros(0, np.uint32)
        offsets = np.concatenate([[0], np.cumsum([len(r) for r in runs])]).astype(np.int64)
        h, w = masks.shape[1:]
        columns["segmentation"] = [json.dumps({"size": [h, w], "counts": text})
                                   for text in encode_strings(counts, offsets)]
        columns["_bbox"] = to_bbox(counts, offsets, np.full(n, h), np.full(n, w))
        columns["_area"] = rle_area(counts, offsets).astype(np.float64)
    elif "segmentation" in item:
        segmentation = list(item["segmentation"])
        columns["segmentation"] = [json.dumps(s, default=_plain) for s in segmentation]
    if "keypoints" in item:
        keypoints = as_array(item["keypoints"], np.float64)
        keypoints = keypoints.reshape(len(keypoints), -1) if keypoints.size else np.zeros((0, 0))
        columns["keypoints"] = pl.Series(keypoints.tolist(), dtype=pl.List(pl.Float64))
        columns["num_keypoints"] = (keypoints[:, 2::3] > 0).sum(axis=1)
    return columns



def as_array(value, dtype=None) -> np.ndarray:
    """A tensor (torch, JAX, CuPy: moved to the CPU where it says how), a NumPy array or a list as a NumPy array."""
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "cpu"):
        value = value.cpu()
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__"):
        try:
            value = np.from_dlpack(value)
        except (TypeError, RuntimeError, BufferError):
            pass
    return np.asarray(value, dtype=dtype)


@dataclass
class StreamingState:
    """What a streaming evaluator has seen: one frame of ground truths and one of detections per ``update``."""

    gt: list = field(default_factory=list)
    dt: list = field(default_factory=list)
    images: list = field(default_factory=list)  # frames of image_id (and width, height where given)


class StreamingEvaluator:
    """``update(predictions, targets)`` per batch; ``compute()`` gives the :class:`~evalengine.Evaluation`.

    ``predictions`` and ``targets`` are sequences of mappings, one per image, or mappings ``{image_id: mapping}``
    (torchvision's ``CocoEvaluator`` input). A prediction has ``boxes`` (n x 4), ``scores`` and ``labels``; a target
    ``boxes``, ``labels`` and optionally ``image_id`` (else numbered in arrival order from 1), ``iscrowd``, ``area``
    (else the box's w·h), ``width`` and ``height``. ``box_format``: ``xyxy`` (torchvision, torchmetrics; width =
    x2 − x1 in float64) or ``xywh`` (COCO). ``category_ids``: the evaluated categories (default: every label seen in
    targets and predictions, as torchmetrics takes them)."""

    def __init__(self, protocol: CocoProtocol | None = None, box_format: str = "xyxy", category_ids=None,
                 category_names: dict | None = None):
        if box_format not in BOX_FORMATS:
            raise InputError(f"box_format must be one of {BOX_FORMATS}, got {box_format!r}")
        self.protocol = protocol or CocoProtocol()
        self.box_format = box_format
        self.category_ids = None if category_ids is None else [int(c) for c in category_ids]
        self.category_names = dict(category_names or {})
        self._state = StreamingState()
        self._updates = 0

    # -- accumulating ---------------------------------------------------------------------------------------------

    def update(self, predictions, targets) -> None:
        """Add one batch (see the class); nothing is evaluated yet."""
        self._updates += 1
        if isinstance(targets, dict) and not isinstance(predictions, dict):
            raise InputError(f"update {self._updates}: targets are a mapping by image id, predictions are not")
        if isinstance(targets, dict):
            keys = list(targets)
            missing = [k for k in keys if k not in predictions]
            if missing:
                raise InputError(f"update {self._updates}: no prediction for image_id {missing[0]}")
            targets = [{**targets[k], "image_id": k} for k in keys]
            predictions = [predictions[k] for k in keys]
        if len(predictions) != len(targets):
            raise InputError(f"update {self._updates}: {len(predictions)} predictions for {len(targets)} targets")
        seen = sum(frame.height for frame in self._state.images)
        image_ids = [int(as_array(t["image_id"]).reshape(-1)[0]) if "image_id" in t else seen + n + 1
                     for n, t in enumerate(targets)]
        gt = self._table(targets, image_ids, _GT, target=True)
        dt = self._table(predictions, image_ids, _DT, target=False)  # a refused batch adds nothing
        self._state.gt.append(gt)
        self._state.dt.append(dt)
        self._state.images.append(pl.DataFrame({
            "image_id": image_ids,
            **{k: [_image_size(t, k) for t in targets] for k in ("width", "height")}},
            schema={"image_id": pl.Int64, "width": pl.Int64, "height": pl.Int64}))

    def _table(self, items, image_ids: list, columns: dict, target: bool) -> pl.DataFrame:
        """One frame of every item's objects, each image's in its order (with the shape columns the items have)."""
        what = "target" if target else "prediction"
        rows = []
        for n, (item, image_id) in enumerate(zip(items, image_ids)):
            where = f"update {self._updates}, {what} {n} (image_id {image_id})"
            rows.append(self._item(item, image_id, target, where))
        frame = pl.concat(rows, how="diagonal_relaxed") if rows else pl.DataFrame(schema=columns)
        try:
            return frame.cast({c: t for c, t in {**columns, **_SHAPES}.items() if c in frame.columns})
        except pl.exceptions.PolarsError as exc:
            raise InputError(f"update {self._updates}: a {what} value of the wrong type ({exc})") from None

    def _item(self, item, image_id: int, target: bool, where: str) -> pl.DataFrame:
        """One image's objects: boxes (COCO xywh; a prediction's may be absent where it has masks or keypoints),
        labels, scores or iscrowd and area, and the shape columns (``segmentation`` as JSON text, ``keypoints``)."""
        box_free = ("masks",) if target else ("masks", "segmentation", "keypoints")  # boxes from the shapes
        needed = (*(() if any(k in item for k in box_free) else ("boxes",)), "labels",
                  *(() if target else ("scores",)))
        absent = [k for k in needed if k not in item]
        if absent:
            raise InputError(f"{where}: missing '{absent[0]}'")
        labels = as_array(item["labels"]).reshape(-1)
        columns = {"category_id": labels}
        columns.update(_shape_columns(item, len(labels), where))
        if not target:
            columns.pop("num_keypoints", None)
        boxes = None
        if "boxes" in item:
            boxes = as_array(item["boxes"], np.float64)
            if boxes.size and (boxes.ndim != 2 or boxes.shape[1] != 4):
                raise InputError(f"{where}: 'boxes' must be n x 4, got shape {boxes.shape}")
            boxes = boxes.reshape(-1, 4)
            if self.box_format == "xyxy":
                boxes = np.column_stack([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]])
        mask_box, mask_area = columns.pop("_bbox", None), columns.pop("_area", None)
        boxes = mask_box if boxes is None and target else boxes
        if target:
            columns["iscrowd"] = as_array(item.get("iscrowd", np.zeros(len(labels))), np.float64).reshape(-1)
            area = mask_area if mask_area is not None else boxes[:, 2] * boxes[:, 3]
            columns["area"] = as_array(item["area"], np.float64).reshape(-1) if "area" in item else area
        else:
            columns["score"] = as_array(item["scores"], np.float64).reshape(-1)
        base, noun = (len(boxes), "boxes") if boxes is not None else (len(labels), "labels")
        for name, values in columns.items():
            if len(values) != base:
                raise InputError(f"{where}: {len(values)} '{_NAMES.get(name, name)}' for {base} {noun}")
        columns = {"image_id": np.full(base, image_id, np.int64), **columns}
        columns["bbox"] = pl.Series([None] * len(labels) if boxes is None else boxes.tolist(),
                                    dtype=pl.List(pl.Float64))
        return pl.DataFrame(columns)

    # -- partial states -------------------------------------------------------------------------------------------

    def state(self) -> StreamingState:
        """The partial state (picklable; frames)."""
        return self._state

    def merge(self, *others) -> "StreamingEvaluator":
        """Add other evaluators' (or :class:`StreamingState`\\ s') batches to this one; returns it."""
        for other in others:
            state = other.state() if isinstance(other, StreamingEvaluator) else other
            self._state.gt.extend(state.gt)
            self._state.dt.extend(state.dt)
            self._state.images.extend(state.images)
        return self

    def save(self, folder) -> Path:
        """Write this evaluator's batches to ``folder`` (shared by the ranks) as three Parquet files of a name of its
        own, each written whole or not at all; returns the folder."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        name = uuid.uuid4().hex
        for side in ("images", "gt", "dt"):  # images last: a part is complete once its images file exists
            frames = getattr(self._state, side)
            table = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame(schema=_GT if side == "gt" else _DT)
            replace_file(folder / f"{side}-{name}.parquet", table.write_parquet)
        return folder

    @classmethod
    def load(cls, folder, **options) -> "StreamingEvaluator":
        """An evaluator holding every part saved in ``folder``; ``options`` as the constructor's."""
        evaluator = cls(**options)
        for images in sorted(Path(folder).glob("images-*.parquet")):
            name = images.name.removeprefix("images-")
            evaluator.merge(StreamingState(gt=[pl.read_parquet(Path(folder) / f"gt-{name}")],
                                           dt=[pl.read_parquet(Path(folder) / f"dt-{name}")],
                                           images=[pl.read_parquet(images)]))
        return evaluator

    # -- the result -----------------------------------------------------------------------------------------------

    def coco_inputs(self) -> tuple:
        """``(ground truth COCO dict, result table)`` of everything seen, images in id order."""
        images = pl.concat(self._state.images) if self._state.images else pl.DataFrame(schema={"image_id": pl.Int64})
        twice = images.filter(pl.col("image_id").is_duplicated()).get_column("image_id")
        if twice.len():
            raise InputError(f"image_id {twice.min()} was given more than once (in one or several updates or ranks)")
        gt, dt = (pl.concat(frames, how="diagonal_relaxed").sort("image_id", maintain_order=True) if frames
                  else pl.DataFrame(schema=schema) for frames, schema in ((self._state.gt, _GT), (self._state.dt, _DT)))
        categories = self.category_ids if self.category_ids is not None else sorted(
            set(gt.get_column("category_id").to_list()) | set(dt.get_column("category_id").to_list()))
        annotations = gt.with_row_index("id", offset=1).with_columns(pl.col("id").cast(pl.Int64))
        dataset = {
            "images": [{k: v for k, v in row.items() if v is not None} | {"id": row["image_id"]}
                       for row in images.sort("image_id").iter_rows(named=True)],
            "annotations": [{k: json.loads(v) if k == "segmentation" else v for k, v in ann.items() if v is not None}
                            for ann in annotations.iter_rows(named=True)],
            "categories": [{"id": c, "name": self.category_names.get(c, str(c))} for c in categories],
        }
        for image in dataset["images"]:
            del image["image_id"]
        return dataset, dt

    def compute(self, protocol: CocoProtocol | None = None, **schedule) -> Evaluation:
        """The COCO evaluation of everything seen (``protocol``: the constructor's unless given)."""
        gt, dt = self.coco_inputs()
        return evaluate_coco(gt, dt, protocol or self.protocol, **schedule)
