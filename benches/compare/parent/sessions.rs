//! The `sessions` and `sessions-rdmock` cases (KIP-227 incremental fetch
//! sessions): many partitions, few records, then a steady window with a
//! trickle of records and one with nothing written; the Fetch request
//! bytes and requests per second the broker received in the window, and
//! the client's CPU per second and peak RSS. Each prints its own table.

use super::job::{run_child, Job};
use super::many_broker::ManyBroker;
use super::options::{many_partition_counts, steady_ms, Settings};
use super::report::{cell, median_of, num, ratio_cell};
use crate::measure::mono_us;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// A client of these cases: its label in the results, the client, and
/// lazykafka's `fetch.sessions.enable`.
type Client = (&'static str, &'static str, Option<&'static str>);

/// Many partitions, few records, then a trickle (KIP-227) and idle:
/// Fetch bytes, Fetch requests, CPU per second and peak RSS in the
/// steady window. On our mock: lazykafka with and without fetch
/// sessions, and librdkafka; on librdkafka's mock (`ours == false`),
/// lazykafka and librdkafka. Prints its own table.
pub(crate) fn sessions_case(s: &Settings, runs: &mut Vec<Value>, ours: bool) {
    let steady_ms = steady_ms();
    let case = if ours { "sessions" } else { "sessions-rdmock" };
    for partitions in many_partition_counts(s) {
        let topic = "many";
        let broker = ManyBroker::new(ours, topic, partitions);
        for p in 0..partitions {
            broker.produce(topic, p, 2, "r");
        }
        broker.flush();
        // Every record in the topic: a child reads them all before its
        // steady window (the trickles of earlier runs too), so that
        // the window sees only what comes during it.
        let mut total = partitions as usize * 2;
        let ports = broker.ports();
        let bootstrap = broker.bootstrap();
        let mut clients: Vec<Client> = vec![("lazykafka", "lazykafka", Some("true"))];
        if ours {
            clients.push(("lazykafka-nosessions", "lazykafka", Some("false")));
        }
        clients.push(("librdkafka", "librdkafka", None));
        let first = runs.len();
        for round in 0..s.rounds {
            // The trickle: 100 records/s round the partitions; idle:
            // none.
            for (phase, every) in [("trickle", Some(Duration::from_millis(10))), ("idle", None)] {
                for &(label, client, sessions) in &clients {
                    broker.clear_requests();
                    let job = Job {
                        sessions,
                        steady_ms: Some(steady_ms),
                        ..Job::new(client, &bootstrap, topic, partitions, total, &ports)
                    };
                    let (mut r, trickled) = steady_run(&broker, &job, every);
                    total += trickled as usize;
                    r["broker"] = json!(broker.name());
                    r["case"] = json!(case);
                    r["phase"] = json!(phase);
                    r["client"] = json!(label);
                    r["round"] = json!(round);
                    r["partitions"] = json!(partitions);
                    eprintln!(
                        "  {:<15} {case} {partitions:>5} {phase:<7} {label:<21} round {round}: \
                         {:>10.0} Fetch B/s, {:>6.1} Fetch/s, cpu {:>6.1} ms/s, rss {:>5.1} MB, \
                         {} trickled records read",
                        broker.name(),
                        num(&r, "fetch_bytes_per_s"),
                        num(&r, "fetch_requests_per_s"),
                        num(&r, "steady_cpu_ms_per_s"),
                        num(&r, "vmhwm_mb"),
                        r["steady_records"],
                    );
                    runs.push(r);
                }
            }
        }
        print_tables(&broker, case, partitions, steady_ms, &runs[first..]);
    }
}

/// Runs `job` while a record is written every `every` round the
/// partitions (none when `None`) and the broker's Fetch request bytes are
/// sampled every 50 ms; returns the child's report, with the window's
/// Fetch bytes and requests per second, and how many records were
/// written meanwhile.
fn steady_run(broker: &ManyBroker, job: &Job<'_>, every: Option<Duration>) -> (Value, u64) {
    let (topic, partitions) = (job.topic, job.partitions);
    let stop = AtomicBool::new(false);
    let trickled = AtomicU64::new(0);
    let samples: Mutex<Vec<(i64, u64)>> = Mutex::new(Vec::new());
    let mut r = std::thread::scope(|scope| {
        if let Some(every) = every {
            let (stop, trickled) = (&stop, &trickled);
            scope.spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    broker.produce(topic, i % partitions, 1, "t");
                    trickled.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                    std::thread::sleep(every);
                }
            });
        }
        // Fetch request bytes, sampled on the children's clock.
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                if let Some(bytes) = broker.fetch_bytes() {
                    samples.lock().unwrap().push((mono_us(), bytes));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let r = run_child(job);
        stop.store(true, Ordering::Relaxed);
        r
    });
    broker.flush();
    add_window_rates(&mut r, broker, &samples.into_inner().unwrap());
    (r, trickled.into_inner())
}

/// Adds the Fetch request bytes per second (from `samples`: when, bytes
/// so far) and the Fetch requests per second the broker received in the
/// child's steady window.
fn add_window_rates(r: &mut Value, broker: &ManyBroker, samples: &[(i64, u64)]) {
    let (Some(from), Some(to)) = (r["steady_start_us"].as_i64(), r["steady_end_us"].as_i64())
    else {
        return;
    };
    // The last sample at or before each end of the window.
    let at = |t: i64| {
        samples
            .iter()
            .rev()
            .find(|(ts, _)| *ts <= t)
            .or(samples.first())
            .copied()
    };
    if let (Some((t0, b0)), Some((t1, b1))) = (at(from), at(to)) {
        let window = (t1 - t0).max(1) as f64 / 1e6;
        r["fetch_bytes_per_s"] = json!((b1 - b0) as f64 / window);
    }
    r["fetch_requests_per_s"] =
        json!(broker.fetches_between(from, to) as f64 / ((to - from).max(1) as f64 / 1e6));
}

/// The medians of one partition count's runs (`these`), a table per
/// phase.
fn print_tables(broker: &ManyBroker, case: &str, partitions: i32, steady_ms: u64, these: &[Value]) {
    for phase in ["trickle", "idle"] {
        println!(
            "\n{} / {case}: {partitions} partitions on 3 brokers, 2 records each, then {}; \
             steady window {steady_ms} ms\n  {:<32} {:>12} {:>12} {:>12} {:>9} {:>9}",
            broker.name(),
            if phase == "idle" {
                "nothing"
            } else {
                "100 records/s"
            },
            "median",
            "sessions",
            "no sessions",
            "librdkafka",
            "ses/rd",
            "ses/nos"
        );
        for (metric, label) in [
            ("fetch_bytes_per_s", "Fetch request bytes/s"),
            ("fetch_requests_per_s", "Fetch requests/s"),
            ("steady_cpu_ms_per_s", "client CPU ms/s"),
            ("vmhwm_mb", "peak RSS, MB"),
            ("steady_records", "records read in the window"),
        ] {
            let of = |client: &str| {
                median_of(
                    these
                        .iter()
                        .filter(|r| r["phase"] == phase && r["client"] == client),
                    metric,
                )
            };
            let (a, b, c) = (
                of("lazykafka"),
                of("lazykafka-nosessions"),
                of("librdkafka"),
            );
            println!(
                "  {label:<32} {:>12} {:>12} {:>12} {:>9} {:>9}",
                cell(a, 1),
                cell(b, 1),
                cell(c, 1),
                ratio_cell(a, c),
                ratio_cell(a, b)
            );
        }
    }
}
