"""The one planner: matches a stored run under any protocol (:class:`evalengine.match.protocol.Protocol`), one
Dask task per image shard, and writes its match table atomically, ``protocol.json`` last."""

import json

from evalengine import schema
from evalengine.engine.memory import keep_freed_memory
from evalengine.engine.runner import run_shard_tasks
from evalengine.store.commit import atomic_folder
from evalengine.store.layout import open_layout, read_stored
from evalengine.store.location import location
from evalengine.store.lock import writing
from evalengine.store.paths import PROTOCOL_FILE, shard_file

MATCH_ROW_GROUP = 16_384


def _match_shard(protocol, inputs: dict, context: dict, out_dir: str, shard: int, store: str) -> int:
    """One shard task: read the shard's tables (of ``store``), match them, write one file per side."""
    keep_freed_memory()
    columns = protocol.input_columns()
    sides = protocol.match_shard({name: read_stored(path, store, columns.get(name), exclude=schema.SHAPES)
                                  for name, path in inputs.items()}, context)
    for side, frame in sides.items():
        path = shard_file(location(out_dir) / side, shard)
        path.parent.mkdir(parents=True, exist_ok=True)
        # grouped by category in small row groups: accumulating a batch of categories skips the rest
        frame.write_parquet(str(path), row_group_size=MATCH_ROW_GROUP, compression="lz4")
    return sum(frame.height for frame in sides.values())


def _recorded(protocol) -> dict:
    """What ``protocol.json`` holds: the protocol's description and the version of its tables' columns."""
    return {**protocol.description(), "table_version": protocol.table_version}


def matched(target, protocol) -> bool:
    """Whether ``target`` holds a match table made with ``protocol``'s matching parameters, in the current columns (a
    table written by an older version is matched again)."""
    recorded = target / PROTOCOL_FILE
    if not recorded.is_file():
        return False
    description = json.loads(recorded.read_text())
    return (description.get("match") == protocol.match_params()
            and description.get("table_version", 1) == protocol.table_version)


def match(layout, run: str, protocol, scheduler: str = "threads", address: str | None = None, on_shard_done=None,
          workers: int | None = None):
    """Match ``run`` under ``protocol`` unless a match table with the same parameters exists; return its folder.

    Matching holds the store's write lock and reads the store as it is then (a run replaced meanwhile is matched
    as it is now)."""
    target = layout.paths.matches_dir(protocol.match_key(), run)
    protocol.shard_inputs(layout, run)  # a located error for a run the store does not have
    if matched(target, protocol):
        return target
    with writing(layout.root):
        layout = open_layout(layout.root)
        inputs, context = protocol.shard_inputs(layout, run)
        if matched(target, protocol):  # matched by another process while this one waited
            return target
        with atomic_folder(target, overwrite=True) as tmp:
            run_shard_tasks(_match_shard, [(protocol, shard_inputs, context, str(tmp), k, str(layout.root))
                                           for k, shard_inputs in enumerate(inputs)],
                            scheduler=scheduler, address=address, on_done=on_shard_done, workers=workers)
            # last: on an object store it commits the table
            (tmp / PROTOCOL_FILE).write_text(json.dumps(_recorded(protocol), indent=2))
    return target
