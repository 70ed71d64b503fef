"""Homography tables (Parquet or JSON records) are checked like every input: one row per known image, integer image
sizes of at least 1, nine finite numbers per homography; each error names the file and the image or record."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine.errors import InputError
from evalengine.io.perturbations import read_homographies

IMAGES = pl.DataFrame({"image_id": [1, 2], "width": [100, 60], "height": [80, 40]})
EYE = np.eye(3).reshape(-1).tolist()


def _records(**changes) -> list:
    records = [{"image_id": 1, "homography": EYE, "width": 100, "height": 80},
               {"image_id": 2, "homography": EYE, "width": 60, "height": 40}]
    records[1].update(changes)
    return records


def test_a_good_table_from_json_parquet_and_a_frame(tmp_path):
    (tmp_path / "h.json").write_text(json.dumps(_records(width=60.0)))
    pl.DataFrame(_records()).write_parquet(tmp_path / "h.parquet")
    tables = [read_homographies(source, IMAGES)
              for source in (tmp_path / "h.json", tmp_path / "h.parquet", pl.DataFrame(_records()))]
    assert tables[0].equals(tables[1]) and tables[1].equals(tables[2])
    assert tables[0].get_column("ref_width").to_list() == [100, 60]


@pytest.mark.parametrize("changes, message", [
    (dict(homography=EYE[:8]), "image_id 2: 'homography' must have 9 finite numbers"),
    (dict(homography=[None] + EYE[1:]), "image_id 2: 'homography' must have 9 finite numbers"),
    (dict(width=60.5), "record at position 2 (line 1, column"),
    (dict(width=0), "image_id 2: image sizes must be at least 1"),
    (dict(ref_height=-3), "image_id 2: image sizes must be at least 1"),
    (dict(image_id=1), "duplicate image id 1"),
    (dict(image_id=9), "image_id 9 not in the store's images"),
    (dict(homography="eye"), "'homography' is \"eye\", not a list of numbers"),
    (dict(height=None), "record at position 2: missing field 'height'"),
])
def test_bad_json_records(tmp_path, changes, message):
    path = tmp_path / "h.json"
    path.write_text(json.dumps(_records(**changes)))
    with pytest.raises(InputError) as error:
        read_homographies(path, IMAGES)
    assert str(error.value).startswith(f"{path}: ") and message in str(error.value)


def test_bad_parquet_tables(tmp_path):
    path = tmp_path / "h.parquet"
    pl.DataFrame(_records()).with_columns(pl.col("width").cast(pl.Float64) + 0.5).write_parquet(path)
    with pytest.raises(InputError, match=r"h.parquet: record at position 1: 'width' is 100.5, not an integer "
                                         r"\(and 1 more rows\)"):
        read_homographies(path, IMAGES)
    path.write_bytes(b"PAR1 not parquet")
    with pytest.raises(InputError, match="h.parquet: not a readable homography table"):
        read_homographies(path, IMAGES)
    with pytest.raises(InputError, match="nope.json: no such file"):
        read_homographies(tmp_path / "nope.json", IMAGES)
