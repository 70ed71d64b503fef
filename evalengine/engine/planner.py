"""The one planner: matches a stored run under any protocol (:class:`evalengine.match.protocol.Protocol`), one
task per image shard, and writes its match table atomically, ``protocol.json`` last (or keeps it in a store held in
memory).

What a table keeps is decided here: a stored table has every column; one held in memory for a call that reads none
of the protocol's ``partner_columns`` (AP alone: the one-shot's summary) is matched without them, ~2/3 of its bytes,
and matched again with them when a reader asks (:func:`with_partners`)."""

import json

import polars as pl

from evalengine import schema
from evalengine.engine.memory import keep_freed_memory
from evalengine.engine.runner import run_shard_tasks
from evalengine.store.commit import atomic_folder
from evalengine.store.layout import open_layout, read_stored
from evalengine.store.location import location
from evalengine.store.lock import writing
from evalengine.store.paths import PROTOCOL_FILE, shard_file

MATCH_ROW_GROUP = 16_384


def _shard_tables(protocol, inputs: dict, read) -> dict:
    """One shard's tables as the protocol reads them: ``read(path, columns, exclude)`` of each input file; an input
    that is a frame already (the shard's slice of a table the protocol read once, e.g. LVIS' image labels) as it is."""
    columns = protocol.input_columns()
    return {name: path if isinstance(path, pl.DataFrame) else read(path, columns.get(name), exclude=schema.SHAPES)
            for name, path in inputs.items()}


def _match_shard(protocol, inputs: dict, context: dict, out_dir: str, shard: int, store: str) -> int:
    """One shard task: read the shard's tables (of ``store``), match them, write one file per side."""
    keep_freed_memory()
    sides = protocol.match_shard(_shard_tables(protocol, inputs, lambda path, columns, exclude: read_stored(
        path, store, columns, exclude=exclude)), context)
    for side, frame in sides.items():
        path = shard_file(location(out_dir) / side, shard)
        path.parent.mkdir(parents=True, exist_ok=True)
        # grouped by category in small row groups: accumulating a batch of categories skips the rest
        frame.write_parquet(str(path), row_group_size=MATCH_ROW_GROUP, compression="lz4")
    return sum(frame.height for frame in sides.values())


def _recorded(protocol, partners: bool = True) -> dict:
    """What ``protocol.json`` holds: the protocol's description and the version of its tables' columns; ``"partners":
    false`` for a table without its partner columns (only ever held in memory, so stored ones are unchanged)."""
    return {**protocol.description(), "table_version": protocol.table_version,
            **({} if partners else {"partners": False})}


def matched(target, protocol, layout=None, partners: bool = True) -> bool:
    """Whether ``target`` holds a match table made with ``protocol``'s matching parameters, in the current columns (a
    table written by an older version is matched again) and with its partner columns unless ``partners`` is False;
    of ``layout`` when it is a store in memory."""
    if layout is not None and not layout.persistent:
        description = layout.recorded(target)
    else:
        recorded = target / PROTOCOL_FILE
        description = json.loads(recorded.read_text()) if recorded.is_file() else None
    return (description is not None and description.get("match") == protocol.match_params()
            and description.get("table_version", 1) == protocol.table_version
            and (description.get("partners", True) or not partners))


def match(layout, run: str, protocol, scheduler: str = "threads", address: str | None = None, on_shard_done=None,
          workers: int | None = None, partners: bool = True):
    """Match ``run`` under ``protocol`` unless a match table with the same parameters exists; return its folder.

    ``partners=False``: the caller reads none of the protocol's ``partner_columns`` (AP alone), so a store held in
    memory keeps the table without them; a stored table always has them.
    Matching holds the store's write lock and reads the store as it is then (a run replaced meanwhile is matched
    as it is now)."""
    if not layout.persistent:
        if protocol.in_memory and scheduler in ("threads", "sync") and address is None:
            return _match_in_memory(layout, run, protocol, scheduler, on_shard_done, workers, partners)
        layout = layout.stored()  # a protocol or a scheduler that reads files
        for required in protocol.required():  # its written-out copy may predate them, or hold one without partners
            match(layout, run, required, scheduler, address, workers=workers)
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


def _match_in_memory(layout, run: str, protocol, scheduler: str, on_shard_done, workers: int | None,
                     partners: bool = True):
    """:func:`match` of a store in memory (:mod:`evalengine.store.memory`): the same shard tasks on its frames, the
    match table kept in it (its folder is the name it would have on disk), without the protocol's partner columns
    unless ``partners``."""
    target = layout.paths.matches_dir(protocol.match_key(), run)
    if matched(target, protocol, layout, partners):
        return target
    inputs, context = protocol.shard_inputs(layout, run)
    partners = partners or not protocol.partner_columns
    context = context if partners else {**context, "partners": False}

    def match_shard(files: dict) -> dict:
        return protocol.match_shard(_shard_tables(protocol, files, layout.read_file), context)

    sides = run_shard_tasks(match_shard, [(files,) for files in inputs], scheduler=scheduler, on_done=on_shard_done,
                            workers=workers)
    layout.keep_matches(target, sides, _recorded(protocol, partners))
    return target


def with_partners(layout, run: str, protocol, target):
    """``target``, the match table of ``run`` under ``protocol``, with its partner columns: a table held in memory
    without them (:func:`match` for AP alone) is matched again with them first (threads)."""
    if not layout.persistent and not matched(target, protocol, layout) and matched(target, protocol, layout, False):
        _match_in_memory(layout, run, protocol, "threads", None, None)
    return target
