"""Concurrent writers of one table: bounded retries of a conflicting commit, and naming the other run.

What this relies on in delta-rs (deltalake 1.6 in the venv; reproduced with two threads before the fix):

- Two writers that both find no table and both create it (``create_table_with_add_actions``, or
  ``write_deltalake`` on a missing table): the loser's version-0 commit fails, delta-rs' own commit loop
  retries it as version 1, and both "creations" commit — the rows are there twice. Users reported the same
  family of outcomes (delta-io/delta-rs#2609 "Concurrent writers return error despite successfully written",
  #3505 "version 0 already exists" on initial creation). With ``CommitProperties(max_commit_retries=0)`` the
  loser fails instead (``CommitFailedError``, or "A Delta Lake table already exists" when it looked after
  the winner committed), so creating version 0 is put-if-absent; the loser then writes its rows as an
  ordinary conflict-checked commit on the table that now exists. (On S3 put-if-absent needs delta-rs' log
  store locking or conditional puts, as every delta-rs commit there does.)
- A partition overwrite (``create_write_transaction(mode="overwrite", partition_filters=…)``) that lost the
  race to another overwrite of the same partitions fails with ``CommitFailedError`` ("a concurrent
  transaction deleted data this operation read"): delta-rs does not re-derive the ``remove`` actions from
  the winner's snapshot, since whether that is right depends on the operation — its maintainers put that
  retry above the commit layer (delta-io/delta-rs#584; #3622). For ``replace_range`` it is right: the range
  is replaced by this run's rows whatever was there, so the caller re-reads the table and commits again.
- The same overwrite of a range that is *empty* in both writers' snapshots passes delta-rs' conflict check
  (it compares the files removed, and neither removes any): delta-rs rebases the loser onto the winner's
  version and both runs' rows stay. So :mod:`._staged` commits overwrites with ``max_commit_retries=0``:
  any commit that landed since the snapshot makes the overwrite fail (the version exists) and it is
  retried here on a snapshot that includes the winner's files, which it then replaces. ``write_deltalake``
  with ``predicate=`` does see such appends ("a concurrent transactions added new data") and is left as is.

delta-spark raises ``Concurrent*Exception`` / ``MetadataChangedException`` / ``ProtocolChangedException``
for the same situations (Delta's optimistic concurrency control); :func:`is_conflict` recognises both.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

from jobs.errors import CommitError

from ._target import open_delta

__all__ = ["RUN_KEY", "STAGING_KEY", "is_conflict", "other_run", "with_retries"]

log = logging.getLogger("jobs.sink")

STAGING_KEY = "epochAudit.staging"
"""commitInfo key: the staging token of the run that committed (cleanup tells committed runs by it)."""
RUN_KEY = "epochAudit.run"
"""commitInfo key: the run id of the writer (conflict messages name the other run by it)."""

_SPARK_CONFLICTS = (
    "ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException", "MetadataChangedException", "ProtocolChangedException",
    "DELTA_CONCURRENT_", "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED",
)


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` says another writer committed first (delta-rs or delta-spark), i.e. a retry on a
    fresh snapshot may succeed."""
    if type(exc).__name__ == "CommitFailedError":
        return True
    text = str(exc)
    return "table already exists" in text or any(marker in text for marker in _SPARK_CONFLICTS)


def with_retries(
    attempt: Callable[[int], None],
    *,
    retries: int,
    what: str,
    committed: Callable[[], bool],
    winner: Callable[[], str],
) -> None:
    """Run ``attempt(n)`` until it commits, at most ``retries + 1`` times, retrying only on conflicts.

    ``committed()`` is asked after a conflict before retrying: a commit that reported a failure but landed
    (delta-rs#2609) must not be committed twice. When the attempts run out the :class:`CommitError` is one
    line naming the run that won the last race (``winner()``)."""
    last: BaseException | None = None
    for n in range(retries + 1):
        try:
            attempt(n)
            return
        except Exception as exc:
            if not is_conflict(exc):
                raise
            if committed():
                log.warning("%s: the commit reported a conflict but is in the table's history", what)
                return
            last = exc
            if n < retries:
                pause = min(2.0, 0.05 * 2**n) * random.uniform(0.5, 1.5)
                log.info("%s: lost a commit race (attempt %d of %d), retrying in %.2fs", what, n + 1, retries + 1, pause)
                time.sleep(pause)
    reason = " ".join(str(last).split())[:200]
    raise CommitError(
        f"{what}: gave up after {retries + 1} attempt(s), each lost to a concurrent commit by {winner()}; "
        f"rerun when that run has finished ({reason})"
    ) from last


def other_run(uri: str, storage_options: dict[str, str] | None, me: str) -> str:
    """The newest committer of the table at ``uri`` that is not run ``me``, as a message names it."""
    table = open_delta(uri, storage_options, quiet=True)
    if table is None:
        return "another writer (the table could not be read)"
    try:
        history: list[dict[str, Any]] = table.history(10)
    except Exception:
        return "another writer (the table history could not be read)"
    for c in history:
        run = c.get(RUN_KEY) or c.get("userMetadata")
        if run is not None and str(run) != me:
            token = c.get(STAGING_KEY)
            return f"run {run}" + (f" (staging {token}, version {c.get('version')})" if token else "")
    head = history[0] if history else {}
    return f"another writer (version {head.get('version')}, {head.get('operation', 'unknown operation')})"
