"""A JSON list parsed in pieces, one per core, by the kernels of :mod:`evalengine.io.json_results` and
:mod:`evalengine.io.json_ground_truth`: the list is cut after a '},' (maybe inside an element: the cut is checked by
the piece before it)."""

from evalengine.io.json_values import LIMIT


def kept_pieces(pieces: list, cuts: list, rest) -> list:
    """The pieces of a list parsed from ``cuts`` on several threads (each a kernel's ``(status, position, …)``) that
    read it in order: each is kept while the one before ended at its cut with :data:`LIMIT` (the cut was between two
    elements); where one ended elsewhere (the cut fell inside an element), ``rest(position)`` parses the rest."""
    kept = []
    for k, piece in enumerate(pieces):
        kept.append(piece)
        if piece[0] == LIMIT and k + 1 < len(pieces):
            if piece[1] == cuts[k + 1]:
                continue
            kept.append(rest(piece[1]))
        break
    return kept
