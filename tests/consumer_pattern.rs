//! `Consumer::subscribe_pattern` under both group protocols, each case on
//! librdkafka's mock cluster and on `lazykafka::mock` with the same
//! assertions, with a librdkafka consumer subscribed by pattern in the
//! same group (librdkafka reads a subscription starting with `^` as a
//! regular expression):
//!
//! - classic: our consumer matches the pattern against metadata for every
//!   topic, librdkafka does the same on its side; they split the matching
//!   topics' partitions, hand them over when librdkafka leaves, and every
//!   record of the matching topics is read (none of the others); a topic
//!   created later is picked up at the next metadata refresh;
//! - consumer (KIP-848): the pattern goes to the coordinator as
//!   SubscribedTopicRegex. librdkafka's mock resolves it
//!   (`rd_kafka_mock_cgrp_consumer_member_subscribed_topic_names_set`
//!   matches the regex against its topics at every heartbeat, with
//!   librdkafka's own regex engine, which searches rather than matches
//!   whole names: the topics here are named so that both readings agree);
//!   `lazykafka::mock` resolves it as Kafka does, and a librdkafka member
//!   with a regex subscription judges that side. A topic created after
//!   both subscribed reaches the members as a topic id, which our consumer
//!   names with Metadata v12 by id.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::TestCluster;
use common::peers::{config, logs, produce, produce_range, RdConsumer, WAIT};
use common::polling::{poll_until, records_through_faults, Commit, Polling};
use common::{client_sockets, wait_for};
use lazykafka::group::GroupProtocol;
use lazykafka::mock::MockCluster;
use lazykafka::{Consumer, ConsumerConfig, Error, OffsetReset};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

on_both_mocks!(
    classic_pattern_members_split_hand_over_and_read_every_matching_record,
    a_classic_pattern_picks_up_a_topic_created_later,
    kip848_regex_members_split_pick_up_a_new_topic_and_hand_over,
);

/// One test at a time: each drives rebalances paced by the mocks' timers.
static ONE_AT_A_TIME: async_std::sync::Mutex<()> = async_std::sync::Mutex::new(());

const JOIN_GROUP: i16 = 11;
const CONSUMER_GROUP_HEARTBEAT: i16 = 68;
const METADATA: i16 = 3;

type Seen = BTreeSet<(String, i32, i64)>;

/// Three brokers; `pat-a` and `pat-b` (two partitions each, led by
/// brokers 1 and 3) match `pat-.*`, `other` does not; group `g` on broker
/// 2. `per_topic` records in each partition's topic, `key-i`.
fn cluster<C: TestCluster>(per_topic: usize) -> C {
    let mock = C::start(3);
    for topic in ["pat-a", "pat-b", "other"] {
        mock.create_topic(topic, &[1, 3]);
    }
    mock.set_coordinator("g", 2);
    for topic in ["pat-a", "pat-b", "other"] {
        produce(&mock.bootstrap(), topic, 2, per_topic, "none");
    }
    mock
}

/// Every (topic, partition, offset) `count` records spread over two
/// partitions of each of `topics` hold.
fn all_records(topics: &[&str], count: usize) -> Seen {
    let mut all = Seen::new();
    for topic in topics {
        for p in 0..2 {
            let n = (0..count).filter(|i| i % 2 == p).count() as i64;
            all.extend((0..n).map(|o| (topic.to_string(), p as i32, o)));
        }
    }
    all
}

fn held(c: &Consumer) -> BTreeSet<(String, i32)> {
    c.assignment()
        .into_iter()
        .map(|tp| (tp.topic, tp.partition))
        .collect()
}

/// Polls (committing after records) until `cond` holds; fails the test
/// with `what` at [`WAIT`].
async fn read_until(
    ours: &Consumer,
    seen: &mut Seen,
    what: &str,
    cond: impl FnMut(&Consumer, &Seen) -> bool,
) {
    // A commit refused in a rebalance shows up as a record read twice,
    // which the tests allow (at least once).
    let polling = Polling::every(100).committing(Commit::ThroughFaults);
    let keep = |seen: &mut Seen, polled| {
        seen.extend(
            records_through_faults(polled)
                .iter()
                .map(|r| (r.topic().to_owned(), r.partition(), r.offset())),
        )
    };
    assert!(
        poll_until(ours, seen, polling, keep, cond).await,
        "{what}: not within {WAIT:?}; lazykafka holds {:?}; warnings: {:?}",
        held(ours),
        logs::find(log::Level::Warn, "")
    );
}

/// Two members hold disjoint sets that together are `all`, each non-empty.
fn split(a: &BTreeSet<(String, i32)>, b: &BTreeSet<(String, i32)>, all: usize) -> bool {
    !a.is_empty() && !b.is_empty() && a.is_disjoint(b) && a.len() + b.len() == all
}

async fn classic_pattern_members_split_hand_over_and_read_every_matching_record<C: TestCluster>() {
    let _one = ONE_AT_A_TIME.lock().await;
    logs::capture();
    let mock: C = cluster(40);
    let bootstrap = mock.bootstrap();
    let ours = Consumer::new(
        config(&bootstrap, Some("g"))
            .set("partition.assignment.strategy", "range")
            .unwrap()
            .build()
            .unwrap(),
    )
    .unwrap();
    ours.subscribe_pattern("pat-.*").unwrap();
    assert_eq!(ours.subscription_pattern().as_deref(), Some("pat-.*"));
    let mut seen = Seen::new();
    read_until(&ours, &mut seen, "all four partitions alone", |c, _| {
        held(c).len() == 4
    })
    .await;
    assert_eq!(
        ours.subscription(),
        BTreeSet::from(["pat-a".to_owned(), "pat-b".to_owned()])
    );

    // librdkafka, subscribed by its own regex, joins the classic group.
    let mut rd = RdConsumer::start(&bootstrap, "g", "^pat-.*");
    read_until(&ours, &mut seen, "a split with librdkafka", |c, _| {
        split(&held(c), &rd.topic_assignment(), 4)
    })
    .await;
    // More records, so that librdkafka reads (and commits) its share
    // before it leaves.
    for topic in ["pat-a", "pat-b", "other"] {
        produce_range(&bootstrap, topic, 2, 40..60, "none");
    }
    read_until(&ours, &mut seen, "librdkafka reading", |_, _| {
        !rd.seen_records().is_empty()
    })
    .await;
    rd.stop();
    read_until(&ours, &mut seen, "all four again", |c, _| {
        held(c).len() == 4
    })
    .await;
    let expected = all_records(&["pat-a", "pat-b"], 60);
    read_until(&ours, &mut seen, "every matching record", |_, seen| {
        let mut all = seen.clone();
        all.extend(rd.seen_records());
        all.is_superset(&expected)
    })
    .await;
    let mut all = seen.clone();
    all.extend(rd.seen_records());
    assert_eq!(all, expected, "{}: only the matching topics", mock.name());
    ours.close().await.unwrap();
}

async fn a_classic_pattern_picks_up_a_topic_created_later<C: TestCluster>() {
    let _one = ONE_AT_A_TIME.lock().await;
    logs::capture();
    let mock: C = cluster(10);
    let bootstrap = mock.bootstrap();
    let ours = Consumer::new(
        config(&bootstrap, Some("g"))
            .metadata_max_age(Duration::from_millis(500))
            .build()
            .unwrap(),
    )
    .unwrap();
    ours.subscribe_pattern("pat-.*").unwrap();
    let mut seen = Seen::new();
    let before = all_records(&["pat-a", "pat-b"], 10);
    read_until(&ours, &mut seen, "the two topics' records", |_, seen| {
        seen.is_superset(&before)
    })
    .await;
    mock.clear_requests();

    mock.create_topic("pat-c", &[3, 1]);
    produce(&bootstrap, "pat-c", 2, 6, "none");
    let after = all_records(&["pat-c"], 6);
    read_until(&ours, &mut seen, "the new topic's records", |_, seen| {
        seen.is_superset(&after)
    })
    .await;
    assert!(ours.subscription().contains("pat-c"));
    assert!(
        seen.iter().all(|(t, _, _)| t.starts_with("pat-")),
        "{}: {seen:?}",
        mock.name()
    );
    // It took a rejoin, after a Metadata answer that listed it.
    let requests = mock.requests();
    assert!(requests.iter().any(|(_, api)| *api == JOIN_GROUP));
    assert!(requests.iter().any(|(_, api)| *api == METADATA));
    ours.close().await.unwrap();
}

fn kip848(bootstrap: &str) -> Consumer {
    Consumer::new(
        ConsumerConfig::builder()
            .bootstrap_servers(bootstrap)
            .group_id("g")
            .group_protocol(GroupProtocol::Consumer)
            .auto_offset_reset(OffsetReset::Earliest)
            .fetch_max_wait(Duration::from_millis(100))
            .enable_auto_commit(false)
            .build()
            .unwrap(),
    )
    .unwrap()
}

async fn kip848_regex_members_split_pick_up_a_new_topic_and_hand_over<C: TestCluster>() {
    let _one = ONE_AT_A_TIME.lock().await;
    logs::capture();
    let mock: C = cluster(20);
    mock.set_consumer_group_timing(300, 6_000);
    mock.set_regex_refresh(500);
    let bootstrap = mock.bootstrap();
    let ours = kip848(&bootstrap);
    ours.subscribe_pattern("pat-.*").unwrap();
    let mut seen = Seen::new();
    read_until(&ours, &mut seen, "all four partitions alone", |c, _| {
        held(c).len() == 4
    })
    .await;

    // librdkafka joins with a regex subscription of its own.
    let mut rd = RdConsumer::start_kip848(&bootstrap, "g", "^pat-.*", &[]);
    read_until(&ours, &mut seen, "a split with librdkafka", |c, _| {
        split(&held(c), &rd.topic_assignment(), 4)
    })
    .await;

    // A matching topic created now reaches both through the coordinator.
    mock.create_topic("pat-c", &[1, 3]);
    produce(&bootstrap, "pat-c", 2, 10, "none");
    read_until(&ours, &mut seen, "pat-c split too", |c, _| {
        let (a, b) = (held(c), rd.topic_assignment());
        let with_c = a.iter().chain(&b).filter(|(t, _)| t == "pat-c").count();
        split(&a, &b, 6) && with_c == 2
    })
    .await;

    rd.stop();
    read_until(&ours, &mut seen, "all six", |c, _| held(c).len() == 6).await;
    let expected = all_records(&["pat-a", "pat-b"], 20)
        .union(&all_records(&["pat-c"], 10))
        .cloned()
        .collect::<Seen>();
    read_until(&ours, &mut seen, "every matching record", |_, seen| {
        let mut all = seen.clone();
        all.extend(rd.seen_records());
        all.is_superset(&expected)
    })
    .await;
    let mut all = seen.clone();
    all.extend(rd.seen_records());
    assert_eq!(all, expected, "{}: only the matching topics", mock.name());
    // Group traffic: ConsumerGroupHeartbeat, never a JoinGroup.
    let requests = mock.requests();
    assert!(requests
        .iter()
        .any(|(_, api)| *api == CONSUMER_GROUP_HEARTBEAT));
    assert!(requests.iter().all(|(_, api)| *api != JOIN_GROUP));
    ours.close().await.unwrap();
}

/// Internal topics never match a classic pattern while
/// `exclude.internal.topics` is true (the default), and do with `false`.
/// On `lazykafka::mock` only: it describes `__consumer_offsets` as
/// internal, as a broker does; librdkafka's mock sets IsInternal on no
/// topic (`rd_kafka_mock_buf_write_Metadata_Topic` writes false).
#[test]
fn internal_topics_match_only_without_exclude_internal_topics() {
    crate::common::block_on(async {
        let _one = ONE_AT_A_TIME.lock().await;
        let mock = MockCluster::new(1).unwrap();
        mock.create_topic("__consumer_offsets", 1).unwrap();
        mock.create_topic("__audit", 1).unwrap();
        for exclude in [true, false] {
            let group = format!("internal-{exclude}");
            let c = Consumer::new(
                config(&mock.bootstrap_servers(), Some(&group))
                    .exclude_internal_topics(exclude)
                    .build()
                    .unwrap(),
            )
            .unwrap();
            c.subscribe_pattern("__.*").unwrap();
            let want: BTreeSet<String> = if exclude {
                BTreeSet::from(["__audit".to_owned()])
            } else {
                BTreeSet::from(["__audit".to_owned(), "__consumer_offsets".to_owned()])
            };
            let deadline = Instant::now() + WAIT;
            loop {
                let topics: BTreeSet<String> =
                    c.assignment().into_iter().map(|tp| tp.topic).collect();
                if topics == want {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "exclude={exclude}: assigned {topics:?}"
                );
                c.poll(Duration::from_millis(100)).await.unwrap();
            }
            assert_eq!(c.subscription(), want);
            c.close().await.unwrap();
        }
    })
}

/// A bad pattern is a typed error before anything is opened, and leaves
/// the subscription as it was; without `group.id` there is no pattern
/// subscription.
#[test]
fn a_bad_pattern_is_refused_and_opens_nothing() {
    let mock = MockCluster::new(1).unwrap();
    let port = mock.broker_addr(1).unwrap().port();
    let c = Consumer::new(
        config(&mock.bootstrap_servers(), Some("g"))
            .build()
            .unwrap(),
    )
    .unwrap();
    c.subscribe_pattern("ok-.*").unwrap();
    for bad in ["", "pat-(", "a)|(b", r"(a)\1"] {
        match c.subscribe_pattern(bad) {
            Err(Error::InvalidPattern { pattern, reason }) => {
                assert_eq!(pattern, bad);
                assert!(!reason.is_empty());
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert_eq!(c.subscription_pattern().as_deref(), Some("ok-.*"));
    let e = c
        .subscribe_pattern_with_listener("x(", NoListener)
        .unwrap_err();
    assert!(e.to_string().contains("x("), "{e}");
    assert!(!e.is_retriable() && !e.is_fatal());
    let manual = Consumer::new(config(&mock.bootstrap_servers(), None).build().unwrap()).unwrap();
    assert!(matches!(
        manual.subscribe_pattern("ok-.*"),
        Err(Error::Config { property, .. }) if property == "group.id"
    ));
    assert!(
        !wait_for(Duration::from_millis(300), || !client_sockets(&[port])
            .is_empty()),
        "a socket before the first poll"
    );
    assert!(mock.requests().is_empty());
}

struct NoListener;
impl lazykafka::RebalanceListener for NoListener {}
