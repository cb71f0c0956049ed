//! JoinGroup (versions 2-9), after Kafka's `classicGroupJoin`: a new
//! member (MEMBER_ID_REQUIRED first from v4, KIP-394), a static member
//! restarting under a new member id (KIP-345), or a known member
//! rejoining; answered at once for errors and rejoins that need no
//! rebalance, otherwise parked until the join phase completes.

use std::time::Instant;

use super::member::{millis, new_member, update_member, PendingMember};
use super::rebalance::{join_error, sync_error, Group};
use super::{GroupSettings, GroupState, Groups, Outbox, Step, Ticket, Waiter};
use crate::error::ErrorCode;
use crate::protocol::messages::join_group::{JoinGroupRequest, JoinGroupResponse};

/// A JoinGroup being handled: the request, who sent it, and where its
/// answer goes if it has to wait.
struct Joining<'a> {
    req: &'a JoinGroupRequest,
    version: i16,
    client_id: &'a str,
    now: Instant,
    waiter: Waiter,
}

/// The coordinator's side of a join: where parked answers go, and its
/// settings.
struct Coordinator<'a> {
    out: &'a mut Outbox,
    settings: &'a GroupSettings,
}

impl Groups {
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
        let group = self
            .groups
            .entry(req.group_id.clone())
            .or_insert_with(|| Group::new(&req.group_id));
        let mut c = Coordinator {
            out: &mut self.out,
            settings: &self.settings,
        };
        let joining = Joining {
            req,
            version,
            client_id,
            now,
            waiter,
        };
        let parked = match new_id {
            Some(id) => join_new_member(group, &mut c, &joining, id),
            None => join_existing_member(group, &mut c, &joining),
        };
        self.join_step(parked, ticket)
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
}

/// JoinGroup with an empty member id (Kafka's `classicGroupJoinNewMember`).
fn join_new_member(
    group: &mut Group,
    c: &mut Coordinator,
    j: &Joining,
    new_id: String,
) -> Option<JoinGroupResponse> {
    let (req, version, now) = (j.req, j.version, j.now);
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
        return replace_static_member(group, c, j, (old_id, new_id));
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
    group.add_member(new_member(new_id, now, j.client_id, req, Some(j.waiter)));
    group.rebalance_or_complete_join(c.out, now, c.settings);
    None
}

/// A known group instance joins with an empty member id (a restarted static
/// member): it takes a new member id, the old one is fenced (Kafka's
/// `updateStaticMemberThenRebalanceOrCompleteJoin`).
fn replace_static_member(
    group: &mut Group,
    c: &mut Coordinator,
    j: &Joining,
    (old_id, new_id): (String, String),
) -> Option<JoinGroupResponse> {
    let (req, version, now, out) = (j.req, j.version, j.now, &mut *c.out);
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
    update_member(m, now, req, Some(j.waiter), out);
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
                group.prepare_rebalance(out, now, c.settings);
                None
            }
        }
        GroupState::CompletingRebalance => {
            // The leader may already be assigning to the old id.
            group.prepare_rebalance(out, now, c.settings);
            None
        }
        GroupState::PreparingRebalance | GroupState::Empty => {
            group.maybe_complete_join(out, now);
            None
        }
    }
}

/// JoinGroup with a member id (Kafka's `classicGroupJoinExistingMember`).
fn join_existing_member(
    group: &mut Group,
    c: &mut Coordinator,
    j: &Joining,
) -> Option<JoinGroupResponse> {
    let (req, version, now) = (j.req, j.version, j.now);
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
        group.add_member(new_member(
            id.to_owned(),
            now,
            j.client_id,
            req,
            Some(j.waiter),
        ));
        group.rebalance_or_complete_join(c.out, now, c.settings);
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
            update_member(m, now, req, Some(j.waiter), c.out);
            group.rebalance_or_complete_join(c.out, now, c.settings);
            None
        }
    }
}
