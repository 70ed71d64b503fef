"""Optimal LRP under the VOC protocol against the official TPAMI'21 arithmetic applied to an independent
transcription of voc_eval's ranking (its stable order, TP/FP per detection and the max-IoU ``ovmax``): ``N_TP −
Σ IoU`` as the localisation total, the first minimal rank, the threshold the score there; the tie-inclusive
``score`` search; difficult objects neither TP nor FP (spec-detection §2.5, VOC version)."""

import numpy as np
import polars as pl
import pytest

from evalengine.api import VocProtocol
from evalengine.io.voc import iter_devkit_results, read_voc_annotations
from evalengine.match.voc import match_shard
from evalengine.metrics.lrp import optimal_lrp
from tests.match.test_voc_differential import parse_rec, random_dataset, voc_outcomes
from tests.voc_files import write_annotations, write_results


def reference(scores, tp, fp, iou, npos, tau, ties_whole):
    """(oLRP, loc, fp, fn, threshold) as the official accumulate computes them (``ties_whole``: only at the end of
    a run of equal scores)."""
    if npos == 0:
        return None
    if tp.sum() == 0:
        return 1.0, None, None, 1.0, None
    tp_num, fp_num = np.cumsum(tp), np.cumsum(fp)
    fn_num = npos - tp_num
    total_loc = tp_num - np.cumsum(iou * tp)
    lrps = (total_loc / (1 - tau) + fp_num + fn_num) / (tp_num + fp_num + fn_num)
    if ties_whole:
        lrps[:-1][scores[1:] == scores[:-1]] = np.inf
    i = int(np.argmin(lrps))
    with np.errstate(invalid="ignore", divide="ignore"):
        loc, fp_c = total_loc[i] / tp_num[i], fp_num[i] / (tp_num[i] + fp_num[i])
    return (lrps[i], None if np.isnan(loc) else loc, None if np.isnan(fp_c) else fp_c, fn_num[i] / npos, scores[i])


@pytest.mark.parametrize("seed", range(60))
def test_voc_lrp_equals_the_official_arithmetic_on_voc_eval(tmp_path, seed):
    rng = np.random.default_rng(1000 + seed)
    images, detections = random_dataset(rng)
    annotations = write_annotations(tmp_path / "Annotations", images)
    dataset = read_voc_annotations(annotations)
    dt = pl.concat(list(iter_devkit_results(write_results(tmp_path / "results", detections), dataset)))
    recs = {path.stem: parse_rec(path) for path in sorted(annotations.glob("*.xml"))}
    protocol = VocProtocol(iou_thresholds=(0.5,), strict=bool(seed % 2), use_difficult=seed % 5 == 4)
    category_ids = dataset.categories.get_column("category_id").to_list()
    dt_matches, gt_matches = match_shard(dataset.gt, dt, category_ids, protocol)
    names = dict(dataset.categories.select("category_id", "name").iter_rows())
    for search in ("rank", "score"):
        table = optimal_lrp(dt_matches.lazy(), gt_matches.lazy(), category_ids, protocol, search=search).table
        for row in table.iter_rows(named=True):
            scores, tp, fp, iou, npos = voc_outcomes(recs, detections.get(names[row["category_id"]], []),
                                                     names[row["category_id"]], 0.5, protocol.strict,
                                                     protocol.use_difficult)
            expected = reference(scores, tp, fp, iou, npos, 0.5, search == "score")
            assert row["n_gt"] == npos
            if expected is None:
                assert row["olrp"] is None
                continue
            got = (row["olrp"], row["loc"], row["fp"], row["fn"], row["threshold"])
            for a, b in zip(got, expected):
                assert (a is None) == (b is None) and (a is None or abs(a - b) <= 1e-12), (search, names, got, expected)
