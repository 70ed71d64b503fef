"""Single JSON values read from bytes by numba kernels, as Python's json reads them (the pieces of
:mod:`evalengine.io.json_results`): whitespace, numbers (:mod:`evalengine.io.json_numbers`; those it cannot round
by :func:`correctly_rounded`), strings (ASCII, escapes checked), literals and whole values of any nesting (skipped,
checked)."""

import numba
import numpy as np
import pyarrow as pa
from llvmlite import ir
from numba.extending import intrinsic

from evalengine.io.json_numbers import number


@intrinsic
def unmanaged(typingctx, array):
    """``array`` without its reference count (no meminfo, no parent), for an array its caller keeps alive and the
    kernel never returns nor stores: numba counts every pass of an array to a helper (the inlined ones too) with an
    atomic increment and decrement of the array's counter, which took ~65 % of the results kernel's time (perf:
    NRT_incref/NRT_decref) and, the file's bytes being shared by the threads, bounced its cache line between cores;
    a null meminfo skips the atomic operation."""
    def codegen(context, builder, signature, args):
        value = args[0]
        for field in (0, 1):  # meminfo, parent
            value = builder.insert_value(value, ir.Constant(value.type.elements[field], None), field)
        return value
    return array(array), codegen


def scratch() -> tuple:
    """The small work arrays of a kernel's member and number readers — :func:`member`'s other keys (starts, ends) and
    :func:`numbers_at`'s values and spans — made by the caller, which keeps them alive while the kernel uses them
    :func:`unmanaged`."""
    return np.empty(16, np.int64), np.empty(16, np.int64), np.empty(4), np.empty((4, 2), np.int64)


@numba.njit(cache=True, nogil=True, inline="always")
def work_arrays(work):
    """:func:`scratch`'s arrays in a kernel, :func:`unmanaged`."""
    return unmanaged(work[0]), unmanaged(work[1]), unmanaged(work[2]), unmanaged(work[3])


@numba.njit(cache=True, nogil=True, inline="always")
def space(buf, p, n):
    while p < n and (buf[p] == 32 or buf[p] == 10 or buf[p] == 13 or buf[p] == 9):
        p += 1
    return p


@numba.njit(cache=True, nogil=True, inline="always")
def string_end(buf, p, n):
    """End (after the closing quote) of the ASCII string opening at ``p``, its escapes checked; -1 if not one."""
    p += 1
    while p < n:
        c = buf[p]
        if c == 34:
            return p + 1
        if c < 32 or c >= 128:
            return -1
        if c == 92:
            p += 1
            if p >= n:
                return -1
            e = buf[p]
            if e == 117:  # \uXXXX
                for k in range(1, 5):
                    if p + k >= n:
                        return -1
                    h = buf[p + k]
                    if not (48 <= h <= 57 or 65 <= h <= 70 or 97 <= h <= 102):
                        return -1
                p += 4
            elif not (e == 34 or e == 92 or e == 47 or e == 98 or e == 102 or e == 110 or e == 114 or e == 116):
                return -1
        p += 1
    return -1


@numba.njit(cache=True, nogil=True, inline="always")
def literal(buf, p, n, word):
    if p + word.shape[0] > n:
        return -1
    for k in range(word.shape[0]):
        if buf[p + k] != word[k]:
            return -1
    return p + word.shape[0]


TRUE, FALSE, NULL = (np.frombuffer(w, np.uint8).copy() for w in (b"true", b"false", b"null"))


@numba.njit(cache=True, nogil=True, inline="always")
def _member_name(buf, p, n):
    """Position after the key and ':' of an object's member at ``p`` (after whitespace), or -1."""
    p = space(buf, p, n)
    if p >= n or buf[p] != 34:
        return -1
    p = string_end(buf, p, n)
    if p < 0:
        return -1
    p = space(buf, p, n)
    if p >= n or buf[p] != 58:
        return -1
    return p + 1


@numba.njit(cache=True, nogil=True)
def skip_value(buf, p, n, true_, false_, null_):
    """End of the JSON value at ``p`` (any nesting, checked as Python's json checks it), or -1."""
    stack = np.empty(64, np.uint8)  # 1: in a list, 2: in an object
    depth = 0
    while True:
        p = space(buf, p, n)
        if p >= n:
            return -1
        c = buf[p]
        if c == 91 or c == 123:  # '[' or '{': an empty one, or its first element
            if depth == 64:
                return -1
            stack[depth] = 1 if c == 91 else 2
            depth += 1
            p = space(buf, p + 1, n)
            if p < n and buf[p] == (93 if c == 91 else 125):
                p += 1
                depth -= 1
            elif c == 123:
                p = _member_name(buf, p, n)
                if p < 0:
                    return -1
                continue
            else:
                continue
        elif c == 34:
            p = string_end(buf, p, n)
        elif c == 116:
            p = literal(buf, p, n, true_)
        elif c == 102:
            p = literal(buf, p, n, false_)
        elif c == 110:
            p = literal(buf, p, n, null_)
        else:
            p = number(buf, p, n)[0]
        if p < 0:
            return -1
        while True:  # after a value: close containers, or go to the next element
            if depth == 0:
                return p
            p = space(buf, p, n)
            if p >= n:
                return -1
            c = buf[p]
            if c == 44:  # ','
                p += 1
                if stack[depth - 1] == 2:
                    p = _member_name(buf, p, n)
                    if p < 0:
                        return -1
                break
            if c == (93 if stack[depth - 1] == 1 else 125):
                p += 1
                depth -= 1
                continue
            return -1


@numba.njit(cache=True, nogil=True)
def runs_out(buf, start, n):
    """Whether the object at ``start`` is cut by the buffer's end (its braces and brackets never close)."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, n):
        c = buf[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == 92:
                escaped = True
            elif c == 34:
                in_string = False
        elif c == 34:
            in_string = True
        elif c == 123 or c == 91:
            depth += 1
        elif c == 125 or c == 93:
            depth -= 1
            if depth == 0:
                return False
    return True


@numba.njit(cache=True, nogil=True)
def gather(buf, starts, lengths, total):
    """The spans (``starts``, ``lengths``) of ``buf`` one after another (``total`` bytes)."""
    out = np.empty(total, np.uint8)
    at = 0
    for i in range(starts.shape[0]):
        out[at:at + lengths[i]] = buf[starts[i]:starts[i] + lengths[i]]
        at += lengths[i]
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def plain_end(buf, p, n):
    """The first position from ``p`` (``n`` if none) of a byte that is not plain string text: a quote, a backslash,
    a control character or a non-ASCII byte. Sixteen bytes are tested at once (a loop the compiler vectorises), where
    a byte-by-byte walk costs several times more on long strings (compressed masks)."""
    while p + 16 <= n:
        hit = False
        for i in range(16):
            c = buf[p + i]
            hit |= (c == 34) | (c == 92) | (c < 32) | (c >= 128)
        if hit:
            break
        p += 16
    while p < n:
        c = buf[p]
        if c == 34 or c == 92 or c < 32 or c >= 128:
            return p
        p += 1
    return n


@numba.njit(cache=True, nogil=True, inline="always")
def known_key(buf, start, end, key_bytes, key_starts):
    """Which key of the table (``key_bytes`` cut at ``key_starts``) ``buf[start:end]`` is, or -1."""
    for k in range(key_starts.shape[0] - 1):
        a, b = key_starts[k], key_starts[k + 1]
        if b - a == end - start:
            same = True
            for i in range(b - a):
                if buf[start + i] != key_bytes[a + i]:
                    same = False
                    break
            if same:
                return k
    return -1


@numba.njit(cache=True, nogil=True, inline="always")
def member(buf, p, n, key_bytes, key_starts, seen, other_starts, other_ends, n_other):
    """The member name at ``p`` inside an object: ``(k, position after its ':', seen, n_other)`` with ``k`` the key's
    index in the table or -1 for another key (its span kept in ``other_starts``/``other_ends``). Position -1 hands the
    object to the exact reader: no name, an escape in another key, a key given twice, more other keys than there is
    room for, or no ':'."""
    if p >= n or buf[p] != 34:
        return -1, -1, seen, n_other
    key_end = string_end(buf, p, n)
    if key_end < 0:
        return -1, -1, seen, n_other
    k = known_key(buf, p + 1, key_end - 1, key_bytes, key_starts)
    if k < 0:
        if n_other == other_starts.shape[0]:
            return k, -1, seen, n_other
        for i in range(p + 1, key_end - 1):
            if buf[i] == 92:
                return k, -1, seen, n_other
        for j in range(n_other):
            if other_ends[j] - other_starts[j] == key_end - p and (
                    buf[other_starts[j]:other_ends[j]] == buf[p:key_end]).all():
                return k, -1, seen, n_other
        other_starts[n_other], other_ends[n_other] = p, key_end
        n_other += 1
    elif seen & (1 << k):
        return k, -1, seen, n_other
    else:
        seen |= 1 << k
    p = space(buf, key_end, n)
    if p >= n or buf[p] != 58:
        return k, -1, seen, n_other
    return k, space(buf, p + 1, n), seen, n_other


@numba.njit(cache=True, nogil=True, inline="always")
def usual_key(buf, p, n, k, seen, key_bytes, key_starts):
    """The length of key ``k``'s name where its quoted text, not ``seen`` yet, is at ``p``; else 0, and
    :func:`member` reads the text (another key sharing the start, an escape, a repeat, …). The kernels try the key
    that followed the previous one in the last object (writers keep one order), which then costs neither the string
    scan nor the table look-up; no frame nor hand-over changes. (Measured: returning the position after the ':', or
    :func:`member`'s tuple, from here cost most of the gain.)"""
    if k < 0 or seen & (1 << k):
        return 0
    length = key_starts[k + 1] - key_starts[k]
    if p + length + 2 > n or buf[p] != 34 or buf[p + length + 1] != 34:
        return 0
    for i in range(length):
        if buf[p + 1 + i] != key_bytes[key_starts[k] + i]:
            return 0
    return length


@numba.njit(cache=True, nogil=True, inline="always")
def room(table, used):
    """``table`` (rows × columns) with room for a row after its first ``used`` rows: doubled when full."""
    if used < table.shape[0]:
        return table
    grown = np.empty((2 * used, table.shape[1]), table.dtype)
    grown[:used] = table
    return grown


@numba.njit(cache=True, nogil=True, inline="always")
def numbers_at(buf, p, n, count, values, spans):
    """The number at ``p`` (``count`` 1) or the list of exactly ``count`` numbers at ``p`` (``count`` > 1) into
    ``values``, with the text span of each beyond the fast path in ``spans`` ((-1, -1) for an exact one): the position
    after them, or -1 where they are not that."""
    if count > 1:
        if p >= n or buf[p] != 91:
            return -1
        p += 1
    for j in range(count):
        p = space(buf, p, n)
        at = p
        p, _, _, value, exact = number(buf, p, n)
        if p < 0:
            return -1
        values[j] = value
        spans[j, 0], spans[j, 1] = (-1, -1) if exact else (at, p)
        if count > 1:
            p = space(buf, p, n)
            if p >= n or buf[p] != (93 if j == count - 1 else 44):
                return -1
            p += 1
    return p


def correctly_rounded(buf, starts, ends):
    """The numbers of the texts ``buf[starts:ends]`` (those beyond :func:`number`'s fast path) as Python's json reads
    them, by Arrow's correctly rounded parser; None where one is not finite (1e400: Python's json reads inf, which the
    exact reader refuses). (``pyarrow.compute`` is imported here: ~0.07 s of a command's start, and files whose
    numbers all take the fast path never need it.)"""
    import pyarrow.compute as pc

    starts = np.ascontiguousarray(starts, np.int64)
    lengths = np.ascontiguousarray(ends, np.int64) - starts
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = gather(buf, starts, lengths, int(offsets[-1]))
    texts = pa.LargeStringArray.from_buffers(len(lengths), pa.py_buffer(offsets), pa.py_buffer(data))
    converted = pc.cast(texts, pa.float64()).to_numpy()
    return converted if np.isfinite(converted).all() else None


LIMIT, END, MORE, FAIL, NEXT = 0, 1, 2, 3, 5  # what follows an element of a list (:func:`next_element`)


@numba.njit(cache=True, nogil=True, inline="always")
def next_element(buf, p, n, limit):
    """What follows a list's element that ends at ``p`` (whitespace, then ',' or ']'): ``(NEXT, after the ',')``;
    :data:`LIMIT` there when that is at ``limit`` or after it (the piece a reader was given ends); ``(END, at the
    ']')``; :data:`MORE` where the buffer ends first (a block's reader reads on; a whole text has ended); else
    :data:`FAIL`. The one step after an object of the result and ground-truth kernels."""
    p = space(buf, p, n)
    if p >= n:
        return MORE, p
    if buf[p] == 44:
        return (LIMIT if p + 1 >= limit else NEXT), p + 1
    return (END if buf[p] == 93 else FAIL), p
