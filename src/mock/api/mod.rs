//! The mock's answer to each request kind, one file per API (after
//! franz-go's kfake): what Kafka's broker does with that request, reduced
//! to what a test cluster needs. `respond.rs` decodes a request, checks
//! its SASL state and version, and hands its body to the handler here;
//! each handler takes the next injected error for its API
//! (`MockCluster::push_errors`) where Kafka would answer one, and returns
//! the response (or, for Fetch, JoinGroup and SyncGroup, a request that
//! waits, [`Reply::Later`](super::respond::Reply::Later)).
//!
//! The group APIs hand the request to the coordinators (`group/` for the
//! classic protocol, `consumer_group/` for KIP-848) after
//! [`group_error`] found no reason to refuse it here.

pub(crate) mod api_versions;
pub(crate) mod consumer_group_heartbeat;
pub(crate) mod create_topics;
pub(crate) mod fetch;
pub(crate) mod find_coordinator;
pub(crate) mod heartbeat;
pub(crate) mod init_producer_id;
pub(crate) mod join_group;
pub(crate) mod leave_group;
pub(crate) mod list_offsets;
pub(crate) mod metadata;
pub(crate) mod offset_commit;
pub(crate) mod offset_fetch;
pub(crate) mod offset_for_leader_epoch;
pub(crate) mod produce;
pub(crate) mod sasl_authenticate;
pub(crate) mod sasl_handshake;
pub(crate) mod sync_group;

use super::group::{Groups, Step, Ticket};
use super::respond::{reply, Received, Reply, WaitKind, Waiting};
use super::state::State;
use crate::error::ErrorCode;
use crate::protocol::messages::Message;
use crate::protocol::ApiKey;

/// The APIs the mock serves, at the versions this crate's protocol layer
/// implements.
pub(crate) const SERVED: [ApiKey; 18] = [
    ApiKey::Produce,
    ApiKey::InitProducerId,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::Metadata,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::SyncGroup,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::ConsumerGroupHeartbeat,
    // Answered with ILLEGAL_SASL_STATE when SASL is off, as Kafka does on a
    // PLAINTEXT listener.
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
];

/// The error a group request gets before the coordinator sees it: an
/// injected one, or NOT_COORDINATOR when another broker coordinates.
pub(crate) fn group_error(
    st: &mut State,
    broker: i32,
    api: ApiKey,
    group: &str,
) -> Option<ErrorCode> {
    if let Some(code) = st.take_error(broker, api) {
        return Some(code);
    }
    (st.coordinator(group) != broker).then_some(ErrorCode::NotCoordinator)
}

/// A JoinGroup or SyncGroup: refused before the coordinator sees it, or
/// answered at once, or parked until the rebalance step it waits for is
/// done (or its broker goes down, which closes the connection).
pub(crate) fn rebalance_step<R: Message>(
    st: &mut State,
    (r, api, group): (&Received, ApiKey, &str),
    refused: impl FnOnce(ErrorCode) -> R,
    start: impl FnOnce(&mut Groups) -> Step<R>,
    parked: impl FnOnce(Ticket) -> WaitKind,
) -> Reply {
    if let Some(code) = group_error(st, r.broker, api, group) {
        return Reply::Now(reply(&refused(code), r.version, r.correlation_id));
    }
    match start(&mut st.groups) {
        Step::Done(resp) => Reply::Now(reply(&resp, r.version, r.correlation_id)),
        Step::Wait(ticket) => Reply::Later(Waiting::new(*r, parked(ticket))),
    }
}

#[cfg(test)]
mod tests;
