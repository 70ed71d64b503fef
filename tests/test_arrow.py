"""``evalengine.arrow``: Arrow arrays read and built without pandas (pyarrow imports it for ``pa.scalar``,
``pa.array`` of an ndarray and ``Array.to_numpy``), and the segm command's process imports none."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from evalengine.arrow import arrow_array, list_lengths, numpy_view, valid_flags

DATA = Path(__file__).parent / "data"


def test_list_lengths_of_slices_chunks_and_nulls():
    lists = pa.array([[1.0], None, [], [2.0, 3.0, 4.0], None, [5.0, 6.0]])
    assert list_lengths(lists).tolist() == [1, 0, 0, 3, 0, 2]
    assert list_lengths(lists, -1).tolist() == [1, -1, 0, 3, -1, 2]
    assert list_lengths(lists.slice(1, 4), -1).tolist() == [-1, 0, 3, -1]
    assert list_lengths(lists.cast(pa.large_list(pa.float64())).slice(3), -1).tolist() == [3, -1, 2]
    assert list_lengths(pa.chunked_array([lists.slice(0, 2), lists.slice(2)]), -1).tolist() == [1, -1, 0, 3, -1, 2]


def test_numpy_view_and_valid_flags():
    values = arrow_array(np.arange(10, dtype=np.int32))
    view = numpy_view(values.slice(3, 4))
    assert view.dtype == np.int32 and view.tolist() == [3, 4, 5, 6]
    with_nulls = arrow_array(np.arange(12.0), np.arange(12) % 3 != 0)
    assert valid_flags(with_nulls.slice(2, 5)).tolist() == [True, False, True, True, False]
    assert valid_flags(values).all()


def test_the_segm_command_imports_no_pandas():
    """Polygon ground truth, RLE results with and without boxes (numbers that need no correct rounding: that step,
    ``json_values.correctly_rounded``, still reads its floats through ``to_numpy``)."""
    code = (
        "import contextlib, io, sys\n"
        "from evalengine.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['coco', '--gt', {str(DATA / 'fce_dataset_gt.json')!r}, '--dt', "
        f"{str(DATA / 'fce_dataset_rle_nobbox_dt.json')!r}, '--iou-type', 'segm', '--json', '--quiet']) == 0\n"
        f"    assert main(['coco', '--gt', {str(DATA / 'fce_dataset_gt.json')!r}, '--dt', "
        f"{str(DATA / 'fce_dataset_dt.json')!r}, '--iou-type', 'segm', '--json', '--quiet']) == 0\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
