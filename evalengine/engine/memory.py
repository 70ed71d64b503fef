"""Keep freed memory for reuse instead of returning it to the OS after every shard.

glibc's allocator hands blocks above its mmap threshold straight back to the kernel when they are freed, and
trims the heap's top above its trim threshold, so every shard's arrays were page-faulted in anew: ~500k page
faults and 1.2 s of kernel time when matching 5M detections. Raising both thresholds (the mmap threshold to its
32 MiB maximum) lets the next shard reuse the previous one's pages; a process then holds at most its peak, which
the shard size bounds; between phases the one-shot hands it back (:func:`release_freed_memory`). A no-op on
other C libraries.
"""

import ctypes
import functools

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc's ceiling on 64-bit systems
_TRIM_THRESHOLD = 2**30


@functools.cache
def _libc():
    """The C library of the process as glibc names it, None where there is none of that name."""
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


@functools.cache
def keep_freed_memory() -> bool:
    """Set the thresholds once per process (Dask worker processes call it too); True where glibc took them."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))


def release_freed_memory() -> None:
    """Hand the heap's free pages back to the OS between phases (glibc ``malloc_trim``; a no-op elsewhere): the kept
    freed memory serves the next shard of the same phase, which a phase of other work never reuses. Objects365
    one-shot: peak RSS 956 -> 870 MiB; Arrow's pool releases nothing more."""
    malloc_trim = getattr(_libc(), "malloc_trim", None)
    if malloc_trim is not None:
        malloc_trim(0)
