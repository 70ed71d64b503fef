"""DuckDB over a store: the views defined by the ``.sql`` files of the top-level ``sql/`` folder.

The files are plain SQL with paths relative to the store; a connection makes them absolute (the store's
folder, or its object-store URL read through pyarrow's filesystem registered with DuckDB) and runs them in
file-name order. A file whose first line is ``-- requires: GLOB`` defines its views only once the store has a
file matching GLOB (detections, proposals, a COCO or a proposal match table); any other failure is an error.
"""

import re
from importlib import resources
from pathlib import Path

import polars as pl

from evalengine.errors import EvalEngineError
from evalengine.store.location import is_remote, location

_RELATIVE_READ = re.compile(r"\b(read_(?:parquet|json)\(')(?![a-z0-9]+://|/)")


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


def _evaluated(store_path) -> bool:
    return any((store_path / "matches").glob("*/*/protocol.json"))


def _requirement_met(store_path, text: str) -> bool:
    first = text.split("\n", 1)[0]
    if not first.startswith("-- requires:"):
        return True
    return any(store_path.glob(first.removeprefix("-- requires:").strip()))


def connect(store_path):
    """An in-memory DuckDB connection with the store's views (``duckdb.DuckDBPyConnection``)."""
    import duckdb  # imported on first use: the commands that never query SQL skip its start-up
    store_path = location(store_path)
    if not is_remote(store_path):
        store_path = store_path.resolve()
    if not (store_path / "manifest.json").is_file():
        raise EvalEngineError(f"{store_path}: not an evalengine store (no manifest.json)")
    con = duckdb.connect()
    root = str(store_path).replace("'", "''")
    if is_remote(store_path):
        con.register_filesystem(_fsspec(store_path))
    else:  # relative paths in the user's own queries
        con.execute(f"SET file_search_path = '{root}'")
    for path in view_files():
        text = path.read_text()
        if _requirement_met(store_path, text):
            con.execute(_RELATIVE_READ.sub(lambda m: f"{m.group(1)}{root}/", text))
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
        if not _evaluated(location(store_path)):
            hint = "\n(the views over match tables — matches, ap, coco_summary, … — exist after `evalengine evaluate STORE`)"
        raise EvalEngineError(f"SQL error: {exc}{hint}") from exc
    finally:
        con.close()
