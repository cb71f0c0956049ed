//! The producer's state machine without IO: records placed and queued,
//! Produce requests planned per leader, their answers read, producer id
//! and sequence numbers kept (idempotence), retries and delivery timeouts.
//!
//! It drives a [`Cluster`] (the same connection manager as the
//! consumer's): nothing opens before the first record, Metadata is asked
//! for the topics produced to only, each Produce goes over its leader's
//! connection, InitProducerId over any connection already open. Time is
//! always an argument; the runtime's background task calls
//! [`ProducerCore::drive`] after every input and at
//! [`ProducerCore::next_deadline`].
//!
//! This file holds the state, its making from the configuration, what it
//! tells of itself, and the step; the rest is split by job, each an
//! `impl ProducerCore` of its own:
//!
//! - `front`: records in (placed on a partition and queued, under a lock
//!   of their own);
//! - `send`: requests out: InitProducerId, and Produce per leader with the
//!   batches stamped with their sequence numbers;
//! - `answers`: their answers read: batches delivered, retried, split or
//!   failed, the producer id and epoch kept;
//! - `outcomes`: each batch's outcome, held until decided and handed to
//!   the records' futures once no lock is held.

mod answers;
mod front;
mod idempotence;
mod outcomes;
mod requests;
mod retries;
mod send;
#[cfg(all(test, feature = "mock"))]
mod tests;
mod topics;

use super::accumulator::{Accumulator, AccumulatorConfig, FlushMarker};
use super::partitioner::{BuiltinPartitioner, Partitioner};
use crate::cluster::{Changes, Cluster, ExponentialBackoff, Problem, Rng};
use crate::config::{Acks, ProducerConfig};
use crate::error::DeliveryError;
use crate::error::Error;
use crate::events::{ConnectionEvent, ConnectionState};
use crate::group::TopicPartition;
use crate::protocol::ErrorCode;
use bytes::Bytes;
#[cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]
pub(crate) use front::lock as lock_front;
pub(crate) use front::Front;
use front::{lock, Placing};
use idempotence::Idempotence;
use outcomes::Outcomes;
use requests::{Pending, Requests};
use retries::Retries;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use topics::Topics;

/// What the producer does, beyond its connections and its queue.
#[derive(Debug, Clone)]
pub(crate) struct ProducerSettings {
    /// `acks`: -1 (all), 1 (the leader) or 0 (no answer).
    pub acks: i16,
    /// `enable.idempotence`.
    pub idempotence: bool,
    /// `request.timeout.ms`, also sent as the Produce `timeout_ms`.
    pub request_timeout: Duration,
    /// `delivery.timeout.ms`.
    pub delivery_timeout: Duration,
    /// `retries`.
    pub retries: u32,
    /// `retry.backoff.ms` growing to `retry.backoff.max.ms`.
    pub retry_backoff: ExponentialBackoff,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight: usize,
    /// `metadata.max.idle.ms`: a topic not produced to for this long
    /// leaves the metadata.
    pub metadata_max_idle: Duration,
    /// `partitioner.ignore.keys`.
    pub ignore_keys: bool,
    /// `partitioner`: how keyed records are placed.
    pub builtin_partitioner: BuiltinPartitioner,
    /// `batch.size` (the sticky partitioner switches after it).
    pub batch_size: usize,
    /// `sticky.partitioning.linger.ms` (the sticky partitioner switches
    /// after it too).
    pub sticky_linger: Duration,
    /// `topic.metadata.propagation.max.ms`: how long the Metadata answers
    /// must say a topic does not exist before `send` gives up on it.
    pub topic_propagation: Duration,
}

/// A record as `send` gives it.
#[derive(Debug, Clone)]
pub(crate) struct OutRecord {
    pub topic: String,
    pub partition: Option<i32>,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
    pub timestamp: i64,
}

/// What the metadata says of a topic, for placing its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TopicState {
    /// Not known yet (asked for).
    Unknown,
    /// The broker answered with an error for it.
    Failed(ErrorCode),
    /// Every Metadata answer for at least `topic.metadata.propagation.max.ms`
    /// said it does not exist (`code`: UNKNOWN_TOPIC_OR_PARTITION), from the
    /// first that did to the last (`after`).
    Missing { code: ErrorCode, after: Duration },
    /// Its partition count.
    Known(i32),
}

/// Why a record was not queued.
#[derive(Debug)]
pub(crate) enum Refused {
    /// `buffer.memory` is used up: try again once records were delivered
    /// (the record comes back).
    Full(Box<OutRecord>),
    /// The topic's partitions are not known yet: try again once they are
    /// (the record comes back).
    Unknown(Box<OutRecord>),
    /// The record can never be sent.
    Invalid(Error),
}

/// What a producer did for one partition, since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PartitionCounters {
    /// Records delivered.
    pub records: u64,
    /// Records failed.
    pub records_failed: u64,
    /// Batches sent (retries included).
    pub batches: u64,
    /// Bytes of batches sent, as sent (compressed).
    pub bytes: u64,
    /// Bytes of the same batches before compression.
    pub uncompressed_bytes: u64,
    /// Batches sent again after a retriable failure.
    pub retries: u64,
    /// Failed attempts (a refusal, a lost connection, a timeout).
    pub errors: u64,
    /// Batches split in two after the broker found them too large.
    pub splits: u64,
    /// Time from a batch's first record to its first sending, summed over
    /// batches sent once.
    pub queue_time: Duration,
    /// Batches sent for the first time (the count `queue_time` sums over).
    pub first_sent: u64,
    /// Time from sending a Produce to its answer, summed over batches.
    pub latency: Duration,
    /// Batches answered (the count `latency` sums over).
    pub answered: u64,
}

/// The producer's state.
pub(crate) struct ProducerCore {
    cluster: Cluster,
    /// The records' way in (the accumulator, the batches' outcomes, the
    /// partitioners), behind a lock of its own that `send` takes instead
    /// of the client's.
    front: Arc<Mutex<Front>>,
    settings: ProducerSettings,
    rng: Rng,
    /// The topics produced to.
    topics: Topics,
    /// The producer id and epoch, and the partitions' sequence numbers.
    idempotence: Idempotence,
    /// The partitions' runs of retried failures.
    retries: Retries,
    /// The requests in flight, and the brokers' throttles.
    requests: Requests,
    /// Outcomes decided under the lock, handed to the records' futures
    /// after it is released ([`ProducerCore::take_outcomes`]), so that
    /// waking the application never holds up a `send`.
    outcomes: Outcomes,
    /// The last connection problem (a refused connection, failed
    /// authentication), for the errors of calls that time out.
    last_problem: Option<String>,
    /// A refusal that lasts ([`ProducerCore::refusal`]): the cluster
    /// refused us (credentials, a certificate, a broker that breaks the
    /// protocol) or every bootstrap address failed, and no connection has
    /// been ready since.
    refusal: Option<Problem>,
    /// Delivered and failed records so far.
    delivered: u64,
    failed: u64,
    /// Grows by one with each batch delivered or failed (its memory
    /// freed); the value [`ProducerCore::take_changes`] last saw, and the
    /// view of the topics it last saw (metadata generation, the topics'
    /// changes).
    settled: u64,
    settled_seen: u64,
    view_seen: (u64, u64),
    /// The time of the last step or append (deadlines are computed from it).
    now: Instant,
    counters: BTreeMap<TopicPartition, PartitionCounters>,
}

impl std::fmt::Debug for ProducerCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerCore")
            .field("pid", &self.idempotence.pid())
            .field("topics", &self.topics.names().collect::<Vec<_>>())
            .field("in_flight", &self.requests.len())
            .field("front", &*lock(&self.front))
            .finish_non_exhaustive()
    }
}

impl ProducerCore {
    /// A producer with no connection and nothing queued.
    pub fn new(
        cluster: Cluster,
        acc: Accumulator,
        settings: ProducerSettings,
        partitioner: Option<Arc<dyn Partitioner>>,
        now: Instant,
        seed: u64,
    ) -> Self {
        let mut rng = Rng::new(seed);
        let placing = Placing {
            ignore_keys: settings.ignore_keys,
            builtin: settings.builtin_partitioner,
            batch_size: settings.batch_size,
            sticky_linger: settings.sticky_linger,
            custom: partitioner,
        };
        let front = Front::new(acc, placing, rng.next_u64());
        let idempotence = Idempotence::new(settings.idempotence);
        let requests = Requests::new(settings.max_in_flight);
        let topics = Topics::new(settings.metadata_max_idle, settings.topic_propagation);
        ProducerCore {
            now,
            cluster,
            front: Arc::new(Mutex::new(front)),
            settings,
            rng,
            topics,
            idempotence,
            retries: Retries::default(),
            requests,
            outcomes: Vec::new(),
            last_problem: None,
            refusal: None,
            counters: BTreeMap::new(),
            delivered: 0,
            failed: 0,
            settled: 0,
            settled_seen: 0,
            view_seen: (0, 0),
        }
    }

    /// The state of a producer configured by `config`, created at `now`:
    /// no connection, nothing queued. `seed` spreads the bootstrap choice,
    /// jitter and sticky partitions across processes.
    pub fn from_config(config: &ProducerConfig, now: Instant, seed: u64) -> Self {
        let mut seeds = Rng::new(seed);
        let mut cc = config.common().cluster_config();
        cc.max_in_flight = config.max_in_flight_requests_per_connection().max(1) as usize;
        // Metadata for the topics produced to only; a topic the cluster
        // does not know is created where the broker does so itself, unless
        // `allow.auto.create.topics=false`.
        cc.allow_auto_create_topics = config.allow_auto_create_topics();
        let cluster = Cluster::new(cc, now, seeds.next_u64());
        let acc = Accumulator::new(AccumulatorConfig {
            batch_size: config.batch_size() as usize,
            linger: config.linger(),
            buffer_memory: usize::try_from(config.buffer_memory()).unwrap_or(usize::MAX),
            compression: config.compression_type(),
            max_request_size: config.max_request_size() as usize,
            delivery_timeout: config.delivery_timeout(),
            transactional: false,
        });
        let settings = ProducerSettings {
            acks: match config.acks() {
                Acks::Leader => 1,
                Acks::None => 0,
                _ => -1,
            },
            idempotence: config.enable_idempotence(),
            request_timeout: config.request_timeout(),
            delivery_timeout: config.delivery_timeout(),
            retries: config.retries(),
            retry_backoff: config.common().retry_policy(),
            max_in_flight: config.max_in_flight_requests_per_connection().max(1) as usize,
            metadata_max_idle: config.metadata_max_idle(),
            ignore_keys: config.partitioner_ignore_keys(),
            builtin_partitioner: config.partitioner(),
            batch_size: config.batch_size() as usize,
            sticky_linger: config.sticky_partitioning_linger(),
            topic_propagation: config.topic_metadata_propagation_max(),
        };
        ProducerCore::new(cluster, acc, settings, None, now, seeds.next_u64())
    }

    /// Places records that name no partition with `partitioner` (the
    /// built-in placement when `None`).
    pub fn set_partitioner(&mut self, partitioner: Option<Arc<dyn Partitioner>>) {
        lock(&self.front).set_partitioner(partitioner);
    }

    /// The records' way in, which `send` appends through without the
    /// client's lock.
    pub fn front(&self) -> Arc<Mutex<Front>> {
        self.front.clone()
    }

    // ===== what the producer holds and did =====

    /// Whether a `send` that waits for room in `buffer.memory` for a
    /// record of `size` bytes goes on: once an eighth of `buffer.memory`
    /// is free beyond the record (or all of it, for a record that large).
    /// Waking it as soon as the record fits would wake it for each batch
    /// delivered, to append one record and wait again.
    pub fn has_room(&self, size: usize) -> bool {
        let front = lock(&self.front);
        let total = front.acc.config().buffer_memory;
        let wanted = size.saturating_add(total / 8).min(total).max(size);
        front.acc.available() >= wanted
    }

    /// Produce answers that asked the producer to wait (a quota,
    /// KIP-219), and the longest wait one asked.
    pub fn throttles(&self) -> (u64, Duration) {
        self.requests.throttles()
    }

    /// Records given and not yet delivered or failed.
    pub fn outstanding(&self) -> usize {
        lock(&self.front).outstanding
    }

    /// Makes every queued record ready to send now (`flush`); the marker
    /// tells when the records given so far are all delivered or failed
    /// ([`ProducerCore::flush_done`]).
    pub fn flush(&mut self) -> FlushMarker {
        lock(&self.front).acc.flush()
    }

    /// Whether every record given before `marker` was delivered or failed.
    pub fn flush_done(&self, marker: FlushMarker) -> bool {
        lock(&self.front).acc.flush_done(marker)
    }

    /// What changed, of what calls wait for, since the last call: batches
    /// delivered or failed (memory freed, flushes done), what the
    /// metadata says of the topics, and a refusal (told while it lasts).
    pub fn take_changes(&mut self) -> Changes {
        let mut changes = Changes::NONE;
        if self.settled != self.settled_seen {
            self.settled_seen = self.settled;
            changes |= Changes::DELIVERIES;
        }
        let view = (self.cluster.metadata_generation(), self.topics.changes());
        if view != self.view_seen {
            self.view_seen = view;
            changes |= Changes::METADATA;
        }
        if self.refusal.is_some() {
            changes |= Changes::REFUSED;
        }
        changes
    }

    /// Partitions of `topic` as the metadata lists them.
    pub fn partitions(&self, topic: &str) -> Option<Vec<TopicPartition>> {
        self.cluster
            .metadata()
            .topics
            .get(topic)
            .filter(|t| t.error == ErrorCode::None && !t.partitions.is_empty())
            .map(|t| {
                t.partitions
                    .keys()
                    .map(|&p| TopicPartition::new(topic, p))
                    .collect()
            })
    }

    /// What the producer did for each partition it wrote to.
    pub fn partition_counters(&self) -> &BTreeMap<TopicPartition, PartitionCounters> {
        &self.counters
    }

    /// Bytes of records held (queued or in flight).
    pub fn buffered_bytes(&self) -> usize {
        lock(&self.front).acc.buffered_bytes()
    }

    /// The last connection problem seen, in words.
    pub fn last_problem(&self) -> Option<String> {
        self.last_problem.clone()
    }

    /// Delivered and failed records so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.delivered, self.failed)
    }

    // ===== the step =====

    /// The connection manager.
    pub fn io(&mut self) -> &mut Cluster {
        &mut self.cluster
    }

    /// One step at `now`: answers read, timeouts applied, requests sent.
    pub fn drive(&mut self, now: Instant) {
        self.now = self.now.max(now);
        self.cluster.handle_timeout(now);
        self.route_responses(now);
        self.forget_idle_topics(now);
        let answered = self.cluster.metadata_answered_at();
        self.topics.watch_missing(answered, self.cluster.metadata());
        self.expire(now);
        self.producer_id(now);
        self.send_ready(now);
        self.route_responses(now);
        self.collect_problems();
        self.sync_front();
    }

    /// The earliest deadline, past ones included.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.next_deadline_after(None)
    }

    fn next_deadline_after(&self, after: Option<Instant>) -> Option<Instant> {
        let later = |t: &Instant| after.is_none_or(|a| *t > a);
        let now = after.unwrap_or(self.now);
        let mut front = lock(&self.front);
        let next = [
            self.cluster.poll_timeout(),
            front.acc.next_deadline(now),
            self.idempotence.not_before(),
            self.requests.next_throttle_end(),
            self.topics.next_idle(),
        ]
        .into_iter()
        .flatten()
        .filter(later)
        .min();
        if after.is_some() {
            // What the background task sleeps until (at the latest): told
            // to the front under the same lock hold, so an append after it
            // knows whether the task looks again by its batch's due time.
            front.set_wake_at(next);
        }
        next
    }

    /// The earliest deadline after `now`.
    pub fn next_deadline_at(&self, now: Instant) -> Option<Instant> {
        self.next_deadline_after(Some(now))
    }

    /// The next connection event.
    pub fn poll_event(&mut self) -> Option<ConnectionEvent> {
        self.cluster.poll_event()
    }

    /// Closes every connection; every record not delivered fails with
    /// [`DeliveryError::Closed`].
    pub fn shutdown(&mut self, now: Instant) {
        self.cluster.shutdown(now);
        let aborted = lock(&self.front).acc.abort_all();
        for batch in aborted {
            self.fail_batch(&batch, |tp| DeliveryError::Closed {
                topic: tp.topic.clone(),
                partition: tp.partition,
            });
        }
        let pending: Vec<Pending> = self.requests.take_all().collect();
        for p in pending {
            if let Pending::Produce { batches, .. } = p {
                for batch in batches {
                    self.fail_batch(&batch, |tp| DeliveryError::Closed {
                        topic: tp.topic.clone(),
                        partition: tp.partition,
                    });
                }
            }
        }
        let mut front = lock(&self.front);
        for (_, slot) in front.slots.drain() {
            let part = slot.take();
            let closed = part.closed();
            self.outcomes.push((part, Err(closed)));
        }
        front.outstanding = 0;
    }

    /// Forgets the topics idle for `metadata.max.idle.ms` with no record
    /// held. Looks at the records held only once a topic may be idle:
    /// most steps take no lock and build nothing here.
    fn forget_idle_topics(&mut self, now: Instant) {
        if self.topics.next_idle().is_none_or(|t| t > now) {
            return;
        }
        let busy: BTreeSet<String> = lock(&self.front)
            .acc
            .partitions_with_data()
            .map(|tp| tp.topic.clone())
            .collect();
        if self.topics.forget_idle(now, &busy) {
            self.cluster.set_topics(self.topics.names());
        }
    }

    // ===== the topics produced to =====

    /// Marks `topic` as produced to at `now`; the metadata covers it from
    /// the next step on.
    pub fn use_topic(&mut self, now: Instant, topic: &str) {
        if self.topics.use_topic(now, topic) {
            self.cluster.set_topics(self.topics.names());
        }
    }

    /// What the metadata says of `topic`: `Unknown` too for a topic not
    /// produced to (or forgotten after `metadata.max.idle.ms`), whose
    /// metadata is not kept fresh ([`ProducerCore::use_topic`] asks for it).
    pub fn topic_state(&self, topic: &str) -> TopicState {
        self.topics.state(topic, self.cluster.metadata())
    }

    /// Tells the records' way in ([`Front`]) what the metadata now says
    /// of the topics produced to, and which brokers have a Produce in
    /// flight, when either changed since it was last told; and takes from
    /// it when records last opened a batch of each topic (which keeps a
    /// topic's metadata from going idle). Called at the end of each step,
    /// and by a `send` that waited for a topic's metadata before it
    /// appends again.
    pub fn sync_front(&mut self) {
        let generation = self.cluster.metadata_generation();
        let views = self
            .topics
            .views_to_publish(self.cluster.metadata(), generation);
        let mut front = lock(&self.front);
        if let Some(views) = views {
            front.publish(views);
        }
        front.set_busy(self.requests.busy());
        let used = front.take_used();
        drop(front);
        for (topic, at) in used {
            self.topics.used_at(&topic, at);
            self.now = self.now.max(at);
        }
    }

    /// Places `record` (its topic's metadata must be known:
    /// [`ProducerCore::topic_state`]) and queues it, as a `send` does
    /// through [`ProducerCore::front`] after the core told it what it
    /// knows.
    #[cfg(test)]
    pub fn append(
        &mut self,
        now: impl super::accumulator::Now,
        record: OutRecord,
    ) -> Result<front::Queued, Refused> {
        self.sync_front();
        lock(&self.front).append(now, record)
    }

    fn expire(&mut self, now: Instant) {
        let expired = lock(&self.front).acc.expire(now);
        for batch in expired {
            let after = self.settings.delivery_timeout;
            let last = self
                .retries
                .last_failure(&batch.tp)
                .cloned()
                .or_else(|| self.leader_trouble(&batch.tp))
                .or_else(|| self.last_problem.clone());
            self.idempotence.forget(&batch.tp, batch.stamp);
            self.fail_batch(&batch, |tp| DeliveryError::TimedOut {
                topic: tp.topic.clone(),
                partition: tp.partition,
                after,
                last: last.clone(),
            });
        }
    }

    fn collect_problems(&mut self) {
        let mut refused = None;
        while let Some(problem) = self.cluster.poll_problem() {
            // The producer has no group: no coordinator is looked up.
            if matches!(problem, Problem::CoordinatorRefused { .. }) {
                continue;
            }
            let refusal = match &problem {
                Problem::AuthenticationFailed { .. } | Problem::BootstrapUnreachable { .. } => true,
                Problem::BrokerUnreachable { cause, .. } => cause.is_refusal(),
                _ => false,
            };
            if refusal {
                refused = Some(problem.clone());
            }
            let error = Error::from_problem(problem);
            log::warn!("{error}; the producer goes on trying");
            self.last_problem = Some(error.to_string());
        }
        if refused.is_some() {
            self.refusal = refused;
        }
        if self.refusal.is_some()
            && self
                .cluster
                .connections(self.now)
                .iter()
                .any(|c| c.state == ConnectionState::Ready)
        {
            // A connection gets through: whatever refused us is fixed, or
            // is one broker's, not the cluster's.
            self.refusal = None;
        }
    }

    /// What refuses the producer now, if anything: its credentials or a
    /// certificate refused, a broker breaking the protocol, or every
    /// bootstrap address failing, with no connection ready since. A call
    /// waiting on the cluster (`send` for a topic's metadata, `flush`,
    /// `close`, `partitions_for`) returns it at once instead of waiting
    /// out its timeout; the producer goes on trying meanwhile.
    pub fn refusal(&self) -> Option<Error> {
        self.refusal.clone().map(Error::from_problem)
    }
}

/// `tp`'s entry in `map`, made with its default when missing: the
/// partition is copied only then, not at each use (these maps are touched
/// for every batch).
fn entry_of<'a, V: Default>(
    map: &'a mut BTreeMap<TopicPartition, V>,
    tp: &TopicPartition,
) -> &'a mut V {
    if !map.contains_key(tp) {
        map.insert(tp.clone(), V::default());
    }
    map.get_mut(tp).expect("inserted above")
}

/// How the background task drives the producer.
impl crate::cluster::ClientCore for ProducerCore {
    fn io(&mut self) -> &mut Cluster {
        ProducerCore::io(self)
    }
    fn take_changes(&mut self) -> Changes {
        ProducerCore::take_changes(self)
    }
    fn drive(&mut self, now: Instant) {
        ProducerCore::drive(self, now);
    }
    fn next_deadline(&self) -> Option<Instant> {
        ProducerCore::next_deadline(self)
    }
    fn next_deadline_after(&self, now: Instant) -> Option<Instant> {
        ProducerCore::next_deadline_at(self, now)
    }
    fn poll_event(&mut self) -> Option<ConnectionEvent> {
        ProducerCore::poll_event(self)
    }
    fn shutdown(&mut self, now: Instant) {
        ProducerCore::shutdown(self, now);
    }
    fn take_deferred(&mut self) -> Option<crate::cluster::Deferred> {
        self.take_outcomes()
    }
}
