//! Broker trouble on Apache Kafka itself (the cluster of `scripts/kafka.sh`):
//! a broker killed with SIGKILL and started again, a broker shut down
//! cleanly, leaders moved by a reassignment and a preferred-leader
//! election, a topic deleted and created again under the same name,
//! `acks=all` with the ISR below `min.insync.replicas`, and a produce quota
//! that throttles us (KIP-219) — each while our
//! consumer consumes (the README's loop: a retriable error said and polled
//! past, any other one a failure) and our idempotent producer produces.
//!
//! What must hold: nothing acknowledged is lost (our consumer sees every
//! record the producer was told was written), the idempotent producer
//! writes nothing twice (the log read back by the Java consumer has each
//! value once, in send order per partition), the loop meets no
//! non-retriable error, and the trouble is named within seconds (a
//! connection event, a `warn` line).
//!
//! These tests stop brokers, so they are `#[ignore]`d: the test command
//! runs them after everything else, one at a time
//! (`--run-ignored only --test-threads 1`). By hand, against a cluster of
//! their own: `LAZYKAFKA_KAFKA_RUN_DIR=$PWD/.kafka/run-faults
//! scripts/kafka.sh start`, then `eval "$(LAZYKAFKA_KAFKA_RUN_DIR=...
//! scripts/kafka.sh env)"` and `cargo test --all-features --test
//! kafka_faults -- --ignored --test-threads 1`.

// Drives a `Consumer` and a `Producer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::kafka::Kafka;
use common::peers::logs;
use common::{sleep, spawn};
use futures::{FutureExt, StreamExt};
use lazykafka::events::{ConnectionEvent, ConnectionEvents, EventKind, Purpose};
use lazykafka::{
    Consumer, ConsumerConfig, DeliveryFuture, OffsetReset, Producer, ProducerConfig,
    ProducerRecord, TopicPartition,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest any step of a scenario may take: a killed broker is noticed
/// by the controller after `broker.session.timeout.ms` (9 s), and a
/// producer's records wait for new leaders meanwhile.
const WAIT: Duration = Duration::from_secs(90);

/// What the consumer's loop saw: records as (partition, offset, value), and
/// every error `poll` or `commit` returned.
#[derive(Default)]
struct Ledger {
    records: Mutex<Vec<(i32, i64, String)>>,
    retriable: Mutex<Vec<String>>,
    fatal: Mutex<Vec<String>>,
}

impl Ledger {
    fn values(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for (_, _, v) in self.records.lock().unwrap().iter() {
            *out.entry(v.clone()).or_default() += 1;
        }
        out
    }

    fn assert_no_fatal(&self, what: &str) {
        let fatal = self.fatal.lock().unwrap();
        assert!(
            fatal.is_empty(),
            "{what}: non-retriable errors reached the loop: {fatal:?}"
        );
    }
}

/// The README's loop, until `stop`: poll; a retriable error is noted and
/// polled past; any other ends the loop (noted as fatal); in a group,
/// commit after each non-empty poll.
async fn consume_loop(consumer: Consumer, ledger: Arc<Ledger>, stop: Arc<AtomicBool>) {
    let grouped = consumer.config().group_id().is_some();
    while !stop.load(Ordering::Relaxed) {
        let records = match consumer.poll(Duration::from_millis(200)).await {
            Ok(records) => records,
            Err(e) if e.is_retriable() => {
                ledger.retriable.lock().unwrap().push(e.to_string());
                continue;
            }
            Err(e) => {
                ledger.fatal.lock().unwrap().push(format!("poll: {e}"));
                return;
            }
        };
        if records.is_empty() {
            continue;
        }
        {
            let mut seen = ledger.records.lock().unwrap();
            for r in &records {
                let value = String::from_utf8_lossy(r.value().unwrap_or_default()).into_owned();
                seen.push((r.partition(), r.offset(), value));
            }
        }
        if !grouped {
            continue;
        }
        match consumer.commit().await {
            Ok(()) => {}
            Err(e) if e.is_retriable() => ledger.retriable.lock().unwrap().push(e.to_string()),
            Err(e) => {
                ledger.fatal.lock().unwrap().push(format!("commit: {e}"));
                return;
            }
        }
    }
    let _ = consumer.close().await;
}

/// Sends `v<i>` (key `k<i>`) for i = 0, 1, ... every 5 ms until `stop`,
/// then waits for every delivery. Returns what was written, as
/// (partition, offset, value), and the deliveries that failed.
async fn produce_loop(producer: Producer, topic: String, stop: Arc<AtomicBool>) -> Produced {
    let mut pending: Vec<(String, DeliveryFuture)> = Vec::new();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let value = format!("v{i}");
        let record = ProducerRecord::new(&topic)
            .key(format!("k{i}"))
            .value(value.clone());
        match producer.send(record).await {
            Ok(delivery) => pending.push((value, delivery)),
            Err(e) => panic!("send v{i}: {e}"),
        }
        i += 1;
        sleep(Duration::from_millis(5)).await;
    }
    let mut written = Vec::new();
    let mut failed = Vec::new();
    for (value, delivery) in pending {
        match delivery.await {
            Ok(w) => written.push((w.partition, w.offset, value)),
            Err(e) => failed.push(format!("{value}: {e}")),
        }
    }
    let _ = producer.close_timeout(Duration::from_secs(10)).await;
    (written, failed)
}

fn drain(events: &mut ConnectionEvents) -> Vec<ConnectionEvent> {
    let mut out = Vec::new();
    while let Some(Some(e)) = events.next().now_or_never() {
        out.push(e);
    }
    out
}

/// What the producer's task gives back: the records written, as
/// (partition, offset, value), and the deliveries that failed.
type Produced = (Vec<(i32, i64, String)>, Vec<String>);
type Task<T> = Box<dyn std::future::Future<Output = T> + Send + Unpin>;

/// A consumer (in group `group`) and a producer running on `topic`.
struct Traffic {
    ledger: Arc<Ledger>,
    stop_producer: Arc<AtomicBool>,
    stop_consumer: Arc<AtomicBool>,
    producer: Option<Task<Produced>>,
    consumer: Option<Task<()>>,
    events: ConnectionEvents,
    seen_events: Vec<ConnectionEvent>,
}

impl Traffic {
    fn start(kafka: &Kafka, topic: &str, group: &str) -> Traffic {
        let consumer = Consumer::new(
            ConsumerConfig::builder()
                .bootstrap_servers(&kafka.bootstrap)
                .group_id(group)
                .auto_offset_reset(OffsetReset::Earliest)
                .enable_auto_commit(false)
                .fetch_max_wait(Duration::from_millis(100))
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer.subscribe([topic]).unwrap();
        let events = consumer.connection_events();
        let producer = Producer::new(
            ProducerConfig::builder()
                .bootstrap_servers(&kafka.bootstrap)
                .linger(Duration::from_millis(5))
                .build()
                .unwrap(),
        )
        .unwrap();
        let ledger = Arc::new(Ledger::default());
        let stop_producer = Arc::new(AtomicBool::new(false));
        let stop_consumer = Arc::new(AtomicBool::new(false));
        let c = spawn(consume_loop(
            consumer,
            ledger.clone(),
            stop_consumer.clone(),
        ));
        let p = spawn(produce_loop(
            producer,
            topic.to_owned(),
            stop_producer.clone(),
        ));
        Traffic {
            ledger,
            stop_producer,
            stop_consumer,
            producer: Some(Box::new(Box::pin(p))),
            consumer: Some(Box::new(Box::pin(c))),
            events,
            seen_events: Vec::new(),
        }
    }

    /// The consumer's connection events so far.
    fn events(&mut self) -> &[ConnectionEvent] {
        let more = drain(&mut self.events);
        self.seen_events.extend(more);
        &self.seen_events
    }

    /// Waits until the consumer has seen `more` records beyond those it had.
    async fn progress(&self, more: usize, what: &str) {
        let start = self.ledger.records.lock().unwrap().len();
        let deadline = Instant::now() + WAIT;
        while self.ledger.records.lock().unwrap().len() < start + more {
            self.ledger.assert_no_fatal(what);
            assert!(
                Instant::now() < deadline,
                "{what}: the consumer made no progress; errors: {:?}",
                self.ledger.retriable.lock().unwrap()
            );
            sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the producer, waits for its deliveries, then for the consumer
    /// to have seen each written record, and checks the log: nothing lost,
    /// nothing written twice, send order kept per partition.
    async fn finish(mut self, kafka: &Kafka, topic: &str, what: &str) {
        self.stop_producer.store(true, Ordering::Relaxed);
        let (written, failed) = self.producer.take().unwrap().await;
        assert!(failed.is_empty(), "{what}: deliveries failed: {failed:?}");
        assert!(!written.is_empty(), "{what}: nothing written");
        let wanted: BTreeSet<&String> = written.iter().map(|(_, _, v)| v).collect();
        let deadline = Instant::now() + WAIT;
        loop {
            self.ledger.assert_no_fatal(what);
            let seen = self.ledger.values();
            let missing: Vec<_> = wanted.iter().filter(|v| !seen.contains_key(**v)).collect();
            if missing.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: {} of {} acknowledged records never consumed, e.g. {:?}; errors: {:?}",
                missing.len(),
                wanted.len(),
                &missing[..missing.len().min(5)],
                self.ledger.retriable.lock().unwrap()
            );
            sleep(Duration::from_millis(100)).await;
        }
        self.stop_consumer.store(true, Ordering::Relaxed);
        self.consumer.take().unwrap().await;
        self.ledger.assert_no_fatal(what);
        let duplicates: usize = self.ledger.values().values().map(|n| n - 1).sum();
        eprintln!(
            "{what}: {} records written, {duplicates} delivered more than once (rewound to the last commit), {} retriable errors said",
            written.len(),
            self.ledger.retriable.lock().unwrap().len()
        );
        assert_log_has_each_once(kafka, topic, &written, what);
    }
}

/// Reads the whole topic with the Java consumer: each written value once,
/// at the offset its delivery reported, in send order per partition.
fn assert_log_has_each_once(
    kafka: &Kafka,
    topic: &str,
    written: &[(i32, i64, String)],
    what: &str,
) {
    let read = kafka.peer(&[
        "consume",
        "--topic",
        topic,
        "--from-beginning",
        "--count",
        &written.len().to_string(),
        "--idle-ms",
        "5000",
        "--timeout-ms",
        "120000",
    ]);
    let mut log: BTreeMap<(i32, i64), String> = BTreeMap::new();
    let mut copies: BTreeMap<String, usize> = BTreeMap::new();
    for e in read.iter().filter(|e| e["event"] == "record") {
        let value = e["value"].as_str().unwrap().to_owned();
        *copies.entry(value.clone()).or_default() += 1;
        log.insert(
            (
                e["partition"].as_i64().unwrap() as i32,
                e["offset"].as_i64().unwrap(),
            ),
            value,
        );
    }
    let twice: Vec<_> = copies.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{what}: written more than once: {twice:?}"
    );
    for (p, o, v) in written {
        assert_eq!(log.get(&(*p, *o)), Some(v), "{what}: {topic}-{p}@{o}");
    }
    assert_eq!(
        log.len(),
        written.len(),
        "{what}: records nobody acknowledged in the log"
    );
    // Send order per partition: v<i> grows with the offset.
    let mut last: BTreeMap<i32, u64> = BTreeMap::new();
    for ((p, o), v) in &log {
        let i: u64 = v[1..].parse().unwrap();
        if let Some(prev) = last.insert(*p, i) {
            assert!(prev < i, "{what}: {topic}-{p}@{o}: {v} after v{prev}");
        }
    }
}

/// A broker that leads partitions and coordinates the group goes away
/// (SIGKILL, or a clean shutdown) and comes back while records flow.
async fn broker_goes_and_comes_back(clean: bool) {
    let what = if clean { "clean shutdown" } else { "SIGKILL" };
    let Some(kafka) = Kafka::get("broker_goes_and_comes_back") else {
        return;
    };
    const VICTIM: i32 = 1;
    let topic = kafka.unique("faults");
    kafka.create_topic(&topic, 6, 3, &[("min.insync.replicas", "2")]);
    let group = kafka.group_on("faults", VICTIM);
    let mut traffic = Traffic::start(&kafka, &topic, &group);
    traffic.progress(200, what).await;

    if clean {
        kafka.shutdown(VICTIM);
    } else {
        kafka.kill(VICTIM);
    }
    // Named within seconds: the consumer's connections to the broker end
    // (the coordinator's and a leader's).
    let gone = Instant::now();
    while !traffic
        .events()
        .iter()
        .any(|e| e.broker == Some(VICTIM) && matches!(e.kind, EventKind::Closed { .. }))
    {
        assert!(
            gone.elapsed() < Duration::from_secs(15),
            "{what}: no connection to broker {VICTIM} closed: {:?}",
            traffic.events()
        );
        sleep(Duration::from_millis(50)).await;
    }
    // The cluster moves the leaders away, and records flow again.
    let deadline = Instant::now() + WAIT;
    while kafka
        .describe(&topic)
        .iter()
        .any(|p| p.leader == VICTIM || p.leader < 0)
    {
        assert!(
            Instant::now() < deadline,
            "{what}: leaders stay on broker {VICTIM}"
        );
        sleep(Duration::from_millis(500)).await;
    }
    traffic.progress(200, what).await;

    kafka.restart(VICTIM);
    traffic.progress(200, what).await;
    traffic.finish(&kafka, &topic, what).await;
}

async fn a_broker_killed_and_restarted() {
    logs::capture();
    broker_goes_and_comes_back(false).await
}

async fn a_broker_shut_down_cleanly_and_restarted() {
    logs::capture();
    broker_goes_and_comes_back(true).await
}

/// Leaders move without any broker going away: partition 0 is reassigned
/// from brokers 1,2,3 to 3,1,2 and the preferred leader (3) elected, while
/// records flow; the consumer follows to a leader connection on broker 3.
async fn leaders_move_by_reassignment_and_election() {
    let what = "reassignment";
    let Some(kafka) = Kafka::get("leaders_move_by_reassignment_and_election") else {
        return;
    };
    let topic = kafka.unique("moves");
    kafka.create_topic_on(&topic, &[&[1, 2, 3], &[2, 3, 1]]);
    let group = kafka.unique("moves-g");
    let mut traffic = Traffic::start(&kafka, &topic, &group);
    traffic.progress(200, what).await;
    kafka.peer(&[
        "admin",
        "reassign",
        "--topic",
        &topic,
        "--partition",
        "0",
        "--replicas",
        "3,1,2",
    ]);
    kafka.peer(&[
        "admin",
        "elect-leaders",
        "--type",
        "preferred",
        "--topic",
        &topic,
        "--partition",
        "0",
    ]);
    let deadline = Instant::now() + WAIT;
    while kafka.describe(&topic)[0].leader != 3 {
        assert!(
            Instant::now() < deadline,
            "{what}: partition 0's leader is not 3: {:?}",
            kafka.describe(&topic)
        );
        sleep(Duration::from_millis(200)).await;
    }
    traffic.progress(300, what).await;
    let deadline = Instant::now() + WAIT;
    while !traffic.events().iter().any(|e| {
        e.broker == Some(3) && e.purpose == Purpose::Leader && matches!(e.kind, EventKind::Ready)
    }) {
        assert!(
            Instant::now() < deadline,
            "{what}: no leader connection to broker 3: {:?}",
            traffic.events()
        );
        traffic.progress(10, what).await;
    }
    traffic.finish(&kafka, &topic, what).await;
}

/// A topic deleted and created again with the same name (a new topic id):
/// the consumer goes on by itself and reads the new topic's records from
/// its start (its old position is out of range there: `auto.offset.reset`
/// applies), with no non-retriable error on the way.
async fn a_topic_deleted_and_created_again() {
    logs::capture();
    let Some(kafka) = Kafka::get("a_topic_deleted_and_created_again") else {
        return;
    };
    let topic = kafka.unique("again");
    kafka.create_topic(&topic, 1, 3, &[]);
    kafka.peer(&[
        "produce",
        "--topic",
        &topic,
        "--count",
        "50",
        "--value-prefix",
        "old-",
    ]);
    let consumer = Consumer::new(
        ConsumerConfig::builder()
            .bootstrap_servers(&kafka.bootstrap)
            .auto_offset_reset(OffsetReset::Earliest)
            .fetch_max_wait(Duration::from_millis(100))
            .metadata_max_age(Duration::from_secs(1))
            // Else its Metadata requests would create the topic again the
            // moment it is deleted (the brokers' auto.create.topics.enable
            // is on, as by default).
            .allow_auto_create_topics(false)
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.assign([TopicPartition::new(&topic, 0)]).unwrap();
    let ledger = Arc::new(Ledger::default());
    let stop = Arc::new(AtomicBool::new(false));
    let task = spawn(consume_loop(consumer, ledger.clone(), stop.clone()));
    let wait_for = |prefix: &'static str, n: usize| {
        let ledger = ledger.clone();
        async move {
            let deadline = Instant::now() + WAIT;
            loop {
                ledger.assert_no_fatal("topic again");
                let got = ledger
                    .values()
                    .keys()
                    .filter(|v| v.starts_with(prefix))
                    .count();
                if got >= n {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "{got} of {n} {prefix}* records; errors: {:?}",
                    ledger.retriable.lock().unwrap()
                );
                sleep(Duration::from_millis(100)).await;
            }
        }
    };
    wait_for("old-", 50).await;
    kafka.peer(&["admin", "delete-topic", "--topic", &topic]);
    // Created again once the deletion is through (the old partitions gone).
    let deadline = Instant::now() + WAIT;
    while kafka.try_describe(&topic).is_ok() {
        assert!(Instant::now() < deadline, "{topic} is still there");
        sleep(Duration::from_millis(200)).await;
    }
    kafka.create_topic(&topic, 1, 3, &[]);
    kafka.peer(&[
        "produce",
        "--topic",
        &topic,
        "--count",
        "20",
        "--value-prefix",
        "new-",
    ]);
    wait_for("new-", 20).await;
    stop.store(true, Ordering::Relaxed);
    task.await;
    ledger.assert_no_fatal("topic again");
}

/// `acks=all` with the ISR below `min.insync.replicas`: the partition's
/// ISR shrinks to 2 of its 3 replicas (one shut down) under
/// `min.insync.replicas=3`; the leader answers NOT_ENOUGH_REPLICAS, which
/// the producer retries by itself and names in a `warn` line within
/// seconds; once the broker is back, every record is written once.
async fn not_enough_replicas_then_recovery() {
    logs::capture();
    let Some(kafka) = Kafka::get("not_enough_replicas_then_recovery") else {
        return;
    };
    let topic = kafka.unique("isr");
    kafka.create_topic_on(&topic, &[&[1, 2, 3]]);
    kafka.peer(&[
        "admin",
        "alter-config",
        "--topic",
        &topic,
        "--set",
        "min.insync.replicas=3",
    ]);
    kafka.shutdown(3);
    let deadline = Instant::now() + WAIT;
    while kafka.describe(&topic)[0].isr.contains(&3) {
        assert!(Instant::now() < deadline, "broker 3 stays in the ISR");
        sleep(Duration::from_millis(200)).await;
    }
    let producer = Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(kafka.address(1))
            .build()
            .unwrap(),
    )
    .unwrap();
    let mut deliveries = Vec::new();
    for i in 0..10 {
        let record = ProducerRecord::new(&topic)
            .key(format!("k{i}"))
            .value(format!("v{i}"));
        deliveries.push(producer.send(record).await.unwrap());
    }
    let named = Instant::now();
    while logs::find(log::Level::Warn, "NOT_ENOUGH_REPLICAS").is_empty() {
        assert!(
            named.elapsed() < Duration::from_secs(15),
            "NOT_ENOUGH_REPLICAS not named in a warn line within 15 s"
        );
        sleep(Duration::from_millis(100)).await;
    }
    let line = logs::find(log::Level::Warn, "NOT_ENOUGH_REPLICAS").remove(0);
    assert!(
        line.contains(&topic),
        "the warn line names the topic: {line}"
    );
    kafka.restart(3);
    let mut written = Vec::new();
    for (i, d) in deliveries.into_iter().enumerate() {
        let w = d.await.unwrap_or_else(|e| panic!("v{i}: {e}"));
        written.push((w.partition, w.offset, format!("v{i}")));
    }
    producer
        .close_timeout(Duration::from_secs(10))
        .await
        .unwrap();
    assert_log_has_each_once(&kafka, &topic, &written, "NOT_ENOUGH_REPLICAS");
}

/// A produce quota (`producer_byte_rate` for our `client.id`) throttles
/// the producer: the broker answers at once with `throttle_time_ms` and
/// reads nothing more from the socket for that long (KIP-219). The
/// producer sends that broker nothing until the time is up, so no request
/// of its waits out a throttle in the broker's socket buffer: with one
/// request in flight at a time, its longest round trip stays well below
/// the longest throttle (a producer that sent anyway would see a round
/// trip about as long as the throttle). Every record is written once, in
/// order.
async fn a_quota_throttles_the_producer() {
    let Some(kafka) = Kafka::get("a_quota_throttles_the_producer") else {
        return;
    };
    let topic = kafka.unique("quota");
    kafka.create_topic_on(&topic, &[&[1]]);
    let client_id = kafka.unique("quota-client");
    kafka.peer(&[
        "admin",
        "set-quota",
        "--client-id",
        &client_id,
        "--producer-byte-rate",
        "20000",
    ]);
    let producer = Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(kafka.address(1))
            .client_id(&client_id)
            .linger(Duration::from_millis(5))
            // One request at a time: none is in flight when a throttled
            // answer comes, so a round trip as long as a throttle can only
            // be a request sent during one (a request already sent when
            // the throttle began would wait it out too, rightly).
            .max_in_flight_requests_per_connection(1)
            .build()
            .unwrap(),
    )
    .unwrap();
    // 150 records of about 2 KB: over a quota window (ten seconds here)
    // 30 KB/s, half as much again as the quota.
    let padding = "x".repeat(2000);
    let mut deliveries = Vec::new();
    for i in 0..150 {
        let record = ProducerRecord::new(&topic)
            .key(format!("k{i}-{padding}"))
            .value(format!("v{i}"));
        deliveries.push(producer.send(record).await.unwrap());
    }
    let mut written = Vec::new();
    for (i, d) in deliveries.into_iter().enumerate() {
        let w = d.await.unwrap_or_else(|e| panic!("v{i}: {e}"));
        written.push((w.partition, w.offset, format!("v{i}")));
    }
    let metrics = producer.metrics();
    producer
        .close_timeout(Duration::from_secs(10))
        .await
        .unwrap();
    kafka.peer(&[
        "admin",
        "set-quota",
        "--client-id",
        &client_id,
        "--producer-byte-rate",
        "0",
        "--remove",
    ]);
    assert!(
        metrics.throttled_answers > 0 && metrics.throttle_time_max_ms >= 500,
        "the quota never throttled the producer (a test that cannot fail): {} throttled answers, longest {} ms",
        metrics.throttled_answers,
        metrics.throttle_time_max_ms
    );
    let leader = metrics
        .brokers
        .values()
        .find(|b| b.broker == Some(1))
        .expect("counters for broker 1");
    let longest_ms = leader.latency.max_us.unwrap_or(0) / 1000;
    assert!(
        longest_ms * 2 < metrics.throttle_time_max_ms,
        "a request waited out a throttle: longest round trip {longest_ms} ms, longest throttle {} ms ({} throttled answers)",
        metrics.throttle_time_max_ms,
        metrics.throttled_answers
    );
    assert_log_has_each_once(&kafka, &topic, &written, "quota");
}

/// Starts every broker of a cluster whose brokers were all stopped, and
/// waits until it serves again, when dropped (a failed test too leaves the
/// cluster up for the next).
struct StartAgain<'a>(&'a Kafka);

impl Drop for StartAgain<'_> {
    fn drop(&mut self) {
        self.0.start(1);
        self.0.start(2);
        self.0.restart(3);
    }
}

/// Rebootstrap (KIP-899) between two Apache Kafka clusters: our producer
/// and consumer reach cluster A (this one) through a bootstrap address (a
/// forwarder standing for a load balancer or a DNS name); every broker of A
/// is killed, and the address now reaches cluster B (the test command's
/// main cluster). The producer writes to B and the consumer reads there,
/// from its group's start on B (the positions of A mean nothing on B), with
/// no error the README's loop would stop on; each is then connected to B's
/// brokers only, the bootstrap connection retired; the change is said in a
/// `warn` line.
async fn the_clients_follow_the_bootstrap_address_to_another_cluster() {
    use common::rebootstrap::{consume_all, consumer, producer, send_all, values, Forwarder};
    const TEST: &str = "the_clients_follow_the_bootstrap_address_to_another_cluster";
    logs::capture();
    let Some(a) = Kafka::get(TEST) else {
        return;
    };
    let Some(b) = a.other(TEST) else {
        return;
    };
    let topic = a.unique("rebootstrap");
    let group = a.unique("rebootstrap-group");
    a.create_topic(&topic, 3, 3, &[]);
    b.create_topic(&topic, 3, 3, &[]);
    let fwd = Forwarder::start(a.address(1));
    let producer = producer(fwd.addr(), "rebootstrap");
    let consumer = consumer(fwd.addr(), "rebootstrap", &topic, &group);
    let on_a = values("a");
    send_all(&producer, &topic, &on_a).await;
    consume_all(&consumer, &on_a.iter().cloned().collect()).await;

    let _start_again = StartAgain(&a);
    for id in 1..=3 {
        a.kill(id);
    }
    fwd.retarget(b.address(1));
    let on_b = values("b");
    send_all(&producer, &topic, &on_b).await;
    consume_all(&consumer, &on_b.iter().cloned().collect()).await;

    let b_addrs: BTreeSet<String> = b
        .brokers
        .iter()
        .map(|(_, addr)| addr.clone())
        .chain([fwd.addr().to_owned()])
        .collect();
    let deadline = Instant::now() + WAIT;
    loop {
        let conns: Vec<_> = producer
            .connections()
            .into_iter()
            .chain(consumer.connections())
            .collect();
        if conns
            .iter()
            .all(|c| b_addrs.contains(&c.addr) && c.purpose != Purpose::Bootstrap)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "connections off cluster B's brokers, or a bootstrap connection kept: {conns:?}"
        );
        sleep(Duration::from_millis(200)).await;
    }
    assert!(
        !logs::find(log::Level::Warn, "cluster changed").is_empty()
            || !logs::find(log::Level::Warn, "now answer for cluster").is_empty(),
        "the change of cluster was said in a warn line"
    );
    drop(consumer);
    drop(producer);
}

on_apache_kafka_alone!(
    the_clients_follow_the_bootstrap_address_to_another_cluster,
    a_broker_killed_and_restarted,
    a_broker_shut_down_cleanly_and_restarted,
    leaders_move_by_reassignment_and_election,
    a_topic_deleted_and_created_again,
    not_enough_replicas_then_recovery,
    a_quota_throttles_the_producer,
);
