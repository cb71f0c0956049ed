//! A producer child (`LKB_PRODUCE`): writes `LKB_RECORDS` records to
//! `LKB_TOPIC` with lazykafka or librdkafka without waiting for each
//! delivery, then waits for every delivery report, and reports as one
//! JSON line: records/s, CPU, peak RSS, threads, sockets and the client's
//! own counts.

mod lazykafka_client;
mod librdkafka_client;

use super::census::Census;
use super::tally::Tally;
use super::threads::{thread_run_times, CENSUS_THREAD};
use super::{broker_ports, env, report};
use crate::data::values;
use crate::measure::{minor_faults, status_field};
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// What to write.
pub(crate) struct Work {
    pub(crate) topic: String,
    pub(crate) partitions: i32,
    pub(crate) records: usize,
    pub(crate) value_len: usize,
    pub(crate) compression: String,
    /// Values, used in turn.
    pool: Vec<Bytes>,
    /// Keys, used in turn; empty for keyless records.
    keys: Vec<Bytes>,
}

impl Work {
    /// Record `i`'s value.
    pub(crate) fn value(&self, i: usize) -> &Bytes {
        &self.pool[i % self.pool.len()]
    }

    /// Record `i`'s key, `None` for keyless records.
    pub(crate) fn key(&self, i: usize) -> Option<&Bytes> {
        (!self.keys.is_empty()).then(|| &self.keys[i % self.keys.len()])
    }

    /// Keyless record `i`'s partition.
    pub(crate) fn partition(&self, i: usize) -> i32 {
        (i % self.partitions as usize) as i32
    }
}

/// Runs the producer `LKB_CLIENT` and reports.
pub(crate) fn run() -> ! {
    let client = env("LKB_CLIENT");
    let bootstrap = env("LKB_BOOTSTRAP");
    let ports = broker_ports();
    let value_len: usize = env("LKB_VALUE_LEN").parse().unwrap();
    let work = Work {
        topic: env("LKB_TOPIC"),
        partitions: env("LKB_PARTITIONS").parse().unwrap(),
        records: env("LKB_RECORDS").parse().unwrap(),
        value_len,
        compression: env("LKB_COMPRESSION"),
        pool: values(value_len).into_iter().map(Bytes::from).collect(),
        keys: if env("LKB_KEYED") == "true" {
            (0..1000).map(|i| Bytes::from(format!("k{i}"))).collect()
        } else {
            Vec::new()
        },
    };
    let census = Census::start(ports);
    let mut extra = serde_json::Map::new();
    let t = match client.as_str() {
        "lazykafka" => lazykafka_client::produce(&bootstrap, &work, &census, &mut extra),
        "librdkafka" => librdkafka_client::produce(&bootstrap, &work, &census, &mut extra),
        other => panic!("unknown client {other}"),
    };
    let (mut seen, census_cpu) = census.finish();
    seen.extend(t.held_sockets.iter().copied());
    report(figures(&t, seen.len(), census_cpu), extra);
}

/// The child's figures from its tally (a record counted at its delivery
/// report), the sockets the census saw and the census thread's CPU time.
fn figures(t: &Tally, seen: usize, census_cpu: Duration) -> Value {
    let elapsed_s = (t.last_record_us - t.first_poll_us) as f64 / 1e6;
    let steady_s = t
        .first_record_us
        .map_or(f64::NAN, |f| (t.last_record_us - f) as f64 / 1e6);
    json!({
        "records": t.records,
        "bytes": t.bytes,
        "errors": t.errors,
        "timed_out": t.timed_out,
        "start_us": t.first_poll_us,
        "first_delivery_us": t.first_record_us,
        "last_delivery_us": t.last_record_us,
        "first_delivery_ms": t.first_record_us.map(|f| (f - t.first_poll_us) as f64 / 1e3),
        "elapsed_s": elapsed_s,
        "rec_per_s": t.records as f64 / elapsed_s,
        "mb_per_s": t.bytes as f64 / elapsed_s / 1e6,
        "rec_per_s_steady": t.records as f64 / steady_s,
        "cpu_s": t.cpu.as_secs_f64(),
        "census_cpu_s": census_cpu.as_secs_f64(),
        "cpu_us_per_record": t.cpu.as_secs_f64() * 1e6 / t.records.max(1) as f64,
        "vmhwm_mb": status_field("VmHWM") as f64 / 1024.0,
        "vmhwm_kb": status_field("VmHWM"),
        "minor_faults": minor_faults(),
        "threads": t.threads,
        "thread_cpu_ms": thread_cpu_ms(),
        "seen": seen,
        "held": t.held,
    })
}

/// Each thread's CPU so far in ms, by name (threads of one name
/// summed; the census thread left out), from `schedstat`.
fn thread_cpu_ms() -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for ((_, name), (ns, _)) in thread_run_times() {
        if name != CENSUS_THREAD {
            *out.entry(name).or_default() += ns as f64 / 1e6;
        }
    }
    out
}
