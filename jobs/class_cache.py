"""A class-data archive (Java's dynamic CDS) for the local JVMs the CLI starts: Spark's classes are parsed,
verified and linked once, then mapped by later runs.

A local audit's JVM loads Spark's, Parquet's and the JDK's classes as it goes, during the whole run (the
planner's rules, code generation, readers and writers). Loading them took ~5-6 of the JVM's ~40-60 CPU-s of
an audit at 1 M and at 10 M bench commits (BENCHMARKS.md, issue 16, seventeenth round). With a dynamic CDS
archive the JVM maps them from a file instead:

- **made** by the first full audit (``epoch-audit run`` that ingests, ``epoch-audit demo``) when there is none:
  its JVM runs with ``-XX:ArchiveClassesAtExit`` and writes the archive as it exits, which :func:`finish`
  (called by the CLI after the command, before the process ends) waits for; only then is the file renamed into
  place, next to a note of its size;
- **used** by every later session the CLI starts (``-XX:SharedArchiveFile``).

Where: the folder ``$EPOCH_AUDIT_CLASS_CACHE`` names (``off`` turns the archive off), else
``$XDG_CACHE_HOME/epoch-audit/jvm`` (``~/.cache/epoch-audit/jvm``). One archive (~200 MB) per Java and Spark
install: its name carries a key of the ``java`` binary and Spark's jars, and making one removes the others.

The JVM crashes on a truncated archive (SIGBUS) and ignores one it cannot use (another JDK build or class path;
its warnings are turned off), so an archive is used only when its size is the one noted when it was made, and a
session that fails to start because of one (:func:`could_be_why`) is started again without it, the archive removed
(:func:`jobs.session.get_or_create_session`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["ENV", "Archive", "archive_for_session", "cache_folder", "discard", "finish", "could_be_why",
           "crash_logs", "spark_home"]

log = logging.getLogger(__name__)

#: The environment variable that names the archive's folder, or turns it off (``off``, ``0``, ``false``, ``no``).
ENV = "EPOCH_AUDIT_CLASS_CACHE"
_OFF = {"off", "0", "false", "no", "none"}
_PLAIN = re.compile(r"[A-Za-z0-9/._+@=,~-]+")
#: The JVM's CDS messages (e.g. "Skipping ...: Signed JAR" for ~1,000 classes as it writes the archive, or
#: "Unable to use shared archive") go to the JVM's standard output, which is the CLI's: off.
_QUIET = "-Xlog:cds*=off"
#: How long :func:`finish` waits for the JVM to write the archive and exit.
EXIT_TIMEOUT_S = 180.0

Mode = Literal["use", "make"]


@dataclass(frozen=True)
class Archive:
    """The archive of this Java and Spark install, and the flags of a session that uses or makes it."""

    path: Path
    java_options: str
    making: Path | None = None
    """The temporary file the JVM writes the archive to as it exits (None: the session uses ``path``)."""


_making: Archive | None = None  # the archive this process's JVM writes at exit (see finish)


def cache_folder() -> Path | None:
    """The archive's folder: ``$EPOCH_AUDIT_CLASS_CACHE``, else ``$XDG_CACHE_HOME/epoch-audit/jvm``
    (``~/.cache``); None when turned off, or when it is not an absolute path of plain characters (Spark splits
    the JVM options at spaces and reads quotes and backslashes; the JVM reads ``:`` in an archive path and
    ``%`` in a crash log's)."""
    value = os.environ.get(ENV)
    try:
        if value is not None:
            folder = None if value.strip().lower() in _OFF or not value.strip() else Path(value).expanduser()
        else:
            base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            folder = Path(base) / "epoch-audit" / "jvm"
    except RuntimeError:  # "~user" that does not exist
        return None
    if folder is not None and not (folder.is_absolute() and _PLAIN.fullmatch(str(folder))):
        log.info("class-data archive off: not an absolute path of plain characters: %s", folder)
        return None
    return folder


def spark_home() -> str:
    """The Spark install a new local session runs: ``SPARK_HOME``, else pyspark's own folder."""
    import pyspark

    return os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)


def _install_key() -> str | None:
    """A key of what the archive depends on: the ``java`` binary a new session runs and the jars on its class
    path (names, sizes, times); None when either cannot be found."""
    home = spark_home()
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    try:
        java = os.path.realpath(java) if java else None
        if java is None:
            return None
        jars = sorted(os.scandir(os.path.join(home, "jars")), key=lambda e: e.name)
        parts = [f"{java} {os.stat(java).st_size} {os.stat(java).st_mtime_ns}"]
        parts += [f"{e.name} {e.stat().st_size} {e.stat().st_mtime_ns}" for e in jars if e.name.endswith(".jar")]
    except OSError:
        return None
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]


def _size_note(path: Path) -> Path:
    return path.with_name(path.name + ".size")


def _failed_note(path: Path) -> Path:
    return path.with_name(path.name + ".failed")


def _usable(path: Path) -> bool:
    """The archive exists and has the size noted when it was made (the JVM crashes on a cut one)."""
    try:
        return path.stat().st_size == int(_size_note(path).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return False


def archive_for_session(mode: Mode | None) -> Archive | None:
    """The archive flags for a new local JVM: ``-XX:SharedArchiveFile`` when this install's archive is there;
    otherwise, for ``mode="make"``, ``-XX:ArchiveClassesAtExit`` into a temporary file that :func:`finish` puts
    in place. None when turned off, for ``mode=None``, or when nothing can be used or made (never an error: the
    archive is a cache)."""
    try:
        return _archive_for_session(mode)
    except Exception as exc:
        log.info("class-data archive off: %s", exc)
        return None


def _archive_for_session(mode: Mode | None) -> Archive | None:
    global _making
    folder = cache_folder() if mode is not None else None
    key = _install_key() if folder is not None else None
    if folder is None or key is None:
        return None
    path = folder / f"spark-{key}.jsa"
    if _usable(path):
        # a JVM that crashes on the archive after all writes its crash log there, not into the working folder
        return Archive(path, f"-XX:SharedArchiveFile={path} -XX:ErrorFile={folder}/hs_err_pid%p.log {_QUIET}")
    if mode != "make" or _failed_note(path).exists():  # a JVM that wrote no archive once would not the next time
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.info("class-data archive off: cannot create %s: %s", folder, exc)
        return None
    if not os.access(folder, os.W_OK):
        return None
    _sweep(folder)
    tmp = folder / f".{path.name}.{os.getpid()}.tmp"
    _making = Archive(path, f"-XX:ArchiveClassesAtExit={tmp} {_QUIET}", making=tmp)
    return _making


def _sweep(folder: Path) -> None:
    """Remove the temporary files of runs that ended before their JVM wrote the archive (killed, or a library
    caller that never called :func:`finish`): their process is gone."""
    for tmp in folder.glob(".spark-*.jsa.*.tmp"):
        try:
            pid = int(tmp.name.rsplit(".", 2)[-2])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError):
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


def crash_logs(archive: Archive) -> set[Path]:
    """The JVM crash logs in ``archive``'s folder (a JVM that crashes on the archive writes one there)."""
    try:
        return set(archive.path.parent.glob("hs_err_pid*.log"))
    except OSError:
        return set()


def could_be_why(archive: Archive, crashes_before: set[Path], timeout_s: float = 60.0) -> bool:
    """Whether ``archive``'s flags could be why a JVM did not start: it crashed (a new crash log in the archive's
    folder, ``crashes_before`` being those before the start), or this install's ``java`` does not start with them
    (``java -version``). False when Java starts with them: Spark's launcher refused the session for another reason
    (a master it does not accept, ``yarn`` without its configuration) and a start without the archive would only
    fail the same way, with a second stack trace; False too when ``java`` cannot be run at all."""
    import tempfile

    if crash_logs(archive) - crashes_before:
        return True
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java:
        return False
    with tempfile.TemporaryDirectory(prefix="epoch-audit-cds-") as tmp:
        flags = archive.java_options
        if archive.making is not None:  # a probe must not write an archive where the session's goes
            flags = flags.replace(str(archive.making), os.path.join(tmp, "probe.jsa"))
        try:
            done = subprocess.run([java, *flags.split(), "-version"], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout_s,
                                  cwd=tmp, check=False)
        except FileNotFoundError:
            return False
        except (OSError, subprocess.SubprocessError):
            return True
    return done.returncode != 0


def discard(archive: Archive) -> None:
    """Stop making ``archive`` in this process and remove it, or note that this install's JVM does not make one:
    a JVM would not start with its flags. Best effort."""
    global _making
    if _making is archive:
        _making = None
    if archive.making is not None:  # the JVM would not start to make one (e.g. -Xshare:off): not again
        with contextlib.suppress(OSError):
            _failed_note(archive.path).write_text("the JVM did not start with -XX:ArchiveClassesAtExit\n")
        return
    for p in (archive.path, _size_note(archive.path)):
        if p is not None:
            with contextlib.suppress(OSError):
                p.unlink(missing_ok=True)


def finish(exit_code: int = 0) -> Path | None:
    """If this process's JVM is to write the archive as it exits: after a command that succeeded (``exit_code``
    0), stop Spark, end the JVM (closing its standard input ends the gateway), wait for it and put the archive
    in place, removing other installs' archives; after one that failed, end the JVM without writing one (its
    classes would be those of a partial run, kept until the install changes). Returns the archive's path when
    one was made. Call it after the last Spark work, before the process ends (``os._exit`` would kill the JVM
    halfway through writing it). Never raises for an ``Exception``; an interrupt ends the JVM unwritten."""
    global _making
    making, _making = _making, None
    if making is None or making.making is None:
        return None
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    tmp = making.making
    try:
        if proc is None or proc.stdin is None or proc.poll() is not None:
            return None
        if exit_code != 0:
            proc.kill()  # no archive of a failed run
            proc.wait(timeout=EXIT_TIMEOUT_S)
            return None
        sc = SparkContext._active_spark_context
        if sc is not None:
            sc.stop()
        _say(f"epoch-audit: saving Spark's class-data archive for faster later runs (once per Java and Spark "
             f"install: ~15 s, ~200 MB in {making.path.parent}; {ENV}=off turns it off)")
        proc.stdin.close()
        try:
            code: int | str = proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = f"no exit within {EXIT_TIMEOUT_S:.0f} s"
        if code != 0 or not tmp.exists() or tmp.stat().st_size == 0:
            # e.g. -Xshare:off in JAVA_TOOL_OPTIONS, or a JDK without its base archive: not again on every run
            _failed_note(making.path).write_text(f"the JVM wrote no archive (exit: {code})\n")
            return None
        size = tmp.stat().st_size
        os.replace(tmp, making.path)
        _size_note(making.path).write_text(f"{size}\n", encoding="ascii")
        for other in making.path.parent.glob("spark-*.jsa*"):
            if other.name not in (making.path.name, _size_note(making.path).name):
                other.unlink(missing_ok=True)
        return making.path
    except BaseException as exc:  # a cache: never fail the run for it; an interrupt ends the JVM unwritten
        with contextlib.suppress(Exception):
            proc.kill()
        if isinstance(exc, Exception):
            _say(f"epoch-audit: class-data archive not written: {exc}")
            return None
        raise
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr closed
        print(line, file=sys.stderr, flush=True)
