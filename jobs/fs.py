"""The one filesystem layer of the jobs: where a location is, for Spark and for Python-side I/O.

Inputs are listed and read on the Python side (pyarrow, fsspec); tables are written by Spark and
committed or read by delta-rs. Each of those speaks its own dialect of the same location, so every
path or URI the jobs touch goes through :func:`resolve` once:

==============================  ============================  ==========================  ==========================
written                         ``uri`` (canonical)           ``spark`` (Spark/Hadoop)    ``native`` (pyarrow, fsspec,
                                                                                          delta-rs)
==============================  ============================  ==========================  ==========================
``rel/x``, ``~/x``, ``/abs/x/`` ``/abs/…/x``                  same                        same
``rel:x/y`` (no ``/`` after
the colon: not a scheme)        ``/abs/…/rel:x/y``            same                        same
``file:///x``, ``file:/x``      ``/x``                        ``/x``                      ``/x``
``s3://b/k``                    ``s3://b/k``                  same                        same
``s3a://b/k``, ``s3n://b/k``    as written                    as written                  ``s3://b/k``
``abfs(s)://``, ``gs://``,      as written                    as written                  as written
``hdfs://``, ``memory://`` …
``dbfs:/x``                     ``dbfs:/x``                   ``dbfs:/x``                 ``/dbfs/x`` on Databricks
                                                                                          (the FUSE mount), else
                                                                                          ``dbfs:/x`` (fsspec)
``/dbfs/x``                     ``/dbfs/x``                   ``dbfs:/x`` on Databricks,  ``/dbfs/x``
                                                                                          else ``/dbfs/x``
==============================  ============================  ==========================  ==========================

Trailing ``/`` is removed everywhere. "On Databricks" means the ``/dbfs`` FUSE mount exists.

:func:`filesystem` opens the native form with ``pyarrow.fs.FileSystem.from_uri`` and falls back to
``fsspec`` (wrapped as a pyarrow filesystem) for schemes pyarrow does not know, so callers see one
API. The driver only *lists* files (:func:`list_files`: names and sizes); executors open them by
their source URI (:func:`open_reader`) and read byte ranges.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

__all__ = [
    "DBFS_MOUNT",
    "FileEntry",
    "Location",
    "Reader",
    "filesystem",
    "is_uri",
    "iter_lines",
    "list_files",
    "native_uri",
    "open_reader",
    "replace_text",
    "resolve",
]

#: Where Databricks mounts DBFS on the driver and executors.
DBFS_MOUNT = "/dbfs"

_S3_ALIASES = ("s3a://", "s3n://")


@dataclass(frozen=True, slots=True)
class Location:
    """One location in the three dialects (see the module docstring's table)."""

    uri: str
    """Canonical form: absolute local path or the URI as written (no trailing ``/``)."""
    spark: str
    """What Spark/Hadoop is given (reads and writes of Parquet/Delta)."""
    native: str
    """What pyarrow, fsspec and delta-rs are given."""


def _dbfs_mounted(mounted: bool | None) -> bool:
    return os.path.isdir(DBFS_MOUNT) if mounted is None else mounted


def _strip(uri: str) -> str:
    return uri.rstrip("/") or "/"


def is_uri(location: str) -> bool:
    """Whether ``location`` is a URI (``s3://b/k``, ``file:/x``, ``dbfs:/x``): a scheme of two or more characters
    followed by ``/``. ``backup:2024/x`` or ``12:00`` is a relative path whose first name holds a colon, and
    ``C:\\x`` a Windows drive."""
    scheme = urlparse(str(location)).scheme
    return len(scheme) > 1 and str(location)[len(scheme) + 1:].startswith("/")


def resolve(location: str, *, dbfs_mounted: bool | None = None) -> Location:
    """``location`` (path or URI) in its three dialects.

    Args:
        location: a local path (relative, ``~``, absolute), ``file:`` URI or any scheme's URI.
        dbfs_mounted: whether the Databricks FUSE mount is present (default: look for ``/dbfs``).
    """
    raw = str(location)
    scheme = urlparse(raw).scheme.lower() if is_uri(raw) else ""
    mounted = _dbfs_mounted(dbfs_mounted)
    if scheme == "file":
        uri = _strip(urlparse(raw).path)
        return Location(uri, uri, uri)
    if len(scheme) <= 1:  # no scheme, or a Windows drive letter
        uri = _strip(os.path.abspath(os.path.expanduser(raw)))
        spark = uri
        if mounted and (uri == DBFS_MOUNT or uri.startswith(DBFS_MOUNT + "/")):
            spark = "dbfs:/" + uri[len(DBFS_MOUNT):].lstrip("/")
        return Location(uri, spark, uri)
    uri = _strip(raw)
    if scheme == "dbfs":
        native = _strip(DBFS_MOUNT + "/" + uri.split(":", 1)[1].lstrip("/")) if mounted else uri
        return Location(uri, uri, native)
    native = uri
    for alias in _S3_ALIASES:
        if uri.lower().startswith(alias):
            native = "s3://" + uri[len(alias):]
    return Location(uri, uri, native)


def replace_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write a local text file whole or not at all (a temporary file beside it, then renamed over it), making its
    folder: the summary JSON, an HTML report, a config from ``init``. A write that fails or is interrupted (a
    signal's :class:`~jobs.errors.Terminated`) leaves the file as it was and removes its temporary file. Raises
    ``OSError``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    return path


def native_uri(location: str) -> str:
    """The form pyarrow, fsspec and delta-rs understand (:attr:`Location.native`)."""
    return resolve(location).native


def filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem for ``location`` and the path inside it.

    pyarrow's own filesystems where it knows the scheme (local, S3, GCS, HDFS, ABFS); anything else
    (``dbfs:`` off-cluster, ``memory://`` …) through ``fsspec``, wrapped so callers use one API.
    """
    import pyarrow.fs as pafs

    uri = resolve(location).native
    try:
        return pafs.FileSystem.from_uri(uri)
    except Exception as arrow_error:  # noqa: BLE001 - pyarrow does not know the scheme: try fsspec
        import fsspec

        try:
            fs, path = fsspec.core.url_to_fs(uri)
        except Exception as exc:
            raise exc from arrow_error
        return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


# ------------------------------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One listed file: ``source`` (URI usable by :func:`open_reader`), ``rel`` (path below the root,
    ``/``-separated) and ``size`` in bytes."""

    source: str
    rel: str
    size: int


def list_files(root: str) -> list[FileEntry]:
    """Every file below ``root`` (recursively) with its size; names only, contents are not read.
    Sources are ``<native root>/<rel>``.

    Raises:
        FileNotFoundError: ``root`` does not exist.
    """
    import pyarrow.fs as pafs

    native = resolve(root).native
    fs, path = filesystem(native)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(native)
    if info.type == pafs.FileType.File:
        return [FileEntry(native, os.path.basename(path.rstrip("/")), int(info.size or 0))]
    base = path.rstrip("/")
    out: list[FileEntry] = []
    for fi in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        if fi.type != pafs.FileType.File:
            continue
        rel = fi.path[len(base):].lstrip("/")
        out.append(FileEntry(f"{native}/{rel}", rel, int(fi.size or 0)))
    out.sort(key=lambda e: e.rel)
    return out


class Reader:
    """Random-access reads of one file by URI (executor side). Use as a context manager."""

    def __init__(self, source: str) -> None:
        self.source = source
        fs, path = filesystem(source)
        self.file: pa.NativeFile = fs.open_input_file(path)
        """The open pyarrow file (e.g. for ``pyarrow.parquet.ParquetFile``)."""
        self.size = int(self.file.size())

    def read_at(self, pos: int, n: int) -> bytes:
        """Up to ``n`` bytes starting at ``pos`` (fewer at the end of the file)."""
        if n <= 0 or pos >= self.size:
            return b""
        data = self.file.read_at(n, pos)
        return data if isinstance(data, bytes) else data.to_pybytes()

    def read_all(self) -> bytes:
        return self.read_at(0, self.size)

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_reader(source: str) -> Reader:
    """A :class:`Reader` for ``source`` (a URI as produced by :func:`list_files`)."""
    return Reader(source)


def iter_lines(source: str, chunk: int = 8 << 20, start: int = 0, end: int | None = None,
               first_line: int = 0) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, byte position, line bytes)`` of a file, or of its bytes ``[start, end)`` whose first
    line is number ``first_line + 1`` (a line range planned by :mod:`jobs.ingest.lines`); streamed in
    chunks of ``chunk`` bytes."""
    with open_reader(source) as r:
        stop = r.size if end is None else min(end, r.size)
        pos = start
        line_no = first_line
        rest = b""
        rest_pos = start
        while pos < stop:
            data = r.read_at(pos, min(chunk, stop - pos))
            if not data:
                break
            pos += len(data)
            buf = rest + data
            i = 0
            while True:
                nl = buf.find(b"\n", i)
                if nl < 0:
                    break
                line_no += 1
                yield line_no, rest_pos + i, buf[i:nl]
                i = nl + 1
            rest_pos += i
            rest = buf[i:]
        if rest:
            yield line_no + 1, rest_pos, rest
