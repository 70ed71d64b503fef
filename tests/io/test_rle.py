"""COCO mask formats equal pycocotools' (``maskApi.c``) exactly: polygons (``annToRLE``: ``frPyObjects`` + ``merge``),
compressed strings both ways, ``area`` and ``toBbox``, on random cases and on each quirk kept on purpose."""

import numpy as np
import pyarrow as pa
import pytest
from faster_coco_eval.core import mask as fce_mask
from pycocotools import mask as mask_utils

from evalengine.io import rasterise, rle


def _flat_polygons(rows):
    """``(coords, part_offsets, row_parts)`` of rows given as lists of polygons."""
    parts = [p for row in rows for p in row]
    coords = np.array([v for p in parts for v in p], np.float64)
    return coords, np.cumsum([0] + [len(p) for p in parts]), np.cumsum([0] + [len(row) for row in rows])


def _from_polygons(rows, h, w):
    n = len(rows)
    return rasterise.from_polygons(*_flat_polygons(rows), np.full(n, h), np.full(n, w))


def _random_coordinate(rng, size, n):
    """Coordinates that hit the rasteriser's edge cases: on the 1/5 grid, half pixels, the border, outside."""
    kind = rng.integers(0, 5)
    if kind == 0:
        v = rng.uniform(-0.3 * size, 1.3 * size, n)
    elif kind == 1:
        v = rng.integers(-3, 5 * size + 4, n) / 5.0
    elif kind == 2:
        v = rng.integers(-2, 2 * size + 3, n) / 2.0
    elif kind == 3:
        v = rng.choice(np.array([0.0, size, size - 1.0, size - 0.5, 0.5, -0.2, -0.1]), n)
    else:
        v = rng.uniform(0, 1.2, n) + rng.integers(0, size)  # tiny: within about a pixel
    return np.round(v, rng.integers(1, 4)) if rng.random() < 0.5 else v


def _random_polygon(rng, h, w):
    k = rng.integers(3, 11)
    xs, ys = _random_coordinate(rng, w, k), _random_coordinate(rng, h, k)
    if rng.random() < 0.1:  # degenerate: repeated vertices, collinear
        xs[1], ys[1] = xs[0], ys[0]
        xs[2], ys[2] = 2 * xs[1] - xs[0], 2 * ys[1] - ys[0]
    return [float(v) for pair in zip(xs, ys) for v in pair]


def _random_size(rng):
    h, w = rng.integers(1, 50, 2)
    return {0: (1, w), 1: (h, 1)}.get(rng.integers(0, 8), (h, w))


def test_polygons_equal_pycocotools_ann_to_rle():
    rng = np.random.default_rng(14)
    for _ in range(80):  # one image size per batch of rows
        h, w = _random_size(rng)
        rows = [[_random_polygon(rng, h, w) for _ in range(rng.integers(1, 5))] for _ in range(10)]
        rows[0].append(_random_polygon(rng, h, w)[:2 * rng.integers(0, 3)])  # a later part of 0-2 vertices
        counts, offsets = _from_polygons(rows, h, w)
        strings = rle.encode_strings(counts, offsets)
        for row, got in zip(rows, strings):
            want = mask_utils.merge(mask_utils.frPyObjects(row, int(h), int(w)))
            assert got == want["counts"].decode(), (h, w, row)
        want_area = [mask_utils.area(mask_utils.merge(mask_utils.frPyObjects(r, int(h), int(w)))) for r in rows]
        np.testing.assert_array_equal(rle.area(counts, offsets), want_area)


def test_vertices_far_outside_the_image():
    """Segments of 10**5 pixels (half a million upsampled points in pycocotools) crossing or missing the image."""
    rng = np.random.default_rng(4)
    rows = [[[float(v) for v in rng.uniform(-1e5, 1e5, 2 * rng.integers(3, 6))]] for _ in range(20)]
    rows += [[[-1e5, 5.5, 1e5, 7.25, 3.0, 1e5]], [[2.0, -1e5, 9.0, 1e5, 1e5, 1e5]]]
    got = rle.encode_strings(*_from_polygons(rows, 33, 41))
    assert got == [mask_utils.merge(mask_utils.frPyObjects(row, 33, 41))["counts"].decode() for row in rows]


def test_holes_as_separate_parts_are_unions():
    """COCO has no holes: an inner ring given as a second polygon is filled (union), as pycocotools."""
    outer, inner = [2, 2, 20, 2, 20, 20, 2, 20], [6, 6, 14, 6, 14, 14, 6, 14]
    counts, offsets = _from_polygons([[outer, inner], [outer]], 24, 24)
    assert rle.area(counts, offsets).tolist() == [324, 324]
    assert rle.encode_strings(counts, offsets)[0] == mask_utils.merge(
        mask_utils.frPyObjects([outer, inner], 24, 24))["counts"].decode()


def test_odd_coordinate_count_drops_the_last_as_pycocotools():
    poly = [1.5, 1.2, 9.4, 2.0, 7.7, 8.8, 0.3]
    counts, offsets = _from_polygons([[poly]], 12, 10)
    assert rle.encode_strings(counts, offsets) == [mask_utils.merge(mask_utils.frPyObjects([poly], 12, 10))["counts"].decode()]
    assert rasterise.first_bad_polygon(*_flat_polygons([[poly[:6]], [poly[:6], poly]])) == 1


def test_four_number_first_part_is_boxes_as_faster_coco_eval():
    """pycocotools' frPyObjects reads a list whose first part has 4 numbers as boxes and then raises (its frBbox takes
    no list); faster-coco-eval rasterises each part's first 4 numbers as a box and merges: so do we."""
    rows = [[[1, 1, 5, 5]], [[1, 1, 5, 5], [6, 6, 2, 2, 0, 9]], [[1, 1, 5, 5], [6, 6]], [[0.4, 1.7, 3.2, 6.1]]]
    with pytest.raises(TypeError):
        mask_utils.frPyObjects(rows[0], 10, 12)
    got = rle.encode_strings(*_from_polygons(rows, 10, 12))
    assert got == [fce_mask.merge(fce_mask.frPyObjects(r, 10, 12))["counts"].decode() for r in rows]
    boxes = np.array([[0.4, 1.7, 3.2, 6.1], [-2, 3, 30, 1.5], [3, 3, 0, 0]])
    assert rle.encode_strings(*rasterise.from_boxes(boxes, np.full(3, 10), np.full(3, 12))) == [
        s["counts"].decode() for s in mask_utils.frPyObjects(boxes, 10, 12)]


def test_a_row_without_polygons_is_an_empty_mask():
    counts, offsets = _from_polygons([[], [[1, 1, 5, 1, 5, 5]], []], 6, 7)
    assert counts[offsets[0]:offsets[1]].tolist() == [42] and counts[offsets[2]:offsets[3]].tolist() == [42]
    assert rle.area(counts, offsets)[[0, 2]].tolist() == [0, 0]
    poly = [1, 1, 5, 1, 5, 5]
    assert rle.encode_strings(*_from_polygons([[poly]], 0, 7)) == [mask_utils.frPyObjects([poly], 0, 7)[0]["counts"].decode()]


def _column_major_runs(mask):
    flat = mask.reshape(-1, order="F")
    change = np.flatnonzero(np.diff(flat.astype(np.int8))) + 1
    edges = np.concatenate([[0], change, [flat.size]])
    runs = np.diff(edges).tolist()
    return [0] + runs if flat.size and flat[0] else runs


def _random_mask(rng, h, w):
    kind = rng.integers(0, 7)
    mask = np.zeros((h, w), np.uint8)
    if kind == 0:
        return mask
    if kind == 1:
        return mask + 1
    if kind == 2:
        mask[rng.integers(0, h), rng.integers(0, w)] = 1
        return mask
    if kind == 3:  # a rectangle touching borders
        y0, x0 = rng.integers(0, h), rng.integers(0, w)
        mask[y0:, :x0 + 1] = 1
        return mask
    return (rng.random((h, w)) < rng.uniform(0.05, 0.95)).astype(np.uint8)


def test_strings_area_and_bbox_of_encoded_masks_equal_pycocotools():
    rng = np.random.default_rng(3)
    for _ in range(40):
        h, w = _random_size(rng)
        masks = np.stack([_random_mask(rng, h, w) for _ in range(12)], axis=2)
        encoded = mask_utils.encode(np.asfortranarray(masks))
        strings = [e["counts"] for e in encoded]
        counts, offsets = rle.decode_strings(strings)
        for i in range(masks.shape[2]):
            assert counts[offsets[i]:offsets[i + 1]].tolist() == _column_major_runs(masks[:, :, i])
        assert rle.encode_strings(counts, offsets) == [s.decode() for s in strings]
        assert rle.encode_strings(counts, offsets, arrow=True).to_pylist() == [s.decode() for s in strings]
        hs, ws = np.full(12, h), np.full(12, w)
        np.testing.assert_array_equal(rle.area(counts, offsets), mask_utils.area(encoded))
        np.testing.assert_array_equal(rle.to_bbox(counts, offsets, hs, ws), mask_utils.toBbox(encoded))
        assert rle.first_bad_counts(counts, offsets, hs, ws) == -1


def test_decode_rows_equals_pycocotools_on_the_rows_asked():
    """:func:`rle.decode_rows` (one pass: runs, box, area) of a subset of rows, sizes per row, the strings given as a
    sliced Arrow array with nulls elsewhere: pycocotools' ``rleFrString``, ``toBbox`` and ``area`` of each."""
    rng = np.random.default_rng(8)
    for _ in range(60):
        n = int(rng.integers(1, 15))
        sizes = [_random_size(rng) for _ in range(n)]
        encoded = [mask_utils.encode(np.asfortranarray(_random_mask(rng, h, w)[:, :, None]))[0] for h, w in sizes]
        rows = np.flatnonzero(rng.random(n) < 0.6)
        given = [encoded[r]["counts"].decode() for r in rows]
        strings = pa.array(["x", *given, None]).slice(1, len(given))
        h, w = np.array([s[0] for s in sizes]), np.array([s[1] for s in sizes])
        counts, span, box, area = rle.decode_rows(strings, rows, h, w, n)
        for r in range(n):
            runs = counts[span[r, 0]:span[r, 1]].tolist()
            if r in rows:
                assert runs == rle.decode_strings([encoded[r]["counts"]])[0].tolist()
                np.testing.assert_array_equal(box[r], mask_utils.toBbox(encoded[r]))
                assert area[r] == mask_utils.area(encoded[r])
            else:
                assert runs == [] and box[r].tolist() == [0.0] * 4 and area[r] == 0
    empty = rle.decode_rows(pa.array([], pa.string()), np.zeros(0, np.int64), np.ones(2), np.ones(2), 2)
    assert empty[0].size == 0 and empty[1].tolist() == [[0, 0], [0, 0]]


def _uncompressed(counts, h, w):
    """pycocotools' string of uncompressed counts (``frUncompressedRLE``)."""
    return mask_utils.frPyObjects({"counts": list(counts), "size": [h, w]}, h, w)


def test_uncompressed_counts_with_zero_runs_and_large_values():
    """Zero-length runs (not canonical, but valid COCO) and runs up to 2**31 - 1 round-trip as pycocotools; toBbox of
    all-empty foreground runs wraps around in uint32 as pycocotools."""
    rng = np.random.default_rng(5)
    cases = [([5, 0, 7], 3, 4), ([0, 0, 12], 3, 4), ([12], 3, 4), ([0, 12], 3, 4), ([2, 0, 0, 3, 7], 4, 3),
             ([2**31 - 1, 1], 2**31, 1), ([1, 2**31 - 2, 1], 1, 2**31), ([3, 2**30, 2**30 - 3], 2**31, 1)]
    for _ in range(200):
        h, w = _random_size(rng)
        runs = rng.multinomial(h * w, rng.dirichlet(np.ones(rng.integers(1, 9)))).tolist()
        cases.append((runs, h, w))
    strings = [_uncompressed(c, h, w) for c, h, w in cases]
    counts, offsets = rle.decode_strings([s["counts"] for s in strings])
    assert np.split(counts, offsets[1:-1]) and [counts[offsets[i]:offsets[i + 1]].tolist() for i in range(len(cases))] == [
        c for c, _, _ in cases]
    flat = np.concatenate([np.array(c, np.uint32) for c, _, _ in cases])
    assert rle.encode_strings(flat, offsets) == [s["counts"].decode() for s in strings]
    hs, ws = np.array([h for _, h, _ in cases]), np.array([w for _, _, w in cases])
    np.testing.assert_array_equal(rle.to_bbox(counts, offsets, hs, ws), mask_utils.toBbox(strings))
    np.testing.assert_array_equal(rle.area(counts, offsets), mask_utils.area(strings).astype(np.int64))
    assert rle.to_bbox(*rle.decode_strings([_uncompressed([5, 0, 7], 3, 4)["counts"]]), [3], [4]).tolist() == [
        [4.0, 3.0, 2.0**32 - 3, 2.0**32 - 2]]


def test_decode_reads_pyarrow_arrays_bytes_and_stops_at_nul():
    strings = ["h3", "0l11]N0000001O00", "", "61X11"]
    want = rle.decode_strings(strings)
    for other in (pa.array(strings), pa.chunked_array([strings[:1], strings[1:]]), [s.encode() for s in strings],
                  pa.array(["x"] + strings).slice(1), pa.array(strings, pa.large_binary())):
        got = rle.decode_strings(other)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    assert rle.decode_strings(["h3\x00ZZZ"])[0].tolist() == rle.decode_strings(["h3"])[0].tolist() == [120]
    assert rle.decode_strings(["", None])[1].tolist() == [0, 0, 0]
    # an unfinished last value ends at the NUL as C reads it: 'h' (24, more) then NUL (16, last, negative) is -488
    assert rle.decode_strings(["h", "h3h"])[0].tolist() == [2**32 - 488, 120, 2**32 - 488]


def test_validation_names_the_first_bad_row():
    counts = np.array([12, 5, 6, 1, 0, 4, 8], np.uint32)
    offsets = np.array([0, 1, 4, 7])
    assert rle.first_bad_counts(counts, offsets, [3, 3, 3], [4, 4, 4]) == -1
    assert rle.first_bad_counts(counts, offsets, [3, 2, 3], [4, 6, 5]) == 2
    assert rle.first_bad_counts(counts, offsets, [3, 3, 3], [4, 5, 4]) == 1
    good = [0, 0, 4, 0, 4, 4]
    assert rasterise.first_bad_polygon(*_flat_polygons([[good], [], [good, good]])) == -1
    assert rasterise.first_bad_polygon(*_flat_polygons([[good], [[1, 2]]])) == 1  # pycocotools: "not supported"
    assert rasterise.first_bad_polygon(*_flat_polygons([[good], [[]]])) == 1
    assert rasterise.first_bad_polygon(*_flat_polygons([[good], [good, good + [1]]])) == 1
    assert rasterise.first_bad_polygon(*_flat_polygons([[good + [np.nan, 1]], [good]])) == 0
    assert rasterise.first_bad_polygon(*_flat_polygons([[good], [good + [1e9, 1]]])) == 1
    assert rasterise.first_bad_polygon(*_flat_polygons([[[1, 1, 4, 4], [2, 2]]])) == -1  # boxes, as faster-coco-eval


def test_strings_round_trip_every_uint32_run_length():
    """The store keeps every mask as its compressed string (``mask_rle``): decoding what :func:`rle.encode_strings`
    wrote gives the run lengths back for any uint32 values (differences up to ±(2**32 - 1), zero runs, long rows)."""
    rng = np.random.default_rng(11)
    rows = [[0], [2**32 - 1], [2**32 - 1, 0, 2**32 - 1, 0, 1], [0, 2**32 - 1, 0, 2**32 - 1, 0], [7, 0, 0, 0, 2**31]]
    rows += [rng.integers(0, 2**32, rng.integers(1, 40), dtype=np.uint64).tolist() for _ in range(300)]
    rows += [rng.choice([0, 1, 2**16, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1], rng.integers(1, 40)).tolist()
             for _ in range(300)]
    counts = np.concatenate([np.array(r, np.uint32) for r in rows])
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    decoded, decoded_offsets = rle.decode_strings(rle.encode_strings(counts, offsets, arrow=True))
    np.testing.assert_array_equal(decoded_offsets, offsets)
    np.testing.assert_array_equal(decoded, counts)


def test_first_bad_strings_equals_the_regex_and_the_decoded_sums():
    """The ingest's one-pass check of compressed strings finds what the character rule (``[^0-o]|[P-o]$``) and
    :func:`rle.first_bad_counts` of :func:`rle.decode_strings` find, on valid, cut, mis-summed and foreign strings."""
    import re

    rng = np.random.default_rng(17)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        sizes = [_random_size(rng) for _ in range(n)]
        strings = [mask_utils.encode(np.asfortranarray(_random_mask(rng, h, w)[:, :, None]))[0]["counts"].decode()
                   for h, w in sizes]
        hs, ws = np.array([h for h, _ in sizes]), np.array([w for _, w in sizes])
        for r in rng.choice(n, int(rng.integers(0, 3)), replace=True):
            kind = rng.integers(0, 5)
            if kind == 0:
                hs[r] += 1  # runs that sum to another size
            elif kind == 1 and strings[r]:
                strings[r] = strings[r][:-1] + "P"  # a last value that continues
            elif kind == 2:
                at = int(rng.integers(0, len(strings[r]) + 1))
                strings[r] = strings[r][:at] + str(rng.choice(["p", "/", " ", "é", "\x00", "~"])) + strings[r][at:]
            elif kind == 3:
                strings[r] = strings[r][:int(rng.integers(0, len(strings[r]) + 1))]  # cut
            else:
                strings[r] = ""
        bad_char = [i for i, s in enumerate(strings) if re.search(r"[^0-o]|[P-o]$", s)]
        malformed, bad_sum = rle.first_bad_strings(pa.array(strings), hs, ws)
        assert malformed == (bad_char[0] if bad_char else -1)
        if not bad_char:
            assert bad_sum == rle.first_bad_counts(*rle.decode_strings(strings), hs, ws)


def _rle_fr_string(text: bytes) -> list:
    """pycocotools ``rleFrString`` transcribed (64-bit, as the module docstring says), the reference for strings no
    mask encodes: it stops at NUL (the end of the string is one), and a value cut by it reads the NUL as its last
    character."""
    counts, p, ended = [], 0, False
    while not ended and p < len(text) and text[p]:
        x, k, more = 0, 0, True
        while more:
            ended = p >= len(text) or not text[p]
            c = (0 if ended else text[p]) - 48
            x |= (c & 0x1F) << 5 * k
            more, k, p = bool(c & 0x20), k + 1, p + 1
            if not more and c & 0x10:
                x |= -1 << 5 * k
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x & 0xFFFFFFFF)
    return counts


def test_one_character_blocks_decode_and_sum_as_rle_fr_string():
    """Strings of mostly one-character values (``0``…``O``: the eight-at-a-time path) mixed with longer values, NUL
    and foreign bytes, at every offset: decoded as ``rleFrString`` does, and summed by :func:`rle.runs_sum` (through
    :func:`rle.first_bad_strings`) to the decoded sum, or found malformed by the character rule."""
    import re

    rng = np.random.default_rng(23)
    alphabet = np.frombuffer(bytes(range(48, 112)), np.uint8)
    strings = []
    for _ in range(3000):
        n = int(rng.integers(0, 40))
        one = rng.random(n) < rng.uniform(0.5, 1.0)
        chars = np.where(one, rng.integers(48, 80, n), rng.choice(alphabet, n)).astype(np.uint8)
        if rng.random() < 0.1 and n:
            chars[rng.integers(0, n)] = rng.choice([0, 32, 47, 112, 126])
        strings.append(chars.tobytes())
    counts, offsets = rle.decode_strings(strings)
    for i, text in enumerate(strings):
        assert counts[offsets[i]:offsets[i + 1]].tolist() == _rle_fr_string(text)
    sums = [sum(_rle_fr_string(text)) for text in strings]
    hs, ws = np.ones(len(strings), np.int64), np.array(sums, np.int64)
    bad = [i for i, text in enumerate(strings) if re.search(rb"[^0-o]|[P-o]$", text)]
    malformed, bad_sum = rle.first_bad_strings(pa.array(strings, pa.binary()), hs, ws)
    assert malformed == (bad[0] if bad else -1)
    good = [i for i in range(len(strings)) if i not in set(bad)]
    assert rle.first_bad_strings(pa.array([strings[i] for i in good], pa.binary()), hs[good], ws[good]) == (-1, -1)
    ws[good[5]] += 1
    assert rle.first_bad_strings(pa.array([strings[i] for i in good], pa.binary()), hs[good], ws[good]) == (-1, 5)
