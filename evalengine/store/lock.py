"""One writer at a time per store; readers see a consistent store.

A local store is locked through ``.<store>.lock``, a file beside its folder (beside, not inside: the folder is
replaced whole when a store is overwritten, and a new store has no folder yet) that exists while it is held:
writers hold an exclusive ``flock`` on it, SQL readers a shared one, so a reader never sees a run half replaced
and two writers never both read-modify-write the manifest. A second writer waits, after saying so; locks go with
their process, a killed writer holds none (and leaves an empty lock file, reused by the next one). Whoever takes the write lock first removes what killed writers left (temporary folders of
:mod:`evalengine.store.commit`).

Object stores have no locks: a writer leaves a lease, ``.<store>.lock`` beside the store's prefix holding its
owner and expiry (:data:`LEASE_SECONDS`, renewed by nothing: a write longer than that must not overlap another),
waits while another unexpired lease exists, and reads its own lease back before writing (the later of two
simultaneous writers finds the other's owner and waits). Readers of an object store take no lease.
"""

import json
import os
import time
import uuid
import warnings
from contextlib import contextmanager, suppress
from pathlib import Path

from evalengine.errors import StoreWarning
from evalengine.store.commit import is_temporary
from evalengine.store.location import is_remote, location, remove_tree

LEASE_SECONDS = 6 * 3600
_POLL_SECONDS = 1.0


def lock_path(root):
    """The lock (a local file) or lease (an object) of the store at ``root``."""
    return root.parent / f".{root.name}.lock"


def _absolute(root):
    root = location(root)
    return root if is_remote(root) else Path(os.path.abspath(root))


@contextmanager
def writing(root, clean: bool = True):
    """Hold the store's write lock (waiting for another writer to finish); ``clean``: first remove what killed
    writers left."""
    root = _absolute(root)
    with (_lease(root) if is_remote(root) else _flock(root, exclusive=True)):
        if clean and not is_remote(root):
            remove_temporaries(root)
        yield root


@contextmanager
def reading(root):
    """Hold the store's read lock while a query reads several of its files (no lease on object stores)."""
    root = _absolute(root)
    if is_remote(root):
        yield root
        return
    with _flock(root, exclusive=False, optional=True):
        yield root


def temporaries(root) -> list:
    """The temporary files and folders interrupted writes left beside and inside a local store (where
    :mod:`evalengine.store.commit` makes them: beside a table, a run, a match table or the store)."""
    root = Path(root)
    folders = [root.parent, root]
    if root.is_dir():
        levels = [entry for entry in root.iterdir() if entry.is_dir() and not is_temporary(entry.name)]
        folders += levels
        tables = [entry for level in levels for entry in level.iterdir()
                  if level.name in ("matches", "hprs") and entry.is_dir() and not is_temporary(entry.name)]
        folders += tables  # and a match table's runs, where the files the SQL views read are kept (curve, order)
        folders += [run for table in tables if table.parent.name == "matches" for run in table.iterdir()
                    if run.is_dir() and not is_temporary(run.name)]
    found = []
    for folder in folders:
        with suppress(OSError):
            names = [entry for entry in folder.iterdir() if is_temporary(entry.name)]
            found += [entry for entry in names if folder != root.parent or entry.name.startswith(f".{root.name}.")]
    return sorted(found)


def remove_temporaries(root) -> list:
    """Remove :func:`temporaries` (call under the write lock: no writer is running); return what was removed."""
    found = temporaries(root)
    for entry in found:
        if entry.is_dir():
            remove_tree(entry)
        else:
            entry.unlink(missing_ok=True)
    return found


@contextmanager
def _flock(root, exclusive: bool, optional: bool = False):
    """``flock`` on the lock file, removed by the last holder: whoever locks a file checks it is still the one at the
    path (else it was removed meanwhile and the lock is taken again on the new one)."""
    import fcntl

    path = lock_path(root)
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    warned = False
    while True:
        try:
            if not optional:  # a new store's folder may be several levels deep
                path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            if optional:  # a read-only location: nobody can be writing there through us
                yield
                return
            raise
        try:
            fcntl.flock(descriptor, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            if not warned:
                warnings.warn(f"{root}: another evalengine process is writing to this store (or reading it); "
                              "waiting for it to finish", StoreWarning, stacklevel=4)
                warned = True
            fcntl.flock(descriptor, mode)
        if _same_file(descriptor, path):
            break
        os.close(descriptor)
    try:
        yield
    finally:
        try:  # the last holder removes the file (a reader can tell it is the last by taking the lock exclusively)
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _same_file(descriptor, path):
                path.unlink()
        except OSError:
            pass
        os.close(descriptor)  # releases the lock


def _same_file(descriptor: int, path) -> bool:
    try:
        return os.path.samestat(os.fstat(descriptor), os.stat(path))
    except FileNotFoundError:
        return False


@contextmanager
def _lease(root):
    root.require_bucket()
    path = lock_path(root)
    owner = uuid.uuid4().hex
    warned = False
    while True:
        held = _read_lease(path)
        if held is None or held["expires"] < time.time():
            path.write_text(json.dumps({"owner": owner, "expires": time.time() + LEASE_SECONDS}))
            time.sleep(_POLL_SECONDS / 4)  # a simultaneous writer's lease lands in this window: the last one wins
            held = _read_lease(path)
            if held is not None and held["owner"] == owner:
                break
        if not warned:
            warnings.warn(f"{root}: another evalengine process holds this store's lease ({path}); waiting for it "
                          "to finish", StoreWarning, stacklevel=3)
            warned = True
        time.sleep(_POLL_SECONDS)
    try:
        yield
    finally:
        with suppress(OSError):
            held = _read_lease(path)
            if held is not None and held["owner"] == owner:
                path.unlink(missing_ok=True)


def _read_lease(path):
    """The lease at ``path``, None if there is none (an object is uploaded whole: an unreadable one is no lease)."""
    try:
        lease = json.loads(path.read_text())
        return {"owner": str(lease["owner"]), "expires": float(lease["expires"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None
