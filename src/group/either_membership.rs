//! A group membership of either protocol ([`GroupMembership`]): the
//! consumer drives one membership, classic (JoinGroup/SyncGroup/Heartbeat,
//! client-side assignors) or consumer (KIP-848: ConsumerGroupHeartbeat,
//! server-side assignors), through the same calls. Both machines are sans-IO; this enum only dispatches and
//! adapts their inputs (the classic leader needs partition counts, the
//! consumer member topic ids).

use super::consumer_membership::{ConsumerMembership, HeartbeatBody};
use super::membership::{
    GroupEvent, GroupFailure, GroupRequestKind, MemberState, Membership, ResponseOutcome,
};
use super::{GroupProtocol, TopicPartition, TopicPattern};
use crate::cluster::{Metadata, RequestBody, RequestError, Response};
use crate::protocol::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// A group membership of either protocol.
#[derive(Debug)]
pub enum GroupMembership {
    /// `group.protocol=classic`.
    Classic(Membership),
    /// `group.protocol=consumer` (KIP-848).
    Consumer(ConsumerMembership),
}

impl GroupMembership {
    /// The protocol.
    pub fn protocol(&self) -> GroupProtocol {
        match self {
            GroupMembership::Classic(_) => GroupProtocol::Classic,
            GroupMembership::Consumer(_) => GroupProtocol::Consumer,
        }
    }

    /// `group.id`.
    pub fn group_id(&self) -> &str {
        match self {
            GroupMembership::Classic(m) => m.group_id(),
            GroupMembership::Consumer(m) => m.group_id(),
        }
    }

    /// `group.instance.id`.
    pub fn group_instance_id(&self) -> Option<&str> {
        match self {
            GroupMembership::Classic(m) => m.group_instance_id(),
            GroupMembership::Consumer(m) => m.group_instance_id(),
        }
    }

    /// The member id.
    pub fn member_id(&self) -> &str {
        match self {
            GroupMembership::Classic(m) => m.member_id(),
            GroupMembership::Consumer(m) => m.member_id(),
        }
    }

    /// Where the member stands, in one word: `unjoined`, `joining`,
    /// `awaiting_metadata`, `syncing`, `reconciling`, `stable` or `failed`.
    pub fn state_name(&self) -> &'static str {
        use crate::group::consumer_membership::ConsumerMemberState as C;
        use crate::group::membership::MemberState as M;
        match self {
            GroupMembership::Classic(m) => match m.state() {
                M::Unjoined => "unjoined",
                M::Joining => "joining",
                M::AwaitingMetadata(_) => "awaiting_metadata",
                M::Syncing => "syncing",
                M::Stable => "stable",
                M::Failed(_) => "failed",
            },
            GroupMembership::Consumer(m) => match m.state() {
                C::Unjoined => "unjoined",
                C::Joining => "joining",
                C::Stable => "stable",
                C::Reconciling => "reconciling",
                C::Failed(_) => "failed",
            },
        }
    }

    /// The generation (classic; -1 out of a stable group) or the member
    /// epoch (consumer; 0 before joining).
    pub fn generation_or_epoch(&self) -> i32 {
        match self {
            GroupMembership::Classic(m) => m.generation(),
            GroupMembership::Consumer(m) => m.member_epoch(),
        }
    }

    /// Sets the subscribed topics.
    pub fn subscribe(&mut self, topics: BTreeSet<String>) {
        match self {
            GroupMembership::Classic(m) => m.subscribe(topics),
            GroupMembership::Consumer(m) => m.subscribe(topics),
        }
    }

    /// Subscribes to the topics `pattern` matches. The classic member
    /// matches it against `metadata` (every topic; internal topics left
    /// out when `exclude_internal`), as the Java client does, and
    /// subscribes to those names: a changed set rejoins the group. The
    /// consumer member (KIP-848) sends the pattern as SubscribedTopicRegex
    /// and the coordinator resolves it. Returns the topics the classic
    /// member subscribes to now (`None` for the consumer member). Call it
    /// again whenever the metadata changes.
    pub fn subscribe_pattern(
        &mut self,
        pattern: &TopicPattern,
        metadata: &Metadata,
        exclude_internal: bool,
    ) -> Option<BTreeSet<String>> {
        match self {
            GroupMembership::Classic(m) => {
                let topics = pattern.matching_topics(metadata, exclude_internal);
                m.subscribe(topics.clone());
                Some(topics)
            }
            GroupMembership::Consumer(m) => {
                if m.regex() != Some(pattern.as_str()) {
                    m.subscribe_regex(pattern.as_str().to_owned());
                }
                None
            }
        }
    }

    /// The subscribed topic names (the classic member's matches, under a
    /// pattern; empty for a KIP-848 regex subscription).
    pub fn topics(&self) -> &BTreeSet<String> {
        match self {
            GroupMembership::Classic(m) => m.topics(),
            GroupMembership::Consumer(m) => m.topics(),
        }
    }

    /// The group's view may be stale (an OffsetCommit was refused for the
    /// generation or epoch): the classic member joins again; the consumer
    /// member heartbeats at once, and the answer brings the current epoch
    /// (KIP-848: the coordinator, not the member, starts rebalances).
    pub fn request_rejoin(&mut self, reason: &'static str) {
        match self {
            GroupMembership::Classic(m) => m.request_rejoin(reason),
            GroupMembership::Consumer(m) => m.heartbeat_now(),
        }
    }

    /// JoinGroup requests sent, by reason (the classic protocol; none under
    /// KIP-848, whose member joins by heartbeat).
    pub fn joins(&self) -> BTreeMap<String, u64> {
        match self {
            GroupMembership::Classic(m) => m
                .joins()
                .iter()
                .map(|(reason, n)| ((*reason).to_owned(), *n))
                .collect(),
            GroupMembership::Consumer(_) => BTreeMap::new(),
        }
    }

    /// The partitions this member owns.
    pub fn assignment(&self) -> &BTreeSet<TopicPartition> {
        match self {
            GroupMembership::Classic(m) => m.assignment(),
            GroupMembership::Consumer(m) => m.assignment(),
        }
    }

    /// Whether the member is in the group, so that offsets can be
    /// committed with its generation (classic) or member epoch (consumer).
    pub fn is_stable(&self) -> bool {
        match self {
            GroupMembership::Classic(m) => m.is_stable(),
            GroupMembership::Consumer(m) => m.is_stable(),
        }
    }

    /// The generation (classic) or member epoch (consumer) and the member
    /// id that OffsetCommit carries.
    pub fn commit_generation(&self) -> Option<(i32, &str)> {
        match self {
            GroupMembership::Classic(m) => m.commit_generation(),
            GroupMembership::Consumer(m) => m.commit_generation(),
        }
    }

    /// The topics whose metadata the classic leader waits for, if any.
    pub fn awaiting_metadata(&self) -> Option<&BTreeSet<String>> {
        match self {
            GroupMembership::Classic(m) => match m.state() {
                MemberState::AwaitingMetadata(topics) => Some(topics),
                _ => None,
            },
            GroupMembership::Consumer(_) => None,
        }
    }

    /// The topic ids of the assignment the metadata does not know (the
    /// consumer member: KIP-848 assigns by topic id), to look up by id.
    pub fn unresolved_topic_ids(&self) -> BTreeSet<[u8; 16]> {
        match self {
            GroupMembership::Classic(_) => BTreeSet::new(),
            GroupMembership::Consumer(m) => m.unresolved_topic_ids().clone(),
        }
    }

    /// The next assignment change.
    pub fn poll_event(&mut self) -> Option<GroupEvent> {
        match self {
            GroupMembership::Classic(m) => m.poll_event(),
            GroupMembership::Consumer(m) => m.poll_event(),
        }
    }

    /// Why the member stopped, once.
    pub fn take_failure(&mut self) -> Option<GroupFailure> {
        match self {
            GroupMembership::Classic(m) => m.take_failure(),
            GroupMembership::Consumer(m) => m.take_failure(),
        }
    }

    /// When the member may have something to send.
    pub fn next_deadline(&self) -> Option<Instant> {
        match self {
            GroupMembership::Classic(m) => m.next_deadline(),
            GroupMembership::Consumer(m) => m.next_deadline(),
        }
    }

    /// The next group request for the coordinator, given what the metadata
    /// knows.
    pub fn poll_request(
        &mut self,
        now: Instant,
        metadata: &Metadata,
    ) -> Option<(GroupRequestKind, Box<dyn RequestBody>)> {
        match self {
            GroupMembership::Classic(m) => {
                let counts: BTreeMap<String, i32> = metadata
                    .topics
                    .iter()
                    .filter(|(_, t)| t.error == ErrorCode::None)
                    .map(|(name, t)| (name.clone(), t.partitions.len() as i32))
                    .collect();
                m.poll_request(now, &counts)
            }
            GroupMembership::Consumer(m) => {
                let names: BTreeMap<[u8; 16], String> = metadata
                    .topics
                    .iter()
                    .filter(|(_, t)| t.error == ErrorCode::None && t.topic_id != [0; 16])
                    .map(|(name, t)| (t.topic_id, name.clone()))
                    .collect();
                m.poll_heartbeat(now, &names).map(|r| {
                    (
                        GroupRequestKind::ConsumerHeartbeat,
                        Box::new(HeartbeatBody(r)) as Box<dyn RequestBody>,
                    )
                })
            }
        }
    }

    /// Reads the answer (or failure) of a request of kind `kind`.
    pub fn handle_response(
        &mut self,
        now: Instant,
        kind: GroupRequestKind,
        result: Result<Response, RequestError>,
    ) -> ResponseOutcome {
        match self {
            GroupMembership::Classic(m) => m.handle_response(now, kind, result),
            // The answer to a leave is of no interest: the member is gone
            // either way.
            GroupMembership::Consumer(_) if kind == GroupRequestKind::Leave => {
                ResponseOutcome::default()
            }
            GroupMembership::Consumer(m) => m.handle_response(now, result),
        }
    }

    /// Leaves the group; returns the request that says so, if one is due.
    pub fn leave(&mut self, reason: &str) -> Option<Box<dyn RequestBody>> {
        match self {
            GroupMembership::Classic(m) => m.leave(reason),
            GroupMembership::Consumer(m) => m
                .leave()
                .map(|r| Box::new(HeartbeatBody(r)) as Box<dyn RequestBody>),
        }
    }
}
