//! The `process` and `produce-process` cases: whole processes as a user
//! runs them, the `consume` and `produce` examples and their librdkafka
//! twins, measured from outside (`wait4` and the child's `VmHWM`). Each
//! prints its own table.

use super::mock::Mock;
use super::options::Settings;
use super::report::{cell, median_of, ratio_cell};
use crate::data::DataSet;
use serde_json::{json, Value};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The whole process, as a user runs it: the `consume` example and the
/// same command line on librdkafka (this binary with
/// `--consume-librdkafka`, see [`twin`](crate::twin)), each reading
/// 600,000 × scale records of 100 B from 24 partitions of a 3-broker
/// mock to the end (`--offset beginning --count N`, JSON lines to
/// /dev/null), alternated round by round.
pub(crate) fn process_case(s: &Settings, runs: &mut Vec<Value>, notes: &mut Vec<String>) {
    let example = match example("consume") {
        Ok(bin) => bin,
        Err(why) => {
            let note = format!("process case skipped: {why}");
            println!("{note}");
            notes.push(note);
            return;
        }
    };
    let set = DataSet {
        name: "process",
        topic: "process",
        records: ((600_000.0 * s.scale).round() as usize).max(24),
        value_len: 100,
        compression: "none",
        partitions: 24,
    };
    let mock = Mock::new(3);
    mock.cluster
        .create_topic(set.topic, set.partitions)
        .expect("process topic");
    mock.fill(&set);
    let bootstrap = mock.bootstrap();
    let count = set.records.to_string();
    let args = [
        "--bootstrap",
        bootstrap.as_str(),
        "--topic",
        set.topic,
        "--offset",
        "beginning",
        "--count",
        count.as_str(),
    ];
    for round in 0..s.rounds {
        for client in ["lazykafka", "librdkafka"] {
            let mut cmd = client_command(client, &example, "--consume-librdkafka");
            cmd.args(args);
            let r = measure_run(&mut cmd, "process", client, round, set.records);
            runs.push(r);
        }
    }
    let title = format!(
        "mock / process: `consume --offset beginning --count {count}` ({} × 100 B, 24 \
         partitions), JSON lines to /dev/null",
        set.records
    );
    print_table(&title, "process", runs);
}

/// The `produce` example and the same command line on librdkafka's
/// `BaseProducer` (this binary with `--produce-librdkafka`, see
/// [`twin_produce`](crate::twin_produce)), alternated round by round, on
/// a 3-broker mock, 24 partitions: 300,000 × scale generated records of
/// 100 B (`--generate N --size 100`: no key, each client's partitioner
/// spreads them), idempotent, `acks=all`, `linger.ms` 5, with each
/// client's default `batch.size` (1000000 in both), then 16384 on both
/// (the Java client's default), then 1000000 on both; and 30,000 × scale
/// of 10 KiB with lz4, with the defaults and with 16384 on both.
pub(crate) fn produce_process_case(s: &Settings, runs: &mut Vec<Value>, notes: &mut Vec<String>) {
    // LAZYKAFKA_BENCH_PRODUCE_EXAMPLE: another build of the example (an
    // older commit's, to compare), measured instead of this one.
    let other = std::env::var_os("LAZYKAFKA_BENCH_PRODUCE_EXAMPLE").map(std::path::PathBuf::from);
    let example = match other.map_or_else(|| example("produce"), Ok) {
        Ok(bin) => bin,
        Err(why) => {
            let note = format!("produce-process case skipped: {why}");
            println!("{note}");
            notes.push(note);
            return;
        }
    };
    let target = ProduceTarget::new("produce-process");
    let small = ((300_000.0 * s.scale).round() as usize).max(24);
    let large = ((30_000.0 * s.scale).round() as usize).max(24);
    let variants: [(&str, usize, usize, &[&str]); 5] = [
        ("100B-defaults", small, 100, &[]),
        ("100B-batch16384", small, 100, &["batch.size=16384"]),
        ("100B-batch1000000", small, 100, &["batch.size=1000000"]),
        ("10KiB-lz4", large, 10_240, &["compression.type=lz4"]),
        (
            "10KiB-lz4-batch16384",
            large,
            10_240,
            &["compression.type=lz4", "batch.size=16384"],
        ),
    ];
    for (variant, records, size, extra) in variants {
        let case = format!("produce-process-{variant}");
        let args = target.args(records, size, extra);
        for round in 0..s.rounds {
            for client in ["lazykafka", "librdkafka"] {
                let mut cmd = client_command(client, &example, "--produce-librdkafka");
                cmd.args(&args);
                runs.push(target.run(&mut cmd, &case, client, round, records));
            }
        }
        let title = format!(
            "mock / {case}: `produce --generate {records} --size {size}` (24 partitions, \
             acks=all, idempotent, linger.ms 5{}{})",
            if extra.is_empty() { "" } else { ", " },
            extra.join(", ")
        );
        print_table(&title, &case, runs);
    }
}

/// The ways to await deliveries, as a tokio program: this binary with
/// `--produce-futures` (`send`, each `DeliveryFuture` in a
/// `FuturesUnordered`) and `--produce-reports` (`send_reported`, the
/// delivery reports read by a task), beside `--produce-librdkafka`,
/// alternated: 1,000,000 × scale generated records of 100 B to 24
/// partitions of a 3-broker mock, idempotent, `acks=all`, `linger.ms` 5,
/// each client's defaults otherwise (see
/// [`twin_produce`](crate::twin_produce)).
pub(crate) fn produce_apis_case(s: &Settings, runs: &mut Vec<Value>) {
    let case = "produce-apis";
    let target = ProduceTarget::new(case);
    let me = std::env::current_exe().expect("current exe");
    let records = ((1_000_000.0 * s.scale).round() as usize).max(24);
    let args = target.args(records, 100, &[]);
    for round in 0..s.rounds {
        for (client, flag) in [
            ("futures", "--produce-futures"),
            ("reports", "--produce-reports"),
            ("librdkafka", "--produce-librdkafka"),
        ] {
            let mut cmd = Command::new(&me);
            cmd.arg(flag).args(&args);
            runs.push(target.run(&mut cmd, case, client, round, records));
        }
    }
    let title = format!(
        "mock / {case}: {records} generated records of 100 B (24 partitions, acks=all, \
         idempotent, linger.ms 5), a tokio program"
    );
    print_pair(&title, case, runs, ["futures", "reports"]);
    print_pair(&title, case, runs, ["reports", "librdkafka"]);
}

/// A topic of 24 partitions on a 3-broker mock of its own, written by the
/// producer processes of a case.
struct ProduceTarget {
    mock: Mock,
    topic: &'static str,
    bootstrap: String,
}

impl ProduceTarget {
    const PARTITIONS: i32 = 24;

    fn new(topic: &'static str) -> ProduceTarget {
        let mock = Mock::new(3);
        mock.cluster
            .create_topic(topic, Self::PARTITIONS)
            .expect("the producers' topic");
        let bootstrap = mock.bootstrap();
        ProduceTarget {
            mock,
            topic,
            bootstrap,
        }
    }

    /// The command line of a run: `records` generated records of `size`
    /// bytes, idempotent, `acks=all`, `linger.ms` 5, and `extra`
    /// properties.
    fn args(&self, records: usize, size: usize, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "--bootstrap",
            &self.bootstrap,
            "--topic",
            self.topic,
            "--generate",
            &records.to_string(),
            "--size",
            &size.to_string(),
        ]
        .map(str::to_owned)
        .into();
        for p in ["acks=all", "enable.idempotence=true", "linger.ms=5"]
            .iter()
            .chain(extra)
        {
            args.extend(["--property".to_owned(), (*p).to_owned()]);
        }
        args
    }

    /// Runs `cmd` and measures it; checks that the topic got its
    /// `records`, then drops them, so that the mock's memory does not grow
    /// from run to run.
    fn run(
        &self,
        cmd: &mut Command,
        case: &str,
        client: &str,
        round: usize,
        records: usize,
    ) -> Value {
        let mut r = measure_run(cmd, case, client, round, records);
        let partitions = 0..Self::PARTITIONS;
        let end: i64 = partitions
            .clone()
            .filter_map(|p| self.mock.cluster.high_watermark(self.topic, p))
            .sum();
        let start: i64 = partitions
            .clone()
            .filter_map(|p| self.mock.cluster.log_start_offset(self.topic, p))
            .sum();
        assert_eq!(
            end - start,
            records as i64,
            "{case} {client}: records written"
        );
        r["records_per_s"] = json!(records as f64 / r["wall_s"].as_f64().unwrap_or(f64::NAN));
        for p in partitions {
            if let Some(end) = self.mock.cluster.high_watermark(self.topic, p) {
                let _ = self.mock.cluster.delete_records_before(self.topic, p, end);
            }
        }
        r
    }
}

/// The command of `client`: the example for lazykafka, else this binary
/// with `twin` (its librdkafka twin).
fn client_command(client: &str, example: &std::path::Path, twin: &str) -> Command {
    if client == "lazykafka" {
        Command::new(example)
    } else {
        let mut c = Command::new(std::env::current_exe().expect("current exe"));
        c.arg(twin);
        c
    }
}

/// Runs `cmd` (a client's round) to its end, and returns its figures with
/// CPU per record, printed on one line.
fn measure_run(cmd: &mut Command, case: &str, client: &str, round: usize, records: usize) -> Value {
    let mut r = measure_process(cmd);
    assert_eq!(r["exit_ok"], true, "{client}: {r}");
    r["cpu_us_per_record"] = json!(r["cpu_s"].as_f64().unwrap_or(f64::NAN) * 1e6 / records as f64);
    r["broker"] = json!("mock");
    r["case"] = json!(case);
    r["client"] = json!(client);
    r["round"] = json!(round);
    r["records"] = json!(records);
    eprintln!(
        "  mock   {case}   {client:<10} round {round}: cpu {:.3} s ({:.3} user, \
         {:.3} sys), peak RSS {:.1} MB, wall {:.2} s",
        r["cpu_s"].as_f64().unwrap_or(f64::NAN),
        r["user_s"].as_f64().unwrap_or(f64::NAN),
        r["sys_s"].as_f64().unwrap_or(f64::NAN),
        r["vmhwm_mb"].as_f64().unwrap_or(f64::NAN),
        r["wall_s"].as_f64().unwrap_or(f64::NAN),
    );
    r
}

/// The medians of the runs of `case`, lazykafka's beside librdkafka's.
fn print_table(title: &str, case: &str, runs: &[Value]) {
    print_pair(title, case, runs, ["lazykafka", "librdkafka"]);
}

/// The medians of the runs of `case`, client `a`'s beside `b`'s.
fn print_pair(title: &str, case: &str, runs: &[Value], [a_name, b_name]: [&str; 2]) {
    println!(
        "\n{title}\n  {:<32} {:>12} {:>12} {:>9}",
        "median", a_name, b_name, "ratio"
    );
    for (metric, label) in [
        ("cpu_s", "CPU time, s"),
        ("user_s", "user CPU, s"),
        ("sys_s", "system CPU, s"),
        ("cpu_us_per_record", "CPU µs/record"),
        ("vmhwm_mb", "peak RSS, MB"),
        ("wall_s", "wall time, s"),
        ("records_per_s", "records/s"),
    ] {
        let of = |client: &str| {
            median_of(
                runs.iter()
                    .filter(|r| r["case"] == case && r["client"] == client),
                metric,
            )
        };
        if of(a_name).is_none() {
            continue;
        }
        let (a, b) = (of(a_name), of(b_name));
        println!(
            "  {label:<32} {:>12} {:>12} {:>9}",
            cell(a, 3),
            cell(b, 3),
            ratio_cell(a, b)
        );
    }
}

/// The example `name`, built in release mode next to this binary
/// (`cargo build --release --example NAME` is run first: the example
/// needs the default runtime feature), or the reason there is none.
fn example(name: &str) -> Result<std::path::PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // target/release/deps/compare-… → target/release/examples/consume
    let release = exe
        .parent()
        .and_then(|d| d.parent())
        .ok_or("no release directory")?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = Command::new(cargo)
        .args(["build", "--release", "--quiet", "--example", name])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env(
            "CARGO_TARGET_DIR",
            release.parent().ok_or("no target directory")?,
        )
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if !built.success() {
        return Err(format!("cargo build --example {name}: {built}"));
    }
    let bin = release.join("examples").join(name);
    bin.exists()
        .then_some(bin)
        .ok_or_else(|| format!("no examples/{name} after the build"))
}

/// CPU time (user + system) and wall time of one whole process, from
/// `wait4`, and its peak RSS (`VmHWM`, read every millisecond while it
/// runs: `wait4`'s `ru_maxrss` would count this process's own size,
/// which the child had before its `exec`); standard output goes to
/// /dev/null.
fn measure_process(cmd: &mut Command) -> Value {
    let t0 = Instant::now();
    // Reaped by `wait4` below, which also gives its resource usage.
    #[allow(clippy::zombie_processes)]
    let child = cmd
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the process");
    let status_file = format!("/proc/{}/status", child.id());
    let done = AtomicBool::new(false);
    let (pid, status, ru, hwm_kb) = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| peak_rss_kb(&status_file, &done));
        // VmHWM only grows, and goes with the process's memory at its
        // exit: the last reading is the peak up to its last
        // millisecond.
        let mut status = 0;
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut ru) };
        done.store(true, Ordering::Relaxed);
        (pid, status, ru, sampler.join().expect("sampler"))
    });
    let wall = t0.elapsed().as_secs_f64();
    assert_eq!(pid, child.id() as libc::pid_t, "wait4");
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    json!({
        "exit_ok": libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "cpu_s": tv(ru.ru_utime) + tv(ru.ru_stime),
        "user_s": tv(ru.ru_utime),
        "sys_s": tv(ru.ru_stime),
        "vmhwm_mb": hwm_kb as f64 / 1024.0,
        "wall_s": wall,
    })
}

/// The highest `VmHWM` (kB) read from `status_file` every millisecond
/// until `done`.
fn peak_rss_kb(status_file: &str, done: &AtomicBool) -> u64 {
    let mut hwm = 0u64;
    while !done.load(Ordering::Relaxed) {
        let now = std::fs::read_to_string(status_file).ok().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        });
        hwm = hwm.max(now.unwrap_or(0));
        std::thread::sleep(Duration::from_millis(1));
    }
    hwm
}
