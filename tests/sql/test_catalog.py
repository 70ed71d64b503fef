"""The view catalog (evalengine.sql._catalog): the view files run once into a DuckDB file that later connections
attach, the same views and numbers as views made in the connection, for any store with the same tables."""

import json

import pytest

from evalengine import sql as sql_views
from evalengine.api import ingest_coco
from tests.conftest import PACKAGE_DATA
from tests.generators import random_coco
from tests.helpers import write_inputs

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
QUERIES = ["SELECT * FROM coco_summary ORDER BY metric", "SELECT * FROM ap ORDER BY ALL",
           "SELECT * FROM image_counts ORDER BY ALL", "SELECT * FROM images ORDER BY image_id",
           "SELECT * FROM operating_points ORDER BY ALL", "SELECT count(*) AS n FROM detection_outcomes"]


@pytest.fixture(scope="module")
def matched(tmp_path_factory):
    store = ingest_coco(GT, DT, tmp_path_factory.mktemp("s") / "store", n_shards=2)
    store.evaluate()
    return store


def _catalogs(folder) -> list:
    return sorted(p.name for p in (folder / "sql-views").iterdir()) if (folder / "sql-views").exists() else []


def test_made_once_and_equal_to_views_made_in_the_connection(matched, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALENGINE_CACHE_DIR", str(tmp_path / "cache"))
    first = [matched.sql(q) for q in QUERIES]
    made = _catalogs(tmp_path / "cache")
    assert len(made) == 1 and made[0].startswith("views-") and made[0].endswith(".duckdb")
    again = [matched.sql(q) for q in QUERIES]
    assert _catalogs(tmp_path / "cache") == made
    (tmp_path / "cache" / "sql-views" / made[0]).write_bytes(b"damaged")  # made again
    repaired = [matched.sql(q) for q in QUERIES]
    assert _catalogs(tmp_path / "cache") == made
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("EVALENGINE_CACHE_DIR", str(tmp_path / "file"))  # no catalog can be written: views in memory
    in_memory = [matched.sql(q) for q in QUERIES]
    for a, b, c, d in zip(first, again, repaired, in_memory):
        assert a.equals(b) and a.equals(c) and a.equals(d)
    assert first[0].height == 12 and first[5]["n"][0] > 0


def test_one_catalog_serves_stores_with_other_columns(matched, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALENGINE_CACHE_DIR", str(tmp_path / "cache"))
    gt, dt = random_coco(3)
    for image in gt["images"]:
        image["weather"] = "rain" if image["id"] % 2 else "sun"  # a metadata column the first store lacks
    other = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "other", n_shards=3)
    other.evaluate()
    matched.sql("SELECT 1")
    made = _catalogs(tmp_path / "cache")
    images = other.sql("SELECT * FROM images ORDER BY image_id")
    assert _catalogs(tmp_path / "cache") == made  # the same tables: the same catalog
    assert "weather" in images.columns and images.height == len(gt["images"])
    assert "weather" not in matched.sql("SELECT * FROM images").columns
    stats = dict(other.sql("SELECT metric, value FROM coco_summary WHERE protocol = 'coco'").iter_rows())
    evaluation = other.evaluate()
    assert stats == pytest.approx(dict(zip(evaluation.summary()["metric"], evaluation.stats())), rel=0, abs=1e-12)


def test_a_store_with_other_tables_has_its_own_catalog(matched, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALENGINE_CACHE_DIR", str(tmp_path / "cache"))
    unmatched = ingest_coco(GT, DT, tmp_path / "unmatched", n_shards=1)
    assert unmatched.sql("SELECT count(*) AS n FROM dt")["n"].to_list() == [json.loads(DT.read_text()).__len__()]
    matched.sql("SELECT 1")
    assert len(_catalogs(tmp_path / "cache")) == 2
    with pytest.raises(Exception, match="coco_summary"):
        unmatched.sql("SELECT * FROM coco_summary")


def test_the_catalog_is_read_only_and_the_user_database_is_memory(matched, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALENGINE_CACHE_DIR", str(tmp_path / "cache"))
    con = matched.duckdb(allow_external=True)
    con.execute("CREATE TABLE mine AS SELECT image_id FROM images")
    assert con.execute("SELECT count(*) FROM mine").fetchall() == [(100,)]
    with pytest.raises(Exception, match="read-only"):
        con.execute("CREATE VIEW views.main.other AS SELECT 1")
    locked = sql_views.connect(matched.path)
    assert locked.execute("SELECT count(*) FROM coco_summary").fetchall() == [(12,)]
    assert locked.execute("SELECT database_name FROM duckdb_views() WHERE view_name = 'ap'").fetchall() == [("views",)]
