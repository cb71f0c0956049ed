//! The topics produced to: when each was last used (a topic idle for
//! `metadata.max.idle.ms` leaves the metadata), the Metadata answers that
//! say one does not exist (`topic.metadata.propagation.max.ms`), and what
//! placing records needs of each ([`TopicView`], told to the records' way
//! in, `Front`, when it changed).

use super::front::TopicView;
use super::TopicState;
use crate::cluster::Metadata;
use crate::protocol::ErrorCode;
use crate::streak::Streak;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The topics produced to.
#[derive(Debug)]
pub(super) struct Topics {
    /// Each topic produced to, and when last.
    used: BTreeMap<String, Instant>,
    /// Topics produced to that the Metadata answers say do not exist: the
    /// run of such answers, from the first to the last.
    missing: BTreeMap<String, Option<Streak<ErrorCode>>>,
    /// When the Metadata answer last looked at for `missing` came.
    answer_seen: Option<Instant>,
    /// Grows when what is said of the topics may have changed other than
    /// by a metadata update (a topic used or forgotten, a Metadata answer
    /// read for missing topics).
    changes: u64,
    /// What was last published: the metadata generation and `changes`
    /// then.
    published: Option<(u64, u64)>,
    /// `metadata.max.idle.ms`.
    max_idle: Duration,
    /// `topic.metadata.propagation.max.ms`.
    propagation: Duration,
}

impl Topics {
    pub(super) fn new(max_idle: Duration, propagation: Duration) -> Self {
        Topics {
            used: BTreeMap::new(),
            missing: BTreeMap::new(),
            answer_seen: None,
            changes: 0,
            published: None,
            max_idle,
            propagation,
        }
    }

    /// Marks `topic` as produced to at `now`; `true` when it is new (the
    /// metadata must cover it: [`Topics::names`]).
    pub(super) fn use_topic(&mut self, now: Instant, topic: &str) -> bool {
        let new = self.used.insert(topic.to_owned(), now).is_none();
        if new {
            self.changes += 1;
        }
        new
    }

    /// The topics produced to.
    pub(super) fn names(&self) -> impl Iterator<Item = String> + '_ {
        self.used.keys().cloned()
    }

    /// `topic` was produced to at `at` (told by the records' way in).
    pub(super) fn used_at(&mut self, topic: &str, at: Instant) {
        if let Some(last) = self.used.get_mut(topic) {
            *last = (*last).max(at);
        }
    }

    /// Forgets the topics not produced to for `metadata.max.idle.ms` and
    /// not `busy` (with records held); `true` when one was.
    pub(super) fn forget_idle(&mut self, now: Instant, busy: &BTreeSet<String>) -> bool {
        let idle = self.max_idle;
        let before = self.used.len();
        self.used
            .retain(|t, last| busy.contains(t) || now.saturating_duration_since(*last) < idle);
        if self.used.len() == before {
            return false;
        }
        self.changes += 1;
        self.missing.retain(|t, _| self.used.contains_key(t));
        true
    }

    /// When the first topic goes idle.
    pub(super) fn next_idle(&self) -> Option<Instant> {
        self.used.values().min().map(|t| *t + self.max_idle)
    }

    /// What may have changed of the topics other than by a metadata
    /// update: it grows with each change.
    pub(super) fn changes(&self) -> u64 {
        self.changes
    }

    /// What `metadata` says of `topic`: `Unknown` too for a topic not
    /// produced to (or forgotten after `metadata.max.idle.ms`), whose
    /// metadata is not kept fresh.
    pub(super) fn state(&self, topic: &str, metadata: &Metadata) -> TopicState {
        if !self.used.contains_key(topic) {
            return TopicState::Unknown;
        }
        match metadata.topics.get(topic) {
            None => TopicState::Unknown,
            Some(t) if t.error != ErrorCode::None => {
                match self.missing.get(topic).and_then(Option::as_ref) {
                    Some(run) if run.span() >= self.propagation => TopicState::Missing {
                        code: *run.what(),
                        after: run.span(),
                    },
                    _ => TopicState::Failed(t.error),
                }
            }
            Some(t) if t.partitions.is_empty() => TopicState::Unknown,
            Some(t) => TopicState::Known(t.partitions.len() as i32),
        }
    }

    /// Notes, at each new answer to the Metadata request (`answered`,
    /// read into `metadata`), which topics produced to it says do not
    /// exist (UNKNOWN_TOPIC_OR_PARTITION): such an answer goes on with the
    /// topic's run, any other word on the topic ends it (an answer that
    /// does not name the topic, asked before it was produced to, says
    /// nothing of it). Once a run spans `topic.metadata.propagation.max.ms`
    /// (an answer at least that long after the first still says so),
    /// [`Topics::state`] says `Missing`: a topic created a moment ago, not
    /// yet known to the broker that answered, has that long to reach it. A
    /// `warn` line names the topic then, and again every
    /// `REPORT_AGAIN_AFTER` while it lasts.
    pub(super) fn watch_missing(&mut self, answered: Option<Instant>, metadata: &Metadata) {
        if answered == self.answer_seen {
            return;
        }
        self.answer_seen = answered;
        self.changes += 1;
        let Some(at) = answered else {
            return;
        };
        for topic in self.used.keys() {
            let Some(info) = metadata.topics.get(topic) else {
                continue;
            };
            if info.error != ErrorCode::UnknownTopicOrPartition {
                self.missing.remove(topic);
                continue;
            }
            let slot = self.missing.entry(topic.clone()).or_default();
            let run = Streak::note(slot, info.error, at, Duration::MAX);
            if run.due(at, self.propagation) {
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

    /// What placing records needs of each topic produced to, when it may
    /// have changed since it was last taken (`generation`: the metadata's);
    /// it counts as published.
    pub(super) fn views_to_publish(
        &mut self,
        metadata: &Metadata,
        generation: u64,
    ) -> Option<BTreeMap<String, TopicView>> {
        let key = (generation, self.changes);
        if self.published == Some(key) {
            return None;
        }
        self.published = Some(key);
        Some(
            self.used
                .keys()
                .map(|topic| (topic.clone(), self.view(topic, metadata)))
                .collect(),
        )
    }

    /// What placing `topic`'s records needs.
    fn view(&self, topic: &str, metadata: &Metadata) -> TopicView {
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
        TopicView {
            state: self.state(topic, metadata),
            with_leader,
            leaders,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_is_forgotten_once_idle_unless_records_of_it_are_held() {
        let now = Instant::now();
        let idle = Duration::from_secs(300);
        let mut topics = Topics::new(idle, Duration::from_secs(30));
        assert!(topics.use_topic(now, "a"));
        assert!(topics.use_topic(now, "b"));
        assert!(!topics.use_topic(now, "a"), "known already");
        topics.used_at("a", now + Duration::from_secs(10));
        assert_eq!(topics.next_idle(), Some(now + idle));
        let changes = topics.changes();
        let busy = BTreeSet::from(["b".to_owned()]);
        assert!(!topics.forget_idle(now + idle - Duration::from_millis(1), &BTreeSet::new()));
        assert!(!topics.forget_idle(now + idle, &busy), "b holds records");
        assert!(topics.forget_idle(now + idle + Duration::from_secs(10), &busy));
        assert_eq!(topics.names().collect::<Vec<_>>(), ["b"]);
        assert!(topics.changes() > changes);
    }
}
