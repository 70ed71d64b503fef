"""Boxes at an exact IoU with a target: the sampling geometry of Borji & Iranmanesh's strategy 2 (spec §3.3.3).

A sampled box has the target's size ``U × V`` and is shifted diagonally so that the two overlap on ``αU × βV``; then
``IoU = αβ / (2 − αβ)`` (Eq. 1), so ``IoU = γ`` exactly when ``αβ = 2γ / (1 + γ)`` (Eqs. 2–3, 8; ``α, β ≤ 1``). The
four families shift towards the four corners (Eqs. 4–7): up-left ``((α−1)U, (β−1)V)``, up-right ``((1−α)U, (β−1)V)``,
down-right ``((1−α)U, (1−β)V)``, down-left ``((α−1)U, (1−β)V)`` from the target's top-left corner (y grows down).
"""

import math

import polars as pl

from evalengine.errors import InputError

# each family's direction of the shift in x and y (Eqs. 4–7)
FAMILIES = {"up-left": (-1, -1), "up-right": (1, -1), "down-right": (1, 1), "down-left": (-1, 1)}


def overlap_product(gamma: float) -> float:
    """``αβ`` of a box at IoU ``γ`` with its target (Eq. 3: 2/3 at γ = 0.5)."""
    if not 0.0 < gamma <= 1.0:
        raise InputError(f"jitter: IoU γ must be in (0, 1], got {gamma!r}")
    return 2.0 * gamma / (1.0 + gamma)


def jittered_boxes(boxes: pl.DataFrame, gamma: float, alphas=None, families=tuple(FAMILIES)) -> pl.DataFrame:
    """Every box of ``boxes`` (columns ``x, y, w, h``; other columns are kept) shifted to IoU ``γ`` with itself: one
    row per box, family and ``α`` (``alpha, beta, family`` columns added; the box's ``x, y`` replaced, ``w, h`` kept).
    ``β = 2γ / (α(1 + γ))``, so each ``α`` must lie in ``[2γ / (1 + γ), 1]`` (both factors ≤ 1, Eq. 8); the default
    is the square overlap ``α = β``. ``MostConfidentBox.ipynb`` samples ``α = 0.8`` at γ = 0.5 (β = 5/6), one box per
    family."""
    product = overlap_product(gamma)
    alphas = [math.sqrt(product)] if alphas is None else list(alphas)
    for alpha in alphas:
        if not product <= alpha <= 1.0:
            raise InputError(f"jitter: α = {alpha!r} is outside [2γ/(1+γ), 1] = [{product:.6g}, 1] at γ = {gamma!r} "
                             "(β = αβ/α would exceed 1)")
    unknown = [family for family in families if family not in FAMILIES]
    if unknown:
        raise InputError(f"jitter: unknown family {unknown[0]!r} (one of {', '.join(FAMILIES)})")
    grid = pl.DataFrame({"family": [f for f in families for _ in alphas], "alpha": [a for _ in families for a in alphas],
                         "sx": [FAMILIES[f][0] for f in families for _ in alphas],
                         "sy": [FAMILIES[f][1] for f in families for _ in alphas]},
                        schema={"family": pl.String, "alpha": pl.Float64, "sx": pl.Int8, "sy": pl.Int8})
    # β = 2γ / (α(1 + γ)) in one expression: exact for more dyadic (α, β) than αβ / α
    beta = 2.0 * gamma / (pl.col("alpha") * (1.0 + gamma))
    return (boxes.join(grid, how="cross")
            .with_columns(beta.alias("beta"))
            .with_columns((pl.col("x") + pl.col("sx") * (1.0 - pl.col("alpha")) * pl.col("w")).alias("x"),
                          (pl.col("y") + pl.col("sy") * (1.0 - pl.col("beta")) * pl.col("h")).alias("y"))
            .drop("sx", "sy"))
