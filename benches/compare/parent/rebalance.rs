//! The `rebalance` case: one group member per client subscribes to a
//! topic of many partitions, on our mock and on librdkafka's; how soon it
//! fetches after its assignment, from the broker's request log. Prints
//! its own table.

use super::job::{run_child, Job};
use super::many_broker::ManyBroker;
use super::options::{many_partition_counts, Settings};
use super::report::{cell, median_of, num, ratio_cell};
use serde_json::{json, Value};

/// A group member joining alone and given every partition of a topic
/// of 2,000 × scale partitions (`LAZYKAFKA_BENCH_PARTITIONS` as for
/// `sessions`), one record each, on our mock and on librdkafka's: from
/// the broker's request log, the time from the member's last SyncGroup
/// (the assignment) to its first Fetch, and from its first JoinGroup to
/// that Fetch; from the child, the time from its start to the first
/// record and its CPU and peak RSS until it read the last one. Prints
/// its own table.
pub(crate) fn rebalance_case(s: &Settings, runs: &mut Vec<Value>) {
    for ours in [true, false] {
        for partitions in many_partition_counts(s) {
            let topic = "rebalanced";
            let broker = ManyBroker::new(ours, topic, partitions);
            for p in 0..partitions {
                broker.produce(topic, p, 1, "r");
            }
            broker.flush();
            let ports = broker.ports();
            let bootstrap = broker.bootstrap();
            let first = runs.len();
            for round in 0..s.rounds {
                for client in ["lazykafka", "librdkafka"] {
                    broker.clear_requests();
                    let group = format!("rebalance-{client}-{round}");
                    let mut r = run_child(&Job {
                        group: Some(&group),
                        ..Job::new(
                            client,
                            &bootstrap,
                            topic,
                            partitions,
                            partitions as usize,
                            &ports,
                        )
                    });
                    add_join_to_fetch(&mut r, &broker);
                    r["broker"] = json!(broker.name());
                    r["case"] = json!("rebalance");
                    r["client"] = json!(client);
                    r["round"] = json!(round);
                    r["partitions"] = json!(partitions);
                    eprintln!(
                        "  {:<15} rebalance {partitions:>5} {client:<10} round {round}: \
                         SyncGroup to Fetch {:>7.1} ms, JoinGroup to Fetch {:>7.1} ms, \
                         first record {:>7.1} ms, cpu {:.3} s, rss {:.1} MB, {} records",
                        broker.name(),
                        num(&r, "sync_to_fetch_ms"),
                        num(&r, "join_to_fetch_ms"),
                        num(&r, "ttfr_ms"),
                        num(&r, "cpu_s"),
                        num(&r, "vmhwm_mb"),
                        r["records"],
                    );
                    runs.push(r);
                }
            }
            print_table(&broker, partitions, &runs[first..]);
        }
    }
}

/// Adds, from the broker's request log, the time from the member's last
/// SyncGroup before its first Fetch to that Fetch, and from its first
/// JoinGroup to it.
fn add_join_to_fetch(r: &mut Value, broker: &ManyBroker) {
    let log = broker.requests_timed();
    // API keys: JoinGroup 11, SyncGroup 14, Fetch 1.
    let first_join = log.iter().find(|(a, _)| *a == 11).map(|(_, t)| *t);
    let fetch = log.iter().find(|(a, _)| *a == 1).map(|(_, t)| *t);
    let sync = log
        .iter()
        .filter(|(a, t)| *a == 14 && fetch.is_none_or(|f| *t <= f))
        .map(|(_, t)| *t)
        .next_back();
    if let (Some(sync), Some(fetch)) = (sync, fetch) {
        r["sync_to_fetch_ms"] = json!((fetch - sync) as f64 / 1e3);
    }
    if let (Some(join), Some(fetch)) = (first_join, fetch) {
        r["join_to_fetch_ms"] = json!((fetch - join) as f64 / 1e3);
    }
}

/// The medians of one partition count's runs (`these`).
fn print_table(broker: &ManyBroker, partitions: i32, these: &[Value]) {
    println!(
        "\n{} / rebalance: one member given {partitions} partitions (3 brokers, 1 record each)\n  \
         {:<36} {:>12} {:>12} {:>9}",
        broker.name(),
        "median",
        "lazykafka",
        "librdkafka",
        "ratio"
    );
    for (metric, label) in [
        ("sync_to_fetch_ms", "SyncGroup to first Fetch, ms"),
        ("join_to_fetch_ms", "JoinGroup to first Fetch, ms"),
        ("ttfr_ms", "start to first record, ms"),
        ("cpu_s", "CPU to the last record, s"),
        ("vmhwm_mb", "peak RSS, MB"),
    ] {
        let of = |client: &str| median_of(these.iter().filter(|r| r["client"] == client), metric);
        let (a, b) = (of("lazykafka"), of("librdkafka"));
        println!(
            "  {label:<36} {:>12} {:>12} {:>9}",
            cell(a, 3),
            cell(b, 3),
            ratio_cell(a, b)
        );
    }
}
