//! Building v2 record batches (for tests, the mock cluster and tools; a
//! consumer only decodes).

use super::batch::{
    ATTR_CONTROL, ATTR_LOG_APPEND_TIME, ATTR_TRANSACTIONAL, CRC_AT, CRC_START, HEADER_LEN,
    LOG_OVERHEAD,
};
use super::compression::{self, Compression};
use super::{RecordsError, RecordsErrorKind};
use crate::protocol::Writer;
use bytes::{Bytes, BytesMut};

/// A header to append: key and nullable value.
pub type NewHeader<'a> = (&'a [u8], Option<&'a [u8]>);

/// Builds one record batch in message format v2, compressed with any codec
/// this build supports, with its CRC-32C.
///
/// Records are encoded as they are appended; [`RecordBatchBuilder::build`]
/// compresses them and writes the header. The batch is what a broker
/// returns in a Fetch response: base offset and leader epoch set.
///
/// ```
/// use lazykafka::records::{Compression, RecordBatchBuilder, RecordSetDecoder};
///
/// let mut builder = RecordBatchBuilder::new(1000)
///     .compression(Compression::Gzip)
///     .partition_leader_epoch(3);
/// builder.append(1_700_000_000_000, None, Some(b"first"), &[])?;
/// // Offsets may skip, as in a compacted topic.
/// builder.append_at(1005, 1_700_000_000_001, Some(b"k"), None, &[])?;
/// let batch = builder.build()?;
///
/// let decoded = RecordSetDecoder::default().decode(batch, Default::default(), &[])?;
/// let offsets: Vec<i64> = decoded.iter().map(|r| r.offset()).collect();
/// assert_eq!(offsets, [1000, 1005]);
/// assert_eq!(decoded.next_offset, Some(1006));
/// # Ok::<(), lazykafka::records::RecordsError>(())
/// ```
#[derive(Debug)]
pub struct RecordBatchBuilder {
    base_offset: i64,
    compression: Compression,
    log_append_time: Option<i64>,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    last_offset_delta: Option<i32>,
    /// Room for the batch header (`HEADER_LEN` bytes, written by `build`),
    /// then the uncompressed records section: an uncompressed batch is
    /// built in place, without a copy.
    records: Writer,
    count: i32,
    previous_delta: Option<i32>,
    first_timestamp: Option<i64>,
    max_timestamp: i64,
}

/// What a control record marks (KIP-98 transaction markers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlRecordType {
    /// The producer's transaction was aborted (type 0).
    Abort,
    /// The producer's transaction was committed (type 1).
    Commit,
}

impl RecordBatchBuilder {
    /// A batch whose first offset is `base_offset`: uncompressed,
    /// CreateTime, no producer id, leader epoch -1.
    pub fn new(base_offset: i64) -> Self {
        RecordBatchBuilder {
            base_offset,
            compression: Compression::None,
            log_append_time: None,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            control: false,
            last_offset_delta: None,
            records: header_room(),
            count: 0,
            previous_delta: None,
            first_timestamp: None,
            max_timestamp: -1,
        }
    }

    /// [`RecordBatchBuilder::new`], building the batch in `buf` (cleared
    /// first): a buffer of an earlier batch, reused.
    pub fn with_buffer(base_offset: i64, mut buf: BytesMut) -> Self {
        buf.clear();
        buf.extend_from_slice(&[0; HEADER_LEN]);
        RecordBatchBuilder {
            records: Writer::from_buf(buf),
            ..RecordBatchBuilder::new(base_offset)
        }
    }

    /// A transaction marker batch: one control record of `kind` for the
    /// producer, as the transaction coordinator writes it (transactional,
    /// control, `coordinator_epoch` in the value).
    pub fn control_batch(
        base_offset: i64,
        producer_id: i64,
        producer_epoch: i16,
        kind: ControlRecordType,
        coordinator_epoch: i32,
        timestamp: i64,
    ) -> Result<Bytes, RecordsError> {
        let mut b = RecordBatchBuilder::new(base_offset)
            .producer(producer_id, producer_epoch, -1)
            .transactional(true);
        b.control = true;
        let kind: i16 = match kind {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
        };
        // Key: version int16 (0), type int16. Value: version int16 (0),
        // coordinator epoch int32.
        let mut key = [0u8; 4];
        key[2..].copy_from_slice(&kind.to_be_bytes());
        let mut value = [0u8; 6];
        value[2..].copy_from_slice(&coordinator_epoch.to_be_bytes());
        b.append(timestamp, Some(&key), Some(&value), &[])?;
        b.build()
    }

    /// The codec for the records section (default none).
    pub fn compression(mut self, codec: Compression) -> Self {
        self.compression = codec;
        self
    }

    /// Marks the batch LogAppendTime with the broker's `timestamp`, which
    /// then stands for every record's.
    pub fn log_append_time(mut self, timestamp: i64) -> Self {
        self.log_append_time = Some(timestamp);
        self
    }

    /// The partition leader epoch (the broker sets it; default -1).
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// The idempotent producer's id, epoch and first sequence number
    /// (default -1, -1, -1: none).
    pub fn producer(mut self, id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Marks the batch as part of a transaction (KIP-98).
    pub fn transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    /// Declares a `lastOffsetDelta` beyond the last record's, as a batch
    /// has after compaction removed its last records (default: the last
    /// record's delta). A batch with no records needs it.
    pub fn last_offset_delta(mut self, delta: i32) -> Self {
        self.last_offset_delta = Some(delta);
        self
    }

    /// How many records were appended.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether no record was appended.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends a record at the next offset (the base offset for the first).
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[NewHeader<'_>],
    ) -> Result<&mut Self, RecordsError> {
        let delta = match self.previous_delta {
            None => 0,
            Some(d) => d
                .checked_add(1)
                .ok_or(self.invalid("offset delta overflows int32"))?,
        };
        self.push(delta, timestamp, key, value, headers)
    }

    /// Appends a record at `offset`, which must be above the previous
    /// record's and at most `i32::MAX` past the base offset. Skipped offsets
    /// are the gaps compaction leaves.
    pub fn append_at(
        &mut self,
        offset: i64,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[NewHeader<'_>],
    ) -> Result<&mut Self, RecordsError> {
        let delta = offset
            .checked_sub(self.base_offset)
            .and_then(|d| i32::try_from(d).ok())
            .filter(|&d| d >= 0)
            .ok_or(self.invalid("offset outside base offset ..= base offset + i32::MAX"))?;
        self.push(delta, timestamp, key, value, headers)
    }

    fn push(
        &mut self,
        delta: i32,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[NewHeader<'_>],
    ) -> Result<&mut Self, RecordsError> {
        if self.previous_delta.is_some_and(|p| delta <= p) {
            return Err(self.invalid("offsets must increase"));
        }
        let base_ts = *self.first_timestamp.get_or_insert(timestamp);
        let ts_delta = timestamp
            .checked_sub(base_ts)
            .ok_or(self.invalid("timestamp delta overflows int64"))?;
        let len = |b: Option<&[u8]>| -> Result<i32, RecordsError> {
            b.map_or(Ok(-1), |b| {
                i32::try_from(b.len()).map_err(|_| self.invalid("field longer than i32::MAX"))
            })
        };
        let (key_len, value_len) = (len(key)?, len(value)?);
        let header_count =
            i32::try_from(headers.len()).map_err(|_| self.invalid("too many headers"))?;
        // The record's length prefix comes first, so its size is computed
        // before anything is written.
        let mut body = 1 + varlong_size(ts_delta) + varint_size(delta);
        body += varint_size(key_len) + key.map_or(0, <[u8]>::len);
        body += varint_size(value_len) + value.map_or(0, <[u8]>::len);
        body += varint_size(header_count);
        for (k, v) in headers {
            body += varint_size(len(Some(k))?) + k.len();
            body += varint_size(len(*v)?) + v.map_or(0, <[u8]>::len);
        }
        let body = i32::try_from(body).map_err(|_| self.invalid("record longer than i32::MAX"))?;
        let w = &mut self.records;
        w.varint(body);
        w.i8(0);
        w.varlong(ts_delta);
        w.varint(delta);
        w.varint(key_len);
        w.raw(key.unwrap_or_default());
        w.varint(value_len);
        w.raw(value.unwrap_or_default());
        w.varint(header_count);
        for (k, v) in headers {
            w.varint(k.len() as i32);
            w.raw(k);
            w.varint(v.map_or(-1, |v| v.len() as i32));
            w.raw(v.unwrap_or_default());
        }
        self.count += 1;
        self.previous_delta = Some(delta);
        self.max_timestamp = self.max_timestamp.max(timestamp);
        Ok(self)
    }

    /// Compresses the records and writes the batch.
    pub fn build(self) -> Result<Bytes, RecordsError> {
        let last_delta = match (self.last_offset_delta, self.previous_delta) {
            (Some(declared), Some(last)) if declared < last => {
                return Err(self.invalid("lastOffsetDelta below the last record's"))
            }
            (Some(declared), _) if declared < 0 => {
                return Err(self.invalid("negative lastOffsetDelta"))
            }
            (Some(declared), _) => declared,
            (None, Some(last)) => last,
            (None, None) => return Err(self.invalid("an empty batch needs a lastOffsetDelta")),
        };
        if self.control && !self.transactional {
            return Err(self.invalid("a control batch is transactional"));
        }
        let mut records = self.records.into_inner();
        let compressed = match self.compression {
            Compression::None => None,
            codec => Some(
                compression::compress(codec, &records[HEADER_LEN..])
                    .map_err(|k| RecordsError::new(k, self.base_offset, 0))?,
            ),
        };
        let section_len = compressed
            .as_ref()
            .map_or(records.len() - HEADER_LEN, Vec::len);
        let length = i32::try_from(HEADER_LEN - LOG_OVERHEAD + section_len).map_err(|_| {
            RecordsError::new(invalid("batch longer than i32::MAX"), self.base_offset, 0)
        })?;
        let mut attributes = i16::from(self.compression.id());
        let max_timestamp = match self.log_append_time {
            Some(ts) => {
                attributes |= ATTR_LOG_APPEND_TIME;
                ts
            }
            None => self.max_timestamp,
        };
        if self.transactional {
            attributes |= ATTR_TRANSACTIONAL;
        }
        if self.control {
            attributes |= ATTR_CONTROL;
        }
        let mut w = Writer::new();
        w.buf_mut().reserve(HEADER_LEN);
        w.i64(self.base_offset);
        w.i32(length);
        w.i32(self.partition_leader_epoch);
        w.i8(2);
        w.u32(0); // CRC, below
        w.i16(attributes);
        w.i32(last_delta);
        w.i64(self.first_timestamp.unwrap_or(max_timestamp));
        w.i64(max_timestamp);
        w.i64(self.producer_id);
        w.i16(self.producer_epoch);
        w.i32(self.base_sequence);
        w.i32(self.count);
        let header = w.into_inner();
        debug_assert_eq!(header.len(), HEADER_LEN);
        let mut buf = match compressed {
            // The header goes in the room left for it.
            None => {
                records[..HEADER_LEN].copy_from_slice(&header);
                records
            }
            // The records' buffer takes the compressed batch (it is
            // usually larger than the section): no allocation here, and
            // the producer reuses it for a later batch once this one is
            // delivered.
            Some(section) => {
                records.clear();
                records.extend_from_slice(&header);
                records.extend_from_slice(&section);
                records
            }
        };
        let crc = crc32c::crc32c(&buf[CRC_START..]);
        buf[CRC_AT..CRC_START].copy_from_slice(&crc.to_be_bytes());
        Ok(buf.freeze())
    }

    /// Makes room for `additional` more bytes of records (the next
    /// record's encoded size), so that a batch holding one
    /// large record takes no more memory than it needs.
    pub fn reserve(&mut self, additional: usize) {
        self.records.buf_mut().reserve(additional);
    }

    fn invalid(&self, reason: &'static str) -> RecordsError {
        RecordsError::new(invalid(reason), self.base_offset, 0)
    }
}

/// The bytes a record takes in a batch's records section (its length
/// prefix included, before compression) as [`RecordBatchBuilder::append`]
/// writes it `offset_delta` records and `timestamp_delta` milliseconds
/// after the batch's first. Exact for what the builder accepts (every
/// length at most `i32::MAX`).
pub(crate) fn encoded_record_size(
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[NewHeader<'_>],
) -> usize {
    // A length varint (-1 for null) and the bytes.
    let field = |b: Option<&[u8]>| b.map_or(1, |b| varlong_size(b.len() as i64) + b.len());
    let mut body = 1 + varlong_size(timestamp_delta) + varint_size(offset_delta);
    body += field(key) + field(value) + varlong_size(headers.len() as i64);
    for (k, v) in headers {
        body += field(Some(k)) + field(*v);
    }
    varlong_size(body as i64) + body
}

/// A records buffer that starts with room for the batch header.
fn header_room() -> Writer {
    let mut w = Writer::new();
    w.raw(&[0; HEADER_LEN]);
    w
}

fn invalid(reason: &'static str) -> RecordsErrorKind {
    RecordsErrorKind::InvalidInput { reason }
}

fn varint_size(v: i32) -> usize {
    varlong_size(i64::from(v))
}

/// Bytes of the zigzag varint encoding of `v`.
fn varlong_size(v: i64) -> usize {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    // 7 bits per byte; at least one byte.
    ((64 - z.leading_zeros()).max(1) as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_sizes_match_the_writer() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            -65,
            8191,
            8192,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ] {
            let mut w = Writer::new();
            w.varlong(v);
            assert_eq!(varlong_size(v), w.len(), "{v}");
        }
    }

    #[test]
    fn encoded_record_sizes_match_the_builder() {
        let big = vec![7u8; 300];
        let headers: &[NewHeader<'_>] = &[(b"a", None), (b"trace", Some(&big[..200]))];
        // Timestamp delta, key, value, headers.
        type Case<'a> = (i64, Option<&'a [u8]>, Option<&'a [u8]>, &'a [NewHeader<'a>]);
        let cases: [Case<'_>; 5] = [
            (0, None, None, &[]),
            (-1, Some(b""), Some(b"v"), &[]),
            (63, Some(b"key"), Some(&big), headers),
            (-5_000_000_000, None, Some(&big[..64]), &headers[..1]),
            (i64::from(i32::MAX) * 4, Some(&big[..127]), None, headers),
        ];
        let first_ts = 1_700_000_000_000;
        let mut b = RecordBatchBuilder::new(0);
        let mut expected = HEADER_LEN;
        // Offset deltas from 0 through 199: one- and two-byte varints.
        for i in 0..200 {
            let (ts_delta, key, value, headers) = cases[i % cases.len()];
            let ts_delta = if i == 0 { 0 } else { ts_delta };
            b.append(first_ts + ts_delta, key, value, headers).unwrap();
            expected += encoded_record_size(i as i32, ts_delta, key, value, headers);
        }
        assert_eq!(b.build().unwrap().len(), expected);
    }

    #[test]
    fn misuse_is_refused() {
        let mut b = RecordBatchBuilder::new(10);
        b.append_at(12, 0, None, None, &[]).unwrap();
        assert!(b.append_at(12, 0, None, None, &[]).is_err());
        assert!(b.append_at(9, 0, None, None, &[]).is_err());
        assert!(RecordBatchBuilder::new(0).build().is_err());
        let mut b = RecordBatchBuilder::new(0).last_offset_delta(0);
        b.append_at(3, 0, None, None, &[]).unwrap();
        assert!(b.build().is_err());
    }
}
