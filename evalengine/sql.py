"""DuckDB over a store: the views defined by the ``.sql`` files of the top-level ``sql/`` folder.

A connection sets one DuckDB variable per table of the store's path map (:func:`evalengine.store.paths.table_globs`:
``getvariable('gt')``, ``getvariable('coco_dt')``, …, absolute globs; the store's folder, or its object-store URL
read through pyarrow's filesystem registered with DuckDB), a ``coco_summary_layout`` table (the 12-number layout
the Python summary uses, and the 10 numbers of keypoints), then runs the files in file-name order. Runs and match tables are the store as its
manifest has it (:func:`path_variables`): a list of globs, one per run the manifest lists and per finished match
table of such a run (its ``protocol.json`` written), so a reader never sees a run being added or replaced. A file
whose first line is ``-- requires: TABLE`` defines its views only once the store has that table (detections,
proposals, a protocol's match tables); any other failure is an error.

The door is read-only unless opened with ``allow_external``: the connection reads the store and nothing else
(:func:`lock`), :func:`query` runs one ``SELECT`` (or ``WITH … SELECT``) statement that writes nothing, and
:func:`image_ids` one boolean expression over the ``images`` view.
"""

import atexit
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from functools import lru_cache
from importlib import resources
from pathlib import Path

import polars as pl

from evalengine.errors import EvalEngineError, StoreError, first_line
from evalengine.metrics.summary import KEYPOINT_LAYOUT, SUMMARY_LAYOUT
from evalengine.store.layout import open_layout
from evalengine.store.location import is_remote, location
from evalengine.store.lock import reading
from evalengine.store.paths import (ACCUMULATION_FILE, CATEGORY_EDGES, CURVE_FILE, DT, IMAGE_LABELS, MATCHES, ORDER_FILE,
                                    PARTITIONS, PROPOSALS, PROTOCOL_FILE, StorePaths, table_globs)


def _visible(glob: str) -> str:
    """``glob`` with each level that starts with a wildcard kept from matching a leading dot: the store's
    temporary folders and files (``.NAME.tmp-XXXX``, ``.NAME.old-XXXX``) stay out of the views (DuckDB's and
    pathlib's ``*`` both match a leading dot; the other levels start with a name, ``run=*``)."""
    return "/".join(f"[!.]{level}" if level.startswith("*") else level for level in glob.split("/"))


# query nodes of a read-only statement: DuckDB 2 also parses ``WITH x AS (COPY … / INSERT … / DELETE …) SELECT``
# as a SELECT statement, and runs the WITH clause's write
READ_ONLY_NODES = {"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"}
OPT_IN = "--allow-external lifts this"
# the tables an evaluation keeps beside the match table (MatchedRun._keep_table), (family, kind, file): the AP tables
# of COCO (sql/39_coco_ap_tables.sql), Borji's stages (sql/19_borji_ap_tables.sql), analyze's curves
# (sql/18_analyze_ap_tables.sql) and LVIS (sql/22_lvis_ap_tables.sql); COCO's curve counts
# (sql/29_coco_curve_tables.sql); OpenImages' curve order (sql/22_openimages_order.sql). Variables
# <family>_<kind>_tables (the files) and <family>_<kind>_pending (sql/09_kept_tables.sql).
KEPT_TABLES = (("coco", "ap", ACCUMULATION_FILE), ("coco", "curve", CURVE_FILE), ("borji", "ap", ACCUMULATION_FILE),
               ("analyze", "ap", ACCUMULATION_FILE), ("openimages", "order", ORDER_FILE),
               ("lvis", "ap", ACCUMULATION_FILE))


def view_files() -> list:
    """The ``.sql`` files of the top-level ``sql/`` folder: installed as ``evalengine/views`` by a wheel,
    read in place from a source checkout (an editable install puts the project root on the path)."""
    try:
        folder = resources.files("evalengine.views")
    except ModuleNotFoundError:
        folder = Path(__file__).resolve().parent.parent / "sql"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    if not files:
        raise EvalEngineError(f"{folder}: no view definitions (*.sql) found")
    return files


def _requirement_met(variables: dict, text: str) -> bool:
    first = text.split("\n", 1)[0]
    if not first.startswith("-- requires:"):
        return True
    return bool(variables.get(first.removeprefix("-- requires:").strip()))


def path_variables(store_path) -> dict:
    """``{table: absolute glob, or list of globs}``, the DuckDB variables the views read (set them with
    ``SET VARIABLE`` to use the ``.sql`` files in a session of your own): the single tables and the ground truth as
    globs; detections, proposals and match tables as one glob per run of the manifest and per finished match table
    of such a run (empty lists when there is none).

    The protocol families and their sides are read from the store's objects (``matches/protocol=NAME[-hash]/run=R/
    SIDE/shard=*/*.parquet`` and ``protocol.json``), not from the protocol classes: a query imports no matching code.
    The variables of the families the store lacks are left unset, and a file that requires one is not run."""
    layout = open_layout(store_path)
    partition_runs = layout.manifest.get("partition_runs", {})
    runs = set(layout.runs) | set(layout.proposal_runs) | set(partition_runs)
    families = {}  # family: {finished match table folder: its sides}
    for part in layout.root.glob(f"{MATCHES}/protocol=*/run=*/*/shard=*/*.parquet"):  # objects: folders or not
        side = part.parent.parent
        if side.parent.name[4:] in runs and not side.name.startswith("."):
            family = side.parent.parent.name.removeprefix("protocol=").split("-", 1)[0]
            families.setdefault(family, {}).setdefault(str(side.parent), set()).add(side.name)
    for recorded in layout.root.glob(f"{MATCHES}/protocol=*/run=*/{PROTOCOL_FILE}"):  # a table without sides
        if recorded.parent.name[4:] in runs:
            family = recorded.parent.parent.name.removeprefix("protocol=").split("-", 1)[0]
            families.setdefault(family, {}).setdefault(str(recorded.parent), set())
    globs = table_globs({family: sorted(set().union(*tables.values())) for family, tables in families.items()})
    variables = {name: f"{layout.root}/{_visible(glob)}" for name, glob in globs.items()}
    for table, table_runs, folder in ((DT, layout.runs, layout.paths.dt),
                                      (PROPOSALS, layout.proposal_runs, layout.paths.proposals),
                                      (PARTITIONS, partition_runs, layout.paths.partitions)):
        variables[table] = [_within(folder(run), variables[table]) for run in sorted(table_runs)]
    for table in (IMAGE_LABELS, CATEGORY_EDGES):  # OpenImages stores only
        variables[table] = [variables[table]] if (layout.root / table).exists() else []
    for family, kind, _ in KEPT_TABLES:  # the stored tables; 'protocol/run' of the others
        variables[f"{family}_{kind}_tables"], variables[f"{family}_{kind}_pending"] = [], []
    for family, tables in families.items():
        finished = sorted(folder for folder in tables if location(f"{folder}/{PROTOCOL_FILE}").exists())
        for kind, file_name in ((kind, file_name) for kept, kind, file_name in KEPT_TABLES if kept == family):
            stored = {folder: location(f"{folder}/{file_name}").exists() for folder in finished}
            variables[f"{family}_{kind}_tables"] = [f"{folder}/{file_name}" for folder in finished if stored[folder]]
            variables[f"{family}_{kind}_pending"] = [
                "/".join(level[level.index("=") + 1:] for level in folder.split("/")[-2:])
                for folder in finished if not stored[folder]]
        variables[f"{family}_protocols"] = [f"{folder}/{PROTOCOL_FILE}" for folder in finished]
        for side in set().union(*tables.values()):
            name = f"{family}_{side}"
            variables[name] = [_within(folder, variables[name]) for folder in finished if side in tables[folder]]
    return variables


def _within(folder, glob: str) -> str:
    """The part of ``glob`` below its ``run=*`` level, under one run's ``folder``."""
    return f"{folder}/{glob.partition('/run=*/')[2]}"


def _quoted(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def _value(value) -> str:
    """A variable's value as a DuckDB literal: a string, or a list of strings."""
    return _quoted(value) if isinstance(value, str) else f"[{', '.join(map(_quoted, value))}]::VARCHAR[]"


def connect(store_path, allow_external: bool = False):
    """An in-memory DuckDB connection with the store's views (``duckdb.DuckDBPyConnection``), locked to the store
    (:func:`lock`) unless ``allow_external`` (then DuckDB's defaults: any file, extensions, settings)."""
    import duckdb  # imported on first use: the commands that never query SQL skip its start-up
    store_path = location(store_path)
    if not is_remote(store_path):
        store_path = store_path.resolve()
    if not StorePaths(store_path).manifest.is_file():
        raise EvalEngineError(f"{store_path}: not an evalengine store (no manifest.json)")
    con = duckdb.connect(config={} if allow_external else
                         {"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    if is_remote(store_path):
        con.register_filesystem(_fsspec(store_path))
    else:  # relative paths in the user's own queries (allow_external only: the lock checks a path as written)
        con.execute(f"SET file_search_path = {_quoted(store_path)}")
    variables = path_variables(store_path)
    con.execute("".join(f"SET VARIABLE {name} = {_value(value)};\n" for name, value in variables.items()))
    files = [(path.name, text) for path in view_files() if _requirement_met(variables, text := path.read_text())]
    try:
        catalog = _catalog(con, files, store_path)
        if catalog is not None:
            try:
                con.execute(f"ATTACH {_quoted(catalog)} AS views (READ_ONLY)")
            except duckdb.Error:  # not a catalog (damaged on disk): made again
                catalog.unlink(missing_ok=True)
                catalog = _catalog(con, files, store_path)
                con.execute(f"ATTACH {_quoted(catalog)} AS views (READ_ONLY)")
            con.execute("SET search_path = 'memory.main,views.main'")
        else:  # no cache folder to write in: the views made in this connection
            _define_views(con, files, store_path)
        if not allow_external:
            lock(con, store_path)
    except BaseException:
        con.close()
        raise
    return con


def _define_views(con, files: list, store_path) -> None:
    """Run the view files (``[(name, text)]``, requirements met) in the connection's current database, after the
    ``coco_summary_layout`` table they read."""
    import duckdb

    con.execute("CREATE TABLE coco_summary_layout (keypoints BOOLEAN, position INTEGER, metric VARCHAR, is_ap BOOLEAN, "
                "iou DOUBLE, area VARCHAR, cap VARCHAR)")
    con.executemany("INSERT INTO coco_summary_layout VALUES (?, ?, ?, ?, ?, ?, ?)", _layout_rows())
    for name, text in files:
        try:
            con.execute(text)
        except duckdb.Error as exc:  # a damaged table: DuckDB's message names the file
            raise StoreError(f"{store_path}: view {name}: {first_line(exc)}") from exc


def _layout_rows() -> list:
    return [(keypoints, i + 1, *row[:4], str(row[4]))
            for keypoints, layout in ((False, SUMMARY_LAYOUT), (True, KEYPOINT_LAYOUT)) for i, row in enumerate(layout)]


def catalog_folder() -> Path:
    """Where the view catalogs are kept: ``$EVALENGINE_CACHE_DIR``, else ``$XDG_CACHE_HOME/evalengine`` (default
    ``~/.cache/evalengine``), in ``sql-views/``."""
    root = os.environ.get("EVALENGINE_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or
                                                          Path.home() / ".cache") / "evalengine"
    return Path(root) / "sql-views"


def _catalog(con, files: list, store_path) -> Path | None:
    """The view catalog of ``files`` (a DuckDB file of their views), made on first use; None where it cannot be
    written.

    Creating a view binds it, and binding re-binds every view below it and reads the Parquet footers they name:
    about a second a connection for some 30 files. A view kept in a database file is bound only when a query reads
    it, so the files are run once per set of definitions (the files whose requirements are met, their text, the
    DuckDB version, the summary layout) into ``catalog_folder()/views-<digest>.duckdb`` (written beside, renamed
    into place) that connections attach read-only. A stored view binds at query time to the connection's variables
    and the columns its files have then, so one catalog serves every store with the same tables, and a damaged
    table is reported by the query that reads it."""
    import duckdb

    digest = hashlib.sha256(repr((duckdb.__version__, _layout_rows(), files)).encode()).hexdigest()[:32]
    catalog = catalog_folder() / f"views-{digest}.duckdb"
    if catalog.is_file():
        return catalog
    building = catalog.with_name(f".{catalog.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        catalog.parent.mkdir(parents=True, exist_ok=True)
        con.execute(f"ATTACH {_quoted(building)} AS views")
    except (OSError, duckdb.IOException):
        return None
    try:
        con.execute("USE views")
        _define_views(con, files, store_path)
        con.execute("USE memory")
        con.execute("DETACH views")
        building.replace(catalog)
    finally:
        building.unlink(missing_ok=True)
        building.with_name(building.name + ".wal").unlink(missing_ok=True)
    return catalog


def lock(con, store_path) -> None:
    """Close the connection to everything but reading the store (set once the views exist, which read it):
    ``allowed_directories`` the store alone, ``enable_external_access`` off (no other file, URL, ATTACH, COPY or
    EXPORT outside it, no INSTALL or LOAD), ``lock_configuration`` on (no SET, RESET or PRAGMA undoes this).
    DuckDB adds its spill folder to the allowed directories (``.tmp`` in the working directory by default): a
    private one instead."""
    con.execute(f"SET temp_directory = {_quoted(_spill_root() / uuid.uuid4().hex)}")
    con.execute(f"SET allowed_directories = [{_quoted(f'{store_path}/')}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


@lru_cache(maxsize=None)
def _spill_root() -> Path:
    """This process's folder (mode 0700, removed at exit) for the spill folders DuckDB creates on demand and
    removes when its connection closes (it does not create their parent)."""
    root = Path(tempfile.mkdtemp(prefix="evalengine-duckdb-"))
    atexit.register(shutil.rmtree, root, True)
    return root


def _fsspec(store_path):
    """The store's pyarrow filesystem as an fsspec one, which DuckDB reads URLs of its scheme through (its own
    httpfs extension would have to be downloaded)."""
    from fsspec.implementations.arrow import ArrowFSWrapper

    wrapper = type("StoreFileSystem", (ArrowFSWrapper,), {"protocol": (store_path.scheme,)})
    return wrapper(store_path.fs)


def _check_read_only(con, sql: str, statements: list) -> None:
    """A located error unless ``sql`` (parsed as ``statements``) is one ``SELECT`` (or ``WITH … SELECT``)
    statement that writes nothing."""
    kinds = [statement.type.name for statement in statements]
    if kinds != ["SELECT"]:
        got = kinds[0] if len(kinds) == 1 else f"{len(kinds)} statements ({'; '.join(kinds)})"
        raise EvalEngineError(f"SQL: only one SELECT or WITH statement is accepted, got {got} ({OPT_IN})")
    tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0])
    if tree["error"]:  # fails closed (DuckDB 2.0.1 serialises every SELECT statement)
        raise EvalEngineError(f"SQL: this SELECT cannot be checked to be read-only ({tree['error_message']}; "
                              f"{OPT_IN})")
    writes = sorted(_query_nodes(tree["statements"]) - READ_ONLY_NODES)
    if writes:
        got = ", ".join(node.removesuffix("_QUERY_NODE") for node in writes)
        raise EvalEngineError(f"SQL: only one SELECT or WITH statement is accepted, got {got} in a WITH clause "
                              f"({OPT_IN})")


def _query_nodes(tree) -> set:
    """The type of every query node of a serialised statement (the dicts with a ``cte_map``)."""
    if isinstance(tree, list):
        return set().union(*map(_query_nodes, tree))
    if not isinstance(tree, dict):
        return set()
    own = {tree["type"]} if "cte_map" in tree else set()
    return own.union(*map(_query_nodes, tree.values()))


def query(store_path, sql: str, allow_external: bool = False) -> pl.DataFrame:
    """Run ``sql`` against the store's views and return the result: one read-only statement on a locked
    connection, or with ``allow_external`` anything DuckDB runs (several statements: the last one's result).
    DuckDB's errors become one line. The store's read lock is held meanwhile (no writer changes it)."""
    import duckdb

    with reading(store_path):
        con = connect(store_path, allow_external)
        try:
            statements = con.extract_statements(sql)
            if not statements:
                raise EvalEngineError("SQL: no statement given")
            if not allow_external:
                _check_read_only(con, sql, statements)
            relation = con.sql(sql)
            return pl.DataFrame() if relation is None else relation.pl()
        except duckdb.Error as exc:
            raise EvalEngineError(f"SQL error: {first_line(exc)}{_hint(exc, store_path)}") from exc
        finally:
            con.close()


def _hint(exc, store_path) -> str:
    import duckdb

    if isinstance(exc, duckdb.PermissionException):
        return f" (the SQL door reads the store only; {OPT_IN})"
    variables = path_variables(store_path)
    if isinstance(exc, duckdb.CatalogException) and not any(
            value for name, value in variables.items() if name.endswith("_protocols")):
        return " (the views over match tables — matches, ap, coco_summary, … — exist after `evalengine evaluate STORE`)"
    return ""


def image_ids(store_path, where: str) -> list:
    """Ids of the images satisfying ``where``, one boolean SQL expression over the ``images`` view (any ingested
    metadata). DuckDB's expression parser reads it alone (no statement around it to break out of, no ``UNION``);
    comments and ``;`` are refused; errors name the predicate."""
    import duckdb

    with reading(store_path):
        con = connect(store_path)
        try:
            expression = _predicate(where)
            images = con.view("images")
            kind = str(images.project(expression).types[0])
            if kind != "BOOLEAN":
                raise EvalEngineError(f"where {where!r}: not a boolean expression ({kind})")
            return images.filter(expression).project("image_id").order("image_id").pl().get_column(
                "image_id").to_list()
        except duckdb.Error as exc:
            raise EvalEngineError(f"where {where!r}: SQL error: {first_line(exc)}") from exc
        finally:
            con.close()


def _predicate(where: str):
    import duckdb

    if not where.strip():
        raise EvalEngineError(f"where {where!r}: no predicate given")
    tokens = duckdb.tokenize(where)
    for (start, kind), (end, _) in zip(tokens, [*tokens[1:], (len(where), None)]):
        if kind == duckdb.token_type.comment or (kind == duckdb.token_type.operator and ";" in where[start:end]):
            what = "a comment" if kind == duckdb.token_type.comment else "a ';'"
            raise EvalEngineError(f"where {where!r}: {what} at character {start + 1} (one expression only)")
    return duckdb.SQLExpression(where)
