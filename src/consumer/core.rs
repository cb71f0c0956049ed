//! The consumer's state, without IO: the connection manager, the group
//! membership, the fetcher and the commits, wired together.
//!
//! [`ConsumerCore::drive`] moves everything one step: it routes responses
//! to whoever asked, lets the group and the fetcher issue their requests,
//! commits when due, and enforces `max.poll.interval.ms`. The runtime calls
//! it after every input and at [`ConsumerCore::next_deadline`].

use super::metrics::{self, ConsumerMetrics};
use super::offsets::{
    read_commit, read_committed, CommitOffsets, CommittedOffsets, FetchCommitted, OffsetAndEpoch,
};
use crate::cluster::{
    Cluster, ExponentialBackoff, Problem, RequestBody, RequestError, RequestId, Response, Retry,
    Rng, Target,
};
use crate::config::ConsumerConfig;
use crate::error::{Error, ErrorCode};
use crate::events::{BrokerCounters, ConnectionEvent, ConnectionInfo};
use crate::fetch::{
    read_list_offsets, ConsumerRecord, DecodeJob, Decoded, FetchConfig, FetchToken, Fetcher,
    OffsetAndTimestamp, OffsetSpec, SeekError,
};
use crate::group::consumer_membership::{
    generate_member_id, ConsumerMembership, ConsumerMembershipConfig,
};
use crate::group::errors::{classify, GroupErrorClass};
use crate::group::membership::{GroupEvent, GroupRequestKind, Membership, MembershipConfig};
use crate::group::seam::GroupMembership;
use crate::group::{GroupProtocol, TopicPartition, TopicPattern};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    mode: Mode,
    group_id: Option<String>,
    join_timeout: Duration,
    in_flight: HashMap<RequestId, Pending>,
    committed_in_flight: bool,
    next_commit: u64,
    commit_results: BTreeMap<CommitId, CommitResult>,
    /// A commit that must finish before the group may rejoin (offsets of
    /// revoked partitions).
    blocking_commit: Option<RequestId>,
    auto_commit: Option<Duration>,
    next_auto_commit: Option<Instant>,
    max_poll_interval: Duration,
    last_poll: Option<Instant>,
    left_for_poll_timeout: bool,
    group_events: VecDeque<GroupEvent>,
    /// With a rebalance listener, the group waits for `poll` to deliver
    /// revocations (so the listener can commit) before rejoining.
    hold_for_listener: bool,
    undelivered_revocations: usize,
    /// Positions of revoked partitions, for the listener.
    revoked_positions: BTreeMap<TopicPartition, i64>,
    errors: VecDeque<Error>,
    queries: BTreeMap<u64, Result<Response, RequestError>>,
    /// Topics whose metadata an offsets query needs, besides the mode's.
    query_topics: BTreeSet<String>,
    /// The LeaveGroup to send when closing, once revocations are handled.
    pending_leave: Option<Box<dyn RequestBody>>,
    next_query: u64,
    closing: bool,
    /// `topic.metadata.propagation.max.ms`: how long a topic may be
    /// missing from the metadata before the application hears of it.
    propagation: Duration,
    /// Topics (and assigned partitions, as `(topic, Some(partition))`)
    /// missing from the metadata: since when, and when last reported.
    missing: BTreeMap<(String, Option<i32>), Missing>,
    /// The inputs of the last [`ConsumerCore::watch_topics`] that found
    /// nothing lacking (metadata generation, mode generation, assignment
    /// generation): until one of them changes, there is nothing to look at.
    watched_quiet: Option<(u64, u64, u64)>,
    /// Bumped whenever `mode` is replaced.
    mode_generation: u64,
    /// The last failure reported, in words, for operations that time out.
    last_error: Option<String>,
    /// `enable.auto.offset.store=false`: the offsets the application
    /// stored, which commits take instead of the consumed positions.
    offset_store: Option<BTreeMap<TopicPartition, OffsetAndEpoch>>,
    /// Commits whose caller stopped waiting (a dropped `commit` future):
    /// their outcome is dropped when it comes.
    abandoned_commits: BTreeSet<CommitId>,
    /// Completed rebalances (assignments received), and when the last one
    /// completed.
    rebalances: u64,
    last_rebalance: Option<Instant>,
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
    /// The OffsetFetch of positions to start from: its run of failures.
    committed_retry: Retry,
    /// The application's commits refused with an error that passes (a
    /// coordinator that moved or is loading, a lost connection): sent
    /// again once their retry wait ends, until the caller stops waiting.
    commit_retries: BTreeMap<CommitId, (Retry, BTreeMap<TopicPartition, OffsetAndEpoch>)>,
    /// Refusals by the group coordinator (per API) and when each was last
    /// reported: said at once, then every `REPORT_AGAIN_AFTER` while it
    /// lasts.
    refusals_reported: BTreeMap<&'static str, Instant>,
    /// A `poll` is giving group events to the rebalance listener: they are
    /// not output for the other `poll`s meanwhile.
    listener_busy: bool,
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

/// A topic or partition the metadata lacks.
#[derive(Debug, Clone, Copy)]
struct Missing {
    since: Instant,
    code: ErrorCode,
    reported: Option<Instant>,
}

/// What the metadata lacks for a wanted topic or partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lack {
    /// The topic (its error code).
    Topic,
    /// The partition: the topic has only this many.
    Partition { partitions: usize },
    /// The partition's leader.
    Leader,
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
            committed_in_flight: false,
            next_commit: 1,
            commit_results: BTreeMap::new(),
            blocking_commit: None,
            auto_commit,
            next_auto_commit: None,
            max_poll_interval,
            last_poll: None,
            left_for_poll_timeout: false,
            group_events: VecDeque::new(),
            hold_for_listener: false,
            undelivered_revocations: 0,
            revoked_positions: BTreeMap::new(),
            errors: VecDeque::new(),
            queries: BTreeMap::new(),
            query_topics: BTreeSet::new(),
            pending_leave: None,
            next_query: 1,
            closing: false,
            propagation: Duration::from_secs(1),
            missing: BTreeMap::new(),
            watched_quiet: None,
            mode_generation: 0,
            last_error: None,
            offset_store: None,
            abandoned_commits: BTreeSet::new(),
            rebalances: 0,
            last_rebalance: None,
            exclude_internal_topics: true,
            matched_generation: None,
            retry_policy: ExponentialBackoff {
                base: Duration::from_millis(100),
                max: Duration::from_millis(1000),
                jitter: 0.2,
            },
            rng: Rng::new(0x5eed),
            committed_retry: Retry::default(),
            commit_retries: BTreeMap::new(),
            refusals_reported: BTreeMap::new(),
            listener_busy: false,
        }
    }

    /// `enable.auto.offset.store=false`: commits take the offsets stored
    /// with [`ConsumerCore::store_offsets`] only.
    pub fn set_manual_offset_store(&mut self) {
        self.offset_store = Some(BTreeMap::new());
    }

    /// Stores offsets (the next offset to consume) for the next commit.
    /// Every partition must be assigned; nothing is stored otherwise.
    pub fn store_offsets(
        &mut self,
        offsets: BTreeMap<TopicPartition, OffsetAndEpoch>,
    ) -> Result<(), Error> {
        let Some(store) = self.offset_store.as_mut() else {
            return Err(Error::Config {
                property: "enable.auto.offset.store".into(),
                reason: "offsets are stored automatically; set enable.auto.offset.store=false to store them with store_offset".into(),
            });
        };
        if let Some(tp) = offsets.keys().find(|tp| !self.fetcher.is_assigned(tp)) {
            return Err(Error::NotAssigned {
                operation: "store_offset",
                partition: tp.clone(),
            });
        }
        store.extend(offsets);
        Ok(())
    }

    /// The offsets stored for the next commit (`None` with
    /// `enable.auto.offset.store=true`).
    pub fn stored_offsets(&self) -> Option<&BTreeMap<TopicPartition, OffsetAndEpoch>> {
        self.offset_store.as_ref()
    }

    /// Forgets stored offsets of partitions no longer assigned (a partition
    /// assigned again later starts from its committed offset, not from an
    /// offset stored under an earlier assignment).
    fn prune_offset_store(&mut self) {
        if let Some(store) = self.offset_store.as_mut() {
            let fetcher = &self.fetcher;
            store.retain(|tp, _| fetcher.is_assigned(tp));
        }
    }

    /// Completed rebalances and when the last one completed (the core reads
    /// no clock: the caller turns it into wall time).
    pub fn rebalances(&self) -> (u64, Option<Instant>) {
        (self.rebalances, self.last_rebalance)
    }

    /// The caller stopped waiting for commit `id`: its outcome, when it
    /// comes, is dropped (the commit itself may still land).
    pub fn abandon_commit(&mut self, id: CommitId) {
        if self.commit_retries.remove(&id).is_some() {
            return;
        }
        if self.commit_results.remove(&id).is_none() {
            self.abandoned_commits.insert(id);
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
        self.propagation = propagation;
    }

    /// The error for an operation (`what`) that did not finish within
    /// `after`, naming the last failure seen.
    pub fn timeout_error(&self, what: &'static str, after: Duration) -> Error {
        Error::Timeout {
            what,
            after,
            last_error: self.last_error.clone(),
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

    // ===== the application's reads =====

    /// The partitions assigned now.
    pub fn assignment(&self) -> BTreeSet<TopicPartition> {
        self.fetcher.assignment()
    }

    /// The topics subscribed to (see `Consumer::subscription`).
    pub fn subscription(&self) -> BTreeSet<String> {
        match &self.mode {
            Mode::Subscribed(t) => t.clone(),
            Mode::Pattern(_) => match self.membership.as_ref() {
                Some(m) if m.protocol() == GroupProtocol::Classic => m.topics().clone(),
                _ => self
                    .fetcher
                    .assignment()
                    .into_iter()
                    .map(|tp| tp.topic)
                    .collect(),
            },
            _ => BTreeSet::new(),
        }
    }

    /// The pattern subscribed to, while it is the subscription.
    pub fn subscription_pattern(&self) -> Option<String> {
        match &self.mode {
            Mode::Pattern(p) => Some(p.as_str().to_owned()),
            _ => None,
        }
    }

    /// The offset of the next record for `tp`, once known.
    pub fn position(&self, tp: &TopicPartition) -> Option<i64> {
        self.fetcher.position(tp)
    }

    /// The paused partitions.
    pub fn paused(&self) -> BTreeSet<TopicPartition> {
        self.fetcher.paused()
    }

    /// The live connections.
    pub fn connections(&self, now: Instant) -> Vec<ConnectionInfo> {
        self.cluster.connections(now)
    }

    /// Counters per broker address.
    pub fn counters(&self) -> &BTreeMap<String, BrokerCounters> {
        self.cluster.counters()
    }

    /// The monitoring snapshot at `now`, stamped with the wall-clock time
    /// `wall_now` (read by the caller: the core reads no clock).
    pub fn metrics(
        &self,
        now: Instant,
        wall_now: SystemTime,
        read_committed: bool,
    ) -> ConsumerMetrics {
        let partitions: Vec<metrics::PartitionMetrics> = self
            .fetcher
            .partition_stats()
            .into_iter()
            .map(|p| metrics::PartitionMetrics::new(p, read_committed))
            .collect();
        let group = self.membership.as_ref().map(|m| {
            let (rebalances, last) = self.rebalances();
            metrics::GroupMetrics {
                group: m.group_id().to_owned(),
                protocol: m.protocol().to_string(),
                state: m.state_name().to_owned(),
                member_id: m.member_id().to_owned(),
                generation: m.generation_or_epoch(),
                rebalances,
                last_rebalance_ms: last.map(|at| {
                    let ago = now.saturating_duration_since(at);
                    metrics::unix_ms(wall_now.checked_sub(ago).unwrap_or(UNIX_EPOCH))
                }),
                last_rebalance_age_ms: last.map(|at| {
                    u64::try_from(now.saturating_duration_since(at).as_millis()).unwrap_or(u64::MAX)
                }),
            }
        });
        ConsumerMetrics {
            at_ms: metrics::unix_ms(wall_now),
            total_lag: partitions.iter().filter_map(|p| p.lag).sum(),
            partitions,
            brokers: self
                .cluster
                .counters()
                .iter()
                .map(|(addr, c)| (addr.clone(), c.into()))
                .collect(),
            connections: self.cluster.connections(now),
            group,
        }
    }

    // ===== the application's commands =====

    /// Makes the next records of `tp` start at `offset`.
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<(), SeekError> {
        self.fetcher.seek(tp, offset)
    }

    /// Moves partitions to their first offset (looked up by the next step).
    pub fn seek_to_beginning<'a>(
        &mut self,
        tps: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> Result<(), SeekError> {
        self.fetcher.seek_to_beginning(tps)
    }

    /// Moves partitions past their last offset (looked up by the next step).
    pub fn seek_to_end<'a>(
        &mut self,
        tps: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> Result<(), SeekError> {
        self.fetcher.seek_to_end(tps)
    }

    /// Stops fetching from `tps`.
    pub fn pause<'a>(&mut self, tps: impl IntoIterator<Item = &'a TopicPartition>) {
        self.fetcher.pause(tps);
    }

    /// Fetches from `tps` again.
    pub fn resume<'a>(&mut self, tps: impl IntoIterator<Item = &'a TopicPartition>) {
        self.fetcher.resume(tps);
    }

    /// What a `poll` takes: the first error, else at most `max` records
    /// (added to `out`) of those decoded already, and the chunks to decode
    /// next (see [`Fetcher::take_ready`]). `Taken::wake` says whether the
    /// step freed something the background task acts on (a partition's
    /// buffer emptied, an error taken), so that it is woken then and only
    /// then.
    pub fn take_for_poll(&mut self, max: usize, out: &mut Vec<ConsumerRecord>) -> Taken {
        if let Some(e) = self.take_error() {
            return Taken {
                error: Some(e),
                had_buffered: true,
                wake: true,
                decode: Vec::new(),
            };
        }
        let had_buffered = self.fetcher.has_buffered();
        let before = self.fetcher.drained();
        let decode = self.fetcher.take_ready(max, out);
        Taken {
            error: None,
            had_buffered,
            wake: self.fetcher.drained() != before,
            decode,
        }
    }

    /// Puts back the chunks a `poll` decoded, then takes on as
    /// [`ConsumerCore::take_for_poll`] does (no error is taken: the
    /// records come first).
    pub fn take_decoded(
        &mut self,
        decoded: Vec<Decoded>,
        max: usize,
        out: &mut Vec<ConsumerRecord>,
    ) -> Taken {
        let before = self.fetcher.drained();
        for d in decoded {
            self.fetcher.put_decoded(d);
        }
        let decode = self.fetcher.take_ready(max, out);
        Taken {
            error: None,
            had_buffered: true,
            wake: self.fetcher.drained() != before,
            decode,
        }
    }

    /// Sends the ListOffsets requests `query` needs (one per leader; the
    /// leaders must be known: [`ConsumerCore::want_leaders`]); returns
    /// the queries to wait for ([`ConsumerCore::take_query`]).
    pub fn query_offsets(
        &mut self,
        now: Instant,
        query: &BTreeMap<TopicPartition, OffsetSpec>,
    ) -> Vec<u64> {
        let plan = self
            .fetcher
            .list_offsets_requests(query, self.cluster.metadata());
        plan.requests
            .into_iter()
            .map(|(broker, body)| self.query(now, Target::Broker(broker), body))
            .collect()
    }

    // ===== application inputs =====

    /// Sets the mode (subscribe, assign, unsubscribe).
    pub fn set_mode(&mut self, now: Instant, mode: Mode) {
        if mode == self.mode {
            return;
        }
        let classic_pattern = matches!(mode, Mode::Pattern(_))
            && self
                .membership
                .as_ref()
                .is_some_and(|m| m.protocol() == GroupProtocol::Classic);
        // A classic pattern is matched against every topic; otherwise the
        // metadata covers the topics in use only.
        self.cluster.set_all_topics(classic_pattern);
        self.matched_generation = None;
        match &mode {
            Mode::Subscribed(topics) => {
                if let Some(m) = &mut self.membership {
                    m.subscribe(topics.clone());
                }
            }
            Mode::Pattern(pattern) => {
                if let Some(m) = &mut self.membership {
                    self.matched_generation = Some(self.cluster.metadata_generation());
                    m.subscribe_pattern(
                        pattern,
                        self.cluster.metadata(),
                        self.exclude_internal_topics,
                    );
                }
            }
            Mode::Assigned(tps) => {
                self.leave_group(now, "switching to manual assignment");
                self.fetcher.assign(tps.iter().cloned());
            }
            Mode::Idle => {
                self.leave_group(now, "unsubscribed");
                self.fetcher.assign(std::iter::empty());
            }
        }
        self.mode = mode;
        self.mode_generation += 1;
        self.prune_offset_store();
        self.update_topics();
    }

    /// Records that the application polled (for `max.poll.interval.ms`).
    /// Returns whether the driver has something new to do (a rejoin, or a
    /// first auto-commit deadline); a later `max.poll.interval.ms`
    /// deadline alone needs no wake-up: the driver re-reads `last_poll`
    /// when the earlier one comes.
    pub fn polled(&mut self, now: Instant) -> bool {
        self.last_poll = Some(now);
        let mut changed = false;
        if self.left_for_poll_timeout {
            // Join again: the next drive sends JoinGroup.
            self.left_for_poll_timeout = false;
            match (&mut self.membership, &self.mode) {
                (Some(m), Mode::Subscribed(topics)) => m.subscribe(topics.clone()),
                (Some(m), Mode::Pattern(pattern)) => {
                    self.matched_generation = Some(self.cluster.metadata_generation());
                    m.subscribe_pattern(
                        pattern,
                        self.cluster.metadata(),
                        self.exclude_internal_topics,
                    );
                }
                _ => {}
            }
            changed = true;
        }
        if self.next_auto_commit.is_none() && self.auto_commit.is_some() {
            self.next_auto_commit = self.auto_commit.map(|i| now + i);
            changed = true;
        }
        changed
    }

    /// Starts a commit of `offsets` (or of the consumed positions).
    pub fn commit(
        &mut self,
        now: Instant,
        offsets: Option<BTreeMap<TopicPartition, OffsetAndEpoch>>,
    ) -> CommitId {
        let id = CommitId(self.next_commit);
        self.next_commit += 1;
        let offsets = offsets.unwrap_or_else(|| self.committable(None));
        self.send_commit(now, Some((id, Retry::default())), offsets);
        id
    }

    /// The outcome of commit `id`, once known.
    pub fn take_commit_result(&mut self, id: CommitId) -> Option<CommitResult> {
        self.commit_results.remove(&id)
    }

    /// Sends an arbitrary request (offsets queries); its response comes out
    /// of [`ConsumerCore::take_query`].
    pub fn query(&mut self, now: Instant, target: Target, body: Box<dyn RequestBody>) -> u64 {
        let q = self.next_query;
        self.next_query += 1;
        let id = self.cluster.request(now, target, body);
        self.in_flight.insert(id, Pending::Query(q));
        q
    }

    /// The response to query `q`, once known.
    pub fn take_query(&mut self, q: u64) -> Option<Result<Response, RequestError>> {
        self.queries.remove(&q)
    }

    /// Makes the metadata cover `topics` (for offsets queries), and returns
    /// the partitions among `partitions` whose leader is still unknown.
    pub fn want_leaders(
        &mut self,
        partitions: &BTreeSet<TopicPartition>,
    ) -> BTreeSet<TopicPartition> {
        let before = self.query_topics.len();
        self.query_topics
            .extend(partitions.iter().map(|tp| tp.topic.clone()));
        if self.query_topics.len() != before {
            self.update_topics();
        }
        let unknown: BTreeSet<TopicPartition> = partitions
            .iter()
            .filter(|tp| {
                self.cluster
                    .metadata()
                    .leader(&tp.topic, tp.partition)
                    .is_none()
            })
            .cloned()
            .collect();
        if !unknown.is_empty() {
            self.cluster.request_metadata_refresh_later();
        }
        unknown
    }

    /// Makes the metadata cover `topic` (for `partitions_for`), and returns
    /// its partitions once the metadata describes it with a leader for
    /// each; `Some(Err(code))` for a topic-level error that retrying can't
    /// fix, `None` while the answer is still to come.
    /// A topic still unknown (retriable error) once
    /// `topic.metadata.propagation.max.ms` passed since `asked` gives its
    /// error too.
    pub fn want_partitions(
        &mut self,
        topic: &str,
        now: Instant,
        asked: Instant,
    ) -> Option<Result<Vec<TopicPartition>, ErrorCode>> {
        if self.query_topics.insert(topic.to_owned()) {
            self.update_topics();
        }
        let metadata = self.cluster.metadata();
        let wanted = BTreeSet::from([topic.to_owned()]);
        if metadata.covers(&wanted) {
            let info = &metadata.topics[topic];
            return Some(Ok(info
                .partitions
                .keys()
                .map(|p| TopicPartition::new(topic, *p))
                .collect()));
        }
        if let Some(info) = metadata.topics.get(topic) {
            let waited = now.saturating_duration_since(asked) >= self.propagation;
            if info.error != ErrorCode::None && (!info.error.is_retriable() || waited) {
                return Some(Err(info.error));
            }
        }
        self.cluster.request_metadata_refresh_later();
        None
    }

    /// The topic-level error the metadata holds for `topic`, if any.
    pub fn topic_error(&self, topic: &str) -> Option<ErrorCode> {
        self.cluster
            .metadata()
            .topics
            .get(topic)
            .map(|t| t.error)
            .filter(|e| *e != ErrorCode::None)
    }

    /// Reads committed offsets (for `committed()`), as a query.
    pub fn query_committed(
        &mut self,
        now: Instant,
        partitions: BTreeSet<TopicPartition>,
    ) -> Option<u64> {
        let group = self.group_id.clone()?;
        Some(self.query(
            now,
            Target::Coordinator,
            Box::new(FetchCommitted {
                group,
                partitions,
                require_stable: true,
            }),
        ))
    }

    /// The wait before a run of failures (`retry`) tries again, under the
    /// retry policy every request kind shares.
    pub fn retry_wait(&mut self, now: Instant, retry: &mut Retry) -> Duration {
        retry.failed(now, &self.retry_policy, self.rng.unit())
    }

    /// An application's committed-offsets lookup (`Consumer::committed`)
    /// refused with `code`, which passes by itself: the coordinator is
    /// looked up again when it moved; returns the wait before the next
    /// lookup.
    pub fn committed_lookup_failed(
        &mut self,
        now: Instant,
        code: ErrorCode,
        retry: &mut Retry,
    ) -> Duration {
        if classify(code) == GroupErrorClass::Coordinator {
            self.cluster.coordinator_unknown(now);
        }
        self.retry_wait(now, retry)
    }

    /// Decodes the response to a query [`ConsumerCore::query_offsets`]
    /// sent: each partition's offset (and timestamp), `None` where the
    /// broker knows none; a partition refused is an [`Error::Broker`].
    pub fn read_offsets_query(
        &self,
        response: &Response,
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndTimestamp>>, Error> {
        let listed = read_list_offsets(response).map_err(|source| Error::Decode {
            api: "ListOffsets",
            addr: String::new(),
            source,
        })?;
        listed
            .into_iter()
            .map(|(tp, result)| {
                result
                    .map(|found| (tp, found))
                    .map_err(|code| Error::Broker {
                        api: "ListOffsets",
                        code,
                    })
            })
            .collect()
    }

    /// Decodes a committed-offsets query response.
    pub fn read_committed_query(
        &self,
        response: &Response,
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndEpoch>>, Error> {
        let group = self.group_id.clone().unwrap_or_default();
        match read_committed(response, &group) {
            Ok(CommittedOffsets::Offsets(o)) => Ok(o),
            Ok(CommittedOffsets::Error(code)) => Err(Error::Group {
                group,
                api: "OffsetFetch",
                code: Some(code),
                reason: format!("OffsetFetch failed: {code}"),
                stopped: false,
            }),
            Err(source) => Err(Error::Decode {
                api: "OffsetFetch",
                addr: String::new(),
                source,
            }),
        }
    }

    /// Records for the application, at most `max` (decoded here).
    #[cfg(all(test, feature = "mock"))]
    pub fn take_records(&mut self, max: usize) -> Vec<ConsumerRecord> {
        self.fetcher.take_records(max)
    }

    /// Whether `poll` has something to take: records, an error or a group
    /// event for the rebalance listener. The background task wakes a
    /// waiting `poll` only then.
    pub fn has_output(&self) -> bool {
        !self.errors.is_empty()
            || (!self.group_events.is_empty() && !self.listener_busy)
            || self.fetcher.has_buffered()
            || self.fetcher.has_errors()
    }

    /// Errors for the application.
    pub fn take_error(&mut self) -> Option<Error> {
        if let Some(e) = self.errors.pop_front() {
            return Some(e);
        }
        let mut errors = self.fetcher.take_errors().into_iter().map(Error::Fetch);
        let first = errors.next();
        self.errors.extend(errors);
        first
    }

    /// Marks whether a `poll` is giving group events to the rebalance
    /// listener (see [`ConsumerCore::has_output`]).
    pub fn set_listener_busy(&mut self, busy: bool) {
        self.listener_busy = busy;
    }

    /// Whether group events wait for the rebalance listener.
    pub fn has_group_events(&self) -> bool {
        !self.group_events.is_empty()
    }

    /// Group events for the rebalance listener.
    pub fn take_group_event(&mut self) -> Option<GroupEvent> {
        self.group_events.pop_front()
    }

    /// A group event taken with [`ConsumerCore::take_group_event`] was given
    /// to the listener.
    pub fn group_event_delivered(&mut self) {
        if self
            .group_events
            .iter()
            .all(|e| !matches!(e, GroupEvent::Revoked(_)))
        {
            self.undelivered_revocations = 0;
            self.revoked_positions.clear();
        }
    }

    /// Makes the group wait for the listener before rejoining.
    pub fn set_hold_for_listener(&mut self, hold: bool) {
        self.hold_for_listener = hold;
    }

    /// The positions the revoked partitions had, for the listener.
    pub fn revoked_positions(&self) -> &BTreeMap<TopicPartition, i64> {
        &self.revoked_positions
    }

    /// Makes the group wait for commit `id` before rejoining.
    pub fn block_group_on_commit(&mut self, id: CommitId) {
        let request = self.in_flight.iter().find_map(|(rid, p)| match p {
            Pending::Commit(Some((c, _)), _) if *c == id => Some(*rid),
            _ => None,
        });
        if request.is_some() {
            self.blocking_commit = request;
        }
    }

    /// Starts closing: commit (when auto-commit is on), leave the group.
    /// Returns the commit to wait for, if any.
    pub fn begin_close(&mut self, now: Instant) -> Option<CommitId> {
        self.closing = true;
        (self.auto_commit.is_some() && self.group_id.is_some()).then(|| self.commit(now, None))
    }

    /// Closing, step two: gives up the partitions (the rebalance listener
    /// hears of it at the next delivery of group events, and may commit)
    /// and prepares the LeaveGroup that [`ConsumerCore::send_leave`] sends.
    pub fn prepare_leave(&mut self, now: Instant) {
        self.pending_leave = self
            .membership
            .as_mut()
            .and_then(|m| m.leave("the consumer is closing"));
        self.collect_group_events(now);
    }

    /// Whether commits the group must wait for (revocations) are done.
    pub fn revocation_commits_done(&self) -> bool {
        self.blocking_commit
            .is_none_or(|id| !self.in_flight.contains_key(&id))
    }

    /// Closing, step three: sends the LeaveGroup prepared before, if any.
    pub fn send_leave(&mut self, now: Instant) -> Option<RequestId> {
        let request = self.pending_leave.take()?;
        let id = self.cluster.request(now, Target::Coordinator, request);
        self.in_flight
            .insert(id, Pending::Group(GroupRequestKind::Leave));
        Some(id)
    }

    /// Whether request `id` is still waiting for its response.
    pub fn is_in_flight(&self, id: RequestId) -> bool {
        self.in_flight.contains_key(&id)
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
        self.collect_problems();
        self.watch_topics(now);
    }

    /// Hands what the cluster and the group report to the application:
    /// each becomes an error of `poll` and a warn line.
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
                Problem::CoordinatorRefused { group, code } => Error::Group {
                    reason: format!("FindCoordinator failed: {code}"),
                    group,
                    api: "FindCoordinator",
                    code: Some(code),
                    stopped: false,
                },
                // `Problem` is non-exhaustive for other crates only.
            };
            self.report(error);
        }
        if let Some(failure) = self.membership.as_mut().and_then(|m| m.take_failure()) {
            let group = self.group_id.clone().unwrap_or_default();
            self.report(Error::Group {
                group,
                api: failure.api,
                code: failure.code,
                reason: failure.reason,
                stopped: true,
            });
        }
    }

    /// Queues `error` for `poll` and logs it at warn level. Callers report
    /// a condition when it starts (and again only after it cleared, or
    /// after a long time), so neither the log nor the queue floods.
    fn report(&mut self, error: Error) {
        let next = if error.is_fatal() {
            "the consumer cannot go on: close it"
        } else if error.is_retriable() {
            "the consumer goes on by itself"
        } else if matches!(
            error,
            Error::Authentication { .. }
                | Error::Connection { .. }
                | Error::BrokersUnreachable { .. }
                | Error::Group { .. }
                | Error::Topic { .. }
        ) {
            "tried again with a long backoff; it lasts until its cause is fixed"
        } else {
            "not retried"
        };
        log::warn!("{error} ({next})");
        self.last_error = Some(error.to_string());
        // Bounded: a burst of conditions keeps the newest.
        if self.errors.len() >= 64 {
            self.errors.pop_front();
        }
        self.errors.push_back(error);
    }

    /// Notes which wanted topics (and assigned partitions) the metadata
    /// lacks, and which assigned partitions it names no leader for, and
    /// reports those missing for `topic.metadata.propagation.max.ms` (at
    /// once for an error retrying can't fix, such as an authorization
    /// failure). Nothing is said before metadata arrived at all.
    fn watch_topics(&mut self, now: Instant) {
        if self.cluster.metadata_generation() == 0 {
            return;
        }
        // Looked at again only when the metadata, the subscription or the
        // assignment changed, or while something is lacking: a quiet
        // consumer does not walk its partitions on every pass.
        let inputs = (
            self.cluster.metadata_generation(),
            self.mode_generation,
            self.fetcher.assignment_generation(),
        );
        if self.watched_quiet == Some(inputs) {
            return;
        }
        let mut wanted: BTreeSet<(String, Option<i32>)> = BTreeSet::new();
        match &self.mode {
            Mode::Idle => {}
            Mode::Subscribed(topics) => wanted.extend(topics.iter().map(|t| (t.clone(), None))),
            // A pattern names no topic: one it does not match is not
            // missing.
            Mode::Pattern(_) => {}
            Mode::Assigned(tps) => {
                for tp in tps {
                    wanted.insert((tp.topic.clone(), None));
                    wanted.insert((tp.topic.clone(), Some(tp.partition)));
                }
            }
        }
        let metadata = self.cluster.metadata();
        let mut lacking = Vec::new();
        for key in &wanted {
            let info = metadata.topics.get(&key.0);
            let code = match (info, key.1) {
                (None, _) => ErrorCode::UnknownTopicOrPartition,
                (Some(t), None) => t.error,
                (Some(t), Some(p)) => {
                    if t.error == ErrorCode::None
                        && !t.partitions.is_empty()
                        && !t.partitions.contains_key(&p)
                    {
                        ErrorCode::UnknownTopicOrPartition
                    } else {
                        ErrorCode::None
                    }
                }
            };
            if code != ErrorCode::None {
                let lack = match key.1 {
                    None => Lack::Topic,
                    Some(_) => Lack::Partition {
                        partitions: info.map_or(0, |t| t.partitions.len()),
                    },
                };
                lacking.push((key.clone(), code, lack));
            }
        }
        // Partitions being fetched (assigned by hand or by the group) of a
        // known topic whose metadata names no leader: nothing is fetched
        // from them until it does.
        for tp in self.fetcher.leader_unknown(metadata) {
            let Some(t) = metadata
                .topics
                .get(&tp.topic)
                .filter(|t| t.error == ErrorCode::None && !t.partitions.is_empty())
            else {
                continue;
            };
            let key = (tp.topic.clone(), Some(tp.partition));
            let Some(p) = t.partitions.get(&tp.partition) else {
                // Assigned by the group but not in the metadata (assigned
                // by hand, it is among `wanted` above).
                if !wanted.contains(&key) {
                    lacking.push((
                        key,
                        ErrorCode::UnknownTopicOrPartition,
                        Lack::Partition {
                            partitions: t.partitions.len(),
                        },
                    ));
                }
                continue;
            };
            let code = match p.error {
                ErrorCode::None => ErrorCode::LeaderNotAvailable,
                code => code,
            };
            lacking.push((key, code, Lack::Leader));
        }
        self.watched_quiet =
            (lacking.is_empty() && self.fetcher.every_leader_known(metadata)).then_some(inputs);
        let lacking_keys: BTreeSet<_> = lacking.iter().map(|(k, _, _)| k.clone()).collect();
        self.missing.retain(|k, _| lacking_keys.contains(k));
        for (key, code, lack) in lacking {
            let entry = self.missing.entry(key.clone()).or_insert(Missing {
                since: now,
                code,
                reported: None,
            });
            if entry.code != code {
                *entry = Missing {
                    since: now,
                    code,
                    reported: None,
                };
            }
            let due = match entry.reported {
                None => {
                    !code.is_retriable()
                        || now.saturating_duration_since(entry.since) >= self.propagation
                }
                Some(t) => now.saturating_duration_since(t) >= crate::error::REPORT_AGAIN_AFTER,
            };
            if !due {
                continue;
            }
            entry.reported = Some(now);
            let (topic, partition) = key;
            let error = match (lack, partition) {
                (Lack::Partition { partitions }, Some(partition)) => Error::UnknownPartition {
                    topic,
                    partition,
                    partitions,
                },
                (Lack::Leader, Some(partition)) => Error::NoLeader {
                    topic,
                    partition,
                    code,
                },
                _ => Error::Topic { topic, code },
            };
            self.report(error);
        }
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
            self.next_auto_commit,
            self.committed_retry.not_before(),
            self.poll_deadline(),
        ];
        let retries = self
            .commit_retries
            .values()
            .filter_map(|(r, _)| r.not_before());
        let reports = self.missing.values().map(|m| match m.reported {
            None => m.since + self.propagation,
            Some(t) => t + crate::error::REPORT_AGAIN_AFTER,
        });
        candidates
            .into_iter()
            .flatten()
            .chain(retries)
            .chain(reports)
    }

    fn poll_deadline(&self) -> Option<Instant> {
        let stable = self.membership.as_ref().is_some_and(|m| m.is_stable());
        (stable && !self.closing)
            .then_some(self.last_poll)
            .flatten()
            .map(|t| t + self.max_poll_interval)
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
        topics.extend(self.query_topics.iter().cloned());
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
                    self.committed_in_flight = false;
                    self.handle_committed(now, partitions, result);
                }
                Pending::Commit(commit, offsets) => {
                    self.handle_commit(now, commit, offsets, result)
                }
                Pending::Fetch(token) => match result {
                    Ok(response) => {
                        let outcome = self.fetcher.handle_response(now, token, &response);
                        if outcome.refresh_metadata {
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
                    self.queries.insert(q, result);
                }
            }
        }
    }

    fn check_poll_interval(&mut self, now: Instant) {
        let Some(deadline) = self.poll_deadline() else {
            return;
        };
        if now < deadline {
            return;
        }
        // Java's behaviour: a member that does not poll within
        // max.poll.interval.ms leaves the group, so its partitions go to
        // members that make progress; it joins again at its next poll.
        log::warn!(
            "no poll for max.poll.interval.ms ({:?}): leaving the group",
            self.max_poll_interval
        );
        self.leave_group(now, "max.poll.interval.ms passed without a poll");
        self.left_for_poll_timeout = true;
    }

    fn leave_group(&mut self, now: Instant, reason: &str) {
        let now_request = self.membership.as_mut().and_then(|m| {
            let r = m.leave(reason);
            m.subscribe(BTreeSet::new());
            r
        });
        self.collect_group_events(now);
        if let Some(request) = now_request {
            let id = self.cluster.request(now, Target::Coordinator, request);
            self.in_flight
                .insert(id, Pending::Group(GroupRequestKind::Leave));
        }
    }

    /// Takes the membership's events: revoked partitions' offsets are
    /// committed first (auto-commit, as Java does in onJoinPrepare), then the
    /// fetcher follows the new assignment.
    fn collect_group_events(&mut self, now: Instant) {
        loop {
            let Some(e) = self.membership.as_mut().and_then(|m| m.poll_event()) else {
                return;
            };
            if let GroupEvent::Revoked(revoked) = &e {
                let positions = self.consumed_positions(Some(revoked));
                self.revoked_positions
                    .extend(positions.iter().map(|(tp, o)| (tp.clone(), o.offset)));
                let offsets = self.committable(Some(revoked));
                if self.auto_commit.is_some() && !offsets.is_empty() {
                    self.blocking_commit = self.send_commit(now, None, offsets);
                }
                if self.hold_for_listener {
                    self.undelivered_revocations += 1;
                }
            }
            if let Some(m) = &self.membership {
                self.fetcher.assign(m.assignment().iter().cloned());
            }
            self.prune_offset_store();
            if matches!(e, GroupEvent::Assigned(_)) {
                self.rebalances += 1;
                self.last_rebalance = Some(now);
            }
            self.group_events.push_back(e);
            self.update_topics();
        }
    }

    /// Under a classic pattern subscription, matches the pattern again
    /// whenever the metadata changed (every `metadata.max.age.ms` at the
    /// latest): topics that appear or disappear change the subscription,
    /// and the member rejoins (as the Java client does).
    fn drive_pattern(&mut self) {
        if self.closing || self.left_for_poll_timeout {
            return;
        }
        let (Mode::Pattern(pattern), Some(m)) = (&self.mode, &mut self.membership) else {
            return;
        };
        if m.protocol() != GroupProtocol::Classic {
            return;
        }
        let generation = self.cluster.metadata_generation();
        if self.matched_generation == Some(generation) {
            return;
        }
        self.matched_generation = Some(generation);
        let before = m.topics().clone();
        let now_matched = m.subscribe_pattern(
            pattern,
            self.cluster.metadata(),
            self.exclude_internal_topics,
        );
        if let Some(topics) = now_matched.filter(|t| *t != before) {
            log::info!(
                "pattern {pattern:?} now matches {} topic(s): {}",
                topics.len(),
                topics.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
    }

    fn drive_group(&mut self, now: Instant) {
        self.collect_group_events(now);
        if self.closing || self.left_for_poll_timeout {
            return;
        }
        if let Some(id) = self.blocking_commit {
            if self.in_flight.contains_key(&id) {
                return;
            }
            self.blocking_commit = None;
        }
        if self.undelivered_revocations > 0 {
            return;
        }
        let Some(m) = &mut self.membership else {
            return;
        };
        let request = m.poll_request(now, self.cluster.metadata());
        let awaiting = m.awaiting_metadata().is_some();
        // KIP-848 assigns by topic id: an id the metadata does not know is
        // a topic never asked for by name (a regex subscription's, or one
        // created since the last refresh); it is looked up by id.
        let unresolved = m.unresolved_topic_ids();
        if !unresolved.is_empty() {
            self.cluster.set_topic_ids(unresolved);
            // Sent now, not at a later deadline.
            self.cluster.handle_timeout(now);
        } else {
            self.cluster.set_topic_ids(unresolved);
        }
        self.collect_group_events(now);
        if awaiting {
            self.update_topics();
        }
        if let Some((kind, body)) = request {
            let id = if kind == GroupRequestKind::Join {
                self.cluster
                    .request_with_timeout(now, Target::Coordinator, body, self.join_timeout)
            } else {
                self.cluster.request(now, Target::Coordinator, body)
            };
            self.in_flight.insert(id, Pending::Group(kind));
        }
    }

    fn drive_committed(&mut self, now: Instant) {
        if self.committed_in_flight || !self.committed_retry.ready(now) {
            return;
        }
        // Its wait is over: no deadline left in the past.
        self.committed_retry.clear_wait();
        let needed: BTreeSet<TopicPartition> = self.fetcher.needs_committed().into_iter().collect();
        if needed.is_empty() {
            return;
        }
        match &self.group_id {
            Some(group) => {
                self.committed_in_flight = true;
                let id = self.cluster.request(
                    now,
                    Target::Coordinator,
                    Box::new(FetchCommitted {
                        group: group.clone(),
                        partitions: needed.clone(),
                        require_stable: true,
                    }),
                );
                self.in_flight.insert(id, Pending::Committed(needed));
            }
            None => {
                // No group: nothing is committed; auto.offset.reset decides.
                for tp in needed {
                    self.fetcher.set_committed(&tp, None);
                }
            }
        }
    }

    fn handle_committed(
        &mut self,
        now: Instant,
        partitions: BTreeSet<TopicPartition>,
        result: Result<Response, RequestError>,
    ) {
        let group = self.group_id.clone().unwrap_or_default();
        let offsets = match result.map(|r| read_committed(&r, &group)) {
            Ok(Ok(CommittedOffsets::Offsets(o))) => {
                self.committed_retry.succeeded();
                self.refusals_reported.remove("OffsetFetch");
                o
            }
            Ok(Ok(CommittedOffsets::Error(code))) => {
                // Asked again under the retry policy, whatever the code: a
                // coordinator loading its offsets after a restart answers
                // COORDINATOR_LOAD_IN_PROGRESS for seconds.
                let delay = self
                    .committed_retry
                    .failed(now, &self.retry_policy, self.rng.unit());
                log::debug!("OffsetFetch for {group}: {code}; asked again in {delay:?}");
                match classify(code) {
                    GroupErrorClass::Coordinator => self.cluster.coordinator_unknown(now),
                    GroupErrorClass::Refused => self.report_refusal(now, "OffsetFetch", code),
                    GroupErrorClass::Transient | GroupErrorClass::Rebalance => {}
                }
                return;
            }
            Ok(Err(e)) => {
                self.committed_retry
                    .failed(now, &self.retry_policy, self.rng.unit());
                self.errors.push_back(Error::Decode {
                    api: "OffsetFetch",
                    addr: String::new(),
                    source: e,
                });
                return;
            }
            Err(e) => {
                let delay = self
                    .committed_retry
                    .failed(now, &self.retry_policy, self.rng.unit());
                log::debug!(
                    "OffsetFetch for {group} got no response: {e}; asked again in {delay:?}"
                );
                return;
            }
        };
        for tp in partitions {
            let committed = offsets.get(&tp).copied().flatten();
            let applied = self
                .fetcher
                .set_committed(&tp, committed.map(|o| (o.offset, o.leader_epoch)));
            if applied && committed.is_none() {
                // Said only once the coordinator answered: before that,
                // nothing is known about committed offsets.
                log::info!(
                    "{tp} has no committed offset in group {group:?}; starting from auto.offset.reset"
                );
            }
        }
    }

    fn drive_fetch(&mut self, now: Instant) {
        if self.closing {
            return;
        }
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

    fn drive_auto_commit(&mut self, now: Instant) {
        let (Some(interval), Some(due)) = (self.auto_commit, self.next_auto_commit) else {
            return;
        };
        if now < due || self.closing {
            return;
        }
        self.next_auto_commit = Some(now + interval);
        let stable = self.membership.as_ref().is_some_and(|m| m.is_stable());
        if self.group_id.is_some() && (stable || matches!(self.mode, Mode::Assigned(_))) {
            let offsets = self.committable(None);
            if !offsets.is_empty() {
                self.send_commit(now, None, offsets);
            }
        }
    }

    /// What a commit of owned partitions (all, or those in `only`) takes:
    /// the consumed positions, or with `enable.auto.offset.store=false`
    /// the offsets the application stored.
    fn committable(
        &self,
        only: Option<&BTreeSet<TopicPartition>>,
    ) -> BTreeMap<TopicPartition, OffsetAndEpoch> {
        match &self.offset_store {
            None => self.consumed_positions(only),
            Some(stored) => stored
                .iter()
                .filter(|(tp, _)| {
                    self.fetcher.is_assigned(tp) && only.is_none_or(|o| o.contains(*tp))
                })
                .map(|(tp, o)| (tp.clone(), *o))
                .collect(),
        }
    }

    /// The positions of owned partitions (all, or those in `only`).
    fn consumed_positions(
        &self,
        only: Option<&BTreeSet<TopicPartition>>,
    ) -> BTreeMap<TopicPartition, OffsetAndEpoch> {
        self.fetcher
            .positions()
            .into_iter()
            .filter(|(tp, _)| only.is_none_or(|o| o.contains(tp)))
            .map(|(tp, (offset, leader_epoch))| {
                (
                    tp,
                    OffsetAndEpoch {
                        offset,
                        leader_epoch,
                    },
                )
            })
            .collect()
    }

    /// Sends again the application's commits whose retry wait ended.
    fn drive_commit_retries(&mut self, now: Instant) {
        let due: Vec<CommitId> = self
            .commit_retries
            .iter()
            .filter(|(_, (retry, _))| retry.ready(now))
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            if let Some((retry, offsets)) = self.commit_retries.remove(&id) {
                self.send_commit(now, Some((id, retry)), offsets);
            }
        }
    }

    /// Sends an OffsetCommit; `id` is the application's commit (with its
    /// run of failures so far), `None` an automatic one. Returns the
    /// request, when one was sent.
    fn send_commit(
        &mut self,
        now: Instant,
        id: Option<(CommitId, Retry)>,
        offsets: BTreeMap<TopicPartition, OffsetAndEpoch>,
    ) -> Option<RequestId> {
        let Some(group) = self.group_id.clone() else {
            if let Some((id, _)) = id {
                self.commit_results.insert(
                    id,
                    Err(Error::Config {
                        property: "group.id".into(),
                        reason: "committing offsets needs a group.id".into(),
                    }),
                );
            }
            return None;
        };
        if offsets.is_empty() {
            if let Some((id, _)) = id {
                log::info!("nothing to commit: no assigned partition has a position yet");
                self.commit_results.insert(id, Ok(()));
            }
            return None;
        }
        let (generation, member_id, instance) = match &self.membership {
            // In a generation, also while revoking before a rejoin: a commit
            // with generation -1 would be refused by a group with members.
            Some(m) => match m.commit_generation() {
                Some((generation, member)) => (
                    generation,
                    member.to_owned(),
                    m.group_instance_id().map(str::to_owned),
                ),
                // Manual assignment, or between generations: a "simple"
                // commit.
                None => (-1, String::new(), m.group_instance_id().map(str::to_owned)),
            },
            None => (-1, String::new(), None),
        };
        let body = CommitOffsets {
            group,
            generation,
            member_id,
            group_instance_id: instance,
            offsets: offsets.clone(),
        };
        let rid = self
            .cluster
            .request(now, Target::Coordinator, Box::new(body));
        self.in_flight.insert(rid, Pending::Commit(id, offsets));
        Some(rid)
    }

    /// Reports a refusal by the group coordinator (`api`: the request it
    /// refused) at once, then again only every `REPORT_AGAIN_AFTER` while
    /// it lasts.
    fn report_refusal(&mut self, now: Instant, api: &'static str, code: ErrorCode) {
        let due = self
            .refusals_reported
            .get(api)
            .is_none_or(|t| now.saturating_duration_since(*t) >= crate::error::REPORT_AGAIN_AFTER);
        if due {
            self.refusals_reported.insert(api, now);
            self.report(Error::Group {
                group: self.group_id.clone().unwrap_or_default(),
                api,
                code: Some(code),
                reason: format!("{api} failed: {code}"),
                stopped: false,
            });
        }
    }

    fn handle_commit(
        &mut self,
        now: Instant,
        id: Option<(CommitId, Retry)>,
        offsets: BTreeMap<TopicPartition, OffsetAndEpoch>,
        result: Result<Response, RequestError>,
    ) {
        let group = self.group_id.clone().unwrap_or_default();
        // The error, and whether the same commit may be sent again (the
        // coordinator moved or is loading, the connection was lost).
        let (outcome, again) = match result {
            Err(e) => {
                let again = e.is_retriable();
                (
                    Err(Error::Request {
                        api: "OffsetCommit",
                        source: e,
                    }),
                    again,
                )
            }
            Ok(r) => match read_commit(&r) {
                Ok(None) => {
                    log::debug!("committed {} offsets", offsets.len());
                    self.refusals_reported.remove("OffsetCommit");
                    (Ok(()), false)
                }
                Ok(Some(code)) => {
                    let class = classify(code);
                    match class {
                        GroupErrorClass::Coordinator => self.cluster.coordinator_unknown(now),
                        // STALE_MEMBER_EPOCH (KIP-848, OffsetCommit v9):
                        // the member's epoch moved on; a heartbeat at once
                        // brings the current one for the next commit.
                        GroupErrorClass::Rebalance => {
                            // News of a rebalance only for a stable member;
                            // one already rejoining (a commit of revoked
                            // partitions) would otherwise rejoin once more
                            // after this round, and again, forever.
                            if let Some(m) = self.membership.as_mut().filter(|m| m.is_stable()) {
                                m.request_rejoin();
                            }
                        }
                        GroupErrorClass::Transient | GroupErrorClass::Refused => {}
                    }
                    // FENCED_LEADER_EPOCH: the coordinator knows a newer
                    // leader epoch of a partition than the commit carries
                    // (the epoch of the last record read there, KIP-320),
                    // so the same offsets are refused again; the next
                    // commit, after records of the new epoch, carries it.
                    // Neither the Java consumer nor librdkafka retries it.
                    // (Kafka's coordinator does not check the epoch;
                    // librdkafka's mock cluster does.)
                    let stale_epoch = code == ErrorCode::FencedLeaderEpoch;
                    let reason = match class {
                        GroupErrorClass::Rebalance => format!(
                            "OffsetCommit refused with {code}: the group is rebalancing (the member rejoins by itself); the offsets were not committed: commit again once the partitions are assigned"
                        ),
                        _ if stale_epoch => format!(
                            "OffsetCommit refused with {code}: the broker knows a newer leader epoch than the last record read; the offsets were not committed: commit again after reading on"
                        ),
                        _ => format!("OffsetCommit failed: {code}"),
                    };
                    let again = matches!(
                        class,
                        GroupErrorClass::Coordinator | GroupErrorClass::Transient
                    ) && !stale_epoch;
                    (
                        Err(Error::Group {
                            group: group.clone(),
                            api: "OffsetCommit",
                            code: Some(code),
                            reason,
                            stopped: false,
                        }),
                        again,
                    )
                }
                Err(source) => (
                    Err(Error::Decode {
                        api: "OffsetCommit",
                        addr: String::new(),
                        source,
                    }),
                    false,
                ),
            },
        };
        match (id, outcome) {
            (Some((id, _)), _) if self.abandoned_commits.remove(&id) => {}
            // The application's commit is sent again under the retry policy
            // (as the Java consumer's commitSync does) until its caller
            // stops waiting (`default.api.timeout.ms`, which names the
            // last error).
            (Some((id, mut retry)), Err(e)) if again => {
                let delay = retry.failed(now, &self.retry_policy, self.rng.unit());
                log::debug!("commit {id:?}: {e}; sent again in {delay:?}");
                self.last_error = Some(e.to_string());
                self.commit_retries.insert(id, (retry, offsets));
            }
            (Some((id, _)), outcome) => {
                self.commit_results.insert(id, outcome);
            }
            // An automatic commit: one retrying can't fix (authorization,
            // say) reaches `poll`; a rebalance or a coordinator that moved
            // is routine (the next interval commits again, with the
            // positions of the partitions then owned).
            (
                None,
                Err(Error::Group {
                    code: Some(code), ..
                }),
            ) if classify(code) == GroupErrorClass::Refused => {
                self.report_refusal(now, "OffsetCommit", code)
            }
            (None, Err(e)) if !e.is_retriable() => self.report(e),
            (None, Err(e)) => {
                log::info!("automatic commit for group {group:?} not done: {e} (committed again at the next interval)")
            }
            (None, Ok(())) => {}
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
