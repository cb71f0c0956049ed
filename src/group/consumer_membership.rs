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
                    api: ApiKey::ConsumerGroupHeartbeat,
                    code: None,
                    reason: format!("cannot write ConsumerGroupHeartbeat: {e}"),
                });
            }
            Err(RequestError::NoCommonVersion(e)) => {
                self.lose_partitions();
                return self.fail(GroupFailure {
                    api: ApiKey::ConsumerGroupHeartbeat,
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
                self.heartbeat_accepted(now, sent, r);
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
                    api: ApiKey::ConsumerGroupHeartbeat,
                    code: Some(code),
                    reason: format!("ConsumerGroupHeartbeat failed: {code}{detail}"),
                })
            }
            code if code.is_retriable() => self.retry_later(now, false),
            code => {
                self.lose_partitions();
                self.fail(GroupFailure {
                    api: ApiKey::ConsumerGroupHeartbeat,
                    code: Some(code),
                    reason: format!("ConsumerGroupHeartbeat failed: {code}"),
                })
            }
        }
    }

    /// A heartbeat answered without error: the member id (v0), the
    /// interval, what the coordinator now knows of the subscription and
    /// owned partitions, the epoch and the target assignment.
    fn heartbeat_accepted(&mut self, now: Instant, sent: Sent, r: ConsumerGroupHeartbeatResponse) {
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
mod tests;
