"""Plans and runs the matching of a stored run, writing its match table atomically."""

import json
from pathlib import Path

import polars as pl

from evalengine.engine.runner import run_shard_tasks
from evalengine.match.coco import match_shard
from evalengine.match.protocol import CocoProtocol
from evalengine.store.layout import PART, StoreLayout, atomic_folder

PROTOCOL_FILE = "protocol.json"
MATCH_ROW_GROUP = 16_384


def _match_one_shard(gt_path: str, dt_path: str, out_dir: str, shard: int, category_ids, protocol) -> int:
    dt_matches, gt_matches = match_shard(pl.read_parquet(gt_path), pl.read_parquet(dt_path), category_ids, protocol)
    # sorted by category in small row groups, so that accumulating a batch of categories skips the rest
    dt_matches = dt_matches.sort("category_id", maintain_order=True)
    for side, frame in (("dt", dt_matches), ("gt", gt_matches)):
        folder = Path(out_dir) / side / f"shard={shard}"
        folder.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(folder / PART, row_group_size=MATCH_ROW_GROUP, compression="lz4")
    return dt_matches.height


def match_run(layout: StoreLayout, run: str, protocol: CocoProtocol, scheduler="threads", address=None,
              on_shard_done=None, workers=None) -> Path:
    """Match ``run`` under ``protocol`` unless a match table with the same parameters exists; return its folder."""
    layout.check_run(run)
    target = layout.matches_dir(protocol.match_key(), run)
    recorded = target / PROTOCOL_FILE
    if recorded.is_file() and json.loads(recorded.read_text()).get("match") == protocol.match_params():
        return target
    category_ids = pl.read_parquet(layout.table("categories"), columns=["category_id"]).get_column("category_id").to_list()
    with atomic_folder(target, overwrite=True) as tmp:
        args = [
            (str(layout.gt_shard(k)), str(layout.dt_shard(run, k)), str(tmp), k, category_ids, protocol)
            for k in range(layout.n_shards)
        ]
        run_shard_tasks(_match_one_shard, args, scheduler=scheduler, address=address, on_done=on_shard_done,
                        workers=workers)
        (tmp / PROTOCOL_FILE).write_text(json.dumps(protocol.description(), indent=2))
    return target
