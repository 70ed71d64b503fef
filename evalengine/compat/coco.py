"""pycocotools' ``COCO`` API (``coco.py``) as evaluation code uses it: the dataset and its index, the id getters and
loaders, ``loadRes`` (a file, a list of result dicts, an ``N x 7`` NumPy array, or a table), ``annToRLE`` /
``annToMask``.

The index is pycocotools' (dicts of the annotations as given). What the engine evaluates is read through its own
readers and validation (:mod:`evalengine.io.coco`, :mod:`evalengine.io.detections`, via :mod:`evalengine.io.memory`),
so a ground truth or result pycocotools would mis-evaluate is a located error here (duplicate annotation ids, a
result of an image the ground truth lacks, a non-finite score)."""

import contextlib
import copy
import io
import itertools
import json
import time
from collections import defaultdict

import numpy as np
import polars as pl

from evalengine import schema
from evalengine.geometry.boxes import xywh
from evalengine.io.coco import read_coco_gt
from evalengine.io.detections import iter_detections, result_kind
from evalengine.io.masks import masks
from evalengine.io.memory import as_files, is_path, results_table


def _listed(values) -> list:
    """pycocotools ``_isArrayLike``: a single id becomes a list of one."""
    return list(values) if hasattr(values, "__iter__") and hasattr(values, "__len__") else [values]


class COCO:
    """pycocotools ``COCO``: ``COCO(annotation_file=None)``; ``dataset``, ``anns``, ``imgs``, ``cats``,
    ``imgToAnns``, ``catToImgs``."""

    def __init__(self, annotation_file=None):
        self.dataset, self.anns, self.cats, self.imgs = {}, {}, {}, {}
        self.imgToAnns, self.catToImgs = defaultdict(list), defaultdict(list)
        self._engine = None
        if annotation_file is not None:
            print("loading annotations into memory...")
            tic = time.time()
            with open(annotation_file) as handle:
                dataset = json.load(handle)
            assert isinstance(dataset, dict), f"annotation file format {type(dataset)} not supported"
            print(f"Done (t={time.time() - tic:0.2f}s)")
            self.dataset = dataset
            self.createIndex()

    def createIndex(self):  # noqa: N802 - pycocotools' names
        """Index the dataset as pycocotools does (a repeated annotation id keeps the last annotation)."""
        print("creating index...")
        anns, cats, imgs = {}, {}, {}
        img_to_anns, cat_to_imgs = defaultdict(list), defaultdict(list)
        for ann in self.dataset.get("annotations", []):
            img_to_anns[ann["image_id"]].append(ann)
            anns[ann["id"]] = ann
        for img in self.dataset.get("images", []):
            imgs[img["id"]] = img
        for cat in self.dataset.get("categories", []):
            cats[cat["id"]] = cat
        if "annotations" in self.dataset and "categories" in self.dataset:
            for ann in self.dataset["annotations"]:
                cat_to_imgs[ann["category_id"]].append(ann["image_id"])
        print("index created!")
        self.anns, self.imgs, self.cats = anns, imgs, cats
        self.imgToAnns, self.catToImgs = img_to_anns, cat_to_imgs
        self._engine = None  # what the engine read of the dataset is read again

    def info(self):
        for key, value in self.dataset.get("info", {}).items():
            print(f"{key}: {value}")

    def getAnnIds(self, imgIds=(), catIds=(), areaRng=(), iscrowd=None):  # noqa: N802,N803
        img_ids, cat_ids = _listed(imgIds), _listed(catIds)
        anns = self.dataset["annotations"]
        if img_ids:
            anns = list(itertools.chain.from_iterable(self.imgToAnns[i] for i in img_ids if i in self.imgToAnns))
        if cat_ids:
            anns = [ann for ann in anns if ann["category_id"] in cat_ids]
        if len(areaRng):
            anns = [ann for ann in anns if areaRng[0] < ann["area"] < areaRng[1]]
        return [ann["id"] for ann in anns if iscrowd is None or ann["iscrowd"] == iscrowd]

    def getCatIds(self, catNms=(), supNms=(), catIds=()):  # noqa: N802,N803
        names, supers, ids = _listed(catNms), _listed(supNms), _listed(catIds)
        cats = [cat for cat in self.dataset["categories"]
                if (not names or cat["name"] in names) and (not supers or cat["supercategory"] in supers)
                and (not ids or cat["id"] in ids)]
        return [cat["id"] for cat in cats]

    def getImgIds(self, imgIds=(), catIds=()):  # noqa: N802,N803
        img_ids, cat_ids = _listed(imgIds), _listed(catIds)
        if not img_ids and not cat_ids:
            return list(self.imgs.keys())
        ids = set(img_ids)
        for i, cat in enumerate(cat_ids):
            ids = set(self.catToImgs[cat]) if i == 0 and not ids else ids & set(self.catToImgs[cat])
        return list(ids)

    def _load(self, table: dict, ids) -> list:
        return [table[i] for i in ids] if hasattr(ids, "__iter__") else [table[ids]]

    def loadAnns(self, ids=()):  # noqa: N802
        return self._load(self.anns, ids)

    def loadCats(self, ids=()):  # noqa: N802
        return self._load(self.cats, ids)

    def loadImgs(self, ids=()):  # noqa: N802
        return self._load(self.imgs, ids)

    def loadNumpyAnnotations(self, data):  # noqa: N802
        """pycocotools: rows ``[image_id, x, y, w, h, score, category_id]`` as result dicts."""
        return [{"image_id": int(row[0]), "bbox": [row[1], row[2], row[3], row[4]], "score": row[5],
                 "category_id": int(row[6])} for row in data]

    def loadRes(self, resFile):  # noqa: N802,N803
        """pycocotools ``loadRes``: the results as a COCO object over this one's images; ``id`` is the 1-based
        position, ``iscrowd`` 0, ``area`` (and a missing ``bbox`` or, for boxes, ``segmentation``) as pycocotools sets
        them — taken from the engine's reading of the results, which validates them. The caller's dicts are not
        modified (pycocotools writes these fields into them)."""
        print("Loading and preparing results...")
        tic = time.time()
        res = COCO()
        res.dataset["images"] = list(self.dataset["images"])
        source = resFile
        if is_path(resFile):
            with open(resFile) as handle:
                anns = json.load(handle)
        elif isinstance(resFile, np.ndarray):
            anns = self.loadNumpyAnnotations(resFile)
        else:
            table = results_table(resFile)
            anns = table.to_dicts() if table is not None else resFile
        assert isinstance(anns, list), "results in not an array of objects"
        frames = COCO._results(self, source)
        res.dataset["categories"] = copy.deepcopy(self.dataset["categories"])
        res.dataset["annotations"] = _result_annotations(anns, frames)
        print(f"DONE (t={time.time() - tic:0.2f}s)")
        res.createIndex()
        res._engine = {"frames": frames, "ids": None, "of": id(res.dataset["annotations"])}
        return res

    def _mask(self, ann):
        """The annotation's mask (:class:`evalengine.io.masks.Masks` of one row) in its image's size, read as the
        engine reads a ground truth's."""
        image = self.imgs[ann["image_id"]]
        frame = pl.DataFrame({"id": [ann.get("id")], "image_id": [ann["image_id"]],
                              "segmentation": [json.dumps(ann["segmentation"], default=_bytes_text)]})
        images = pl.DataFrame({"image_id": [ann["image_id"]], "height": [image["height"]], "width": [image["width"]]})
        return masks(frame, images, "annotation", "annotation", pl.col("id"))

    def annToRLE(self, ann):  # noqa: N802
        """pycocotools ``annToRLE``: the annotation's segmentation as a compressed RLE dict (``counts`` as bytes)."""
        shaped = self._mask(ann)
        text = shaped.columns.get_column("mask_rle")[0]
        return {"size": [int(shaped.height[0]), int(shaped.width[0])], "counts": text.encode("ascii")}

    def annToMask(self, ann):  # noqa: N802
        """pycocotools ``annToMask``: the annotation's mask as an ``h x w`` uint8 array."""
        counts, offsets = (shaped := self._mask(ann)).runs()
        runs = counts[offsets[0]:offsets[1]]
        mask = np.repeat(np.arange(runs.size) % 2, runs).astype(np.uint8)
        return mask.reshape(int(shaped.width[0]), int(shaped.height[0])).T.copy()

    # -- what the engine reads ----------------------------------------------------------------------------------------

    def engine_gt(self):
        """The ground truth as the engine reads and validates it (:class:`evalengine.io.coco.CocoDataset`), kept
        until the next :meth:`createIndex`."""
        if self._engine is None or "gt" not in self._engine:
            with as_files(gt=self.dataset) as (path, _):
                self._engine = {**(self._engine or {}), "gt": read_coco_gt(path)}
        return self._engine["gt"]

    def _results(self, source) -> list:
        with as_files(dt=source) as (_, path):
            return list(iter_detections(path, compat_coco(self).engine_gt()))

    def engine_results(self, gt: "COCO", masks: bool = False) -> tuple:
        """``(frames, ids)``: this object's annotations as the engine's detection frames (det_id = position) and the
        annotations' own ids by position (None where they are the positions, as ``loadRes`` makes them). A
        dataset of results built otherwise (``COCO()`` and ``createIndex``, as torchmetrics does) keeps its
        ``area`` (what the area ranges read) and ids. ``masks``: read with their masks, where results of boxes have
        the polygons ``loadRes`` gives them (pycocotools evaluates those under segm)."""
        state = self._engine or {}
        annotations = id(self.dataset.get("annotations"))
        if "frames" in state and state.get("of") == annotations and (
                not masks or any("mask_rle" in frame.columns for frame in state["frames"])):
            return state["frames"], state["ids"]
        if state.get("masked_of") == annotations and masks:
            return state["masked"]
        anns = self.dataset.get("annotations", [])
        if not anns:
            return [pl.DataFrame(schema=schema.DT)], None
        fields = [{k: v for k, v in ann.items() if k in ("image_id", "category_id", "score", "bbox", "segmentation",
                                                           "keypoints")} for ann in anns]
        frames = gt._results(fields)
        areas = pl.Series("area", [ann.get("area") for ann in anns], dtype=pl.Float64)
        start, kept = 0, []
        for frame in frames:
            given = areas.slice(start, frame.height)
            kept.append(frame.with_columns(pl.coalesce(given, pl.col("area")).alias("area")))
            start += frame.height
        ids = np.array([ann["id"] for ann in anns], dtype=np.int64)
        if masks and "frames" in state and state.get("of") == annotations:  # loadRes's, with its polygons
            self._engine = {**state, "masked": (kept, state["ids"]), "masked_of": annotations}
            return kept, state["ids"]
        self._engine = {**state, "frames": kept, "ids": ids, "of": annotations}
        return kept, ids


def compat_coco(coco) -> COCO:
    """``coco`` itself, or for another COCO API object (pycocotools' own, created before a patch) one of ours over
    the same ``dataset`` (kept on it while its dataset is the same object)."""
    if isinstance(coco, COCO):
        return coco
    ours = getattr(coco, "_evalengine_coco", None)
    if ours is None or ours.dataset is not coco.dataset:
        ours = COCO()
        ours.dataset = coco.dataset
        with contextlib.redirect_stdout(io.StringIO()):
            ours.createIndex()
        coco._evalengine_coco = ours
    return ours


def _bytes_text(value):
    if isinstance(value, bytes):
        return value.decode("ascii")
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(type(value).__name__)


def _result_annotations(anns: list, frames: list) -> list:
    """The results with the fields ``loadRes`` adds, from the engine's reading (``frames``, in input order)."""
    table = pl.concat(frames, how="diagonal") if frames else pl.DataFrame(schema=schema.DT)
    kind = result_kind(anns[0]) if anns else "bbox"
    area = table.get_column("area").to_list()
    boxes = xywh(table).tolist() if kind != "bbox" else None
    out = []
    for i, ann in enumerate(anns):
        ann = dict(ann, id=i + 1, area=area[i])
        if kind == "bbox":
            x, y, w, h = ann["bbox"]
            ann.setdefault("segmentation", [[x, y, x, y + h, x + w, y + h, x + w, y]])
            ann["iscrowd"] = 0
        elif kind == "segm":
            ann.setdefault("bbox", np.array(boxes[i]))
            ann["iscrowd"] = 0
        else:
            ann["bbox"] = boxes[i]
        out.append(ann)
    return out
