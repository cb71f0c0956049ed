//! The group coordinator of the mock cluster: Kafka's classic group protocol
//! (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and the committed offsets
//! (OffsetCommit, OffsetFetch), as a pure state machine.
//!
//! Modelled on Apache Kafka's classic coordinator
//! (`group-coordinator/.../GroupMetadataManager.java`, `classic/ClassicGroup.java`;
//! before 3.x `core/.../GroupCoordinator.scala`), KIP-62 (rebalance timeout),
//! KIP-134 (initial rebalance delay), KIP-345 (static membership), KIP-394
//! (MEMBER_ID_REQUIRED), KIP-559 (protocol type and name in SyncGroup),
//! KIP-814 (skip assignment).
//!
//! Nothing here touches a socket, a thread or the clock: every input carries
//! `now`, and [`Groups::next_deadline`] says when [`Groups::tick`] must run.
//!
//! # Call order (for the server around it)
//!
//! 1. A request arrives: call [`Groups::join`] / [`Groups::sync`] (or the
//!    one-shot [`Groups::heartbeat`], [`Groups::leave`], [`Groups::commit`],
//!    [`Groups::fetch_offsets`]).
//! 2. [`Step::Wait`] means the answer depends on other members: after every
//!    later mutating call (any of the above, or [`Groups::tick`]) ask again
//!    with [`Groups::poll_join`] / [`Groups::poll_sync`] until `Some`. Each
//!    ticket is answered exactly once; [`Groups::cancel`] drops a ticket whose
//!    connection went away.
//! 3. Call [`Groups::tick`] at [`Groups::next_deadline`].
//!
//! # Group states
//!
//! ```text
//!                 first JoinGroup
//!   +-------+   (initial delay)    +--------------------+  all joined, or the
//!   | Empty | -------------------> | PreparingRebalance |  rebalance timeout   +---------------------+
//!   +-------+ <------------------- |                    | -------------------> | CompletingRebalance |
//!       ^      join completes with +--------------------+                      +---------------------+
//!       |      no member left          ^          ^     join / leave / expiry /          |
//!       |                              |          +--- changed metadata / missing sync --+
//!       |                              |                                                 | leader's SyncGroup
//!       |                              | join (new or changed member, leader rejoin),    v
//!       |                              | leave, session expiry, missing SyncGroup    +--------+
//!       |                              +---------------------------------------------| Stable |
//!       |                                                                            +--------+
//!   (the group only becomes Empty through a completed join phase)
//! ```
//!
//! # Files
//!
//! - `mod.rs`: [`Groups`], every group of the cluster, and the types the
//!   rest of the mock sees ([`Step`], [`Ticket`], the snapshots);
//! - `rebalance.rs`: one group's state machine (Kafka's `ClassicGroup`);
//! - `member.rs`: one member, and the fields a JoinGroup sets;
//! - `join.rs`, `sync.rs`, `heartbeat.rs`, `leave.rs`: one request each;
//! - `offsets.rs`: OffsetCommit and OffsetFetch, and the offsets kept.
//!
//! The request handlers `api/join_group.rs`, `api/sync_group.rs`,
//! `api/heartbeat.rs`, `api/leave_group.rs`, `api/offset_commit.rs` and
//! `api/offset_fetch.rs` hand each request to [`Groups`] (the consumer's
//! unit tests in `consumer/pair.rs` call it directly too); `respond.rs`
//! answers a [`Step::Done`] at once and polls a [`Step::Wait`] until its
//! rebalance step is over; the server's timer thread runs
//! [`Groups::tick`] at [`Groups::next_deadline`].

mod heartbeat;
mod join;
mod leave;
mod member;
mod offsets;
mod rebalance;
mod sync;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::protocol::messages::join_group::JoinGroupResponse;
use crate::protocol::messages::sync_group::SyncGroupResponse;
use rebalance::Group;

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
#[derive(Debug)]
pub(crate) enum Step<R> {
    /// Answered now.
    Done(R),
    /// Waits; ask again with [`Groups::poll_join`] / [`Groups::poll_sync`].
    Wait(Ticket),
}

/// A request waiting for a rebalance step.
#[derive(Debug, Clone)]
pub(crate) struct Ticket {
    id: u64,
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
    settings: GroupSettings,
    groups: BTreeMap<String, Group>,
    out: Outbox,
    /// Feeds ticket ids and member ids; never reused.
    counter: u64,
}

/// Answers to parked requests, by ticket id, until polled.
#[derive(Default)]
struct Outbox {
    joins: HashMap<u64, JoinGroupResponse>,
    syncs: HashMap<u64, SyncGroupResponse>,
}

/// A parked JoinGroup or SyncGroup: where its answer goes and the version it
/// must be encodable at.
#[derive(Debug, Clone, Copy)]
struct Waiter {
    ticket: u64,
    version: i16,
}

impl Groups {
    /// A coordinator with no groups.
    pub fn new(settings: GroupSettings) -> Self {
        Groups {
            settings,
            groups: BTreeMap::new(),
            out: Outbox::default(),
            counter: 0,
        }
    }

    /// A number never given before, for a ticket or a member id.
    fn next_id(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// `{prefix}-{uuid-like}`, the prefix being the group instance id of a
    /// static member, else the client id (Kafka's `generateMemberId`). The
    /// suffix is a bijective mix of a counter, so ids never repeat.
    fn new_member_id(&mut self, prefix: &str) -> String {
        fn mix(mut z: u64) -> u64 {
            // splitmix64's finaliser: a bijection on u64.
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        let n = self.next_id();
        let a = mix(n);
        let b = mix(n ^ 0x9e37_79b9_7f4a_7c15);
        format!(
            "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }

    /// The answer to a parked JoinGroup, once there is one.
    pub fn poll_join(&mut self, _now: Instant, ticket: &Ticket) -> Option<JoinGroupResponse> {
        self.out.joins.remove(&ticket.id)
    }

    /// The answer to a parked SyncGroup, once there is one.
    pub fn poll_sync(&mut self, _now: Instant, ticket: &Ticket) -> Option<SyncGroupResponse> {
        self.out.syncs.remove(&ticket.id)
    }

    /// Forgets a parked request whose connection is gone: its answer, if
    /// any, is dropped, and the member no longer counts as waiting (so its
    /// session can expire).
    pub fn cancel(&mut self, ticket: &Ticket) {
        self.out.joins.remove(&ticket.id);
        self.out.syncs.remove(&ticket.id);
        for g in self.groups.values_mut() {
            for m in &mut g.members {
                if m.join.is_some_and(|w| w.ticket == ticket.id) {
                    m.join = None;
                }
                if m.sync.is_some_and(|w| w.ticket == ticket.id) {
                    m.sync = None;
                }
            }
        }
    }

    /// Runs every timer due at `now`: the end of an initial delay or of a
    /// rebalance timeout, expired sessions, unused MEMBER_ID_REQUIRED ids,
    /// members that never sent SyncGroup.
    pub fn tick(&mut self, now: Instant) {
        for g in self.groups.values_mut() {
            g.tick(&mut self.out, now, &self.settings);
        }
    }

    /// When [`Groups::tick`] must next run, if ever.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.groups.values().filter_map(Group::next_deadline).min()
    }

    /// The group as it stands, if the coordinator knows it.
    pub fn snapshot(&self, group_id: &str) -> Option<GroupSnapshot> {
        self.groups.get(group_id).map(Group::snapshot)
    }
}

#[cfg(test)]
mod tests;
