//! Record batches, message format v2 (magic 2; KIP-98).
//!
//! ```text
//! baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 |
//! magic int8 (2) | crc uint32 | attributes int16 | lastOffsetDelta int32 |
//! baseTimestamp int64 | maxTimestamp int64 | producerId int64 |
//! producerEpoch int16 | baseSequence int32 | recordCount int32 | records
//! ```
//!
//! `batchLength` counts the bytes after itself. The CRC is CRC-32C over
//! `attributes` to the end of the batch, so a broker can rewrite the base
//! offset and the leader epoch without recomputing it: those two fields
//! (and the length and magic, which decide where the batch ends and how to
//! read it) are the only bytes of a batch no checksum protects.
//!
//! Attributes: bits 0-2 compression, bit 3 timestamp type (LogAppendTime),
//! bit 4 transactional, bit 5 control batch, bit 6 delete horizon
//! (KIP-534; it only changes what `baseTimestamp` means, which consumers do
//! not read for records).
//!
//! A record: `length varint | attributes int8 | timestampDelta varlong |
//! offsetDelta varint | keyLength varint | key | valueLength varint | value
//! | headerCount varint | headers`, each header `keyLength varint | key |
//! valueLength varint | value`; lengths of -1 mean null. The whole records
//! section is compressed when the batch is.

use super::compression::{self, Compression};
use super::record::{read_headers, varint_span, Entry, Span, TimestampType};
use super::DecodedRecords;
use super::{Checksum, RecordsError, RecordsErrorKind};
use crate::protocol::Reader;
use bytes::Bytes;

/// `baseOffset` and `batchLength`: the bytes before what `batchLength`
/// counts, common to every message format.
pub(crate) const LOG_OVERHEAD: usize = 12;
/// The bytes of a v2 batch before its records.
pub(crate) const HEADER_LEN: usize = 61;
/// Where the CRC-32C coverage starts (the attributes field).
pub(crate) const CRC_START: usize = 21;
/// Where the CRC sits.
pub(crate) const CRC_AT: usize = 17;
/// Where the magic byte sits.
const MAGIC_AT: usize = 16;
/// Where `producerId` sits (`producerEpoch` and `baseSequence` follow it).
const PRODUCER_ID_AT: usize = 43;
/// The smallest encoded record: one byte each for length, attributes,
/// timestamp delta, offset delta, key length, value length and header
/// count.
const MIN_RECORD: usize = 7;

pub(crate) const ATTR_COMPRESSION: i16 = 0x07;
pub(crate) const ATTR_LOG_APPEND_TIME: i16 = 0x08;
pub(crate) const ATTR_TRANSACTIONAL: i16 = 0x10;
pub(crate) const ATTR_CONTROL: i16 = 0x20;

/// The fixed header of a v2 batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchHeader {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub record_count: i32,
}

impl BatchHeader {
    /// Reads the header of `batch`, a whole batch whose length was checked
    /// against `batchLength` (so at least [`HEADER_LEN`] bytes).
    pub fn read(batch: &Bytes) -> Result<BatchHeader, RecordsErrorKind> {
        let mut r = Reader::new(batch.slice(..HEADER_LEN.min(batch.len())));
        let base_offset = r.i64("baseOffset")?;
        r.skip("batchLength", 4)?;
        let partition_leader_epoch = r.i32("partitionLeaderEpoch")?;
        r.skip("magic", 1)?;
        let crc = r.u32("crc")?;
        let attributes = r.i16("attributes")?;
        let last_offset_delta = r.i32("lastOffsetDelta")?;
        let base_timestamp = r.i64("baseTimestamp")?;
        let max_timestamp = r.i64("maxTimestamp")?;
        let producer_id = r.i64("producerId")?;
        r.skip("producerEpoch", 2)?;
        r.skip("baseSequence", 4)?;
        let record_count = r.i32("recordCount")?;
        if last_offset_delta < 0 {
            return Err(RecordsErrorKind::BadLength {
                what: "lastOffsetDelta",
                length: i64::from(last_offset_delta),
            });
        }
        if record_count < 0 {
            return Err(RecordsErrorKind::BadLength {
                what: "recordCount",
                length: i64::from(record_count),
            });
        }
        Ok(BatchHeader {
            base_offset,
            partition_leader_epoch,
            crc,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            record_count,
        })
    }

    pub fn compression(&self) -> Result<Compression, RecordsErrorKind> {
        let id = (self.attributes & ATTR_COMPRESSION) as u8;
        Compression::from_id(id).ok_or(RecordsErrorKind::UnknownCompression(id))
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    /// The offset after this batch: where the next fetch starts, whatever
    /// records compaction removed from it.
    pub fn next_offset(&self) -> Result<i64, RecordsErrorKind> {
        self.base_offset
            .checked_add(i64::from(self.last_offset_delta) + 1)
            .ok_or(RecordsErrorKind::Malformed {
                what: "lastOffsetDelta",
                reason: "offset overflows int64",
            })
    }

    /// Checks the CRC-32C over attributes..end.
    pub fn verify_crc(&self, batch: &[u8]) -> Result<(), RecordsErrorKind> {
        let actual = computed_crc(batch);
        if actual != self.crc {
            return Err(RecordsErrorKind::CrcMismatch {
                algorithm: Checksum::Crc32c,
                expected: self.crc,
                actual,
            });
        }
        Ok(())
    }
}

/// The records section of `batch`, decompressed when the batch is
/// compressed (to at most `limit` bytes). Uncompressed, it is a slice of
/// `batch`.
pub(crate) fn records_section(
    batch: &Bytes,
    header: &BatchHeader,
    limit: usize,
) -> Result<Bytes, RecordsErrorKind> {
    let section = batch.slice(HEADER_LEN.min(batch.len())..);
    match header.compression()? {
        Compression::None => Ok(section),
        // Records locate their fields with u32 positions.
        codec => compression::decompress(codec, &section, limit.min(u32::MAX as usize), 2)
            .map(Bytes::from),
    }
}

/// The CRC-32C of a whole v2 batch, over attributes..end.
fn computed_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(CRC_START..).unwrap_or_default())
}

/// Whether `entry` (one whole entry of a record set: base offset, length,
/// body) is a v2 batch whose CRC-32C matches. Anything else (a legacy
/// message, a batch too short to hold a CRC) is `false`.
pub(crate) fn v2_crc_holds(entry: &[u8]) -> bool {
    let Some(stored) = entry.get(CRC_AT..CRC_START) else {
        return false;
    };
    entry[MAGIC_AT] == 2
        && computed_crc(entry) == u32::from_be_bytes(stored.try_into().expect("4 bytes"))
}

/// The producer id, epoch and base sequence in the header of `batch`, a v2
/// batch; `None` when it is shorter than a header or not magic 2.
#[cfg(test)]
pub(crate) fn producer_state(batch: &[u8]) -> Option<(i64, i16, i32)> {
    let fields = batch.get(PRODUCER_ID_AT..PRODUCER_ID_AT + 14)?;
    if batch[MAGIC_AT] != 2 {
        return None;
    }
    Some((
        i64::from_be_bytes(fields[..8].try_into().ok()?),
        i16::from_be_bytes(fields[8..10].try_into().ok()?),
        i32::from_be_bytes(fields[10..].try_into().ok()?),
    ))
}

/// Rewrites the producer id, epoch and base sequence in the header of
/// `batch`, one whole v2 batch, and its CRC-32C (which covers them): how a
/// producer sends a batch again under a new epoch (KIP-360) without
/// building it again.
///
/// Refused, `batch` unchanged: fewer bytes than a header, a length field
/// that does not match `batch.len()`, another magic, or a CRC that does not
/// hold before the rewrite (a new CRC would vouch for corrupted bytes).
pub(crate) fn set_producer_state(
    batch: &mut [u8],
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
) -> Result<(), RecordsError> {
    let base_offset = batch
        .first_chunk::<8>()
        .map_or(-1, |b| i64::from_be_bytes(*b));
    let fail = |kind| Err(RecordsError::new(kind, base_offset, 0));
    if batch.len() < HEADER_LEN {
        return fail(RecordsErrorKind::Truncated {
            what: "batch header",
            needed: HEADER_LEN,
            remaining: batch.len(),
        });
    }
    let length = i32::from_be_bytes(batch[8..LOG_OVERHEAD].try_into().expect("4 bytes"));
    if usize::try_from(length).ok() != Some(batch.len() - LOG_OVERHEAD) {
        return fail(RecordsErrorKind::BadLength {
            what: "batchLength (does not match the batch's bytes)",
            length: i64::from(length),
        });
    }
    if batch[MAGIC_AT] != 2 {
        return fail(RecordsErrorKind::UnknownMagic(batch[MAGIC_AT] as i8));
    }
    let stored = u32::from_be_bytes(batch[CRC_AT..CRC_START].try_into().expect("4 bytes"));
    let actual = computed_crc(batch);
    if stored != actual {
        return fail(RecordsErrorKind::CrcMismatch {
            algorithm: Checksum::Crc32c,
            expected: stored,
            actual,
        });
    }
    let at = PRODUCER_ID_AT;
    batch[at..at + 8].copy_from_slice(&producer_id.to_be_bytes());
    batch[at + 8..at + 10].copy_from_slice(&epoch.to_be_bytes());
    batch[at + 10..at + 14].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = computed_crc(batch);
    batch[CRC_AT..CRC_START].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// Decodes the `recordCount` records of `section`, appending them to `out`.
/// The section must hold exactly those records.
pub(crate) fn decode_records(
    section: Bytes,
    header: &BatchHeader,
    out: &mut DecodedRecords,
) -> Result<(), RecordsErrorKind> {
    let count = header.record_count as usize;
    // The count comes from the wire: reserve only what the bytes can hold.
    if count > section.len() / MIN_RECORD {
        return Err(RecordsErrorKind::BadLength {
            what: "recordCount",
            length: i64::from(header.record_count),
        });
    }
    // Records locate their fields with u32 positions.
    if u32::try_from(section.len()).is_err() {
        return Err(RecordsErrorKind::TooLarge {
            limit: u32::MAX as usize,
        });
    }
    out.entries.reserve(count);
    let log_append_time = header.attributes & ATTR_LOG_APPEND_TIME != 0;
    let timestamp_type = if log_append_time {
        TimestampType::LogAppendTime
    } else {
        TimestampType::CreateTime
    };
    let len = section.len();
    let mut r = Reader::new(section.clone());
    let buffer = out.push_buffer(section);
    let mut previous_delta: i64 = -1;
    for _ in 0..count {
        let raw = read_record(&mut r, len)?;
        // Offsets inside a batch only grow, and never past lastOffsetDelta;
        // compaction leaves gaps but never reorders.
        let delta = i64::from(raw.offset_delta);
        if delta <= previous_delta || delta > i64::from(header.last_offset_delta) {
            return Err(RecordsErrorKind::Malformed {
                what: "offsetDelta",
                reason: "not increasing within 0..=lastOffsetDelta",
            });
        }
        previous_delta = delta;
        out.entries.push(Entry {
            buffer,
            // Cannot overflow: next_offset() was checked and delta is at
            // most lastOffsetDelta.
            offset: header.base_offset.wrapping_add(delta),
            // Kafka: with LogAppendTime the broker's time (maxTimestamp)
            // replaces every record's own.
            timestamp: if log_append_time {
                header.max_timestamp
            } else {
                header.base_timestamp.wrapping_add(raw.timestamp_delta)
            },
            leader_epoch: header.partition_leader_epoch,
            timestamp_type,
            key: raw.key,
            value: raw.value,
            headers: raw.headers,
            header_count: raw.header_count,
        });
    }
    if r.remaining() != 0 {
        return Err(RecordsErrorKind::Malformed {
            what: "records",
            reason: "bytes left after recordCount records",
        });
    }
    Ok(())
}

/// The fields of one record, as positions in its buffer.
struct RawRecord {
    offset_delta: i32,
    timestamp_delta: i64,
    key: Span,
    value: Span,
    headers: Span,
    header_count: u32,
}

/// Reads one record from `r`, a reader over a buffer of `len` bytes,
/// checking that the record fills exactly its declared length.
#[inline]
fn read_record(r: &mut Reader, len: usize) -> Result<RawRecord, RecordsErrorKind> {
    let pos = |r: &Reader| len - r.remaining();
    let length = r.varint("record length")?;
    if length < 0 || length as usize > r.remaining() {
        return Err(RecordsErrorKind::BadLength {
            what: "record length",
            length: i64::from(length),
        });
    }
    let length = length as usize;
    let start = pos(r);
    r.skip("record attributes", 1)?;
    let timestamp_delta = r.varlong("timestampDelta")?;
    let offset_delta = r.varint("offsetDelta")?;
    let key = varint_span(r, "key", pos)?.unwrap_or(Span::NULL);
    let value = varint_span(r, "value", pos)?.unwrap_or(Span::NULL);
    let header_count = r.varint("header count")?;
    let header_count = u32::try_from(header_count).map_err(|_| RecordsErrorKind::BadLength {
        what: "header count",
        length: i64::from(header_count),
    })?;
    let headers_at = pos(r);
    let headers = if header_count == 0 {
        Span::EMPTY
    } else {
        read_headers(r, headers_at, header_count).map_err(RecordsErrorKind::from)?;
        Span::new(headers_at, pos(r) - headers_at)
    };
    if pos(r) - start != length {
        return Err(RecordsErrorKind::BadLength {
            what: "record length (does not match the record's fields)",
            length: length as i64,
        });
    }
    Ok(RawRecord {
        offset_delta,
        timestamp_delta,
        key,
        value,
        headers,
        header_count,
    })
}

/// What a control record marks (its key: `version int16, type int16`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ControlType {
    Abort,
    Commit,
    /// A type this client does not know (KIP-890 and later add some);
    /// skipped like every control record.
    Other,
}

/// Reads the type of a control batch from its first record. A control
/// batch with no records marks nothing.
pub(crate) fn control_type(
    section: Bytes,
    header: &BatchHeader,
) -> Result<Option<ControlType>, RecordsErrorKind> {
    let mut records = DecodedRecords::new();
    decode_records(section, header, &mut records)?;
    let Some(first) = records.get(0) else {
        return Ok(None);
    };
    let key = first.key().unwrap_or_default();
    let Some(key) = key.first_chunk::<4>() else {
        return Err(RecordsErrorKind::Malformed {
            what: "control record key",
            reason: "shorter than version and type",
        });
    };
    if i16::from_be_bytes([key[0], key[1]]) < 0 {
        return Err(RecordsErrorKind::Malformed {
            what: "control record key",
            reason: "negative version",
        });
    }
    Ok(Some(match i16::from_be_bytes([key[2], key[3]]) {
        0 => ControlType::Abort,
        1 => ControlType::Commit,
        _ => ControlType::Other,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::RecordBatchBuilder;

    fn batch(producer: (i64, i16, i32), codec: Compression) -> Vec<u8> {
        let mut b = RecordBatchBuilder::new(0)
            .compression(codec)
            .producer(producer.0, producer.1, producer.2);
        b.append(1_700_000_000_000, Some(b"k"), Some(b"v1"), &[(b"h", None)])
            .unwrap();
        b.append(1_700_000_000_007, None, Some(b"v2"), &[]).unwrap();
        b.build().unwrap().to_vec()
    }

    #[test]
    fn setting_the_producer_state_rewrites_those_fields_and_the_crc_only() {
        let mut patched = batch((-1, -1, -1), Compression::None);
        let before = patched.clone();
        set_producer_state(&mut patched, 0x0102_0304_0506_0708, 0x090a, 0x0b0c_0d0e).unwrap();
        // The fields, big-endian, where the v2 header has them.
        assert_eq!(
            patched[43..57],
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
        );
        // The CRC-32C over attributes..end, stored at 17..21.
        assert_eq!(
            patched[17..21],
            crc32c::crc32c(&patched[21..]).to_be_bytes()
        );
        assert_ne!(patched[17..21], before[17..21]);
        // Nothing else moved.
        for (i, (a, b)) in patched.iter().zip(&before).enumerate() {
            if !(17..21).contains(&i) && !(43..57).contains(&i) {
                assert_eq!(a, b, "byte {i}");
            }
        }
        assert_eq!(
            producer_state(&patched),
            Some((0x0102_0304_0506_0708, 0x090a, 0x0b0c_0d0e))
        );
    }

    #[test]
    fn a_patched_batch_is_the_batch_built_with_that_state() {
        for codec in Compression::ALL.into_iter().filter(|c| c.is_enabled()) {
            let mut patched = batch((-1, -1, -1), codec);
            set_producer_state(&mut patched, 7, 3, 42).unwrap();
            assert_eq!(patched, batch((7, 3, 42), codec), "{codec}");
            assert!(v2_crc_holds(&patched));
        }
    }

    #[test]
    fn what_cannot_be_patched_is_left_alone() {
        let good = batch((1, 0, 0), Compression::None);
        let refused = |mut bytes: Vec<u8>| {
            let copy = bytes.clone();
            assert!(set_producer_state(&mut bytes, 2, 1, 5).is_err());
            assert_eq!(bytes, copy);
        };
        // A flipped bit in a record: the CRC no longer holds.
        let mut corrupt = good.clone();
        *corrupt.last_mut().unwrap() ^= 1;
        refused(corrupt);
        // Shorter than a header, or than batchLength says.
        refused(good[..HEADER_LEN - 1].to_vec());
        refused(good[..good.len() - 1].to_vec());
        // Two batches where one is expected.
        refused([good.clone(), good.clone()].concat());
        // Magic 1.
        let mut v1 = good.clone();
        v1[MAGIC_AT] = 1;
        refused(v1);
        assert_eq!(producer_state(&good[..PRODUCER_ID_AT + 13]), None);
        assert_eq!(
            producer_state(&good[..PRODUCER_ID_AT + 14]),
            Some((1, 0, 0))
        );
    }
}
