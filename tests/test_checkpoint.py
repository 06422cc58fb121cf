"""Checkpoint files and partition.metadata (spec §4.2, §4.3): real broker files, errors, round trips."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlib import DecodeError
from epochlib import _wire as w
from epochlib.checkpoint import (
    LeaderEpochCheckpoint,
    format_leader_epoch_checkpoint,
    format_offset_checkpoint,
    format_partition_metadata,
    parse_leader_epoch_checkpoint,
    parse_offset_checkpoint,
    parse_partition_dir_name,
    parse_partition_metadata,
)

SPEC_EXAMPLE = "0\n3\n0 0\n2 1500\n5 3120\n"


def test_spec_example_leader_epoch_checkpoint() -> None:
    cp = parse_leader_epoch_checkpoint(SPEC_EXAMPLE)
    assert cp == LeaderEpochCheckpoint(0, ((0, 0), (2, 1500), (5, 3120)))
    assert parse_leader_epoch_checkpoint(SPEC_EXAMPLE.encode()) == cp
    assert format_leader_epoch_checkpoint(cp.entries) == SPEC_EXAMPLE


def test_non_monotonic_epochs_parse_fine() -> None:
    # strictly increasing epochs is rule L2's business, not the parser's
    cp = parse_leader_epoch_checkpoint("0\n3\n5 10\n3 20\n7 5\n")
    assert cp.entries == ((5, 10), (3, 20), (7, 5))


@pytest.mark.parametrize("text", ["", "0\n", "0"])
def test_empty_checkpoint_means_no_entries(text: str) -> None:
    assert parse_leader_epoch_checkpoint(text).entries == ()
    assert parse_offset_checkpoint(text).entries == {}


def test_whitespace_runs_and_crlf_are_accepted() -> None:
    cp = parse_leader_epoch_checkpoint("0\r\n2\r\n1 \t 10\r\n2  20\r\n")
    assert cp.entries == ((1, 10), (2, 20))


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("1\n0\n", 1, "version"),
        ("x\n0\n", 1, "not an integer"),
        ("0\n2\n0 0\n", 2, "expected 2 entries, found 1"),
        ("0\n1\n0 0\n1 5\n", 2, "expected 1 entries, found 2"),
        ("0\n2\n0 0\n1\n", 4, "malformed"),
        ("0\n2\n0 0\n1 x\n", 4, "start offset"),
        ("0\n2\n0 0\n 1 5\n", 4, "malformed"),
        ("0\n2\n0 0\n1 5 9\n", 4, "malformed"),
        ("0\n1\n0 0\n\n", 4, "malformed"),
        ("0\n1\n99999999999 0\n", 3, "out of range"),
        ("0\nnope\n", 2, "entry count"),
    ],
)
def test_leader_epoch_errors_carry_line_numbers(text: str, line: int, fragment: str) -> None:
    with pytest.raises(DecodeError) as e:
        parse_leader_epoch_checkpoint(text)
    assert e.value.unit == "line"
    assert e.value.offset == line
    assert fragment in e.value.reason


def test_non_utf8_is_a_decode_error_with_line() -> None:
    with pytest.raises(DecodeError) as e:
        parse_offset_checkpoint(b"0\n1\nt\xff 0 5\n")
    assert e.value.offset == 3 and e.value.unit == "line"


def test_offset_checkpoint_topics_with_dashes_and_dots() -> None:
    text = "0\n3\nmy-topic.v2 0 42\n__consumer_offsets 49 7\na.b-c_d 12 0\n"
    cp = parse_offset_checkpoint(text)
    assert cp.version == 0
    assert cp.entries == {("my-topic.v2", 0): 42, ("__consumer_offsets", 49): 7, ("a.b-c_d", 12): 0}
    assert format_offset_checkpoint(cp.entries) == text
    assert format_offset_checkpoint([("my-topic.v2", 0, 42), ("__consumer_offsets", 49, 7),
                                     ("a.b-c_d", 12, 0)]) == text


def test_offset_checkpoint_malformed_line() -> None:
    with pytest.raises(DecodeError) as e:
        parse_offset_checkpoint("0\n2\nt 0 1\nt 1\n")
    assert e.value.offset == 4
    with pytest.raises(DecodeError):  # a line starting with the separator: no topic (Java's split keeps "")
        parse_offset_checkpoint("0\n1\n 0 5\n")
    with pytest.raises(ValueError):
        format_offset_checkpoint({("bad topic", 0): 1})


TOPIC_ID = w.uuid_to_str(bytes(range(1, 17)))


def test_partition_metadata_roundtrip_is_byte_exact() -> None:
    text = format_partition_metadata(TOPIC_ID)
    assert text == f"version: 0\ntopic_id: {TOPIC_ID}"  # no trailing newline, like Kafka
    assert parse_partition_metadata(text).topic_id == TOPIC_ID
    assert parse_partition_metadata(text.encode() + b"\n").version == 0
    assert format_partition_metadata(bytes(range(1, 17))) == text


@pytest.mark.parametrize(
    ("text", "line"),
    [  # what Kafka's PartitionMetadataReadBuffer refuses too
        ("", 1),
        ("version:0\ntopic_id: " + TOPIC_ID, 1),  # no whitespace after ':': one field
        ("version: 0: 1\ntopic_id: " + TOPIC_ID, 1),  # three fields
        ("version: x\ntopic_id: " + TOPIC_ID, 1),
        ("version: -1\ntopic_id: " + TOPIC_ID, 1),  # below CURRENT_VERSION
        ("version: 2147483648\ntopic_id: " + TOPIC_ID, 1),  # not a Java int
        ("version: 0\n", 2),
        ("version: 0\ntopic_id:" + TOPIC_ID, 2),
        ("version: 0\ntopic_id: " + w.ZERO_UUID, 2),
        ("version: 0\ntopic_id: not-a-uuid", 2),
        ("version: 0\ntopic_id: " + TOPIC_ID + " x", 2),
    ],
)
def test_partition_metadata_errors(text: str, line: int) -> None:
    with pytest.raises(DecodeError) as e:
        parse_partition_metadata(text)
    assert e.value.offset == line and e.value.unit == "line"


@pytest.mark.parametrize(
    ("text", "version", "note"),
    [  # what Kafka reads (any version >= 0, two lines by position, keys never compared), with a note where it
       # would never write it
        (f"version: 0\ntopic_id: {TOPIC_ID}", 0, None),
        (f"version: 1\ntopic_id: {TOPIC_ID}", 1, "version 1 (Kafka writes 0, and reads any version >= 0)"),
        (f"version: +7\r\ntopic_id:\t{TOPIC_ID}\r\n", 7, "version 7"),
        (f"version: 0\ntopic_id: {TOPIC_ID}\nextra: 1\n", 0, "1 line after the topic id (Kafka does not read it)"),
        (f"version: 0\ntopic_id: {TOPIC_ID}\n\nnot: a: line\nx\n", 0, "2 lines after the topic id"),
        (f"Version: 0\ntopicId: {TOPIC_ID}", 0, "keys 'Version', 'topicId' instead of 'version', 'topic_id'"),
        (f": 0\n: {TOPIC_ID}", 0, "keys '', ''"),
        (f"version: 0: \ntopic_id: {TOPIC_ID}:  ", 0, None),  # Java's split drops trailing empty fields
    ],
)
def test_partition_metadata_is_read_as_kafka_reads_it(text: str, version: int, note: str | None) -> None:
    pm = parse_partition_metadata(text)
    assert (pm.version, pm.topic_id) == (version, TOPIC_ID)
    assert pm.note == note if note is None else note in pm.note


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0", ("orders", 0, None)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49, None)),
        ("my-topic.v2-12", ("my-topic.v2", 12, None)),
        ("my-topic.v2-3.0123456789abcdef0123456789abcdef-delete", ("my-topic.v2", 3, "delete")),
        ("orders-1.0123456789abcdef0123456789abcdef-future", ("orders", 1, "future")),
        ("a.b-c-7.0123456789abcdef0123456789abcdef-stray", ("a.b-c", 7, "stray")),
    ],
)
def test_partition_dir_names(name: str, expected: tuple) -> None:
    assert parse_partition_dir_name(name) == expected


@pytest.mark.parametrize("name", ["orders", "orders-", "-0", "orders-x", "orders-0-delete", ""])
def test_bad_partition_dir_names(name: str) -> None:
    with pytest.raises(DecodeError):
        parse_partition_dir_name(name)


# ---------------------------------------------------------------- real broker files


def _real_files(root: Path) -> dict[str, list[Path]]:
    kinds: dict[str, list[Path]] = {"epoch": [], "offset": [], "meta": []}
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        if p.name == "leader-epoch-checkpoint":
            kinds["epoch"].append(p)
        elif p.name.endswith("-offset-checkpoint"):
            kinds["offset"].append(p)
        elif p.name == "partition.metadata":
            kinds["meta"].append(p)
    return kinds


def test_every_real_checkpoint_file_parses(real_data: Path) -> None:
    kinds = _real_files(real_data)
    assert kinds["epoch"] and kinds["offset"] and kinds["meta"]
    for p in kinds["epoch"]:
        data = p.read_bytes()
        cp = parse_leader_epoch_checkpoint(data)
        if data:
            assert format_leader_epoch_checkpoint(cp.entries).encode() == data, p
    for p in kinds["offset"]:
        data = p.read_bytes()
        cp = parse_offset_checkpoint(data)
        if data:
            assert cp.version == 0
            assert len(cp.entries) == int(data.split(b"\n")[1]), p
    for p in kinds["meta"]:
        data = p.read_bytes()
        md = parse_partition_metadata(data)
        assert format_partition_metadata(md.topic_id).encode() == data, p
        assert md.version == 0 and md.note is None, p  # what Kafka writes: nothing to note
        # the directory holding it is a partition directory
        topic, partition, variant = parse_partition_dir_name(p.parent.name)
        assert partition >= 0 and variant is None and topic


def test_real_lineage_snapshot_patient_0(real_data: Path) -> None:
    path = real_data / "lineage-snapshots" / "1-408c9cb" / "patient-0" / "leader-epoch-checkpoint"
    if not path.exists():
        pytest.skip("lineage snapshot absent")
    cp = parse_leader_epoch_checkpoint(path.read_bytes())
    assert cp.entries[:2] == ((50, 12), (90, 13))


# ---------------------------------------------------------------- round trips and fuzz


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)), max_size=20))
def test_leader_epoch_roundtrip(entries: list[tuple[int, int]]) -> None:
    assert parse_leader_epoch_checkpoint(format_leader_epoch_checkpoint(entries)).entries == tuple(entries)


_TOPIC = st.text(alphabet="abcXYZ019._-", min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.tuples(_TOPIC, st.integers(0, 2**31 - 1)), st.integers(0, 2**63 - 1), max_size=20))
def test_offset_checkpoint_roundtrip(entries: dict[tuple[str, int], int]) -> None:
    assert parse_offset_checkpoint(format_offset_checkpoint(entries)).entries == entries


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=16, max_size=16).filter(lambda b: b != bytes(16)))
def test_partition_metadata_roundtrip(raw: bytes) -> None:
    assert parse_partition_metadata(format_partition_metadata(raw)).topic_id == w.uuid_to_str(raw)


_FUZZ_TEXT = st.one_of(
    st.text(max_size=200),
    st.text(alphabet="0123456789 -\n\r\t:_abcversiontopic_id", max_size=200),
    st.binary(max_size=200),
)


@settings(max_examples=200, deadline=None)
@given(_FUZZ_TEXT)
def test_parsers_raise_only_decode_error(data: str | bytes) -> None:
    for parser in (parse_leader_epoch_checkpoint, parse_offset_checkpoint, parse_partition_metadata):
        with contextlib.suppress(DecodeError):
            parser(data)
    if isinstance(data, str):
        with contextlib.suppress(DecodeError):
            parse_partition_dir_name(data)
