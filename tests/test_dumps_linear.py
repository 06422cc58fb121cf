"""Text-dump parsers run in linear time (issue 18 item 3).

Each case is a long line that made one of the former regular expressions rescan the rest of the
line from every position (kafka-dump-log tokens and ≤3.7 assignments, Scala group/member fields,
console JSON resync and glued line-start checks). Doubling the input must at most about double
the time; the quadratic versions took 3-5x per doubling (and minutes at these sizes).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlib import dumps
from epochlib.dumps import DumpError, iter_console_json, iter_dump_log, iter_dump_records, iter_scala_lines

REC = "| offset: 0 CreateTime: 1 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: "
GM = "g::GroupMetadata(groupId=g, generation=1, protocolType=None, currentState=Stable, members="


def _commit(i: int) -> str:
    return json.dumps({"key": {"type": 1, "data": {"group": f"g{i % 7}", "topic": "orders", "partition": i % 3}},
                       "value": {"version": 3, "data": {"offset": i, "leaderEpoch": 1, "metadata": "",
                                                        "commitTimestamp": 1700000000000 + i}}},
                      separators=(",", ":"))


def _glued(n: int) -> str:
    out, size, i = [], 0, 0
    while size < n:
        out.append(_commit(i))
        size += len(out[-1])
        i += 1
    return "".join(out)


def _rep(piece: str, n: int) -> str:
    return piece * (n // len(piece))


# name -> (parser, build(n) -> text of about n characters[, n])
CASES: dict[str, tuple] = {
    "dump_log batch tokens": (iter_dump_log, lambda n: "baseOffset: 0 " + "a" * n),
    "dump_log record tokens": (iter_dump_log, lambda n: "| offset: 0 " + "a" * n + " key: x payload: y"),
    "dump_log 3.7 assignment run": (
        iter_dump_log, lambda n: REC + 'group_metadata::group=g payload: {"assignment":"' + "a" * n + '"}'),
    "dump_log 3.7 assignment unclosed": (
        iter_dump_log, lambda n: REC + 'group_metadata::group=g payload: {"assignment":"' + _rep("a=[", n) + '"}'),
    "scala group value": (iter_scala_lines, lambda n: _rep("::GroupMetadata(", n)),
    "scala group fields": (
        iter_scala_lines, lambda n: "g::GroupMetadata(groupId=" + _rep(", generation=1, protocolType=Some(", n) + ")"),
    "scala members": (iter_scala_lines, lambda n: GM + _rep("MemberMetadata(memberId=", n) + ")"),
    # the per-object line-start check sliced the whole line so far: visible from a few MB on
    "console glued records": (iter_console_json, _glued, 2_000_000),
    "console glued garbage": (iter_console_json, lambda n: _rep('{"key"x', n)),
    "console glued truncated": (iter_console_json, lambda n: _rep('{"key":{"type":1,"data":{"group":"g"', n)),
    "console deep nest": (iter_console_json, lambda n: _rep('{"key":', n)),
}


def _run_time(fn: Callable[[str], Iterator], text: str) -> float:
    t0 = time.perf_counter()
    for _item in fn(text):
        pass
    return time.perf_counter() - t0


def _times(fn: Callable[[str], Iterator], small: str, large: str, repeat: int) -> tuple[float, float]:
    """Best times of both inputs, measured alternately so a burst of load hits both alike."""
    t1 = t2 = float("inf")
    for _ in range(repeat):
        t1 = min(t1, _run_time(fn, small))
        t2 = min(t2, _run_time(fn, large))
    return t1, t2


@pytest.mark.parametrize("name", list(CASES))
def test_doubling_the_input_at_most_doubles_the_time(name: str) -> None:
    fn, build, n = (*CASES[name], 200_000)[:3]
    small, large = build(n), build(2 * n)
    # ~2x expected; 2.5x plus 20 ms of slack for a busy machine (quadratic gives 4x and seconds),
    # and one re-measurement before failing, since the machine is shared
    for repeat in (3, 5):
        t1, t2 = _times(fn, small, large, repeat)
        if t2 <= 2.5 * t1 + 0.02:
            break
    assert t2 <= 2.5 * t1 + 0.02, f"{name}: {t1:.4f}s -> {t2:.4f}s"


def test_windowed_decoding_reads_every_glued_record() -> None:
    """Objects longer than the first decode window, glued: each decodes whole and in order."""
    big = json.dumps({"key": {"type": 2, "data": {"group": "g"}}, "value": {"version": 3, "data": {
        "protocolType": "consumer", "generation": 5, "protocol": "range", "leader": "m-0",
        "currentStateTimestamp": 1, "members": [
            {"memberId": f"m-{i}", "groupInstanceId": None, "clientId": "c" * 40, "clientHost": "/10.0.0.1",
             "rebalanceTimeout": 1, "sessionTimeout": 1, "subscription": "AAE=", "assignment": "AAI="}
            for i in range(200)]}}}, separators=(",", ":"))
    assert len(big) > 8 * 2048
    text = _glued(100_000) + big + _commit(10**6) + big
    items = list(iter_console_json(text))
    assert not [i for i in items if isinstance(i, DumpError)]
    assert [len(i["members"]) for i in items if i["kind"] == "group_metadata"] == [200, 200]
    commits = [i["offset"] for i in items if i["kind"] == "offset_commit"]
    assert commits == [*range(len(commits) - 1), 10**6]


def test_deep_nest_still_recovers_the_record_inside() -> None:
    """Resuming at the innermost ``{"key"`` of a too-deep nest keeps the real record after it."""
    commit = _commit(5)
    items = list(iter_console_json('{"key":' * 3000 + commit + _commit(6)))
    recs = [i for i in items if not isinstance(i, DumpError)]
    assert [r["offset"] for r in recs] == [5, 6]
    assert isinstance(items[0], DumpError) and items[0].unit == "line"


def test_bad_object_far_into_a_glued_line_reports_its_absolute_position() -> None:
    text = _glued(50_000)
    items = list(iter_console_json(text + '{"key":{"type":1,"data":oops}}' + _commit(9)))
    (err,) = [i for i in items if isinstance(i, DumpError)]
    assert err.unit == "char" and err.line == len(text)
    assert f"character {len(text) + 24}" in err.reason
    assert items[-1]["offset"] == 9


_PIECES = st.sampled_from([
    "{", "}", '{"key"', '{"key":', "::", "::GroupMetadata(", ", generation=1", ", protocolType=Some(", ")",
    "MemberMetadata(memberId=", "=[", "]", ",", " ", "a", "a: ", "key: ", " payload: ", "[g,t,0]::",
    "offset_commit::group=", ",partition=", '"', "\\", "\t", "Offset:1\t", "1",
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_PIECES, st.integers(1, 3000)), min_size=1, max_size=6),
       st.sampled_from(["", REC, GM, "baseOffset: 0 ", "| offset: 0 ", "g::GroupMetadata(groupId="]))
def test_long_adversarial_lines_are_parsed_quickly(parts: list[tuple[str, int]], head: str) -> None:
    line = head + "".join(piece * k for piece, k in parts)
    t0 = time.perf_counter()
    for fn in (iter_console_json, iter_scala_lines, iter_dump_log, iter_dump_records):
        for item in fn(line):
            assert isinstance(item, (dict, DumpError))
            if isinstance(item, DumpError):
                assert len(item.raw) <= 4096
    # lines up to ~150 KB; the quadratic patterns needed many seconds for lines like these
    assert time.perf_counter() - t0 < 5


# ---------------------------------------------------------------- same readings as the former patterns

_OLD_TOKEN = re.compile(r"(\w+): (\S+)")
_OLD_ASSIGNMENT = re.compile(r"([^{},=\s][^{},=]*)=\[([^\]]*)\]")
_OLD_GROUP = re.compile(r"(?P<group>.*?)::(?P<value>GroupMetadata\(.*\)|NULL)")
_OLD_GM = re.compile(
    r"GroupMetadata\(groupId=(?P<group>.*?), generation=(?P<generation>-?\d+), "
    r"protocolType=(?:Some\((?P<ptype>.*?)\)|None), currentState=(?P<state>\w+), members=(?P<members>.*)\)"
)


def _short(alphabet: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(alphabet), max_size=25).map("".join)


@settings(max_examples=300, deadline=None)
@given(_short(["a", "b1", ": ", ":", " ", "x: y", "{", "}", ".", "é"]))
def test_tokens_match_the_former_pattern(text: str) -> None:
    assert dumps._tokens(text) == {m[1]: dumps._field_value(m[1], m[2].rstrip("}")) for m in _OLD_TOKEN.finditer(text)}


@settings(max_examples=300, deadline=None)
@given(_short(["m-1", "=", "[", "]", "t-0", ", ", ",", " ", "{", "}", "\t", "a b"]))
def test_assignment_scanner_matches_the_former_pattern(text: str) -> None:
    assert list(dumps._legacy_assignment(text)) == [(m[1], m[2]) for m in _OLD_ASSIGNMENT.finditer(text)]


@settings(max_examples=300, deadline=None)
@given(_short(["g", "::", ":", "GroupMetadata(", ")", "(", "NULL", "::NULL", "::GroupMetadata(", "x"]))
def test_group_split_matches_the_former_pattern(line: str) -> None:
    m = _OLD_GROUP.fullmatch(line)
    assert dumps._split_scala_group(line) == (None if m is None else (m["group"], m["value"]))


@settings(max_examples=300, deadline=None)
@given(_short(["g", ", generation=", "1", "-", ", protocolType=", "Some(", "None", ")", "(",
               ", currentState=", "Stable", ", members=", "x"]))
def test_group_fields_match_the_former_pattern(tail: str) -> None:
    value = "GroupMetadata(groupId=" + tail
    m, found = _OLD_GM.fullmatch(value), dumps._scala_gm(value)
    assert (found is None) == (m is None)
    if m is not None:
        group, gm = found
        assert (group, gm["generation"], gm["ptype"], gm["state"], gm["members"]) == (
            m["group"], m["generation"], m["ptype"], m["state"], m["members"])
