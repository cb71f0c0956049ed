//! The parent process: hosts the brokers, runs every measured client in a
//! child process of its own, case after case, and prints and writes the
//! results (`target/bench-compare.json` or `LAZYKAFKA_BENCH_OUT`).

mod chart;
mod floors;
mod job;
mod lifecycle;
mod many_broker;
mod mock;
mod options;
mod process;
mod producer;
mod rebalance;
mod report;
mod sessions;
mod throughput;

use crate::client_config::{
    CHECK_CRCS, FETCH_MAX_BYTES, FETCH_MAX_WAIT_MS, FETCH_MIN_BYTES, MAX_PARTITION_FETCH_BYTES,
};
use crate::data::{data_sets, DataSet};
use options::Settings;
use serde_json::{json, Value};
use std::io::Write as _;
use std::time::Instant;

/// Runs the cases asked for, in their order, then prints the summary and
/// the floors and writes every run with them as JSON.
pub(crate) fn run(args: &[String]) {
    let s = options::settings(args);
    let started = Instant::now();
    print_header(&s);
    let mut runs = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let sets = data_sets(s.scale);
    let mut extra = serde_json::Map::new();
    let produced = run_cases(&s, &sets, &mut runs, &mut notes, &mut extra);

    let summary = report::summarise(&runs);
    report::print_table(&summary);
    let tls_vs_plain = report::tls_vs_plain(&summary);
    let floor_report = floors::report(&s, &sets, &runs);
    let mut report = json!({
        "scale": s.scale,
        "tansu_scale": s.tansu_scale,
        "rounds": s.rounds,
        "fetch": {
            "fetch.min.bytes": FETCH_MIN_BYTES, "fetch.max.wait.ms": FETCH_MAX_WAIT_MS,
            "fetch.max.bytes": FETCH_MAX_BYTES,
            "max.partition.fetch.bytes": MAX_PARTITION_FETCH_BYTES, "check.crcs": CHECK_CRCS,
        },
        "data_sets": sets.iter().map(|d| json!({
            "name": d.name, "records": d.records, "value_bytes": d.value_len,
            "compression": d.compression, "partitions": d.partitions,
        })).collect::<Vec<_>>(),
        "notes": notes,
        "summary": summary,
        "tls_vs_plain": tls_vs_plain,
        "floors": floor_report,
        "runs": runs,
        "wall_s": started.elapsed().as_secs_f64(),
    });
    if let Some(produced) = produced {
        report["producer"] = produced;
    }
    for (k, v) in extra {
        report[k] = v;
    }
    write_report(&s.out, &report);
    println!(
        "\nresults: {} ({:.0} s)",
        s.out.display(),
        started.elapsed().as_secs_f64()
    );
}

/// What the run is: scale, rounds, the fetch settings, the brokers.
fn print_header(s: &Settings) {
    println!(
        "lazykafka vs librdkafka: scale {} (tansu {}), {} rounds, A B alternating",
        s.scale, s.tansu_scale, s.rounds
    );
    println!(
        "fetch: min.bytes {FETCH_MIN_BYTES}, max.wait {FETCH_MAX_WAIT_MS} ms, max.bytes \
         {FETCH_MAX_BYTES}, max.partition.fetch.bytes {MAX_PARTITION_FETCH_BYTES}, \
         check.crcs {CHECK_CRCS}; manual assignment, no auto-commit"
    );
    println!("brokers: lazykafka::mock::MockCluster (in this process) and tansu");
}

/// Every case asked for, in order, its runs added to `runs` (the
/// many-partitions chart drawn after the `sessions` and `rebalance`
/// cases); returns the producer cases' settings when any ran, and adds
/// the lifecycle cases' (`java`, `kafka_lifecycle`) to `extra`.
fn run_cases(
    s: &Settings,
    sets: &[DataSet],
    runs: &mut Vec<Value>,
    notes: &mut Vec<String>,
    extra: &mut serde_json::Map<String, Value>,
) -> Option<Value> {
    // The Java client, for the cases with lifecycle runs.
    let kafka = s.wants("kafka-lifecycle") || s.names("kafka-broker-idle");
    let java = if ["scale", "produce-scale", "mock-lifecycle"]
        .iter()
        .any(|c| s.wants(c))
        || kafka
    {
        lifecycle::java(notes)
    } else {
        None
    };
    if let Some(j) = &java {
        extra.insert(
            "java".into(),
            json!({"version": j.version, "jvm_options": j.opts()}),
        );
    }
    throughput::mock_cases(s, sets, runs);
    throughput::tansu_cases(s, runs, notes);
    if s.wants("scale") {
        throughput::scale_case(s, runs, java.as_ref());
    }
    if s.wants("sessions") {
        sessions::sessions_case(s, runs, true);
    }
    if s.wants("sessions-rdmock") {
        sessions::sessions_case(s, runs, false);
    }
    if s.wants("rebalance") {
        rebalance::rebalance_case(s, runs);
    }
    chart::many_partitions_chart(runs, &s.out);
    if s.wants("tls") {
        throughput::tls_case(s, runs);
    }
    if s.wants("process") {
        process::process_case(s, runs, notes);
    }
    if s.wants("produce-process") {
        process::produce_process_case(s, runs, notes);
    }
    if s.wants("produce-apis") {
        process::produce_apis_case(s, runs);
    }
    if s.wants("mock-lifecycle") {
        lifecycle::mock_lifecycle(s, java.as_ref(), runs);
    }
    let produced = producer::run(s, runs, java.as_ref());
    if kafka {
        if let Some(k) = lifecycle::kafka::kafka_lifecycle(s, java.as_ref(), runs, notes) {
            extra.insert("kafka_lifecycle".into(), k);
        }
    }
    produced
}

/// Writes `report` to `out`, pretty-printed, making its directory first.
fn write_report(out: &std::path::Path, report: &serde_json::Value) {
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut f = std::fs::File::create(out).expect("write the results");
    writeln!(f, "{}", serde_json::to_string_pretty(report).unwrap()).unwrap();
}
