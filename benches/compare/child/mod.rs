//! A child process (`--child`): one client, consumer or producer, told
//! its job in `LKB_*` environment variables, measuring itself (see
//! [`census`] and [`tally`]) and reporting as one JSON line on standard
//! output before it exits.

mod census;
mod consumer;
mod lifecycle;
mod producer;
mod runtime;
mod tally;
mod threads;

use lazykafka::events::BrokerCounters;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::Duration;

/// How long one child may take before it gives up and reports what it has.
const CHILD_TIMEOUT: Duration = Duration::from_secs(180);

/// Runs the child's job: a lifecycle with pauses when `LKB_LIFECYCLE` is
/// set, producing when `LKB_PRODUCE` is set, else consuming.
pub(crate) fn run() {
    if std::env::var_os("LKB_LIFECYCLE").is_some() {
        lifecycle::run();
    }
    if std::env::var_os("LKB_PRODUCE").is_some() {
        producer::run();
    }
    consumer::run();
}

/// The ports of a bootstrap list.
fn ports_of(bootstrap: &str) -> Vec<u16> {
    bootstrap
        .split(',')
        .filter_map(|a| a.rsplit(':').next()?.parse().ok())
        .collect()
}

/// The environment variable `name`, which the parent always sets.
fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

/// The brokers' ports (`LKB_PORTS`).
fn broker_ports() -> Vec<u16> {
    env("LKB_PORTS")
        .split(',')
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Prints `out`, with `extra` added, as the child's JSON line, and exits:
/// no orderly close, the measurement is over, and closing is not part of
/// it.
fn report(mut out: Value, extra: serde_json::Map<String, Value>) -> ! {
    for (k, v) in extra {
        out[k] = v;
    }
    println!("{out}");
    let _ = std::io::stdout().flush();
    std::process::exit(0);
}

/// Adds lazykafka's own counts over every broker: connection attempts
/// (`connects`), failed ones, and requests sent (`requests_total_own`).
fn add_own_counters(
    counters: &BTreeMap<String, BrokerCounters>,
    extra: &mut serde_json::Map<String, Value>,
) {
    let sum = |f: fn(&BrokerCounters) -> u64| counters.values().map(f).sum::<u64>();
    extra.insert("connects".into(), sum(|c| c.connects).into());
    extra.insert(
        "connect_failures".into(),
        sum(|c| c.connect_failures).into(),
    );
    extra.insert("requests_total_own".into(), sum(|c| c.requests).into());
}

/// The sum of every broker's `connects` in librdkafka's statistics
/// (`None` inside when they name no brokers), or `None` when they are not
/// JSON.
fn statistics_connects(statistics: &[u8]) -> Option<Option<i64>> {
    let v = serde_json::from_slice::<Value>(statistics).ok()?;
    Some(v["brokers"].as_object().map(|b| {
        b.values()
            .filter_map(|b| b["connects"].as_i64())
            .sum::<i64>()
    }))
}
