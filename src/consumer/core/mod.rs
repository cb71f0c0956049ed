//! The consumer's state, without IO: the connection manager, the group
//! membership, the fetcher and the commits, wired together.
//!
//! [`ConsumerCore::drive`] moves everything one step: it routes responses
//! to whoever asked, lets the group and the fetcher issue their requests,
//! commits when due, and enforces `max.poll.interval.ms`. The runtime calls
//! it after every input and at [`ConsumerCore::next_deadline`].
//!
//! This file holds the state itself, its making from the configuration,
//! the runtime's side (IO, deadlines) and the step; the rest is split by
//! job, one file each (an `impl ConsumerCore` of its own, but for
//! `reporting`, whose part the step drives):
//!
//! - `positions`: the application's reads (assignment, subscription,
//!   positions, metrics) and its commands on positions (seek, pause,
//!   resume);
//! - `poll`: what a `poll` takes (records, errors), and
//!   `max.poll.interval.ms`;
//! - `group`: the mode (subscribe, assign, unsubscribe), the group
//!   membership driven, its events for the rebalance listener, and the
//!   steps of closing;
//! - `commits`: stored offsets, commits (the application's, automatic
//!   ones, those of revoked partitions) and the committed offsets to start
//!   from;
//! - `queries`: the application's lookups (offsets, committed offsets, the
//!   partitions of a topic);
//! - `reporting`: what the application hears of: connection and group
//!   problems, topics and partitions missing from the metadata, refusals
//!   by the group coordinator.
//!
//! The state each job keeps for itself is a part that owns its fields,
//! in the job's file: `Commits` (commit numbers and
//! outcomes, the automatic commits' timer, stored offsets, the
//! committed-offsets lookup), `ListenerEvents` (group events for the
//! rebalance listener, what revocations hold back, rebalances counted),
//! `PollInterval` (`max.poll.interval.ms`), `Queries` (lookups in flight
//! and their answers) and `Reports` (errors for `poll`, the last failure,
//! missing topics, refusals said). The core keeps what ties them: the
//! connection manager, the membership, the fetcher, the mode and the
//! requests in flight.

mod commits;
mod group;
mod poll;
mod positions;
mod queries;
mod reporting;

use commits::Commits;
use group::ListenerEvents;
use poll::PollInterval;
use queries::Queries;
use reporting::Reports;

use super::offsets::OffsetAndEpoch;
use crate::cluster::{Changes, Cluster, ExponentialBackoff, RequestBody, RequestId, Retry, Rng};
use crate::config::ConsumerConfig;
use crate::error::Error;
use crate::events::ConnectionEvent;
use crate::fetch::{DecodeJob, FetchConfig, FetchToken, Fetcher};
use crate::group::consumer_membership::{
    generate_member_id, ConsumerMembership, ConsumerMembershipConfig,
};
use crate::group::either_membership::GroupMembership;
use crate::group::membership::{GroupRequestKind, Membership, MembershipConfig};
use crate::group::{GroupProtocol, TopicPartition, TopicPattern};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Identifies a commit the consumer started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct CommitId(pub(crate) u64);

/// How the consumer gets its partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Nothing yet.
    Idle,
    /// Group subscription to these topics.
    Subscribed(BTreeSet<String>),
    /// Group subscription to the topics matching a pattern: matched here
    /// against metadata for every topic (classic), or resolved by the
    /// coordinator (KIP-848).
    Pattern(TopicPattern),
    /// Manual assignment of these partitions.
    Assigned(BTreeSet<TopicPartition>),
}

#[derive(Debug)]
enum Pending {
    Group(GroupRequestKind),
    Committed(BTreeSet<TopicPartition>),
    /// A commit: the application's (with its id and its run of failures)
    /// or an automatic one.
    Commit(
        Option<(CommitId, Retry)>,
        BTreeMap<TopicPartition, OffsetAndEpoch>,
    ),
    Fetch(FetchToken),
    Query(u64),
}

/// The outcome of a commit.
pub(crate) type CommitResult = Result<(), Error>;

/// See the [module documentation](self).
#[derive(Debug)]
pub(crate) struct ConsumerCore {
    cluster: Cluster,
    membership: Option<GroupMembership>,
    fetcher: Fetcher,
    /// The id of the cluster the positions belong to (from its metadata).
    cluster_id: Option<String>,
    mode: Mode,
    group_id: Option<String>,
    join_timeout: Duration,
    in_flight: HashMap<RequestId, Pending>,
    /// The commits and the offsets they take.
    commits: Commits,
    /// `max.poll.interval.ms` and the last `poll`.
    poll_interval: PollInterval,
    /// The group's events for the rebalance listener, and what its
    /// revocations hold back.
    listener: ListenerEvents,
    /// The application's lookups in flight and their answers.
    queries: Queries,
    /// The LeaveGroup to send when closing, once revocations are handled.
    pending_leave: Option<Box<dyn RequestBody>>,
    /// What waiting calls were told of last.
    told: Told,
    closing: bool,
    /// What the application was told, and when.
    reports: Reports,
    /// Bumped whenever `mode` is replaced.
    mode_generation: u64,
    /// `exclude.internal.topics`: a classic pattern never matches an
    /// internal topic.
    exclude_internal_topics: bool,
    /// Under a classic pattern subscription: the metadata generation the
    /// pattern was last matched against.
    matched_generation: Option<u64>,
    /// The retry policy every request kind shares (`retry.backoff.ms`
    /// doubling to `retry.backoff.max.ms`), and its jitter source.
    retry_policy: ExponentialBackoff,
    rng: Rng,
}

/// What waiting calls were told of last ([`ConsumerCore::take_changes`]).
#[derive(Debug, Default)]
struct Told {
    /// Grows by one with each answer a call may wait for (a commit's
    /// outcome, a query's, leaving the group's).
    answers: u64,
    /// `answers` when last told.
    answers_seen: u64,
    /// The metadata generation when last told.
    metadata_seen: u64,
}

impl Told {
    /// An answer a call may wait for came.
    fn answered(&mut self) {
        self.answers += 1;
    }

    /// Which of answers and the metadata (now at `generation`) changed
    /// since the last call.
    fn changes(&mut self, generation: u64) -> Changes {
        let mut changes = Changes::NONE;
        if self.answers != self.answers_seen {
            self.answers_seen = self.answers;
            changes |= Changes::ANSWERS;
        }
        if generation != self.metadata_seen {
            self.metadata_seen = generation;
            changes |= Changes::METADATA;
        }
        changes
    }
}

/// What [`ConsumerCore::take_for_poll`] (or [`ConsumerCore::take_decoded`])
/// did besides adding records to the caller's list.
#[derive(Debug)]
pub(crate) struct Taken {
    /// The error to report (then no record was taken).
    pub error: Option<Error>,
    /// Whether records were buffered before the call (a `poll` returns
    /// then, even with none taken: they were dropped below a new
    /// position).
    pub had_buffered: bool,
    /// Whether the background task has something new to do.
    pub wake: bool,
    /// Chunks of record sets to decode, without holding the core, and to
    /// hand back with [`ConsumerCore::take_decoded`].
    pub decode: Vec<DecodeJob>,
}

impl ConsumerCore {
    pub fn new(
        cluster: Cluster,
        membership: Option<GroupMembership>,
        fetcher: Fetcher,
        auto_commit: Option<Duration>,
        max_poll_interval: Duration,
        join_timeout: Duration,
    ) -> Self {
        let group_id = membership.as_ref().map(|m| m.group_id().to_owned());
        ConsumerCore {
            cluster,
            membership,
            fetcher,
            mode: Mode::Idle,
            group_id,
            join_timeout,
            in_flight: HashMap::new(),
            commits: Commits::new(auto_commit),
            poll_interval: PollInterval::new(max_poll_interval),
            listener: ListenerEvents::default(),
            queries: Queries::new(),
            pending_leave: None,
            told: Told::default(),
            closing: false,
            reports: Reports::new(Duration::from_secs(5)),
            mode_generation: 0,
            exclude_internal_topics: true,
            matched_generation: None,
            cluster_id: None,
            retry_policy: ExponentialBackoff {
                base: Duration::from_millis(100),
                max: Duration::from_millis(1000),
                jitter: 0.2,
            },
            rng: Rng::new(0x5eed),
        }
    }

    /// The state of a consumer configured by `config`, created at `now`:
    /// no connection yet, nothing assigned. `seed` spreads the bootstrap
    /// choice, backoff jitter and member ids across processes; a fixed one
    /// makes a run reproducible.
    pub fn from_config(config: &ConsumerConfig, now: Instant, seed: u64) -> Self {
        // Independent streams for the three users of randomness, so that
        // the same seed never gives two of them the same numbers.
        let mut seeds = Rng::new(seed);
        let mut cc = config.common().cluster_config();
        cc.group_id = config.group_id().map(str::to_owned);
        cc.max_in_flight = config.max_in_flight_requests_per_connection().max(1) as usize;
        cc.max_frame_size = config.receive_message_max_bytes() as usize;
        cc.allow_auto_create_topics = config.allow_auto_create_topics();
        let cluster = Cluster::new(cc, now, seeds.next_u64());
        let membership = config
            .group_id()
            .map(|group| match config.group_protocol() {
                GroupProtocol::Classic => {
                    GroupMembership::Classic(Membership::new(MembershipConfig {
                        group_id: group.to_owned(),
                        group_instance_id: config.group_instance_id().map(str::to_owned),
                        session_timeout: config.session_timeout(),
                        rebalance_timeout: config.max_poll_interval(),
                        heartbeat_interval: config.heartbeat_interval(),
                        strategies: config.partition_assignment_strategy().to_vec(),
                        rack: config.client_rack().map(str::to_owned),
                        retry_backoff: retry_policy(config),
                        seed: seeds.next_u64(),
                    }))
                }
                GroupProtocol::Consumer => {
                    let mut rng = Rng::new(seeds.next_u64());
                    GroupMembership::Consumer(ConsumerMembership::new(
                        ConsumerMembershipConfig {
                            group_id: group.to_owned(),
                            group_instance_id: config.group_instance_id().map(str::to_owned),
                            rack: config.client_rack().map(str::to_owned),
                            rebalance_timeout: config.max_poll_interval(),
                            server_assignor: config.group_remote_assignor().map(|a| a.to_string()),
                            retry_backoff: retry_policy(config),
                            seed: seeds.next_u64(),
                        },
                        generate_member_id([rng.next_u64(), rng.next_u64()]),
                    ))
                }
            });
        let fetcher = Fetcher::new(fetch_config(config, seeds.next_u64()));
        let auto_commit = (config.enable_auto_commit() && config.group_id().is_some())
            .then(|| config.auto_commit_interval());
        let join_timeout = config.max_poll_interval() + Duration::from_secs(5);
        let mut core = ConsumerCore::new(
            cluster,
            membership,
            fetcher,
            auto_commit,
            config.max_poll_interval(),
            join_timeout.max(config.request_timeout()),
        );
        core.set_topic_propagation(config.topic_metadata_propagation_max());
        core.exclude_internal_topics = config.exclude_internal_topics();
        if !config.enable_auto_offset_store() {
            core.set_manual_offset_store();
        }
        core.retry_policy = retry_policy(config);
        core.rng = Rng::new(seeds.next_u64());
        core
    }

    /// Sets `topic.metadata.propagation.max.ms`.
    pub fn set_topic_propagation(&mut self, propagation: Duration) {
        self.reports.set_propagation(propagation);
    }

    /// The error for an operation (`what`) that did not finish within
    /// `after`, naming the last failure seen.
    pub fn timeout_error(&self, what: &'static str, after: Duration) -> Error {
        Error::Timeout {
            what,
            after,
            last_error: self.reports.last_error().cloned(),
        }
    }

    /// The failure that makes waiting for the network pointless, if any:
    /// every bootstrap address refused this client, does not resolve, or
    /// failed authentication, TLS or the protocol, and no connection is
    /// ready ([`Cluster::refused_everywhere`]). The consumer goes on trying
    /// (with backoff); a call that waits returns this at once.
    pub fn refused(&self) -> Option<Error> {
        self.cluster
            .refused_everywhere()
            .map(|attempts| Error::BrokersUnreachable { attempts })
    }

    /// What changed, of what calls wait for, since the last call: `poll`'s
    /// output (told while there is some), answers a call may wait for,
    /// the metadata, and a refusal by every broker (told while it lasts).
    pub fn take_changes(&mut self) -> Changes {
        let mut changes = Changes::NONE;
        if self.has_output() {
            changes |= Changes::OUTPUT;
        }
        changes |= self.told.changes(self.cluster.metadata_generation());
        if self.cluster.refused_everywhere().is_some() {
            changes |= Changes::REFUSED;
        }
        changes
    }

    /// The fetcher, for tests.
    #[cfg(all(test, feature = "mock"))]
    pub fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    /// The group membership, for tests.
    #[cfg(all(test, feature = "mock"))]
    pub fn membership(&self) -> Option<&GroupMembership> {
        self.membership.as_ref()
    }

    // ===== the runtime's side: IO =====

    /// The connection manager, for the runtime that carries its actions to
    /// sockets and feeds it what the sockets report.
    pub fn io(&mut self) -> &mut Cluster {
        &mut self.cluster
    }

    /// The next connection event.
    pub fn poll_event(&mut self) -> Option<ConnectionEvent> {
        self.cluster.poll_event()
    }

    /// Closes every connection (event reason `shutdown`); the actions that
    /// leaves are dropped: the runtime closes the sockets itself.
    pub fn shutdown(&mut self, now: Instant) {
        self.cluster.shutdown(now);
        while self.cluster.poll_action().is_some() {}
    }

    /// What is left to do once the actions of a step went out: the CRC
    /// check of the record sets that just came, after the Fetch that
    /// follows them is sent.
    pub fn after_actions(&mut self) {
        self.fetcher.check_pending_crcs();
    }

    // ===== the machine =====

    /// One step: route responses, issue requests, commit, check timers.
    pub fn drive(&mut self, now: Instant) {
        self.cluster.handle_timeout(now);
        self.route_responses(now);
        self.check_poll_interval(now);
        self.drive_pattern();
        self.drive_group(now);
        self.drive_committed(now);
        self.drive_fetch(now);
        self.drive_auto_commit(now);
        self.drive_commit_retries(now);
        // Requests issued above may complete synchronously in tests.
        self.route_responses(now);
        self.reports.collect_problems(
            &mut self.cluster,
            self.membership.as_mut(),
            self.group_id.as_deref(),
        );
        let mode = (&self.mode, self.mode_generation);
        self.reports
            .watch_topics(now, &self.cluster, &self.fetcher, mode);
    }

    /// The earliest deadline after `now`. Call it right after
    /// [`ConsumerCore::drive`] at `now`: what was due by then was acted on,
    /// and a deadline left in the past waits for an input (a response, a
    /// connection), not for time.
    pub fn next_deadline_after(&self, now: Instant) -> Option<Instant> {
        self.deadlines().filter(|t| *t > now).min()
    }

    /// When [`ConsumerCore::drive`] must run next without any input.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines().min()
    }

    fn deadlines(&self) -> impl Iterator<Item = Instant> + '_ {
        let candidates = [
            self.cluster.poll_timeout(),
            self.membership.as_ref().and_then(|m| m.next_deadline()),
            self.fetcher.next_deadline(),
            self.poll_deadline(),
        ];
        let commits = self.commits.deadlines();
        let reports = self.reports.missing_report_deadlines();
        candidates
            .into_iter()
            .flatten()
            .chain(commits)
            .chain(reports)
    }

    fn update_topics(&mut self) {
        let mut topics: BTreeSet<String> = match &self.mode {
            Mode::Idle => BTreeSet::new(),
            Mode::Subscribed(t) => t.clone(),
            // The classic pattern's Metadata asks for every topic anyway;
            // under KIP-848 the coordinator resolves the pattern, and the
            // assigned topics (below) are the ones to keep.
            Mode::Pattern(_) => BTreeSet::new(),
            Mode::Assigned(tps) => tps.iter().map(|tp| tp.topic.clone()).collect(),
        };
        // The group's assignment: its leaders are needed for fetching
        // (under a pattern, topics known by no subscribed name).
        if matches!(self.mode, Mode::Subscribed(_) | Mode::Pattern(_)) {
            topics.extend(self.fetcher.assignment().into_iter().map(|tp| tp.topic));
        }
        if let Some(extra) = self.membership.as_ref().and_then(|m| m.awaiting_metadata()) {
            topics.extend(extra.iter().cloned());
        }
        topics.extend(self.queries.topics().cloned());
        self.cluster.set_topics(topics);
        self.cluster.set_partitions_wanted(
            self.fetcher
                .assignment()
                .into_iter()
                .map(|tp| (tp.topic, tp.partition))
                .collect(),
        );
    }

    fn route_responses(&mut self, now: Instant) {
        while let Some((id, result)) = self.cluster.poll_response() {
            let Some(pending) = self.in_flight.remove(&id) else {
                continue;
            };
            // What a call waits for: a query's answer, a commit's (also
            // the revocation commit `close` waits for), leaving the group.
            // Fetches, heartbeats and the rest of the group's traffic are
            // not.
            if matches!(
                pending,
                Pending::Query(_) | Pending::Commit(..) | Pending::Group(GroupRequestKind::Leave)
            ) {
                self.told.answered();
            }
            match pending {
                Pending::Group(kind) => {
                    if let Some(m) = &mut self.membership {
                        let outcome = m.handle_response(now, kind, result);
                        if outcome.coordinator_unknown {
                            self.cluster.coordinator_unknown(now);
                        }
                    }
                }
                Pending::Committed(partitions) => {
                    self.commits.committed_answered();
                    self.handle_committed(now, partitions, result);
                }
                Pending::Commit(commit, offsets) => {
                    self.handle_commit(now, commit, offsets, result)
                }
                Pending::Fetch(token) => match result {
                    Ok(response) => {
                        let outcome = self.fetcher.handle_response(now, token, &response);
                        let mut refresh = outcome.refresh_metadata;
                        if !outcome.leader_hints.is_empty() {
                            // KIP-951: leaders named in the answer are used
                            // at once; a hint not taken asks for metadata.
                            let taken = self.cluster.apply_leader_hints(
                                now,
                                &outcome.leader_hints,
                                &outcome.leader_endpoints,
                            );
                            for (topic, partition) in &taken {
                                self.fetcher
                                    .leader_moved(&TopicPartition::new(topic.clone(), *partition));
                            }
                            refresh |= taken.len() < outcome.leader_hints.len();
                        }
                        if refresh {
                            self.cluster.request_metadata_refresh(now);
                        }
                    }
                    Err(e) => {
                        let outcome = self.fetcher.handle_failure(now, token, &e);
                        if outcome.refresh_metadata {
                            self.cluster.request_metadata_refresh(now);
                        }
                    }
                },
                Pending::Query(q) => {
                    self.queries.answered(q, result);
                }
            }
        }
    }

    fn drive_fetch(&mut self, now: Instant) {
        if self.closing {
            return;
        }
        self.follow_cluster_replacement();
        // Fetch sessions end with their connection (KIP-227): a leader's,
        // or a read replica's (KIP-392).
        self.fetcher
            .set_leader_generations(self.cluster.leader_generations());
        self.fetcher
            .set_replica_generations(self.cluster.replica_generations());
        self.fetcher
            .set_metadata_generation(self.cluster.metadata_generation());
        let requests = self.fetcher.poll_requests(now, self.cluster.metadata());
        if self.fetcher.take_metadata_wanted() {
            self.cluster.request_metadata_refresh_later();
        }
        for (target, body, token) in requests {
            let id = self.cluster.request(now, target, body);
            self.in_flight.insert(id, Pending::Fetch(token));
        }
    }
}

impl ConsumerCore {
    /// The bootstrap addresses now reach another cluster (its id changed:
    /// docs/connections.md, "Rebootstrap"): positions and records fetched
    /// from the old one mean nothing there. Every assigned partition starts
    /// again from its committed offset on the new cluster (else
    /// `auto.offset.reset`), and a group member joins the new cluster's
    /// group.
    fn follow_cluster_replacement(&mut self) {
        let current = self.cluster.metadata().cluster_id.as_deref();
        if current.is_none() || current == self.cluster_id.as_deref() {
            return;
        }
        let replaced = self.cluster_id.is_some();
        let old = std::mem::replace(&mut self.cluster_id, current.map(str::to_owned));
        if !replaced {
            return;
        }
        log::warn!(
            "the consumer's cluster changed from {} to {}: every assigned partition starts again from its committed offset there (else auto.offset.reset){}",
            old.unwrap_or_default(),
            self.cluster_id.as_deref().unwrap_or_default(),
            if self.membership.is_some() { ", and the member joins the group there" } else { "" }
        );
        let assigned = self.fetcher.assignment();
        self.fetcher.assign(std::iter::empty());
        self.fetcher.assign(assigned);
        if let Some(m) = self.membership.as_mut() {
            m.request_rejoin("the cluster changed");
        }
    }
}

/// A backoff from `base` doubling to `max`, with ±20% jitter.
/// The retry policy every request kind shares: `retry.backoff.ms`
/// doubling to `retry.backoff.max.ms`, ±20% jitter (KIP-580).
pub(crate) fn retry_policy(config: &ConsumerConfig) -> ExponentialBackoff {
    config.common().retry_policy()
}

/// The fetch layer's settings from the consumer's.
fn fetch_config(config: &ConsumerConfig, seed: u64) -> FetchConfig {
    let clamp = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    FetchConfig {
        min_bytes: clamp(config.fetch_min_bytes()),
        max_bytes: clamp(config.fetch_max_bytes()),
        max_wait: config.fetch_max_wait(),
        max_partition_bytes: clamp(config.max_partition_fetch_bytes()),
        isolation: match config.isolation_level() {
            crate::config::IsolationLevel::ReadCommitted => {
                crate::records::IsolationLevel::ReadCommitted
            }
            _ => crate::records::IsolationLevel::ReadUncommitted,
        },
        check_crcs: config.check_crcs(),
        sessions: config.fetch_sessions(),
        partition_eof: config.enable_partition_eof(),
        auto_offset_reset: config.auto_offset_reset(),
        rack_id: config.client_rack().map(str::to_owned),
        replica_lease: config.metadata_max_age(),
        retry_backoff: retry_policy(config),
        request_timeout: config.request_timeout(),
        seed,
        ..FetchConfig::default()
    }
}

/// How the background task drives the consumer.
impl crate::cluster::ClientCore for ConsumerCore {
    fn io(&mut self) -> &mut Cluster {
        ConsumerCore::io(self)
    }
    fn take_changes(&mut self) -> Changes {
        ConsumerCore::take_changes(self)
    }
    fn drive(&mut self, now: Instant) {
        ConsumerCore::drive(self, now);
    }
    fn next_deadline(&self) -> Option<Instant> {
        ConsumerCore::next_deadline(self)
    }
    fn next_deadline_after(&self, now: Instant) -> Option<Instant> {
        ConsumerCore::next_deadline_after(self, now)
    }
    fn after_actions(&mut self) {
        ConsumerCore::after_actions(self);
    }
    fn has_after_actions(&self) -> bool {
        self.fetcher.has_pending_crcs()
    }
    fn poll_event(&mut self) -> Option<ConnectionEvent> {
        ConsumerCore::poll_event(self)
    }
    fn shutdown(&mut self, now: Instant) {
        ConsumerCore::shutdown(self, now);
    }
}
