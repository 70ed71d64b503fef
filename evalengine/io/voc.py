"""PASCAL VOC inputs: an ``Annotations/`` folder of XML files as ground truth, a folder of the devkit's per-class result
files as detections; and the choice between them and the COCO formats.

Ground truth (``read_voc_annotations``), one ``<stem>.xml`` per image, read as ``VOCreadxml.m`` / ``voc_eval.py``'s
``parse_rec`` read it: ``size/width``, ``size/height`` and, per ``object``, ``name``, ``difficult``, ``truncated`` and
``bndbox`` ``xmin ymin xmax ymax`` (1-based inclusive pixels, stored continuous by
:func:`evalengine.schema.from_pixel_inclusive`; non-integer values are accepted, ``parse_rec`` would refuse them).

- **Image ids**: ``int(stem)`` when every stem is a decimal integer, distinct as a number (VOC2007's ``000001`` is
  image 1); else the 1-based position in sorted stem order (VOC2012's ``2007_000027``). The stem is the image's
  ``file_name``, which the result files name.
- **Category ids**: the class names sorted, 1-based (for the 20 VOC classes, the devkit's own order).
- **Annotation ids**: 1-based position over the files in stem order and the objects in file order (the order
  ``voc_eval`` takes the maximum IoU over).

The XML is read by the standard library's expat with a DOCTYPE refused (no entity can expand, no external file is
read); a malformed file is an error naming the file and expat's line and column.
"""

import re
import xml.parsers.expat
from pathlib import Path
from typing import Iterator

import polars as pl

from evalengine import schema
from evalengine.errors import InputError
from evalengine.io.coco import CocoDataset, read_coco_gt
from evalengine.io.detections import iter_detections
from evalengine.io.validate import listed

# the devkit's result files: comp3 (trained on VOC only) or comp4 (any data), of an image set, per class
RESULT_FILE = re.compile(r"comp\d+_det_[^_]+_(?P<name>.+)\.txt")
_BOX_FIELDS = ("xmin", "ymin", "xmax", "ymax")
_RESULT_FIELDS = ("image", "score", "x1", "y1", "x2", "y2")


class _Node:
    """An XML element with its attributes and where it starts (1-based line and column)."""

    __slots__ = ("tag", "where", "children", "text", "attributes")

    def __init__(self, tag: str, where: str, attributes: dict):
        self.tag, self.where, self.children, self.text, self.attributes = tag, where, [], [], attributes

    def child(self, tag: str):
        return next((node for node in self.children if node.tag == tag), None)

    def value(self) -> str:
        return "".join(self.text).strip()


def parse_xml(path: Path) -> _Node:
    """The root element of an XML file (expat; a DOCTYPE, hence any entity declaration, is refused)."""
    parser = xml.parsers.expat.ParserCreate()
    stack, roots = [], []

    def where() -> str:
        return f"line {parser.CurrentLineNumber}, column {parser.CurrentColumnNumber + 1}"

    def start(tag, attributes):
        node = _Node(tag, where(), attributes)
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)

    def refuse_doctype(*_):
        raise InputError(f"{path}: line {parser.CurrentLineNumber}: a DOCTYPE declaration is not accepted (its "
                         "entities could expand without bound)")

    parser.StartElementHandler = start
    parser.EndElementHandler = lambda _tag: stack.pop()
    parser.CharacterDataHandler = lambda data: stack[-1].text.append(data) if stack else None
    parser.StartDoctypeDeclHandler = refuse_doctype
    try:
        parser.Parse(path.read_bytes(), True)
    except xml.parsers.expat.ExpatError as exc:
        raise InputError(f"{path}: line {exc.lineno}, column {exc.offset + 1}: malformed XML "
                         f"({xml.parsers.expat.ErrorString(exc.code)})") from None
    return roots[0]


def _number(path: Path, node: _Node, what: str, text: str | None, integral: bool = False) -> float:
    """The value of a numeric field, or a located error."""
    if text is None:
        raise InputError(f"{path}: {node.where}: {what}: missing")
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value - value == 0.0 or integral and not value.is_integer():
        raise InputError(f"{path}: {node.where}: {what}: {text!r} is not {'an integer' if integral else 'a number'}")
    return value


def _text(node: _Node | None) -> str | None:
    return None if node is None else node.value()


def _flag(path: Path, obj: _Node, what: str, number: int) -> bool | None:
    """VOC's 0/1 flags (``difficult``, ``truncated``); None when absent, as ``VOCreadxml`` leaves them."""
    node = obj.child(what)
    if node is None or not node.value():
        return None
    value = _number(path, node, f"object {number}: '{what}'", node.value(), integral=True)
    if value not in (0.0, 1.0):
        raise InputError(f"{path}: {node.where}: object {number}: '{what}' is {node.value()!r}, expected 0 or 1")
    return bool(value)


def _read_file(path: Path) -> tuple:
    """``(width, height, objects)`` of one annotation file; each object ``(name, difficult, truncated, x1, y1, x2,
    y2)``."""
    root = parse_xml(path)
    if root.tag != "annotation":
        raise InputError(f"{path}: {root.where}: the root element is <{root.tag}>, expected <annotation>")
    size = root.child("size")
    width, height = (int(_number(path, node, f"'size/{c}'", node.value(), integral=True)) if node and node.value()
                     else None for c in ("width", "height") for node in [size and size.child(c)])
    objects = []
    for number, obj in enumerate((n for n in root.children if n.tag == "object"), start=1):
        name = _text(obj.child("name"))
        if not name:
            raise InputError(f"{path}: {obj.where}: object {number}: missing 'name'")
        box = obj.child("bndbox")
        if box is None:
            raise InputError(f"{path}: {obj.where}: object {number} ({name}): missing 'bndbox'")
        corners = [_number(path, box.child(c) or box, f"object {number} ({name}): 'bndbox/{c}'", _text(box.child(c)))
                   for c in _BOX_FIELDS]
        if corners[2] < corners[0] - 1 or corners[3] < corners[1] - 1:
            raise InputError(f"{path}: {box.where}: object {number} ({name}): 'bndbox' has xmax < xmin - 1 or "
                             "ymax < ymin - 1 (a negative width or height)")
        objects.append((name, _flag(path, obj, "difficult", number), _flag(path, obj, "truncated", number), *corners))
    return width, height, objects


def image_ids(stems: list) -> list:
    """The image id of each of the sorted ``stems``: ``int(stem)`` when all are distinct decimal integers, else the
    1-based position."""
    if all(stem.isascii() and stem.isdigit() for stem in stems) and len({int(s) for s in stems}) == len(stems):
        return [int(stem) for stem in stems]
    return list(range(1, len(stems) + 1))


def read_voc_annotations(folder) -> CocoDataset:
    """Read a VOC ``Annotations/`` folder (every ``*.xml`` in it) as the store's three tables; ``difficult`` and
    ``truncated`` are kept (null where a file leaves them out, which the VOC protocol reads as not difficult)."""
    folder = Path(folder)
    files = sorted((p for p in folder.glob("*.xml") if not p.name.startswith(".")), key=lambda p: p.stem)
    if not files:
        raise InputError(f"{folder}: no .xml annotation files in this folder")
    stems = [p.stem for p in files]
    ids = image_ids(stems)
    parsed = [_read_file(path) for path in files]
    images = pl.DataFrame({"image_id": ids, "width": [p[0] for p in parsed], "height": [p[1] for p in parsed],
                           "file_name": stems}, schema={c: t for c, t in schema.IMAGES.items() if c != "shard"})
    rows = [(image_id, *obj) for image_id, (_, _, objects) in zip(ids, parsed) for obj in objects]
    columns = ("image_id", "name", "difficult", "truncated", "x1", "y1", "x2", "y2")
    raw = pl.DataFrame(rows, schema=dict(zip(columns, (pl.Int64, pl.String, pl.Boolean, pl.Boolean,
                                                       *[pl.Float64] * 4))), orient="row")
    names = sorted(set(raw.get_column("name")))
    if not names:
        raise InputError(f"{folder}: no object in any annotation file, so there is nothing to evaluate")
    categories = pl.DataFrame({"category_id": range(1, len(names) + 1), "name": names, "supercategory": None},
                              schema=schema.CATEGORIES)
    x, y, w, h = schema.from_pixel_inclusive(*(pl.col(c) for c in ("x1", "y1", "x2", "y2")))
    gt = raw.with_row_index("gt_order").select(
        (pl.col("gt_order") + 1).cast(pl.Int64).alias("gt_id"), "image_id",
        pl.col("name").replace_strict(names, range(1, len(names) + 1), return_dtype=pl.Int64).alias("category_id"),
        x.alias("x"), y.alias("y"), w.alias("w"), h.alias("h"), (w * h).alias("area"),
        pl.lit(False).alias("iscrowd"), pl.lit(None, pl.Boolean).alias("ignore"), "difficult",
        pl.col("gt_order").cast(pl.Int64), "truncated")
    return CocoDataset(images=images, categories=categories, gt=gt)


def read_ground_truth(path) -> CocoDataset:
    """A VOC ``Annotations/`` folder, or a COCO ground-truth file."""
    path = Path(path)
    return read_voc_annotations(path) if path.is_dir() else read_coco_gt(path)


def _image_keys(images: pl.DataFrame) -> dict:
    """``{name: image_id}`` for the names a result file may give an image by: its ``file_name``, or that name without
    its extension (when no other image has the same one)."""
    names = images.select("file_name", "image_id").drop_nulls().rows()
    keys = dict(names)
    stems = {}
    for name, image_id in names:
        stems.setdefault(Path(name).stem, []).append(image_id)
    keys.update({stem: ids[0] for stem, ids in stems.items() if len(ids) == 1 and stem not in keys})
    return keys


def _class_files(folder: Path, categories: pl.DataFrame) -> list:
    """``(file, category_id)`` of each result file of the folder, in file-name order."""
    by_name = {}
    for category_id, name in categories.select("category_id", "name").rows():
        by_name.setdefault(name, []).append(category_id)
    files, seen = [], {}
    for path in sorted(folder.iterdir()):
        match = RESULT_FILE.fullmatch(path.name)
        if match is None or not path.is_file():
            continue
        name = match.group("name")
        if name not in by_name:
            known = sorted(n for n in by_name if n is not None)
            raise InputError(f"{path}: class '{name}' not in the ground truth's categories ({listed(known)})")
        if len(by_name[name]) > 1:
            raise InputError(f"{path}: class '{name}' names categories {listed(by_name[name])} of the ground truth")
        if name in seen:
            raise InputError(f"{path}: a second result file for class '{name}' (the first: {seen[name].name})")
        seen[name] = path
        files.append((path, by_name[name][0]))
    if not files:
        raise InputError(f"{folder}: no result file named comp<N>_det_<set>_<class>.txt in this folder")
    return files


def _located(frame: pl.DataFrame, bad: pl.Expr, path: Path, message) -> None:
    """A located error at the first line where ``bad`` holds: ``path: line L: message(row)``."""
    rows = frame.filter(bad)
    if rows.height:
        row = rows.row(0, named=True)
        more = f" (and {rows.height - 1} more lines)" if rows.height > 1 else ""
        raise InputError(f"{path}: line {row['line']}: {message(row)}{more}")


def _read_result_file(path: Path, category_id: int, images: dict, first_id: int) -> pl.DataFrame:
    """One class's result file, lines ``<image> <score> <x1> <y1> <x2> <y2>`` (blank lines skipped), as detections
    with ids from ``first_id`` on."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start + 1})") from None
    frame = (pl.DataFrame({"text": lines}, schema={"text": pl.String}).with_row_index("line", offset=1)
             .with_columns(pl.col("text").str.extract_all(r"\S+").alias("fields"))
             .filter(pl.col("fields").list.len() > 0))
    count = pl.col("fields").list.len()
    _located(frame, count != len(_RESULT_FIELDS), path,
             lambda row: f"expected 6 fields '<image> <score> <x1> <y1> <x2> <y2>', found {len(row['fields'])}")
    frame = frame.select("line", *[pl.col("fields").list.get(i).alias(c) for i, c in enumerate(_RESULT_FIELDS)])
    for column in _RESULT_FIELDS[1:]:
        number = pl.col(column).cast(pl.Float64, strict=False)
        _located(frame, ~number.is_finite().fill_null(False), path,
                 lambda row, c=column: f"'{c}' is {row[c]!r}, not a finite number")
    frame = frame.with_columns(pl.col(list(_RESULT_FIELDS[1:])).cast(pl.Float64),
                               pl.col("image").replace_strict(list(images), list(images.values()), default=None,
                                                             return_dtype=pl.Int64).alias("image_id"))
    _located(frame, pl.col("image_id").is_null(), path,
             lambda row: f"image '{row['image']}' not in the ground truth's images")
    _located(frame, (pl.col("x2") < pl.col("x1") - 1) | (pl.col("y2") < pl.col("y1") - 1), path,
             lambda row: "the box has x2 < x1 - 1 or y2 < y1 - 1 (a negative width or height)")
    x, y, w, h = schema.from_pixel_inclusive(*(pl.col(c) for c in ("x1", "y1", "x2", "y2")))
    return frame.select(
        (pl.int_range(pl.len(), dtype=pl.Int64) + first_id).alias("det_id"), "image_id",
        pl.lit(category_id, pl.Int64).alias("category_id"), "score", x.alias("x"), y.alias("y"), w.alias("w"),
        h.alias("h"), (w * h).alias("area"))


def iter_devkit_results(folder, dataset: CocoDataset) -> Iterator[pl.DataFrame]:
    """The detections of a folder of devkit result files (``comp4_det_test_<class>.txt``, …), one frame per file in
    file-name order; a detection's id is its 1-based position over the files of the folder in that order."""
    folder = Path(folder)
    images = _image_keys(dataset.images)
    n_rows = 0
    for path, category_id in _class_files(folder, dataset.categories):
        frame = _read_result_file(path, category_id, images, n_rows + 1)
        n_rows += frame.height
        yield frame
    if n_rows == 0:
        raise InputError(f"{folder}: the result files hold no detections")


def estimate_result_rows(folder) -> int:
    """Detections in a folder of result files, from their size (a line is ~40 bytes), to choose a shard count."""
    return sum(p.stat().st_size for p in Path(folder).iterdir() if RESULT_FILE.fullmatch(p.name)) // 40


def iter_voc_detections(path, dataset: CocoDataset) -> Iterator[pl.DataFrame]:
    """Detections from a folder of devkit result files, or a COCO result file, JSON Lines or Parquet
    (:mod:`evalengine.io.detections`)."""
    path = Path(path)
    return iter_devkit_results(path, dataset) if path.is_dir() else iter_detections(path, dataset)
