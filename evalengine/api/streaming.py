"""COCO evaluation for training loops: ``update(predictions, targets)`` per batch, ``compute()`` at the end.

Batches are held as columnar tables (NumPy arrays of each image's boxes, labels and scores; tensors arrive through
DLPack or ``__array__``, torch is never imported). Partial states merge: objects with :meth:`StreamingEvaluator.merge`
(e.g. after ``torch.distributed.all_gather_object`` of :meth:`~StreamingEvaluator.state`), or several processes
:meth:`~StreamingEvaluator.save` theirs into one folder that :meth:`StreamingEvaluator.load` reads.

``compute`` puts the images in id order (each image's objects in the order given) and evaluates them as
:func:`evalengine.evaluate_coco` evaluates the COCO dict and result table they make: the same numbers whatever the
batch split, the number of ranks and the order in which they arrive. An image given twice is an error."""

import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from evalengine.api import evaluate_coco
from evalengine.errors import InputError
from evalengine.evaluation.detection import Evaluation
from evalengine.match.coco import CocoProtocol
from evalengine.store.commit import replace_file

BOX_FORMATS = ("xyxy", "xywh")
_GT = {"image_id": pl.Int64, "category_id": pl.Int64, "bbox": pl.List(pl.Float64), "area": pl.Float64,
       "iscrowd": pl.Int64}
_DT = {"image_id": pl.Int64, "category_id": pl.Int64, "bbox": pl.List(pl.Float64), "score": pl.Float64}


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
            **{k: [int(as_array(t[k])) if k in t else None for t in targets] for k in ("width", "height")}},
            schema={"image_id": pl.Int64, "width": pl.Int64, "height": pl.Int64}))

    def _table(self, items, image_ids: list, columns: dict, target: bool) -> pl.DataFrame:
        """One frame of every item's objects, each image's in its order."""
        what = "target" if target else "prediction"
        parts = {"image_id": [], "category_id": [], "boxes": [], "extra": []}
        for n, (item, image_id) in enumerate(zip(items, image_ids)):
            where = f"update {self._updates}, {what} {n} (image_id {image_id})"
            needed = ("boxes", "labels") if target else ("boxes", "scores", "labels")
            absent = [k for k in needed if k not in item]
            if absent:
                raise InputError(f"{where}: missing '{absent[0]}'")
            boxes = as_array(item["boxes"], np.float64)
            if boxes.size and (boxes.ndim != 2 or boxes.shape[1] != 4):
                raise InputError(f"{where}: 'boxes' must be n x 4, got shape {boxes.shape}")
            boxes = boxes.reshape(-1, 4)
            labels = as_array(item["labels"]).reshape(-1)
            extra = (as_array(item.get("iscrowd", np.zeros(len(labels))), np.float64).reshape(-1),
                     as_array(item["area"], np.float64).reshape(-1) if "area" in item else None) if target \
                else (as_array(item["scores"], np.float64).reshape(-1),)
            for name, values in (("labels", labels), *zip(("iscrowd", "area") if target else ("scores",), extra)):
                if values is not None and len(values) != len(boxes):
                    raise InputError(f"{where}: {len(values)} '{name}' for {len(boxes)} boxes")
            parts["image_id"].append(np.full(len(boxes), image_id, np.int64))
            parts["category_id"].append(labels)
            parts["boxes"].append(boxes)
            parts["extra"].append(extra)
        boxes = np.concatenate(parts["boxes"]) if parts["boxes"] else np.zeros((0, 4))
        if self.box_format == "xyxy":
            boxes = np.column_stack([boxes[:, 0], boxes[:, 1], boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]])
        frame = {"image_id": np.concatenate(parts["image_id"]) if parts["image_id"] else np.zeros(0, np.int64),
                 "category_id": np.concatenate(parts["category_id"]) if parts["category_id"] else np.zeros(0),
                 "bbox": pl.Series(boxes.reshape(-1, 4).tolist(), dtype=pl.List(pl.Float64))}
        if target:
            frame["area"] = np.concatenate([e[1] if e[1] is not None else np.full(len(e[0]), np.nan)
                                            for e in parts["extra"]]) if parts["extra"] else np.zeros(0)
            frame["area"] = np.where(np.isnan(frame["area"]), boxes[:, 2] * boxes[:, 3], frame["area"])
            frame["iscrowd"] = np.concatenate([e[0] for e in parts["extra"]]) if parts["extra"] else np.zeros(0)
        else:
            frame["score"] = np.concatenate([e[0] for e in parts["extra"]]) if parts["extra"] else np.zeros(0)
        try:
            return pl.DataFrame(frame).cast(columns)
        except pl.exceptions.PolarsError as exc:
            raise InputError(f"update {self._updates}: a {what} value of the wrong type ({exc})") from None

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
            table = pl.concat(frames) if frames else pl.DataFrame(schema=_GT if side == "gt" else _DT)
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
        gt = (pl.concat(self._state.gt) if self._state.gt else pl.DataFrame(schema=_GT)).sort("image_id",
                                                                                                maintain_order=True)
        dt = (pl.concat(self._state.dt) if self._state.dt else pl.DataFrame(schema=_DT)).sort("image_id",
                                                                                                maintain_order=True)
        categories = self.category_ids if self.category_ids is not None else sorted(
            set(gt.get_column("category_id").to_list()) | set(dt.get_column("category_id").to_list()))
        annotations = gt.with_row_index("id", offset=1).with_columns(pl.col("id").cast(pl.Int64))
        dataset = {
            "images": [{k: v for k, v in row.items() if v is not None} | {"id": row["image_id"]}
                       for row in images.sort("image_id").iter_rows(named=True)],
            "annotations": annotations.to_dicts(),
            "categories": [{"id": c, "name": self.category_names.get(c, str(c))} for c in categories],
        }
        for image in dataset["images"]:
            del image["image_id"]
        return dataset, dt

    def compute(self, protocol: CocoProtocol | None = None, **schedule) -> Evaluation:
        """The COCO evaluation of everything seen (``protocol``: the constructor's unless given)."""
        gt, dt = self.coco_inputs()
        return evaluate_coco(gt, dt, protocol or self.protocol, **schedule)
