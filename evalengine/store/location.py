"""Where a store lives: a local folder, or an object-store URL (``s3://bucket/prefix``, ``gs://bucket/prefix``).

A local folder stays a :class:`pathlib.Path`. A URL becomes a :class:`RemotePath`, the part of pathlib's API the
store uses, over :mod:`pyarrow.fs`; Polars and pyarrow read and write the URL itself. Both take credentials and
endpoints from the standard environment (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``,
``GOOGLE_APPLICATION_CREDENTIALS``, …), so a URL and an environment are all that Dask workers need.

Object stores have no rename: a table written to one goes straight to its place, and the file that makes it
visible (``manifest.json`` of a store, ``protocol.json`` of a match table, the manifest entry of a run) is written
last; a failed write deletes what it wrote (see :mod:`evalengine.store.commit`).
"""

import fnmatch
import shutil
from functools import lru_cache
from pathlib import Path

from evalengine.errors import StoreError, first_line

SCHEMES = ("s3", "gs")


def location(path):
    """``path`` as a :class:`pathlib.Path` (a local folder or ``file://`` URL) or a :class:`RemotePath`."""
    if isinstance(path, (Path, RemotePath)):
        return path
    text = str(path)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return Path(text)
    if scheme == "file":
        return Path(rest)
    if scheme not in SCHEMES:
        raise StoreError(f"{text}: unsupported store URL (a local folder, or one of {', '.join(SCHEMES)}://)")
    return RemotePath(text)


def is_remote(path) -> bool:
    return isinstance(path, RemotePath)


@lru_cache(maxsize=None)
def _filesystem(scheme: str, bucket: str):
    """One ``pyarrow.fs`` filesystem per bucket and process (Dask workers make their own from the URL and
    environment); pyarrow.fs is imported here, on first use (~30 ms that local stores never need)."""
    import pyarrow.fs

    return pyarrow.fs.FileSystem.from_uri(f"{scheme}://{bucket}")[0]


class RemotePath:
    """An object-store location with the pathlib methods the store uses (``/``, ``exists``, ``glob``, …)."""

    __slots__ = ("scheme", "key")

    def __init__(self, url: str):
        scheme, _, key = str(url).partition("://")
        self.scheme, self.key = scheme, key.strip("/")

    @property
    def fs(self):
        return _filesystem(self.scheme, self.key.split("/", 1)[0])

    def __str__(self) -> str:
        return f"{self.scheme}://{self.key}"

    def __repr__(self) -> str:
        return f"RemotePath({str(self)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, RemotePath) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __truediv__(self, other) -> "RemotePath":
        return RemotePath(f"{self}/{other}")

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def suffix(self) -> str:
        return Path(self.name).suffix

    @property
    def parent(self) -> "RemotePath":
        return RemotePath(f"{self.scheme}://{self.key.rsplit('/', 1)[0]}")

    def _type(self) -> str:
        try:
            return self.fs.get_file_info(self.key).type.name
        except OSError as exc:  # no such endpoint, credentials refused, …
            raise StoreError(f"{self}: cannot be read ({first_line(exc)})") from exc

    def require_bucket(self) -> None:
        """A located error unless the bucket exists (writes would otherwise fail object by object)."""
        bucket = RemotePath(f"{self.scheme}://{self.key.split('/', 1)[0]}")
        if not bucket.exists():
            raise StoreError(f"{self}: no bucket '{bucket.key}' at this endpoint (create it first; the endpoint and "
                             "credentials come from the environment)")

    def exists(self) -> bool:
        return self._type() != "NotFound"

    def is_file(self) -> bool:
        return self._type() == "File"

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: object stores have no folders, a key's prefix exists once an object is under it."""

    def read_text(self) -> str:
        with self.fs.open_input_stream(self.key) as stream:
            return stream.read().decode()

    def write_text(self, text: str) -> None:
        with self.fs.open_output_stream(self.key) as stream:
            stream.write(text.encode())

    def upload(self, local_file) -> None:
        """Copy ``local_file`` to this key (streamed in parts)."""
        with open(local_file, "rb") as source, self.fs.open_output_stream(self.key) as stream:
            shutil.copyfileobj(source, stream, 8 << 20)

    def unlink(self, missing_ok: bool = False) -> None:
        if missing_ok and not self.exists():
            return
        self.fs.delete_file(self.key)

    def glob(self, pattern: str):
        """Objects and prefixes below this one matching ``pattern`` (pathlib's rules: ``*`` within a level,
        ``**`` any number of levels)."""
        parts = pattern.split("/")
        fixed = 0  # leading levels without wildcards: only the objects below them are listed
        while fixed < len(parts) - 1 and not any(c in parts[fixed] for c in "*?["):
            fixed += 1
        base = "/".join([self.key, *parts[:fixed]])
        from pyarrow.fs import FileSelector

        below = self.fs.get_file_info(FileSelector(base, recursive=True, allow_not_found=True))
        for info in below:
            if _matches(parts[fixed:], info.path[len(base) + 1:].split("/")):
                yield RemotePath(f"{self.scheme}://{info.path}")


def _matches(pattern: list, parts: list) -> bool:
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pattern[0]) and _matches(pattern[1:], parts[1:])


def remove_tree(path) -> None:
    """Delete a folder (or every object under a prefix) if it exists."""
    if is_remote(path):
        if path.exists():
            path.fs.delete_dir(path.key)
    else:
        shutil.rmtree(path, ignore_errors=True)
