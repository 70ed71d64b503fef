"""An ad-hoc image slice through SQL (the COCO accumulation macros over the filtered match tables, as
benchmarks/bench_sql.py and the README write it) equals the Python slice (``Evaluation.slice``) to 1e-12: AP table
and summary, on random sets with crowds, ties, caps that cut detections and pooled categories."""

import numpy as np
import pytest

from evalengine.api import ingest_coco
from evalengine.match.coco import CocoProtocol
from tests.generators import random_coco
from tests.helpers import write_inputs
from tests.sql.test_ap_tables import PROTOCOLS

KEY = ["category_id", "iou_threshold", "area_range", "max_dets"]


def _sliced(key: str, kept: str) -> str:
    return f"""
WITH sliced_params AS (SELECT * FROM coco_accumulation_protocols WHERE protocol = '{key}' AND run = 'default'),
sliced_dt AS (SELECT * FROM coco_accumulation_matches WHERE protocol = '{key}' AND run = 'default' AND {kept}),
sliced_gt AS (SELECT * FROM coco_accumulation_gt_matches WHERE protocol = '{key}' AND run = 'default' AND {kept})
SELECT * FROM coco_ap(sliced_dt, sliced_gt, sliced_params)"""


@pytest.mark.parametrize("seed", range(10))
def test_sql_slice_equals_python_slice(tmp_path, seed):
    gt, dt = random_coco(100 + seed)
    store = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=2)
    ids = sorted(image["id"] for image in gt["images"])
    image_ids = [image_id for i, image_id in enumerate(ids) if i % 3 != 0]  # the first image always left out
    kept = f"image_id IN ({', '.join(map(str, image_ids))})"
    for protocol in PROTOCOLS:
        evaluation = store.evaluate(protocol).slice(image_ids=image_ids)
        want = evaluation.ap_table().sort(KEY)
        got = store.sql(_sliced(protocol.match_key(), kept)).select(*KEY, "ap", "recall").sort(KEY)
        assert got.height == want.height and got.select(KEY).equals(want.select(KEY))
        for column in ("ap", "recall"):
            np.testing.assert_allclose(got[column].to_numpy(), want[column].to_numpy(), rtol=0, atol=1e-12)
        summary = store.sql(f"""WITH sliced_params AS (SELECT * FROM coco_accumulation_protocols
                                WHERE protocol = '{protocol.match_key()}' AND run = 'default'),
                                sliced_ap AS ({_sliced(protocol.match_key(), kept)})
                                SELECT value FROM coco_summary_of(sliced_ap, sliced_params)""")
        np.testing.assert_allclose(summary["value"].to_numpy(), evaluation.stats(), rtol=0, atol=1e-12)
        assert (want["ap"] > -1).any() and len(image_ids) < len(ids)
