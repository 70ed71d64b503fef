"""What the front doors print: the reference tools' summaries as they print them, the command's JSON payloads and
tables. Every function reads an evaluation's frames."""

from __future__ import annotations  # the proposal and LRP types: only the commands of their families load them

import json
from typing import TYPE_CHECKING

import polars as pl

from evalengine.errors import ProtocolError
from evalengine.evaluation.detection import Evaluation
from evalengine.metrics.summary import printed_layout, stat_names, summary_cap, summary_layout, summary_stats


if TYPE_CHECKING:
    from evalengine.evaluation.proposals import ProposalEvaluation
    from evalengine.metrics.lrp import OptimalLRP


def table(frame: pl.DataFrame) -> str:
    """A frame as a plain table: every row and column, no shape or dtypes."""
    with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        return str(frame)


def coco_summary(evaluation: Evaluation) -> str:
    """The summary (12 numbers; keypoints: 10) exactly as pycocotools ``summarize`` prints it; with other area ranges
    than its own, the rows of the ranges asked for (:func:`~evalengine.metrics.summary.printed_layout`)."""
    p = evaluation.protocol
    t_lo, t_hi = p.iou_thresholds[0], p.iou_thresholds[-1]
    layout = printed_layout(p)
    values = evaluation.stats() if layout is summary_layout(p) else summary_stats(evaluation.accumulate(), layout)
    lines = []
    for (_, is_ap, t, area, cap), value in zip(layout, values):
        title = "Average Precision" if is_ap else "Average Recall"
        short = "(AP)" if is_ap else "(AR)"
        iou = f"{t_lo:0.2f}:{t_hi:0.2f}" if t is None else f"{t:0.2f}"
        lines.append(f" {title:<18} {short} @[ IoU={iou:<9} | area={area:>6s} | "
                     f"maxDets={summary_cap(cap, p.max_dets):>3d} ] = {value:0.3f}")
    return "\n".join(lines)


def coco_output(evaluation: Evaluation, as_json: bool, store=None) -> str:
    """``evalengine coco`` / ``evaluate`` / ``report``: the summary (and where the store is), or one JSON object
    ``{"stats", "stat_names", "per_class": {category_id: {"ap", "ap50", "ar"}}[, "store"]}``."""
    if not as_json:
        return coco_summary(evaluation) + (f"\nstore: {store}" if store else "")
    stats = evaluation.stats()
    per_class = {str(row["category_id"]): {"ap": row["ap"], "ap50": row["ap50"], "ar": row["ar"]}
                 for row in evaluation.class_metrics().iter_rows(named=True)}
    payload = {"stats": stats, "stat_names": stat_names(evaluation.protocol), "per_class": per_class}
    if store:
        payload["store"] = str(store)
    return json.dumps(payload)


def proposal_payload(evaluation: ProposalEvaluation, iou_thresholds=(0.5, 0.7), matcher: str = "greedy",
                     aggregation: str = "instances") -> dict:
    """``evalengine proposals --json``: one entry per budget for ``mean_proposals``, exact ``ar`` and each
    threshold's recall (null where no ground truth is evaluated)."""
    per_budget = evaluation.per_budget
    rec = evaluation.recall(iou_thresholds, matcher=matcher, aggregation=aggregation)
    return {
        "protocol": evaluation.protocol.name if matcher == "greedy" else "best-overlap",
        "matcher": matcher,
        "aggregation": aggregation,
        "budgets": list(evaluation.protocol.budgets),
        "mean_proposals": per_budget(evaluation.mean_proposals(), "mean_proposals"),
        "ar": per_budget(evaluation.average_recall(matcher=matcher, aggregation=aggregation), "ar"),
        "recall": {str(float(t)): per_budget(rec.filter(pl.col("iou_threshold") == float(t)), "recall")
                   for t in iou_thresholds},
    }


def achievable_payload(evaluation: ProposalEvaluation, thresholds, measure: str = "jaccard") -> dict:
    """Pont-Tuset & Marques' achievable quality per budget (the ``achievable`` entry of the JSON; F̃b's:
    ``achievable_boundary_f``): ``mean``, ``median`` of the best ``measure`` per object, ``recall`` at measure > t
    keyed by ``str(float(t))``."""
    from evalengine.metrics.achievable import recall_name

    quality = evaluation.achievable_quality(thresholds, measure)
    return {"measure": measure, "mean": evaluation.per_budget(quality, "mean_quality"),
            "median": evaluation.per_budget(quality, "median_quality"),
            "recall": {str(float(t)): evaluation.per_budget(quality, recall_name(t)) for t in thresholds}}


def oma_payload(evaluation: ProposalEvaluation, iou_thresholds=(0.5, 0.7), lattice: str = "edges") -> dict:
    """OMA per budget for each threshold, keyed by ``str(float(t))`` (the ``oma`` entry of the JSON)."""
    oma = evaluation.oma(iou_thresholds, lattice=lattice)
    return {str(float(t)): evaluation.per_budget(oma.filter(pl.col("iou_threshold") == float(t)), "oma")
            for t in iou_thresholds}


def coco_proposal_payload(evaluation: Evaluation, mean_proposals: pl.DataFrame, iou_thresholds) -> dict:
    """``evalengine proposals --protocol coco --json`` (pycocotools with ``useCats=0``, ``maxDets`` = the budgets):
    AR@N (area all, the mean recall over the IoU thresholds), recall at each requested threshold (one of the
    protocol's), and the 12 summary numbers."""
    if len(evaluation.protocol.max_dets) < 3:
        raise ProtocolError(f"the coco protocol's 12 numbers need at least 3 budgets (pycocotools' summary reads "
                            f"maxDets[2]), got {list(evaluation.protocol.max_dets)}")
    ap = evaluation.ap_table().filter(pl.col("area_range") == "all")
    thresholds = sorted(set(ap.get_column("iou_threshold").to_list()))
    recall_at = {}
    for t in iou_thresholds:
        near = [u for u in thresholds if abs(u - float(t)) < 1e-9]
        if not near:
            raise ProtocolError(f"IoU {t} is not one of the coco protocol's thresholds {thresholds}")
        recall_at[str(float(t))] = (ap.filter(pl.col("iou_threshold") == near[0]).sort("max_dets")
                                    .get_column("recall").to_list())
    ar = ap.group_by("max_dets").agg(pl.col("recall").mean()).sort("max_dets")
    return {
        "protocol": "coco",
        "matcher": "coco",
        "aggregation": "instances",
        "budgets": ar.get_column("max_dets").to_list(),
        "mean_proposals": mean_proposals.sort("budget").get_column("mean_proposals").to_list(),
        "ar": ar.get_column("recall").to_list(),
        "recall": recall_at,
        "stats": evaluation.stats(),
        "stat_names": stat_names(evaluation.protocol),
    }


def proposal_table(payload: dict) -> str:
    """A proposal payload as the command prints it: recall and AR per budget (then OMA, then the 12 numbers)."""
    columns = {"budget": payload["budgets"], "mean #proposals": payload["mean_proposals"], "AR": payload["ar"],
               **{f"recall@{t}": values for t, values in payload["recall"].items()}}
    ar_range = "AR: mean recall over IoU .50:.05:.95" if payload["protocol"] == "coco" else "AR over IoU [0.5, 1]"
    title = (f"protocol {payload['protocol']} (matcher: {payload['matcher']}, aggregation: {payload['aggregation']}; "
             f"{ar_range})")
    text = title + "\n" + table(pl.DataFrame(columns).with_columns(pl.exclude("budget").cast(pl.Float64).round(4)))
    for key, caption, symbol in (("achievable", "best Jaccard per object, recall at J > t", "J"),
                                 ("achievable_boundary_f", "best F̃b per object, recall at F̃b > t", "F̃b")):
        if key in payload:
            quality = payload[key]
            text += (f"\nachievable quality (Pont-Tuset & Marques: {caption})\n" + table(
                pl.DataFrame({"budget": payload["budgets"], "mean #proposals": payload["mean_proposals"],
                              f"mean {symbol}": quality["mean"], f"median {symbol}": quality["median"],
                              **{f"recall@{symbol}>{t}": v for t, v in quality["recall"].items()}})
                .with_columns(pl.exclude("budget").cast(pl.Float64).round(4))))
    if "oma" in payload:
        oma = pl.DataFrame({"budget": payload["budgets"], **{f"OMA@{t}": v for t, v in payload["oma"].items()}})
        text += "\n" + table(oma.with_columns(pl.exclude("budget").cast(pl.Float64).round(4)))
    if "stats" in payload:
        text += "\n" + "\n".join(f"{name:<26} {value:.4f}" for name, value in zip(payload["stat_names"], payload["stats"]))
    return text


# the official LRP code's summary lines (kemaloksuz/LRP-Error ``summarize``, with ``lrp_size_details``)
_LRP_TITLES = (("olrp", "Optimal LRP"), ("loc", "Optimal LRP Loc"), ("fp", "Optimal LRP FP"), ("fn", "Optimal LRP FN"))


def lrp_summary(result: OptimalLRP, max_dets: int | None) -> str:
    """The oLRP summary as the official code prints it: the four means in area 'all', oLRP per other area range, then
    each component per other area range (``max_dets`` None: no cap, as VOC, printed as ``all``)."""
    first, *others = result.area_ranges
    lines = [(f, first) for f, _ in _LRP_TITLES] + [("olrp", a) for a in others] + [
        (f, a) for f, _ in _LRP_TITLES[1:] for a in others]
    titles, cap = dict(_LRP_TITLES), "all" if max_dets is None else max_dets
    return "\n".join(f"{titles[f]:<18}      @[ IoU={result.iou_threshold:<9.2f} | area={a:>6s} | maxDets={cap:>3} ] "
                     f"= {result.mean(f, a):0.3f}" for f, a in lines)


def lrp_output(result: OptimalLRP, categories: pl.DataFrame, max_dets: int | None, as_json: bool) -> str:
    """``evalengine lrp``: the per-category table (area 'all') and the official summary, or the JSON summary."""
    if as_json:
        return json.dumps(result.summary())
    first = result.area_ranges[0]
    rows = (result.table.filter((pl.col("area_range") == first) & (pl.col("n_gt") > 0))
            .join(categories.select("category_id", "name"), on="category_id", how="left", maintain_order="left")
            .select("category_id", "name", pl.col("olrp").alias("oLRP"), "loc", "fp", "fn", "threshold",
                    pl.col("n_tp").alias("TP"), pl.col("n_fp").alias("FP"), pl.col("n_fn").alias("FN"))
            .with_columns(pl.col("oLRP", "loc", "fp", "fn").round(4)))
    return f"search: {result.search}\n{table(rows)}\n{lrp_summary(result, max_dets)}"


def thresholds_output(best: pl.DataFrame, criterion: str, iou_threshold: float, as_json: bool) -> str:
    """``evalengine thresholds``: per category the optimal score threshold and its operating point."""
    fields = ("threshold", "precision", "recall", "f1", "lrp", "n_tp", "n_fp", "n_fn")
    if as_json:
        return json.dumps({"criterion": criterion, "iou_threshold": iou_threshold, "per_class": {
            str(row["category_id"]): {"name": row.get("name"), **{f: row[f] for f in fields}}
            for row in best.iter_rows(named=True)}})
    shown = best.select("category_id", *([] if "name" not in best.columns else ["name"]), *fields)
    return (f"{criterion.upper()}-optimal score thresholds (IoU {iou_threshold:.2f}, area all; a detection is kept when "
            f"score >= threshold)\n" + table(shown.with_columns(pl.col("precision", "recall", "f1", "lrp").round(4))))
