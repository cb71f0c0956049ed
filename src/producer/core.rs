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

use super::accumulator::{
    Accumulator, AccumulatorConfig, AppendError, FlushMarker, NewRecord, ProducerBatch, RecordId,
    Stamp,
};
use super::delivery::{BatchOutcome, DeliveryError, Written};
use super::partitioner::{
    place, Partitioner, Placement, RecordToPlace, StickyPartitioner, TopicPartitions,
};
use crate::cluster::{
    Cluster, ExponentialBackoff, Problem, RequestBody, RequestError, RequestId, Retry, Rng, Target,
};
use crate::config::{Acks, ProducerConfig};
use crate::error::Error;
use crate::events::ConnectionEvent;
use crate::group::TopicPartition;
use crate::protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::messages::produce::{
    PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
};
use crate::protocol::{ApiKey, EncodeError, ErrorCode, Message, Writer};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

/// A batch's outcome as the core holds it until it is decided: dropped
/// undecided (the core went away), it decides `Closed`, so that no
/// record's future waits forever.
#[derive(Debug)]
struct Slot(Option<Part>);

/// The records of a queued batch in the outcome their futures read: the
/// whole of it, or a part of a batch that was split (see
/// [`BatchOutcome::decide_part`]).
#[derive(Debug, Clone)]
struct Part {
    outcome: Arc<BatchOutcome>,
    start: u32,
    end: u32,
}

impl Part {
    fn whole(outcome: Arc<BatchOutcome>) -> Part {
        Part {
            outcome,
            start: 0,
            end: u32::MAX,
        }
    }

    /// Decides it; returns the wakers to wake once no lock is held.
    fn decide(&self, outcome: Result<Written, DeliveryError>) -> Vec<Waker> {
        self.outcome.decide_part(self.start, self.end, outcome)
    }

    fn closed(&self) -> DeliveryError {
        DeliveryError::Closed {
            topic: self.outcome.topic().to_owned(),
            partition: self.outcome.partition(),
        }
    }
}

impl Slot {
    /// The outcome, to be decided by the caller.
    fn take(mut self) -> Part {
        self.0.take().expect("a slot holds its outcome until taken")
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(part) = self.0.take() {
            part.decide(Err(part.closed()))
                .into_iter()
                .for_each(Waker::wake);
        }
    }
}

/// Where `append` queued a record: what its future reads its outcome from.
#[derive(Debug)]
pub(crate) struct Queued {
    /// The record opened or closed a batch: the sender must look again
    /// before its next deadline.
    pub news: bool,
    /// Its batch's outcome.
    pub outcome: Arc<BatchOutcome>,
    /// Its place in the batch.
    pub index: u32,
}

/// Hashes a [`RecordId`] (a counter, unique within the producer) with one
/// multiplication: every record is entered and removed once, and no key
/// comes from outside, so SipHash's protection buys nothing here.
#[derive(Default, Clone, Copy)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: the high bits, which hashbrown uses, depend on
        // every bit of the counter.
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type BuildIdHasher = std::hash::BuildHasherDefault<IdHasher>;

/// Outcomes decided and not yet handed to the records' futures.
type Outcomes = Vec<(Part, Result<Written, DeliveryError>)>;

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
    /// `batch.size` (the sticky partitioner switches after it).
    pub batch_size: usize,
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
    /// Its partition count.
    Known(i32),
}

/// Why a record was not queued.
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

/// The producer id and epoch (idempotence), and where getting one stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pid {
    /// None asked for yet (or the last request failed: `pid_retry` says
    /// when to ask again).
    None,
    /// InitProducerId in flight.
    Asking,
    /// Known.
    Known { id: i64, epoch: i16 },
    /// A batch failed with its sequence numbers used: new sequences need a
    /// new epoch, asked for once nothing is in flight (KIP-360).
    Bump { id: i64, epoch: i16 },
}

/// A partition's sequence numbers (idempotence).
#[derive(Debug, Default)]
struct Sequences {
    /// The next base sequence to give.
    next: i32,
    /// Base sequences given and not yet resolved, in order.
    unresolved: BTreeSet<i32>,
    /// Requests carrying a batch of this partition.
    in_flight: usize,
}

#[derive(Debug)]
enum Pending {
    InitPid,
    Produce {
        broker: i32,
        batches: Vec<ProducerBatch>,
        sent: Instant,
    },
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

/// InitProducerId as this producer asks it: a broker too old to bump an
/// epoch (below v3, without `producer_id`/`producer_epoch` in the request)
/// is asked for a new producer id instead, as the Java client does.
#[derive(Debug)]
struct InitPid(InitProducerIdRequest);

impl RequestBody for InitPid {
    fn api_key(&self) -> ApiKey {
        ApiKey::InitProducerId
    }

    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        if version < 3 {
            let fresh = InitProducerIdRequest {
                producer_id: -1,
                producer_epoch: -1,
                ..self.0.clone()
            };
            return fresh.encode(w, version);
        }
        self.0.encode(w, version)
    }
}

/// A Produce request, with the size of its record batches told ahead (its
/// frame is made that large at once, not grown as the batches are copied
/// in).
#[derive(Debug)]
struct Produce {
    request: ProduceRequest,
    records: usize,
}

impl RequestBody for Produce {
    fn api_key(&self) -> ApiKey {
        ApiKey::Produce
    }

    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        self.request.encode(w, version)
    }

    fn size_hint(&self) -> usize {
        self.records
    }
}

/// The producer's state.
pub(crate) struct ProducerCore {
    cluster: Cluster,
    acc: Accumulator,
    settings: ProducerSettings,
    rng: Rng,
    partitioner: Option<Arc<dyn Partitioner>>,
    /// Topics produced to, and when last.
    topics: BTreeMap<String, Instant>,
    sticky: BTreeMap<String, StickyPartitioner>,
    pid: Pid,
    pid_retry: Retry,
    sequences: BTreeMap<TopicPartition, Sequences>,
    /// Each partition's run of retriable failures (its retries wait
    /// longer each time, under the retry policy).
    backoff: BTreeMap<TopicPartition, Retry>,
    /// The last failure of each partition, for a timeout's message.
    last_failure: BTreeMap<TopicPartition, String>,
    in_flight: BTreeMap<RequestId, Pending>,
    per_broker: BTreeMap<i32, usize>,
    /// The outcome of each batch not decided yet, by its first record.
    slots: HashMap<RecordId, Slot, BuildIdHasher>,
    /// Records given and not delivered or failed yet.
    outstanding: usize,
    /// Outcomes decided under the lock, handed to the records' futures
    /// after it is released ([`ProducerCore::take_outcomes`]), so that
    /// waking the application never holds up a `send`.
    outcomes: Outcomes,
    /// The last connection problem (a refused connection, failed
    /// authentication), for the errors of calls that time out.
    last_problem: Option<String>,
    /// Delivered and failed records so far.
    delivered: u64,
    failed: u64,
    /// The time of the last step or append (deadlines are computed from it).
    now: Instant,
    counters: BTreeMap<TopicPartition, PartitionCounters>,
}

impl std::fmt::Debug for ProducerCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerCore")
            .field("pid", &self.pid)
            .field("topics", &self.topics.keys().collect::<Vec<_>>())
            .field("in_flight", &self.in_flight.len())
            .field("outstanding", &self.outstanding)
            .finish_non_exhaustive()
    }
}

/// Errors a retry can cure (the Java client's `RetriableException`s for
/// Produce).
fn retriable(code: ErrorCode) -> bool {
    code.is_retriable()
}

/// Errors that say the leader moved: the metadata is refreshed.
fn leader_moved(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NotLeaderOrFollower
            | ErrorCode::LeaderNotAvailable
            | ErrorCode::UnknownTopicOrPartition
            | ErrorCode::KafkaStorageError
            | ErrorCode::NotEnoughReplicas
    )
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
        ProducerCore {
            now,
            cluster,
            acc,
            settings,
            rng: Rng::new(seed),
            partitioner,
            topics: BTreeMap::new(),
            sticky: BTreeMap::new(),
            pid: Pid::None,
            pid_retry: Retry::default(),
            sequences: BTreeMap::new(),
            backoff: BTreeMap::new(),
            last_failure: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            per_broker: BTreeMap::new(),
            slots: HashMap::default(),
            outstanding: 0,
            outcomes: Vec::new(),
            last_problem: None,
            counters: BTreeMap::new(),
            delivered: 0,
            failed: 0,
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
        // does not know is created only where the broker does so itself.
        cc.allow_auto_create_topics = true;
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
            batch_size: config.batch_size() as usize,
        };
        ProducerCore::new(cluster, acc, settings, None, now, seeds.next_u64())
    }

    /// Places records that name no partition with `partitioner` (the
    /// built-in placement when `None`).
    pub fn set_partitioner(&mut self, partitioner: Option<Arc<dyn Partitioner>>) {
        self.partitioner = partitioner;
    }

    // ===== records in =====

    /// Marks `topic` as produced to at `now`; the metadata covers it from
    /// the next step on.
    pub fn use_topic(&mut self, now: Instant, topic: &str) {
        if self.topics.insert(topic.to_owned(), now).is_none() {
            self.cluster.set_topics(self.topics.keys().cloned());
        }
    }

    /// What the metadata says of `topic`: `Unknown` too for a topic not
    /// produced to (or forgotten after `metadata.max.idle.ms`), whose
    /// metadata is not kept fresh ([`ProducerCore::use_topic`] asks for it).
    pub fn topic_state(&self, topic: &str) -> TopicState {
        if !self.topics.contains_key(topic) {
            return TopicState::Unknown;
        }
        match self.cluster.metadata().topics.get(topic) {
            None => TopicState::Unknown,
            Some(t) if t.error != ErrorCode::None => TopicState::Failed(t.error),
            Some(t) if t.partitions.is_empty() => TopicState::Unknown,
            Some(t) => TopicState::Known(t.partitions.len() as i32),
        }
    }

    /// Places `record` (its topic's metadata must be known:
    /// [`ProducerCore::topic_state`]) and queues it. [`Queued::news`] says
    /// whether the record opened or closed a batch, so that the sender
    /// must look again before its next deadline (a record that joins an
    /// open batch changes nothing the sender waits for).
    pub fn append(&mut self, now: Instant, record: OutRecord) -> Result<Queued, Refused> {
        let TopicState::Known(count) = self.topic_state(&record.topic) else {
            return Err(Refused::Unknown(Box::new(record)));
        };
        self.now = self.now.max(now);
        if let Some(last) = self.topics.get_mut(&record.topic) {
            *last = now;
        }
        let to_place = RecordToPlace {
            topic: &record.topic,
            partition: record.partition,
            key: record.key.as_deref(),
            value: record.value.as_deref(),
        };
        let placement = place(
            &to_place,
            count,
            self.settings.ignore_keys,
            self.partitioner.as_deref(),
        )
        .map_err(|e| Refused::Invalid(Error::Partitioner(e)))?;
        let sticky = matches!(placement, Placement::Sticky);
        let partition = match placement {
            Placement::Partition(p) => p,
            _ => {
                let available: Vec<i32> = self
                    .cluster
                    .metadata()
                    .topics
                    .get(&record.topic)
                    .map(|t| {
                        t.partitions
                            .iter()
                            .filter(|(_, p)| p.leader >= 0)
                            .map(|(i, _)| *i)
                            .collect()
                    })
                    .unwrap_or_default();
                let batch_size = self.settings.batch_size as u32;
                let sticky = self
                    .sticky
                    .entry(record.topic.clone())
                    .or_insert_with(|| StickyPartitioner::new(record.topic.clone(), batch_size));
                sticky
                    .partition(
                        &TopicPartitions {
                            count,
                            available: &available,
                        },
                        &mut self.rng,
                    )
                    .map_err(|e| Refused::Invalid(Error::Partitioner(e)))?
            }
        };
        let size =
            record.key.as_ref().map_or(0, Bytes::len) + record.value.as_ref().map_or(0, Bytes::len);
        // Moved, not copied: the record comes back whole if it must wait.
        let OutRecord {
            topic,
            partition: asked,
            key,
            value,
            headers,
            timestamp,
        } = record;
        let tp = TopicPartition::new(topic, partition);
        let new = NewRecord {
            key,
            value,
            headers,
            timestamp,
        };
        match self.acc.append(now, &tp, &new) {
            Ok(appended) => {
                if sticky {
                    if let Some(s) = self.sticky.get_mut(&tp.topic) {
                        s.appended(size, true);
                    }
                }
                self.outstanding += 1;
                let slot = self.slots.entry(appended.batch).or_insert_with(|| {
                    Slot(Some(Part::whole(Arc::new(BatchOutcome::new(
                        &tp.topic,
                        tp.partition,
                    )))))
                });
                let outcome = slot
                    .0
                    .as_ref()
                    .expect("a slot in the map holds its outcome")
                    .outcome
                    .clone();
                // News for a leader with a request in flight can wait:
                // its answer steps the sender, which then sends all that
                // is ready for it at once (waking the sender for each
                // batch would cost a thread wake-up per batch and send
                // smaller requests).
                let news = self.acc.take_news() && !self.awaits_answer(&tp);
                Ok(Queued {
                    news,
                    outcome,
                    index: appended.index,
                })
            }
            Err(AppendError::BufferFull { .. }) => {
                let NewRecord {
                    key,
                    value,
                    headers,
                    timestamp,
                } = new;
                let record = OutRecord {
                    topic: tp.topic,
                    partition: asked,
                    key,
                    value,
                    headers,
                    timestamp,
                };
                Err(Refused::Full(Box::new(record)))
            }
            Err(AppendError::RecordTooLarge { size, max }) => Err(Refused::Invalid(Error::Config {
                property: "max.request.size".into(),
                reason: format!(
                    "a record of {size} bytes for {tp} is larger than max.request.size, buffer.memory or the batch format allow ({max})"
                ),
            })),
            Err(AppendError::Invalid(e)) => Err(Refused::Invalid(Error::Delivery(
                DeliveryError::Encode {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    reason: e.to_string(),
                },
            ))),
        }
    }

    /// Whether `tp`'s leader has a Produce request in flight.
    fn awaits_answer(&self, tp: &TopicPartition) -> bool {
        self.cluster
            .metadata()
            .leader(&tp.topic, tp.partition)
            .is_some_and(|b| self.per_broker.get(&b).copied().unwrap_or(0) > 0)
    }

    /// Whether a `send` that waits for room in `buffer.memory` for a
    /// record of `size` bytes goes on: once an eighth of `buffer.memory`
    /// is free beyond the record (or all of it, for a record that large).
    /// Waking it as soon as the record fits would wake it for each batch
    /// delivered, to append one record and wait again.
    pub fn has_room(&self, size: usize) -> bool {
        let total = self.acc.config().buffer_memory;
        let wanted = size.saturating_add(total / 8).min(total).max(size);
        self.acc.available() >= wanted
    }

    /// Records given and not yet delivered or failed.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Makes every queued record ready to send now (`flush`); the marker
    /// tells when the records given so far are all delivered or failed
    /// ([`ProducerCore::flush_done`]).
    pub fn flush(&mut self) -> FlushMarker {
        self.acc.flush()
    }

    /// Whether every record given before `marker` was delivered or failed.
    pub fn flush_done(&self, marker: FlushMarker) -> bool {
        self.acc.flush_done(marker)
    }

    /// Partitions of `topic` as the metadata lists them.
    pub fn partitions(&self, topic: &str) -> Option<Vec<i32>> {
        self.cluster
            .metadata()
            .topics
            .get(topic)
            .filter(|t| t.error == ErrorCode::None && !t.partitions.is_empty())
            .map(|t| t.partitions.keys().copied().collect())
    }

    /// What the producer did for each partition it wrote to.
    pub fn partition_counters(&self) -> &BTreeMap<TopicPartition, PartitionCounters> {
        &self.counters
    }

    /// Bytes of records held (queued or in flight).
    pub fn buffered_bytes(&self) -> usize {
        self.acc.buffered_bytes()
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
        self.expire(now);
        self.producer_id(now);
        self.send_ready(now);
        self.route_responses(now);
        self.collect_problems();
    }

    /// The earliest deadline, past ones included.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.next_deadline_after(None)
    }

    fn next_deadline_after(&self, after: Option<Instant>) -> Option<Instant> {
        let later = |t: &Instant| after.is_none_or(|a| *t > a);
        let now = after.unwrap_or(self.now);
        [
            self.cluster.poll_timeout(),
            self.acc.next_deadline(now),
            self.pid_retry.not_before(),
            self.topics
                .values()
                .min()
                .map(|t| *t + self.settings.metadata_max_idle),
        ]
        .into_iter()
        .flatten()
        .filter(later)
        .min()
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
        for batch in self.acc.abort_all() {
            self.fail_batch(&batch, |tp| DeliveryError::Closed {
                topic: tp.topic.clone(),
                partition: tp.partition,
            });
        }
        let pending = std::mem::take(&mut self.in_flight);
        for (_, p) in pending {
            if let Pending::Produce { batches, .. } = p {
                for batch in batches {
                    self.fail_batch(&batch, |tp| DeliveryError::Closed {
                        topic: tp.topic.clone(),
                        partition: tp.partition,
                    });
                }
            }
        }
        for (_, slot) in self.slots.drain() {
            let part = slot.take();
            let closed = part.closed();
            self.outcomes.push((part, Err(closed)));
        }
        self.outstanding = 0;
    }

    /// The outcomes decided since the last call, as one piece of work that
    /// records them and wakes the futures waiting for them, in order;
    /// `None` when there are none. Run it after releasing the lock the core
    /// is under.
    pub fn take_outcomes(&mut self) -> Option<Box<dyn FnOnce() + Send>> {
        if self.outcomes.is_empty() {
            return None;
        }
        let outcomes = std::mem::take(&mut self.outcomes);
        Some(Box::new(move || {
            for (part, outcome) in outcomes {
                part.decide(outcome).into_iter().for_each(Waker::wake);
            }
        }))
    }

    fn forget_idle_topics(&mut self, now: Instant) {
        let idle = self.settings.metadata_max_idle;
        let busy: BTreeSet<String> = self
            .acc
            .partitions_with_data()
            .map(|tp| tp.topic.clone())
            .collect();
        let before = self.topics.len();
        self.topics
            .retain(|t, last| busy.contains(t) || now.saturating_duration_since(*last) < idle);
        if self.topics.len() != before {
            self.sticky.retain(|t, _| self.topics.contains_key(t));
            self.cluster.set_topics(self.topics.keys().cloned());
        }
    }

    fn expire(&mut self, now: Instant) {
        for batch in self.acc.expire(now) {
            let after = self.settings.delivery_timeout;
            let last = self
                .last_failure
                .get(&batch.tp)
                .cloned()
                .or_else(|| self.leader_trouble(&batch.tp))
                .or_else(|| self.last_problem.clone());
            self.forget_sequence(&batch);
            self.fail_batch(&batch, |tp| DeliveryError::TimedOut {
                topic: tp.topic.clone(),
                partition: tp.partition,
                after,
                last: last.clone(),
            });
        }
    }

    /// Asks for a producer id (or a new epoch) when one is needed.
    fn producer_id(&mut self, now: Instant) {
        if !self.settings.idempotence || !self.pid_retry.ready(now) {
            return;
        }
        let (producer_id, producer_epoch) = match self.pid {
            Pid::None if !self.acc.is_empty() => (-1, -1),
            // A new epoch once nothing is in flight: the sequences restart.
            Pid::Bump { id, epoch } if self.produce_in_flight() == 0 => (id, epoch),
            _ => return,
        };
        let body = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: i32::MAX,
            producer_id,
            producer_epoch,
            ..Default::default()
        };
        let id = self
            .cluster
            .request(now, Target::AnyBroker, Box::new(InitPid(body)));
        self.in_flight.insert(id, Pending::InitPid);
        self.pid = Pid::Asking;
    }

    fn produce_in_flight(&self) -> usize {
        self.per_broker.values().sum()
    }

    fn send_ready(&mut self, now: Instant) {
        // The metadata is borrowed field by field, not copied: this runs
        // at every step.
        let metadata = self.cluster.metadata();
        let ready = self.acc.ready(now, |tp: &TopicPartition| {
            metadata.leader(&tp.topic, tp.partition)
        });
        if !ready.unknown_leaders.is_empty() {
            self.cluster.request_metadata_refresh(now);
        }
        for broker in ready.brokers {
            loop {
                if self.per_broker.get(&broker).copied().unwrap_or(0) >= self.settings.max_in_flight
                {
                    break;
                }
                let idempotence = self.settings.idempotence;
                let pid = self.pid;
                let sequences = &mut self.sequences;
                let metadata = self.cluster.metadata();
                let leader_of = |tp: &TopicPartition| metadata.leader(&tp.topic, tp.partition);
                let drained = self.acc.drain(now, broker, leader_of, |tp, info| {
                    if !idempotence {
                        return Some(None);
                    }
                    let Pid::Known { id, epoch } = pid else {
                        return None;
                    };
                    let seq = sequences.entry(tp.clone()).or_default();
                    match info.stamp {
                        // A retry goes alone, first among its partition's
                        // unresolved batches: order is kept.
                        Some(stamp) => (seq.in_flight == 0
                            && seq.unresolved.first() == Some(&stamp.base_sequence)
                            && stamp.epoch == epoch)
                            .then_some(Some(stamp)),
                        None => {
                            if seq.in_flight >= 5 {
                                return None;
                            }
                            let base = seq.next;
                            seq.next = seq.next.wrapping_add(info.record_count as i32) & i32::MAX;
                            seq.unresolved.insert(base);
                            Some(Some(Stamp {
                                producer_id: id,
                                epoch,
                                base_sequence: base,
                            }))
                        }
                    }
                });
                for (batch, e) in drained.failed {
                    log::warn!("{}: a batch could not be encoded: {e}", batch.tp);
                    self.fail_encoding(&batch, &e);
                }
                if drained.batches.is_empty() {
                    break;
                }
                self.send_batches(now, broker, drained.batches);
            }
        }
    }

    fn send_batches(&mut self, now: Instant, broker: i32, batches: Vec<ProducerBatch>) {
        let mut topics: BTreeMap<&str, Vec<PartitionProduceData>> = BTreeMap::new();
        for b in &batches {
            let c = self.counters.entry(b.tp.clone()).or_default();
            c.batches += 1;
            c.bytes += b.bytes.len() as u64;
            c.uncompressed_bytes += b.size as u64;
            if b.attempts <= 1 {
                c.queue_time += now.saturating_duration_since(b.created);
                c.first_sent += 1;
            } else {
                c.retries += 1;
            }
            topics
                .entry(&b.tp.topic)
                .or_default()
                .push(PartitionProduceData {
                    index: b.tp.partition,
                    records: Some(b.bytes.clone()),
                    ..Default::default()
                });
            if let Some(seq) = self.sequences.get_mut(&b.tp) {
                seq.in_flight += 1;
            }
        }
        let body = ProduceRequest {
            transactional_id: None,
            acks: self.settings.acks,
            timeout_ms: self
                .settings
                .request_timeout
                .as_millis()
                .min(i32::MAX as u128) as i32,
            topic_data: topics
                .into_iter()
                .map(|(name, partition_data)| TopicProduceData {
                    name: name.to_owned(),
                    partition_data,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let records = batches.iter().map(|b| b.bytes.len() + 64).sum();
        let body = Produce {
            request: body,
            records,
        };
        let target = Target::Broker(broker);
        let id = if self.settings.acks == 0 {
            // The broker answers nothing: the batches count as delivered
            // once the request is handed to the socket (offset unknown).
            self.cluster.request_unanswered(now, target, Box::new(body))
        } else {
            self.cluster.request(now, target, Box::new(body))
        };
        *self.per_broker.entry(broker).or_default() += 1;
        self.in_flight.insert(
            id,
            Pending::Produce {
                broker,
                batches,
                sent: now,
            },
        );
    }

    // ===== answers =====

    fn route_responses(&mut self, now: Instant) {
        while let Some((id, result)) = self.cluster.poll_response() {
            match self.in_flight.remove(&id) {
                Some(Pending::InitPid) => self.handle_pid(now, result),
                Some(Pending::Produce {
                    broker,
                    batches,
                    sent,
                }) => {
                    if let Some(n) = self.per_broker.get_mut(&broker) {
                        *n = n.saturating_sub(1);
                    }
                    for b in &batches {
                        if let Some(seq) = self.sequences.get_mut(&b.tp) {
                            seq.in_flight = seq.in_flight.saturating_sub(1);
                        }
                        let c = self.counters.entry(b.tp.clone()).or_default();
                        c.latency += now.saturating_duration_since(sent);
                        c.answered += 1;
                    }
                    self.handle_produce(now, batches, result);
                }
                None => {}
            }
        }
    }

    fn handle_pid(&mut self, now: Instant, result: Result<crate::cluster::Response, RequestError>) {
        let answer = result.map_err(|e| e.to_string()).and_then(|r| {
            r.decode::<InitProducerIdResponse>()
                .map_err(|e| e.to_string())
        });
        match answer {
            Ok(r) if r.error_code == 0 => {
                log::debug!("producer id {} epoch {}", r.producer_id, r.producer_epoch);
                self.pid = Pid::Known {
                    id: r.producer_id,
                    epoch: r.producer_epoch,
                };
                self.pid_retry.succeeded();
                // A new producer id or epoch: every partition's sequences
                // restart at 0, and batches waiting for a retry are
                // stamped anew in their order.
                self.sequences.clear();
                let (id, epoch) = (r.producer_id, r.producer_epoch);
                let waiting: Vec<TopicPartition> =
                    self.acc.partitions_with_data().cloned().collect();
                for tp in waiting {
                    let seq = self.sequences.entry(tp.clone()).or_default();
                    let restamped = self.acc.restamp(&tp, |info| {
                        let base = seq.next;
                        seq.next = seq.next.wrapping_add(info.record_count as i32) & i32::MAX;
                        seq.unresolved.insert(base);
                        Some(Stamp {
                            producer_id: id,
                            epoch,
                            base_sequence: base,
                        })
                    });
                    if let Err(e) = restamped {
                        log::warn!("{tp}: batches waiting for a retry could not be given the new epoch: {e}");
                    }
                }
            }
            other => {
                let why = match other {
                    Ok(r) => ErrorCode::from_code(r.error_code).to_string(),
                    Err(e) => e,
                };
                let unit = self.rng.unit();
                let delay = self
                    .pid_retry
                    .failed(now, &self.settings.retry_backoff, unit);
                log::warn!("InitProducerId failed ({why}); asking again in {delay:?}");
                self.pid = match self.pid {
                    Pid::Asking => Pid::None,
                    p => p,
                };
            }
        }
    }

    fn handle_produce(
        &mut self,
        now: Instant,
        batches: Vec<ProducerBatch>,
        result: Result<crate::cluster::Response, RequestError>,
    ) {
        if self.settings.acks == 0 && result.is_ok() {
            for batch in batches {
                self.complete(&batch, -1, -1);
                self.acc.recycle(batch.bytes);
            }
            return;
        }
        let response = match result
            .map_err(|e| (e.is_retriable(), e.to_string()))
            .and_then(|r| {
                r.decode::<ProduceResponse>()
                    .map_err(|e| (true, format!("Produce answer unreadable: {e}")))
            }) {
            Ok(r) => r,
            Err((_, why)) => {
                // The request may or may not have been written: sent again
                // (with the same sequence numbers, so the broker keeps one
                // copy).
                for batch in batches {
                    self.retry(now, batch, why.clone(), false);
                }
                return;
            }
        };
        let mut answers: BTreeMap<(String, i32), _> = BTreeMap::new();
        for topic in response.responses {
            for p in topic.partition_responses {
                answers.insert((topic.name.clone(), p.index), p);
            }
        }
        for batch in batches {
            let Some(answer) = answers.remove(&(batch.tp.topic.clone(), batch.tp.partition)) else {
                self.retry(now, batch, "left out of the Produce answer".into(), false);
                continue;
            };
            let code = ErrorCode::from_code(answer.error_code);
            match code {
                ErrorCode::None | ErrorCode::DuplicateSequenceNumber => {
                    let append_time = answer.log_append_time_ms;
                    self.complete(&batch, answer.base_offset, append_time);
                    self.acc.recycle(batch.bytes);
                }
                ErrorCode::OutOfOrderSequenceNumber | ErrorCode::UnknownProducerId => {
                    // An earlier batch of the partition is not answered
                    // yet (or failed, and a new epoch is on its way): this
                    // one follows it again. Otherwise the broker lost this
                    // producer's state (its records were deleted, say):
                    // the producer takes a new epoch, whose sequences
                    // start again at 0 (KIP-360), and sends it with those.
                    if !self.earlier_unresolved(&batch) {
                        log::warn!(
                            "{}: Produce refused with {code}; taking a new producer epoch",
                            batch.tp
                        );
                        self.bump_epoch();
                    }
                    self.retry(now, batch, code.to_string(), false);
                }
                // Too large for the broker (its `message.max.bytes`, or
                // the topic's `max.message.bytes`): split in two and sent
                // again, as the Java client does; a single record too
                // large fails below.
                ErrorCode::MessageTooLarge if batch.records.len() > 1 => {
                    self.split(now, batch);
                }
                c if retriable(c) => {
                    let refresh = leader_moved(c);
                    let why = match &answer.error_message {
                        Some(m) => format!("{c} ({m})"),
                        None => c.to_string(),
                    };
                    self.retry(now, batch, why, refresh);
                }
                c => {
                    log::warn!(
                        "{}: Produce refused with {c}{}; {} records fail",
                        batch.tp,
                        answer
                            .error_message
                            .as_deref()
                            .map(|m| format!(" ({m})"))
                            .unwrap_or_default(),
                        batch.records.len()
                    );
                    self.forget_sequence(&batch);
                    let message = answer.error_message.clone();
                    self.fail_batch(&batch, |tp| DeliveryError::Broker {
                        topic: tp.topic.clone(),
                        partition: tp.partition,
                        code: c,
                        message: message.clone(),
                    });
                }
            }
        }
    }

    /// Splits `batch`, refused as too large (MESSAGE_TOO_LARGE), into two
    /// halves queued in its place at once, each with the sequence numbers
    /// its records had (the broker wrote none of them), so the order and
    /// the exactly-once promise hold; each half is decided on its own. A
    /// half refused again is split again, down to single records.
    fn split(&mut self, now: Instant, batch: ProducerBatch) {
        let halves = match batch.split() {
            Ok(halves) => halves,
            Err(e) => {
                log::warn!(
                    "{}: a batch refused as too large could not be split ({e}); {} records fail",
                    batch.tp,
                    batch.records.len()
                );
                self.fail_encoding(&batch, &e);
                return;
            }
        };
        log::info!(
            "{}: a batch of {} records ({} bytes) is too large for the broker (MESSAGE_TOO_LARGE); sending it again in two",
            batch.tp,
            batch.records.len(),
            batch.bytes.len()
        );
        let counters = self.counters.entry(batch.tp.clone()).or_default();
        counters.errors += 1;
        counters.splits += 1;
        let slot = self.slots.remove(&batch.first());
        // The memory moves to the halves.
        self.acc.complete(&batch);
        for (half, start) in halves {
            if let (Some(stamp), Some(seq)) = (half.stamp, self.sequences.get_mut(&half.tp)) {
                seq.unresolved.insert(stamp.base_sequence);
            }
            if let Some(Part {
                outcome, start: s0, ..
            }) = slot.as_ref().and_then(|s| s.0.clone())
            {
                let from = s0 + start as u32;
                let part = Part {
                    outcome,
                    start: from,
                    end: from + half.records.len() as u32,
                };
                self.slots.insert(half.first(), Slot(Some(part)));
            }
            self.acc.reenqueue(half, now);
        }
        if let Some(mut slot) = slot {
            // Its records are the halves' now.
            slot.0 = None;
        }
    }

    /// Fails `batch`, which could not be encoded (or split), with
    /// `DeliveryError::Encode`; the gap in its sequences takes a new epoch.
    fn fail_encoding(&mut self, batch: &ProducerBatch, e: &crate::records::RecordsError) {
        self.forget_sequence(batch);
        let reason = e.to_string();
        self.fail_batch(batch, |tp| DeliveryError::Encode {
            topic: tp.topic.clone(),
            partition: tp.partition,
            reason: reason.clone(),
        });
    }

    /// Whether a batch of the same partition with a lower sequence is
    /// still unresolved.
    fn earlier_unresolved(&self, batch: &ProducerBatch) -> bool {
        match (batch.stamp, self.sequences.get(&batch.tp)) {
            (Some(stamp), Some(seq)) => seq
                .unresolved
                .first()
                .is_some_and(|first| *first != stamp.base_sequence),
            _ => false,
        }
    }

    fn retry(&mut self, now: Instant, batch: ProducerBatch, why: String, refresh: bool) {
        self.counters.entry(batch.tp.clone()).or_default().errors += 1;
        if refresh {
            self.cluster.request_metadata_refresh(now);
        }
        let timed_out =
            now.saturating_duration_since(batch.created) >= self.settings.delivery_timeout;
        // `attempts` counts sends, the first included: as the Java client,
        // a batch is sent up to `retries` + 1 times.
        if batch.attempts > self.settings.retries || timed_out {
            log::warn!(
                "{}: not delivered ({why}); {} records fail",
                batch.tp,
                batch.records.len()
            );
            self.forget_sequence(&batch);
            let after = self.settings.delivery_timeout;
            self.fail_batch(&batch, |tp| DeliveryError::TimedOut {
                topic: tp.topic.clone(),
                partition: tp.partition,
                after,
                last: Some(why.clone()),
            });
            return;
        }
        log::debug!("{}: retrying a batch ({why})", batch.tp);
        let unit = self.rng.unit();
        let delay = self.backoff.entry(batch.tp.clone()).or_default().failed(
            now,
            &self.settings.retry_backoff,
            unit,
        );
        self.last_failure.insert(batch.tp.clone(), why);
        self.acc.reenqueue(batch, now + delay);
    }

    /// What the metadata says is wrong with `tp`'s leader, if anything: a
    /// partition without a leader, or a leader the metadata lists no
    /// address for (a broker that is down).
    fn leader_trouble(&self, tp: &TopicPartition) -> Option<String> {
        let metadata = self.cluster.metadata();
        let Some(topic) = metadata.topics.get(&tp.topic) else {
            return Some(format!("no metadata for topic {}", tp.topic));
        };
        let Some(p) = topic.partitions.get(&tp.partition) else {
            return Some(format!("{tp} is not in the metadata"));
        };
        if p.leader < 0 {
            return Some(format!("{tp} has no leader ({})", p.error));
        }
        if !metadata.brokers.contains_key(&p.leader) {
            return Some(format!(
                "{tp}'s leader, broker {}, is not among the live brokers the metadata lists",
                p.leader
            ));
        }
        None
    }

    /// Sends nothing more until a new epoch came (asked for once nothing
    /// is in flight).
    fn bump_epoch(&mut self) {
        if let Pid::Known { id, epoch } = self.pid {
            self.pid = Pid::Bump { id, epoch };
        }
    }

    /// A batch that failed for good left a gap in its partition's
    /// sequences: later batches would be refused as out of order, so the
    /// producer takes a new epoch (KIP-360) before it sends again.
    fn forget_sequence(&mut self, batch: &ProducerBatch) {
        let Some(stamp) = batch.stamp else {
            return;
        };
        if let Some(seq) = self.sequences.get_mut(&batch.tp) {
            seq.unresolved.remove(&stamp.base_sequence);
        }
        if matches!(self.pid, Pid::Known { epoch, .. } if epoch == stamp.epoch) {
            self.bump_epoch();
        }
    }

    fn complete(&mut self, batch: &ProducerBatch, base_offset: i64, append_time: i64) {
        self.backoff.remove(&batch.tp);
        self.last_failure.remove(&batch.tp);
        if let (Some(stamp), Some(seq)) = (batch.stamp, self.sequences.get_mut(&batch.tp)) {
            seq.unresolved.remove(&stamp.base_sequence);
        }
        self.counters.entry(batch.tp.clone()).or_default().records += batch.records.len() as u64;
        if let Some(slot) = self.slots.remove(&batch.first()) {
            let n = batch.records.len();
            self.delivered += n as u64;
            self.outstanding = self.outstanding.saturating_sub(n);
            let written = Written {
                base_offset,
                append_time,
            };
            self.outcomes.push((slot.take(), Ok(written)));
        }
        self.acc.complete(batch);
    }

    fn fail_batch(
        &mut self,
        batch: &ProducerBatch,
        error: impl Fn(&TopicPartition) -> DeliveryError,
    ) {
        self.counters
            .entry(batch.tp.clone())
            .or_default()
            .records_failed += batch.records.len() as u64;
        if let Some(slot) = self.slots.remove(&batch.first()) {
            let n = batch.records.len();
            self.failed += n as u64;
            self.outstanding = self.outstanding.saturating_sub(n);
            self.outcomes.push((slot.take(), Err(error(&batch.tp))));
        }
        self.acc.complete(batch);
    }

    fn collect_problems(&mut self) {
        while let Some(problem) = self.cluster.poll_problem() {
            let error = match problem {
                Problem::BootstrapUnreachable { attempts } => {
                    Error::BrokersUnreachable { attempts }
                }
                Problem::BrokerUnreachable {
                    broker,
                    addr,
                    purpose,
                    cause,
                } => Error::Connection {
                    broker,
                    addr,
                    purpose,
                    cause,
                },
                Problem::AuthenticationFailed {
                    broker,
                    addr,
                    mechanism,
                    message,
                    ..
                } => Error::Authentication {
                    broker,
                    addr,
                    mechanism,
                    message,
                },
                Problem::CoordinatorRefused { .. } => continue,
            };
            log::warn!("{error}; the producer goes on trying");
            self.last_problem = Some(error.to_string());
        }
    }
}
