//! Group membership in the consumer group protocol (KIP-848,
//! `group.protocol=consumer`), as a state machine without IO.
//!
//! ```text
//!                 subscribe
//!   Unjoined --------------------> Joining --heartbeat ok (epoch > 0)--> Stable
//!      ^                             ^  ^                                 |  ^
//!      | leave (epoch -1 / -2)       |  | FENCED_MEMBER_EPOCH,            |  | assignment
//!      +-----------------------------+  | UNKNOWN_MEMBER_ID (lost,        |  | reconciled
//!                                       |  rejoin at epoch 0, same id)    v  |
//!                                       +-------------------------- Reconciling
//!   fatal errors end in Failed                 (revoked handed out, waiting for the
//!                                               listener and the commit)
//! ```
//!
//! There is no JoinGroup, SyncGroup or client-side assignor: one request,
//! ConsumerGroupHeartbeat, joins (member epoch 0), heartbeats, reports the
//! owned partitions and receives the target assignment that the
//! coordinator's assignor computed. The member reconciles towards that
//! target: it revokes what it must give up first (the rebalance listener
//! runs, offsets are committed), then takes the new partitions, then
//! acknowledges by sending what it owns (KIP-848 "Reconciliation").
//!
//! Requests follow KIP-848's rule for fields, as Kafka's Java consumer
//! sends them: the full set (subscription, rebalance timeout, assignor,
//! rack, owned partitions) in every request at member epoch 0 and in the
//! first after any error, and otherwise only what changed, every unchanged
//! field null (-1 for the rebalance timeout); the instance id in every
//! request. A member stays at epoch 0 until the coordinator gives it
//! another, and Kafka refuses a heartbeat at epoch 0 without a rebalance
//! timeout, a subscription and an empty list of owned partitions
//! (INVALID_REQUEST): a coordinator may answer a join with epoch 0 (one
//! that waits for another member to release partitions first), and the
//! next heartbeat is then a full join again.
//!
//! Inputs are [`ConsumerMembership::handle_response`] and
//! [`ConsumerMembership::subscribe`]; outputs are
//! [`ConsumerMembership::poll_heartbeat`] (the next request) and
//! [`ConsumerMembership::poll_event`] (assignment changes). Time is an
//! argument; nothing here reads a clock.

use super::membership::{GroupEvent, GroupFailure, ResponseOutcome};
use super::TopicPartition;
use crate::cluster::{ExponentialBackoff, RequestBody, RequestError, Response, Retry, Rng};
use crate::protocol::messages::consumer_group_heartbeat::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, TopicPartitions,
};
use crate::protocol::{ApiKey, EncodeError, ErrorCode, Writer};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

/// The member epoch that joins (or rejoins) a group (KIP-848).
pub const JOIN_EPOCH: i32 = 0;
/// The member epoch with which a dynamic member leaves (KIP-848).
pub const LEAVE_EPOCH: i32 = -1;
/// The member epoch with which a static member leaves for now, keeping its
/// assignment for its return within the session timeout (KIP-848).
pub const STATIC_LEAVE_EPOCH: i32 = -2;

/// Until the coordinator says otherwise (its
/// `group.consumer.heartbeat.interval.ms`, Kafka's default 5 s), the member
/// heartbeats this often; the first answer replaces it.
const INITIAL_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// Settings of the membership.
#[derive(Debug, Clone)]
pub struct ConsumerMembershipConfig {
    /// `group.id`.
    pub group_id: String,
    /// `group.instance.id` (static membership).
    pub group_instance_id: Option<String>,
    /// `client.rack`, sent as RackId.
    pub rack: Option<String>,
    /// `max.poll.interval.ms`, sent as the rebalance timeout.
    pub rebalance_timeout: Duration,
    /// `group.remote.assignor`; `None` lets the broker choose.
    pub server_assignor: Option<String>,
    /// `retry.backoff.ms` doubling to `retry.backoff.max.ms`: the retry
    /// policy, between retries after errors.
    pub retry_backoff: ExponentialBackoff,
    /// Seeds the retry policy's jitter.
    pub seed: u64,
}

/// Where the member is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerMemberState {
    /// Not in the group; joins at the next chance if subscribed.
    Unjoined,
    /// A heartbeat with epoch 0 is sent or about to be.
    Joining,
    /// In the group with a positive epoch; heartbeats flow.
    Stable,
    /// Partitions to give up were handed out as a revocation; the new
    /// assignment is taken once the caller has acted on it.
    Reconciling,
    /// Ended by an error no retry can fix.
    Failed(String),
}

/// What the member subscribes to: topic names, or a regular expression
/// the coordinator resolves (RE2/J syntax, KIP-848).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Subscription {
    topics: BTreeSet<String>,
    regex: Option<String>,
}

impl Subscription {
    fn is_empty(&self) -> bool {
        self.topics.is_empty() && self.regex.is_none()
    }
}

/// What the request in flight carried, to mark it as known to the broker
/// once it is answered.
#[derive(Debug, Clone)]
struct Sent {
    subscription: Option<Subscription>,
    owned: Option<BTreeSet<TopicPartition>>,
    full: bool,
}

/// The membership state machine. See the [module documentation](self).
#[derive(Debug)]
pub struct ConsumerMembership {
    config: ConsumerMembershipConfig,
    state: ConsumerMemberState,
    /// Generated by the client (KIP-1082, ConsumerGroupHeartbeat v1) and
    /// kept for the consumer's life, across rejoins.
    member_id: String,
    epoch: i32,
    subscription: Subscription,
    /// The subscription the broker has acknowledged.
    acknowledged_subscription: Option<Subscription>,
    owned: BTreeSet<TopicPartition>,
    /// The owned set the broker has heard.
    acknowledged_owned: Option<BTreeSet<TopicPartition>>,
    /// The latest target assignment from the broker, not yet reconciled.
    target: Option<BTreeMap<[u8; 16], BTreeSet<i32>>>,
    /// The assignment to take once the revocation was acted on.
    pending_assignment: Option<BTreeSet<TopicPartition>>,
    /// Whether the first reconciliation after joining is still to come:
    /// it always ends with an assigned event (as in the classic protocol).
    first_assignment: bool,
    /// Send every field in the next request (after joining or an error).
    send_full: bool,
    heartbeat_interval: Duration,
    next_heartbeat: Option<Instant>,
    heartbeat_soon: bool,
    in_flight: Option<Sent>,
    /// The run of failed heartbeats (the retry policy).
    retry: Retry,
    rng: Rng,
    /// The ids of the topics of owned partitions, to report them back.
    id_of: BTreeMap<String, [u8; 16]>,
    /// Topic ids of the target that the metadata could not name yet.
    unresolved: BTreeSet<[u8; 16]>,
    failure: Option<GroupFailure>,
    events: VecDeque<GroupEvent>,
    /// The epoch and member id given up by [`ConsumerMembership::leave`].
    left_epoch: Option<(i32, String)>,
}

impl ConsumerMembership {
    /// A member that has not joined, with the member id it keeps for its
    /// life (see [`generate_member_id`]).
    pub fn new(config: ConsumerMembershipConfig, member_id: String) -> Self {
        let rng = Rng::new(config.seed);
        ConsumerMembership {
            config,
            state: ConsumerMemberState::Unjoined,
            member_id,
            epoch: JOIN_EPOCH,
            subscription: Subscription::default(),
            acknowledged_subscription: None,
            owned: BTreeSet::new(),
            acknowledged_owned: None,
            target: None,
            pending_assignment: None,
            first_assignment: true,
            send_full: true,
            heartbeat_interval: INITIAL_HEARTBEAT_INTERVAL,
            next_heartbeat: None,
            heartbeat_soon: false,
            in_flight: None,
            retry: Retry::default(),
            rng,
            id_of: BTreeMap::new(),
            unresolved: BTreeSet::new(),
            failure: None,
            events: VecDeque::new(),
            left_epoch: None,
        }
    }

    // ===== getters =====

    /// The state.
    pub fn state(&self) -> &ConsumerMemberState {
        &self.state
    }

    /// The partitions this member owns.
    pub fn assignment(&self) -> &BTreeSet<TopicPartition> {
        &self.owned
    }

    /// The member id (generated by the client, kept across rejoins).
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The member epoch: 0 before joining.
    pub fn member_epoch(&self) -> i32 {
        self.epoch
    }

    /// The heartbeat interval the coordinator asked for (before its first
    /// answer, 5 s).
    pub fn heartbeat_interval(&self) -> Duration {
        self.heartbeat_interval
    }

    /// `group.id`.
    pub fn group_id(&self) -> &str {
        &self.config.group_id
    }

    /// `group.instance.id`.
    pub fn group_instance_id(&self) -> Option<&str> {
        self.config.group_instance_id.as_deref()
    }

    /// The subscribed topics (empty under a regex subscription).
    pub fn topics(&self) -> &BTreeSet<String> {
        &self.subscription.topics
    }

    /// The regular expression subscribed to, if any.
    pub fn regex(&self) -> Option<&str> {
        self.subscription.regex.as_deref()
    }

    /// Whether the member belongs to the group with a positive epoch.
    pub fn is_stable(&self) -> bool {
        matches!(
            self.state,
            ConsumerMemberState::Stable | ConsumerMemberState::Reconciling
        ) && self.epoch > 0
    }

    /// The member epoch and member id an OffsetCommit (v9+) carries as its
    /// generation (KIP-848: the coordinator checks the member epoch), also
    /// after [`ConsumerMembership::leave`] until the next join: the revoked
    /// partitions' offsets are committed before the leave goes out.
    pub fn commit_generation(&self) -> Option<(i32, &str)> {
        if self.epoch > 0 {
            return Some((self.epoch, self.member_id.as_str()));
        }
        self.left_epoch.as_ref().map(|(e, id)| (*e, id.as_str()))
    }

    /// The next assignment change.
    pub fn poll_event(&mut self) -> Option<GroupEvent> {
        self.events.pop_front()
    }

    /// Why the member stopped, once (then `None`).
    pub fn take_failure(&mut self) -> Option<GroupFailure> {
        self.failure.take()
    }

    /// The topic ids of the target assignment that the metadata could not
    /// name at the last [`ConsumerMembership::poll_heartbeat`]: the caller
    /// looks them up (Metadata by topic id), and the assignment waits for
    /// their names. Empty when there is nothing to look up.
    pub fn unresolved_topic_ids(&self) -> &BTreeSet<[u8; 16]> {
        &self.unresolved
    }

    /// When [`ConsumerMembership::poll_heartbeat`] may have something to
    /// send.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.in_flight.is_some() {
            return None;
        }
        match self.retry.not_before() {
            Some(t) => Some(t),
            None if matches!(
                self.state,
                ConsumerMemberState::Stable | ConsumerMemberState::Joining
            ) =>
            {
                self.next_heartbeat
            }
            None => None,
        }
    }

    // ===== inputs =====

    /// Sets the subscribed topics (ending a regex subscription); a change
    /// goes out with the next heartbeat, at once.
    pub fn subscribe(&mut self, topics: BTreeSet<String>) {
        self.subscription = Subscription {
            topics,
            regex: None,
        };
    }

    /// Subscribes to the topics matching `regex`, which the coordinator
    /// resolves (SubscribedTopicRegex, ConsumerGroupHeartbeat v1+, RE2/J
    /// syntax; the coordinator picks up topics created later). A change
    /// goes out with the next heartbeat, at once.
    pub fn subscribe_regex(&mut self, regex: String) {
        self.subscription = Subscription {
            topics: BTreeSet::new(),
            regex: Some(regex),
        };
    }

    /// Asks for a heartbeat at once (for instance after an OffsetCommit
    /// refused with STALE_MEMBER_EPOCH: the answer brings the current
    /// epoch).
    pub fn heartbeat_now(&mut self) {
        self.heartbeat_soon = true;
    }

    /// The next request to send to the coordinator, if any.
    ///
    /// `topic_names` maps the topic ids the metadata knows to their names:
    /// the assignment comes by topic id (KIP-848).
    pub fn poll_heartbeat(
        &mut self,
        now: Instant,
        topic_names: &BTreeMap<[u8; 16], String>,
    ) -> Option<ConsumerGroupHeartbeatRequest> {
        if matches!(self.state, ConsumerMemberState::Failed(_)) || self.in_flight.is_some() {
            return None;
        }
        if !self.retry.ready(now) {
            return None;
        }
        self.retry.clear_wait();
        if self.state == ConsumerMemberState::Reconciling {
            // The caller acted on the revocation (it calls again only
            // then): take the new partitions.
            self.finish_reconciliation();
        }
        if self.state == ConsumerMemberState::Stable {
            self.reconcile(topic_names);
            if self.state == ConsumerMemberState::Reconciling {
                // Let the caller run the listener and commit the revoked
                // partitions before anything new is taken (KIP-848).
                return None;
            }
        }
        let due = match self.state {
            ConsumerMemberState::Unjoined => {
                if self.subscription.is_empty() {
                    return None;
                }
                self.state = ConsumerMemberState::Joining;
                self.epoch = JOIN_EPOCH;
                self.send_full = true;
                self.left_epoch = None;
                true
            }
            // A join answered at epoch 0 (the coordinator holds the member
            // there until its partitions are free) is asked again at the
            // heartbeat interval, as every heartbeat.
            ConsumerMemberState::Joining => {
                !self.subscription.is_empty()
                    && (self.send_full
                        || self.heartbeat_soon
                        || self.next_heartbeat.is_none_or(|t| now >= t))
            }
            ConsumerMemberState::Stable => {
                self.heartbeat_soon
                    || self.send_full
                    || self.next_heartbeat.is_none_or(|t| now >= t)
                    || self.acknowledged_subscription.as_ref() != Some(&self.subscription)
                    || self.acknowledged_owned.as_ref() != Some(&self.owned)
            }
            ConsumerMemberState::Reconciling | ConsumerMemberState::Failed(_) => false,
        };
        if !due {
            return None;
        }
        self.heartbeat_soon = false;
        let request = self.build_request();
        self.next_heartbeat = Some(now + self.heartbeat_interval);
        Some(request)
    }

    /// Reads the answer (or failure) of the request sent last.
    pub fn handle_response(
        &mut self,
        now: Instant,
        result: Result<Response, RequestError>,
    ) -> ResponseOutcome {
        let Some(sent) = self.in_flight.take() else {
            return ResponseOutcome::default();
        };
        let response = match result.map(|r| r.decode::<ConsumerGroupHeartbeatResponse>()) {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                log::warn!(
                    "group {}: cannot decode ConsumerGroupHeartbeat response: {e}",
                    self.config.group_id
                );
                return self.retry_later(now, true);
            }
            Err(RequestError::Encode(_, e)) => {
                // A regex subscription and a broker whose
                // ConsumerGroupHeartbeat is v0, which has no
                // SubscribedTopicRegex: no retry can change that.
                self.lose_partitions();
                return self.fail(GroupFailure {
                    api: "ConsumerGroupHeartbeat",
                    code: None,
                    reason: format!("cannot write ConsumerGroupHeartbeat: {e}"),
                });
            }
            Err(RequestError::NoCommonVersion(e)) => {
                self.lose_partitions();
                return self.fail(GroupFailure {
                    api: "ConsumerGroupHeartbeat",
                    code: None,
                    reason: format!(
                        "the coordinator does not speak the consumer group protocol: {e}"
                    ),
                });
            }
            Err(e) => {
                log::debug!(
                    "group {}: ConsumerGroupHeartbeat got no response: {e}",
                    self.config.group_id
                );
                return self.retry_later(now, true);
            }
        };
        self.handle_heartbeat(now, sent, response)
    }

    /// Leaves the group (on close, or when `max.poll.interval.ms` passed
    /// without a poll): owned partitions are revoked, and the heartbeat
    /// that leaves is returned when the broker knows the member: epoch -1,
    /// or -2 for a static member, whose partitions then wait for its
    /// return until the session times out (KIP-848).
    pub fn leave(&mut self) -> Option<ConsumerGroupHeartbeatRequest> {
        let known = self.epoch > 0 || self.state == ConsumerMemberState::Joining;
        if self.epoch > 0 {
            self.left_epoch = Some((self.epoch, self.member_id.clone()));
        }
        // Half way through a reconciliation, `owned` is what was kept: the
        // rest was revoked already.
        let owned = std::mem::take(&mut self.owned);
        if !owned.is_empty() {
            self.events.push_back(GroupEvent::Revoked(owned));
        }
        let epoch = if self.config.group_instance_id.is_some() {
            STATIC_LEAVE_EPOCH
        } else {
            LEAVE_EPOCH
        };
        let request = known.then(|| ConsumerGroupHeartbeatRequest {
            group_id: self.config.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: epoch,
            instance_id: self.config.group_instance_id.clone(),
            rack_id: None,
            rebalance_timeout_ms: -1,
            subscribed_topic_names: None,
            subscribed_topic_regex: None,
            server_assignor: None,
            topic_partitions: None,
            ..ConsumerGroupHeartbeatRequest::default()
        });
        self.reset();
        self.state = ConsumerMemberState::Unjoined;
        request
    }

    // ===== the machine =====

    fn reset(&mut self) {
        self.epoch = JOIN_EPOCH;
        self.target = None;
        self.pending_assignment = None;
        self.first_assignment = true;
        self.send_full = true;
        self.acknowledged_subscription = None;
        self.acknowledged_owned = None;
        self.in_flight = None;
        self.next_heartbeat = None;
        self.unresolved.clear();
    }

    fn build_request(&mut self) -> ConsumerGroupHeartbeatRequest {
        // Every heartbeat at epoch 0 (re)joins: Kafka checks each one for
        // the rebalance timeout, the subscription and an empty owned list
        // (GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid),
        // and Kafka's Java consumer sends every field while it is joining.
        let full = self.send_full || self.epoch == JOIN_EPOCH;
        let topics_changed =
            full || self.acknowledged_subscription.as_ref() != Some(&self.subscription);
        let owned_changed = full || self.acknowledged_owned.as_ref() != Some(&self.owned);
        let request = ConsumerGroupHeartbeatRequest {
            group_id: self.config.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: self.epoch,
            // In every request, as Kafka's Java consumer sends it.
            instance_id: self.config.group_instance_id.clone(),
            rack_id: full.then(|| self.config.rack.clone()).flatten(),
            rebalance_timeout_ms: if full {
                millis(self.config.rebalance_timeout)
            } else {
                -1
            },
            subscribed_topic_names: topics_changed
                .then(|| self.subscription.topics.iter().cloned().collect()),
            // Names and regex go together, as librdkafka sends them: a
            // name subscription with "" as the regex, a regex subscription
            // with an empty list of names. Kafka reads an empty regex as no
            // regex subscription (its Java consumer sends "" to drop a
            // pattern, and null beside names), and empty names beside a
            // regex as none. librdkafka's mock coordinator (2.12 to 2.16)
            // aborts the whole process on a heartbeat whose
            // SubscribedTopicNames and SubscribedTopicRegex are not both
            // null or both set (`validate_subscription` in
            // rdkafka_mock_cgrp.c). v0 has no regex field; `HeartbeatBody`
            // drops an empty one there and refuses to write a real one.
            subscribed_topic_regex: topics_changed
                .then(|| self.subscription.regex.clone().unwrap_or_default()),
            server_assignor: full.then(|| self.config.server_assignor.clone()).flatten(),
            topic_partitions: owned_changed.then(|| self.owned_by_id()),
            ..ConsumerGroupHeartbeatRequest::default()
        };
        self.in_flight = Some(Sent {
            subscription: topics_changed.then(|| self.subscription.clone()),
            owned: owned_changed.then(|| self.owned.clone()),
            full,
        });
        request
    }

    /// The owned partitions by topic id, as the broker assigned them. A
    /// partition whose topic id is no longer known cannot be reported: it
    /// is left out (the broker treats it as revoked).
    fn owned_by_id(&self) -> Vec<TopicPartitions> {
        let mut by_id: BTreeMap<[u8; 16], Vec<i32>> = BTreeMap::new();
        for tp in &self.owned {
            if let Some(id) = self.id_of.get(&tp.topic) {
                by_id.entry(*id).or_default().push(tp.partition);
            }
        }
        by_id
            .into_iter()
            .map(|(topic_id, partitions)| TopicPartitions {
                topic_id,
                partitions,
                ..TopicPartitions::default()
            })
            .collect()
    }

    fn handle_heartbeat(
        &mut self,
        now: Instant,
        sent: Sent,
        r: ConsumerGroupHeartbeatResponse,
    ) -> ResponseOutcome {
        let code = ErrorCode::from_code(r.error_code);
        if self.state == ConsumerMemberState::Unjoined {
            // The answer to a request sent before leaving.
            return ResponseOutcome::default();
        }
        match code {
            ErrorCode::None => {
                self.retry.succeeded();
                if let Some(id) = r.member_id.filter(|id| !id.is_empty()) {
                    // v0: the coordinator names the member.
                    self.member_id = id;
                }
                if r.heartbeat_interval_ms > 0 {
                    // KIP-848: the coordinator sets the interval.
                    self.heartbeat_interval =
                        Duration::from_millis(u64::from(r.heartbeat_interval_ms.unsigned_abs()));
                }
                self.next_heartbeat = Some(now + self.heartbeat_interval);
                if let Some(subscription) = sent.subscription {
                    self.acknowledged_subscription = Some(subscription);
                }
                if let Some(owned) = sent.owned {
                    self.acknowledged_owned = Some(owned);
                }
                if sent.full {
                    self.send_full = false;
                }
                self.epoch = r.member_epoch;
                if self.epoch > 0 && self.state == ConsumerMemberState::Joining {
                    self.state = ConsumerMemberState::Stable;
                }
                if let Some(assignment) = r.assignment {
                    let mut target: BTreeMap<[u8; 16], BTreeSet<i32>> = BTreeMap::new();
                    for t in assignment.topic_partitions {
                        target.entry(t.topic_id).or_default().extend(t.partitions);
                    }
                    self.target = Some(target);
                }
                ResponseOutcome::default()
            }
            ErrorCode::FencedMemberEpoch | ErrorCode::UnknownMemberId => {
                // KIP-848: the member's partitions already went elsewhere;
                // it rejoins at epoch 0 with the same member id.
                log::info!(
                    "group {}: {code}; partitions lost, rejoining",
                    self.config.group_id
                );
                self.lose_partitions();
                self.reset();
                self.state = ConsumerMemberState::Joining;
                ResponseOutcome::default()
            }
            ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable => {
                self.retry_later(now, true)
            }
            ErrorCode::CoordinatorLoadInProgress => self.retry_later(now, false),
            ErrorCode::UnreleasedInstanceId
            | ErrorCode::InvalidRegularExpression
            | ErrorCode::GroupMaxSizeReached
            | ErrorCode::UnsupportedAssignor
            | ErrorCode::InvalidRequest
            | ErrorCode::GroupAuthorizationFailed
            | ErrorCode::FencedInstanceId
            | ErrorCode::UnsupportedVersion => {
                let detail = r
                    .error_message
                    .filter(|m| !m.is_empty())
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default();
                self.lose_partitions();
                self.fail(GroupFailure {
                    api: "ConsumerGroupHeartbeat",
                    code: Some(code),
                    reason: format!("ConsumerGroupHeartbeat failed: {code}{detail}"),
                })
            }
            code if code.is_retriable() => self.retry_later(now, false),
            code => {
                self.lose_partitions();
                self.fail(GroupFailure {
                    api: "ConsumerGroupHeartbeat",
                    code: Some(code),
                    reason: format!("ConsumerGroupHeartbeat failed: {code}"),
                })
            }
        }
    }

    /// After an error: the next request is full (KIP-848), after the
    /// backoff.
    fn retry_later(&mut self, now: Instant, coordinator_unknown: bool) -> ResponseOutcome {
        self.send_full = true;
        let unit = self.rng.unit();
        self.retry.failed(now, &self.config.retry_backoff, unit);
        ResponseOutcome {
            coordinator_unknown,
        }
    }

    fn lose_partitions(&mut self) {
        let lost = std::mem::take(&mut self.owned);
        self.pending_assignment = None;
        if !lost.is_empty() {
            self.events.push_back(GroupEvent::Lost(lost));
        }
        self.target = None;
    }

    fn fail(&mut self, failure: GroupFailure) -> ResponseOutcome {
        self.state = ConsumerMemberState::Failed(failure.reason.clone());
        self.failure = Some(failure);
        ResponseOutcome::default()
    }

    /// Compares the target with what is owned: hands out a revocation
    /// first when something must go, else takes the new partitions at
    /// once.
    fn reconcile(&mut self, topic_names: &BTreeMap<[u8; 16], String>) {
        let Some(target) = &self.target else {
            return;
        };
        let mut resolved = BTreeSet::new();
        let mut unresolved = BTreeSet::new();
        for (id, partitions) in target {
            match topic_names.get(id) {
                Some(name) => {
                    self.id_of.insert(name.clone(), *id);
                    resolved.extend(partitions.iter().map(|p| TopicPartition::new(name, *p)));
                }
                None => {
                    unresolved.insert(*id);
                }
            }
        }
        if !unresolved.is_empty() {
            // Java's client waits for the metadata too: a partition cannot
            // be fetched by id alone. The caller looks the ids up.
            if unresolved != self.unresolved {
                log::debug!(
                    "group {}: the assignment names {} topic id(s) the metadata does not know; looking them up",
                    self.config.group_id,
                    unresolved.len()
                );
            }
            self.unresolved = unresolved;
            return;
        }
        self.unresolved.clear();
        self.target = None;
        let revoked: BTreeSet<TopicPartition> = self.owned.difference(&resolved).cloned().collect();
        if revoked.is_empty() {
            self.pending_assignment = Some(resolved);
            self.finish_reconciliation();
            return;
        }
        self.owned.retain(|tp| !revoked.contains(tp));
        self.events.push_back(GroupEvent::Revoked(revoked));
        self.pending_assignment = Some(resolved);
        self.state = ConsumerMemberState::Reconciling;
    }

    fn finish_reconciliation(&mut self) {
        self.state = ConsumerMemberState::Stable;
        let Some(target) = self.pending_assignment.take() else {
            return;
        };
        let added: BTreeSet<TopicPartition> = target.difference(&self.owned).cloned().collect();
        if added.is_empty() && target == self.owned && !self.first_assignment {
            return;
        }
        // Every completed reconciliation ends with an assigned event, even
        // with nothing new, as in the classic protocol (KIP-429): the
        // application learns that the rebalance is over.
        self.first_assignment = false;
        self.owned = target;
        self.events.push_back(GroupEvent::Assigned(added));
    }
}

/// A ConsumerGroupHeartbeat written for the version negotiated: v0 has no
/// SubscribedTopicRegex, so the empty one beside a name subscription is
/// dropped there, and a regex subscription cannot be written at all.
#[derive(Debug)]
pub struct HeartbeatBody(pub ConsumerGroupHeartbeatRequest);

impl RequestBody for HeartbeatBody {
    fn api_key(&self) -> ApiKey {
        ApiKey::ConsumerGroupHeartbeat
    }

    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        use crate::protocol::Message;
        if version == 0 {
            match self.0.subscribed_topic_regex.as_deref() {
                // "" only stands beside the names (see `build_request`).
                Some("") => {
                    let mut request = self.0.clone();
                    request.subscribed_topic_regex = None;
                    return request.encode(w, version);
                }
                // Dropping it would subscribe the member to nothing.
                Some(_) => {
                    return Err(EncodeError::FieldNotInVersion {
                        what: "SubscribedTopicRegex (a regex subscription needs v1)",
                        version,
                    })
                }
                None => {}
            }
        }
        self.0.encode(w, version)
    }
}

/// A member id for ConsumerGroupHeartbeat v1, where the client names
/// itself (KIP-1082): a random (version 4) UUID written as Kafka writes
/// `Uuid.toString()`, URL-safe base64 without padding. `random` gives the
/// 128 random bits; the caller owns the random source, so tests pin it.
pub fn generate_member_id(random: [u64; 2]) -> String {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&random[0].to_be_bytes());
    bytes[8..].copy_from_slice(&random[1].to_be_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::consumer_group_heartbeat::Assignment;
    use crate::protocol::Message;

    const T: [u8; 16] = [7; 16];
    const U: [u8; 16] = [9; 16];

    fn config(instance: Option<&str>) -> ConsumerMembershipConfig {
        ConsumerMembershipConfig {
            group_id: "g".into(),
            group_instance_id: instance.map(str::to_owned),
            rack: Some("rack-a".into()),
            rebalance_timeout: Duration::from_secs(30),
            server_assignor: Some("uniform".into()),
            retry_backoff: ExponentialBackoff {
                base: Duration::from_millis(100),
                max: Duration::from_millis(1000),
                jitter: 0.0,
            },
            seed: 1,
        }
    }

    fn names() -> BTreeMap<[u8; 16], String> {
        BTreeMap::from([(T, "t".to_owned()), (U, "u".to_owned())])
    }

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn set(ps: &[i32]) -> BTreeSet<TopicPartition> {
        ps.iter().map(|p| tp(*p)).collect()
    }

    fn ok(epoch: i32, assignment: Option<&[i32]>) -> ConsumerGroupHeartbeatResponse {
        ConsumerGroupHeartbeatResponse {
            member_epoch: epoch,
            heartbeat_interval_ms: 2_000,
            assignment: assignment.map(|ps| Assignment {
                topic_partitions: vec![TopicPartitions {
                    topic_id: T,
                    partitions: ps.to_vec(),
                    ..TopicPartitions::default()
                }],
                ..Assignment::default()
            }),
            ..ConsumerGroupHeartbeatResponse::default()
        }
    }

    fn error(code: ErrorCode) -> ConsumerGroupHeartbeatResponse {
        ConsumerGroupHeartbeatResponse {
            error_code: code.code(),
            member_epoch: -1,
            ..ConsumerGroupHeartbeatResponse::default()
        }
    }

    fn answer(
        m: &mut ConsumerMembership,
        now: Instant,
        r: &ConsumerGroupHeartbeatResponse,
    ) -> ResponseOutcome {
        let mut w = Writer::new();
        r.encode(&mut w, 1).unwrap();
        m.handle_response(
            now,
            Ok(Response {
                api: ApiKey::ConsumerGroupHeartbeat,
                version: 1,
                broker: Some(1),
                body: w.into_inner().freeze(),
            }),
        )
    }

    fn events(m: &mut ConsumerMembership) -> Vec<GroupEvent> {
        std::iter::from_fn(|| m.poll_event()).collect()
    }

    fn owned_sent(r: &ConsumerGroupHeartbeatRequest) -> Option<Vec<i32>> {
        r.topic_partitions
            .as_ref()
            .map(|tps| tps.iter().flat_map(|t| t.partitions.clone()).collect())
    }

    /// Joins and owns `partitions` of `t` at epoch 1.
    fn joined(now: Instant, partitions: &[i32], instance: Option<&str>) -> ConsumerMembership {
        let mut m = ConsumerMembership::new(config(instance), "member-1".into());
        m.subscribe(BTreeSet::from(["t".to_owned()]));
        m.poll_heartbeat(now, &names()).expect("join");
        answer(&mut m, now, &ok(1, Some(partitions)));
        m.poll_heartbeat(now, &names()).expect("acknowledge");
        answer(&mut m, now, &ok(1, None));
        events(&mut m);
        assert_eq!(m.assignment(), &set(partitions));
        m
    }

    #[test]
    fn joins_with_every_field_then_sends_only_what_changed() {
        let t0 = Instant::now();
        let mut m = ConsumerMembership::new(config(None), "member-1".into());
        assert!(
            m.poll_heartbeat(t0, &names()).is_none(),
            "nothing to join for"
        );
        m.subscribe(BTreeSet::from(["t".to_owned()]));
        let join = m.poll_heartbeat(t0, &names()).expect("join");
        assert_eq!(join.member_epoch, 0);
        assert_eq!(join.member_id, "member-1");
        assert_eq!(join.subscribed_topic_names, Some(vec!["t".to_owned()]));
        // librdkafka's mock aborts unless names and regex are both set.
        assert_eq!(join.subscribed_topic_regex.as_deref(), Some(""));
        assert_eq!(join.rebalance_timeout_ms, 30_000);
        assert_eq!(join.server_assignor.as_deref(), Some("uniform"));
        assert_eq!(join.rack_id.as_deref(), Some("rack-a"));
        assert_eq!(owned_sent(&join), Some(vec![]));
        assert!(
            m.poll_heartbeat(t0, &names()).is_none(),
            "one request at a time"
        );

        answer(&mut m, t0, &ok(1, Some(&[0, 1])));
        assert_eq!(m.member_epoch(), 1);
        assert_eq!(m.heartbeat_interval(), Duration::from_secs(2));
        // The assignment is taken, then acknowledged at once with only the
        // owned partitions.
        let ack = m.poll_heartbeat(t0, &names()).expect("acknowledge");
        assert_eq!(events(&mut m), vec![GroupEvent::Assigned(set(&[0, 1]))]);
        assert_eq!(owned_sent(&ack), Some(vec![0, 1]));
        assert_eq!(ack.member_epoch, 1);
        assert_eq!(ack.subscribed_topic_names, None);
        assert_eq!(ack.subscribed_topic_regex, None);
        assert_eq!(ack.rebalance_timeout_ms, -1);
        assert_eq!(ack.server_assignor, None);
        assert_eq!(ack.rack_id, None);
        answer(&mut m, t0, &ok(1, None));

        // Then heartbeats at the broker's interval, every field null.
        assert!(m.poll_heartbeat(t0, &names()).is_none());
        assert_eq!(m.next_deadline(), Some(t0 + Duration::from_secs(2)));
        let beat = m
            .poll_heartbeat(t0 + Duration::from_secs(2), &names())
            .expect("heartbeat");
        assert_eq!(owned_sent(&beat), None);
        assert_eq!(beat.subscribed_topic_names, None);
        assert_eq!(m.commit_generation(), Some((1, "member-1")));
    }

    /// A coordinator may answer a join with epoch 0 (librdkafka's mock
    /// does while the partitions it means for the member are still owned
    /// by another): the member is still joining, and Kafka refuses a
    /// heartbeat at epoch 0 without a rebalance timeout, a subscription and
    /// an empty owned list. Each one until the epoch moves is a full join.
    #[test]
    fn every_heartbeat_at_epoch_zero_is_a_full_join() {
        let t0 = Instant::now();
        let mut m = ConsumerMembership::new(config(Some("pod-1")), "member-1".into());
        m.subscribe(BTreeSet::from(["t".to_owned()]));
        m.poll_heartbeat(t0, &names()).expect("join");
        answer(&mut m, t0, &ok(0, None));
        assert_eq!(m.member_epoch(), 0);
        assert!(!m.is_stable());
        for i in 1..=3 {
            // At the heartbeat interval the coordinator gave, not at once.
            let before = t0 + Duration::from_secs(2 * i) - Duration::from_millis(1);
            assert_eq!(m.next_deadline(), Some(before + Duration::from_millis(1)));
            assert!(m.poll_heartbeat(before, &names()).is_none(), "too soon");
            let now = t0 + Duration::from_secs(2 * i);
            let again = m.poll_heartbeat(now, &names()).expect("join again");
            assert_eq!(again.member_epoch, 0);
            assert_eq!(again.rebalance_timeout_ms, 30_000, "heartbeat {i}");
            assert_eq!(again.subscribed_topic_names, Some(vec!["t".to_owned()]));
            assert_eq!(again.subscribed_topic_regex.as_deref(), Some(""));
            assert_eq!(owned_sent(&again), Some(vec![]));
            assert_eq!(again.server_assignor.as_deref(), Some("uniform"));
            assert_eq!(again.rack_id.as_deref(), Some("rack-a"));
            assert_eq!(again.instance_id.as_deref(), Some("pod-1"));
            answer(&mut m, now, &ok(0, None));
        }
        // The epoch moves: only what changed from then on.
        let now = t0 + Duration::from_secs(8);
        m.poll_heartbeat(now, &names()).expect("join again");
        answer(&mut m, now, &ok(3, Some(&[0])));
        let ack = m.poll_heartbeat(now, &names()).expect("acknowledge");
        assert_eq!(ack.member_epoch, 3);
        assert_eq!(ack.rebalance_timeout_ms, -1);
        assert_eq!(ack.subscribed_topic_names, None);
        assert_eq!(ack.subscribed_topic_regex, None);
        assert_eq!(ack.server_assignor, None);
        assert_eq!(ack.rack_id, None);
        assert_eq!(owned_sent(&ack), Some(vec![0]));
        assert_eq!(
            ack.instance_id.as_deref(),
            Some("pod-1"),
            "the instance id in every request"
        );
    }

    #[test]
    fn a_changed_subscription_goes_out_at_once() {
        let t0 = Instant::now();
        let mut m = joined(t0, &[0], None);
        m.subscribe(BTreeSet::from(["t".to_owned(), "u".to_owned()]));
        let r = m.poll_heartbeat(t0, &names()).expect("subscription change");
        assert_eq!(
            r.subscribed_topic_names,
            Some(vec!["t".to_owned(), "u".to_owned()])
        );
        assert_eq!(r.subscribed_topic_regex.as_deref(), Some(""));
        assert_eq!(r.rebalance_timeout_ms, -1, "only what changed");
    }

    #[test]
    fn revokes_before_taking_new_partitions() {
        let t0 = Instant::now();
        let mut m = joined(t0, &[0, 1], None);
        let beat = m
            .poll_heartbeat(t0 + Duration::from_secs(2), &names())
            .unwrap();
        assert_eq!(beat.member_epoch, 1);
        answer(&mut m, t0, &ok(2, Some(&[1, 2])));
        // First the revocation alone: the caller runs the listener and
        // commits t-0 before t-2 is taken.
        assert!(m.poll_heartbeat(t0, &names()).is_none());
        assert_eq!(events(&mut m), vec![GroupEvent::Revoked(set(&[0]))]);
        assert_eq!(m.assignment(), &set(&[1]));
        assert_eq!(m.state(), &ConsumerMemberState::Reconciling);
        // Called again once that is done: the new partition, acknowledged.
        let ack = m.poll_heartbeat(t0, &names()).expect("acknowledge");
        assert_eq!(events(&mut m), vec![GroupEvent::Assigned(set(&[2]))]);
        assert_eq!(owned_sent(&ack), Some(vec![1, 2]));
        assert_eq!(ack.member_epoch, 2);
        assert_eq!(m.assignment(), &set(&[1, 2]));
    }

    #[test]
    fn fencing_loses_the_partitions_and_rejoins_at_epoch_zero_with_the_same_id() {
        for code in [ErrorCode::FencedMemberEpoch, ErrorCode::UnknownMemberId] {
            let t0 = Instant::now();
            let mut m = joined(t0, &[0, 1], None);
            m.poll_heartbeat(t0 + Duration::from_secs(2), &names())
                .unwrap();
            let outcome = answer(&mut m, t0, &error(code));
            assert!(!outcome.coordinator_unknown);
            assert_eq!(events(&mut m), vec![GroupEvent::Lost(set(&[0, 1]))]);
            assert!(m.assignment().is_empty());
            let rejoin = m.poll_heartbeat(t0, &names()).expect("rejoin at once");
            assert_eq!(rejoin.member_epoch, 0, "{code}");
            assert_eq!(rejoin.member_id, "member-1");
            assert_eq!(rejoin.subscribed_topic_names, Some(vec!["t".to_owned()]));
            assert_eq!(rejoin.rebalance_timeout_ms, 30_000, "a full request");
            assert_eq!(owned_sent(&rejoin), Some(vec![]));
            assert_eq!(m.commit_generation(), None);
        }
    }

    #[test]
    fn fatal_errors_stop_the_member() {
        for code in [
            ErrorCode::UnreleasedInstanceId,
            ErrorCode::GroupMaxSizeReached,
            ErrorCode::UnsupportedAssignor,
            ErrorCode::InvalidRequest,
            ErrorCode::GroupAuthorizationFailed,
        ] {
            let t0 = Instant::now();
            let mut m = joined(t0, &[0], None);
            m.poll_heartbeat(t0 + Duration::from_secs(2), &names())
                .unwrap();
            answer(&mut m, t0, &error(code));
            let failure = m.take_failure().expect("a failure");
            assert_eq!(failure.code, Some(code));
            assert_eq!(failure.api, "ConsumerGroupHeartbeat");
            assert!(m.take_failure().is_none(), "reported once");
            assert!(matches!(m.state(), ConsumerMemberState::Failed(_)));
            assert_eq!(events(&mut m), vec![GroupEvent::Lost(set(&[0]))]);
            assert!(m
                .poll_heartbeat(t0 + Duration::from_secs(60), &names())
                .is_none());
        }
    }

    #[test]
    fn a_moved_coordinator_is_looked_up_again_and_the_next_request_is_full() {
        for code in [
            ErrorCode::NotCoordinator,
            ErrorCode::CoordinatorNotAvailable,
        ] {
            let t0 = Instant::now();
            let mut m = joined(t0, &[0], None);
            let t1 = t0 + Duration::from_secs(2);
            m.poll_heartbeat(t1, &names()).unwrap();
            assert!(answer(&mut m, t1, &error(code)).coordinator_unknown);
            assert_eq!(m.assignment(), &set(&[0]), "partitions kept");
            assert!(m.poll_heartbeat(t1, &names()).is_none(), "backoff");
            let again = m
                .poll_heartbeat(t1 + Duration::from_millis(100), &names())
                .expect("retry");
            assert_eq!(again.member_epoch, 1);
            assert_eq!(again.rebalance_timeout_ms, 30_000);
            assert_eq!(owned_sent(&again), Some(vec![0]));
        }
        // No answer at all counts the same.
        let t0 = Instant::now();
        let mut m = joined(t0, &[0], None);
        m.poll_heartbeat(t0 + Duration::from_secs(2), &names())
            .unwrap();
        assert!(
            m.handle_response(
                t0,
                Err(RequestError::Timeout {
                    api: ApiKey::ConsumerGroupHeartbeat,
                    last_error: None,
                })
            )
            .coordinator_unknown
        );
    }

    #[test]
    fn leaving_revokes_and_sends_epoch_minus_one_or_minus_two_for_static_members() {
        let t0 = Instant::now();
        let mut m = joined(t0, &[0, 1], None);
        let leave = m.leave().expect("leave");
        assert_eq!(leave.member_epoch, LEAVE_EPOCH);
        // Who leaves, and nothing else: every other field null or -1
        // ("unchanged").
        assert_eq!(
            (leave.group_id.as_str(), leave.member_id.as_str()),
            ("g", "member-1")
        );
        assert_eq!(leave.rebalance_timeout_ms, -1);
        assert_eq!(leave.rack_id, None);
        assert_eq!(leave.subscribed_topic_names, None);
        assert_eq!(leave.subscribed_topic_regex, None);
        assert_eq!(leave.server_assignor, None);
        assert!(leave.topic_partitions.is_none());
        assert_eq!(events(&mut m), vec![GroupEvent::Revoked(set(&[0, 1]))]);
        // Offsets of the revoked partitions still commit with the epoch.
        assert_eq!(m.commit_generation(), Some((1, "member-1")));
        assert!(m.assignment().is_empty());

        let mut s = joined(t0, &[0], Some("pod-1"));
        let leave = s.leave().expect("leave");
        assert_eq!(leave.member_epoch, STATIC_LEAVE_EPOCH);
        assert_eq!(leave.instance_id.as_deref(), Some("pod-1"));
        // Joining again (same process) keeps the member id.
        let rejoin = s.poll_heartbeat(t0, &names()).expect("rejoin");
        assert_eq!(rejoin.member_epoch, 0);
        assert_eq!(rejoin.member_id, "member-1");
        assert_eq!(rejoin.instance_id.as_deref(), Some("pod-1"));

        let mut never = ConsumerMembership::new(config(None), "x".into());
        assert!(never.leave().is_none(), "nothing to leave");

        // Left while its join (epoch 0) was unanswered: the broker may know
        // it, so it leaves, but it has no epoch to commit with.
        let mut joining = ConsumerMembership::new(config(None), "y".into());
        joining.subscribe(BTreeSet::from(["t".to_owned()]));
        joining.poll_heartbeat(t0, &names()).expect("join");
        let leave = joining.leave().expect("leave while joining");
        assert_eq!(leave.member_epoch, LEAVE_EPOCH);
        assert_eq!(joining.commit_generation(), None);
    }

    #[test]
    fn unknown_topic_ids_wait_for_metadata() {
        let t0 = Instant::now();
        let mut m = ConsumerMembership::new(config(None), "member-1".into());
        m.subscribe(BTreeSet::from(["t".to_owned()]));
        m.poll_heartbeat(t0, &names()).unwrap();
        answer(&mut m, t0, &ok(1, Some(&[0])));
        let empty = BTreeMap::new();
        assert!(m.poll_heartbeat(t0, &empty).is_none(), "nothing to ack");
        assert!(events(&mut m).is_empty());
        assert_eq!(m.unresolved_topic_ids(), &BTreeSet::from([T]));
        // Heartbeats go on meanwhile, at the interval, owning nothing yet.
        let beat = m
            .poll_heartbeat(t0 + Duration::from_secs(2), &empty)
            .expect("a heartbeat while waiting for the name");
        assert_eq!(beat.member_epoch, 1);
        answer(&mut m, t0 + Duration::from_secs(2), &ok(1, None));
        assert_eq!(m.unresolved_topic_ids(), &BTreeSet::from([T]));
        let t1 = t0 + Duration::from_secs(2);
        let ack = m.poll_heartbeat(t1, &names()).expect("acknowledge");
        assert!(m.unresolved_topic_ids().is_empty());
        assert_eq!(owned_sent(&ack), Some(vec![0]));
        assert_eq!(events(&mut m), vec![GroupEvent::Assigned(set(&[0]))]);
    }

    #[test]
    fn a_regex_subscription_goes_with_empty_names_and_changes_go_out_at_once() {
        let t0 = Instant::now();
        let mut m = ConsumerMembership::new(config(None), "member-1".into());
        m.subscribe_regex("t|u".into());
        let join = m.poll_heartbeat(t0, &names()).expect("join");
        // Both set, as librdkafka sends a regex subscription (its mock
        // aborts otherwise): no names, the regex.
        assert_eq!(join.subscribed_topic_names, Some(vec![]));
        assert_eq!(join.subscribed_topic_regex.as_deref(), Some("t|u"));
        answer(&mut m, t0, &ok(1, Some(&[0])));
        let ack = m.poll_heartbeat(t0, &names()).expect("acknowledge");
        assert_eq!(ack.subscribed_topic_names, None, "unchanged: null");
        assert_eq!(ack.subscribed_topic_regex, None);
        answer(&mut m, t0, &ok(1, None));
        // Back to names: both fields again, the regex empty.
        m.subscribe(BTreeSet::from(["t".to_owned()]));
        let r = m.poll_heartbeat(t0, &names()).expect("subscription change");
        assert_eq!(r.subscribed_topic_names, Some(vec!["t".to_owned()]));
        assert_eq!(r.subscribed_topic_regex.as_deref(), Some(""));
        answer(&mut m, t0, &ok(1, None));
        m.subscribe_regex("u".into());
        let r = m.poll_heartbeat(t0, &names()).expect("regex again");
        assert_eq!(r.subscribed_topic_regex.as_deref(), Some("u"));
        assert_eq!(m.regex(), Some("u"));
    }

    #[test]
    fn a_regex_cannot_be_written_at_v0_and_an_invalid_one_stops_the_member() {
        let body = HeartbeatBody(ConsumerGroupHeartbeatRequest {
            group_id: "g".into(),
            subscribed_topic_names: Some(vec![]),
            subscribed_topic_regex: Some("t.*".into()),
            ..ConsumerGroupHeartbeatRequest::default()
        });
        assert!(matches!(
            body.encode_body(&mut Writer::new(), 0),
            Err(EncodeError::FieldNotInVersion { version: 0, .. })
        ));
        body.encode_body(&mut Writer::new(), 1).expect("v1");

        // The cluster refuses to send it: the member stops, once.
        let t0 = Instant::now();
        let mut m = ConsumerMembership::new(config(None), "member-1".into());
        m.subscribe_regex("t.*".into());
        m.poll_heartbeat(t0, &names()).expect("join");
        m.handle_response(
            t0,
            Err(RequestError::Encode(
                ApiKey::ConsumerGroupHeartbeat,
                EncodeError::FieldNotInVersion {
                    what: "SubscribedTopicRegex",
                    version: 0,
                },
            )),
        );
        let failure = m.take_failure().expect("stopped");
        assert!(
            failure.reason.contains("SubscribedTopicRegex"),
            "{failure:?}"
        );
        assert!(m
            .poll_heartbeat(t0 + Duration::from_secs(9), &names())
            .is_none());

        // The broker's INVALID_REGULAR_EXPRESSION, with its words.
        let mut m = ConsumerMembership::new(config(None), "member-2".into());
        m.subscribe_regex("t(".into());
        m.poll_heartbeat(t0, &names()).expect("join");
        let mut refused = error(ErrorCode::InvalidRegularExpression);
        refused.error_message = Some("missing closing )".into());
        answer(&mut m, t0, &refused);
        let failure = m.take_failure().expect("stopped");
        assert_eq!(failure.code, Some(ErrorCode::InvalidRegularExpression));
        assert!(failure.reason.contains("missing closing )"), "{failure:?}");
    }

    #[test]
    fn member_ids_are_kafka_uuid_strings() {
        let a = generate_member_id([1, 2]);
        assert_eq!(a.len(), 22);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_eq!(a, generate_member_id([1, 2]), "the random source decides");
        assert_ne!(a, generate_member_id([1, 3]));
    }

    #[test]
    fn the_regex_is_left_out_of_version_zero() {
        let body = HeartbeatBody(ConsumerGroupHeartbeatRequest {
            group_id: "g".into(),
            subscribed_topic_names: Some(vec!["t".into()]),
            subscribed_topic_regex: Some(String::new()),
            ..ConsumerGroupHeartbeatRequest::default()
        });
        let mut w = Writer::new();
        body.encode_body(&mut w, 0).expect("v0 without the regex");
        let mut w1 = Writer::new();
        body.encode_body(&mut w1, 1).unwrap();
        assert!(w1.into_inner().len() > w.into_inner().len());
    }
}
