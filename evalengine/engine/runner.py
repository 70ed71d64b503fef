"""Runs one task per image shard on Dask: in-process threads by default, or a named scheduler.

The kernels release the GIL (numba ``nogil``), so the default threaded scheduler uses every core
without copying shards between processes.
"""

import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import dask
from dask.callbacks import Callback

from evalengine.errors import EvalEngineError, check_option, first_line

SCHEDULERS = ("sync", "threads", "processes")
CONNECT_TIMEOUT = "10s"  # to reach a dask.distributed scheduler (Dask's default waits 30 s)


def _local_scheduler(name: str):
    """Dask's local scheduler by name, as the function itself: a name makes Dask import ``distributed`` to look for
    a default client first (~0.5 s per command)."""
    if name == "threads":
        from dask.threaded import get
    elif name == "processes":
        from dask.multiprocessing import get
    else:
        from dask.local import get_sync as get
    return get


class _TaskDone(Callback):
    """Calls ``on_done()`` after each task of the local schedulers finishes."""

    def __init__(self, on_done):
        super().__init__()
        self.on_done = on_done

    def _posttask(self, key, result, dsk, state, worker_id):
        self.on_done()


def run_shard_tasks(task, shard_args, scheduler: str = "threads", address: str | None = None,
                    on_done=None, workers: int | None = None) -> list:
    """Apply ``task`` to each element of ``shard_args`` as Dask tasks; return the results in order.

    ``address`` (``tcp://host:port``) sends the tasks to an existing ``dask.distributed`` cluster.
    ``on_done()`` is called as each shard finishes (for progress bars); ``workers`` caps the local
    schedulers' threads or processes (default: one per core).
    A failed (or interrupted) run stops its other tasks before the error propagates: queued ones are cancelled and
    running ones finish, so nothing writes into a folder its caller is about to remove.
    """
    on_done = on_done or (lambda: None)
    delayed = [dask.delayed(task, pure=False)(*args) for args in shard_args]
    if address is not None:
        return _run_distributed(delayed, address, on_done)
    check_option("scheduler", scheduler, SCHEDULERS, EvalEngineError)
    if workers is not None and workers < 1:
        raise EvalEngineError(f"workers must be >= 1, got {workers}")
    pool = _pool(scheduler, workers)
    try:
        with _TaskDone(on_done):
            return list(dask.compute(*delayed, scheduler=_local_scheduler(scheduler), pool=pool))
    finally:
        if pool is not None:  # after a failure: queued tasks cancelled, running ones finished
            pool.shutdown(wait=True, cancel_futures=True)


def _pool(scheduler: str, workers: int | None):
    """The local scheduler's own pool, to stop when a task fails (Dask leaves the other tasks running)."""
    workers = workers or os.cpu_count() or 1
    if scheduler == "threads":
        return ThreadPoolExecutor(workers)
    if scheduler == "processes":
        from dask.multiprocessing import get_context

        return ProcessPoolExecutor(workers, mp_context=get_context())
    return None


def _run_distributed(delayed, address: str, on_done) -> list:
    from distributed import Client, as_completed

    try:
        client = Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise EvalEngineError(f"{address}: cannot reach the Dask scheduler ({first_line(exc)})") from exc
    with client:
        futures = client.compute(delayed)
        try:
            for _ in as_completed(futures):
                on_done()
            return client.gather(futures)
        except BaseException:
            client.cancel(futures)
            raise
