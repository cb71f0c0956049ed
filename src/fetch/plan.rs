//! A pass of [`Fetcher::poll_requests`]: which dirty partitions leave
//! their targets, which join one, and the requests to send (Fetch here;
//! OffsetForLeaderEpoch in `validation.rs`, ListOffsets in `reset.rs`).

use super::parked::Member;
use super::partition::PartitionState;
use super::position::Position;
use super::request::FetchRequestBody;
use super::session::{SessionEntry, SessionRequest};
use super::{
    broker_of, offsets, take_token, FetchConfig, FetchSent, FetchToken, Fetcher, InFlight, Planned,
    TopicPartition,
};
use crate::cluster::{Metadata, RequestBody, Target};
use crate::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic, ForgottenTopic};
use std::collections::BTreeSet;
use std::time::Instant;

/// What [`Fetcher::scan`] found: which per-pass steps have work.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Scan {
    /// A partition's retry wait is over.
    retry_due: bool,
    /// A valid position's leader epoch may need a look.
    epoch_check: bool,
    /// A position waits for validation (KIP-320), none asked yet.
    validating: bool,
    /// A position waits for a reset, none asked yet.
    resetting: bool,
}

impl Fetcher {
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
        let busy = self.busy_targets();
        self.release_dirty(&busy);
        // One look at the dirty partitions says which of the steps below
        // have anything to do; those that have not skip their walk (in a
        // steady state, all but the fetch planning).
        let scan = self.scan(now);
        if scan.retry_due {
            self.end_retry_waits(now);
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

    /// The targets with a Fetch out.
    fn busy_targets(&self) -> BTreeSet<Target> {
        self.in_flight
            .values()
            .filter_map(|f| match f {
                InFlight::Fetch(f) => Some(f.target),
                InFlight::ListOffsets { .. } | InFlight::Validate { .. } => None,
            })
            .collect()
    }

    /// Clears the retry waits of the dirty partitions that ended by `now`.
    fn end_retry_waits(&mut self, now: Instant) {
        for tp in &self.dirty {
            if let Some(st) = self.partitions.get_mut(tp) {
                if st.retry_due(now) {
                    st.retry.run.clear_wait();
                }
            }
        }
    }

    pub(super) fn release_dirty(&mut self, busy: &BTreeSet<Target>) {
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
    pub(super) fn dirty_states(&self) -> impl Iterator<Item = (&TopicPartition, &PartitionState)> {
        self.dirty
            .iter()
            .filter_map(|tp| Some(tp).zip(self.partitions.get(tp)))
    }

    /// Which steps of [`Fetcher::poll_requests`] have partitions to act
    /// on at `now`: each flag is set when at least one dirty partition
    /// meets the condition its step starts from (the others cannot: see
    /// [`PartitionState::needs_look`]).
    pub(super) fn scan(&self, now: Instant) -> Scan {
        let generation = self.metadata_generation;
        let mut scan = Scan::default();
        for (_, st) in self.dirty_states() {
            scan.retry_due |= st.retry_due(now);
            scan.epoch_check |= st.wants_epoch_check(generation);
            scan.validating |= st.pos.wants_validation();
            scan.resetting |= st.pos.wants_reset();
        }
        scan
    }

    /// Plans a Fetch to every free target with members, after the dirty
    /// partitions fetchable now joined theirs.
    fn plan_fetches(
        &mut self,
        now: Instant,
        metadata: &Metadata,
        busy: &BTreeSet<Target>,
        out: &mut Planned,
    ) {
        let draining = self.draining_targets(metadata);
        self.join_targets(now, metadata, busy, &draining);
        let Fetcher {
            throttled,
            config,
            next_token,
            parked,
            sessions,
            in_flight,
            ..
        } = self;
        for (&target, p) in parked.iter_mut() {
            if p.members.is_empty()
                || busy.contains(&target)
                || throttled.contains_key(&broker_of(target))
                || (draining.contains(&target) && p.behind == 0)
            {
                continue;
            }
            let changed = p.take_changed();
            let session = sessions.next_request(target, &p.members, changed);
            let (request, sent) = fetch_request(config, session);
            let token = take_token(next_token);
            in_flight.insert(
                token,
                InFlight::Fetch(FetchSent {
                    target,
                    session: sent,
                }),
            );
            out.push((target, Box::new(FetchRequestBody(request)), token));
        }
    }

    /// Leaders (and read replicas) of partitions whose buffered records
    /// the application is still taking: they will want a Fetch soon. A
    /// partition that has caught up with its high watermark waits for
    /// them rather than go alone: the broker would hold that Fetch for up
    /// to `max_wait_ms` with nothing to send, and the connection carries
    /// one request at a time, so theirs would wait behind it (a stall of
    /// up to fetch.max.wait.ms in the middle of a backlog). A target with
    /// partitions that still have records to read is fetched at once: the
    /// broker answers without waiting. (Read replicas likewise: each is
    /// fetched from over its own connection.)
    fn draining_targets(&self, metadata: &Metadata) -> BTreeSet<Target> {
        self.ready
            .iter()
            .filter_map(|tp| {
                let st = self.partitions.get(tp)?;
                (st.buffer.is_some() && !st.paused)
                    .then(|| st.read_target(tp, metadata))
                    .flatten()
            })
            .collect()
    }

    /// The dirty partitions fetchable now join their target (unless it
    /// has a Fetch out, is throttled, or is `draining` while they have
    /// caught up), and are no longer dirty.
    fn join_targets(
        &mut self,
        now: Instant,
        metadata: &Metadata,
        busy: &BTreeSet<Target>,
        draining: &BTreeSet<Target>,
    ) {
        let Fetcher {
            partitions,
            throttled,
            config,
            parked,
            dirty,
            topic_names,
            ..
        } = self;
        let mut joined = Vec::new();
        for tp in dirty.iter() {
            let Some(st) = partitions.get_mut(tp) else {
                continue;
            };
            let Some(from) = st.fetch_from(now) else {
                continue;
            };
            let Some(target) = st.read_target(tp, metadata) else {
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
            let member = join(st, tp, from, metadata, config);
            if member.entry.topic_id != [0; 16] {
                topic_names
                    .entry(member.entry.topic_id)
                    .or_insert_with(|| tp.topic.clone());
            }
            st.member = Some(target);
            parked.entry(target).or_default().join(tp, member);
            joined.push(tp.clone());
        }
        for tp in &joined {
            dirty.remove(tp);
        }
    }
}

/// What `st` (partition `tp`) is fetched with from `from` under
/// `metadata`: its turn, generation, and the fields sent for it. It
/// agrees with the leader epoch sent from now on (the leader fences it
/// if it is at another epoch, so what comes back agrees with this one).
fn join(
    st: &mut PartitionState,
    tp: &TopicPartition,
    from: Position,
    metadata: &Metadata,
    config: &FetchConfig,
) -> Member {
    let topic = metadata.topics.get(&tp.topic);
    let leader_epoch = topic
        .and_then(|t| t.partitions.get(&tp.partition))
        .map_or(-1, |p| p.leader_epoch);
    if leader_epoch >= 0 {
        st.checked_epoch = Some(leader_epoch);
    }
    Member {
        rank: st.rank,
        generation: st.generation,
        entry: SessionEntry {
            topic_id: topic.map_or([0; 16], |t| t.topic_id),
            fetch_offset: from.offset,
            max_bytes: st.size_override.unwrap_or(config.max_partition_bytes),
            leader_epoch,
            // v12+: the leader checks it against its log and answers a
            // `diverging_epoch` when the log was truncated below the
            // position (KIP-320 as the Java consumer sends it).
            last_fetched_epoch: from.leader_epoch.unwrap_or(-1),
        },
        behind: !st.caught_up(),
    }
}

/// The Fetch request for what `session` lists and forgets, with the
/// settings of `config`; and the session side to remember until it is
/// answered.
fn fetch_request(
    config: &FetchConfig,
    session: SessionRequest<'_>,
) -> (FetchRequest, Option<super::SessionSent>) {
    let SessionRequest {
        id,
        epoch,
        mut listed,
        forgotten,
        sent,
    } = session;
    // Requested in the order the partitions take turns in.
    listed.sort_by(|a, b| (a.1.rank, a.0).cmp(&(b.1.rank, b.0)));
    let request = FetchRequest {
        replica_id: -1,
        max_wait_ms: i32::try_from(config.max_wait.as_millis()).unwrap_or(i32::MAX),
        min_bytes: config.min_bytes,
        max_bytes: config.max_bytes,
        isolation_level: offsets::isolation_byte(config.isolation),
        session_id: id,
        session_epoch: epoch,
        topics: fetch_topics(&listed),
        forgotten_topics_data: forgotten_topics(forgotten),
        rack_id: config.rack_id.clone().unwrap_or_default(),
        ..FetchRequest::default()
    };
    (request, sent)
}

/// The partitions listed, grouped by topic in the order of each topic's
/// first partition (v3+ brokers fill the response in request order).
fn fetch_topics(listed: &[(&TopicPartition, &Member)]) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (tp, m) in listed {
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
    topics
}

/// The partitions forgotten (with their topic ids), grouped by topic.
fn forgotten_topics(forgotten: Vec<(TopicPartition, [u8; 16])>) -> Vec<ForgottenTopic> {
    let mut topics: Vec<ForgottenTopic> = Vec::new();
    for (tp, topic_id) in forgotten {
        // By name and id: a topic created again under its name may be
        // forgotten under its old id beside its new one.
        match topics
            .iter_mut()
            .find(|t| t.topic == tp.topic && t.topic_id == topic_id)
        {
            Some(t) => t.partitions.push(tp.partition),
            None => topics.push(ForgottenTopic {
                topic: tp.topic,
                topic_id,
                partitions: vec![tp.partition],
                ..ForgottenTopic::default()
            }),
        }
    }
    topics
}
