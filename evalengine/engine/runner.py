"""Runs one task per image shard on Dask: in-process threads by default, or a named scheduler.

The kernels release the GIL (numba ``nogil``), so the default threaded scheduler uses every core
without copying shards between processes.
"""

import dask

SCHEDULERS = ("sync", "threads", "processes")


def run_shard_tasks(task, shard_args, scheduler: str = "threads", address: str | None = None) -> list:
    """Apply ``task`` to each element of ``shard_args`` as Dask tasks; return the results in order.

    ``address`` (``tcp://host:port``) sends the tasks to an existing ``dask.distributed`` cluster.
    """
    delayed = [dask.delayed(task, pure=False)(*args) for args in shard_args]
    if address is not None:
        from distributed import Client

        with Client(address) as client:
            return list(client.compute(delayed, sync=True))
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler must be one of {SCHEDULERS}, got {scheduler!r}")
    return list(dask.compute(*delayed, scheduler=scheduler))
