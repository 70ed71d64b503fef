"""DuckDB over a store: the views defined by the ``.sql`` files of the top-level ``sql/`` folder.

A connection sets one DuckDB variable per table of the store's path map (:func:`evalengine.store.paths.table_globs`:
``getvariable('gt')``, ``getvariable('coco_dt')``, …, absolute globs; the store's folder, or its object-store URL
read through pyarrow's filesystem registered with DuckDB), a ``coco_summary_layout`` table (the 12-number layout
the Python summary uses), then runs the files in file-name order. A file whose first line is
``-- requires: TABLE`` defines its views only once the store has a file of that table (detections, proposals, a
protocol's match tables); any other failure is an error.
"""

from importlib import resources
from pathlib import Path

import polars as pl

from evalengine.errors import EvalEngineError
from evalengine.match import PROTOCOLS
from evalengine.metrics.summary import SUMMARY_LAYOUT
from evalengine.store.location import is_remote, location
from evalengine.store.paths import StorePaths, table_globs

TABLE_GLOBS = table_globs({protocol.name: protocol.sides for protocol in PROTOCOLS})


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


def _exists(store_path, table: str) -> bool:
    return any(store_path.glob(TABLE_GLOBS[table]))


def _requirement_met(store_path, text: str) -> bool:
    first = text.split("\n", 1)[0]
    if not first.startswith("-- requires:"):
        return True
    return _exists(store_path, first.removeprefix("-- requires:").strip())


def path_variables(store_path) -> dict:
    """``{table: absolute glob}``, the DuckDB variables the views read (set them with ``SET VARIABLE`` to use the
    ``.sql`` files in a session of your own)."""
    return {name: f"{store_path}/{glob}" for name, glob in TABLE_GLOBS.items()}


def _quoted(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def connect(store_path):
    """An in-memory DuckDB connection with the store's views (``duckdb.DuckDBPyConnection``)."""
    import duckdb  # imported on first use: the commands that never query SQL skip its start-up
    store_path = location(store_path)
    if not is_remote(store_path):
        store_path = store_path.resolve()
    if not StorePaths(store_path).manifest.is_file():
        raise EvalEngineError(f"{store_path}: not an evalengine store (no manifest.json)")
    con = duckdb.connect()
    if is_remote(store_path):
        con.register_filesystem(_fsspec(store_path))
    else:  # relative paths in the user's own queries
        con.execute(f"SET file_search_path = {_quoted(store_path)}")
    for name, glob in path_variables(store_path).items():
        con.execute(f"SET VARIABLE {name} = {_quoted(glob)}")
    con.execute("CREATE TABLE coco_summary_layout (position INTEGER, metric VARCHAR, is_ap BOOLEAN, iou DOUBLE, "
                "area VARCHAR, cap VARCHAR)")
    con.executemany("INSERT INTO coco_summary_layout VALUES (?, ?, ?, ?, ?, ?)",
                    [(i + 1, *row) for i, row in enumerate(SUMMARY_LAYOUT)])
    for path in view_files():
        text = path.read_text()
        if _requirement_met(store_path, text):
            con.execute(text)
    return con


def _fsspec(store_path):
    """The store's pyarrow filesystem as an fsspec one, which DuckDB reads URLs of its scheme through (its own
    httpfs extension would have to be downloaded)."""
    from fsspec.implementations.arrow import ArrowFSWrapper

    wrapper = type("StoreFileSystem", (ArrowFSWrapper,), {"protocol": (store_path.scheme,)})
    return wrapper(store_path.fs)


def query(store_path, sql: str) -> pl.DataFrame:
    """Run ``sql`` against the store's views and return the result; DuckDB's message is kept in errors."""
    import duckdb

    con = connect(store_path)
    try:
        return con.sql(sql).pl()
    except duckdb.Error as exc:
        hint = ""
        store = location(store_path)
        if not any(_exists(store, f"{protocol.name}_protocols") for protocol in PROTOCOLS):
            hint = "\n(the views over match tables — matches, ap, coco_summary, … — exist after `evalengine evaluate STORE`)"
        raise EvalEngineError(f"SQL error: {exc}{hint}") from exc
    finally:
        con.close()
