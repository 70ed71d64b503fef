"""What every evaluation of a stored run is: the store, the run, the protocol it was matched under and the folder of
its match table (``dt`` / ``gt`` shard tables); each family's evaluation adds its metrics as queries over them."""

import json
from dataclasses import dataclass, field

import polars as pl

from evalengine.engine.planner import with_partners
from evalengine.store.commit import replace_file
from evalengine.store.layout import Shown, StoreLayout
from evalengine.store.lock import writing
from evalengine.store.paths import ACCUMULATION_FILE, PROTOCOL_FILE


@dataclass(frozen=True, repr=False)
class MatchedRun(Shown):
    layout: StoreLayout
    run: str
    protocol: object
    matches_dir: object  # pathlib.Path or RemotePath
    # what the files depend on (the temporary folder of a one-shot evaluation), kept as long as the evaluation
    keep_alive: list = field(default_factory=list, repr=False, compare=False, kw_only=True)
    _cache: dict = field(default_factory=dict, repr=False, compare=False, kw_only=True)

    def __post_init__(self):
        """A store in memory lives as long as the results over it (the tables it writes out for what reads files: a
        confusion matrix's folder)."""
        if not self.layout.persistent and all(kept is not self.layout for kept in self.keep_alive):
            self.keep_alive.append(self.layout)

    def dt_matches(self, partners: bool = True) -> pl.LazyFrame:
        """The detections' match table; with its partner columns (:data:`~evalengine.schema.PARTNER_COLUMNS`) unless
        ``partners`` is False (a reader of none of them, AP: a table held in memory is then read as it was matched)."""
        folder = with_partners(self.layout, self.run, self.protocol, self.matches_dir) if partners else self.matches_dir
        return self.layout.scan_sharded(folder / "dt")

    def gt_matches(self) -> pl.LazyFrame:
        return self.layout.scan_sharded(self.matches_dir / "gt")

    def described(self) -> str:
        """``run '<run>', <protocol> (<match key>), store …`` (:meth:`StoreLayout.described`)."""
        iou_type = getattr(self.protocol, "iou_type", None)
        kind = f"{self.protocol.name} {iou_type}" if iou_type else self.protocol.name
        return f"run '{self.run}', {kind} ({self.protocol.match_key()}), store {self.layout.described()}"

    def _keep_ap_table(self, make_table) -> None:
        """Write the AP table ``make_table()`` (a Polars frame) beside the match table (``accumulation.parquet``)
        for the SQL views that read it instead of accumulating (``ap``, ``coco_summary``:
        ``sql/39_coco_ap_tables.sql``; ``borji_stage_ap``): :meth:`_keep_table`."""
        self._keep_table(ACCUMULATION_FILE, lambda path: make_table().write_parquet(path))

    def _keep_table(self, file_name: str, write) -> None:
        """Write a table the SQL views read beside the match table (``file_name``, through ``write(path)``) once,
        under the store's write lock: an AP table (:meth:`_keep_ap_table`), COCO's curve counts
        (``sql/30_pr_curve.sql``), OpenImages' curve order (``sql/22_openimages_order.sql``). Only when this
        protocol's parameters are the ones its ``protocol.json`` records (the views accumulate with those); a match
        table made again replaces its folder, and this file with it. A store in memory or one this process cannot
        write keeps none (the views then compute it in SQL), nor one that lives only as long as this evaluation (a
        one-shot's temporary folder in ``keep_alive``: at 50k images the curve counts alone cost ~30 CPU s)."""
        if not self.layout.persistent or self.keep_alive:  # in memory, or removed with the evaluation: nothing reads it
            return
        target = self.matches_dir / file_name
        if target.exists():
            return
        try:
            with writing(self.layout.root):
                recorded = json.loads((self.matches_dir / PROTOCOL_FILE).read_text())
                described = json.loads(json.dumps(self.protocol.description()))
                if not target.exists() and {key: recorded.get(key) for key in described} == described:
                    replace_file(target, write)
        except PermissionError:
            return
