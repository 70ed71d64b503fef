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
