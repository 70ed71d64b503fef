"""The protocol contract: what every matching protocol declares, so that one planner
(:func:`evalengine.engine.planner.match`) runs any of them.

A protocol is a frozen dataclass of parameters with

- ``name`` (class attribute): its family, the prefix of its match tables' partition ``protocol=<key>``;
- ``sides`` (class attribute): the tables one shard task writes (``matches/protocol=P/run=R/<side>/shard=k``);
- ``table_version`` (class attribute): the version of those tables' columns;
- ``tie_order`` (class attribute, detection protocols): the ``dt`` match columns that order the detections of a
  category of equal score in the accumulation (the reference's sort); the score, descending, comes first;
- :meth:`match_params`: the parameters the matching depends on; they are hashed into :meth:`match_key` and
  recorded in ``protocol.json``, and a stored table is reused when they are equal;
- :meth:`shard_inputs`: for a stored run, the files each shard task reads and the small context all share;
- :meth:`input_columns`: the columns read of those tables (all unless it says otherwise, but for the masks and
  keypoints of :data:`evalengine.schema.SHAPES`, read only when named);
- :meth:`match_shard`: one shard's tables in, one frame per side out (the numba kernels live beside it);
- ``partner_columns`` (class attribute): ``dt`` columns that only some readers need (AP does not): a table held in
  memory for AP alone is matched without them (``context["partners"]`` False), see
  :func:`evalengine.engine.planner.match`.
"""

import hashlib
import json
import math
import numbers
from dataclasses import asdict
from typing import ClassVar

import numpy as np
import polars as pl

from evalengine.errors import ProtocolError
from evalengine.store.paths import PROTOCOL_FILE


class Protocol:
    """Base of the matching protocols (subclasses are frozen dataclasses)."""

    name: ClassVar[str]
    sides: ClassVar[tuple]
    # the key of a protocol with default parameters is its name, unless every key carries the hash
    always_hashed: ClassVar[bool] = False
    # raised when the columns of the protocol's match tables change: a stored table of another version is re-matched
    table_version: ClassVar[int] = 1
    tie_order: ClassVar[tuple] = ()
    # matched in a store held in memory (its shard_inputs reads through the layout: evalengine.store.memory)
    in_memory: ClassVar[bool] = False
    # dt columns left out of a table held in memory for AP alone (match_shard reads context["partners"])
    partner_columns: ClassVar[tuple] = ()

    def match_params(self) -> dict:
        return {**asdict(self), "name": self.name}

    def description(self) -> dict:
        """What ``protocol.json`` records beside a match table."""
        return {"match": self.match_params()}

    def match_key(self) -> str:
        """Partition name of this protocol's match table: ``<name>`` for the defaults, else ``<name>-<hash>``."""
        params = self.match_params()
        if not self.always_hashed and params == type(self)().match_params():
            return self.name
        return f"{self.name}-{hashlib.sha1(json.dumps(params, sort_keys=True).encode()).hexdigest()[:10]}"

    def shard_inputs(self, layout, run: str) -> tuple:
        """``(inputs, context)``: per shard a ``{table name: file}`` dict, and what every shard task shares."""
        raise NotImplementedError

    def input_columns(self) -> dict:
        """``{table name: columns}`` for the tables of :meth:`shard_inputs` read in part (wide match tables)."""
        return {}

    def match_shard(self, tables: dict, context: dict) -> dict:
        """``{side: frame}`` for one shard, from the tables :meth:`shard_inputs` named (read as frames)."""
        raise NotImplementedError

    def required(self) -> tuple:
        """The protocols whose match tables this one reads besides the store's own tables (:func:`required_tables`)."""
        return ()


def box_keyed(params: dict) -> dict:
    """``params`` without ``iou_type`` where it is ``bbox``: tables of boxes keep the keys they had before masks."""
    return {k: v for k, v in params.items() if (k, v) != ("iou_type", "bbox")}


def required_tables(layout, run: str, protocols) -> dict:
    """``{family name: match folder}`` of the tables a protocol reads besides the store's own (the pairs table, a
    COCO match table): a located error for one not matched yet."""
    folders = {}
    for protocol in protocols:
        folders[protocol.name] = layout.paths.matches_dir(protocol.match_key(), run)
        if not (folders[protocol.name] / PROTOCOL_FILE).is_file():
            raise ProtocolError(f"{layout.root}: run '{run}' has no {protocol.name} table {protocol.match_key()}; "
                                "match it first")
    return folders


def column_array(frame: pl.DataFrame, name: str, dtype="int64"):
    """A column as a NumPy array of ``dtype`` (no copy when it already is one)."""
    return frame.get_column(name).to_numpy().astype(dtype, copy=False)


def take_rows(frame: pl.DataFrame, rows: np.ndarray) -> pl.DataFrame:
    """``frame``'s rows at ``rows``: numeric columns without nulls through NumPy (a third of Polars' gather), the
    others (masks, keypoints) through Polars."""
    taken = {}
    for name, column in frame.to_dict().items():
        plain = column.dtype.is_numeric() and not column.has_nulls()
        taken[name] = pl.Series(name, column.to_numpy()[rows], column.dtype) if plain else column.gather(rows)
    return pl.DataFrame(taken)


def _values(name: str, values) -> tuple:
    try:
        return tuple(values)
    except TypeError:
        raise ProtocolError(f"{name}: expected a list, got {values!r}") from None


def real_numbers(name: str, values) -> tuple:
    """``values`` as floats; each must be a real number (not a string or a boolean) other than NaN."""
    values = _values(name, values)
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
            raise ProtocolError(f"{name}: {value!r} is not a number")
    return tuple(float(v) for v in values)


def unit_thresholds(name: str, values, zero: bool = False) -> tuple:
    """IoU thresholds: numbers in (0, 1] — a threshold of 0 would match boxes that do not overlap, one above 1 would
    match nothing — or in [0, 1] with ``zero``."""
    values = real_numbers(name, values)
    for value in values:
        if not (0.0 <= value if zero else 0.0 < value) or not value <= 1.0:
            raise ProtocolError(f"{name}: {value} is not in {'[0, 1]' if zero else '(0, 1]'}")
    return values


def increasing(name: str, values: tuple) -> tuple:
    """``values``, which must be strictly increasing (a repeat would count twice in a mean and key two rows alike)."""
    if any(b <= a for a, b in zip(values, values[1:])):
        raise ProtocolError(f"{name} must be increasing, without repeats: got {list(values)}")
    return values


def positive_integers(name: str, values) -> tuple:
    """``values`` as ints; each must be an integer (an integral float is one) of at least 1."""
    values = _values(name, values)
    for value in values:
        integral = isinstance(value, numbers.Integral) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not integral or value < 1:
            raise ProtocolError(f"{name}: positive integers are needed, got {value!r} in {list(values)}")
    return tuple(int(v) for v in values)
