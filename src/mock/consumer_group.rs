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

use crate::group::TopicPattern;
use crate::protocol::messages::consumer_group_heartbeat::{
    Assignment, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, TopicPartitions,
};
use crate::protocol::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

type Owned = BTreeMap<[u8; 16], BTreeSet<i32>>;

/// What a heartbeat needs to know of the cluster's topics: name to id and
/// partition count.
pub(crate) type TopicView = BTreeMap<String, ([u8; 16], i32)>;

/// The assignor used when a member names none (Kafka's default).
const DEFAULT_ASSIGNOR: &str = "uniform";

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

    fn handle(
        &mut self,
        now: Instant,
        version: i16,
        req: &ConsumerGroupHeartbeatRequest,
        topics: &TopicView,
    ) -> Result<ConsumerGroupHeartbeatResponse, Refusal> {
        // Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid.
        let epoch = req.member_epoch;
        if req.group_id.is_empty()
            || (version >= 1 && req.member_id.is_empty())
            || epoch < -2
            || (epoch == 0
                && (req.rebalance_timeout_ms < 0
                    || (req.subscribed_topic_names.is_none()
                        && req.subscribed_topic_regex.is_none())
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
        // "" is no regex (librdkafka sends it beside topic names).
        let regex = req.subscribed_topic_regex.clone().filter(|r| !r.is_empty());
        if let Some(r) = &regex {
            // Kafka's throwIfRegularExpressionIsInvalid (it compiles a
            // regex no member of the group had; compiling it again is the
            // same answer).
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
        let session = self.session_timeout;
        let group = self.groups.entry(req.group_id.clone()).or_default();
        group.expire(now);
        if epoch < 0 {
            let Some(m) = group.members.get_mut(&req.member_id) else {
                return Err(ErrorCode::UnknownMemberId.into());
            };
            if epoch == -2 {
                // KIP-848: a static member leaving for now keeps its
                // assignment for its instance until the session ends.
                m.left_static = true;
            } else {
                group.members.remove(&req.member_id);
                group.epoch += 1;
                group.forget_unused_regexes();
                group.compute_target(topics);
            }
            return Ok(ConsumerGroupHeartbeatResponse {
                member_id: Some(req.member_id.clone()),
                member_epoch: epoch,
                ..ConsumerGroupHeartbeatResponse::default()
            });
        }
        let member_id = if req.member_id.is_empty() {
            // v0: the coordinator names new members.
            format!("member-{}-{}", group.members.len() + 1, group.epoch + 1)
        } else {
            req.member_id.clone()
        };
        let mut changed = false;
        if epoch == 0 {
            let static_previous = req.instance_id.as_ref().and_then(|instance| {
                group
                    .members
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
                    let mut m = group.members.remove(&previous).expect("found above");
                    m.id = member_id.clone();
                    m.left_static = false;
                    if let Some(t) = group.target.remove(&previous) {
                        group.target.insert(member_id.clone(), t);
                    }
                    group.members.insert(member_id.clone(), m);
                }
                None => {}
            }
            let fresh = !group.members.contains_key(&member_id);
            let m = group
                .members
                .entry(member_id.clone())
                .or_insert_with(|| Member {
                    id: member_id.clone(),
                    instance_id: req.instance_id.clone(),
                    epoch: 0,
                    previous_epoch: -1,
                    topics: BTreeSet::new(),
                    regex: None,
                    assignor: None,
                    assigned: Owned::new(),
                    revoking: Owned::new(),
                    session_deadline: now + session,
                    left_static: false,
                });
            if fresh {
                changed = true;
            } else if m.instance_id.is_none() || m.epoch == 0 {
                // A member rejoining at epoch 0 (after it was fenced) starts
                // over.
                m.assigned.clear();
                m.revoking.clear();
                m.epoch = 0;
                changed = true;
            }
        } else {
            let m = group
                .members
                .get(&member_id)
                .filter(|m| !m.left_static)
                .ok_or(Refusal::from(ErrorCode::UnknownMemberId))?;
            // Kafka's throwIfMemberEpochIsInvalid: an older epoch is fine
            // only while the member's last answer may not have arrived.
            let owned_ok = req.topic_partitions.as_ref().is_none_or(|tps| {
                owned(tps).iter().all(|(t, ps)| {
                    ps.iter()
                        .all(|p| m.assigned.get(t).is_some_and(|a| a.contains(p)))
                })
            });
            if epoch > m.epoch || (epoch < m.epoch && !(epoch == m.previous_epoch && owned_ok)) {
                return Err(ErrorCode::FencedMemberEpoch.into());
            }
        }
        let m = group.members.get_mut(&member_id).expect("present");
        m.session_deadline = now + session;
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
        let interval = self.regex_refresh_interval;
        changed |= group.resolve_regexes(now, topics, interval);
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
        let before = group.members[&member_id].assigned.clone();
        group.reconcile(&member_id);
        let m = &group.members[&member_id];
        let send_assignment = m.assigned != before || epoch == 0 || req.topic_partitions.is_some();
        Ok(ConsumerGroupHeartbeatResponse {
            member_id: Some(member_id.clone()),
            member_epoch: m.epoch,
            heartbeat_interval_ms: i32::try_from(self.heartbeat_interval.as_millis())
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
        })
    }
}

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
    /// The topics member `m` subscribes to: by name, and through its
    /// regex as last resolved.
    fn member_topics<'a>(&'a self, m: &'a Member) -> impl Iterator<Item = &'a String> + 'a {
        let through_regex = m
            .regex
            .as_ref()
            .and_then(|r| self.resolved.get(r))
            .into_iter()
            .flatten();
        m.topics.iter().chain(through_regex)
    }

    /// Drops the resolutions of regexes no member subscribes to anymore.
    fn forget_unused_regexes(&mut self) {
        let used: BTreeSet<&String> = self
            .members
            .values()
            .filter_map(|m| m.regex.as_ref())
            .collect();
        self.resolved.retain(|r, _| used.contains(r));
    }

    /// Resolves the group's regexes when one was never resolved, or when
    /// the last resolution is older than `interval` and the cluster's
    /// topics changed since (Kafka's `maybeUpdateRegularExpressions`,
    /// done at once here instead of on an executor). Returns whether a
    /// resolution changed.
    fn resolve_regexes(&mut self, now: Instant, topics: &TopicView, interval: Duration) -> bool {
        self.forget_unused_regexes();
        let regexes: BTreeSet<String> = self
            .members
            .values()
            .filter_map(|m| m.regex.clone())
            .collect();
        if regexes.is_empty() {
            return false;
        }
        let names: BTreeSet<String> = topics.keys().cloned().collect();
        let unresolved = regexes.iter().any(|r| !self.resolved.contains_key(r));
        let stale = self.last_resolution.is_none_or(|t| now >= t + interval)
            && names != self.resolved_against;
        if !unresolved && !stale {
            return false;
        }
        let mut resolved = BTreeMap::new();
        for r in regexes {
            // Validated when it came in.
            let matched = match TopicPattern::new(&r) {
                Ok(p) => names.iter().filter(|t| p.matches(t)).cloned().collect(),
                Err(_) => BTreeSet::new(),
            };
            resolved.insert(r, matched);
        }
        self.last_resolution = Some(now);
        self.resolved_against = names;
        let changed = resolved != self.resolved;
        self.resolved = resolved;
        changed
    }

    /// Recomputes the subscribed topics' ids and partition counts; returns
    /// whether they changed (a topic created, grown or deleted).
    fn update_subscription_metadata(&mut self, topics: &TopicView) -> bool {
        let subscribed: BTreeSet<&String> = self
            .members
            .values()
            .flat_map(|m| self.member_topics(m))
            .collect();
        let metadata: TopicView = subscribed
            .into_iter()
            .filter_map(|t| topics.get(t).map(|v| (t.clone(), *v)))
            .collect();
        if metadata == self.subscription_metadata {
            return false;
        }
        self.subscription_metadata = metadata;
        true
    }

    /// Removes members whose session ended (Kafka's session timer).
    fn expire(&mut self, now: Instant) {
        let before = self.members.len();
        self.members.retain(|_, m| m.session_deadline > now);
        if self.members.len() != before {
            self.epoch += 1;
            let view = self.last_view.clone();
            self.compute_target(&view);
        }
    }

    /// The target assignment at the group epoch.
    fn compute_target(&mut self, topics: &TopicView) {
        self.last_view = topics.clone();
        let assignor = self
            .members
            .values()
            .find_map(|m| m.assignor.clone())
            .unwrap_or_else(|| DEFAULT_ASSIGNOR.to_owned());
        let ids: Vec<String> = self.members.keys().cloned().collect();
        let mut target: BTreeMap<String, Owned> =
            ids.iter().map(|id| (id.clone(), Owned::new())).collect();
        let subscriptions: BTreeMap<&String, BTreeSet<&String>> = self
            .members
            .iter()
            .map(|(id, m)| (id, self.member_topics(m).collect()))
            .collect();
        let wanted: BTreeSet<&String> = subscriptions.values().flatten().copied().collect();
        for topic in wanted {
            let Some((id, count)) = topics.get(topic) else {
                continue;
            };
            let subscribers: Vec<&String> = ids
                .iter()
                .filter(|m| subscriptions[*m].contains(topic))
                .collect();
            let shares = if assignor == "range" {
                range(&subscribers, *count)
            } else {
                let current: BTreeMap<&String, BTreeSet<i32>> = subscribers
                    .iter()
                    .map(|m| {
                        let held = self
                            .target
                            .get(*m)
                            .and_then(|t| t.get(id))
                            .cloned()
                            .unwrap_or_default();
                        (*m, held)
                    })
                    .collect();
                uniform(&subscribers, *count, &current)
            };
            for (member, partitions) in shares {
                if !partitions.is_empty() {
                    target
                        .get_mut(member)
                        .expect("a member")
                        .insert(*id, partitions);
                }
            }
        }
        self.target = target;
        self.target_epoch = self.epoch;
    }

    /// Moves one member towards its target (Kafka's
    /// `CurrentAssignmentBuilder`): revoke first, then assign what others
    /// have released.
    fn reconcile(&mut self, member_id: &str) {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let held_by_others: Owned = {
            let mut out = Owned::new();
            for (id, m) in &self.members {
                if id != member_id {
                    for (t, ps) in m.assigned.iter().chain(m.revoking.iter()) {
                        out.entry(*t).or_default().extend(ps);
                    }
                }
            }
            out
        };
        let target_epoch = self.target_epoch;
        let m = self.members.get_mut(member_id).expect("present");
        if !m.revoking.is_empty() {
            return;
        }
        if m.epoch >= target_epoch && m.assigned == target {
            return;
        }
        let mut revoke = Owned::new();
        for (t, ps) in &m.assigned {
            let keep = target.get(t);
            let gone: BTreeSet<i32> = ps
                .iter()
                .filter(|p| !keep.is_some_and(|k| k.contains(p)))
                .copied()
                .collect();
            if !gone.is_empty() {
                revoke.insert(*t, gone);
            }
        }
        if !revoke.is_empty() {
            // UNREVOKED_PARTITIONS: the member keeps its epoch until it
            // acknowledges.
            for (t, ps) in &revoke {
                if let Some(a) = m.assigned.get_mut(t) {
                    a.retain(|p| !ps.contains(p));
                }
            }
            m.assigned.retain(|_, ps| !ps.is_empty());
            m.revoking = revoke;
            return;
        }
        let mut next = Owned::new();
        for (t, ps) in &target {
            let free: BTreeSet<i32> = ps
                .iter()
                .filter(|p| !held_by_others.get(t).is_some_and(|h| h.contains(p)))
                .copied()
                .collect();
            if !free.is_empty() {
                next.insert(*t, free);
            }
        }
        m.assigned = next;
        if m.epoch != target_epoch {
            m.previous_epoch = m.epoch;
            m.epoch = target_epoch;
        }
    }
}

/// Kafka's range assignor for one topic: members in id order, contiguous
/// ranges, the first `count % n` members one more.
fn range<'a>(members: &[&'a String], count: i32) -> Vec<(&'a String, BTreeSet<i32>)> {
    let n = members.len() as i32;
    if n == 0 {
        return Vec::new();
    }
    let (quota, extra) = (count / n, count % n);
    let mut start = 0;
    members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let len = quota + i32::from((i as i32) < extra);
            let share = (start..start + len).collect();
            start += len;
            (*m, share)
        })
        .collect()
}

/// A uniform, sticky assignment of one topic: every member keeps what it
/// had up to its quota; the rest goes to the members with the fewest.
fn uniform<'a>(
    members: &[&'a String],
    count: i32,
    current: &BTreeMap<&'a String, BTreeSet<i32>>,
) -> Vec<(&'a String, BTreeSet<i32>)> {
    let n = members.len() as i32;
    if n == 0 {
        return Vec::new();
    }
    let (quota, extra) = (count / n, count % n);
    let mut shares: Vec<(&String, BTreeSet<i32>)> = Vec::new();
    let mut taken = BTreeSet::new();
    let mut extra_left = extra;
    for m in members {
        let mut keep = BTreeSet::new();
        for p in current.get(m).into_iter().flatten() {
            let cap = quota + i32::from(extra_left > 0);
            if (keep.len() as i32) < cap && *p < count && taken.insert(*p) {
                keep.insert(*p);
            }
        }
        if keep.len() as i32 > quota {
            extra_left -= 1;
        }
        shares.push((*m, keep));
    }
    for p in 0..count {
        if taken.contains(&p) {
            continue;
        }
        let (_, share) = shares
            .iter_mut()
            .min_by_key(|(m, s)| (s.len(), *m))
            .expect("members");
        share.insert(p);
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: [u8; 16] = [1; 16];

    fn view() -> TopicView {
        TopicView::from([("t".to_owned(), (T, 4))])
    }

    fn join(member: &str, assignor: &str) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec!["t".into()]),
            subscribed_topic_regex: Some(String::new()),
            server_assignor: Some(assignor.into()),
            topic_partitions: Some(Vec::new()),
            ..ConsumerGroupHeartbeatRequest::default()
        }
    }

    fn beat(member: &str, epoch: i32, owned: Option<&[i32]>) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: epoch,
            rebalance_timeout_ms: -1,
            topic_partitions: owned.map(|ps| {
                vec![TopicPartitions {
                    topic_id: T,
                    partitions: ps.to_vec(),
                    ..TopicPartitions::default()
                }]
            }),
            ..ConsumerGroupHeartbeatRequest::default()
        }
    }

    fn partitions(r: &ConsumerGroupHeartbeatResponse) -> Option<Vec<i32>> {
        r.assignment.as_ref().map(|a| {
            a.topic_partitions
                .iter()
                .flat_map(|t| t.partitions.clone())
                .collect()
        })
    }

    #[test]
    fn a_second_member_gets_partitions_only_after_the_first_revokes() {
        for assignor in ["uniform", "range"] {
            let now = Instant::now();
            let mut g = ConsumerGroups::default();
            let a = g.heartbeat(now, 1, &join("a", assignor), &view());
            assert_eq!(a.error_code, 0);
            assert_eq!(a.member_epoch, 1);
            assert_eq!(partitions(&a), Some(vec![0, 1, 2, 3]));

            let b = g.heartbeat(now, 1, &join("b", assignor), &view());
            assert_eq!(b.member_epoch, 2);
            assert_eq!(
                partitions(&b),
                Some(vec![]),
                "{assignor}: a still owns them"
            );
            // a is told to give two up, at its old epoch.
            let a = g.heartbeat(now, 1, &beat("a", 1, None), &view());
            assert_eq!(a.member_epoch, 1);
            let kept = partitions(&a).expect("a new assignment");
            assert_eq!(kept.len(), 2, "{assignor}");
            // a acknowledges: it moves to epoch 2; b then gets the rest.
            let a = g.heartbeat(now, 1, &beat("a", 1, Some(&kept)), &view());
            assert_eq!(a.member_epoch, 2);
            let b = g.heartbeat(now, 1, &beat("b", 2, None), &view());
            let theirs = partitions(&b).expect("b's partitions");
            assert_eq!(theirs.len(), 2);
            assert!(theirs.iter().all(|p| !kept.contains(p)));
            if assignor == "range" {
                assert_eq!((kept, theirs), (vec![0, 1], vec![2, 3]));
            }
        }
    }

    #[test]
    fn wrong_epochs_are_fenced_and_unknown_members_refused() {
        let now = Instant::now();
        let mut g = ConsumerGroups::default();
        g.heartbeat(now, 1, &join("a", "uniform"), &view());
        let r = g.heartbeat(now, 1, &beat("a", 7, None), &view());
        assert_eq!(r.error_code, ErrorCode::FencedMemberEpoch.code());
        let r = g.heartbeat(now, 1, &beat("x", 1, None), &view());
        assert_eq!(r.error_code, ErrorCode::UnknownMemberId.code());
        let r = g.heartbeat(now, 1, &join("a", "sticky"), &view());
        assert_eq!(r.error_code, ErrorCode::UnsupportedAssignor.code());
        let mut bad = join("b", "uniform");
        bad.subscribed_topic_names = None;
        bad.subscribed_topic_regex = None;
        let r = g.heartbeat(now, 1, &bad, &view());
        assert_eq!(r.error_code, ErrorCode::InvalidRequest.code());
        assert_eq!(g.validate_commit("g", "a", 1), Ok(()));
        assert_eq!(
            g.validate_commit("g", "a", 0),
            Err(ErrorCode::StaleMemberEpoch)
        );
    }

    #[test]
    fn leaving_hands_partitions_over_and_static_members_come_back_to_theirs() {
        let now = Instant::now();
        let mut g = ConsumerGroups::default();
        let mut sa = join("a", "range");
        sa.instance_id = Some("pod-a".into());
        g.heartbeat(now, 1, &sa, &view());
        g.heartbeat(now, 1, &join("b", "range"), &view());
        g.heartbeat(now, 1, &beat("a", 1, None), &view());
        g.heartbeat(now, 1, &beat("a", 1, Some(&[0, 1])), &view());
        g.heartbeat(now, 1, &beat("b", 2, None), &view());
        assert_eq!(
            g.assigned("g", "b"),
            Owned::from([(T, BTreeSet::from([2, 3]))])
        );

        // a leaves for now (-2): b is not given a's partitions.
        let mut leave = beat("a", -2, None);
        leave.instance_id = Some("pod-a".into());
        assert_eq!(g.heartbeat(now, 1, &leave, &view()).member_epoch, -2);
        g.heartbeat(now, 1, &beat("b", 2, None), &view());
        assert_eq!(
            g.assigned("g", "b"),
            Owned::from([(T, BTreeSet::from([2, 3]))])
        );
        // It returns under a new member id, to the same partitions.
        let mut back = join("a2", "range");
        back.instance_id = Some("pod-a".into());
        let r = g.heartbeat(now, 1, &back, &view());
        assert_eq!(partitions(&r), Some(vec![0, 1]));
        // Another process with the same instance id while it is active.
        let mut twin = join("a3", "range");
        twin.instance_id = Some("pod-a".into());
        let r = g.heartbeat(now, 1, &twin, &view());
        assert_eq!(r.error_code, ErrorCode::UnreleasedInstanceId.code());

        // b leaves for good (-1): a gets everything.
        g.heartbeat(now, 1, &beat("b", -1, None), &view());
        let r = g.heartbeat(now, 1, &beat("a2", 2, Some(&[0, 1])), &view());
        assert_eq!(partitions(&r), Some(vec![0, 1, 2, 3]));
    }

    const U: [u8; 16] = [2; 16];

    fn regex_join(member: &str, regex: &str) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest {
            subscribed_topic_names: Some(vec![]),
            subscribed_topic_regex: Some(regex.into()),
            ..join(member, "uniform")
        }
    }

    fn by_topic(r: &ConsumerGroupHeartbeatResponse) -> BTreeMap<[u8; 16], Vec<i32>> {
        r.assignment
            .as_ref()
            .map(|a| {
                a.topic_partitions
                    .iter()
                    .map(|t| (t.topic_id, t.partitions.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn a_regex_is_resolved_against_whole_topic_names() {
        let now = Instant::now();
        let mut g = ConsumerGroups::default();
        let topics = TopicView::from([
            ("t".to_owned(), (T, 2)),
            ("tu".to_owned(), (U, 1)),
            ("xt".to_owned(), ([3; 16], 1)),
        ]);
        // "t.?" matches t and tu, not xt (a search would).
        let r = g.heartbeat(now, 1, &regex_join("a", "t.?"), &topics);
        assert_eq!(r.error_code, 0);
        assert_eq!(
            by_topic(&r),
            BTreeMap::from([(T, vec![0, 1]), (U, vec![0])])
        );
        // librdkafka's form: names, "" beside them, is a name subscription.
        let r = g.heartbeat(now, 1, &join("b", "uniform"), &topics);
        assert_eq!(r.error_code, 0);
        assert!(g.groups["g"].members["b"].regex.is_none());
    }

    #[test]
    fn an_invalid_regex_is_refused_with_the_reason() {
        let now = Instant::now();
        let mut g = ConsumerGroups::default();
        let r = g.heartbeat(now, 1, &regex_join("a", "t("), &view());
        assert_eq!(r.error_code, ErrorCode::InvalidRegularExpression.code());
        assert!(
            r.error_message.as_deref().unwrap_or("").contains("t("),
            "{:?}",
            r.error_message
        );
        assert!(!g.contains("g"), "refused before anything changed");
    }

    #[test]
    fn topics_created_later_are_picked_up_by_name_at_once_and_by_regex_after_the_refresh_interval()
    {
        let now = Instant::now();
        let mut g = ConsumerGroups {
            regex_refresh_interval: Duration::from_secs(10),
            ..ConsumerGroups::default()
        };
        let empty = TopicView::new();
        let mut by_name = join("a", "uniform");
        by_name.subscribed_topic_names = Some(vec!["t".into()]);
        let r = g.heartbeat(now, 1, &by_name, &empty);
        assert_eq!(r.member_epoch, 1);
        assert!(by_topic(&r).is_empty());
        // "t" appears: the next heartbeat brings a new epoch and it.
        let r = g.heartbeat(now, 1, &beat("a", 1, None), &view());
        assert_eq!(r.member_epoch, 2);
        assert_eq!(partitions(&r), Some(vec![0, 1, 2, 3]));

        let r = g.heartbeat(now, 1, &regex_join("b", "u.*"), &view());
        let b_epoch = r.member_epoch;
        assert!(by_topic(&r).is_empty(), "nothing matches yet");
        let mut grown = view();
        grown.insert("u1".into(), (U, 2));
        // Within the interval of the last resolution: not yet.
        let r = g.heartbeat(
            now + Duration::from_secs(9),
            1,
            &beat("b", b_epoch, None),
            &grown,
        );
        assert!(by_topic(&r).is_empty());
        let later = now + Duration::from_secs(10);
        let r = g.heartbeat(later, 1, &beat("b", b_epoch, None), &grown);
        assert!(r.member_epoch > b_epoch);
        assert_eq!(by_topic(&r), BTreeMap::from([(U, vec![0, 1])]));
    }

    #[test]
    fn an_expired_session_removes_the_member() {
        let now = Instant::now();
        let mut g = ConsumerGroups {
            session_timeout: Duration::from_secs(1),
            ..ConsumerGroups::default()
        };
        g.heartbeat(now, 1, &join("a", "uniform"), &view());
        g.heartbeat(now, 1, &join("b", "uniform"), &view());
        g.heartbeat(
            now + Duration::from_millis(800),
            1,
            &beat("b", 2, None),
            &view(),
        );
        let later = now + Duration::from_millis(1500);
        let r = g.heartbeat(later, 1, &beat("b", 2, None), &view());
        assert_eq!(partitions(&r), Some(vec![0, 1, 2, 3]));
        let r = g.heartbeat(later, 1, &beat("a", 1, None), &view());
        assert_eq!(r.error_code, ErrorCode::UnknownMemberId.code());
    }
}
