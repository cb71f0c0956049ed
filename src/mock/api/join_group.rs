//! JoinGroup (classic groups): refused here for an injected error or a
//! group another broker coordinates; else the coordinator
//! (`Groups::join`) answers at once or parks it until the join phase
//! completes.

use std::time::Instant;

use super::rebalance_step;
use crate::mock::respond::{Received, Reply, WaitKind};
use crate::mock::state::State;
use crate::protocol::messages::join_group::{JoinGroupRequest, JoinGroupResponse};
use crate::protocol::ApiKey;

/// The answer to a JoinGroup request from `client_id`: now or later.
pub(crate) fn respond(
    st: &mut State,
    r: &Received,
    client_id: &str,
    req: &JoinGroupRequest,
    now: Instant,
) -> Reply {
    let refused = |code: crate::error::ErrorCode| JoinGroupResponse {
        error_code: code.code(),
        member_id: req.member_id.clone(),
        ..Default::default()
    };
    rebalance_step(
        st,
        (r, ApiKey::JoinGroup, &req.group_id),
        refused,
        |groups| groups.join(now, r.version, client_id, req),
        WaitKind::Join,
    )
}
