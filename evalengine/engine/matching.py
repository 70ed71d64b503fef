"""Plans and runs the matching of a stored run, writing its match table atomically."""

import json

import polars as pl

from evalengine.engine.memory import keep_freed_memory
from evalengine.engine.runner import run_shard_tasks
from evalengine.errors import ProtocolError
from evalengine.match.coco import match_shard
from evalengine.match.protocol import CocoProtocol
from evalengine.match.repeatability import RepeatabilityProtocol, match_repeatability_shard
from evalengine.match.proposals import ProposalProtocol, as_detections, match_proposal_shard
from evalengine.store.layout import PART, StoreLayout, atomic_folder
from evalengine.store.location import location

PROTOCOL_FILE = "protocol.json"
MATCH_ROW_GROUP = 16_384


def _write_sides(out_dir: str, shard: int, sides: dict) -> None:
    for side, frame in sides.items():
        folder = location(out_dir) / side / f"shard={shard}"
        folder.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(str(folder / PART), row_group_size=MATCH_ROW_GROUP, compression="lz4")


def _match_one_shard(gt_path: str, dt_path: str, out_dir: str, shard: int, category_ids, protocol,
                     proposal_ordering: str | None = None) -> int:
    keep_freed_memory()
    dt = pl.read_parquet(dt_path)
    if proposal_ordering is not None:
        dt = as_detections(dt, proposal_ordering, category_ids[0])
    # grouped by category (see match.coco.prepare_gt) in small row groups: accumulating a batch of categories
    # skips the rest
    dt_matches, gt_matches = match_shard(pl.read_parquet(gt_path), dt, category_ids, protocol)
    _write_sides(out_dir, shard, {"dt": dt_matches, "gt": gt_matches})
    return dt_matches.height


def _match_one_proposal_shard(gt_path: str, proposals_path: str, out_dir: str, shard: int, protocol) -> int:
    keep_freed_memory()
    gt_matches, image_counts = match_proposal_shard(pl.read_parquet(gt_path), pl.read_parquet(proposals_path), protocol)
    _write_sides(out_dir, shard, {"gt": gt_matches, "images": image_counts})
    return gt_matches.height


def _matched(target, protocol) -> bool:
    recorded = target / PROTOCOL_FILE
    return recorded.is_file() and json.loads(recorded.read_text()).get("match") == protocol.match_params()


def _run_matching(target, task, args, protocol, **schedule):
    with atomic_folder(target, overwrite=True) as tmp:
        run_shard_tasks(task, [(a[0], a[1], str(tmp), *a[2:]) for a in args], **schedule)
        # last: on an object store it commits the table
        (tmp / PROTOCOL_FILE).write_text(json.dumps(protocol.description(), indent=2))
    return target


def match_run(layout: StoreLayout, run: str, protocol: CocoProtocol, scheduler="threads", address=None,
              on_shard_done=None, workers=None):
    """Match ``run`` under ``protocol`` unless a match table with the same parameters exists; return its folder.

    ``run`` may be a proposal run when ``protocol.use_cats`` is off: its ranked proposals are matched as
    class-agnostic detections (see :func:`evalengine.match.proposals.as_detections`)."""
    from_proposals = run in layout.proposal_runs
    if from_proposals and protocol.use_cats:
        raise ProtocolError(f"'{run}' is a proposal run: the coco protocol evaluates proposals with use_cats off")
    if not from_proposals:
        layout.check_run(run)
    target = layout.matches_dir(protocol.match_key(), run)
    if _matched(target, protocol):
        return target
    category_ids = pl.read_parquet(str(layout.table("categories")), columns=["category_id"]).get_column("category_id").to_list()
    shard_path = layout.proposal_shard if from_proposals else layout.dt_shard
    ordering = layout.proposal_runs[run]["ordering"] if from_proposals else None
    args = [(str(layout.gt_shard(k)), str(shard_path(run, k)), k, category_ids, protocol, ordering)
            for k in range(layout.n_shards)]
    return _run_matching(target, _match_one_shard, args, protocol, scheduler=scheduler, address=address,
                         on_done=on_shard_done, workers=workers)


def match_proposal_run(layout: StoreLayout, run: str, protocol: ProposalProtocol, scheduler="threads", address=None,
                       on_shard_done=None, workers=None):
    """Match proposal run ``run`` to the ground truth at every budget of ``protocol`` (reused when stored)."""
    layout.check_proposal_run(run)
    target = layout.matches_dir(protocol.match_key(), run)
    if _matched(target, protocol):
        return target
    args = [(str(layout.gt_shard(k)), str(layout.proposal_shard(run, k)), k, protocol) for k in range(layout.n_shards)]
    return _run_matching(target, _match_one_proposal_shard, args, protocol, scheduler=scheduler, address=address,
                         on_done=on_shard_done, workers=workers)


def _match_one_repeatability_shard(gt_path: str, reference_path: str, out_dir: str, shard: int, perturbed_path: str,
                                   perturbation_path: str, protocol) -> int:
    keep_freed_memory()
    table = match_repeatability_shard(pl.read_parquet(reference_path), pl.read_parquet(perturbed_path),
                                      pl.read_parquet(perturbation_path), pl.read_parquet(gt_path), protocol,
                                      source=perturbation_path)
    _write_sides(out_dir, shard, {"ref": table})
    return table.height


def match_repeatability_run(layout: StoreLayout, run: str, protocol: RepeatabilityProtocol, scheduler="threads",
                            address=None, on_shard_done=None, workers=None):
    """Match perturbed proposal run ``run`` to ``protocol.reference`` (reused when stored)."""
    layout.check_proposal_run(run)
    layout.check_proposal_run(protocol.reference)
    if "perturbation" not in layout.proposal_runs[run]:
        raise ProtocolError(f"proposal run '{run}' has no homographies: add it as a perturbed run")
    target = layout.matches_dir(protocol.match_key(), run)
    if _matched(target, protocol):
        return target
    args = [(str(layout.gt_shard(k)), str(layout.proposal_shard(protocol.reference, k)), k,
             str(layout.proposal_shard(run, k)), str(layout.perturbation(run)), protocol)
            for k in range(layout.n_shards)]
    return _run_matching(target, _match_one_repeatability_shard, args, protocol, scheduler=scheduler,
                         address=address, on_done=on_shard_done, workers=workers)
