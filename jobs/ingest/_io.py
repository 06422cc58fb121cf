"""File access for the ingestion jobs: one small layer over ``pyarrow.fs`` (fallback ``fsspec``).

The driver only *lists* files (names and sizes, :func:`list_files`); executors open them by their
source URI (:func:`open_reader`) and read byte ranges. Local paths, ``file://``, ``hdfs://``, ``s3://``,
``gs://``, ``abfs(s)://`` go through ``pyarrow.fs.FileSystem.from_uri``; anything pyarrow does not know
(``dbfs:/`` off-cluster, ``memory://`` …) through ``fsspec``. On Databricks ``dbfs:/x`` is read through
the local FUSE mount ``/dbfs/x`` when it exists.

"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlparse

__all__ = [
    "FileEntry",
    "Reader",
    "list_files",
    "normalise_uri",
    "open_reader",
]

@dataclass(frozen=True, slots=True)
class FileEntry:
    """One listed file: ``source`` (URI usable by :func:`open_reader`), ``rel`` (path below the root,
    ``/``-separated) and ``size`` in bytes."""

    source: str
    rel: str
    size: int


def normalise_uri(uri: str) -> str:
    """An absolute URI for ``uri``: relative local paths become absolute, ``dbfs:/x`` becomes ``/dbfs/x``
    when that FUSE mount exists, everything else is returned unchanged (trailing ``/`` removed)."""
    uri = str(uri)
    scheme = urlparse(uri).scheme
    if scheme == "dbfs":
        local = "/dbfs/" + uri.split(":", 1)[1].lstrip("/")
        if os.path.exists("/dbfs"):
            return local.rstrip("/") or "/"
        return uri.rstrip("/")
    if scheme == "file":
        return urlparse(uri).path.rstrip("/") or "/"
    if len(scheme) <= 1:  # no scheme, or a Windows drive letter
        return os.path.abspath(uri).rstrip("/") or "/"
    return uri.rstrip("/")


def _filesystem(uri: str):
    """``(kind, fs, path)`` for a normalised URI: kind is ``"arrow"`` or ``"fsspec"``."""
    import pyarrow.fs as pafs

    try:
        fs, path = pafs.FileSystem.from_uri(uri)
        return "arrow", fs, path
    except Exception:  # noqa: BLE001 - pyarrow does not know the scheme: try fsspec
        import fsspec

        fs, path = fsspec.core.url_to_fs(uri)
        return "fsspec", fs, path


def list_files(root: str) -> list[FileEntry]:
    """Every file below ``root`` (recursively) with its size; names only, contents are not read.

    Raises:
        FileNotFoundError: ``root`` does not exist.
    """
    root = normalise_uri(root)
    kind, fs, path = _filesystem(root)
    out: list[FileEntry] = []
    if kind == "arrow":
        import pyarrow.fs as pafs

        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(root)
        if info.type == pafs.FileType.File:
            return [FileEntry(root, os.path.basename(path), int(info.size or 0))]
        base = path.rstrip("/")
        for fi in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
            if fi.type != pafs.FileType.File:
                continue
            rel = fi.path[len(base):].lstrip("/")
            out.append(FileEntry(f"{root}/{rel}", rel, int(fi.size or 0)))
    else:
        if not fs.exists(path):
            raise FileNotFoundError(root)
        if fs.isfile(path):
            return [FileEntry(root, os.path.basename(path), int(fs.size(path) or 0))]
        base = path.rstrip("/")
        for p, det in fs.find(path, detail=True).items():
            if det.get("type") == "directory":
                continue
            rel = p[len(base):].lstrip("/")
            out.append(FileEntry(f"{root}/{rel}", rel, int(det.get("size") or 0)))
    out.sort(key=lambda e: e.rel)
    return out


class Reader:
    """Random-access reads of one file by URI (executor side). Use as a context manager."""

    def __init__(self, source: str) -> None:
        self.source = source
        kind, fs, path = _filesystem(normalise_uri(source))
        self._kind = kind
        if kind == "arrow":
            self._f = fs.open_input_file(path)
            self.size = int(self._f.size())
        else:
            self._f = fs.open(path, "rb")
            self.size = int(fs.size(path))

    def read_at(self, pos: int, n: int) -> bytes:
        """Up to ``n`` bytes starting at ``pos`` (fewer at the end of the file)."""
        if n <= 0 or pos >= self.size:
            return b""
        if self._kind == "arrow":
            data = self._f.read_at(n, pos)
            return data if isinstance(data, bytes) else data.to_pybytes()
        self._f.seek(pos)
        return self._f.read(n)

    def read_all(self) -> bytes:
        return self.read_at(0, self.size)

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_reader(source: str) -> Reader:
    """A :class:`Reader` for ``source`` (a URI as produced by :func:`list_files`)."""
    return Reader(source)
