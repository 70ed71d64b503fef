"""Atomic writes: a table, a run or a store appears whole or not at all.

Locally a write goes to a temporary folder (or file) beside its target and is renamed into place. Object stores
have no rename: a table is written in place and the file that makes it visible (``manifest.json`` of a store,
``protocol.json`` of a match table, the manifest entry of a run) is written last; a failed write deletes what it
wrote.
"""

import os
import re
import shutil
import uuid
from contextlib import contextmanager, suppress

from evalengine.errors import StoreError, first_line
from evalengine.store.location import is_remote, location, remove_tree

# ``.<target>.tmp-<8 hex>`` (being written) and ``.<target>.old-<8 hex>`` (being replaced): the only names a write
# leaves beside its target; left behind only by a killed process, removed under the store's lock (store.lock)
_TEMPORARY = re.compile(r"\..+\.(tmp|old)-[0-9a-f]{8}")


def _temporary(target, kind: str):
    return target.parent / f".{target.name}.{kind}-{uuid.uuid4().hex[:8]}"


def is_temporary(name: str) -> bool:
    """Whether ``name`` is a temporary file or folder of an interrupted write."""
    return _TEMPORARY.fullmatch(name) is not None


@contextmanager
def atomic_folder(target, overwrite: bool = False):
    """Yield a temporary folder that replaces ``target`` only if the block completes.

    On an object store (no rename) the block writes to ``target`` itself, which is emptied first when
    overwriting; the block writes the file that makes its table visible last, and a failure deletes the folder.
    """
    target = location(target)
    if target.exists() and not overwrite:
        raise StoreError(f"{target}: already exists (--overwrite, or overwrite=True in Python, replaces it)")
    if is_remote(target):
        target.require_bucket()
        remove_tree(target)
        try:
            yield target
        except OSError as exc:  # the object store refused a write: say where, leave nothing
            with suppress(OSError):
                remove_tree(target)
            raise StoreError(f"{target}: writing failed ({first_line(exc)})") from exc
        except BaseException:
            with suppress(OSError):
                remove_tree(target)
            raise
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(target, "tmp")
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if target.exists():
        old = _temporary(target, "old")
        os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)


def replace_file(target, write) -> None:
    """Write a file through ``write(path: str)``: locally to a temporary file beside ``target`` renamed over it;
    on an object store straight to ``target`` (an object is replaced whole by one upload)."""
    if is_remote(target):
        write(str(target))
        return
    tmp = _temporary(target, "tmp")
    try:
        write(str(tmp))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def replace_text(target, text: str) -> None:
    replace_file(target, lambda path: location(path).write_text(text))
