//! The consumer group protocol of KIP-848 (`group.protocol=consumer`) with
//! a librdkafka consumer speaking it in the same group, each case on
//! librdkafka's mock cluster (the bundled librdkafka 2.12 serves
//! ConsumerGroupHeartbeat v1 with a server-side range assignor), on
//! librdkafka 2.16's (a child process, `tests/common/mock216.rs`: it
//! refuses a heartbeat at member epoch 0 that is not a full join, as Kafka
//! does) and on `lazykafka::mock`, with the same assertions: the split, the
//! hand-over when one member leaves, two lazykafka members splitting a
//! topic, no record lost, no JoinGroup/SyncGroup at all, every
//! ConsumerGroupHeartbeat to the coordinator only (request logs), fencing
//! and fatal errors injected, static membership.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::TestCluster;
use common::peers::{logs, produce, produce_range, RdConsumer, WAIT};
use common::polling::{poll_until, records_strictly, Commit, Polling};
use lazykafka::group::GroupProtocol;
use lazykafka::protocol::ApiKey;
use lazykafka::{Consumer, ConsumerConfig, Error, ErrorCode, OffsetReset};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const CONSUMER_GROUP_HEARTBEAT: i16 = 68;
const CLASSIC_GROUP_APIS: [i16; 4] = [11, 14, 12, 13]; // JoinGroup, SyncGroup, Heartbeat, LeaveGroup
const OFFSET_COMMIT: i16 = 8;
const COORDINATOR: i32 = 2;

on_both_mocks!(
    splits_and_hands_over_with_a_librdkafka_member_losing_no_record,
    a_fenced_member_loses_its_partitions_and_rejoins,
    a_fatal_heartbeat_error_is_returned_from_poll,
    a_static_member_rejoins_to_the_same_partitions,
    a_second_member_takes_half_and_no_record_is_lost,
);

on_mock216!(
    a_second_member_takes_half_and_no_record_is_lost,
    splits_and_hands_over_with_a_librdkafka_member_losing_no_record,
    a_fenced_member_loses_its_partitions_and_rejoins,
    a_fatal_heartbeat_error_is_returned_from_poll,
    a_static_member_rejoins_to_the_same_partitions,
);

/// One test at a time: each waits on the mock's group timers.
static ONE_AT_A_TIME: async_std::sync::Mutex<()> = async_std::sync::Mutex::new(());

/// Three brokers, `t` with four partitions led by brokers 1 and 3, group
/// `g` coordinated by broker 2, heartbeats every 300 ms, requests tracked.
fn cluster<C: TestCluster>() -> C {
    let mock = C::start(3);
    mock.create_topic("t", &[1, 3, 1, 3]);
    mock.set_coordinator("g", COORDINATOR);
    mock.set_consumer_group_timing(300, 6_000);
    mock
}

fn consumer(bootstrap: &str, instance: Option<&str>) -> Consumer {
    let mut b = ConsumerConfig::builder()
        .bootstrap_servers(bootstrap)
        .group_id("g")
        .group_protocol(GroupProtocol::Consumer)
        .auto_offset_reset(OffsetReset::Earliest)
        .fetch_max_wait(Duration::from_millis(100))
        .enable_auto_commit(false);
    if let Some(id) = instance {
        b = b.group_instance_id(id);
    }
    Consumer::new(b.build().unwrap()).unwrap()
}

fn partitions(c: &Consumer) -> BTreeSet<i32> {
    c.assignment().iter().map(|tp| tp.partition).collect()
}

/// Polls (committing after records) until `cond` holds; fails the test
/// with `what` at [`WAIT`].
async fn read_until(
    ours: &Consumer,
    seen: &mut Vec<(i32, i64)>,
    what: &str,
    cond: impl FnMut(&Consumer, &Vec<(i32, i64)>) -> bool,
) {
    let polling = Polling::every(100).committing(Commit::Strictly);
    let keep = |seen: &mut Vec<(i32, i64)>, polled| {
        seen.extend(
            records_strictly(polled)
                .iter()
                .map(|r| (r.partition(), r.offset())),
        )
    };
    assert!(
        poll_until(ours, seen, polling, keep, cond).await,
        "{what}: not within {WAIT:?}; lazykafka holds {:?}; warnings: {:?}",
        partitions(ours),
        logs::find(log::Level::Warn, "")
    );
}

/// Every ConsumerGroupHeartbeat went to the coordinator, and no classic
/// group request was sent by anyone.
fn assert_group_traffic<C: TestCluster>(mock: &C) {
    let requests = mock.requests();
    let heartbeats: Vec<i32> = requests
        .iter()
        .filter(|(_, api)| *api == CONSUMER_GROUP_HEARTBEAT)
        .map(|(b, _)| *b)
        .collect();
    assert!(!heartbeats.is_empty(), "no ConsumerGroupHeartbeat at all");
    assert!(
        heartbeats.iter().all(|b| *b == COORDINATOR),
        "heartbeats to {heartbeats:?}"
    );
    let classic: Vec<_> = requests
        .iter()
        .filter(|(_, api)| CLASSIC_GROUP_APIS.contains(api))
        .collect();
    assert!(
        classic.is_empty(),
        "{}: classic group requests: {classic:?}",
        mock.name()
    );
    assert!(requests
        .iter()
        .filter(|(_, api)| *api == OFFSET_COMMIT)
        .all(|(b, _)| *b == COORDINATOR));
}

async fn splits_and_hands_over_with_a_librdkafka_member_losing_no_record<C: TestCluster>() {
    let _one = ONE_AT_A_TIME.lock().await;
    logs::capture();
    let mock = cluster::<C>();
    let bootstrap = mock.bootstraps().join(",");
    produce(&bootstrap, "t", 4, 40, "none");
    let ours = consumer(&bootstrap, None);
    ours.subscribe(["t"]).unwrap();
    let mut seen = Vec::new();
    read_until(&ours, &mut seen, "all four partitions alone", |c, _| {
        partitions(c).len() == 4
    })
    .await;

    let mut rd = RdConsumer::start_kip848(&bootstrap, "g", "t", &[]);
    read_until(&ours, &mut seen, "a 2/2 split", |c, _| {
        let (a, b) = (partitions(c), rd.assignment());
        a.len() == 2 && b.len() == 2 && a.is_disjoint(&b)
    })
    .await;

    // librdkafka leaves: its partitions come back to us.
    rd.stop();
    read_until(&ours, &mut seen, "all four again", |c, _| {
        partitions(c).len() == 4
    })
    .await;
    read_until(&ours, &mut seen, "every record read", |_, seen| {
        let mut all: BTreeSet<(i32, i64)> = seen.iter().copied().collect();
        all.extend(rd.seen());
        all.len() == 40
    })
    .await;
    let mut per_partition: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    for (p, o) in seen.iter().copied().chain(rd.seen()) {
        per_partition.entry(p).or_default().insert(o);
    }
    for (p, offsets) in &per_partition {
        assert_eq!(
            offsets,
            &(0..10).collect::<BTreeSet<i64>>(),
            "partition {p}"
        );
    }
    assert_group_traffic(&mock);
    ours.close().await.unwrap();
}

async fn a_fenced_member_loses_its_partitions_and_rejoins<C: TestCluster>() {
    let _one = ONE_AT_A_TIME.lock().await;
    logs::capture();
    let mock = cluster::<C>();
    let bootstrap = mock.bootstraps().join(",");
    let ours = consumer(&bootstrap, None);
    ours.subscribe(["t"]).unwrap();
    let mut seen = Vec::new();
    read_until(&ours, &mut seen, "joined", |c, _| partitions(c).len() == 4).await;
    mock.clear_requests();
    // The log is shared by the tests of this process: count from here.
    let fenced = || logs::find(log::Level::Info, "partitions lost, rejoining").len();
    let before = fenced();
    mock.push_errors(
        ApiKey::ConsumerGroupHeartbeat,
        ErrorCode::FencedMemberEpoch,
        1,
    );
    read_until(&ours, &mut seen, "fenced", |_, _| fenced() > before).await;
    read_until(&ours, &mut seen, "rejoined with all four", |c, _| {
        partitions(c).len() == 4
    })
    .await;
    assert_group_traffic(&mock);
    ours.close().await.unwrap();
}

async fn a_fatal_heartbeat_error_is_returned_from_poll<C: TestCluster>() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mock = cluster::<C>();
    let bootstrap = mock.bootstraps().join(",");
    mock.push_errors(
        ApiKey::ConsumerGroupHeartbeat,
        ErrorCode::GroupMaxSizeReached,
        1,
    );
    let ours = consumer(&bootstrap, None);
    ours.subscribe(["t"]).unwrap();
    let deadline = Instant::now() + WAIT;
    let error = loop {
        assert!(Instant::now() < deadline, "no error from poll");
        match ours.poll(Duration::from_millis(100)).await {
            Err(e) => break e,
            Ok(_) => continue,
        }
    };
    match &error {
        Error::Group {
            api, code, stopped, ..
        } => {
            assert_eq!(*api, lazykafka::error::ApiKey::ConsumerGroupHeartbeat);
            assert_eq!(*code, Some(ErrorCode::GroupMaxSizeReached));
            assert!(*stopped);
        }
        other => panic!("expected a group error, got {other}"),
    }
    assert!(ours.assignment().is_empty());
}

async fn a_static_member_rejoins_to_the_same_partitions<C: TestCluster>() {
    let _one = ONE_AT_A_TIME.lock().await;
    logs::capture();
    let mock = cluster::<C>();
    let bootstrap = mock.bootstraps().join(",");
    let ours = consumer(&bootstrap, Some("pod-1"));
    ours.subscribe(["t"]).unwrap();
    let mut seen = Vec::new();
    let mut rd = RdConsumer::start_kip848(&bootstrap, "g", "t", &[]);
    read_until(&ours, &mut seen, "a 2/2 split", |c, _| {
        let (a, b) = (partitions(c), rd.assignment());
        a.len() == 2 && b.len() == 2 && a.is_disjoint(&b)
    })
    .await;
    let before = partitions(&ours);
    let theirs = rd.assignment();
    // Leaves with epoch -2: the coordinator keeps the assignment for the
    // instance id until the session times out.
    ours.close().await.unwrap();
    let again = consumer(&bootstrap, Some("pod-1"));
    again.subscribe(["t"]).unwrap();
    read_until(&again, &mut seen, "the same two partitions", |c, _| {
        partitions(c) == before
    })
    .await;
    assert_eq!(
        rd.assignment(),
        theirs,
        "librdkafka's partitions never moved"
    );
    rd.stop();
    assert_group_traffic(&mock);
    again.close().await.unwrap();
}

/// Polls `ours` once (committing what it read), adding (partition, offset)
/// of its records to `seen`.
async fn poll_once(ours: &mut Consumer, seen: &mut Vec<(i32, i64)>) {
    let records = ours.poll(Duration::from_millis(100)).await.unwrap();
    if !records.is_empty() {
        seen.extend(records.iter().map(|r| (r.partition(), r.offset())));
        ours.commit().await.unwrap();
    }
}

/// Two lazykafka members, no other client in the group: the first joins
/// alone, takes all four partitions and reads what is there; the second
/// joining moves two partitions over; records produced after the split
/// are read too, every offset of every partition by one member or the
/// other (a record read twice around the hand-over is allowed, one never
/// read is not).
async fn a_second_member_takes_half_and_no_record_is_lost<C: TestCluster>() {
    let _one = ONE_AT_A_TIME.lock().await;
    logs::capture();
    let mock = cluster::<C>();
    let bootstrap = mock.bootstraps().join(",");
    produce(&bootstrap, "t", 4, 40, "none");
    let mut first = consumer(&bootstrap, None);
    first.subscribe(["t"]).unwrap();
    let mut seen_first = Vec::new();
    read_until(
        &first,
        &mut seen_first,
        "all 40 records alone",
        |c, seen| partitions(c).len() == 4 && seen.iter().collect::<BTreeSet<_>>().len() == 40,
    )
    .await;

    let mut second = consumer(&bootstrap, None);
    second.subscribe(["t"]).unwrap();
    let mut seen_second = Vec::new();
    let deadline = Instant::now() + WAIT;
    loop {
        let (a, b) = (partitions(&first), partitions(&second));
        if a.len() == 2 && b.len() == 2 && a.is_disjoint(&b) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}: no 2/2 split within {WAIT:?}: {a:?} / {b:?}; warnings: {:?}",
            mock.name(),
            logs::find(log::Level::Warn, "")
        );
        poll_once(&mut first, &mut seen_first).await;
        poll_once(&mut second, &mut seen_second).await;
    }

    produce_range(&bootstrap, "t", 4, 40..80, "none");
    let deadline = Instant::now() + WAIT;
    let all: BTreeSet<(i32, i64)> = (0..4).flat_map(|p| (0..20).map(move |o| (p, o))).collect();
    loop {
        let read: BTreeSet<(i32, i64)> = seen_first.iter().chain(&seen_second).copied().collect();
        if read == all {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}: not every record read within {WAIT:?}: missing {:?}",
            mock.name(),
            all.difference(&read).collect::<Vec<_>>()
        );
        poll_once(&mut first, &mut seen_first).await;
        poll_once(&mut second, &mut seen_second).await;
    }
    // After the split each member read only its own partitions.
    let (a, b) = (partitions(&first), partitions(&second));
    assert!(
        seen_second.iter().all(|(p, _)| b.contains(p)),
        "the second member read outside {b:?}: {seen_second:?}"
    );
    assert_eq!(a.union(&b).count(), 4);
    assert_group_traffic(&mock);
    second.close().await.unwrap();
    first.close().await.unwrap();
}
