"""A COCO ground-truth file's annotations parsed straight from its bytes into typed columns, by a numba kernel.

The top-level object is walked member by member: ``annotations`` is parsed by :func:`parse_annotations` (on every
core, in pieces cut between two annotations), every other value only delimited, for the exact readers
(:func:`evalengine.io.json_read.read_json_list`) to read as before. The kernel reads the common form of an annotation
— ``id``, ``image_id``, ``category_id`` (integers; an integral float is one), ``bbox`` (four numbers), ``area``,
``iscrowd`` / ``ignore`` / ``difficult`` (integers or booleans), a ``segmentation`` polygon list or RLE (read by the
results' reader, :func:`evalengine.io.json_segmentation.read_segmentation`, into its parsed columns, which
:func:`evalengine.io.masks.masks` takes as they are), the scalar fields typed from the first annotations
(:func:`extra_annotation_fields`), any other key skipped —
and gives up on anything else (``null`` where a box is needed, a repeated or escaped key, non-ASCII text, keypoints,
an overflowing number, a syntax error): :func:`annotation_columns` then returns None and the exact reader reads the
file, so every accepted file gives the exact reader's columns and every refused one its located message.

Numbers are read as Python's json reads them (:mod:`evalengine.io.json_numbers`, a rare few by Arrow's parser).
"""

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np
import polars as pl
import pyarrow as pa

from evalengine import schema
from evalengine.arrow import arrow_array
from evalengine.io.json_scan import list_sample, value_end
from evalengine.io.json_pieces import kept_pieces
from evalengine.io.json_segmentation import end_row, outputs, parsed, read_segmentation
from evalengine.io.json_numbers import MANTISSA_DIGITS, number, whole_integer
from evalengine.io.json_values import (END, FAIL, FALSE, MORE, NEXT, NULL, TRUE, correctly_rounded, gather,
                                       literal, member, next_element, numbers_at, scratch, skip_value,
                                       space, string_end, unmanaged, usual_key, work_arrays)
from evalengine.io.masks import PARSED_SEGMENTATION, SEGMENTATION

ANNOTATION = pl.Struct(
    {
        "id": pl.Int64,
        "image_id": pl.Int64,
        "category_id": pl.Int64,
        "bbox": pl.List(pl.Float64),
        "area": pl.Float64,
        "iscrowd": pl.Int64,
        "ignore": pl.Int64,
        "difficult": pl.Int64,
        "segmentation": SEGMENTATION,
        **schema.GT_KEYPOINTS,
    }
)
_SCALAR_TYPES = {bool: pl.Boolean, int: pl.Int64, float: pl.Float64, str: pl.String}


def extra_annotation_fields(path: Path, span: tuple) -> dict:
    """Scalar annotation fields beyond COCO's (e.g. ``occluded``, ``truncated``, a source tag), typed from
    the first annotations. Nested fields (``segmentation``, ``keypoints``, …) are not stored yet."""
    known = set(ANNOTATION.to_schema()) | {"segmentation", "keypoints", "num_keypoints"}
    types = {}
    try:
        sample = json.loads(list_sample(path, span))
    except ValueError:  # malformed: the reader says where
        sample = []
    for ann in sample:
        for name, value in ann.items() if isinstance(ann, dict) else ():
            if name not in known and value is not None:
                types.setdefault(name, set()).add(type(value))
    fields = {}
    for name, seen in types.items():
        if seen <= {int, float} and float in seen:
            fields[name] = pl.Float64
        elif len(seen) == 1 and next(iter(seen)) in _SCALAR_TYPES:
            fields[name] = _SCALAR_TYPES[next(iter(seen))]
    return fields


# how a key's value is read; the slot is its column among those of its kind
_INT, _FLAG, _FLOAT, _BBOX, _BOOL, _STRING, _SEGMENTATION, _REFUSE = range(8)
MIN_ANNOTATION_BYTES = 40  # {"id":1,"image_id":1,"category_id":1,"bbox":[1,1,1,1]}: smaller ones miss a field
_BBOX_KEY = 3  # the box's position among the keys (:data:`_KNOWN`): every annotation needs one


@numba.njit(cache=True, nogil=True)
def parse_annotations(buf, p, limit, key_bytes, key_starts, kinds, slots, n_int, n_float, n_bool, n_text, masks,
                      store, used, work):
    """The annotation objects of a list from ``p`` until the list ends or a ',' ends at ``limit`` or after it:
    ``(status, position, rows, ints, int_given, floats, float_given, bools, bool_given, texts, inexact, store)``,
    column by column (``texts``: the (start, end) of a string's characters, -1 for none; ``inexact``: (start, end,
    column, row) of the floats to convert), the segmentations read into ``masks``, ``store`` and ``used``
    (:func:`evalengine.io.json_segmentation.outputs`, whose row count bounds the annotations read). ``status``
    :data:`LIMIT` (``position``: after the ','), :data:`END` (at the list's ']') or :data:`FAIL`. Keys ``kinds[k]`` /
    ``slots[k]`` say how and where the value of key ``k`` goes; the box is float columns 0–3; ``work``: scratch()."""
    n = buf.shape[0]
    capacity = masks[0].shape[0]
    # (a row's flags are set as its keys are read: none given until then; an object given up on is not returned)
    ints, int_given = np.empty((n_int, capacity), np.int64), np.zeros((n_int, capacity), np.bool_)
    floats, float_given = np.empty((n_float, capacity), np.float64), np.zeros((n_float, capacity), np.bool_)
    bools, bool_given = np.empty((n_bool, capacity), np.bool_), np.zeros((n_bool, capacity), np.bool_)
    texts, inexact = np.full((n_text, capacity, 2), -1, np.int64), np.empty((capacity, 4), np.int64)  # (never grown)
    buf, key_bytes, key_starts = unmanaged(buf), unmanaged(key_bytes), unmanaged(key_starts)  # (json_values.unmanaged)
    other_starts, other_ends, found, spans = work_arrays(work)
    n_inexact, row, n_keys = 0, 0, key_starts.shape[0] - 1
    follows = np.full(n_keys + 2, -1, np.int64)  # the key seen after each key (after '{': n_keys; another: +1)
    while True:
        status = FAIL  # until the step after this object says otherwise
        p = space(buf, p, n)
        if p >= n or buf[p] != 123 or row == capacity:
            break
        p, seen, n_other, broken, previous = space(buf, p + 1, n), 0, 0, False, n_keys
        while True:
            k = follows[previous]
            length = usual_key(buf, p, n, k, seen, key_bytes, key_starts)
            if length:
                p, seen = space(buf, p + length + 2, n), seen | (1 << k)
                p = space(buf, p + 1, n) if p < n and buf[p] == 58 else -1
            else:
                k, p, seen, n_other = member(buf, p, n, key_bytes, key_starts, seen, other_starts, other_ends, n_other)
                if k >= 0:
                    follows[previous] = k
            previous = k if k >= 0 else n_keys + 1
            if p < 0:
                broken = True
                break
            kind, slot = (kinds[k], slots[k]) if k >= 0 else (-1, -1)
            is_null = kind >= 0 and kind != _BBOX and literal(buf, p, n, NULL) >= 0
            if is_null:
                p += 4
            elif kind == _INT or kind == _FLAG:
                boolean = literal(buf, p, n, TRUE) if kind == _FLAG else -1
                if boolean >= 0 or kind == _FLAG and literal(buf, p, n, FALSE) >= 0:
                    ints[slot, row], p = (1, boolean) if boolean >= 0 else (0, p + 5)
                else:
                    at = p
                    p, integer, whole, value, exact = number(buf, p, n)
                    if p >= 0 and integer and abs(whole) >= MANTISSA_DIGITS:  # 19 digits or more: as they are
                        exact, whole = whole_integer(buf, at, p)
                    if p < 0 or not exact:
                        broken = True
                        break
                    if integer:
                        ints[slot, row] = whole
                    elif value == np.floor(value) and abs(value) < 2.0**53:
                        ints[slot, row] = np.int64(value)  # pycocotools compares ids with ==: 2.0 is 2
                    else:
                        broken = True
                        break
                int_given[slot, row] = True
            elif kind == _FLOAT or kind == _BBOX:
                count = 4 if kind == _BBOX else 1
                p = numbers_at(buf, p, n, count, found, spans)
                for j in range(count if p >= 0 else 0):
                    floats[slot + j, row], float_given[slot + j, row] = found[j], True
                    if spans[j, 0] >= 0:
                        if n_inexact == capacity:  # more than one an annotation on average: the exact reader reads
                            p = -1
                            break
                        inexact[n_inexact, 0], inexact[n_inexact, 1] = spans[j, 0], spans[j, 1]
                        inexact[n_inexact, 2], inexact[n_inexact, 3] = slot + j, row
                        n_inexact += 1
            elif kind == _BOOL:
                boolean = literal(buf, p, n, TRUE)
                bools[slot, row], p = boolean >= 0, boolean if boolean >= 0 else literal(buf, p, n, FALSE)
                bool_given[slot, row] = True
            elif kind == _STRING:
                end = string_end(buf, p, n) if p < n and buf[p] == 34 else -1
                for i in range(p + 1, end - 1):
                    end = -1 if buf[i] == 92 else end  # an escape: Python's json decodes it
                texts[slot, row, 0], texts[slot, row, 1], p = p + 1, end - 1, end
            elif kind == _SEGMENTATION:
                p, store = read_segmentation(buf, p, n, row, masks, store, used)
            elif kind == _REFUSE:
                p = -1
            else:
                p = skip_value(buf, p, n, TRUE, FALSE, NULL)
            if p < 0:
                broken = True
                break
            p = space(buf, p, n)
            if p < n and buf[p] == 44:
                p = space(buf, p + 1, n)
                continue
            if p < n and buf[p] == 125 and seen & 1 << _BBOX_KEY:
                break
            broken = True
            break
        if broken:
            break
        end_row(row, masks, used)
        row += 1
        status, p = next_element(buf, p + 1, n, limit)
        if status == NEXT:
            continue
        if status == MORE:  # the whole text ends inside the list
            status = FAIL
        break
    return (status, p, row, ints[:, :row], int_given[:, :row], floats[:, :row], float_given[:, :row],
            bools[:, :row], bool_given[:, :row], texts[:, :row], inexact[:n_inexact], store)


_KNOWN = {"id": (_INT, 0), "image_id": (_INT, 1), "category_id": (_INT, 2), "bbox": (_BBOX, 0),
          "area": (_FLOAT, 4), "iscrowd": (_FLAG, 3), "ignore": (_FLAG, 4), "difficult": (_FLAG, 5),
          "segmentation": (_SEGMENTATION, 0), "keypoints": (_REFUSE, 0), "num_keypoints": (_REFUSE, 0)}
_KIND_OF = {pl.Int64: _INT, pl.Float64: _FLOAT, pl.Boolean: _BOOL, pl.String: _STRING}


class _Table:
    """The kernel's key table for the annotation fields ``extra`` beside COCO's, and the frame of its columns."""

    def __init__(self, extra: dict):
        keys = {**_KNOWN}
        counts = {_INT: 6, _FLOAT: 5, _BOOL: 0, _STRING: 0}
        self.columns = {kind: [] for kind in counts}
        for name, dtype in extra.items():
            kind = _KIND_OF[dtype]
            keys[name] = (kind, counts[kind])
            self.columns[kind].append(name)
            counts[kind] += 1
        self.counts = counts
        names = [name.encode() for name in keys]
        self.key_bytes = np.frombuffer(b"".join(names), np.uint8)
        self.key_starts = np.cumsum([0] + [len(k) for k in names]).astype(np.int64)
        self.kinds = np.array([kind for kind, _ in keys.values()], np.int64)
        self.slots = np.array([slot for _, slot in keys.values()], np.int64)
        self.extra = extra

    def parse(self, buf: np.ndarray, p: int, limit: int) -> tuple:
        """:func:`parse_annotations` from ``p``, and its segmentations' outputs: ``(*parsed, (masks, store,
        used))``."""
        masks, store, used = outputs((min(limit, len(buf)) - p) // MIN_ANNOTATION_BYTES + 16)
        *parsed, store = parse_annotations(buf, p, limit, self.key_bytes, self.key_starts, self.kinds, self.slots,
                                           self.counts[_INT], self.counts[_FLOAT], self.counts[_BOOL],
                                           self.counts[_STRING], masks, store, used, scratch())
        return (*parsed, (masks, store, used))

    def resolve(self, buf: np.ndarray, pieces: list) -> tuple | None:
        """What of the parsed ``pieces`` needs the file's bytes: their inexact floats correctly rounded in place, the
        segmentation column and the string columns; None where a number overflows. After it, :meth:`frame` needs
        only the pieces (the bytes can go)."""
        for piece in pieces:
            inexact = piece[10]
            if len(inexact):
                converted = correctly_rounded(buf, inexact[:, 0], inexact[:, 1])
                if converted is None:
                    return None
                piece[5][inexact[:, 2], inexact[:, 3]] = converted
        segmentation = _segmentations(buf, pieces)
        if segmentation is None:
            return None
        texts = [piece[9] for piece in pieces]
        rows = sum(piece[2] for piece in pieces)
        strings = {}
        for k, name in enumerate(self.columns[_STRING]):
            starts, ends = (np.concatenate([text[k, :, j] for text in texts]) for j in (0, 1))
            strings[name] = (pl.from_arrow(_strings(buf, starts, ends)) if (starts >= 0).any()
                             else pl.repeat(None, rows, dtype=pl.String, eager=True))
        for piece in pieces:
            piece[9] = piece[10] = piece[11] = None  # (the segmentations' outputs: up to 17 bytes a row)
        return segmentation, strings

    def frame(self, pieces: list, segmentation: pl.Series, strings: dict) -> tuple:
        """The columns of the parsed ``pieces`` (lists, emptied as their columns are built: the peak is the pieces
        and the columns, no whole copy) as the exact reader's frame without its box, and the box (``x, y, w, h``:
        what :func:`evalengine.io.validate.split_bbox` makes of it)."""
        rows = len(segmentation)
        columns, box = {"segmentation": segmentation, **strings}, {}
        for names, at, dtype in (
                (["id", "image_id", "category_id", "iscrowd", "ignore", "difficult", *self.columns[_INT]], 3, pl.Int64),
                ([*schema.BOX, "area", *self.columns[_FLOAT]], 5, pl.Float64),
                (self.columns[_BOOL], 7, pl.Boolean)):
            for k, name in enumerate(names):
                out = box if at == 5 and k < len(schema.BOX) else columns
                out[name] = _column(np.concatenate([piece[at][k] for piece in pieces]),
                                    np.concatenate([piece[at + 1][k] for piece in pieces]), dtype)
            for piece in pieces:
                piece[at] = piece[at + 1] = None
        columns.update({name: pl.repeat(None, rows, dtype=dtype, eager=True)
                        for name, dtype in schema.GT_KEYPOINTS.items()})
        order = [c for c in ANNOTATION.to_schema() if c != "bbox"] + list(self.extra)
        return pl.DataFrame({name: columns[name].alias(name) for name in order}), pl.DataFrame(box)


def _segmentations(buf: np.ndarray, pieces: list) -> pl.Series | None:
    """The pieces' segmentations as one column of :data:`evalengine.io.masks.PARSED_SEGMENTATION` (null for none);
    None where a coordinate is not finite."""
    if not any(piece[11][0][0][:piece[2]].any() for piece in pieces):  # no mask at all (boxes only)
        return pl.repeat(None, sum(piece[2] for piece in pieces), dtype=PARSED_SEGMENTATION, eager=True)
    parts = []
    for piece in pieces:
        masks, store, used = piece[11]
        columns = parsed(buf, piece[2], masks, store, used)
        if columns is None:
            return None
        given = pl.Series(masks[0][:piece[2]] != 0)
        parts.append(pl.DataFrame(columns).select(pl.when(given).then(pl.struct(pl.all())).alias("segmentation")))
    return pl.concat(parts).to_series()


def _column(values: np.ndarray, given: np.ndarray, dtype) -> pl.Series:
    if given.all():
        return pl.Series(values, dtype=dtype)
    if not given.any():
        return pl.repeat(None, len(given), dtype=dtype, eager=True)
    return pl.from_arrow(arrow_array(values, given)).cast(dtype)


def _strings(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The texts ``buf[starts:ends]`` as a string array, a negative start giving a null."""
    given = starts >= 0
    lengths = np.where(given, ends - starts, 0)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = gather(buf, starts[given], lengths[given], int(offsets[-1]))
    validity = None if given.all() else pa.py_buffer(np.packbits(given, bitorder="little"))
    return pa.LargeStringArray.from_buffers(len(lengths), pa.py_buffer(offsets), pa.py_buffer(data), validity)


_PIECE_BYTES = 2**20  # an annotation list is cut in pieces of at least this size, one per core


def _parse_list(table: _Table, data: bytes, buf: np.ndarray, p: int) -> tuple | None:
    """``(pieces, resolved, end)``: the annotation list at ``p`` (its '[') parsed in pieces on every core, what of
    them needs the bytes (:meth:`_Table.resolve`), and the position after its ']'; None where the kernel gives up.
    Pieces are cut after a '},' before a '{'; one is kept when the one before ended there (a cut between two
    annotations), else the rest is one."""
    n = len(buf)
    if p >= n or buf[p] != 91:
        return None
    p = space(buf, p + 1, n)
    if p < n and buf[p] == 93:
        kept = [list(table.parse(buf, p, n + 1))]
        resolved = table.resolve(buf, kept)
        return None if resolved is None else (kept, resolved, p + 1)
    workers = min(os.cpu_count() or 1, max((n - p) // _PIECE_BYTES, 1))
    cuts = [p]
    for k in range(1, workers):
        at = p + (n - p) * k // workers
        while (at := data.find(b"},", at)) >= 0:
            after = space(buf, at + 2, n)
            if after < n and buf[after] == 123:
                break
            at += 2
        if at < 0:
            break
        cuts.append(at + 2)
    limits = cuts[1:] + [n + 1]
    with ThreadPoolExecutor(max_workers=len(cuts)) as pool:
        pieces = list(pool.map(lambda k: table.parse(buf, cuts[k], limits[k]), range(len(cuts))))
    kept = [list(piece) for piece in kept_pieces(pieces, cuts, lambda at: table.parse(buf, at, n + 1))]
    del pieces  # (those not kept)
    if kept[-1][0] != END:
        return None
    resolved = table.resolve(buf, kept)
    return None if resolved is None else (kept, resolved, kept[-1][1] + 1)


_SAMPLE_BYTES = 4 * 2**20  # what :func:`extra_annotation_fields` reads at most (:func:`list_sample`'s bound)


def annotation_columns(path: Path) -> tuple | None:
    """``(spans, annotations, box)``: the byte span of each value of the file's top-level object (as
    :func:`evalengine.io.json_scan.top_level_values` gives them), its annotations as the exact reader's frame but for
    the box, and the box as :func:`evalengine.io.validate.split_bbox` splits it; None where the kernel gives up (the
    exact reader reads the file)."""
    data = path.read_bytes()
    buf, n = np.frombuffer(data, np.uint8), len(data)
    p = space(buf, 0, n)
    if p >= n or buf[p] != 123:
        return None
    spans, pieces, p = {}, None, space(buf, p + 1, n)
    while True:
        end = string_end(buf, p, n) if p < n and buf[p] == 34 else -1
        if end < 0 or b"\\" in data[p:end]:
            return None
        key, p = data[p + 1:end - 1].decode(), space(buf, end, n)
        if key in spans or p >= n or buf[p] != 58:
            return None
        start, p = p + 1, space(buf, p + 1, n)
        if key == "annotations":
            sample_end = value_end(buf[:p + _SAMPLE_BYTES + 1], p)
            table = _Table(extra_annotation_fields(path, (p, sample_end if sample_end >= 0 else n)))
            parsed = _parse_list(table, data, buf, p)
            if parsed is None:
                return None
            pieces, resolved, p = parsed
        else:
            p = value_end(buf, p)
        p = space(buf, p, n) if p >= 0 else n
        if p >= n:
            return None
        spans[key] = (start, p)
        if buf[p] == 125:
            break
        if buf[p] != 44:
            return None
        p = space(buf, p + 1, n)
    if space(buf, p + 1, n) != n or pieces is None:
        return None
    del data, buf  # the file's bytes go before the columns are built
    return spans, *table.frame(pieces, *resolved)
