//! One member of a classic group (Kafka's `ClassicGroupMember`), a member
//! id handed out and not yet used (KIP-394), and the fields a JoinGroup
//! sets on a member.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::rebalance::join_error;
use super::{Outbox, Waiter};
use crate::error::ErrorCode;
use crate::protocol::messages::join_group::{JoinGroupRequest, JoinGroupRequestProtocol};

/// One member (Kafka's `ClassicGroupMember`).
pub(super) struct Member {
    pub(super) id: String,
    pub(super) instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) session_timeout: Duration,
    pub(super) rebalance_timeout: Duration,
    pub(super) protocol_type: String,
    /// Name and metadata, in the member's order of preference.
    pub(super) protocols: Vec<(String, Bytes)>,
    pub(super) assignment: Bytes,
    /// When the member is removed unless it heartbeats (ignored while it
    /// waits in a JoinGroup or SyncGroup: Kafka's `hasSatisfiedHeartbeat`).
    pub(super) session_deadline: Instant,
    /// Its JoinGroup waiting for the join phase to complete.
    pub(super) join: Option<Waiter>,
    /// Its SyncGroup waiting for the leader's.
    pub(super) sync: Option<Waiter>,
}

impl Member {
    /// Whether the member's session can expire now (it waits for nobody).
    pub(super) fn can_expire(&self) -> bool {
        self.join.is_none() && self.sync.is_none()
    }

    pub(super) fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// Same protocols and metadata, in the same order (Kafka's `matches`).
    pub(super) fn matches(&self, protocols: &[JoinGroupRequestProtocol]) -> bool {
        self.protocols.len() == protocols.len()
            && self
                .protocols
                .iter()
                .zip(protocols)
                .all(|((n, m), p)| *n == p.name && *m == p.metadata)
    }
}

/// A member id handed out with MEMBER_ID_REQUIRED, not yet used to join
/// (KIP-394). It blocks the join phase until it joins or expires.
pub(super) struct PendingMember {
    pub(super) id: String,
    pub(super) deadline: Instant,
}

/// A duration in milliseconds from a request (0 for a negative one).
pub(super) fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The fields of a JoinGroup that describe the member.
pub(super) fn new_member(
    id: String,
    now: Instant,
    client_id: &str,
    req: &JoinGroupRequest,
    join: Option<Waiter>,
) -> Member {
    let mut m = Member {
        id,
        instance_id: req.group_instance_id.clone(),
        client_id: client_id.to_owned(),
        session_timeout: Duration::ZERO,
        rebalance_timeout: Duration::ZERO,
        protocol_type: req.protocol_type.clone(),
        protocols: Vec::new(),
        assignment: Bytes::new(),
        session_deadline: now,
        join: None,
        sync: None,
    };
    update_member(&mut m, now, req, join, &mut Outbox::default());
    m
}

/// Takes the member's new protocols and timeouts (Kafka's `updateMember`)
/// and parks its JoinGroup. A JoinGroup it had parked already (a retry on a
/// new connection) is answered REBALANCE_IN_PROGRESS rather than left
/// hanging, as Kafka does.
pub(super) fn update_member(
    m: &mut Member,
    now: Instant,
    req: &JoinGroupRequest,
    join: Option<Waiter>,
    out: &mut Outbox,
) {
    m.session_timeout = millis(req.session_timeout_ms);
    // Version 0 had no rebalance timeout; Kafka then uses the session timeout.
    m.rebalance_timeout = if req.rebalance_timeout_ms < 0 {
        m.session_timeout
    } else {
        millis(req.rebalance_timeout_ms)
    };
    m.protocols = req
        .protocols
        .iter()
        .map(|p| (p.name.clone(), p.metadata.clone()))
        .collect();
    m.session_deadline = now + m.session_timeout;
    if let Some(old) = m.join.take() {
        out.joins.insert(
            old.ticket,
            join_error(old.version, ErrorCode::RebalanceInProgress, &m.id),
        );
    }
    m.join = join;
}
