//! Heartbeat (versions 0-4): a member's session kept alive, and whether a
//! rebalance is under way.

use std::time::Instant;

use super::{GroupState, Groups};
use crate::error::ErrorCode;
use crate::protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};

impl Groups {
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
}
