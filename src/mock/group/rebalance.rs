//! One classic group's state machine (Kafka's `ClassicGroup` and the
//! rebalance steps of its `GroupMetadataManager`): members joining and
//! leaving, the join phase and its timers, the protocol vote, the
//! leader's assignments, session expiry. The requests (`join.rs`,
//! `sync.rs`, `heartbeat.rs`, `leave.rs`, `offsets.rs`) move a group
//! through these steps; [`Groups::tick`](super::Groups::tick) runs its
//! timers.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::member::{Member, PendingMember};
use super::offsets::Committed;
use super::{GroupSettings, GroupSnapshot, GroupState, MemberSnapshot, Outbox};
use crate::error::ErrorCode;
use crate::protocol::messages::join_group::{
    JoinGroupRequestProtocol, JoinGroupResponse, JoinGroupResponseMember,
};
use crate::protocol::messages::sync_group::{SyncGroupRequest, SyncGroupResponse};

/// The timer of the join phase (Kafka's `DelayedJoin` / `InitialDelayedJoin`).
#[derive(Debug, Clone, Copy)]
pub(super) enum JoinTimer {
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
    pub(super) fn deadline(&self) -> Instant {
        match *self {
            JoinTimer::Initial { deadline, .. } | JoinTimer::Rebalance { deadline } => deadline,
        }
    }
}

/// One group (Kafka's `ClassicGroup`) and its committed offsets.
pub(super) struct Group {
    pub(super) id: String,
    pub(super) state: GroupState,
    pub(super) generation: i32,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol: Option<String>,
    pub(super) leader: Option<String>,
    /// In the order they joined.
    pub(super) members: Vec<Member>,
    pub(super) pending: Vec<PendingMember>,
    /// Set while PreparingRebalance.
    pub(super) join_timer: Option<JoinTimer>,
    /// Members that have not sent SyncGroup since the join phase completed;
    /// at `sync_deadline` they are removed (Kafka's pending-sync expiry).
    pub(super) pending_sync: Vec<String>,
    pub(super) sync_deadline: Option<Instant>,
    pub(super) offsets: BTreeMap<(String, i32), Committed>,
}

/// JoinGroup's protocol name at `version`: nullable from v7, where Kafka
/// sends null for "none"; an empty string before.
pub(super) fn protocol_name_at(version: i16, name: Option<&str>) -> Option<String> {
    if version >= 7 {
        name.filter(|n| !n.is_empty()).map(str::to_owned)
    } else {
        Some(name.unwrap_or("").to_owned())
    }
}

/// A JoinGroup refused with `error`.
pub(super) fn join_error(version: i16, error: ErrorCode, member_id: &str) -> JoinGroupResponse {
    JoinGroupResponse {
        error_code: error.code(),
        generation_id: -1,
        protocol_type: None,
        protocol_name: protocol_name_at(version, None),
        member_id: member_id.to_owned(),
        ..JoinGroupResponse::default()
    }
}

/// A SyncGroup refused with `error`.
pub(super) fn sync_error(error: ErrorCode) -> SyncGroupResponse {
    SyncGroupResponse {
        error_code: error.code(),
        ..SyncGroupResponse::default()
    }
}

impl Group {
    pub(super) fn new(id: &str) -> Self {
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

    pub(super) fn member(&self, id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    pub(super) fn member_mut(&mut self, id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.id == id)
    }

    pub(super) fn static_member_id(&self, instance_id: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
            .map(|m| m.id.as_str())
    }

    pub(super) fn is_leader(&self, id: &str) -> bool {
        self.leader.as_deref() == Some(id)
    }

    pub(super) fn is_pending(&self, id: &str) -> bool {
        self.pending.iter().any(|p| p.id == id)
    }

    /// Kafka's `validateMember`: a request naming a group instance id must
    /// carry that instance's current member id (else FENCED_INSTANCE_ID).
    pub(super) fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ErrorCode> {
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
    pub(super) fn rebalance_timeout(&self) -> Duration {
        self.members
            .iter()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default()
    }

    /// Protocols every member supports.
    pub(super) fn candidates(&self) -> Vec<&str> {
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
    pub(super) fn supports(
        &self,
        protocol_type: &str,
        protocols: &[JoinGroupRequestProtocol],
    ) -> bool {
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
    pub(super) fn select_protocol(&self) -> Option<String> {
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

    pub(super) fn has_all_joined(&self) -> bool {
        self.pending.is_empty() && self.members.iter().all(|m| m.join.is_some())
    }

    /// The member list the leader receives.
    pub(super) fn member_list(&self, version: i16) -> Vec<JoinGroupResponseMember> {
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
    pub(super) fn join_response(&self, version: i16, member_id: &str) -> JoinGroupResponse {
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

    pub(super) fn sync_response(&self, assignment: Bytes) -> SyncGroupResponse {
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
    pub(super) fn add_member(&mut self, member: Member) {
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
    pub(super) fn remove_member(&mut self, out: &mut Outbox, id: &str) {
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

    pub(super) fn remove_pending_sync(&mut self, id: &str) {
        self.pending_sync.retain(|p| p != id);
        if self.pending_sync.is_empty() {
            self.sync_deadline = None;
        }
    }

    /// After members left: Kafka's `removeMemberAndUpdateGroup`.
    pub(super) fn after_removal(
        &mut self,
        out: &mut Outbox,
        now: Instant,
        settings: &GroupSettings,
    ) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(out, now, settings)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(out, now),
            GroupState::Empty => {}
        }
    }

    /// Kafka's `maybePrepareRebalanceOrCompleteJoin`.
    pub(super) fn rebalance_or_complete_join(
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
    pub(super) fn prepare_rebalance(
        &mut self,
        out: &mut Outbox,
        now: Instant,
        settings: &GroupSettings,
    ) {
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
    pub(super) fn maybe_complete_join(&mut self, out: &mut Outbox, now: Instant) {
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
    pub(super) fn complete_join(&mut self, out: &mut Outbox, now: Instant) {
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
    pub(super) fn set_assignments(
        &mut self,
        out: &mut Outbox,
        now: Instant,
        req: &SyncGroupRequest,
    ) {
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
    pub(super) fn tick(&mut self, out: &mut Outbox, now: Instant, settings: &GroupSettings) {
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

    pub(super) fn next_deadline(&self) -> Option<Instant> {
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

    pub(super) fn snapshot(&self) -> GroupSnapshot {
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
