"""One exception hierarchy; every message names the file, row or id and the problem."""


class EvalEngineError(Exception):
    """Base class of every error evalengine raises on purpose."""


class InputError(EvalEngineError):
    """An input file or table is malformed; the message names the file and the offending row or id."""


class StoreError(EvalEngineError):
    """A store is missing, incomplete, of another schema version, or would be overwritten."""


class ProtocolError(EvalEngineError):
    """A protocol's parameters are inconsistent (e.g. too many IoU thresholds for the match encoding)."""


class InputWarning(UserWarning):
    """Input that the reference tool accepts but that is probably a mistake (e.g. annotation id 0)."""


class ZeroIdWarning(InputWarning):
    """A ground-truth annotation with id 0, which pycocotools never matches (silenced where the quirk is off)."""


class StoreWarning(UserWarning):
    """Something the user should know about a store: what an overwrite replaced, a wait for another writer."""


def first_line(exc: BaseException) -> str:
    """The first line of a library's error message (its name when the message is empty), for a one-line error."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_option(name: str, value, allowed, error: type = None) -> None:
    """The one check of an option given as a string: ``value`` must be one of ``allowed`` (a ``ProtocolError``
    unless another :class:`EvalEngineError` type is given)."""
    if value not in allowed:
        raise (error or ProtocolError)(f"{name} must be one of {tuple(allowed)}, got {value!r}")
