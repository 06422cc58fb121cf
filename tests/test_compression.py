"""epochlib._compression: the decompressed-size cap (compression bombs) for every codec and framing,
that it is enforced before the output grows past it, that a bomb batch in a segment is one bad
entry (one quarantined unit in ingestion) between good ones, and that the fast path's many-sections
entry point agrees with decompress()."""

from __future__ import annotations

import contextlib
import random
import struct
import tracemalloc
import zlib

import cramjam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlib import _compression as comp
from epochlib import coordinator
from epochlib.errors import DecodeError
from epochlib.records import (
    BadBatch,
    Batch,
    NewRecord,
    batches_arrow,
    decode_batch,
    encode_batch,
    encode_legacy_message_set,
    iter_batches,
)

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CAP = 1 << 20  # a lowered cap keeps the bombs small
BOMB = b"\0" * (4 * CAP)
TS = 1_700_000_000_000


def _too_big(limit: int) -> str:
    return f"batch decompresses to more than {limit} bytes"


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(1, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


# ---------------------------------------------------------------- every codec, every framing


def _framings() -> dict[str, tuple[int, bytes]]:
    """(codec id, compressed BOMB) for every framing a reader accepts."""
    import lz4.frame
    import zstandard

    return {
        "gzip": (1, _gzip(BOMB)),
        "gzip, two members": (1, _gzip(BOMB[: CAP // 2]) + _gzip(BOMB)),
        "snappy xerial": (2, comp.compress(2, BOMB)),
        "snappy bare block": (2, bytes(cramjam.snappy.compress_raw(BOMB))),
        "lz4 kafka frame": (3, comp.compress(3, BOMB)),
        "lz4 4 MiB blocks": (3, lz4.frame.compress(BOMB, block_size=lz4.frame.BLOCKSIZE_MAX4MB,
                                                   block_linked=False, store_size=False)),
        "lz4 declared content size": (3, lz4.frame.compress(BOMB, block_linked=False, store_size=True)),
        "zstd": (4, comp.compress(4, BOMB)),
        "zstd, two frames": (4, comp.compress(4, BOMB[:100]) + comp.compress(4, BOMB)),
        "zstd with content size": (4, zstandard.ZstdCompressor(write_content_size=True).compress(BOMB)),
    }


@pytest.mark.parametrize("framing", list(_framings()))
def test_every_codec_refuses_output_past_the_cap_and_keeps_output_at_the_cap(framing):
    codec, data = _framings()[framing]
    plain = comp.decompress(codec, data, max_size=1 << 30)
    assert plain.count(0) == len(plain) >= len(BOMB)
    with pytest.raises(DecodeError, match=_too_big(CAP)):
        comp.decompress(codec, data, max_size=CAP)
    assert comp.decompress(codec, data, max_size=len(plain)) == plain  # exactly at the cap: fine
    with pytest.raises(DecodeError, match=_too_big(len(plain) - 1)):
        comp.decompress(codec, data, max_size=len(plain) - 1)


@pytest.mark.parametrize("framing", ["gzip", "snappy xerial", "lz4 kafka frame", "zstd"])
def test_the_cap_is_checked_before_the_output_grows_past_it(framing):
    """A 64 MiB bomb under a 1 MiB cap: the Python-visible allocations stay near the cap (the bomb's
    own size would show as a 64 MiB peak). cramjam's native buffers are not traced, but snappy's
    length check happens before them and lz4's scratch is a fixed 64 KiB."""
    codec, _ = _framings()[framing]
    big = b"\0" * (64 << 20)
    data = {1: _gzip, 2: lambda b: comp.compress(2, b), 3: lambda b: comp.compress(3, b),
            4: lambda b: comp.compress(4, b)}[codec](big)
    del big
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError, match=_too_big(CAP)):
            comp.decompress(codec, data, max_size=CAP)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * CAP + (1 << 20), peak


def test_snappy_length_header_is_checked_before_decompressing():
    # a bare block that claims 3 GiB: refused from its header, no 3 GiB buffer is ever requested
    claim = bytes([0x80, 0x80, 0x80, 0x80, 0x0C]) + b"\0" * 16
    with pytest.raises(DecodeError, match=_too_big(comp.MAX_DECOMPRESSED_SIZE)):
        comp.decompress(2, claim)
    xerial = comp.compress(2, b"x")[:16] + struct.pack(">I", len(claim)) + claim
    with pytest.raises(DecodeError, match=_too_big(comp.MAX_DECOMPRESSED_SIZE)):
        comp.decompress(2, xerial)


def test_default_cap_is_64_mib_and_catches_a_real_bomb():
    assert comp.MAX_DECOMPRESSED_SIZE == 64 * 1024 * 1024
    bomb = comp.compress(4, b"\0" * (comp.MAX_DECOMPRESSED_SIZE + 1))
    assert len(bomb) < 4096  # ~30 000:1
    with pytest.raises(DecodeError, match=_too_big(comp.MAX_DECOMPRESSED_SIZE)):
        comp.decompress(4, bomb)


def test_module_constant_is_read_at_call_time(monkeypatch):
    data = comp.compress(1, BOMB)
    assert comp.decompress(1, data) == BOMB
    monkeypatch.setattr(comp, "MAX_DECOMPRESSED_SIZE", CAP)
    with pytest.raises(DecodeError, match=_too_big(CAP)):
        comp.decompress(1, data)


def test_libzstd_refuses_blocks_over_128_kib_which_the_one_call_zstd_path_relies_on():
    """ZSTD_SMALL_RATIO assumes libzstd rejects a block regenerating more than 128 KiB (here an RLE
    block: 4 bytes claiming up to 2 MiB - 1). If a libzstd release stops doing so, this fails."""

    def rle_frame(size: int) -> bytes:  # window 2 MiB, one last RLE block of ``size`` bytes of "A"
        return b"\x28\xb5\x2f\xfd\x00\x58" + ((size << 3) | 0b11).to_bytes(3, "little") + b"A"

    assert comp.decompress(4, rle_frame(128 * 1024)) == b"A" * (128 * 1024)
    for size in (128 * 1024 + 1, (1 << 21) - 1):
        with pytest.raises(DecodeError, match="zstd"):
            comp.decompress(4, rle_frame(size))
    assert comp.ZSTD_SMALL_RATIO == 128 * 1024 // 4


def test_zstd_large_input_is_fed_in_slices_and_agrees(monkeypatch):
    import random

    rnd = random.Random(7)
    plain = bytes(rnd.getrandbits(8) if i % 7 else 0 for i in range(300_000))
    frames = comp.compress(4, plain[:100_000]) + comp.compress(4, plain[100_000:])
    assert len(frames) > comp.MAX_DECOMPRESSED_SIZE // comp.ZSTD_SMALL_RATIO  # takes the sliced path
    assert comp.decompress(4, frames) == plain
    for cut in (len(frames) - 1, len(frames) // 2, 3):
        with pytest.raises(DecodeError):
            comp.decompress(4, frames[:cut])
    with pytest.raises(DecodeError):
        comp.decompress(4, frames + b"junk")


def test_zstd_without_the_zstandard_package_is_capped_too(monkeypatch):
    monkeypatch.setattr(comp, "_ZSTD_DCTX", None)
    small = comp.compress(4, b"abc" * 10)
    assert comp.decompress(4, small) == b"abc" * 10
    data = comp.compress(4, BOMB)
    assert len(data) > CAP // comp.ZSTD_SMALL_RATIO
    assert comp.decompress(4, data, max_size=len(BOMB)) == BOMB
    with pytest.raises(DecodeError, match=_too_big(CAP)):
        comp.decompress(4, data, max_size=CAP)


def test_uncompressed_data_is_not_capped():
    assert comp.decompress(0, b"x" * 100, max_size=10) == b"x" * 100


FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.sampled_from(sorted(CODECS.values())), st.binary(max_size=300), st.integers(0, 5000),
       st.integers(0, 2))
def test_fuzz_only_decode_errors_under_any_cap(codec, data, cap, magic):
    # behind a valid frame header too, so the codecs' bodies are reached
    heads = {1: _gzip(b"")[:10], 2: comp.compress(2, b"")[:16], 3: comp.compress(3, b"")[:7],
             4: comp.compress(4, b"x")[:6]}
    for d in (data, heads[codec] + data):
        with contextlib.suppress(DecodeError):
            assert len(comp.decompress(codec, d, magic, max_size=cap)) <= cap


# ---------------------------------------------------------------- one bomb batch in a segment


def _commit(i: int) -> NewRecord:
    key = coordinator.encode_offset_commit_key("g", "t", 0)
    value = coordinator.encode_offset_commit_value(i, leader_epoch=1, commit_timestamp=TS + i)
    return NewRecord(key, value, TS + i)


def _bomb_segment(codec: str, cap: int) -> tuple[bytes, int, int]:
    """good batch, a *valid* batch whose records decompress past ``cap``, good batch:
    (segment, position of the bomb, offset of the last good record)."""
    good1 = encode_batch([_commit(0)], base_offset=0, compression=codec)
    n = cap // (len(encode_batch([_commit(1)])) - 61) + 100  # a few KiB compressed, > cap decompressed
    bomb = encode_batch([_commit(1 + i) for i in range(n)], base_offset=1, compression=codec)
    good2 = encode_batch([_commit(n + 1)], base_offset=n + 1, compression=codec)
    assert len(bomb) < cap // 2
    return good1 + bomb + good2, len(good1), n + 1


@pytest.mark.parametrize("codec", list(CODECS))
def test_a_bomb_batch_between_two_good_ones_is_one_bad_entry(codec, monkeypatch):
    cap = 256 * 1024
    seg, bomb_pos, last = _bomb_segment(codec, cap)
    assert sum(isinstance(b, Batch) for b in iter_batches(seg)) == 3  # under the default cap: all good

    monkeypatch.setattr(comp, "MAX_DECOMPRESSED_SIZE", cap)
    items = list(iter_batches(seg, base_position=1000))
    assert [type(b) for b in items] == [Batch, BadBatch, Batch]
    assert [r.offset for b in items if isinstance(b, Batch) for r in b.records] == [0, last]
    bad = items[1]
    assert bad.position == 1000 + bomb_pos and _too_big(cap) in bad.reason
    with pytest.raises(DecodeError, match=_too_big(cap)):
        decode_batch(seg, bomb_pos)

    res = batches_arrow(seg, base_position=1000)  # the columnar path agrees with the reference
    assert res.batches.column("position").to_pylist() == [b.position for b in items]
    assert res.batches.column("error").to_pylist() == [None, bad.reason, None]
    assert res.records.column("offset").to_pylist() == [0, last]


def test_a_legacy_wrapper_bomb_is_one_bad_entry(monkeypatch):
    monkeypatch.setattr(comp, "MAX_DECOMPRESSED_SIZE", CAP)
    good = encode_legacy_message_set([NewRecord(b"k", b"v", TS)], magic=1, compression="gzip")
    bomb = encode_legacy_message_set([NewRecord(b"k", BOMB, TS)], magic=1, base_offset=1, compression="gzip")
    items = list(iter_batches(good + bomb + good))
    assert [type(b) for b in items] == [Batch, BadBatch, Batch]
    assert _too_big(CAP) in items[1].reason and "(wrapper value)" in items[1].reason
    assert batches_arrow(good + bomb + good).batches.column("error").to_pylist() == [None, items[1].reason, None]


def test_ingestion_quarantines_the_bomb_batch_and_keeps_the_good_ones(tmp_path, monkeypatch):
    from jobs.ingest._rows import COMMITS, OFFSETS_WORK
    from jobs.ingest.offsets_segments import decode_segment_commits, decode_segment_side
    from jobs.ingest.ranges import RANGE_SCHEMA

    cap = 256 * 1024
    seg, bomb_pos, last = _bomb_segment("zstd", cap)
    p = tmp_path / "__consumer_offsets-0" / "00000000000000000000.log"
    p.parent.mkdir()
    p.write_bytes(seg)
    monkeypatch.setattr(comp, "MAX_DECOMPRESSED_SIZE", cap)
    row = {"source": str(p), "size": len(seg), "start": 0, "end": len(seg), "target": 1 << 30, "broker": "1",
           "log_partition": 0, "topic": None, "partition": None, "snapshot_ms": None}
    ranges = pa.RecordBatch.from_pylist([row], schema=RANGE_SCHEMA)
    commits = pa.Table.from_batches(list(decode_segment_commits(iter([ranges]))), schema=COMMITS)
    work = pa.Table.from_batches(list(decode_segment_side(iter([ranges]))), schema=OFFSETS_WORK)
    kind = work["row_kind"]
    assert sorted(commits["committed_offset"].to_pylist()) == [0, last]
    q = work.filter(pc.equal(kind, "quarantine")).to_pylist()
    assert len(q) == 1 and q[0]["unit"] == "batch" and q[0]["position"] == bomb_pos
    assert _too_big(cap) in q[0]["reason"] and q[0]["raw"] == seg[bomb_pos : bomb_pos + 4096]
    stats = {s["unit"]: s for s in work.filter(pc.equal(kind, "stats")).to_pylist()}
    assert (stats["batch"]["n_read"], stats["batch"]["n_bad"]) == (3, 1)


# ---------------------------------------------------------------- the fast path's entry point


def _sections() -> list[tuple[int, bytes]]:
    """(codec id, compressed bytes) in every shape: the one-frame shapes Kafka writes for a small
    batch (each codec's helper decodes those), the longer streams and damaged ones (the full paths)."""
    import lz4.frame

    small, big = b"commit " * 40, bytes(range(256)) * 600  # big: > one 64 KiB LZ4 block / xerial chunk
    incompressible = random.Random(0).randbytes(300)  # LZ4 stores it: the one-stored-block shape
    out = []
    for plain in (small, big, incompressible, b""):
        out += [(1, _gzip(plain)), (2, comp.compress(2, plain)), (3, comp.compress(3, plain)),
                (4, comp.compress(4, plain))]
    out += [
        (1, _gzip(small) + _gzip(small)),  # two members
        (2, bytes(cramjam.snappy.compress_raw(small))),  # a bare block
        (3, lz4.frame.compress(big, block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False,
                               store_size=False)),  # one 4 MiB-maximum block with > 64 KiB output
        (4, comp.compress(4, small) + comp.compress(4, small)),  # two frames
    ]
    damaged = [(c, d[:-3]) for c, d in out[:8]] + [(c, d[:12] + b"\xff" * 8 + d[20:]) for c, d in out[:8]]
    return out + damaged


@pytest.mark.parametrize("cap", [64 * 1024 * 1024, 4000, 0])
def test_decompress_sections_gives_what_decompress_gives_for_every_shape(cap, monkeypatch):
    """The Arrow path decompresses through decompress_sections, the reference through decompress:
    same bytes, same cap, and a failure exactly where decompress raises."""
    monkeypatch.setattr(comp, "MAX_DECOMPRESSED_SIZE", cap)
    sections = _sections()
    buf = b"".join(d for _c, d in sections)
    ends = np.cumsum([len(d) for _c, d in sections])
    starts = ends - [len(d) for _c, d in sections]
    got, failed = comp.decompress_sections(buf, starts, ends, np.array([c for c, _d in sections]))
    expected, expected_failed = [], []
    for i, (c, d) in enumerate(sections):
        try:
            expected.append(comp.decompress(c, d))
        except DecodeError:
            expected.append(b"")
            expected_failed.append(i)
    assert failed == expected_failed
    assert got == expected
    if cap:
        assert len(failed) < len(sections)  # the sound sections decoded
