"""The offsets pass whose tasks write the ``offset_commits`` Parquet files themselves (delta-rs sink).

Each task decodes its segment range or dump once (:data:`._kv.ONE_PASS`) and writes the non-transactional
commits with pyarrow into the sink's staging folder, and every other row (transactional commits, markers,
groups, quarantine, stats) as side rows (:mod:`.pass_files`). Without this, the second decode of every input
for the side rows took a pass of its own. The transactional commits still get their ``txn_state`` from
Spark's window over the markers (:func:`.offsets.transactional_commits`), handed back to the sink to write
into the same folder.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._rows import OFFSETS_WORK
from .pass_files import Decode, PassFiles

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .discover import InputFile

__all__ = ["CommitFiles"]


class CommitFiles(PassFiles):
    """The offsets inputs as a :class:`jobs.sink.FileSource` of ``offset_commits``; :attr:`side` holds the
    side rows (``OFFSETS_WORK``) once the sink has staged it."""

    side_schema = OFFSETS_WORK

    def __init__(self, spark: SparkSession, files: list[InputFile], *, cluster: str, days: tuple[dt.date, dt.date],
                 default_date: dt.date, dated: Callable[[DataFrame], DataFrame], split_bytes: int,
                 parallelism: int) -> None:
        super().__init__(spark, cluster=cluster, days=days, default_date=default_date)
        self.files, self.dated, self.split_bytes, self.parallelism = files, dated, split_bytes, parallelism

    def frames(self) -> list[tuple[DataFrame, Decode]]:
        from . import offsets

        return [(frame, both) for frame, _, _, both in offsets.input_frames(
            self._spark, self.files, split_bytes=self.split_bytes, parallelism=self.parallelism)]

    def after(self) -> DataFrame | None:
        """The transactional commits (dated), when the pass met any."""
        from . import offsets

        if not sum(w["tx"] for w in self.written):
            return None
        assert self.side is not None
        return self.dated(offsets.transactional_commits(self.side))
