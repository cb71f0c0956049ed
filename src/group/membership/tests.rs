//! The classic group membership stepped through with hand-built
//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup responses and a manual
//! clock: no broker, no sleep.

use super::*;
use crate::protocol::messages::join_group::JoinGroupResponseMember;
use crate::protocol::{Message, Writer};

fn config(strategies: Vec<AssignmentStrategy>) -> MembershipConfig {
    MembershipConfig {
        group_id: "g".into(),
        group_instance_id: None,
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(30),
        heartbeat_interval: Duration::from_secs(3),
        strategies,
        rack: None,
        retry_backoff: ExponentialBackoff {
            base: Duration::from_millis(100),
            max: Duration::from_millis(1000),
            jitter: 0.0,
        },
        seed: 1,
    }
}

fn response<M: Message>(m: &M, version: i16) -> Result<Response, RequestError> {
    let mut w = Writer::new();
    m.encode(&mut w, version).unwrap();
    Ok(Response {
        api: M::API_KEY,
        version,
        broker: Some(1),
        body: w.into_inner().freeze(),
    })
}

fn counts() -> BTreeMap<String, i32> {
    BTreeMap::from([("t".to_owned(), 4)])
}

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p)
}

fn subscription(topics: &[&str]) -> Bytes {
    ConsumerProtocolSubscription {
        topics: topics.iter().map(|t| t.to_string()).collect(),
        user_data: None,
        owned_partitions: Vec::new(),
        generation_id: -1,
        rack_id: None,
    }
    .to_bytes(CONSUMER_PROTOCOL_VERSION)
    .unwrap()
}

fn assignment(tps: &[TopicPartition]) -> Bytes {
    let set: BTreeSet<TopicPartition> = tps.iter().cloned().collect();
    ConsumerProtocolAssignment {
        assigned_partitions: to_wire(&set),
        user_data: None,
    }
    .to_bytes(CONSUMER_PROTOCOL_VERSION)
    .unwrap()
}

fn join_ok(
    member: &str,
    leader: &str,
    generation: i32,
    members: &[(&str, Bytes)],
) -> JoinGroupResponse {
    JoinGroupResponse {
        generation_id: generation,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        leader: leader.into(),
        member_id: member.into(),
        members: members
            .iter()
            .map(|(id, metadata)| JoinGroupResponseMember {
                member_id: id.to_string(),
                metadata: metadata.clone(),
                ..JoinGroupResponseMember::default()
            })
            .collect(),
        ..JoinGroupResponse::default()
    }
}

fn sync_ok(tps: &[TopicPartition]) -> SyncGroupResponse {
    SyncGroupResponse {
        assignment: assignment(tps),
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        ..SyncGroupResponse::default()
    }
}

fn events(m: &mut Membership) -> Vec<GroupEvent> {
    std::iter::from_fn(|| m.poll_event()).collect()
}

/// Joins as the only member (the leader) and returns the member.
fn stable_leader(strategies: Vec<AssignmentStrategy>, now: Instant) -> Membership {
    let mut m = Membership::new(config(strategies));
    m.subscribe(BTreeSet::from(["t".to_owned()]));
    let (kind, _) = m.poll_request(now, &counts()).expect("join");
    assert_eq!(kind, GroupRequestKind::Join);
    // KIP-394: the first join is answered with a member id to use.
    let required = JoinGroupResponse {
        error_code: ErrorCode::MemberIdRequired.code(),
        member_id: "m1".into(),
        ..JoinGroupResponse::default()
    };
    m.handle_response(now, kind, response(&required, 9));
    assert_eq!(m.member_id(), "m1");
    let (kind, _) = m.poll_request(now, &counts()).expect("join again");
    assert_eq!(kind, GroupRequestKind::Join);
    let joined = join_ok("m1", "m1", 1, &[("m1", subscription(&["t"]))]);
    m.handle_response(now, kind, response(&joined, 9));
    let (kind, _) = m.poll_request(now, &counts()).expect("sync");
    assert_eq!(kind, GroupRequestKind::Sync);
    m.handle_response(
        now,
        kind,
        response(&sync_ok(&[tp(0), tp(1), tp(2), tp(3)]), 5),
    );
    assert!(m.is_stable());
    m
}

#[test]
fn joins_with_the_member_id_round_then_syncs_and_heartbeats() {
    let t0 = Instant::now();
    let mut m = stable_leader(vec![AssignmentStrategy::Range], t0);
    assert_eq!(
        events(&mut m),
        vec![GroupEvent::Assigned(BTreeSet::from([
            tp(0),
            tp(1),
            tp(2),
            tp(3)
        ]))]
    );
    assert_eq!(m.generation(), 1);
    // The next heartbeat is due after heartbeat.interval.ms, not before.
    assert!(m
        .poll_request(t0 + Duration::from_millis(2999), &counts())
        .is_none());
    assert_eq!(m.next_deadline(), Some(t0 + Duration::from_secs(3)));
    let (kind, _) = m
        .poll_request(t0 + Duration::from_secs(3), &counts())
        .unwrap();
    assert_eq!(kind, GroupRequestKind::Heartbeat);
    // Only one group request at a time.
    assert!(m
        .poll_request(t0 + Duration::from_secs(9), &counts())
        .is_none());
}

#[test]
fn the_leader_waits_for_metadata_of_every_subscribed_topic() {
    let t0 = Instant::now();
    let mut m = Membership::new(config(vec![AssignmentStrategy::Range]));
    m.subscribe(BTreeSet::from(["t".to_owned()]));
    let (kind, _) = m.poll_request(t0, &counts()).unwrap();
    let joined = join_ok(
        "m1",
        "m1",
        1,
        &[
            ("m1", subscription(&["t"])),
            ("m2", subscription(&["t", "u"])),
        ],
    );
    m.handle_response(t0, kind, response(&joined, 9));
    assert!(m.poll_request(t0, &counts()).is_none());
    assert_eq!(
        m.state(),
        &MemberState::AwaitingMetadata(BTreeSet::from(["u".to_owned()]))
    );
    let mut more = counts();
    more.insert("u".into(), 1);
    let (kind, _) = m.poll_request(t0, &more).unwrap();
    assert_eq!(kind, GroupRequestKind::Sync);
}

#[test]
fn eager_rebalance_revokes_everything_before_joining_again() {
    let t0 = Instant::now();
    let mut m = stable_leader(vec![AssignmentStrategy::Range], t0);
    events(&mut m);
    let t1 = t0 + Duration::from_secs(3);
    let (kind, _) = m.poll_request(t1, &counts()).unwrap();
    let rebalance = HeartbeatResponse {
        error_code: ErrorCode::RebalanceInProgress.code(),
        ..HeartbeatResponse::default()
    };
    m.handle_response(t1, kind, response(&rebalance, 4));
    assert_eq!(
        events(&mut m),
        vec![GroupEvent::Revoked(BTreeSet::from([
            tp(0),
            tp(1),
            tp(2),
            tp(3)
        ]))]
    );
    assert!(m.assignment().is_empty());
    // The revoked partitions' offsets are committed with the generation
    // that owned them, which the coordinator still accepts.
    assert!(!m.is_stable());
    assert_eq!(m.commit_generation(), Some((1, "m1")));
    let (kind, _) = m.poll_request(t1, &counts()).unwrap();
    assert_eq!(kind, GroupRequestKind::Join);
}

#[test]
fn cooperative_rebalance_keeps_partitions_and_revokes_only_what_moves() {
    let t0 = Instant::now();
    let mut m = stable_leader(vec![AssignmentStrategy::CooperativeSticky], t0);
    events(&mut m);
    let t1 = t0 + Duration::from_secs(3);
    let (kind, _) = m.poll_request(t1, &counts()).unwrap();
    let rebalance = HeartbeatResponse {
        error_code: ErrorCode::RebalanceInProgress.code(),
        ..HeartbeatResponse::default()
    };
    m.handle_response(t1, kind, response(&rebalance, 4));
    // Nothing revoked yet: the member keeps consuming while it rejoins.
    assert!(events(&mut m).is_empty());
    assert_eq!(m.assignment().len(), 4);
    let (kind, _) = m.poll_request(t1, &counts()).unwrap();
    assert_eq!(kind, GroupRequestKind::Join);
    // As a follower this time; the new assignment takes two partitions.
    let joined = join_ok("m1", "m0", 2, &[]);
    m.handle_response(t1, kind, response(&joined, 9));
    let (kind, _) = m.poll_request(t1, &counts()).unwrap();
    assert_eq!(kind, GroupRequestKind::Sync);
    m.handle_response(t1, kind, response(&sync_ok(&[tp(0), tp(1)]), 5));
    // The revocation, then the (empty) assignment that ends the
    // rebalance, as the Java client calls its listener (KIP-429).
    assert_eq!(
        events(&mut m),
        vec![
            GroupEvent::Revoked(BTreeSet::from([tp(2), tp(3)])),
            GroupEvent::Assigned(BTreeSet::new())
        ]
    );
    // KIP-429: a follow-up join hands the revoked partitions over.
    let (kind, _) = m.poll_request(t1, &counts()).unwrap();
    assert_eq!(kind, GroupRequestKind::Join);
}

#[test]
fn a_session_without_successful_heartbeats_loses_the_partitions() {
    let t0 = Instant::now();
    let mut m = stable_leader(vec![AssignmentStrategy::Range], t0);
    events(&mut m);
    let t1 = t0 + Duration::from_secs(3);
    let (kind, _) = m.poll_request(t1, &counts()).unwrap();
    m.handle_response(
        t1,
        kind,
        Err(RequestError::Timeout {
            api: crate::protocol::ApiKey::Heartbeat,
            last_error: None,
        }),
    );
    assert!(m
        .poll_request(t0 + Duration::from_millis(9999), &counts())
        .is_some());
    m.handle_response(
        t0 + Duration::from_millis(9999),
        GroupRequestKind::Heartbeat,
        Err(RequestError::Timeout {
            api: crate::protocol::ApiKey::Heartbeat,
            last_error: None,
        }),
    );
    assert!(m.is_stable());
    // The session ends at t0 + 10 s: the partitions are lost then, and
    // the member joins again once the retry backoff has passed.
    assert!(m
        .poll_request(t0 + Duration::from_secs(10), &counts())
        .is_none());
    assert_eq!(
        events(&mut m),
        vec![GroupEvent::Lost(BTreeSet::from([
            tp(0),
            tp(1),
            tp(2),
            tp(3)
        ]))]
    );
    // Two failures in a row: the second waits 200 ms, from 9.999 s.
    assert!(m
        .poll_request(t0 + Duration::from_millis(10_150), &counts())
        .is_none());
    let (kind, _) = m
        .poll_request(t0 + Duration::from_millis(10_200), &counts())
        .unwrap();
    assert_eq!(kind, GroupRequestKind::Join);
}

#[test]
fn unknown_member_id_resets_the_member_and_loses_partitions() {
    // GROUP_ID_NOT_FOUND: the coordinator (another cluster's, after a
    // rebootstrap) holds no such group, nor this member.
    for code in [ErrorCode::UnknownMemberId, ErrorCode::GroupIdNotFound] {
        let t0 = Instant::now();
        let mut m = stable_leader(vec![AssignmentStrategy::Range], t0);
        events(&mut m);
        let t1 = t0 + Duration::from_secs(3);
        let (kind, _) = m.poll_request(t1, &counts()).unwrap();
        let fenced = HeartbeatResponse {
            error_code: code.code(),
            ..HeartbeatResponse::default()
        };
        m.handle_response(t1, kind, response(&fenced, 4));
        assert_eq!(m.member_id(), "", "{code}");
        assert!(
            matches!(events(&mut m)[..], [GroupEvent::Lost(_)]),
            "{code}"
        );
        assert!(m.take_failure().is_none(), "{code}: the member goes on");
        let (kind, _) = m.poll_request(t1, &counts()).unwrap();
        assert_eq!(kind, GroupRequestKind::Join, "{code}: joins again");
    }
}

#[test]
fn a_refused_sync_with_a_null_assignment_is_read_as_its_error() {
    let t0 = Instant::now();
    let mut m = Membership::new(config(vec![AssignmentStrategy::Range]));
    m.subscribe(BTreeSet::from(["t".to_owned()]));
    let (kind, _) = m.poll_request(t0, &counts()).unwrap();
    m.handle_response(t0, kind, response(&join_ok("m1", "m0", 3, &[]), 9));
    let (kind, _) = m.poll_request(t0, &counts()).unwrap();
    assert_eq!(kind, GroupRequestKind::Sync);
    // SyncGroup v3 as librdkafka's mock sends it: throttle time 0,
    // REBALANCE_IN_PROGRESS (27), and a null (-1) assignment.
    let body: &[u8] = &[0, 0, 0, 0, 0, 27, 0xff, 0xff, 0xff, 0xff];
    let refused = Ok(Response {
        api: crate::protocol::ApiKey::SyncGroup,
        version: 3,
        broker: Some(1),
        body: Bytes::from_static(body),
    });
    let outcome = m.handle_response(t0, kind, refused);
    assert!(!outcome.coordinator_unknown, "the coordinator is fine");
    let (kind, _) = m.poll_request(t0, &counts()).unwrap();
    assert_eq!(kind, GroupRequestKind::Join, "rejoins at once");
}

#[test]
fn a_fatal_error_stops_the_member() {
    let t0 = Instant::now();
    let mut m = Membership::new(config(vec![AssignmentStrategy::Range]));
    m.subscribe(BTreeSet::from(["t".to_owned()]));
    let (kind, _) = m.poll_request(t0, &counts()).unwrap();
    let denied = JoinGroupResponse {
        error_code: ErrorCode::GroupAuthorizationFailed.code(),
        ..JoinGroupResponse::default()
    };
    m.handle_response(t0, kind, response(&denied, 9));
    assert!(
        matches!(m.state(), MemberState::Failed(r) if r.contains("GROUP_AUTHORIZATION_FAILED"))
    );
    assert!(m
        .poll_request(t0 + Duration::from_secs(60), &counts())
        .is_none());
}

#[test]
fn a_sync_group_refused_with_an_unexpected_error_joins_again_after_the_backoff() {
    let t0 = Instant::now();
    let mut m = Membership::new(config(vec![AssignmentStrategy::Range]));
    m.subscribe(BTreeSet::from(["t".to_owned()]));
    let (kind, _) = m.poll_request(t0, &counts()).unwrap();
    m.handle_response(t0, kind, response(&join_ok("m1", "m0", 1, &[]), 9));
    let (kind, _) = m.poll_request(t0, &counts()).unwrap();
    assert_eq!(kind, GroupRequestKind::Sync);
    let refused = SyncGroupResponse {
        error_code: ErrorCode::InvalidRequest.code(),
        ..SyncGroupResponse::default()
    };
    m.handle_response(t0, kind, response(&refused, 5));
    assert_eq!(m.state(), &MemberState::Joining);
    assert!(m.poll_request(t0, &counts()).is_none(), "backs off first");
    let later = m.next_deadline().expect("a deadline to join again");
    let (kind, _) = m.poll_request(later, &counts()).unwrap();
    assert_eq!(kind, GroupRequestKind::Join);
}

#[test]
fn leaving_revokes_and_sends_leave_group_for_dynamic_members_only() {
    let t0 = Instant::now();
    let mut m = stable_leader(vec![AssignmentStrategy::Range], t0);
    events(&mut m);
    assert!(m.leave("closing").is_some());
    assert!(matches!(events(&mut m)[..], [GroupEvent::Revoked(_)]));
    assert_eq!(m.state(), &MemberState::Unjoined);

    let mut cfg = config(vec![AssignmentStrategy::Range]);
    cfg.group_instance_id = Some("static-1".into());
    let mut s = Membership::new(cfg);
    s.subscribe(BTreeSet::from(["t".to_owned()]));
    let (kind, _) = s.poll_request(t0, &counts()).unwrap();
    s.handle_response(
        t0,
        kind,
        response(&join_ok("s1", "s1", 1, &[("s1", subscription(&["t"]))]), 9),
    );
    assert!(
        s.leave("closing").is_none(),
        "static members keep their place"
    );

    // Its first JoinGroup unanswered, no member id yet: nothing to
    // leave, and nothing to commit with.
    let mut joining = Membership::new(config(vec![AssignmentStrategy::Range]));
    joining.subscribe(BTreeSet::from(["t".to_owned()]));
    joining.poll_request(t0, &counts()).expect("join");
    assert!(joining.leave("closing").is_none());
    assert_eq!(joining.commit_generation(), None);
}

/// While a heartbeat is in flight its answer moves the member on, not
/// time: the next heartbeat's time, already past, is no deadline (one
/// in the past would wake the driver again and again); the session's
/// end still is.
#[test]
fn a_heartbeat_in_flight_leaves_only_the_session_end_as_deadline() {
    let t0 = Instant::now();
    let mut m = stable_leader(vec![AssignmentStrategy::Range], t0);
    let due = t0 + Duration::from_secs(3);
    let (kind, _) = m.poll_request(due, &counts()).expect("heartbeat");
    assert_eq!(kind, GroupRequestKind::Heartbeat);
    assert_eq!(m.next_deadline(), Some(t0 + Duration::from_secs(10)));
}

#[test]
fn leave_group_encodes_at_every_version() {
    let t0 = Instant::now();
    let mut m = stable_leader(vec![AssignmentStrategy::Range], t0);
    let leave = m
        .leave("closing")
        .expect("a dynamic member sends LeaveGroup");
    for version in 0..=5 {
        let mut w = crate::protocol::Writer::new();
        leave
            .encode_body(&mut w, version)
            .unwrap_or_else(|e| panic!("LeaveGroup v{version}: {e}"));
        let bytes = w.into_inner().freeze();
        let mut r = crate::protocol::Reader::new(bytes);
        let decoded =
            <LeaveGroupRequest as crate::protocol::Message>::decode(&mut r, version).unwrap();
        let member = if version < 3 {
            decoded.member_id
        } else {
            decoded.members[0].member_id.clone()
        };
        assert_eq!(member, "m1", "v{version}");
    }
}

/// Each JoinGroup is counted under why it went out, and carries that
/// reason (JoinGroup v8+, KIP-800): the first join, the KIP-394 round, and
/// a heartbeat that answered REBALANCE_IN_PROGRESS.
#[test]
fn each_join_is_counted_and_sent_with_its_reason() {
    use crate::protocol::messages::join_group::JoinGroupRequest;
    let t0 = Instant::now();
    let mut m = stable_leader(vec![AssignmentStrategy::Range], t0);
    assert_eq!(
        m.joins().iter().map(|(r, n)| (*r, *n)).collect::<Vec<_>>(),
        [
            (
                "MEMBER_ID_REQUIRED: again with the member id given (KIP-394)",
                1
            ),
            ("first join", 1)
        ]
    );
    let t1 = t0 + Duration::from_secs(3);
    let (kind, _) = m.poll_request(t1, &counts()).unwrap();
    let rebalance = HeartbeatResponse {
        error_code: ErrorCode::RebalanceInProgress.code(),
        ..HeartbeatResponse::default()
    };
    m.handle_response(t1, kind, response(&rebalance, 4));
    events(&mut m);
    let (kind, body) = m.poll_request(t1, &counts()).unwrap();
    assert_eq!(kind, GroupRequestKind::Join);
    let reason = "a heartbeat answered REBALANCE_IN_PROGRESS";
    assert_eq!(m.joins().get(reason), Some(&1));
    let mut w = crate::protocol::Writer::new();
    body.encode_body(&mut w, 9).unwrap();
    let mut r = crate::protocol::Reader::new(w.into_inner().freeze());
    let sent = <JoinGroupRequest as crate::protocol::Message>::decode(&mut r, 9).unwrap();
    assert_eq!(sent.reason.as_deref(), Some(reason));
}

/// A JoinGroup that the coordinator could not serve is sent again and
/// counted under a reason of its own, not as a second first join.
#[test]
fn a_join_sent_again_after_coordinator_trouble_is_counted_as_such() {
    let t0 = Instant::now();
    let mut m = Membership::new(config(vec![AssignmentStrategy::Range]));
    m.subscribe(BTreeSet::from(["t".to_owned()]));
    let (kind, _) = m.poll_request(t0, &counts()).expect("the first JoinGroup");
    assert_eq!(kind, GroupRequestKind::Join);
    let loading = JoinGroupResponse {
        error_code: ErrorCode::CoordinatorLoadInProgress.code(),
        ..JoinGroupResponse::default()
    };
    m.handle_response(t0, kind, response(&loading, 5));
    assert!(
        m.poll_request(t0, &counts()).is_none(),
        "the retry waits for the backoff"
    );
    let t1 = t0 + Duration::from_secs(2);
    let (kind, _) = m.poll_request(t1, &counts()).expect("the JoinGroup again");
    assert_eq!(kind, GroupRequestKind::Join);
    let joins: Vec<_> = m.joins().iter().map(|(r, n)| (*r, *n)).collect();
    assert_eq!(joins, [("first join", 1), (JOIN_AGAIN, 1)]);
}
