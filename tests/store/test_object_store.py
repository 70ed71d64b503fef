"""A store on an object store (S3, served on loopback by moto): ingest, match on a dask.distributed cluster, metrics,
SQL and the CLI give what the same store in a local folder gives; failed writes leave nothing behind."""

import json
import logging
import os

import polars as pl
import pytest
from distributed import LocalCluster

from evalengine import api
from evalengine.cli import main
from evalengine.errors import EvalEngineError, StoreError
from evalengine.match.coco import CocoProtocol
from evalengine.store.location import RemotePath, location
from tests.generators import random_coco
from tests.helpers import write_inputs

BUCKET = "evalengine-test"


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on 127.0.0.1 and the standard AWS environment pointing at it (inherited by Dask workers)."""
    import boto3  # with moto, a test extra
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    yield f"s3://{BUCKET}"
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    server.stop()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inputs")
    return write_inputs(tmp, *random_coco(11))


def _tables(evaluation):
    return (evaluation.dt_matches().drop("shard").sort("det_id").collect(),
            evaluation.gt_matches().drop("shard").sort("gt_id").collect())


def test_location_parses_local_and_remote(tmp_path):
    assert location(str(tmp_path)) == tmp_path
    assert location(f"file://{tmp_path}") == tmp_path
    remote = location("s3://bucket/some/store/")
    assert isinstance(remote, RemotePath) and str(remote) == "s3://bucket/some/store"
    assert str(remote / "gt" / "shard=0") == "s3://bucket/some/store/gt/shard=0"
    assert remote.parent == location("s3://bucket/some") and remote.name == "store"
    with pytest.raises(StoreError, match="ftp://x/y: unsupported store URL"):
        location("ftp://x/y")


def test_remote_store_equals_local_store_on_a_cluster(tmp_path, s3, inputs):
    local = api.ingest_coco(*inputs, tmp_path / "store", n_shards=3)
    remote = api.ingest_coco(*inputs, f"{s3}/coco", n_shards=3)
    assert isinstance(remote.path, RemotePath)
    assert remote.gt().drop("shard").collect().equals(local.gt().drop("shard").collect())
    assert remote.dt().drop("shard").collect().equals(local.dt().drop("shard").collect())
    want = local.evaluate()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        got = remote.evaluate(address=cluster.scheduler_address)
    assert got.stats() == want.stats()
    for a, b in zip(_tables(got), _tables(want)):
        assert a.equals(b)
    # the table is stored: a reopened store finds it (and its metrics) without matching again
    again = api.open(f"{s3}/coco").evaluate(scheduler="sync")
    assert again.matches_dir == got.matches_dir and again.stats() == want.stats()
    # SQL views read the object store through pyarrow's filesystem (DuckDB sums in parallel: to 1e-12)
    query = "SELECT metric, value FROM coco_summary WHERE run = 'default'"
    remote_summary, local_summary = remote.sql(query), local.sql(query)
    assert remote_summary["metric"].to_list() == local_summary["metric"].to_list() == want.summary()["metric"].to_list()
    assert remote_summary["value"].to_list() == pytest.approx(want.stats(), abs=1e-12)
    assert remote.sql("SELECT count(*) AS n FROM dt").item() == local.dt().collect().height


def test_remote_runs_proposals_and_cli(tmp_path, s3, inputs, capsys):
    gt_path, dt_path = inputs
    target = f"{s3}/runs"
    assert main(["ingest", "coco", "--gt", str(gt_path), "--dt", str(dt_path), "--store", target, "--shards", "2",
                 "--quiet"]) == 0
    assert main(["evaluate", target, "--json", "--quiet"]) == 0
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["coco", "--gt", str(gt_path), "--dt", str(dt_path), "--json", "--quiet"]) == 0
    want = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert got["stats"] == want["stats"]

    store = api.open(target).add_run(dt_path, "again")
    assert store.evaluate(run="again").stats() == got["stats"]
    store = store.add_proposals(dt_path, run="boxes")
    local = api.ingest_gt(gt_path, tmp_path / "p", n_shards=2).add_proposals(dt_path, run="boxes")
    assert (store.evaluate_proposals("boxes").average_recall()
            .equals(local.evaluate_proposals("boxes").average_recall()))
    # replacing a run drops its match tables; the manifest lists every run
    store = store.add_run(dt_path, "again", overwrite=True)
    assert not list(store.path.glob("matches/*/run=again"))
    assert store.runs == ["again", "default"] and list(store.layout.proposal_runs) == ["boxes"]


def test_failed_remote_writes_leave_nothing(tmp_path, s3, inputs):
    gt_path, dt_path = inputs
    bad = tmp_path / "bad.json"
    detections = json.loads(dt_path.read_text())
    detections[3]["image_id"] = 987654321
    bad.write_text(json.dumps(detections))
    with pytest.raises(EvalEngineError, match="987654321"):
        api.ingest_coco(gt_path, bad, f"{s3}/failed", n_shards=2)
    assert not location(f"{s3}/failed").exists()

    store = api.ingest_coco(gt_path, dt_path, f"{s3}/kept", n_shards=2)
    with pytest.raises(StoreError, match="already exists"):
        api.ingest_coco(gt_path, dt_path, f"{s3}/kept", n_shards=2)
    with pytest.raises(EvalEngineError, match="987654321"):
        store.add_run(bad, "broken")
    assert not (store.path / "dt" / "run=broken").exists()
    assert api.open(f"{s3}/kept").runs == ["default"]
    with pytest.raises(StoreError, match="not an evalengine store"):
        api.open(f"{s3}/nothing-here")
    with pytest.raises(StoreError, match="s3://no-such-bucket/store: no bucket 'no-such-bucket' at this endpoint"):
        api.ingest_coco(gt_path, dt_path, "s3://no-such-bucket/store", n_shards=2)


def test_match_tables_on_object_store_list_like_local(tmp_path, s3, inputs):
    """glob over an object store: pathlib's rules (``*`` within a level, ``**`` across levels)."""
    store = api.ingest_coco(*inputs, f"{s3}/glob", n_shards=2)
    store.evaluate(CocoProtocol(use_cats=False))
    local = api.ingest_coco(*inputs, tmp_path / "glob", n_shards=2)
    local.evaluate(CocoProtocol(use_cats=False))
    for pattern in ["*/*/*.parquet", "matches/*/*/protocol.json", "**/part-0.parquet", "gt/shard=?/*"]:
        remote = sorted(str(p).removeprefix(f"{store.path}/") for p in store.path.glob(pattern))
        here = sorted(p.relative_to(local.path).as_posix() for p in local.path.glob(pattern))
        assert remote == here and remote, pattern
    assert pl.read_parquet(str(store.path / "runs" / "part-0.parquet")).height == 1


def test_writers_of_a_remote_store_take_turns_through_a_lease(s3, inputs, monkeypatch):
    """The lease rule of store.lock: a writer waits while another's unexpired lease exists, takes an expired one,
    and removes its own when done."""
    import threading

    from evalengine.errors import StoreWarning
    from evalengine.store import lock

    monkeypatch.setattr(lock, "_POLL_SECONDS", 0.2)
    url = f"{s3}/leased"
    lease = RemotePath(f"{s3}/.leased.lock")
    gt, dt = inputs
    api.ingest_coco(gt, dt, url, n_shards=2)
    assert not lease.exists()
    held, release, order = threading.Event(), threading.Event(), []

    def other_writer():
        with lock.writing(url):
            held.set()
            release.wait(10)
            order.append("other writer done")

    thread = threading.Thread(target=other_writer)
    thread.start()
    held.wait(10)
    threading.Timer(1.5, release.set).start()
    with pytest.warns(StoreWarning, match="another evalengine process holds this store's lease"):
        store = api.open(url).add_run(dt, "second")
    order.append("run added")
    thread.join()
    assert order == ["other writer done", "run added"]
    assert store.runs == ["default", "second"] and not lease.exists()
    lease.write_text(json.dumps({"owner": "a killed writer", "expires": 0}))  # expired: taken at once
    assert api.open(url).add_run(dt, "third").runs == ["default", "second", "third"]
    assert not lease.exists()


def test_batched_accumulation_of_a_remote_store_equals_one_batch(tmp_path, s3):
    """Several category batches on an object store: the match table is split a shard file at a time into a local
    spill (store.spill), with the numbers of one batch."""
    import numpy as np

    from evalengine.metrics.ap import accumulate, category_batches

    gt, dt = random_coco(4)  # detections of 4 categories
    remote = api.ingest_coco(*write_inputs(tmp_path, gt, dt), f"{s3}/batched", n_shards=3).evaluate(scheduler="sync")
    want = remote.accumulate(want_curve=True)
    assert len(category_batches(remote.dt_matches(), want.category_ids, 1)) > 1
    scratch = tmp_path / "spill"
    scratch.mkdir()
    got = accumulate(remote.dt_matches(), remote.gt_matches(), remote.category_ids, remote.protocol,
                     want_curve=True, batch_rows=1, scratch=scratch)
    for name in ("ap", "recall", "precision", "scores"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    assert list(scratch.iterdir()) == []
