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

mod answer;
mod buffer;
mod config;
mod error;
mod failure;
mod offsets;
mod parked;
mod partition;
mod plan;
mod position;
mod record;
mod replica;
pub(crate) mod request;
mod reset;
mod session;
mod take;
#[cfg(test)]
mod tests;
mod validation;

pub use buffer::{DecodeJob, Decoded};
pub use config::{FetchConfig, OffsetReset};
pub use error::{FetchError, SeekError};
pub use offsets::{
    read_list_offsets, ListOffsetsPlan, ListedOffset, OffsetAndTimestamp, OffsetSpec,
};
pub use record::ConsumerRecord;

use crate::cluster::{BrokerAddress, LeaderHint, Metadata, RequestBody, Target};
use buffer::Decoders;
use failure::{Backoff, Reports};
use parked::Parked;
use partition::PartitionState;
use position::{PosState, Position};
use session::{SessionSent, Sessions};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

pub use crate::group::TopicPartition;

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
    /// New partition leaders the answer named (KIP-951: a partition
    /// refused with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH and its
    /// `current_leader`): give them to
    /// [`Cluster::apply_leader_hints`](crate::cluster::Cluster::apply_leader_hints),
    /// then [`Fetcher::leader_moved`] for each one taken; the partitions of
    /// those not taken want a metadata refresh.
    pub leader_hints: Vec<LeaderHint>,
    /// The addresses of the leaders of `leader_hints` (the answer's
    /// `node_endpoints`, Fetch v16+).
    pub leader_endpoints: Vec<BrokerAddress>,
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

/// The partitions a ListOffsets or OffsetForLeaderEpoch asked about:
/// partition -> (its generation, `current_leader_epoch`) when sent.
type Asked = BTreeMap<TopicPartition, (u64, i32)>;

/// A request planned by [`Fetcher::poll_requests`] and not answered yet.
#[derive(Debug)]
enum InFlight {
    Fetch(FetchSent),
    /// ListOffsets for positions being reset.
    ListOffsets {
        broker: i32,
        partitions: Asked,
    },
    /// OffsetForLeaderEpoch for positions being validated (KIP-320).
    Validate {
        broker: i32,
        partitions: Asked,
    },
}

/// The requests a pass plans: each with its target and token.
type Planned = Vec<(Target, Box<dyn RequestBody>, FetchToken)>;

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
    /// The retry policy partitions wait under after a failure.
    backoff: Backoff,
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
    /// The errors waiting for [`Fetcher::take_errors`], and the runs of
    /// failures they come from.
    reports: Reports,
    /// Fetch sessions (KIP-227), one per connection, with the connection
    /// generations of [`Fetcher::set_leader_generations`] and
    /// [`Fetcher::set_replica_generations`].
    sessions: Sessions,
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
    /// The id of the last buffer made (`Buffer::id`).
    next_buffer: u64,
    /// Per fetch target, the partitions its Fetches carry.
    parked: BTreeMap<Target, Parked>,
    /// Partitions a pass of [`Fetcher::poll_requests`] looks at: those
    /// changed since, and those still waiting to join a target (see
    /// `PartitionState::needs_look`). A pass looks at nothing else.
    dirty: BTreeSet<TopicPartition>,
    /// The names of the topic ids sent (v13+ answers name topics by id).
    topic_names: BTreeMap<[u8; 16], String>,
    /// A partition moved to `PosState::NoOffset` not yet reported.
    no_offset_unreported: bool,
    /// A partition may have a read replica (KIP-392): the pass looks at
    /// their leases.
    replicas: bool,
}

impl Fetcher {
    /// A fetcher with no partition.
    pub fn new(config: FetchConfig) -> Self {
        let decoders = Decoders::new(config.max_decompressed_bytes, config.check_crcs);
        let backoff = Backoff::new(config.retry_backoff, config.seed);
        Fetcher {
            reports: Reports::new(backoff.max_gap()),
            sessions: Sessions::new(config.sessions),
            backoff,
            config,
            decoders,
            partitions: BTreeMap::new(),
            ready: VecDeque::new(),
            assignment_generation: 0,
            maybe_initializing: false,
            metadata_generation: None,
            in_flight: BTreeMap::new(),
            throttled: BTreeMap::new(),
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
            let st = PartitionState::new(&tp, generation, rank, member);
            self.partitions.insert(tp, st);
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
        st.pos = PosState::from_committed(tp, committed, policy);
        if matches!(st.pos, PosState::NoOffset { .. }) {
            self.no_offset_unreported = true;
        }
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
        self.dirty.insert(tp.clone());
        if st.set_position(pos, generation) {
            self.ready.retain(|t| t != tp);
        }
        Ok(())
    }

    /// The next offset the application gets from a partition, when known
    /// (also while it is being validated after a leader change).
    pub fn position(&self, tp: &TopicPartition) -> Option<i64> {
        self.partitions
            .get(tp)
            .and_then(|st| st.pos.known())
            .map(|p| p.offset)
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
            .filter_map(|(tp, st)| {
                let p = st.pos.known()?;
                Some((tp.clone(), (p.offset, p.leader_epoch)))
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
        self.sessions.set_generations(false, generations);
    }

    /// Like [`Fetcher::set_leader_generations`], for the replica
    /// connections ([`Cluster::replica_generations`](crate::cluster::Cluster::replica_generations)):
    /// a read replica's fetch session lives on its replica connection.
    pub fn set_replica_generations(&mut self, generations: &BTreeMap<i32, u64>) {
        self.sessions.set_generations(true, generations);
    }

    /// The fetch session with `broker` on its leader connection, when
    /// there is one: its id and the epoch of the next request (KIP-227).
    pub fn fetch_session(&self, broker: i32) -> Option<(i32, i32)> {
        self.sessions.get(Target::Broker(broker))
    }

    /// Like [`Fetcher::fetch_session`], for the session on the replica
    /// connection to `broker` (a preferred read replica, KIP-392).
    pub fn replica_fetch_session(&self, broker: i32) -> Option<(i32, i32)> {
        self.sessions.get(Target::Replica(broker))
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

    /// `tp`'s leader is known anew without a metadata refresh (a hint
    /// of [`FetchOutcome::leader_hints`] the cluster took): its retry wait
    /// ends, so it goes to the new leader at the next
    /// [`Fetcher::poll_requests`] (its position validated there first,
    /// KIP-320, as the leader epoch changed).
    pub fn leader_moved(&mut self, tp: &TopicPartition) {
        if let Some(st) = self.partitions.get_mut(tp) {
            st.retry.run.clear_wait();
            self.dirty.insert(tp.clone());
        }
    }

    /// Assigned partitions that want a request (a fetch or a reset) but
    /// whose leader `metadata` does not know: refresh metadata for them.
    pub fn leader_unknown(&self, metadata: &Metadata) -> BTreeSet<TopicPartition> {
        self.partitions
            .iter()
            .filter(|(_, st)| st.pos.wants_leader() && !st.paused)
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

    /// A token for the next request planned.
    fn token(&mut self) -> FetchToken {
        take_token(&mut self.next_token)
    }

    /// A new partition generation: what was sent under the old one is
    /// stale.
    fn generation(&mut self) -> u64 {
        let g = self.next_generation;
        self.next_generation += 1;
        g
    }

    /// The partitions' states, and the rest of the fetcher apart from
    /// them: a handler for one partition looks it up once and works on
    /// its state and the rest together.
    fn split(&mut self) -> (&mut BTreeMap<TopicPartition, PartitionState>, Around<'_>) {
        let Fetcher {
            partitions,
            config,
            decoders,
            backoff,
            reports,
            ready,
            crcs_pending,
            next_generation,
            next_buffer,
            front_rank,
            next_rank,
            replicas,
            dirty,
            drained,
            ..
        } = self;
        let around = Around {
            config,
            decoders,
            backoff,
            reports,
            ready,
            crcs_pending,
            next_generation,
            next_buffer,
            front_rank,
            next_rank,
            replicas,
            dirty,
            drained,
        };
        (partitions, around)
    }

    /// `tp` failed at `now`: it waits before it is asked again.
    fn back_off(&mut self, now: Instant, tp: &TopicPartition) {
        if let Some(st) = self.partitions.get_mut(tp) {
            self.backoff.failed(&mut st.retry, now);
        }
    }

    /// A rank behind every partition's: the last turn.
    fn back_rank(&mut self) -> i64 {
        self.next_rank += 1;
        self.next_rank
    }
}

/// What a handler for one partition works with beside that partition's
/// state ([`Fetcher::split`]): the fetcher's other parts it may change.
struct Around<'a> {
    config: &'a FetchConfig,
    decoders: &'a Decoders,
    backoff: &'a mut Backoff,
    reports: &'a mut Reports,
    ready: &'a mut VecDeque<TopicPartition>,
    crcs_pending: &'a mut BTreeSet<TopicPartition>,
    next_generation: &'a mut u64,
    next_buffer: &'a mut u64,
    front_rank: &'a mut i64,
    next_rank: &'a mut i64,
    replicas: &'a mut bool,
    dirty: &'a mut BTreeSet<TopicPartition>,
    drained: &'a mut u64,
}

impl Around<'_> {
    /// A new generation (as [`Fetcher::generation`]).
    fn generation(&mut self) -> u64 {
        let g = *self.next_generation;
        *self.next_generation += 1;
        g
    }
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
