//! A partition's log in memory: v2 record batches in offset order. Each
//! partition (`topic.rs`) holds one; Produce (`api/produce.rs`) and
//! `MockCluster::produce` append to it, Fetch and ListOffsets read it,
//! an unclean election (`MockCluster::set_leader_truncated`) and
//! `MockCluster::delete_records_before` cut it.

use bytes::{BufMut, Bytes, BytesMut};

use crate::records::{DecodeOptions, RecordSetDecoder};

/// Where the fields a broker rewrites sit in a v2 batch header.
const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
/// The bytes of a v2 batch header.
const HEADER_LEN: usize = 61;

/// One stored batch.
#[derive(Debug, Clone)]
struct StoredBatch {
    /// The offset after the batch.
    next_offset: i64,
    max_timestamp: i64,
    bytes: Bytes,
}

/// Why a batch handed to [`PartitionLog::append`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AppendError {
    /// Not a well-formed v2 batch (length, magic, CRC).
    Corrupt,
    /// A message format older than v2.
    OldFormat,
}

/// A well-formed v2 batch of a record set, with the header fields the
/// broker looks at (read by [`PartitionLog::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParsedBatch {
    /// Where it starts in the record set, and its length.
    pub at: usize,
    pub len: usize,
    pub last_offset_delta: i32,
    pub max_timestamp: i64,
    /// -1 for none.
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// -1 for none.
    pub base_sequence: i32,
    /// Attribute bit 4 (KIP-98).
    pub transactional: bool,
    /// Attribute bit 5: a transaction marker.
    pub control: bool,
}

impl ParsedBatch {
    /// Reads the header of a batch already checked to be a whole v2 batch.
    fn read(batch: &[u8], at: usize) -> ParsedBatch {
        let i16_at = |i: usize| i16::from_be_bytes([batch[i], batch[i + 1]]);
        let i32_at = |i: usize| i32::from_be_bytes(batch[i..i + 4].try_into().expect("4 bytes"));
        let i64_at = |i: usize| i64::from_be_bytes(batch[i..i + 8].try_into().expect("8 bytes"));
        let attributes = i16_at(ATTRIBUTES_AT);
        ParsedBatch {
            at,
            len: batch.len(),
            last_offset_delta: i32_at(LAST_OFFSET_DELTA_AT),
            max_timestamp: i64_at(MAX_TIMESTAMP_AT),
            producer_id: i64_at(PRODUCER_ID_AT),
            producer_epoch: i16_at(PRODUCER_EPOCH_AT),
            base_sequence: i32_at(BASE_SEQUENCE_AT),
            transactional: attributes & 0x10 != 0,
            control: attributes & 0x20 != 0,
        }
    }
}

/// The log of one partition.
#[derive(Debug, Default)]
pub(crate) struct PartitionLog {
    batches: Vec<StoredBatch>,
    log_start_offset: i64,
    /// Bytes stored, for tests that check a fetch's size.
    bytes: usize,
}

impl PartitionLog {
    /// The first offset kept.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// The offset the next record gets (the high watermark: every append is
    /// committed at once, there are no followers).
    pub fn high_watermark(&self) -> i64 {
        self.batches
            .last()
            .map_or(self.log_start_offset, |b| b.next_offset)
    }

    /// Bytes stored.
    #[cfg(test)]
    pub fn size(&self) -> usize {
        self.bytes
    }

    /// Appends the batches in `records` (a Produce request's record set):
    /// each is checked (length, magic 2, CRC-32C), then given the next
    /// offsets and `leader_epoch`. Returns the base offset of the first.
    /// Nothing is appended unless every batch is good.
    pub fn append(&mut self, records: &Bytes, leader_epoch: i32) -> Result<i64, AppendError> {
        let parsed = Self::parse(records)?;
        Ok(self.append_parsed(records, &parsed, leader_epoch))
    }

    /// Checks every batch of `records` (length, magic 2, CRC-32C, a last
    /// offset delta of 0 or more) and reads their headers, appending
    /// nothing.
    pub fn parse(records: &Bytes) -> Result<Vec<ParsedBatch>, AppendError> {
        let mut parsed = Vec::new();
        let mut at = 0;
        while at < records.len() {
            let rest = &records[at..];
            if rest.len() < HEADER_LEN {
                return Err(AppendError::Corrupt);
            }
            let length = i32::from_be_bytes(
                rest[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4]
                    .try_into()
                    .expect("4 bytes"),
            );
            let total = usize::try_from(length)
                .ok()
                .and_then(|l| l.checked_add(12))
                .filter(|&t| t >= HEADER_LEN && t <= rest.len())
                .ok_or(AppendError::Corrupt)?;
            if rest[MAGIC_AT] != 2 {
                return Err(AppendError::OldFormat);
            }
            let batch = &rest[..total];
            let crc = u32::from_be_bytes(batch[17..21].try_into().expect("4 bytes"));
            if crc32c::crc32c(&batch[21..]) != crc {
                return Err(AppendError::Corrupt);
            }
            let header = ParsedBatch::read(batch, at);
            if header.last_offset_delta < 0 {
                return Err(AppendError::Corrupt);
            }
            parsed.push(header);
            at += total;
        }
        Ok(parsed)
    }

    /// Appends batches [`PartitionLog::parse`] read from `records`, at the
    /// next offsets, with `leader_epoch`. Returns the base offset of the
    /// first.
    pub fn append_parsed(
        &mut self,
        records: &Bytes,
        parsed: &[ParsedBatch],
        leader_epoch: i32,
    ) -> i64 {
        let first = self.high_watermark();
        for b in parsed {
            let base_offset = self.high_watermark();
            self.push(
                records.slice(b.at..b.at + b.len),
                base_offset,
                b.last_offset_delta,
                b.max_timestamp,
                leader_epoch,
            );
        }
        first
    }

    /// Every stored batch's base offset and header, oldest first.
    pub fn headers(&self) -> impl Iterator<Item = (i64, ParsedBatch)> + '_ {
        self.batches.iter().map(|b| {
            let header = ParsedBatch::read(&b.bytes, 0);
            (
                b.next_offset - i64::from(header.last_offset_delta) - 1,
                header,
            )
        })
    }

    /// Stores one well-formed batch at `base_offset`, rewriting the two
    /// header fields no checksum covers.
    fn push(
        &mut self,
        batch: Bytes,
        base_offset: i64,
        last_delta: i32,
        max_timestamp: i64,
        leader_epoch: i32,
    ) {
        let mut owned = BytesMut::with_capacity(batch.len());
        owned.put_slice(&batch);
        owned[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.to_be_bytes());
        owned[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4].copy_from_slice(&leader_epoch.to_be_bytes());
        self.bytes += owned.len();
        self.batches.push(StoredBatch {
            next_offset: base_offset + i64::from(last_delta) + 1,
            max_timestamp,
            bytes: owned.freeze(),
        });
    }

    /// The batches from the one holding `offset`, up to `max_bytes` (the
    /// first batch is returned whole even when larger, as Kafka does since
    /// KIP-74, so a consumer can always make progress).
    pub fn read(&self, offset: i64, max_bytes: usize) -> Bytes {
        let start = self.batches.partition_point(|b| b.next_offset <= offset);
        let mut chosen = Vec::new();
        let mut size = 0usize;
        for batch in &self.batches[start..] {
            if !chosen.is_empty() && size + batch.bytes.len() > max_bytes {
                break;
            }
            size += batch.bytes.len();
            chosen.push(&batch.bytes);
            if size >= max_bytes {
                break;
            }
        }
        match chosen.as_slice() {
            [] => Bytes::new(),
            [one] => (*one).clone(),
            many => {
                let mut out = BytesMut::with_capacity(size);
                for b in many {
                    out.put_slice(b);
                }
                out.freeze()
            }
        }
    }

    /// The first offset whose record has a timestamp at or after
    /// `timestamp`, with that record's timestamp (ListOffsets by time).
    pub fn offset_for_time(&self, timestamp: i64) -> Option<(i64, i64)> {
        let batch = self.batches.iter().find(|b| b.max_timestamp >= timestamp)?;
        let decoded = RecordSetDecoder::new(DecodeOptions::new())
            .decode(batch.bytes.clone(), Default::default(), &[])
            .ok()?;
        decoded
            .iter()
            .find(|r| r.timestamp().millis().unwrap_or(-1) >= timestamp)
            .map(|r| (r.offset(), r.timestamp().millis().unwrap_or(-1)))
    }

    /// The offset and timestamp of the record with the largest timestamp
    /// (ListOffsets with `MAX_TIMESTAMP`, KIP-734).
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let batch = self.batches.iter().rev().max_by_key(|b| b.max_timestamp)?;
        let decoded = RecordSetDecoder::new(DecodeOptions::new())
            .decode(batch.bytes.clone(), Default::default(), &[])
            .ok()?;
        decoded
            .iter()
            .filter(|r| r.timestamp().millis().unwrap_or(-1) == batch.max_timestamp)
            .map(|r| (r.offset(), r.timestamp().millis().unwrap_or(-1)))
            .next()
    }

    /// Drops the batches that end after `offset`: the log then ends at the
    /// last batch boundary at or below it (a leader's log truncated by an
    /// unclean election). Returns the new end.
    pub fn truncate_after(&mut self, offset: i64) -> i64 {
        let keep = self.batches.partition_point(|b| b.next_offset <= offset);
        for b in self.batches.drain(keep..) {
            self.bytes -= b.bytes.len();
        }
        self.high_watermark()
    }

    /// Drops the batches wholly below `offset` and moves the log start
    /// there (a retention or DeleteRecords cut).
    pub fn truncate_before(&mut self, offset: i64) {
        let offset = offset.min(self.high_watermark());
        let keep = self.batches.partition_point(|b| b.next_offset <= offset);
        for b in self.batches.drain(..keep) {
            self.bytes -= b.bytes.len();
        }
        self.log_start_offset = offset.max(self.log_start_offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::RecordBatchBuilder;

    fn batch(n: usize, ts: i64) -> Bytes {
        let mut b = RecordBatchBuilder::new(0);
        for i in 0..n {
            b.append(ts + i as i64, None, Some(format!("v{i}").as_bytes()), &[])
                .unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn appends_assign_offsets_and_epochs() {
        let mut log = PartitionLog::default();
        assert_eq!(log.append(&batch(3, 100), 0), Ok(0));
        assert_eq!(log.append(&batch(2, 200), 4), Ok(3));
        assert_eq!(log.high_watermark(), 5);
        let read = log.read(3, 1 << 20);
        let decoded = RecordSetDecoder::new(DecodeOptions::new())
            .decode(read.clone(), Default::default(), &[])
            .unwrap();
        let offsets: Vec<i64> = decoded.iter().map(|r| r.offset()).collect();
        assert_eq!(offsets, [3, 4]);
        assert_eq!(&read[12..16], &4i32.to_be_bytes());
    }

    #[test]
    fn read_returns_the_first_batch_even_when_larger_than_asked() {
        let mut log = PartitionLog::default();
        log.append(&batch(10, 0), 0).unwrap();
        log.append(&batch(10, 0), 0).unwrap();
        let one = log.read(0, 1);
        assert_eq!(one.len(), log.size() / 2);
        assert_eq!(log.read(0, usize::MAX).len(), log.size());
        assert_eq!(log.read(20, usize::MAX).len(), 0);
    }

    #[test]
    fn bad_batches_are_refused_whole() {
        let mut log = PartitionLog::default();
        let good = batch(2, 0);
        let mut bad = BytesMut::from(&good[..]);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let mut both = BytesMut::from(&good[..]);
        both.put_slice(&bad);
        assert_eq!(log.append(&both.freeze(), 0), Err(AppendError::Corrupt));
        assert_eq!(
            log.append(&good.slice(..good.len() - 1), 0),
            Err(AppendError::Corrupt)
        );
        let mut old = BytesMut::from(&good[..]);
        old[MAGIC_AT] = 1;
        assert_eq!(log.append(&old.freeze(), 0), Err(AppendError::OldFormat));
        assert_eq!(log.high_watermark(), 0);
    }

    #[test]
    fn offsets_by_time_and_truncation() {
        let mut log = PartitionLog::default();
        log.append(&batch(3, 100), 0).unwrap(); // 0..3 at 100..102
        log.append(&batch(3, 200), 0).unwrap(); // 3..6 at 200..202
        assert_eq!(log.offset_for_time(101), Some((1, 101)));
        assert_eq!(log.offset_for_time(150), Some((3, 200)));
        assert_eq!(log.offset_for_time(999), None);
        assert_eq!(log.max_timestamp(), Some((5, 202)));
        log.truncate_before(4);
        assert_eq!(log.log_start_offset(), 4);
        assert_eq!(log.high_watermark(), 6);
    }
}
