"""COCO segmentations and keypoints as the store's columns (:data:`evalengine.schema.MASK`, ``KEYPOINTS``).

A segmentation is read as its JSON text (:data:`SEGMENTATION`; a Parquet struct ``{size, counts}`` is written back as
one) and becomes what pycocotools ``annToRLE`` makes of it, in the image's size: a polygon list is rasterised part by
part and merged (``frPyObjects`` + ``merge``), an uncompressed RLE (``counts`` a list) and a compressed one (a string)
are taken as they are. It is stored as a compressed string (``rleToString``; a compressed input's own string). The RLE format and pycocotools' rasterisation are :mod:`evalengine.io.rle`'s (a list whose
first polygon has 4 numbers is boxes, as faster-coco-eval reads it).

Where pycocotools refuses an input, faster-coco-eval's and hotcoco's rule is kept where they agree: ``[]`` is an
empty mask (hotcoco; faster-coco-eval and pycocotools fail with an IndexError). Refused with a located error,
although pycocotools reads them without a word: a polygon with an odd number of coordinates (it drops the last one),
an RLE whose size is not its image's (it uses the RLE's) or whose counts do not sum to height × width, a compressed
string that is not one; and as pycocotools, a first polygon of fewer than 4 numbers.
"""

import functools
import io
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from evalengine import schema
from evalengine.arrow import arrow_array, list_lengths
from evalengine.errors import InputError
from evalengine.io import rasterise, rle
from evalengine.io.json_segmentation import COLUMNS as PARSED, COMPRESSED, POLYGONS, UNCOMPRESSED

SEGMENTATION = pl.String  # how a segmentation is read: its JSON text, until its form is known
_POLYGON = pl.List(pl.List(pl.Float64))
_RLE = {"uncompressed": pl.Struct({"size": pl.List(pl.Int64), "counts": pl.List(pl.Int64)}),
        "compressed": pl.Struct({"size": pl.List(pl.Int64), "counts": pl.String})}
# a segmentation the JSON kernels read (json_segmentation.parsed_columns) as one column: its parsed columns as fields
PARSED_SEGMENTATION = pl.Struct({PARSED[POLYGONS]: _POLYGON,
                                 PARSED[COMPRESSED]: pl.Struct({**_RLE["compressed"].to_schema(), "runs_sum": pl.Int64}),
                                 PARSED[UNCOMPRESSED]: _RLE["uncompressed"]})
_UINT32 = 2**32


@dataclass(frozen=True)
class Masks:
    """The masks of a frame's rows as the store's columns (``mask_rle``: :data:`evalengine.schema.MASK`), decoded
    only for what is computed from them."""

    columns: pl.DataFrame  # schema.MASK
    height: np.ndarray
    width: np.ndarray

    def runs(self) -> tuple:
        """``(counts, offsets)``: row ``i``'s run lengths are ``counts[offsets[i]:offsets[i+1]]`` (none without a
        mask)."""
        return rle.decode_strings(self.columns.get_column("mask_rle").to_arrow())

    @functools.cached_property
    def _decoded(self) -> tuple:
        """:func:`evalengine.io.rle.decode_rows` of every row: runs, box and area in one pass, once."""
        n = self.columns.height
        return rle.decode_rows(self.columns.get_column("mask_rle").to_arrow(), np.arange(n), self.height, self.width, n)

    def area(self) -> np.ndarray:
        """pycocotools ``maskUtils.area`` of each row's mask."""
        return self._decoded[3]

    def bbox(self) -> np.ndarray:
        """pycocotools ``maskUtils.toBbox`` of each row's mask, ``(n, 4)``."""
        return self._decoded[2]


@functools.cache  # a Polars read: asked when a segmentation is first read, not as the module is imported
def _reader_keeps_backslashes() -> bool:
    """Whether Polars' JSON reader, giving a nested value as text, writes a backslash of its strings as is (Polars 2.1
    does, and escapes quotes and control characters): the text is then JSON once each backslash is doubled."""
    text = pl.read_ndjson(io.BytesIO(b'{"s": {"c": "\\\\"}}'), schema={"s": pl.String}).item()
    return text.replace(" ", "") == '{"c":"\\"}'


def segmentation_text(column: pl.Expr, dtype, json_reader: bool) -> pl.Expr:
    """A segmentation column as JSON text: read as text by the JSON reader (``json_reader``), given as text (a Parquet
    string column) or as a struct ``{size, counts}`` (Parquet). A compressed RLE's characters are ``0``…``o``, which
    hold a backslash but no quote or control character, so doubling the reader's backslashes is exact for it (and
    a string with a quote stays malformed). The ground-truth kernel's parsed segmentations
    (:data:`PARSED_SEGMENTATION`) are kept as they are."""
    if dtype == PARSED_SEGMENTATION:
        return column
    if isinstance(dtype, pl.Struct):
        return column.struct.json_encode()
    text = column.cast(pl.String)
    return text.str.replace_all("\\", "\\\\", literal=True) if json_reader and _reader_keeps_backslashes() else text


def masks(frame: pl.DataFrame, images: pl.DataFrame, path, what: str, row: pl.Expr,
          default_polygon: pl.Expr | None = None) -> Masks:
    """The masks of ``frame``'s ``segmentation`` (JSON text, null for none; or the parsed columns of
    :func:`evalengine.io.json_segmentation.parsed_columns`, as columns or as the fields of a
    :data:`PARSED_SEGMENTATION` column) in the size of each row's image; rows without one get
    ``default_polygon`` (a ``List(List(Float64))`` expression over the frame) if given, else no mask. ``what`` and
    ``row`` name a row in errors (``annotation`` / ``pl.col('id')``)."""
    if frame.schema.get("segmentation") == PARSED_SEGMENTATION:
        frame = frame.unnest("segmentation")
    sizes = images.select("image_id", pl.col("height").alias("_h"), pl.col("width").alias("_w"))
    frame = (frame.with_row_index("_row").join(sizes, on="image_id", how="left", maintain_order="left")
             .with_columns(row.alias("_id")))
    parsed = PARSED[COMPRESSED] in frame.columns
    has = (pl.any_horizontal(pl.col(c).is_not_null() for c in PARSED.values()) if parsed
           else pl.col("segmentation").is_not_null())
    _reject(frame if default_polygon is not None else frame.filter(has), pl.col("_h").is_null() | pl.col("_w").is_null(),
            path, what, "its image has no 'height' and 'width', which its mask needs")
    polygon, compressed, uncompressed = (_parsed if parsed else _read)(frame, path, what)
    if default_polygon is not None:
        made = frame.filter(~has).with_columns(default_polygon.alias("polygon"))
        polygon = pl.concat([polygon, made.select(polygon.columns)]).sort("_row")
    parts = [_polygon_masks(polygon, path, what), _rle_masks(uncompressed, "uncompressed", path, what),
             _rle_masks(compressed, "compressed", path, what)]
    return _assembled(frame, polygon, parts)


def _read(frame: pl.DataFrame, path, what: str) -> tuple:
    """``(polygon rows, compressed RLE rows, uncompressed RLE rows)`` of JSON texts, decoded (the rows with
    ``polygon`` or ``_rle``)."""
    opens = pl.col("segmentation").str.strip_chars_start().str.slice(0, 1)
    frame = frame.with_columns(opens.alias("_opens"))
    _reject(frame.filter(pl.col("segmentation").is_not_null()), ~pl.col("_opens").is_in(["[", "{"]), path, what,
            "'segmentation' is neither a polygon list nor an RLE {size, counts}")
    polygon = frame.filter(pl.col("_opens") == "[")
    polygon = polygon.with_columns(_decoded(polygon, _POLYGON, path, what).alias("polygon")).drop("_opens")
    dicts = frame.filter(pl.col("_opens") == "{")
    listed = pl.col("segmentation").str.contains(r'"counts"\s*:\s*\[')
    rle_rows = []
    for kind, rows in (("compressed", dicts.filter(~listed)), ("uncompressed", dicts.filter(listed))):
        rle_rows.append(rows.with_columns(_decoded(rows, _RLE[kind], path, what).alias("_rle")))
    return polygon, *rle_rows


def has_segmentation(frame: pl.DataFrame) -> bool:
    """Whether ``frame`` holds segmentations: a ``segmentation`` column, or the parsed ones."""
    return "segmentation" in frame.columns or PARSED[COMPRESSED] in frame.columns


def _parsed(frame: pl.DataFrame, *_) -> tuple:
    """:func:`_read` of the parsed columns (``segmentation_polygon``, …): nothing left to decode."""
    polygon = frame.filter(pl.col(PARSED[POLYGONS]).is_not_null()).rename({PARSED[POLYGONS]: "polygon"})
    compressed, uncompressed = (frame.filter(pl.col(PARSED[k]).is_not_null()).rename({PARSED[k]: "_rle"})
                                for k in (COMPRESSED, UNCOMPRESSED))
    return polygon, compressed, uncompressed


def _decoded(rows: pl.DataFrame, dtype, path, what: str) -> pl.Series:
    """The JSON texts of ``rows`` decoded as ``dtype``; else the first that is not one, located."""
    try:
        return rows.get_column("segmentation").str.json_decode(dtype)
    except pl.exceptions.PolarsError:
        pass
    form = "a polygon list of numbers" if dtype == _POLYGON else "an RLE {size: [h, w], counts}"
    for ident, value in rows.select("_id", "segmentation").iter_rows():
        try:
            pl.Series([value]).str.json_decode(dtype)
        except pl.exceptions.PolarsError:
            raise InputError(f"{path}: {what} {ident}: 'segmentation' is not {form}: {_shown(value)}") from None
    raise InputError(f"{path}: a 'segmentation' is not {form}")


def _flat(column: pl.Series) -> tuple:
    """``(values, lengths)`` of a list column, a null list (or element) of length -1 (a null value: NaN)."""
    import pyarrow.compute as pc  # here: a box evaluation never needs it (~0.07 s of a command's start)

    array = column.to_arrow()
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    return pc.list_flatten(array), list_lengths(array, -1)


def _polygon_masks(rows: pl.DataFrame, path, what: str) -> tuple:
    """``(rows, strings)`` of polygon rows: every part rasterised in the image's size, the parts merged, compressed
    (``rleToString``)."""
    parts, n_parts = _flat(rows.get_column("polygon"))
    coords, part_len = _flat(pl.Series(parts))
    coords = pl.Series(coords).to_numpy().astype(np.float64)  # a null coordinate is NaN here
    part_offsets = np.concatenate([[0], np.cumsum(np.maximum(part_len, 0))])
    row_parts = np.concatenate([[0], np.cumsum(n_parts)])
    bad = rasterise.first_bad_polygon(coords, part_offsets, row_parts) if (part_len >= 0).all() else int(
        np.searchsorted(row_parts, np.flatnonzero(part_len < 0)[0], side="right") - 1)
    if bad >= 0:
        polygon = rows.get_column("polygon")[bad].to_list()
        raise InputError(f"{path}: {what} {rows.get_column('_id')[bad]}: 'segmentation' {_polygon_problem(polygon)}")
    h, w = _sizes(rows)
    counts, offsets = rasterise.from_polygons(coords, part_offsets, row_parts, h, w)
    return rows.get_column("_row"), rle.encode_strings(counts, offsets, arrow=True)


def _polygon_problem(polygon: list) -> str:
    """What is wrong with a polygon list :func:`evalengine.io.rasterise.first_bad_polygon` refuses."""
    for k, part in enumerate(polygon):
        if part is None:
            return f"polygon {k + 1} is null"
        if len(part) % 2:
            return f"polygon {k + 1} has an odd number of coordinates ({len(part)})"
        if not all(v is not None and abs(v) <= rasterise.MAX_COORDINATE for v in part):
            return f"polygon {k + 1} has a null, or a coordinate beyond {rasterise.MAX_COORDINATE:g} in magnitude"
    return f"the first polygon has fewer than 4 numbers ({len(polygon[0])}), which pycocotools refuses"


def _rle_masks(rows: pl.DataFrame, kind: str, path, what: str) -> tuple:
    """``(rows, strings)`` of RLE rows, checked (the image's size, counts that sum to its area) and compressed: an
    uncompressed one by ``rleToString``, a compressed one as given."""
    size, counts = pl.col("_rle").struct.field("size"), pl.col("_rle").struct.field("counts")
    _reject(rows, size.is_null() | (size.list.len() != 2) | counts.is_null(), path, what,
            "'segmentation' is not an RLE {size: [h, w], counts}")
    _reject(rows, (size.list.get(0) != pl.col("_h")) | (size.list.get(1) != pl.col("_w")), path, what,
            "'segmentation' RLE size differs from its image's [height, width]",
            shown=pl.format("[{}, {}], the image's [{}, {}]", size.list.get(0), size.list.get(1), "_h", "_w"))
    given = rows.get_column("_rle").struct.field("counts")
    h, w = _sizes(rows)
    if kind == "uncompressed":
        values, lengths = _flat(given)
        values = pl.Series(values).to_numpy()
        in_range = (values >= 0) & (values < _UINT32)  # (a null is NaN: not in range)
        if not in_range.all():
            row = int(np.searchsorted(np.cumsum(lengths), np.flatnonzero(~in_range)[0], side="right"))
            raise InputError(f"{path}: {what} {rows.get_column('_id')[row]}: 'segmentation' RLE counts must be "
                             "integers in [0, 2**32)")
        values, offsets = values.astype(np.uint32), np.concatenate([[0], np.cumsum(lengths)])
        strings, bad = rle.encode_strings(values, offsets, arrow=True), rle.first_bad_counts(values, offsets, h, w)
    else:
        strings = given  # kept in Polars: to Arrow and back copied every string twice
        if "runs_sum" in rows.schema["_rle"].to_schema():  # summed by the JSON kernels as they read the strings
            sums = rows.get_column("_rle").struct.field("runs_sum").to_numpy()
            malformed, bad = rle.first_bad_sums(sums, h, w)
        else:
            malformed, bad = rle.first_bad_strings(strings.to_arrow(), h, w)
        if malformed >= 0:  # rleFrString's characters are '0'..'o' (5 bits and 0x20 for "more"): the last ends a value
            _reject(rows, counts.str.contains(r"[^0-o]|[P-o]$"), path, what,
                    "'segmentation' counts is not a compressed RLE string", shown=counts)
    if bad >= 0:
        total = int(rle.decode_strings(pl.Series(strings[bad:bad + 1]).to_list())[0].sum(dtype=np.int64))
        raise InputError(f"{path}: {what} {rows.get_column('_id')[bad]}: 'segmentation' RLE counts sum to {total}, "
                         f"not height x width = {h[bad] * w[bad]}")
    return rows.get_column("_row"), strings


def _assembled(frame: pl.DataFrame, polygon: pl.DataFrame, parts: list) -> Masks:
    """Every row's mask in row order (each part holds some rows' masks as compressed strings, in Arrow or Polars)."""
    n = frame.height
    whole = [part for part in parts if len(part[0]) == n]
    if whole:  # one form for every row (rows in order): as it is
        strings, has = whole[0][1], np.ones(n, bool)
    else:
        parts = [(rows, given.to_arrow() if isinstance(given, pl.Series) else given) for rows, given in parts]
        at, done = np.full(n, -1, np.int64), 0
        for rows, given in parts:
            at[rows.to_numpy()] = done + np.arange(len(rows))
            done += len(rows)
        has = at >= 0
        strings = pa.concat_arrays([given.cast(pa.large_string()) for _, given in parts]).take(
            arrow_array(at, has))
    shaped = pl.Series(has)
    columns = frame.select(
        pl.when(shaped).then(pl.col("_h")).alias("mask_h"),
        pl.when(shaped).then(pl.col("_w")).alias("mask_w"),
    ).with_columns(pl.Series(strings).alias("mask_rle"), _polygons(n, polygon)).cast(schema.MASK)
    h, w = _sizes(frame)
    return Masks(columns=columns, height=h, width=w)


def _polygons(n: int, polygon: pl.DataFrame) -> pl.Series:
    if not polygon.height:  # RLE results, as detectron2 writes them: no join
        return pl.repeat(None, n, dtype=_POLYGON, eager=True).alias("polygon")
    return (pl.DataFrame({"_row": pl.int_range(n, eager=True, dtype=pl.UInt32)})
            .join(polygon.select(pl.col("_row").cast(pl.UInt32), "polygon"), on="_row", how="left",
                  maintain_order="left").get_column("polygon"))


def _sizes(rows: pl.DataFrame) -> tuple:
    return tuple(rows.get_column(c).fill_null(0).to_numpy().astype(np.int64) for c in ("_h", "_w"))


def box_polygon(x: pl.Expr, y: pl.Expr, w: pl.Expr, h: pl.Expr) -> pl.Expr:
    """pycocotools ``loadRes``: a box result without a segmentation gets ``[[x1, y1, x1, y2, x2, y2, x2, y1]]``."""
    x2, y2 = x + w, y + h
    return pl.concat_list(x, y, x, y2, x2, y2, x2, y).list.to_array(8).reshape((-1, 1, 8)).cast(_POLYGON)


def check_keypoints(frame: pl.DataFrame, path, what: str, row: pl.Expr) -> None:
    """Keypoints are ``[x, y, v]`` triples of numbers (pycocotools slices them by 3 without a check)."""
    kp = pl.col("keypoints")
    _reject(frame.with_columns(row.alias("_id")), kp.list.len() % 3 != 0, path, what,
            "'keypoints' length is not a multiple of 3", shown=kp.list.len())
    _reject(frame.with_columns(row.alias("_id")), kp.list.eval(pl.element().is_null()).list.any(), path, what,
            "'keypoints' holds a null")


def _reject(rows: pl.DataFrame, bad: pl.Expr, path, what: str, problem: str, shown: pl.Expr | None = None) -> None:
    """A located error at the first of ``rows`` (which hold ``_id``) where ``bad`` holds."""
    found = rows.filter(bad.fill_null(False))
    if found.height:
        ident = found.get_column("_id")[0]
        value = f" ({_shown(found.select(shown).to_series()[0])})" if shown is not None else ""
        more = f" (and {found.height - 1} more)" if found.height > 1 else ""
        raise InputError(f"{path}: {what} {ident}: {problem}{value}{more}")


def _shown(value) -> str:
    text = str(value.to_list() if isinstance(value, pl.Series) else value)
    return text if len(text) <= 40 else text[:37] + "..."
