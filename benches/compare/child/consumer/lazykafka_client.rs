//! The consumer child on lazykafka: `Consumer::poll(100 ms)` in a loop
//! inside one `block_on`, as an application's task does.

use super::Reading;
use crate::child::census::Census;
use crate::child::runtime::Runtime;
use crate::child::tally::{idle_cpu, steady, Tally};
use crate::child::{add_own_counters, ports_of, CHILD_TIMEOUT};
use crate::client_config::{
    CHECK_CRCS, FETCH_MAX_BYTES, FETCH_MAX_WAIT_MS, FETCH_MIN_BYTES, MAX_PARTITION_FETCH_BYTES,
};
use crate::measure::mono_us;
use lazykafka::{Consumer, ConsumerConfig, TopicPartition};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Reads `job`'s records, then polls through the windows; adds the
/// client's own counters to `extra`.
pub(crate) fn consume(
    job: &Reading,
    census: &Census,
    extra: &mut serde_json::Map<String, Value>,
) -> Tally {
    // The `rebalance` case: a group member (subscribe) instead of an
    // assignment.
    let group = std::env::var("LKB_GROUP").unwrap_or_default();
    let consumer = Consumer::new(config(&job.bootstrap, &group)).expect("lazykafka consumer");
    if group.is_empty() {
        consumer
            .assign((0..job.partitions).map(|p| TopicPartition::new(job.topic.as_str(), p)))
            .expect("assign");
    } else {
        consumer.subscribe([job.topic.as_str()]).expect("subscribe");
    }
    let deadline = Instant::now() + CHILD_TIMEOUT;
    // Current-thread tokio: the consumer's task runs on the thread that
    // polls, so every poll below uses this one runtime.
    let runtime = Runtime::new();
    let (mut t, requests_before_first) = read_all(&consumer, &runtime, job.records, deadline);
    census.snapshot(&ports_of(&job.bootstrap), &mut t);
    if !t.timed_out {
        windows(&consumer, &runtime, census, &mut t, extra);
    }
    let counters = consumer.broker_counters();
    add_own_counters(&counters, extra);
    extra.insert(
        "requests_before_first_own".into(),
        json!(requests_before_first),
    );
    extra.insert("runtime".into(), json!(Runtime::name()));
    extra.insert(
        "bytes_in_own".into(),
        json!(counters.values().map(|c| c.bytes_in).sum::<u64>()),
    );
    t
}

/// The consumer's configuration: the fetch settings both clients get,
/// `LKB_SESSIONS` as `fetch.sessions.enable`, TLS with `LKB_CA`, and
/// `group` as `group.id` (each when set).
fn config(bootstrap: &str, group: &str) -> ConsumerConfig {
    let sessions = std::env::var("LKB_SESSIONS").unwrap_or_default();
    let mut config = ConsumerConfig::builder()
        .set_all([
            ("bootstrap.servers", bootstrap),
            ("client.id", "bench-lazykafka"),
            ("enable.auto.commit", "false"),
            ("auto.offset.reset", "earliest"),
            ("fetch.min.bytes", FETCH_MIN_BYTES),
            ("fetch.max.wait.ms", FETCH_MAX_WAIT_MS),
            ("fetch.max.bytes", FETCH_MAX_BYTES),
            ("max.partition.fetch.bytes", MAX_PARTITION_FETCH_BYTES),
            ("check.crcs", CHECK_CRCS),
        ])
        .expect("lazykafka config");
    if !sessions.is_empty() {
        config = config
            .set("fetch.sessions.enable", &sessions)
            .expect("fetch.sessions.enable");
    }
    let ca = std::env::var("LKB_CA").unwrap_or_default();
    if !ca.is_empty() {
        config = config
            .set_all([
                ("security.protocol", "SSL"),
                ("ssl.ca.location", ca.as_str()),
            ])
            .expect("lazykafka TLS config");
    }
    if !group.is_empty() {
        config = config.set("group.id", group).expect("group.id");
    }
    config.build().expect("lazykafka config")
}

/// Polls until `records` records came (or `deadline` passed); returns the
/// tally and the client's count of requests sent up to its first records.
fn read_all(
    consumer: &Consumer,
    runtime: &Runtime,
    records: usize,
    deadline: Instant,
) -> (Tally, Option<u64>) {
    let mut t = Tally::default();
    let mut requests_before_first = None;
    runtime.block_on(async {
        t.first_poll_us = mono_us();
        while t.records < records {
            if Instant::now() > deadline {
                t.timed_out = true;
                break;
            }
            match consumer.poll(Duration::from_millis(100)).await {
                Ok(batch) => {
                    for r in &batch {
                        t.record(r.value().map_or(0, <[u8]>::len));
                    }
                    if !batch.is_empty() {
                        t.last_record_us = mono_us();
                        if requests_before_first.is_none() {
                            requests_before_first = Some(
                                consumer
                                    .broker_counters()
                                    .values()
                                    .map(|c| c.requests)
                                    .sum::<u64>(),
                            );
                        }
                    }
                }
                Err(_) => t.errors += 1,
            }
        }
    });
    (t, requests_before_first)
}

/// The steady window (when asked for), then the idle window.
fn windows(
    consumer: &Consumer,
    runtime: &Runtime,
    census: &Census,
    t: &mut Tally,
    extra: &mut serde_json::Map<String, Value>,
) {
    // Both windows poll in a loop inside one `block_on`, as an
    // application's task does (a `block_on` per call would add the
    // runtime's own hand-offs to every poll).
    steady(
        census,
        |span| {
            runtime.block_on(async {
                let (t0, mut got) = (Instant::now(), 0);
                while t0.elapsed() < span {
                    got += consumer
                        .poll(Duration::from_millis(100))
                        .await
                        .map_or(0, |b| b.len());
                }
                got
            })
        },
        extra,
    );
    idle_cpu(census, t, |span| {
        runtime.block_on(async {
            let t0 = Instant::now();
            while t0.elapsed() < span {
                let _ = consumer.poll(Duration::from_millis(100)).await;
            }
        })
    });
}
