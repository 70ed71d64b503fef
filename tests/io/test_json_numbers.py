"""The kernels' number parser (:mod:`evalengine.io.json_numbers`) against Python's json and float.

Every text is read by :func:`~evalengine.io.json_numbers.number` in a numba loop, as the kernels read it; where it
says not exact, by :func:`~evalengine.io.json_values.correctly_rounded` (Arrow's parser), as the kernels then do. The
double must equal ``float(json.loads(text))`` bit for bit (the sign of zero included), the integer token flag and
value Python's ``int``. Texts: shortest and 17-digit reprs of random doubles (every exponent, subnormals), float32
values as detectors write them, decimals of 1–40 digits with exponents from -360 to 330, integers to 10**25, the
exact decimal midpoints between adjacent doubles and texts a digit above and below them, and hand-picked boundaries
(the least subnormal and its half, the largest double and the first text that rounds to inf, 2**53 + 1, …). The
parser must need no fallback for a finite number of at most 19 significant digits (Mushtak & Lemire).
"""

import json
import random
import struct
from decimal import Decimal, localcontext

import numba
import numpy as np
import pytest

from evalengine.io.json_numbers import MANTISSA_DIGITS, number
from evalengine.io.json_values import correctly_rounded

EDGES = ["0", "-0", "0.0", "-0.0", "0e0", "-0e0", "0e-999", "-0.0e+999", "1", "-1", "1e400", "-1e400", "1e-400",
         "5e-324", "4.9e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "3e-324", "2e-324",
         "2.2250738585072011e-308", "2.2250738585072012e-308", "2.2250738585072014e-308", "4.4501477170144023e-308",
         "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308", "179769313486231580793728971405301e276",
         "9007199254740992", "9007199254740993", "9007199254740995", "-9007199254740993", "18446744073709551615",
         "18446744073709551616", "9223372036854775807", "-9223372036854775808", "999999999999999999",
         "1000000000000000000", "123456789012345678901234567890", "0.1", "0.30000000000000004", "1e23", "7e22", "8e22",
         "1.00000000000000011102230246251565404236316680908203125",
         "1.00000000000000011102230246251565404236316680908203124",
         "1.00000000000000011102230246251565404236316680908203126", "0.000000000000000000000000000000000000000001234",
         "123.456e-7", "1E5", "1e+5", "1.5E-5", "9.007199254740993e15", "4503599627370497.5", "4503599627370496.5",
         "2.0", "100.00000000000000000000000000000000000001", "0.99999999999999999999", "7.3177701707893310e15"]


@numba.njit  # (not cached: numba would key it on this file alone, not on the parser it inlines)
def _parse(buf, starts, ends, values, exact, integer, whole):
    n = buf.shape[0]
    for i in range(starts.shape[0]):
        p, integer[i], whole[i], values[i], exact[i] = number(buf, starts[i], n)
        if p != ends[i]:
            exact[i], integer[i], whole[i] = False, False, -1


def _read(texts: list, separator: str = " ") -> tuple:
    """``(values, exact, integer, whole)`` of the texts (each followed by the one-byte ``separator``), the inexact
    values by the kernels' fallback."""
    data = "".join(t + separator for t in texts).encode()
    ends = np.cumsum([len(t) + 1 for t in texts]) - 1
    starts = ends - [len(t) for t in texts]
    m = len(texts)
    values, exact = np.empty(m), np.empty(m, np.bool_)
    integer, whole = np.empty(m, np.bool_), np.empty(m, np.int64)
    buf = np.frombuffer(data, np.uint8)
    _parse(buf, starts, ends, values, exact, integer, whole)
    slow = np.flatnonzero(~exact)
    infinite = np.array([abs(float(json.loads(texts[i]))) == float("inf") for i in slow], bool)
    for i in slow[infinite]:  # Python's float gives inf: the fallback says so (the kernels then give up)
        assert correctly_rounded(buf, starts[i:i + 1], ends[i:i + 1]) is None, texts[i]
        values[i] = float(json.loads(texts[i]))
    finite = slow[~infinite]
    if len(finite):
        values[finite] = correctly_rounded(buf, starts[finite], ends[finite])
    return values, exact, integer, whole


def _significant_digits(text: str) -> int:
    mantissa = text.lstrip("-").lower().split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa.rstrip("0")) if mantissa else 0


def _check(texts: list, separator: str = " ") -> int:
    """Assert every text reads as Python's json reads it; the count read without fallback."""
    values, exact, integer, whole = _read(texts, separator)
    bits = values.view(np.uint64)
    for i, text in enumerate(texts):
        expected = json.loads(text)
        assert bits[i] == struct.unpack("<Q", struct.pack("<d", float(expected)))[0], (text, values[i])
        assert integer[i] == isinstance(expected, int), text
        if integer[i]:
            assert whole[i] == (expected if abs(expected) < MANTISSA_DIGITS else np.sign(expected) * MANTISSA_DIGITS)
        if _significant_digits(text) <= 19 and abs(float(expected)) < float("inf"):
            assert exact[i], f"{text}: a number of at most 19 digits needs no fallback"
    return int(exact.sum())


def _random_doubles(rng: random.Random, n: int) -> list:
    found = []
    while len(found) < n:
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if value == value and abs(value) != float("inf"):
            found.append(value)
    return found


def test_edges():
    assert _check(EDGES) >= len(EDGES) - 8  # beyond the doubles, and texts of more than 19 digits near a tie


@pytest.mark.parametrize("form", ["repr", "17 digits", "25 digits", "float32"])
def test_random_doubles(form):
    rng = random.Random(len(form))
    doubles = _random_doubles(rng, 100_000)
    if form == "float32":  # every float32 pattern: detectors' boxes and scores as Python's json writes them
        singles = np.frombuffer(rng.randbytes(400_000), np.float32)
        doubles = [float(v) for v in singles[np.isfinite(singles)]]
    write = {"repr": repr, "17 digits": lambda v: "%.17g" % v, "25 digits": lambda v: "%.25e" % v,
             "float32": repr}[form]
    texts = [write(v) for v in doubles]
    exact = _check(texts)
    assert exact == len(texts) if form != "25 digits" else exact > 0.99 * len(texts)


def test_random_decimals():
    """Decimals of every length and exponent, as writers write them and as they rarely do."""
    rng = random.Random(7)
    texts = []
    for _ in range(150_000):
        digits = str(rng.randrange(1, 10 ** rng.randrange(1, 41)))
        point = rng.randrange(len(digits) + 1)
        text = (digits[:point] or "0") + ("." + digits[point:] if point < len(digits) else "")
        if rng.random() < 0.5:
            text += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randrange(0, 360))
        elif rng.random() < 0.2:
            text = "0." + "0" * rng.randrange(30) + digits
        texts.append(("-" if rng.random() < 0.3 else "") + text)
    texts += [str(rng.randrange(-10**25, 10**25)) for _ in range(30_000)]
    texts += [f"{rng.randrange(2000)}.{rng.randrange(100):02d}" for _ in range(20_000)]
    _check(texts)


def test_halfway_points():
    """The exact decimal midpoint between two adjacent doubles (ties to even), and texts just above and below it:
    the hardest inputs of correct rounding (hundreds of digits)."""
    rng = random.Random(11)
    texts = []
    with localcontext() as context:
        context.prec = 1200
        for value in _random_doubles(rng, 8000) + [2.0**-1074 * k for k in range(1, 50)] + [2.0**53 + 2 * k for k in range(50)]:
            value = abs(value)
            above = float(np.nextafter(value, np.inf))
            if above == float("inf"):
                continue
            middle = (Decimal(value) + Decimal(above)) / 2
            step = Decimal(10) ** (middle.adjusted() - rng.randrange(17, 60))
            for point in (middle, middle + step, middle - step):
                texts.append(format(point, "e") if abs(point.adjusted()) > 20 else format(point, "f"))
    _check(texts)


@pytest.mark.parametrize("separator", [" ", ",", "]", "/", ":"])
def test_eight_digit_runs(separator):
    """Digits read eight at a time (SWAR) and the rest one by one: integer parts and fractions of every length from 1
    to 40 (17+ digit mantissas, long fractions, leading zeros), with and without exponents, each followed by a byte
    that ends a number ('/' and ':' are the bytes beside '0' and '9')."""
    rng = random.Random(13 + ord(separator))
    texts = []
    for _ in range(40_000):
        whole = str(rng.randrange(1, 10 ** rng.randrange(1, 41)))
        fraction = "".join(rng.choice("0123456789") for _ in range(rng.randrange(0, 41)))
        text = whole + ("." + fraction if fraction else "")
        if rng.random() < 0.3:
            text = "0." + "0" * rng.randrange(0, 20) + whole
        if rng.random() < 0.4:
            text += rng.choice("eE") + rng.choice(["", "-", "+"]) + str(rng.randrange(0, 330))
        texts.append(("-" if rng.random() < 0.2 else "") + text)
    texts += [text for k in range(1, 41) for text in ("9" * k, "0." + "9" * k, "1" + "0" * k)]
    _check(texts, separator)
