"""The SQL door is read-only by default: every escape below is refused (one line, nothing written, the store's
files and numbers unchanged), ``--where`` is one boolean expression, ``--out`` never overwrites without ``--force``
nor writes inside the store, temporary folders stay out of the views; ``allow_external`` opens it all."""

import hashlib
import shutil
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalengine import api
from evalengine import sql as sql_views
from evalengine.cli import main
from evalengine.errors import EvalEngineError, StoreError
from tests.conftest import PACKAGE_DATA
from evalengine.store import location
from tests.store.test_object_store import s3  # noqa: F401 - the fixture: a moto S3 server on loopback

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
SUMMARY = "SELECT metric, value FROM coco_summary ORDER BY metric"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A store (evaluated), a sibling store whose name extends the first's, and an ``outside`` folder holding
    files an escape would read."""
    root = tmp_path_factory.mktemp("door")
    store = api.ingest_coco(GT, DT, root / "store", n_shards=2)
    store.evaluate().stats()  # matched and accumulated: the store keeps its AP table (accumulation.parquet)
    shutil.copytree(store.path, root / "store2")
    outside = root / "outside"
    outside.mkdir()
    pl.DataFrame({"secret": [42]}).write_parquet(outside / "secret.parquet")
    (outside / "secret.csv").write_text("secret\n42\n")
    return root


@pytest.fixture(scope="module")
def store(folder):
    return api.open(folder / "store")


def _digest(path: Path) -> dict:
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def pristine(folder, store):
    return _digest(folder), store.sql(SUMMARY)


def _assert_untouched(folder, store, pristine):
    files, summary = pristine
    assert _digest(folder) == files
    _assert_same_summary(store.sql(SUMMARY), summary)


def _assert_same_summary(got, want):
    """DuckDB sums in parallel: the same numbers to 1e-12."""
    assert got["metric"].to_list() == want["metric"].to_list()
    np.testing.assert_allclose(got["value"].to_numpy(), want["value"].to_numpy(), rtol=0, atol=1e-12)


# (query, what the one-line error says); {store}, {sibling}, {outside}, {cwd} are absolute paths
ESCAPES = [
    ("COPY (SELECT 1 AS x) TO '{outside}/copy.csv'", "got COPY"),
    ("COPY (SELECT 1 AS x) TO '{store}/manifest.json'", "got COPY"),
    ("COPY (SELECT * FROM images) TO '{store}/images/part-0.parquet' (FORMAT parquet)", "got COPY"),
    ("COPY images FROM '{outside}/secret.csv'", "got COPY"),
    ("ATTACH '{outside}/db.duckdb' AS other", "got ATTACH"),
    ("ATTACH '{store}/db.duckdb' AS other", "got ATTACH"),
    ("EXPORT DATABASE '{outside}/export'", "got EXPORT"),
    ("EXPORT DATABASE '{store}/export'", "got EXPORT"),
    ("IMPORT DATABASE '{outside}'", "got PRAGMA"),
    ("INSTALL httpfs", "got LOAD"),
    ("LOAD httpfs", "got LOAD"),
    ("SET enable_external_access = true", "got SET"),
    ("SET allowed_directories = ['/']", "got SET"),
    ("RESET lock_configuration", "got SET"),
    ("PRAGMA enable_profiling", "got PRAGMA"),
    ("SET VARIABLE images = '/etc/passwd'", "got SET"),
    ("CREATE TABLE t AS SELECT 1", "got CREATE"),
    ("CREATE VIEW images2 AS SELECT 1", "got CREATE"),
    ("INSERT INTO coco_summary_layout SELECT * FROM coco_summary_layout", "got INSERT"),
    ("DELETE FROM coco_summary_layout", "got DELETE"),
    ("DROP VIEW images", "got DROP"),
    ("CALL checkpoint()", "got CALL"),
    ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{outside}/explained.csv'", "got EXPLAIN"),
    ("SELECT 1; COPY (SELECT 1) TO '{outside}/second.csv'", "got 2 statements (SELECT; COPY)"),
    ("SELECT 1; SELECT 2", "got 2 statements (SELECT; SELECT)"),
    # DuckDB 2 parses these as SELECT statements and runs the WITH clause's write
    ("WITH w AS (COPY (SELECT 1) TO '{store}/manifest.json') SELECT 1", "got COPY in a WITH clause"),
    ("WITH w AS (COPY (SELECT 1) TO '{outside}/cte.csv') SELECT * FROM images", "got COPY in a WITH clause"),
    ("WITH w AS (DELETE FROM coco_summary_layout RETURNING *) SELECT count(*) FROM w", "got DELETE in a WITH"),
    ("WITH w AS (INSERT INTO coco_summary_layout SELECT * FROM coco_summary_layout RETURNING *) SELECT 1",
     "got INSERT in a WITH"),
    # reads outside the store
    ("SELECT * FROM read_csv('/etc/passwd')", "Permission Error"),
    ("SELECT * FROM read_text('/etc/passwd')", "Permission Error"),
    ("SELECT * FROM read_blob('/etc/hostname')", "Permission Error"),
    ("SELECT * FROM read_parquet('{outside}/secret.parquet')", "Permission Error"),
    ("SELECT * FROM '{outside}/secret.csv'", "Permission Error"),
    ("SELECT * FROM read_text('{store}/../outside/secret.csv')", "Permission Error"),
    ("SELECT * FROM read_text('{sibling}/manifest.json')", "Permission Error"),
    ("SELECT * FROM glob('~/*')", "Permission Error"),
    ("SELECT * FROM glob('/etc/**')", "Permission Error"),
    ("SELECT * FROM glob('{cwd}/.tmp/*')", "Permission Error"),  # DuckDB's default spill folder
    ("SELECT * FROM read_csv('https://example.com/x.csv')", "Permission Error"),
    ("SELECT * FROM images WHERE image_id IN (SELECT secret FROM '{outside}/secret.parquet')", "Permission Error"),
]


def _fill(text: str, folder: Path) -> str:
    return text.format(store=folder / "store", sibling=folder / "store2", outside=folder / "outside", cwd=Path.cwd())


@pytest.mark.parametrize("query, message", ESCAPES, ids=[q for q, _ in ESCAPES])
def test_escapes_are_refused(folder, store, pristine, query, message):
    with pytest.raises(EvalEngineError) as refused:
        store.sql(_fill(query, folder))
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert "--allow-external lifts this" in str(refused.value)
    _assert_untouched(folder, store, pristine)


@pytest.mark.parametrize("query, message", ESCAPES[::4], ids=[q for q, _ in ESCAPES[::4]])
def test_escapes_are_refused_by_the_command(folder, store, pristine, capsys, query, message):
    assert main(["sql", str(store.path), _fill(query, folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("evalengine: error: SQL") and message in err and err.count("\n") == 1
    _assert_untouched(folder, store, pristine)


def test_the_connection_is_locked(folder, store):
    con = store.duckdb()
    settings_ = dict(con.execute("SELECT name, value FROM duckdb_settings() WHERE name IN ('allowed_directories', "
                                 "'enable_external_access', 'lock_configuration', 'autoinstall_known_extensions', "
                                 "'autoload_known_extensions', 'temp_directory')").fetchall())
    spill = settings_.pop("temp_directory")
    assert settings_ == {"allowed_directories": f"[{spill}/, {folder / 'store'}/]", "enable_external_access": "false",
                         "lock_configuration": "true", "autoinstall_known_extensions": "false",
                         "autoload_known_extensions": "false"}
    assert not Path(spill).exists() and Path(spill).parent.stat().st_mode & 0o077 == 0  # private, made on demand
    with pytest.raises(duckdb.InvalidInputException, match="the configuration has been locked"):
        con.execute("SET enable_external_access = true")
    with pytest.raises(duckdb.PermissionException):
        con.execute(f"SELECT * FROM '{folder / 'outside' / 'secret.csv'}'")
    assert con.execute("SELECT count(*) FROM coco_summary").fetchall() == [(12,)]


def test_queries_that_read_the_store_are_accepted(store):
    assert store.sql("WITH a AS (SELECT * FROM ap WHERE ap > -1) SELECT count(*) > 0 AS ok FROM a").item()
    assert store.sql("SELECT 1 AS one;").item() == 1
    assert store.sql("SELECT 1 AS x UNION ALL SELECT 2 ORDER BY x")["x"].to_list() == [1, 2]
    assert store.sql("FROM images SELECT count(*) AS n").item() == 100
    assert store.sql("DESCRIBE images").height > 0 and store.sql("SUMMARIZE categories").height == 3
    manifest = store.path / "manifest.json"
    assert store.sql(f"SELECT count(*) AS n FROM read_text('{manifest}')").item() == 1  # the store itself


@pytest.mark.parametrize("query, message", [
    ("", "SQL: no statement given"), ("   \n", "SQL: no statement given"), ("-- nothing", "SQL: no statement given"),
    ("SELEC 1", 'SQL error: Parser Error: syntax error at or near "SELEC"'),
    ("SELECT nope FROM ap", 'SQL error: Binder Error: Referenced column "nope" not found'),
    ("SELECT * FROM no_such_view", "SQL error: Catalog Error: Table with name no_such_view does not exist!"),
    ("SELECT * FROM (PIVOT (SELECT 1 AS a) ON a)", "SQL: only one SELECT or WITH statement is accepted, got MULTI"),
])
def test_bad_queries_are_one_line(store, capsys, query, message):
    assert main(["sql", str(store.path), query]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"evalengine: error: {message}") and err.count("\n") == 1


def test_a_binary_query_file_is_one_line(tmp_path, store, capsys):
    binary = tmp_path / "query.sql"
    binary.write_bytes(b"SELECT 1 \xff\xfe\x00")
    assert main(["sql", str(store.path), "--file", str(binary)]) == 2
    assert capsys.readouterr().err == f"evalengine: error: {binary}: not UTF-8 text (byte 10: invalid start byte)\n"


def test_allow_external_opens_it_all(folder, store, tmp_path, capsys):
    copied = tmp_path / "copy.csv"
    frame = store.sql(f"COPY (SELECT metric, value FROM coco_summary) TO '{copied}'", allow_external=True)
    assert frame.item() == 12 and pl.read_csv(copied).height == 12
    assert store.sql(f"SELECT secret FROM '{folder / 'outside' / 'secret.parquet'}'", allow_external=True).item() == 42
    assert store.sql("SET VARIABLE x = 41; SELECT getvariable('x') + 1 AS y", allow_external=True).item() == 42
    with pytest.raises(EvalEngineError, match="^SQL: no statement given$"):
        store.sql(" -- nothing", allow_external=True)
    con = store.duckdb(allow_external=True)
    con.execute(f"ATTACH '{tmp_path / 'db.duckdb'}' AS other")
    con.execute("CREATE TABLE other.t AS SELECT * FROM coco_summary")
    con.close()
    assert (tmp_path / "db.duckdb").is_file()
    cli_copy = tmp_path / "cli.csv"
    assert main(["sql", str(store.path), f"COPY (SELECT 1 AS x) TO '{cli_copy}'", "--allow-external"]) == 0
    assert cli_copy.read_text() == "x\n1\n"
    assert main(["sql", str(store.path), f"SELECT count(*) AS n FROM read_csv('{folder / 'outside' / 'secret.csv'}')",
                 "--allow-external", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == ["n", "1"]


# --where: one boolean expression over the images view
INJECTIONS = [
    ("1=1; COPY (SELECT 1) TO '{outside}/where.csv'", "a ';' at character 4"),
    ("width > 0;", "a ';' at character 10"),
    ("1=0 UNION SELECT 3 --", "a comment at character 20"),
    ("1=0 UNION SELECT 3", "it holds a set operation"),
    ("1=0) UNION SELECT 3 WHERE (1=1", 'syntax error at or near ")"'),
    ("1=0) UNION (SELECT 3", 'syntax error at or near ")"'),
    ("width > 0 -- and the rest", "a comment at character 11"),
    ("width /* hidden */ > 0", "a comment at character 7"),
    ("width > 0 ORDER BY 1", "it holds a modifier"),
    ("width > 0, height > 0", "found 2 expressions"),
    ("image_id IN (WITH w AS (COPY (SELECT 1) TO '{outside}/where2.csv') SELECT 1)",
     "WITH clause containing a COPY statement must be at the top level"),
    ("image_id IN (SELECT secret FROM read_parquet('{outside}/secret.parquet'))", "Permission Error"),
    ("", "no predicate given"),
    ("width", "not a boolean expression (BIGINT)"),
    ("no_such_column > 1", 'Referenced column "no_such_column" not found'),
]


@pytest.mark.parametrize("where, message", INJECTIONS, ids=[w or "empty" for w, _ in INJECTIONS])
def test_where_injections_are_refused(folder, store, pristine, capsys, where, message):
    predicate = _fill(where, folder)
    with pytest.raises(EvalEngineError) as refused:
        store.image_ids(predicate)
    assert str(refused.value).startswith(f"where {predicate!r}: ") and message in str(refused.value)
    assert main(["report", str(store.path), "--where", predicate]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"evalengine: error: where {predicate!r}: ") and err.count("\n") == 1
    _assert_untouched(folder, store, pristine)


def test_where_selects_images(store):
    images = store.images().collect()
    wide = images.filter(pl.col("width") > 500)["image_id"].sort().to_list()
    assert store.image_ids("width > 500") == wide
    assert store.image_ids("width > 500\n  AND 'it''s' = 'it''s'") == wide
    with_cat_1 = store.gt().filter(pl.col("category_id") == 1).collect()["image_id"].unique().sort().to_list()
    assert store.image_ids("image_id IN (SELECT image_id FROM gt WHERE category_id = 1)") == with_cat_1


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["width > 500", "1=0", "1=1", "UNION", "SELECT", "3", "image_id", "(", ")", ";",
                                 "--", "/*", "*/", "OR", "AND", "'", "FROM images", "VALUES (3)", "IN", ","]),
                min_size=1, max_size=8))
def test_no_predicate_injects_an_image(store, words):
    """Whatever the text, the slice is a set of the store's images or a one-line error naming the predicate."""
    where = " ".join(words)
    try:
        ids = store.image_ids(where)
    except EvalEngineError as exc:
        assert str(exc).startswith(f"where {where!r}: ") and "\n" not in str(exc)
    else:
        assert set(ids) <= set(store.images().collect()["image_id"].to_list()) and ids == sorted(ids)


# --out: new files outside the store, written atomically
def test_out_refuses_to_overwrite_without_force(tmp_path, store, capsys):
    out = tmp_path / "summary.csv"
    out.write_text("mine\n")
    assert main(["sql", str(store.path), SUMMARY, "--format", "csv", "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"evalengine: error: {out}: already exists (--force replaces it)\n"
    assert out.read_text() == "mine\n"
    assert main(["sql", str(store.path), SUMMARY, "--format", "csv", "--out", str(out), "--force"]) == 0
    assert pl.read_csv(out).height == 12 and sorted(p.name for p in tmp_path.iterdir()) == ["summary.csv"]


@pytest.mark.parametrize("inside", ["manifest.json", "images/part-0.parquet", "images/new.csv", "new.csv",
                                    "matches/../result.csv", "."])
def test_out_never_writes_inside_the_store(folder, store, pristine, capsys, inside):
    out = f"{store.path}/{inside}"
    assert main(["sql", str(store.path), SUMMARY, "--format", "csv", "--out", out, "--force"]) == 2
    assert capsys.readouterr().err == f"evalengine: error: {out}: inside the store {store.path} (write results " \
                                      "outside it)\n"
    _assert_untouched(folder, store, pristine)


def test_out_follows_links_into_the_store(tmp_path, folder, store, pristine, capsys):
    link = tmp_path / "link.json"
    link.symlink_to(store.path / "manifest.json")
    (tmp_path / "linked").symlink_to(store.path)
    for out in (link, tmp_path / "linked" / "new.csv"):
        assert main(["sql", str(store.path), SUMMARY, "--format", "json", "--out", str(out), "--force"]) == 2
        assert "inside the store" in capsys.readouterr().err
    _assert_untouched(folder, store, pristine)


def test_out_into_a_missing_folder_or_onto_a_folder(tmp_path, store, capsys):
    missing = tmp_path / "missing" / "out.csv"
    assert main(["sql", str(store.path), SUMMARY, "--out", str(missing)]) == 2
    assert capsys.readouterr().err == f"evalengine: error: {missing}: no folder {missing.parent} to write into\n"
    for force in ([], ["--force"]):
        assert main(["sql", str(store.path), SUMMARY, "--out", str(tmp_path), *force]) == 2
        assert capsys.readouterr().err == f"evalengine: error: {tmp_path}: is a folder (give a file name)\n"
    assert main(["sql", str(store.path), "SELECT * FROM matches", "--format", "csv"]) == 2
    assert "column tp_bits holds lists or structs" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_nothing(tmp_path, store, capsys, monkeypatch):
    def disk_full(frame, path):
        Path(path).write_text("half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", disk_full)
    out = tmp_path / "ap.parquet"
    assert main(["sql", str(store.path), SUMMARY, "--format", "parquet", "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"evalengine: error: {out}: cannot write (No space left on device)\n"
    assert list(tmp_path.iterdir()) == []
    out.write_text("kept")
    assert main(["sql", str(store.path), SUMMARY, "--format", "parquet", "--out", str(out), "--force"]) == 2
    assert out.read_text() == "kept" and [p.name for p in tmp_path.iterdir()] == ["ap.parquet"]


def test_plot_out_follows_the_same_rules(tmp_path, folder, store, pristine, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "pr.png"
    assert main(["plot", str(store.path), "pr", "--out", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert main(["plot", str(store.path), "pr", "--out", str(out)]) == 2
    assert capsys.readouterr().err.endswith(f"evalengine: error: {out}: already exists (--force replaces it)\n")
    assert main(["plot", str(store.path), "pr", "--out", str(out), "--force"]) == 0
    inside = store.path / "pr.png"
    assert main(["plot", str(store.path), "pr", "--out", str(inside), "--force"]) == 2
    assert "inside the store" in capsys.readouterr().err
    assert main(["plot", str(store.path), "pr", "--out", str(tmp_path / "pr.nope")]) == 2
    assert "no figure format .nope" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pr.png"]
    _assert_untouched(folder, store, pristine)


# temporary folders and files of a store's writers (.NAME.tmp-XXXX / .NAME.old-XXXX) stay out of the views
VIEWS = ["images", "categories", "runs", "gt", "dt", "matches", "gt_matches", "protocols", "coco_summary", "ap"]


def _plant(root, corrupt: bytes = b"not parquet") -> None:
    """Temporary folders and files where a killed writer leaves them: copies of valid tables and corrupt ones."""
    run = root / "matches" / "protocol=coco" / "run=default"
    shutil.copytree(run, run.parent / ".run=default.tmp-1a2b3c4d")
    shutil.copytree(root / "dt" / "run=default", root / "dt" / ".run=x.tmp-1a2b3c4d")
    shutil.copytree(root / "images", root / ".images.old-5e6f7a8b")
    for corrupt_file in ["matches/protocol=coco/.run=default.old-5e6f7a8b/dt/shard=0/part-0.parquet",
                         "matches/.protocol=coco.tmp-1a2b3c4d/run=default/protocol.json",
                         "dt/run=default/.shard=0.tmp-1a2b3c4d/part-0.parquet",
                         "gt/.shard=1.old-1a2b3c4d/part-0.parquet",
                         "images/.part-0.tmp-1a2b3c4d.parquet",
                         "categories/.part-0.parquet",
                         "dt/run=default/shard=0/.part-0.tmp-1a2b3c4d.parquet"]:
        (root / corrupt_file).parent.mkdir(parents=True, exist_ok=True)
        (root / corrupt_file).write_bytes(corrupt)


def test_views_never_see_temporary_folders(tmp_path, store):
    copy = api.open(shutil.copytree(store.path, tmp_path / "store"))
    counts = "SELECT " + ", ".join(f"(SELECT count(*) FROM {view}) AS {view}" for view in VIEWS)
    before, summary, wide = copy.sql(counts), copy.sql(SUMMARY), copy.image_ids("width > 500")
    _plant(copy.path)
    assert copy.sql("SELECT 1 AS one").item() == 1
    assert copy.sql(counts).equals(before)
    _assert_same_summary(copy.sql(SUMMARY), summary)
    assert copy.image_ids("width > 500") == wide
    assert copy.sql("SELECT DISTINCT run FROM dt")["run"].to_list() == ["default"]


def test_temporary_match_tables_do_not_define_the_match_views(tmp_path):
    store = api.ingest_coco(GT, DT, tmp_path / "store", n_shards=2)
    hidden = store.path / "matches" / "protocol=coco" / ".run=default.tmp-1a2b3c4d"
    hidden.mkdir(parents=True)
    (hidden / "protocol.json").write_text("{}")
    with pytest.raises(EvalEngineError, match="exist after `evalengine evaluate STORE`"):
        store.sql("SELECT * FROM ap")
    assert store.sql("SELECT count(*) AS n FROM dt").item() == 734


def test_view_globs_cannot_match_a_leading_dot(store):
    variables = sql_views.path_variables(store.path)
    assert variables["dt"] == [f"{store.path}/dt/run=default/shard=*/[!.]*.parquet"]
    assert variables["coco_dt"] == [f"{store.path}/matches/protocol=coco/run=default/dt/shard=*/[!.]*.parquet"]
    for name, value in variables.items():
        for glob in [value] if isinstance(value, str) else value:
            levels = glob.removeprefix(f"{store.path}/").split("/")
            assert all(not level.startswith(("*", "?", ".")) for level in levels), (name, glob)


def test_a_damaged_table_is_one_line(tmp_path, store, monkeypatch):
    copy = api.open(shutil.copytree(store.path, tmp_path / "store"))
    shard = copy.path / "images" / "part-0.parquet"
    shard.write_bytes(shard.read_bytes()[:100])
    # with no view catalog yet, making it binds every view: the first to read the table names it
    monkeypatch.setenv("EVALENGINE_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(StoreError, match=f"view 01_images.sql: .*{shard}") as damaged:
        copy.sql("SELECT 1")
    assert "\n" not in str(damaged.value) and not list((tmp_path / "cache").rglob("*.duckdb*"))
    # with the catalog of an intact store, the query that reads the table does
    store.sql("SELECT 1")
    assert copy.sql("SELECT 1").rows() == [(1,)]
    with pytest.raises(EvalEngineError, match=f"SQL error: .*{shard}") as damaged:
        copy.sql("SELECT count(*) FROM images")
    assert "\n" not in str(damaged.value)


@pytest.fixture
def bucket(s3):  # noqa: F811 - the fixture imported above
    """This module's S3 server; pyarrow filesystems are cached per bucket with the endpoint of their time: none
    from another module's server is used, and none of this one's is left to the next."""
    location._filesystem.cache_clear()
    yield s3
    location._filesystem.cache_clear()


def test_object_store_door(bucket):
    s3 = bucket
    store = api.ingest_coco(GT, DT, f"{s3}/door", n_shards=2)
    store.evaluate(scheduler="sync")
    api.ingest_gt(GT, f"{s3}/door2", n_shards=1)  # a sibling whose name extends the store's
    counts = "SELECT " + ", ".join(f"(SELECT count(*) FROM {view}) AS {view}" for view in VIEWS)
    before, wide = store.sql(counts), store.image_ids("width > 500")
    fs, key = store.path.fs, store.path.key
    fs.copy_file(f"{key}/dt/run=default/shard=0/part-0.parquet", f"{key}/dt/.run=x.tmp-1a2b3c4d/shard=0/part-0.parquet")
    for corrupt in ["images/.part-0.tmp-1a2b3c4d.parquet", "matches/protocol=coco/.run=default.old-1a2b3c4d/dt/"
                    "shard=0/part-0.parquet", "gt/shard=0/.part-0.parquet"]:
        with fs.open_output_stream(f"{key}/{corrupt}") as stream:
            stream.write(b"not parquet")
    assert store.sql("SELECT 1 AS one").item() == 1
    assert store.sql(counts).equals(before) and store.image_ids("width > 500") == wide
    allowed = store.duckdb().execute("SELECT current_setting('allowed_directories')").fetchall()[0][0]
    assert f"{s3}/door/" in allowed and len(allowed) == 2
    for escape, message in [(f"SELECT * FROM read_parquet('{s3}/door2/images/part-0.parquet')", "Permission Error"),
                            (f"SELECT * FROM read_text('{s3}/door/../door2/manifest.json')", "Permission Error"),
                            ("SELECT * FROM read_text('/etc/passwd')", "Permission Error"),
                            (f"COPY (SELECT 1) TO '{s3}/door/manifest.json'", "got COPY")]:
        with pytest.raises(EvalEngineError, match=message):
            store.sql(escape)
    assert api.open(f"{s3}/door").evaluate(scheduler="sync").stats() == store.evaluate(scheduler="sync").stats()
