#!/usr/bin/env python3
"""Writes the byte fixtures under tests/fixtures/records/.

The batches are built by kafka-python's own record builders (PyPI
kafka-python==3.0.12, `kafka.record`): DefaultRecordBatchBuilder for message
format v2 (KIP-98) and LegacyRecordBatchBuilder for message sets v0/v1, with
python-snappy (xerial framing), lz4, zstandard and xxhash for the codecs.
They are an implementation independent of ours, so our decoder is checked
against bytes it did not write.

Where a broker would change bytes after the producer (the base offset, the
partition leader epoch, the offset of a v0/v1 wrapper message, the
LogAppendTime flag), this script patches them the way a broker does and, if
the field is under a CRC, recomputes that CRC with kafka-python's own CRC
functions. kafka-python cannot build control batches (only brokers write
them), so the control batches here are built with DefaultRecordBatchBuilder
and then given the control attribute bit and a new CRC-32C: the patch is
small and the resulting bytes are what a transaction coordinator writes.

Run (from the repository root):

    python3 -m venv .venv-fixtures
    .venv-fixtures/bin/pip install kafka-python==3.0.12 python-snappy==0.7.3 \
        lz4==4.4.5 zstandard==0.25.0 xxhash==4.1.0
    .venv-fixtures/bin/python scripts/gen_record_fixtures.py

The record contents follow fixed formulas (see `v2_records` and
`legacy_records` below) that tests/records_fixtures.rs repeats, so every
fixture's expected records are known exactly.
"""

import os
import struct
import sys
import zlib

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.util import calc_crc32c

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "records")

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

BASE_TS = 1_700_000_000_000
V2_BASE_OFFSET = 100
V2_LEADER_EPOCH = 7
PRODUCER_ID = 4242


def value_of(i):
    # Repetitive on purpose: kafka-python sends a batch uncompressed when
    # compression does not make it smaller, and every codec must engage.
    return (b"value-%d|" % i) * 8


def v2_records(n=5):
    """(offset_delta, timestamp, key, value, headers) of the v2 fixtures."""
    out = []
    for i in range(n):
        key = None if i == 1 else b"key-%d" % i
        value = None if i == 3 else value_of(i)
        headers = [("h1", b"hv-%d" % i), ("empty", None)] if i % 2 == 0 else []
        out.append((i, BASE_TS + 1000 * i, key, value, headers))
    return out


def legacy_records(n=3):
    """(index, timestamp, key, value) of the v0/v1 fixtures."""
    out = []
    for i in range(n):
        key = None if i == 1 else b"key-%d" % i
        out.append((i, BASE_TS + 1000 * i, key, value_of(i)))
    return out


def patch_v2(buf, base_offset=V2_BASE_OFFSET, leader_epoch=V2_LEADER_EPOCH, set_attrs=0):
    """Sets what the broker sets on a v2 batch: base offset and leader epoch
    (both outside the CRC), and optionally extra attribute bits (inside the
    CRC, so the CRC-32C over attributes..end is recomputed)."""
    buf = bytearray(buf)
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, leader_epoch)
    if set_attrs:
        (attrs,) = struct.unpack_from(">h", buf, 21)
        struct.pack_into(">h", buf, 21, attrs | set_attrs)
        struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return bytes(buf)


def v2_batch(codec, records, transactional=False, producer_id=-1, base_offset=V2_BASE_OFFSET):
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=0 if producer_id != -1 else -1,
        base_sequence=0 if producer_id != -1 else -1, batch_size=1 << 20)
    for (delta, ts, key, value, headers) in records:
        assert b.append(delta, ts, key, value, headers) is not None
    out = patch_v2(b.build(), base_offset=base_offset)
    (attrs,) = struct.unpack_from(">h", out, 21)
    assert attrs & 7 == codec, "kafka-python fell back to no compression for %s" % CODEC_NAMES[codec]
    return out


def control_batch(producer_id, base_offset, commit, ts):
    """A transaction marker (KIP-98): one record whose key is
    (version int16 = 0, type int16: 0 abort, 1 commit) and whose value is
    (version int16 = 0, coordinator epoch int32)."""
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=NONE, is_transactional=True,
        producer_id=producer_id, producer_epoch=0, base_sequence=-1, batch_size=1 << 20)
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 3)
    assert b.append(0, ts, key, value, []) is not None
    return patch_v2(b.build(), base_offset=base_offset, set_attrs=0x20)


def legacy_batch(magic, codec, offsets, wrapper_offset=None, log_append_time=None):
    """A v0/v1 message set. Uncompressed: one message per record at
    `offsets`. Compressed: one wrapper message whose value holds the inner
    messages, which carry `offsets` as written (relative 0..n-1 for v1, as
    KIP-31 producers write them; absolute for v0, as the broker rewrites
    them); the wrapper's offset is set as a broker sets it, to the offset of
    the last inner message."""
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for off, (_, ts, key, value) in zip(offsets, legacy_records(len(offsets))):
        assert b.append(off, ts if magic else None, key, value) is not None
    buf = bytearray(b.build())
    if codec != NONE:
        struct.pack_into(">q", buf, 0, wrapper_offset)
        if log_append_time is not None:
            # A broker with message.timestamp.type=LogAppendTime stamps the
            # wrapper (attribute bit 3 and its timestamp); CRC-32 over
            # magic..end changes.
            assert magic == 1
            buf[17] |= 0x08
            struct.pack_into(">q", buf, 18, log_append_time)
            struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:])) & 0xFFFFFFFF)
    return bytes(buf)


def write(name, data):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        f.write(data)
    print("%-40s %6d bytes" % (name, len(data)))


def main():
    os.makedirs(OUT, exist_ok=True)

    # Message format v2, one batch per codec, same five records.
    for codec in (NONE, GZIP, SNAPPY, LZ4, ZSTD):
        write("v2_%s.bin" % CODEC_NAMES[codec], v2_batch(codec, v2_records()))

    # A compacted batch: offsets 100, 103, 107 survive; lastOffsetDelta is 7.
    gaps = [(d, BASE_TS + d, b"k%d" % d, value_of(d), []) for d in (0, 3, 7)]
    write("v2_compacted_gaps.bin", v2_batch(NONE, gaps))

    # Transactions (KIP-98). Producer 4242 writes offsets 10-11 and aborts
    # (marker at 14); producer 4243 writes 12-13 (gzip) and commits (marker
    # at 15); a non-transactional batch follows at 16. The Fetch response's
    # aborted list for this set is [(4242, 10)].
    def txn_records(first, n):
        return [(i, BASE_TS + first + i, b"t%d" % (first + i), value_of(first + i), []) for i in range(n)]

    write("v2_transactions.bin", b"".join([
        v2_batch(NONE, txn_records(10, 2), transactional=True, producer_id=PRODUCER_ID, base_offset=10),
        v2_batch(GZIP, txn_records(12, 2), transactional=True, producer_id=PRODUCER_ID + 1, base_offset=12),
        control_batch(PRODUCER_ID, 14, commit=False, ts=BASE_TS + 14),
        control_batch(PRODUCER_ID + 1, 15, commit=True, ts=BASE_TS + 15),
        v2_batch(NONE, txn_records(16, 1), base_offset=16),
    ]))

    # Message sets v0/v1.
    for magic in (0, 1):
        write("v%d_none.bin" % magic, legacy_batch(magic, NONE, [50, 51, 52]))
        for codec in (GZIP, SNAPPY, LZ4):
            # v0 lz4 uses kafka-python's lz4_encode_old_kafka: the header
            # checksum is computed the broken way of KIP-57.
            inner = [0, 1, 2] if magic == 1 else [300, 301, 302]
            outer = 202 if magic == 1 else 302
            write("v%d_%s.bin" % (magic, CODEC_NAMES[codec]),
                  legacy_batch(magic, codec, inner, wrapper_offset=outer))
    write("v1_gzip_log_append_time.bin",
          legacy_batch(1, GZIP, [0, 1, 2], wrapper_offset=202, log_append_time=BASE_TS + 99_999))
    return 0


if __name__ == "__main__":
    sys.exit(main())
