//! The metadata cache and when it is asked for again: what the caller
//! wants known (topics, partitions' leaders, topic ids), and the three
//! refresh schedules that keep it so: at `metadata.max.age.ms`, after the
//! retry backoff while an answer is incomplete or a refresh is asked for,
//! and by topic id while an id stays unknown.

use super::backoff::{ExponentialBackoff, Refresh, Rng};
use super::conn::RequestBody;
use super::metadata::{self, Metadata};
use super::requests::Origin;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The cache and its schedules.
#[derive(Debug, Default)]
pub(crate) struct MetadataManager {
    /// The cluster as the last answers described it.
    cache: Metadata,
    /// Grows by one with every update of the cache.
    generation: u64,
    /// When the regular request's last answer came.
    fetched_at: Option<Instant>,
    /// The regular request (the topics kept, or every topic).
    refresh: Refresh,
    /// The regular request is to go out at the next step (after its
    /// backoff), not only at the max age.
    wanted: bool,
    /// The topics whose metadata is kept.
    topics: BTreeSet<String>,
    /// Partitions being fetched ([`MetadataManager::set_partitions_wanted`]):
    /// an answer that names no leader for one of them is incomplete.
    partitions_wanted: BTreeSet<(String, i32)>,
    /// Metadata asks for every topic (a classic pattern subscription).
    all_topics: bool,
    /// Topic ids whose names are wanted (a KIP-848 assignment).
    topic_ids: BTreeSet<[u8; 16]>,
    /// The request by topic id.
    by_id_refresh: Refresh,
    /// Metadata requests sent (regular and by id).
    requests_sent: u64,
    /// Leader hints taken (KIP-951).
    hints_taken: u64,
    /// Since when the regular request has been asked without an answer
    /// (KIP-1102's trigger: the bootstrap addresses are asked again once
    /// it lasts `metadata.recovery.rebootstrap.trigger.ms`).
    unanswered_since: Option<Instant>,
    /// A broker answered REBOOTSTRAP_REQUIRED (KIP-1102): the next regular
    /// request goes to a bootstrap address.
    rebootstrap_required: bool,
}

impl MetadataManager {
    /// The cached metadata.
    pub fn cache(&self) -> &Metadata {
        &self.cache
    }

    /// Grows by one with every update.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// When the regular request's last answer came, if one did.
    pub fn answered_at(&self) -> Option<Instant> {
        self.fetched_at
    }

    /// Metadata requests sent, and leader hints taken (KIP-951).
    pub fn counts(&self) -> (u64, u64) {
        (self.requests_sent, self.hints_taken)
    }

    /// See [`Cluster::apply_leader_hints`](super::Cluster::apply_leader_hints).
    pub fn apply_hints(
        &mut self,
        hints: &[metadata::LeaderHint],
        endpoints: &[metadata::BrokerAddress],
    ) -> Vec<(String, i32)> {
        let mut taken = Vec::new();
        for hint in hints {
            if self.cache.apply_hint(hint, endpoints) {
                log::debug!(
                    "{}-{}: leader {} (epoch {}) as a broker's answer names it (KIP-951)",
                    hint.topic,
                    hint.partition,
                    hint.leader,
                    hint.leader_epoch
                );
                taken.push((hint.topic.clone(), hint.partition));
            }
        }
        if !taken.is_empty() {
            self.generation += 1;
            self.hints_taken += taken.len() as u64;
        }
        taken
    }

    /// See [`Cluster::set_topics`](super::Cluster::set_topics).
    pub fn set_topics(&mut self, topics: impl IntoIterator<Item = String>) {
        let topics: BTreeSet<String> = topics.into_iter().collect();
        if topics != self.topics {
            self.topics = topics;
            if !self
                .topics
                .iter()
                .all(|t| self.cache.topics.contains_key(t))
            {
                self.wanted = true;
            }
        }
    }

    /// See [`Cluster::set_partitions_wanted`](super::Cluster::set_partitions_wanted).
    pub fn set_partitions_wanted(&mut self, partitions: BTreeSet<(String, i32)>) {
        if partitions != self.partitions_wanted {
            self.partitions_wanted = partitions;
            if !self.leaders_known(&self.cache) {
                self.wanted = true;
            }
        }
    }

    /// Whether `md` names a leader for every partition wanted.
    fn leaders_known(&self, md: &Metadata) -> bool {
        self.partitions_wanted
            .iter()
            .all(|(t, p)| md.leader(t, *p).is_some())
    }

    /// See [`Cluster::set_all_topics`](super::Cluster::set_all_topics).
    pub fn set_all_topics(&mut self, all: bool) {
        if all != self.all_topics {
            self.all_topics = all;
            if all {
                self.wanted = true;
            }
        }
    }

    /// See [`Cluster::set_topic_ids`](super::Cluster::set_topic_ids).
    pub fn set_topic_ids(&mut self, ids: impl IntoIterator<Item = [u8; 16]>) {
        let ids: BTreeSet<[u8; 16]> = ids.into_iter().filter(|id| *id != [0; 16]).collect();
        if ids != self.topic_ids {
            // New ids are looked up at once, not after an old backoff.
            if !ids.is_subset(&self.topic_ids) {
                self.by_id_refresh.retry.clear_wait();
            }
            self.topic_ids = ids;
        }
    }

    /// The wanted topic ids no cached topic has.
    fn unresolved_ids(&self) -> Vec<[u8; 16]> {
        let known: BTreeSet<[u8; 16]> = self.cache.topics.values().map(|t| t.topic_id).collect();
        self.topic_ids
            .iter()
            .filter(|id| !known.contains(*id))
            .copied()
            .collect()
    }

    /// Whether metadata is kept at all (and so refreshed when it ages).
    fn keeps_metadata(&self) -> bool {
        self.all_topics || !self.topics.is_empty()
    }

    /// Fresh metadata is wanted at the next step.
    pub fn want(&mut self) {
        self.wanted = true;
    }

    /// Fresh metadata is wanted, and a backoff grown by incomplete answers
    /// comes back to its first step (see
    /// [`Cluster::request_metadata_refresh`](super::Cluster::request_metadata_refresh)).
    pub fn hurry(&mut self, now: Instant, backoff: &ExponentialBackoff) {
        self.refresh.hurry(now, backoff);
        self.wanted = true;
    }

    /// A request waits for a broker the cache does not list: it is looked
    /// up (after the retry backoff if the cache is already fresh), unless
    /// a refresh is already wanted or in flight.
    pub fn broker_missing(&mut self, now: Instant, backoff: &ExponentialBackoff, rng: &mut Rng) {
        if !self.wanted && !self.refresh.in_flight {
            self.wanted = true;
            if self.fetched_at.is_some() {
                self.refresh.failed(now, backoff, rng);
            }
        }
    }

    /// The regular Metadata request, when it is due at `now` (the cache
    /// older than `max_age`, or a refresh wanted) and its backoff allows;
    /// it is then marked sent.
    pub fn request_due(
        &mut self,
        now: Instant,
        max_age: Duration,
        allow_auto_create_topics: bool,
    ) -> Option<Box<dyn RequestBody>> {
        let stale = match self.fetched_at {
            None => true,
            Some(t) => now.saturating_duration_since(t) >= max_age,
        };
        if !(((self.keeps_metadata() && stale) || self.wanted) && self.refresh.may_send(now)) {
            return None;
        }
        self.refresh.sent();
        self.wanted = false;
        self.requests_sent += 1;
        self.unanswered_since.get_or_insert(now);
        Some(metadata::request(
            &self.topics,
            self.all_topics,
            allow_auto_create_topics,
        ))
    }

    /// The Metadata request for the topic ids the cache does not know,
    /// when there are some and its backoff allows; it is then marked sent.
    pub fn by_id_request_due(&mut self, now: Instant) -> Option<Box<dyn RequestBody>> {
        let unresolved = self.unresolved_ids();
        if unresolved.is_empty() || !self.by_id_refresh.may_send(now) {
            return None;
        }
        self.by_id_refresh.sent();
        self.requests_sent += 1;
        log::debug!(
            "looking up {} topic id(s) the metadata does not know",
            unresolved.len()
        );
        Some(Box::new(metadata::MetadataByTopicId(unresolved)))
    }

    /// When a request is due next, if one waits for time: the regular one
    /// wanted now (the epoch is in the past: due at the first step) or
    /// when the cache grows old, never before its retry backoff ends; the
    /// one by id when ids are unknown. (While one is in flight, its
    /// response moves it on, not time.)
    pub fn next_due(&self, epoch: Instant, max_age: Duration) -> Option<Instant> {
        let regular =
            (!self.refresh.in_flight && (self.wanted || self.keeps_metadata())).then(|| {
                let due = match self.fetched_at {
                    Some(t) if !self.wanted => t + max_age,
                    _ => epoch,
                };
                self.refresh.next_send().map_or(due, |t| t.max(due))
            });
        let by_id = (!self.by_id_refresh.in_flight && !self.unresolved_ids().is_empty())
            .then(|| self.by_id_refresh.next_send().unwrap_or(epoch));
        regular.into_iter().chain(by_id).min()
    }

    /// The regular request's answer: in place of the cache; an answer that
    /// leaves a topic unknown or a partition wanted without a leader is
    /// asked again after the retry backoff.
    pub fn take_answer(
        &mut self,
        now: Instant,
        md: Metadata,
        backoff: &ExponentialBackoff,
        rng: &mut Rng,
    ) {
        let complete = md.covers(&self.topics) && self.leaders_known(&md);
        self.unanswered_since = None;
        self.replace(now, md);
        if complete {
            self.refresh.succeeded();
        } else {
            // Some topic is unknown or has a partition without a leader
            // yet: ask again after the retry backoff, which grows while the
            // answers stay incomplete (to `retry.backoff.max.ms`, as
            // KIP-580 has it): a partition without a leader for minutes
            // must not cost its broker ten Metadata requests a second.
            self.wanted = true;
            self.refresh.failed(now, backoff, rng);
        }
    }

    /// Why the next regular request should go to a bootstrap address
    /// rather than to a known broker (KIP-899, KIP-1102), if it should: a
    /// broker answered REBOOTSTRAP_REQUIRED, or the request has gone
    /// unanswered for longer than `trigger`.
    pub fn rebootstrap_reason(&self, now: Instant, trigger: Duration) -> Option<String> {
        if self.rebootstrap_required {
            return Some("a broker answered REBOOTSTRAP_REQUIRED".to_owned());
        }
        let since = self.unanswered_since?;
        let waited = now.saturating_duration_since(since);
        (waited > trigger).then(|| {
            format!(
                "no metadata for {waited:?} (metadata.recovery.rebootstrap.trigger.ms is {}), so the brokers known cannot give it",
                trigger.as_millis()
            )
        })
    }

    /// The regular request goes to a bootstrap address now: the trigger
    /// starts again from `now` (as the Java client's `rebootstrap`).
    pub fn rebootstrapping(&mut self, now: Instant) {
        self.rebootstrap_required = false;
        self.unanswered_since = Some(now);
    }

    /// A broker answered with REBOOTSTRAP_REQUIRED (KIP-1102): the next
    /// regular request (after the retry backoff the failed answer set: a
    /// cluster that keeps answering so is not asked in a loop) goes to a
    /// bootstrap address.
    pub fn rebootstrap_required(&mut self) {
        self.rebootstrap_required = true;
        self.wanted = true;
    }

    /// The cluster behind the addresses is another one (its id changed):
    /// the cache of the old one is dropped whole, leader epochs included
    /// (the new cluster counts its own from 0), before its answer is
    /// taken.
    pub fn forget_cluster(&mut self) {
        self.cache = Metadata::default();
        self.generation += 1;
    }

    /// The answer to the request by topic id: merged into the cache; ids
    /// still unknown are asked again after the retry backoff.
    pub fn take_by_id_answer(
        &mut self,
        now: Instant,
        mut md: Metadata,
        backoff: &ExponentialBackoff,
        rng: &mut Rng,
    ) {
        self.by_id_refresh.succeeded();
        for (name, info) in std::mem::take(&mut self.cache.topics) {
            md.topics.entry(name).or_insert(info);
        }
        // The cache's age is that of the regular request's answer.
        self.cache = md;
        self.generation += 1;
        if !self.unresolved_ids().is_empty() {
            // Not (yet) known to this broker: a topic just created, say.
            // Asked again after the backoff.
            self.by_id_refresh.failed(now, backoff, rng);
        }
    }

    /// Puts the regular request's answer in place of the cache.
    fn replace(&mut self, now: Instant, mut md: Metadata) {
        // Topics found by id stay while their ids are wanted, until the
        // caller names them (the regular request may have been sent before
        // they were found).
        md.keep_newer_epochs(&self.cache);
        for (name, info) in std::mem::take(&mut self.cache.topics) {
            if self.topic_ids.contains(&info.topic_id) && !md.topics.contains_key(&name) {
                md.topics.insert(name, info);
            }
        }
        self.cache = md;
        self.generation += 1;
        self.fetched_at = Some(now);
    }

    /// A request of `origin`'s got an answer that could not be decoded or
    /// taken: it failed, and is tried again after the retry backoff.
    pub fn answer_failed(
        &mut self,
        origin: Origin,
        now: Instant,
        backoff: &ExponentialBackoff,
        rng: &mut Rng,
    ) {
        match origin {
            Origin::Metadata => {
                self.refresh.failed(now, backoff, rng);
                self.wanted = true;
            }
            Origin::MetadataById => self.by_id_refresh.failed(now, backoff, rng),
            _ => {}
        }
    }

    /// A request of `origin`'s got no answer (its connection was lost, it
    /// timed out waiting for one): the regular one is wanted again at
    /// once, the one by id at its next step.
    pub fn request_lost(&mut self, origin: Origin) {
        match origin {
            Origin::Metadata => {
                self.refresh.in_flight = false;
                self.wanted = true;
            }
            Origin::MetadataById => self.by_id_refresh.in_flight = false,
            _ => {}
        }
    }
}
