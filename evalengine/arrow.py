"""NumPy arrays as Arrow arrays built on their buffers: ``pa.array`` of an ndarray imports pandas (~0.4 CPU s and
30 MiB of a process that has no other use for it)."""

import numpy as np
import pyarrow as pa


def _bits(flags: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(flags, bitorder="little"))


def arrow_array(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """``values``, flattened, as an Arrow array (null where not ``valid``); booleans are bit-packed as Arrow keeps
    them."""
    values = np.ascontiguousarray(values).reshape(-1)
    validity = None if valid is None else _bits(np.asarray(valid, bool).reshape(-1))
    data = _bits(values) if values.dtype == np.bool_ else pa.py_buffer(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [validity, data])


def list_lengths(array, null_length: int = 0) -> np.ndarray:
    """The lengths of a list array's rows (``null_length`` for a null row) as int64, read from its offsets:
    ``pc.fill_null`` with a Python value makes a ``pa.scalar``, which imports pandas."""
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    lengths = np.diff(numpy_view(array.offsets)).astype(np.int64)
    if array.null_count:
        lengths[~valid_flags(array)] = null_length
    return lengths


def _unpacked(bitmap: pa.Buffer, offset: int, n: int) -> np.ndarray:
    bits = np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little")
    return bits[offset:offset + n].astype(bool)


def numpy_view(array: pa.Array) -> np.ndarray:
    """A primitive Arrow array without nulls as a NumPy view of its buffer (``Array.to_numpy`` imports pandas);
    booleans, bit-packed in Arrow, as an unpacked copy."""
    if array.null_count:
        raise ValueError("an array with nulls has no NumPy view")
    if pa.types.is_boolean(array.type):
        return _unpacked(array.buffers()[1], array.offset, len(array))
    dtype = np.dtype(array.type.to_pandas_dtype())
    return np.frombuffer(array.buffers()[1], dtype, len(array), array.offset * dtype.itemsize)


def valid_flags(array: pa.Array) -> np.ndarray:
    """Whether each row of an Arrow array is not null, as booleans."""
    bitmap = array.buffers()[0]
    if bitmap is None:
        return np.ones(len(array), bool)
    return _unpacked(bitmap, array.offset, len(array))
