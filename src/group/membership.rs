//! Group membership in the classic protocol, as a state machine without IO.
//!
//! ```text
//!            subscribe / rejoin needed
//!   Unjoined ------------------------> Joining --JoinGroup ok--> Syncing
//!      ^  ^                              |  ^                      |
//!      |  |      MEMBER_ID_REQUIRED -----+  |                      | SyncGroup ok
//!      |  |      (join again with the id)   | REBALANCE_IN_PROGRESS|
//!      |  +---- leave (close, poll timeout)  +---------- Stable <---+
//!      |                                           (heartbeats)
//!      +---- fatal errors end in Failed
//! ```
//!
//! The machine decides which group request to send next
//! ([`Membership::poll_request`]), reads the answers
//! ([`Membership::handle_response`]), and reports assignment changes as
//! [`GroupEvent`]s. The caller sends the requests to the coordinator and
//! gives it the current time; nothing here reads a clock.
//!
//! Rebalance protocols (KIP-429): under the eager protocol every owned
//! partition is revoked before joining again; under the cooperative one a
//! member keeps its partitions through the rebalance, gives up only those
//! the new assignment takes away, and joins once more if it gave any up so
//! that the leader can hand them to their new owner.

use super::assignor::{AssignmentStrategy, GroupMember, RebalanceProtocol};
use super::TopicPartition;
use crate::cluster::{ExponentialBackoff, RequestBody, RequestError, Response, Retry, Rng};
use crate::protocol::group::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicPartition as WireTopicPartition,
};
use crate::protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use crate::protocol::messages::join_group::{
    JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse,
};
use crate::protocol::messages::leave_group::{LeaveGroupRequest, LeaveGroupResponse};
use crate::protocol::messages::sync_group::{
    SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse,
};
use crate::protocol::ApiKey;
use crate::protocol::EncodeError;
use crate::protocol::ErrorCode;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

/// The subscription and assignment versions this client writes
/// (`ConsumerProtocolSubscription.json` / `ConsumerProtocolAssignment.json`
/// v3: owned partitions, generation and rack). Readers of any Kafka client
/// accept newer versions by reading the fields they know.
const CONSUMER_PROTOCOL_VERSION: i16 = 3;

/// The reason of a JoinGroup sent again because the one before got no
/// answer, or was answered by a coordinator that moved, is loading or is
/// not available.
const JOIN_AGAIN: &str =
    "the JoinGroup before failed (no answer, or the coordinator moved, is loading or unavailable)";

/// Settings of the membership.
#[derive(Debug, Clone)]
pub struct MembershipConfig {
    /// `group.id`.
    pub group_id: String,
    /// `group.instance.id` (static membership, KIP-345).
    pub group_instance_id: Option<String>,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `max.poll.interval.ms`, sent as the rebalance timeout.
    pub rebalance_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `partition.assignment.strategy`, in preference order.
    pub strategies: Vec<AssignmentStrategy>,
    /// `client.rack`.
    pub rack: Option<String>,
    /// `retry.backoff.ms` doubling to `retry.backoff.max.ms`: the retry
    /// policy, between retries after coordinator errors.
    pub retry_backoff: ExponentialBackoff,
    /// Seeds the retry policy's jitter.
    pub seed: u64,
}

/// Which group request a [`Membership::poll_request`] produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupRequestKind {
    /// JoinGroup.
    Join,
    /// SyncGroup.
    Sync,
    /// Heartbeat.
    Heartbeat,
    /// LeaveGroup (classic), or the ConsumerGroupHeartbeat that leaves
    /// (member epoch -1 or -2, KIP-848).
    Leave,
    /// ConsumerGroupHeartbeat (KIP-848).
    ConsumerHeartbeat,
}

/// An assignment change, for the application's rebalance listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEvent {
    /// Partitions now assigned to this member.
    Assigned(BTreeSet<TopicPartition>),
    /// Partitions given up in an orderly way (offsets can still be
    /// committed for them).
    Revoked(BTreeSet<TopicPartition>),
    /// Partitions lost: the membership ended (session expired, fenced)
    /// and another member may own them already; committing is pointless.
    Lost(BTreeSet<TopicPartition>),
}

/// Where the member is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberState {
    /// Not in the group; joins at the next chance if subscribed.
    Unjoined,
    /// JoinGroup sent or about to be.
    Joining,
    /// The leader waits for metadata of these topics to assign.
    AwaitingMetadata(BTreeSet<String>),
    /// SyncGroup sent or about to be.
    Syncing,
    /// Assigned; heartbeats flow.
    Stable,
    /// Ended by an error no retry can fix.
    Failed(String),
}

/// Why a member stopped: reported to the application once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupFailure {
    /// The request that failed (`JoinGroup`, `SyncGroup`, ...).
    pub api: ApiKey,
    /// The broker's error code, when it gave one.
    pub code: Option<ErrorCode>,
    /// What happened, in words.
    pub reason: String,
}

impl GroupRequestKind {
    /// The API's name.
    pub fn api(self) -> ApiKey {
        match self {
            GroupRequestKind::Join => ApiKey::JoinGroup,
            GroupRequestKind::Sync => ApiKey::SyncGroup,
            GroupRequestKind::Heartbeat => ApiKey::Heartbeat,
            GroupRequestKind::Leave => ApiKey::LeaveGroup,
            GroupRequestKind::ConsumerHeartbeat => ApiKey::ConsumerGroupHeartbeat,
        }
    }
}

/// What the caller should do after a response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResponseOutcome {
    /// The coordinator moved or is unreachable: look it up again.
    pub coordinator_unknown: bool,
}

#[derive(Debug, Clone)]
struct JoinResult {
    protocol: String,
    leader: String,
    members: Vec<(String, Option<String>, Bytes)>,
}

/// The membership state machine. See the [module documentation](self).
#[derive(Debug)]
pub struct Membership {
    config: MembershipConfig,
    state: MemberState,
    topics: BTreeSet<String>,
    member_id: String,
    generation: i32,
    protocol: Option<String>,
    owned: BTreeSet<TopicPartition>,
    in_flight: Option<GroupRequestKind>,
    join: Option<JoinResult>,
    pending_assignment: Option<Vec<SyncGroupRequestAssignment>>,
    /// The run of failed group requests (the retry policy).
    retry: Retry,
    rng: Rng,
    /// Why the member stopped, until the consumer takes it.
    failure: Option<GroupFailure>,
    next_heartbeat: Option<Instant>,
    last_heartbeat_ok: Option<Instant>,
    /// A rejoin asked for while stable, with why.
    rejoin_requested: Option<&'static str>,
    /// Why the next JoinGroup goes out (in a debug line, in its `reason`
    /// field from v8 on, KIP-800, and counted in [`Membership::joins`]).
    join_reason: &'static str,
    /// JoinGroup requests sent, by reason.
    joins: BTreeMap<&'static str, u64>,
    events: VecDeque<GroupEvent>,
    /// The generation and member id given up by [`Membership::leave`].
    left_generation: Option<(i32, String)>,
}

impl Membership {
    /// A member that has not joined.
    pub fn new(config: MembershipConfig) -> Self {
        let rng = Rng::new(config.seed);
        Membership {
            config,
            state: MemberState::Unjoined,
            topics: BTreeSet::new(),
            member_id: String::new(),
            generation: -1,
            protocol: None,
            owned: BTreeSet::new(),
            in_flight: None,
            join: None,
            pending_assignment: None,
            retry: Retry::default(),
            rng,
            failure: None,
            next_heartbeat: None,
            last_heartbeat_ok: None,
            rejoin_requested: None,
            join_reason: "first join",
            joins: BTreeMap::new(),
            events: VecDeque::new(),
            left_generation: None,
        }
    }

    // ===== getters =====

    /// The state.
    pub fn state(&self) -> &MemberState {
        &self.state
    }

    /// The partitions this member owns.
    pub fn assignment(&self) -> &BTreeSet<TopicPartition> {
        &self.owned
    }

    /// The member id ("" before the first join).
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The generation, -1 when not in a stable group.
    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// `group.id`.
    pub fn group_id(&self) -> &str {
        &self.config.group_id
    }

    /// `group.instance.id`.
    pub fn group_instance_id(&self) -> Option<&str> {
        self.config.group_instance_id.as_deref()
    }

    /// Whether the member is in a stable group, so that offsets can be
    /// committed with its generation.
    pub fn is_stable(&self) -> bool {
        self.state == MemberState::Stable
    }

    /// The generation and member id an OffsetCommit carries: those of the
    /// current generation while the member belongs to it, including while
    /// it prepares to join again after a revocation (the revoked
    /// partitions' offsets are committed then, as the Java client does in
    /// `onJoinPrepare`; brokers accept a commit of the current generation
    /// until the group moves to the next). `None` outside a generation.
    ///
    /// After [`Membership::leave`] it is the generation just left, until
    /// the next join: the partitions' offsets are committed between the
    /// revocation and the LeaveGroup, and the coordinator still knows the
    /// member then.
    pub fn commit_generation(&self) -> Option<(i32, &str)> {
        if self.generation >= 0 && !self.member_id.is_empty() {
            return Some((self.generation, self.member_id.as_str()));
        }
        self.left_generation
            .as_ref()
            .map(|(g, id)| (*g, id.as_str()))
    }

    /// The next assignment change.
    pub fn poll_event(&mut self) -> Option<GroupEvent> {
        self.events.pop_front()
    }

    /// When [`Membership::poll_request`] may have something to send, or a
    /// session expiry must be noticed.
    pub fn next_deadline(&self) -> Option<Instant> {
        let mut t = self.retry.not_before();
        if self.state == MemberState::Stable && self.in_flight.is_none() {
            t = min_opt(t, self.next_heartbeat);
        }
        if self.state == MemberState::Stable {
            t = min_opt(
                t,
                self.last_heartbeat_ok
                    .map(|h| h + self.config.session_timeout),
            );
        }
        t
    }

    // ===== inputs =====

    /// Sets the subscribed topics. A change while in the group triggers a
    /// rejoin, so the leader can assign the new set.
    pub fn subscribe(&mut self, topics: BTreeSet<String>) {
        if topics != self.topics {
            self.topics = topics;
            if self.state != MemberState::Unjoined {
                self.rejoin_requested = Some("the subscription changed");
            }
        }
    }

    /// The subscribed topics.
    pub fn topics(&self) -> &BTreeSet<String> {
        &self.topics
    }

    /// Asks for a rejoin, for `reason` (for instance after the partition
    /// count of a subscribed topic changed, which the leader must notice).
    pub fn request_rejoin(&mut self, reason: &'static str) {
        if self.state != MemberState::Unjoined {
            self.rejoin_requested = Some(reason);
        }
    }

    /// JoinGroup requests sent since the member was made, by reason.
    pub fn joins(&self) -> &BTreeMap<&'static str, u64> {
        &self.joins
    }

    /// The next group request to send to the coordinator, if any.
    ///
    /// `partitions` gives the partition count of each topic the metadata
    /// knows; the group leader needs the counts of every topic any member
    /// subscribes to. When some are missing, the state becomes
    /// [`MemberState::AwaitingMetadata`] with the topics to look up.
    pub fn poll_request(
        &mut self,
        now: Instant,
        partitions: &BTreeMap<String, i32>,
    ) -> Option<(GroupRequestKind, Box<dyn RequestBody>)> {
        self.check_session(now);
        if self.in_flight.is_some() || !self.retry.ready(now) {
            return None;
        }
        self.retry.clear_wait();
        if self.topics.is_empty() {
            return None;
        }
        if let Some(reason) = self
            .rejoin_requested
            .filter(|_| matches!(self.state, MemberState::Stable))
        {
            self.rejoin_requested = None;
            self.prepare_rejoin(reason);
            if !self.events.is_empty() {
                // Let the caller act on the revocation (commit, listener)
                // before JoinGroup goes out.
                return None;
            }
        }
        let request: (GroupRequestKind, Box<dyn RequestBody>) = match &self.state {
            MemberState::Failed(_) => return None,
            MemberState::Unjoined | MemberState::Joining => {
                self.left_generation = None;
                self.state = MemberState::Joining;
                *self.joins.entry(self.join_reason).or_default() += 1;
                log::debug!(
                    "group {}: JoinGroup ({}; member id {:?})",
                    self.config.group_id,
                    self.join_reason,
                    self.member_id
                );
                (GroupRequestKind::Join, Box::new(self.join_request()))
            }
            MemberState::AwaitingMetadata(_) | MemberState::Syncing => {
                let assignments = match self.pending_assignment.take() {
                    Some(a) => a,
                    None => match self.leader_assignment(partitions) {
                        Ok(a) => a,
                        Err(missing) => {
                            self.state = MemberState::AwaitingMetadata(missing);
                            return None;
                        }
                    },
                };
                self.state = MemberState::Syncing;
                (
                    GroupRequestKind::Sync,
                    Box::new(self.sync_request(assignments)),
                )
            }
            MemberState::Stable => {
                if self.next_heartbeat.is_some_and(|t| now < t) {
                    return None;
                }
                self.next_heartbeat = None;
                (
                    GroupRequestKind::Heartbeat,
                    Box::new(HeartbeatRequest {
                        group_id: self.config.group_id.clone(),
                        generation_id: self.generation,
                        member_id: self.member_id.clone(),
                        group_instance_id: self.config.group_instance_id.clone(),
                        ..HeartbeatRequest::default()
                    }),
                )
            }
        };
        self.in_flight = Some(request.0);
        Some(request)
    }

    /// Reads the answer (or failure) of the request of kind `kind`.
    pub fn handle_response(
        &mut self,
        now: Instant,
        kind: GroupRequestKind,
        result: Result<Response, RequestError>,
    ) -> ResponseOutcome {
        if self.in_flight == Some(kind) {
            self.in_flight = None;
        }
        let response = match result {
            Ok(r) => r,
            Err(e) => {
                log::debug!(
                    "group {}: {kind:?} got no response: {e}",
                    self.config.group_id
                );
                return self.coordinator_trouble(now, kind);
            }
        };
        let decoded = match kind {
            GroupRequestKind::Join => match response.decode::<JoinGroupResponse>() {
                Ok(r) => Ok(self.handle_join(now, r)),
                // librdkafka's mock answers a JoinGroup it refuses with a
                // null protocol name, which the schema allows only from v7.
                // The error code comes first (after the throttle time from
                // v2): act on the refusal, as for SyncGroup below.
                Err(e) => match leading_error_code(&response.body, response.version >= 2) {
                    Some(code) if code != ErrorCode::None => Ok(self.handle_join(
                        now,
                        JoinGroupResponse {
                            error_code: code.code(),
                            ..JoinGroupResponse::default()
                        },
                    )),
                    _ => Err(e),
                },
            },
            GroupRequestKind::Sync => match response.decode::<SyncGroupResponse>() {
                Ok(r) => Ok(self.handle_sync(now, r)),
                // librdkafka's mock answers a SyncGroup it refuses with a
                // null assignment, which the schema does not allow. The
                // error code comes before it (after the throttle time from
                // v1), so the refusal is still clear: act on it.
                Err(e) => match leading_error_code(&response.body, response.version >= 1) {
                    Some(code) if code != ErrorCode::None => Ok(self.handle_sync(
                        now,
                        SyncGroupResponse {
                            error_code: code.code(),
                            ..SyncGroupResponse::default()
                        },
                    )),
                    _ => Err(e),
                },
            },
            GroupRequestKind::Heartbeat => response
                .decode::<HeartbeatResponse>()
                .map(|r| self.handle_heartbeat(now, ErrorCode::from_code(r.error_code))),
            GroupRequestKind::Leave => response
                .decode::<LeaveGroupResponse>()
                .map(|_| ResponseOutcome::default()),
            // Not a request of this protocol (see `group::either_membership`).
            GroupRequestKind::ConsumerHeartbeat => Ok(ResponseOutcome::default()),
        };
        match decoded {
            Ok(outcome) => outcome,
            Err(e) => {
                log::warn!(
                    "group {}: cannot decode {kind:?} response: {e}",
                    self.config.group_id
                );
                self.coordinator_trouble(now, kind)
            }
        }
    }

    /// Leaves the group (on close, or when `max.poll.interval.ms` passed
    /// without a poll): owned partitions are revoked, and the LeaveGroup
    /// request to send is returned when there is a membership to end. A
    /// static member (with `group.instance.id`) does not send LeaveGroup, as
    /// in the Java client: its partitions wait for it until the session
    /// times out.
    pub fn leave(&mut self, reason: &str) -> Option<Box<dyn RequestBody>> {
        let had_membership = !self.member_id.is_empty() && self.state != MemberState::Unjoined;
        if self.generation >= 0 && !self.member_id.is_empty() {
            self.left_generation = Some((self.generation, self.member_id.clone()));
        }
        if !self.owned.is_empty() {
            let owned = std::mem::take(&mut self.owned);
            self.events.push_back(GroupEvent::Revoked(owned));
        }
        let request = (had_membership && self.config.group_instance_id.is_none()).then(|| {
            Box::new(LeaveGroupBody {
                group_id: self.config.group_id.clone(),
                member_id: self.member_id.clone(),
                reason: reason.to_owned(),
            }) as Box<dyn RequestBody>
        });
        self.reset_membership(true);
        request
    }

    // ===== the machine =====

    fn check_session(&mut self, now: Instant) {
        if self.state != MemberState::Stable {
            return;
        }
        if let Some(ok) = self.last_heartbeat_ok {
            if now.saturating_duration_since(ok) >= self.config.session_timeout {
                log::info!(
                    "group {}: no successful heartbeat for the session timeout; partitions lost",
                    self.config.group_id
                );
                self.lose_partitions();
                self.rejoin("no successful heartbeat for the session timeout");
            }
        }
    }

    fn protocol_kind(&self) -> RebalanceProtocol {
        RebalanceProtocol::for_strategies(&self.config.strategies)
    }

    /// Before joining again from a stable group, for `reason`: the eager
    /// protocol gives up everything first.
    fn prepare_rejoin(&mut self, reason: &'static str) {
        if self.protocol_kind() == RebalanceProtocol::Eager && !self.owned.is_empty() {
            let owned = std::mem::take(&mut self.owned);
            self.events.push_back(GroupEvent::Revoked(owned));
        }
        self.rejoin(reason);
    }

    /// The next request is a JoinGroup, for `reason`.
    fn rejoin(&mut self, reason: &'static str) {
        self.state = MemberState::Joining;
        self.join_reason = reason;
    }

    fn lose_partitions(&mut self) {
        if !self.owned.is_empty() {
            let owned = std::mem::take(&mut self.owned);
            self.events.push_back(GroupEvent::Lost(owned));
        }
        self.generation = -1;
    }

    fn reset_membership(&mut self, forget_member_id: bool) {
        if forget_member_id {
            self.member_id.clear();
        }
        self.generation = -1;
        self.state = MemberState::Unjoined;
        self.join = None;
        self.pending_assignment = None;
        self.next_heartbeat = None;
        self.last_heartbeat_ok = None;
        self.rejoin_requested = None;
        self.join_reason = "joining after leaving the group";
    }

    fn coordinator_trouble(&mut self, now: Instant, kind: GroupRequestKind) -> ResponseOutcome {
        if kind == GroupRequestKind::Leave {
            // The member is gone either way; the coordinator ends the
            // membership when the session times out.
            return ResponseOutcome::default();
        }
        let delay = self.retry_later(now);
        if kind == GroupRequestKind::Join {
            // The JoinGroup goes again, and is counted as sent again: its
            // first reason was counted with the one that failed.
            self.join_reason = JOIN_AGAIN;
        }
        if kind == GroupRequestKind::Heartbeat {
            // Heartbeats are retried; the session expiry decides when the
            // partitions are lost.
            self.next_heartbeat = Some(now + delay);
        }
        ResponseOutcome {
            coordinator_unknown: true,
        }
    }

    /// One more failed request: the next waits for the retry policy.
    /// Returns the wait.
    fn retry_later(&mut self, now: Instant) -> Duration {
        let unit = self.rng.unit();
        self.retry.failed(now, &self.config.retry_backoff, unit)
    }

    fn subscription(&self, strategy: AssignmentStrategy) -> Result<Bytes, EncodeError> {
        let owned_generation = (self.generation >= 0).then_some(self.generation);
        ConsumerProtocolSubscription {
            topics: self.topics.iter().cloned().collect(),
            user_data: strategy.assignor().subscription_user_data(owned_generation),
            owned_partitions: to_wire(&self.owned),
            generation_id: self.generation,
            rack_id: self.config.rack.clone(),
        }
        .to_bytes(CONSUMER_PROTOCOL_VERSION)
    }

    fn join_request(&self) -> JoinGroupRequest {
        JoinGroupRequest {
            group_id: self.config.group_id.clone(),
            session_timeout_ms: millis(self.config.session_timeout),
            rebalance_timeout_ms: millis(self.config.rebalance_timeout),
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            protocol_type: "consumer".to_owned(),
            protocols: self
                .config
                .strategies
                .iter()
                .filter_map(|s| {
                    // A subscription that cannot be encoded is a bug in
                    // this crate, not a reason to stop joining.
                    self.subscription(*s)
                        .ok()
                        .map(|metadata| JoinGroupRequestProtocol {
                            name: s.name().to_owned(),
                            metadata,
                            ..JoinGroupRequestProtocol::default()
                        })
                })
                .collect(),
            // KIP-800 (v8+): the broker logs it.
            reason: Some(self.join_reason.to_owned()),
            ..JoinGroupRequest::default()
        }
    }

    fn handle_join(&mut self, now: Instant, r: JoinGroupResponse) -> ResponseOutcome {
        let code = ErrorCode::from_code(r.error_code);
        match code {
            ErrorCode::None => {
                self.retry.succeeded();
                self.member_id = r.member_id;
                self.generation = r.generation_id;
                self.protocol = r.protocol_name.clone();
                self.join = Some(JoinResult {
                    protocol: r.protocol_name.unwrap_or_default(),
                    leader: r.leader,
                    members: r
                        .members
                        .into_iter()
                        .map(|m| (m.member_id, m.group_instance_id, m.metadata))
                        .collect(),
                });
                self.pending_assignment = None;
                let is_leader = self
                    .join
                    .as_ref()
                    .is_some_and(|j| j.leader == self.member_id);
                if !is_leader {
                    // Followers send an empty assignment list.
                    self.pending_assignment = Some(Vec::new());
                }
                self.state = MemberState::Syncing;
                ResponseOutcome::default()
            }
            ErrorCode::MemberIdRequired => {
                // KIP-394: join again at once with the id just given.
                self.member_id = r.member_id;
                self.rejoin("MEMBER_ID_REQUIRED: again with the member id given (KIP-394)");
                ResponseOutcome::default()
            }
            ErrorCode::UnknownMemberId => {
                self.member_id.clear();
                self.rejoin("JoinGroup answered UNKNOWN_MEMBER_ID");
                ResponseOutcome::default()
            }
            ErrorCode::RebalanceInProgress | ErrorCode::IllegalGeneration => {
                self.rejoin("JoinGroup answered REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION");
                ResponseOutcome::default()
            }
            _ => self.handle_common_error(now, code, GroupRequestKind::Join),
        }
    }

    /// The leader's assignment, or the topics whose partition counts are
    /// missing.
    fn leader_assignment(
        &self,
        partitions: &BTreeMap<String, i32>,
    ) -> Result<Vec<SyncGroupRequestAssignment>, BTreeSet<String>> {
        let Some(join) = &self.join else {
            return Ok(Vec::new());
        };
        let strategy = AssignmentStrategy::from_name(&join.protocol)
            .or_else(|| self.config.strategies.first().copied())
            .unwrap_or(AssignmentStrategy::Range);
        let mut members = Vec::new();
        for (member_id, instance_id, metadata) in &join.members {
            let subscription = match ConsumerProtocolSubscription::from_bytes(metadata.clone()) {
                Ok((_, s)) => s,
                Err(e) => {
                    log::warn!(
                        "group {}: member {member_id} sent a subscription that cannot be read: {e}",
                        self.config.group_id
                    );
                    continue;
                }
            };
            let mut generation = subscription.generation_id;
            if generation < 0 {
                if let Some(g) = subscription
                    .user_data
                    .as_deref()
                    .and_then(super::assignor::decode_generation_user_data)
                {
                    generation = g;
                }
            }
            let mut member = GroupMember::new(member_id.clone(), subscription.topics.clone())
                .with_owned_partitions(from_wire(&subscription.owned_partitions), generation);
            member.group_instance_id = instance_id.clone();
            member.rack = subscription.rack_id.clone();
            members.push(member);
        }
        let wanted: BTreeSet<String> = members
            .iter()
            .flat_map(|m| m.topics.iter().cloned())
            .collect();
        let missing: BTreeSet<String> = wanted
            .iter()
            .filter(|t| !partitions.contains_key(*t))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(missing);
        }
        let assignment = strategy.assignor().assign(&members, partitions);
        Ok(assignment
            .into_iter()
            .map(|(member_id, tps)| {
                let set: BTreeSet<TopicPartition> = tps.into_iter().collect();
                let bytes = ConsumerProtocolAssignment {
                    assigned_partitions: to_wire(&set),
                    user_data: None,
                }
                .to_bytes(CONSUMER_PROTOCOL_VERSION)
                .unwrap_or_default();
                SyncGroupRequestAssignment {
                    member_id,
                    assignment: bytes,
                    ..SyncGroupRequestAssignment::default()
                }
            })
            .collect())
    }

    fn sync_request(&self, assignments: Vec<SyncGroupRequestAssignment>) -> SyncGroupRequest {
        SyncGroupRequest {
            group_id: self.config.group_id.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            protocol_type: Some("consumer".to_owned()),
            protocol_name: self.protocol.clone(),
            assignments,
            ..SyncGroupRequest::default()
        }
    }

    fn handle_sync(&mut self, now: Instant, r: SyncGroupResponse) -> ResponseOutcome {
        let code = ErrorCode::from_code(r.error_code);
        match code {
            ErrorCode::None => {
                self.retry.succeeded();
                let assigned = if r.assignment.is_empty() {
                    BTreeSet::new()
                } else {
                    match ConsumerProtocolAssignment::from_bytes(r.assignment) {
                        Ok((_, a)) => from_wire(&a.assigned_partitions).into_iter().collect(),
                        Err(e) => {
                            return self.fail(GroupFailure {
                                api: ApiKey::SyncGroup,
                                code: None,
                                reason: format!("cannot read the assignment: {e}"),
                            });
                        }
                    }
                };
                let revoked: BTreeSet<TopicPartition> =
                    self.owned.difference(&assigned).cloned().collect();
                let added: BTreeSet<TopicPartition> =
                    assigned.difference(&self.owned).cloned().collect();
                if !revoked.is_empty() {
                    self.events.push_back(GroupEvent::Revoked(revoked.clone()));
                }
                // Every completed rebalance ends with an assignment event,
                // even with nothing new (KIP-429: the listener's
                // onPartitionsAssigned is always called, so an application
                // learns the rebalance is over).
                self.events.push_back(GroupEvent::Assigned(added));
                self.owned = assigned;
                self.state = MemberState::Stable;
                self.join = None;
                self.last_heartbeat_ok = Some(now);
                self.next_heartbeat = Some(now + self.config.heartbeat_interval);
                // KIP-429: partitions given up must reach their new owner in
                // a follow-up rebalance.
                if self.protocol_kind() == RebalanceProtocol::Cooperative && !revoked.is_empty() {
                    self.rejoin_requested =
                        Some("partitions given up: the follow-up rebalance (KIP-429)");
                }
                ResponseOutcome::default()
            }
            ErrorCode::RebalanceInProgress => {
                self.rejoin("SyncGroup answered REBALANCE_IN_PROGRESS");
                ResponseOutcome::default()
            }
            // GROUP_ID_NOT_FOUND: the coordinator holds no such group (a
            // cluster other than the one joined is behind the addresses,
            // or the group was deleted): nor this member, then.
            ErrorCode::UnknownMemberId
            | ErrorCode::IllegalGeneration
            | ErrorCode::GroupIdNotFound => {
                if code != ErrorCode::IllegalGeneration {
                    self.member_id.clear();
                }
                self.lose_partitions();
                self.rejoin("SyncGroup: the member or its generation is unknown");
                ResponseOutcome::default()
            }
            // An answer this member cannot act on (INVALID_REQUEST,
            // UNKNOWN_SERVER_ERROR, ...) ends this generation, not the
            // membership: join again after the retry backoff, as librdkafka
            // does for every SyncGroup error but the fatal ones. (librdkafka's
            // mock answers INVALID_REQUEST to a SyncGroup that arrives while
            // its group is not syncing.)
            code if !code.is_retriable()
                && !matches!(
                    code,
                    ErrorCode::GroupAuthorizationFailed | ErrorCode::FencedInstanceId
                ) =>
            {
                log::warn!(
                    "group {}: SyncGroup refused with {code}; joining again",
                    self.config.group_id
                );
                self.retry_later(now);
                self.rejoin("SyncGroup refused");
                ResponseOutcome::default()
            }
            _ => self.handle_common_error(now, code, GroupRequestKind::Sync),
        }
    }

    fn handle_heartbeat(&mut self, now: Instant, code: ErrorCode) -> ResponseOutcome {
        if self.state != MemberState::Stable {
            return ResponseOutcome::default();
        }
        match code {
            ErrorCode::None => {
                self.retry.succeeded();
                self.last_heartbeat_ok = Some(now);
                self.next_heartbeat = Some(now + self.config.heartbeat_interval);
                ResponseOutcome::default()
            }
            ErrorCode::RebalanceInProgress => {
                self.last_heartbeat_ok = Some(now);
                self.prepare_rejoin("a heartbeat answered REBALANCE_IN_PROGRESS");
                ResponseOutcome::default()
            }
            // GROUP_ID_NOT_FOUND: the coordinator holds no such group (a
            // cluster other than the one joined is behind the addresses,
            // or the group was deleted): nor this member, then.
            ErrorCode::UnknownMemberId
            | ErrorCode::IllegalGeneration
            | ErrorCode::GroupIdNotFound => {
                if code != ErrorCode::IllegalGeneration {
                    self.member_id.clear();
                }
                self.lose_partitions();
                self.rejoin("a heartbeat: the member or its generation is unknown");
                ResponseOutcome::default()
            }
            _ => self.handle_common_error(now, code, GroupRequestKind::Heartbeat),
        }
    }

    fn handle_common_error(
        &mut self,
        now: Instant,
        code: ErrorCode,
        kind: GroupRequestKind,
    ) -> ResponseOutcome {
        match code {
            ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress => self.coordinator_trouble(now, kind),
            ErrorCode::FencedInstanceId => {
                self.lose_partitions();
                self.fail(GroupFailure {
                    api: kind.api(),
                    code: Some(code),
                    reason: format!(
                        "another member uses group.instance.id {:?} ({code})",
                        self.config.group_instance_id
                    ),
                })
            }
            code if code.is_retriable() => {
                let delay = self.retry_later(now);
                if kind == GroupRequestKind::Heartbeat {
                    self.next_heartbeat = Some(now + delay);
                } else {
                    self.rejoin("a retriable error");
                }
                ResponseOutcome::default()
            }
            code => {
                self.lose_partitions();
                self.fail(GroupFailure {
                    api: kind.api(),
                    code: Some(code),
                    reason: format!("{} failed: {code}", kind.api()),
                })
            }
        }
    }

    /// Stops the member; the failure is reported once, through
    /// [`Membership::take_failure`] (the consumer logs it).
    fn fail(&mut self, failure: GroupFailure) -> ResponseOutcome {
        self.state = MemberState::Failed(failure.reason.clone());
        self.failure = Some(failure);
        ResponseOutcome::default()
    }

    /// Why the member stopped, once (then `None`).
    pub fn take_failure(&mut self) -> Option<GroupFailure> {
        self.failure.take()
    }
}

/// LeaveGroup, written for the version negotiated: one `member_id` in
/// v0-2, a `members` list (KIP-345) with a reason (KIP-800) from v3.
#[derive(Debug)]
struct LeaveGroupBody {
    group_id: String,
    member_id: String,
    reason: String,
}

impl RequestBody for LeaveGroupBody {
    fn api_key(&self) -> crate::protocol::ApiKey {
        crate::protocol::ApiKey::LeaveGroup
    }

    fn encode_body(
        &self,
        w: &mut crate::protocol::Writer,
        version: i16,
    ) -> Result<(), EncodeError> {
        use crate::protocol::Message;
        let request = if version >= 3 {
            LeaveGroupRequest {
                group_id: self.group_id.clone(),
                members: vec![crate::protocol::messages::leave_group::MemberIdentity {
                    member_id: self.member_id.clone(),
                    group_instance_id: None,
                    reason: (version >= 5).then(|| self.reason.clone()),
                    ..Default::default()
                }],
                ..LeaveGroupRequest::default()
            }
        } else {
            LeaveGroupRequest {
                group_id: self.group_id.clone(),
                member_id: self.member_id.clone(),
                ..LeaveGroupRequest::default()
            }
        };
        request.encode(w, version)
    }
}

/// The error code that opens a response body (after its throttle time
/// when `throttled`), if the body is long enough.
fn leading_error_code(body: &[u8], throttled: bool) -> Option<ErrorCode> {
    let at = if throttled { 4 } else { 0 };
    let b = body.get(at..at + 2)?;
    Some(ErrorCode::from_code(i16::from_be_bytes([b[0], b[1]])))
}

fn min_opt(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

fn to_wire(set: &BTreeSet<TopicPartition>) -> Vec<WireTopicPartition> {
    let mut out: Vec<WireTopicPartition> = Vec::new();
    for tp in set {
        match out.last_mut() {
            Some(last) if last.topic == tp.topic => last.partitions.push(tp.partition),
            _ => out.push(WireTopicPartition {
                topic: tp.topic.clone(),
                partitions: vec![tp.partition],
            }),
        }
    }
    out
}

fn from_wire(list: &[WireTopicPartition]) -> Vec<TopicPartition> {
    list.iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.topic.clone(), *p))
        })
        .collect()
}

#[cfg(test)]
mod tests;
