"""YOLO txt folders (the ultralytics layout): ground truth ``labels/<stem>.txt`` with ``class cx cy w h`` lines (or
segment lines ``class x1 y1 x2 y2 … xn yn``, a polygon of 3 or more points) and predictions with ``class cx cy w h
conf`` lines (``yolo predict save_txt=True save_conf=True``) or segment lines ``class x1 y1 … xn yn conf`` (a
segmentation model's), the coordinates normalised to the image's width and height.

- **Pixels**: ultralytics' ``ops.xywhn2xyxy``, ``x1 = W * (cx - w / 2)``, ``y1 = H * (cy - h / 2)``, ``x2 = W * (cx +
  w / 2)``, ``y2 = H * (cy + h / 2)``, in float64 and never rounded (ultralytics' loader holds labels as float32);
  the stored box is ``x1, y1, x2 - x1, y2 - y1`` (``pred_to_json``'s COCO box), its area ``w * h``.
- **Segments** (ultralytics' segment labels, ``Instances.denormalize``): the polygon in pixels ``x * W, y * H``
  (float64) is the object's mask (pycocotools' ``frPyObjects``), its box the points' extent and its area the mask's
  (``maskUtils.area``), as a COCO polygon annotation (:func:`evalengine.io.ground_truth.with_polygon_masks`; box
  objects then get their rectangle as mask). A file mixing box and segment lines is refused (ultralytics reads such
  a file as segments, the box lines' four numbers as two points).
- **Segment predictions**: a COCO result with a box and a segmentation (:func:`iter_yolo_predictions`); a folder
  mixing box and segment predictions is refused.
- **Images**: every image of the sizes (a folder of images, read by header, or a table: :mod:`evalengine.io.image_sizes`);
  an image without a label file has no object (ultralytics' background image). Ids by stem as VOC's
  (:func:`evalengine.io.ground_truth.numbered_images`).
- **Classes**: ``names`` of ``data.yaml`` (a list, or a mapping of index to name) or the lines of ``classes.txt``;
  class ``k`` is category ``k + 1`` (ultralytics' ``class_map`` of a non-COCO set, ``range(1, nc + 1)``). Without
  either file, classes ``0 … max`` named by their index.
- **Checks** (a located error, as ultralytics' ``verify_image_label`` refuses the file): 5 fields in a label line (an
  odd number, 7 or more, in a segment line; 6 in a prediction line, an even number, 8 or more, in a segment one), an
  integer class known to the names, coordinates (and ``conf``) numbers in [0, 1]. Repeated label lines are kept, with
  a warning (ultralytics' loader drops them).
- **Ids**: objects and predictions are numbered from 1 over the files in stem order, lines in file order.
"""

import warnings
from pathlib import Path
from typing import Iterator

import polars as pl

from evalengine import schema
from evalengine.errors import InputError, InputWarning
from evalengine.io.coco import CocoDataset
from evalengine.io.ground_truth import categories_of, dataset_of, numbered_images, with_polygon_masks
from evalengine.io.image_sizes import read_image_sizes, stem

NAME_FILES = ("data.yaml", "dataset.yaml", "classes.txt")
_GT_FIELDS = ("class", "cx", "cy", "w", "h")
_DT_FIELDS = (*_GT_FIELDS, "conf")
BATCH_BYTES = 64 * 2**20  # prediction files read at once


def labels_folder(path) -> Path:
    """The label files' folder of a YOLO dataset: ``path/labels`` when there is one, else ``path``."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: no such folder of YOLO label files")
    return path / "labels" if (path / "labels").is_dir() else path


def is_yolo_folder(path) -> bool:
    """A folder with a ``labels/`` folder, or of ``.txt`` files (and no VOC ``.xml``)."""
    path = Path(path)
    return path.is_dir() and ((path / "labels").is_dir() or (any(path.glob("*.txt")) and not any(path.glob("*.xml"))))


def read_class_names(path) -> list:
    """Class names by index from ``data.yaml`` (``names:`` a list or ``{index: name}``) or ``classes.txt``."""
    import yaml  # only here: the command's start-up does not load PyYAML

    path = Path(path)
    if path.suffix.lower() == ".txt":
        return [line.strip() for line in path.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    try:
        names = (yaml.safe_load(path.read_text(encoding="utf-8-sig")) or {}).get("names")
    except (yaml.YAMLError, AttributeError) as exc:
        raise InputError(f"{path}: not a YAML mapping with 'names' ({str(exc).splitlines()[0]})") from None
    if isinstance(names, dict):
        if not all(isinstance(k, int) for k in names) or sorted(names) != list(range(len(names))):
            raise InputError(f"{path}: 'names' must map the indices 0 … n-1 to names, got keys "
                             f"{sorted(names, key=str)}")
        names = [names[k] for k in range(len(names))]
    if not isinstance(names, list) or not names:
        raise InputError(f"{path}: no 'names' list (or {{index: name}} mapping) of classes")
    return [str(name) for name in names]


def _names_file(folder: Path) -> Path | None:
    for where in dict.fromkeys((folder, folder.parent, folder.parent.parent)):
        for name in NAME_FILES:
            if (where / name).is_file():
                return where / name
    return None


def _lines(files: list, fields: tuple, segments: bool = False) -> pl.DataFrame:
    """The non-blank lines of label files as ``stem, path, line`` and ``fields`` (strings), with located errors for
    a wrong number of fields; with ``segments``, a segment line (``class``, 3 or more ``x y`` points, then what
    ``fields`` has after the box: a prediction's ``conf``) is kept with those in ``fields``, the box's null, and its
    coordinates in ``points`` (strings)."""
    texts = []
    for path in files:
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text (byte {exc.start + 1})") from None
    frame = (pl.DataFrame({"stem": [p.stem for p in files], "path": [str(p) for p in files], "text": texts},
                          schema={"stem": pl.String, "path": pl.String, "text": pl.String})
             .with_columns(pl.col("text").str.split("\n")).explode("text")
             .with_columns((pl.int_range(pl.len()).over("path") + 1).alias("line"),
                           pl.col("text").str.extract_all(r"\S+").alias("fields"))
             .filter(pl.col("fields").list.len() > 0))
    n, after = pl.col("fields").list.len(), len(fields) - len(_GT_FIELDS)  # fields after the box (conf)
    segment = ((n - after >= 7) & ((n - after) % 2 == 1)) if segments else pl.lit(False)
    bad = frame.filter((n != len(fields)) & ~segment)
    if bad.height:
        row = bad.row(0, named=True)
        tail = " conf" if after else ""
        hint = f" or a segment 'class x1 y1 … xn yn{tail}' of 3 or more points" if segments else ""
        raise InputError(f"{row['path']}: line {row['line']}: expected {len(fields)} fields '{' '.join(fields)}'"
                         f"{hint}, found {len(row['fields'])}")
    frame = frame.with_columns(pl.when(segment).then(pl.col("fields").list.slice(1, n - 1 - after)).alias("points"))
    field = pl.col("fields").list.get
    # the class first, the box's four (null on a segment line), then conf as the line's last field
    return frame.select("stem", "path", "line", "fields", "points", *[
        (field(0) if i == 0 else pl.when(pl.col("points").is_null()).then(field(i)) if i < len(_GT_FIELDS)
         else field(i - len(fields))).alias(c) for i, c in enumerate(fields)])


def _refuse_mixed(lines: pl.DataFrame, first, reason: str) -> None:
    """A located error for the first line whose kind (box or segment) is not that of ``first`` (an expression: the
    kind of the line it is compared with)."""
    _located(lines, pl.col("points").is_null() != first, lambda row: f"box lines and segment lines {reason}")


def _located(frame: pl.DataFrame, bad: pl.Expr, message) -> None:
    rows = frame.filter(bad)
    if rows.height:
        row = rows.row(0, named=True)
        more = f" (and {rows.height - 1} more lines)" if rows.height > 1 else ""
        raise InputError(f"{row['path']}: line {row['line']}: {message(row)}{more}")


def _checked(frame: pl.DataFrame, fields: tuple, sizes: pl.DataFrame, n_classes: int | None) -> pl.DataFrame:
    """``fields`` numbers (``class`` a known integer, the others in [0, 1]), the image's id and size joined by stem."""
    for column in fields:
        value = pl.col(column).cast(pl.Float64, strict=False)
        _located(frame, ~value.is_finite().fill_null(False), lambda row, c=column: f"'{c}' is {row[c]!r}, not a number")
    frame = frame.with_columns(pl.col(list(fields)).cast(pl.Float64))
    _located(frame, pl.col("class") != pl.col("class").floor(),
             lambda row: f"class {row['class']!r} is not an integer")
    for column in fields[1:]:
        _located(frame, ~pl.col(column).is_between(0.0, 1.0),
                 lambda row, c=column: f"'{c}' is {row[c]!r}, outside [0, 1] (normalised coordinates)")
    limit = "" if n_classes is None else f" (the names list {n_classes} classes)"
    _located(frame, (pl.col("class") < 0) | (pl.col("class") >= (n_classes or 2**53)),
             lambda row: f"class {int(row['class'])} is not a known class{limit}")
    frame = frame.join(sizes.select("stem", "image_id", "width", "height"), on="stem", how="left", maintain_order="left")
    _located(frame, pl.col("width").is_null() | pl.col("height").is_null(),
             lambda row: f"image '{row['stem']}' has no size (not in the images or the image sizes table)")
    return frame.with_columns((pl.col("class").cast(pl.Int64) + 1).alias("category_id"))


def _boxes(frame: pl.DataFrame, fields: tuple, sizes: pl.DataFrame, n_classes: int | None) -> pl.DataFrame:
    """:func:`_checked` lines with the pixel box (``xywhn2xyxy``)."""
    frame = _checked(frame, fields, sizes, n_classes)
    half_w, half_h = pl.col("w") / 2, pl.col("h") / 2
    x1, y1 = pl.col("width") * (pl.col("cx") - half_w), pl.col("height") * (pl.col("cy") - half_h)
    x2, y2 = pl.col("width") * (pl.col("cx") + half_w), pl.col("height") * (pl.col("cy") + half_h)
    return frame.with_columns(x1.alias("x"), y1.alias("y"), (x2 - x1).alias("w"), (y2 - y1).alias("h"))


def _segments(frame: pl.DataFrame, sizes: pl.DataFrame, n_classes: int | None, fields=("class",)) -> pl.DataFrame:
    """:func:`_checked` segment lines (their ``fields``: the class, a prediction's conf), each point a number in
    [0, 1] (named ``x1, y1, x2, …`` in errors), with the polygon in pixels (``x * W, y * H``) as ``polygon`` and as
    COCO's JSON text ``segmentation``."""
    frame = _checked(frame.with_row_index("_object"), fields, sizes, n_classes)
    k = pl.int_range(pl.len()).over("_object")
    points = (frame.select("_object", "path", "line", "width", "height", "points").explode("points")
              .with_columns(pl.format("{}{}", pl.when(k % 2 == 0).then(pl.lit("x")).otherwise(pl.lit("y")),
                                      k // 2 + 1).alias("name"), (k % 2 == 0).alias("_x")))
    _located(points, ~pl.col("points").cast(pl.Float64, strict=False).is_finite().fill_null(False),
             lambda row: f"'{row['name']}' is {row['points']!r}, not a number")
    points = points.with_columns(pl.col("points").cast(pl.Float64))
    _located(points, ~pl.col("points").is_between(0.0, 1.0),
             lambda row: f"'{row['name']}' is {row['points']!r}, outside [0, 1] (normalised coordinates)")
    pixels = (points.group_by("_object", maintain_order=True)
              .agg((pl.col("points") * pl.when(pl.col("_x")).then(pl.col("width")).otherwise(pl.col("height")))
                   .alias("polygon")))
    return frame.drop("points", *_GT_FIELDS[1:]).join(pixels, on="_object", maintain_order="left").with_columns(
        pl.format("[[{}]]", pl.col("polygon").cast(pl.List(pl.String)).list.join(",")).alias("segmentation"),
        pl.format("{} line {}", pl.col("path"), pl.col("line")).alias("where")).drop("_object")


def read_yolo_gt(path, images=None, names=None) -> CocoDataset:
    """A YOLO dataset folder (with ``labels/``, and ``images/`` unless ``images`` is given) or a folder of label files,
    as the store's tables. ``images``: a folder of images or a table of sizes; ``names``: a ``data.yaml`` or
    ``classes.txt`` (default: the first found in the folder, its parent or grandparent)."""
    folder = labels_folder(path)
    root = Path(path)
    if images is None:
        if not (root / "images").is_dir():
            raise InputError(f"{root}: YOLO boxes are normalised: give the image sizes (--images FOLDER or a table "
                             "image,width,height), or put the images in an 'images' folder beside 'labels'")
        images = root / "images"
    sizes = numbered_images(read_image_sizes(images))
    names_file = Path(names) if names is not None else _names_file(folder)
    class_names = read_class_names(names_file) if names_file is not None else None
    files = sorted((p for p in folder.glob("*.txt") if p.name not in NAME_FILES), key=lambda p: p.stem)
    lines = _lines(files, _GT_FIELDS, segments=True)
    _refuse_mixed(lines, pl.col("points").is_null().first().over("path"),
                  "in one file (ultralytics reads such a file as segments, a box line as two points)")
    repeated = lines.filter(pl.struct("path", "fields").is_duplicated())
    if repeated.height:
        warnings.warn(f"{repeated.row(0, named=True)['path']}: {repeated.height} repeated label lines are kept "
                      "(ultralytics' loader drops repeated lines)", InputWarning, stacklevel=2)
    n_classes = None if class_names is None else len(class_names)
    segment = pl.col("points").is_not_null()
    frame = _boxes(lines.filter(~segment), _GT_FIELDS, sizes, n_classes)
    if lines.select(segment.any()).item():
        segments = _segments(lines.filter(segment), sizes, n_classes)
        frame = pl.concat([frame.with_columns(pl.lit(None, pl.List(pl.Float64)).alias("polygon"),
                                              pl.lit(None, pl.String).alias("segmentation"),
                                              pl.format("{} line {}", pl.col("path"), pl.col("line")).alias("where")),
                           segments], how="diagonal_relaxed").sort("stem", "line")
        frame = with_polygon_masks(frame, sizes, folder, "label")
    if class_names is None:
        class_names = [str(k) for k in range(int(frame.get_column("class").max() or 0) + 1)]
    return dataset_of(sizes, categories_of(class_names), frame)


def _prediction_batches(folder: Path) -> Iterator[list]:
    batch, size = [], 0
    for path in sorted(folder.glob("*.txt"), key=lambda p: p.stem):
        batch.append(path)
        size += path.stat().st_size
        if size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def iter_yolo_predictions(path, dataset: CocoDataset) -> Iterator[pl.DataFrame]:
    """Detection frames (:data:`evalengine.schema.DT`) of a folder of YOLO prediction files (``labels/`` in it when
    there is one), read in batches of files; every file names an image of the ground truth by its stem. Segment
    predictions (``class x1 y1 … xn yn conf``, as ``yolo segment predict save_txt=True save_conf=True`` writes them)
    are results with a box and a polygon segmentation, as a COCO result file would hold them: the box the pixel
    points' extent, the area its ``w * h`` (``loadRes`` of a result with a box), the mask the polygon's
    (``frPyObjects``). The folder's first line decides which kind every line must be (as ``loadRes`` decides by the
    first result)."""
    folder = labels_folder(path)
    sizes = dataset.images.with_columns(stem(pl.col("file_name")).alias("stem"))
    n_classes = dataset.categories.height
    first_id, segmented = 1, None
    for files in _prediction_batches(folder):
        lines = _lines(files, _DT_FIELDS, segments=True)
        if not lines.height:  # no batch without rows: the first one decides the run's columns
            continue
        if segmented is None:
            first = lines.row(0, named=True)
            segmented = first["points"] is not None
        _refuse_mixed(lines, pl.lit(not segmented), f"in one folder of predictions (its first line, {first['path']} "
                                                    f"line {first['line']}, is a {'segment' if segmented else 'box'})")
        frame = (_segment_results(lines, sizes, n_classes, folder) if segmented
                 else _boxes(lines, _DT_FIELDS, sizes, n_classes))
        yield frame.select((pl.int_range(pl.len(), dtype=pl.Int64) + first_id).alias("det_id"), "image_id",
                           "category_id", pl.col("conf").alias("score"), "x", "y", "w", "h",
                           (pl.col("w") * pl.col("h")).alias("area"), *[c for c in schema.MASK if c in frame.columns])
        first_id += frame.height
    if first_id == 1:
        raise InputError(f"{folder}: no YOLO prediction (<stem>.txt lines 'class cx cy w h conf' or 'class x1 y1 … xn "
                         "yn conf') in this folder")


def _segment_results(lines: pl.DataFrame, sizes: pl.DataFrame, n_classes: int, folder: Path) -> pl.DataFrame:
    """Segment prediction lines with their box (the polygon's extent) and mask columns (:func:`with_polygon_masks`)."""
    frame = _segments(lines, sizes, n_classes, ("class", "conf")).with_columns(
        pl.lit(None, pl.Float64).alias(c) for c in schema.BOX)
    return with_polygon_masks(frame, sizes, folder, "prediction")
