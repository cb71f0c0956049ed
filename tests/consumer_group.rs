//! Group membership with a librdkafka consumer in the same group, each
//! case on librdkafka's mock cluster and on `lazykafka::mock` (with their
//! request logs), with the same assertions: the rebalance listener and
//! commits made in it, heartbeats between polls, `max.poll.interval.ms`,
//! each assignor, static membership.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::TestCluster;
use common::peers::{
    commit_through_faults, config, consume, logs, poll_through_faults, produce, produce_range,
    rd_committed, RdConsumer, WAIT,
};
use common::wait_for;
use lazykafka::events::Purpose;
use lazykafka::group::AssignmentStrategy;
use lazykafka::{Consumer, RebalanceListener, Revocation, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One test at a time: each drives several rebalances with a librdkafka
/// member on librdkafka's mock, which paces rebalances with multi-second
/// timers; side by side on a small machine they stretch past the deadlines.
static ONE_AT_A_TIME: async_std::sync::Mutex<()> = async_std::sync::Mutex::new(());

const HEARTBEAT: i16 = 12;
const JOIN_GROUP: i16 = 11;
const SYNC_GROUP: i16 = 14;
const LEAVE_GROUP: i16 = 13;

/// `topic` with four partitions led by brokers 1 and 3 in turn; the
/// group's coordinator is broker 2.
fn mock4<C: TestCluster>(topic: &str, group: &str) -> C {
    let mock = C::start(3);
    mock.create_topic(topic, &[1, 3, 1, 3]);
    mock.set_coordinator(group, 2);
    mock
}

fn partitions(set: &BTreeSet<TopicPartition>) -> BTreeSet<i32> {
    set.iter().map(|tp| tp.partition).collect()
}

/// Polls `ours` until it holds `mine` partitions and librdkafka `theirs`,
/// disjoint and covering all four; collects what `ours` reads meanwhile.
async fn wait_split(
    ours: &mut Consumer,
    rd: &RdConsumer,
    mine: usize,
    theirs: usize,
    seen: &mut Vec<(i32, i64)>,
) {
    let deadline = Instant::now() + WAIT;
    loop {
        let a = partitions(&ours.assignment());
        let b = rd.assignment();
        if a.len() == mine && b.len() == theirs && a.is_disjoint(&b) && a.len() + b.len() == 4 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no {mine}/{theirs} split: lazykafka {a:?}, librdkafka {b:?}; logged: {:?} {:?} {:?}",
            logs::find(log::Level::Error, ""),
            logs::find(log::Level::Warn, ""),
            logs::find(log::Level::Info, "")
        );
        for r in poll_through_faults(ours, Duration::from_millis(100)).await {
            seen.push((r.partition(), r.offset()));
        }
    }
}

/// The listener calls that changed something: without the empty
/// assignments that end rebalances which brought nothing new.
fn changes(events: &[Event]) -> Vec<Event> {
    events
        .iter()
        .filter(|e| !matches!(e, Event::Assigned(p) if p.is_empty()))
        .cloned()
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Assigned(BTreeSet<i32>),
    Revoked(BTreeSet<i32>, BTreeMap<i32, i64>),
    Lost(BTreeSet<i32>),
}

/// Records what it is told; commits the revoked partitions' positions.
struct Recorder(Arc<Mutex<Vec<Event>>>);

impl RebalanceListener for Recorder {
    fn on_partitions_assigned(&mut self, p: &BTreeSet<TopicPartition>) {
        self.0.lock().unwrap().push(Event::Assigned(partitions(p)));
    }

    fn on_partitions_revoked(&mut self, p: &BTreeSet<TopicPartition>, r: &mut Revocation<'_>) {
        let positions = r.positions();
        let by_partition = positions.iter().map(|(tp, o)| (tp.partition, *o)).collect();
        self.0
            .lock()
            .unwrap()
            .push(Event::Revoked(partitions(p), by_partition));
        r.commit(positions);
    }

    fn on_partitions_lost(&mut self, p: &BTreeSet<TopicPartition>) {
        self.0.lock().unwrap().push(Event::Lost(partitions(p)));
    }
}

// Cooperative-sticky, because librdkafka's mock refuses every OffsetCommit
// while it waits for members to join (Kafka accepts those of the current
// generation): an eager revocation happens in that window, so its commit
// could not land there. A cooperative revocation follows a completed
// SyncGroup, when the mock accepts commits.
async fn the_listener_hears_of_each_rebalance_and_its_revoke_commit_lands<C: TestCluster>() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    logs::capture();
    logs::capture();
    let mock: C = mock4("lst", "g-lst");
    let bootstrap = mock.bootstrap();
    produce(&bootstrap, "lst", 4, 400, "none"); // 100 per partition
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut ours = Consumer::new(
        config(&bootstrap, Some("g-lst"))
            .partition_assignment_strategy([AssignmentStrategy::CooperativeSticky])
            .build()
            .unwrap(),
    )
    .unwrap();
    ours.subscribe_with_listener(["lst"], Recorder(events.clone()))
        .unwrap();
    // Alone: all four partitions, every record; nothing committed by hand.
    let mine = consume(&mut ours, 400).await;
    assert_eq!(mine.len(), 400);
    let all = BTreeSet::from([0, 1, 2, 3]);
    assert_eq!(
        events.lock().unwrap().as_slice(),
        [Event::Assigned(all.clone())]
    );

    // librdkafka joins: two partitions are revoked from us, and the
    // revocation commits their positions before they move.
    let mut rd = RdConsumer::start_with(
        &bootstrap,
        "g-lst",
        "lst",
        &[("partition.assignment.strategy", "cooperative-sticky")],
    );
    let mut more = Vec::new();
    wait_split(&mut ours, &rd, 2, 2, &mut more).await;
    let mine_now = partitions(&ours.assignment());
    let given_up: BTreeSet<i32> = all.difference(&mine_now).copied().collect();
    assert_eq!(
        changes(&events.lock().unwrap())[1..],
        [Event::Revoked(
            given_up.clone(),
            given_up.iter().map(|p| (*p, 100)).collect()
        )]
    );
    // The rebalance that revoked them ended with an (empty) assignment
    // call, as KIP-429 has it.
    assert!(
        events.lock().unwrap()[1..]
            .iter()
            .skip_while(|e| !matches!(e, Event::Revoked(..)))
            .any(|e| *e == Event::Assigned(BTreeSet::new())),
        "{:?}",
        events.lock().unwrap()
    );
    assert_eq!(rd.assignment(), given_up);
    // librdkafka starts its partitions from that commit, and the next
    // records go once each to one member. (When librdkafka's own rejoin
    // reaches the mock before our commit, the mock refuses the commit with
    // REBALANCE_IN_PROGRESS, where Kafka accepts a commit of the current
    // generation; librdkafka then starts those two partitions from the
    // beginning. So re-reads below offset 100 are tolerated here; the
    // close test shows a listener commit landing without that race.)
    produce_range(&bootstrap, "lst", 4, 400..440, "none");
    let fresh = |seen: &[(i32, i64)]| seen.iter().filter(|(_, o)| *o >= 100).count();
    let deadline = Instant::now() + WAIT;
    while fresh(&more) + fresh(&rd.seen()) < 40 && Instant::now() < deadline {
        for r in ours.poll(Duration::from_millis(100)).await.unwrap() {
            more.push((r.partition(), r.offset()));
        }
    }
    let theirs = rd.seen();
    let new_ones: Vec<(i32, i64)> = more
        .iter()
        .chain(theirs.iter())
        .filter(|(_, o)| *o >= 100)
        .copied()
        .collect();
    let distinct: BTreeSet<(i32, i64)> = new_ones.iter().copied().collect();
    assert_eq!(distinct.len(), 40, "{more:?} {theirs:?}");
    assert_eq!(
        new_ones.len(),
        40,
        "no new record twice: {more:?} {theirs:?}"
    );
    assert!(more.iter().all(|(p, _)| mine_now.contains(p)));
    assert!(theirs.iter().all(|(p, _)| given_up.contains(p)));
    let before_leave = changes(&events.lock().unwrap()).len();

    // librdkafka leaves: its two are assigned to us, nothing revoked.
    rd.stop();
    let deadline = Instant::now() + WAIT;
    while ours.assignment().len() < 4 && Instant::now() < deadline {
        ours.poll(Duration::from_millis(100)).await.unwrap();
    }
    assert_eq!(
        changes(&events.lock().unwrap())[before_leave..],
        [Event::Assigned(given_up)]
    );
    ours.close().await.unwrap();
    // Nothing was lost on the way. (Close tells the listener nothing: see
    // docs/consumer.md.)
    let events = events.lock().unwrap();
    assert!(!events.iter().any(|e| matches!(e, Event::Lost(_))));
}

async fn heartbeats_flow_on_the_coordinator_connection_while_the_application_does_not_poll<
    C: TestCluster,
>() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    logs::capture();
    let mock: C = mock4("hb", "g-hb");
    let bootstrap = mock.bootstrap();
    let mut ours = Consumer::new(
        config(&bootstrap, Some("g-hb"))
            .session_timeout(Duration::from_millis(2000))
            .heartbeat_interval(Duration::from_millis(300))
            .max_poll_interval(Duration::from_secs(30))
            .partition_assignment_strategy([AssignmentStrategy::Range])
            .build()
            .unwrap(),
    )
    .unwrap();
    ours.subscribe(["hb"]).unwrap();
    // The mock keeps one session timeout per group: both members say 2 s.
    let rd = RdConsumer::start_with(
        &bootstrap,
        "g-hb",
        "hb",
        &[
            ("partition.assignment.strategy", "range"),
            ("session.timeout.ms", "2000"),
        ],
    );
    wait_split(&mut ours, &rd, 2, 2, &mut Vec::new()).await;
    let (mine, theirs) = (ours.assignment(), rd.assignment());
    let coordinator = ours
        .connections()
        .into_iter()
        .find(|c| c.purpose == Purpose::Coordinator)
        .expect("a coordinator connection");
    assert_eq!(coordinator.broker, Some(2));
    let sent_before = ours.broker_counters()[&coordinator.addr].requests;

    // The application works for 2.5 session timeouts without polling.
    mock.clear_requests();
    common::sleep(Duration::from_secs(5)).await;
    let requests = mock.requests();
    let sent = ours.broker_counters()[&coordinator.addr].requests - sent_before;

    // Our heartbeats went to the coordinator (5 s / 300 ms ≈ 16; the
    // coordinator connection carries nothing else here) ...
    assert!(sent >= 10, "{sent} requests to the coordinator");
    let heartbeats: Vec<i32> = requests
        .iter()
        .filter(|(_, k)| *k == HEARTBEAT)
        .map(|(b, _)| *b)
        .collect();
    assert!(heartbeats.len() >= 10, "{heartbeats:?}");
    assert!(heartbeats.iter().all(|b| *b == 2), "{heartbeats:?}");
    // ... and kept us in the group: no rebalance, nobody took our share.
    assert!(
        !requests
            .iter()
            .any(|(_, k)| [JOIN_GROUP, SYNC_GROUP, LEAVE_GROUP].contains(k)),
        "{requests:?}"
    );
    assert_eq!(rd.assignment(), theirs);
    assert!(ours.poll(Duration::from_millis(100)).await.is_ok());
    assert_eq!(ours.assignment(), mine);
    // Only the coordinator connection goes to broker 2.
    let to_2: Vec<Purpose> = ours
        .connections()
        .iter()
        .filter(|c| c.broker == Some(2))
        .map(|c| c.purpose)
        .collect();
    assert_eq!(to_2, vec![Purpose::Coordinator]);
    ours.close().await.unwrap();
}

async fn a_member_that_does_not_poll_within_max_poll_interval_leaves_and_rejoins_on_poll<
    C: TestCluster,
>() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    logs::capture();
    let mock: C = mock4("mpi", "g-mpi");
    let bootstrap = mock.bootstrap();
    let mut ours = Consumer::new(
        config(&bootstrap, Some("g-mpi"))
            .max_poll_interval(Duration::from_millis(4000))
            .partition_assignment_strategy([AssignmentStrategy::Range])
            .build()
            .unwrap(),
    )
    .unwrap();
    ours.subscribe(["mpi"]).unwrap();
    let rd = RdConsumer::start(&bootstrap, "g-mpi", "mpi");
    wait_split(&mut ours, &rd, 2, 2, &mut Vec::new()).await;
    mock.clear_requests();
    let stopped = Instant::now();
    // No poll: after max.poll.interval.ms we leave and librdkafka gets all.
    assert!(
        wait_for(WAIT, || rd.assigned() == 4),
        "librdkafka holds {:?}",
        rd.assignment()
    );
    let waited = stopped.elapsed();
    assert!(waited >= Duration::from_millis(3900), "{waited:?}");
    let leaves: Vec<i32> = mock
        .requests()
        .iter()
        .filter(|(_, k)| *k == LEAVE_GROUP)
        .map(|(b, _)| *b)
        .collect();
    assert_eq!(leaves, vec![2], "one LeaveGroup, to the coordinator");
    // Polling again joins again: a JoinGroup reaches the coordinator.
    // (Whether the mock then completes the rebalance within the test's
    // deadline depends on its multi-second rebalance timer and librdkafka's
    // timing; the join itself is what the consumer owes.)
    // librdkafka's own joins (after we left) are counted first: the group
    // is stable with it alone, so a JoinGroup after this is ours.
    let joins = |mock: &C| {
        mock.requests()
            .iter()
            .filter(|(b, k)| *b == 2 && *k == JOIN_GROUP)
            .count()
    };
    let before = joins(&mock);
    let deadline = Instant::now() + WAIT;
    while joins(&mock) == before && Instant::now() < deadline {
        ours.poll(Duration::from_millis(100)).await.unwrap();
    }
    assert!(joins(&mock) > before, "no JoinGroup after polling again");
    ours.close().await.unwrap();
}

/// lazykafka and librdkafka with `strategy` split four partitions, read
/// every record once between them with commits, and hand over when one
/// leaves: first librdkafka, then lazykafka.
async fn mixed_group<C: TestCluster>(strategy: AssignmentStrategy, rd_strategy: &str) {
    let topic = format!("mixed-{rd_strategy}");
    let group = format!("g-{rd_strategy}");
    logs::capture();
    let mock: C = mock4(&topic, &group);
    let bootstrap = mock.bootstrap();
    let props = [("partition.assignment.strategy", rd_strategy)];
    let mut rd = RdConsumer::start_with(&bootstrap, &group, &topic, &props);
    let mut ours = Consumer::new(
        config(&bootstrap, Some(&group))
            .partition_assignment_strategy([strategy])
            .build()
            .unwrap(),
    )
    .unwrap();
    ours.subscribe([topic.clone()]).unwrap();
    let mut mine = Vec::new();
    wait_split(&mut ours, &rd, 2, 2, &mut mine).await;
    assert!(mine.is_empty());

    produce(&bootstrap, &topic, 4, 400, "snappy");
    let deadline = Instant::now() + WAIT;
    while mine.len() + rd.seen().len() < 400 && Instant::now() < deadline {
        for r in poll_through_faults(&mut ours, Duration::from_millis(100)).await {
            mine.push((r.partition(), r.offset()));
        }
        commit_through_faults(&ours).await;
    }
    let theirs = rd.seen();
    let all: BTreeSet<(i32, i64)> = mine.iter().chain(theirs.iter()).copied().collect();
    assert_eq!(all.len(), 400, "{strategy:?}: every record once");
    assert_eq!(
        mine.len() + theirs.len(),
        400,
        "{strategy:?}: no record twice"
    );
    let my_partitions: BTreeSet<i32> = mine.iter().map(|(p, _)| *p).collect();
    let their_partitions: BTreeSet<i32> = theirs.iter().map(|(p, _)| *p).collect();
    assert_eq!(my_partitions.len(), 2);
    assert!(my_partitions.is_disjoint(&their_partitions));

    // librdkafka leaves: lazykafka takes all four and goes on from
    // librdkafka's commits.
    rd.stop();
    let deadline = Instant::now() + WAIT;
    while ours.assignment().len() < 4 && Instant::now() < deadline {
        poll_through_faults(&mut ours, Duration::from_millis(100)).await;
    }
    assert_eq!(ours.assignment().len(), 4, "{strategy:?}");
    produce_range(&bootstrap, &topic, 4, 400..440, "none");
    let more = consume(&mut ours, 40).await;
    assert_eq!(
        more.len(),
        40,
        "{strategy:?}: only the new records: {more:?}"
    );
    assert!(more.iter().all(|(_, o, _)| *o >= 100));
    ours.commit().await.unwrap();

    // A new librdkafka member joins, then lazykafka leaves: librdkafka
    // takes all four and goes on from lazykafka's commits.
    let rd2 = RdConsumer::start_with(&bootstrap, &group, &topic, &props);
    wait_split(&mut ours, &rd2, 2, 2, &mut Vec::new()).await;
    ours.close().await.unwrap();
    assert!(
        wait_for(WAIT, || rd2.assigned() == 4),
        "{strategy:?}: librdkafka holds {:?}",
        rd2.assignment()
    );
    produce_range(&bootstrap, &topic, 4, 440..480, "none");
    assert!(
        wait_for(WAIT, || rd2.seen().len() >= 40),
        "{strategy:?}: {:?}",
        rd2.seen()
    );
    let seen = rd2.seen();
    assert_eq!(
        seen.len(),
        40,
        "{strategy:?}: only the new records: {seen:?}"
    );
    assert!(seen.iter().all(|(_, o)| *o >= 110), "{seen:?}");
}

async fn mixed_group_range<C: TestCluster>() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    mixed_group::<C>(AssignmentStrategy::Range, "range").await;
}

async fn mixed_group_roundrobin<C: TestCluster>() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    mixed_group::<C>(AssignmentStrategy::RoundRobin, "roundrobin").await;
}

async fn mixed_group_cooperative_sticky<C: TestCluster>() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    mixed_group::<C>(AssignmentStrategy::CooperativeSticky, "cooperative-sticky").await;
}

async fn a_static_member_closes_without_leave_group<C: TestCluster>() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    logs::capture();
    let mock: C = mock4("st", "g-st");
    let bootstrap = mock.bootstrap();
    let build = || {
        Consumer::new(
            config(&bootstrap, Some("g-st"))
                .group_instance_id("lk-static")
                .partition_assignment_strategy([AssignmentStrategy::Range])
                .build()
                .unwrap(),
        )
        .unwrap()
    };
    let mut ours = build();
    ours.subscribe(["st"]).unwrap();
    let rd = RdConsumer::start(&bootstrap, "g-st", "st");
    wait_split(&mut ours, &rd, 2, 2, &mut Vec::new()).await;
    let mine = ours.assignment();
    mock.clear_requests();
    ours.close().await.unwrap();
    let requests = mock.requests();
    assert!(
        !requests.iter().any(|(_, k)| *k == LEAVE_GROUP),
        "{requests:?}"
    );
    // Without LeaveGroup the coordinator keeps the static member's place
    // until its session times out; then librdkafka gets everything. (Kafka
    // would give a returning instance its partitions back without a
    // rebalance; librdkafka's mock identifies classic members by member id
    // only, so that part cannot be shown here.)
    assert!(
        wait_for(WAIT, || rd.assigned() == 4),
        "librdkafka holds {:?}",
        rd.assignment()
    );
    assert!(!mine.is_empty());
}

async fn close_revokes_through_the_listener_and_its_commit_lands_before_leaving<C: TestCluster>() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let mock: C = mock4("cls", "g-cls");
    let bootstrap = mock.bootstrap();
    produce(&bootstrap, "cls", 4, 80, "none"); // 20 per partition
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut ours = Consumer::new(config(&bootstrap, Some("g-cls")).build().unwrap()).unwrap();
    ours.subscribe_with_listener(["cls"], Recorder(events.clone()))
        .unwrap();
    assert_eq!(consume(&mut ours, 80).await.len(), 80);
    mock.clear_requests();
    ours.close().await.unwrap();
    let all = BTreeSet::from([0, 1, 2, 3]);
    let last = events.lock().unwrap().last().cloned();
    assert_eq!(
        last,
        Some(Event::Revoked(all, (0..4).map(|p| (p, 20)).collect())),
        "close tells the listener, with the positions"
    );
    // The listener's commit (OffsetCommit, key 8) went out before LeaveGroup.
    let requests = mock.requests();
    let commit = requests.iter().position(|(_, k)| *k == 8);
    let leave = requests.iter().position(|(_, k)| *k == LEAVE_GROUP);
    assert!(
        commit.is_some() && leave.is_some() && commit < leave,
        "{requests:?}"
    );
    let read_back = rd_committed(&bootstrap, "g-cls", "cls", &[0, 1, 2, 3]);
    assert_eq!(read_back, vec![Some(20); 4]);
}

on_both_mocks!(
    the_listener_hears_of_each_rebalance_and_its_revoke_commit_lands,
    heartbeats_flow_on_the_coordinator_connection_while_the_application_does_not_poll,
    a_member_that_does_not_poll_within_max_poll_interval_leaves_and_rejoins_on_poll,
    mixed_group_range,
    mixed_group_roundrobin,
    mixed_group_cooperative_sticky,
    a_static_member_closes_without_leave_group,
    close_revokes_through_the_listener_and_its_commit_lands_before_leaving,
);
