//! The topics produced to (their metadata kept fresh, and what it says of
//! them told to the records' way in, [`Front`]), and the core's own
//! `append`, which goes through it.

#[cfg(test)]
use super::super::accumulator::Now;
#[cfg(doc)]
use super::front::Front;
#[cfg(test)]
use super::front::Queued;
use super::front::{lock, TopicView};
#[cfg(test)]
use super::{OutRecord, Refused};
use super::{ProducerCore, TopicState};
use crate::protocol::ErrorCode;
use crate::streak::Streak;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

impl ProducerCore {
    /// Marks `topic` as produced to at `now`; the metadata covers it from
    /// the next step on.
    pub fn use_topic(&mut self, now: Instant, topic: &str) {
        if self.topics.insert(topic.to_owned(), now).is_none() {
            self.view_changes += 1;
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
        self.view_changes += 1;
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

    /// Tells the records' way in ([`Front`]) what the metadata now says
    /// of the topics produced to, and which brokers have a Produce in
    /// flight, when either changed since it was last told; and takes from
    /// it when records last opened a batch of each topic (which keeps a
    /// topic's metadata from going idle). Called at the end of each step,
    /// and by a `send` that waited for a topic's metadata before it
    /// appends again.
    pub fn sync_front(&mut self) {
        let key = (self.cluster.metadata_generation(), self.view_changes);
        let busy = self
            .per_broker
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(b, _)| *b);
        let publish = (self.published != Some(key)).then(|| self.topic_views());
        let mut front = lock(&self.front);
        if let Some(views) = publish {
            front.publish(views);
        }
        front.set_busy(busy);
        let used = front.take_used();
        drop(front);
        self.published = Some(key);
        for (topic, at) in used {
            if let Some(last) = self.topics.get_mut(&topic) {
                *last = (*last).max(at);
            }
            self.now = self.now.max(at);
        }
    }

    /// What placing records needs of each topic produced to.
    fn topic_views(&self) -> BTreeMap<String, TopicView> {
        let metadata = self.cluster.metadata();
        self.topics
            .keys()
            .map(|topic| {
                let mut with_leader = Vec::new();
                let mut leaders = Vec::new();
                if let Some(t) = metadata.topics.get(topic) {
                    for (&i, p) in &t.partitions {
                        if p.leader >= 0 {
                            with_leader.push(i);
                        }
                        if let Ok(i) = usize::try_from(i) {
                            if leaders.len() <= i {
                                leaders.resize(i + 1, -1);
                            }
                            leaders[i] = p.leader;
                        }
                    }
                }
                let view = TopicView {
                    state: self.topic_state(topic),
                    with_leader,
                    leaders,
                };
                (topic.clone(), view)
            })
            .collect()
    }

    /// Places `record` (its topic's metadata must be known:
    /// [`ProducerCore::topic_state`]) and queues it, as a `send` does
    /// through [`ProducerCore::front`] after the core told it what it
    /// knows.
    #[cfg(test)]
    pub fn append(&mut self, now: impl Now, record: OutRecord) -> Result<Queued, Refused> {
        self.sync_front();
        lock(&self.front).append(now, record)
    }
}
