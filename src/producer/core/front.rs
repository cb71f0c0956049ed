//! Records in: [`Front`], the part of the producer a `send` touches, behind
//! a lock of its own. The background task drives the rest of the core
//! (connections, requests, answers) under the client's lock and takes
//! this one only for moments (to take batches out, free their memory,
//! decide their records' outcomes, and publish what the metadata says of
//! the topics produced to), so an application appending records does not
//! wait while the task reads answers or writes requests. This is the
//! Java producer's split between its `RecordAccumulator` (locked per
//! partition) and the sender's state.
//!
//! The lock order is the client's lock, then this one, never the reverse:
//! nothing here reaches back into the core.

use super::super::accumulator::{Accumulator, AppendError, Memo, NewRecord, Now, RecordId};
use super::super::delivery::BatchOutcome;
use super::super::partitioner::{
    place, BuiltinPartitioner, Partitioner, Placement, RecordToPlace, StickyPartitioner,
    TopicPartitions,
};
use super::outcomes::{BuildIdHasher, Part, Slot};
use super::{OutRecord, Refused, TopicState};
use crate::cluster::Rng;
use crate::error::DeliveryError;
use crate::error::Error;
use crate::group::TopicPartition;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Locks `front` (a poisoned lock is taken over: an append that panicked
/// half-way left at worst a record counted and not queued).
pub(crate) fn lock(front: &Mutex<Front>) -> MutexGuard<'_, Front> {
    front.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where `append` queued a record: what its future reads its outcome from.
#[derive(Debug)]
pub(crate) struct Queued {
    /// The record opened or closed a batch while its leader has no
    /// request in flight: the sender must look again before its next
    /// deadline.
    pub news: bool,
    /// Its batch's outcome.
    pub outcome: Arc<BatchOutcome>,
    /// Its place in the batch.
    pub index: u32,
}

/// What the core last published of a topic produced to: what placing its
/// records needs, without the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicView {
    /// What the metadata says of it.
    pub state: TopicState,
    /// Its partitions with a leader, in order: what the sticky and random
    /// partitioners choose among.
    pub with_leader: Vec<i32>,
    /// Each partition's leader (-1: none), by partition.
    pub leaders: Vec<i32>,
}

/// How records that name no partition are placed.
#[derive(Clone)]
pub(crate) struct Placing {
    /// `partitioner.ignore.keys`.
    pub ignore_keys: bool,
    /// `partitioner`: how keyed records are placed.
    pub builtin: BuiltinPartitioner,
    /// `batch.size` (the sticky partitioner moves on after it).
    pub batch_size: usize,
    /// `sticky.partitioning.linger.ms` (or after this long).
    pub sticky_linger: Duration,
    /// A partitioner of the application's (`Producer::with_partitioner`).
    pub custom: Option<Arc<dyn Partitioner>>,
}

/// The records' way in: the accumulator, each queued batch's outcome,
/// the partitioners, and the view of the topics they place records by.
pub(crate) struct Front {
    /// The batches per partition and the memory they hold.
    pub(super) acc: Accumulator,
    /// The outcome of each batch not decided yet, by its first record.
    pub(super) slots: HashMap<RecordId, Slot, BuildIdHasher>,
    /// Records given and not delivered or failed yet.
    pub(super) outstanding: usize,
    placing: Placing,
    rng: Rng,
    sticky: BTreeMap<String, StickyPartitioner>,
    /// The topics produced to, as the core last published them
    /// ([`Front::publish`]); a topic not here is not known yet.
    topics: BTreeMap<String, TopicView>,
    /// When a record last opened a batch of each topic, since the core
    /// last took these ([`Front::take_used`]).
    used: BTreeMap<String, Instant>,
    /// The brokers with a Produce request in flight, as the core last
    /// published them.
    busy: Vec<i32>,
    /// When the background task last planned to wake by at the latest
    /// (its next deadline, as the core last computed it for the task;
    /// `None`: not by any time). A batch opened due later needs no
    /// wake-up: the task looks again by then.
    wake_at: Option<Instant>,
}

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front")
            .field("topics", &self.topics.keys().collect::<Vec<_>>())
            .field("outstanding", &self.outstanding)
            .field("buffered", &self.acc.buffered_bytes())
            .finish_non_exhaustive()
    }
}

impl Front {
    /// An empty front: nothing queued, no topic known.
    pub(crate) fn new(acc: Accumulator, placing: Placing, seed: u64) -> Self {
        Front {
            acc,
            slots: HashMap::default(),
            outstanding: 0,
            placing,
            rng: Rng::new(seed),
            sticky: BTreeMap::new(),
            topics: BTreeMap::new(),
            used: BTreeMap::new(),
            busy: Vec::new(),
            wake_at: None,
        }
    }

    /// Places records that name no partition with `partitioner` (the
    /// built-in placement when `None`).
    pub(crate) fn set_partitioner(&mut self, partitioner: Option<Arc<dyn Partitioner>>) {
        self.placing.custom = partitioner;
    }

    /// Takes what the core says of the topics produced to: a topic left
    /// out is forgotten (its sticky partition too).
    pub(super) fn publish(&mut self, topics: BTreeMap<String, TopicView>) {
        self.sticky.retain(|t, _| topics.contains_key(t));
        self.topics = topics;
    }

    /// Takes the brokers with a Produce request in flight.
    pub(super) fn set_busy(&mut self, busy: impl Iterator<Item = i32>) {
        self.busy.clear();
        self.busy.extend(busy);
    }

    /// Takes when the background task wakes next at the latest.
    pub(super) fn set_wake_at(&mut self, at: Option<Instant>) {
        self.wake_at = at;
    }

    /// When a record last opened a batch of each topic, since the last call.
    pub(super) fn take_used(&mut self) -> BTreeMap<String, Instant> {
        std::mem::take(&mut self.used)
    }

    /// Places `record` on a partition of its topic (as the Java client
    /// does) and queues it, when the core published the topic as known;
    /// else it comes back ([`Refused::Unknown`]), and the caller waits for
    /// the topic's metadata. [`Queued::news`] says whether the sender must
    /// look again before its next deadline (a record that joins an open
    /// batch changes nothing the sender waits for).
    ///
    /// `now` is read only when the record opens a batch (a record that
    /// joins an open batch reads no clock).
    pub(crate) fn append(&mut self, now: impl Now, record: OutRecord) -> Result<Queued, Refused> {
        let Some(view) = self.topics.get(&record.topic) else {
            return Err(Refused::Unknown(Box::new(record)));
        };
        let TopicState::Known(count) = view.state else {
            return Err(Refused::Unknown(Box::new(record)));
        };
        let (partition, sticky) = choose_partition(
            &self.placing,
            &mut self.sticky,
            &mut self.rng,
            view,
            &record,
            count,
        )?;
        let leader = view.leaders.get(partition as usize).copied().unwrap_or(-1);
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
        let mut now = Memo::new(now);
        let appended = self.acc.append(&mut now, &tp, &new);
        let opened_at = now.read();
        if let Some(now) = opened_at {
            match self.used.get_mut(&tp.topic) {
                Some(last) => *last = now,
                None => {
                    self.used.insert(tp.topic.clone(), now);
                }
            }
        }
        match appended {
            Ok(appended) => {
                if sticky {
                    if let Some(s) = self.sticky.get_mut(&tp.topic) {
                        s.appended_at(size, true, opened_at);
                    }
                }
                Ok(self.queued(&tp, leader, appended.batch, appended.index))
            }
            Err(e) => Err(not_queued(tp, asked, new, e)),
        }
    }

    /// A record appended to `tp` (led by `leader`) as record `index` of
    /// the batch opened by record `batch`: counted, and given that batch's
    /// outcome.
    fn queued(&mut self, tp: &TopicPartition, leader: i32, batch: RecordId, index: u32) -> Queued {
        self.outstanding += 1;
        let slot = self.slots.entry(batch).or_insert_with(|| {
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
        // News for a leader with a request in flight can wait: its answer
        // steps the sender, which then sends all that is ready for it at
        // once (waking the sender for each batch would cost a thread
        // wake-up per batch and send smaller requests). A batch opened
        // and not full is due only after `linger.ms`: the sender needs no
        // wake-up for it when it wakes by then anyway.
        let news = self.acc.take_news();
        let looks_by_then =
            |due: Option<Instant>| due.zip(self.wake_at).is_some_and(|(due, wake)| wake <= due);
        let news =
            news.any() && !self.busy.contains(&leader) && (news.closed || !looks_by_then(news.due));
        Queued {
            news,
            outcome,
            index,
        }
    }
}

/// The partition `record` goes to (steps 1 to 4 of the module
/// documentation of `producer`), and whether the topic's sticky
/// partitioner chose it.
fn choose_partition(
    placing: &Placing,
    sticky: &mut BTreeMap<String, StickyPartitioner>,
    rng: &mut Rng,
    view: &TopicView,
    record: &OutRecord,
    count: i32,
) -> Result<(i32, bool), Refused> {
    let to_place = RecordToPlace {
        topic: &record.topic,
        partition: record.partition,
        key: record.key.as_deref(),
        value: record.value.as_deref(),
    };
    let placement = place(
        &to_place,
        count,
        placing.ignore_keys,
        placing.custom.as_deref(),
        placing.builtin,
    )
    .map_err(|e| Refused::Invalid(Error::Partitioner(e)))?;
    match placement {
        Placement::Partition(p) => Ok((p, false)),
        Placement::Sticky => {
            // The usual case, for every record but the first of each run:
            // the partition chosen stays, and nothing is looked up or
            // allocated.
            if let Some(current) = sticky
                .get(&record.topic)
                .and_then(StickyPartitioner::current)
            {
                return Ok((current, true));
            }
            let batch_size = placing.batch_size as u32;
            let chosen = sticky
                .entry(record.topic.clone())
                .or_insert_with(|| {
                    StickyPartitioner::new(record.topic.clone(), batch_size)
                        .with_linger(placing.sticky_linger)
                })
                .partition(
                    &TopicPartitions {
                        count,
                        available: &view.with_leader,
                    },
                    rng,
                )
                .map_err(|e| Refused::Invalid(Error::Partitioner(e)))?;
            Ok((chosen, true))
        }
        Placement::Random => {
            // Among the partitions with a leader when there are some
            // (librdkafka's `random` partitioner draws again once when its
            // first draw has none).
            let mut available = view.with_leader.iter().copied().filter(|i| *i < count);
            let chosen = match available.clone().count() {
                0 => rng.below(count.max(1) as usize) as i32,
                n => available
                    .nth(rng.below(n))
                    .expect("below the count of partitions listed"),
            };
            Ok((chosen, false))
        }
    }
}

/// Why the accumulator did not take a record for `tp` (`asked`: the
/// partition the record named): a record that must wait comes back whole.
fn not_queued(tp: TopicPartition, asked: Option<i32>, new: NewRecord, e: AppendError) -> Refused {
    match e {
        AppendError::BufferFull { .. } => {
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
            Refused::Full(Box::new(record))
        }
        AppendError::RecordTooLarge { size, max } => Refused::Invalid(Error::Config {
            property: "max.request.size".into(),
            reason: format!(
                "a record of {size} bytes for {tp} is larger than max.request.size, buffer.memory or the batch format allow ({max})"
            ),
        }),
        AppendError::Invalid(e) => Refused::Invalid(Error::Delivery(DeliveryError::Encode {
            topic: tp.topic.clone(),
            partition: tp.partition,
            reason: e.to_string(),
        })),
    }
}
