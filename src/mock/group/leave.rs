//! LeaveGroup (versions 0-5): removes the members named (a static member
//! by instance id alone, KIP-345; a member id handed out and not yet
//! used) and starts a rebalance.

use std::time::Instant;

use super::rebalance::Group;
use super::{Groups, Outbox};
use crate::error::ErrorCode;
use crate::protocol::messages::leave_group::{
    LeaveGroupRequest, LeaveGroupResponse, MemberIdentity, MemberResponse,
};

impl Groups {
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
            let outcome = group.remove_leaving(out, who);
            removed |= outcome.is_ok();
            results.push(MemberResponse {
                member_id: who.member_id.clone(),
                group_instance_id: who.group_instance_id.clone(),
                error_code: outcome.err().unwrap_or(ErrorCode::None).code(),
                ..MemberResponse::default()
            });
        }
        if removed {
            group.after_removal(out, now, &self.settings);
        }
        leave_response(version, results)
    }
}

impl Group {
    /// Removes one leaving member, or says why it cannot.
    fn remove_leaving(&mut self, out: &mut Outbox, who: &MemberIdentity) -> Result<(), ErrorCode> {
        let instance = who.group_instance_id.as_deref();
        if who.member_id.is_empty() {
            // KIP-345: an admin removes a static member by instance id.
            match instance
                .and_then(|i| self.static_member_id(i))
                .map(str::to_owned)
            {
                Some(id) => {
                    self.remove_member(out, &id);
                    Ok(())
                }
                None => Err(ErrorCode::UnknownMemberId),
            }
        } else if self.is_pending(&who.member_id) {
            self.pending.retain(|p| p.id != who.member_id);
            Ok(())
        } else {
            self.validate_member(&who.member_id, instance).map(|()| {
                self.remove_member(out, &who.member_id);
            })
        }
    }
}

/// The answer: each member's result from version 3; before, the first
/// member error at the top level (Kafka's LeaveGroupResponse for v0-2).
fn leave_response(version: i16, results: Vec<MemberResponse>) -> LeaveGroupResponse {
    if version >= 3 {
        LeaveGroupResponse {
            members: results,
            ..LeaveGroupResponse::default()
        }
    } else {
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
