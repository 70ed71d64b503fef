"""An independent LRP reference for the tests: the official codes' arithmetic on pycocotools' own per-image matches.

Transcribed (not imported: neither runs here) from
- kemaloksuz/LRP-Error @ ec408f3 ``pycocotools/pycocotools/cocoeval.py`` (TPAMI'21, "rank"): ``evaluateImg``
  records ``dtIoUs`` (the IoU with the matched ground truth); ``accumulate`` sorts the detections of a (category,
  area range, maxDets) by score (mergesort), takes ``tps = dtm & ~dtIg`` and ``fps = ~dtm & ~dtIg`` at the first
  IoU threshold, ``total_loc = tp_num - cumsum(dtIoU * tps)``, ``lrps = (total_loc / (1 - iouThrs[0]) + fp_num +
  fn_num) / (tp_num + fp_num + fn_num)`` over every rank prefix (ignored detections included), ``argmin`` (first
  minimum), threshold = ``dtScoresSorted[argmin]``; no TP (or no detection) gives oLRP = FN = 1 and NaN loc, FP and
  threshold; a class without evalImgs or without non-ignored ground truth keeps -1. ``summarize`` drops NaN, then
  averages the entries > -1 (-1 if none is left).
- cancam/LRP @ d7be1fd ``cocoLRPapi-master/PythonAPI/pycocotools/cocoevalLRP.py`` (ECCV'18, "grid"): for each
  ``s`` of ``np.linspace(0, 1, 101)``, ``thrind = sum(score >= s)``, the LRP through ``l = max(omega + nhat,
  npig)`` (which cancels), first minimum over ``s`` (ties to the lowest), threshold = ``index * 0.01``; components
  ``loc = sum(1 - IoU) / omega``, ``fp = nhat / (omega + nhat)``, ``fn = mhat / npig`` (NaN on 0/0). The strict
  ``score > s`` is ``pascal-voc-lrp/utils/voc_eval.py``'s comparison.
- "score": the tie-inclusive reading of spec §2.6: the official arrays, the minimum taken only over the prefixes
  that end at the last detection of a score tie.

Here the matches come from PyPI pycocotools' ``COCOeval.evaluate()`` (``evalImgs``) and each matched pair's IoU from
``E.ious[(image, category)]``: rows are the score-sorted, maxDet-cut detections (as ``dtIds``), columns the ground
truth in its original order (``E._gts``), not the ignore-sorted order of ``gtIds``.
"""

import contextlib
import copy
import io
import math

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

GRID = np.linspace(0, 1, 101)
SEARCHES = ("rank", "score", "grid>=", "grid>")
MAX_DET = 100


def cocoeval(gt: dict, dt: list, iou_thresholds=None, iou_type: str = "bbox") -> COCOeval:
    """PyPI pycocotools' COCOeval (``iou_type``: the official code's ``iouType``) after ``evaluate()`` on in-memory
    inputs."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = copy.deepcopy(gt)
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(copy.deepcopy(dt)) if dt else COCO()
        ev = COCOeval(coco_gt, coco_dt, iou_type)
        if iou_thresholds is not None:
            ev.params.iouThrs = np.array(iou_thresholds, dtype=float)
        ev.evaluate()
    return ev


def dt_ious(ev: COCOeval, e: dict) -> np.ndarray:
    """The official ``dtIoUs[0]`` of one evalImg: the IoU of each detection with its partner at iouThrs[0], else 0."""
    out = np.zeros(len(e["dtIds"]))
    ious = ev.ious[e["image_id"], e["category_id"]]
    column = {g["id"]: j for j, g in enumerate(ev._gts[e["image_id"], e["category_id"]])}
    for d, gt_id in enumerate(e["dtMatches"][0]):
        if gt_id:  # a match to ground-truth id 0 is "unmatched" for the official code too (tps is 0 there)
            out[d] = ious[d, column[int(gt_id)]]
    return out


def _arrays(ev: COCOeval, k0: int, a0: int):
    """accumulate's concatenation for (category index k0, area index a0) at maxDet 100, or None (the -1 cases)."""
    p = ev.params
    n_img, n_area = len(p.imgIds), len(p.areaRng)
    evals = [ev.evalImgs[k0 * n_area * n_img + a0 * n_img + i] for i in range(n_img)]
    evals = [e for e in evals if e is not None]
    if not evals:
        return None
    scores = np.concatenate([np.asarray(e["dtScores"][0:MAX_DET], dtype=float) for e in evals])
    inds = np.argsort(-scores, kind="mergesort")
    dtm = np.concatenate([e["dtMatches"][:, 0:MAX_DET] for e in evals], axis=1)[:, inds]
    dt_ig = np.concatenate([e["dtIgnore"][:, 0:MAX_DET] for e in evals], axis=1)[:, inds]
    dt_iou = np.concatenate([dt_ious(ev, e)[0:MAX_DET] for e in evals])[inds]
    npig = np.count_nonzero(np.concatenate([e["gtIgnore"] for e in evals]) == 0)
    if npig == 0:
        return None
    tps = np.logical_and(dtm, np.logical_not(dt_ig))[0]
    fps = np.logical_and(np.logical_not(dtm), np.logical_not(dt_ig))[0]
    return scores[inds], tps, fps, dt_iou, npig


def _no_tp(npig: int) -> dict:
    return {"olrp": 1.0, "loc": math.nan, "fp": math.nan, "fn": 1.0, "threshold": math.nan,
            "n_tp": 0, "n_fp": None, "n_fn": npig}


def _ranked(scores, tps, fps, dt_iou, npig, tau, search):
    """TPAMI'21 accumulate, float for float; ``search="score"`` keeps only prefixes that end a score tie."""
    tp_num = np.cumsum(tps)
    fp_num = np.cumsum(fps)
    fn_num = npig - tp_num
    if tp_num.shape[0] == 0 or tp_num[-1] == 0:
        return _no_tp(npig)
    total_loc = tp_num - np.cumsum(np.multiply(dt_iou, tps))
    lrps = (total_loc / (1 - tau) + fp_num + fn_num) / (tp_num + fp_num + fn_num)
    if search == "rank":
        i = int(np.argmin(lrps))
    else:
        ends = np.flatnonzero(np.append(scores[1:] != scores[:-1], True))
        i = int(ends[np.argmin(lrps[ends])])
    with np.errstate(invalid="ignore"):  # 0/0 is NaN, as in the official code (a first-rank optimum without TP)
        return {"olrp": float(lrps[i]), "loc": float(total_loc[i] / tp_num[i]),
                "fp": float(fp_num[i] / (tp_num[i] + fp_num[i])), "fn": float(fn_num[i] / npig),
                "threshold": float(scores[i]), "n_tp": int(tp_num[i]), "n_fp": int(fp_num[i]),
                "n_fn": int(fn_num[i])}


def _grid(scores, tps, fps, dt_iou, npig, tau, strict):
    """ECCV'18 cocoevalLRP accumulate, float for float (``strict``: voc_eval's ``score > s``), its per-``s`` scalar
    arithmetic done elementwise over the grid."""
    overlap = np.where(dt_iou != 0, 1 - dt_iou, dt_iou) * tps.astype(int)
    thrind = np.array([np.sum(scores > s0) if strict else np.sum(scores >= s0) for s0 in GRID])
    loc_sum = {n: np.sum(overlap[:n]) for n in set(thrind.tolist())}  # NumPy's pairwise sum, as the code's np.sum
    total = np.array([loc_sum[n] for n in thrind.tolist()])
    omega = np.concatenate([[0], np.cumsum(tps)])[thrind].astype(float)
    nhat = np.concatenate([[0], np.cumsum(fps)])[thrind].astype(float)
    mhat = npig - omega
    l = np.maximum(omega + nhat, npig)
    fp_error = (1 - tau) * (nhat / l)
    fn_error = (1 - tau) * (mhat / l)
    z = (omega + mhat + nhat) / l
    lrps = ((total / l) + fp_error + fn_error) / z / (1 - tau)
    i = int(np.argmin(lrps))
    with np.errstate(invalid="ignore"):
        return {"olrp": float(lrps[i]), "loc": float(total[i] / omega[i]), "fp": float(nhat[i] / (omega[i] + nhat[i])),
                "fn": float(mhat[i] / npig), "threshold": i * 0.01, "n_tp": int(omega[i]), "n_fp": int(nhat[i]),
                "n_fn": int(mhat[i])}


def lrp_reference(ev: COCOeval, search: str = "rank") -> dict:
    """{(category_id, area label): row} for every category and area range of ``ev`` at maxDets 100 and iouThrs[0];
    row = None where the official code keeps -1, else olrp, loc, fp, fn, threshold (NaN where it has NaN), n_tp,
    n_fp, n_fn (the counts at the optimum) and n_gt."""
    p = ev.params
    tau = p.iouThrs[0]
    out = {}
    for k0, cat in enumerate(p.catIds):
        for a0, label in enumerate(p.areaRngLbl):
            arrays = _arrays(ev, k0, a0)
            if arrays is None:
                out[cat, label] = None
                continue
            if search in ("rank", "score"):
                row = _ranked(*arrays, tau, search)
            else:
                row = _grid(*arrays, tau, strict=search == "grid>")
            out[cat, label] = dict(row, n_gt=int(arrays[4]))
    return out


def _mean(values) -> float:
    """summarize: NaN dropped, then the mean of the entries > -1, or -1."""
    s = np.array([v for v in values if not math.isnan(v)])
    return float(np.mean(s[s > -1])) if (s > -1).any() else -1.0


def lrp_summary(table: dict, categories) -> dict:
    """The official summarize's numbers (oLRP, its components for 'all', oLRP per size) and the per-class values of
    area 'all' for every category with non-ignored ground truth (NaN as None)."""
    def column(label, key):
        return [-1.0 if table[c, label] is None else table[c, label][key] for c in categories]
    out = {"olrp": _mean(column("all", "olrp")), "olrp_loc": _mean(column("all", "loc")),
           "olrp_fp": _mean(column("all", "fp")), "olrp_fn": _mean(column("all", "fn"))}
    for label in ("small", "medium", "large"):
        out[f"olrp_{label}"] = _mean(column(label, "olrp"))
    out["per_class"] = {str(c): {key: None if math.isnan(table[c, "all"][key]) else table[c, "all"][key]
                                 for key in ("olrp", "loc", "fp", "fn", "threshold")}
                        for c in categories if table[c, "all"] is not None}
    return out
