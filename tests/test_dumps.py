"""Tool text dumps (spec §7.1, §7.2): console JSON (glued and per line), Scala lines, kafka-dump-log."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlib.dumps import (
    DumpError,
    detect_dump_format,
    iter_console_json,
    iter_dump_log,
    iter_dump_records,
    iter_scala_lines,
    resolve_txn_states,
)

# ---------------------------------------------------------------- console JSON (§7.1)

COMMIT_V3 = ('{"key":{"type":1,"data":{"group":"my-group","topic":"orders","partition":0}},'
             '"value":{"version":3,"data":{"offset":42,"leaderEpoch":7,"metadata":"","commitTimestamp":1700000000000}}}')
COMMIT_V1 = ('{"key":{"type":1,"data":{"group":"my-group","topic":"orders","partition":1}},'
             '"value":{"version":1,"data":{"offset":5,"metadata":"m","commitTimestamp":1700000000000,'
             '"expireTimestamp":1700086400000}}}')
TOMBSTONE = '{"key":{"type":1,"data":{"group":"my-group","topic":"orders","partition":2}},"value":null}'
GROUP = ('{"key":{"type":2,"data":{"group":"g"}},"value":{"version":3,"data":{"protocolType":"consumer",'
         '"generation":5,"protocol":"range","leader":"m-1","currentStateTimestamp":1700000000000,"members":'
         '[{"memberId":"m-1","groupInstanceId":null,"clientId":"c","clientHost":"/10.0.0.1",'
         '"rebalanceTimeout":300000,"sessionTimeout":45000,"subscription":"AAE=","assignment":"AAI="}]}}}')
UNKNOWN_VALUE = '{"key":{"type":1,"data":{"group":"g","topic":"t","partition":0}},"value":{"version":9,"data":"unknown"}}'
KIP848 = '{"key":{"type":3,"data":{"groupId":"g"}},"value":{"version":0,"data":{"epoch":9}}}'
V39 = ('{"key":{"version":1,"data":{"group":"my-group","topic":"orders","partition":0}},'
       '"value":{"version":3,"data":{"offset":42,"leaderEpoch":7,"metadata":"","commitTimestamp":1700000000000}}}')
V39_UNKNOWN = '{"key":{"version":10,"data":"unknown"},"value":{"version":10,"data":"unknown"}}'

CONSOLE_OBJECTS = [COMMIT_V3, COMMIT_V1, TOMBSTONE, GROUP, UNKNOWN_VALUE, KIP848]


def _strip_pos(items: list) -> list:
    return [{k: v for k, v in it.items() if k not in ("line", "unit", "line_no")} for it in items]


def test_console_commit_fields() -> None:
    (rec,) = list(iter_console_json(COMMIT_V3))
    assert rec == {
        "kind": "offset_commit", "record_type": 1, "group": "my-group", "topic": "orders", "partition": 0,
        "is_tombstone": False, "value_version": 3, "offset": 42, "leader_epoch": 7, "metadata": "",
        "commit_timestamp": 1700000000000, "expire_timestamp": -1, "line": 1, "unit": "line", "line_no": 1,
    }


def test_console_v1_tombstone_group_unknown_and_kip848() -> None:
    recs = list(iter_console_json("\n".join(CONSOLE_OBJECTS)))
    assert not [r for r in recs if isinstance(r, DumpError)]
    v1, tomb, group, unknown, kip = recs[1:]
    assert v1["leader_epoch"] == -1 and v1["expire_timestamp"] == 1700086400000 and v1["metadata"] == "m"
    assert tomb["is_tombstone"] and tomb["offset"] is None and tomb["partition"] == 2
    assert group["kind"] == "group_metadata" and group["generation"] == 5 and group["leader"] == "m-1"
    (m,) = group["members"]
    assert m["client_id"] == "c" and m["client_host"] == "/10.0.0.1" and m["member_id"] == "m-1"
    assert m["subscription"] == base64.b64decode("AAE=") and m["group_instance_id"] is None
    assert unknown["value_version"] == 9 and "offset" not in unknown and unknown["group"] == "g"
    assert kip["kind"] == "other" and kip["record_type"] == 3 and kip["group_id"] == "g" and kip["epoch"] == 9
    assert [r["line"] for r in recs] == [1, 2, 3, 4, 5, 6]


def test_glued_and_newline_json_give_identical_records() -> None:
    glued = list(iter_console_json("".join(CONSOLE_OBJECTS)))
    lines = list(iter_console_json("\n".join(CONSOLE_OBJECTS) + "\n"))
    assert len(glued) == len(CONSOLE_OBJECTS)
    assert _strip_pos(glued) == _strip_pos(lines)
    # glued objects after the first are located by character offset, and by the line they start on
    assert glued[1]["unit"] == "char" and glued[1]["line"] == len(COMMIT_V3)
    assert [r["line_no"] for r in glued] == [1] * len(CONSOLE_OBJECTS)
    assert [r["line_no"] for r in lines] == list(range(1, len(CONSOLE_OBJECTS) + 1))


def test_kafka_39_variant() -> None:
    a, b = list(iter_console_json(V39 + V39_UNKNOWN))
    assert _strip_pos([a]) == _strip_pos(list(iter_console_json(COMMIT_V3)))
    assert b["record_type"] == 10 and b["value_version"] == 10 and b["kind"] == "other"


def test_console_errors_are_items_and_iteration_continues() -> None:
    text = COMMIT_V3 + "\nnot json at all\n" + '{"key":{"type":1,"data":{"group":"g"' + "\n" + TOMBSTONE + "\n"
    items = list(iter_console_json(text))
    errors = [i for i in items if isinstance(i, DumpError)]
    recs = [i for i in items if not isinstance(i, DumpError)]
    assert [e.line for e in errors] == [2, 3]
    assert [r["line"] for r in recs] == [1, 4]
    # a glued stream with garbage in the middle resyncs on the next {"key"
    items = list(iter_console_json(COMMIT_V3 + '{"key":oops}' + TOMBSTONE))
    assert [type(i) for i in items] == [dict, DumpError, dict]
    assert items[1].unit == "char"


def test_console_shape_errors() -> None:
    bad = '{"key":{"type":1,"data":{"group":"g","topic":"t","partition":0}},"value":{"version":3,"data":{"offset":"x","commitTimestamp":1}}}'
    (e,) = list(iter_console_json(bad))
    assert isinstance(e, DumpError) and "offset" in e.reason
    (e,) = list(iter_console_json("[1, 2]"))
    assert isinstance(e, DumpError)


def test_console_print_prefixes() -> None:
    (rec,) = list(iter_console_json("CreateTime:1700000000005\tPartition:7\tOffset:99\t" + COMMIT_V3))
    assert rec["record_ts"] == 1700000000005 and rec["log_partition"] == 7 and rec["log_offset"] == 99


# ---------------------------------------------------------------- Scala formatter lines (§7.1)

SCALA = """\
[my-group,orders,0]::OffsetAndMetadata(offset=42, leaderEpoch=Optional[7], metadata=, commitTimestamp=1700000000000, expireTimestamp=None)
[my-group,orders,1]::NULL
[g,with,comma,my.topic-x,3]::OffsetAndMetadata(offset=9, leaderEpoch=Optional.empty, metadata=a, b=c), commitTimestamp=1, expireTimestamp=Some(1700086400000))
g2::GroupMetadata(groupId=g2, generation=4, protocolType=Some(consumer), currentState=Stable, members=HashMap(consumer-1-abc -> MemberMetadata(memberId=consumer-1-abc, groupInstanceId=None, clientId=consumer-1, clientHost=/10.0.0.1, sessionTimeoutMs=45000, rebalanceTimeoutMs=300000, supportedProtocols=List(range))))
g3::NULL
[old,t,0]::[OffsetMetadata[17,NO_METADATA],CommitTime 1500000000000,ExpirationTime 1500086400000]
this is not a formatter line
"""


def test_scala_lines() -> None:
    items = list(iter_scala_lines(SCALA))
    a, b, c, g, gt, old, err = items
    assert a["offset"] == 42 and a["leader_epoch"] == 7 and a["metadata"] == "" and a["expire_timestamp"] == -1
    assert a["commit_timestamp"] == 1700000000000 and a["group"] == "my-group" and a["partition"] == 0
    assert b["is_tombstone"] and b["partition"] == 1 and b["line"] == 2
    assert c["group"] == "g,with,comma" and c["topic"] == "my.topic-x" and c["partition"] == 3
    assert c["leader_epoch"] == -1 and c["metadata"] == "a, b=c)" and c["expire_timestamp"] == 1700086400000
    assert g["kind"] == "group_metadata" and g["group"] == "g2" and g["generation"] == 4
    assert g["protocol_type"] == "consumer" and g["current_state"] == "Stable"
    assert [m["client_id"] for m in g["members"]] == ["consumer-1"]
    assert g["members"][0]["supported_protocols"] == ["range"]
    assert gt["is_tombstone"] and gt["group"] == "g3"
    assert old["offset"] == 17 and old["metadata"] == "" and old["expire_timestamp"] == 1500086400000
    assert isinstance(err, DumpError) and err.line == 7


# ---------------------------------------------------------------- kafka-dump-log (§7.2)

BATCH = ("baseOffset: {base} lastOffset: {last} count: 2 baseSequence: -1 lastSequence: -1 producerId: {pid} "
         "producerEpoch: 0 partitionLeaderEpoch: {ple} isTransactional: {txn} isControl: {ctl} "
         "deleteHorizonMs: OptionalLong.empty position: {pos} CreateTime: 1700000000001 size: 123 magic: 2 "
         "compresscodec: none crc: 471566481 isvalid: true")

DUMP_38 = "\n".join([
    "Dumping /data/__consumer_offsets-7/00000000000000000000.log",
    "Log starting offset: 0",
    BATCH.format(base=0, last=2, pid=-1, ple=4, txn="false", ctl="false", pos=0),
    '| offset: 0 CreateTime: 1700000000000 keySize: 12 valueSize: 24 sequence: -1 headerKeys: [] key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: {"version":"3","data":{"offset":42,"leaderEpoch":7,"metadata":"","commitTimestamp":1700000000000}}',
    '| offset: 1 CreateTime: 1700000000001 keySize: 12 valueSize: -1 sequence: -1 headerKeys: [] key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: <DELETE>',
    '| offset: 2 CreateTime: 1700000000002 keySize: 5 valueSize: 7 sequence: -1 headerKeys: [] key: {"type":"3","data":{"groupId":"g"}} payload: {"version":"0","data":{"epoch":9}}',
    BATCH.format(base=3, last=3, pid=4000, ple=5, txn="true", ctl="false", pos=123),
    '| offset: 3 CreateTime: 1700000000003 keySize: 12 valueSize: 24 sequence: 0 headerKeys: [] key: {"type":"1","data":{"group":"g","topic":"t","partition":1}} payload: {"version":"3","data":{"offset":50,"leaderEpoch":5,"metadata":"","commitTimestamp":1700000000003}}',
    BATCH.format(base=4, last=4, pid=4000, ple=5, txn="true", ctl="true", pos=246),
    "| offset: 4 CreateTime: 1700000000004 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 5",
    BATCH.format(base=5, last=5, pid=-1, ple=5, txn="false", ctl="false", pos=312),
    '| offset: 5 CreateTime: 1700000000005 keySize: 5 valueSize: 200 sequence: -1 headerKeys: [] key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer","generation":6,"protocol":"range","leader":"m-1","currentStateTimestamp":1700000000005,"members":[{"memberId":"m-1","groupInstanceId":null,"clientId":"c","clientHost":"/10.0.0.1","rebalanceTimeout":300000,"sessionTimeout":45000,"subscription":{"topics":["foo"],"userData":null,"ownedPartitions":[{"topic":"foo","partitions":[0]}],"generationId":0,"rackId":"rack"},"assignment":{"assignedPartitions":[{"topic":"foo","partitions":[0]}],"userData":null}}]}}',
    "| offset: 6 CreateTime: 1700000000006 keySize: 5 valueSize: 7 sequence: -1 headerKeys: [] key: Unknown record type 99 at offset 6, skipping.",
    "| offset: 7 CreateTime: 1700000000007 keySize: 5 valueSize: 7 sequence: -1 headerKeys: [] key: Error at offset 7, skipping. Buffer underflow",
    "",
])


def test_dump_log_38_json() -> None:
    items = list(iter_dump_log(DUMP_38))
    commit, tomb, kip, txn, marker, group, unknown, err = items
    assert commit["kind"] == "offset_commit" and commit["record_type"] == 1 and commit["value_version"] == 3
    assert commit["offset"] == 42 and commit["leader_epoch"] == 7 and commit["log_offset"] == 0
    assert commit["batch_leader_epoch"] == 4 and commit["position"] == 0 and commit["producer_id"] == -1
    assert commit["record_ts"] == 1700000000000 and commit["timestamp_type"] == "CreateTime"
    assert commit["log_partition"] == 7 and commit["file"].endswith(".log") and commit["line"] == 4
    assert tomb["is_tombstone"] and tomb["offset"] is None and tomb["log_offset"] == 1
    assert kip["record_type"] == 3 and kip["epoch"] == 9
    assert txn["is_transactional"] and txn["producer_id"] == 4000 and txn["position"] == 123
    assert marker["kind"] == "control" and marker["control_type"] == "COMMIT" and marker["coordinator_epoch"] == 5
    assert marker["is_control"] and marker["producer_id"] == 4000
    assert group["generation"] == 6
    assert group["members"][0]["assignment"]["assigned_partitions"] == [{"topic": "foo", "partitions": [0]}]
    assert unknown["kind"] == "other" and unknown["record_type"] == 99
    assert isinstance(err, DumpError) and "Buffer underflow" in err.reason and err.line == 14


def test_resolve_txn_states() -> None:
    abort = DUMP_38.replace("endTxnMarker: COMMIT", "endTxnMarker: ABORT")
    states = {r["log_offset"]: r["txn_state"] for r in resolve_txn_states(iter_dump_log(DUMP_38))
              if isinstance(r, dict)}
    assert states[0] == "none" and states[3] == "committed"
    states = {r["log_offset"]: r["txn_state"] for r in resolve_txn_states(iter_dump_log(abort))
              if isinstance(r, dict)}
    assert states[3] == "aborted"
    no_marker = "\n".join(line for line in DUMP_38.splitlines() if "endTxnMarker" not in line)
    states = {r["log_offset"]: r["txn_state"] for r in resolve_txn_states(iter_dump_log(no_marker))
              if isinstance(r, dict)}
    assert states[3] == "open"


DUMP_37 = """\
Dumping /logs/__consumer_offsets-3/00000000000000000000.log
Starting offset: 0
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 2 isTransactional: false isControl: false position: 0 CreateTime: 1700000000000 size: 100 magic: 2 compresscodec: NONE crc: 1 isvalid: true
| offset: 0 CreateTime: 1700000000000 keySize: 12 valueSize: 24 sequence: -1 headerKeys: [] key: offset_commit::group=g,partition=my-topic-0 payload: offset=42
| offset: 1 CreateTime: 1700000000001 keySize: 12 valueSize: 24 sequence: -1 headerKeys: [] key: offset_commit::group=g,partition=t-1 payload: offset=43,metadata=hello, world
| offset: 2 CreateTime: 1700000000002 keySize: 12 valueSize: -1 sequence: -1 headerKeys: [] key: offset_commit::group=g,partition=t-0 payload: <DELETE>
| offset: 3 CreateTime: 1700000000003 keySize: 5 valueSize: 90 sequence: -1 headerKeys: [] key: group_metadata::group=g payload: {"protocolType":"consumer","protocol":"range","generationId":5,"assignment":"{m-1=[t-0, t-1]}"}
| offset: 4 CreateTime: 1700000000004 keySize: 5 valueSize: -1 sequence: -1 headerKeys: [] key: unknown::version=5
"""


def test_dump_log_37_text() -> None:
    a, b, tomb, group, unknown = list(iter_dump_log(DUMP_37))
    assert (a["group"], a["topic"], a["partition"], a["offset"]) == ("g", "my-topic", 0, 42)
    assert a["leader_epoch"] is None and a["metadata"] == "" and a["batch_leader_epoch"] == 2
    assert a["log_partition"] == 3 and a["value_version"] is None
    assert b["metadata"] == "hello, world" and b["partition"] == 1
    assert tomb["is_tombstone"]
    assert group["generation"] == 5 and group["protocol"] == "range"
    (member,) = group["members"]
    assert member["member_id"] == "m-1"
    assert member["assignment"]["assigned_partitions"] == [{"topic": "t", "partitions": [0, 1]}]
    assert unknown["record_type"] == 5 and unknown["kind"] == "other"


DUMP_28 = """\
Dumping 00000000000000000000.log
Starting offset: 0
| offset: 0 isValid: true crc: null keySize: 12 valueSize: 24 CreateTime: 1600000000000 baseOffset: 0 lastOffset: 0 baseSequence: -1 lastSequence: -1 producerEpoch: -1 partitionLeaderEpoch: 3 batchSize: 100 magic: 2 compressType: NONE position: 0 sequence: -1 headerKeys: [] key: offset_commit::group=g,partition=t-0 payload: offset=7
offset: 12 position: 100 CreateTime: 1500000000000 isvalid: true size: 80 magic: 1 compresscodec: NONE crc: 123
| offset: 12 CreateTime: 1500000000000 keySize: 12 valueSize: 24 isValid: true crc: 123} key: offset_commit::group=g,partition=t-0 payload: offset=8
"""


def test_dump_log_28_long_lines_and_legacy_batches() -> None:
    a, b = list(iter_dump_log(DUMP_28))
    assert a["batch_leader_epoch"] == 3 and a["base_offset"] == 0 and a["offset"] == 7 and a["record_ts"] == 1600000000000
    assert b["last_offset"] == 12 and b["position"] == 100 and b["batch_leader_epoch"] is None and b["offset"] == 8


def test_dump_log_bad_lines_are_errors() -> None:
    text = DUMP_37.replace("Starting offset: 0", "Found 12 invalid bytes at the end of 0.log")
    text += "| offset: 5 CreateTime: 1 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: \x00\x01garbage payload: x\n"
    items = list(iter_dump_log(text))
    errors = [i for i in items if isinstance(i, DumpError)]
    assert [e.line for e in errors] == [2, 9]
    assert len(items) == 7


def test_records_of_a_batch_whose_crc_fails_are_errors_not_commits() -> None:
    """kafka-dump-log prints a batch whose CRC check fails with ``isvalid: false`` and then its records, decoded from
    the corrupt bytes (DumpLogSegments.dumpLog). The binary reader quarantines such a batch; the text reader took its
    records as commits (an offset of 42 read from corrupt bytes could be anything)."""
    bad = DUMP_38.replace(BATCH.format(base=3, last=3, pid=4000, ple=5, txn="true", ctl="false", pos=123),
                          BATCH.format(base=3, last=3, pid=4000, ple=5, txn="true", ctl="false", pos=123)
                          .replace("isvalid: true", "isvalid: false"))
    assert bad != DUMP_38
    items = list(iter_dump_log(bad))
    errors = [i for i in items if isinstance(i, DumpError)]
    assert [(e.line, "isvalid: false" in e.reason) for e in errors[:1]] == [(8, True)]
    assert [i["log_offset"] for i in items if not isinstance(i, DumpError)] == [0, 1, 2, 4, 5, 6]  # the rest is read


# ---------------------------------------------------------------- detection
# ---------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        (COMMIT_V3 + TOMBSTONE, "console_json"),
        ("\n" + V39, "console_json"),
        (SCALA, "scala"),
        ("g3::NULL\n", "scala"),
        (DUMP_38, "dump_log"),
        (DUMP_37, "dump_log"),
        ("| offset: 0 CreateTime: 1 key: x", "dump_log"),
        ("hello world\n", None),
        ("", None),
        ('{"a": 1}', None),
    ],
)
def test_detect_dump_format(text: str, fmt: str | None) -> None:
    assert detect_dump_format(text[:4000]) == fmt


def test_iter_dump_records_dispatch() -> None:
    assert len([r for r in iter_dump_records(DUMP_37) if isinstance(r, dict)]) == 5
    assert len(list(iter_dump_records("".join(CONSOLE_OBJECTS)))) == len(CONSOLE_OBJECTS)
    (e,) = list(iter_dump_records("nonsense"))
    assert isinstance(e, DumpError)


def test_bytes_input_with_bad_utf8_line() -> None:
    data = (COMMIT_V3 + "\n").encode() + b"\xff\xfe\n" + (TOMBSTONE + "\n").encode()
    items = list(iter_console_json(data))
    assert [type(i) for i in items] == [DumpError, dict, dict]
    assert items[0].line == 2 and items[2]["line"] == 3


# ---------------------------------------------------------------- fuzz

_PIECES = st.sampled_from([
    "{", "}", '"key"', '"value"', ":", ",", "null", '"type"', '"version"', '"data"', "1", '"1"', "[", "]",
    "\n", " ", "| offset: ", "key: ", " payload: ", "<DELETE>", "baseOffset: ", "::", "NULL", "[g,t,0]",
    "OffsetAndMetadata(", "offset=", "Optional[", "GroupMetadata(", "endTxnMarker: ", "COMMIT", "Dumping ",
    "unknown", '"unknown"', "offset_commit::group=", ",partition=", "group_metadata::group=", "\t", "-",
])
_FUZZ = st.one_of(
    st.text(max_size=300),
    st.lists(_PIECES, max_size=60).map("".join),
    st.binary(max_size=200),
    st.lists(st.sampled_from(CONSOLE_OBJECTS + [SCALA, DUMP_37]), max_size=4).flatmap(
        lambda parts: st.integers(0, max(0, len("".join(parts)))).map(lambda k, p=parts: "".join(p)[:k])
    ),
)


@settings(max_examples=200, deadline=None)
@given(_FUZZ)
def test_iterators_only_yield_records_or_errors(data: str | bytes) -> None:
    for it in (iter_console_json, iter_scala_lines, iter_dump_log, iter_dump_records):
        for item in it(data):
            assert isinstance(item, (dict, DumpError))
            if isinstance(item, dict):
                assert "kind" in item and "line" in item
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    assert detect_dump_format(text) in (None, "console_json", "scala", "dump_log")
    list(resolve_txn_states(iter_dump_log(data)))


# ---------------------------------------------------------------- readings (issue 12 item 6)

REC37 = "| offset: {o} CreateTime: 1700000000000 keySize: 5 valueSize: {vs} sequence: -1 headerKeys: [] key: {key}"


def test_dump_log_37_unknown_key_with_a_value_is_not_a_tombstone() -> None:
    """``unknown::version=N`` never prints a payload (the ≤3.7 decoder only knows types 0-2): the
    record has a value unless ``valueSize: -1``; the value is unknown, not null."""
    text = "\n".join([
        "Dumping /logs/__consumer_offsets-3/00000000000000000000.log",
        REC37.format(o=0, vs=14, key="unknown::version=3"),
        REC37.format(o=1, vs=-1, key="unknown::version=3"),
        "| offset: 2 CreateTime: 1700000000002 key: unknown::version=8",  # no sizes printed
    ])
    live, tomb, nosize = list(iter_dump_log(text))
    assert live["record_type"] == 3 and live["kind"] == "other" and live["is_tombstone"] is False
    assert live["value_version"] is None and "epoch" not in live
    assert tomb["is_tombstone"] is True
    assert nosize["record_type"] == 8 and nosize["is_tombstone"] is False


def test_dump_log_37_commit_has_unknown_leader_epoch() -> None:
    """``payload: offset=42`` prints no leader epoch (nor expire timestamp): unknown (None), not -1,
    which would claim the commit carried no epoch."""
    a, b, *_ = list(iter_dump_log(DUMP_37))
    assert a["offset"] == 42 and a["leader_epoch"] is None and a["expire_timestamp"] is None
    assert b["offset"] == 43 and b["leader_epoch"] is None and b["commit_timestamp"] is None
    # formats that do print it keep it, and the Scala Optional.empty stays -1 (stored as -1)
    assert next(iter_dump_log(DUMP_38))["leader_epoch"] == 7
    scala = [r for r in iter_scala_lines(SCALA) if isinstance(r, dict)]
    assert scala[0]["leader_epoch"] == 7 and scala[2]["leader_epoch"] == -1


@pytest.mark.parametrize(("rtype", "name"), [(3, "ConsumerGroupMetadata"), (11, "ShareGroupMetadata"),
                                             (17, "StreamsGroupMetadata")])
def test_kip848_group_epoch_reads_like_the_segment_decoder(rtype: int, name: str) -> None:
    """The group epoch of a KIP-848 ``…GroupMetadataValue`` from console JSON and dump-log ≥3.8
    comes out under the segment decoder's keys (``epoch``, ``group``), tombstones included."""
    from epochlib import coordinator

    key, value = coordinator.encode_key(rtype, {"group_id": "cg"}), coordinator.encode_value(rtype, 0, {"epoch": 12})
    seg = coordinator.decode_record(key, value)
    assert seg.type_name == name
    console = (f'{{"key":{{"type":{rtype},"data":{{"groupId":"cg"}}}},"value":{{"version":0,"data":{{"epoch":12}}}}}}'
               f'{{"key":{{"type":{rtype},"data":{{"groupId":"cg"}}}},"value":null}}')
    dump = "\n".join([
        REC37.format(o=0, vs=7, key=f'{{"type":"{rtype}","data":{{"groupId":"cg"}}}} payload: '
                                    '{"version":"0","data":{"epoch":12}}'),
        REC37.format(o=1, vs=-1, key=f'{{"type":"{rtype}","data":{{"groupId":"cg"}}}} payload: <DELETE>'),
    ])
    for live, tomb in (list(iter_console_json(console)), list(iter_dump_log(dump))):
        assert live["record_type"] == seg.record_type and live["value_version"] == seg.value_version
        assert live["group"] == seg.group == "cg" and live["epoch"] == seg.value["epoch"] == 12
        assert not live["is_tombstone"]
        assert tomb["is_tombstone"] and tomb["group"] == "cg" and tomb.get("epoch") is None
