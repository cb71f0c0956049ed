//! LeaveGroup (classic groups): refused here for an injected error or a
//! group another broker coordinates, else answered by the coordinator
//! (`Groups::leave`).

use std::time::Instant;

use super::group_error;
use crate::mock::respond::Received;
use crate::mock::state::State;
use crate::protocol::messages::leave_group::{LeaveGroupRequest, LeaveGroupResponse};
use crate::protocol::ApiKey;

/// The answer to a LeaveGroup request.
pub(crate) fn answer(
    st: &mut State,
    r: &Received,
    req: &LeaveGroupRequest,
    now: Instant,
) -> LeaveGroupResponse {
    match group_error(st, r.broker, ApiKey::LeaveGroup, &req.group_id) {
        Some(code) => LeaveGroupResponse {
            error_code: code.code(),
            ..Default::default()
        },
        None => st.groups.leave(now, r.version, req),
    }
}
