//! SyncGroup (versions 0-5): the leader's assignments handed to every
//! member; a follower's SyncGroup waits for them (KIP-559's protocol
//! checks from v5).

use std::time::Instant;

use super::rebalance::sync_error;
use super::{GroupState, Groups, Step, Ticket, Waiter};
use crate::error::ErrorCode;
use crate::protocol::messages::sync_group::{SyncGroupRequest, SyncGroupResponse};

impl Groups {
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
}
