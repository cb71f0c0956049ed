//! The group coordinator of the mock cluster: Kafka's classic group protocol
//! (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and the committed offsets
//! (OffsetCommit, OffsetFetch), as a pure state machine.
//!
//! Modelled on Apache Kafka's classic coordinator
//! (`group-coordinator/.../GroupMetadataManager.java`, `classic/ClassicGroup.java`;
//! before 3.x `core/.../GroupCoordinator.scala`), KIP-62 (rebalance timeout),
//! KIP-134 (initial rebalance delay), KIP-345 (static membership), KIP-394
//! (MEMBER_ID_REQUIRED), KIP-559 (protocol type and name in SyncGroup),
//! KIP-814 (skip assignment).
//!
//! Nothing here touches a socket, a thread or the clock: every input carries
//! `now`, and [`Groups::next_deadline`] says when [`Groups::tick`] must run.
//!
//! # Call order (for the server around it)
//!
//! 1. A request arrives: call [`Groups::join`] / [`Groups::sync`] (or the
//!    one-shot [`Groups::heartbeat`], [`Groups::leave`], [`Groups::commit`],
//!    [`Groups::fetch_offsets`]).
//! 2. [`Step::Wait`] means the answer depends on other members: after every
//!    later mutating call (any of the above, or [`Groups::tick`]) ask again
//!    with [`Groups::poll_join`] / [`Groups::poll_sync`] until `Some`. Each
//!    ticket is answered exactly once; [`Groups::cancel`] drops a ticket whose
//!    connection went away.
//! 3. Call [`Groups::tick`] at [`Groups::next_deadline`].
//!
//! # Group states
//!
//! ```text
//!                 first JoinGroup
//!   +-------+   (initial delay)    +--------------------+  all joined, or the
//!   | Empty | -------------------> | PreparingRebalance |  rebalance timeout   +---------------------+
//!   +-------+ <------------------- |                    | -------------------> | CompletingRebalance |
//!       ^      join completes with +--------------------+                      +---------------------+
//!       |      no member left          ^          ^     join / leave / expiry /          |
//!       |                              |          +--- changed metadata / missing sync --+
//!       |                              |                                                 | leader's SyncGroup
//!       |                              | join (new or changed member, leader rejoin),    v
//!       |                              | leave, session expiry, missing SyncGroup    +--------+
//!       |                              +---------------------------------------------| Stable |
//!       |                                                                            +--------+
//!   (the group only becomes Empty through a completed join phase)
//! ```

// `respond.rs` drives this module: it hands each group request to
// `Groups`, answers a `Step::Done` at once and polls a `Step::Wait` until
// its rebalance step is over.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::error::ErrorCode;
use crate::protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use crate::protocol::messages::join_group::{
    JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse, JoinGroupResponseMember,
};
use crate::protocol::messages::leave_group::{
    LeaveGroupRequest, LeaveGroupResponse, MemberIdentity, MemberResponse,
};
use crate::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
};
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchResponse, OffsetFetchResponseGroup,
    OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use crate::protocol::messages::sync_group::{SyncGroupRequest, SyncGroupResponse};

/// Kafka's default `offset.metadata.max.bytes`: longer commit metadata is
/// refused with OFFSET_METADATA_TOO_LARGE.
const OFFSET_METADATA_MAX_LEN: usize = 4096;

/// Settings of the coordinator.
#[derive(Debug, Clone)]
pub(crate) struct GroupSettings {
    /// How long the first rebalance of an empty group waits for more members
    /// (Kafka's `group.initial.rebalance.delay.ms`).
    pub initial_rebalance_delay: Duration,
    /// Bounds on a member's session timeout (Kafka's
    /// `group.min.session.timeout.ms` / `group.max.session.timeout.ms`).
    pub min_session_timeout: Duration,
    /// See `min_session_timeout`.
    pub max_session_timeout: Duration,
}

/// The outcome of a request that may have to wait for other members.
#[derive(Debug)]
pub(crate) enum Step<R> {
    /// Answered now.
    Done(R),
    /// Waits; ask again with [`Groups::poll_join`] / [`Groups::poll_sync`].
    Wait(Ticket),
}

/// A request waiting for a rebalance step.
#[derive(Debug, Clone)]
pub(crate) struct Ticket {
    id: u64,
}

/// Where a group is in the classic protocol's state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupState {
    /// No members.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's SyncGroup.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
}

/// A group as the coordinator sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GroupSnapshot {
    /// The group id.
    pub group_id: String,
    /// Its state.
    pub state: GroupState,
    /// The current generation (0 before the first rebalance completes).
    pub generation_id: i32,
    /// The protocol chosen (assignor name), once a rebalance has completed.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// The members.
    pub members: Vec<MemberSnapshot>,
}

/// One member of a group.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MemberSnapshot {
    /// Member id given by the coordinator.
    pub member_id: String,
    /// Static membership id, if any.
    pub group_instance_id: Option<String>,
    /// The client id from the member's JoinGroup header.
    pub client_id: String,
    /// The assignment bytes the leader gave it in the last SyncGroup.
    pub assignment: bytes::Bytes,
}

/// Every group of a cluster.
pub(crate) struct Groups {
    settings: GroupSettings,
    groups: BTreeMap<String, Group>,
    out: Outbox,
    /// Feeds ticket ids and member ids; never reused.
    counter: u64,
}

/// Answers to parked requests, by ticket id, until polled.
#[derive(Default)]
struct Outbox {
    joins: HashMap<u64, JoinGroupResponse>,
    syncs: HashMap<u64, SyncGroupResponse>,
}

/// A parked JoinGroup or SyncGroup: where its answer goes and the version it
/// must be encodable at.
#[derive(Debug, Clone, Copy)]
struct Waiter {
    ticket: u64,
    version: i16,
}

/// One member (Kafka's `ClassicGroupMember`).
struct Member {
    id: String,
    instance_id: Option<String>,
    client_id: String,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    protocol_type: String,
    /// Name and metadata, in the member's order of preference.
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    /// When the member is removed unless it heartbeats (ignored while it
    /// waits in a JoinGroup or SyncGroup: Kafka's `hasSatisfiedHeartbeat`).
    session_deadline: Instant,
    /// Its JoinGroup waiting for the join phase to complete.
    join: Option<Waiter>,
    /// Its SyncGroup waiting for the leader's.
    sync: Option<Waiter>,
}

impl Member {
    /// Whether the member's session can expire now (it waits for nobody).
    fn can_expire(&self) -> bool {
        self.join.is_none() && self.sync.is_none()
    }

    fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// Same protocols and metadata, in the same order (Kafka's `matches`).
    fn matches(&self, protocols: &[JoinGroupRequestProtocol]) -> bool {
        self.protocols.len() == protocols.len()
            && self
                .protocols
                .iter()
                .zip(protocols)
                .all(|((n, m), p)| *n == p.name && *m == p.metadata)
    }
}

/// The timer of the join phase (Kafka's `DelayedJoin` / `InitialDelayedJoin`).
#[derive(Debug, Clone, Copy)]
enum JoinTimer {
    /// The first rebalance of an empty group: completes only at `deadline`,
    /// which moves on by another delay while new members keep arriving,
    /// until the rebalance timeout is used up.
    Initial {
        deadline: Instant,
        delay: Duration,
        remaining: Duration,
        new_member_added: bool,
    },
    /// Completes when every member has rejoined, or at `deadline`.
    Rebalance { deadline: Instant },
}

impl JoinTimer {
    fn deadline(&self) -> Instant {
        match *self {
            JoinTimer::Initial { deadline, .. } | JoinTimer::Rebalance { deadline } => deadline,
        }
    }
}

/// A member id handed out with MEMBER_ID_REQUIRED, not yet used to join
/// (KIP-394). It blocks the join phase until it joins or expires.
struct PendingMember {
    id: String,
    deadline: Instant,
}

/// A committed offset.
#[derive(Debug, Clone)]
struct Committed {
    offset: i64,
    leader_epoch: i32,
    metadata: String,
}

impl Committed {
    /// What OffsetFetch reports for a partition with no commit.
    fn none() -> Self {
        Committed {
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
        }
    }
}

/// A topic's partitions and their commits, as OffsetFetch reports them.
type TopicOffsets = (String, Vec<(i32, Committed)>);

/// One group (Kafka's `ClassicGroup`) and its committed offsets.
struct Group {
    id: String,
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    /// In the order they joined.
    members: Vec<Member>,
    pending: Vec<PendingMember>,
    /// Set while PreparingRebalance.
    join_timer: Option<JoinTimer>,
    /// Members that have not sent SyncGroup since the join phase completed;
    /// at `sync_deadline` they are removed (Kafka's pending-sync expiry).
    pending_sync: Vec<String>,
    sync_deadline: Option<Instant>,
    offsets: BTreeMap<(String, i32), Committed>,
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// JoinGroup's protocol name at `version`: nullable from v7, where Kafka
/// sends null for "none"; an empty string before.
fn protocol_name_at(version: i16, name: Option<&str>) -> Option<String> {
    if version >= 7 {
        name.filter(|n| !n.is_empty()).map(str::to_owned)
    } else {
        Some(name.unwrap_or("").to_owned())
    }
}

fn join_error(version: i16, error: ErrorCode, member_id: &str) -> JoinGroupResponse {
    JoinGroupResponse {
        error_code: error.code(),
        generation_id: -1,
        protocol_type: None,
        protocol_name: protocol_name_at(version, None),
        member_id: member_id.to_owned(),
        ..JoinGroupResponse::default()
    }
}

fn sync_error(error: ErrorCode) -> SyncGroupResponse {
    SyncGroupResponse {
        error_code: error.code(),
        ..SyncGroupResponse::default()
    }
}

impl Group {
    fn new(id: &str) -> Self {
        Group {
            id: id.to_owned(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: Vec::new(),
            pending: Vec::new(),
            join_timer: None,
            pending_sync: Vec::new(),
            sync_deadline: None,
            offsets: BTreeMap::new(),
        }
    }

    fn member(&self, id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    fn member_mut(&mut self, id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.id == id)
    }

    fn static_member_id(&self, instance_id: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
            .map(|m| m.id.as_str())
    }

    fn is_leader(&self, id: &str) -> bool {
        self.leader.as_deref() == Some(id)
    }

    fn is_pending(&self, id: &str) -> bool {
        self.pending.iter().any(|p| p.id == id)
    }

    /// Kafka's `validateMember`: a request naming a group instance id must
    /// carry that instance's current member id (else FENCED_INSTANCE_ID).
    fn validate_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), ErrorCode> {
        if let Some(instance) = instance_id {
            match self.static_member_id(instance) {
                None => return Err(ErrorCode::UnknownMemberId),
                Some(current) if current != member_id => return Err(ErrorCode::FencedInstanceId),
                Some(_) => {}
            }
        }
        if self.member(member_id).is_none() {
            return Err(ErrorCode::UnknownMemberId);
        }
        Ok(())
    }

    /// The longest rebalance timeout of the members (Kafka's
    /// `rebalanceTimeoutMs`).
    fn rebalance_timeout(&self) -> Duration {
        self.members
            .iter()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default()
    }

    /// Protocols every member supports.
    fn candidates(&self) -> Vec<&str> {
        let Some(first) = self.members.first() else {
            return Vec::new();
        };
        first
            .protocols
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|name| {
                self.members
                    .iter()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            })
            .collect()
    }

    /// Kafka's `supportsClassicProtocols`: an empty group takes any non-empty
    /// protocol type and list; otherwise the type must match and one of the
    /// protocols must be supported by every member.
    fn supports(&self, protocol_type: &str, protocols: &[JoinGroupRequestProtocol]) -> bool {
        if self.state == GroupState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        let type_ok = match &self.protocol_type {
            Some(t) => t == protocol_type,
            None => self.members.is_empty(),
        };
        type_ok
            && protocols.iter().any(|p| {
                self.members
                    .iter()
                    .all(|m| m.protocols.iter().any(|(n, _)| *n == p.name))
            })
    }

    /// Kafka's vote: each member votes for its most preferred protocol among
    /// those every member supports; the most votes wins. Kafka breaks ties
    /// by hash-map order; here the tie goes to the protocol that comes first
    /// in the first member's list, so the choice is deterministic.
    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidates();
        let mut votes = vec![0usize; candidates.len()];
        for m in &self.members {
            if let Some(i) = m
                .protocols
                .iter()
                .find_map(|(n, _)| candidates.iter().position(|c| c == n))
            {
                votes[i] += 1;
            }
        }
        let mut best: Option<usize> = None;
        for (i, v) in votes.iter().enumerate() {
            if best.is_none_or(|b| *v > votes[b]) {
                best = Some(i);
            }
        }
        best.map(|i| candidates[i].to_owned())
    }

    fn has_all_joined(&self) -> bool {
        self.pending.is_empty() && self.members.iter().all(|m| m.join.is_some())
    }

    /// The member list the leader receives.
    fn member_list(&self, version: i16) -> Vec<JoinGroupResponseMember> {
        let protocol = self.protocol.as_deref().unwrap_or("");
        self.members
            .iter()
            .map(|m| JoinGroupResponseMember {
                member_id: m.id.clone(),
                group_instance_id: if version >= 5 {
                    m.instance_id.clone()
                } else {
                    None
                },
                metadata: m.metadata(protocol),
                unknown_tagged_fields: Vec::new(),
            })
            .collect()
    }

    /// A successful JoinGroup answer for `member_id` in the current
    /// generation.
    fn join_response(&self, version: i16, member_id: &str) -> JoinGroupResponse {
        JoinGroupResponse {
            error_code: ErrorCode::None.code(),
            generation_id: self.generation,
            protocol_type: if version >= 7 {
                self.protocol_type.clone()
            } else {
                None
            },
            protocol_name: protocol_name_at(version, self.protocol.as_deref()),
            leader: self.leader.clone().unwrap_or_default(),
            skip_assignment: false,
            member_id: member_id.to_owned(),
            members: if self.is_leader(member_id) {
                self.member_list(version)
            } else {
                Vec::new()
            },
            ..JoinGroupResponse::default()
        }
    }

    fn sync_response(&self, assignment: Bytes) -> SyncGroupResponse {
        SyncGroupResponse {
            error_code: ErrorCode::None.code(),
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            assignment,
            ..SyncGroupResponse::default()
        }
    }

    /// Adds a member (Kafka's `add`): the first member of an empty member
    /// list sets the protocol type; the first member becomes leader.
    fn add_member(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.id.clone());
        }
        if let Some(JoinTimer::Initial {
            new_member_added, ..
        }) = &mut self.join_timer
        {
            *new_member_added = true;
        }
        self.pending.retain(|p| p.id != member.id);
        self.members.push(member);
    }

    /// Removes a member (Kafka's `remove`); a parked JoinGroup or SyncGroup
    /// of it is answered UNKNOWN_MEMBER_ID. The caller decides whether a
    /// rebalance follows.
    fn remove_member(&mut self, out: &mut Outbox, id: &str) {
        if let Some(i) = self.members.iter().position(|m| m.id == id) {
            let m = self.members.remove(i);
            if let Some(w) = m.join {
                out.joins.insert(
                    w.ticket,
                    join_error(w.version, ErrorCode::UnknownMemberId, ""),
                );
            }
            if let Some(w) = m.sync {
                out.syncs
                    .insert(w.ticket, sync_error(ErrorCode::UnknownMemberId));
            }
        }
        if self.is_leader(id) {
            self.leader = self.members.first().map(|m| m.id.clone());
        }
        self.pending.retain(|p| p.id != id);
        self.remove_pending_sync(id);
    }

    fn remove_pending_sync(&mut self, id: &str) {
        self.pending_sync.retain(|p| p != id);
        if self.pending_sync.is_empty() {
            self.sync_deadline = None;
        }
    }

    /// After members left: Kafka's `removeMemberAndUpdateGroup`.
    fn after_removal(&mut self, out: &mut Outbox, now: Instant, settings: &GroupSettings) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(out, now, settings)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(out, now),
            GroupState::Empty => {}
        }
    }

    /// Kafka's `maybePrepareRebalanceOrCompleteJoin`.
    fn rebalance_or_complete_join(
        &mut self,
        out: &mut Outbox,
        now: Instant,
        settings: &GroupSettings,
    ) {
        if self.state == GroupState::PreparingRebalance {
            self.maybe_complete_join(out, now);
        } else {
            self.prepare_rebalance(out, now, settings);
        }
    }

    /// Enters PreparingRebalance (Kafka's `prepareRebalance`): parked
    /// SyncGroups are answered REBALANCE_IN_PROGRESS; an empty group waits
    /// the initial delay; otherwise the join phase ends when everyone has
    /// rejoined or after the rebalance timeout.
    fn prepare_rebalance(&mut self, out: &mut Outbox, now: Instant, settings: &GroupSettings) {
        if self.state == GroupState::CompletingRebalance {
            for m in &mut self.members {
                m.assignment = Bytes::new();
                if let Some(w) = m.sync.take() {
                    out.syncs
                        .insert(w.ticket, sync_error(ErrorCode::RebalanceInProgress));
                    m.session_deadline = now + m.session_timeout;
                }
            }
        }
        self.pending_sync.clear();
        self.sync_deadline = None;
        let initial = self.state == GroupState::Empty;
        self.state = GroupState::PreparingRebalance;
        let rebalance_timeout = self.rebalance_timeout();
        if initial {
            let delay = settings.initial_rebalance_delay;
            if delay.is_zero() {
                // Kafka schedules the initial join with a zero delay; it
                // fires at once.
                self.complete_join(out, now);
            } else {
                self.join_timer = Some(JoinTimer::Initial {
                    deadline: now + delay,
                    delay,
                    remaining: rebalance_timeout.saturating_sub(delay),
                    new_member_added: false,
                });
            }
        } else if self.has_all_joined() {
            self.complete_join(out, now);
        } else {
            self.join_timer = Some(JoinTimer::Rebalance {
                deadline: now + rebalance_timeout,
            });
        }
    }

    /// Kafka's `maybeCompleteJoinPhase`: never ends the initial delay early.
    fn maybe_complete_join(&mut self, out: &mut Outbox, now: Instant) {
        if self.state == GroupState::PreparingRebalance
            && !matches!(self.join_timer, Some(JoinTimer::Initial { .. }))
            && self.has_all_joined()
        {
            self.complete_join(out, now);
        }
    }

    /// Ends the join phase (Kafka's `completeClassicGroupJoin`): dynamic
    /// members that did not rejoin are dropped, a leader that did not rejoin
    /// is replaced, the generation moves on and every parked JoinGroup is
    /// answered.
    fn complete_join(&mut self, out: &mut Outbox, now: Instant) {
        self.join_timer = None;
        let gone: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.join.is_none() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            self.remove_member(out, id);
        }
        if !self.members.is_empty() {
            let leader_joined = self
                .leader
                .as_deref()
                .and_then(|l| self.member(l))
                .is_some_and(|l| l.join.is_some());
            if !leader_joined {
                match self.members.iter().find(|m| m.join.is_some()) {
                    Some(m) => self.leader = Some(m.id.clone()),
                    None => {
                        // Only static members that did not rejoin are left:
                        // Kafka waits another rebalance timeout for them
                        // (or for their sessions to expire).
                        self.join_timer = Some(JoinTimer::Rebalance {
                            deadline: now + self.rebalance_timeout(),
                        });
                        return;
                    }
                }
            }
        }
        self.generation += 1;
        if self.members.is_empty() {
            self.protocol = None;
            self.state = GroupState::Empty;
            return;
        }
        self.protocol = self.select_protocol();
        self.state = GroupState::CompletingRebalance;
        let mut answers = Vec::new();
        for m in &mut self.members {
            if let Some(w) = m.join.take() {
                answers.push((w, m.id.clone()));
            }
            m.session_deadline = now + m.session_timeout;
        }
        for (w, id) in answers {
            out.joins
                .insert(w.ticket, self.join_response(w.version, &id));
        }
        self.pending_sync = self.members.iter().map(|m| m.id.clone()).collect();
        self.sync_deadline = Some(now + self.rebalance_timeout());
    }

    /// The leader's SyncGroup arrived: every member gets its assignment
    /// (empty when the leader gave none) and the group is Stable.
    fn set_assignments(&mut self, out: &mut Outbox, now: Instant, req: &SyncGroupRequest) {
        for m in &mut self.members {
            m.assignment = req
                .assignments
                .iter()
                .rev()
                .find(|a| a.member_id == m.id)
                .map(|a| a.assignment.clone())
                .unwrap_or_default();
        }
        let mut answers = Vec::new();
        for m in &mut self.members {
            if let Some(w) = m.sync.take() {
                answers.push((w, m.assignment.clone()));
                m.session_deadline = now + m.session_timeout;
            }
        }
        for (w, assignment) in answers {
            out.syncs.insert(w.ticket, self.sync_response(assignment));
        }
        self.state = GroupState::Stable;
    }

    /// Runs the timers that are due.
    fn tick(&mut self, out: &mut Outbox, now: Instant, settings: &GroupSettings) {
        // The join phase.
        if self.state == GroupState::PreparingRebalance {
            match self.join_timer {
                Some(JoinTimer::Initial {
                    deadline,
                    delay,
                    remaining,
                    new_member_added,
                }) if deadline <= now => {
                    if new_member_added && !remaining.is_zero() {
                        // Kafka's `tryCompleteInitialRebalanceElseSchedule`.
                        let next = settings.initial_rebalance_delay.min(remaining);
                        self.join_timer = Some(JoinTimer::Initial {
                            deadline: now + next,
                            delay: next,
                            remaining: remaining.saturating_sub(delay),
                            new_member_added: false,
                        });
                    } else {
                        self.complete_join(out, now);
                    }
                }
                Some(JoinTimer::Rebalance { deadline }) if deadline <= now => {
                    self.complete_join(out, now);
                }
                _ => {}
            }
        }
        // Member ids handed out with MEMBER_ID_REQUIRED and never used.
        let before = self.pending.len();
        self.pending.retain(|p| p.deadline > now);
        if self.pending.len() != before {
            self.maybe_complete_join(out, now);
        }
        // Members that did not send SyncGroup within the rebalance timeout.
        if self.sync_deadline.is_some_and(|d| d <= now) {
            self.sync_deadline = None;
            if matches!(
                self.state,
                GroupState::CompletingRebalance | GroupState::Stable
            ) && !self.pending_sync.is_empty()
            {
                for id in std::mem::take(&mut self.pending_sync) {
                    self.remove_member(out, &id);
                }
                self.prepare_rebalance(out, now, settings);
            }
        }
        // Session expiry, one member at a time: each removal can change the
        // state.
        while let Some(id) = self
            .members
            .iter()
            .find(|m| m.can_expire() && m.session_deadline <= now)
            .map(|m| m.id.clone())
        {
            self.remove_member(out, &id);
            self.after_removal(out, now, settings);
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let join = match self.state {
            GroupState::PreparingRebalance => self.join_timer.map(|t| t.deadline()),
            _ => None,
        };
        let sync = if self.pending_sync.is_empty() {
            None
        } else {
            self.sync_deadline
        };
        let pending = self.pending.iter().map(|p| p.deadline).min();
        let session = self
            .members
            .iter()
            .filter(|m| m.can_expire())
            .map(|m| m.session_deadline)
            .min();
        [join, sync, pending, session].into_iter().flatten().min()
    }

    /// Kafka's `validateOffsetCommit` for a group that exists.
    fn validate_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), ErrorCode> {
        if generation < 0 && self.state == GroupState::Empty {
            // The admin client or a consumer without group management.
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.validate_member(member_id, instance_id)?;
            if generation != self.generation {
                return Err(ErrorCode::IllegalGeneration);
            }
        } else if self.state != GroupState::Empty {
            return Err(ErrorCode::UnknownMemberId);
        }
        if self.state == GroupState::CompletingRebalance {
            // The member has its JoinGroup answer but not its assignment.
            return Err(ErrorCode::RebalanceInProgress);
        }
        Ok(())
    }

    /// Committed offsets: the requested partitions (missing ones as -1), or
    /// every committed partition when `topics` is `None`.
    fn fetch(group: Option<&Group>, topics: Option<Vec<(String, Vec<i32>)>>) -> Vec<TopicOffsets> {
        let get = |t: &str, p: i32| {
            group
                .and_then(|g| g.offsets.get(&(t.to_owned(), p)).cloned())
                .unwrap_or_else(Committed::none)
        };
        match topics {
            Some(topics) => topics
                .into_iter()
                .map(|(t, ps)| {
                    let parts = ps.into_iter().map(|p| (p, get(&t, p))).collect();
                    (t, parts)
                })
                .collect(),
            None => {
                let mut all: Vec<TopicOffsets> = Vec::new();
                for ((t, p), c) in group.iter().flat_map(|g| g.offsets.iter()) {
                    match all.last_mut() {
                        Some((last, parts)) if last == t => parts.push((*p, c.clone())),
                        _ => all.push((t.clone(), vec![(*p, c.clone())])),
                    }
                }
                all
            }
        }
    }

    fn snapshot(&self) -> GroupSnapshot {
        GroupSnapshot {
            group_id: self.id.clone(),
            state: self.state,
            generation_id: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            members: self
                .members
                .iter()
                .map(|m| MemberSnapshot {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }
}

/// The fields of a JoinGroup that describe the member.
fn new_member(
    id: String,
    now: Instant,
    client_id: &str,
    req: &JoinGroupRequest,
    join: Option<Waiter>,
) -> Member {
    let mut m = Member {
        id,
        instance_id: req.group_instance_id.clone(),
        client_id: client_id.to_owned(),
        session_timeout: Duration::ZERO,
        rebalance_timeout: Duration::ZERO,
        protocol_type: req.protocol_type.clone(),
        protocols: Vec::new(),
        assignment: Bytes::new(),
        session_deadline: now,
        join: None,
        sync: None,
    };
    update_member(&mut m, now, req, join, &mut Outbox::default());
    m
}

/// Takes the member's new protocols and timeouts (Kafka's `updateMember`)
/// and parks its JoinGroup. A JoinGroup it had parked already (a retry on a
/// new connection) is answered REBALANCE_IN_PROGRESS rather than left
/// hanging, as Kafka does.
fn update_member(
    m: &mut Member,
    now: Instant,
    req: &JoinGroupRequest,
    join: Option<Waiter>,
    out: &mut Outbox,
) {
    m.session_timeout = millis(req.session_timeout_ms);
    // Version 0 had no rebalance timeout; Kafka then uses the session timeout.
    m.rebalance_timeout = if req.rebalance_timeout_ms < 0 {
        m.session_timeout
    } else {
        millis(req.rebalance_timeout_ms)
    };
    m.protocols = req
        .protocols
        .iter()
        .map(|p| (p.name.clone(), p.metadata.clone()))
        .collect();
    m.session_deadline = now + m.session_timeout;
    if let Some(old) = m.join.take() {
        out.joins.insert(
            old.ticket,
            join_error(old.version, ErrorCode::RebalanceInProgress, &m.id),
        );
    }
    m.join = join;
}

impl Groups {
    /// A coordinator with no groups.
    pub fn new(settings: GroupSettings) -> Self {
        Groups {
            settings,
            groups: BTreeMap::new(),
            out: Outbox::default(),
            counter: 0,
        }
    }

    fn next_id(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// `{prefix}-{uuid-like}`, the prefix being the group instance id of a
    /// static member, else the client id (Kafka's `generateMemberId`). The
    /// suffix is a bijective mix of a counter, so ids never repeat.
    fn new_member_id(&mut self, prefix: &str) -> String {
        fn mix(mut z: u64) -> u64 {
            // splitmix64's finaliser: a bijection on u64.
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        let n = self.next_id();
        let a = mix(n);
        let b = mix(n ^ 0x9e37_79b9_7f4a_7c15);
        format!(
            "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }

    /// Parks or answers: the answer may already be in the outbox when the
    /// request itself completed the join phase or the sync.
    fn join_step(
        &mut self,
        parked: Option<JoinGroupResponse>,
        ticket: u64,
    ) -> Step<JoinGroupResponse> {
        match parked {
            Some(r) => Step::Done(r),
            None => match self.out.joins.remove(&ticket) {
                Some(r) => Step::Done(r),
                None => Step::Wait(Ticket { id: ticket }),
            },
        }
    }

    /// JoinGroup (versions 2-9): answered at once for errors,
    /// MEMBER_ID_REQUIRED and rejoins that need no rebalance; otherwise when
    /// the join phase completes.
    pub fn join(
        &mut self,
        now: Instant,
        version: i16,
        client_id: &str,
        req: &JoinGroupRequest,
    ) -> Step<JoinGroupResponse> {
        if req.group_id.is_empty() {
            return Step::Done(join_error(
                version,
                ErrorCode::InvalidGroupId,
                &req.member_id,
            ));
        }
        let session = millis(req.session_timeout_ms);
        if req.session_timeout_ms < 0
            || session < self.settings.min_session_timeout
            || session > self.settings.max_session_timeout
        {
            return Step::Done(join_error(
                version,
                ErrorCode::InvalidSessionTimeout,
                &req.member_id,
            ));
        }
        let unknown_member = req.member_id.is_empty();
        if !unknown_member && !self.groups.contains_key(&req.group_id) {
            return Step::Done(join_error(
                version,
                ErrorCode::UnknownMemberId,
                &req.member_id,
            ));
        }
        let ticket = self.next_id();
        let waiter = Waiter { ticket, version };
        let new_id = if unknown_member {
            let prefix = req.group_instance_id.as_deref().unwrap_or(client_id);
            Some(self.new_member_id(prefix))
        } else {
            None
        };
        let settings = self.settings.clone();
        let group = self
            .groups
            .entry(req.group_id.clone())
            .or_insert_with(|| Group::new(&req.group_id));
        let out = &mut self.out;
        let parked = match new_id {
            Some(id) => join_new_member(
                group, out, &settings, now, version, client_id, req, id, waiter,
            ),
            None => {
                join_existing_member(group, out, &settings, now, version, client_id, req, waiter)
            }
        };
        self.join_step(parked, ticket)
    }

    /// The answer to a parked JoinGroup, once there is one.
    pub fn poll_join(&mut self, _now: Instant, ticket: &Ticket) -> Option<JoinGroupResponse> {
        self.out.joins.remove(&ticket.id)
    }

    /// SyncGroup (versions 0-5): the leader's assignments answer every
    /// parked SyncGroup; a follower's waits for them; in Stable the stored
    /// assignment comes back at once.
    pub fn sync(
        &mut self,
        now: Instant,
        version: i16,
        req: &SyncGroupRequest,
    ) -> Step<SyncGroupResponse> {
        if req.group_id.is_empty() {
            return Step::Done(sync_error(ErrorCode::InvalidGroupId));
        }
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return Step::Done(sync_error(ErrorCode::UnknownMemberId));
        };
        if group.members.is_empty() {
            return Step::Done(sync_error(ErrorCode::UnknownMemberId));
        }
        let instance = if version >= 3 {
            req.group_instance_id.as_deref()
        } else {
            None
        };
        if let Err(e) = group.validate_member(&req.member_id, instance) {
            return Step::Done(sync_error(e));
        }
        if req.generation_id != group.generation {
            return Step::Done(sync_error(ErrorCode::IllegalGeneration));
        }
        // KIP-559: from version 5 the member says which type and protocol it
        // thinks the group uses.
        let inconsistent = |theirs: &Option<String>, ours: &Option<String>| matches!((theirs, ours), (Some(a), Some(b)) if a != b);
        if version >= 5
            && (inconsistent(&req.protocol_type, &group.protocol_type)
                || inconsistent(&req.protocol_name, &group.protocol))
        {
            return Step::Done(sync_error(ErrorCode::InconsistentGroupProtocol));
        }
        match group.state {
            GroupState::Empty => Step::Done(sync_error(ErrorCode::UnknownMemberId)),
            GroupState::PreparingRebalance => {
                Step::Done(sync_error(ErrorCode::RebalanceInProgress))
            }
            GroupState::Stable => {
                group.remove_pending_sync(&req.member_id);
                let assignment = group
                    .member(&req.member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default();
                Step::Done(group.sync_response(assignment))
            }
            GroupState::CompletingRebalance => {
                let ticket = self.counter + 1;
                self.counter = ticket;
                let out = &mut self.out;
                if let Some(m) = group.member_mut(&req.member_id) {
                    if let Some(old) = m.sync.replace(Waiter { ticket, version }) {
                        out.syncs
                            .insert(old.ticket, sync_error(ErrorCode::RebalanceInProgress));
                    }
                }
                group.remove_pending_sync(&req.member_id);
                if group.is_leader(&req.member_id) {
                    group.set_assignments(out, now, req);
                }
                match self.out.syncs.remove(&ticket) {
                    Some(r) => Step::Done(r),
                    None => Step::Wait(Ticket { id: ticket }),
                }
            }
        }
    }

    /// The answer to a parked SyncGroup, once there is one.
    pub fn poll_sync(&mut self, _now: Instant, ticket: &Ticket) -> Option<SyncGroupResponse> {
        self.out.syncs.remove(&ticket.id)
    }

    /// Forgets a parked request whose connection is gone: its answer, if
    /// any, is dropped, and the member no longer counts as waiting (so its
    /// session can expire).
    pub fn cancel(&mut self, ticket: &Ticket) {
        self.out.joins.remove(&ticket.id);
        self.out.syncs.remove(&ticket.id);
        for g in self.groups.values_mut() {
            for m in &mut g.members {
                if m.join.is_some_and(|w| w.ticket == ticket.id) {
                    m.join = None;
                }
                if m.sync.is_some_and(|w| w.ticket == ticket.id) {
                    m.sync = None;
                }
            }
        }
    }

    /// Heartbeat (versions 0-4): resets the member's session timer and says
    /// whether a rebalance is under way.
    pub fn heartbeat(
        &mut self,
        now: Instant,
        version: i16,
        req: &HeartbeatRequest,
    ) -> HeartbeatResponse {
        let error = |e: ErrorCode| HeartbeatResponse {
            error_code: e.code(),
            ..HeartbeatResponse::default()
        };
        if req.group_id.is_empty() {
            return error(ErrorCode::InvalidGroupId);
        }
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return error(ErrorCode::UnknownMemberId);
        };
        let instance = if version >= 3 {
            req.group_instance_id.as_deref()
        } else {
            None
        };
        if let Err(e) = group.validate_member(&req.member_id, instance) {
            return error(e);
        }
        if req.generation_id != group.generation {
            return error(ErrorCode::IllegalGeneration);
        }
        let state = group.state;
        if let Some(m) = group.member_mut(&req.member_id) {
            m.session_deadline = now + m.session_timeout;
        }
        match state {
            GroupState::Empty => error(ErrorCode::UnknownMemberId),
            GroupState::PreparingRebalance => error(ErrorCode::RebalanceInProgress),
            GroupState::CompletingRebalance | GroupState::Stable => error(ErrorCode::None),
        }
    }

    /// LeaveGroup (versions 0-5): removes the members and starts a
    /// rebalance. Versions 0-2 name one member and carry its error at the
    /// top level; from version 3 each member has its own error.
    pub fn leave(
        &mut self,
        now: Instant,
        version: i16,
        req: &LeaveGroupRequest,
    ) -> LeaveGroupResponse {
        let leaving: Vec<MemberIdentity> = if version >= 3 {
            req.members.clone()
        } else {
            vec![MemberIdentity {
                member_id: req.member_id.clone(),
                ..MemberIdentity::default()
            }]
        };
        let missing = if req.group_id.is_empty() {
            Some(ErrorCode::InvalidGroupId)
        } else if !self.groups.contains_key(&req.group_id) {
            Some(ErrorCode::UnknownMemberId)
        } else {
            None
        };
        let (Some(group), None) = (self.groups.get_mut(&req.group_id), missing) else {
            return LeaveGroupResponse {
                error_code: missing.unwrap_or(ErrorCode::UnknownMemberId).code(),
                ..LeaveGroupResponse::default()
            };
        };
        let out = &mut self.out;
        let mut results = Vec::new();
        let mut removed = false;
        for who in &leaving {
            let instance = who.group_instance_id.as_deref();
            let outcome = if who.member_id.is_empty() {
                // KIP-345: an admin removes a static member by instance id.
                match instance
                    .and_then(|i| group.static_member_id(i))
                    .map(str::to_owned)
                {
                    Some(id) => {
                        group.remove_member(out, &id);
                        Ok(())
                    }
                    None => Err(ErrorCode::UnknownMemberId),
                }
            } else if group.is_pending(&who.member_id) {
                group.pending.retain(|p| p.id != who.member_id);
                Ok(())
            } else {
                group.validate_member(&who.member_id, instance).map(|()| {
                    group.remove_member(out, &who.member_id);
                })
            };
            removed |= outcome.is_ok();
            results.push(MemberResponse {
                member_id: who.member_id.clone(),
                group_instance_id: who.group_instance_id.clone(),
                error_code: outcome.err().unwrap_or(ErrorCode::None).code(),
                ..MemberResponse::default()
            });
        }
        if removed {
            match group.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    group.prepare_rebalance(out, now, &self.settings)
                }
                GroupState::PreparingRebalance => group.maybe_complete_join(out, now),
                GroupState::Empty => {}
            }
        }
        if version >= 3 {
            LeaveGroupResponse {
                members: results,
                ..LeaveGroupResponse::default()
            }
        } else {
            // Kafka's LeaveGroupResponse for v0-2: the first member error.
            LeaveGroupResponse {
                error_code: results
                    .iter()
                    .map(|r| r.error_code)
                    .find(|c| *c != 0)
                    .unwrap_or(0),
                ..LeaveGroupResponse::default()
            }
        }
    }

    /// OffsetCommit (versions 2-9). `partition_exists` says whether the
    /// cluster has the partition (else UNKNOWN_TOPIC_OR_PARTITION, checked
    /// first as Kafka's request handler does).
    pub fn commit(
        &mut self,
        now: Instant,
        version: i16,
        req: &OffsetCommitRequest,
        partition_exists: &dyn Fn(&str, i32) -> bool,
    ) -> OffsetCommitResponse {
        let generation = req.generation_id_or_member_epoch;
        let instance = if version >= 7 {
            req.group_instance_id.as_deref()
        } else {
            None
        };
        let verdict = match self.groups.get_mut(&req.group_id) {
            _ if req.group_id.is_empty() => Err(ErrorCode::InvalidGroupId),
            Some(g) => {
                let v = g.validate_commit(&req.member_id, instance, generation);
                if v.is_ok()
                    && matches!(g.state, GroupState::Stable | GroupState::PreparingRebalance)
                {
                    // A commit counts as a heartbeat (Kafka's commitOffset).
                    if let Some(m) = g.member_mut(&req.member_id) {
                        m.session_deadline = now + m.session_timeout;
                    }
                }
                v
            }
            // A "simple" group, created by its first commit.
            None if generation < 0 => Ok(()),
            // Version 9 says so; older versions keep the old answer.
            None if version >= 9 => Err(ErrorCode::GroupIdNotFound),
            None => Err(ErrorCode::IllegalGeneration),
        };
        if verdict.is_ok() {
            self.groups
                .entry(req.group_id.clone())
                .or_insert_with(|| Group::new(&req.group_id));
        }
        let mut topics = Vec::new();
        for t in &req.topics {
            let mut partitions = Vec::new();
            for p in &t.partitions {
                let metadata = p.committed_metadata.as_deref().unwrap_or("");
                let error = if !partition_exists(&t.name, p.partition_index) {
                    ErrorCode::UnknownTopicOrPartition
                } else if let Err(e) = verdict {
                    e
                } else if metadata.len() > OFFSET_METADATA_MAX_LEN {
                    ErrorCode::OffsetMetadataTooLarge
                } else {
                    let committed = Committed {
                        offset: p.committed_offset,
                        leader_epoch: if version >= 6 {
                            p.committed_leader_epoch
                        } else {
                            -1
                        },
                        metadata: metadata.to_owned(),
                    };
                    if let Some(g) = self.groups.get_mut(&req.group_id) {
                        g.offsets
                            .insert((t.name.clone(), p.partition_index), committed);
                    }
                    ErrorCode::None
                };
                partitions.push(OffsetCommitResponsePartition {
                    partition_index: p.partition_index,
                    error_code: error.code(),
                    ..OffsetCommitResponsePartition::default()
                });
            }
            topics.push(OffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions,
                ..OffsetCommitResponseTopic::default()
            });
        }
        OffsetCommitResponse {
            topics,
            ..OffsetCommitResponse::default()
        }
    }

    /// OffsetFetch (versions 1-9): one group in the top-level fields up to
    /// version 7, the `groups` array from version 8. Partitions with no
    /// commit (or of an unknown group) come back as offset -1; a null topic
    /// list asks for every committed partition.
    pub fn fetch_offsets(
        &mut self,
        _now: Instant,
        version: i16,
        req: &OffsetFetchRequest,
    ) -> OffsetFetchResponse {
        if version >= 8 {
            let groups = req
                .groups
                .iter()
                .map(|g| {
                    let topics = g.topics.as_ref().map(|ts| {
                        ts.iter()
                            .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                            .collect()
                    });
                    let found = Group::fetch(self.groups.get(&g.group_id), topics);
                    OffsetFetchResponseGroup {
                        group_id: g.group_id.clone(),
                        topics: found
                            .into_iter()
                            .map(|(name, parts)| OffsetFetchResponseTopics {
                                name,
                                partitions: parts
                                    .into_iter()
                                    .map(|(p, c)| OffsetFetchResponsePartitions {
                                        partition_index: p,
                                        committed_offset: c.offset,
                                        committed_leader_epoch: c.leader_epoch,
                                        metadata: Some(c.metadata),
                                        error_code: 0,
                                        unknown_tagged_fields: Vec::new(),
                                    })
                                    .collect(),
                                ..OffsetFetchResponseTopics::default()
                            })
                            .collect(),
                        error_code: 0,
                        ..OffsetFetchResponseGroup::default()
                    }
                })
                .collect();
            return OffsetFetchResponse {
                groups,
                ..OffsetFetchResponse::default()
            };
        }
        let topics = req.topics.as_ref().map(|ts| {
            ts.iter()
                .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                .collect()
        });
        let found = Group::fetch(self.groups.get(&req.group_id), topics);
        OffsetFetchResponse {
            topics: found
                .into_iter()
                .map(|(name, parts)| OffsetFetchResponseTopic {
                    name,
                    partitions: parts
                        .into_iter()
                        .map(|(p, c)| OffsetFetchResponsePartition {
                            partition_index: p,
                            committed_offset: c.offset,
                            committed_leader_epoch: if version >= 5 { c.leader_epoch } else { -1 },
                            metadata: Some(c.metadata),
                            error_code: 0,
                            unknown_tagged_fields: Vec::new(),
                        })
                        .collect(),
                    ..OffsetFetchResponseTopic::default()
                })
                .collect(),
            error_code: 0,
            ..OffsetFetchResponse::default()
        }
    }

    /// Runs every timer due at `now`: the end of an initial delay or of a
    /// rebalance timeout, expired sessions, unused MEMBER_ID_REQUIRED ids,
    /// members that never sent SyncGroup.
    pub fn tick(&mut self, now: Instant) {
        for g in self.groups.values_mut() {
            g.tick(&mut self.out, now, &self.settings);
        }
    }

    /// When [`Groups::tick`] must next run, if ever.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.groups.values().filter_map(Group::next_deadline).min()
    }

    /// The group as it stands, if the coordinator knows it.
    pub fn snapshot(&self, group_id: &str) -> Option<GroupSnapshot> {
        self.groups.get(group_id).map(Group::snapshot)
    }

    /// The committed offset of a partition, if any.
    pub fn committed(&self, group_id: &str, topic: &str, partition: i32) -> Option<i64> {
        self.groups
            .get(group_id)?
            .offsets
            .get(&(topic.to_owned(), partition))
            .map(|c| c.offset)
    }
}

/// JoinGroup with an empty member id (Kafka's `classicGroupJoinNewMember`).
#[allow(clippy::too_many_arguments)]
fn join_new_member(
    group: &mut Group,
    out: &mut Outbox,
    settings: &GroupSettings,
    now: Instant,
    version: i16,
    client_id: &str,
    req: &JoinGroupRequest,
    new_id: String,
    waiter: Waiter,
) -> Option<JoinGroupResponse> {
    if !group.supports(&req.protocol_type, &req.protocols) {
        return Some(join_error(
            version,
            ErrorCode::InconsistentGroupProtocol,
            "",
        ));
    }
    let known_instance = req
        .group_instance_id
        .as_deref()
        .and_then(|i| group.static_member_id(i))
        .map(str::to_owned);
    if let Some(old_id) = known_instance {
        return replace_static_member(
            group, out, settings, now, version, req, old_id, new_id, waiter,
        );
    }
    if req.group_instance_id.is_none() && version >= 4 {
        // KIP-394: the id comes back first; the member joins with it.
        group.pending.push(PendingMember {
            id: new_id.clone(),
            deadline: now + millis(req.session_timeout_ms),
        });
        return Some(JoinGroupResponse {
            member_id: new_id,
            ..join_error(version, ErrorCode::MemberIdRequired, "")
        });
    }
    group.add_member(new_member(new_id, now, client_id, req, Some(waiter)));
    group.rebalance_or_complete_join(out, now, settings);
    None
}

/// A known group instance joins with an empty member id (a restarted static
/// member): it takes a new member id, the old one is fenced (Kafka's
/// `updateStaticMemberThenRebalanceOrCompleteJoin`).
#[allow(clippy::too_many_arguments)]
fn replace_static_member(
    group: &mut Group,
    out: &mut Outbox,
    settings: &GroupSettings,
    now: Instant,
    version: i16,
    req: &JoinGroupRequest,
    old_id: String,
    new_id: String,
    waiter: Waiter,
) -> Option<JoinGroupResponse> {
    let old_leader = group.leader.clone();
    let m = group.member_mut(&old_id)?;
    // Whoever still waits under the old id is fenced at once.
    if let Some(w) = m.join.take() {
        out.joins.insert(
            w.ticket,
            join_error(w.version, ErrorCode::FencedInstanceId, &old_id),
        );
    }
    if let Some(w) = m.sync.take() {
        out.syncs
            .insert(w.ticket, sync_error(ErrorCode::FencedInstanceId));
    }
    m.id = new_id.clone();
    update_member(m, now, req, Some(waiter), out);
    if group.leader.as_deref() == Some(old_id.as_str()) {
        group.leader = Some(new_id.clone());
    }
    for p in &mut group.pending_sync {
        if *p == old_id {
            p.clone_from(&new_id);
        }
    }
    match group.state {
        GroupState::Stable => {
            if group.select_protocol() == group.protocol {
                // Nothing the assignment depends on changed: no rebalance.
                if let Some(m) = group.member_mut(&new_id) {
                    m.join = None;
                }
                let is_leader = group.is_leader(&new_id);
                let mut r = group.join_response(version, &new_id);
                if version >= 9 {
                    // KIP-814: the leader learns the members but must not
                    // compute a new assignment.
                    r.skip_assignment = is_leader;
                } else {
                    // Older leaders would run the assignment: hide the
                    // members and name the old leader id instead.
                    r.members.clear();
                    r.leader = old_leader.unwrap_or_default();
                }
                Some(r)
            } else {
                group.prepare_rebalance(out, now, settings);
                None
            }
        }
        GroupState::CompletingRebalance => {
            // The leader may already be assigning to the old id.
            group.prepare_rebalance(out, now, settings);
            None
        }
        GroupState::PreparingRebalance | GroupState::Empty => {
            group.maybe_complete_join(out, now);
            None
        }
    }
}

/// JoinGroup with a member id (Kafka's `classicGroupJoinExistingMember`).
#[allow(clippy::too_many_arguments)]
fn join_existing_member(
    group: &mut Group,
    out: &mut Outbox,
    settings: &GroupSettings,
    now: Instant,
    version: i16,
    client_id: &str,
    req: &JoinGroupRequest,
    waiter: Waiter,
) -> Option<JoinGroupResponse> {
    let id = req.member_id.as_str();
    if !group.supports(&req.protocol_type, &req.protocols) {
        return Some(join_error(
            version,
            ErrorCode::InconsistentGroupProtocol,
            id,
        ));
    }
    if group.is_pending(id) {
        if req.group_instance_id.is_some() {
            // Kafka treats this as impossible (static members are never
            // pending); refuse it.
            return Some(join_error(version, ErrorCode::UnknownMemberId, id));
        }
        group.add_member(new_member(id.to_owned(), now, client_id, req, Some(waiter)));
        group.rebalance_or_complete_join(out, now, settings);
        return None;
    }
    if let Err(e) = group.validate_member(id, req.group_instance_id.as_deref()) {
        return Some(join_error(version, e, id));
    }
    let state = group.state;
    let is_leader = group.is_leader(id);
    let m = group.member_mut(id)?;
    let same = m.matches(&req.protocols);
    match state {
        GroupState::CompletingRebalance | GroupState::Stable
            if same && (state == GroupState::CompletingRebalance || !is_leader) =>
        {
            // A retry (lost response) or a follower with nothing new: the
            // current generation, no rebalance. Only in CompletingRebalance
            // does the leader get the member list again.
            m.session_deadline = now + m.session_timeout;
            let mut r = group.join_response(version, id);
            if state == GroupState::Stable {
                r.members.clear();
            }
            Some(r)
        }
        GroupState::Empty => Some(join_error(version, ErrorCode::UnknownMemberId, id)),
        _ => {
            // Changed metadata, the leader asking for a new assignment, or a
            // rejoin during PreparingRebalance.
            update_member(m, now, req, Some(waiter), out);
            group.rebalance_or_complete_join(out, now, settings);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::leave_group::MemberIdentity;
    use crate::protocol::messages::offset_commit::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use crate::protocol::messages::offset_fetch::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
    };
    use crate::protocol::messages::sync_group::SyncGroupRequestAssignment;
    use crate::protocol::{Message, Writer};

    const GROUP: &str = "g";

    /// A manual clock: `at(ms)` is `ms` after a fixed base.
    struct Clock(Instant);

    impl Clock {
        fn new() -> Self {
            Clock(Instant::now())
        }
        fn at(&self, ms: u64) -> Instant {
            self.0 + Duration::from_millis(ms)
        }
    }

    fn groups(initial_delay_ms: u64) -> Groups {
        Groups::new(GroupSettings {
            initial_rebalance_delay: Duration::from_millis(initial_delay_ms),
            min_session_timeout: Duration::from_millis(1_000),
            max_session_timeout: Duration::from_millis(60_000),
        })
    }

    /// Panics unless `m` encodes at `version`.
    fn enc<M: Message>(m: &M, version: i16) {
        let mut w = Writer::new();
        m.encode(&mut w, version)
            .unwrap_or_else(|e| panic!("not encodable at v{version}: {e:?}"));
    }

    fn code(e: ErrorCode) -> i16 {
        e.code()
    }

    fn protocols(list: &[(&str, &'static [u8])]) -> Vec<JoinGroupRequestProtocol> {
        list.iter()
            .map(|(n, m)| JoinGroupRequestProtocol {
                name: (*n).to_owned(),
                metadata: Bytes::from_static(m),
                ..JoinGroupRequestProtocol::default()
            })
            .collect()
    }

    fn join_req(
        member_id: &str,
        rebalance_ms: i32,
        protos: &[(&str, &'static [u8])],
    ) -> JoinGroupRequest {
        JoinGroupRequest {
            group_id: GROUP.to_owned(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: rebalance_ms,
            member_id: member_id.to_owned(),
            protocol_type: "consumer".to_owned(),
            protocols: protocols(protos),
            ..JoinGroupRequest::default()
        }
    }

    const RANGE: &[(&str, &[u8])] = &[("range", b"sub")];

    fn done<R>(step: Step<R>) -> R {
        match step {
            Step::Done(r) => r,
            Step::Wait(t) => panic!("expected an answer, got a wait on {t:?}"),
        }
    }

    fn wait<R: std::fmt::Debug>(step: Step<R>) -> Ticket {
        match step {
            Step::Wait(t) => t,
            Step::Done(r) => panic!("expected a wait, got {r:?}"),
        }
    }

    /// Joins as a new member at `version`, going through MEMBER_ID_REQUIRED
    /// from v4; returns the step of the real join.
    fn join_new(
        gs: &mut Groups,
        now: Instant,
        version: i16,
        client: &str,
        rebalance_ms: i32,
        protos: &[(&str, &'static [u8])],
    ) -> Step<JoinGroupResponse> {
        let mut req = join_req("", rebalance_ms, protos);
        if version >= 4 {
            let r = done(gs.join(now, version, client, &req));
            enc(&r, version);
            assert_eq!(r.error_code, code(ErrorCode::MemberIdRequired));
            req.member_id = r.member_id;
        }
        gs.join(now, version, client, &req)
    }

    fn sync_req(
        member_id: &str,
        generation: i32,
        assignments: &[(&str, &'static [u8])],
    ) -> SyncGroupRequest {
        SyncGroupRequest {
            group_id: GROUP.to_owned(),
            generation_id: generation,
            member_id: member_id.to_owned(),
            assignments: assignments
                .iter()
                .map(|(m, a)| SyncGroupRequestAssignment {
                    member_id: (*m).to_owned(),
                    assignment: Bytes::from_static(a),
                    ..SyncGroupRequestAssignment::default()
                })
                .collect(),
            ..SyncGroupRequest::default()
        }
    }

    fn hb(gs: &mut Groups, now: Instant, version: i16, member_id: &str, generation: i32) -> i16 {
        let r = gs.heartbeat(
            now,
            version,
            &HeartbeatRequest {
                group_id: GROUP.to_owned(),
                generation_id: generation,
                member_id: member_id.to_owned(),
                ..HeartbeatRequest::default()
            },
        );
        enc(&r, version);
        r.error_code
    }

    /// A group with one member at generation 1, Stable; returns its id.
    fn one_stable(gs: &mut Groups, now: Instant, version: i16) -> String {
        let j = done(join_new(gs, now, version, "c1", 30_000, RANGE));
        let s = done(gs.sync(
            now,
            3,
            &sync_req(&j.member_id, j.generation_id, &[(&j.member_id, b"a1")]),
        ));
        assert_eq!(s.error_code, 0);
        j.member_id
    }

    /// Two members at generation 2, Stable; returns (leader, follower).
    fn two_stable(gs: &mut Groups, clock: &Clock) -> (String, String) {
        let a = one_stable(gs, clock.at(0), 5);
        let tb = wait(join_new(gs, clock.at(10), 5, "c2", 20_000, RANGE));
        let ja = done(gs.join(clock.at(20), 5, "c1", &join_req(&a, 30_000, RANGE)));
        let jb = gs.poll_join(clock.at(20), &tb).expect("b answered");
        let ts = wait(gs.sync(clock.at(30), 5, &sync_req(&jb.member_id, 2, &[])));
        done(gs.sync(
            clock.at(30),
            5,
            &sync_req(&a, 2, &[(&a, b"a2"), (&jb.member_id, b"b2")]),
        ));
        gs.poll_sync(clock.at(30), &ts).expect("b synced");
        assert_eq!(ja.leader, a);
        (a, jb.member_id)
    }

    #[test]
    fn single_member_joins_syncs_and_heartbeats() {
        for version in [2i16, 3, 4, 5, 6, 7, 8, 9] {
            let clock = Clock::new();
            let mut gs = groups(0);
            let j = done(join_new(
                &mut gs,
                clock.at(0),
                version,
                "client-1",
                30_000,
                RANGE,
            ));
            enc(&j, version);
            assert_eq!(j.error_code, 0, "v{version}");
            assert_eq!(j.generation_id, 1);
            assert!(j.member_id.starts_with("client-1-"));
            assert_eq!(j.leader, j.member_id);
            assert_eq!(j.protocol_name.as_deref(), Some("range"));
            assert_eq!(
                j.protocol_type.as_deref(),
                if version >= 7 { Some("consumer") } else { None }
            );
            assert_eq!(j.members.len(), 1);
            assert_eq!(j.members[0].metadata, Bytes::from_static(b"sub"));
            assert_eq!(
                gs.snapshot(GROUP).unwrap().state,
                GroupState::CompletingRebalance
            );

            let sv = version.min(5);
            let s = done(gs.sync(
                clock.at(1),
                sv,
                &sync_req(&j.member_id, 1, &[(&j.member_id, b"assigned")]),
            ));
            enc(&s, sv);
            assert_eq!(s.error_code, 0);
            assert_eq!(s.assignment, Bytes::from_static(b"assigned"));
            let snap = gs.snapshot(GROUP).unwrap();
            assert_eq!(snap.state, GroupState::Stable);
            assert_eq!(snap.protocol.as_deref(), Some("range"));
            assert_eq!(snap.members[0].assignment, Bytes::from_static(b"assigned"));
            assert_eq!(snap.members[0].client_id, "client-1");

            let hv = version.min(4);
            assert_eq!(hb(&mut gs, clock.at(2), hv, &j.member_id, 1), 0);
            assert_eq!(
                hb(&mut gs, clock.at(2), hv, &j.member_id, 7),
                code(ErrorCode::IllegalGeneration)
            );
            assert_eq!(
                hb(&mut gs, clock.at(2), hv, "who", 1),
                code(ErrorCode::UnknownMemberId)
            );
            // A sync in Stable returns the stored assignment.
            let again = done(gs.sync(clock.at(3), sv, &sync_req(&j.member_id, 1, &[])));
            assert_eq!(again.assignment, Bytes::from_static(b"assigned"));
        }
    }

    #[test]
    fn member_id_required_from_v4_only() {
        let clock = Clock::new();
        for version in [2i16, 3] {
            let mut gs = groups(0);
            let j = done(gs.join(clock.at(0), version, "c", &join_req("", 30_000, RANGE)));
            enc(&j, version);
            assert_eq!(j.error_code, 0);
            assert!(j.member_id.starts_with("c-"));
        }
        for version in [4i16, 6, 9] {
            let mut gs = groups(0);
            let r = done(gs.join(clock.at(0), version, "c", &join_req("", 30_000, RANGE)));
            enc(&r, version);
            assert_eq!(r.error_code, code(ErrorCode::MemberIdRequired));
            assert!(r.member_id.starts_with("c-") && r.member_id.len() > 10);
            assert!(gs.snapshot(GROUP).unwrap().members.is_empty());
            // The id is pending; unused, it expires with the session timeout.
            assert_eq!(gs.next_deadline(), Some(clock.at(10_000)));
            let j = done(gs.join(
                clock.at(1),
                version,
                "c",
                &join_req(&r.member_id, 30_000, RANGE),
            ));
            assert_eq!(j.error_code, 0);
            assert_eq!(j.member_id, r.member_id);
        }
        // Two MEMBER_ID_REQUIRED answers never share an id.
        let mut gs = groups(0);
        let a = done(gs.join(clock.at(0), 4, "c", &join_req("", 30_000, RANGE)));
        let b = done(gs.join(clock.at(0), 4, "c", &join_req("", 30_000, RANGE)));
        assert_ne!(a.member_id, b.member_id);
        // An unused pending id expires.
        gs.tick(clock.at(10_000));
        let late = done(gs.join(
            clock.at(10_001),
            4,
            "c",
            &join_req(&a.member_id, 30_000, RANGE),
        ));
        assert_eq!(late.error_code, code(ErrorCode::UnknownMemberId));
    }

    #[test]
    fn join_errors() {
        let clock = Clock::new();
        let mut gs = groups(0);
        let mut req = join_req("", 30_000, RANGE);
        req.session_timeout_ms = 500;
        let r = done(gs.join(clock.at(0), 7, "c", &req));
        enc(&r, 7);
        assert_eq!(r.error_code, code(ErrorCode::InvalidSessionTimeout));
        req.session_timeout_ms = 60_001;
        assert_eq!(
            done(gs.join(clock.at(0), 5, "c", &req)).error_code,
            code(ErrorCode::InvalidSessionTimeout)
        );
        let r = done(gs.join(clock.at(0), 5, "c", &join_req("nobody", 30_000, RANGE)));
        enc(&r, 5);
        assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
        let mut empty = join_req("", 30_000, &[]);
        empty.protocols.clear();
        assert_eq!(
            done(gs.join(clock.at(0), 3, "c", &empty)).error_code,
            code(ErrorCode::InconsistentGroupProtocol)
        );
    }

    #[test]
    fn second_member_triggers_a_rebalance() {
        for version in [3i16, 5, 9] {
            let clock = Clock::new();
            let mut gs = groups(0);
            let a = one_stable(&mut gs, clock.at(0), version);
            let tb = wait(join_new(
                &mut gs,
                clock.at(100),
                version,
                "c2",
                20_000,
                RANGE,
            ));
            assert_eq!(
                gs.snapshot(GROUP).unwrap().state,
                GroupState::PreparingRebalance
            );
            assert_eq!(gs.poll_join(clock.at(100), &tb), None);
            let hv = version.min(4);
            assert_eq!(
                hb(&mut gs, clock.at(200), hv, &a, 1),
                code(ErrorCode::RebalanceInProgress)
            );
            // The first member rejoins: everyone has joined.
            let ja = done(gs.join(clock.at(300), version, "c1", &join_req(&a, 30_000, RANGE)));
            let jb = gs.poll_join(clock.at(300), &tb).expect("b answered");
            enc(&ja, version);
            enc(&jb, version);
            assert_eq!((ja.generation_id, jb.generation_id), (2, 2));
            assert_eq!(ja.leader, a, "the old leader stays");
            assert_eq!(jb.leader, a);
            assert_eq!(ja.members.len(), 2);
            assert!(jb.members.is_empty());
            assert_eq!(
                ja.members
                    .iter()
                    .filter(|m| m.member_id == jb.member_id)
                    .count(),
                1
            );

            let sv = version.min(5);
            let ts = wait(gs.sync(clock.at(400), sv, &sync_req(&jb.member_id, 2, &[])));
            assert_eq!(gs.poll_sync(clock.at(400), &ts), None);
            let sa = done(gs.sync(
                clock.at(500),
                sv,
                &sync_req(&a, 2, &[(&a, b"for-a"), (&jb.member_id, b"for-b")]),
            ));
            enc(&sa, sv);
            assert_eq!(sa.assignment, Bytes::from_static(b"for-a"));
            let sb = gs.poll_sync(clock.at(500), &ts).expect("b synced");
            enc(&sb, sv);
            assert_eq!(sb.error_code, 0);
            assert_eq!(sb.assignment, Bytes::from_static(b"for-b"));
            assert_eq!(hb(&mut gs, clock.at(600), hv, &jb.member_id, 2), 0);
            assert_eq!(gs.snapshot(GROUP).unwrap().state, GroupState::Stable);
        }
    }

    #[test]
    fn waiting_sync_gets_rebalance_in_progress_when_a_rebalance_starts() {
        let clock = Clock::new();
        let mut gs = groups(0);
        let a = one_stable(&mut gs, clock.at(0), 5);
        let tb = wait(join_new(&mut gs, clock.at(10), 5, "c2", 20_000, RANGE));
        done(gs.join(clock.at(20), 5, "c1", &join_req(&a, 30_000, RANGE)));
        let b = gs.poll_join(clock.at(20), &tb).unwrap().member_id;
        let ts = wait(gs.sync(clock.at(30), 5, &sync_req(&b, 2, &[])));
        // A commit during CompletingRebalance is refused.
        let c = gs.commit(clock.at(31), 8, &commit_req(&b, 2, 5), &|_, _| true);
        assert_eq!(
            c.topics[0].partitions[0].error_code,
            code(ErrorCode::RebalanceInProgress)
        );
        // A third member arrives before the leader's sync.
        let tc = wait(join_new(&mut gs, clock.at(40), 5, "c3", 20_000, RANGE));
        let sb = gs.poll_sync(clock.at(40), &ts).expect("b answered");
        enc(&sb, 5);
        assert_eq!(sb.error_code, code(ErrorCode::RebalanceInProgress));
        let s = done(gs.sync(clock.at(41), 5, &sync_req(&a, 2, &[])));
        assert_eq!(s.error_code, code(ErrorCode::RebalanceInProgress));
        let s = done(gs.sync(clock.at(41), 5, &sync_req(&a, 1, &[])));
        assert_eq!(s.error_code, code(ErrorCode::IllegalGeneration));
        let s = done(gs.sync(clock.at(41), 5, &sync_req("stranger", 2, &[])));
        assert_eq!(s.error_code, code(ErrorCode::UnknownMemberId));
        assert_eq!(gs.poll_join(clock.at(41), &tc), None);
    }

    #[test]
    fn sync_checks_protocol_type_and_name_from_v5() {
        let clock = Clock::new();
        let mut gs = groups(0);
        let a = one_stable(&mut gs, clock.at(0), 5);
        let mut req = sync_req(&a, 1, &[]);
        req.protocol_name = Some("roundrobin".to_owned());
        let r = done(gs.sync(clock.at(1), 5, &req));
        assert_eq!(r.error_code, code(ErrorCode::InconsistentGroupProtocol));
        req.protocol_name = Some("range".to_owned());
        req.protocol_type = Some("connect".to_owned());
        assert_eq!(
            done(gs.sync(clock.at(1), 5, &req)).error_code,
            code(ErrorCode::InconsistentGroupProtocol)
        );
        req.protocol_type = Some("consumer".to_owned());
        let ok = done(gs.sync(clock.at(1), 5, &req));
        enc(&ok, 5);
        assert_eq!(ok.error_code, 0);
        assert_eq!(ok.protocol_name.as_deref(), Some("range"));
        // A different protocol type cannot join.
        let mut other = join_req("", 30_000, RANGE);
        other.protocol_type = "connect".to_owned();
        let r = done(gs.join(clock.at(2), 7, "x", &other));
        assert_eq!(r.error_code, code(ErrorCode::InconsistentGroupProtocol));
    }

    #[test]
    fn rebalance_timeout_removes_members_that_do_not_rejoin() {
        let clock = Clock::new();
        let mut gs = groups(0);
        let (a, b) = two_stable(&mut gs, &clock);
        // Keep both sessions alive until the rebalance.
        hb(&mut gs, clock.at(5_000), 4, &a, 2);
        hb(&mut gs, clock.at(5_000), 4, &b, 2);
        let tc = wait(join_new(&mut gs, clock.at(6_000), 5, "c3", 10_000, RANGE));
        let ta = wait(gs.join(clock.at(6_500), 5, "c1", &join_req(&a, 30_000, RANGE)));
        // b keeps heartbeating but never rejoins.
        for t in (7_000..36_000).step_by(3_000) {
            assert_eq!(
                hb(&mut gs, clock.at(t), 4, &b, 2),
                code(ErrorCode::RebalanceInProgress)
            );
            gs.tick(clock.at(t));
        }
        // The rebalance timeout is the largest of the members' (a's 30 s).
        assert_eq!(gs.next_deadline(), Some(clock.at(36_000)));
        gs.tick(clock.at(35_999));
        assert_eq!(gs.poll_join(clock.at(35_999), &ta), None);
        gs.tick(clock.at(36_000));
        let ja = gs.poll_join(clock.at(36_000), &ta).expect("a answered");
        let jc = gs.poll_join(clock.at(36_000), &tc).expect("c answered");
        enc(&ja, 5);
        assert_eq!(ja.generation_id, 3);
        assert_eq!(jc.generation_id, 3);
        assert_eq!(ja.members.len(), 2);
        let snap = gs.snapshot(GROUP).unwrap();
        assert!(snap.members.iter().all(|m| m.member_id != b));
        assert_eq!(
            hb(&mut gs, clock.at(36_001), 4, &b, 2),
            code(ErrorCode::UnknownMemberId)
        );
    }

    #[test]
    fn leader_that_does_not_rejoin_is_replaced() {
        let clock = Clock::new();
        let mut gs = groups(0);
        let (a, b) = two_stable(&mut gs, &clock);
        // A follower with unchanged metadata gets the current generation at
        // once, without a rebalance.
        let same = done(gs.join(clock.at(1_000), 5, "c2", &join_req(&b, 20_000, RANGE)));
        assert_eq!((same.error_code, same.generation_id), (0, 2));
        assert!(same.members.is_empty());
        assert_eq!(gs.snapshot(GROUP).unwrap().state, GroupState::Stable);
        // New metadata does start one; the leader never rejoins.
        let tb = wait(gs.join(
            clock.at(1_000),
            5,
            "c2",
            &join_req(&b, 20_000, &[("range", b"new")]),
        ));
        gs.tick(clock.at(31_000));
        let jb = gs.poll_join(clock.at(31_000), &tb).expect("b answered");
        assert_eq!(jb.generation_id, 3);
        assert_eq!(jb.leader, b);
        assert_eq!(jb.members.len(), 1);
        assert_eq!(jb.members[0].metadata, Bytes::from_static(b"new"));
        assert!(gs
            .snapshot(GROUP)
            .unwrap()
            .members
            .iter()
            .all(|m| m.member_id != a));
    }

    #[test]
    fn silent_member_expires_but_not_while_it_waits() {
        let clock = Clock::new();
        let mut gs = groups(0);
        let (a, b) = two_stable(&mut gs, &clock);
        // Sessions are 10 s; b's last reset was its sync at 30 ms.
        hb(&mut gs, clock.at(9_000), 4, &a, 2);
        assert_eq!(gs.next_deadline(), Some(clock.at(10_030)));
        gs.tick(clock.at(10_029));
        assert_eq!(gs.snapshot(GROUP).unwrap().members.len(), 2);
        gs.tick(clock.at(10_030));
        let snap = gs.snapshot(GROUP).unwrap();
        assert_eq!(snap.members.len(), 1);
        assert_eq!(snap.state, GroupState::PreparingRebalance);
        assert_eq!(
            hb(&mut gs, clock.at(10_031), 4, &b, 2),
            code(ErrorCode::UnknownMemberId)
        );
        assert_eq!(
            hb(&mut gs, clock.at(10_031), 4, &a, 2),
            code(ErrorCode::RebalanceInProgress)
        );
        // a rejoins and waits for nobody: the join completes at once.
        let ja = done(gs.join(clock.at(10_040), 4, "c1", &join_req(&a, 30_000, RANGE)));
        assert_eq!((ja.generation_id, ja.members.len()), (3, 1));
    }

    #[test]
    fn members_waiting_in_join_do_not_expire() {
        let clock = Clock::new();
        let mut gs = groups(0);
        let (a, b) = two_stable(&mut gs, &clock);
        let tc = wait(join_new(&mut gs, clock.at(100), 5, "c3", 60_000, RANGE));
        let ta = wait(gs.join(clock.at(200), 5, "c1", &join_req(&a, 30_000, RANGE)));
        // b heartbeats until 20 s and never rejoins.
        for t in (1_000..=20_000).step_by(1_000) {
            hb(&mut gs, clock.at(t), 4, &b, 2);
            gs.tick(clock.at(t));
        }
        // a and c are past their 10 s sessions but still members.
        assert_eq!(gs.snapshot(GROUP).unwrap().members.len(), 3);
        assert_eq!(gs.next_deadline(), Some(clock.at(30_000)));
        gs.tick(clock.at(30_000));
        let ja = gs.poll_join(clock.at(30_000), &ta).expect("a answered");
        let jc = gs.poll_join(clock.at(30_000), &tc).expect("c answered");
        assert_eq!((ja.generation_id, jc.generation_id), (3, 3));
        assert_eq!(ja.members.len(), 2);
        assert!(ja.members.iter().all(|m| m.member_id != b));
    }

    #[test]
    fn members_that_never_sync_are_removed_after_the_rebalance_timeout() {
        let clock = Clock::new();
        let mut gs = groups(0);
        let a = one_stable(&mut gs, clock.at(0), 5);
        let tb = wait(join_new(&mut gs, clock.at(10), 5, "c2", 20_000, RANGE));
        done(gs.join(clock.at(20), 5, "c1", &join_req(&a, 30_000, RANGE)));
        let b = gs.poll_join(clock.at(20), &tb).unwrap().member_id;
        // Only the leader syncs; b keeps heartbeating but never syncs.
        done(gs.sync(clock.at(30), 5, &sync_req(&a, 2, &[(&a, b"x"), (&b, b"y")])));
        for t in (1_000..30_000).step_by(1_000) {
            assert_eq!(hb(&mut gs, clock.at(t), 4, &b, 2), 0);
            hb(&mut gs, clock.at(t), 4, &a, 2);
            gs.tick(clock.at(t));
        }
        gs.tick(clock.at(30_020));
        let snap = gs.snapshot(GROUP).unwrap();
        assert_eq!(snap.members.len(), 1);
        assert_eq!(snap.state, GroupState::PreparingRebalance);
    }

    #[test]
    fn leave_removes_members_and_empties_the_group() {
        let clock = Clock::new();
        // v0-2: one member, its error at the top level.
        for version in [0i16, 1, 2] {
            let mut gs = groups(0);
            let (a, b) = two_stable(&mut gs, &clock);
            let req = |m: &str| LeaveGroupRequest {
                group_id: GROUP.to_owned(),
                member_id: m.to_owned(),
                ..LeaveGroupRequest::default()
            };
            let r = gs.leave(clock.at(100), version, &req("ghost"));
            enc(&r, version);
            assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
            let r = gs.leave(clock.at(100), version, &req(&a));
            enc(&r, version);
            assert_eq!(r.error_code, 0);
            // The leader left: b is the only member and, alone, completes the
            // rebalance as soon as it rejoins.
            assert_eq!(
                hb(&mut gs, clock.at(110), 4, &b, 2),
                code(ErrorCode::RebalanceInProgress)
            );
            let jb = done(gs.join(clock.at(120), 5, "c2", &join_req(&b, 20_000, RANGE)));
            assert_eq!((jb.generation_id, jb.leader.as_str()), (3, b.as_str()));
            let r = gs.leave(clock.at(130), version, &req(&b));
            assert_eq!(r.error_code, 0);
            let snap = gs.snapshot(GROUP).unwrap();
            assert_eq!(snap.state, GroupState::Empty);
            assert_eq!(snap.generation_id, 4);
            assert!(snap.members.is_empty() && snap.leader.is_none());
            assert_eq!(gs.next_deadline(), None);
        }
        // v3+: a batch, one error per member.
        for version in [3i16, 4, 5] {
            let mut gs = groups(0);
            let (a, b) = two_stable(&mut gs, &clock);
            let r = gs.leave(
                clock.at(100),
                version,
                &LeaveGroupRequest {
                    group_id: GROUP.to_owned(),
                    members: [a.as_str(), "ghost", b.as_str()]
                        .iter()
                        .map(|m| MemberIdentity {
                            member_id: (*m).to_owned(),
                            ..MemberIdentity::default()
                        })
                        .collect(),
                    ..LeaveGroupRequest::default()
                },
            );
            enc(&r, version);
            assert_eq!(r.error_code, 0);
            let codes: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
            assert_eq!(codes, vec![0, code(ErrorCode::UnknownMemberId), 0]);
            assert_eq!(r.members[1].member_id, "ghost");
            assert_eq!(gs.snapshot(GROUP).unwrap().state, GroupState::Empty);
        }
        let mut gs = groups(0);
        let r = gs.leave(
            clock.at(0),
            1,
            &LeaveGroupRequest {
                group_id: "nope".to_owned(),
                member_id: "m".to_owned(),
                ..LeaveGroupRequest::default()
            },
        );
        assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
    }

    #[test]
    fn protocol_vote_picks_the_most_preferred_common_protocol() {
        let clock = Clock::new();
        let mut gs = groups(1_000);
        let prefs: [&[(&str, &[u8])]; 3] = [
            &[("range", b"1"), ("roundrobin", b"1"), ("sticky", b"1")],
            &[("roundrobin", b"2"), ("range", b"2")],
            &[("sticky", b"3"), ("roundrobin", b"3"), ("range", b"3")],
        ];
        // sticky is not supported by everyone; of the rest, roundrobin has
        // two first votes (members 2 and 3), range one.
        let tickets: Vec<Ticket> = prefs
            .iter()
            .enumerate()
            .map(|(i, p)| {
                wait(join_new(
                    &mut gs,
                    clock.at(0),
                    5,
                    &format!("c{i}"),
                    5_000,
                    p,
                ))
            })
            .collect();
        // A member supporting none of the common protocols is refused.
        let r = done(gs.join(
            clock.at(1),
            5,
            "x",
            &join_req("", 5_000, &[("sticky", b"")]),
        ));
        assert_eq!(r.error_code, code(ErrorCode::InconsistentGroupProtocol));
        // Members arrived during the initial delay: it runs once more.
        gs.tick(clock.at(1_000));
        assert_eq!(gs.poll_join(clock.at(1_000), &tickets[0]), None);
        assert_eq!(gs.next_deadline(), Some(clock.at(2_000)));
        gs.tick(clock.at(2_000));
        let answers: Vec<JoinGroupResponse> = tickets
            .iter()
            .map(|t| gs.poll_join(clock.at(3_000), t).expect("answered"))
            .collect();
        for a in &answers {
            assert_eq!(a.protocol_name.as_deref(), Some("roundrobin"));
        }
        let leader = answers.iter().find(|a| !a.members.is_empty()).unwrap();
        // The leader gets each member's metadata for the chosen protocol.
        let metas: Vec<&[u8]> = leader.members.iter().map(|m| &m.metadata[..]).collect();
        assert_eq!(metas, vec![b"1", b"2", b"3"]);
        assert_eq!(
            gs.snapshot(GROUP).unwrap().protocol.as_deref(),
            Some("roundrobin")
        );
    }

    #[test]
    fn initial_delay_waits_for_more_members() {
        let clock = Clock::new();
        let mut gs = groups(3_000);
        let ta = wait(join_new(&mut gs, clock.at(0), 5, "c1", 10_000, RANGE));
        assert_eq!(gs.next_deadline(), Some(clock.at(3_000)));
        let tb = wait(join_new(&mut gs, clock.at(1_000), 5, "c2", 10_000, RANGE));
        // Everyone has joined, but the initial delay still runs.
        assert_eq!(gs.poll_join(clock.at(1_000), &ta), None);
        gs.tick(clock.at(3_000));
        // A member arrived during the delay: another delay.
        assert_eq!(gs.poll_join(clock.at(3_000), &ta), None);
        assert_eq!(gs.next_deadline(), Some(clock.at(6_000)));
        gs.tick(clock.at(6_000));
        let ja = gs.poll_join(clock.at(6_000), &ta).expect("a answered");
        let jb = gs.poll_join(clock.at(6_000), &tb).expect("b answered");
        assert_eq!((ja.generation_id, jb.generation_id), (1, 1));
        assert_eq!(ja.leader, jb.leader);

        // The extensions stop when the rebalance timeout is used up.
        let mut gs = groups(3_000);
        let t0 = wait(join_new(&mut gs, clock.at(0), 5, "c0", 4_000, RANGE));
        wait(join_new(&mut gs, clock.at(1_000), 5, "c1", 4_000, RANGE));
        gs.tick(clock.at(3_000));
        assert_eq!(gs.next_deadline(), Some(clock.at(4_000)));
        wait(join_new(&mut gs, clock.at(3_500), 5, "c2", 4_000, RANGE));
        gs.tick(clock.at(4_000));
        let j = gs.poll_join(clock.at(4_000), &t0).expect("answered");
        assert_eq!(j.members.len(), 3);
    }

    #[test]
    fn static_member_replacement_fences_the_old_id() {
        let clock = Clock::new();
        for version in [5i16, 9] {
            let mut gs = groups(0);
            let mut req = join_req("", 30_000, RANGE);
            req.group_instance_id = Some("inst-1".to_owned());
            // Static members skip MEMBER_ID_REQUIRED; the id starts with the
            // instance id.
            let j = done(gs.join(clock.at(0), version, "c1", &req));
            enc(&j, version);
            assert_eq!(j.error_code, 0);
            assert!(j.member_id.starts_with("inst-1-"));
            assert_eq!(j.members[0].group_instance_id.as_deref(), Some("inst-1"));
            let old = j.member_id.clone();
            done(gs.sync(clock.at(1), 5, &sync_req(&old, 1, &[(&old, b"mine")])));

            // The instance restarts: same instance id, empty member id.
            let j2 = done(gs.join(clock.at(100), version, "c1", &req));
            enc(&j2, version);
            assert_eq!(j2.error_code, 0);
            assert_ne!(j2.member_id, old);
            assert_eq!(j2.generation_id, 1, "no rebalance");
            if version >= 9 {
                assert!(j2.skip_assignment);
                assert_eq!(j2.leader, j2.member_id);
                assert_eq!(j2.members.len(), 1);
            } else {
                assert!(!j2.skip_assignment);
                assert_eq!(j2.leader, old);
                assert!(j2.members.is_empty());
            }
            let snap = gs.snapshot(GROUP).unwrap();
            assert_eq!(snap.state, GroupState::Stable);
            assert_eq!(snap.members[0].member_id, j2.member_id);
            assert_eq!(snap.members[0].assignment, Bytes::from_static(b"mine"));

            let with_instance = |m: &str| HeartbeatRequest {
                group_id: GROUP.to_owned(),
                generation_id: 1,
                member_id: m.to_owned(),
                group_instance_id: Some("inst-1".to_owned()),
                ..HeartbeatRequest::default()
            };
            let r = gs.heartbeat(clock.at(200), 4, &with_instance(&old));
            assert_eq!(r.error_code, code(ErrorCode::FencedInstanceId));
            let r = gs.heartbeat(clock.at(200), 4, &with_instance(&j2.member_id));
            assert_eq!(r.error_code, 0);
            let mut sync = sync_req(&old, 1, &[]);
            sync.group_instance_id = Some("inst-1".to_owned());
            assert_eq!(
                done(gs.sync(clock.at(200), 3, &sync)).error_code,
                code(ErrorCode::FencedInstanceId)
            );
            let mut commit = commit_req(&old, 1, 1);
            commit.group_instance_id = Some("inst-1".to_owned());
            let c = gs.commit(clock.at(200), 7, &commit, &|_, _| true);
            assert_eq!(
                c.topics[0].partitions[0].error_code,
                code(ErrorCode::FencedInstanceId)
            );

            // A changed protocol does rebalance.
            let mut changed = req.clone();
            changed.protocols = protocols(&[("roundrobin", b""), ("range", b"")]);
            let j3 = done(gs.join(clock.at(300), version, "c1", &changed));
            assert_eq!(j3.generation_id, 2);
            assert_eq!(j3.protocol_name.as_deref(), Some("roundrobin"));
        }
    }

    fn commit_req(member: &str, generation: i32, offset: i64) -> OffsetCommitRequest {
        OffsetCommitRequest {
            group_id: GROUP.to_owned(),
            generation_id_or_member_epoch: generation,
            member_id: member.to_owned(),
            topics: vec![OffsetCommitRequestTopic {
                name: "t".to_owned(),
                partitions: vec![OffsetCommitRequestPartition {
                    partition_index: 0,
                    committed_offset: offset,
                    committed_leader_epoch: 4,
                    committed_metadata: Some("meta".to_owned()),
                    ..OffsetCommitRequestPartition::default()
                }],
                ..OffsetCommitRequestTopic::default()
            }],
            ..OffsetCommitRequest::default()
        }
    }

    fn commit_code(r: &OffsetCommitResponse) -> i16 {
        r.topics[0].partitions[0].error_code
    }

    #[test]
    fn commit_rules() {
        let clock = Clock::new();
        let all = |_: &str, _: i32| true;
        let mut gs = groups(0);
        // A simple commit creates the group.
        let r = gs.commit(clock.at(0), 2, &commit_req("", -1, 10), &all);
        enc(&r, 2);
        assert_eq!(commit_code(&r), 0);
        assert_eq!(gs.committed(GROUP, "t", 0), Some(10));
        assert_eq!(gs.snapshot(GROUP).unwrap().state, GroupState::Empty);
        // Unknown group with a generation: ILLEGAL_GENERATION, from v9
        // GROUP_ID_NOT_FOUND.
        let mut other = commit_req("m", 3, 1);
        other.group_id = "other".to_owned();
        assert_eq!(
            commit_code(&gs.commit(clock.at(0), 8, &other, &all)),
            code(ErrorCode::IllegalGeneration)
        );
        let r = gs.commit(clock.at(0), 9, &other, &all);
        enc(&r, 9);
        assert_eq!(commit_code(&r), code(ErrorCode::GroupIdNotFound));
        assert!(gs.snapshot("other").is_none());

        let a = one_stable(&mut gs, clock.at(0), 5);
        // The group has members now: no more simple commits.
        assert_eq!(
            commit_code(&gs.commit(clock.at(1), 5, &commit_req("", -1, 11), &all)),
            code(ErrorCode::UnknownMemberId)
        );
        assert_eq!(
            commit_code(&gs.commit(clock.at(1), 5, &commit_req(&a, 0, 11), &all)),
            code(ErrorCode::IllegalGeneration)
        );
        assert_eq!(
            commit_code(&gs.commit(clock.at(1), 5, &commit_req("x", 1, 11), &all)),
            code(ErrorCode::UnknownMemberId)
        );
        assert_eq!(gs.committed(GROUP, "t", 0), Some(10));
        let r = gs.commit(clock.at(1), 5, &commit_req(&a, 1, 12), &all);
        enc(&r, 5);
        assert_eq!(commit_code(&r), 0);
        assert_eq!(gs.committed(GROUP, "t", 0), Some(12));

        // During PreparingRebalance the current generation may still commit.
        wait(join_new(&mut gs, clock.at(2), 5, "c2", 30_000, RANGE));
        assert_eq!(
            gs.snapshot(GROUP).unwrap().state,
            GroupState::PreparingRebalance
        );
        assert_eq!(
            commit_code(&gs.commit(clock.at(3), 8, &commit_req(&a, 1, 13), &all)),
            0
        );
        assert_eq!(gs.committed(GROUP, "t", 0), Some(13));

        // Unknown partitions, and metadata over the limit.
        let none = |t: &str, p: i32| t == "t" && p == 0;
        let mut req = commit_req(&a, 1, 14);
        req.topics[0].partitions.push(OffsetCommitRequestPartition {
            partition_index: 9,
            committed_offset: 1,
            ..OffsetCommitRequestPartition::default()
        });
        let r = gs.commit(clock.at(4), 6, &req, &none);
        let codes: Vec<i16> = r.topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(codes, vec![0, code(ErrorCode::UnknownTopicOrPartition)]);
        assert_eq!(gs.committed(GROUP, "t", 9), None);
        let mut big = commit_req(&a, 1, 15);
        big.topics[0].partitions[0].committed_metadata = Some("x".repeat(5_000));
        assert_eq!(
            commit_code(&gs.commit(clock.at(4), 6, &big, &all)),
            code(ErrorCode::OffsetMetadataTooLarge)
        );
    }

    fn fetch_v7(topics: Option<Vec<(&str, Vec<i32>)>>, group: &str) -> OffsetFetchRequest {
        OffsetFetchRequest {
            group_id: group.to_owned(),
            topics: topics.map(|ts| {
                ts.into_iter()
                    .map(|(n, ps)| OffsetFetchRequestTopic {
                        name: n.to_owned(),
                        partition_indexes: ps,
                        ..OffsetFetchRequestTopic::default()
                    })
                    .collect()
            }),
            ..OffsetFetchRequest::default()
        }
    }

    #[test]
    fn offset_fetch_shapes() {
        let clock = Clock::new();
        let all = |_: &str, _: i32| true;
        let mut gs = groups(0);
        // Leader epoch stored from v6; v5 commits store none.
        gs.commit(clock.at(0), 6, &commit_req("", -1, 42), &all);
        let mut other = commit_req("", -1, 7);
        other.topics[0].name = "u".to_owned();
        other.topics[0].partitions[0].committed_metadata = None;
        gs.commit(clock.at(0), 5, &other, &all);

        // v7: top-level topics.
        let r = gs.fetch_offsets(
            clock.at(1),
            7,
            &fetch_v7(Some(vec![("t", vec![0, 1])]), GROUP),
        );
        enc(&r, 7);
        assert!(r.groups.is_empty());
        let p = &r.topics[0].partitions;
        assert_eq!(
            (p[0].committed_offset, p[0].committed_leader_epoch),
            (42, 4)
        );
        assert_eq!(p[0].metadata.as_deref(), Some("meta"));
        assert_eq!(
            (p[1].committed_offset, p[1].committed_leader_epoch),
            (-1, -1)
        );
        // Null topics: everything committed.
        let r = gs.fetch_offsets(clock.at(1), 7, &fetch_v7(None, GROUP));
        enc(&r, 7);
        let names: Vec<&str> = r.topics.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["t", "u"]);
        assert_eq!(r.topics[1].partitions[0].committed_leader_epoch, -1);
        assert_eq!(r.topics[1].partitions[0].metadata.as_deref(), Some(""));
        // v1: encodable, no epochs.
        let r = gs.fetch_offsets(clock.at(1), 1, &fetch_v7(Some(vec![("t", vec![0])]), GROUP));
        enc(&r, 1);
        assert_eq!(r.topics[0].partitions[0].committed_offset, 42);
        // Unknown group: -1s.
        let r = gs.fetch_offsets(
            clock.at(1),
            7,
            &fetch_v7(Some(vec![("t", vec![0])]), "nope"),
        );
        assert_eq!(
            (r.error_code, r.topics[0].partitions[0].committed_offset),
            (0, -1)
        );

        // v8: the groups array.
        let req = OffsetFetchRequest {
            group_id: String::new(),
            topics: None,
            groups: vec![
                OffsetFetchRequestGroup {
                    group_id: GROUP.to_owned(),
                    topics: Some(vec![OffsetFetchRequestTopics {
                        name: "t".to_owned(),
                        partition_indexes: vec![0],
                        ..OffsetFetchRequestTopics::default()
                    }]),
                    ..OffsetFetchRequestGroup::default()
                },
                OffsetFetchRequestGroup {
                    group_id: GROUP.to_owned(),
                    topics: None,
                    ..OffsetFetchRequestGroup::default()
                },
                OffsetFetchRequestGroup {
                    group_id: "nope".to_owned(),
                    topics: None,
                    ..OffsetFetchRequestGroup::default()
                },
            ],
            ..OffsetFetchRequest::default()
        };
        for version in [8i16, 9] {
            let r = gs.fetch_offsets(clock.at(1), version, &req);
            enc(&r, version);
            assert!(r.topics.is_empty());
            assert_eq!(r.groups.len(), 3);
            let p = &r.groups[0].topics[0].partitions[0];
            assert_eq!((p.committed_offset, p.committed_leader_epoch), (42, 4));
            assert_eq!(r.groups[1].topics.len(), 2);
            assert!(r.groups[2].topics.is_empty());
            assert_eq!(r.groups[2].group_id, "nope");
        }
    }

    #[test]
    fn pending_member_id_holds_the_join_phase() {
        let clock = Clock::new();
        let mut gs = groups(0);
        let a = one_stable(&mut gs, clock.at(0), 5);
        // b has its id but has not joined with it yet.
        let r = done(gs.join(clock.at(10), 5, "c2", &join_req("", 20_000, RANGE)));
        assert_eq!(r.error_code, code(ErrorCode::MemberIdRequired));
        // The leader rejoins (which always rebalances); everyone known has
        // joined, but the pending id keeps the phase open (Kafka's
        // hasAllMembersJoined).
        let ta = wait(gs.join(clock.at(20), 5, "c1", &join_req(&a, 30_000, RANGE)));
        assert_eq!(gs.poll_join(clock.at(20), &ta), None);
        // b's own join ends the phase: it is answered at once.
        let jb = done(gs.join(
            clock.at(30),
            5,
            "c2",
            &join_req(&r.member_id, 20_000, RANGE),
        ));
        let ja = gs.poll_join(clock.at(30), &ta).expect("a answered");
        assert_eq!((ja.generation_id, jb.generation_id), (2, 2));
        assert_eq!(ja.members.len(), 2);

        // An id never used expires after the session timeout and stops
        // holding the phase.
        let mut gs = groups(0);
        let a = one_stable(&mut gs, clock.at(0), 5);
        done(gs.join(clock.at(10), 5, "c2", &join_req("", 20_000, RANGE)));
        let ta = wait(gs.join(clock.at(20), 5, "c1", &join_req(&a, 30_000, RANGE)));
        assert_eq!(gs.next_deadline(), Some(clock.at(10_010)));
        gs.tick(clock.at(10_010));
        let ja = gs.poll_join(clock.at(10_010), &ta).expect("a answered");
        assert_eq!((ja.generation_id, ja.members.len()), (2, 1));
    }

    #[test]
    fn cancelled_join_no_longer_blocks() {
        let clock = Clock::new();
        let mut gs = groups(0);
        let (a, b) = two_stable(&mut gs, &clock);
        let tb = wait(gs.join(
            clock.at(100),
            5,
            "c2",
            &join_req(&b, 20_000, &[("range", b"2")]),
        ));
        gs.cancel(&tb);
        // b's connection is gone: it no longer counts as waiting, and the
        // join completes once a rejoins.
        hb(&mut gs, clock.at(200), 4, &a, 2);
        let _ = wait(gs.join(clock.at(300), 5, "c1", &join_req(&a, 30_000, RANGE)));
        gs.tick(clock.at(30_300));
        assert!(gs
            .snapshot(GROUP)
            .unwrap()
            .members
            .iter()
            .all(|m| m.member_id != b));
    }
}
