//! The connection contract (docs/connections.md) on Apache Kafka itself:
//! the 3-broker cluster of `scripts/kafka.sh`, the records written by the
//! Java client (`tests/java/Peer.java`).
//!
//! As in `tests/promises.rs` (the same promises on the mocks), the census
//! comes from `/proc` (this process's TCP sockets to the brokers' ports),
//! and the topology leaves nothing to chance: the topic's partition lives
//! on broker 1 only, the group's coordinator is broker 2 (a group name
//! chosen by the hash the broker uses), and the one bootstrap address is
//! broker 3, which has no part, so that its retirement is retirement.
//! What each connection was for comes from the client's own events.

// Drives a `Consumer` or a `Producer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::kafka::Kafka;
use common::peers::WAIT;
use common::{client_sockets, wait_for, CLOSE_WAIT, ESTABLISHED};
use futures::{FutureExt, StreamExt};
use lazykafka::events::{CloseReason, ConnectionEvent, ConnectionEvents, EventKind, Purpose};
use lazykafka::group::GroupProtocol;
use lazykafka::{
    Consumer, ConsumerConfig, OffsetReset, Producer, ProducerConfig, ProducerRecord, TopicPartition,
};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How long a wrongly started task gets to open a socket.
const QUIET: Duration = Duration::from_millis(300);

const LEADER: i32 = 1;
const COORDINATOR: i32 = 2;
const BOOTSTRAP: i32 = 3;

/// The brokers this process holds established sockets to, by node id.
fn census(kafka: &Kafka) -> BTreeSet<i32> {
    client_sockets(&kafka.ports())
        .iter()
        .filter(|s| s.state == ESTABLISHED)
        .filter_map(|s| kafka.broker_of_port(s.remote_port))
        .collect()
}

fn close_waits(kafka: &Kafka) -> usize {
    client_sockets(&kafka.ports())
        .iter()
        .filter(|s| s.state == CLOSE_WAIT)
        .count()
}

fn drain(events: &mut ConnectionEvents) -> Vec<ConnectionEvent> {
    let mut out = Vec::new();
    while let Some(Some(e)) = events.next().now_or_never() {
        out.push(e);
    }
    out
}

/// A topic on broker 1 alone with `count` records from the Java producer.
fn topic_on_broker_1(kafka: &Kafka, count: usize) -> String {
    let topic = kafka.unique("conn");
    kafka.create_topic_on(&topic, &[&[LEADER]]);
    if count > 0 {
        kafka.peer(&["produce", "--topic", &topic, "--count", &count.to_string()]);
    }
    topic
}

fn consumer_config(kafka: &Kafka, group: Option<&str>) -> lazykafka::config::ConsumerConfigBuilder {
    let b = ConsumerConfig::builder()
        .bootstrap_servers(kafka.address(BOOTSTRAP))
        .auto_offset_reset(OffsetReset::Earliest)
        .fetch_max_wait(Duration::from_millis(100))
        .metadata_max_age(Duration::from_millis(500));
    match group {
        Some(g) => b.group_id(g),
        None => b,
    }
}

/// One `poll`, as the README's loop does it: a retriable error said and
/// polled past.
async fn poll_through_faults(
    consumer: &Consumer,
    timeout: Duration,
) -> Vec<lazykafka::ConsumerRecord> {
    match consumer.poll(timeout).await {
        Ok(records) => records,
        Err(e) if e.is_retriable() => {
            eprintln!("poll: {e}");
            Vec::new()
        }
        Err(e) => panic!("poll: {e}"),
    }
}

async fn consume(consumer: &Consumer, count: usize) {
    let deadline = Instant::now() + WAIT;
    let mut seen = 0;
    while seen < count {
        assert!(Instant::now() < deadline, "{seen} of {count} records");
        seen += poll_through_faults(consumer, Duration::from_millis(200))
            .await
            .len();
    }
    assert_eq!(seen, count, "records");
}

/// Promise 1: `new`, `subscribe`, `assign`, `seek`, `pause` and a
/// producer's `new` open nothing, and neither does dropping them.
async fn nothing_before_the_first_poll() {
    let Some(kafka) = Kafka::get("nothing_before_the_first_poll") else {
        return;
    };
    let grouped = Consumer::new(consumer_config(&kafka, Some("g")).build().unwrap()).unwrap();
    grouped.subscribe(["t"]).unwrap();
    let manual = Consumer::new(consumer_config(&kafka, None).build().unwrap()).unwrap();
    let tp = TopicPartition::new("t", 0);
    manual.assign([tp.clone()]).unwrap();
    manual.seek(&tp, 3).unwrap();
    manual.pause([&tp]);
    let producer = Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(&kafka.bootstrap)
            .build()
            .unwrap(),
    )
    .unwrap();
    let _ = (
        grouped.assignment(),
        manual.connections(),
        producer.connections(),
    );
    assert!(
        !wait_for(QUIET, || !census(&kafka).is_empty()),
        "a socket before the first poll or send: {:?}",
        census(&kafka)
    );
    drop((grouped, manual, producer));
    assert!(!wait_for(QUIET, || !census(&kafka).is_empty()));
}

/// Promises 2, 3 and 8 for a group consumer, under either group protocol:
/// the bootstrap connection (broker 3) first, then the coordinator
/// (broker 2) and the leader (broker 1); the bootstrap connection retired;
/// Metadata refreshed every 500 ms without ever reopening it; everything
/// closed by `close`, nothing left in CLOSE_WAIT.
async fn a_group_consumer_ends_on_its_coordinator_and_leader(protocol: GroupProtocol) {
    let Some(kafka) = Kafka::get("a_group_consumer_ends_on_its_coordinator_and_leader") else {
        return;
    };
    let topic = topic_on_broker_1(&kafka, 20);
    let group = kafka.group_on("conn-g", COORDINATOR);
    let consumer = Consumer::new(
        consumer_config(&kafka, Some(&group))
            .group_protocol(protocol)
            .build()
            .unwrap(),
    )
    .unwrap();
    let mut events = consumer.connection_events();
    consumer.subscribe([topic.as_str()]).unwrap();
    consume(&consumer, 20).await;
    let expected = BTreeSet::from([LEADER, COORDINATOR]);
    assert!(
        wait_for(WAIT, || census(&kafka) == expected),
        "{protocol}: sockets to {:?}, expected the leader and the coordinator",
        census(&kafka)
    );
    let seen = drain(&mut events);
    let first = seen.first().expect("events");
    assert_eq!(
        (first.purpose, first.addr.as_str()),
        (Purpose::Bootstrap, kafka.address(BOOTSTRAP)),
        "{protocol}: the first connection is the bootstrap one: {seen:?}"
    );
    let ready = |purpose: Purpose| -> BTreeSet<i32> {
        seen.iter()
            .filter(|e| e.purpose == purpose && matches!(e.kind, EventKind::Ready))
            .filter_map(|e| e.broker)
            .collect()
    };
    assert_eq!(
        ready(Purpose::Coordinator),
        BTreeSet::from([COORDINATOR]),
        "{seen:?}"
    );
    assert_eq!(ready(Purpose::Leader), BTreeSet::from([LEADER]), "{seen:?}");
    assert!(
        seen.iter().any(|e| e.purpose == Purpose::Bootstrap
            && matches!(
                e.kind,
                EventKind::Retired
                    | EventKind::Closed {
                        reason: CloseReason::Retired,
                        ..
                    }
            )),
        "{protocol}: the bootstrap connection was not retired: {seen:?}"
    );

    // Metadata (every 500 ms) flows over the connections there are: no
    // new socket, none to broker 3, for 3 s of polling.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        poll_through_faults(&consumer, Duration::from_millis(100)).await;
        assert_eq!(census(&kafka), expected, "{protocol}");
    }
    let later = drain(&mut events);
    assert!(
        later
            .iter()
            .all(|e| !matches!(e.kind, EventKind::Connecting)),
        "{protocol}: new connections while nothing changed: {later:?}"
    );

    consumer.close().await.unwrap();
    assert!(
        wait_for(WAIT, || census(&kafka).is_empty()),
        "{protocol}: sockets after close: {:?}",
        census(&kafka)
    );
    assert_eq!(close_waits(&kafka), 0, "{protocol}: CLOSE_WAIT after close");
}

async fn a_classic_group_consumer_ends_on_its_coordinator_and_leader() {
    a_group_consumer_ends_on_its_coordinator_and_leader(GroupProtocol::Classic).await
}

async fn a_kip848_group_consumer_ends_on_its_coordinator_and_leader() {
    a_group_consumer_ends_on_its_coordinator_and_leader(GroupProtocol::Consumer).await
}

/// Manual assignment: the leader connection only; then promise 4: paused,
/// the leader connection closes as idle after `connections.max.idle.ms`,
/// and resuming opens it again without a bootstrap connection.
async fn a_manual_consumer_holds_its_leader_only_and_reaps_it_when_idle() {
    let Some(kafka) = Kafka::get("a_manual_consumer_holds_its_leader_only_and_reaps_it_when_idle")
    else {
        return;
    };
    let topic = topic_on_broker_1(&kafka, 10);
    // Metadata at its default age (5 minutes): a refresh every 500 ms
    // would keep the connection busy, never idle.
    let consumer = Consumer::new(
        consumer_config(&kafka, None)
            .metadata_max_age(Duration::from_secs(300))
            .connections_max_idle(Some(Duration::from_millis(1500)))
            .build()
            .unwrap(),
    )
    .unwrap();
    let mut events = consumer.connection_events();
    let tp = TopicPartition::new(&topic, 0);
    consumer.assign([tp.clone()]).unwrap();
    consume(&consumer, 10).await;
    let leader = BTreeSet::from([LEADER]);
    assert!(
        wait_for(WAIT, || census(&kafka) == leader),
        "sockets to {:?}, expected the leader only",
        census(&kafka)
    );
    drain(&mut events);

    consumer.pause([&tp]);
    let deadline = Instant::now() + WAIT;
    while !census(&kafka).is_empty() {
        assert!(
            Instant::now() < deadline,
            "still connected: {:?}",
            census(&kafka)
        );
        poll_through_faults(&consumer, Duration::from_millis(200)).await;
    }
    let reaped = drain(&mut events);
    assert!(
        reaped.iter().any(|e| e.purpose == Purpose::Leader
            && matches!(
                e.kind,
                EventKind::Closed {
                    reason: CloseReason::Idle,
                    ..
                }
            )),
        "no idle close: {reaped:?}"
    );
    assert_eq!(close_waits(&kafka), 0, "CLOSE_WAIT after the idle close");

    kafka.peer(&[
        "produce", "--topic", &topic, "--count", "5", "--start", "10",
    ]);
    consumer.resume([&tp]);
    consume(&consumer, 5).await;
    assert_eq!(census(&kafka), leader);
    let resumed = drain(&mut events);
    assert!(
        resumed.iter().all(|e| e.purpose != Purpose::Bootstrap),
        "a bootstrap connection to resume: {resumed:?}"
    );
    consumer.close().await.unwrap();
    assert!(wait_for(WAIT, || census(&kafka).is_empty()));
    assert_eq!(close_waits(&kafka), 0);
}

/// The producer's contract (docs/producer.md): nothing before the first
/// send; one bootstrap connection (broker 3) for the topic's metadata and
/// InitProducerId; then the leader (broker 1) only; the bootstrap
/// connection retired; everything closed by `close`.
async fn a_producer_ends_on_its_leader() {
    let Some(kafka) = Kafka::get("a_producer_ends_on_its_leader") else {
        return;
    };
    let topic = topic_on_broker_1(&kafka, 0);
    let producer = Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(kafka.address(BOOTSTRAP))
            .linger(Duration::from_millis(5))
            .build()
            .unwrap(),
    )
    .unwrap();
    let mut events = producer.connection_events();
    let mut deliveries = Vec::new();
    for i in 0..50 {
        let record = ProducerRecord::new(&topic)
            .key(format!("k{i}"))
            .value(format!("v{i}"));
        deliveries.push(producer.send(record).await.unwrap());
    }
    for (i, d) in deliveries.into_iter().enumerate() {
        let written = d.await.unwrap();
        assert_eq!((written.partition, written.offset), (0, i as i64));
    }
    let leader = BTreeSet::from([LEADER]);
    assert!(
        wait_for(WAIT, || census(&kafka) == leader),
        "sockets to {:?}, expected the leader only",
        census(&kafka)
    );
    let seen = drain(&mut events);
    let first = seen.first().expect("events");
    assert_eq!(
        (first.purpose, first.addr.as_str()),
        (Purpose::Bootstrap, kafka.address(BOOTSTRAP)),
        "{seen:?}"
    );
    producer
        .close_timeout(Duration::from_secs(10))
        .await
        .unwrap();
    assert!(wait_for(WAIT, || census(&kafka).is_empty()));
    assert_eq!(close_waits(&kafka), 0);
    // What it wrote, read by the Java consumer: 50 records, in order.
    let read = kafka.peer(&[
        "consume",
        "--topic",
        &topic,
        "--count",
        "50",
        "--from-beginning",
    ]);
    let offsets: Vec<i64> = read
        .iter()
        .filter(|e| e["event"] == "record")
        .map(|e| e["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(offsets, (0..50).collect::<Vec<_>>());
}

on_apache_kafka!(
    nothing_before_the_first_poll,
    a_classic_group_consumer_ends_on_its_coordinator_and_leader,
    a_kip848_group_consumer_ends_on_its_coordinator_and_leader,
    a_manual_consumer_holds_its_leader_only_and_reaps_it_when_idle,
    a_producer_ends_on_its_leader,
);
