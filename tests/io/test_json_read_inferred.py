"""Images and categories (``infer=True``) typed from their first objects: the frame equals Polars' full inference
whatever comes after them (a key the first objects lack, a null, a value of another type, a nested object, a spaced
key, a '":' inside a string)."""

import io

import polars as pl
import pytest

from evalengine.io import json_read

FIRST = [f'{{"id":{i},"width":640,"height":480,"file_name":"{i}.jpg"}}' for i in range(1, json_read._TYPED_FROM + 5)]
LATER = ['{"id":9001,"width":640,"height":480,"file_name":"x.jpg","license":3}',
         '{"id":9001,"width":null,"height":480,"file_name":"x.jpg"}',
         '{"id":9001,"width":640.5,"height":480,"file_name":"x.jpg"}',
         '{"id":9001,"width":640,"height":480,"file_name":"x.jpg","meta":{"a":1}}',
         '{"id":9001,"width":640,"height":480,"file_name":"x.jpg","new" :1}',
         '{"id":9001,"width":640,"height":480,"file_name":"a\\":b"}',
         '{"id":9001,"width":640,"height":480,"file_name":7}',
         '{"id":9001,"width":640,"height":480,"file_name":"x.jpg"}']


@pytest.mark.parametrize("later", LATER)
def test_the_same_frame_as_full_inference(later):
    lines = "\n".join(FIRST + [later]).encode()
    expected = pl.read_ndjson(io.BytesIO(lines), infer_schema_length=None)
    got = json_read._inferred(lines)
    assert got.schema == expected.schema and got.equals(expected)
    assert got.row(-1) == expected.row(-1)
