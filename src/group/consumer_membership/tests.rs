//! The KIP-848 group membership stepped through with hand-built
//! ConsumerGroupHeartbeat responses and a manual clock: no broker, no
//! sleep.

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
        assert_eq!(failure.api, ApiKey::ConsumerGroupHeartbeat);
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
