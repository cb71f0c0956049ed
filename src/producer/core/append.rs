//! Records in: the topics produced to (their metadata kept fresh), and
//! `append`, which places a record on a partition (as the Java client
//! does) and queues it in the accumulator.

use super::super::accumulator::{AppendError, Memo, NewRecord, Now, RecordId};
use super::super::delivery::BatchOutcome;
use super::super::partitioner::{
    place, Placement, RecordToPlace, StickyPartitioner, TopicPartitions,
};
use super::outcomes::{Part, Slot};
use super::{OutRecord, ProducerCore, Refused, TopicState};
use crate::cluster::Cluster;
use crate::error::DeliveryError;
use crate::error::Error;
use crate::group::TopicPartition;
use crate::protocol::ErrorCode;
use crate::streak::Streak;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

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

impl ProducerCore {
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
            Some(t) if t.error != ErrorCode::None => {
                match self.missing.get(topic).and_then(Option::as_ref) {
                    Some(run) if run.span() >= self.settings.topic_propagation => {
                        TopicState::Missing {
                            code: *run.what(),
                            after: run.span(),
                        }
                    }
                    _ => TopicState::Failed(t.error),
                }
            }
            Some(t) if t.partitions.is_empty() => TopicState::Unknown,
            Some(t) => TopicState::Known(t.partitions.len() as i32),
        }
    }

    /// Notes, at each new answer to the Metadata request, which topics
    /// produced to it says do not exist (UNKNOWN_TOPIC_OR_PARTITION): such
    /// an answer goes on with the topic's run, any other word on the topic
    /// ends it (an answer that does not name the topic, asked before it
    /// was produced to, says nothing of it). Once a run spans
    /// `topic.metadata.propagation.max.ms` (an answer at least that long
    /// after the first still says so), [`ProducerCore::topic_state`] says
    /// `Missing`: a topic created a moment ago, not yet known to the
    /// broker that answered, has that long to reach it. A `warn` line
    /// names the topic then, and again every `REPORT_AGAIN_AFTER` while it
    /// lasts.
    pub(super) fn watch_missing_topics(&mut self) {
        let answered = self.cluster.metadata_answered_at();
        if answered == self.answer_seen {
            return;
        }
        self.answer_seen = answered;
        let Some(at) = answered else {
            return;
        };
        let grace = self.settings.topic_propagation;
        let metadata = self.cluster.metadata();
        for topic in self.topics.keys() {
            let Some(info) = metadata.topics.get(topic) else {
                continue;
            };
            if info.error != ErrorCode::UnknownTopicOrPartition {
                self.missing.remove(topic);
                continue;
            }
            let slot = self.missing.entry(topic.clone()).or_default();
            let run = Streak::note(slot, info.error, at, Duration::MAX);
            if run.due(at, grace) {
                run.mark_reported(at);
                log::warn!(
                    "topic {topic:?}: {} in every Metadata answer for {:?}: it does not exist and \
                     the cluster does not create it (the brokers' auto.create.topics.enable, or \
                     allow.auto.create.topics=false); send fails for it until it exists",
                    info.error,
                    run.span()
                );
            }
        }
    }

    /// Places `record` (its topic's metadata must be known:
    /// [`ProducerCore::topic_state`]) and queues it. [`Queued::news`] says
    /// whether the record opened or closed a batch, so that the sender
    /// must look again before its next deadline (a record that joins an
    /// open batch changes nothing the sender waits for).
    ///
    /// `now` is read only when the record opens a batch (a record that
    /// joins an open batch reads no clock); the topic counts as used then.
    pub fn append(&mut self, now: impl Now, record: OutRecord) -> Result<Queued, Refused> {
        let TopicState::Known(count) = self.topic_state(&record.topic) else {
            return Err(Refused::Unknown(Box::new(record)));
        };
        let (partition, sticky) = self.choose_partition(&record, count)?;
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
        if let Some(now) = now.read() {
            self.now = self.now.max(now);
            if let Some(last) = self.topics.get_mut(&tp.topic) {
                *last = now;
            }
        }
        match appended {
            Ok(appended) => {
                if sticky {
                    if let Some(s) = self.sticky.get_mut(&tp.topic) {
                        s.appended(size, true);
                    }
                }
                Ok(self.queued(&tp, appended.batch, appended.index))
            }
            Err(e) => Err(not_queued(tp, asked, new, e)),
        }
    }

    /// The partition `record` goes to (steps 1 to 4 of the module
    /// documentation of `producer`), and whether the topic's sticky
    /// partitioner chose it.
    fn choose_partition(&mut self, record: &OutRecord, count: i32) -> Result<(i32, bool), Refused> {
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
            self.settings.builtin_partitioner,
        )
        .map_err(|e| Refused::Invalid(Error::Partitioner(e)))?;
        match placement {
            Placement::Partition(p) => Ok((p, false)),
            Placement::Sticky => Ok((self.sticky_partition(&record.topic, count)?, true)),
            Placement::Random => Ok((self.random_partition(&record.topic, count), false)),
        }
    }

    /// A partition of `topic` chosen at random, among those with a leader
    /// when there are some (librdkafka's `random` partitioner draws again
    /// once when its first draw has none).
    fn random_partition(&mut self, topic: &str, count: i32) -> i32 {
        let listed = with_leader(&mut self.with_leader, &self.cluster, topic);
        let mut available = listed.iter().copied().filter(|i| *i < count);
        match available.clone().count() {
            0 => self.rng.below(count.max(1) as usize) as i32,
            n => available
                .nth(self.rng.below(n))
                .expect("below the count of partitions listed"),
        }
    }

    /// The partition `topic`'s sticky partitioner (KIP-794) chooses among
    /// those with a leader.
    fn sticky_partition(&mut self, topic: &str, count: i32) -> Result<i32, Refused> {
        // The usual case, for every record but the first of each run: the
        // partition chosen stays, and nothing is looked up or allocated.
        if let Some(current) = self.sticky.get(topic).and_then(StickyPartitioner::current) {
            return Ok(current);
        }
        let available = with_leader(&mut self.with_leader, &self.cluster, topic);
        let batch_size = self.settings.batch_size as u32;
        let sticky = self
            .sticky
            .entry(topic.to_owned())
            .or_insert_with(|| StickyPartitioner::new(topic.to_owned(), batch_size));
        sticky
            .partition(&TopicPartitions { count, available }, &mut self.rng)
            .map_err(|e| Refused::Invalid(Error::Partitioner(e)))
    }

    /// A record appended to `tp` as record `index` of the batch opened by
    /// record `batch`: counted, and given that batch's outcome.
    fn queued(&mut self, tp: &TopicPartition, batch: RecordId, index: u32) -> Queued {
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
        // wake-up per batch and send smaller requests).
        let news = self.acc.take_news() && !self.awaits_answer(tp);
        Queued {
            news,
            outcome,
            index,
        }
    }

    /// Whether `tp`'s leader has a Produce request in flight.
    fn awaits_answer(&self, tp: &TopicPartition) -> bool {
        self.cluster
            .metadata()
            .leader(&tp.topic, tp.partition)
            .is_some_and(|b| self.per_broker.get(&b).copied().unwrap_or(0) > 0)
    }
}

/// `topic`'s partitions with a leader, from `cache` (kept per topic, as
/// of a metadata generation), listed anew only when the metadata changed:
/// what the sticky and random partitioners choose among, without a list
/// built per record.
fn with_leader<'a>(
    cache: &'a mut BTreeMap<String, (u64, Vec<i32>)>,
    cluster: &Cluster,
    topic: &str,
) -> &'a [i32] {
    let generation = cluster.metadata_generation();
    if !cache.contains_key(topic) {
        cache.insert(topic.to_owned(), (generation.wrapping_sub(1), Vec::new()));
    }
    let listed = cache.get_mut(topic).expect("inserted above");
    if listed.0 != generation {
        listed.1.clear();
        if let Some(t) = cluster.metadata().topics.get(topic) {
            listed.1.extend(
                t.partitions
                    .iter()
                    .filter(|(_, p)| p.leader >= 0)
                    .map(|(i, _)| *i),
            );
        }
        listed.0 = generation;
    }
    &listed.1
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
