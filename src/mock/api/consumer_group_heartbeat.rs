//! ConsumerGroupHeartbeat (KIP-848): refused here for an injected error or
//! a group another broker coordinates, else answered by the consumer
//! group coordinator (`consumer_group/`) with the cluster's topics as it
//! sees them now.

use std::time::Instant;

use super::group_error;
use crate::mock::respond::Received;
use crate::mock::state::State;
use crate::protocol::messages::consumer_group_heartbeat::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use crate::protocol::ApiKey;

/// The answer to a ConsumerGroupHeartbeat request.
pub(crate) fn answer(
    st: &mut State,
    r: &Received,
    req: &ConsumerGroupHeartbeatRequest,
    now: Instant,
) -> ConsumerGroupHeartbeatResponse {
    if let Some(code) = group_error(st, r.broker, ApiKey::ConsumerGroupHeartbeat, &req.group_id) {
        return ConsumerGroupHeartbeatResponse {
            error_code: code.code(),
            member_epoch: -1,
            ..Default::default()
        };
    }
    let view = st
        .topics
        .iter()
        .map(|(name, t)| (name.clone(), (t.id, t.partitions.len() as i32)))
        .collect();
    st.consumer_groups.heartbeat(now, r.version, req, &view)
}
