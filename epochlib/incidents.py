"""Findings grouped into incidents, with what each kind usually means and how to re-check it (issue 17).

An operator triaging a night asks "what happened, where, in what order, and how do I confirm it"; 17
near-identical F2 rows on one partition answer it badly. :func:`group_incidents` joins findings into
incidents. Two findings belong to the same incident when

- one names the other as its cause (``correlated_finding_id``, M4; ``cause_finding_id``, K2), they
  cite the same evidence pointer (one commit record that is both an F4 regression and an S1 rewind, one
  Metadata response stale for several partitions), or they name the same truncation point of the same
  partition (F2 commits past it, S1 rewinds to it, a D1 follower still holding what lies beyond it);
- they concern the same partition (or the same topic, for topic-level findings such as M3) and follow
  each other within ``partition_gap_ms`` (default 3 h: snapshot-based findings such as L5 and D1 arrive
  at the next snapshot round, hours after the commits they explain);
- they are of the same kind and concern the same consumer group on different partitions within
  ``group_gap_ms`` (default 5 min: one reset or rebalance moves every partition of a group at once; other
  kinds on other partitions of a busy group are other stories);
- they are stale-metadata findings served by the same broker within ``broker_gap_ms`` (default 1 min).

The links are transitive (an incident is a connected component). Within an incident the findings are in
time order; incidents are ordered most severe first, then by start time, and numbered from 1.

:func:`recheck_commands` turns an incident's evidence into the commands an operator runs with Kafka's
own tools (``kafka-dump-log.sh``, ``kafka-consumer-groups.sh``, ``kafka-topics.sh``); file paths are
written relative to the input roots as ``"$OFFSETS"/…``, ``"$LOGDIRS"/…``, ``"$METADATA"/…`` so they
can be pasted on any machine that holds a copy of the evidence. Pure: no I/O, no Spark.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "SEVERITIES",
    "KIND_GUIDE",
    "Incident",
    "IncidentWindows",
    "Recheck",
    "group_incidents",
    "guide",
    "parse_pointer",
    "printable",
    "recheck_commands",
    "relative_path",
]

SEVERITIES = ("critical", "error", "warning", "info")
_RANK = {s: i for i, s in enumerate(SEVERITIES)}
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS

#: Numeric columns that locate a finding in a partition's offsets (drawn on its lineage).
OFFSET_COLUMNS = ("committed_offset", "new_offset", "previous_offset", "end_offset", "truncation_point",
                  "base_offset", "log_end_offset")

#: kind -> (what it usually means, what to do). One line each; the page and the JSON summary show it.
KIND_GUIDE: dict[str, tuple[str, str]] = {
    "client_epoch_regression": (
        "a client was handed an older leader epoch than it had already seen (stale broker metadata cache)",
        "check which broker served it and whether its metadata lagged the controller; clients may have fetched "
        "from a deposed leader"),
    "broker_served_stale": (
        "a broker served metadata older than what the cluster had already published",
        "check the broker's metadata lag (kafka-metadata-quorum describe --replication) and restart it if stuck"),
    "topic_id_regression": (
        "a client was given the id of a deleted topic after it had seen the re-created one",
        "clients may write to or read from the old incarnation: restart them after the broker caches agree"),
    "possible_topic_recreation": (
        "the epoch fell to 0 with a new replica set: the topic was probably deleted and re-created",
        "confirm with the operators; consumers of the old topic must reset their offsets"),
    "metadata_offset_regression": (
        "a response reflected an older cluster state than the client had already been given",
        "check the serving broker's metadata lag"),
    "metadata_state_mixed": (
        "a response mixed partition states that never existed together",
        "on KRaft a broker serves one image: check the broker's metadata log replay"),
    "checkpoint_unreadable": (
        "a leader-epoch-checkpoint could not be read; the replica's lineage evidence is lost",
        "inspect the file; the broker rebuilds it from the log on restart"),
    "lineage_not_monotonic": (
        "a leader-epoch-checkpoint's entries are out of order (corruption or a hand-edited file)",
        "inspect the file and compare with the other replicas before the broker restarts"),
    "batch_epoch_mismatch": (
        "a record batch carries a leader epoch the replica's lineage does not put at its offset",
        "compare the batch headers with the checkpoint; a stale leader may have written it"),
    "batch_epoch_regression": (
        "a stale leader appended records after a newer leader had been elected (the case KIP-359 fences)",
        "find the producers that wrote to the deposed leader; the records may be lost or duplicated"),
    "batch_epoch_unknown": (
        "a record batch carries an epoch newer than any the lineage knows",
        "the checkpoint lags the log or the segment was copied in: compare the replicas"),
    "lineage_truncated": (
        "a replica removed tail epochs from its lineage (it truncated its log)",
        "expected after an unclean election or a divergence: confirm how many offsets were discarded"),
    "lineage_rewritten": (
        "a replica's lineage changed in a way Kafka never does (an interior entry changed or vanished)",
        "treat the replica's data as suspect; compare with the other replicas and reassign if needed"),
    "replica_lineage_conflict": (
        "two replicas disagree on where an epoch starts",
        "the replicas hold different data for the same offsets: compare their segments, reassign the odd one"),
    "replica_divergence_unresolved": (
        "a follower kept offsets the leader does not have (it never truncated its divergent suffix)",
        "the follower serves records that do not exist on the leader: restart or rebuild the follower"),
    "commit_beyond_epoch_end": (
        "consumers committed offsets past the end of their leader epoch: records they read were truncated, "
        "usually by an unclean leader election",
        "confirm the truncation point; reset the groups to it (dry run first) and reprocess the lost range"),
    "commit_unknown_epoch": (
        "commits carry an epoch newer than the partition ever had (offsets translated from another cluster)",
        "check MirrorMaker checkpoint translation; the offsets may point at the wrong records"),
    "commit_epoch_regression": (
        "a group committed a lower leader epoch than before (a consumer acting on stale metadata)",
        "find the member that committed it; its position may be wrong"),
    "commit_epoch_dropped": (
        "commits stopped carrying a leader epoch (an old client or an admin tool committed)",
        "usually harmless; epoch checks are off for those commits"),
    "checkpoint_epoch_unknown": (
        "a replica's checkpoint holds an epoch the metadata log never assigned (a restored or copied disk)",
        "treat the replica as foreign: rebuild it from the leader"),
    "unclean_leader_election": (
        "a leader was elected from outside the ISR: records acknowledged by the old leader may be lost",
        "confirm with the metadata log; find the groups that read past the truncation point"),
    "expansion_order_violation": (
        "a group read a new partition past the expansion point before the old ones (key order broken)",
        "check whether the consumers need per-key order; replay the affected keys"),
    "truncation": (
        "a consumer rewound to the truncation point of an unclean election (expected)",
        "nothing to undo; the records past the point were lost with the truncation"),
    "over_rewind": (
        "after a truncation a consumer went back further than needed and re-read records",
        "expect duplicates downstream for the re-read range"),
    "operator_reset": (
        "offsets were reset while the group was empty (kafka-consumer-groups --reset-offsets)",
        "confirm the change was intended"),
    "stale_epoch_commit": (
        "a rewind committed with an epoch below the lineage head (KAFKA-19902)",
        "upgrade the client; expect duplicates for the re-read range"),
    "spurious_rewind_to_earliest": (
        "a consumer reset to the earliest offset minutes after receiving stale metadata (KAFKA-6262)",
        "set auto.offset.reset deliberately; expect duplicates downstream for the re-read range"),
    "spurious_rewind": (
        "a committed offset moved back with nothing to explain it",
        "find the member or tool that committed it; expect duplicates for the re-read range"),
    "retention": (
        "a consumer fell behind retention and was reset to the log start: records were deleted unread",
        "raise retention or the consumer's throughput"),
    "spurious_skip": (
        "a lagging consumer jumped to the log end (reset to latest): records were never consumed",
        "reset the group back to the previous offset (dry run first) and reprocess"),
}


def guide(kind: str) -> tuple[str, str]:
    """(meaning, what to do) for a finding kind; a generic line for kinds this table does not know."""
    return KIND_GUIDE.get(kind, (f"{kind.replace('_', ' ')}", "read the findings' details and evidence"))


@dataclass(frozen=True)
class IncidentWindows:
    """How close in time findings on one subject must be to belong to the same incident (ms)."""

    partition_gap_ms: int = 3 * HOUR_MS
    group_gap_ms: int = 5 * MINUTE_MS
    broker_gap_ms: int = MINUTE_MS


@dataclass(frozen=True)
class Incident:
    """Findings that tell one story: same subject, causally linked or close in time.

    ``findings`` are the input mappings (plus ``report`` when given) in time order; ``records_affected``
    is the largest number of records one finding names per (group or broker, partition), summed — the
    findings of one incident repeat the same records (17 F2 commits of one group all count the records
    past one truncation point)."""

    number: int
    incident_id: str
    severity: str
    start_ms: int | None
    end_ms: int | None
    lead: Mapping[str, Any]
    findings: tuple[Mapping[str, Any], ...]
    partitions: tuple[tuple[str, int], ...]
    topics: tuple[str, ...]  # topics named without a partition (topic-level findings)
    groups: tuple[str, ...]
    clients: tuple[str, ...]
    brokers: tuple[str, ...]
    reports: tuple[str, ...]
    records_affected: int
    kinds: tuple[tuple[str, str, str, int], ...] = field(default=())  # (rule, kind, severity, n), most severe first

    @property
    def title(self) -> str:
        """``<rule> <kind> on <subjects>`` of the lead finding."""
        return f"{self.lead.get('rule')} {self.lead.get('kind')} on {self.subject_text(3)}"

    @property
    def meaning(self) -> str:
        return guide(str(self.lead.get("kind")))[0]

    @property
    def action(self) -> str:
        return guide(str(self.lead.get("kind")))[1]

    def subjects(self) -> list[str]:
        """Every subject as text: ``topic-partition``, ``topic``, ``group g``, ``client c``, ``broker b``."""
        return ([f"{t}-{p}" for t, p in self.partitions] + list(self.topics)
                + [f"group {g}" for g in self.groups] + [f"client {c}" for c in self.clients]
                + [f"broker {b}" for b in self.brokers])  # fmt: skip

    def subject_text(self, limit: int = 3) -> str:
        where = [f"{t}-{p}" for t, p in self.partitions] + list(self.topics)
        if not where:
            where = [f"group {g}" for g in self.groups] or [f"broker {b}" for b in self.brokers] or ["the cluster"]
        more = len(where) - limit
        return ", ".join(where[:limit]) + (f" (+{more})" if more > 0 else "")

    def to_dict(self, roots: Mapping[str, str | None] | None = None) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO UTC text), with re-check commands when ``roots`` is given."""
        out: dict[str, Any] = {
            "number": self.number, "incident_id": self.incident_id, "severity": self.severity,
            "start": iso(self.start_ms), "end": iso(self.end_ms), "title": self.title,
            "meaning": self.meaning, "action": self.action, "reports": list(self.reports),
            "partitions": [f"{t}-{p}" for t, p in self.partitions], "topics": list(self.topics),
            "groups": list(self.groups), "clients": list(self.clients), "brokers": list(self.brokers),
            "records_affected": self.records_affected, "finding_count": len(self.findings),
            "kinds": [{"rule": r, "kind": k, "severity": s, "count": n} for r, k, s, n in self.kinds],
            "finding_ids": [f.get("finding_id") for f in self.findings],
        }  # fmt: skip
        if roots is not None:
            out["recheck"] = [{"what": c.what, "command": c.command} for c in recheck_commands(self, roots)]
        return out


def to_ms(value: Any) -> int | None:
    """Epoch ms from a datetime (naive = UTC), a date, or a number; None stays None."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    if isinstance(value, dt.date):
        return int(dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc).timestamp() * 1000)
    return int(value)


def iso(ms: int | None) -> str | None:
    """``2024-03-04T06:03:52.553Z`` (None stays None)."""
    if ms is None:
        return None
    t = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class _Union:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _link_in_time(u: _Union, members: list[tuple[int | None, int]], gap: int) -> None:
    """Join consecutive members (time, index) no more than ``gap`` apart; undated ones join nothing."""
    dated = sorted((t, i) for t, i in members if t is not None)
    for (t0, i0), (t1, i1) in zip(dated, dated[1:], strict=False):
        if t1 - t0 <= gap:
            u.join(i0, i1)


#: Kinds whose ``end_offset`` is the truncation point of the partition (the end of the epoch they name).
_ENDS_AT_TRUNCATION = frozenset({"commit_beyond_epoch_end", "replica_divergence_unresolved", "lineage_truncated"})


def _truncation_point(f: Mapping[str, Any]) -> int | None:
    """The truncation a finding is about, if any: one truncation of one partition is one incident, however
    far apart its consequences are seen (commits past it at once, a follower still holding it two snapshot
    rounds later)."""
    if f.get("truncation_point") is not None:
        return int(f["truncation_point"])
    if f.get("kind") in _ENDS_AT_TRUNCATION and f.get("end_offset") is not None:
        return int(f["end_offset"])
    return None


def _affected(f: Mapping[str, Any]) -> int:
    for col in ("records_affected", "records_reread", "records_skipped"):
        v = f.get(col)
        if v is not None:
            return max(int(v), 0)
    return 0


def group_incidents(findings: Iterable[Mapping[str, Any]], windows: IncidentWindows | None = None) -> list[Incident]:
    """Group finding rows (report-table rows or :meth:`epochlib.rules.Finding.to_row` dicts; ``event_ts``
    as a datetime or epoch ms) into incidents (see the module docstring)."""
    w = windows or IncidentWindows()
    rows = [dict(f) for f in findings]
    times = [to_ms(f.get("event_ts")) for f in rows]
    u = _Union(len(rows))
    by_id: dict[str, int] = {}
    by_pointer: dict[str, int] = {}
    keys: dict[tuple[Any, ...], list[tuple[int | None, int]]] = {}
    for i, f in enumerate(rows):
        fid = f.get("finding_id")
        if fid is not None:
            by_id.setdefault(str(fid), i)
        for p in f.get("evidence") or ():
            if p in by_pointer:
                u.join(by_pointer[p], i)
            else:
                by_pointer[p] = i
        topic, part = f.get("topic"), f.get("partition")
        if topic is not None and part is not None:
            keys.setdefault(("p", str(topic), int(part)), []).append((times[i], i))
        elif topic is not None:
            keys.setdefault(("t", str(topic)), []).append((times[i], i))
        if f.get("group_id"):  # one group action (a reset, a rebalance): the same kind on several partitions
            keys.setdefault(("g", str(f["group_id"]), str(f.get("kind"))), []).append((times[i], i))
        point = _truncation_point(f)
        if point is not None and topic is not None and part is not None:
            keys.setdefault(("x", str(topic), int(part), point), []).append((times[i], i))
        if f.get("broker") is not None and str(f.get("rule", "")).startswith("M"):
            keys.setdefault(("b", str(f["broker"])), []).append((times[i], i))
    for i, f in enumerate(rows):
        for col in ("correlated_finding_id", "cause_finding_id"):
            other = f.get(col)
            if other is not None and str(other) in by_id:
                u.join(i, by_id[str(other)])
    gaps = {"p": w.partition_gap_ms, "t": w.partition_gap_ms, "g": w.group_gap_ms, "b": w.broker_gap_ms, "x": 1 << 62}
    for key, members in keys.items():
        _link_in_time(u, members, gaps[key[0]])
    comps: dict[int, list[int]] = {}
    for i in range(len(rows)):
        comps.setdefault(u.find(i), []).append(i)
    far = 1 << 62
    out = []
    for members in comps.values():
        members.sort(key=lambda i: (times[i] if times[i] is not None else far, _RANK.get(rows[i].get("severity"), 9),
                                    str(rows[i].get("rule")), str(rows[i].get("finding_id"))))  # fmt: skip
        out.append(_incident([rows[i] for i in members], [times[i] for i in members]))
    out.sort(key=lambda inc: (_RANK.get(inc.severity, 9), inc.start_ms if inc.start_ms is not None else far,
                              inc.incident_id))  # fmt: skip
    return [_renumber(inc, n) for n, inc in enumerate(out, 1)]


def _renumber(inc: Incident, n: int) -> Incident:
    return replace(inc, number=n)


#: Kinds that follow from another finding of the same incident; they name it only when nothing else does.
_CONSEQUENCES = frozenset({"commit_epoch_dropped", "commit_epoch_regression", "lineage_truncated"})


def _incident(rows: list[dict[str, Any]], times: list[int | None]) -> Incident:
    severity = min((str(f.get("severity")) for f in rows), key=lambda s: _RANK.get(s, 9))
    causes = [f for f in rows if f.get("kind") == "unclean_leader_election"]
    lead = causes[0] if causes else min(rows, key=lambda f: (_RANK.get(str(f.get("severity")), 9),
                                                              f.get("kind") in _CONSEQUENCES))
    dated = [t for t in times if t is not None]
    parts = sorted({(str(f["topic"]), int(f["partition"])) for f in rows
                    if f.get("topic") is not None and f.get("partition") is not None})
    topics = sorted({str(f["topic"]) for f in rows if f.get("topic") is not None and f.get("partition") is None}
                    - {t for t, _p in parts})
    groups = sorted({str(f["group_id"]) for f in rows if f.get("group_id")})
    clients = sorted({str(f["client_id"]) for f in rows if f.get("client_id")})
    brokers = sorted({str(f["broker"]) for f in rows if f.get("broker") is not None},
                     key=lambda b: (not b.isdigit(), int(b) if b.isdigit() else 0, b))
    reports = sorted({str(f["report"]) for f in rows if f.get("report")})
    worst: dict[tuple[Any, ...], int] = {}
    for f in rows:
        k = (f.get("group_id") or f.get("broker"), f.get("topic"), f.get("partition"))
        worst[k] = max(worst.get(k, 0), _affected(f))
    counts: dict[tuple[str, str, str], int] = {}
    for f in rows:
        k3 = (str(f.get("rule")), str(f.get("kind")), str(f.get("severity")))
        counts[k3] = counts.get(k3, 0) + 1
    kinds = tuple((r, k, s, n) for (r, k, s), n in sorted(counts.items(), key=lambda kv: (_RANK.get(kv[0][2], 9), kv[0])))
    ids = sorted(str(f.get("finding_id")) for f in rows)
    digest = hashlib.sha1("\n".join(ids).encode("utf-8")).hexdigest()[:10]
    return Incident(
        number=0, incident_id=f"inc-{digest}", severity=severity, start_ms=min(dated, default=None),
        end_ms=max(dated, default=None), lead=lead, findings=tuple(rows), partitions=tuple(parts),
        topics=tuple(topics), groups=tuple(groups), clients=tuple(clients), brokers=tuple(brokers),
        reports=tuple(reports), records_affected=sum(worst.values()), kinds=kinds,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ re-checking

#: Which environment variable names each input root in the commands.
ROOT_VARIABLES = {"offsets": "OFFSETS", "logdirs": "LOGDIRS", "metadata": "METADATA",
                  "cluster_metadata": "CLUSTER_METADATA"}
#: Every evidence pointer the rules write (:mod:`epochlib.rules._model`, :mod:`epochlib.rules.kraft`): the file, then
#: ``@byte N`` (``@N`` for the metadata log) or `` line|frame|row N``, then `` offset N`` (a log, base or metadata
#: offset) and, for the metadata log, the record's subject. A file name may hold spaces.
_POINTER = re.compile(r"^(?P<kind>[a-z_]+):(?P<file>.+?)(?:@(?:byte )?(?P<pos>\d+|\?))?"
                      r"(?: (?P<unit>line|frame|row) (?P<n>-?\d+|\?))?"
                      r"(?: offset (?P<off>-?\d+|\?)(?: (?P<subject>[^ ]+))?)?(?P<tail> \(.*\))?$")


@dataclass(frozen=True)
class Pointer:
    """An evidence pointer taken apart: ``offsets:<file>@byte N offset <log offset>`` (segments), ``offsets:<file>
    line|row N [offset <log offset>]`` (dumps), ``segment:<file>@byte N offset <base offset>``, ``checkpoint:<file>
    [line N]``, ``capture:<file> line|frame N``, ``metadata:<file>@N offset <metadata offset> <topic>-<partition>``."""

    kind: str
    file: str
    position: int | None
    """The byte position (``@byte N``), or a metadata-log record's position (``@N``: its batch's byte, or line)."""
    unit: str | None
    """``line``, ``frame`` or ``row`` when the pointer names one, else None."""
    number: int | None
    """That line, frame or row."""
    offset: int | None
    """The log offset (commits), base offset (batches) or metadata offset (the metadata log) it names."""
    subject: str | None
    text: str


def parse_pointer(text: str) -> Pointer | None:
    """The parts of an evidence pointer; None when it has none of the known forms."""
    m = _POINTER.match(text)
    if not m or not m.group("file"):
        return None

    def num(v: str | None) -> int | None:
        return int(v) if v is not None and v.lstrip("-").isdigit() else None

    return Pointer(m.group("kind"), m.group("file"), num(m.group("pos")), m.group("unit"), num(m.group("n")),
                   num(m.group("off")), m.group("subject"), text)


#: Characters that would move the cursor, end a line, recolour or retitle a terminal, or reorder text (C0 and C1
#: controls, DEL, bidirectional marks and overrides, line separators), and the backslash of the escapes: evidence
#: strings (group and client ids, topics, file names) are any string a client or a capture chose.
_UNSAFE = re.compile("[\\\\\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def printable(text: str) -> str:
    """``text`` with every control, bidirectional-mark or line-separator character shown as an escape (``\\n``,
    ``\\x1b``, ``\\u202e``), and a backslash doubled (a name holding a literal ``\\n`` is not taken for one holding
    a newline): safe to print to a terminal or as one line of a shell comment."""
    return _UNSAFE.sub(lambda m: _ESCAPES.get(c := m.group()) or (f"\\x{ord(c):02x}" if ord(c) < 0x100
                                                                  else f"\\u{ord(c):04x}"), text)


def _strip_scheme(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path[5:] if path.startswith("file:") else path


def relative_path(path: str, roots: Mapping[str, str | None]) -> str:
    """``$OFFSETS/__consumer_offsets-3/…log`` (the commands quote it ``"$OFFSETS"/…``) when ``path`` lies under an
    input root (the longest one wins), else the path unchanged."""
    p = _strip_scheme(path)
    best: tuple[int, str] | None = None
    for name, root in roots.items():
        if not root:
            continue
        r = _strip_scheme(str(root)).rstrip("/")
        if p == r or p.startswith(r + "/"):
            var = ROOT_VARIABLES.get(name, name.upper())
            if best is None or len(r) > best[0]:
                best = (len(r), f"${var}" + p[len(r):])
    return best[1] if best else path


def relative_pointer(text: str, roots: Mapping[str, str | None]) -> str:
    """The pointer with its file relative to the input roots (``$OFFSETS/…``)."""
    ptr = parse_pointer(text)
    if ptr is None:
        return text
    return text.replace(ptr.file, relative_path(ptr.file, roots), 1)


@dataclass(frozen=True)
class Recheck:
    """One command an operator runs to confirm an incident's evidence, and what it shows."""

    what: str
    command: str


_ROOT_VAR = re.compile(r"\$[A-Z_][A-Z0-9_]*")


def _q(path: str) -> str:
    """Shell-quote a path that may start with ``$VAR`` (:func:`relative_path`): the variable in double quotes, so it
    expands, and the rest single-quoted, so nothing in a file name (``$(…)``, backticks, ``!``) does."""
    m = _ROOT_VAR.match(path)
    if m is None:
        return shlex.quote(path)
    rest = path[m.end():]
    return f'"{m.group()}"' + (shlex.quote(rest) if rest else "")


def _sq(text: str) -> str:
    return shlex.quote(text)


#: How kafka-dump-log prints a record of a batch (``--offsets-decoder``, ``--cluster-metadata-decoder``).
_RECORD = r"\| offset: "


def _alternatives(prefix: str, numbers: list[int]) -> str:
    """``<prefix>(n1|n2) `` (an extended regular expression) for up to five numbers."""
    alt = "|".join(map(str, numbers[:5]))
    return prefix + (f"({alt})" if len(numbers[:5]) > 1 else alt) + " "


def _grep(prefix: str, numbers: list[int]) -> str:
    """`` | grep -E '<prefix>(n1|n2) '`` for up to five numbers ('' for none)."""
    return f" | grep -E {_sq(_alternatives(prefix, numbers))}" if numbers else ""


def _lines(numbers: list[int]) -> str:
    """A ``sed -n`` script printing up to five lines (the first line when none is known)."""
    return ";".join(f"{n}p" for n in numbers[:5]) or "1p"


def _listed(numbers: list[int]) -> str:
    return f"{', '.join(map(str, numbers[:5]))}{' …' if len(numbers) > 5 else ''}" if numbers else "?"


#: Evidence files whose commands are listed per incident (the rest are in the findings' evidence lists).
MAX_FILES = 4

_SUGGESTED = {  # kind -> the column holding the offset the evidence suggests resetting to
    "commit_beyond_epoch_end": "end_offset",
    "over_rewind": "truncation_point",
    "spurious_skip": "previous_offset",
    "spurious_rewind": "previous_offset",
    "spurious_rewind_to_earliest": "previous_offset",
    "stale_epoch_commit": "previous_offset",
}


def recheck_commands(incident: Incident, roots: Mapping[str, str | None]) -> list[Recheck]:
    """Commands to confirm ``incident`` with Kafka's tools: dump the evidence files, describe the groups
    and topics, and dry-run the offset reset the evidence suggests. ``roots``: input root per name
    (``offsets``, ``logdirs``, ``metadata``); commands use ``$BOOTSTRAP`` for the cluster."""
    out: list[Recheck] = []
    seen: set[str] = set()

    def add(what: str, cmd: str) -> None:  # ``what`` is shown as a comment line above the command: one line, no escapes
        if cmd not in seen:
            seen.add(cmd)
            out.append(Recheck(printable(what), cmd))

    files: dict[str, list[Pointer]] = {}
    for f in incident.findings:
        for text in f.get("evidence") or ():
            ptr = parse_pointer(str(text))
            if ptr is not None:
                files.setdefault(ptr.file, []).append(ptr)
    files.pop("?", None)  # a row without its source: nothing to name in a command (the evidence list shows it)
    for file, ptrs in list(files.items())[:MAX_FILES]:
        rel = relative_path(file, roots)
        ptr = ptrs[0]
        numbers = sorted({p.number for p in ptrs if p.number is not None})  # lines, frames or rows
        offsets = sorted({p.offset for p in ptrs if p.offset is not None})
        low = file.lower()
        if ptr.kind == "offsets" and ptr.unit == "line":
            add(f"the commit record{'s' if len(numbers) > 1 else ''} in the dump at line {_listed(numbers)}",
                f"sed -n {_sq(_lines(numbers))} {_q(rel)}")
        elif ptr.kind == "offsets" and ptr.unit == "row":
            add(f"the commit record{'s' if len(numbers) > 1 else ''} in the Parquet dump at row {_listed(numbers)}",
                "python3 -c 'import sys, pyarrow.parquet as pq; t = pq.read_table(sys.argv[1]); "
                "[print(t.slice(int(n), 1).to_pylist()[0]) for n in sys.argv[2:]]' "
                f"{_q(rel)} {' '.join(map(str, numbers[:5]))}")
        elif ptr.kind == "offsets":
            add(f"the commit record{'s' if len(offsets) > 1 else ''} at log offset {_listed(offsets)}",
                f"kafka-dump-log.sh --files {_q(rel)} --offsets-decoder{_grep(_RECORD, offsets)}")
        elif ptr.kind == "segment":
            add(f"the batch header (partitionLeaderEpoch) at base offset {_listed(offsets)}",
                f"kafka-dump-log.sh --files {_q(rel)}{_grep('baseOffset: ', offsets)}")
        elif ptr.kind == "checkpoint":
            add(f"the leader-epoch checkpoint{f' (line {_listed(numbers)})' if numbers else ''}", f"cat {_q(rel)}")
        elif ptr.kind == "capture" and ptr.unit == "line":
            add(f"the captured Metadata response{'s' if len(numbers) > 1 else ''} (line {_listed(numbers)})",
                f"sed -n {_sq(_lines(numbers))} {_q(rel)}")
        elif ptr.kind == "capture":
            frames = " ".join(map(str, numbers[:5])) or "1"
            add(f"the captured Metadata response{'s' if len(numbers) > 1 else ''} (frame {_listed(numbers)})",
                f"tshark -r {_q(rel)} -Y {_sq(f'frame.number in {{{frames}}}')} -O kafka")
        elif ptr.kind == "metadata" and low.endswith(".txt"):  # a kafka-dump-log text of the metadata log
            add(f"the controller's metadata log records at offset {_listed(offsets)}",
                f"grep -n -E {_sq(_alternatives(_RECORD, offsets))} {_q(rel)}")
        elif ptr.kind == "metadata" and low.endswith(".log"):
            add(f"the controller's metadata log records at offset {_listed(offsets)}",
                f"kafka-dump-log.sh --cluster-metadata-decoder --files {_q(rel)}{_grep(_RECORD, offsets)}")
        elif ptr.kind == "metadata":  # a snapshot (<end offset>-<epoch>.checkpoint): its records share one offset
            subjects = sorted({p.subject for p in ptrs if p.subject})
            add(f"the metadata snapshot the replay started from ({', '.join(subjects[:5]) or 'its partitions'})",
                f"kafka-dump-log.sh --cluster-metadata-decoder --files {_q(rel)}")
    if len(files) > MAX_FILES:
        add(f"{len(files) - MAX_FILES} more evidence file(s)", "# see the evidence list of the findings below")
    for t in sorted({t for t, _p in incident.partitions} | set(incident.topics)):
        add(f"the current leader, replicas and ISR of {t}",
            f"kafka-topics.sh --bootstrap-server \"$BOOTSTRAP\" --describe --topic {_sq(t)}")
    if any(str(f.get("rule", "")).startswith("M") for f in incident.findings):
        add("each broker's metadata lag behind the controller (KRaft)",
            "kafka-metadata-quorum.sh --bootstrap-server \"$BOOTSTRAP\" describe --replication")
    for g in incident.groups:
        add(f"group {g}: members and committed offsets now",
            f"kafka-consumer-groups.sh --bootstrap-server \"$BOOTSTRAP\" --describe --group {_sq(g)}")
    for g, t, p, offset, kind in _suggested_resets(incident):
        add(f"dry run: reset {g} on {t}-{p} to {offset} ({kind.replace('_', ' ')})",
            f"kafka-consumer-groups.sh --bootstrap-server \"$BOOTSTRAP\" --group {_sq(g)} --topic {_sq(f'{t}:{p}')} "
            f"--reset-offsets --to-offset {offset} --dry-run")
    return out


def _suggested_resets(incident: Incident) -> list[tuple[str, str, int, int, str]]:
    """(group, topic, partition, offset, kind): per (group, partition) the offset the latest finding with a
    suggestion names."""
    chosen: dict[tuple[str, str, int], tuple[int, str]] = {}
    for f in incident.findings:
        col = _SUGGESTED.get(str(f.get("kind")))
        g, t, p = f.get("group_id"), f.get("topic"), f.get("partition")
        if col is None or not g or t is None or p is None or f.get(col) is None:
            continue
        chosen[(str(g), str(t), int(p))] = (int(f[col]), str(f.get("kind")))
    return [(g, t, p, off, kind) for (g, t, p), (off, kind) in sorted(chosen.items())]


def offsets_of(finding: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(column, offset) pairs that place a finding on its partition's offset axis."""
    return [(c, int(finding[c])) for c in OFFSET_COLUMNS if finding.get(c) is not None and int(finding[c]) >= 0]


def severity_at_least(severity: str, floor: str) -> bool:
    """True when ``severity`` is ``floor`` or worse."""
    return _RANK.get(severity, 9) <= _RANK.get(floor, 9)
