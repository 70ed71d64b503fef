"""Detection figures: PR curves, recall against IoU, AP by size, run differences, LRP and operating points."""

import polars as pl

from evalengine.plots.figure import pyplot


def pr_curves(precision: pl.DataFrame, category_names: dict, category_ids=None, iou_threshold: float = 0.5,
              area_range: str = "all", max_dets: int | None = None):
    """Interpolated precision against recall (pycocotools' 101 points): one curve per listed category, or
    the class mean at IoU 0.5, 0.75 and the mean over all thresholds when none are listed."""
    plt = pyplot()
    cap = max_dets if max_dets is not None else precision["max_dets"].max()
    rows = precision.filter((pl.col("area_range") == area_range) & (pl.col("max_dets") == cap)
                            & (pl.col("precision") > -1))
    fig, ax = plt.subplots(figsize=(6, 4.5))
    if category_ids:
        for k in category_ids:
            curve = rows.filter((pl.col("category_id") == k) & (pl.col("iou_threshold") == iou_threshold))
            curve = curve.sort("recall_threshold")
            ax.plot(curve["recall_threshold"], curve["precision"], label=str(category_names.get(k, k)))
        title = f"IoU {iou_threshold:.2f}"
    else:
        mean = rows.group_by("iou_threshold", "recall_threshold").agg(pl.col("precision").mean())
        for label, chosen in (("IoU 0.50", mean.filter(pl.col("iou_threshold") == 0.5)),
                              ("IoU 0.75", mean.filter(pl.col("iou_threshold") == 0.75)),
                              ("IoU .50:.95", mean.group_by("recall_threshold").agg(pl.col("precision").mean()))):
            chosen = chosen.sort("recall_threshold")
            ax.plot(chosen["recall_threshold"], chosen["precision"], label=label)
        title = "mean over classes"
    ax.set(xlabel="recall", ylabel="precision", xlim=(0, 1), ylim=(0, 1.01),
           title=f"Precision–recall, {title}, area {area_range}, {cap} detections")
    ax.legend(loc="lower left", fontsize="small")
    fig.tight_layout()
    return fig


def recall_iou(ap_tables: dict, area_range: str = "all", max_dets: int | None = None):
    """Class-mean recall at each IoU threshold (the curve whose mean is COCO's AR), one line per run.
    ``ap_tables`` maps a run name to its ``ap_table()``."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for run, table in ap_tables.items():
        cap = max_dets if max_dets is not None else table["max_dets"].max()
        curve = (table.filter((pl.col("area_range") == area_range) & (pl.col("max_dets") == cap)
                              & (pl.col("recall") > -1))
                 .group_by("iou_threshold").agg(pl.col("recall").mean()).sort("iou_threshold"))
        ax.plot(curve["iou_threshold"], curve["recall"], marker="o", label=run)
    ax.set(xlabel="IoU threshold", ylabel="recall (class mean)", ylim=(0, 1.01),
           title=f"Recall against IoU, area {area_range}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def ap_by_size(summaries: dict):
    """AP@[.50:.95] per area range (all, small, medium, large), one bar group per run.
    ``summaries`` maps a run name to its summary frame (``metric, value``)."""
    plt = pyplot()
    metrics = ["AP", "APs", "APm", "APl"]
    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.8 / max(len(summaries), 1)
    for i, (run, summary) in enumerate(summaries.items()):
        values = dict(zip(summary["metric"], summary["value"]))
        ax.bar([m + i * width for m in range(len(metrics))], [max(values[m], 0) for m in metrics], width, label=run)
    ax.set_xticks([m + width * (len(summaries) - 1) / 2 for m in range(len(metrics))], ["all", "small", "medium", "large"])
    ax.set(ylabel="AP@[.50:.95]", ylim=(0, 1), title="AP by object size")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def run_differences(comparison: pl.DataFrame, run: str, area_range: str = "all", most: int = 30):
    """Per-class AP difference of ``run`` to the baseline of a ``Store.compare`` table, the largest first."""
    plt = pyplot()
    column = f"diff_{run}"
    rows = comparison.filter((pl.col("area_range") == area_range) & pl.col(column).is_not_null())
    rows = rows.sort(pl.col(column).abs(), descending=True).head(most).sort(column)
    fig, ax = plt.subplots(figsize=(6, max(3, 0.22 * rows.height + 1)))
    ax.barh(rows["name"].cast(pl.String).fill_null("?"), rows[column],
            color=["tab:red" if d < 0 else "tab:green" for d in rows[column]])
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set(xlabel=f"AP difference ({run} − baseline), area {area_range}", title="Largest per-class changes")
    fig.tight_layout()
    return fig


def _first_categories(points: pl.DataFrame, category_ids, limit: int = 10) -> list:
    """The listed categories, or the first ``limit`` of ``points`` (as Oksuz et al.'s Fig. 2 shows ten)."""
    return list(category_ids) if category_ids else points.get_column("category_id").unique(maintain_order=True)[:limit].to_list()


def lrp_curves(points: pl.DataFrame, category_names: dict, category_ids=None):
    """LRP and its components (localisation, FP, FN) against the score threshold, one panel per category, the
    LRP-optimal threshold marked (Oksuz et al. TPAMI'21 Fig. 2); ``points`` is ``operating_points()``."""
    plt = pyplot()
    chosen = _first_categories(points, category_ids)
    columns = min(len(chosen), 5) or 1
    rows_n = -(-len(chosen) // columns) or 1
    fig, axes = plt.subplots(rows_n, columns, figsize=(3.2 * columns, 2.8 * rows_n), squeeze=False, sharey=True)
    for ax, k in zip(axes.flat, chosen):
        curve = points.filter(pl.col("category_id") == k).sort("threshold")
        for column, label in (("lrp", "LRP"), ("lrp_loc", "loc"), ("lrp_fp", "FP"), ("lrp_fn", "FN")):
            ax.plot(curve["threshold"], curve[column], label=label, lw=1.5 if column == "lrp" else 1)
        best = curve.sort("lrp", pl.col("threshold"), descending=[False, True]).row(0, named=True)
        ax.plot([best["threshold"]], [best["lrp"]], "kx", ms=8)
        ax.set(title=f"{category_names.get(k, k)} (s*={best['threshold']:.3g})", xlabel="score threshold",
               xlim=(0, 1), ylim=(0, 1.01))
    for ax in list(axes.flat)[len(chosen):]:
        ax.axis("off")
    axes.flat[0].legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    return fig


def pr_operating_points(points: pl.DataFrame, category_names: dict, category_ids=None):
    """Precision against recall at every distinct score, one curve per category, with the LRP-optimal (×) and
    F1-optimal (○) points marked; ``points`` is ``operating_points()``."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for k in _first_categories(points, category_ids, limit=5):
        curve = points.filter(pl.col("category_id") == k).sort("threshold", descending=True)
        line, = ax.plot(curve["recall"], curve["precision"], label=str(category_names.get(k, k)))
        by_lrp = curve.sort("lrp", pl.col("threshold"), descending=[False, True]).row(0, named=True)
        by_f1 = curve.sort("f1", pl.col("threshold"), descending=[True, True]).row(0, named=True)
        ax.plot([by_lrp["recall"]], [by_lrp["precision"]], "x", color=line.get_color(), ms=9)
        ax.plot([by_f1["recall"]], [by_f1["precision"]], "o", color=line.get_color(), mfc="none", ms=8)
    ax.set(xlabel="recall", ylabel="precision", xlim=(0, 1), ylim=(0, 1.01),
           title="Precision–recall; × LRP-optimal, ○ F1-optimal")
    ax.legend(loc="lower left", fontsize="small")
    fig.tight_layout()
    return fig
