"""A classifier's labels of the ground-truth boxes, the input of the empirical upper-bound AP (Borji & Iranmanesh §4,
strategies 1 and 2), and the detections they make.

A table (CSV, JSON Lines or Parquet) has rows ``gt_id`` (the annotation id; ``ann_id`` is accepted), the predicted
``category_id`` (or ``pred_category_id``), its ``score`` (or ``pred_score``), optionally ``image_id``, which must then
be the annotation's image, and optionally ``box_id`` (or ``sample_id``), naming the sampled box a row labels. Strategy
``s1`` takes one row per annotation (the classifier on the target box); ``s2_mcb`` and ``s2_mfl`` take several, one per
box sampled near the target (spec §3.3.3), and choose one label per annotation (:func:`choose_labels`). Every error
names the file and the row (its 1-based position): an id or a score that is not one, a ``gt_id`` not in the store's
ground truth, listed twice under ``s1`` (or a ``gt_id, box_id`` pair listed twice), a category not in the store, and an
annotation without a row — the upper bound emits one detection per annotation (the reference notebook,
``calc_upperBound.ipynb``, crowd included), so a missing row is an error unless ``allow_missing`` counts it as missed.
"""

from pathlib import Path

import polars as pl

from evalengine import schema
from evalengine.errors import InputError, check_option, first_line
from evalengine.io.detections import json_lines_fields, parsed_in_parallel
from evalengine.io.validate import check_csv_header, integers, listed, numbers, require

FORMATS = (".csv", ".jsonl", ".ndjson", ".parquet")
# each column of the table and the names it may have (the spec's classifier_preds: ann_id, pred_category_id, pred_score)
COLUMNS = {"gt_id": ("gt_id", "ann_id"), "category_id": ("category_id", "pred_category_id"),
           "score": ("score", "pred_score"), "image_id": ("image_id",), "box_id": ("box_id", "sample_id")}
OPTIONAL = ("image_id", "box_id")
# s1: the target box's own label (the paper's reported UAP); s2: the most confident box, the most frequent label
STRATEGIES = ("s1", "s2_mcb", "s2_mfl")
_ROW = pl.col("row")


def _names(path: Path, found) -> dict:
    """``{source name: column}`` of the table's columns (``image_id`` optional; each column under one name)."""
    found, names = list(found), {}
    for column, accepted in COLUMNS.items():
        present = [name for name in accepted if name in found]
        if len(present) > 1:
            raise InputError(f"{path}: columns {' and '.join(present)} both give the {column}; keep one")
        if not present and column not in OPTIONAL:
            raise InputError(f"{path}: missing column {' or '.join(accepted)} (found {', '.join(found) or 'none'}; "
                             "expected gt_id, category_id, score and optionally image_id, box_id)")
        names.update({present[0]: column} if present else {})
    return names


def _read(path: Path) -> pl.DataFrame:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InputError(f"{path}: unknown classifier table format '{suffix}' (expected one of {', '.join(FORMATS)})")
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if suffix in (".jsonl", ".ndjson"):
        fields = {name: pl.Float64 if name in COLUMNS["score"] else pl.Int64
                  for name in json_lines_fields(path, lambda p, keys: list(_names(p, keys)))}
        frames = list(parsed_in_parallel(path, fields, "row", lines=True))
        return pl.concat(frames) if frames else pl.DataFrame(schema=fields)
    try:
        if suffix == ".parquet":
            return pl.read_parquet(path)
        check_csv_header(path)
        return pl.read_csv(path, infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(f"{path}: not a readable {suffix[1:].upper()} table ({first_line(exc)})") from None


def read_classifier_table(path, strategy: str = "s1") -> pl.DataFrame:
    """The table as ``row, gt_id, category_id, score, image_id`` (``image_id`` null when not given), its values
    checked: integer ids, finite scores, each ``gt_id`` once under ``s1``, each ``gt_id, box_id`` pair once."""
    check_option("strategy", strategy, STRATEGIES, InputError)
    path = Path(path)
    raw = _read(path)
    names = _names(path, raw.columns)
    frame = raw.select(pl.col(list(names))).rename(names).with_row_index("row", offset=1)
    if not frame.height:
        raise InputError(f"{path}: the table holds no rows (one per annotation is expected)")
    given = [c for c in COLUMNS if c in frame.columns]
    require(frame, given, path, "row", _ROW)
    frame = integers(frame, [c for c in given if c != "score"], path, "row", _ROW)
    frame = numbers(frame, ["score"], path, "row", _ROW)
    bad = frame.filter(~pl.col("score").is_finite())
    if bad.height:
        raise InputError(f"{path}: row {listed(bad.get_column('row'))}: 'score' is not finite")
    keys = ["gt_id"] if strategy == "s1" else ["gt_id", "box_id"] if "box_id" in frame.columns else []
    if keys:
        _once(frame, keys, path)
    if "image_id" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Int64).alias("image_id"))
    return frame.select("row", "gt_id", "category_id", "score", "image_id")


def _once(frame: pl.DataFrame, keys: list, path) -> None:
    """Each value of ``keys`` names one row, or a located error."""
    twice = frame.filter(pl.struct(keys).is_duplicated())
    if twice.height:
        first = twice.row(0, named=True)
        rows = twice.filter(pl.all_horizontal(pl.col(k) == first[k] for k in keys)).get_column("row")
        which = ", ".join(f"{k} {first[k]}" for k in keys)
        hint = " (strategy s1 takes one row per annotation; s2_mcb and s2_mfl take several)" if len(keys) == 1 else ""
        raise InputError(f"{path}: rows {listed(rows)}: {which} listed more than once{hint}")


def check_classifier_table(table: pl.DataFrame, gt: pl.DataFrame, category_ids, path, allow_missing: bool = False):
    """``table`` joined to the annotations it labels (``gt``: the store's ``gt_id, image_id, category_id, iscrowd,
    gt_order, x, y, w, h``; the annotation's ``category_id`` as ``true_category_id``), or a located error."""
    joined = table.join(gt.rename({"image_id": "gt_image_id", "category_id": "true_category_id"}), on="gt_id",
                        how="left", maintain_order="left")
    unknown = joined.filter(pl.col("gt_order").is_null())
    if unknown.height:
        raise _located(path, unknown, "gt_id {gt_id} is not an annotation of the store's ground truth")
    elsewhere = joined.filter(pl.col("image_id").is_not_null() & (pl.col("image_id") != pl.col("gt_image_id")))
    if elsewhere.height:
        raise _located(path, elsewhere, "gt_id {gt_id} is an annotation of image {gt_image_id}, not of image_id "
                                        "{image_id}")
    stray = joined.filter(~pl.col("category_id").is_in(pl.Series(list(category_ids), dtype=pl.Int64).implode()))
    if stray.height:
        raise _located(path, stray, "category_id {category_id} is not a category of the store")
    missing = gt.join(table.select("gt_id"), on="gt_id", how="anti").sort("gt_order")
    if missing.height and not allow_missing:
        raise InputError(f"{path}: gt_id {listed(missing.get_column('gt_id'))} ({missing.height} of {gt.height} "
                         "annotations) have no row: the upper bound emits one detection per annotation "
                         "(allow missing rows to count them as missed)")
    return joined.drop("image_id").rename({"gt_image_id": "image_id"})


def _located(path, rows: pl.DataFrame, problem: str) -> InputError:
    first = rows.row(0, named=True)
    more = f" (and {rows.height - 1} more rows)" if rows.height > 1 else ""
    return InputError(f"{path}: row {first['row']}: {problem.format(**first)}{more}")


def choose_labels(labelled: pl.DataFrame, strategy: str) -> pl.DataFrame:
    """One row per annotation of the rows ``labelled`` by the classifier (spec §3.3.3), ``score`` the detection's:

    - ``s1``: the annotation's one row;
    - ``s2_mcb`` (most confident box): the label and score of the highest-scoring row; a tie goes to the row first in
      the table (``np.argmax``'s first maximum);
    - ``s2_mfl`` (most frequent label): the label of most rows, scored by the highest score among its rows; a tie
      between labels goes to the higher such score, then to the label whose first row comes first in the table.

    Whether the target box's own label takes part (the paper leaves it open) is the table's to say: a row for the
    target box is one row among the others."""
    check_option("strategy", strategy, STRATEGIES, InputError)
    if strategy == "s1":
        return labelled
    by_label = ("gt_id", "category_id")
    order = [pl.col("score"), pl.col("row")] if strategy == "s2_mcb" else [
        pl.len().over(by_label), pl.col("score").max().over(by_label), pl.col("row").min().over(by_label),
        pl.col("score"), pl.col("row")]
    descending = [True, False] if strategy == "s2_mcb" else [True, True, False, True, False]
    return (labelled.sort([pl.col("gt_id"), *order], descending=[False, *descending])
            .unique("gt_id", keep="first", maintain_order=True))


def upper_bound_detections(labelled: pl.DataFrame, unit_score: bool = False) -> pl.DataFrame:
    """Strategy 1: one detection per labelled annotation, its box the annotation's, its category the predicted one
    and its score the classifier's (``unit_score``: 1, the paper's variant). Ids follow the annotations' file order,
    as the notebook lists ``data['annotations']`` (pycocotools breaks tied scores by it)."""
    score = pl.lit(1.0) if unit_score else pl.col("score")
    return (labelled.sort("gt_order")
            .select(pl.int_range(1, pl.len() + 1).alias("det_id"), "image_id", "category_id", score.alias("score"),
                    "x", "y", "w", "h", (pl.col("w") * pl.col("h")).alias("area"))
            .cast(schema.DT))
