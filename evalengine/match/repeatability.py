"""Repeatability matching (Hosang et al. §3, the toolbox's ``repeatability_matching.m``).

Per image: the top-N proposals of the reference run and of a perturbed run; the perturbed ones are projected
back with H⁻¹ and the reference ones forward with H (the corner rule of :mod:`evalengine.geometry.homography`);
a projected perturbed proposal whose centre falls outside the reference image, and a reference proposal whose
centre falls outside the perturbed image, are left out; the rest are matched greedily one-to-one (rows = the
reference proposals, as ``closest_candidates.m``). Images with no proposal on either side contribute nothing.
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import InputError, ProtocolError
from evalengine.geometry.boxes import corner_arrays, size_bins
from evalengine.geometry.homography import centre_inside, project_boxes
from evalengine.match.greedy_iou import greedy_by_image
from evalengine.match.protocol import Protocol, positive_integers


@dataclass(frozen=True)
class RepeatabilityProtocol(Protocol):
    """Matching of a perturbed proposal run to its ``reference`` run, with the top ``top_n`` of each."""

    reference: str = "proposals"
    top_n: int = 1000
    name: ClassVar[str] = "repeatability"
    sides: ClassVar[tuple] = ("ref",)
    always_hashed: ClassVar[bool] = True

    def __post_init__(self):
        if not isinstance(self.reference, str) or not self.reference:
            raise ProtocolError(f"reference: the name of a proposal run is needed, got {self.reference!r}")
        object.__setattr__(self, "top_n", positive_integers("top_n", [self.top_n])[0])

    def shard_inputs(self, layout, run: str) -> tuple:
        layout.check_proposal_run(run)
        layout.check_proposal_run(self.reference)
        if "perturbation" not in layout.proposal_runs[run]:
            raise ProtocolError(f"proposal run '{run}' has no homographies: add it as a perturbed run")
        paths = layout.paths
        perturbation = str(paths.perturbation(run))
        inputs = [{"gt": str(paths.gt_shard(k)), "reference": str(paths.proposal_shard(self.reference, k)),
                   "perturbed": str(paths.proposal_shard(run, k)), "perturbation": perturbation}
                  for k in range(layout.n_shards)]
        return inputs, {"source": perturbation}

    def match_shard(self, tables: dict, context: dict) -> dict:
        return {"ref": match_repeatability_shard(tables["reference"], tables["perturbed"], tables["perturbation"],
                                                 tables["gt"], self, source=context["source"])}


def _matrices(frame: pl.DataFrame) -> np.ndarray:
    return frame.get_column("homography").arr.explode().to_numpy().reshape(-1, 3, 3)


def _boxes(frame: pl.DataFrame):
    return tuple(frame.get_column(c).to_numpy() for c in ("x", "y", "w", "h"))


def match_repeatability_shard(reference: pl.DataFrame, perturbed: pl.DataFrame, perturbation: pl.DataFrame,
                              gt: pl.DataFrame, protocol: RepeatabilityProtocol, source: str) -> pl.DataFrame:
    """One shard's repeatability match table (schema :data:`evalengine.schema.REPEATABILITY_MATCHES`)."""
    top = (pl.col("rank").is_not_null()) & (pl.col("rank") <= protocol.top_n)
    perturbed = perturbed.filter(top).sort("image_id", "rank")
    missing = perturbed.join(perturbation, on="image_id", how="anti").get_column("image_id").unique()
    if missing.len():
        raise InputError(f"{source}: no homography for image_id {', '.join(map(str, missing.sort().head(5)))}")
    both = perturbed.select("image_id").unique()
    reference = (reference.filter(top).join(perturbation, on="image_id", how="inner")
                 .with_columns(pl.col("image_id").is_in(both.get_column("image_id").implode()).alias("_paired"))
                 .sort("image_id", "rank"))
    perturbed = perturbed.join(perturbation, on="image_id", how="inner").sort("image_id", "rank")

    ref_h = _matrices(reference)
    pert_h = np.linalg.inv(_matrices(perturbed)) if perturbed.height else np.zeros((0, 3, 3))
    back = project_boxes(*_boxes(perturbed), pert_h)
    keep_pert = centre_inside(*back, perturbed.get_column("ref_width").to_numpy(),
                              perturbed.get_column("ref_height").to_numpy())
    forward = project_boxes(*_boxes(reference), ref_h)
    valid = centre_inside(*forward, reference.get_column("width").to_numpy(),
                          reference.get_column("height").to_numpy()) & reference.get_column("_paired").to_numpy()

    ref_image = reference.get_column("image_id").to_numpy()
    ref_corners = corner_arrays(*_boxes(reference))
    iou = np.full(reference.height, np.nan)
    matched = np.zeros(reference.height, np.int32)
    pert_rank = perturbed.get_column("rank").to_numpy()[keep_pert]
    pert_image = perturbed.get_column("image_id").to_numpy()[keep_pert]
    if valid.any():
        got, col, _, _ = greedy_by_image(ref_image[valid], ref_corners[valid], pert_image,
                                         corner_arrays(*(v[keep_pert] for v in back)), [protocol.top_n])
        iou[valid] = got[:, 0]
        # the kernel's partner is a 1-based position among the image's kept perturbed proposals
        position = np.searchsorted(pert_image, ref_image[valid]) + col[:, 0] - 1
        matched[valid] = np.where(col[:, 0] > 0, pert_rank[np.clip(position, 0, max(pert_rank.size - 1, 0))]
                                  if pert_rank.size else 0, 0)

    gt = gt.sort("image_id", "gt_order")
    _, _, best, _ = greedy_by_image(ref_image, ref_corners, gt.get_column("image_id").to_numpy(),
                                    corner_arrays(*_boxes(gt)), [max(gt.height, 1)])
    relative = np.sqrt(reference.get_column("w").to_numpy() * reference.get_column("h").to_numpy()
                       / (reference.get_column("ref_width").to_numpy() * reference.get_column("ref_height").to_numpy()))
    return pl.DataFrame({
        "image_id": ref_image,
        "rank": reference.get_column("rank"),
        "size_bin": size_bins(relative),
        "valid": valid,
        "touches_gt": best[:, 0] >= 0.5,
        "iou": pl.Series(iou, nan_to_null=True),
        "matched_rank": pl.Series(matched).replace(0, None),
    }).cast(schema.REPEATABILITY_MATCHES)
