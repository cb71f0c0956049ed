//! Heartbeat (classic groups): refused here for an injected error or a
//! group another broker coordinates, else answered by the coordinator
//! (`Groups::heartbeat`).

use std::time::Instant;

use super::group_error;
use crate::mock::respond::Received;
use crate::mock::state::State;
use crate::protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use crate::protocol::ApiKey;

/// The answer to a Heartbeat request.
pub(crate) fn answer(
    st: &mut State,
    r: &Received,
    req: &HeartbeatRequest,
    now: Instant,
) -> HeartbeatResponse {
    match group_error(st, r.broker, ApiKey::Heartbeat, &req.group_id) {
        Some(code) => HeartbeatResponse {
            error_code: code.code(),
            ..Default::default()
        },
        None => st.groups.heartbeat(now, r.version, req),
    }
}
