"""The invariance front door (Borji & Iranmanesh §6; :mod:`evalengine.evaluation.invariance`): the runs of one or more
stores tagged with their perturbation, as AP tables per model, perturbation, size and class, and per-object outcomes
paired across perturbations."""

import json
import warnings

import polars as pl

from evalengine.api import Store, open as open_store
from evalengine.errors import InputWarning
from evalengine.evaluation.invariance import Invariance, select_runs
from evalengine.metrics.invariance import INVARIANCE_METRICS

__all__ = ["INVARIANCE_METRICS", "Invariance", "invariance", "invariance_output"]

# the paper's two tables of each perturbation: AP at IoU .50:.95, .50, .75, and AP per size
TABLE_GROUPS = (("AP", "AP50", "AP75"), ("APs", "APm", "APl"))


def invariance(stores, perturbations=None, models=None, **schedule) -> Invariance:
    """The tagged runs of ``stores`` (a :class:`~evalengine.api.Store` or a path, or a list of them: one per dataset
    variant when a perturbation moves the ground truth) with one of ``perturbations`` and ``models`` (None: all; an
    unknown one is an error naming the known ones). Runs without a ``perturbation`` tag are left out, with a warning
    naming them. ``schedule``: ``scheduler``, ``address``, ``workers`` (each run is matched once and kept)."""
    stores = stores if isinstance(stores, (list, tuple)) else [stores]
    layouts = [(store if isinstance(store, Store) else open_store(store)).layout for store in stores]
    runs, untagged = select_runs(layouts, perturbations, models)
    if untagged:
        warnings.warn(f"left out (no perturbation tag): {', '.join(untagged)}", InputWarning, stacklevel=2)
    return Invariance(tuple(runs), tuple(untagged), schedule)


def invariance_output(result: Invariance, as_json: bool = False, baseline: str | None = None,
                      category_id: int | None = None) -> str:
    """``evalengine invariance``: the pivots of the paper's Tables 4 and 6 (rows models; columns perturbation ×
    AP, AP50, AP75, then × APs, APm, APl; a perturbed proposal run's repeatability as a third), for the class mean or
    one class, and with a ``baseline`` the objects lost and gained against it; or one JSON object
    ``{"metrics": [rows of the long table], "untagged": [...], "object_changes": [...]}``."""
    changes = None if baseline is None else result.object_changes(baseline)
    if as_json:
        payload = {"metrics": result.metrics().to_dicts(), "untagged": list(result.untagged)}
        if changes is not None:
            payload["object_changes"] = changes.to_dicts()
        return json.dumps(payload)
    scope = "class mean" if category_id is None else f"category {category_id}"
    groups = [*TABLE_GROUPS, ("repeatability",)] if any(run.kind == "proposals" for run in result.runs) \
        else TABLE_GROUPS
    parts = []
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=400, tbl_hide_dataframe_shape=True,
                   tbl_hide_column_data_types=True, fmt_str_lengths=60):
        for metrics in groups:
            table = result.table(metrics, category_id)
            if table.width > 1:
                parts.append(f"{', '.join(metrics)} ({scope})\n{table.with_columns(pl.exclude('model').round(4))}")
        if changes is not None:
            parts.append(f"objects against '{baseline}' (IoU 0.5, regular objects paired by id)\n{changes}")
    return "\n".join(parts)
