//! What a child's client loop records ([`Tally`]), and the windows it
//! measures after the last record: the steady window of the `sessions`
//! cases and the idle window (CPU per second polling with nothing to
//! read, for the process and per thread).

use super::census::Census;
use super::threads::{thread_run_times, CENSUS_THREAD};
use crate::measure::mono_us;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What both clients' loops record.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) records: usize,
    pub(crate) bytes: u64,
    pub(crate) errors: u64,
    pub(crate) first_poll_us: i64,
    pub(crate) first_record_us: Option<i64>,
    pub(crate) last_record_us: i64,
    pub(crate) timed_out: bool,
    /// CPU time (less the census thread's) and sockets held, right after
    /// the last record.
    pub(crate) cpu: Duration,
    pub(crate) held: usize,
    pub(crate) held_sockets: Vec<(u16, u16)>,
    pub(crate) threads: u64,
    /// CPU time per second of wall time spent polling after the last
    /// record, with nothing left to read.
    pub(crate) idle_cpu_per_s: Option<f64>,
    /// The same, per thread name (threads of one name summed), from
    /// each thread's own run time (`/proc/self/task/*/schedstat`),
    /// the census thread left out.
    pub(crate) idle_threads: BTreeMap<String, f64>,
    /// How many times per second each thread (by name) was put on a
    /// CPU in that window (the third field of `schedstat`): its
    /// wake-ups, about.
    pub(crate) idle_thread_runs: BTreeMap<String, f64>,
}

impl Tally {
    /// Counts a record of `value_len` bytes, and the time of the first.
    pub(crate) fn record(&mut self, value_len: usize) {
        if self.first_record_us.is_none() {
            self.first_record_us = Some(mono_us());
        }
        self.records += 1;
        self.bytes += value_len as u64;
    }
}

/// How long the clients keep polling after the last record, to measure
/// what waiting for nothing costs: `LAZYKAFKA_BENCH_IDLE_MS`, default
/// 1000.
fn idle_window() -> Duration {
    Duration::from_millis(
        std::env::var("LAZYKAFKA_BENCH_IDLE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000),
    )
}

/// CPU seconds per wall second spent in `poll_once` calls for
/// [`idle_window`], for the whole process less the census thread and
/// per thread name.
pub(crate) fn idle_cpu(census: &Census, tally: &mut Tally, poll_for: impl FnOnce(Duration)) {
    let threads0 = thread_run_times();
    let (cpu0, t0, window) = (census.process_cpu(), Instant::now(), idle_window());
    poll_for(window);
    let wall = t0.elapsed().as_secs_f64();
    let threads1 = thread_run_times();
    tally.idle_cpu_per_s = Some((census.process_cpu().saturating_sub(cpu0)).as_secs_f64() / wall);
    for ((tid, name), ns) in threads1 {
        if name == CENSUS_THREAD {
            continue;
        }
        let (ns, slices) = ns;
        let (before, slices_before) = threads0
            .get(&(tid, name.clone()))
            .copied()
            .unwrap_or((0, 0));
        *tally.idle_threads.entry(name.clone()).or_default() +=
            ns.saturating_sub(before) as f64 / 1e6 / wall;
        *tally.idle_thread_runs.entry(name).or_default() +=
            slices.saturating_sub(slices_before) as f64 / wall;
    }
}

/// The steady window of the `sessions` case (`LKB_STEADY_MS`): polls
/// for that long (`poll_for` returns the records it got) and reports
/// the window, its records and the CPU per second spent.
pub(crate) fn steady(
    census: &Census,
    poll_for: impl FnOnce(Duration) -> usize,
    extra: &mut serde_json::Map<String, Value>,
) {
    let Some(ms) = std::env::var("LKB_STEADY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    let (cpu0, t0, us0) = (census.process_cpu(), Instant::now(), mono_us());
    let got = poll_for(Duration::from_millis(ms));
    let wall = t0.elapsed().as_secs_f64();
    let cpu = census.process_cpu().saturating_sub(cpu0).as_secs_f64();
    extra.insert("steady_start_us".into(), json!(us0));
    extra.insert("steady_end_us".into(), json!(mono_us()));
    extra.insert("steady_records".into(), json!(got));
    extra.insert("steady_cpu_ms_per_s".into(), json!(cpu / wall * 1e3));
}
