"""Box density figures (Borji & Iranmanesh Fig. 12 and Fig. 11's target-box map)."""

import numpy as np

from evalengine.plots.figure import pyplot


def box_density(predicted: np.ndarray, ground_truth: np.ndarray, difference: np.ndarray, title: str = ""):
    """Three panels over the unit square of normalised image coordinates (y down, as in the image): the predicted
    boxes' counts and the ground truth's on a logarithmic colour scale (empty cells blank), and the difference of
    their shares (``BoxDensity.difference()``) on a symmetric logarithmic scale over three decades (red: more
    predicted boxes than ground truth there, blue: fewer)."""
    plt = pyplot()
    from matplotlib.colors import LogNorm, SymLogNorm

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    extent = (0, 1, 1, 0)
    for ax, counts, name in zip(axes, (predicted, ground_truth), ("predicted boxes", "ground-truth boxes")):
        norm = LogNorm(vmin=1, vmax=max(int(counts.max()), 1))
        image = ax.imshow(np.ma.masked_where(counts == 0, counts), cmap="viridis", norm=norm, extent=extent,
                          interpolation="nearest")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="count (log)")
        ax.set(title=name)
    top = float(np.abs(difference).max()) or 1.0
    # three decades below the largest difference are drawn logarithmically, the rest linearly around 0
    image = axes[2].imshow(difference, cmap="RdBu_r", extent=extent, interpolation="nearest",
                           norm=SymLogNorm(linthresh=top / 1000, vmin=-top, vmax=top, base=10))
    fig.colorbar(image, ax=axes[2], fraction=0.046, pad=0.04, label="share difference (symmetric log)")
    axes[2].set(title="predicted − ground truth")
    for ax in axes:
        ax.set(xlabel="x / width", ylabel="y / height")
    if title:
        fig.suptitle(f"Box density ({title})")
    fig.tight_layout()
    return fig
