//! The producer cases: lazykafka's `Producer` and librdkafka's
//! `BaseProducer` write the same records to the same mock, alternated
//! A B A B, idempotent with `acks=all` and the Java producer's defaults
//! on both (see [`PRODUCE_LINGER_MS`] and its neighbours); then what the
//! mock saw of each run (connections, Produce requests, records written).

use super::job::{census_runs, run_child, Job};
use super::lifecycle::{self, Java, Life, Role};
use super::mock::Mock;
use super::options::Settings;
use super::throughput::scale_bootstrap;
use crate::client_config::{
    PRODUCE_ACKS, PRODUCE_BATCH_SIZE, PRODUCE_BUFFER_KBYTES, PRODUCE_IDEMPOTENCE,
    PRODUCE_LINGER_MS, PRODUCE_MAX_IN_FLIGHT,
};
use crate::data::Produce;
use lazykafka::mock::MockEventKind;
use lazykafka::protocol::ApiKey;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// The metrics summarised for a producer case, with how each is
/// shown.
pub(crate) const METRICS: &[(&str, &str)] = &[
    ("rec_per_s", "records/s (start to last report)"),
    ("mb_per_s", "MB/s of values"),
    ("rec_per_s_steady", "records/s (first to last report)"),
    ("first_delivery_ms", "first delivery report, ms"),
    ("cpu_s", "CPU time, s"),
    ("cpu_us_per_record", "CPU µs/record"),
    ("vmhwm_mb", "peak RSS, MB"),
    ("threads", "threads"),
    ("held", "sockets held at the end"),
    ("seen", "sockets seen (census)"),
    ("connects", "connection attempts (own count)"),
    ("connections_mock", "connections accepted (mock)"),
    ("brokers_connected_mock", "brokers connected to (mock)"),
    ("produce_requests_mock", "Produce requests (mock)"),
    ("records_per_request", "records per Produce request"),
    ("written_mock", "records written (mock)"),
    ("errors", "failed sends and deliveries"),
    ("mock_cpu_s", "mock brokers' CPU, s"),
    ("connect_calls", "connect() calls (strace)"),
    ("connect_ports", "addresses connected to (strace)"),
];

/// One producer data set.
struct ProduceSet {
    name: &'static str,
    topic: &'static str,
    records: usize,
    partitions: i32,
    produce: Produce,
}

fn sets(scale: f64) -> Vec<ProduceSet> {
    let n = |base: f64| ((base * scale).round() as usize).max(8);
    let set = |name, topic, records, value_len, compression, keyed| ProduceSet {
        name,
        topic,
        records,
        partitions: 8,
        produce: Produce {
            value_len,
            compression,
            keyed,
        },
    };
    vec![
        set("produce-100B", "p100", n(1_000_000.0), 100, "none", false),
        set(
            "produce-10KiB",
            "p10k",
            n(50_000.0),
            10 * 1024,
            "none",
            false,
        ),
        set(
            "produce-100B-keyed",
            "p100keyed",
            n(1_000_000.0),
            100,
            "none",
            true,
        ),
        set(
            "produce-100B-lz4",
            "p100lz4",
            n(1_000_000.0),
            100,
            "lz4",
            false,
        ),
    ]
}

/// The settings both producers got, for the report.
fn reported_settings(sets: &[ProduceSet]) -> Value {
    json!({
        "acks": PRODUCE_ACKS,
        "enable.idempotence": PRODUCE_IDEMPOTENCE,
        "linger.ms": PRODUCE_LINGER_MS,
        "batch.size": PRODUCE_BATCH_SIZE,
        "max.in.flight.requests.per.connection": PRODUCE_MAX_IN_FLIGHT,
        "librdkafka": {
            "queue.buffering.max.kbytes": PRODUCE_BUFFER_KBYTES,
            "queue.buffering.max.messages": "0",
            "partitioner": "murmur2_random",
        },
        "data_sets": sets.iter().map(|d| json!({
            "name": d.name, "topic": d.topic, "records": d.records,
            "value_bytes": d.produce.value_len, "compression": d.produce.compression,
            "keyed": d.produce.keyed, "partitions": d.partitions,
        })).collect::<Vec<_>>(),
    })
}

/// The records a topic's partitions hold, by their high watermarks.
fn written(mock: &Mock, topic: &str, partitions: i32) -> i64 {
    (0..partitions)
        .filter_map(|p| mock.cluster.high_watermark(topic, p))
        .sum()
}

/// Drops every record of the topic, so that the mock's memory does
/// not grow from run to run.
fn forget(mock: &Mock, topic: &str, partitions: i32) {
    for p in 0..partitions {
        if let Some(end) = mock.cluster.high_watermark(topic, p) {
            let _ = mock.cluster.delete_records_before(topic, p, end);
        }
    }
}

/// Runs one producer child and adds what the mock saw of it:
/// connections accepted, the brokers they went to, Produce
/// requests, records written.
fn run_one(mock: &Mock, job: &Job<'_>) -> Value {
    mock.clear_requests();
    let before = written(mock, job.topic, job.partitions);
    let mut r = run_child(job);
    let after = written(mock, job.topic, job.partitions);
    let events = mock.cluster.events();
    let connected: Vec<i32> = events
        .iter()
        .filter(|e| matches!(e.kind, MockEventKind::Connected { .. }))
        .map(|e| e.broker)
        .collect();
    let produce_requests = mock
        .cluster
        .requests()
        .iter()
        .filter(|q| q.api == Some(ApiKey::Produce))
        .count();
    r["connections_mock"] = json!(connected.len());
    r["brokers_connected_mock"] = json!(connected.iter().collect::<BTreeSet<_>>().len());
    r["brokers_connected_ids"] = json!(connected.iter().collect::<BTreeSet<_>>());
    r["produce_requests_mock"] = json!(produce_requests);
    r["written_mock"] = json!(after - before);
    if produce_requests > 0 {
        r["records_per_request"] = json!((after - before) as f64 / produce_requests as f64);
    }
    r["mock_cpu_s"] = r["parent_cpu_s"].clone();
    forget(mock, job.topic, job.partitions);
    r
}

fn brief(r: &Value) -> String {
    let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    format!(
        "  {:<6} {:<18} {:<10} round {}: {:>8.0} rec/s {:>6.1} MB/s, first report \
         {:>6.1} ms, cpu {:.2} s, hwm {:.0} MB, {} threads, {} sockets held, {} \
         connections to {} brokers, {} Produce requests, {} written, {} errors{}",
        r["broker"].as_str().unwrap_or(""),
        r["case"].as_str().unwrap_or(""),
        r["client"].as_str().unwrap_or(""),
        r["round"],
        f("rec_per_s"),
        f("mb_per_s"),
        f("first_delivery_ms"),
        f("cpu_s"),
        f("vmhwm_mb"),
        r["threads"],
        r["held"],
        r["connections_mock"],
        r["brokers_connected_mock"],
        r["produce_requests_mock"],
        r["written_mock"],
        r["errors"],
        if r["timed_out"].as_bool() == Some(true) {
            " TIMED OUT"
        } else {
            ""
        }
    )
}

/// `set`'s rounds on `mock`, then one run per client under strace.
fn rounds(
    s: &Settings,
    mock: &Mock,
    bootstrap: &str,
    ports: &[u16],
    set: &ProduceSet,
    runs: &mut Vec<Value>,
) {
    let job = |client, strace| Job {
        strace,
        produce: Some(set.produce),
        ..Job::new(
            client,
            bootstrap,
            set.topic,
            set.partitions,
            set.records,
            ports,
        )
    };
    for round in 0..s.rounds {
        for client in ["lazykafka", "librdkafka"] {
            let mut r = run_one(mock, &job(client, false));
            r["broker"] = json!("mock");
            r["case"] = json!(set.name);
            r["client"] = json!(client);
            r["round"] = json!(round);
            r["expected_records"] = json!(set.records);
            eprintln!("{}", brief(&r));
            runs.push(r);
        }
    }
    census_runs("mock", set.name, runs, |client| job(client, true));
    forget(mock, set.topic, set.partitions);
}

/// Runs the producer cases asked for; returns their settings for
/// the report, or `None` when none ran.
pub(crate) fn run(s: &Settings, runs: &mut Vec<Value>, java: Option<&Java>) -> Option<Value> {
    let sets: Vec<ProduceSet> = sets(s.scale)
        .into_iter()
        .filter(|d| s.wants(d.name))
        .collect();
    let scale = s.wants("produce-scale");
    if sets.is_empty() && !scale {
        return None;
    }
    eprintln!(
        "producers: acks {PRODUCE_ACKS}, enable.idempotence {PRODUCE_IDEMPOTENCE}, \
         linger.ms {PRODUCE_LINGER_MS}, batch.size {PRODUCE_BATCH_SIZE}, max in flight \
         {PRODUCE_MAX_IN_FLIGHT}; librdkafka also queue.buffering.max.kbytes \
         {PRODUCE_BUFFER_KBYTES}, queue.buffering.max.messages 0, partitioner \
         murmur2_random"
    );
    if !sets.is_empty() {
        let mock = Mock::new(3);
        for set in &sets {
            mock.create_topic_round_robin(set.topic, set.partitions, "create topic");
        }
        let (bootstrap, ports) = (mock.bootstrap(), mock.ports());
        for set in &sets {
            rounds(s, &mock, &bootstrap, &ports, set, runs);
        }
    }
    let mut all = sets;
    if scale {
        all.push(scale_case(s, runs, java));
    }
    Some(reported_settings(&all))
}

/// 1000 bootstrap addresses (992 closed loopback ports and the 8
/// brokers of a mock, shuffled with the consumer scale case's
/// seed); 1000 records of 100 B to a topic of 6 partitions led by
/// brokers 1, 2, 4, 5, 7 and 8 (3 and 6 lead nothing). Then
/// `produce-scale-lifecycle`: each client (Java too, when it can run)
/// writing the same 1000 records, censused at each pause.
fn scale_case(s: &Settings, runs: &mut Vec<Value>, java: Option<&Java>) -> ProduceSet {
    let mock = Mock::new(8);
    let set = ProduceSet {
        name: "produce-scale",
        topic: "pscale",
        records: 1000,
        partitions: 6,
        produce: Produce {
            value_len: 100,
            compression: "none",
            keyed: false,
        },
    };
    mock.cluster
        .create_topic_with_leaders(set.topic, &[1, 2, 4, 5, 7, 8])
        .expect("scale topic");
    let (bootstrap, ports, _closed) = scale_bootstrap(&mock);
    rounds(s, &mock, &bootstrap, &ports, &set, runs);
    let ids = mock.brokers();
    lifecycle::rounds(
        s,
        "mock",
        "produce-scale-lifecycle",
        java,
        Some(&mock),
        |_, _| Life {
            role: Role::Producer,
            bootstrap: &bootstrap,
            brokers: &ids,
            topic: set.topic,
            partitions: set.partitions,
            records: set.records,
            group: None,
            properties: Vec::new(),
            steady: std::time::Duration::from_millis(2000),
        },
        runs,
    );
    forget(&mock, set.topic, set.partitions);
    set
}
