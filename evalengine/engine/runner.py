"""Runs one task per image shard on Dask: in-process threads by default, or a named scheduler.

The kernels release the GIL (numba ``nogil``), so the default threaded scheduler uses every core
without copying shards between processes.
"""

import dask
from dask.callbacks import Callback

from evalengine.errors import EvalEngineError, check_option

SCHEDULERS = ("sync", "threads", "processes")
CONNECT_TIMEOUT = "10s"  # to a dask.distributed scheduler (distributed's default: 30 s)


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
    """
    on_done = on_done or (lambda: None)
    delayed = [dask.delayed(task, pure=False)(*args) for args in shard_args]
    if address is not None:
        from distributed import Client, as_completed

        with Client(address, timeout=CONNECT_TIMEOUT) as client:  # an unreachable address fails in seconds
            futures = client.compute(delayed)
            for _ in as_completed(futures):
                on_done()
            return client.gather(futures)
    check_option("scheduler", scheduler, SCHEDULERS, EvalEngineError)
    with _TaskDone(on_done):
        return list(dask.compute(*delayed, scheduler=_local_scheduler(scheduler), num_workers=workers))
