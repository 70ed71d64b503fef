"""Runs one task per image shard: in-process threads by default, or a named scheduler.

The kernels release the GIL (numba ``nogil``), so the default threaded scheduler uses every core
without copying shards between processes. Threads and ``sync`` run on a thread pool of their own (a single
in-process plan needs no task graph: Dask costs ~0.15 s of imports per command); ``processes`` and a
``dask.distributed`` address run on Dask, imported then.
"""

import os
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

from evalengine.errors import EvalEngineError, check_option, first_line

SCHEDULERS = ("sync", "threads", "processes")
CONNECT_TIMEOUT = "10s"  # to reach a dask.distributed scheduler (Dask's default waits 30 s)


def run_shard_tasks(task, shard_args, scheduler: str = "threads", address: str | None = None,
                    on_done=None, workers: int | None = None) -> list:
    """Apply ``task`` to each element of ``shard_args``, one task each; return the results in order.

    ``address`` (``tcp://host:port``) sends the tasks to an existing ``dask.distributed`` cluster.
    ``on_done()`` is called as each shard finishes (for progress bars); ``workers`` caps the local
    schedulers' threads or processes (default: one per core).
    A failed (or interrupted) run stops its other tasks before the error propagates: queued ones are cancelled and
    running ones finish, so nothing writes into a folder its caller is about to remove.
    """
    on_done = on_done or (lambda: None)
    if address is not None:
        return _run_distributed(task, shard_args, address, on_done)
    check_option("scheduler", scheduler, SCHEDULERS, EvalEngineError)
    if workers is not None and workers < 1:
        raise EvalEngineError(f"workers must be >= 1, got {workers}")
    if scheduler == "processes":
        return _run_processes(task, shard_args, workers, on_done)
    if scheduler == "sync":  # in the calling thread (a debugger steps into the tasks)
        return [_done(task(*args), on_done) for args in shard_args]
    pool = ThreadPoolExecutor(workers or os.cpu_count() or 1)
    try:
        futures = {pool.submit(task, *args): k for k, args in enumerate(shard_args)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for future in sorted(done, key=futures.get):
                future.result()  # the first failure ends the run
                on_done()
        return [future.result() for future in futures]
    finally:  # after a failure: queued tasks cancelled, running ones finished
        pool.shutdown(wait=True, cancel_futures=True)


def _done(result, on_done):
    on_done()
    return result


def _run_processes(task, shard_args, workers: int | None, on_done) -> list:
    """Dask's multiprocessing scheduler, on a pool of its own to stop when a task fails (Dask leaves the other tasks
    running); the scheduler is passed as the function itself: a name makes Dask import ``distributed`` to look for a
    default client first (~0.5 s per command)."""
    from concurrent.futures import ProcessPoolExecutor

    import dask
    from dask.callbacks import Callback
    from dask.multiprocessing import get, get_context

    class TaskDone(Callback):
        def _posttask(self, key, result, dsk, state, worker_id):
            on_done()

    delayed = [dask.delayed(task, pure=False)(*args) for args in shard_args]
    pool = ProcessPoolExecutor(workers or os.cpu_count() or 1, mp_context=get_context())
    try:
        with TaskDone():
            return list(dask.compute(*delayed, scheduler=get, pool=pool))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _run_distributed(task, shard_args, address: str, on_done) -> list:
    import dask
    from distributed import Client, as_completed

    delayed = [dask.delayed(task, pure=False)(*args) for args in shard_args]

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
