//! Decoding a whole record set: batch framing, transactions, offsets.

use super::batch::{self, BatchHeader, ControlType, LOG_OVERHEAD};
use super::legacy::{self, MIN_SIZE_V0};
use super::record::{Entry, Record};
use super::{RecordsError, RecordsErrorKind};
use bytes::Bytes;
use std::fmt;

/// The default for [`DecodeOptions::max_decompressed_bytes`]: 64 MiB.
///
/// A batch is at most `max.message.bytes` compressed (1 MiB by default) and
/// a fetch at most `fetch.max.bytes` (50 MiB by default); 64 MiB of
/// decompressed records per batch is above anything a default-configured
/// cluster produces, and still a bound on what a few hostile bytes can make
/// the consumer allocate.
pub const DEFAULT_MAX_DECOMPRESSED_BYTES: usize = 64 << 20;

/// How [`RecordSetDecoder`] checks what it decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    check_crcs: bool,
    max_decompressed_bytes: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            check_crcs: true,
            max_decompressed_bytes: DEFAULT_MAX_DECOMPRESSED_BYTES,
        }
    }
}

impl DecodeOptions {
    /// The defaults: CRCs checked, 64 MiB per decompressed batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether to verify every batch's checksum (the consumer property
    /// `check.crcs`, on by default). Turning it off saves the CRC pass; a
    /// corrupted batch may then decode to wrong records or fail later with
    /// another error.
    pub fn with_check_crcs(mut self, check: bool) -> Self {
        self.check_crcs = check;
        self
    }

    /// The most bytes one compressed batch (or v0/v1 wrapper message) may
    /// decompress to; beyond it decoding fails with
    /// [`RecordsErrorKind::TooLarge`]. Set it at least as high as the
    /// largest batch producers can write, uncompressed.
    pub fn with_max_decompressed_bytes(mut self, limit: usize) -> Self {
        self.max_decompressed_bytes = limit;
        self
    }

    /// Whether checksums are verified.
    pub fn check_crcs(&self) -> bool {
        self.check_crcs
    }

    /// The decompression limit per batch, in bytes.
    pub fn max_decompressed_bytes(&self) -> usize {
        self.max_decompressed_bytes
    }
}

/// Which records of transactional producers a consumer sees (the Fetch
/// request's `isolation_level`, KIP-98).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Every record, including those of open and aborted transactions (0).
    #[default]
    ReadUncommitted,
    /// Records of aborted transactions are dropped (1). The broker returns
    /// data only up to the last stable offset, and lists the aborted
    /// transactions that overlap it.
    ReadCommitted,
}

/// One entry of a Fetch response partition's `aborted_transactions`: the
/// producer's records from `first_offset` up to its next abort marker
/// belong to an aborted transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTransaction {
    /// The producer id.
    pub producer_id: i64,
    /// The first offset of the aborted transaction.
    pub first_offset: i64,
}

/// Where a record set ended inside a batch: the broker cuts a Fetch
/// response at `max_bytes`, usually mid-batch.
///
/// A partial tail is not an error. But when a fetch returns *only* a
/// partial batch (no complete one), the batch is larger than the fetch
/// size: the consumer must fetch again with at least
/// [`PartialTail::declared_size`] bytes, or report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartialTail {
    /// Where the partial batch starts in the record set.
    pub position: usize,
    /// The bytes of it that are present.
    pub bytes: usize,
    /// Its base offset, when at least its first 8 bytes are present.
    pub base_offset: Option<i64>,
    /// Its full size (`batchLength` + 12), when its first 12 bytes are
    /// present. It comes from the wire: bound it before acting on it.
    pub declared_size: Option<usize>,
}

/// What [`RecordSetDecoder::decode`] found: the records, and where the
/// record set leaves the partition's position.
///
/// It holds the buffers the records lie in (the fetched buffer's batches,
/// and one buffer per decompressed batch) and hands out [`Record`]s that
/// borrow from them: iterate it, or index it with [`DecodedRecords::get`].
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct DecodedRecords {
    pub(crate) buffers: Vec<Bytes>,
    pub(crate) entries: Vec<Entry>,
    /// Where the next fetch starts: one past the last offset of the last
    /// complete batch, whether or not that batch delivered records
    /// (compaction leaves gaps; control and aborted batches deliver none).
    /// `None` when no batch was complete.
    pub next_offset: Option<i64>,
    /// The incomplete batch the record set ended with, if any.
    pub partial_tail: Option<PartialTail>,
    /// Complete batches (v0/v1: top-level messages) read.
    pub batches: usize,
    /// Control batches skipped (transaction markers).
    pub control_batches: usize,
    /// Batches of aborted transactions dropped under read_committed.
    pub aborted_batches: usize,
    /// Records in those batches (their declared `recordCount`).
    pub aborted_records: u64,
}

impl DecodedRecords {
    /// An empty result, ready for [`RecordSetDecoder::decode_into`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Empties it for reuse, keeping its allocations.
    pub fn clear(&mut self) {
        self.buffers.clear();
        self.entries.clear();
        self.next_offset = None;
        self.partial_tail = None;
        self.batches = 0;
        self.control_batches = 0;
        self.aborted_batches = 0;
        self.aborted_records = 0;
    }

    /// How many records there are for the application: control records
    /// never count, records of aborted transactions not under
    /// [`IsolationLevel::ReadCommitted`].
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `index`th record, in offset order.
    pub fn get(&self, index: usize) -> Option<Record<'_>> {
        self.entries.get(index).map(|e| self.record(e))
    }

    /// The records in offset order.
    pub fn iter(&self) -> Records<'_> {
        Records {
            buffers: &self.buffers,
            entries: self.entries.iter(),
        }
    }

    fn record<'a>(&'a self, entry: &'a Entry) -> Record<'a> {
        record(&self.buffers, entry)
    }

    /// Keeps `buf` for the records about to be pushed; returns its index.
    pub(crate) fn push_buffer(&mut self, buf: Bytes) -> u32 {
        self.buffers.push(buf);
        // At most one buffer per batch, and a batch is at least 26 bytes of
        // a record set smaller than 4 GiB.
        (self.buffers.len() - 1) as u32
    }
}

fn record<'a>(buffers: &'a [Bytes], entry: &'a Entry) -> Record<'a> {
    static EMPTY: Bytes = Bytes::new();
    Record {
        // Every entry names a buffer pushed before it.
        buf: buffers.get(entry.buffer as usize).unwrap_or(&EMPTY),
        entry,
    }
}

impl fmt::Debug for DecodedRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecodedRecords")
            .field("records", &self.iter().collect::<Vec<_>>())
            .field("next_offset", &self.next_offset)
            .field("partial_tail", &self.partial_tail)
            .field("batches", &self.batches)
            .field("control_batches", &self.control_batches)
            .field("aborted_batches", &self.aborted_batches)
            .field("aborted_records", &self.aborted_records)
            .finish()
    }
}

impl<'a> IntoIterator for &'a DecodedRecords {
    type Item = Record<'a>;
    type IntoIter = Records<'a>;
    fn into_iter(self) -> Records<'a> {
        self.iter()
    }
}

/// An iterator over the records of [`DecodedRecords`].
#[derive(Clone)]
pub struct Records<'a> {
    buffers: &'a [Bytes],
    entries: std::slice::Iter<'a, Entry>,
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        self.entries.next().map(|e| record(self.buffers, e))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl DoubleEndedIterator for Records<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.entries.next_back().map(|e| record(self.buffers, e))
    }
}

impl ExactSizeIterator for Records<'_> {}

/// Decodes the `records` field of a Fetch response partition: any mix of
/// v2 batches and v0/v1 messages, possibly ending in a partial batch.
///
/// ```
/// use bytes::Bytes;
/// use lazykafka::records::{
///     Compression, DecodeOptions, IsolationLevel, RecordBatchBuilder, RecordSetDecoder,
/// };
///
/// // A batch as a broker would return it.
/// let mut builder = RecordBatchBuilder::new(42).compression(Compression::Lz4);
/// builder.append(1_700_000_000_000, Some(b"key"), Some(b"value"), &[(b"trace", Some(b"1"))])?;
/// let fetched: Bytes = builder.build()?;
///
/// let decoder = RecordSetDecoder::new(DecodeOptions::default());
/// let decoded = decoder.decode(fetched, IsolationLevel::ReadCommitted, &[])?;
/// let record = decoded.get(0).unwrap();
/// assert_eq!(record.offset(), 42);
/// assert_eq!(record.value(), Some(&b"value"[..]));
/// assert_eq!(record.headers().last("trace"), Some(Some(&b"1"[..])));
/// // A Bytes slice of the fetched (here: decompressed) buffer, no copy.
/// let value: Bytes = record.value_bytes().unwrap();
/// assert_eq!(decoded.next_offset, Some(43));
/// # Ok::<(), lazykafka::records::RecordsError>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordSetDecoder {
    options: DecodeOptions,
}

impl RecordSetDecoder {
    /// A decoder with these options.
    pub fn new(options: DecodeOptions) -> Self {
        RecordSetDecoder { options }
    }

    /// Its options.
    pub fn options(&self) -> &DecodeOptions {
        &self.options
    }

    /// Decodes a record set. `aborted` is the partition's
    /// `aborted_transactions` from the Fetch response (ignored under
    /// [`IsolationLevel::ReadUncommitted`]); it need not be sorted.
    ///
    /// Fails at the first faulty batch; see [`RecordSetDecoder::decode_into`]
    /// to keep the records of the batches before it.
    pub fn decode(
        &self,
        records: Bytes,
        isolation: IsolationLevel,
        aborted: &[AbortedTransaction],
    ) -> Result<DecodedRecords, RecordsError> {
        let mut out = DecodedRecords::new();
        self.decode_into(records, isolation, aborted, &mut out)?;
        Ok(out)
    }

    /// Decodes a record set into `out`, appending to its records and
    /// counters (call [`DecodedRecords::clear`] to reuse it).
    ///
    /// On error, `out` holds the records and `next_offset` of the complete
    /// batches before the faulty one, whose base offset the error names
    /// ([`RecordsError::batch_offset`]): a consumer can deliver those
    /// records and then report the error for that offset.
    pub fn decode_into(
        &self,
        records: Bytes,
        isolation: IsolationLevel,
        aborted: &[AbortedTransaction],
        out: &mut DecodedRecords,
    ) -> Result<(), RecordsError> {
        let mut txns = TxnFilter::new(isolation, aborted);
        let mut pos = 0;
        while pos < records.len() {
            let rest = &records[pos..];
            let Some((head, _)) = rest.split_first_chunk::<LOG_OVERHEAD>() else {
                out.partial_tail = Some(PartialTail {
                    position: pos,
                    bytes: rest.len(),
                    base_offset: rest.first_chunk::<8>().map(|b| i64::from_be_bytes(*b)),
                    declared_size: None,
                });
                break;
            };
            let base_offset = i64::from_be_bytes([
                head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7],
            ]);
            let length = i32::from_be_bytes([head[8], head[9], head[10], head[11]]);
            let fail = |kind| RecordsError::new(kind, base_offset, pos);
            // No message format is shorter than a v0 message; checked before
            // the partial-tail test so a nonsense length is never mistaken
            // for a batch that merely did not fit.
            if length < MIN_SIZE_V0 as i32 {
                return Err(fail(RecordsErrorKind::BadLength {
                    what: "batch length",
                    length: i64::from(length),
                }));
            }
            let size = LOG_OVERHEAD + length as usize;
            if size > rest.len() {
                out.partial_tail = Some(PartialTail {
                    position: pos,
                    bytes: rest.len(),
                    base_offset: Some(base_offset),
                    declared_size: Some(size),
                });
                break;
            }
            let batch = records.slice(pos..pos + size);
            let before = (out.entries.len(), out.buffers.len());
            let next = match batch[16] as i8 {
                2 => self.decode_v2(&batch, &mut txns, out),
                0 | 1 => legacy::decode_message(&batch, &self.options, out)
                    .and_then(|offset| offset.checked_add(1).ok_or(OVERFLOW)),
                magic => Err(RecordsErrorKind::UnknownMagic(magic)),
            }
            .map_err(|kind| {
                // Keep `out` to whole batches, as documented.
                out.entries.truncate(before.0);
                out.buffers.truncate(before.1);
                fail(kind)
            })?;
            out.next_offset = Some(next);
            out.batches += 1;
            pos += size;
        }
        Ok(())
    }

    /// Decodes one complete v2 batch; returns the offset after it.
    fn decode_v2(
        &self,
        batch: &Bytes,
        txns: &mut TxnFilter,
        out: &mut DecodedRecords,
    ) -> Result<i64, RecordsErrorKind> {
        if batch.len() < batch::HEADER_LEN {
            return Err(RecordsErrorKind::BadLength {
                what: "batch length",
                length: (batch.len() - LOG_OVERHEAD) as i64,
            });
        }
        let header = BatchHeader::read(batch)?;
        if self.options.check_crcs {
            header.verify_crc(batch)?;
        }
        let next = header.next_offset()?;
        let limit = self.options.max_decompressed_bytes;
        // KIP-98, as the Java consumer applies it: before a batch of a
        // producer, learn the aborted transactions that started at or
        // before its last offset; an abort marker ends that producer's
        // aborted transaction; a transactional batch of a producer with an
        // open aborted transaction is dropped.
        if txns.read_committed && header.producer_id >= 0 {
            txns.learn_up_to(next - 1);
            if header.is_control() {
                let section = batch::records_section(batch, &header, limit)?;
                if batch::control_type(section, &header)? == Some(ControlType::Abort) {
                    txns.end(header.producer_id);
                }
            } else if header.is_transactional() && txns.is_aborted(header.producer_id) {
                // Dropped unread, as the Java consumer does; the CRC has
                // covered it.
                out.aborted_batches += 1;
                out.aborted_records += header.record_count as u64;
                return Ok(next);
            }
        }
        if header.is_control() {
            out.control_batches += 1;
            return Ok(next);
        }
        let section = batch::records_section(batch, &header, limit)?;
        batch::decode_records(section, &header, out)?;
        Ok(next)
    }
}

const OVERFLOW: RecordsErrorKind = RecordsErrorKind::Malformed {
    what: "offset",
    reason: "offset overflows int64",
};

/// The read_committed state of one record set (Java: the consumer's
/// `abortedProducerIds` and `abortedTransactions` queue).
struct TxnFilter {
    read_committed: bool,
    /// Aborted transactions not yet reached, latest first so the next one
    /// pops off the end.
    pending: Vec<AbortedTransaction>,
    /// Producers inside an aborted transaction right now.
    aborting: Vec<i64>,
}

impl TxnFilter {
    fn new(isolation: IsolationLevel, aborted: &[AbortedTransaction]) -> Self {
        let read_committed = isolation == IsolationLevel::ReadCommitted;
        let mut pending = if read_committed {
            aborted.to_vec()
        } else {
            Vec::new()
        };
        pending.sort_unstable_by_key(|t| std::cmp::Reverse(t.first_offset));
        TxnFilter {
            read_committed,
            pending,
            aborting: Vec::new(),
        }
    }

    fn learn_up_to(&mut self, last_offset: i64) {
        while let Some(t) = self.pending.last().copied() {
            if t.first_offset > last_offset {
                break;
            }
            self.pending.pop();
            if !self.aborting.contains(&t.producer_id) {
                self.aborting.push(t.producer_id);
            }
        }
    }

    fn end(&mut self, producer_id: i64) {
        self.aborting.retain(|&p| p != producer_id);
    }

    fn is_aborted(&self, producer_id: i64) -> bool {
        self.aborting.contains(&producer_id)
    }
}
