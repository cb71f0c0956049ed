//! The group coordinator of the mock cluster (interface; body to come).

use std::time::{Duration, Instant};

use crate::protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use crate::protocol::messages::join_group::{JoinGroupRequest, JoinGroupResponse};
use crate::protocol::messages::leave_group::{LeaveGroupRequest, LeaveGroupResponse};
use crate::protocol::messages::offset_commit::{OffsetCommitRequest, OffsetCommitResponse};
use crate::protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchResponse};
use crate::protocol::messages::sync_group::{SyncGroupRequest, SyncGroupResponse};

/// Settings of the coordinator.
#[derive(Debug, Clone)]
pub(crate) struct GroupSettings {
    /// How long the first rebalance of an empty group waits for more members
    /// (Kafka's `group.initial.rebalance.delay.ms`).
    pub initial_rebalance_delay: Duration,
    /// Bounds on a member's session timeout (Kafka's
    /// `group.min.session.timeout.ms` / `group.max.session.timeout.ms`).
    pub min_session_timeout: Duration,
    /// See `min_session_timeout`.
    pub max_session_timeout: Duration,
}

/// The outcome of a request that may have to wait for other members.
pub(crate) enum Step<R> {
    /// Answered now.
    Done(R),
    /// Waits; ask again with [`Groups::poll_join`] / [`Groups::poll_sync`].
    Wait(Ticket),
}

/// A request waiting for a rebalance step.
#[derive(Debug, Clone)]
pub(crate) struct Ticket {
    _private: (),
}

/// Where a group is in the classic protocol's state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupState {
    /// No members.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's SyncGroup.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
}

/// A group as the coordinator sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GroupSnapshot {
    /// The group id.
    pub group_id: String,
    /// Its state.
    pub state: GroupState,
    /// The current generation (0 before the first rebalance completes).
    pub generation_id: i32,
    /// The protocol chosen (assignor name), once a rebalance has completed.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// The members.
    pub members: Vec<MemberSnapshot>,
}

/// One member of a group.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MemberSnapshot {
    /// Member id given by the coordinator.
    pub member_id: String,
    /// Static membership id, if any.
    pub group_instance_id: Option<String>,
    /// The client id from the member's JoinGroup header.
    pub client_id: String,
    /// The assignment bytes the leader gave it in the last SyncGroup.
    pub assignment: bytes::Bytes,
}

/// Every group of a cluster.
pub(crate) struct Groups {
    _settings: GroupSettings,
}

#[allow(unused_variables, dead_code)]
impl Groups {
    pub fn new(settings: GroupSettings) -> Self {
        unimplemented!()
    }
    pub fn join(
        &mut self,
        now: Instant,
        version: i16,
        client_id: &str,
        req: &JoinGroupRequest,
    ) -> Step<JoinGroupResponse> {
        unimplemented!()
    }
    pub fn poll_join(&mut self, now: Instant, ticket: &Ticket) -> Option<JoinGroupResponse> {
        unimplemented!()
    }
    pub fn sync(
        &mut self,
        now: Instant,
        version: i16,
        req: &SyncGroupRequest,
    ) -> Step<SyncGroupResponse> {
        unimplemented!()
    }
    pub fn poll_sync(&mut self, now: Instant, ticket: &Ticket) -> Option<SyncGroupResponse> {
        unimplemented!()
    }
    pub fn heartbeat(
        &mut self,
        now: Instant,
        version: i16,
        req: &HeartbeatRequest,
    ) -> HeartbeatResponse {
        unimplemented!()
    }
    pub fn leave(
        &mut self,
        now: Instant,
        version: i16,
        req: &LeaveGroupRequest,
    ) -> LeaveGroupResponse {
        unimplemented!()
    }
    pub fn commit(
        &mut self,
        now: Instant,
        version: i16,
        req: &OffsetCommitRequest,
        partition_exists: &dyn Fn(&str, i32) -> bool,
    ) -> OffsetCommitResponse {
        unimplemented!()
    }
    pub fn fetch_offsets(
        &mut self,
        now: Instant,
        version: i16,
        req: &OffsetFetchRequest,
    ) -> OffsetFetchResponse {
        unimplemented!()
    }
    pub fn tick(&mut self, now: Instant) {
        unimplemented!()
    }
    pub fn next_deadline(&self) -> Option<Instant> {
        unimplemented!()
    }
    pub fn snapshot(&self, group_id: &str) -> Option<GroupSnapshot> {
        unimplemented!()
    }
    pub fn committed(&self, group_id: &str, topic: &str, partition: i32) -> Option<i64> {
        unimplemented!()
    }
}
