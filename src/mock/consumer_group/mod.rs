//! The coordinator of KIP-848 consumer groups (`group.protocol=consumer`):
//! ConsumerGroupHeartbeat with a server-side assignor (`uniform`, `range`)
//! and epochs, after the consumer-group path of Kafka's
//! `GroupMetadataManager.consumerGroupHeartbeat` and its
//! `CurrentAssignmentBuilder`, reduced to what a test cluster needs:
//!
//! - the *group epoch* moves whenever membership or subscriptions change;
//!   the *target assignment* is then recomputed by the assignor and stamped
//!   with that epoch;
//! - each member moves towards its target: partitions it must give up are
//!   taken out of its assignment first and it stays at its epoch until it
//!   acknowledges (heartbeats without them); then it gets the target
//!   minus partitions other members still hold ("unreleased"), and the
//!   target's epoch;
//! - a member heartbeating with an epoch the coordinator does not expect is
//!   fenced (FENCED_MEMBER_EPOCH); an unknown member id is UNKNOWN_MEMBER_ID;
//! - epoch -1 leaves; -2 (static members) leaves for now: the assignment
//!   waits for the same `group.instance.id` until the session times out,
//!   and the returning instance takes it over without a rebalance;
//! - sessions are checked whenever a member of the group heartbeats;
//! - regex subscriptions (SubscribedTopicRegex, v1): a regex no member had
//!   before is compiled (INVALID_REGULAR_EXPRESSION when it does not) and
//!   resolved at once against every topic, whole names only, as Kafka's
//!   `TopicRegexResolver` does with RE2/J (here the `regex` crate, RE2
//!   syntax); afterwards the group's regexes are resolved again when a
//!   member heartbeats, the last resolution is older than the refresh
//!   interval (`group.consumer.regex.refresh.interval.ms`; Kafka 4.0 waits
//!   10 s between refreshes) and the cluster's topics changed since it;
//! - the *subscription metadata* (each subscribed topic's id and partition
//!   count, by name or through a regex) is computed at every heartbeat: a
//!   change (a subscribed topic created, grown or deleted) moves the group
//!   epoch and the target, as Kafka's `updateSubscriptionMetadata` does.
//!
//! Not modelled: rack-aware assignment, rebalance timeouts for members
//! that never revoke, authorization of the topics a regex resolves to.
//!
//! `api/consumer_group_heartbeat.rs` hands each heartbeat here with the
//! cluster's topics as they are; `api/offset_commit.rs` checks a member's
//! commit with [`ConsumerGroups::validate_commit`]. This file holds the
//! groups and answers the heartbeat; `assignment.rs` computes the target
//! (the assignors, regex resolution) and moves members towards it.

mod assignment;

use crate::group::TopicPattern;
use crate::protocol::messages::consumer_group_heartbeat::{
    Assignment, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, TopicPartitions,
};
use crate::protocol::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Partitions by topic id.
type Owned = BTreeMap<[u8; 16], BTreeSet<i32>>;

/// What a heartbeat needs to know of the cluster's topics: name to id and
/// partition count.
pub(crate) type TopicView = BTreeMap<String, ([u8; 16], i32)>;

/// The assignor used when a member names none (Kafka's default).
const DEFAULT_ASSIGNOR: &str = "uniform";

/// One member of a consumer group.
#[derive(Debug, Clone)]
struct Member {
    id: String,
    instance_id: Option<String>,
    epoch: i32,
    previous_epoch: i32,
    topics: BTreeSet<String>,
    /// The regex subscribed to (never empty: Kafka reads "" as none).
    regex: Option<String>,
    assignor: Option<String>,
    /// What the member may own now.
    assigned: Owned,
    /// What it still owns but must give up.
    revoking: Owned,
    session_deadline: Instant,
    /// Left with epoch -2: kept for its instance id until the deadline.
    left_static: bool,
}

/// One consumer group (Kafka's `ConsumerGroup`): its epoch, its target
/// assignment (and the epoch it was computed at), its members and what
/// their subscriptions resolve to.
#[derive(Debug, Default)]
struct Group {
    epoch: i32,
    target_epoch: i32,
    target: BTreeMap<String, Owned>,
    members: BTreeMap<String, Member>,
    /// The topics seen at the last heartbeat, for recomputing the target
    /// when a session expires.
    last_view: TopicView,
    /// Each regex of the group's members, resolved to topic names.
    resolved: BTreeMap<String, BTreeSet<String>>,
    /// The topics of the cluster at the last resolution, and when it was.
    resolved_against: BTreeSet<String>,
    last_resolution: Option<Instant>,
    /// The subscribed topics' ids and partition counts at the last
    /// heartbeat.
    subscription_metadata: TopicView,
}

/// Every consumer group of a mock cluster.
#[derive(Debug)]
pub(crate) struct ConsumerGroups {
    groups: BTreeMap<String, Group>,
    /// `group.consumer.heartbeat.interval.ms` (Kafka: 5 s).
    pub heartbeat_interval: Duration,
    /// `group.consumer.session.timeout.ms` (Kafka: 45 s).
    pub session_timeout: Duration,
    /// The least time between two resolutions of a group's regexes for
    /// new topics (Kafka 4.0: 10 s; 4.1's
    /// `group.consumer.regex.refresh.interval.ms`, 10 minutes by default).
    pub regex_refresh_interval: Duration,
}

impl Default for ConsumerGroups {
    fn default() -> Self {
        ConsumerGroups {
            groups: BTreeMap::new(),
            heartbeat_interval: Duration::from_secs(5),
            session_timeout: Duration::from_secs(45),
            regex_refresh_interval: Duration::from_secs(10),
        }
    }
}

/// A refusal: the error code, and the message to send with it (the code's
/// name when `None`).
struct Refusal(ErrorCode, Option<String>);

impl From<ErrorCode> for Refusal {
    fn from(code: ErrorCode) -> Refusal {
        Refusal(code, None)
    }
}

impl ConsumerGroups {
    /// Whether `group` is a consumer group here.
    pub fn contains(&self, group: &str) -> bool {
        self.groups.contains_key(group)
    }

    /// The partitions (by topic id) member `member` of `group` may own.
    #[cfg(test)]
    fn assigned(&self, group: &str, member: &str) -> Owned {
        self.groups
            .get(group)
            .and_then(|g| g.members.get(member))
            .map(|m| m.assigned.clone())
            .unwrap_or_default()
    }

    /// The check of an OffsetCommit by a member of a consumer group
    /// (Kafka's `ConsumerGroup.validateOffsetCommit`): the member must
    /// exist and commit with its current epoch.
    pub fn validate_commit(&self, group: &str, member: &str, epoch: i32) -> Result<(), ErrorCode> {
        let Some(g) = self.groups.get(group) else {
            return Ok(());
        };
        if epoch < 0 && member.is_empty() {
            // A "simple" commit (manual assignment) into a group's offsets.
            return Ok(());
        }
        let m = g
            .members
            .get(member)
            .filter(|m| !m.left_static)
            .ok_or(ErrorCode::UnknownMemberId)?;
        if epoch > m.epoch {
            Err(ErrorCode::FencedMemberEpoch)
        } else if epoch < m.epoch {
            Err(ErrorCode::StaleMemberEpoch)
        } else {
            Ok(())
        }
    }

    /// Answers a ConsumerGroupHeartbeat.
    pub fn heartbeat(
        &mut self,
        now: Instant,
        version: i16,
        req: &ConsumerGroupHeartbeatRequest,
        topics: &TopicView,
    ) -> ConsumerGroupHeartbeatResponse {
        match self.handle(now, version, req, topics) {
            Ok(r) => r,
            Err(Refusal(code, message)) => ConsumerGroupHeartbeatResponse {
                error_code: code.code(),
                error_message: Some(message.unwrap_or_else(|| code.to_string())),
                member_epoch: -1,
                ..ConsumerGroupHeartbeatResponse::default()
            },
        }
    }

    /// A heartbeat, step by step: the request checked, the sessions that
    /// ended expired, then a leave, or a join or a known member's epoch
    /// checked; its subscription taken; a new group epoch and target when
    /// anything the target depends on changed; the revocations it
    /// acknowledges; and its answer, a step towards its target.
    fn handle(
        &mut self,
        now: Instant,
        version: i16,
        req: &ConsumerGroupHeartbeatRequest,
        topics: &TopicView,
    ) -> Result<ConsumerGroupHeartbeatResponse, Refusal> {
        let regex = check_request(version, req)?;
        let session_deadline = now + self.session_timeout;
        let (refresh, heartbeat_interval) = (self.regex_refresh_interval, self.heartbeat_interval);
        let group = self.groups.entry(req.group_id.clone()).or_default();
        group.expire(now);
        let epoch = req.member_epoch;
        if epoch < 0 {
            return group.leave(req, topics);
        }
        let member_id = if req.member_id.is_empty() {
            // v0: the coordinator names new members.
            format!("member-{}-{}", group.members.len() + 1, group.epoch + 1)
        } else {
            req.member_id.clone()
        };
        let mut changed = if epoch == 0 {
            group.join(&member_id, req, session_deadline)?
        } else {
            group.check_epoch(&member_id, req)?;
            false
        };
        changed |= group.take_subscription(&member_id, req, regex, session_deadline);
        changed |= group.resolve_regexes(now, topics, refresh);
        changed |= group.update_subscription_metadata(topics);
        if changed {
            group.epoch += 1;
            group.compute_target(topics);
        }
        // The member acknowledges revocations by leaving them out of what
        // it reports owning.
        if let Some(tps) = &req.topic_partitions {
            let reported = owned(tps);
            let m = group.members.get_mut(&member_id).expect("present");
            m.revoking.retain(|t, ps| {
                ps.retain(|p| reported.get(t).is_some_and(|r| r.contains(p)));
                !ps.is_empty()
            });
        }
        Ok(group.answer(&member_id, req, heartbeat_interval))
    }
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`, the assignor
/// and the regex checked: the regex subscribed to, if any ("" is none:
/// librdkafka sends it beside topic names).
fn check_request(
    version: i16,
    req: &ConsumerGroupHeartbeatRequest,
) -> Result<Option<String>, Refusal> {
    let epoch = req.member_epoch;
    if req.group_id.is_empty()
        || (version >= 1 && req.member_id.is_empty())
        || epoch < -2
        || (epoch == 0
            && (req.rebalance_timeout_ms < 0
                || (req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none())
                || req.topic_partitions.as_ref().is_none_or(|t| !t.is_empty())))
        || (epoch == -2 && req.instance_id.is_none())
    {
        return Err(ErrorCode::InvalidRequest.into());
    }
    if let Some(a) = &req.server_assignor {
        if a != "uniform" && a != "range" {
            return Err(ErrorCode::UnsupportedAssignor.into());
        }
    }
    let regex = req.subscribed_topic_regex.clone().filter(|r| !r.is_empty());
    if let Some(r) = &regex {
        // Kafka's throwIfRegularExpressionIsInvalid (it compiles a regex no
        // member of the group had; compiling it again is the same answer).
        if let Err(e) = TopicPattern::new(r) {
            return Err(Refusal(
                ErrorCode::InvalidRegularExpression,
                Some(format!(
                    "SubscribedTopicRegex `{r}` is not a valid regular expression: {}",
                    e.reason
                )),
            ));
        }
    }
    Ok(regex)
}

/// The partitions a member reports owning, by topic id.
fn owned(tps: &[TopicPartitions]) -> Owned {
    let mut out = Owned::new();
    for t in tps {
        out.entry(t.topic_id)
            .or_default()
            .extend(t.partitions.iter().copied());
    }
    out
}

impl Group {
    /// A member leaving: for good (epoch -1: its partitions go to the
    /// others), or for now (epoch -2, KIP-848: a static member's
    /// assignment waits for its instance until the session ends).
    fn leave(
        &mut self,
        req: &ConsumerGroupHeartbeatRequest,
        topics: &TopicView,
    ) -> Result<ConsumerGroupHeartbeatResponse, Refusal> {
        let Some(m) = self.members.get_mut(&req.member_id) else {
            return Err(ErrorCode::UnknownMemberId.into());
        };
        if req.member_epoch == -2 {
            m.left_static = true;
        } else {
            self.members.remove(&req.member_id);
            self.epoch += 1;
            self.forget_unused_regexes();
            self.compute_target(topics);
        }
        Ok(ConsumerGroupHeartbeatResponse {
            member_id: Some(req.member_id.clone()),
            member_epoch: req.member_epoch,
            ..ConsumerGroupHeartbeatResponse::default()
        })
    }

    /// A member joining (epoch 0): new, a static instance returning to its
    /// previous member's assignment and epoch (no rebalance), or a member
    /// starting over after it was fenced. Returns whether the group's
    /// membership changed.
    fn join(
        &mut self,
        member_id: &str,
        req: &ConsumerGroupHeartbeatRequest,
        session_deadline: Instant,
    ) -> Result<bool, Refusal> {
        let static_previous = req.instance_id.as_ref().and_then(|instance| {
            self.members
                .values()
                .find(|m| m.instance_id.as_ref() == Some(instance))
                .map(|m| (m.id.clone(), m.left_static))
        });
        match static_previous {
            Some((previous, false)) if previous != member_id => {
                return Err(ErrorCode::UnreleasedInstanceId.into());
            }
            Some((previous, _)) => {
                // The instance returns: it takes over the previous
                // member's assignment and epoch, no rebalance.
                let mut m = self.members.remove(&previous).expect("found above");
                m.id = member_id.to_owned();
                m.left_static = false;
                if let Some(t) = self.target.remove(&previous) {
                    self.target.insert(member_id.to_owned(), t);
                }
                self.members.insert(member_id.to_owned(), m);
            }
            None => {}
        }
        let fresh = !self.members.contains_key(member_id);
        let m = self
            .members
            .entry(member_id.to_owned())
            .or_insert_with(|| Member {
                id: member_id.to_owned(),
                instance_id: req.instance_id.clone(),
                epoch: 0,
                previous_epoch: -1,
                topics: BTreeSet::new(),
                regex: None,
                assignor: None,
                assigned: Owned::new(),
                revoking: Owned::new(),
                session_deadline,
                left_static: false,
            });
        if fresh {
            return Ok(true);
        }
        if m.instance_id.is_none() || m.epoch == 0 {
            // A member rejoining at epoch 0 (after it was fenced) starts
            // over.
            m.assigned.clear();
            m.revoking.clear();
            m.epoch = 0;
            return Ok(true);
        }
        Ok(false)
    }

    /// Kafka's `throwIfMemberEpochIsInvalid` for a known member: an older
    /// epoch is fine only while the member's last answer may not have
    /// arrived (its previous epoch, owning nothing it was not given).
    fn check_epoch(
        &self,
        member_id: &str,
        req: &ConsumerGroupHeartbeatRequest,
    ) -> Result<(), Refusal> {
        let epoch = req.member_epoch;
        let m = self
            .members
            .get(member_id)
            .filter(|m| !m.left_static)
            .ok_or(Refusal::from(ErrorCode::UnknownMemberId))?;
        let owned_ok = req.topic_partitions.as_ref().is_none_or(|tps| {
            owned(tps).iter().all(|(t, ps)| {
                ps.iter()
                    .all(|p| m.assigned.get(t).is_some_and(|a| a.contains(p)))
            })
        });
        if epoch > m.epoch || (epoch < m.epoch && !(epoch == m.previous_epoch && owned_ok)) {
            return Err(ErrorCode::FencedMemberEpoch.into());
        }
        Ok(())
    }

    /// Takes what the heartbeat says of the member's subscription (topic
    /// names, regex, assignor, instance) and renews its session; returns
    /// whether the subscription changed.
    fn take_subscription(
        &mut self,
        member_id: &str,
        req: &ConsumerGroupHeartbeatRequest,
        regex: Option<String>,
        session_deadline: Instant,
    ) -> bool {
        let mut changed = false;
        let m = self.members.get_mut(member_id).expect("present");
        m.session_deadline = session_deadline;
        if let Some(names) = &req.subscribed_topic_names {
            let names: BTreeSet<String> = names.iter().cloned().collect();
            if names != m.topics {
                m.topics = names;
                changed = true;
            }
        }
        // Names and regex come together (both null when unchanged).
        if req.subscribed_topic_regex.is_some() && regex != m.regex {
            m.regex = regex;
            changed = true;
        }
        if let Some(a) = &req.server_assignor {
            m.assignor = Some(a.clone());
        }
        if let Some(instance) = &req.instance_id {
            m.instance_id = Some(instance.clone());
        }
        changed
    }

    /// The member's answer: a step towards its target, with its
    /// assignment when it changed, on a join, or when the member reported
    /// what it owns.
    fn answer(
        &mut self,
        member_id: &str,
        req: &ConsumerGroupHeartbeatRequest,
        heartbeat_interval: Duration,
    ) -> ConsumerGroupHeartbeatResponse {
        let before = self.members[member_id].assigned.clone();
        self.reconcile(member_id);
        let m = &self.members[member_id];
        let send_assignment =
            m.assigned != before || req.member_epoch == 0 || req.topic_partitions.is_some();
        ConsumerGroupHeartbeatResponse {
            member_id: Some(member_id.to_owned()),
            member_epoch: m.epoch,
            heartbeat_interval_ms: i32::try_from(heartbeat_interval.as_millis())
                .unwrap_or(i32::MAX),
            assignment: send_assignment.then(|| Assignment {
                topic_partitions: m
                    .assigned
                    .iter()
                    .map(|(id, ps)| TopicPartitions {
                        topic_id: *id,
                        partitions: ps.iter().copied().collect(),
                        ..TopicPartitions::default()
                    })
                    .collect(),
                ..Assignment::default()
            }),
            ..ConsumerGroupHeartbeatResponse::default()
        }
    }
}

#[cfg(test)]
mod tests;
