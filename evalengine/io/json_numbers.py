"""JSON numbers read from bytes by numba kernels as Python's json reads them: an integer token as ``int``, any number
as ``float()`` rounds it (to the nearest double, ties to even), for the kernels of :mod:`evalengine.io.json_results`
and :mod:`evalengine.io.json_ground_truth`.

A number's first 19 significant digits make a decimal significand ``w`` (and exponent ``q``); ``w * 10**q`` is then
Clinger's fast path where ``w <= 2**53`` and ``|q| <= 22`` (one exact IEEE operation), else the Eisel–Lemire
algorithm (Lemire, "Number parsing at a gigabyte per second", Softw. Pract. Exp. 51(8), 2021, §5; fast_float's
``compute_float``), which needs no fallback for a 64-bit ``w`` (Mushtak & Lemire, "Fast number parsing without
fallback", Softw. Pract. Exp. 53(6), 2023). With more digits, the value is ``w * 10**q``'s where ``w`` and ``w + 1``
round alike (the digits dropped lie between them). What is left — a value nearer than that to a halfway point, or
beyond the largest double (Python's float gives inf, which the readers refuse) — is reported as not exact, for
:func:`evalengine.io.json_values.correctly_rounded`.
"""

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.cpython.unsafe.numbers import leading_zeros
from numba.extending import intrinsic

_POWERS = np.array([10.0 ** k for k in range(23)])  # exact doubles
_MAX_EXACT = 2**53
MANTISSA_DIGITS = 10**18  # an integer token's value is exact below this (up to 18 digits; else this, signed)
_KEPT_DIGITS = 19  # significant digits kept in the uint64 significand
_SMALLEST_POWER, _LARGEST_POWER = -342, 308  # below: 0.0; above: beyond the doubles


def _powers_of_five() -> tuple:
    """5**q for q in [-342, 308] to 128 bits, as two uint64 columns (high, low): truncated for q >= 0, rounded up
    for q < 0 (fast_float's ``script/table_generation.py``, on which the no-fallback proof rests)."""
    high, low = [], []
    for q in range(_SMALLEST_POWER, _LARGEST_POWER + 1):
        if q < 0:
            power5 = 5**-q
            z = power5.bit_length()  # the least z with 2**z >= 5**-q (never a power of two)
            c = (2 ** (z + 127) if q >= -27 else 2 ** (2 * z + 128)) // power5 + 1
            while c >= 1 << 128:
                c //= 2
        else:
            c = 5**q
            while c < 1 << 127:
                c *= 2
            while c >= 1 << 128:
                c //= 2
        high.append(c >> 64)
        low.append(c & (2**64 - 1))
    return np.array(high, np.uint64), np.array(low, np.uint64)


_FIVE_HIGH, _FIVE_LOW = _powers_of_five()
_POWERS_OF_TWO = np.array([2.0 ** (e - 1075) for e in range(2047)])  # a double's mantissa (53 bits) to its value
_U1, _U3, _U9, _U10, _U63 = (np.uint64(v) for v in (1, 3, 9, 10, 63))
_PRECISION_MASK = np.uint64(2**64 - 1 >> 55)  # fast_float's, for 52 + 3 bits
_HIDDEN_LIMIT = np.uint64(2**53)


@intrinsic
def _product(typingctx, a, b):
    """The 128-bit product of two uint64 as ``(high, low)`` (LLVM's i128: one ``mul`` on x86-64)."""
    def codegen(context, builder, signature, args):
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        high = builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))
        return context.make_tuple(builder, signature.return_type, (high, builder.trunc(product, ir.IntType(64))))
    return types.UniTuple(types.uint64, 2)(types.uint64, types.uint64), codegen


@intrinsic
def _load8(typingctx, array, index):
    """The 8 bytes of a uint8 array from ``index`` as one little-endian uint64 (one unaligned load; the caller checks
    that they are in the array)."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        pointer = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(pointer, align=1)
    return types.uint64(array, index), codegen


_HIGH_NIBBLES, _PLUS_SIX, _ALL_THREES = (np.uint64(v) for v in (0xF0F0F0F0F0F0F0F0, 0x0606060606060606,
                                                                  0x3333333333333333))
_ZEROS, _LOW_BYTES, _U8, _U16, _U32 = (np.uint64(v) for v in (0x3030303030303030, 0x000000FF000000FF, 8, 16, 32))
_MUL_100_1000000, _MUL_1_10000 = np.uint64(100 + (1000000 << 32)), np.uint64(1 + (10000 << 32))
_U100000000 = np.uint64(10**8)


@numba.njit(cache=True, nogil=True, inline="always")
def _eight_digits(buf, p, n, w):
    """``(position, w)`` after the runs of eight digits from ``p``, each appended to ``w`` (wrapping as digit-by-digit
    appends do): eight bytes tested and converted at once (SWAR: fast_float's ``is_made_of_eight_digits_fast`` and
    ``parse_eight_digits_unrolled``; Lemire, Softw. Pract. Exp. 51(8), 2021, §4); the digits left, fewer than eight,
    are the caller's."""
    while p + 8 <= n:
        chunk = _load8(buf, p)
        if (chunk & _HIGH_NIBBLES) | (((chunk + _PLUS_SIX) & _HIGH_NIBBLES) >> np.uint64(4)) != _ALL_THREES:
            break
        chunk = chunk - _ZEROS
        chunk = chunk * _U10 + (chunk >> _U8)
        chunk = ((chunk & _LOW_BYTES) * _MUL_100_1000000 + ((chunk >> _U16) & _LOW_BYTES) * _MUL_1_10000) >> _U32
        w = w * _U100000000 + chunk
        p += 8
    return p, w


@numba.njit(cache=True, nogil=True, inline="always")
def eisel_lemire(w, q):
    """``w * 10**q`` (``w`` a uint64 above 0) rounded to the nearest double, ties to even: ``(value, finite)``
    (fast_float's ``compute_float`` for binary64)."""
    if q < _SMALLEST_POWER:
        return 0.0, True
    if q > _LARGEST_POWER:
        return np.inf, False
    lz = np.int64(leading_zeros(w))
    w = w << np.uint64(lz)
    index = q - _SMALLEST_POWER
    high, low = _product(w, _FIVE_HIGH[index])
    if high & _PRECISION_MASK == _PRECISION_MASK:  # the low bits may carry: the next 64 bits of 5**q
        second_high = _product(w, _FIVE_LOW[index])[0]
        low = low + second_high
        if second_high > low:
            high = high + _U1
    upperbit = high >> _U63
    shift = upperbit + _U9
    mantissa = high >> shift
    power2 = ((217706 * q) >> 16) + 63 + np.int64(upperbit) - lz + 1023
    if power2 <= 0:  # subnormal (or the least normal, once rounded)
        if 1 - power2 >= 64:
            return 0.0, True
        mantissa = mantissa >> np.uint64(1 - power2)
        mantissa = (mantissa + (mantissa & _U1)) >> _U1
        return float(mantissa) * _POWERS_OF_TWO[1], True
    if low <= _U1 and -4 <= q <= 23 and mantissa & _U3 == _U1 and mantissa << shift == high:
        mantissa = mantissa - _U1  # exactly halfway with an even neighbour below: round down
    mantissa = (mantissa + (mantissa & _U1)) >> _U1
    if mantissa >= _HIDDEN_LIMIT:
        mantissa, power2 = mantissa >> _U1, power2 + 1
    if power2 >= 2047:
        return np.inf, False
    return float(mantissa) * _POWERS_OF_TWO[power2], True


@numba.njit(cache=True, nogil=True)
def _significand(buf, start, end):
    """The first 19 significant digits of the number text ``buf[start:end]`` (digits and at most one '.'): ``(w,
    exponent, dropped)`` with the text's value ``w * 10**exponent`` but for the digits dropped (``dropped``: one of
    them is not 0). For a number of more digits than :func:`number`'s significand holds."""
    w, digits, exponent, dropped, fraction = np.uint64(0), 0, 0, False, False
    for i in range(start, end):
        c = buf[i]
        if c == 46:
            fraction = True
        elif digits < _KEPT_DIGITS:
            w = w * _U10 + np.uint64(c - 48)
            digits += w != 0
            exponent -= fraction
        else:
            exponent += not fraction
            dropped |= c != 48
    return w, exponent, dropped


@numba.njit(cache=True, nogil=True, inline="always")
def number(buf, p, n):
    """A JSON number at ``p``: ``(end, integer token, whole, value as float, exact)``; ``end`` is -1 where the text is
    no number (or the buffer ends inside it). ``whole``: an integer token's value where its magnitude is below
    :data:`MANTISSA_DIGITS`, else that bound (signed). Not ``exact``: the float needs a correctly rounded parser."""
    neg = False
    if p < n and buf[p] == 45:
        neg, p = True, p + 1
    if p >= n or not 48 <= buf[p] <= 57:
        return -1, False, 0, 0.0, False
    start, w = p, np.uint64(0)  # every digit, wrapping beyond 19 (then read again by _significand)
    if buf[p] == 48:
        p += 1
    else:
        p, w = _eight_digits(buf, p, n, w)
        while p < n and 48 <= buf[p] <= 57:
            w = w * _U10 + np.uint64(buf[p] - 48)
            p += 1
    digits, shift, integer = p - start, 0, True  # shift: the digits' exponent (minus those after the '.')
    if p < n and buf[p] == 46:  # '.'
        integer, p = False, p + 1
        fraction = p
        p, w = _eight_digits(buf, p, n, w)
        while p < n and 48 <= buf[p] <= 57:
            w = w * _U10 + np.uint64(buf[p] - 48)
            p += 1
        if p == fraction:
            return -1, False, 0, 0.0, False
        shift, digits = fraction - p, digits + p - fraction
    digits_end, exponent = p, 0
    if p < n and (buf[p] == 101 or buf[p] == 69):  # 'e', 'E'
        integer, p = False, p + 1
        sign = 1
        if p < n and (buf[p] == 43 or buf[p] == 45):
            sign, p = (-1 if buf[p] == 45 else 1), p + 1
        if p >= n or not 48 <= buf[p] <= 57:
            return -1, False, 0, 0.0, False
        e = 0
        while p < n and 48 <= buf[p] <= 57:
            e = min(e * 10 + (buf[p] - 48), 100000)
            p += 1
        exponent += sign * e
    if p >= n:  # the number may go on in the next block
        return -1, False, 0, 0.0, False
    dropped = False
    if digits > _KEPT_DIGITS:  # maybe more significant digits than the significand holds: read them again
        w, shift, dropped = _significand(buf, start, digits_end)
    exponent += shift
    whole = np.int64(w) if integer and digits < _KEPT_DIGITS else MANTISSA_DIGITS
    if neg:
        whole = -whole
    if w == 0:
        value, exact = 0.0, True
    elif not dropped and w <= _MAX_EXACT and -22 <= exponent <= 22:
        value, exact = (float(w) * _POWERS[exponent] if exponent >= 0 else float(w) / _POWERS[-exponent]), True
    else:
        value, exact = eisel_lemire(w, exponent)
        if dropped and exact:
            exact = eisel_lemire(w + _U1, exponent)[0] == value
    if neg and not (integer and w == 0):  # Python's int -0 is 0; the float -0.0 keeps its sign
        value = -value
    return p, integer, whole, value, exact


@numba.njit(cache=True, nogil=True, inline="always")
def whole_integer(buf, start, end):
    """``(fits, value)``: the integer at ``buf[start:end]`` if it is above -2**63 and below 2**63."""
    value, negative = 0, buf[start] == 45
    for i in range(start + negative, end):
        digit = buf[i] - 48
        if value > (2**63 - 1 - digit) // 10:
            return False, 0
        value = value * 10 + digit
    return True, -value if negative else value
