//! A consumer child: reads `LKB_RECORDS` records from every partition of
//! `LKB_TOPIC` (assigned, or as the one member of `LKB_GROUP`) with
//! lazykafka or librdkafka, then polls through the steady and idle
//! windows, and reports throughput, time to the first record, CPU, peak
//! RSS, threads and sockets.

mod lazykafka_client;
mod librdkafka_client;

use super::census::Census;
use super::tally::Tally;
use super::{broker_ports, env, report};
use crate::measure::{minor_faults, status_field};
use serde_json::{json, Value};
use std::time::Duration;

/// What a consumer child reads.
pub(crate) struct Reading {
    pub(crate) bootstrap: String,
    pub(crate) topic: String,
    pub(crate) partitions: i32,
    /// Records to read before the windows.
    pub(crate) records: usize,
}

/// Runs the consumer `LKB_CLIENT` and reports.
pub(crate) fn run() -> ! {
    let client = env("LKB_CLIENT");
    let reading = Reading {
        bootstrap: env("LKB_BOOTSTRAP"),
        topic: env("LKB_TOPIC"),
        partitions: env("LKB_PARTITIONS").parse().unwrap(),
        records: env("LKB_RECORDS").parse().unwrap(),
    };
    let census = Census::start(broker_ports());
    let mut extra = serde_json::Map::new();
    let tally = match client.as_str() {
        "lazykafka" => lazykafka_client::consume(&reading, &census, &mut extra),
        "librdkafka" => librdkafka_client::consume(&reading, &census, &mut extra),
        other => panic!("unknown client {other}"),
    };
    let (mut seen, census_cpu) = census.finish();
    seen.extend(tally.held_sockets.iter().copied());
    report(figures(&tally, seen.len(), census_cpu), extra);
}

/// The child's figures from its tally, the sockets the census saw and
/// the census thread's CPU time.
fn figures(tally: &Tally, seen: usize, census_cpu: Duration) -> Value {
    let (cpu, held) = (tally.cpu, tally.held);
    let steady_s = tally
        .first_record_us
        .map_or(f64::NAN, |f| (tally.last_record_us - f) as f64 / 1e6);
    let first = tally.first_record_us;
    let elapsed_s = (tally.last_record_us - tally.first_poll_us) as f64 / 1e6;
    json!({
        "records": tally.records,
        "bytes": tally.bytes,
        "errors": tally.errors,
        "timed_out": tally.timed_out,
        "first_poll_us": tally.first_poll_us,
        "first_record_us": first,
        "ttfr_ms": first.map(|f| (f - tally.first_poll_us) as f64 / 1e3),
        "elapsed_s": elapsed_s,
        "rec_per_s": tally.records as f64 / elapsed_s,
        "mb_per_s": tally.bytes as f64 / elapsed_s / 1e6,
        "steady_s": steady_s,
        "rec_per_s_steady": tally.records as f64 / steady_s,
        "mb_per_s_steady": tally.bytes as f64 / steady_s / 1e6,
        "cpu_s": cpu.as_secs_f64(),
        "census_cpu_s": census_cpu.as_secs_f64(),
        "cpu_us_per_record": cpu.as_secs_f64() * 1e6 / tally.records.max(1) as f64,
        "vmhwm_mb": status_field("VmHWM") as f64 / 1024.0,
        "vmhwm_kb": status_field("VmHWM"),
        "minor_faults": minor_faults(),
        "threads": tally.threads,
        "idle_cpu_ms_per_s": tally.idle_cpu_per_s.map(|c| c * 1e3),
        "idle_threads_ms_per_s": tally.idle_threads,
        "idle_thread_runs_per_s": tally.idle_thread_runs,
        "seen": seen,
        "held": held,
    })
}
