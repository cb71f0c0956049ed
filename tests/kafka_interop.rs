//! Interoperability on Apache Kafka itself (the 3-broker cluster of
//! `scripts/kafka.sh`), judged by the reference clients: the Java client
//! (`tests/java/Peer.java`) and librdkafka (the `rdkafka` crate).
//!
//! - Our idempotent producer (acks=all, keyed, four partitions, every
//!   codec) writes a few thousand records; the Java consumer and
//!   librdkafka's read them all back: every record once, in send order
//!   per partition, keys, values (nulls included) and headers intact.
//! - The Java idempotent producer writes thousands of records, compressed
//!   with each codec and not; our consumer reads them in a classic group,
//!   in a KIP-848 group and by assignment: all, in order, none twice.
//! - Keyed placement: for 10,000 keys, our producer's default partitioner
//!   puts each key where the Java producer put it (the peer's
//!   `partitions` mode really produces), on 7 and 12 partitions.
//! - read_committed: two Java transactional producers at once commit and
//!   abort transactions in turn (committed records of one among aborted
//!   ones of the other), then a third aborts (each log ends with aborted
//!   records and a marker), while our consumer reads, a few batches per
//!   Fetch answer: exactly the committed records come, as the Java
//!   read_committed consumer reads them, and the positions end at the
//!   high watermarks, past the control records and the aborted ranges;
//!   read_uncommitted sees every data record, committed and aborted.
//! - Fetch sessions (KIP-227) on 30 partitions over the 3 leaders: with
//!   sessions a quiet Fetch lists no partition and its answer carries
//!   none (the broker serves the session incrementally: the per-broker
//!   byte counters show it), without them each lists and gets back all
//!   ten; every record delivered once either way.
//! - Follower fetching (KIP-392): leader on broker 1 (rack-1), replicas
//!   on all three brokers; with `client.rack=rack-2` the records come
//!   from broker 2 over a replica connection, with `rack-1` from the
//!   leader and no replica connection at all.
//!
//! - New leaders named in answers (KIP-951): a partition's leader moves
//!   by reassignment and election while our producer and consumer use
//!   it; both follow the leader the refusing broker names, with no
//!   Metadata request.
//! - A topic that does not exist (auto-creation off for our producer):
//!   `send` names it with UNKNOWN_TOPIC_OR_PARTITION within seconds
//!   rather than after `max.block.ms`, a bad name with
//!   INVALID_TOPIC_EXCEPTION at once; once created, it is written to.
//!
//! Every test makes its own topics and groups ([`Kafka::unique`]), so it
//! runs beside the others on the shared cluster. Waits are conditions
//! with deadlines.

// Drives a `Consumer` and a `Producer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::kafka::Kafka;
use common::polling::{poll_until, records_through_faults, Polled, Polling};
use futures::{FutureExt, StreamExt};
use lazykafka::config::{Compression, ConsumerConfigBuilder, GroupProtocol, IsolationLevel};
use lazykafka::error::ErrorCode;
use lazykafka::events::{BrokerCounters, ConnectionEvent, ConnectionEvents, EventKind, Purpose};
use lazykafka::producer::partition_for_key;
use lazykafka::{
    Acks, Consumer, ConsumerConfig, ConsumerRecord, Error, OffsetReset, Producer, ProducerConfig,
    ProducerRecord, TopicPartition,
};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::{Headers as _, Message as _};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// How long any one step may take.
const WAIT: Duration = Duration::from_secs(60);

/// One record as written or read: where it is, and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Rec {
    partition: i32,
    offset: i64,
    key: Option<String>,
    value: Option<String>,
}

fn text(bytes: Option<&[u8]>) -> Option<String> {
    bytes.map(|b| {
        String::from_utf8(b.to_vec()).unwrap_or_else(|e| format!("<not UTF-8: {e}: {b:?}>"))
    })
}

fn rec(r: &ConsumerRecord) -> Rec {
    Rec {
        partition: r.partition(),
        offset: r.offset(),
        key: text(r.key()),
        value: text(r.value()),
    }
}

/// The Java peer's lines of `event` kind (`record` from `consume`,
/// `delivered` from `produce`) as records.
fn java_records(events: &[Value], event: &str) -> Vec<Rec> {
    events
        .iter()
        .filter(|e| e["event"] == event)
        .map(|e| Rec {
            partition: e["partition"].as_i64().expect("partition") as i32,
            offset: e["offset"].as_i64().expect("offset"),
            key: e["key"].as_str().map(str::to_owned),
            value: e["value"].as_str().map(str::to_owned),
        })
        .collect()
}

/// `reader` read exactly `log`: each partition in offset order, every
/// record once, none that was not written, keys and values as written.
#[track_caller]
fn assert_read_exactly(reader: &str, log: &[Rec], read: &[Rec]) {
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    let disorder: Vec<(i32, i64, i64)> = read
        .iter()
        .filter_map(|r| match last.insert(r.partition, r.offset) {
            Some(before) if r.offset <= before => Some((r.partition, before, r.offset)),
            _ => None,
        })
        .collect();
    assert!(
        disorder.is_empty(),
        "{reader}: {} records out of order or read again, as (partition, offset before, offset): first {:?}",
        disorder.len(),
        &disorder[..disorder.len().min(10)]
    );
    let written: BTreeMap<(i32, i64), &Rec> =
        log.iter().map(|r| ((r.partition, r.offset), r)).collect();
    let got: BTreeMap<(i32, i64), &Rec> =
        read.iter().map(|r| ((r.partition, r.offset), r)).collect();
    let missing: Vec<&Rec> = written
        .iter()
        .filter(|(k, _)| !got.contains_key(k))
        .map(|(_, r)| *r)
        .collect();
    let unwritten: Vec<&Rec> = got
        .iter()
        .filter(|(k, _)| !written.contains_key(k))
        .map(|(_, r)| *r)
        .collect();
    let altered: Vec<(&Rec, &Rec)> = written
        .iter()
        .filter_map(|(k, w)| got.get(k).filter(|g| **g != *w).map(|g| (*w, *g)))
        .collect();
    assert!(
        missing.is_empty() && unwritten.is_empty() && altered.is_empty(),
        "{reader}: read {} of {} records; {} missing (first {:?}); {} never written (first {:?}); \
         {} altered, as (written, read) (first {:?})",
        read.len(),
        log.len(),
        missing.len(),
        &missing[..missing.len().min(5)],
        unwritten.len(),
        &unwritten[..unwritten.len().min(5)],
        altered.len(),
        &altered[..altered.len().min(5)]
    );
    assert_eq!(read.len(), log.len(), "{reader}: records read");
}

/// The offset after each partition's last record of `log`.
fn ends_of(log: &[Rec]) -> BTreeMap<i32, i64> {
    let mut ends = BTreeMap::new();
    for r in log {
        let end = ends.entry(r.partition).or_insert(0);
        *end = (*end).max(r.offset + 1);
    }
    ends
}

/// The high watermark of each partition of `topic`, from the Java Admin
/// client (ListOffsets, read_uncommitted).
fn high_watermarks(kafka: &Kafka, topic: &str) -> BTreeMap<i32, i64> {
    kafka
        .peer(&["admin", "list-offsets", "--topic", topic])
        .iter()
        .filter(|e| e["event"] == "offsets")
        .map(|e| {
            (
                e["partition"].as_i64().unwrap() as i32,
                e["latest"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn producer(kafka: &Kafka, compression: Compression) -> Producer {
    Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(&kafka.bootstrap)
            .acks(Acks::All)
            .enable_idempotence(true)
            .compression_type(compression)
            .linger(Duration::from_millis(5))
            .build()
            .unwrap(),
    )
    .unwrap()
}

/// Sends `records` (all queued, then every delivery awaited) and returns
/// where each one was written, in send order.
async fn send_all(producer: &Producer, records: Vec<ProducerRecord>) -> Vec<(i32, i64)> {
    let mut deliveries = Vec::with_capacity(records.len());
    for (i, record) in records.into_iter().enumerate() {
        let delivery = producer
            .send(record)
            .await
            .unwrap_or_else(|e| panic!("send of record {i}: {e}"));
        deliveries.push(delivery);
    }
    let mut written = Vec::with_capacity(deliveries.len());
    for (i, delivery) in deliveries.into_iter().enumerate() {
        let w = delivery
            .await
            .unwrap_or_else(|e| panic!("delivery of record {i}: {e}"));
        written.push((w.partition, w.offset));
    }
    written
}

fn consumer_config(bootstrap: &str) -> ConsumerConfigBuilder {
    ConsumerConfig::builder()
        .bootstrap_servers(bootstrap)
        .auto_offset_reset(OffsetReset::Earliest)
        .fetch_max_wait(Duration::from_millis(100))
        .enable_auto_commit(false)
}

fn partitions(topic: &str, count: i32) -> Vec<TopicPartition> {
    (0..count).map(|p| TopicPartition::new(topic, p)).collect()
}

/// A [`poll_until`] `take`: every record read, through faults.
fn keep(read: &mut Vec<Rec>, polled: Polled) {
    read.extend(records_through_faults(polled).iter().map(rec));
}

const POLLING: Polling = Polling::every(200);

/// Whether the consumer's position on each partition of `topic` is the
/// end given.
fn at_ends(consumer: &Consumer, topic: &str, ends: &BTreeMap<i32, i64>) -> bool {
    ends.iter()
        .all(|(p, end)| consumer.position(&TopicPartition::new(topic, *p)) == Some(*end))
}

fn positions(consumer: &Consumer, topic: &str, count: i32) -> Vec<Option<i64>> {
    partitions(topic, count)
        .iter()
        .map(|tp| consumer.position(tp))
        .collect()
}

/// Reads `topic` (`count` partitions) from the beginning with our
/// consumer until its position on every partition is `ends`' (so that
/// anything delivered twice or beyond the log is read too), and returns
/// what came.
async fn read_to_ends(
    consumer: &Consumer,
    what: &str,
    topic: &str,
    count: i32,
    ends: &BTreeMap<i32, i64>,
) -> Vec<Rec> {
    let mut read = Vec::new();
    let done = poll_until(consumer, &mut read, POLLING, keep, |c, _| {
        at_ends(c, topic, ends)
    })
    .await;
    assert!(
        done,
        "{what}: positions {:?}, expected {ends:?}, after reading {} records",
        positions(consumer, topic, count),
        read.len()
    );
    read
}

/// Reads `count` records of `topic` (`partitions` of them, from the
/// beginning) with librdkafka's consumer; each with its header `i`.
fn librdkafka_read(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    count: usize,
) -> Vec<(Rec, Option<String>)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "kafka-interop-unused")
        .set("enable.auto.commit", "false")
        .create()
        .expect("librdkafka consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let deadline = Instant::now() + WAIT;
    let mut read = Vec::new();
    while read.len() < count && Instant::now() < deadline {
        let Some(m) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = m.unwrap_or_else(|e| panic!("librdkafka consumer: {e}"));
        let header = m
            .headers()
            .and_then(|h| h.iter().find(|h| h.key == "i").and_then(|h| text(h.value)));
        read.push((
            Rec {
                partition: m.partition(),
                offset: m.offset(),
                key: text(m.key()),
                value: text(m.payload()),
            },
            header,
        ));
    }
    read
}

// ---------------------------------------------------------------------------
// 1. Our idempotent producer, read back by Java and librdkafka.

const OURS: usize = 3000;
const OUR_PARTITIONS: i32 = 4;

/// Record `i` of our producer: a key of 61 (so each key's records stay in
/// order on one partition), none for every tenth (the sticky partitioner
/// places those); a value with non-ASCII text and a run that compresses,
/// none (a tombstone) for every hundredth.
fn our_record(i: usize) -> (Option<String>, Option<String>) {
    let key = (i % 10 != 9).then(|| format!("key-{}", i % 61));
    let value = (i % 100 != 50).then(|| format!("value-{i}-ü€-{}", "x".repeat(i % 37)));
    (key, value)
}

async fn our_producer_read_back_by_java_and_librdkafka(compression: Compression) {
    let Some(kafka) = Kafka::get("our_producer_read_back_by_java_and_librdkafka") else {
        return;
    };
    let topic = kafka.unique("interop-ours");
    kafka.create_topic(&topic, OUR_PARTITIONS, 3, &[]);
    let producer = producer(&kafka, compression);
    let records = (0..OURS)
        .map(|i| {
            let (key, value) = our_record(i);
            let mut r = ProducerRecord::new(&topic).header("i", Some(i.to_string()));
            if let Some(k) = key {
                r = r.key(k);
            }
            if let Some(v) = value {
                r = r.value(v);
            }
            r
        })
        .collect();
    let written = send_all(&producer, records).await;
    let metrics = producer.metrics();
    producer
        .close_timeout(Duration::from_secs(10))
        .await
        .unwrap();

    let log: Vec<Rec> = written
        .iter()
        .enumerate()
        .map(|(i, &(partition, offset))| {
            let (key, value) = our_record(i);
            Rec {
                partition,
                offset,
                key,
                value,
            }
        })
        .collect();
    // Written once each, in send order: each partition's records take the
    // offsets 0, 1, 2, ... in the order they were sent, and every keyed
    // record is where Kafka's murmur2 puts its key.
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    for (i, r) in log.iter().enumerate() {
        let expected = next.entry(r.partition).or_insert(0);
        assert_eq!(
            r.offset, *expected,
            "{compression}: record {i} written at {}@{}, expected offset {expected} (send order)",
            r.partition, r.offset
        );
        *expected += 1;
        if let Some(k) = &r.key {
            assert_eq!(
                Some(r.partition),
                partition_for_key(k.as_bytes(), OUR_PARTITIONS).ok(),
                "{compression}: record {i} with key {k}"
            );
        }
    }
    assert_eq!(
        next.len(),
        OUR_PARTITIONS as usize,
        "partitions written: {next:?}"
    );
    // The batches went out compressed (or not) as configured.
    let ratios: Vec<(i32, Option<f64>)> = metrics
        .partitions
        .iter()
        .filter(|p| p.topic == topic)
        .map(|p| (p.partition, p.compression_ratio))
        .collect();
    assert_eq!(ratios.len(), OUR_PARTITIONS as usize, "{ratios:?}");
    for (p, ratio) in &ratios {
        let ratio = ratio.unwrap_or_else(|| panic!("{compression}: partition {p}: no ratio"));
        if compression == Compression::None {
            assert_eq!(ratio, 1.0, "uncompressed partition {p}");
        } else {
            assert!(
                ratio > 1.5,
                "{compression}: partition {p} compressed {ratio}:1"
            );
        }
    }

    // The Java consumer (assigned every partition, from the beginning).
    let events = kafka.peer(&[
        "consume",
        "--topic",
        &topic,
        "--count",
        &OURS.to_string(),
        "--from-beginning",
    ]);
    let java = java_records(&events, "record");
    assert_read_exactly(&format!("{compression}: the Java consumer"), &log, &java);

    // librdkafka's consumer, headers too.
    let rd = librdkafka_read(&kafka.bootstrap, &topic, OUR_PARTITIONS, OURS);
    let rd_records: Vec<Rec> = rd.iter().map(|(r, _)| r.clone()).collect();
    assert_read_exactly(&format!("{compression}: librdkafka"), &log, &rd_records);
    let index: BTreeMap<(i32, i64), usize> = log
        .iter()
        .enumerate()
        .map(|(i, r)| ((r.partition, r.offset), i))
        .collect();
    let wrong_headers: Vec<_> = rd
        .iter()
        .filter(|(r, h)| h.as_deref() != Some(index[&(r.partition, r.offset)].to_string().as_str()))
        .collect();
    assert!(
        wrong_headers.is_empty(),
        "{compression}: librdkafka read {} records whose header `i` is not their send index: first {:?}",
        wrong_headers.len(),
        &wrong_headers[..wrong_headers.len().min(5)]
    );
}

async fn our_uncompressed_records_read_by_java_and_librdkafka() {
    our_producer_read_back_by_java_and_librdkafka(Compression::None).await
}

async fn our_gzip_records_read_by_java_and_librdkafka() {
    our_producer_read_back_by_java_and_librdkafka(Compression::Gzip).await
}

async fn our_snappy_records_read_by_java_and_librdkafka() {
    our_producer_read_back_by_java_and_librdkafka(Compression::Snappy).await
}

async fn our_lz4_records_read_by_java_and_librdkafka() {
    our_producer_read_back_by_java_and_librdkafka(Compression::Lz4).await
}

async fn our_zstd_records_read_by_java_and_librdkafka() {
    our_producer_read_back_by_java_and_librdkafka(Compression::Zstd).await
}

// ---------------------------------------------------------------------------
// 2. The Java producer's records, read by our consumer.

const JAVA_PARTITIONS: i32 = 3;

/// Runs of the Java idempotent producer: codec and record count.
const JAVA_RUNS: [(&str, usize); 5] = [
    ("none", 2000),
    ("gzip", 1000),
    ("snappy", 1000),
    ("lz4", 1000),
    ("zstd", 1000),
];

async fn java_producers_records_read_by_our_consumer_in_groups_and_by_assignment() {
    let Some(kafka) = Kafka::get("java_producers_records_read_by_our_consumer") else {
        return;
    };
    let topic = kafka.unique("interop-java");
    kafka.create_topic(&topic, JAVA_PARTITIONS, 3, &[]);
    let mut log = Vec::new();
    let mut start = 0;
    for (codec, count) in JAVA_RUNS {
        let compression = format!("compression.type={codec}");
        let events = kafka.peer(&[
            "produce",
            "--topic",
            &topic,
            "--count",
            &count.to_string(),
            "--start",
            &start.to_string(),
            "--acks",
            "all",
            "--idempotent",
            "true",
            "--property",
            &compression,
        ]);
        let delivered = java_records(&events, "delivered");
        assert_eq!(
            delivered.len(),
            count,
            "{codec}: Java's deliveries: {events:?}"
        );
        log.extend(delivered);
        start += count;
    }
    // What the Java producer wrote: every value once, each key where
    // murmur2 puts it, offsets without a gap.
    let values: BTreeSet<&str> = log.iter().filter_map(|r| r.value.as_deref()).collect();
    assert_eq!(values.len(), start, "distinct values Java wrote");
    for r in &log {
        let key = r.key.as_deref().expect("Java's records have keys");
        assert_eq!(
            Some(r.partition),
            partition_for_key(key.as_bytes(), JAVA_PARTITIONS).ok(),
            "Java placed {key}"
        );
    }
    let ends = ends_of(&log);
    let per_partition: BTreeMap<i32, usize> = log.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.partition).or_default() += 1;
        m
    });
    assert_eq!(
        ends.iter()
            .map(|(p, e)| (*p, *e as usize))
            .collect::<BTreeMap<_, _>>(),
        per_partition,
        "Java's log has gaps"
    );

    // A classic group, a KIP-848 group, manual assignment.
    for (what, protocol) in [
        ("classic group", Some(GroupProtocol::Classic)),
        ("KIP-848 group", Some(GroupProtocol::Consumer)),
        ("assignment", None),
    ] {
        let mut config = consumer_config(&kafka.bootstrap);
        if let Some(protocol) = protocol {
            config = config
                .group_id(kafka.unique("interop-java-g"))
                .group_protocol(protocol);
            if protocol == GroupProtocol::Classic {
                config = config
                    .session_timeout(Duration::from_secs(6))
                    .heartbeat_interval(Duration::from_millis(500));
            }
        }
        let consumer = Consumer::new(config.build().unwrap()).unwrap();
        match protocol {
            Some(_) => consumer.subscribe([topic.as_str()]).unwrap(),
            None => consumer
                .assign(partitions(&topic, JAVA_PARTITIONS))
                .unwrap(),
        }
        let read = read_to_ends(&consumer, what, &topic, JAVA_PARTITIONS, &ends).await;
        assert_read_exactly(&format!("our consumer ({what})"), &log, &read);
        consumer.close().await.unwrap();
    }
}

// ---------------------------------------------------------------------------
// 3. Keyed placement, against the Java producer.

const KEYS: usize = 10_000;

async fn keyed_placement_is_javas_on_7_and_12_partitions() {
    let Some(kafka) = Kafka::get("keyed_placement_is_javas_on_7_and_12_partitions") else {
        return;
    };
    for count in [7, 12] {
        // Java's placement, by producing: `key-0` .. `key-9999` (5 to 8
        // bytes: every tail length of murmur2).
        let javas_topic = kafka.unique("interop-keys-java");
        kafka.create_topic(&javas_topic, count, 1, &[]);
        let events = kafka.peer(&[
            "partitions",
            "--topic",
            &javas_topic,
            "--keys",
            &KEYS.to_string(),
        ]);
        let java: BTreeMap<String, i32> = events
            .iter()
            .filter(|e| e.get("event").is_none())
            .map(|e| {
                (
                    e["key"].as_str().unwrap().to_owned(),
                    e["partition"].as_i64().unwrap() as i32,
                )
            })
            .collect();
        assert_eq!(
            java.len(),
            KEYS,
            "{count} partitions: Java placed {} keys",
            java.len()
        );

        // Ours, by producing too (to a topic of the same partition count).
        let our_topic = kafka.unique("interop-keys-ours");
        kafka.create_topic(&our_topic, count, 1, &[]);
        let producer = producer(&kafka, Compression::None);
        let keys: Vec<String> = (0..KEYS).map(|i| format!("key-{i}")).collect();
        let records = keys
            .iter()
            .map(|k| ProducerRecord::new(&our_topic).key(k.clone()).value(""))
            .collect();
        let written = send_all(&producer, records).await;
        producer
            .close_timeout(Duration::from_secs(10))
            .await
            .unwrap();

        let mut differ = Vec::new();
        let mut used = BTreeSet::new();
        for (key, (partition, _)) in keys.iter().zip(&written) {
            let javas = java[key];
            let computed = partition_for_key(key.as_bytes(), count).unwrap();
            if *partition != javas || computed != javas {
                differ.push((key.clone(), javas, *partition, computed));
            }
            used.insert(javas);
        }
        assert!(
            differ.is_empty(),
            "{count} partitions: {} of {KEYS} keys placed otherwise than by Java, as (key, Java's, \
             our producer's, partition_for_key): first {:?}",
            differ.len(),
            &differ[..differ.len().min(10)]
        );
        assert_eq!(used.len(), count as usize, "partitions Java used");
    }
}

// ---------------------------------------------------------------------------
// 4. read_committed against the Java transactional producer.

const TXN_PARTITIONS: i32 = 3;
/// Two transactional producers at once, each committing and aborting in
/// turn, their records told apart by a prefix: running together they
/// interleave committed records of one with aborted records of the other
/// in a partition (aborted ranges are per producer). Then a third that
/// aborts, so that each log ends with aborted records and abort markers,
/// which positions must move past.
const TRANSACTIONS: [(&str, &str); 3] = [
    (
        "a-",
        "commit:100,abort:70,commit:5,abort:3,commit:80,abort:40",
    ),
    (
        "b-",
        "abort:60,commit:30,abort:5,commit:90,abort:20,commit:10",
    ),
    ("c-", "abort:30"),
];

/// For each transaction of `steps` (`commit:N,abort:N,...`): whether it
/// commits, and how many records it has.
fn steps(steps: &str) -> Vec<(bool, usize)> {
    steps
        .split(',')
        .map(|step| {
            let (kind, n) = step.split_once(':').unwrap();
            (kind == "commit", n.parse().unwrap())
        })
        .collect()
}

/// Whether a record of the peers (value `<prefix>value-<i>`, the peer
/// numbering its records across its transactions) was committed.
fn is_committed(r: &Rec) -> bool {
    let value = r.value.as_deref().unwrap_or_default();
    let (prefix, steps_of) = TRANSACTIONS
        .iter()
        .find(|(prefix, _)| value.starts_with(prefix))
        .unwrap_or_else(|| panic!("a value of no peer: {r:?}"));
    let i: usize = value[prefix.len()..]
        .strip_prefix("value-")
        .and_then(|i| i.parse().ok())
        .unwrap_or_else(|| panic!("a value of no peer: {r:?}"));
    let mut first = 0;
    for (commit, n) in steps(steps_of) {
        if i < first + n {
            return commit;
        }
        first += n;
    }
    panic!("{r:?}: beyond the peer's transactions")
}

async fn read_committed_reads_exactly_the_committed_transactions() {
    let Some(kafka) = Kafka::get("read_committed_reads_exactly_the_committed_transactions") else {
        return;
    };
    let topic = kafka.unique("interop-txn");
    kafka.create_topic(&topic, TXN_PARTITIONS, 3, &[]);
    // Small Fetch answers (a few batches each): a transaction's records
    // span several answers, each naming the aborted transactions in its
    // range.
    let committed_consumer = Consumer::new(
        consumer_config(&kafka.bootstrap)
            .isolation_level(IsolationLevel::ReadCommitted)
            .max_partition_fetch_bytes(2048)
            .build()
            .unwrap(),
    )
    .unwrap();
    committed_consumer
        .assign(partitions(&topic, TXN_PARTITIONS))
        .unwrap();
    // Fetching (positions at the log start) before the producers start.
    let mut committed_read = Vec::new();
    let zero: BTreeMap<i32, i64> = (0..TXN_PARTITIONS).map(|p| (p, 0)).collect();
    assert!(
        poll_until(
            &committed_consumer,
            &mut committed_read,
            POLLING,
            keep,
            |c, _| at_ends(c, &topic, &zero)
        )
        .await,
        "positions {:?}",
        positions(&committed_consumer, &topic, TXN_PARTITIONS)
    );

    // The transactions, while our read_committed consumer reads; small
    // batches (about 30 records), so a transaction has several per
    // partition.
    let spawn = |(prefix, steps): &(&str, &str)| {
        kafka.spawn_peer(&[
            "produce",
            "--topic",
            &topic,
            "--transactional-id",
            &kafka.unique("interop-txn-id"),
            "--transactions",
            steps,
            "--key-prefix",
            &format!("{prefix}key-"),
            "--value-prefix",
            &format!("{prefix}value-"),
            "--property",
            "batch.size=1024",
        ])
    };
    let ended = |events: &[Value]| {
        events
            .iter()
            .any(|e| e["event"] == "done" || e["event"] == "error")
    };
    let mut peers: Vec<_> = TRANSACTIONS[..2].iter().map(spawn).collect();
    assert!(
        poll_until(
            &committed_consumer,
            &mut committed_read,
            POLLING,
            keep,
            |_, _| peers.iter().all(|peer| peer.wait(Duration::ZERO, ended))
        )
        .await,
        "the transactional producers did not finish: {}",
        peers
            .iter()
            .map(|p| p.report())
            .collect::<Vec<_>>()
            .join("\n")
    );
    peers.push(spawn(&TRANSACTIONS[2]));
    assert!(
        poll_until(
            &committed_consumer,
            &mut committed_read,
            POLLING,
            keep,
            |_, _| peers[2].wait(Duration::ZERO, ended)
        )
        .await,
        "the last transactional producer did not finish: {}",
        peers[2].report()
    );
    let mut all = Vec::new();
    for (peer, (prefix, steps_of)) in peers.iter_mut().zip(TRANSACTIONS) {
        assert!(
            peer.wait_exit(WAIT),
            "the transactional producer {prefix} failed: {}",
            peer.report()
        );
        let outcomes: Vec<(bool, usize)> = peer
            .events()
            .iter()
            .filter(|e| e["event"] == "committed" || e["event"] == "aborted")
            .map(|e| {
                (
                    e["event"] == "committed",
                    e["count"].as_u64().unwrap() as usize,
                )
            })
            .collect();
        assert_eq!(
            outcomes,
            steps(steps_of),
            "producer {prefix}: its transactions"
        );
        // What it wrote: every data record, committed or not.
        let delivered = java_records(&peer.events(), "delivered");
        let count: usize = steps(steps_of).iter().map(|(_, n)| n).sum();
        assert_eq!(delivered.len(), count, "producer {prefix}: records written");
        all.extend(delivered);
    }
    let (committed, aborted): (Vec<Rec>, Vec<Rec>) = all.iter().cloned().partition(is_committed);
    // Each partition's log ends with aborted records (the last producer's)
    // and an abort marker after them. The coordinator writes the markers
    // after the producer's EndTxn is answered: the high watermarks are
    // waited on (at most 30 s) until they are past the last records.
    let ends = ends_of(&all);
    let tails = ends_of(&aborted);
    let deadline = Instant::now() + Duration::from_secs(30);
    let hw = loop {
        let hw = high_watermarks(&kafka, &topic);
        let past = (0..TXN_PARTITIONS).all(|p| hw.get(&p) > ends.get(&p));
        if past || Instant::now() >= deadline {
            break hw;
        }
        common::sleep(Duration::from_millis(200)).await;
    };
    for p in 0..TXN_PARTITIONS {
        assert!(
            tails.get(&p) == ends.get(&p) && hw[&p] > ends[&p],
            "partition {p}: the last aborted record ends at {:?}, the last record at {:?}, \
             the high watermark is {}: expected an aborted tail and a marker after it",
            tails.get(&p),
            ends.get(&p),
            hw[&p]
        );
    }

    // read_committed: the committed records only, and positions at the
    // high watermarks (past the markers and the aborted tails).
    assert!(
        poll_until(
            &committed_consumer,
            &mut committed_read,
            POLLING,
            keep,
            |c, _| at_ends(c, &topic, &hw)
        )
        .await,
        "read_committed: positions {:?}, expected the high watermarks {hw:?}, after {} records",
        positions(&committed_consumer, &topic, TXN_PARTITIONS),
        committed_read.len()
    );
    let aborted_offsets: BTreeSet<(i32, i64)> =
        aborted.iter().map(|r| (r.partition, r.offset)).collect();
    let leaked: Vec<&Rec> = committed_read
        .iter()
        .filter(|r| aborted_offsets.contains(&(r.partition, r.offset)))
        .collect();
    assert!(
        leaked.is_empty(),
        "read_committed delivered {} aborted records: first {:?}",
        leaked.len(),
        &leaked[..leaked.len().min(5)]
    );
    assert_read_exactly("our consumer, read_committed", &committed, &committed_read);
    committed_consumer.close().await.unwrap();

    // The Java consumer, read_committed, agrees.
    let events = kafka.peer(&[
        "consume",
        "--topic",
        &topic,
        "--count",
        &committed.len().to_string(),
        "--from-beginning",
        "--isolation",
        "read_committed",
    ]);
    assert_read_exactly(
        "the Java consumer, read_committed",
        &committed,
        &java_records(&events, "record"),
    );

    // read_uncommitted: every data record, committed and aborted, and
    // the positions at the high watermarks too.
    let uncommitted_consumer = Consumer::new(
        consumer_config(&kafka.bootstrap)
            .isolation_level(IsolationLevel::ReadUncommitted)
            .max_partition_fetch_bytes(2048)
            .build()
            .unwrap(),
    )
    .unwrap();
    uncommitted_consumer
        .assign(partitions(&topic, TXN_PARTITIONS))
        .unwrap();
    let read = read_to_ends(
        &uncommitted_consumer,
        "read_uncommitted",
        &topic,
        TXN_PARTITIONS,
        &hw,
    )
    .await;
    assert_read_exactly("our consumer, read_uncommitted", &all, &read);
    uncommitted_consumer.close().await.unwrap();
}

// ---------------------------------------------------------------------------
// 5. Fetch sessions (KIP-227) on a real broker.

const SESSION_PARTITIONS: i32 = 30;
/// Bytes a partition takes in a Fetch request, at least (v12+: partition,
/// current leader epoch, fetch offset, last fetched epoch, log start
/// offset, partition max bytes).
const REQUEST_ENTRY: u64 = 4 + 4 + 8 + 4 + 8 + 4;
/// Bytes a partition takes in a Fetch answer, at least (partition, error
/// code, high watermark, last stable offset, log start offset, preferred
/// read replica).
const ANSWER_ENTRY: u64 = 4 + 2 + 8 + 8 + 8 + 4;

/// Counters of the consumer's connections to broker `id`.
fn counters_of(kafka: &Kafka, consumer: &Consumer, id: i32) -> BrokerCounters {
    consumer
        .broker_counters()
        .get(kafka.address(id))
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "no counters for broker {id} ({}): {:?}",
                kafka.address(id),
                consumer.broker_counters().keys().collect::<Vec<_>>()
            )
        })
}

/// Polls `consumer` until each broker answered `answers` more requests;
/// returns per broker the bytes sent per request and received per
/// answer over those.
async fn quiet_fetch_sizes(
    kafka: &Kafka,
    consumer: &Consumer,
    answers: u64,
) -> BTreeMap<i32, (u64, u64)> {
    let before: BTreeMap<i32, BrokerCounters> = (1..=3)
        .map(|id| (id, counters_of(kafka, consumer, id)))
        .collect();
    let mut read = Vec::new();
    let enough = poll_until(consumer, &mut read, POLLING, keep, |c, _| {
        (1..=3).all(|id| counters_of(kafka, c, id).responses >= before[&id].responses + answers)
    })
    .await;
    assert!(
        enough,
        "fewer than {answers} Fetch answers per broker while quiet: {:?}",
        consumer.broker_counters()
    );
    assert!(
        read.is_empty(),
        "records while nothing was produced: {read:?}"
    );
    (1..=3)
        .map(|id| {
            let (b, a) = (&before[&id], counters_of(kafka, consumer, id));
            let out = (a.bytes_out - b.bytes_out) / (a.requests - b.requests);
            let r#in = (a.bytes_in - b.bytes_in) / (a.responses - b.responses);
            (id, (out, r#in))
        })
        .collect()
}

async fn fetch_sessions_on_30_partitions_over_3_leaders() {
    let Some(kafka) = Kafka::get("fetch_sessions_on_30_partitions_over_3_leaders") else {
        return;
    };
    let topic = kafka.unique("interop-sessions");
    let leaders: Vec<[i32; 1]> = (0..SESSION_PARTITIONS).map(|p| [p % 3 + 1]).collect();
    let replicas: Vec<&[i32]> = leaders.iter().map(|r| &r[..]).collect();
    kafka.create_topic_on(&topic, &replicas);
    let producer = producer(&kafka, Compression::None);
    let value = |p: i32, n: usize| format!("p{p}-{n}");
    let mut sent: BTreeMap<i32, usize> = BTreeMap::new();
    let mut batch = Vec::new();
    for p in 0..SESSION_PARTITIONS {
        for n in 0..50 {
            batch.push(ProducerRecord::new(&topic).partition(p).value(value(p, n)));
        }
        sent.insert(p, 50);
    }
    send_all(&producer, batch).await;

    // The same reading twice: with sessions (the default) and without.
    let with = Consumer::new(consumer_config(&kafka.bootstrap).build().unwrap()).unwrap();
    let without = Consumer::new(
        consumer_config(&kafka.bootstrap)
            .fetch_sessions(false)
            .build()
            .unwrap(),
    )
    .unwrap();
    assert!(with.config().fetch_sessions(), "sessions are on by default");
    let mut reads = [Vec::new(), Vec::new()];
    for (consumer, read) in [&with, &without].into_iter().zip(&mut reads) {
        consumer
            .assign(partitions(&topic, SESSION_PARTITIONS))
            .unwrap();
        let ends: BTreeMap<i32, i64> = sent.iter().map(|(p, n)| (*p, *n as i64)).collect();
        assert!(
            poll_until(consumer, read, POLLING, keep, |c, _| at_ends(
                c, &topic, &ends
            ))
            .await,
            "positions {:?} after {} records",
            positions(consumer, &topic, SESSION_PARTITIONS),
            read.len()
        );
    }
    // Records trickle in: a few at a time on one partition or another
    // while both read (with sessions, a changed partition is listed anew).
    for round in 0..30usize {
        let p = (round * 7 % SESSION_PARTITIONS as usize) as i32;
        let n = 1 + round % 3;
        let start = sent[&p];
        let records = (start..start + n)
            .map(|i| ProducerRecord::new(&topic).partition(p).value(value(p, i)))
            .collect();
        send_all(&producer, records).await;
        *sent.get_mut(&p).unwrap() += n;
        for (consumer, read) in [&with, &without].into_iter().zip(&mut reads) {
            match consumer.poll(Duration::from_millis(20)).await {
                Ok(records) => read.extend(records.iter().map(rec)),
                Err(e) if e.is_retriable() => eprintln!("poll: {e}"),
                Err(e) => panic!("poll: {e}"),
            }
        }
    }
    producer
        .close_timeout(Duration::from_secs(10))
        .await
        .unwrap();
    let log: Vec<Rec> = sent
        .iter()
        .flat_map(|(&p, &n)| {
            (0..n).map(move |i| Rec {
                partition: p,
                offset: i as i64,
                key: None,
                value: Some(value(p, i)),
            })
        })
        .collect();
    let ends = ends_of(&log);
    for ((consumer, read), what) in [&with, &without]
        .into_iter()
        .zip(&mut reads)
        .zip(["with sessions", "without sessions"])
    {
        assert!(
            poll_until(consumer, read, POLLING, keep, |c, _| at_ends(
                c, &topic, &ends
            ))
            .await,
            "{what}: positions {:?}, expected {ends:?}, after {} records",
            positions(consumer, &topic, SESSION_PARTITIONS),
            read.len()
        );
        assert_read_exactly(&format!("our consumer {what}"), &log, read);
    }

    // Caught up and quiet. A full Fetch to a broker lists its 10
    // partitions and its answer carries them all; an incremental one
    // lists only what changed (nothing) and the broker answers only the
    // partitions with news (none).
    let sizes_with = quiet_fetch_sizes(&kafka, &with, 10).await;
    let sizes_without = quiet_fetch_sizes(&kafka, &without, 10).await;
    let per_broker = u64::try_from(SESSION_PARTITIONS / 3).unwrap();
    for id in 1..=3 {
        let (out, r#in) = sizes_with[&id];
        let (full_out, full_in) = sizes_without[&id];
        assert!(
            full_out >= per_broker * REQUEST_ENTRY && full_in >= per_broker * ANSWER_ENTRY,
            "broker {id}: without sessions a Fetch took {full_out} bytes and its answer {full_in}: \
             less than {per_broker} partitions need"
        );
        assert!(
            out < per_broker * REQUEST_ENTRY && r#in < per_broker * ANSWER_ENTRY,
            "broker {id}: with sessions a quiet Fetch took {out} bytes and its answer {}, \
             room for the {per_broker} partitions (without sessions: {full_out} and {full_in}): \
             not incremental",
            r#in
        );
    }
    with.close().await.unwrap();
    without.close().await.unwrap();
}

// ---------------------------------------------------------------------------
// 6. Follower fetching (KIP-392).

const FOLLOWER_RECORDS: usize = 1000;

fn drain(events: &mut ConnectionEvents) -> Vec<ConnectionEvent> {
    let mut out = Vec::new();
    while let Some(Some(e)) = events.next().now_or_never() {
        out.push(e);
    }
    out
}

/// A topic of two partitions led by broker 1 with replicas on all three,
/// every replica in sync, and `FOLLOWER_RECORDS` records of 100 bytes
/// and more on each partition. Returns the topic and its log.
async fn topic_on_every_broker_led_by_1(kafka: &Kafka) -> (String, Vec<Rec>) {
    let topic = kafka.unique("interop-near");
    kafka.create_topic_on(&topic, &[&[1, 2, 3], &[1, 3, 2]]);
    let producer = producer(kafka, Compression::None);
    let value = |p: i32, i: usize| format!("{p}-{i}-{}", "v".repeat(100));
    let records = (0..2)
        .flat_map(|p| (0..FOLLOWER_RECORDS).map(move |i| (p, i)))
        .map(|(p, i)| ProducerRecord::new(&topic).partition(p).value(value(p, i)))
        .collect();
    let written = send_all(&producer, records).await;
    producer
        .close_timeout(Duration::from_secs(10))
        .await
        .unwrap();
    let log = (0..2)
        .flat_map(|p| (0..FOLLOWER_RECORDS).map(move |i| (p, i)))
        .zip(written)
        .map(|((p, i), (partition, offset))| Rec {
            partition,
            offset,
            key: None,
            value: Some(value(p, i)),
        })
        .collect();
    // The leader names a follower only while it is in sync.
    let deadline = Instant::now() + WAIT;
    loop {
        let parts = kafka.describe(&topic);
        if parts.iter().all(|p| p.leader == 1 && p.isr.len() == 3) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{topic}: replicas not in sync: {parts:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    (topic, log)
}

/// Reads the whole topic with a consumer in `rack`, bootstrapped on
/// broker 3 (neither leader nor the rack-2 follower); returns the
/// consumer (still open), its connection events and what it read.
async fn read_from_rack(
    kafka: &Kafka,
    topic: &str,
    rack: &str,
    log: &[Rec],
) -> (Consumer, Vec<ConnectionEvent>) {
    let consumer = Consumer::new(
        consumer_config(kafka.address(3))
            .client_rack(rack)
            .build()
            .unwrap(),
    )
    .unwrap();
    let mut events = consumer.connection_events();
    consumer.assign(partitions(topic, 2)).unwrap();
    let read = read_to_ends(&consumer, rack, topic, 2, &ends_of(log)).await;
    assert_read_exactly(&format!("our consumer in {rack}"), log, &read);
    (consumer, drain(&mut events))
}

fn payload(log: &[Rec]) -> u64 {
    log.iter()
        .map(|r| r.value.as_ref().map_or(0, String::len) as u64)
        .sum()
}

async fn a_consumer_in_rack_2_fetches_from_the_follower_on_broker_2() {
    let Some(kafka) = Kafka::get("a_consumer_in_rack_2_fetches_from_the_follower_on_broker_2")
    else {
        return;
    };
    let (topic, log) = topic_on_every_broker_led_by_1(&kafka).await;
    let (consumer, events) = read_from_rack(&kafka, &topic, "rack-2", &log).await;
    let replicas: BTreeSet<Option<i32>> = events
        .iter()
        .filter(|e| e.purpose == Purpose::Replica && matches!(e.kind, EventKind::Ready))
        .map(|e| e.broker)
        .collect();
    assert_eq!(
        replicas,
        BTreeSet::from([Some(2)]),
        "replica connections (by broker) of a consumer in rack-2: {events:?}"
    );
    // The records came from broker 2: it sent at least their bytes, the
    // leader fewer than a tenth of them.
    let bytes = payload(&log);
    let follower = counters_of(&kafka, &consumer, 2);
    let leader = counters_of(&kafka, &consumer, 1);
    assert!(
        follower.bytes_in >= bytes && leader.bytes_in < bytes / 10,
        "{bytes} bytes of values; broker 2 sent {} bytes, the leader {}",
        follower.bytes_in,
        leader.bytes_in
    );
    assert!(
        consumer
            .connections()
            .iter()
            .any(|c| c.purpose == Purpose::Replica && c.broker == Some(2)),
        "no replica connection to broker 2 now: {:?}",
        consumer.connections()
    );
    consumer.close().await.unwrap();
}

async fn a_consumer_in_the_leaders_rack_fetches_from_the_leader_only() {
    let Some(kafka) = Kafka::get("a_consumer_in_the_leaders_rack_fetches_from_the_leader_only")
    else {
        return;
    };
    let (topic, log) = topic_on_every_broker_led_by_1(&kafka).await;
    let (consumer, events) = read_from_rack(&kafka, &topic, "rack-1", &log).await;
    let replica_events: Vec<&ConnectionEvent> = events
        .iter()
        .filter(|e| e.purpose == Purpose::Replica)
        .collect();
    assert!(
        replica_events.is_empty(),
        "replica connections of a consumer in the leader's rack: {replica_events:?}"
    );
    let brokers: BTreeSet<Option<i32>> = events.iter().map(|e| e.broker).collect();
    assert!(
        !brokers.contains(&Some(2)),
        "a connection to broker 2 (a follower only): {events:?}"
    );
    let bytes = payload(&log);
    let leader = counters_of(&kafka, &consumer, 1);
    assert!(
        leader.bytes_in >= bytes,
        "{bytes} bytes of values; the leader sent {}",
        leader.bytes_in
    );
    consumer.close().await.unwrap();
}

/// KIP-951: a partition's leader moves (reassigned from 1,2,3 to 2,1,3,
/// the preferred leader elected) while our producer writes to it and our
/// consumer reads it. Broker 1 refuses the next Produce and Fetch naming
/// the new leader (`current_leader`, Produce v10+ and Fetch v12+); both
/// clients go to broker 2 with it, and neither sends a Metadata request
/// from the move until every record is written and read (their
/// `metadata_requests` stay where they were, their `leader_hints` grow).
/// Every record written once, read once, in order.
async fn new_leaders_named_in_answers_are_used_without_metadata() {
    common::peers::logs::capture();
    let Some(kafka) = Kafka::get("new_leaders_named_in_answers_are_used_without_metadata") else {
        return;
    };
    let topic = kafka.unique("interop-hints");
    kafka.create_topic_on(&topic, &[&[1, 2, 3]]);
    let producer = producer(&kafka, Compression::None);
    let consumer = Consumer::new(consumer_config(&kafka.bootstrap).build().unwrap()).unwrap();
    consumer.assign(partitions(&topic, 1)).unwrap();
    let records = |from: usize| -> Vec<ProducerRecord> {
        (from..from + 50)
            .map(|i| {
                ProducerRecord::new(&topic)
                    .partition(0)
                    .value(format!("v{i}"))
            })
            .collect()
    };
    let mut written = send_all(&producer, records(0)).await;
    let mut read = Vec::new();
    let at = |n: i64| BTreeMap::from([(0, n)]);
    assert!(
        poll_until(&consumer, &mut read, POLLING, keep, |c, _| at_ends(
            c,
            &topic,
            &at(50)
        ))
        .await,
        "the first 50 records not read: {:?}",
        positions(&consumer, &topic, 1)
    );
    let before = (
        consumer.metrics().metadata_requests,
        producer.metrics().metadata_requests,
    );
    kafka.peer(&[
        "admin",
        "reassign",
        "--topic",
        &topic,
        "--partition",
        "0",
        "--replicas",
        "2,1,3",
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
    while kafka.describe(&topic)[0].leader != 2 {
        assert!(
            Instant::now() < deadline,
            "partition 0's leader is not 2: {:?}",
            kafka.describe(&topic)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    written.extend(send_all(&producer, records(50)).await);
    assert!(
        poll_until(&consumer, &mut read, POLLING, keep, |c, _| at_ends(
            c,
            &topic,
            &at(100)
        ))
        .await,
        "the last 50 records not read: {:?}",
        positions(&consumer, &topic, 1)
    );
    let (c, p) = (consumer.metrics(), producer.metrics());
    assert!(
        p.leader_hints >= 1,
        "the producer took no leader from a Produce answer"
    );
    assert!(
        c.leader_hints >= 1,
        "the consumer took no leader from a Fetch answer"
    );
    assert_eq!(
        (c.metadata_requests, p.metadata_requests),
        before,
        "Metadata requests (consumer, producer) after the move, before it {before:?}"
    );
    let offsets: Vec<(i32, i64)> = (0..100).map(|o| (0, o)).collect();
    assert_eq!(written, offsets, "each record written once, in order");
    let values: Vec<(i64, Option<String>)> =
        read.iter().map(|r| (r.offset, r.value.clone())).collect();
    let wanted: Vec<(i64, Option<String>)> = (0..100).map(|i| (i, Some(format!("v{i}")))).collect();
    assert_eq!(values, wanted, "each record read once, in order");
    consumer.close().await.unwrap();
    producer
        .close_timeout(Duration::from_secs(10))
        .await
        .unwrap();
}

/// A topic that does not exist, asked for with the producer's
/// `allow.auto.create.topics=false` (the brokers would create it
/// otherwise: `auto.create.topics.enable` is on): Kafka answers
/// UNKNOWN_TOPIC_OR_PARTITION, and `send` fails within seconds, well
/// before `max.block.ms` (60 s, where the Java producer's
/// `waitOnMetadata` gives up with "Topic not present in metadata"), not
/// before `topic.metadata.propagation.max.ms` (5 s), naming the topic and
/// the code, not retriable; Kafka did not create the topic. A name Kafka
/// refuses is INVALID_TOPIC_EXCEPTION, at once. Once the topic is created
/// (the Java Admin client), a later `send` on the same producer is
/// written.
async fn an_unknown_topic_fails_send_within_seconds_then_is_written_once_created() {
    let Some(kafka) = Kafka::get("an_unknown_topic_fails_send_within_seconds") else {
        return;
    };
    let topic = kafka.unique("interop-absent");
    let producer = Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(&kafka.bootstrap)
            .allow_auto_create_topics(false)
            .build()
            .unwrap(),
    )
    .unwrap();
    common::producing::unknown_topic_named_by_send(&producer, &topic).await;
    assert!(kafka.try_describe(&topic).is_err(), "Kafka created {topic}");

    let refused = common::timeout(
        Duration::from_secs(20),
        producer.send(ProducerRecord::new("no spaces allowed").value("x")),
    )
    .await
    .expect("a bad name is refused at once");
    match refused {
        Err(ref e @ Error::Topic { ref topic, code }) => {
            assert_eq!(
                (topic.as_str(), code),
                ("no spaces allowed", ErrorCode::InvalidTopicException)
            );
            assert!(!e.is_retriable(), "{e}");
        }
        other => panic!("{other:?}"),
    }

    kafka.create_topic(&topic, 3, 3, &[]);
    let written = common::producing::send_once_created(&producer, &topic).await;
    assert_eq!((&*written.topic, written.offset), (topic.as_str(), 0));
    producer
        .close_timeout(Duration::from_secs(10))
        .await
        .unwrap();
}

/// The idempotent producer keeps each partition's records in send order
/// on a topic written to the moment it exists. There, a leader refuses the
/// first requests with NOT_LEADER_OR_FOLLOWER while its partition is not
/// ready, then takes the next one; and a leader that knows nothing of a
/// producer takes any sequence as its first. With several batches of a
/// partition in flight, a later one was written first, and the earlier
/// ones, refused with OUT_OF_ORDER_SEQUENCE_NUMBER when sent again, went
/// in after it under a new epoch: in 4 of 5 runs of the `produce` example
/// on a new topic of 24 partitions.
async fn records_keep_their_order_on_a_topic_written_to_as_it_is_created() {
    let Some(kafka) = Kafka::get("records_keep_their_order_on_a_new_topic") else {
        return;
    };
    for round in 0..3 {
        let topic = kafka.unique("interop-fresh");
        // Created without waiting for the leaders to be ready: the
        // producer meets the topic as it comes up.
        kafka.peer(&[
            "create-topic",
            "--topic",
            &topic,
            "--partitions",
            "24",
            "--replication",
            "3",
        ]);
        let producer = producer(&kafka, Compression::None);
        let mut reports = producer.delivery_reports();
        let count = 60_000u64;
        for i in 0..count {
            let record = ProducerRecord::new(topic.as_str()).value(format!("{i:010}"));
            producer
                .send_reported(record, i)
                .await
                .unwrap_or_else(|e| panic!("send of record {i}: {e}"));
        }
        producer.close_timeout(WAIT).await.unwrap();
        let mut written: BTreeMap<i32, Vec<(u64, i64)>> = BTreeMap::new();
        while let Some(report) = reports.next().await {
            let meta = report
                .outcome
                .unwrap_or_else(|e| panic!("record {}: {e}", report.token));
            written
                .entry(meta.partition)
                .or_default()
                .push((report.token, meta.offset));
        }
        assert_eq!(
            written.values().map(Vec::len).sum::<usize>() as u64,
            count,
            "round {round}: every record reported"
        );
        for (partition, mut records) in written {
            records.sort_unstable();
            let out_of_order = records.windows(2).find(|w| w[1].1 <= w[0].1);
            assert!(
                out_of_order.is_none(),
                "round {round}: {topic}-{partition}: record {:?} written before record {:?}",
                out_of_order.map(|w| w[1]),
                out_of_order.map(|w| w[0])
            );
        }
    }
}

on_apache_kafka!(
    records_keep_their_order_on_a_topic_written_to_as_it_is_created,
    an_unknown_topic_fails_send_within_seconds_then_is_written_once_created,
    new_leaders_named_in_answers_are_used_without_metadata,
    our_uncompressed_records_read_by_java_and_librdkafka,
    our_gzip_records_read_by_java_and_librdkafka,
    our_snappy_records_read_by_java_and_librdkafka,
    our_lz4_records_read_by_java_and_librdkafka,
    our_zstd_records_read_by_java_and_librdkafka,
    java_producers_records_read_by_our_consumer_in_groups_and_by_assignment,
    keyed_placement_is_javas_on_7_and_12_partitions,
    read_committed_reads_exactly_the_committed_transactions,
    fetch_sessions_on_30_partitions_over_3_leaders,
    a_consumer_in_rack_2_fetches_from_the_follower_on_broker_2,
    a_consumer_in_the_leaders_rack_fetches_from_the_leader_only,
);
