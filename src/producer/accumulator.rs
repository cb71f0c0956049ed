//! The record accumulator: where a producer's records wait, in batches per
//! partition, until the sender takes them for a Produce request (the Java
//! client's `RecordAccumulator` and `ProducerBatch`).
//!
//! Pure like the rest of this module: time is an argument, the cluster's
//! leaders come from a closure, and the sender's idempotence state answers
//! through another; nothing here reads a clock or touches a socket.
//!
//! ```text
//!   append(now, tp, record) -> RecordId            (the application's send;
//!        |                                          BufferFull: wait for memory)
//!        v
//!  +-------------+  ready(now, leader_of)   -> brokers to send to, partitions
//!  | Accumulator |                             without a leader, next check
//!  +-------------+  drain(now, broker, leader_of, stamp) -> one request's batches
//!        ^          reenqueue(batch, retry_at)  a retriable failure: again, first
//!        |          complete(batch)             done (sent or failed): memory freed
//!        |          expire(now)                 delivery.timeout.ms passed
//!   flush() / flush_done(marker), abort_all(), restamp(tp, new_stamp)
//! ```
//!
//! The rules it keeps:
//!
//! - a partition's records go in the order they were appended: its batches
//!   form a queue, records join only the last one (the *open* batch), a
//!   drain takes only the first, and a batch back for a retry goes before
//!   every batch holding later records (so retries leave in record order,
//!   which is base-sequence order, as the Java client's
//!   `insertInSequenceOrder` keeps them);
//! - a batch closes when the next record would take it past `batch.size`
//!   (capped at `max.request.size`); a record larger than that gets a
//!   batch of its own; one whose batch would exceed `max.request.size` or
//!   `buffer.memory` is refused;
//! - memory: every record counts its exact encoded size (and the first of
//!   each batch the batch header) against `buffer.memory`, from `append`
//!   until its batch is completed, expired or aborted;
//! - a partition is *ready* when its first batch is full (closed, or more
//!   batches behind it), has lingered `linger.ms`, a flush is waiting for
//!   it, or an append was refused for memory since the last that went in;
//!   a batch back for a retry waits for its retry time whatever else holds;
//! - batches are encoded (and compressed) when they are drained, with the
//!   producer id, epoch and base sequence the sender gives them then; a
//!   retry keeps its bytes and its stamp.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::group::TopicPartition;
use crate::records::{
    encoded_record_size, set_producer_state, Compression, NewHeader, RecordBatchBuilder,
    RecordsError, BATCH_HEADER_LEN,
};

/// The time an append happens at, read only if needed: only a record
/// that opens a batch needs it (for `linger.ms`), so that the common
/// append (to an open batch) reads no clock. An [`Instant`] is its own
/// time; a closure is called at most once by [`Memo`].
pub(crate) trait Now {
    /// The time.
    fn now(&mut self) -> Instant;
}

impl Now for Instant {
    fn now(&mut self) -> Instant {
        *self
    }
}

impl<F: FnMut() -> Instant> Now for F {
    fn now(&mut self) -> Instant {
        self()
    }
}

/// A [`Now`] that reads its clock at most once, and tells whether it did.
pub(crate) struct Memo<N> {
    clock: N,
    read: Option<Instant>,
}

impl<N: Now> Memo<N> {
    pub(crate) fn new(clock: N) -> Self {
        Memo { clock, read: None }
    }

    /// The time, if it was read.
    pub(crate) fn read(&self) -> Option<Instant> {
        self.read
    }
}

impl<N: Now> Now for &mut Memo<N> {
    fn now(&mut self) -> Instant {
        *self.read.get_or_insert_with(|| self.clock.now())
    }
}

#[cfg(test)]
mod tests;

/// What the accumulator is told of the producer's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AccumulatorConfig {
    /// `batch.size`: a batch closes when the next record would take its
    /// encoded size (header included, before compression) past this; a
    /// single larger record gets a batch of its own. Capped at
    /// `max_request_size`.
    pub batch_size: usize,
    /// `linger.ms`: how long a batch that is not full waits for more
    /// records before it is ready.
    pub linger: Duration,
    /// `buffer.memory`: the most bytes of records held at once, queued or
    /// in flight.
    pub buffer_memory: usize,
    /// `compression.type`, applied when a batch is drained.
    pub compression: Compression,
    /// `max.request.size`: a record whose batch alone would be larger is
    /// refused at append, and a drain's batches stay within it.
    pub max_request_size: usize,
    /// `delivery.timeout.ms`, counted from the append that opened the
    /// batch.
    pub delivery_timeout: Duration,
    /// Whether batches are marked transactional (KIP-98); they then need a
    /// [`Stamp`] from the sender.
    pub transactional: bool,
}

impl Default for AccumulatorConfig {
    /// The Java client's defaults: 16 KiB batches, 5 ms linger, 32 MiB of
    /// buffer, no compression, 1 MiB requests, 120 s delivery timeout.
    fn default() -> Self {
        AccumulatorConfig {
            batch_size: 16 * 1024,
            linger: Duration::from_millis(5),
            buffer_memory: 32 * 1024 * 1024,
            compression: Compression::None,
            max_request_size: 1024 * 1024,
            delivery_timeout: Duration::from_secs(120),
            transactional: false,
        }
    }
}

/// A record to append, its partition already chosen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NewRecord {
    /// The key (`None`: null).
    pub key: Option<Bytes>,
    /// The value (`None`: null, a tombstone).
    pub value: Option<Bytes>,
    /// The headers, in order: key and nullable value.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// The record's timestamp, in milliseconds since the epoch (CreateTime).
    pub timestamp: i64,
}

/// Where an append put its record.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Appended {
    /// The record.
    pub id: RecordId,
    /// Its batch, by the batch's first record (what
    /// [`ProducerBatch::first`] returns once the batch is drained).
    pub batch: RecordId,
    /// Its place in the batch, from 0 (its offset from the batch's base
    /// offset).
    pub index: u32,
}

/// A record appended to an accumulator: unique within it, and increasing
/// with each append (so within a partition, in the records' order).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct RecordId(u64);

/// A record as the batch builder takes it: its timestamp, key, value and
/// headers.
type RecordParts<'a> = (i64, Option<&'a [u8]>, Option<&'a [u8]>, &'a [NewHeader<'a>]);

/// Why a record was not appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AppendError {
    /// The record does not fit in the memory left now (the producer waits
    /// up to `max.block.ms` for batches to complete, then appends again).
    BufferFull {
        /// The bytes it would take.
        needed: usize,
        /// The bytes free.
        available: usize,
    },
    /// The record, in a batch of its own, would be larger than
    /// `max.request.size` or `buffer.memory` (or `i32::MAX`), whichever is
    /// smallest: it can never be sent.
    RecordTooLarge {
        /// Its batch's size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The batch builder refused the record. A record within the size
    /// limits always fits; this is kept rather than a panic.
    Invalid(RecordsError),
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppendError::BufferFull { needed, available } => write!(
                f,
                "the record needs {needed} bytes of buffer.memory, {available} are free"
            ),
            AppendError::RecordTooLarge { size, max } => write!(
                f,
                "the record is {size} bytes in a batch of its own, larger than the {max} allowed"
            ),
            AppendError::Invalid(e) => write!(f, "the record could not be encoded: {e}"),
        }
    }
}

impl std::error::Error for AppendError {}

/// What the sender stamps on a batch as it drains it: an idempotent (or
/// transactional) producer's id, epoch and the sequence number of the
/// batch's first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Stamp {
    /// The producer id (InitProducerId).
    pub producer_id: i64,
    /// The producer epoch.
    pub epoch: i16,
    /// The first record's sequence number in its partition.
    pub base_sequence: i32,
}

/// What the sender sees of a batch before taking it in a drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerBatchInfo {
    /// Its first record.
    pub first_record: RecordId,
    /// How many records it holds.
    pub record_count: usize,
    /// Its size in a request: the encoded length once it is built (a
    /// retry), else its uncompressed size (exact without compression, and
    /// what the Java client estimates a compressed batch at before it has
    /// compression ratios to go by).
    pub size: usize,
    /// When its first record was appended.
    pub created: Instant,
    /// How many times it was drained before.
    pub attempts: u32,
    /// The stamp it carries (a retry of an idempotent producer's batch).
    pub stamp: Option<Stamp>,
}

/// One closed batch of one partition, as the sender holds it.
#[derive(Debug)]
pub(crate) struct ProducerBatch {
    /// Its partition.
    pub tp: TopicPartition,
    /// Its records, in order.
    pub records: Vec<RecordId>,
    /// The encoded v2 batch (base offset 0), built when it was drained;
    /// empty for a batch never drained (expired or aborted in the queue).
    pub bytes: Bytes,
    /// When its first record was appended (delivery timeout counts from
    /// here).
    pub created: Instant,
    /// How many times it was drained.
    pub attempts: u32,
    /// The producer id, epoch and base sequence in its header (`None`: a
    /// non-idempotent producer's, or never drained).
    pub stamp: Option<Stamp>,
    /// The memory it holds: its encoded size before compression, header
    /// included.
    pub size: usize,
    /// Its codec.
    pub compression: Compression,
    /// Which batch this is to the accumulator (its first record).
    first: RecordId,
}

impl ProducerBatch {
    /// Its first record, which names the batch (see
    /// [`Appended::batch`]).
    pub(crate) fn first(&self) -> RecordId {
        self.first
    }

    /// What the sender sees of it.
    pub(crate) fn info(&self) -> ProducerBatchInfo {
        ProducerBatchInfo {
            first_record: self.first,
            record_count: self.records.len(),
            size: if self.bytes.is_empty() {
                self.size
            } else {
                self.bytes.len()
            },
            created: self.created,
            attempts: self.attempts,
            stamp: self.stamp,
        }
    }

    /// Rewrites the producer id, epoch and base sequence of the built batch
    /// and its CRC-32C (KIP-360: after an epoch bump, a batch goes again
    /// under the new epoch, its sequence numbers counted again). Fails,
    /// leaving the batch as it was, when it was never built or its bytes
    /// are not a whole, intact v2 batch.
    pub(crate) fn restamp(&mut self, stamp: Stamp) -> Result<(), RecordsError> {
        // Rewritten in place when nothing else holds the bytes.
        let mut bytes = std::mem::take(&mut self.bytes)
            .try_into_mut()
            .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
        let result = set_producer_state(
            &mut bytes,
            stamp.producer_id,
            stamp.epoch,
            stamp.base_sequence,
        );
        self.bytes = bytes.freeze();
        result?;
        self.stamp = Some(stamp);
        Ok(())
    }

    /// The two halves of a built batch of two records or more, each with
    /// its place in this one: the records re-encoded from its bytes (its
    /// codec, timestamps, keys, values and headers), each half stamped
    /// with the sequence numbers its records had, sent as new batches
    /// created when this one was (the delivery timeout still counts from
    /// then). Fails when the bytes do not decode to exactly its records.
    pub(crate) fn split(&self) -> Result<Vec<(ProducerBatch, usize)>, RecordsError> {
        let n = self.records.len();
        let decoded = crate::records::RecordSetDecoder::default().decode(
            self.bytes.clone(),
            crate::records::IsolationLevel::ReadUncommitted,
            &[],
        )?;
        if n < 2 || decoded.len() != n {
            return Err(RecordsError::new(
                crate::records::RecordsErrorKind::Malformed {
                    what: "batch",
                    reason: "not a built batch of two records or more",
                },
                0,
                0,
            ));
        }
        let mid = n / 2;
        let mut halves = Vec::with_capacity(2);
        for (start, end) in [(0, mid), (mid, n)] {
            let stamp = self.stamp.map(|s| Stamp {
                base_sequence: s.base_sequence.wrapping_add(start as i32),
                ..s
            });
            let mut builder = RecordBatchBuilder::new(0).compression(self.compression);
            if let Some(s) = stamp {
                builder = builder.producer(s.producer_id, s.epoch, s.base_sequence);
            }
            for record in decoded.iter().skip(start).take(end - start) {
                let headers: Vec<NewHeader<'_>> = record
                    .headers()
                    .iter()
                    .map(|h| (h.raw_key(), h.value()))
                    .collect();
                let timestamp = record.timestamp().millis().unwrap_or(-1);
                builder.append(timestamp, record.key(), record.value(), &headers)?;
            }
            let records = self.records[start..end].to_vec();
            let half = ProducerBatch {
                tp: self.tp.clone(),
                first: records[0],
                records,
                bytes: builder.build()?,
                created: self.created,
                attempts: 0,
                stamp,
                // The memory the whole held, shared by record count.
                size: (self.size * (end - start) / n).max(1),
                compression: self.compression,
            };
            halves.push((half, start));
        }
        Ok(halves)
    }
}

/// Which brokers have something to send, from [`Accumulator::ready`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ready {
    /// The leaders of the partitions ready to send.
    pub brokers: BTreeSet<i32>,
    /// Partitions holding records whose leader is not known (their topics
    /// need metadata).
    pub unknown_leaders: BTreeSet<TopicPartition>,
    /// When a partition with a known leader that is not ready now becomes
    /// ready (its linger or retry backoff ends), if one does by time alone.
    pub next_check: Option<Instant>,
}

/// One Produce request's worth of batches, from [`Accumulator::drain`].
#[derive(Debug, Default)]
pub(crate) struct Drained {
    /// The batches to send, at most one per partition.
    pub batches: Vec<ProducerBatch>,
    /// Batches that could not be built (their codec failed, or is not in
    /// this build), with the reason: their records fail with it. They hold
    /// memory, and any stamp they were given, like a drained batch:
    /// complete them.
    pub failed: Vec<(ProducerBatch, RecordsError)>,
}

/// The batches for one Produce request, taken out of the accumulator by
/// [`Accumulator::take`]: retries as they were sent, new batches still to
/// be built.
#[derive(Debug)]
pub(crate) struct Taken {
    entries: Vec<TakenBatch>,
    compression: Compression,
}

#[derive(Debug)]
enum TakenBatch {
    Built(ProducerBatch),
    Open(OpenBatch, TopicPartition, Option<Stamp>),
}

impl Taken {
    /// Whether nothing was taken.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Builds the new batches (compressed and stamped), in order.
    pub(crate) fn build(self) -> Drained {
        let mut drained = Drained::default();
        for entry in self.entries {
            match entry {
                TakenBatch::Built(batch) => drained.batches.push(batch),
                TakenBatch::Open(open, tp, stamp) => {
                    let (mut batch, failed) = build(open, &tp, stamp, self.compression);
                    batch.attempts += 1;
                    match failed {
                        None => drained.batches.push(batch),
                        Some(e) => drained.failed.push((batch, e)),
                    }
                }
            }
        }
        drained
    }
}

impl Drained {
    /// Whether nothing was drained.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.batches.is_empty() && self.failed.is_empty()
    }
}

/// What appends changed for the sender since it last looked, from
/// [`Accumulator::take_news`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct News {
    /// A batch was opened.
    pub opened: bool,
    /// When the earliest batch opened is due by `linger.ms` (`None`: one
    /// is never due by time alone, or none was opened).
    pub due: Option<Instant>,
    /// A batch was closed (full): it is ready now.
    pub closed: bool,
}

impl News {
    /// Notes a batch opened, due at `due`.
    fn opened(&mut self, due: Option<Instant>) {
        self.due = match (self.opened, self.due, due) {
            (false, _, due) => due,
            (true, Some(a), Some(b)) => Some(a.min(b)),
            (true, a, b) => a.or(b),
        };
        self.opened = true;
    }

    /// Whether anything changed.
    pub(crate) fn any(&self) -> bool {
        self.opened || self.closed
    }
}

/// A point in the stream of appends, from [`Accumulator::flush`]: the
/// flush is done when every record appended before it is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct FlushMarker(u64);

/// The batch still taking records, or closed but never drained.
#[derive(Debug)]
struct OpenBatch {
    /// The records so far, encoded (compressed when drained).
    builder: RecordBatchBuilder,
    /// Its records, in order.
    records: Vec<RecordId>,
    /// When its first record was appended.
    created: Instant,
    /// The first record's timestamp (the batch's base timestamp).
    first_timestamp: i64,
    /// Its encoded size before compression, header included.
    size: usize,
    /// No more records join it.
    closed: bool,
}

/// A batch in a partition's queue.
#[derive(Debug)]
enum Queued {
    /// Never drained.
    New(OpenBatch),
    /// Drained, failed, and back for another attempt from `not_before`.
    Retry {
        /// The batch, built and maybe stamped.
        batch: ProducerBatch,
        /// Its retry backoff ends then.
        not_before: Instant,
    },
}

impl Queued {
    /// Its first record: a queue is sorted by it.
    fn first(&self) -> RecordId {
        match self {
            Queued::New(open) => open.records[0],
            Queued::Retry { batch, .. } => batch.first,
        }
    }

    /// When its first record was appended.
    fn created(&self) -> Instant {
        match self {
            Queued::New(open) => open.created,
            Queued::Retry { batch, .. } => batch.created,
        }
    }

    /// What the sender sees of it.
    fn info(&self) -> ProducerBatchInfo {
        match self {
            Queued::New(open) => ProducerBatchInfo {
                first_record: open.records[0],
                record_count: open.records.len(),
                size: open.size,
                created: open.created,
                attempts: 0,
                stamp: None,
            },
            Queued::Retry { batch, .. } => batch.info(),
        }
    }

    /// The batch as handed out unbuilt (expired or aborted in the queue).
    fn into_batch(self, tp: &TopicPartition, compression: Compression) -> ProducerBatch {
        match self {
            Queued::New(open) => ProducerBatch {
                tp: tp.clone(),
                first: open.records[0],
                records: open.records,
                bytes: Bytes::new(),
                created: open.created,
                attempts: 0,
                stamp: None,
                size: open.size,
                compression,
            },
            Queued::Retry { batch, .. } => batch,
        }
    }
}

/// When a partition's first batch may be sent.
enum Sendable {
    /// Now.
    Now,
    /// From then (its linger or retry backoff ends).
    At(Instant),
    /// Not by time alone (a linger past what an `Instant` holds).
    Never,
}

/// The producer's record accumulator: batches per partition, the memory
/// they hold, and which of them go next to which broker.
#[derive(Debug)]
pub(crate) struct Accumulator {
    /// Its configuration.
    config: AccumulatorConfig,
    /// Each partition's batches in record order; no empty queue is kept.
    queues: BTreeMap<TopicPartition, VecDeque<Queued>>,
    /// Every batch not yet completed (queued or in flight), by its first
    /// record, with the memory it holds (for a batch still in its queue
    /// unbuilt, its first record's: the rest is added as it leaves).
    incomplete: BTreeMap<RecordId, usize>,
    /// The memory held: the sum of `incomplete`, and of the records of
    /// batches still in their queue unbuilt past each one's first.
    used: usize,
    /// The next record's id.
    next_id: u64,
    /// Per broker, the partition its next drain starts from.
    drain_from: HashMap<i32, TopicPartition>,
    /// The latest flush.
    flush: Option<FlushMarker>,
    /// An append was refused for memory, and none went in since.
    memory_wanted: bool,
    /// What appends changed since [`Accumulator::take_news`] was last
    /// called: when the next drain is due may have changed.
    news: News,
    /// Buffers of completed batches, for the next batches to be built in
    /// (as the Java client's `BufferPool`): a steady stream of batches
    /// then costs no allocation, and no page faults as the heap grows and
    /// shrinks. They hold at most what `buffer.memory` leaves free beside
    /// the records held, and are let go once no record is held.
    spare: Vec<BytesMut>,
    /// The capacity of the buffers in `spare`.
    spare_bytes: usize,
}

impl Accumulator {
    /// An empty accumulator.
    pub(crate) fn new(config: AccumulatorConfig) -> Self {
        Accumulator {
            config,
            queues: BTreeMap::new(),
            incomplete: BTreeMap::new(),
            used: 0,
            next_id: 0,
            drain_from: HashMap::new(),
            flush: None,
            memory_wanted: false,
            news: News::default(),
            spare: Vec::new(),
            spare_bytes: 0,
        }
    }

    /// Takes back the bytes of a batch that is done with (its memory
    /// released), to build a later batch in: when nothing else holds them,
    /// they are not much larger than a batch (a batch of one huge record
    /// is let go), and the buffers kept stay within what `buffer.memory`
    /// leaves beside the records held. When no record is held, every
    /// buffer kept is let go: an idle producer holds no memory for
    /// batches, a busy one allocates none.
    pub(crate) fn recycle(&mut self, batch: Bytes) {
        if self.used == 0 {
            self.spare = Vec::new();
            self.spare_bytes = 0;
            return;
        }
        let largest = 4 * self.config.batch_size.max(16 * 1024);
        if let Ok(mut buf) = batch.try_into_mut() {
            let room = self.config.buffer_memory.saturating_sub(self.used);
            if buf.capacity() <= largest && self.spare_bytes + buf.capacity() <= room {
                buf.clear();
                self.spare_bytes += buf.capacity();
                self.spare.push(buf);
            }
        }
    }

    /// Whether an append opened or closed a batch since the last call, and
    /// when the batches opened are due: a sender driven by deadlines looks
    /// again only then, since an append to an open batch changes neither
    /// when it is due (`linger.ms` from its first record) nor whether it
    /// is full.
    pub(crate) fn take_news(&mut self) -> News {
        std::mem::take(&mut self.news)
    }

    /// The configuration it was made with.
    pub(crate) fn config(&self) -> &AccumulatorConfig {
        &self.config
    }

    /// The size a batch closes at.
    fn batch_limit(&self) -> usize {
        self.config.batch_size.min(self.config.max_request_size)
    }

    /// Appends `record` to partition `tp` at `now`: to its open batch when
    /// the record fits there, else to a new batch (closing the open one).
    /// The work is that of encoding the record, whatever the batch holds.
    ///
    /// Refused when the record's batch alone would be too large, or when
    /// the memory it needs is not free now ([`AppendError::BufferFull`]:
    /// every partition is then ready until an append goes in, so that
    /// memory frees soon; the open batch it did not fit in is closed).
    pub(crate) fn append(
        &mut self,
        mut now: impl Now,
        tp: &TopicPartition,
        record: &NewRecord,
    ) -> Result<Appended, AppendError> {
        let headers: Vec<NewHeader<'_>> = record
            .headers
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_deref()))
            .collect();
        let (key, value, timestamp) = (
            record.key.as_deref(),
            record.value.as_deref(),
            record.timestamp,
        );
        let alone = BATCH_HEADER_LEN + encoded_record_size(0, 0, key, value, &headers);
        let max = self
            .config
            .max_request_size
            .min(self.config.buffer_memory)
            .min(i32::MAX as usize);
        if alone > max {
            return Err(AppendError::RecordTooLarge { size: alone, max });
        }
        let limit = self.batch_limit();
        let available = self.available();
        let id = RecordId(self.next_id);
        let parts = (timestamp, key, value, &headers[..]);
        if let Some(done) = self.append_to_open(tp, id, parts, limit, available) {
            return done;
        }
        if alone > available {
            self.memory_wanted = true;
            return Err(AppendError::BufferFull {
                needed: alone,
                available,
            });
        }
        let mut builder = self.batch_builder(alone);
        builder
            .append(timestamp, key, value, &headers)
            .map_err(AppendError::Invalid)?;
        let created = now.now();
        let closed = alone >= limit;
        let batch = Queued::New(OpenBatch {
            builder,
            records: vec![id],
            created,
            first_timestamp: timestamp,
            size: alone,
            closed,
        });
        match self.queues.get_mut(tp) {
            Some(queue) => queue.push_back(batch),
            None => {
                self.queues.insert(tp.clone(), VecDeque::from([batch]));
            }
        }
        self.incomplete.insert(id, alone);
        self.news.opened(created.checked_add(self.config.linger));
        self.news.closed |= closed;
        self.used += alone;
        self.next_id += 1;
        self.memory_wanted = false;
        Ok(Appended {
            id,
            batch: id,
            index: 0,
        })
    }

    /// Appends record `id` (its timestamp, key, value and headers) to
    /// `tp`'s open batch when it fits there (`limit`: the batch's size
    /// limit; `available`: the memory free). `None` when a new batch must
    /// take it: there is no open batch, or it is full now (closed here).
    fn append_to_open(
        &mut self,
        tp: &TopicPartition,
        id: RecordId,
        (timestamp, key, value, headers): RecordParts<'_>,
        limit: usize,
        available: usize,
    ) -> Option<Result<Appended, AppendError>> {
        let Some(Queued::New(open)) = self.queues.get_mut(tp).and_then(VecDeque::back_mut) else {
            return None;
        };
        if open.closed {
            return None;
        }
        let size = i32::try_from(open.records.len())
            .ok()
            .zip(timestamp.checked_sub(open.first_timestamp))
            .map(|(offset_delta, ts_delta)| {
                encoded_record_size(offset_delta, ts_delta, key, value, headers)
            });
        match size {
            Some(size) if open.size + size <= limit => {
                if size > available {
                    self.memory_wanted = true;
                    return Some(Err(AppendError::BufferFull {
                        needed: size,
                        available,
                    }));
                }
                if let Err(e) = open.builder.append(timestamp, key, value, headers) {
                    return Some(Err(AppendError::Invalid(e)));
                }
                open.records.push(id);
                open.size += size;
                open.closed = open.size >= limit;
                self.news.closed |= open.closed;
                // `incomplete` learns the batch's full size when it
                // leaves its queue (`take`, `expire`, `abort_all`): no
                // lookup per record.
                self.used += size;
                self.next_id += 1;
                self.memory_wanted = false;
                Some(Ok(Appended {
                    id,
                    batch: open.records[0],
                    index: open.records.len() as u32 - 1,
                }))
            }
            // No room (or an offset or timestamp delta the batch cannot
            // hold): the batch is full.
            _ => {
                open.closed = true;
                self.news.closed = true;
                None
            }
        }
    }

    /// A builder for a new batch whose first record takes `alone` bytes
    /// (batch header included), on a spare buffer when one is large
    /// enough; spare buffers give way to the records held.
    fn batch_builder(&mut self, alone: usize) -> RecordBatchBuilder {
        let spare = match self.spare.last() {
            Some(buf) if buf.capacity() >= alone => self.spare.pop(),
            _ => None,
        };
        if let Some(buf) = &spare {
            self.spare_bytes -= buf.capacity();
        }
        // The records held grew since the buffers were kept: they give way.
        while self.used + alone + self.spare_bytes > self.config.buffer_memory {
            match self.spare.pop() {
                Some(buf) => self.spare_bytes -= buf.capacity(),
                None => break,
            }
        }
        let mut builder = match spare {
            Some(buf) => RecordBatchBuilder::with_buffer(0, buf),
            None => RecordBatchBuilder::new(0),
        }
        .compression(self.config.compression)
        .transactional(self.config.transactional);
        // Room for this record only: a batch of one large record takes
        // what it needs; one of many small ones grows as they come.
        builder.reserve(alone - BATCH_HEADER_LEN);
        builder
    }

    /// Whether a flush is waiting for records appended before it.
    fn flushing(&self) -> bool {
        self.flush.is_some_and(|m| !self.flush_done(m))
    }

    /// When the first batch of a queue may be sent.
    fn sendable(&self, queue: &VecDeque<Queued>, now: Instant, forced: bool) -> Sendable {
        let at = match queue.front() {
            None => return Sendable::Never,
            Some(Queued::Retry { not_before, .. }) => Some(*not_before),
            Some(Queued::New(open)) => {
                // Full: closed, or more batches behind it.
                if queue.len() > 1 || open.closed || forced {
                    return Sendable::Now;
                }
                open.created.checked_add(self.config.linger)
            }
        };
        match at {
            Some(at) if at <= now => Sendable::Now,
            Some(at) => Sendable::At(at),
            None => Sendable::Never,
        }
    }

    /// Which brokers lead a partition ready to send at `now` (see the
    /// module's rules), which partitions holding records have no known
    /// leader, and when to ask again if nothing else happens.
    ///
    /// The sender's own holds (a partition with a request in flight under
    /// `max.in.flight.requests.per.connection` 1, say) are not known here:
    /// a broker may be ready and its drain still empty.
    pub(crate) fn ready(
        &self,
        now: Instant,
        leader_of: impl Fn(&TopicPartition) -> Option<i32>,
    ) -> Ready {
        let forced = self.memory_wanted || self.flushing();
        let mut ready = Ready::default();
        for (tp, queue) in &self.queues {
            let Some(leader) = leader_of(tp) else {
                ready.unknown_leaders.insert(tp.clone());
                continue;
            };
            match self.sendable(queue, now, forced) {
                Sendable::Now => {
                    ready.brokers.insert(leader);
                }
                Sendable::At(at) => {
                    ready.next_check = Some(ready.next_check.map_or(at, |t| t.min(at)));
                }
                Sendable::Never => {}
            }
        }
        ready
    }

    /// The batches for one Produce request to `broker`: the first batch of
    /// each partition it leads (per `leader_of`) that is not waiting for a
    /// retry, whether ready or not, partitions taken in turn from where the
    /// last drain for `broker` left off (so none starves), for as long as
    /// their sizes add up to at most `max.request.size` (the first batch
    /// always goes; the one that did not fit goes first next time).
    ///
    /// `stamp` is asked for each partition before its batch is taken:
    /// `None` skips the partition this time (the sender's ordering rules;
    /// nothing changes for it), `Some(stamp)` takes the batch, with that
    /// stamp (`Some(None)`: no producer id). A retry keeps the bytes and
    /// stamp it has, whatever the answer's stamp. New batches are built
    /// here, compressed and stamped.
    #[cfg(test)]
    pub(crate) fn drain(
        &mut self,
        now: Instant,
        broker: i32,
        leader_of: impl Fn(&TopicPartition) -> Option<i32>,
        stamp: impl FnMut(&TopicPartition, &ProducerBatchInfo) -> Option<Option<Stamp>>,
    ) -> Drained {
        self.take(now, broker, leader_of, stamp).build()
    }

    /// What [`Accumulator::drain`] does, but new batches are taken out
    /// unbuilt: [`Taken::build`] builds them (compressing and checksumming
    /// each) after whatever lock the accumulator is under is released.
    /// A batch taken counts its bytes before compression towards
    /// `max.request.size`.
    pub(crate) fn take(
        &mut self,
        now: Instant,
        broker: i32,
        leader_of: impl Fn(&TopicPartition) -> Option<i32>,
        mut stamp: impl FnMut(&TopicPartition, &ProducerBatchInfo) -> Option<Option<Stamp>>,
    ) -> Taken {
        let mut drained = Taken {
            entries: Vec::new(),
            compression: self.config.compression,
        };
        let parts: Vec<TopicPartition> = self
            .queues
            .keys()
            .filter(|tp| leader_of(tp) == Some(broker))
            .cloned()
            .collect();
        if parts.is_empty() {
            return drained;
        }
        let start = self
            .drain_from
            .get(&broker)
            .map_or(0, |from| parts.partition_point(|tp| tp < from))
            % parts.len();
        let mut next_start = &parts[(start + 1) % parts.len()];
        let mut total = 0usize;
        for i in 0..parts.len() {
            let tp = &parts[(start + i) % parts.len()];
            let Some(queue) = self.queues.get_mut(tp) else {
                continue;
            };
            let info = match queue.front() {
                Some(Queued::Retry { not_before, .. }) if *not_before > now => continue,
                Some(front) => front.info(),
                None => continue,
            };
            if !drained.is_empty() && total.saturating_add(info.size) > self.config.max_request_size
            {
                next_start = tp;
                break;
            }
            let Some(given) = stamp(tp, &info) else {
                continue;
            };
            let Some(entry) = queue.pop_front() else {
                continue;
            };
            if queue.is_empty() {
                self.queues.remove(tp);
            }
            match entry {
                Queued::Retry { mut batch, .. } => {
                    batch.attempts += 1;
                    total = total.saturating_add(batch.bytes.len());
                    drained.entries.push(TakenBatch::Built(batch));
                }
                Queued::New(open) => {
                    self.incomplete.insert(open.records[0], open.size);
                    total = total.saturating_add(open.size);
                    drained
                        .entries
                        .push(TakenBatch::Open(open, tp.clone(), given));
                }
            }
        }
        self.drain_from.insert(broker, next_start.clone());
        drained
    }

    /// Queues `batch` again after a retriable failure: before every batch
    /// of its partition holding later records (so in base-sequence order
    /// among retries), not drained before `retry_at` (the retry backoff).
    /// It keeps its bytes, stamp and memory.
    pub(crate) fn reenqueue(&mut self, batch: ProducerBatch, retry_at: Instant) {
        // A batch completed meanwhile holds memory again.
        if let Entry::Vacant(entry) = self.incomplete.entry(batch.first) {
            entry.insert(batch.size);
            self.used += batch.size;
        }
        match self.queues.get_mut(&batch.tp) {
            Some(queue) => {
                let at = queue.partition_point(|q| q.first() < batch.first);
                let retry = Queued::Retry {
                    batch,
                    not_before: retry_at,
                };
                queue.insert(at, retry);
            }
            None => {
                let tp = batch.tp.clone();
                let retry = Queued::Retry {
                    batch,
                    not_before: retry_at,
                };
                self.queues.insert(tp, VecDeque::from([retry]));
            }
        }
    }

    /// Rewrites the stamp of the queued batches of `tp` that carry one
    /// (retries of an idempotent producer), for an epoch bump (KIP-360):
    /// `new_stamp` is asked for each, in queue order, and `None` leaves it
    /// as it is. Returns how many were rewritten; stops at the first that
    /// cannot be (see [`ProducerBatch::restamp`]).
    pub(crate) fn restamp(
        &mut self,
        tp: &TopicPartition,
        mut new_stamp: impl FnMut(&ProducerBatchInfo) -> Option<Stamp>,
    ) -> Result<usize, RecordsError> {
        let mut rewritten = 0;
        for entry in self.queues.get_mut(tp).into_iter().flatten() {
            if let Queued::Retry { batch, .. } = entry {
                if batch.stamp.is_none() {
                    continue;
                }
                if let Some(stamp) = new_stamp(&batch.info()) {
                    batch.restamp(stamp)?;
                    rewritten += 1;
                }
            }
        }
        Ok(rewritten)
    }

    /// Frees the memory of `batch`, done with (sent, or failed for good).
    /// Completing a batch twice, or one [`Accumulator::expire`] or
    /// [`Accumulator::abort_all`] handed out, changes nothing.
    pub(crate) fn complete(&mut self, batch: &ProducerBatch) {
        self.release(batch.first);
    }

    /// Frees the memory of `batch`, taken out of its queue as it was
    /// (never drained, or waiting for a retry), if it holds any: its whole
    /// size, which `incomplete` does not follow while the batch is open.
    fn release_whole(&mut self, batch: &ProducerBatch) {
        if self.incomplete.remove(&batch.first).is_some() {
            self.used -= batch.size;
        }
    }

    /// Frees the memory of the batch starting with `first`, if it holds any.
    fn release(&mut self, first: RecordId) {
        if let Some(size) = self.incomplete.remove(&first) {
            self.used -= size;
        }
    }

    /// Takes out the queued batches (never drained, or waiting for a
    /// retry) whose delivery timeout has passed at `now`, oldest first per
    /// partition; their memory is freed. Batches in flight are the
    /// sender's to time out.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<ProducerBatch> {
        let timeout = self.config.delivery_timeout;
        let compression = self.config.compression;
        let mut expired = Vec::new();
        self.queues.retain(|tp, queue| {
            // A queue is in creation order: the oldest batches are first.
            while queue
                .front()
                .is_some_and(|q| q.created().checked_add(timeout).is_some_and(|t| t <= now))
            {
                if let Some(entry) = queue.pop_front() {
                    expired.push(entry.into_batch(tp, compression));
                }
            }
            !queue.is_empty()
        });
        for batch in &expired {
            self.release_whole(batch);
        }
        expired
    }

    /// Makes every partition ready until the records appended so far are
    /// complete (the producer's `flush`); the marker tells when they are.
    pub(crate) fn flush(&mut self) -> FlushMarker {
        let marker = FlushMarker(self.next_id);
        self.flush = Some(marker);
        marker
    }

    /// Whether every record appended before `marker` is complete
    /// (completed, expired or aborted).
    pub(crate) fn flush_done(&self, marker: FlushMarker) -> bool {
        self.incomplete
            .first_key_value()
            .is_none_or(|(first, _)| first.0 >= marker.0)
    }

    /// Takes out every queued batch (the producer closing without waiting),
    /// freeing their memory. Batches in flight are the sender's.
    pub(crate) fn abort_all(&mut self) -> Vec<ProducerBatch> {
        let compression = self.config.compression;
        let mut aborted = Vec::new();
        for (tp, queue) in std::mem::take(&mut self.queues) {
            aborted.extend(queue.into_iter().map(|q| q.into_batch(&tp, compression)));
        }
        for batch in &aborted {
            self.release_whole(batch);
        }
        aborted
    }

    /// The bytes of records held (queued or in flight).
    pub(crate) fn buffered_bytes(&self) -> usize {
        self.used
    }

    /// The bytes of `buffer.memory` free.
    pub(crate) fn available(&self) -> usize {
        self.config.buffer_memory.saturating_sub(self.used)
    }

    /// Whether no batch is queued (batches in flight may be incomplete).
    pub(crate) fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Whether some batch, queued or in flight, is not complete.
    #[cfg(test)]
    pub(crate) fn has_incomplete(&self) -> bool {
        !self.incomplete.is_empty()
    }

    /// The next instant at which [`Accumulator::ready`] or
    /// [`Accumulator::expire`] answers differently with nothing else
    /// happening: the end of a first batch's linger or retry backoff still
    /// to come, or the delivery timeout of a queued batch (past already if
    /// `expire` has batches to hand out now).
    pub(crate) fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let forced = self.memory_wanted || self.flushing();
        let timeout = self.config.delivery_timeout;
        self.queues
            .values()
            .filter_map(|queue| {
                let expiry = queue.front()?.created().checked_add(timeout);
                let send = match self.sendable(queue, now, forced) {
                    Sendable::At(at) => Some(at),
                    Sendable::Now | Sendable::Never => None,
                };
                expiry.into_iter().chain(send).min()
            })
            .min()
    }

    /// The partitions with queued batches.
    pub(crate) fn partitions_with_data(&self) -> impl Iterator<Item = &TopicPartition> {
        self.queues.keys()
    }
}

/// Encodes a batch leaving its queue, with the producer state it is
/// given; unbuilt, with the reason, when the builder fails.
fn build(
    open: OpenBatch,
    tp: &TopicPartition,
    stamp: Option<Stamp>,
    compression: Compression,
) -> (ProducerBatch, Option<RecordsError>) {
    let mut builder = open.builder;
    if let Some(s) = stamp {
        builder = builder.producer(s.producer_id, s.epoch, s.base_sequence);
    }
    let built = builder.build();
    let mut batch = ProducerBatch {
        tp: tp.clone(),
        first: open.records[0],
        records: open.records,
        bytes: Bytes::new(),
        created: open.created,
        attempts: 0,
        stamp,
        size: open.size,
        compression,
    };
    match built {
        Ok(bytes) => {
            batch.bytes = bytes;
            (batch, None)
        }
        Err(e) => (batch, Some(e)),
    }
}
