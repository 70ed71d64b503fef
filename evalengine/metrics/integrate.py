"""Integration of sampled curves, the one rule every metric that integrates uses."""

import numpy as np


def trapezoid(x, y) -> float:
    """The trapezoid rule over the points ``(x[i], y[i])``, summed left to right (MATLAB's ``trapz``)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0))
