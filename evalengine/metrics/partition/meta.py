"""Meta-measures (Pont-Tuset & Marques §5, spec §6): how often a measure agrees with a plausible hypothesis, every
measure in its "higher is better" form.

- SIHD (swapped-image human discrimination): SEISM ``SIHD_error.m`` with 50 bins — both samples histogrammed
  (``compute_pdf.m``: MATLAB ``histc`` on the 49 left limits of ``linspace(floor(min), ceil(max), 50)``, unit-area
  PDFs by ``trapz`` over SEISM's bin centres), the threshold at the first crossing of the PDFs scanning from the
  lower-median one's median (``pdf_intersection.m``), ``SIHD = 1 − (e1 + e2)`` (not the balanced accuracy);
- SABD (state-of-the-art vs baseline): a judgment is wrong iff a method's value is below the per-image maximum over
  the baselines (ties are correct);
- SISD (swapped-image state of the art): wrong iff the method on its image is below the same method on a swapped
  image;
- the global score: the mean of the three.
"""

import math

import numpy as np
import polars as pl

from evalengine.metrics.integrate import trapezoid

SIHD_BINS = 50


def sihd(same, different, n_bins: int = SIHD_BINS) -> float:
    """SIHD of a measure from its same-image and different-image values (e.g. the human pairs)."""
    same, different = np.asarray(same, float), np.asarray(different, float)
    low = math.floor(min(same.min(), different.min()))
    high = math.ceil(max(same.max(), different.max()))
    pdf_same, centers = _pdf(same, n_bins, low, high)
    pdf_diff, _ = _pdf(different, n_bins, low, high)
    threshold = _crossing(pdf_same, pdf_diff, centers)
    e1, e2 = np.mean(same <= threshold), np.mean(different > threshold)
    if e1 + e2 > 1:  # a distance-like measure: the roles swap
        e1, e2 = np.mean(different <= threshold), np.mean(same > threshold)
    return float(1 - (e1 + e2))


def _pdf(samples, n_bins, low, high):
    """``compute_pdf.m``: histc counts on the left limits, normalised by the trapezoid area over the centres."""
    left = np.linspace(low, high, n_bins)[:-1]
    centers = left + (low + high) / n_bins / 2  # SEISM's centre offset, kept
    index = np.searchsorted(left, samples, side="right") - 1
    inside = (index >= 0) & ((index < left.size - 1) | (samples == left[-1]))  # histc drops x > the last limit
    counts = np.bincount(index[inside], minlength=left.size).astype(float)
    return counts / trapezoid(centers, counts), centers


def _median_index(pdf) -> float:
    """``compute_percentile_index.m`` at 0.5 (1-based, interpolated)."""
    half = pdf.sum() * 0.5
    accum = np.cumsum(pdf)
    i = int(np.argmax(accum >= half))
    return 1.0 if i == 0 else (i + 1) - (accum[i] - half) / (accum[i] - accum[i - 1])


def _crossing(pdf_same, pdf_diff, centers) -> float:
    """``pdf_intersection.m``: from the lower-median PDF's median bin, the first bin where it no longer exceeds the
    other; the crossing interpolated linearly between that bin's centre and the previous one."""
    m_same, m_diff = _median_index(pdf_same), _median_index(pdf_diff)
    left, right, start = (pdf_same, pdf_diff, m_same) if m_same <= m_diff else (pdf_diff, pdf_same, m_diff)
    index = math.floor(start) - 1
    while left[index] > right[index]:
        index += 1
    x1, x2, y1, y2 = right[index - 1], right[index], left[index - 1], left[index]
    return centers[index - 1] + (y1 - x1) / (x2 - x1 - y2 + y1) * (centers[index] - centers[index - 1])


def sabd(methods: pl.DataFrame, baselines: pl.DataFrame) -> float:
    """SABD from ``methods`` (``method``, ``image_id``, ``value``: each at its ODS) and ``baselines`` (``baseline``,
    ``image_id``, ``value``): the share of (method, image) judgments with the method at least the best baseline."""
    best = baselines.group_by("image_id").agg(baseline=pl.col("value").max())
    judged = methods.join(best, on="image_id")
    return 1.0 - judged.select((pl.col("value") < pl.col("baseline")).mean()).item()


def sisd(own: pl.DataFrame, swapped: pl.DataFrame) -> float:
    """SISD from ``own`` and ``swapped`` (``method``, ``image_id``, ``value``, the swapped result at the method's
    ODS parameter): the share of judgments where the own result is at least the swapped one."""
    judged = own.join(swapped, on=["method", "image_id"], suffix="_swapped")
    return 1.0 - judged.select((pl.col("value") < pl.col("value_swapped")).mean()).item()


def global_score(sihd_value: float, sabd_value: float, sisd_value: float) -> float:
    """The global score: the mean of the three meta-measures (spec §6.4)."""
    return (sihd_value + sabd_value + sisd_value) / 3
