//! The `kafka-lifecycle` case: the three clients' lifecycles on Apache
//! Kafka (`scripts/kafka.sh`'s 3 brokers, `LAZYKAFKA_KAFKA_*`), a group
//! consumer reading 200,000 × scale records of 100 B (at least 1,000)
//! from a topic of 6 partitions (replication 3, each broker leading 2),
//! then a producer writing 1,000 records of 100 B to another such topic;
//! each once with the clients' defaults and once with
//! `connections.max.idle.ms` at [`IDLE_MS`] on the client (`-idle`), its
//! steady census then taken after that long and 3 s more.
//!
//! `kafka-broker-idle`, only when `LAZYKAFKA_BENCH_CASES` names it (it
//! takes 11 minutes): the same six lifecycles with the clients' defaults,
//! all at once, once, their steady census taken
//! `LAZYKAFKA_BENCH_BROKER_IDLE_MS` (the brokers' `connections.max.idle.ms`,
//! default 600000) and 30 s more after their last record or delivery: by
//! then the brokers have closed every connection idle that long, and a
//! client that did not notice holds it in CLOSE_WAIT.
//!
//! The topics are deleted at the end.

use super::super::options::Settings;
use super::super::throughput::produce;
use super::{print_brokers, rounds, run_one, Java, Life, Role, CLIENTS};
use crate::common::kafka::Kafka;
use crate::data::DataSet;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The client's `connections.max.idle.ms` in the `-idle` runs.
const IDLE_MS: u64 = 5000;

/// The steady window of the runs with the defaults: from the last record
/// or delivery to the steady census.
const STEADY: Duration = Duration::from_millis(2000);

/// Runs the case when `LAZYKAFKA_KAFKA_BOOTSTRAP` is set (a note
/// otherwise); returns the case's settings for the report.
pub(crate) fn kafka_lifecycle(
    s: &Settings,
    java: Option<&Java>,
    runs: &mut Vec<Value>,
    notes: &mut Vec<String>,
) -> Option<Value> {
    if std::env::var("LAZYKAFKA_KAFKA_BOOTSTRAP").map_or(true, |b| b.is_empty()) {
        let note =
            "kafka-lifecycle and kafka-broker-idle skipped: LAZYKAFKA_KAFKA_BOOTSTRAP is not set \
                    (scripts/kafka.sh start; . .kafka/run/env)"
                .to_owned();
        println!("{note}");
        notes.push(note);
        return None;
    }
    let kafka = Kafka::get("compare kafka-lifecycle")?;
    let brokers: Vec<(i32, u16)> = kafka
        .brokers
        .iter()
        .map(|(id, a)| (*id, a.rsplit(':').next().unwrap().parse().unwrap()))
        .collect();
    let read = kafka.unique("bench-lifecycle");
    let write = kafka.unique("bench-lifecycle-produce");
    let partitions = 6;
    kafka.create_topic(&read, partitions, 3, &[]);
    kafka.create_topic(&write, partitions, 3, &[]);
    let records = ((200_000.0 * s.scale).round() as usize).max(1000);
    let set = DataSet {
        name: "kafka-lifecycle",
        topic: Box::leak(read.clone().into_boxed_str()),
        records,
        value_len: 100,
        compression: "none",
        partitions,
    };
    let t = Instant::now();
    produce(&kafka.bootstrap, &set);
    eprintln!(
        "kafka: produced {records} × 100 B to {read} in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let cases = if s.wants("kafka-lifecycle") {
        &[
            ("kafka-lifecycle", Role::Consumer, false),
            ("kafka-lifecycle-produce", Role::Producer, false),
            ("kafka-lifecycle-idle", Role::Consumer, true),
            ("kafka-lifecycle-produce-idle", Role::Producer, true),
        ][..]
    } else {
        &[]
    };
    for &(case, role, idle) in cases {
        let properties: Vec<(String, String)> = if idle {
            vec![("connections.max.idle.ms".into(), IDLE_MS.to_string())]
        } else {
            Vec::new()
        };
        let steady = if idle {
            Duration::from_millis(IDLE_MS + 3000)
        } else {
            STEADY
        };
        let (topic, n) = match role {
            Role::Consumer => (&read, records),
            Role::Producer => (&write, 1000),
        };
        rounds(
            s,
            "kafka",
            case,
            java,
            None,
            |client, round| Life {
                role,
                bootstrap: &kafka.bootstrap,
                brokers: &brokers,
                topic,
                partitions,
                records: n,
                group: (role == Role::Consumer)
                    .then(|| kafka.unique(&format!("bench-{client}-{round}"))),
                properties: properties.clone(),
                steady,
            },
            runs,
        );
    }
    let broker_idle_ms = broker_idle_ms();
    if s.names("kafka-broker-idle") {
        let topics = Topics {
            read: &read,
            write: &write,
            partitions,
            records,
        };
        broker_idle(&kafka, &brokers, &topics, broker_idle_ms, java, runs);
    }
    for topic in [&read, &write] {
        let _ = kafka
            .peer_command(&["admin", "delete-topic", "--topic", topic])
            .stdin(std::process::Stdio::null())
            .output();
    }
    Some(json!({
        "bootstrap": kafka.bootstrap,
        "brokers": brokers,
        "partitions": partitions,
        "replication": 3,
        "records_read": records,
        "records_written": 1000,
        "value_bytes": 100,
        "steady_ms": STEADY.as_millis() as u64,
        "idle_connections_max_idle_ms": IDLE_MS,
        "idle_steady_ms": IDLE_MS + 3000,
        "broker_idle_ms": broker_idle_ms,
    }))
}

/// The brokers' `connections.max.idle.ms`: `LAZYKAFKA_BENCH_BROKER_IDLE_MS`,
/// else Kafka's default (600000), which `scripts/kafka.sh` keeps.
fn broker_idle_ms() -> u64 {
    std::env::var("LAZYKAFKA_BENCH_BROKER_IDLE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600_000)
}

/// The topics of the case.
struct Topics<'a> {
    read: &'a str,
    write: &'a str,
    partitions: i32,
    /// Records in `read`.
    records: usize,
}

/// `kafka-broker-idle`: every client's consumer and producer with its
/// defaults, all at once, once, the steady census after the brokers'
/// idle time and 30 s more.
fn broker_idle(
    kafka: &Kafka,
    brokers: &[(i32, u16)],
    topics: &Topics<'_>,
    broker_idle_ms: u64,
    java: Option<&Java>,
    runs: &mut Vec<Value>,
) {
    let steady = Duration::from_millis(broker_idle_ms + 30_000);
    eprintln!(
        "kafka-broker-idle: 6 lifecycles at once, the steady census after {:.0} s",
        steady.as_secs_f64()
    );
    let jobs: Vec<(Role, &str)> = [Role::Consumer, Role::Producer]
        .into_iter()
        .flat_map(|role| CLIENTS.map(|c| (role, c)))
        .filter(|(_, c)| *c != "java" || java.is_some())
        .collect();
    let results: Vec<(Role, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|&(role, client)| {
                scope.spawn(move || {
                    let (topic, records) = match role {
                        Role::Consumer => (topics.read, topics.records),
                        Role::Producer => (topics.write, 1000),
                    };
                    let life = Life {
                        role,
                        bootstrap: &kafka.bootstrap,
                        brokers,
                        topic,
                        partitions: topics.partitions,
                        records,
                        group: (role == Role::Consumer)
                            .then(|| kafka.unique(&format!("bench-idle-{client}"))),
                        properties: Vec::new(),
                        steady,
                    };
                    (role, run_one(client, &life, java, None))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a lifecycle thread"))
            .collect()
    });
    for (role, mut r) in results {
        let case = match role {
            Role::Consumer => "kafka-broker-idle",
            Role::Producer => "kafka-broker-idle-produce",
        };
        r["broker"] = json!("kafka");
        r["case"] = json!(case);
        r["round"] = json!(0);
        r["lifecycle"] = json!(true);
        r["concurrent"] = json!(true);
        eprintln!("{}", super::brief(&r));
        runs.push(r);
    }
    print_brokers("kafka", "kafka-broker-idle", runs);
    print_brokers("kafka", "kafka-broker-idle-produce", runs);
}
