//! `lazykafka::mock::MockCluster` in the parent, with what the bench needs
//! of it: filling a data set from code, and reading its request log on
//! the children's clock (the requests a client sent before its first
//! record, and with `LAZYKAFKA_BENCH_TIMELINE` every request and Fetch
//! answer of a run).

use crate::data::{values, DataSet};
use crate::measure::mono_us;
use lazykafka::mock::{MockCluster, MockRecord, MockRequest};
use lazykafka::records::Compression;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// `lazykafka::mock::MockCluster` in this process, with what the bench
/// needs to read its request log on the children's clock.
pub(crate) struct Mock {
    pub(crate) cluster: MockCluster,
    /// CLOCK_MONOTONIC (µs) of the cluster's start: a request logged
    /// `at` after it arrived at `started_us + at`. (std's `Instant` is
    /// CLOCK_MONOTONIC on Linux; the offset is taken once.)
    started_us: i64,
}

/// A logged request: when (CLOCK_MONOTONIC µs), its API's name, and the
/// request.
type Logged = (i64, String, MockRequest);

impl Mock {
    pub(crate) fn new(brokers: i32) -> Mock {
        Mock::with(MockCluster::new(brokers).expect("mock cluster"))
    }

    /// `brokers` brokers with TLS listeners serving `cert_pem`.
    pub(crate) fn tls(brokers: i32, cert_pem: &str, key_pem: &str) -> Mock {
        Mock::with(
            MockCluster::builder()
                .brokers(brokers)
                .tls(cert_pem, key_pem)
                .build()
                .expect("TLS mock cluster"),
        )
    }

    fn with(cluster: MockCluster) -> Mock {
        let (now, now_us) = (Instant::now(), mono_us());
        let started_us = now_us - now.duration_since(cluster.started()).as_micros() as i64;
        Mock {
            cluster,
            started_us,
        }
    }

    pub(crate) fn bootstrap(&self) -> String {
        self.cluster.bootstrap_servers()
    }

    pub(crate) fn ports(&self) -> Vec<u16> {
        self.cluster
            .broker_ids()
            .into_iter()
            .filter_map(|id| self.cluster.broker_addr(id))
            .map(|a| a.port())
            .collect()
    }

    /// Each broker's node id and port.
    pub(crate) fn brokers(&self) -> Vec<(i32, u16)> {
        self.cluster
            .broker_ids()
            .into_iter()
            .filter_map(|id| Some((id, self.cluster.broker_addr(id)?.port())))
            .collect()
    }

    /// Creates `topic` with `partitions` partitions, partition `p` led by
    /// broker `p % 3 + 1`.
    pub(crate) fn create_topic_round_robin(&self, topic: &str, partitions: i32, what: &str) {
        let leaders: Vec<i32> = (0..partitions).map(|p| p % 3 + 1).collect();
        self.cluster
            .create_topic_with_leaders(topic, &leaders)
            .expect(what);
    }

    /// Fills `set` from code, record `i` to partition `i % partitions`
    /// (as the producer does for tansu), in batches of up to 1000
    /// records and about 1 MB.
    pub(crate) fn fill(&self, set: &DataSet) {
        let pool: Vec<bytes::Bytes> = values(set.value_len)
            .into_iter()
            .map(bytes::Bytes::from)
            .collect();
        let compression = match set.compression {
            "none" => Compression::None,
            "lz4" => Compression::Lz4,
            other => panic!("no codec {other} in the bench"),
        };
        let per_batch = (1_000_000 / set.value_len).clamp(1, 1000);
        let parts = set.partitions as usize;
        for p in 0..parts {
            // The indices i with i % parts == p.
            let mine: Vec<usize> = (p..set.records).step_by(parts).collect();
            for chunk in mine.chunks(per_batch) {
                self.cluster
                    .produce_compressed(
                        set.topic,
                        p as i32,
                        compression,
                        chunk
                            .iter()
                            .map(|&i| MockRecord::new(pool[i % pool.len()].clone())),
                    )
                    .expect("fill the mock");
            }
        }
    }

    /// Forgets the requests logged so far.
    pub(crate) fn clear_requests(&self) {
        self.cluster.clear_events();
        if std::env::var_os("LAZYKAFKA_BENCH_TIMELINE").is_some() {
            // Restarted: only this run's Fetch requests.
            self.cluster.record_fetches(false);
            self.cluster.record_fetches(true);
        }
    }

    /// `at` (from the mock's start) on CLOCK_MONOTONIC, in µs.
    pub(crate) fn mono_us(&self, at: Duration) -> i64 {
        self.started_us + at.as_micros() as i64
    }

    /// Adds the mock's count of requests between the child's first poll
    /// and its first record.
    pub(crate) fn add_requests(&self, result: &mut Value) {
        let (Some(from), Some(to)) = (
            result["first_poll_us"].as_i64(),
            result["first_record_us"].as_i64(),
        ) else {
            return;
        };
        // Every request, with its time and API name.
        let requests: Vec<Logged> = self
            .cluster
            .requests()
            .into_iter()
            .map(|r| {
                let api = r.api.map_or_else(|| "other".into(), |a| format!("{a:?}"));
                (self.mono_us(r.at), api, r)
            })
            .collect();
        // When (ms from the first poll), which broker, which API.
        let before: Vec<Value> = requests
            .iter()
            .filter(|(t, _, _)| (from..=to).contains(t))
            .map(|(t, api, r)| json!([(t - from) as f64 / 1e3, r.broker, api]))
            .collect();
        result["requests_before_first_mock"] = json!(before.len());
        result["requests_before_first_by_api"] =
            json!(by_api(&requests, &|t| (from..=to).contains(&t)));
        result["requests_before_first_timeline"] = json!(before);
        if std::env::var_os("LAZYKAFKA_BENCH_TIMELINE").is_none() {
            return;
        }
        self.add_timeline(result, &requests, from);
    }

    /// Every request up to the last record, for looking into a run, with
    /// its connection; the requests after it; and what the mock answered
    /// to each Fetch.
    fn add_timeline(&self, result: &mut Value, requests: &[Logged], from: i64) {
        let last = from + (result["elapsed_s"].as_f64().unwrap_or(0.0) * 1e6) as i64;
        let all: Vec<Value> = requests
            .iter()
            .filter(|(t, _, _)| (from..=last).contains(t))
            .map(|(t, api, r)| json!([(t - from) as f64 / 1e3, r.broker, api, r.connection]))
            .collect();
        result["requests_timeline"] = json!(all);
        // After the last record: the idle window, then the close.
        result["requests_after_last_record"] = json!(by_api(requests, &|t| t > last));
        // What the mock answered: each Fetch, the record bytes sent,
        // the answers without records.
        let fetches: Vec<Value> = self
            .cluster
            .fetches()
            .iter()
            .map(|f| (self.mono_us(f.at), f))
            .filter(|(t, _)| (from..=last).contains(t))
            .map(|(t, f)| {
                json!([
                    (t - from) as f64 / 1e3,
                    f.broker,
                    f.connection,
                    f.record_bytes
                ])
            })
            .collect();
        let bytes = |f: &Value| f[3].as_u64().unwrap_or(0);
        result["fetches"] = json!(fetches.len());
        result["fetch_record_bytes"] = json!(fetches.iter().map(bytes).sum::<u64>());
        result["fetches_without_records"] = json!(fetches.iter().filter(|f| bytes(f) == 0).count());
        result["fetches_answered"] = json!(fetches);
    }
}

/// How many of `requests` logged at a time `within` went to each API.
fn by_api<'r>(requests: &'r [Logged], within: &dyn Fn(i64) -> bool) -> BTreeMap<&'r str, u64> {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for (t, api, _) in requests {
        if within(*t) {
            *counts.entry(api.as_str()).or_default() += 1;
        }
    }
    counts
}
