//! The KIP-848 coordinator driven heartbeat by heartbeat: epochs,
//! revocation before assignment, fencing, static members, regex
//! subscriptions, topics appearing later, session expiry.

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
fn topics_created_later_are_picked_up_by_name_at_once_and_by_regex_after_the_refresh_interval() {
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
