//! SyncGroup (classic groups): refused here for an injected error or a
//! group another broker coordinates; else the coordinator
//! (`Groups::sync`) answers at once or parks it until the leader's
//! assignments come.

use std::time::Instant;

use super::rebalance_step;
use crate::mock::respond::{Received, Reply, WaitKind};
use crate::mock::state::State;
use crate::protocol::messages::sync_group::{SyncGroupRequest, SyncGroupResponse};
use crate::protocol::ApiKey;

/// The answer to a SyncGroup request: now or later.
pub(crate) fn respond(st: &mut State, r: &Received, req: &SyncGroupRequest, now: Instant) -> Reply {
    let refused = |code: crate::error::ErrorCode| SyncGroupResponse {
        error_code: code.code(),
        ..Default::default()
    };
    rebalance_step(
        st,
        (r, ApiKey::SyncGroup, &req.group_id),
        refused,
        |groups| groups.sync(now, r.version, req),
        WaitKind::Sync,
    )
}
