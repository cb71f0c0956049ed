//! Positions, fetch planning, record buffering and offset resets for the
//! assigned partitions, as a state machine without IO.
//!
//! [`Fetcher`] owns, for every assigned partition, its position (the next
//! offset to hand to the application, and the leader epoch of the record
//! before it), whether it is paused, the records fetched but not yet
//! returned, and pending offset resets. It never sends anything itself: it
//! plans requests, and the caller (the consumer) sends them through the
//! connection manager and hands back what came of them. Time is always an
//! argument; nothing here reads a clock.
//!
//! ```text
//!  assign / seek / seek_to_* / set_committed / pause / resume   (application, group)
//!        |
//!        v
//!   +---------+  poll_requests(now, metadata) -> [(target, body, token)]  -> Cluster::request
//!   | Fetcher |  handle_response(now, token, response) -> FetchOutcome   <- Cluster::poll_response
//!   +---------+  handle_failure(now, token, error)       -> FetchOutcome
//!        |       take_records(max) -> [ConsumerRecord];  take_errors() -> [FetchError]
//!        v       next_deadline() -> when a backed-off retry may go
//! ```
//!
//! Call order: after any `handle_*`, `assign`, `seek*`, `set_committed`,
//! `resume`, or when `next_deadline()` passes, call `poll_requests` again
//! and send what it returns, then `check_pending_crcs` (so that the next
//! Fetch goes out before the CRCs of what came are checked; without it,
//! `take_records` checks them as it parses); call `take_records` (or
//! `take_ready`, decoding what it hands out elsewhere, and `put_decoded`)
//! and `take_errors` from the application's `poll`. A [`FetchOutcome`] with `refresh_metadata`, or
//! [`Fetcher::take_metadata_wanted`] after planning, asks for a Metadata
//! refresh (then plan again with the new metadata).
//!
//! The rules it keeps (see `docs/fetching.md`):
//!
//! - a partition is *fetchable* when it is assigned, has a position, is not
//!   paused, has no fetched records still waiting to be returned, is not in
//!   a fetch already, is not backing off after an error, and its leader is
//!   known; at most one Fetch is in flight per leader broker, covering all
//!   of that broker's fetchable partitions (one per read replica likewise);
//! - a fetchable partition stays *parked* at its target, carried by every
//!   Fetch there without being looked at again, until an answer changes it
//!   or something else does (a seek, a pause, records taken, new metadata
//!   as [`Fetcher::set_metadata_generation`] says...: it is then *dirty*);
//!   a pass looks only at the dirty partitions, so an answer costs what it
//!   carries and what changed, not what is assigned;
//! - a partition whose records are still waiting to be returned is fetched
//!   *ahead* once, from the end of those records, when the last answer
//!   showed more beyond them (its high watermark): at most one answer per
//!   partition waits behind the records being returned, and its records
//!   follow them only if they start exactly where those end (otherwise it
//!   is dropped and fetched again). An ahead answer that brings no records,
//!   or an error, is dropped and the partition is fetched as usual once its
//!   records are taken;
//! - a position that carries the leader epoch of the record before it is
//!   validated against the leader (OffsetForLeaderEpoch, KIP-320) before
//!   it is fetched from under a leader epoch it was not fetched under yet;
//!   a log truncated below it resets it (`auto.offset.reset` earliest or
//!   latest) or stops the partition with [`FetchError::LogTruncation`]
//!   (`none`); Fetch v12+ answers with a `diverging_epoch` are read the
//!   same way;
//! - with [`FetchConfig::sessions`], one fetch session (KIP-227) per
//!   leader connection: a full Fetch first, then incremental ones listing
//!   only the partitions added or changed, and forgetting those no longer
//!   fetched; any session error falls back to a full Fetch, and a session
//!   ends with its connection ([`Fetcher::set_leader_generations`]).
//!   Without, every Fetch is a full one (`session_id` 0, `session_epoch`
//!   -1);
//! - with `client.rack` set ([`FetchConfig::rack_id`]), a partition whose
//!   leader answers with a `preferred_read_replica` (KIP-392) is fetched
//!   from that replica, over its own connection
//!   ([`Target::Replica`]) with its own fetch session, until the lease
//!   ([`FetchConfig::replica_lease`], `metadata.max.age.ms`) ends or the
//!   replica fails (an error from it, a lost connection, a broker the
//!   metadata no longer knows): then from the leader again, which may name
//!   it again. ListOffsets and OffsetForLeaderEpoch always go to the
//!   leader;
//! - a position moves only when records are taken (or when a fetch brings
//!   nothing to deliver but moves past control batches, aborted
//!   transactions or compacted-away offsets), and never past a batch that
//!   could not be decoded;
//! - a fetched record is never returned once its partition was unassigned,
//!   seeked, or reset after it was fetched, nor while the partition is
//!   paused.

mod error;
mod offsets;
pub(crate) mod request;
#[cfg(test)]
mod tests;

pub use error::{FetchError, SeekError};
pub use offsets::{
    read_list_offsets, ListOffsetsPlan, ListedOffset, OffsetAndTimestamp, OffsetSpec,
};

use crate::cluster::{
    ExponentialBackoff, Metadata, RequestBody, RequestError, Response, Rng, Target,
    REPORT_AGAIN_AFTER,
};
use crate::protocol::messages::fetch::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, ForgottenTopic, PartitionData,
};
use crate::protocol::messages::offset_for_leader_epoch::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, OffsetForLeaderPartition,
    OffsetForLeaderTopic,
};
use crate::protocol::ErrorCode;
use crate::protocol::{ApiKey, DEFAULT_MAX_FRAME_SIZE};
use crate::records::{
    self, DecodeOptions, DecodedRecords, IsolationLevel, OwnedRecord, Record, RecordSetDecoder,
    RecordsError, Timestamp,
};
use bytes::Bytes;
use request::{classify, ErrorClass, FetchRequestBody, FIRST_TOPIC_ID_VERSION};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::group::TopicPartition;

/// What to do when a partition has no committed offset, or its position is
/// out of range (`auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum OffsetReset {
    /// Start from the earliest offset still in the log (`earliest`).
    Earliest,
    /// Start from the end: only records produced from now on (`latest`).
    #[default]
    Latest,
    /// Fail with an error naming the partitions (`none`).
    None,
}

impl OffsetReset {
    /// The property value: `earliest`, `latest` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            OffsetReset::Earliest => "earliest",
            OffsetReset::Latest => "latest",
            OffsetReset::None => "none",
        }
    }
}

impl fmt::Display for OffsetReset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The settings of the fetch layer (a subset of the consumer's). The
/// defaults are the Java consumer's.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FetchConfig {
    /// `fetch.min.bytes`: the broker answers once it has this many bytes
    /// (or `max_wait` passed). Default 1.
    pub min_bytes: i32,
    /// `fetch.max.bytes`: the most bytes one Fetch response should carry
    /// (the broker still returns a first batch larger than it, KIP-74).
    /// Default 52428800 (50 MiB).
    pub max_bytes: i32,
    /// `fetch.max.wait.ms`: how long the broker may hold a Fetch waiting
    /// for `min_bytes`. Default 500 ms.
    pub max_wait: Duration,
    /// `max.partition.fetch.bytes`: the most bytes per partition in a
    /// Fetch response (again, a first larger batch still comes). Default
    /// 1048576 (1 MiB).
    pub max_partition_bytes: i32,
    /// `isolation.level`. Default read_uncommitted.
    pub isolation: IsolationLevel,
    /// `check.crcs`: verify every batch's checksum. Default true.
    pub check_crcs: bool,
    /// `auto.offset.reset`. Default latest.
    pub auto_offset_reset: OffsetReset,
    /// `client.rack`, sent with Fetch v11+ (KIP-392): a leader that knows a
    /// replica in this rack may name it as the preferred read replica, and
    /// the partition is then fetched from there. Default none.
    pub rack_id: Option<String>,
    /// `metadata.max.age.ms`: how long a preferred read replica is fetched
    /// from before the partition's leader is asked again (the Java
    /// consumer's `preferredReadReplicaExpireTimeMs`, KIP-392). Default
    /// 300 s.
    pub replica_lease: Duration,
    /// The most bytes one compressed batch may decompress to (see
    /// [`DecodeOptions::with_max_decompressed_bytes`]). Default 64 MiB.
    pub max_decompressed_bytes: usize,
    /// `retry.backoff.ms` growing to `retry.backoff.max.ms`: how long a
    /// partition waits before it is fetched or reset again after an error.
    /// Default 100 ms to 1 s, ±20% jitter.
    pub retry_backoff: ExponentialBackoff,
    /// `request.timeout.ms`, sent as ListOffsets' `timeout_ms` (v10+,
    /// KIP-1075). Default 30 s.
    pub request_timeout: Duration,
    /// Seeds the jitter of `retry_backoff` (the consumer passes a random
    /// value; tests a constant).
    pub seed: u64,
    /// `fetch.sessions.enable`: incremental fetch sessions (KIP-227), one
    /// per leader connection. Default true.
    pub sessions: bool,
    /// `enable.partition.eof`: report [`FetchError::PartitionEof`] once
    /// each time a partition's position reaches the end of its log.
    /// Default false.
    pub partition_eof: bool,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            min_bytes: 1,
            max_bytes: 52_428_800,
            max_wait: Duration::from_millis(500),
            max_partition_bytes: 1_048_576,
            isolation: IsolationLevel::ReadUncommitted,
            check_crcs: true,
            auto_offset_reset: OffsetReset::Latest,
            rack_id: None,
            replica_lease: Duration::from_millis(300_000),
            max_decompressed_bytes: records::DEFAULT_MAX_DECOMPRESSED_BYTES,
            retry_backoff: ExponentialBackoff {
                base: Duration::from_millis(100),
                max: Duration::from_millis(1000),
                jitter: 0.2,
            },
            request_timeout: Duration::from_millis(30_000),
            seed: 0,
            sessions: true,
            partition_eof: false,
        }
    }
}

/// A record with the topic and partition it came from.
///
/// Key, value and headers are zero-copy slices of the fetched response or
/// of the batch's decompressed records (see [`OwnedRecord`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    topic: Arc<str>,
    partition: i32,
    record: OwnedRecord,
}

impl ConsumerRecord {
    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition index.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The record's offset in its partition.
    pub fn offset(&self) -> i64 {
        self.record.offset()
    }

    /// The record's timestamp and who set it.
    pub fn timestamp(&self) -> Timestamp {
        self.record.as_record().timestamp()
    }

    /// The key, `None` when null.
    pub fn key(&self) -> Option<&[u8]> {
        self.record.as_record().key()
    }

    /// The value, `None` when null.
    pub fn value(&self) -> Option<&[u8]> {
        self.record.as_record().value()
    }

    /// The key as a [`Bytes`] slice of the fetched buffer (no copy).
    pub fn key_bytes(&self) -> Option<Bytes> {
        self.record.as_record().key_bytes()
    }

    /// The value as a [`Bytes`] slice of the fetched buffer (no copy).
    pub fn value_bytes(&self) -> Option<Bytes> {
        self.record.as_record().value_bytes()
    }

    /// The headers.
    pub fn headers(&self) -> records::Headers<'_> {
        self.record.as_record().headers()
    }

    /// The leader epoch the record was written in, when known.
    pub fn leader_epoch(&self) -> Option<i32> {
        self.record.as_record().leader_epoch()
    }

    /// The record without its topic and partition.
    pub fn record(&self) -> Record<'_> {
        self.record.as_record()
    }

    /// Takes the record out.
    pub fn into_record(self) -> OwnedRecord {
        self.record
    }
}

/// Identifies a request planned by [`Fetcher::poll_requests`]; give it
/// back with the request's response or failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FetchToken(u64);

/// What the consumer should do after [`Fetcher::handle_response`] or
/// [`Fetcher::handle_failure`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FetchOutcome {
    /// A leader is stale, unknown or unreachable: refresh metadata, then
    /// plan again (the partitions concerned back off meanwhile).
    pub refresh_metadata: bool,
    /// Records buffered by this response, ready for
    /// [`Fetcher::take_records`] (unless their partition is paused).
    pub records_buffered: usize,
    /// Errors queued for [`Fetcher::take_errors`] by this call.
    pub errors: usize,
}

/// Counters of one assigned partition, kept while it stays assigned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionCounters {
    /// Records decoded from Fetch answers at or after the position.
    pub records_fetched: u64,
    /// Bytes of record sets in Fetch answers (as sent: compressed).
    pub bytes_fetched: u64,
    /// Records handed to the application by `take_records` (`poll`).
    pub records_consumed: u64,
}

/// A partition as [`Fetcher::partition_stats`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionStats {
    /// The partition.
    pub partition: TopicPartition,
    /// The next offset the application gets, when known.
    pub position: Option<i64>,
    /// The high watermark of the last good Fetch answer.
    pub high_watermark: Option<i64>,
    /// The last stable offset of the last good Fetch answer.
    pub last_stable_offset: Option<i64>,
    /// Whether the application paused it.
    pub paused: bool,
    /// Its counters.
    pub counters: PartitionCounters,
}

/// A position: the next offset to return, and the leader epoch of the
/// record before it (for OffsetCommit's `committed_leader_epoch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position {
    offset: i64,
    leader_epoch: Option<i32>,
}

/// Where a partition's position stands.
///
/// ```text
///  assign ──> Initializing ──set_committed(Some)──────────────> Valid <──── seek
///                 │                                              │  ^
///                 ├─set_committed(None), policy earliest|latest─>│  │ ListOffsets answered
///                 │          Resetting <──── seek_to_*, OFFSET_OUT_OF_RANGE (policy)
///                 └─set_committed(None), policy none─> NoOffset  │
///                                                                └─> Halted (corrupt batch,
///                                                    batch too large, out of range with none)
///
///  Valid ──a leader epoch not fetched under yet──> Validating ──OffsetForLeaderEpoch──> Valid
///    (only a position that carries an epoch)           │  end offset below the position:
///                                                      ├─ policy earliest|latest ─> Valid at the end offset
///                                                      └─ policy none ─> Halted (LogTruncation)
///  NoOffset and Halted wait for a seek.
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PosState {
    /// Just assigned: the committed offset is wanted.
    Initializing,
    /// Waiting for ListOffsets. `auto` when `auto.offset.reset` caused it
    /// (logged at info), not the application.
    Resetting {
        spec: OffsetSpec,
        auto: bool,
        in_flight: bool,
    },
    /// No committed offset and `auto.offset.reset` none.
    NoOffset { reported: bool },
    /// Fetching from here.
    Valid(Position),
    /// Held back from fetching until the leader says where the position's
    /// epoch ends (OffsetForLeaderEpoch, KIP-320): the log may have been
    /// truncated below it by a leader change.
    Validating { pos: Position, in_flight: bool },
    /// Stopped at a fault that retrying cannot fix.
    Halted(Position),
}

/// Records fetched and not yet returned, all at or after the position.
#[derive(Debug)]
struct Buffer {
    /// Which buffer this is (unique in its fetcher): a decoded chunk is
    /// put back only into the buffer it was taken from.
    id: u64,
    /// Its next chunk is being decoded by a [`DecodeJob`]: it is skipped
    /// until the chunk is put back ([`Fetcher::put_decoded`]).
    decoding: bool,
    records: std::vec::IntoIter<OwnedRecord>,
    /// Where the position goes once every record is taken: past the last
    /// complete batch, which may lie beyond the last record.
    next_offset: i64,
    /// Surfaced (and the partition halted) once the records are taken.
    error: Option<FetchError>,
    /// The rest of the record set, decoded when `records` runs out (see
    /// [`decode_some`]).
    undecoded: Bytes,
    /// The fetch offset it was fetched from.
    from: i64,
    /// Where its complete batches end, read off their headers when it came
    /// (see [`batches_end`]): where a Fetch ahead of it starts.
    end: Option<BatchesEnd>,
    /// Whether a Fetch ahead of it was sent: one per buffer, whatever came
    /// of it.
    ahead_sent: bool,
    /// Whether the CRCs of its undecoded whole batches were checked (see
    /// [`crcs_hold`] and [`Fetcher::check_pending_crcs`]): its batches are
    /// then parsed without checking them again. Until then they are parsed
    /// with their CRCs checked.
    crcs_checked: bool,
}

/// The offset after the last complete batch of a record set, and that
/// batch's partition leader epoch (-1 when it has none: magic 0 and 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchesEnd {
    next_offset: i64,
    leader_epoch: i32,
}

/// The decoder as configured, and one that leaves CRCs alone for sets
/// whose CRCs were checked already ([`Buffer::crcs_checked`]).
#[derive(Debug)]
struct Decoders {
    checking: RecordSetDecoder,
    parsing: RecordSetDecoder,
}

impl Decoders {
    fn get(&self, crcs_checked: bool) -> &RecordSetDecoder {
        if crcs_checked {
            &self.parsing
        } else {
            &self.checking
        }
    }
}

/// Where the complete batches of `set` end, read off their headers alone
/// (nothing is decoded or checked: the decoder judges the batches when
/// their records are wanted). `None` when no batch is complete.
///
/// A v2 batch ends at `base_offset + last_offset_delta`; a magic 0 or 1
/// message (a compressed one is a wrapper) at its own offset.
fn batches_end(set: &[u8]) -> Option<BatchesEnd> {
    let mut end = None;
    for (base, entry) in whole_entries(set) {
        let body = &set[entry.start + 12..entry.end];
        let (last, leader_epoch) = match body.get(4) {
            // v2: partition_leader_epoch(4) magic(1) crc(4) attributes(2)
            // last_offset_delta(4).
            Some(2) => {
                let Some(fields) = body.get(..15) else { break };
                let epoch = i32::from_be_bytes(fields[..4].try_into().expect("4 bytes"));
                let delta = i32::from_be_bytes(fields[11..15].try_into().expect("4 bytes"));
                (base.saturating_add(i64::from(delta)), epoch)
            }
            Some(0 | 1) => (base, -1),
            _ => break,
        };
        end = Some(BatchesEnd {
            next_offset: last.saturating_add(1),
            leader_epoch,
        });
    }
    end
}

/// The whole entries at the head of a record set (8-byte base offset,
/// 4-byte length, body), each as its base offset and its bytes' range in
/// `set`, until one is cut short or declares a negative length.
fn whole_entries(set: &[u8]) -> impl Iterator<Item = (i64, std::ops::Range<usize>)> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let head = set.get(at..at + 12)?;
        let base = i64::from_be_bytes(head[..8].try_into().expect("8 bytes"));
        let length = i32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
        let end = usize::try_from(length)
            .ok()
            .and_then(|l| (at + 12).checked_add(l))
            .filter(|&end| end <= set.len())?;
        let entry = at..end;
        at = end;
        Some((base, entry))
    })
}

/// How much of a record set is decoded at a time: whole batches of at least
/// this many bytes as fetched (compressed). A response holds up to
/// `max.partition.fetch.bytes` per partition, and a compressed megabyte
/// can hold tens of megabytes of records: decoding all of it when it
/// arrives held them all in memory at once and delayed the first record.
const DECODE_CHUNK: usize = 64 * 1024;

/// The next chunk of a partition's buffered record set, to decode outside
/// whatever guards the [`Fetcher`] ([`Fetcher::take_ready`] hands it out,
/// [`Fetcher::put_decoded`] takes the result back): decompressing and
/// parsing records is the costly part of taking them, and the fetcher's
/// owner need not wait for it.
#[derive(Debug)]
pub struct DecodeJob {
    tp: TopicPartition,
    buffer: u64,
    decoder: RecordSetDecoder,
    isolation: IsolationLevel,
    undecoded: Bytes,
    from: i64,
    floor: i64,
}

/// A decoded chunk, for [`Fetcher::put_decoded`].
#[derive(Debug)]
pub struct Decoded {
    tp: TopicPartition,
    buffer: u64,
    records: Vec<OwnedRecord>,
    next_offset: i64,
    error: Option<FetchError>,
    rest: Bytes,
}

impl DecodeJob {
    /// Decodes the records at or after the position the chunk was taken
    /// at (whole batches of at least 64 KiB as fetched, until one holds
    /// such a record or the set is used up).
    pub fn run(self) -> Decoded {
        let mut decoded = DecodedRecords::new();
        let mut rest = self.undecoded;
        let result = decode_some(
            &self.decoder,
            self.isolation,
            &[],
            &mut rest,
            self.from,
            &mut decoded,
        );
        let (records, next_offset, error) =
            records_from(&self.tp, &decoded, result, self.from, self.floor);
        Decoded {
            tp: self.tp,
            buffer: self.buffer,
            records,
            next_offset,
            error,
            rest,
        }
    }
}

/// The records of `decoded` at or after `from`, the offset after them (at
/// least `floor`, past any batch that held no record for us), and the
/// error of a decode that stopped there.
///
/// A batch may start before `from` (a compressed batch, a v0/v1 wrapper
/// message): its earlier records were delivered or skipped on purpose
/// already.
fn records_from(
    tp: &TopicPartition,
    decoded: &DecodedRecords,
    result: Result<(), RecordsError>,
    from: i64,
    floor: i64,
) -> (Vec<OwnedRecord>, i64, Option<FetchError>) {
    let records: Vec<OwnedRecord> = decoded
        .iter()
        .filter(|r| r.offset() >= from)
        .map(|r| r.to_owned_record())
        .collect();
    let end = records
        .last()
        .map(|r| r.offset().saturating_add(1))
        .into_iter()
        .chain(decoded.next_offset)
        .fold(floor, i64::max);
    let error = result.err().map(|source| {
        log::warn!("corrupt records in {tp} at offset {end}: {source}");
        FetchError::CorruptRecords {
            partition: tp.clone(),
            offset: end,
            source,
        }
    });
    (records, end, error)
}

/// How many records a record set of at least [`DECODE_CHUNK`] bytes holds
/// for a position at `from`, read off the headers of its whole v2 batches,
/// when its first batch is sure to hold some (a v2 data batch, not a
/// control one, that ends at or after `from`): such a set is parsed only
/// as its records are taken, by the application's `poll`, not when it
/// comes (its CRCs are checked by [`Fetcher::check_pending_crcs`], or as
/// it is parsed; a batch that turns out malformed stops the partition
/// there, after the records before it).
fn records_ahead_of_decoding(set: &[u8], from: i64) -> Option<usize> {
    if set.len() < DECODE_CHUNK {
        return None;
    }
    let mut count = None;
    for (base, entry) in whole_entries(set) {
        // partition_leader_epoch(4) magic(1) crc(4) attributes(2)
        // last_offset_delta(4) base_timestamp(8) max_timestamp(8)
        // producer_id(8) producer_epoch(2) base_sequence(4) records(4).
        let Some(body) = set
            .get(entry.start + 12..entry.start + 12 + 49)
            .filter(|body| body[4] == 2)
        else {
            break;
        };
        let control = body[10] & 0x20 != 0;
        let delta = i32::from_be_bytes(body[11..15].try_into().expect("4 bytes"));
        let records = i32::from_be_bytes(body[45..49].try_into().expect("4 bytes"));
        if count.is_none()
            && (control || base.saturating_add(i64::from(delta)) < from || records <= 0)
        {
            return None;
        }
        let count = count.get_or_insert(0);
        if !control {
            *count += usize::try_from(records).unwrap_or(0);
        }
    }
    count
}

/// Whether every whole entry of `set` is a v2 batch whose CRC-32C holds.
/// A large set is checked by [`Fetcher::check_pending_crcs`], on the
/// thread that read it, while its bytes are still in that core's cache;
/// checked later by `poll`, on another core, the same pass cost up to
/// twice as much.
fn crcs_hold(set: &[u8]) -> bool {
    whole_entries(set).all(|(_, entry)| records::v2_crc_holds(&set[entry]))
}

/// Splits the first whole batches (entries of the record set: 8-byte
/// offset, 4-byte length, body) of at least [`DECODE_CHUNK`] bytes off
/// `rest`; everything when it cannot tell (a short or odd tail goes with
/// the last chunk, for the decoder to judge).
fn split_chunk(rest: &mut Bytes) -> Bytes {
    let at = whole_entries(rest)
        .map(|(_, entry)| entry.end)
        .find(|&end| end >= DECODE_CHUNK);
    match at {
        Some(at) => rest.split_to(at),
        None => std::mem::take(rest),
    }
}

/// Decodes chunks of `rest` into `out` until one yields a record at or
/// after `from`, `rest` is used up, or a batch is faulty (then nothing more
/// is decoded: `rest` is emptied). With aborted transactions to filter the
/// whole set is decoded at once: the filter's state spans batches.
fn decode_some(
    decoder: &RecordSetDecoder,
    isolation: IsolationLevel,
    aborted: &[records::AbortedTransaction],
    rest: &mut Bytes,
    from: i64,
    out: &mut DecodedRecords,
) -> Result<(), RecordsError> {
    if !aborted.is_empty() {
        return decoder.decode_into(std::mem::take(rest), isolation, aborted, out);
    }
    while !rest.is_empty() {
        let chunk = split_chunk(rest);
        if let Err(e) = decoder.decode_into(chunk, isolation, aborted, out) {
            *rest = Bytes::new();
            return Err(e);
        }
        if out.iter().any(|r| r.offset() >= from) {
            break;
        }
    }
    Ok(())
}

/// How long a partition's fetches may keep failing with an error that a
/// metadata refresh should cure ([`ErrorClass::Leader`]:
/// NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR, ...) before it is
/// reported: a leader that moved is found within it.
pub(crate) const LEADER_ERRORS_REPORTED_AFTER: Duration = Duration::from_secs(1);

/// A partition's failures: its run under the retry policy, and the run of
/// one error code it is in (for reporting).
#[derive(Debug, Default, Clone, Copy)]
struct Retry {
    run: crate::cluster::Retry,
    /// The run of failures with one error code this partition is in.
    streak: Option<Streak>,
}

/// A run of failures with one error code (of one partition, or of a whole
/// Fetch response from one broker), and when it was last reported. A
/// failure with another code, or one after a gap longer than retries
/// leave, starts a new run: so a run that is reported once it lasted is
/// one failure after another, not two outages far apart.
#[derive(Debug, Clone, Copy)]
struct Streak {
    code: ErrorCode,
    since: Instant,
    last: Instant,
    reported: Option<Instant>,
}

impl Streak {
    /// Notes a failure with `code` at `now` in `slot` and returns the run
    /// it belongs to. `max_gap`: the longest wait between two failures of
    /// one run (twice the longest retry backoff).
    fn note(
        slot: &mut Option<Streak>,
        code: ErrorCode,
        now: Instant,
        max_gap: Duration,
    ) -> &mut Streak {
        let goes_on = slot
            .as_ref()
            .is_some_and(|s| s.code == code && now.saturating_duration_since(s.last) <= max_gap);
        if !goes_on {
            *slot = Some(Streak {
                code,
                since: now,
                last: now,
                reported: None,
            });
        }
        let streak = slot.as_mut().expect("set above");
        streak.last = now;
        streak
    }

    /// Whether to report it at `now`: it has lasted `grace`, and was not
    /// reported within [`REPORT_AGAIN_AFTER`]. So a lasting failure is said
    /// once, not at every retry.
    fn due(&self, now: Instant, grace: Duration) -> bool {
        self.lasted(now) >= grace
            && self
                .reported
                .is_none_or(|t| now.saturating_duration_since(t) >= REPORT_AGAIN_AFTER)
    }

    fn lasted(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.since)
    }
}

/// How long failures of `class` must last before they are reported.
fn report_grace(class: ErrorClass) -> Duration {
    match class {
        ErrorClass::Leader => LEADER_ERRORS_REPORTED_AFTER,
        ErrorClass::Authorization | ErrorClass::Other => Duration::ZERO,
    }
}

#[derive(Debug)]
struct PartitionState {
    topic: Arc<str>,
    /// Changes whenever the position is set from outside the fetch flow
    /// (assign, seek, reset): answers to requests sent before are stale.
    generation: u64,
    /// Fetch order: lower first. A partition moves to the end when records
    /// of it are taken, so one busy partition cannot starve the others
    /// under `max_bytes`.
    rank: i64,
    paused: bool,
    pos: PosState,
    buffer: Option<Box<Buffer>>,
    /// The answer to a Fetch ahead of `buffer`: taken from once `buffer`
    /// is used up, if it starts where `buffer` ends.
    ahead: Option<Box<Buffer>>,
    /// The target whose Fetches carry this partition (see [`Parked`]): it
    /// is in flight whenever that target has a Fetch out.
    member: Option<Target>,
    retry: Retry,
    /// A larger `partition_max_bytes` after a batch did not fit.
    size_override: Option<i32>,
    /// The high watermark of the last good answer for this partition.
    high_watermark: Option<i64>,
    /// The last stable offset of the last good answer (Fetch v4+).
    last_stable_offset: Option<i64>,
    /// The position at which the end of the log was last reported
    /// (`enable.partition.eof`): said again only at another position.
    eof_at: Option<i64>,
    /// Counters for [`Fetcher::partition_stats`].
    stats: PartitionCounters,
    /// The leader epoch (from the metadata) the position is known to agree
    /// with: it was fetched, reset or validated under it. When the
    /// metadata shows another, the log may have been truncated by the
    /// leader change, and a position that carries an epoch is validated
    /// before it is fetched from again (KIP-320).
    checked_epoch: Option<i32>,
    /// The metadata generation and `checked_epoch` at which the leader
    /// epoch was last found to agree: while both are the same, it still
    /// does (no lookup on every pass).
    epoch_agreed: Option<(u64, Option<i32>)>,
    /// The preferred read replica the leader named (KIP-392), fetched from
    /// instead of the leader until its lease ends or it fails.
    replica: Option<ReadReplica>,
}

/// A follower a partition's leader named as the preferred read replica
/// (KIP-392), and until when it is followed (the Java consumer's
/// `SubscriptionState.preferredReadReplica` and
/// `preferredReadReplicaExpireTimeMs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReadReplica {
    broker: i32,
    until: Instant,
}

impl PartitionState {
    /// Whether its retry wait ended by `now` (and is still to be cleared).
    fn retry_due(&self, now: Instant) -> bool {
        self.retry.run.not_before().is_some_and(|t| t <= now)
    }

    /// Whether [`Fetcher::check_leader_epochs`] looks at its leader epoch
    /// under metadata `generation`: a valid position that is not paused,
    /// has nothing buffered and no Fetch out, and whose epoch was not
    /// found to agree under this generation and checked epoch.
    fn wants_epoch_check(&self, generation: Option<u64>) -> bool {
        matches!(self.pos, PosState::Valid(_))
            && !self.paused
            && self.buffer.is_none()
            && self.member.is_none()
            && generation.is_none_or(|g| self.epoch_agreed != Some((g, self.checked_epoch)))
    }

    fn backing_off(&self, now: Instant) -> bool {
        !self.retry.run.ready(now)
    }

    /// Whether the position has reached the last high watermark heard of
    /// (a Fetch for it would long-poll).
    fn caught_up(&self) -> bool {
        matches!((self.pos, self.high_watermark), (PosState::Valid(pos), Some(hw)) if pos.offset >= hw)
    }

    /// Where a Fetch for this partition would start, if it is to be
    /// fetched now: at the position when nothing is buffered, or ahead of
    /// the buffered records (once per buffer) when the last answer showed
    /// more after them.
    fn fetch_from(&self, now: Instant) -> Option<Position> {
        let PosState::Valid(pos) = self.pos else {
            return None;
        };
        if self.paused || self.member.is_some() || self.backing_off(now) {
            return None;
        }
        let Some(buffer) = &self.buffer else {
            return Some(pos);
        };
        let end = buffer.end?;
        let more = self.high_watermark.is_some_and(|hw| end.next_offset < hw);
        (self.ahead.is_none()
            && !buffer.ahead_sent
            && buffer.error.is_none()
            && end.next_offset > pos.offset
            && more)
            .then(|| Position {
                offset: end.next_offset,
                leader_epoch: (end.leader_epoch >= 0)
                    .then_some(end.leader_epoch)
                    .or(pos.leader_epoch),
            })
    }

    /// Drops every record fetched for this partition and not returned.
    fn drop_buffered(&mut self) {
        self.buffer = None;
        self.ahead = None;
    }

    /// Whether it is still fetched as `member` of `target` says, after an
    /// answer: nothing buffered, no error or wait, the same position,
    /// generation, size and read replica.
    fn parked_as(&self, now: Instant, target: Target, member: &Member, max_bytes: i32) -> bool {
        let same_replica = match (target, self.replica) {
            (Target::Broker(_), None) => true,
            (Target::Replica(r), Some(replica)) => replica.broker == r,
            _ => false,
        };
        self.member == Some(target)
            && same_replica
            && !self.paused
            && self.buffer.is_none()
            && !self.backing_off(now)
            && self.generation == member.generation
            && self.size_override.unwrap_or(max_bytes) == member.entry.max_bytes
            && matches!(self.pos, PosState::Valid(p)
                if p.offset == member.entry.fetch_offset
                    && p.leader_epoch.unwrap_or(-1) == member.entry.last_fetched_epoch)
    }

    /// Whether a pass of [`Fetcher::poll_requests`] must look at it again
    /// (it stays among the [`Fetcher`]'s `dirty` partitions): it waits
    /// for its target's Fetch to be answered, for a retry wait or a free
    /// target, or for a reset or validation to be asked. One that waits
    /// for the application (paused, records buffered, stopped by a fault)
    /// or for an answer is marked again by what changes it.
    fn needs_look(&self, now: Instant) -> bool {
        if self.member.is_some() {
            return true;
        }
        match self.pos {
            // A reset is asked for even while paused.
            PosState::Resetting {
                in_flight: false, ..
            } => true,
            _ if self.paused => false,
            PosState::Valid(_) => {
                self.buffer.is_none() || self.backing_off(now) || self.fetch_from(now).is_some()
            }
            PosState::Validating {
                in_flight: false, ..
            } => true,
            _ => false,
        }
    }
}

/// A partition parked in a target's Fetches: its place in the turn
/// order, and what is sent for it.
#[derive(Debug, Clone, Copy)]
struct Member {
    rank: i64,
    /// The partition's generation when it joined (an answer read against
    /// another one is stale).
    generation: u64,
    /// What is sent for it (`leader_epoch`: `current_leader_epoch`, -1
    /// when unknown).
    entry: SessionEntry,
    /// Its position is below the last high watermark heard of.
    behind: bool,
}

/// The partitions one target (a leader or a read replica) is fetched
/// from. A partition joins when a pass finds it fetchable there, and stays
/// while nothing changes it: every Fetch to the target carries it, without
/// the partition being looked at again. It leaves when an answer carries
/// it, when something changes it (a seek, a pause, a new leader, records
/// taken...; it is then marked dirty), or when the Fetch fails. So the
/// work of one answer follows the partitions it carries and those that
/// changed, not the partitions assigned.
///
/// While the target has a Fetch out its members stay as they were sent:
/// the answer is read against them.
#[derive(Debug, Default)]
struct Parked {
    members: BTreeMap<TopicPartition, Member>,
    /// How many members are [`Member::behind`].
    behind: usize,
    /// Partitions that joined, left or changed since the last Fetch: with
    /// a fetch session, those an incremental Fetch lists or forgets.
    changed: BTreeSet<TopicPartition>,
}

impl Parked {
    fn join(&mut self, tp: &TopicPartition, member: Member) {
        self.behind += usize::from(member.behind);
        if let Some(old) = self.members.insert(tp.clone(), member) {
            self.behind -= usize::from(old.behind);
        }
        self.changed.insert(tp.clone());
    }

    /// A member an answer carried stays, `behind` its high watermark or
    /// not.
    fn still(&mut self, tp: &TopicPartition, behind: bool) {
        if let Some(m) = self.members.get_mut(tp) {
            self.behind = self.behind + usize::from(behind) - usize::from(m.behind);
            m.behind = behind;
        }
    }

    fn leave(&mut self, tp: &TopicPartition) -> Option<Member> {
        let member = self.members.remove(tp)?;
        self.behind -= usize::from(member.behind);
        self.changed.insert(tp.clone());
        Some(member)
    }
}

/// What [`Fetcher::scan`] found: which per-pass steps have work.
#[derive(Debug, Default, Clone, Copy)]
struct Scan {
    /// A partition's retry wait is over.
    retry_due: bool,
    /// A valid position's leader epoch may need a look.
    epoch_check: bool,
    /// A position waits for validation (KIP-320), none asked yet.
    validating: bool,
    /// A position waits for a reset, none asked yet.
    resetting: bool,
}

/// What a fetch session (KIP-227) holds for one partition: what was last
/// sent for it. A partition whose values changed is listed again in the
/// next incremental Fetch; one left unchanged is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SessionEntry {
    topic_id: [u8; 16],
    fetch_offset: i64,
    max_bytes: i32,
    leader_epoch: i32,
    last_fetched_epoch: i32,
}

/// A fetch session with one broker (KIP-227), as the Java client's
/// `FetchSessionHandler` keeps it.
#[derive(Debug)]
struct FetchSession {
    id: i32,
    /// The epoch of the next incremental request (1, 2, ... wrapping to
    /// 1).
    epoch: i32,
    /// The generation of the connection it was made on (see
    /// [`Fetcher::set_leader_generations`] and
    /// [`Fetcher::set_replica_generations`]): it ends with that
    /// connection.
    connection: u64,
    /// The partitions the broker holds in it.
    partitions: BTreeMap<TopicPartition, SessionEntry>,
}

/// The session side of a Fetch in flight.
#[derive(Debug)]
struct SessionSent {
    /// 0 for a full Fetch that asks for a new session (which then holds
    /// every member of the target, as sent).
    id: i32,
    connection: u64,
    /// An incremental Fetch's changes to the session: the partitions
    /// listed (with what was sent) and those forgotten (`None`).
    changes: Vec<(TopicPartition, Option<SessionEntry>)>,
}

/// A Fetch in flight. The partitions an answer may carry are the
/// members of its target's [`Parked`].
#[derive(Debug)]
struct FetchSent {
    /// Where it went: a leader (`Target::Broker`) or a read replica
    /// (`Target::Replica`).
    target: Target,
    /// With sessions: which session the request belongs to.
    session: Option<SessionSent>,
}

#[derive(Debug)]
enum InFlight {
    Fetch(FetchSent),
    ListOffsets {
        broker: i32,
        /// Partition -> (generation, `current_leader_epoch`) when sent.
        partitions: BTreeMap<TopicPartition, (u64, i32)>,
    },
    /// OffsetForLeaderEpoch for positions being validated (KIP-320).
    Validate {
        broker: i32,
        /// Partition -> (generation, `current_leader_epoch`) when sent.
        partitions: BTreeMap<TopicPartition, (u64, i32)>,
    },
}

/// The largest `partition_max_bytes` this layer raises a partition's
/// limit to when a batch did not fit: below the default frame limit, so
/// the response can still be received.
const MAX_PARTITION_OVERRIDE: usize = DEFAULT_MAX_FRAME_SIZE / 2;

/// The fetch layer. See the [module documentation](self).
///
/// One round, with the response built by hand where a broker would send
/// it:
///
/// ```
/// use lazykafka::cluster::{Metadata, PartitionInfo, Response, Target, TopicInfo};
/// use lazykafka::fetch::{FetchConfig, Fetcher, TopicPartition};
/// use lazykafka::protocol::messages::fetch::{
///     FetchResponse, FetchableTopicResponse, PartitionData,
/// };
/// use lazykafka::protocol::{ApiKey, Message, Writer};
/// use lazykafka::records::RecordBatchBuilder;
/// use lazykafka::ErrorCode;
/// use std::time::Instant;
///
/// let orders = TopicPartition::new("orders", 0);
/// let mut fetcher = Fetcher::new(FetchConfig::default());
/// fetcher.assign([orders.clone()]);
/// assert_eq!(fetcher.needs_committed(), [orders.clone()]);
/// fetcher.set_committed(&orders, Some((42, None))); // from OffsetFetch
///
/// // The metadata says broker 1 leads orders-0.
/// let mut metadata = Metadata::default();
/// let leader = PartitionInfo { leader: 1, leader_epoch: 0, error: ErrorCode::None };
/// metadata.topics.insert(
///     "orders".into(),
///     TopicInfo {
///         error: ErrorCode::None,
///         topic_id: [7; 16],
///         is_internal: false,
///         partitions: [(0, leader)].into(),
///     },
/// );
///
/// let now = Instant::now();
/// let (target, _body, token) = fetcher.poll_requests(now, &metadata).pop().unwrap();
/// assert_eq!(target, Target::Broker(1));
/// // The consumer sends `_body` there (the leader's connection); the answer:
/// let mut batch = RecordBatchBuilder::new(42);
/// batch.append(1_700_000_000_000, None, Some(b"hello"), &[])?;
/// let answer = FetchResponse {
///     responses: vec![FetchableTopicResponse {
///         topic: "orders".into(),
///         partitions: vec![PartitionData {
///             partition_index: 0,
///             records: Some(batch.build()?),
///             ..PartitionData::default()
///         }],
///         ..FetchableTopicResponse::default()
///     }],
///     ..FetchResponse::default()
/// };
/// let mut w = Writer::new();
/// answer.encode(&mut w, 12)?;
/// let response = Response {
///     api: ApiKey::Fetch,
///     version: 12,
///     broker: Some(1),
///     body: w.into_inner().freeze(),
/// };
///
/// let outcome = fetcher.handle_response(now, token, &response);
/// assert_eq!(outcome.records_buffered, 1);
/// assert_eq!(fetcher.position(&orders), Some(42)); // not taken yet
/// let records = fetcher.take_records(500);
/// assert_eq!(records[0].value().map(|v| &v[..]), Some(&b"hello"[..]));
/// assert_eq!(fetcher.position(&orders), Some(43));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Fetcher {
    config: FetchConfig,
    decoders: Decoders,
    rng: Rng,
    partitions: BTreeMap<TopicPartition, PartitionState>,
    /// Bumped by every [`Fetcher::assign`].
    assignment_generation: u64,
    /// Whether partitions may wait for their committed offsets (set by
    /// [`Fetcher::assign`], cleared once none does).
    maybe_initializing: bool,
    /// The generation of the metadata passed to
    /// [`Fetcher::poll_requests`], when the caller keeps one
    /// ([`Fetcher::set_metadata_generation`]); without it, every pass
    /// looks every leader epoch up.
    metadata_generation: Option<u64>,
    /// Partitions with buffered records, in the order `take_records`
    /// serves them.
    ready: VecDeque<TopicPartition>,
    in_flight: BTreeMap<FetchToken, InFlight>,
    /// Brokers that asked us to wait (throttle_time_ms, KIP-219).
    throttled: BTreeMap<i32, Instant>,
    /// Per connection target, the run of whole-response Fetch errors it is
    /// in; gone once it answers without one.
    top_errors: BTreeMap<Target, Option<Streak>>,
    errors: Vec<FetchError>,
    /// Fetch sessions (KIP-227), one per connection: by leader
    /// (`Target::Broker`) and by read replica (`Target::Replica`).
    sessions: BTreeMap<Target, FetchSession>,
    /// The connection generation of each leader and read replica, from
    /// [`Fetcher::set_leader_generations`] and
    /// [`Fetcher::set_replica_generations`].
    connections: BTreeMap<Target, u64>,
    /// A read replica was dropped for not being in the metadata: the
    /// consumer should refresh it ([`Fetcher::take_metadata_wanted`]).
    metadata_wanted: bool,
    next_token: u64,
    next_generation: u64,
    next_rank: i64,
    /// How many buffers [`Fetcher::take_records`] has emptied: each one
    /// makes its partition fetchable again.
    drained: u64,
    front_rank: i64,
    /// Partitions whose buffered (or fetched ahead) record sets wait for
    /// [`Fetcher::check_pending_crcs`] (a set: bounded by the partitions,
    /// whether or not a driver calls it).
    crcs_pending: BTreeSet<TopicPartition>,
    /// The id of the last buffer made ([`Buffer::id`]).
    next_buffer: u64,
    /// Per fetch target, the partitions its Fetches carry.
    parked: BTreeMap<Target, Parked>,
    /// Partitions a pass of [`Fetcher::poll_requests`] looks at: those
    /// changed since, and those still waiting to join a target (see
    /// [`PartitionState::needs_look`]). A pass looks at nothing else.
    dirty: BTreeSet<TopicPartition>,
    /// The names of the topic ids sent (v13+ answers name topics by id).
    topic_names: BTreeMap<[u8; 16], String>,
    /// A partition moved to [`PosState::NoOffset`] not yet reported.
    no_offset_unreported: bool,
    /// A partition may have a read replica (KIP-392): the pass looks at
    /// their leases.
    replicas: bool,
}

impl Fetcher {
    /// A fetcher with no partition.
    pub fn new(config: FetchConfig) -> Self {
        let options =
            DecodeOptions::new().with_max_decompressed_bytes(config.max_decompressed_bytes);
        let decoders = Decoders {
            checking: RecordSetDecoder::new(options.with_check_crcs(config.check_crcs)),
            parsing: RecordSetDecoder::new(options.with_check_crcs(false)),
        };
        Fetcher {
            rng: Rng::new(config.seed),
            config,
            decoders,
            partitions: BTreeMap::new(),
            ready: VecDeque::new(),
            assignment_generation: 0,
            maybe_initializing: false,
            metadata_generation: None,
            in_flight: BTreeMap::new(),
            throttled: BTreeMap::new(),
            top_errors: BTreeMap::new(),
            errors: Vec::new(),
            sessions: BTreeMap::new(),
            connections: BTreeMap::new(),
            metadata_wanted: false,
            next_token: 1,
            next_generation: 1,
            next_rank: 0,
            drained: 0,
            crcs_pending: BTreeSet::new(),
            front_rank: 0,
            next_buffer: 0,
            parked: BTreeMap::new(),
            dirty: BTreeSet::new(),
            topic_names: BTreeMap::new(),
            no_offset_unreported: false,
            replicas: false,
        }
    }

    /// Its settings.
    pub fn config(&self) -> &FetchConfig {
        &self.config
    }

    // ===== assignment and positions =====

    /// Replaces the assignment. Partitions kept keep their position, pause
    /// state and buffered records; partitions removed lose all of it, and
    /// answers to requests already sent for them are ignored. New
    /// partitions start without a position (see
    /// [`Fetcher::needs_committed`]).
    pub fn assign(&mut self, partitions: impl IntoIterator<Item = TopicPartition>) {
        self.assignment_generation += 1;
        let wanted: BTreeSet<TopicPartition> = partitions.into_iter().collect();
        let dirty = &mut self.dirty;
        self.partitions.retain(|tp, st| {
            let kept = wanted.contains(tp);
            if !kept && st.member.is_some() {
                // Leaves its target at the next pass.
                dirty.insert(tp.clone());
            }
            kept
        });
        self.ready.retain(|tp| wanted.contains(tp));
        let topics: BTreeSet<&str> = wanted.iter().map(|tp| tp.topic.as_str()).collect();
        self.topic_names
            .retain(|_, name| topics.contains(name.as_str()));
        for tp in wanted {
            if self.partitions.contains_key(&tp) {
                continue;
            }
            self.dirty.insert(tp.clone());
            let generation = self.generation();
            let rank = self.back_rank();
            self.maybe_initializing = true;
            // Assigned again while its earlier self is still parked (a
            // revoke and an assign between two passes, or while that
            // target's Fetch is out): it takes that membership over, to
            // leave it at the next pass that finds the target free.
            let member = self
                .parked
                .iter()
                .find(|(_, p)| p.members.contains_key(&tp))
                .map(|(target, _)| *target);
            self.partitions.insert(
                tp.clone(),
                PartitionState {
                    topic: Arc::from(tp.topic.as_str()),
                    generation,
                    rank,
                    paused: false,
                    pos: PosState::Initializing,
                    buffer: None,
                    ahead: None,
                    member,
                    retry: Retry::default(),
                    size_override: None,
                    high_watermark: None,
                    last_stable_offset: None,
                    eof_at: None,
                    stats: PartitionCounters::default(),
                    checked_epoch: None,
                    epoch_agreed: None,
                    replica: None,
                },
            );
        }
    }

    /// The assigned partitions.
    pub fn assignment(&self) -> BTreeSet<TopicPartition> {
        self.partitions.keys().cloned().collect()
    }

    /// Whether `tp` is assigned (without copying the assignment).
    pub fn is_assigned(&self, tp: &TopicPartition) -> bool {
        self.partitions.contains_key(tp)
    }

    /// Assigned partitions that have no position and no reset pending: the
    /// consumer asks the group coordinator for their committed offsets and
    /// answers with [`Fetcher::set_committed`] (without a group, it
    /// answers `None` for each, which applies `auto.offset.reset`).
    pub fn needs_committed(&mut self) -> Vec<TopicPartition> {
        if !self.maybe_initializing {
            return Vec::new();
        }
        let needed: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|(_, st)| st.pos == PosState::Initializing)
            .map(|(tp, _)| tp.clone())
            .collect();
        // Only `assign` makes partitions that wait for it.
        self.maybe_initializing = !needed.is_empty();
        needed
    }

    /// Says which generation of the metadata the next
    /// [`Fetcher::poll_requests`] gets (one that changes whenever the
    /// metadata does): leader epochs found to agree are not looked up
    /// again until it changes.
    pub fn set_metadata_generation(&mut self, generation: u64) {
        if self.metadata_generation != Some(generation) {
            // Leaders and epochs may have moved: every partition is looked
            // at again.
            self.dirty.extend(self.partitions.keys().cloned());
        }
        self.metadata_generation = Some(generation);
    }

    /// Gives a partition its committed offset (offset, leader epoch), or
    /// says it has none, in which case `auto.offset.reset` applies: a reset
    /// to the earliest or latest offset, or with `none` a
    /// [`FetchError::NoOffset`] that names every partition in that state.
    /// A negative offset counts as none.
    ///
    /// Applies only to a partition that still waits for it (assigned, with
    /// no position: no seek came first); returns whether it applied.
    pub fn set_committed(
        &mut self,
        tp: &TopicPartition,
        committed: Option<(i64, Option<i32>)>,
    ) -> bool {
        let policy = self.config.auto_offset_reset;
        let Some(st) = self.partitions.get_mut(tp) else {
            return false;
        };
        if st.pos != PosState::Initializing {
            return false;
        }
        self.dirty.insert(tp.clone());
        st.pos = match committed {
            Some((offset, leader_epoch)) if offset >= 0 => PosState::Valid(Position {
                offset,
                leader_epoch,
            }),
            _ => match policy {
                OffsetReset::Earliest | OffsetReset::Latest => {
                    log::debug!(
                        "{tp} has no committed offset; resetting to the {} offset",
                        reset_name(policy)
                    );
                    PosState::Resetting {
                        spec: reset_spec(policy),
                        auto: true,
                        in_flight: false,
                    }
                }
                OffsetReset::None => {
                    self.no_offset_unreported = true;
                    PosState::NoOffset { reported: false }
                }
            },
        };
        true
    }

    /// Sets a partition's position to a known offset: no request is
    /// needed. Records buffered for it are dropped, and answers to
    /// requests sent before are ignored. A partition stopped by a fault
    /// (see [`FetchError`]) goes on from here.
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<(), SeekError> {
        if offset < 0 {
            return Err(SeekError::NegativeOffset {
                partition: tp.clone(),
                offset,
            });
        }
        self.set_position(
            tp,
            PosState::Valid(Position {
                offset,
                leader_epoch: None,
            }),
        )?;
        // At the end the last answer gave: a Fetch answer may never say it
        // again (a fetch session leaves out partitions with nothing new).
        self.check_eof(tp);
        Ok(())
    }

    /// Moves partitions to their earliest offset (a ListOffsets request,
    /// planned by [`Fetcher::poll_requests`]). Refuses, changing nothing,
    /// when one is not assigned.
    pub fn seek_to_beginning<'a>(
        &mut self,
        tps: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> Result<(), SeekError> {
        self.seek_to(tps, OffsetSpec::Earliest)
    }

    /// Moves partitions to their end: the high watermark, or under
    /// read_committed the last stable offset (a ListOffsets request).
    /// Refuses, changing nothing, when one is not assigned.
    pub fn seek_to_end<'a>(
        &mut self,
        tps: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> Result<(), SeekError> {
        self.seek_to(tps, OffsetSpec::Latest)
    }

    fn seek_to<'a>(
        &mut self,
        tps: impl IntoIterator<Item = &'a TopicPartition>,
        spec: OffsetSpec,
    ) -> Result<(), SeekError> {
        let tps: Vec<&TopicPartition> = tps.into_iter().collect();
        if let Some(tp) = tps.iter().find(|tp| !self.partitions.contains_key(**tp)) {
            return Err(SeekError::NotAssigned((*tp).clone()));
        }
        for tp in tps {
            self.set_position(
                tp,
                PosState::Resetting {
                    spec,
                    auto: false,
                    in_flight: false,
                },
            )?;
        }
        Ok(())
    }

    fn set_position(&mut self, tp: &TopicPartition, pos: PosState) -> Result<(), SeekError> {
        let generation = self.generation();
        let st = self
            .partitions
            .get_mut(tp)
            .ok_or_else(|| SeekError::NotAssigned(tp.clone()))?;
        st.pos = pos;
        st.generation = generation;
        self.dirty.insert(tp.clone());
        st.size_override = None;
        st.eof_at = None;
        st.checked_epoch = None;
        let had = st.buffer.is_some();
        st.drop_buffered();
        if had {
            self.ready.retain(|t| t != tp);
        }
        Ok(())
    }

    /// The next offset the application gets from a partition, when known
    /// (also while it is being validated after a leader change).
    pub fn position(&self, tp: &TopicPartition) -> Option<i64> {
        self.partitions.get(tp).and_then(|st| match st.pos {
            PosState::Valid(p) | PosState::Halted(p) | PosState::Validating { pos: p, .. } => {
                Some(p.offset)
            }
            _ => None,
        })
    }

    /// What the fetcher knows of each assigned partition: position, the
    /// offsets of the last Fetch answer, and counters.
    pub fn partition_stats(&self) -> Vec<PartitionStats> {
        self.partitions
            .iter()
            .map(|(tp, st)| PartitionStats {
                partition: tp.clone(),
                position: self.position(tp),
                high_watermark: st.high_watermark,
                last_stable_offset: st.last_stable_offset,
                paused: st.paused,
                counters: st.stats,
            })
            .collect()
    }

    /// Every known position, with the leader epoch of the record before it
    /// when known: what the consumer commits.
    pub fn positions(&self) -> BTreeMap<TopicPartition, (i64, Option<i32>)> {
        self.partitions
            .iter()
            .filter_map(|(tp, st)| match st.pos {
                PosState::Valid(p) | PosState::Halted(p) | PosState::Validating { pos: p, .. } => {
                    Some((tp.clone(), (p.offset, p.leader_epoch)))
                }
                _ => None,
            })
            .collect()
    }

    /// Stops fetching and returning records of these partitions. Records
    /// already fetched are kept (not returned while paused), as the Java
    /// consumer does since KAFKA-7548. Partitions not assigned are skipped.
    pub fn pause<'a>(&mut self, tps: impl IntoIterator<Item = &'a TopicPartition>) {
        for tp in tps {
            if let Some(st) = self.partitions.get_mut(tp) {
                st.paused = true;
                self.dirty.insert(tp.clone());
            }
        }
    }

    /// Undoes [`Fetcher::pause`].
    pub fn resume<'a>(&mut self, tps: impl IntoIterator<Item = &'a TopicPartition>) {
        for tp in tps {
            if let Some(st) = self.partitions.get_mut(tp) {
                st.paused = false;
                self.dirty.insert(tp.clone());
            }
        }
    }

    /// The paused partitions.
    pub fn paused(&self) -> BTreeSet<TopicPartition> {
        self.partitions
            .iter()
            .filter(|(_, st)| st.paused)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    // ===== requests =====

    /// Tells the fetcher how many leader connections to each broker have
    /// closed ([`Cluster::leader_generations`](crate::cluster::Cluster::leader_generations)).
    /// A fetch session lives on one leader connection here: when that
    /// connection is gone (idle reaping, the peer, an error) the session
    /// ends, and the next Fetch to the broker is a full one that starts a
    /// new session. Call it before [`Fetcher::poll_requests`].
    pub fn set_leader_generations(&mut self, generations: &BTreeMap<i32, u64>) {
        self.set_generations(false, generations);
    }

    /// Like [`Fetcher::set_leader_generations`], for the replica
    /// connections ([`Cluster::replica_generations`](crate::cluster::Cluster::replica_generations)):
    /// a read replica's fetch session lives on its replica connection.
    pub fn set_replica_generations(&mut self, generations: &BTreeMap<i32, u64>) {
        self.set_generations(true, generations);
    }

    fn set_generations(&mut self, replica: bool, generations: &BTreeMap<i32, u64>) {
        let of_kind = |t: &Target| matches!(t, Target::Replica(_)) == replica;
        self.connections.retain(|t, _| !of_kind(t));
        for (&broker, &generation) in generations {
            let target = if replica {
                Target::Replica(broker)
            } else {
                Target::Broker(broker)
            };
            self.connections.insert(target, generation);
        }
        let connections = &self.connections;
        self.sessions.retain(|target, session| {
            if !of_kind(target) {
                return true;
            }
            let live = connections.get(target).copied().unwrap_or(0) == session.connection;
            if !live {
                log::debug!(
                    "fetch session {} with {} ended with its connection",
                    session.id,
                    describe(*target)
                );
            }
            live
        });
    }

    /// The fetch session with `broker` on its leader connection, when
    /// there is one: its id and the epoch of the next request (KIP-227).
    pub fn fetch_session(&self, broker: i32) -> Option<(i32, i32)> {
        self.sessions
            .get(&Target::Broker(broker))
            .map(|s| (s.id, s.epoch))
    }

    /// Like [`Fetcher::fetch_session`], for the session on the replica
    /// connection to `broker` (a preferred read replica, KIP-392).
    pub fn replica_fetch_session(&self, broker: i32) -> Option<(i32, i32)> {
        self.sessions
            .get(&Target::Replica(broker))
            .map(|s| (s.id, s.epoch))
    }

    /// The preferred read replica `tp` is fetched from (KIP-392), while
    /// its lease lasts; `None` when it is fetched from its leader.
    pub fn read_replica(&self, tp: &TopicPartition) -> Option<i32> {
        self.partitions
            .get(tp)
            .and_then(|st| st.replica)
            .map(|r| r.broker)
    }

    /// Whether a read replica named by a leader was dropped because the
    /// metadata does not know it (a broker added since, or gone): refresh
    /// the metadata. Reading clears it.
    pub fn take_metadata_wanted(&mut self) -> bool {
        std::mem::take(&mut self.metadata_wanted)
    }

    /// The requests to send now: OffsetForLeaderEpoch for positions to
    /// validate after a leader change and ListOffsets for partitions
    /// waiting for a reset (one of each per leader, to
    /// `Target::Broker(leader)`), and a Fetch for every leader
    /// (`Target::Broker`) or preferred read replica (`Target::Replica`,
    /// KIP-392) with fetchable partitions and no Fetch in flight. Send each
    /// to its target and give the token back with its outcome.
    ///
    /// Partitions whose leader is unknown are left out; see
    /// [`Fetcher::leader_unknown`].
    pub fn poll_requests(
        &mut self,
        now: Instant,
        metadata: &Metadata,
    ) -> Vec<(Target, Box<dyn RequestBody>, FetchToken)> {
        if self.metadata_generation.is_none() {
            // Without a metadata generation any leader may have moved
            // since the last pass.
            self.dirty.extend(self.partitions.keys().cloned());
        }
        if self.replicas {
            self.check_replicas(now, metadata);
        }
        let busy: BTreeSet<Target> = self
            .in_flight
            .values()
            .filter_map(|f| match f {
                InFlight::Fetch(f) => Some(f.target),
                InFlight::ListOffsets { .. } | InFlight::Validate { .. } => None,
            })
            .collect();
        self.release_dirty(&busy);
        // One look at the dirty partitions says which of the steps below
        // have anything to do; those that have not skip their walk (in a
        // steady state, all but the fetch planning).
        let scan = self.scan(now);
        if scan.retry_due {
            for tp in &self.dirty {
                if let Some(st) = self.partitions.get_mut(tp) {
                    if st.retry_due(now) {
                        st.retry.run.clear_wait();
                    }
                }
            }
        }
        self.throttled.retain(|_, until| *until > now);
        let mut validating = scan.validating;
        if scan.epoch_check {
            validating |= self.check_leader_epochs(metadata);
        }
        let mut out = Vec::new();
        if validating {
            self.plan_validations(now, metadata, &mut out);
        }
        if scan.resetting {
            self.plan_resets(now, metadata, &mut out);
        }
        self.plan_fetches(now, metadata, &busy, &mut out);
        let partitions = &self.partitions;
        self.dirty
            .retain(|tp| partitions.get(tp).is_none_or(|st| st.needs_look(now)));
        out
    }

    /// Takes the dirty partitions out of the targets they are parked in
    /// (unless that target's Fetch is still out: they wait for its
    /// answer), so that the steps of the pass look at them afresh; drops
    /// partitions no longer assigned from their targets.
    fn release_dirty(&mut self, busy: &BTreeSet<Target>) {
        let Fetcher {
            partitions,
            parked,
            dirty,
            ..
        } = self;
        dirty.retain(|tp| {
            let Some(st) = partitions.get_mut(tp) else {
                // Unassigned while parked: gone once its target is free.
                let mut waits = false;
                for (target, p) in parked.iter_mut() {
                    if p.members.contains_key(tp) {
                        if busy.contains(target) {
                            waits = true;
                        } else {
                            p.leave(tp);
                        }
                    }
                }
                return waits;
            };
            if let Some(target) = st.member {
                if !busy.contains(&target) {
                    if let Some(p) = parked.get_mut(&target) {
                        p.leave(tp);
                    }
                    st.member = None;
                }
            }
            true
        });
    }

    /// The dirty partitions that are assigned, with their state.
    fn dirty_states(&self) -> impl Iterator<Item = (&TopicPartition, &PartitionState)> {
        self.dirty
            .iter()
            .filter_map(|tp| Some(tp).zip(self.partitions.get(tp)))
    }

    /// Which steps of [`Fetcher::poll_requests`] have partitions to act
    /// on at `now`: each flag is set when at least one dirty partition
    /// meets the condition its step starts from (the others cannot: see
    /// [`PartitionState::needs_look`]).
    fn scan(&self, now: Instant) -> Scan {
        let generation = self.metadata_generation;
        let mut scan = Scan::default();
        for (_, st) in self.dirty_states() {
            scan.retry_due |= st.retry_due(now);
            scan.epoch_check |= st.wants_epoch_check(generation);
            match st.pos {
                PosState::Validating {
                    in_flight: false, ..
                } => scan.validating = true,
                PosState::Resetting {
                    in_flight: false, ..
                } => scan.resetting = true,
                _ => {}
            }
        }
        scan
    }

    /// Moves positions whose leader epoch changed since they were last
    /// fetched under to `Validating` (KIP-320). Only positions that carry
    /// the epoch of the record before them can be checked (as the Java
    /// consumer: a plain `seek` carries none); the others just take the new
    /// epoch. Partitions with records buffered or a Fetch out are looked at
    /// once those are done: their position is still moving.
    /// Returns whether a position moved to `Validating`.
    fn check_leader_epochs(&mut self, metadata: &Metadata) -> bool {
        let generation = self.metadata_generation;
        let mut moved = false;
        let Fetcher {
            partitions, dirty, ..
        } = self;
        for tp in dirty.iter() {
            let Some(st) = partitions.get_mut(tp) else {
                continue;
            };
            if !st.wants_epoch_check(generation) {
                continue;
            }
            let PosState::Valid(pos) = st.pos else {
                continue;
            };
            let current = offsets::leader_epoch(metadata, tp);
            if current < 0 || st.checked_epoch == Some(current) {
                st.epoch_agreed = generation.map(|g| (g, st.checked_epoch));
                continue;
            }
            match pos.leader_epoch {
                Some(epoch) => {
                    log::debug!(
                        "{tp}: leader epoch {current} is new to position {} (epoch {epoch}); validating it",
                        pos.offset
                    );
                    st.pos = PosState::Validating {
                        pos,
                        in_flight: false,
                    };
                    moved = true;
                }
                None => st.checked_epoch = Some(current),
            }
        }
        moved
    }

    /// Drops read replicas (KIP-392) that are no longer to be followed:
    /// the lease ended (the leader is asked again, and names a replica
    /// again if it still prefers one), the replica became the leader, or
    /// the metadata does not know the broker (the Java consumer's
    /// `AbstractFetch.selectReadReplica`: fetch from the leader and refresh
    /// the metadata; the partition also waits `retry.backoff.ms`, so that a
    /// leader that keeps naming an unknown broker is not asked in a tight
    /// loop).
    fn check_replicas(&mut self, now: Instant, metadata: &Metadata) {
        let Fetcher {
            partitions,
            config,
            rng,
            metadata_wanted,
            dirty,
            replicas,
            ..
        } = self;
        *replicas = false;
        for (tp, st) in partitions.iter_mut() {
            let Some(replica) = st.replica else {
                continue;
            };
            if now >= replica.until {
                log::debug!(
                    "{tp}: the lease of read replica {} ended; asking the leader again",
                    replica.broker
                );
            } else if metadata.leader(&tp.topic, tp.partition) == Some(replica.broker) {
            } else if !metadata.brokers.contains_key(&replica.broker) {
                log::debug!(
                    "{tp}: read replica {} is not in the metadata; fetching from the leader",
                    replica.broker
                );
                *metadata_wanted = true;
                backoff(st, now, &config.retry_backoff, rng);
            } else {
                *replicas = true;
                continue;
            }
            // Fetched from its leader from now on.
            st.replica = None;
            dirty.insert(tp.clone());
        }
    }

    /// One OffsetForLeaderEpoch (v2+: `current_leader_epoch` fences a stale
    /// leader) per leader for the positions to validate.
    fn plan_validations(
        &mut self,
        now: Instant,
        metadata: &Metadata,
        out: &mut Vec<(Target, Box<dyn RequestBody>, FetchToken)>,
    ) {
        let mut per_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        for (tp, st) in self.dirty_states() {
            if matches!(
                st.pos,
                PosState::Validating {
                    in_flight: false,
                    ..
                }
            ) && !st.paused
                && !st.backing_off(now)
            {
                if let Some(leader) = metadata.leader(&tp.topic, tp.partition) {
                    per_leader.entry(leader).or_default().push(tp.clone());
                }
            }
        }
        for (broker, list) in per_leader {
            let token = self.token();
            let mut topics: Vec<OffsetForLeaderTopic> = Vec::new();
            let mut sent = BTreeMap::new();
            for tp in list {
                let current = offsets::leader_epoch(metadata, &tp);
                let st = self.partitions.get_mut(&tp).expect("planned from the map");
                let PosState::Validating { pos, in_flight } = &mut st.pos else {
                    continue;
                };
                *in_flight = true;
                let partition = OffsetForLeaderPartition {
                    partition: tp.partition,
                    current_leader_epoch: current,
                    leader_epoch: pos.leader_epoch.unwrap_or(-1),
                    ..OffsetForLeaderPartition::default()
                };
                match topics.iter_mut().find(|t| t.topic == tp.topic) {
                    Some(t) => t.partitions.push(partition),
                    None => topics.push(OffsetForLeaderTopic {
                        topic: tp.topic.clone(),
                        partitions: vec![partition],
                        ..OffsetForLeaderTopic::default()
                    }),
                }
                sent.insert(tp, (st.generation, current));
            }
            let request = OffsetForLeaderEpochRequest {
                // A consumer (v3+): the answer stops at the high watermark.
                replica_id: -1,
                topics,
                ..OffsetForLeaderEpochRequest::default()
            };
            self.in_flight.insert(
                token,
                InFlight::Validate {
                    broker,
                    partitions: sent,
                },
            );
            out.push((Target::Broker(broker), Box::new(request), token));
        }
    }

    fn plan_resets(
        &mut self,
        now: Instant,
        metadata: &Metadata,
        out: &mut Vec<(Target, Box<dyn RequestBody>, FetchToken)>,
    ) {
        let mut per_leader: BTreeMap<i32, Vec<(TopicPartition, OffsetSpec)>> = BTreeMap::new();
        for (tp, st) in self.dirty_states() {
            if let PosState::Resetting {
                spec,
                in_flight: false,
                ..
            } = st.pos
            {
                if st.backing_off(now) {
                    continue;
                }
                if let Some(leader) = metadata.leader(&tp.topic, tp.partition) {
                    per_leader
                        .entry(leader)
                        .or_default()
                        .push((tp.clone(), spec));
                }
            }
        }
        for (broker, list) in per_leader {
            let plan = offsets::plan(
                list.iter().map(|(tp, spec)| (tp, *spec)),
                metadata,
                self.config.isolation,
                self.config.request_timeout,
            );
            let token = self.token();
            let mut sent = BTreeMap::new();
            for (tp, _) in list {
                let st = self.partitions.get_mut(&tp).expect("planned from the map");
                if let PosState::Resetting { in_flight, .. } = &mut st.pos {
                    *in_flight = true;
                }
                let epoch = offsets::leader_epoch(metadata, &tp);
                sent.insert(tp, (st.generation, epoch));
            }
            self.in_flight.insert(
                token,
                InFlight::ListOffsets {
                    broker,
                    partitions: sent,
                },
            );
            for (b, body) in plan.requests {
                debug_assert_eq!(b, broker);
                out.push((Target::Broker(b), body, token));
            }
        }
    }

    fn plan_fetches(
        &mut self,
        now: Instant,
        metadata: &Metadata,
        busy: &BTreeSet<Target>,
        out: &mut Vec<(Target, Box<dyn RequestBody>, FetchToken)>,
    ) {
        // Leaders of partitions whose buffered records the application is
        // still taking: they will want a Fetch soon. A partition that has
        // caught up with its high watermark waits for them rather than go
        // alone: the broker would hold that Fetch for up to `max_wait_ms`
        // with nothing to send, and the connection carries one request at
        // a time, so theirs would wait behind it (a stall of up to
        // fetch.max.wait.ms in the middle of a backlog). A target with
        // partitions that still have records to read is fetched at once:
        // the broker answers without waiting.
        // (Read replicas likewise: each is fetched from over its own
        // connection.)
        let draining: BTreeSet<Target> = self
            .ready
            .iter()
            .filter_map(|tp| {
                let st = self.partitions.get(tp)?;
                (st.buffer.is_some() && !st.paused)
                    .then(|| read_target(tp, st, metadata))
                    .flatten()
            })
            .collect();
        let Fetcher {
            partitions,
            throttled,
            config,
            next_token,
            parked,
            dirty,
            topic_names,
            sessions,
            connections,
            in_flight,
            ..
        } = self;
        // The dirty partitions fetchable now join their target.
        let mut joined = Vec::new();
        for tp in dirty.iter() {
            let Some(st) = partitions.get_mut(tp) else {
                continue;
            };
            let Some(from) = st.fetch_from(now) else {
                continue;
            };
            let Some(target) = read_target(tp, st, metadata) else {
                continue;
            };
            if busy.contains(&target) || throttled.contains_key(&broker_of(target)) {
                continue;
            }
            if draining.contains(&target) && st.buffer.is_none() && st.caught_up() {
                continue;
            }
            if let Some(buffer) = &mut st.buffer {
                buffer.ahead_sent = true;
            }
            let topic = metadata.topics.get(&tp.topic);
            let leader_epoch = topic
                .and_then(|t| t.partitions.get(&tp.partition))
                .map_or(-1, |p| p.leader_epoch);
            // The leader fences us if it is at another epoch, so what
            // comes back agrees with this one.
            if leader_epoch >= 0 {
                st.checked_epoch = Some(leader_epoch);
            }
            let topic_id = topic.map_or([0; 16], |t| t.topic_id);
            if topic_id != [0; 16] && !topic_names.contains_key(&topic_id) {
                topic_names.insert(topic_id, tp.topic.clone());
            }
            let member = Member {
                rank: st.rank,
                generation: st.generation,
                entry: SessionEntry {
                    topic_id,
                    fetch_offset: from.offset,
                    max_bytes: st.size_override.unwrap_or(config.max_partition_bytes),
                    leader_epoch,
                    // v12+: the leader checks it against its log and
                    // answers a `diverging_epoch` when the log was
                    // truncated below the position (KIP-320 as the Java
                    // consumer sends it).
                    last_fetched_epoch: from.leader_epoch.unwrap_or(-1),
                },
                behind: !st.caught_up(),
            };
            st.member = Some(target);
            parked.entry(target).or_default().join(tp, member);
            joined.push(tp.clone());
        }
        for tp in &joined {
            dirty.remove(tp);
        }
        // A Fetch to every free target with members.
        for (&target, p) in parked.iter_mut() {
            if p.members.is_empty()
                || busy.contains(&target)
                || throttled.contains_key(&broker_of(target))
                || (draining.contains(&target) && p.behind == 0)
            {
                continue;
            }
            let connection = connections.get(&target).copied().unwrap_or(0);
            let session = sessions
                .get(&target)
                .filter(|s| config.sessions && s.connection == connection);
            // KIP-227: a full Fetch lists every member; an incremental one
            // only those added or changed since the session last heard of
            // them, and forgets those that left (paused, buffered, backing
            // off, moved, unassigned: they come back as added). The broker
            // answers for every partition it holds.
            let (session_id, session_epoch) = match session {
                Some(s) => (s.id, s.epoch),
                None if config.sessions => (0, 0),
                None => (0, -1),
            };
            let changed = std::mem::take(&mut p.changed);
            let mut listed: Vec<(&TopicPartition, &Member)> = Vec::new();
            let mut forgotten_list: Vec<(TopicPartition, [u8; 16])> = Vec::new();
            let mut changes = Vec::new();
            match session {
                None => listed.extend(p.members.iter()),
                Some(s) => {
                    for tp in changed {
                        match (p.members.get_key_value(&tp), s.partitions.get(&tp)) {
                            (Some((_, m)), Some(held)) if *held == m.entry => {}
                            (Some((key, m)), _) => {
                                listed.push((key, m));
                                changes.push((tp, Some(m.entry)));
                            }
                            (None, Some(held)) => {
                                forgotten_list.push((tp.clone(), held.topic_id));
                                changes.push((tp, None));
                            }
                            (None, None) => {}
                        }
                    }
                }
            }
            // Requested in the order the partitions take turns in.
            listed.sort_by(|a, b| (a.1.rank, a.0).cmp(&(b.1.rank, b.0)));
            let mut topics: Vec<FetchTopic> = Vec::new();
            for (tp, m) in listed {
                // Partitions are grouped by topic in the order of each
                // topic's first partition (v3+ brokers fill the response
                // in request order).
                let partition = FetchPartition {
                    partition: tp.partition,
                    current_leader_epoch: m.entry.leader_epoch,
                    fetch_offset: m.entry.fetch_offset,
                    last_fetched_epoch: m.entry.last_fetched_epoch,
                    partition_max_bytes: m.entry.max_bytes,
                    ..FetchPartition::default()
                };
                match topics.iter_mut().find(|t| t.topic == tp.topic) {
                    Some(t) => t.partitions.push(partition),
                    None => topics.push(FetchTopic {
                        topic: tp.topic.clone(),
                        topic_id: m.entry.topic_id,
                        partitions: vec![partition],
                        ..FetchTopic::default()
                    }),
                }
            }
            let mut forgotten: Vec<ForgottenTopic> = Vec::new();
            for (tp, topic_id) in forgotten_list {
                match forgotten.iter_mut().find(|t| t.topic == tp.topic) {
                    Some(t) => t.partitions.push(tp.partition),
                    None => forgotten.push(ForgottenTopic {
                        topic: tp.topic,
                        topic_id,
                        partitions: vec![tp.partition],
                        ..ForgottenTopic::default()
                    }),
                }
            }
            let request = FetchRequest {
                replica_id: -1,
                max_wait_ms: i32::try_from(config.max_wait.as_millis()).unwrap_or(i32::MAX),
                min_bytes: config.min_bytes,
                max_bytes: config.max_bytes,
                isolation_level: offsets::isolation_byte(config.isolation),
                session_id,
                session_epoch,
                topics,
                forgotten_topics_data: forgotten,
                rack_id: config.rack_id.clone().unwrap_or_default(),
                ..FetchRequest::default()
            };
            let token = take_token(next_token);
            in_flight.insert(
                token,
                InFlight::Fetch(FetchSent {
                    target,
                    session: config.sessions.then_some(SessionSent {
                        id: session_id,
                        connection,
                        changes,
                    }),
                }),
            );
            out.push((target, Box::new(FetchRequestBody(request)), token));
        }
    }

    /// Assigned partitions that want a request (a fetch or a reset) but
    /// whose leader `metadata` does not know: refresh metadata for them.
    pub fn leader_unknown(&self, metadata: &Metadata) -> BTreeSet<TopicPartition> {
        self.partitions
            .iter()
            .filter(|(_, st)| {
                matches!(
                    st.pos,
                    PosState::Valid(_)
                        | PosState::Resetting {
                            in_flight: false,
                            ..
                        }
                        | PosState::Validating {
                            in_flight: false,
                            ..
                        }
                ) && !st.paused
            })
            .filter(|(tp, _)| metadata.leader(&tp.topic, tp.partition).is_none())
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// Whether `metadata` names a leader for every assigned partition.
    pub fn every_leader_known(&self, metadata: &Metadata) -> bool {
        self.partitions
            .keys()
            .all(|tp| metadata.leader(&tp.topic, tp.partition).is_some())
    }

    /// Changes with every [`Fetcher::assign`]: what depends on the
    /// assignment alone need not be looked at again while it is the same.
    pub fn assignment_generation(&self) -> u64 {
        self.assignment_generation
    }

    /// When a partition backing off after an error, or a throttled broker,
    /// may be asked again: call [`Fetcher::poll_requests`] then.
    pub fn next_deadline(&self) -> Option<Instant> {
        // A partition waiting to retry is among the dirty ones.
        self.dirty_states()
            .filter_map(|(_, st)| st.retry.run.not_before())
            .chain(self.throttled.values().copied())
            .min()
    }

    // ===== responses =====

    /// Reads the response to a request planned by
    /// [`Fetcher::poll_requests`]: buffers records, moves resets along,
    /// and sorts errors into what the consumer must do.
    pub fn handle_response(
        &mut self,
        now: Instant,
        token: FetchToken,
        response: &Response,
    ) -> FetchOutcome {
        let mut outcome = FetchOutcome::default();
        let errors_before = self.errors.len();
        match self.in_flight.remove(&token) {
            Some(InFlight::Fetch(sent)) => self.handle_fetch(now, sent, response, &mut outcome),
            Some(InFlight::ListOffsets { broker, partitions }) => {
                self.dirty.extend(partitions.keys().cloned());
                self.handle_reset(now, broker, partitions, response, &mut outcome)
            }
            Some(InFlight::Validate { broker, partitions }) => {
                self.dirty.extend(partitions.keys().cloned());
                self.handle_validation(now, broker, partitions, response, &mut outcome)
            }
            None => log::debug!("response for unknown fetch token {token:?} ignored"),
        }
        outcome.errors = self.errors.len() - errors_before;
        outcome
    }

    /// The request of `token` got no response (connection lost, timeout,
    /// no common version, ...): its partitions back off and are asked
    /// again after `retry.backoff.ms`. Errors that will not pass by
    /// themselves are also reported.
    pub fn handle_failure(
        &mut self,
        now: Instant,
        token: FetchToken,
        error: &RequestError,
    ) -> FetchOutcome {
        let mut outcome = FetchOutcome::default();
        let (broker, api, tps): (i32, ApiKey, Vec<(TopicPartition, u64)>) = match self
            .in_flight
            .remove(&token)
        {
            Some(InFlight::Fetch(sent)) => (
                {
                    // No answer: what the broker made of the request is
                    // unknown, so the session cannot go on.
                    if sent.session.is_some() {
                        self.sessions.remove(&sent.target);
                    }
                    if let Target::Replica(replica) = sent.target {
                        // The Java consumer's `handleFetchFailure`:
                        // every partition read from that replica goes
                        // back to its leader (after the backoff below).
                        log::debug!(
                                "fetching from read replica {replica} failed ({error}); fetching its partitions from their leaders"
                            );
                        self.drop_replica(replica);
                    }
                    broker_of(sent.target)
                },
                ApiKey::Fetch,
                self.release_target(sent.target)
                    .into_iter()
                    .map(|(tp, m)| (tp, m.generation))
                    .collect(),
            ),
            Some(InFlight::ListOffsets { broker, partitions }) => (
                broker,
                ApiKey::ListOffsets,
                partitions.into_iter().map(|(tp, (g, _))| (tp, g)).collect(),
            ),
            Some(InFlight::Validate { broker, partitions })
                if matches!(error, RequestError::NoCommonVersion(_)) =>
            {
                // A broker without OffsetForLeaderEpoch v2+ cannot be
                // asked (KIP-320 needs the current leader epoch in
                // it): the positions are taken as they are, as the
                // Java consumer does with such brokers.
                log::debug!(
                    "broker {broker} cannot validate positions ({error}); fetching without"
                );
                for (tp, (generation, epoch)) in partitions {
                    if let Some(st) = self.partitions.get_mut(&tp) {
                        self.dirty.insert(tp);
                        if st.generation == generation {
                            if let PosState::Validating { pos, .. } = st.pos {
                                st.pos = PosState::Valid(pos);
                                st.checked_epoch = (epoch >= 0).then_some(epoch);
                            }
                        }
                    }
                }
                return outcome;
            }
            Some(InFlight::Validate { broker, partitions }) => (
                broker,
                ApiKey::OffsetForLeaderEpoch,
                partitions.into_iter().map(|(tp, (g, _))| (tp, g)).collect(),
            ),
            None => return outcome,
        };
        log::debug!("{api} request to broker {broker} failed: {error}");
        for (tp, generation) in tps {
            if let Some(st) = self.partitions.get_mut(&tp) {
                self.dirty.insert(tp);
                if st.generation == generation {
                    clear_reset_in_flight(st);
                    backoff(st, now, &self.config.retry_backoff, &mut self.rng);
                }
            }
        }
        if !matches!(error, RequestError::Shutdown) {
            // A lost connection or timeout may mean the broker is gone
            // (the Java client refreshes metadata on disconnect); an
            // encoding failure may be a topic id the metadata lacked.
            outcome.refresh_metadata = true;
        }
        if !error.is_retriable() && !matches!(error, RequestError::Shutdown) {
            self.errors.push(FetchError::Request {
                broker,
                api,
                error: error.clone(),
            });
            outcome.errors = 1;
        }
        outcome
    }

    fn handle_fetch(
        &mut self,
        now: Instant,
        FetchSent { target, session }: FetchSent,
        response: &Response,
        outcome: &mut FetchOutcome,
    ) {
        let broker = broker_of(target);
        let decoded = if response.api == ApiKey::Fetch {
            response.decode::<FetchResponse>()
        } else {
            Err(crate::protocol::DecodeError::InvalidValue {
                what: "response",
                reason: "not a Fetch response",
            })
        };
        let resp = match decoded {
            Ok(r) => r,
            Err(source) => {
                log::warn!("cannot decode Fetch response of broker {broker}: {source}");
                self.errors.push(FetchError::Decode {
                    broker,
                    api: ApiKey::Fetch,
                    source,
                });
                self.back_off_target(now, target);
                return;
            }
        };
        if resp.throttle_time_ms > 0 {
            // KIP-219: the broker answered first and throttles after; do
            // not fetch from it again before the time is up.
            let wait = Duration::from_millis(resp.throttle_time_ms as u64);
            log::debug!("broker {broker} throttles fetches for {wait:?}");
            self.throttled.insert(broker, now + wait);
        }
        let top = ErrorCode::from_code(resp.error_code);
        if let Some(session) = session {
            if top != ErrorCode::None {
                // Any error ends the session (the Java client's
                // `FetchSessionHandler.handleResponse`): the next Fetch is a
                // full one asking for a new session.
                self.sessions.remove(&target);
                if session.id != 0
                    && matches!(
                        top,
                        ErrorCode::FetchSessionIdNotFound | ErrorCode::InvalidFetchSessionEpoch
                    )
                {
                    // The broker evicted or lost it (KIP-227): not the
                    // application's business, and nothing to wait for.
                    log::debug!(
                        "fetch session {} with {}: {top}; fetching in full",
                        session.id,
                        describe(target)
                    );
                    return;
                }
            } else if session.id == 0 {
                if resp.session_id != 0 {
                    log::debug!(
                        "fetch session {} with {} begins",
                        resp.session_id,
                        describe(target)
                    );
                    // It holds every member, as sent (none has left yet:
                    // the partitions the answer carries leave below).
                    let partitions = self.parked.get(&target).map_or_else(BTreeMap::new, |p| {
                        p.members.iter().map(|(tp, m)| (tp.clone(), m.entry)).collect()
                    });
                    self.sessions.insert(
                        target,
                        FetchSession {
                            id: resp.session_id,
                            epoch: 1,
                            connection: session.connection,
                            partitions,
                        },
                    );
                }
                // A session id 0 back: the broker keeps no session (its
                // cache is full, or it has none); every Fetch stays full.
            } else if resp.session_id != session.id {
                // The broker closed the session (KIP-227: an incremental
                // Fetch that left it empty is served sessionless, id 0);
                // the answer is still good, the next Fetch is full.
                log::debug!(
                    "fetch session {} with {} closed by the broker",
                    session.id,
                    describe(target)
                );
                self.sessions.remove(&target);
            } else if let Some(s) = self.sessions.get_mut(&target) {
                s.epoch = if s.epoch == i32::MAX { 1 } else { s.epoch + 1 };
                for (tp, entry) in session.changes {
                    match entry {
                        Some(entry) => s.partitions.insert(tp, entry),
                        None => s.partitions.remove(&tp),
                    };
                }
            }
        }
        if top != ErrorCode::None {
            if let Target::Replica(replica) = target {
                // An error from a read replica: its partitions go back to
                // their leaders (KIP-392), after the backoff below.
                self.drop_replica(replica);
                if classify(top) == ErrorClass::Leader || top == ErrorCode::OffsetOutOfRange {
                    log::debug!(
                        "Fetch response of read replica {replica}: {top}; fetching from the leaders"
                    );
                    outcome.refresh_metadata |= classify(top) == ErrorClass::Leader;
                    self.back_off_target(now, target);
                    return;
                }
            }
            if classify(top) == ErrorClass::Leader {
                outcome.refresh_metadata = true;
            }
            // Said once while it lasts, as a partition's error is (per
            // connection target), once it has lasted its grace.
            let max_gap = self.max_retry_gap();
            let streak = Streak::note(
                self.top_errors.entry(target).or_default(),
                top,
                now,
                max_gap,
            );
            if streak.due(now, report_grace(classify(top))) {
                log::warn!(
                    "Fetch response of broker {broker}: {top} (failing for {:?}); retrying",
                    streak.lasted(now)
                );
                streak.reported = Some(now);
                self.errors.push(FetchError::Broker {
                    broker,
                    partition: None,
                    code: top,
                });
            } else {
                log::debug!("Fetch response of broker {broker}: {top}; retrying");
            }
            self.back_off_target(now, target);
            return;
        }
        self.top_errors.remove(&target);
        let by_id = response.version >= FIRST_TOPIC_ID_VERSION;
        let mut read = BTreeSet::new();
        for topic in resp.responses {
            let name = if by_id {
                match self.topic_names.get(&topic.topic_id) {
                    Some(name) => name.clone(),
                    None => {
                        log::debug!("Fetch response names a topic id not asked for; ignored");
                        continue;
                    }
                }
            } else {
                topic.topic
            };
            for data in topic.partitions {
                let tp = TopicPartition::new(name.clone(), data.partition_index);
                // Each partition is read once, and only if it was asked
                // for.
                let Some(member) = self
                    .parked
                    .get(&target)
                    .and_then(|p| p.members.get(&tp))
                    .copied()
                    .filter(|_| read.insert(tp.clone()))
                else {
                    continue;
                };
                self.handle_partition(now, target, tp.clone(), member, data, outcome);
                self.check_eof(&tp);
                // One the answer left as it was sent (nothing buffered, no
                // error, the same position: what a Fetch without a
                // session says of most partitions) stays parked; any
                // other leaves its target, to be looked at afresh.
                let max_bytes = self.config.max_partition_bytes;
                let stays = self.partitions.get(&tp).and_then(|st| {
                    st.parked_as(now, target, &member, max_bytes).then(|| !st.caught_up())
                });
                let p = self.parked.get_mut(&target).expect("a member above");
                match stays {
                    Some(behind) => p.still(&tp, behind),
                    None => {
                        p.leave(&tp);
                        if let Some(st) = self.partitions.get_mut(&tp) {
                            if st.member == Some(target) {
                                st.member = None;
                            }
                            self.dirty.insert(tp);
                        }
                    }
                }
            }
        }
        // Partitions the response left out stay parked: the next Fetch
        // carries them again.
    }

    /// The longest wait between two failures of one run ([`Streak`]):
    /// twice the longest retry backoff.
    fn max_retry_gap(&self) -> Duration {
        self.config.retry_backoff.max.saturating_mul(2)
    }

    /// Whether an answer for `tp` sent as `s` still applies: the partition
    /// is assigned, nothing moved its position meanwhile, and it was
    /// fetched from its position with no records waiting, or ahead of the
    /// records waiting (see [`PartitionState::fetch_from`]).
    fn is_current(&self, tp: &TopicPartition, s: &Member) -> bool {
        let from = s.entry.fetch_offset;
        self.partitions.get(tp).is_some_and(|st| {
            st.generation == s.generation
                && match (&st.pos, &st.buffer) {
                    (PosState::Valid(p), None) => p.offset == from,
                    (PosState::Valid(_), Some(b)) => {
                        st.ahead.is_none() && b.end.map(|e| e.next_offset) == Some(from)
                    }
                    _ => false,
                }
        })
    }

    fn back_off_if_current(&mut self, now: Instant, tp: &TopicPartition, s: &Member) {
        if self.is_current(tp, s) {
            let st = self.partitions.get_mut(tp).expect("checked");
            backoff(st, now, &self.config.retry_backoff, &mut self.rng);
        }
    }

    /// Every partition read from `replica` (KIP-392) goes back to its
    /// leader.
    fn drop_replica(&mut self, replica: i32) {
        for (tp, st) in &mut self.partitions {
            if st.replica.is_some_and(|r| r.broker == replica) {
                st.replica = None;
                self.dirty.insert(tp.clone());
            }
        }
    }

    /// Every member of `target` leaves it (its Fetch failed as a whole)
    /// and is marked dirty.
    fn release_target(&mut self, target: Target) -> BTreeMap<TopicPartition, Member> {
        let Some(p) = self.parked.get_mut(&target) else {
            return BTreeMap::new();
        };
        let members = std::mem::take(&mut p.members);
        p.behind = 0;
        p.changed.extend(members.keys().cloned());
        for tp in members.keys() {
            if let Some(st) = self.partitions.get_mut(tp) {
                if st.member == Some(target) {
                    st.member = None;
                }
            }
            self.dirty.insert(tp.clone());
        }
        members
    }

    /// Like [`Fetcher::release_target`], and those whose answer would
    /// still have applied wait before they are asked again.
    fn back_off_target(&mut self, now: Instant, target: Target) {
        for (tp, m) in self.release_target(target) {
            self.back_off_if_current(now, &tp, &m);
        }
    }

    fn handle_partition(
        &mut self,
        now: Instant,
        target: Target,
        tp: TopicPartition,
        s: Member,
        data: PartitionData,
        outcome: &mut FetchOutcome,
    ) {
        let max_gap = self.max_retry_gap();
        let broker = broker_of(target);
        let from_replica = matches!(target, Target::Replica(_));
        let code = ErrorCode::from_code(data.error_code);
        if !self.is_current(&tp, &s) {
            log::debug!(
                "stale fetch data for {tp} at offset {} ignored",
                s.entry.fetch_offset
            );
            return;
        }
        let policy = self.config.auto_offset_reset;
        let st = self.partitions.get_mut(&tp).expect("checked");
        let PosState::Valid(pos) = st.pos else {
            return;
        };
        // An answer to a Fetch ahead of the records still waiting (see
        // `PartitionState::fetch_from`) is kept only for its records:
        // anything else it says is met again by the Fetch from the
        // position once those are taken.
        let ahead = st.buffer.is_some();
        let diverging = &data.diverging_epoch;
        if ahead && (code != ErrorCode::None || diverging.epoch >= 0 || diverging.end_offset >= 0) {
            log::debug!(
                "fetch of {tp} ahead from offset {} (broker {broker}): {code}; dropped until its waiting records are taken",
                s.entry.fetch_offset
            );
            return;
        }
        let pos = if ahead {
            Position {
                offset: s.entry.fetch_offset,
                leader_epoch: pos.leader_epoch,
            }
        } else {
            pos
        };
        if from_replica
            && (code == ErrorCode::OffsetOutOfRange
                || code == ErrorCode::FencedLeaderEpoch
                || (code != ErrorCode::UnknownLeaderEpoch && classify(code) == ErrorClass::Leader))
        {
            // KIP-392, as the Java consumer's `FetchCollector`: an offset
            // out of range at a read replica (a follower that has not
            // caught up, or lost its log) resets nothing, and a replica
            // that no longer serves the partition (NOT_LEADER_OR_FOLLOWER,
            // REPLICA_NOT_AVAILABLE, a fenced epoch, ...) is dropped:
            // either way the partition is fetched from its leader next,
            // which names a replica again if it still prefers one. It
            // waits `retry.backoff.ms` first (the Java consumer does not),
            // so that a leader that keeps naming a replica that keeps
            // failing is not asked in a tight loop.
            log::debug!(
                "fetch of {tp} at {} from read replica {broker}: {code}; fetching from the leader",
                pos.offset
            );
            st.replica = None;
            if code == ErrorCode::FencedLeaderEpoch {
                st.checked_epoch = None;
            }
            outcome.refresh_metadata |= code != ErrorCode::OffsetOutOfRange;
            backoff(st, now, &self.config.retry_backoff, &mut self.rng);
            return;
        }
        if code == ErrorCode::None && (diverging.epoch >= 0 || diverging.end_offset >= 0) {
            // Fetch v12+: the leader compared `last_fetched_epoch` with
            // its log and found it diverging (KIP-320, as the Java
            // consumer reads it): no records come, the position is
            // settled as an OffsetForLeaderEpoch answer would settle it.
            let end = (diverging.epoch >= 0 && diverging.end_offset >= 0)
                .then_some((diverging.epoch, diverging.end_offset));
            self.apply_epoch_end(&tp, pos, end, s.entry.leader_epoch);
            return;
        }
        match code {
            ErrorCode::None => {}
            ErrorCode::FencedLeaderEpoch | ErrorCode::UnknownLeaderEpoch => {
                // Our leader epoch and the broker's differ: a leader
                // change we have not seen yet, or one the broker has not.
                // Whichever epoch the metadata gives next, the position
                // is validated against it before fetching on (KIP-320).
                log::debug!("fetch of {tp} from broker {broker}: {code}; refreshing metadata and validating the position");
                st.checked_epoch = None;
                outcome.refresh_metadata = true;
                backoff(st, now, &self.config.retry_backoff, &mut self.rng);
                return;
            }
            ErrorCode::OffsetOutOfRange => {
                match policy {
                    OffsetReset::Earliest | OffsetReset::Latest => {
                        log::info!(
                            "fetch offset {} is out of range for {tp} (log start {}, high watermark {}); resetting to the {} offset",
                            pos.offset,
                            data.log_start_offset,
                            data.high_watermark,
                            reset_name(policy)
                        );
                        st.pos = PosState::Resetting {
                            spec: reset_spec(policy),
                            auto: true,
                            in_flight: false,
                        };
                        // Whatever was sent for the old position is stale.
                        st.generation = self.next_generation;
                        self.next_generation += 1;
                    }
                    OffsetReset::None => {
                        log::info!(
                            "fetch offset {} is out of range for {tp} (log start {}, high watermark {}); auto.offset.reset is none",
                            pos.offset,
                            data.log_start_offset,
                            data.high_watermark
                        );
                        st.pos = PosState::Halted(pos);
                        self.errors.push(FetchError::OffsetOutOfRange {
                            partition: tp,
                            offset: pos.offset,
                        });
                    }
                }
                return;
            }
            other => {
                outcome.refresh_metadata |= partition_error(
                    &mut self.errors,
                    &mut st.retry,
                    now,
                    max_gap,
                    ApiKey::Fetch,
                    broker,
                    &tp,
                    other,
                );
                backoff(st, now, &self.config.retry_backoff, &mut self.rng);
                return;
            }
        }
        st.retry = Retry::default();
        st.high_watermark = (data.high_watermark >= 0).then_some(data.high_watermark);
        st.last_stable_offset = (data.last_stable_offset >= 0).then_some(data.last_stable_offset);
        if let Some(b) = &data.records {
            st.stats.bytes_fetched += b.len() as u64;
        }
        if data.preferred_read_replica >= 0 {
            // KIP-392: the leader prefers that this client read the
            // partition from that replica (one in its rack), until the
            // lease ends. A broker naming itself names no other.
            let named = data.preferred_read_replica;
            if named == broker && !from_replica {
                st.replica = None;
            } else if st.replica.map(|r| r.broker) != Some(named) {
                let until = now + self.config.replica_lease;
                log::debug!(
                    "{tp}: broker {broker} names broker {named} as the preferred read replica for {:?}",
                    self.config.replica_lease
                );
                st.replica = Some(ReadReplica {
                    broker: named,
                    until,
                });
                self.replicas = true;
            }
        }
        let Some(bytes) = data.records.filter(|b| !b.is_empty()) else {
            return;
        };
        let aborted: Vec<records::AbortedTransaction> = data
            .aborted_transactions
            .iter()
            .flatten()
            .map(|t| records::AbortedTransaction {
                producer_id: t.producer_id,
                first_offset: t.first_offset,
            })
            .collect();
        let end_of_batches = batches_end(&bytes);
        // A large set is parsed by whoever takes its records, not here:
        // with records of kilobytes, checking and parsing them is most of
        // the work a response brings. Its CRCs are checked by
        // `check_pending_crcs`, which the driver calls once the next
        // Fetch is on its way, while the bytes are still in this core's
        // cache; until then, and for good if one fails, its batches are
        // parsed with their CRCs checked (a faulty one is named when
        // `poll` reaches it, after the records before it).
        let lazy = aborted
            .is_empty()
            .then(|| records_ahead_of_decoding(&bytes, pos.offset))
            .flatten();
        if lazy.is_some() && self.config.check_crcs {
            self.crcs_pending.insert(tp.clone());
        }
        let mut decoded = DecodedRecords::new();
        let mut undecoded = bytes;
        let result = match lazy {
            Some(_) => Ok(()),
            None => decode_some(
                &self.decoders.checking,
                self.config.isolation,
                &aborted,
                &mut undecoded,
                pos.offset,
                &mut decoded,
            ),
        };
        let (records, end, error) = records_from(&tp, &decoded, result, pos.offset, pos.offset);
        let decoded_now = records.len();
        self.next_buffer += 1;
        let buffer = Buffer {
            id: self.next_buffer,
            decoding: false,
            records: records.into_iter(),
            next_offset: end,
            error,
            undecoded,
            from: pos.offset,
            end: end_of_batches,
            ahead_sent: false,
            crcs_checked: false,
        };
        let nothing_to_deliver = decoded_now == 0 && lazy.is_none();
        if ahead {
            // Nothing to deliver (a batch cut short, control batches
            // only): the Fetch from the position meets it again.
            if !nothing_to_deliver {
                st.stats.records_fetched += decoded_now as u64;
                st.ahead = Some(Box::new(buffer));
            }
            return;
        }
        st.stats.records_fetched += decoded_now as u64;
        if decoded.batches > 0 || lazy.is_some() {
            st.size_override = None;
        } else if buffer.error.is_none() {
            if let Some(tail) = decoded.partial_tail {
                // Only part of one batch came. When it is larger than the
                // partition limit asked, ask for its size (a broker that
                // keeps to KIP-74 sends a first batch whole anyway); when
                // it is larger than this client takes, stop and say so.
                match tail.declared_size {
                    Some(size) if size > s.entry.max_bytes.max(0) as usize => {
                        if size <= MAX_PARTITION_OVERRIDE {
                            log::debug!("{tp}: a {size}-byte batch at offset {} did not fit; fetching it with a larger limit", pos.offset);
                            st.size_override = Some(size as i32);
                            self.front_rank -= 1;
                            st.rank = self.front_rank;
                        } else {
                            self.errors.push(FetchError::RecordTooLarge {
                                partition: tp,
                                offset: pos.offset,
                                size: Some(size),
                            });
                            st.pos = PosState::Halted(pos);
                        }
                    }
                    // Cut by the response's max_bytes: try again.
                    _ => {}
                }
                return;
            }
        }
        if nothing_to_deliver {
            // Nothing to deliver: move past control batches, aborted
            // transactions and compacted gaps now.
            let pos = Position {
                offset: end,
                leader_epoch: pos.leader_epoch,
            };
            st.pos = match buffer.error {
                Some(e) => {
                    self.errors.push(e);
                    PosState::Halted(pos)
                }
                None => PosState::Valid(pos),
            };
            return;
        }
        outcome.records_buffered += lazy.unwrap_or(decoded_now);
        st.buffer = Some(Box::new(buffer));
        self.ready.push_back(tp);
    }

    fn handle_reset(
        &mut self,
        now: Instant,
        broker: i32,
        sent: BTreeMap<TopicPartition, (u64, i32)>,
        response: &Response,
        outcome: &mut FetchOutcome,
    ) {
        let max_gap = self.max_retry_gap();
        // Which partitions this answer may still move.
        let mut current = BTreeMap::new();
        for (tp, (generation, epoch)) in &sent {
            if let Some(st) = self.partitions.get_mut(tp) {
                if st.generation == *generation {
                    if let PosState::Resetting { spec, auto, .. } = st.pos {
                        clear_reset_in_flight(st);
                        current.insert(tp.clone(), (spec, auto, *epoch));
                    }
                }
            }
        }
        let listed = match read_list_offsets(response) {
            Ok(listed) => listed,
            Err(source) => {
                log::warn!("cannot decode ListOffsets response of broker {broker}: {source}");
                self.errors.push(FetchError::Decode {
                    broker,
                    api: ApiKey::ListOffsets,
                    source,
                });
                for tp in current.keys() {
                    let st = self.partitions.get_mut(tp).expect("checked");
                    backoff(st, now, &self.config.retry_backoff, &mut self.rng);
                }
                return;
            }
        };
        let mut settled = Vec::new();
        for (tp, (spec, auto, epoch)) in current {
            let st = self.partitions.get_mut(&tp).expect("checked");
            match listed.get(&tp) {
                Some(Ok(Some(found))) => {
                    settled.push(tp.clone());
                    if auto {
                        log::info!("resetting the offset of {tp} to {}", found.offset);
                    } else {
                        log::debug!("{tp} seeks to {} ({spec:?})", found.offset);
                    }
                    st.pos = PosState::Valid(Position {
                        offset: found.offset,
                        leader_epoch: found.leader_epoch,
                    });
                    // The leader answered at this epoch: nothing to
                    // validate until it changes.
                    st.checked_epoch = (epoch >= 0).then_some(epoch);
                    st.retry = Retry::default();
                }
                Some(Err(code)) => {
                    outcome.refresh_metadata |= partition_error(
                        &mut self.errors,
                        &mut st.retry,
                        now,
                        max_gap,
                        ApiKey::ListOffsets,
                        broker,
                        &tp,
                        *code,
                    );
                    backoff(st, now, &self.config.retry_backoff, &mut self.rng);
                }
                // No offset, or the partition left out of the answer: ask
                // again later.
                Some(Ok(None)) | None => {
                    log::debug!("ListOffsets from broker {broker} gave no offset for {tp}");
                    backoff(st, now, &self.config.retry_backoff, &mut self.rng);
                }
            }
        }
        for tp in &settled {
            self.check_eof(tp);
        }
    }

    fn handle_validation(
        &mut self,
        now: Instant,
        broker: i32,
        sent: BTreeMap<TopicPartition, (u64, i32)>,
        response: &Response,
        outcome: &mut FetchOutcome,
    ) {
        let max_gap = self.max_retry_gap();
        // Which partitions this answer may still move.
        let mut current = BTreeMap::new();
        for (tp, (generation, epoch)) in &sent {
            if let Some(st) = self.partitions.get_mut(tp) {
                if st.generation == *generation {
                    if let PosState::Validating { pos, .. } = st.pos {
                        clear_reset_in_flight(st);
                        current.insert(tp.clone(), (pos, *epoch));
                    }
                }
            }
        }
        let decoded = if response.api == ApiKey::OffsetForLeaderEpoch {
            response.decode::<OffsetForLeaderEpochResponse>()
        } else {
            Err(crate::protocol::DecodeError::InvalidValue {
                what: "response",
                reason: "not an OffsetForLeaderEpoch response",
            })
        };
        let resp = match decoded {
            Ok(r) => r,
            Err(source) => {
                log::warn!(
                    "cannot decode OffsetForLeaderEpoch response of broker {broker}: {source}"
                );
                self.errors.push(FetchError::Decode {
                    broker,
                    api: ApiKey::OffsetForLeaderEpoch,
                    source,
                });
                for tp in current.keys() {
                    let st = self.partitions.get_mut(tp).expect("checked");
                    backoff(st, now, &self.config.retry_backoff, &mut self.rng);
                }
                return;
            }
        };
        let mut answers = BTreeMap::new();
        for topic in resp.topics {
            for p in topic.partitions {
                answers.insert(TopicPartition::new(topic.topic.clone(), p.partition), p);
            }
        }
        for (tp, (pos, epoch)) in current {
            let Some(answer) = answers.remove(&tp) else {
                // Left out of the answer: ask again later.
                let st = self.partitions.get_mut(&tp).expect("checked");
                backoff(st, now, &self.config.retry_backoff, &mut self.rng);
                continue;
            };
            let code = ErrorCode::from_code(answer.error_code);
            if code != ErrorCode::None {
                let st = self.partitions.get_mut(&tp).expect("checked");
                outcome.refresh_metadata |= partition_error(
                    &mut self.errors,
                    &mut st.retry,
                    now,
                    max_gap,
                    ApiKey::OffsetForLeaderEpoch,
                    broker,
                    &tp,
                    code,
                );
                backoff(st, now, &self.config.retry_backoff, &mut self.rng);
                continue;
            }
            let end = (answer.end_offset >= 0 && answer.leader_epoch >= 0)
                .then_some((answer.leader_epoch, answer.end_offset));
            self.apply_epoch_end(&tp, pos, end, epoch);
        }
    }

    /// Settles a position against where the leader says the position's
    /// epoch ends (`end`: epoch and end offset; `None` when the leader
    /// knows no such epoch), from OffsetForLeaderEpoch or a Fetch's
    /// `diverging_epoch`. The Java consumer's
    /// `SubscriptionState.maybeCompleteValidation` (KIP-320):
    ///
    /// - the end at or past the position: the position is good;
    /// - the end below it: the log was truncated, records from the end on
    ///   differ from those delivered. With `auto.offset.reset`
    ///   earliest/latest the position moves back to the end offset (the
    ///   first offset that differs: nothing of the new log is skipped,
    ///   nothing it kept delivered twice); with `none`
    ///   [`FetchError::LogTruncation`] and the partition stops;
    /// - no end known: the position cannot be placed in the new log;
    ///   earliest/latest reset as for an out-of-range offset, `none`
    ///   reports it as for a truncation.
    fn apply_epoch_end(
        &mut self,
        tp: &TopicPartition,
        pos: Position,
        end: Option<(i32, i64)>,
        leader_epoch: i32,
    ) {
        let policy = self.config.auto_offset_reset;
        let generation = self.generation();
        let st = self.partitions.get_mut(tp).expect("the caller checked");
        st.retry = Retry::default();
        let checked = (leader_epoch >= 0).then_some(leader_epoch);
        match end {
            Some((_, end_offset)) if end_offset >= pos.offset => {
                log::debug!("{tp}: position {} validated", pos.offset);
                st.pos = PosState::Valid(pos);
                st.checked_epoch = checked;
            }
            Some((end_epoch, end_offset)) if policy != OffsetReset::None => {
                log::warn!(
                    "log truncation detected for {tp}: the leader's log diverges at offset {end_offset} (epoch {end_epoch}), below the position {}; resetting the position to {end_offset}",
                    pos.offset
                );
                st.pos = PosState::Valid(Position {
                    offset: end_offset,
                    leader_epoch: Some(end_epoch),
                });
                st.checked_epoch = checked;
                // Answers to requests sent for the old position are stale.
                st.generation = generation;
            }
            None if policy != OffsetReset::None => {
                log::warn!(
                    "log truncation detected for {tp}: the leader knows no end for the epoch of position {}; resetting to the {} offset",
                    pos.offset,
                    reset_name(policy)
                );
                st.pos = PosState::Resetting {
                    spec: reset_spec(policy),
                    auto: true,
                    in_flight: false,
                };
                st.generation = generation;
            }
            _ => {
                let divergent_offset = end.map(|(_, o)| o);
                log::warn!(
                    "log truncation detected for {tp} at position {} (divergent end offset {divergent_offset:?}) and auto.offset.reset is none",
                    pos.offset
                );
                st.pos = PosState::Halted(pos);
                self.errors.push(FetchError::LogTruncation {
                    partition: tp.clone(),
                    offset: pos.offset,
                    divergent_offset,
                });
            }
        }
    }

    // ===== records and errors =====

    /// Checks the CRC-32C of every large record set fetched since the
    /// last call, so that taking its records parses them without checking
    /// them again. A driver calls it after sending the requests
    /// [`Fetcher::poll_requests`] planned, so that the next Fetch goes out
    /// before the check; without it (or before it), [`Fetcher::take_records`]
    /// checks each batch as it parses it. A set whose check fails is
    /// parsed the same way: its records before the faulty batch are
    /// returned, then the partition stops with
    /// [`FetchError::CorruptRecords`] naming it.
    pub fn check_pending_crcs(&mut self) {
        for tp in std::mem::take(&mut self.crcs_pending) {
            let Some(st) = self.partitions.get_mut(&tp) else {
                continue;
            };
            // A set checked already is skipped; one that failed is looked
            // at again only when its partition brings another.
            for buffer in [st.buffer.as_mut(), st.ahead.as_mut()]
                .into_iter()
                .flatten()
                .filter(|b| !b.crcs_checked)
            {
                buffer.crcs_checked = crcs_hold(&buffer.undecoded);
            }
        }
    }

    /// Up to `max` records (`max.poll.records`), advancing positions past
    /// them. Partitions take turns: one with records left after its turn
    /// goes to the back of the line, so a busy partition cannot hold the
    /// others back. Paused partitions keep their records for later.
    ///
    /// Large record sets are decoded here as their records are wanted; a
    /// caller that must not hold the fetcher meanwhile uses
    /// [`Fetcher::take_ready`] and [`Fetcher::put_decoded`], which this
    /// runs in turn.
    pub fn take_records(&mut self, max: usize) -> Vec<ConsumerRecord> {
        let mut out = Vec::new();
        loop {
            let jobs = self.take_ready(max, &mut out);
            if jobs.is_empty() {
                return out;
            }
            for job in jobs {
                self.put_decoded(job.run());
            }
        }
    }

    /// [`Fetcher::take_records`] without decoding: adds to `out` up to
    /// `max` of the records decoded already, and returns the chunks to
    /// decode next (for partitions whose decoded records ran out), to run
    /// anywhere ([`DecodeJob::run`]) and hand back with
    /// [`Fetcher::put_decoded`]; then take again. A partition whose chunk
    /// is out is skipped until it is back. A chunk is handed out also when
    /// the records taken reached `max`, so that once it is back the
    /// fetcher knows whether the partition's buffer is used up (and the
    /// partition can be fetched again).
    pub fn take_ready(&mut self, max: usize, out: &mut Vec<ConsumerRecord>) -> Vec<DecodeJob> {
        let mut jobs = Vec::new();
        let mut passed = 0;
        while out.len() < max && passed < self.ready.len() {
            let Some(tp) = self.ready.pop_front() else {
                break;
            };
            let Some(st) = self.partitions.get_mut(&tp) else {
                continue;
            };
            let Some(buffer) = st.buffer.as_mut() else {
                continue;
            };
            if st.paused || buffer.decoding {
                self.ready.push_back(tp);
                passed += 1;
                continue;
            }
            passed = 0;
            let PosState::Valid(mut pos) = st.pos else {
                st.drop_buffered();
                self.drained += 1;
                self.dirty.insert(tp);
                continue;
            };
            let mut taken = 0;
            while out.len() < max {
                let Some(record) = buffer.records.next() else {
                    break;
                };
                // The one place records leave: never below the position,
                // so offsets handed out only increase.
                if record.offset() < pos.offset {
                    continue;
                }
                pos.offset = record.offset().saturating_add(1);
                pos.leader_epoch = record.as_record().leader_epoch().or(pos.leader_epoch);
                out.push(ConsumerRecord {
                    topic: st.topic.clone(),
                    partition: tp.partition,
                    record,
                });
                taken += 1;
            }
            if taken > 0 {
                self.next_rank += 1;
                st.rank = self.next_rank;
            }
            st.stats.records_consumed += taken;
            st.pos = PosState::Valid(pos);
            if buffer.records.len() > 0 {
                self.ready.push_back(tp);
            } else if buffer.error.is_none() && !buffer.undecoded.is_empty() {
                buffer.decoding = true;
                jobs.push(DecodeJob {
                    tp: tp.clone(),
                    buffer: buffer.id,
                    decoder: *self.decoders.get(buffer.crcs_checked),
                    isolation: self.config.isolation,
                    undecoded: buffer.undecoded.clone(),
                    from: pos.offset,
                    floor: buffer.next_offset,
                });
                self.ready.push_back(tp);
            } else if self.finish_buffer(&tp) {
                self.ready.push_back(tp);
            }
        }
        jobs
    }

    /// Puts a chunk decoded by a [`DecodeJob`] back into the buffer it
    /// came from; dropped if that buffer is gone meanwhile (a seek, a new
    /// assignment: its records would have been dropped too).
    pub fn put_decoded(&mut self, decoded: Decoded) {
        let Some(st) = self.partitions.get_mut(&decoded.tp) else {
            return;
        };
        let Some(buffer) = st.buffer.as_mut().filter(|b| b.id == decoded.buffer) else {
            return;
        };
        buffer.decoding = false;
        st.stats.records_fetched += decoded.records.len() as u64;
        buffer.records = decoded.records.into_iter();
        buffer.next_offset = buffer.next_offset.max(decoded.next_offset);
        buffer.undecoded = decoded.rest;
        if decoded.error.is_some() {
            buffer.error = decoded.error;
        }
        // Known used up now, not at the next take: the partition is
        // fetchable again. (It is in `ready` since its chunk went out.)
        let used_up = buffer.records.len() == 0
            && (buffer.error.is_some() || buffer.undecoded.is_empty());
        if used_up && matches!(st.pos, PosState::Valid(_)) {
            let follows = self.finish_buffer(&decoded.tp);
            if !follows {
                self.ready.retain(|t| t != &decoded.tp);
            }
        }
    }

    /// Ends a partition's buffer whose records were all taken (its
    /// position [`PosState::Valid`]): the position moves past its last
    /// batch, its error (if any) is reported and halts the partition, and
    /// the answer fetched ahead follows on if it starts exactly there.
    /// Returns whether a buffer follows.
    fn finish_buffer(&mut self, tp: &TopicPartition) -> bool {
        let st = self.partitions.get_mut(tp).expect("the caller checked");
        let PosState::Valid(mut pos) = st.pos else {
            return false;
        };
        let Some(buffer) = st.buffer.take() else {
            return false;
        };
        self.dirty.insert(tp.clone());
        pos.offset = pos.offset.max(buffer.next_offset);
        let error = buffer.error;
        st.buffer = st
            .ahead
            .take()
            .filter(|next| error.is_none() && next.from == pos.offset);
        self.drained += 1;
        st.pos = match error {
            Some(e) => {
                self.errors.push(e);
                PosState::Halted(pos)
            }
            None => PosState::Valid(pos),
        };
        let follows = st.buffer.is_some();
        if !follows {
            self.check_eof(tp);
        }
        follows
    }

    /// With `enable.partition.eof`: says once that `tp` reached the end
    /// of its log, when its position (with nothing buffered before it) is
    /// at the end the last answer gave (the last stable offset under
    /// `read_committed`) and that was not said at this position already.
    /// A paused partition says nothing: it is fetched, and says it, once
    /// resumed.
    /// It follows the errors and records taken before it.
    fn check_eof(&mut self, tp: &TopicPartition) {
        if !self.config.partition_eof {
            return;
        }
        let Some(st) = self.partitions.get_mut(tp) else {
            return;
        };
        let PosState::Valid(pos) = st.pos else {
            return;
        };
        let end = match self.config.isolation {
            IsolationLevel::ReadCommitted => st.last_stable_offset.or(st.high_watermark),
            IsolationLevel::ReadUncommitted => st.high_watermark,
        };
        let at_end = end.is_some_and(|end| pos.offset >= end);
        if !at_end
            || st.paused
            || st.buffer.is_some()
            || st.ahead.is_some()
            || st.eof_at == Some(pos.offset)
        {
            return;
        }
        st.eof_at = Some(pos.offset);
        self.errors.push(FetchError::PartitionEof {
            partition: tp.clone(),
            offset: pos.offset,
        });
    }

    /// How many partition buffers [`Fetcher::take_records`] has emptied so
    /// far. A change means a partition can be fetched again: taking records
    /// that leave every buffer non-empty changes nothing to fetch.
    pub fn drained(&self) -> u64 {
        self.drained
    }

    /// Whether [`Fetcher::take_records`] would return records now (records
    /// of paused partitions do not count).
    pub fn has_buffered(&self) -> bool {
        self.ready.iter().any(|tp| {
            self.partitions
                .get(tp)
                .is_some_and(|st| !st.paused && st.buffer.as_ref().is_some_and(|b| !b.decoding))
        })
    }

    /// Whether [`Fetcher::take_errors`] has something to say.
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty() || self.no_offset_unreported
    }

    /// The errors since the last call, oldest first. A
    /// [`FetchError::NoOffset`] names every partition without a committed
    /// offset under `auto.offset.reset=none`; it comes again when another
    /// partition joins them.
    pub fn take_errors(&mut self) -> Vec<FetchError> {
        let mut out = Vec::new();
        if std::mem::take(&mut self.no_offset_unreported)
            && self
                .partitions
                .values()
                .any(|st| st.pos == PosState::NoOffset { reported: false })
        {
            let mut partitions = Vec::new();
            for (tp, st) in &mut self.partitions {
                if let PosState::NoOffset { reported } = &mut st.pos {
                    *reported = true;
                    partitions.push(tp.clone());
                }
            }
            out.push(FetchError::NoOffset { partitions });
        }
        out.append(&mut self.errors);
        out
    }

    // ===== offsets for times =====

    /// ListOffsets requests for `query` (`offsets_for_times`, and the
    /// beginning and end offsets), one per leader, with this consumer's
    /// isolation level. They change no position; read each response with
    /// [`read_list_offsets`].
    pub fn list_offsets_requests(
        &self,
        query: &BTreeMap<TopicPartition, OffsetSpec>,
        metadata: &Metadata,
    ) -> ListOffsetsPlan {
        offsets::plan(
            query.iter().map(|(tp, spec)| (tp, *spec)),
            metadata,
            self.config.isolation,
            self.config.request_timeout,
        )
    }

    // ===== helpers =====

    fn token(&mut self) -> FetchToken {
        take_token(&mut self.next_token)
    }

    fn generation(&mut self) -> u64 {
        let g = self.next_generation;
        self.next_generation += 1;
        g
    }

    fn back_rank(&mut self) -> i64 {
        self.next_rank += 1;
        self.next_rank
    }
}

/// Where `tp` is fetched from: its preferred read replica while it has one
/// (KIP-392), else its leader; `None` while the metadata knows no leader
/// (the Java consumer needs the leader either way: it carries the leader
/// epoch sent along).
fn read_target(tp: &TopicPartition, st: &PartitionState, metadata: &Metadata) -> Option<Target> {
    let leader = metadata.leader(&tp.topic, tp.partition)?;
    Some(match st.replica {
        Some(r) => Target::Replica(r.broker),
        None => Target::Broker(leader),
    })
}

/// The next token from the counter `next` (for a caller that holds
/// other parts of the fetcher borrowed).
fn take_token(next: &mut u64) -> FetchToken {
    let t = FetchToken(*next);
    *next += 1;
    t
}

/// The broker a fetch target names.
fn broker_of(target: Target) -> i32 {
    match target {
        Target::Broker(b) | Target::Replica(b) => b,
        Target::AnyBroker | Target::Coordinator | Target::Bootstrap => -1,
    }
}

/// A fetch target in words, for logs.
fn describe(target: Target) -> String {
    match target {
        Target::Replica(b) => format!("read replica {b}"),
        other => format!("broker {}", broker_of(other)),
    }
}

fn backoff(st: &mut PartitionState, now: Instant, policy: &ExponentialBackoff, rng: &mut Rng) {
    st.retry.run.failed(now, policy, rng.unit());
}

/// What a partition's error code from `broker` in an `api` answer (Fetch,
/// ListOffsets, OffsetForLeaderEpoch) does besides the retry: an
/// authorization failure is reported for its topic; any other error is
/// reported when its run is due ([`Streak::due`]: at once for an error of
/// no known cure, once it has lasted [`LEADER_ERRORS_REPORTED_AFTER`] for
/// one a metadata refresh should cure, since a leader that moved is found
/// within it; then only after [`REPORT_AGAIN_AFTER`]). Returns whether the
/// metadata is to be refreshed.
#[allow(clippy::too_many_arguments)]
fn partition_error(
    errors: &mut Vec<FetchError>,
    retry: &mut Retry,
    now: Instant,
    max_gap: Duration,
    api: ApiKey,
    broker: i32,
    tp: &TopicPartition,
    code: ErrorCode,
) -> bool {
    let class = classify(code);
    if class == ErrorClass::Authorization {
        report_authorization(errors, &tp.topic);
        return false;
    }
    let leader = class == ErrorClass::Leader;
    let api = api.name();
    let streak = Streak::note(&mut retry.streak, code, now, max_gap);
    if streak.due(now, report_grace(class)) {
        log::warn!(
            "{api} of {tp} from broker {broker}: {code} (failing for {:?}); {}retrying",
            streak.lasted(now),
            if leader {
                "refreshing metadata and "
            } else {
                ""
            }
        );
        streak.reported = Some(now);
        errors.push(FetchError::Broker {
            broker,
            partition: Some(tp.clone()),
            code,
        });
    } else {
        log::debug!("{api} of {tp} from broker {broker}: {code}; retrying");
    }
    leader
}

/// Queues a [`FetchError::TopicAuthorization`] unless one for the topic
/// is still waiting to be taken: one per topic, not one per partition.
fn report_authorization(errors: &mut Vec<FetchError>, topic: &str) {
    let known = errors
        .iter()
        .any(|e| matches!(e, FetchError::TopicAuthorization { topic: t } if t == topic));
    if !known {
        log::warn!("not authorized to read topic {topic}");
        errors.push(FetchError::TopicAuthorization {
            topic: topic.to_owned(),
        });
    }
}

fn clear_reset_in_flight(st: &mut PartitionState) {
    match &mut st.pos {
        PosState::Resetting { in_flight, .. } | PosState::Validating { in_flight, .. } => {
            *in_flight = false
        }
        _ => {}
    }
}

fn reset_spec(policy: OffsetReset) -> OffsetSpec {
    match policy {
        OffsetReset::Earliest => OffsetSpec::Earliest,
        _ => OffsetSpec::Latest,
    }
}

fn reset_name(policy: OffsetReset) -> &'static str {
    match policy {
        OffsetReset::Earliest => "earliest",
        OffsetReset::Latest => "latest",
        OffsetReset::None => "none",
    }
}
