"""Keep freed memory for reuse instead of returning it to the OS after every shard.

glibc's allocator hands blocks above its mmap threshold straight back to the kernel when they are freed, and
trims the heap's top above its trim threshold, so every shard's arrays were page-faulted in anew: ~500k page
faults and 1.2 s of kernel time when matching 5M detections. Raising both thresholds (the mmap threshold to its
32 MiB maximum) lets the next shard reuse the previous one's pages; a process then holds at most its peak, which
the shard size bounds. A no-op on other C libraries.
"""

import ctypes
import functools

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc's ceiling on 64-bit systems
_TRIM_THRESHOLD = 2**30


@functools.cache
def keep_freed_memory() -> bool:
    """Set the thresholds once per process (Dask worker processes call it too); True where glibc took them."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
