"""jobs.fs: one location, three dialects (canonical, Spark, pyarrow/fsspec/delta-rs), and file access."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from jobs import fs

# (written, dbfs mounted, canonical uri, spark, native)
TABLE = [
    ("/data/in/", False, "/data/in", "/data/in", "/data/in"),
    ("file:///data/in", False, "/data/in", "/data/in", "/data/in"),
    ("file:/data/in/", False, "/data/in", "/data/in", "/data/in"),
    ("s3://bucket/k/", False, "s3://bucket/k", "s3://bucket/k", "s3://bucket/k"),
    ("s3a://bucket/k", False, "s3a://bucket/k", "s3a://bucket/k", "s3://bucket/k"),
    ("s3n://bucket/k", False, "s3n://bucket/k", "s3n://bucket/k", "s3://bucket/k"),
    ("abfss://c@acct.dfs.core.windows.net/p", False, "abfss://c@acct.dfs.core.windows.net/p",
     "abfss://c@acct.dfs.core.windows.net/p", "abfss://c@acct.dfs.core.windows.net/p"),
    ("abfs://c@acct.dfs.core.windows.net/p", False, "abfs://c@acct.dfs.core.windows.net/p",
     "abfs://c@acct.dfs.core.windows.net/p", "abfs://c@acct.dfs.core.windows.net/p"),
    ("gs://bucket/p/", False, "gs://bucket/p", "gs://bucket/p", "gs://bucket/p"),
    ("hdfs://nn:8020/p", False, "hdfs://nn:8020/p", "hdfs://nn:8020/p", "hdfs://nn:8020/p"),
    ("dbfs:/mnt/audit/", True, "dbfs:/mnt/audit", "dbfs:/mnt/audit", "/dbfs/mnt/audit"),
    ("dbfs:/mnt/audit", False, "dbfs:/mnt/audit", "dbfs:/mnt/audit", "dbfs:/mnt/audit"),
    ("/dbfs/mnt/audit", True, "/dbfs/mnt/audit", "dbfs:/mnt/audit", "/dbfs/mnt/audit"),
    ("/dbfs/mnt/audit", False, "/dbfs/mnt/audit", "/dbfs/mnt/audit", "/dbfs/mnt/audit"),
]


@pytest.mark.parametrize(("written", "mounted", "uri", "spark", "native"), TABLE)
def test_mapping_table(written, mounted, uri, spark, native) -> None:
    assert fs.resolve(written, dbfs_mounted=mounted) == fs.Location(uri, spark, native)


def test_relative_and_home_paths_become_absolute(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert fs.resolve("in/x", dbfs_mounted=False).uri == str(tmp_path / "in" / "x")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert fs.resolve("~/y/", dbfs_mounted=False).native == str(tmp_path / "y")


@pytest.mark.parametrize("written", ["backup:2024-03-04/offsets", "caps:old", "T12:00/x"])
def test_a_relative_path_with_a_colon_is_a_path_not_a_uri(tmp_path, monkeypatch, written) -> None:
    """A URI's scheme is followed by ``/``: ``backup:2024-03-04/offsets`` is a folder of the working directory (it
    was taken as the URI of a scheme ``backup``, which no filesystem knows)."""
    monkeypatch.chdir(tmp_path)
    assert fs.resolve(written, dbfs_mounted=False) == fs.Location(*[str(tmp_path / written)] * 3)


def test_dbfs_is_read_through_the_fuse_mount_when_present(monkeypatch) -> None:
    monkeypatch.setattr(fs, "DBFS_MOUNT", "/no/such/mount")
    assert fs.native_uri("dbfs:/x") == "dbfs:/x"
    monkeypatch.setattr(fs, "DBFS_MOUNT", os.path.dirname(os.path.abspath(__file__)))
    assert fs.native_uri("dbfs:/x") == os.path.dirname(os.path.abspath(__file__)) + "/x"


def test_listing_and_reading_local_files(tmp_path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "one.log").write_bytes(b"0123456789")
    (tmp_path / "a" / "two.jsonl").write_bytes(b'{"k": 1}\n\n{"k": 2}')
    entries = fs.list_files(f"file://{tmp_path}/a/")
    assert [(e.rel, e.size) for e in entries] == [("b/one.log", 10), ("two.jsonl", 18)]
    assert entries[0].source == f"{tmp_path}/a/b/one.log"
    with fs.open_reader(entries[0].source) as r:
        assert (r.size, r.read_at(3, 4), r.read_at(8, 100), r.read_at(10, 1)) == (10, b"3456", b"89", b"")
    assert list(fs.iter_lines(entries[1].source, chunk=4)) == [(1, 0, b'{"k": 1}'), (2, 9, b""), (3, 10, b'{"k": 2}')]
    assert fs.list_files(entries[0].source) == [fs.FileEntry(entries[0].source, "one.log", 10)]
    with pytest.raises(FileNotFoundError):
        fs.list_files(str(tmp_path / "missing"))


def test_schemes_pyarrow_does_not_know_go_through_fsspec() -> None:
    import fsspec

    mem = fsspec.filesystem("memory")
    mem.pipe("/epoch-audit-fs-test/x/seg.log", b"abcdef")
    try:
        entries = fs.list_files("memory://epoch-audit-fs-test/")
        assert [(e.rel, e.size) for e in entries] == [("x/seg.log", 6)]
        with fs.open_reader(entries[0].source) as r:
            assert r.read_at(2, 3) == b"cde"
        filesystem, _ = fs.filesystem("memory://epoch-audit-fs-test")
        assert isinstance(filesystem, pa.fs.PyFileSystem)
    finally:
        mem.rm("/epoch-audit-fs-test", recursive=True)


def test_replace_text_interrupted_leaves_the_file_as_it_was_and_no_temporary_file(tmp_path, monkeypatch) -> None:
    """A SIGTERM while --summary-json was written (jobs.errors.Terminated, a BaseException) left its
    ``.s.json.<pid>.tmp`` beside it, one more each time."""
    import signal

    import jobs.fs
    from jobs.errors import Terminated

    target = tmp_path / "s.json"
    target.write_text("last night")

    def interrupted(src, dst):
        raise Terminated(signal.SIGTERM)

    monkeypatch.setattr(jobs.fs.os, "replace", interrupted)
    with pytest.raises(Terminated):
        jobs.fs.replace_text(target, "tonight")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"] and target.read_text() == "last night"
