"""The ranked outcomes (VOC AP, LRP, operating points) read in several category batches — the match table split in one
pass and spilled (store.spill) — equal one batch bit for bit, on random sharded stores, image slices included, and the
spill is removed."""

import tempfile

import numpy as np
import pytest

from evalengine.api import CocoProtocol, VocProtocol, ingest_coco
from evalengine.evaluation.voc import VocEvaluation
from evalengine.metrics import voc
from evalengine.metrics.ap import category_batches
from evalengine.metrics.outcomes import outcome_batches, ranked_batches
from tests.generators import random_coco
from tests.helpers import write_inputs

SEEDS = range(16)


def _arrays(dt, gt, category_ids, protocol, image_ids, batch_rows) -> dict:
    """Every batch's arrays, concatenated over the batches, of :func:`outcome_batches` (per category, its rows in
    table order), :func:`ranked_batches` and (VOC) the accumulation."""
    out = {}
    for name, batches in (("outcome", outcome_batches), ("ranked", ranked_batches)):
        for b in batches(dt, gt, category_ids, protocol, 0, None, image_ids, batch_rows):
            fields = {k: v for k, v in vars(b).items() if isinstance(v, np.ndarray)}
            if name == "outcome":  # a batch's rows by category, each category's in table order
                order = np.argsort(b.cat_index, kind="stable")
                fields = {k: v[order] if k not in ("category_ids", "n_gt") else v for k, v in fields.items()}
                fields.pop("cat_index")
            else:
                fields["starts"] = b.starts[1:] - b.starts[:-1]  # rows per category
            for k, v in fields.items():
                out.setdefault(f"{name}.{k}", []).append(v)
    out = {k: np.concatenate(v) for k, v in out.items()}
    if isinstance(protocol, VocProtocol):
        for metric in voc.METRICS:
            acc = voc.accumulate(dt, gt, category_ids, protocol, metric=metric, batch_rows=batch_rows,
                                 image_ids=image_ids)
            out.update({f"{metric}.{k}": getattr(acc, k) for k in ("ap", "tp", "fp", "n_gt")})
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_batched_outcomes_are_bit_identical(seed, tmp_path, monkeypatch):
    rng = np.random.default_rng(2000 + seed)
    gt, dt = random_coco(seed)
    store = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=int(rng.integers(1, 5)))
    if seed % 2:
        protocol = VocProtocol(iou_thresholds=(0.5, 0.7))
        evaluation = VocEvaluation(store.layout, "default", protocol, store.match(protocol, "default"))
    else:
        protocol = CocoProtocol()
        evaluation = store.evaluate(protocol)
    dt_matches, gt_matches = evaluation.dt_matches(), evaluation.gt_matches()
    category_ids = np.asarray(evaluation.category_ids)
    image_ids = None
    if seed % 4 >= 2:  # an image slice
        ids = [image["id"] for image in gt["images"]]
        image_ids = sorted(rng.choice(ids, size=int(rng.integers(1, len(ids) + 1)), replace=False).tolist())
    counts = dt_matches.group_by("category_id").len().collect()
    batch_rows = int(rng.integers(1, counts.get_column("len").max() + 1)) if counts.height else 1
    if counts.height > 1:  # detections of two categories: two batches at least
        assert len(category_batches(dt_matches, category_ids, batch_rows)) > 1
    whole = _arrays(dt_matches, gt_matches, category_ids, protocol, image_ids, 10**9)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the spill goes
    batched = _arrays(dt_matches, gt_matches, category_ids, protocol, image_ids, batch_rows)
    assert whole.keys() == batched.keys()
    for name, value in whole.items():
        np.testing.assert_array_equal(batched[name], value, err_msg=f"seed {seed} {name}")
    assert list(scratch.iterdir()) == []  # the spill is gone
