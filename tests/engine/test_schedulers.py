"""The match table and every metric are identical whatever the scheduler, including a dask.distributed cluster."""

import pytest
from distributed import LocalCluster

from evalengine.api import ingest_coco, ingest_proposals
from evalengine.errors import EvalEngineError
from evalengine.match.coco import CocoProtocol
from tests.generators import random_coco
from tests.helpers import write_inputs


def _outputs(evaluation):
    dt = evaluation.dt_matches().drop("shard").sort("det_id").collect()
    gt = evaluation.gt_matches().drop("shard").sort("gt_id").collect()
    return dt, gt, evaluation.stats(), evaluation.per_class()


def _store(tmp_path, name, seed=5, n_shards=4):
    gt, dt = random_coco(seed)
    return ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / name, n_shards=n_shards)


def _assert_same(a, b):
    assert a[0].equals(b[0]) and a[1].equals(b[1])
    assert a[2] == b[2]
    assert a[3].equals(b[3])


@pytest.mark.parametrize("scheduler", ["sync", "processes"])
def test_schedulers_agree_with_threads(tmp_path, scheduler):
    want = _outputs(_store(tmp_path, "threads").evaluate(scheduler="threads"))
    got = _outputs(_store(tmp_path, scheduler).evaluate(scheduler=scheduler))
    _assert_same(got, want)


def _proposal_outputs(store, **schedule):
    """The proposal match table, AR, and the repeatability of the run against itself seen through a flip."""
    evaluation = store.evaluate_proposals(**schedule)
    matches = evaluation.gt_matches().drop("shard").sort("gt_id", "budget").collect()
    repeatability = store.repeatability(["flipped"], **schedule)
    return matches, evaluation.average_recall(), repeatability


def _proposal_store(tmp_path, name):
    gt, dt = random_coco(8)
    gt_path, dt_path = write_inputs(tmp_path, gt, dt)
    store = ingest_proposals(gt_path, dt_path, tmp_path / name, n_shards=6)
    return store.add_perturbed_proposals(dt_path, "flipped", "flip")


def test_distributed_cluster_with_two_worker_processes(tmp_path):
    protocol = CocoProtocol(use_cats=False)
    want = _outputs(_store(tmp_path, "local", seed=8, n_shards=6).evaluate(protocol))
    want_proposals = _proposal_outputs(_proposal_store(tmp_path, "p-local"))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        got = _outputs(_store(tmp_path, "cluster", seed=8, n_shards=6).evaluate(protocol, address=address))
        got_proposals = _proposal_outputs(_proposal_store(tmp_path, "p-cluster"), address=address)
    _assert_same(got, want)
    for a, b in zip(got_proposals, want_proposals):  # the hosang and repeatability match tables too
        assert a.equals(b)


def test_unknown_scheduler_is_refused(tmp_path):
    with pytest.raises(EvalEngineError, match="scheduler must be one of"):
        _store(tmp_path, "s").evaluate(scheduler="gpu")


def test_freed_memory_is_kept_where_glibc_allows():
    import platform

    from evalengine.engine.memory import keep_freed_memory

    assert keep_freed_memory() is (platform.libc_ver()[0] == "glibc")
    assert keep_freed_memory() is keep_freed_memory()  # set once per process
