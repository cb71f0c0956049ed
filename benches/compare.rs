//! lazykafka next to librdkafka (the `rdkafka` crate), in one run, on the
//! same brokers and the same data.
//!
//! ```sh
//! cargo bench --bench compare                          # 3 rounds, full size
//! LAZYKAFKA_BENCH_SCALE=0.1 LAZYKAFKA_BENCH_ROUNDS=5 cargo bench --bench compare
//! cargo bench --bench compare -- --scale 0.1 --rounds 5  # the same
//! LAZYKAFKA_TANSU_BIN=/path/to/tansu cargo bench --bench compare  # adds tansu
//! ```
//!
//! The parent process hosts an in-process mock cluster
//! (`lazykafka::mock::MockCluster`, 3 brokers, filled from code) and, when
//! given, a tansu broker (filled with librdkafka's producer), and runs every
//! consumer in a child process of its own (this binary again, with
//! `--child`), which connects over loopback. Each child reports what it
//! measured about itself as one JSON line: throughput, time from the first
//! `poll` to the first record, CPU time (getrusage, less the census
//! thread's), peak RSS (`VmHWM`), threads, connection attempts (the client's
//! own counters: lazykafka's `broker_counters()`, librdkafka's statistics
//! `connects`), TCP sockets seen to the brokers (a census thread reading
//! `/proc/net/tcp*` every 2 ms), sockets held once consuming (the census
//! after the last record), and the CPU it spends per second polling with
//! nothing left to read. The parent counts, from the mock's request log,
//! the requests each client sent between its first poll and its first
//! record. The mock's own CPU is the parent's, not the child's.
//!
//! Clients alternate A B A B (lazykafka, then librdkafka, per round) so a
//! noisy machine affects both alike; medians and the ratio lazykafka /
//! librdkafka are printed and written, with every run, to
//! `target/bench-compare.json` (or `LAZYKAFKA_BENCH_OUT`). Environment:
//!
//! - `LAZYKAFKA_BENCH_SCALE` (default 1): multiplies the record counts
//!   (1,000,000 × 100 B, uncompressed and lz4; 100,000 × 10 KiB);
//! - `LAZYKAFKA_BENCH_ROUNDS` (default 3);
//! - `LAZYKAFKA_BENCH_TANSU_SCALE` (default: the scale): the record counts
//!   for tansu, which is much slower to fill and to serve;
//! - `LAZYKAFKA_TANSU_BIN`: a tansu binary; without it tansu is skipped;
//! - `LAZYKAFKA_BENCH_CASES`: a comma-separated subset of
//!   `100B,100B-lz4,10KiB,scale,sessions,sessions-rdmock,rebalance,tls,process`
//!   and the producer
//!   cases `produce-100B,produce-10KiB,produce-100B-keyed,produce-100B-lz4,
//!   produce-scale`;
//! - `LAZYKAFKA_BENCH_STEADY_MS` (default 10000): the steady window of the
//!   `sessions` cases. `sessions` (KIP-227 incremental fetch sessions) puts
//!   2,000 × scale partitions (at least 30) over the 3 brokers of a mock,
//!   2 records each; each client reads every record in the topic, then
//!   polls for the steady window, once with a trickle of 100 records/s
//!   round the partitions (phase `trickle`) and once with nothing written
//!   (phase `idle`); the bench reports the Fetch request bytes per second
//!   the mock received in that window (`request_bytes`, sampled every
//!   50 ms), the Fetch requests per second, the client's CPU per second
//!   and its peak RSS, for lazykafka with sessions (the default),
//!   lazykafka with `fetch.sessions.enable=false` and librdkafka (no
//!   sessions). `sessions-rdmock` is the same on librdkafka's mock (in
//!   this process, filled and trickled by a librdkafka producer; no fetch
//!   sessions there, and no request bytes), for lazykafka and librdkafka;
//! - `LAZYKAFKA_BENCH_PARTITIONS`: a comma-separated list of partition
//!   counts for the `sessions` cases instead of 2,000 × scale (the curve:
//!   `100,1000,2000,10000`); with two counts or more the bench draws
//!   client CPU per second against them, one panel per broker, to
//!   `bench-many-partitions.svg` beside the JSON. The `rebalance` case
//!   (partition counts as `sessions`) has one group member per client
//!   subscribe to a topic of that many partitions, one record each, on our
//!   mock and on librdkafka's, and reports from the broker's request log
//!   the time from its last SyncGroup (the assignment) to its first Fetch
//!   and from its first JoinGroup to that Fetch, and from the child the
//!   time to the first record and the CPU and peak RSS to the last;
//! - `LAZYKAFKA_BENCH_PERF=DIR`: every timed child runs under
//!   `perf record -g`, its profile written to `DIR` (the timings then
//!   include perf's overhead: for profiles only);
//! - `LAZYKAFKA_BENCH_STRACE=0`: no strace runs.
//!
//! The `tls` case is the 100 B data set (the same record count) on a
//! second 3-broker mock with TLS listeners: a CA and a leaf certificate for
//! `localhost` and `127.0.0.1` are made with rcgen at run time and written
//! to a temp dir; both clients get `security.protocol=SSL` and
//! `ssl.ca.location` (the CA file). When `100B` runs too, the bench also
//! prints each client's TLS / plaintext CPU per record (`tls_vs_plain` in
//! the JSON).
//!
//! The producer cases write instead of reading, on a 3-broker mock of
//! their own (8 partitions, partition `p` led by broker `p % 3 + 1`):
//! 1,000,000 × scale records of 100 B (`produce-100B`, `produce-100B-lz4`
//! with lz4 on both clients, `produce-100B-keyed` with keys `k{i % 1000}`
//! placed by each client's murmur2 partitioner) and 50,000 × scale of
//! 10 KiB (`produce-10KiB`); keyless record `i` names partition `i % 8`.
//! Both producers are idempotent with `acks=all`, `linger.ms` 5,
//! `batch.size` 16384 and 5 requests in flight (the Java defaults,
//! lazykafka's); librdkafka also gets `queue.buffering.max.kbytes` 32768
//! (`buffer.memory`), `queue.buffering.max.messages` 0 (no count limit)
//! and `partitioner=murmur2_random`. lazykafka awaits each `send` and
//! keeps the delivery futures in a queue in the order sent, taking those
//! done from its front after every send, then awaits the rest in order; librdkafka's
//! `BaseProducer` sends each record and calls `poll(0)` after it (on
//! `QueueFull`, `poll(100 ms)` and the same record again), then polls
//! until every delivery report came. Each child reports records/s from
//! before the producer is created to the last delivery report (and from
//! the first report to the last), CPU (less the census thread's) per
//! record, peak RSS, threads and sockets held after the last report, and
//! its own connection count; the parent adds, from the mock's event log,
//! the connections accepted, the brokers they went to, the Produce
//! requests, and the records written (high watermarks; every partition is
//! emptied after each run). `produce-scale` is the `scale` case's
//! 1000-address bootstrap list in front of another 8-broker mock, 1000
//! records of 100 B to a topic of 6 partitions led by brokers 1, 2, 4, 5,
//! 7 and 8.
//!
//! The `process` case measures whole processes as a user runs them: the
//! `consume` example (built first with `cargo build --release --example
//! consume`) and the same command line on librdkafka (this binary with
//! `--consume-librdkafka`), each reading 600,000 × scale records of 100 B
//! from 24 partitions to the end (`--offset beginning --count N`, JSON
//! lines to /dev/null); CPU time and peak RSS come from `wait4`.
//!
//! After the summary, each uncompressed data set's physical floor is
//! measured on the same bytes and printed next to both clients' CPU per
//! record: the bare parse + CRC-32C loop of the `records` bench and a
//! loopback `read` of the set (`floors` in the JSON).
//!
//! `LAZYKAFKA_BENCH_IDLE_MS` (default 1000) sets how long the children
//! poll with nothing to read for the idle figure; the JSON also has that
//! figure per thread name (`idle_threads_ms_per_s`, each thread's run time
//! from `/proc/self/task/*/schedstat`, the census thread left out) and
//! how often each thread ran in it (`idle_thread_runs_per_s`, the third
//! field of the same file). Every child also reports its minor page faults
//! (`minor_faults`, `getrusage`).
//!
//! `LAZYKAFKA_BENCH_WRAP` runs every timed child under a command, for
//! looking only (`strace -f -c -o /tmp/sc-{}`, `perf record -F 20000 -g
//! -o /tmp/p-{} --`): the words are split at spaces and `{}` becomes the
//! case, the client and a run number.
//!
//! lazykafka runs on async-std by default; built with
//! `--no-default-features --features runtime-tokio,gzip,snappy,lz4,zstd,mock`
//! it runs on a current-thread tokio runtime, or on a multi-thread one
//! (what `#[tokio::main]` builds) with `LAZYKAFKA_BENCH_TOKIO=multi` (each
//! child's JSON line says which, as `runtime`). `scripts/bench-runtimes.sh`
//! builds both and alternates them, round by round.
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it does nothing.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/floor.rs"]
mod floor;
/// The `consume` example's JSON line, for its librdkafka twin.
#[path = "../examples/support/record_line.rs"]
mod record_line;

use common::{client_sockets, Tansu, ESTABLISHED};
use lazykafka::mock::{MockCluster, MockRecord};
use lazykafka::records::Compression;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long one child may take before it gives up and reports what it has.
const CHILD_TIMEOUT: Duration = Duration::from_secs(180);

/// Fetch settings both clients get (the Kafka defaults, spelled out).
const FETCH_MIN_BYTES: &str = "1";
const FETCH_MAX_WAIT_MS: &str = "500";
const FETCH_MAX_BYTES: &str = "52428800";
const MAX_PARTITION_FETCH_BYTES: &str = "1048576";
const CHECK_CRCS: &str = "true";

/// Producer settings both clients get: the Java producer's defaults
/// (lazykafka's), spelled out; librdkafka's own defaults differ
/// (`batch.size` 1000000, `queue.buffering.max.kbytes` 1048576 and
/// `queue.buffering.max.messages` 100000, `partitioner`
/// consistent_random).
const PRODUCE_ACKS: &str = "all";
const PRODUCE_IDEMPOTENCE: &str = "true";
const PRODUCE_LINGER_MS: &str = "5";
const PRODUCE_BATCH_SIZE: &str = "16384";
const PRODUCE_MAX_IN_FLIGHT: &str = "5";
/// `buffer.memory` (33554432 B), in librdkafka's
/// `queue.buffering.max.kbytes`.
const PRODUCE_BUFFER_KBYTES: &str = "32768";

/// What a producer child writes: values of `value_len` bytes (the
/// consumer cases' text-like pool), compressed with `compression`; keyed
/// records (`k{i % 1000}`) go where the partitioner puts them, keyless
/// record `i` to partition `i % partitions`.
#[derive(Debug, Clone, Copy)]
struct Produce {
    value_len: usize,
    compression: &'static str,
    keyed: bool,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--child") {
        child::run();
        return;
    }
    if args.get(1).map(String::as_str) == Some("--consume-librdkafka") {
        std::process::exit(twin::run(&args[2..]));
    }
    if !args.iter().any(|a| a == "--bench") {
        eprintln!("compare: a benchmark; run it with `cargo bench --bench compare`");
        return;
    }
    parent::run(&args);
}

/// Whether a child built with `runtime-tokio` runs its consumer on a
/// multi-thread runtime (`LAZYKAFKA_BENCH_TOKIO=multi`) rather than a
/// current-thread one.
#[cfg_attr(not(feature = "runtime-tokio"), allow(dead_code))]
fn tokio_multi_thread() -> bool {
    std::env::var("LAZYKAFKA_BENCH_TOKIO").as_deref() == Ok("multi")
}

/// CLOCK_MONOTONIC in microseconds: the clock of librdkafka's `rd_clock()`,
/// shared by every process on the machine.
fn mono_us() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000 + ts.tv_nsec / 1_000
}

/// User + system CPU time of `who` (RUSAGE_SELF or RUSAGE_THREAD).
fn cpu_time(who: libc::c_int) -> Duration {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(us(ru.ru_utime) + us(ru.ru_stime))
}

/// Minor page faults of this process so far (`getrusage`).
fn minor_faults() -> u64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_minflt as u64
}

/// A field of `/proc/self/status` (such as `VmHWM`, in kB, or `Threads`).
fn status_field(name: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Text-like values (lowercase letters from a xorshift generator), so lz4
/// has something realistic to do; a pool of 64 distinct values.
fn values(len: usize) -> Vec<Vec<u8>> {
    (0..64u64)
        .map(|i| {
            let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Skewed toward a few letters, as text is.
                    let r = (x % 100) as u8;
                    b'a' + if r < 60 { r % 6 } else { r % 26 }
                })
                .collect()
        })
        .collect()
}

/// One data set: `records` values of `value_len` bytes over `partitions`
/// partitions of `topic`.
#[derive(Debug, Clone)]
struct DataSet {
    name: &'static str,
    topic: &'static str,
    records: usize,
    value_len: usize,
    compression: &'static str,
    partitions: i32,
}

fn data_sets(scale: f64) -> Vec<DataSet> {
    let n = |base: f64| ((base * scale).round() as usize).max(8);
    vec![
        DataSet {
            name: "100B",
            topic: "b100",
            records: n(1_000_000.0),
            value_len: 100,
            compression: "none",
            partitions: 8,
        },
        DataSet {
            name: "100B-lz4",
            topic: "b100lz4",
            records: n(1_000_000.0),
            value_len: 100,
            compression: "lz4",
            partitions: 8,
        },
        DataSet {
            name: "10KiB",
            topic: "b10k",
            records: n(100_000.0),
            value_len: 10 * 1024,
            compression: "none",
            partitions: 8,
        },
    ]
}

mod parent {
    use super::*;

    struct Settings {
        scale: f64,
        tansu_scale: f64,
        rounds: usize,
        cases: Option<BTreeSet<String>>,
        out: std::path::PathBuf,
    }

    fn settings(args: &[String]) -> Settings {
        let arg = |name: &str| {
            args.iter()
                .position(|a| a == name)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let scale: f64 = arg("--scale")
            .or_else(|| env("LAZYKAFKA_BENCH_SCALE"))
            .map(|v| v.parse().expect("scale: a number"))
            .unwrap_or(1.0);
        let tansu_scale = env("LAZYKAFKA_BENCH_TANSU_SCALE")
            .map(|v| v.parse().expect("tansu scale: a number"))
            .unwrap_or(scale);
        let rounds = arg("--rounds")
            .or_else(|| env("LAZYKAFKA_BENCH_ROUNDS"))
            .map(|v| v.parse().expect("rounds: a number"))
            .unwrap_or(3);
        let cases = env("LAZYKAFKA_BENCH_CASES")
            .map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
        let out = env("LAZYKAFKA_BENCH_OUT")
            .map(Into::into)
            .unwrap_or_else(|| {
                let target = env("CARGO_TARGET_DIR").unwrap_or_else(|| "target".into());
                std::path::Path::new(&target).join("bench-compare.json")
            });
        Settings {
            scale,
            tansu_scale,
            rounds,
            cases,
            out,
        }
    }

    impl Settings {
        fn wants(&self, case: &str) -> bool {
            self.cases.as_ref().is_none_or(|c| c.contains(case))
        }
    }

    /// Produces `set` into `topic` with librdkafka, partition `i % n`.
    fn produce(bootstrap: &str, set: &DataSet) {
        use rdkafka::config::ClientConfig;
        use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("compression.codec", set.compression)
            .set("linger.ms", "20")
            .set("batch.size", "1000000")
            .set("queue.buffering.max.kbytes", "1048576")
            .create()
            .expect("librdkafka producer");
        let pool = values(set.value_len);
        for i in 0..set.records {
            let record: BaseRecord<'_, (), [u8]> = BaseRecord::to(set.topic)
                .payload(&pool[i % pool.len()][..])
                .partition(i as i32 % set.partitions);
            common::peers::send(&producer, record);
        }
        producer
            .flush(Duration::from_secs(300))
            .expect("flush the data set");
    }

    /// What a child is told.
    struct Job<'a> {
        client: &'static str,
        bootstrap: &'a str,
        topic: &'a str,
        partitions: i32,
        records: usize,
        broker_ports: &'a [u16],
        /// Run under `strace -e trace=connect` to count connect() calls.
        strace: bool,
        /// `fetch.sessions.enable` for lazykafka (`None`: its default).
        sessions: Option<&'static str>,
        /// After the first `records`, poll this long and report the CPU
        /// and records of that window.
        steady_ms: Option<u64>,
        /// The CA file: both clients connect with `security.protocol=SSL`.
        ca: Option<&'a str>,
        /// Produce `records` to `topic` instead of consuming them.
        produce: Option<Produce>,
        /// Join this group (subscribe) instead of assigning the partitions.
        group: Option<&'a str>,
    }

    /// Profiles taken so far (`LAZYKAFKA_BENCH_PERF`).
    static PROFILES: AtomicU64 = AtomicU64::new(0);

    /// Whether `strace` can be run.
    fn have_strace() -> bool {
        std::env::var("LAZYKAFKA_BENCH_STRACE").as_deref() != Ok("0")
            && Command::new("strace")
                .arg("-V")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
    }

    fn run_child(job: &Job<'_>) -> Value {
        let exe = std::env::current_exe().expect("current exe");
        let ports: Vec<String> = job.broker_ports.iter().map(u16::to_string).collect();
        let trace =
            std::env::temp_dir().join(format!("lazykafka-compare-{}.strace", std::process::id()));
        let mut cmd = if job.strace {
            let mut c = Command::new("strace");
            c.args(["-f", "-qq", "--seccomp-bpf", "-e", "trace=connect", "-o"])
                .arg(&trace)
                .arg(exe);
            c
        } else if let Some(dir) = std::env::var_os("LAZYKAFKA_BENCH_PERF") {
            // A profile of every timed child, for `perf report -i`.
            let n = PROFILES.fetch_add(1, Ordering::Relaxed);
            let data = std::path::Path::new(&dir)
                .join(format!("{}-{}-{}.perf.data", job.topic, job.client, n));
            let mut c = Command::new("perf");
            c.args(["record", "-q", "-g", "-o"])
                .arg(data)
                .arg("--")
                .arg(exe);
            c
        } else if let Ok(wrap) = std::env::var("LAZYKAFKA_BENCH_WRAP") {
            // Every timed child under a command of the user's (see the
            // crate documentation).
            let n = PROFILES.fetch_add(1, Ordering::Relaxed);
            let wrap = wrap.replace("{}", &format!("{}-{}-{}", job.topic, job.client, n));
            let mut words = wrap.split_whitespace();
            let mut c = Command::new(words.next().expect("a command"));
            c.args(words).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        // The parent's CPU while the child runs: its mock brokers' (nothing
        // else in it is busy then).
        let parent_cpu0 = cpu_time(libc::RUSAGE_SELF);
        let out = cmd
            .arg("--child")
            .env("LKB_CLIENT", job.client)
            .env("LKB_BOOTSTRAP", job.bootstrap)
            .env("LKB_TOPIC", job.topic)
            .env("LKB_PARTITIONS", job.partitions.to_string())
            .env("LKB_RECORDS", job.records.to_string())
            .env("LKB_PORTS", ports.join(","))
            .env("LKB_SESSIONS", job.sessions.unwrap_or(""))
            .env("LKB_GROUP", job.group.unwrap_or(""))
            .env("LKB_CA", job.ca.unwrap_or(""))
            .env(
                "LKB_STEADY_MS",
                job.steady_ms.map_or(String::new(), |m| m.to_string()),
            )
            .envs(job.produce.iter().flat_map(|p| {
                [
                    ("LKB_PRODUCE", "1".to_owned()),
                    ("LKB_VALUE_LEN", p.value_len.to_string()),
                    ("LKB_COMPRESSION", p.compression.to_owned()),
                    ("LKB_KEYED", p.keyed.to_string()),
                ]
            }))
            .output()
            .expect("run child");
        let parent_cpu = cpu_time(libc::RUSAGE_SELF).saturating_sub(parent_cpu0);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.lines().rev().find(|l| l.starts_with('{'));
        match line.and_then(|l| serde_json::from_str::<Value>(l).ok()) {
            Some(mut v) => {
                v["parent_cpu_s"] = json!(parent_cpu.as_secs_f64());
                if job.strace {
                    // Every connect() to a broker port, whatever its outcome.
                    let text = std::fs::read_to_string(&trace).unwrap_or_default();
                    let _ = std::fs::remove_file(&trace);
                    let calls: Vec<u16> = text
                        .lines()
                        .filter(|l| l.contains("connect(") && l.contains("AF_INET"))
                        .filter_map(|l| {
                            let p = l.split("htons(").nth(1)?.split(')').next()?;
                            p.parse().ok()
                        })
                        .filter(|p| job.broker_ports.contains(p))
                        .collect();
                    let distinct: BTreeSet<u16> = calls.iter().copied().collect();
                    v = json!({
                        "census": true,
                        "connect_calls": calls.len(),
                        "connect_ports": distinct.len(),
                    });
                }
                v
            }
            None => {
                eprintln!(
                    "child {} failed ({}): {}",
                    job.client,
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
                json!({"failed": true})
            }
        }
    }

    /// `lazykafka::mock::MockCluster` in this process, with what the bench
    /// needs to read its request log on the children's clock.
    struct Mock {
        cluster: MockCluster,
        /// CLOCK_MONOTONIC (µs) of the cluster's start: a request logged
        /// `at` after it arrived at `started_us + at`. (std's `Instant` is
        /// CLOCK_MONOTONIC on Linux; the offset is taken once.)
        started_us: i64,
    }

    impl Mock {
        fn new(brokers: i32) -> Mock {
            Mock::with(MockCluster::new(brokers).expect("mock cluster"))
        }

        /// `brokers` brokers with TLS listeners serving `cert_pem`.
        fn tls(brokers: i32, cert_pem: &str, key_pem: &str) -> Mock {
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

        fn bootstrap(&self) -> String {
            self.cluster.bootstrap_servers()
        }

        fn ports(&self) -> Vec<u16> {
            self.cluster
                .broker_ids()
                .into_iter()
                .filter_map(|id| self.cluster.broker_addr(id))
                .map(|a| a.port())
                .collect()
        }

        /// Fills `set` from code, record `i` to partition `i % partitions`
        /// (as the producer does for tansu), in batches of up to 1000
        /// records and about 1 MB.
        fn fill(&self, set: &DataSet) {
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
        fn clear_requests(&self) {
            self.cluster.clear_events();
            if std::env::var_os("LAZYKAFKA_BENCH_TIMELINE").is_some() {
                // Restarted: only this run's Fetch requests.
                self.cluster.record_fetches(false);
                self.cluster.record_fetches(true);
            }
        }

        /// `at` (from the mock's start) on CLOCK_MONOTONIC, in µs.
        fn mono_us(&self, at: Duration) -> i64 {
            self.started_us + at.as_micros() as i64
        }

        /// Adds the mock's count of requests between the child's first poll
        /// and its first record.
        fn add_requests(&self, result: &mut Value) {
            let (Some(from), Some(to)) = (
                result["first_poll_us"].as_i64(),
                result["first_record_us"].as_i64(),
            ) else {
                return;
            };
            // Every request, with its time and API name.
            let requests: Vec<(i64, String, _)> = self
                .cluster
                .requests()
                .into_iter()
                .map(|r| {
                    let api = r.api.map_or_else(|| "other".into(), |a| format!("{a:?}"));
                    (self.mono_us(r.at), api, r)
                })
                .collect();
            let by_api = |within: &dyn Fn(i64) -> bool| {
                let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
                for (t, api, _) in &requests {
                    if within(*t) {
                        *counts.entry(api.as_str()).or_default() += 1;
                    }
                }
                counts
            };
            // When (ms from the first poll), which broker, which API.
            let before: Vec<Value> = requests
                .iter()
                .filter(|(t, _, _)| (from..=to).contains(t))
                .map(|(t, api, r)| json!([(t - from) as f64 / 1e3, r.broker, api]))
                .collect();
            result["requests_before_first_mock"] = json!(before.len());
            result["requests_before_first_by_api"] = json!(by_api(&|t| (from..=to).contains(&t)));
            result["requests_before_first_timeline"] = json!(before);
            if std::env::var_os("LAZYKAFKA_BENCH_TIMELINE").is_none() {
                return;
            }
            // Every request up to the last record, for looking into a run,
            // with its connection.
            let last = from + (result["elapsed_s"].as_f64().unwrap_or(0.0) * 1e6) as i64;
            let all: Vec<Value> = requests
                .iter()
                .filter(|(t, _, _)| (from..=last).contains(t))
                .map(|(t, api, r)| json!([(t - from) as f64 / 1e3, r.broker, api, r.connection]))
                .collect();
            result["requests_timeline"] = json!(all);
            // After the last record: the idle window, then the close.
            result["requests_after_last_record"] = json!(by_api(&|t| t > last));
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
            result["fetches_without_records"] =
                json!(fetches.iter().filter(|f| bytes(f) == 0).count());
            result["fetches_answered"] = json!(fetches);
        }
    }

    /// One broker's throughput cases, A B A B.
    #[allow(clippy::too_many_arguments)]
    fn throughput(
        s: &Settings,
        broker: &str,
        bootstrap: &str,
        ports: &[u16],
        sets: &[DataSet],
        mock: Option<&Mock>,
        ca: Option<&str>,
        runs: &mut Vec<Value>,
    ) {
        for set in sets {
            if !s.wants(set.name) {
                continue;
            }
            for round in 0..s.rounds {
                for client in ["lazykafka", "librdkafka"] {
                    if let Some(m) = mock {
                        m.clear_requests();
                    }
                    let mut r = run_child(&Job {
                        client,
                        bootstrap,
                        topic: set.topic,
                        partitions: set.partitions,
                        records: set.records,
                        broker_ports: ports,
                        strace: false,
                        sessions: None,
                        steady_ms: None,
                        ca,
                        produce: None,
                        group: None,
                    });
                    if let Some(m) = mock {
                        m.add_requests(&mut r);
                    }
                    r["broker"] = json!(broker);
                    r["case"] = json!(set.name);
                    r["client"] = json!(client);
                    r["round"] = json!(round);
                    r["expected_records"] = json!(set.records);
                    eprintln!("{}", brief(&r));
                    runs.push(r);
                }
            }
            census_runs(broker, set.name, ports, runs, |client| Job {
                client,
                bootstrap,
                topic: set.topic,
                partitions: set.partitions,
                records: set.records,
                broker_ports: ports,
                strace: true,
                sessions: None,
                steady_ms: None,
                ca,
                produce: None,
                group: None,
            });
        }
    }

    /// One more run per client under strace, counting connect() calls (not
    /// timed).
    fn census_runs<'a>(
        broker: &str,
        case: &str,
        _ports: &[u16],
        runs: &mut Vec<Value>,
        job: impl Fn(&'static str) -> Job<'a>,
    ) {
        if !have_strace() {
            return;
        }
        for client in ["lazykafka", "librdkafka"] {
            let mut r = run_child(&job(client));
            r["broker"] = json!(broker);
            r["case"] = json!(case);
            r["client"] = json!(client);
            eprintln!(
                "  {broker:<6} {case:<9} {client:<10} strace: {} connect() calls to {} addresses",
                r["connect_calls"], r["connect_ports"]
            );
            runs.push(r);
        }
    }

    fn brief(r: &Value) -> String {
        format!(
            "  {:<6} {:<9} {:<10} round {}: {:>9.0} rec/s {:>7.1} MB/s, first record {:>7.1} ms, \
             cpu {:.2} s, hwm {:.0} MB, sockets {} opened / {} held{}",
            r["broker"].as_str().unwrap_or(""),
            r["case"].as_str().unwrap_or(""),
            r["client"].as_str().unwrap_or(""),
            r["round"],
            r["rec_per_s"].as_f64().unwrap_or(f64::NAN),
            r["mb_per_s"].as_f64().unwrap_or(f64::NAN),
            r["ttfr_ms"].as_f64().unwrap_or(f64::NAN),
            r["cpu_s"].as_f64().unwrap_or(f64::NAN),
            r["vmhwm_kb"].as_f64().unwrap_or(f64::NAN) / 1024.0,
            r["connects"],
            r["held"],
            if r["timed_out"].as_bool() == Some(true) {
                " TIMED OUT"
            } else {
                ""
            }
        )
    }

    /// Ports of loopback listeners opened and closed again: nothing listens
    /// there, so a connect is refused at once.
    fn closed_ports(n: usize) -> Vec<u16> {
        let listeners: Vec<_> = (0..n)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind"))
            .collect();
        listeners
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect()
    }

    /// 1000 bootstrap addresses: 992 closed loopback ports and the brokers
    /// of `mock` (8), shuffled with a fixed seed; and every port among
    /// them (closed ones first, then the brokers').
    fn scale_bootstrap(mock: &Mock) -> (String, Vec<u16>) {
        let closed = closed_ports(992);
        let mut addrs: Vec<String> = closed.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        addrs.extend(mock.bootstrap().split(',').map(str::to_owned));
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for i in (1..addrs.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            addrs.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let mut ports = closed;
        ports.extend(mock.ports());
        (addrs.join(","), ports)
    }

    /// 1000 bootstrap addresses: 992 closed loopback ports and the 8 brokers
    /// of a mock cluster, shuffled (fixed seed); the topic's 2 partitions
    /// are led by brokers 2 and 7.
    fn scale_case(s: &Settings, runs: &mut Vec<Value>) {
        let mock = Mock::new(8);
        let topic = "scale";
        mock.cluster
            .create_topic_with_leaders(topic, &[2, 7])
            .expect("scale topic");
        let records = 1000;
        mock.fill(&DataSet {
            name: "scale",
            topic,
            records,
            value_len: 100,
            compression: "none",
            partitions: 2,
        });
        let (bootstrap, ports) = scale_bootstrap(&mock);
        for round in 0..s.rounds {
            for client in ["lazykafka", "librdkafka"] {
                mock.clear_requests();
                let mut r = run_child(&Job {
                    client,
                    bootstrap: &bootstrap,
                    topic,
                    partitions: 2,
                    records,
                    broker_ports: &ports,
                    strace: false,
                    sessions: None,
                    steady_ms: None,
                    ca: None,
                    produce: None,
                    group: None,
                });
                mock.add_requests(&mut r);
                r["broker"] = json!("mock");
                r["case"] = json!("scale");
                r["client"] = json!(client);
                r["round"] = json!(round);
                r["expected_records"] = json!(records);
                eprintln!("{}", brief(&r));
                runs.push(r);
            }
        }
        census_runs("mock", "scale", &ports, runs, |client| Job {
            client,
            bootstrap: &bootstrap,
            topic,
            partitions: 2,
            records,
            broker_ports: &ports,
            strace: true,
            sessions: None,
            steady_ms: None,
            ca: None,
            produce: None,
            group: None,
        });
    }

    /// Where a many-partitions case runs: `lazykafka::mock` (fetch
    /// sessions, a request log with bytes) or librdkafka's mock (no fetch
    /// sessions; it holds an empty Fetch for the full wait), filled and
    /// trickled through a librdkafka producer in this process.
    enum ManyBroker {
        Ours(Mock),
        Rd {
            mock: common::mock::RawMock,
            producer: rdkafka::producer::BaseProducer,
        },
    }

    impl ManyBroker {
        fn new(ours: bool, topic: &str, partitions: i32) -> ManyBroker {
            if ours {
                let leaders: Vec<i32> = (0..partitions).map(|p| p % 3 + 1).collect();
                let mock = Mock::new(3);
                mock.cluster
                    .create_topic_with_leaders(topic, &leaders)
                    .expect("many-partitions topic");
                return ManyBroker::Ours(mock);
            }
            use rdkafka::config::ClientConfig;
            let mock = common::mock::RawMock::new(3);
            // librdkafka's mock advertises group API versions its handlers
            // cannot read (see `RawMock::cap_group_versions`).
            mock.cap_group_versions();
            // With a replication factor of 1 the mock itself makes broker
            // `p % 3 + 1` lead partition `p` (`assign_replicas`). (Setting
            // each leader by hand, one request to its thread each, stalled
            // that thread at 2,000 partitions.)
            mock.create_topic(topic, partitions);
            let producer = ClientConfig::new()
                .set("bootstrap.servers", mock.bootstraps().join(","))
                .set("linger.ms", "0")
                .create()
                .expect("librdkafka producer");
            mock.start_tracking();
            ManyBroker::Rd { mock, producer }
        }

        fn name(&self) -> &'static str {
            match self {
                ManyBroker::Ours(_) => "mock",
                ManyBroker::Rd { .. } => "librdkafka-mock",
            }
        }

        fn bootstrap(&self) -> String {
            match self {
                ManyBroker::Ours(m) => m.bootstrap(),
                ManyBroker::Rd { mock, .. } => mock.bootstraps().join(","),
            }
        }

        fn ports(&self) -> Vec<u16> {
            match self {
                ManyBroker::Ours(m) => m.ports(),
                ManyBroker::Rd { mock, .. } => mock.ports(),
            }
        }

        /// Writes `n` records of `value` to `partition` (on librdkafka's
        /// mock, sent now and delivered in the background).
        fn produce(&self, topic: &str, partition: i32, n: usize, value: &str) {
            match self {
                ManyBroker::Ours(m) => {
                    let _ = m.cluster.produce(
                        topic,
                        partition,
                        (0..n).map(|_| MockRecord::new(value.to_owned())),
                    );
                }
                ManyBroker::Rd { producer, .. } => {
                    use rdkafka::producer::BaseRecord;
                    for _ in 0..n {
                        common::peers::send(
                            producer,
                            BaseRecord::<(), _>::to(topic)
                                .payload(value)
                                .partition(partition),
                        );
                    }
                    producer.poll(Duration::ZERO);
                }
            }
        }

        /// Waits until every record sent is delivered.
        fn flush(&self) {
            if let ManyBroker::Rd { producer, .. } = self {
                use rdkafka::producer::Producer as _;
                producer
                    .flush(Duration::from_secs(120))
                    .expect("fill librdkafka's mock");
            }
        }

        fn clear_requests(&self) {
            match self {
                ManyBroker::Ours(m) => m.clear_requests(),
                ManyBroker::Rd { mock, .. } => mock.clear_requests(),
            }
        }

        /// Fetch request bytes received so far (our mock only).
        fn fetch_bytes(&self) -> Option<u64> {
            match self {
                ManyBroker::Ours(m) => {
                    Some(m.cluster.request_bytes(lazykafka::protocol::ApiKey::Fetch))
                }
                ManyBroker::Rd { .. } => None,
            }
        }

        /// Every request received since the last clear: API key and when
        /// (CLOCK_MONOTONIC µs), oldest first.
        fn requests_timed(&self) -> Vec<(i16, i64)> {
            let mut out: Vec<(i16, i64)> = match self {
                ManyBroker::Ours(m) => m
                    .cluster
                    .requests()
                    .iter()
                    .filter_map(|q| Some((q.api?.code(), m.started_us + q.at.as_micros() as i64)))
                    .collect(),
                // librdkafka's mock stamps requests with rd_clock(),
                // CLOCK_MONOTONIC µs as well.
                ManyBroker::Rd { mock, .. } => mock
                    .requests_timed()
                    .into_iter()
                    .map(|(_, api, t)| (api, t))
                    .collect(),
            };
            out.sort_by_key(|(_, t)| *t);
            out
        }

        /// Fetch requests received between two CLOCK_MONOTONIC instants (µs).
        fn fetches_between(&self, from: i64, to: i64) -> usize {
            self.requests_timed()
                .iter()
                .filter(|(api, t)| *api == 1 && (from..=to).contains(t))
                .count()
        }
    }

    /// A group member joining alone and given every partition of a topic
    /// of 2,000 × scale partitions (`LAZYKAFKA_BENCH_PARTITIONS` as for
    /// `sessions`), one record each, on our mock and on librdkafka's: from
    /// the broker's request log, the time from the member's last SyncGroup
    /// (the assignment) to its first Fetch, and from its first JoinGroup to
    /// that Fetch; from the child, the time from its start to the first
    /// record and its CPU and peak RSS until it read the last one. Prints
    /// its own table.
    fn rebalance_case(s: &Settings, runs: &mut Vec<Value>) {
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
                            client,
                            bootstrap: &bootstrap,
                            topic,
                            partitions,
                            records: partitions as usize,
                            broker_ports: &ports,
                            strace: false,
                            sessions: None,
                            steady_ms: None,
                            ca: None,
                            produce: None,
                            group: Some(&group),
                        });
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
                let these = &runs[first..];
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
                    let of = |client: &str| {
                        median_of(these.iter().filter(|r| r["client"] == client), metric)
                    };
                    let (a, b) = (of("lazykafka"), of("librdkafka"));
                    println!(
                        "  {label:<36} {:>12} {:>12} {:>9}",
                        cell(a, 3),
                        cell(b, 3),
                        ratio_cell(a, b)
                    );
                }
            }
        }
    }

    /// The partition counts of the many-partitions cases:
    /// `LAZYKAFKA_BENCH_PARTITIONS` (a comma-separated list, for the
    /// curve), else 2,000 × scale (at least 30).
    fn many_partition_counts(s: &Settings) -> Vec<i32> {
        match std::env::var("LAZYKAFKA_BENCH_PARTITIONS") {
            Ok(list) if !list.trim().is_empty() => list
                .split(',')
                .map(|p| {
                    p.trim()
                        .parse()
                        .expect("LAZYKAFKA_BENCH_PARTITIONS: numbers")
                })
                .collect(),
            _ => vec![((2000.0 * s.scale).round() as i32).max(30)],
        }
    }

    /// Many partitions, few records, then a trickle (KIP-227) and idle:
    /// Fetch bytes, Fetch requests, CPU per second and peak RSS in the
    /// steady window. On our mock: lazykafka with and without fetch
    /// sessions, and librdkafka; on librdkafka's mock (`ours == false`),
    /// lazykafka and librdkafka. Prints its own table.
    fn sessions_case(s: &Settings, runs: &mut Vec<Value>, ours: bool) {
        let steady_ms: u64 = std::env::var("LAZYKAFKA_BENCH_STEADY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000);
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
            let mut clients: Vec<(&str, &'static str, Option<&'static str>)> =
                vec![("lazykafka", "lazykafka", Some("true"))];
            if ours {
                clients.push(("lazykafka-nosessions", "lazykafka", Some("false")));
            }
            clients.push(("librdkafka", "librdkafka", None));
            let first = runs.len();
            for round in 0..s.rounds {
                // The trickle: 100 records/s round the partitions; idle:
                // none.
                for (phase, every) in [("trickle", Some(Duration::from_millis(10))), ("idle", None)]
                {
                    for &(label, client, sessions) in &clients {
                        broker.clear_requests();
                        let stop = AtomicBool::new(false);
                        let trickled = AtomicU64::new(0);
                        let samples: Mutex<Vec<(i64, u64)>> = Mutex::new(Vec::new());
                        let mut r = std::thread::scope(|scope| {
                            if let Some(every) = every {
                                let (broker, stop, trickled) = (&broker, &stop, &trickled);
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
                            // Fetch request bytes, sampled on the
                            // children's clock.
                            scope.spawn(|| {
                                while !stop.load(Ordering::Relaxed) {
                                    if let Some(bytes) = broker.fetch_bytes() {
                                        samples.lock().unwrap().push((mono_us(), bytes));
                                    }
                                    std::thread::sleep(Duration::from_millis(50));
                                }
                            });
                            let r = run_child(&Job {
                                client,
                                bootstrap: &bootstrap,
                                topic,
                                partitions,
                                records: total,
                                broker_ports: &ports,
                                strace: false,
                                sessions,
                                steady_ms: Some(steady_ms),
                                ca: None,
                                produce: None,
                                group: None,
                            });
                            stop.store(true, Ordering::Relaxed);
                            r
                        });
                        broker.flush();
                        total += trickled.into_inner() as usize;
                        if let (Some(from), Some(to)) =
                            (r["steady_start_us"].as_i64(), r["steady_end_us"].as_i64())
                        {
                            let samples = samples.into_inner().unwrap();
                            // The last sample at or before each end of the
                            // window.
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
                            r["fetch_requests_per_s"] = json!(
                                broker.fetches_between(from, to) as f64
                                    / ((to - from).max(1) as f64 / 1e6)
                            );
                        }
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
            let these = &runs[first..];
            for phase in ["trickle", "idle"] {
                println!(
                    "\n{} / {case}: {partitions} partitions on 3 brokers, 2 records each, then {}; \
                     steady window {steady_ms} ms\n  {:<32} {:>12} {:>12} {:>12} {:>9} {:>9}",
                    broker.name(),
                    if phase == "idle" { "nothing" } else { "100 records/s" },
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
    }

    /// Draws the many-partitions curve: client CPU per second against the
    /// partition count (both axes logarithmic), one panel per broker, a
    /// line per client and phase (medians of the rounds). Written as SVG
    /// beside the JSON when the cases ran for two partition counts or more.
    fn many_partitions_chart(runs: &[Value], out: &std::path::Path) {
        type Series = BTreeMap<(String, String), Vec<(f64, f64)>>;
        let mut panels: BTreeMap<String, Series> = BTreeMap::new();
        let mut groups: BTreeMap<(String, String, String, i64), Vec<f64>> = BTreeMap::new();
        for r in runs
            .iter()
            .filter(|r| r["case"] == "sessions" || r["case"] == "sessions-rdmock")
        {
            let (Some(b), Some(c), Some(ph), Some(p), Some(cpu)) = (
                r["broker"].as_str(),
                r["client"].as_str(),
                r["phase"].as_str(),
                r["partitions"].as_i64(),
                r["steady_cpu_ms_per_s"].as_f64(),
            ) else {
                continue;
            };
            if c == "lazykafka-nosessions" {
                continue;
            }
            groups
                .entry((b.into(), c.into(), ph.into(), p))
                .or_default()
                .push(cpu);
        }
        for ((b, c, ph, p), v) in groups {
            if let Some(m) = median(v) {
                panels
                    .entry(b)
                    .or_default()
                    .entry((c, ph))
                    .or_default()
                    .push((p as f64, m));
            }
        }
        let counts: BTreeSet<i64> = panels
            .values()
            .flat_map(|s| s.values().flatten().map(|(p, _)| *p as i64))
            .collect();
        if counts.len() < 2 {
            return;
        }
        let all = || panels.values().flat_map(|s| s.values().flatten());
        let (x0, x1) = (
            all().map(|(p, _)| p.log10()).fold(f64::INFINITY, f64::min),
            all()
                .map(|(p, _)| p.log10())
                .fold(f64::NEG_INFINITY, f64::max),
        );
        let y0 = all()
            .map(|(_, c)| c.max(0.1).log10())
            .fold(f64::INFINITY, f64::min)
            .floor();
        let y1 = all()
            .map(|(_, c)| c.max(0.1).log10())
            .fold(f64::NEG_INFINITY, f64::max)
            .ceil();
        let (w, h, pad) = (420.0, 320.0, 55.0);
        let mut svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" \
             font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
            w * panels.len() as f64,
            h + 40.0
        );
        for (i, (broker, series)) in panels.iter().enumerate() {
            let ox = w * i as f64;
            let x = |p: f64| ox + pad + (p.log10() - x0) / (x1 - x0).max(1e-9) * (w - 2.0 * pad);
            let y = |c: f64| {
                h - pad + 20.0 - (c.max(0.1).log10() - y0) / (y1 - y0).max(1e-9) * (h - 2.0 * pad)
            };
            svg += &format!(
                "<text x=\"{}\" y=\"16\" font-size=\"13\">{broker}: client CPU ms/s by partitions</text>\n",
                ox + pad
            );
            svg += &format!(
                "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\
                 <line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{3}\" stroke=\"black\"/>\n",
                ox + pad,
                h - pad + 20.0,
                ox + w - pad,
                pad - 10.0
            );
            for p in &counts {
                let px = x(*p as f64);
                svg += &format!(
                    "<text x=\"{px}\" y=\"{}\" text-anchor=\"middle\">{p}</text>\n",
                    h - pad + 36.0
                );
            }
            let mut e = y0 as i32;
            while e <= y1 as i32 {
                let v = 10f64.powi(e);
                let py = y(v);
                svg += &format!(
                    "<text x=\"{}\" y=\"{py}\" text-anchor=\"end\">{v}</text>\
                     <line x1=\"{}\" y1=\"{py}\" x2=\"{}\" y2=\"{py}\" stroke=\"#ddd\"/>\n",
                    ox + pad - 4.0,
                    ox + pad,
                    ox + w - pad
                );
                e += 1;
            }
            for (k, ((client, phase), points)) in series.iter().enumerate() {
                let colour = if client == "lazykafka" {
                    "#1f77b4"
                } else {
                    "#d62728"
                };
                let dash = if phase == "idle" {
                    " stroke-dasharray=\"5,4\""
                } else {
                    ""
                };
                let path: Vec<String> = points
                    .iter()
                    .map(|(p, c)| format!("{:.1},{:.1}", x(*p), y(*c)))
                    .collect();
                svg += &format!(
                    "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash} points=\"{}\"/>\n",
                    path.join(" ")
                );
                svg += &format!(
                    "<text x=\"{}\" y=\"{}\" fill=\"{colour}\">{client} {phase}{}</text>\n",
                    ox + pad + 8.0,
                    pad + 4.0 + 14.0 * k as f64,
                    if phase == "idle" { " (dashed)" } else { "" }
                );
            }
        }
        svg += "</svg>\n";
        let path = out.with_file_name("bench-many-partitions.svg");
        match std::fs::write(&path, svg) {
            Ok(()) => println!("chart: {}", path.display()),
            Err(e) => eprintln!("chart: {}: {e}", path.display()),
        }
    }

    /// The physical floor of CPU per record for an uncompressed data set,
    /// measured in this process on the same bytes (batches built as the
    /// mock holds them): the bare parse + CRC-32C loop of the `records`
    /// bench (`check.crcs=true` asks for the CRC), and a loopback `read` of
    /// the set (a writer thread sends it over a 127.0.0.1 socket; the
    /// reading thread's CPU is counted, reading into one reused 1 MiB
    /// buffer). A consumer can go no lower than their sum.
    fn floors(set: &DataSet) -> Value {
        use lazykafka::records::RecordBatchBuilder;
        let records = if set.value_len >= 1024 {
            5_000
        } else {
            200_000
        };
        let repeat = 5;
        let pool = values(set.value_len);
        let per_batch = (1_000_000 / set.value_len).clamp(1, 1000);
        let mut bytes = Vec::new();
        let mut offset = 0;
        while offset < records {
            let mut b = RecordBatchBuilder::new(offset as i64);
            for i in offset..(offset + per_batch).min(records) {
                b.append(0, None, Some(&pool[i % pool.len()]), &[])
                    .expect("append");
            }
            bytes.extend_from_slice(&b.build().expect("batch"));
            offset += per_batch;
        }
        let per_record = |cpu: Duration| cpu.as_secs_f64() * 1e6 / (records * repeat) as f64;
        let cpu0 = cpu_time(libc::RUSAGE_THREAD);
        let mut sum = 0;
        for _ in 0..repeat {
            sum += floor::bare_parse_crc(std::hint::black_box(&bytes));
        }
        assert!(sum > 0);
        let crc = per_record(cpu_time(libc::RUSAGE_THREAD).saturating_sub(cpu0));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let read = std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut w = std::net::TcpStream::connect(addr).expect("connect");
                for _ in 0..repeat {
                    for chunk in bytes.chunks(1 << 20) {
                        std::io::Write::write_all(&mut w, chunk).expect("write");
                    }
                }
            });
            let (mut r, _) = listener.accept().expect("accept");
            let mut buf = vec![0u8; 1 << 20];
            let (mut left, cpu0) = (bytes.len() * repeat, cpu_time(libc::RUSAGE_THREAD));
            while left > 0 {
                let n = std::io::Read::read(&mut r, &mut buf).expect("read");
                assert!(n > 0, "early EOF");
                left = left.saturating_sub(n);
            }
            per_record(cpu_time(libc::RUSAGE_THREAD).saturating_sub(cpu0))
        });
        json!({
            "records": records * repeat,
            "bytes_per_record": bytes.len() as f64 / records as f64,
            "parse_crc_us_per_record": crc,
            "loopback_read_us_per_record": read,
            "sum_us_per_record": crc + read,
        })
    }

    /// The `consume` example, built in release mode next to this binary
    /// (`cargo build --release --example consume` is run first: the
    /// example needs the default runtime feature), or `None` with the
    /// reason.
    fn consume_example() -> Result<std::path::PathBuf, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        // target/release/deps/compare-… → target/release/examples/consume
        let release = exe
            .parent()
            .and_then(|d| d.parent())
            .ok_or("no release directory")?;
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let built = Command::new(cargo)
            .args(["build", "--release", "--quiet", "--example", "consume"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env(
                "CARGO_TARGET_DIR",
                release.parent().ok_or("no target directory")?,
            )
            .status()
            .map_err(|e| format!("cargo: {e}"))?;
        if !built.success() {
            return Err(format!("cargo build --example consume: {built}"));
        }
        let bin = release.join("examples").join("consume");
        bin.exists()
            .then_some(bin)
            .ok_or_else(|| "no examples/consume after the build".to_owned())
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
            let sampler = scope.spawn(|| {
                let mut hwm = 0u64;
                while !done.load(Ordering::Relaxed) {
                    let now = std::fs::read_to_string(&status_file).ok().and_then(|text| {
                        text.lines()
                            .find_map(|l| l.strip_prefix("VmHWM:"))
                            .and_then(|v| v.split_whitespace().next()?.parse().ok())
                    });
                    hwm = hwm.max(now.unwrap_or(0));
                    std::thread::sleep(Duration::from_millis(1));
                }
                hwm
            });
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

    /// The whole process, as a user runs it: the `consume` example and the
    /// same command line on librdkafka (this binary with
    /// `--consume-librdkafka`, see [`twin`](crate::twin)), each reading
    /// 600,000 × scale records of 100 B from 24 partitions of a 3-broker
    /// mock to the end (`--offset beginning --count N`, JSON lines to
    /// /dev/null), alternated round by round.
    fn process_case(s: &Settings, runs: &mut Vec<Value>, notes: &mut Vec<String>) {
        let example = match consume_example() {
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
        let me = std::env::current_exe().expect("current exe");
        for round in 0..s.rounds {
            for client in ["lazykafka", "librdkafka"] {
                let mut cmd = if client == "lazykafka" {
                    Command::new(&example)
                } else {
                    let mut c = Command::new(&me);
                    c.arg("--consume-librdkafka");
                    c
                };
                cmd.args(args);
                let mut r = measure_process(&mut cmd);
                assert_eq!(r["exit_ok"], true, "{client}: {r}");
                r["cpu_us_per_record"] =
                    json!(r["cpu_s"].as_f64().unwrap_or(f64::NAN) * 1e6 / set.records as f64);
                r["broker"] = json!("mock");
                r["case"] = json!("process");
                r["client"] = json!(client);
                r["round"] = json!(round);
                r["records"] = json!(set.records);
                eprintln!(
                    "  mock   process   {client:<10} round {round}: cpu {:.3} s ({:.3} user, \
                     {:.3} sys), peak RSS {:.1} MB, wall {:.2} s",
                    r["cpu_s"].as_f64().unwrap_or(f64::NAN),
                    r["user_s"].as_f64().unwrap_or(f64::NAN),
                    r["sys_s"].as_f64().unwrap_or(f64::NAN),
                    r["vmhwm_mb"].as_f64().unwrap_or(f64::NAN),
                    r["wall_s"].as_f64().unwrap_or(f64::NAN),
                );
                runs.push(r);
            }
        }
        println!(
            "\nmock / process: `consume --offset beginning --count {count}` ({} × 100 B, 24 \
             partitions), JSON lines to /dev/null\n  {:<32} {:>12} {:>12} {:>9}",
            set.records, "median", "lazykafka", "librdkafka", "ratio"
        );
        for (metric, label) in [
            ("cpu_s", "CPU time, s"),
            ("user_s", "user CPU, s"),
            ("sys_s", "system CPU, s"),
            ("cpu_us_per_record", "CPU µs/record"),
            ("vmhwm_mb", "peak RSS, MB"),
            ("wall_s", "wall time, s"),
        ] {
            let of = |client: &str| {
                median_of(
                    runs.iter()
                        .filter(|r| r["case"] == "process" && r["client"] == client),
                    metric,
                )
            };
            let (a, b) = (of("lazykafka"), of("librdkafka"));
            println!(
                "  {label:<32} {:>12} {:>12} {:>9}",
                cell(a, 3),
                cell(b, 3),
                ratio_cell(a, b)
            );
        }
    }

    /// The 100 B data set on a second 3-broker mock with TLS listeners (a
    /// CA and a leaf for `localhost` and `127.0.0.1`, made now); both
    /// clients get the CA file and `security.protocol=SSL`.
    fn tls_case(s: &Settings, runs: &mut Vec<Value>) {
        use common::tls::{Pki, TempDir};
        let pki = Pki::new("lazykafka bench CA");
        let leaf = pki.leaf(&["localhost", "127.0.0.1"]);
        let dir = TempDir::new("bench-tls");
        let ca = dir.write("ca.pem", &pki.ca_pem());
        let ca = ca.to_str().expect("a UTF-8 temp path");
        let mut set = data_sets(s.scale)
            .into_iter()
            .find(|d| d.name == "100B")
            .expect("the 100B data set");
        set.name = "tls";
        set.topic = "b100tls";
        let mock = Mock::tls(3, &leaf.cert_pem, &leaf.key_pem);
        let leaders: Vec<i32> = (0..set.partitions).map(|p| p % 3 + 1).collect();
        mock.cluster
            .create_topic_with_leaders(set.topic, &leaders)
            .expect("create topic");
        let t = Instant::now();
        mock.fill(&set);
        eprintln!(
            "mock (TLS): filled {} × {} B ({}) in {:.1} s",
            set.records,
            set.value_len,
            set.compression,
            t.elapsed().as_secs_f64()
        );
        throughput(
            s,
            "mock",
            &mock.bootstrap(),
            &mock.ports(),
            &[set],
            Some(&mock),
            Some(ca),
            runs,
        );
    }

    /// Each client's median CPU per record with TLS over its median without
    /// (the `tls` and `100B` cases of the same run), printed; `null` when
    /// either case did not run.
    fn tls_vs_plain(summary: &[Value]) -> Value {
        let cpu = |case: &str, client: &str| {
            summary
                .iter()
                .find(|r| {
                    r["broker"] == "mock" && r["case"] == case && r["metric"] == "cpu_us_per_record"
                })
                .and_then(|r| r[client].as_f64())
        };
        let mut out = serde_json::Map::new();
        for client in ["lazykafka", "librdkafka"] {
            if let (Some(tls), Some(plain)) = (cpu("tls", client), cpu("100B", client)) {
                println!(
                    "\nTLS / plaintext CPU µs/record, {client}: {tls:.3} / {plain:.3} = {:.2}",
                    tls / plain
                );
                out.insert(
                    client.into(),
                    json!({"tls_us": tls, "plain_us": plain, "ratio": tls / plain}),
                );
            }
        }
        if out.is_empty() {
            Value::Null
        } else {
            Value::Object(out)
        }
    }

    /// The producer cases: lazykafka's `Producer` and librdkafka's
    /// `BaseProducer` write the same records to the same mock, alternated
    /// A B A B, idempotent with `acks=all` and the Java producer's
    /// defaults on both (see [`PRODUCE_LINGER_MS`] and its neighbours).
    mod producing {
        use super::*;
        use lazykafka::mock::MockEventKind;
        use lazykafka::protocol::ApiKey;

        /// The metrics summarised for a producer case, with how each is
        /// shown.
        pub(super) const METRICS: &[(&str, &str)] = &[
            ("rec_per_s", "records/s (start to last report)"),
            ("mb_per_s", "MB/s of values"),
            ("rec_per_s_steady", "records/s (first to last report)"),
            ("first_delivery_ms", "first delivery report, ms"),
            ("cpu_s", "CPU time, s"),
            ("cpu_us_per_record", "CPU µs/record"),
            ("vmhwm_mb", "peak RSS, MB"),
            ("threads", "threads"),
            ("held", "sockets held at the end"),
            ("seen", "sockets seen (census)"),
            ("connects", "connection attempts (own count)"),
            ("connections_mock", "connections accepted (mock)"),
            ("brokers_connected_mock", "brokers connected to (mock)"),
            ("produce_requests_mock", "Produce requests (mock)"),
            ("records_per_request", "records per Produce request"),
            ("written_mock", "records written (mock)"),
            ("errors", "failed sends and deliveries"),
            ("mock_cpu_s", "mock brokers' CPU, s"),
            ("connect_calls", "connect() calls (strace)"),
            ("connect_ports", "addresses connected to (strace)"),
        ];

        /// One producer data set.
        struct ProduceSet {
            name: &'static str,
            topic: &'static str,
            records: usize,
            partitions: i32,
            produce: Produce,
        }

        fn sets(scale: f64) -> Vec<ProduceSet> {
            let n = |base: f64| ((base * scale).round() as usize).max(8);
            let set = |name, topic, records, value_len, compression, keyed| ProduceSet {
                name,
                topic,
                records,
                partitions: 8,
                produce: Produce {
                    value_len,
                    compression,
                    keyed,
                },
            };
            vec![
                set("produce-100B", "p100", n(1_000_000.0), 100, "none", false),
                set(
                    "produce-10KiB",
                    "p10k",
                    n(50_000.0),
                    10 * 1024,
                    "none",
                    false,
                ),
                set(
                    "produce-100B-keyed",
                    "p100keyed",
                    n(1_000_000.0),
                    100,
                    "none",
                    true,
                ),
                set(
                    "produce-100B-lz4",
                    "p100lz4",
                    n(1_000_000.0),
                    100,
                    "lz4",
                    false,
                ),
            ]
        }

        /// The settings both producers got, for the report.
        fn settings(sets: &[ProduceSet]) -> Value {
            json!({
                "acks": PRODUCE_ACKS,
                "enable.idempotence": PRODUCE_IDEMPOTENCE,
                "linger.ms": PRODUCE_LINGER_MS,
                "batch.size": PRODUCE_BATCH_SIZE,
                "max.in.flight.requests.per.connection": PRODUCE_MAX_IN_FLIGHT,
                "librdkafka": {
                    "queue.buffering.max.kbytes": PRODUCE_BUFFER_KBYTES,
                    "queue.buffering.max.messages": "0",
                    "partitioner": "murmur2_random",
                },
                "data_sets": sets.iter().map(|d| json!({
                    "name": d.name, "topic": d.topic, "records": d.records,
                    "value_bytes": d.produce.value_len, "compression": d.produce.compression,
                    "keyed": d.produce.keyed, "partitions": d.partitions,
                })).collect::<Vec<_>>(),
            })
        }

        /// The records a topic's partitions hold, by their high watermarks.
        fn written(mock: &Mock, topic: &str, partitions: i32) -> i64 {
            (0..partitions)
                .filter_map(|p| mock.cluster.high_watermark(topic, p))
                .sum()
        }

        /// Drops every record of the topic, so that the mock's memory does
        /// not grow from run to run.
        fn forget(mock: &Mock, topic: &str, partitions: i32) {
            for p in 0..partitions {
                if let Some(end) = mock.cluster.high_watermark(topic, p) {
                    let _ = mock.cluster.delete_records_before(topic, p, end);
                }
            }
        }

        /// Runs one producer child and adds what the mock saw of it:
        /// connections accepted, the brokers they went to, Produce
        /// requests, records written.
        fn run_one(mock: &Mock, job: &Job<'_>) -> Value {
            mock.clear_requests();
            let before = written(mock, job.topic, job.partitions);
            let mut r = run_child(job);
            let after = written(mock, job.topic, job.partitions);
            let events = mock.cluster.events();
            let connected: Vec<i32> = events
                .iter()
                .filter(|e| matches!(e.kind, MockEventKind::Connected { .. }))
                .map(|e| e.broker)
                .collect();
            let produce_requests = mock
                .cluster
                .requests()
                .iter()
                .filter(|q| q.api == Some(ApiKey::Produce))
                .count();
            r["connections_mock"] = json!(connected.len());
            r["brokers_connected_mock"] = json!(connected.iter().collect::<BTreeSet<_>>().len());
            r["brokers_connected_ids"] = json!(connected.iter().collect::<BTreeSet<_>>());
            r["produce_requests_mock"] = json!(produce_requests);
            r["written_mock"] = json!(after - before);
            if produce_requests > 0 {
                r["records_per_request"] = json!((after - before) as f64 / produce_requests as f64);
            }
            r["mock_cpu_s"] = r["parent_cpu_s"].clone();
            forget(mock, job.topic, job.partitions);
            r
        }

        fn brief(r: &Value) -> String {
            let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
            format!(
                "  {:<6} {:<18} {:<10} round {}: {:>8.0} rec/s {:>6.1} MB/s, first report \
                 {:>6.1} ms, cpu {:.2} s, hwm {:.0} MB, {} threads, {} sockets held, {} \
                 connections to {} brokers, {} Produce requests, {} written, {} errors{}",
                r["broker"].as_str().unwrap_or(""),
                r["case"].as_str().unwrap_or(""),
                r["client"].as_str().unwrap_or(""),
                r["round"],
                f("rec_per_s"),
                f("mb_per_s"),
                f("first_delivery_ms"),
                f("cpu_s"),
                f("vmhwm_mb"),
                r["threads"],
                r["held"],
                r["connections_mock"],
                r["brokers_connected_mock"],
                r["produce_requests_mock"],
                r["written_mock"],
                r["errors"],
                if r["timed_out"].as_bool() == Some(true) {
                    " TIMED OUT"
                } else {
                    ""
                }
            )
        }

        /// `set`'s rounds on `mock`, then one run per client under strace.
        fn rounds(
            s: &Settings,
            mock: &Mock,
            bootstrap: &str,
            ports: &[u16],
            set: &ProduceSet,
            runs: &mut Vec<Value>,
        ) {
            let job = |client, strace| Job {
                client,
                bootstrap,
                topic: set.topic,
                partitions: set.partitions,
                records: set.records,
                broker_ports: ports,
                strace,
                sessions: None,
                steady_ms: None,
                ca: None,
                produce: Some(set.produce),
                group: None,
            };
            for round in 0..s.rounds {
                for client in ["lazykafka", "librdkafka"] {
                    let mut r = run_one(mock, &job(client, false));
                    r["broker"] = json!("mock");
                    r["case"] = json!(set.name);
                    r["client"] = json!(client);
                    r["round"] = json!(round);
                    r["expected_records"] = json!(set.records);
                    eprintln!("{}", brief(&r));
                    runs.push(r);
                }
            }
            census_runs("mock", set.name, ports, runs, |client| job(client, true));
            forget(mock, set.topic, set.partitions);
        }

        /// Runs the producer cases asked for; returns their settings for
        /// the report, or `None` when none ran.
        pub(super) fn run(s: &Settings, runs: &mut Vec<Value>) -> Option<Value> {
            let sets: Vec<ProduceSet> = sets(s.scale)
                .into_iter()
                .filter(|d| s.wants(d.name))
                .collect();
            let scale = s.wants("produce-scale");
            if sets.is_empty() && !scale {
                return None;
            }
            eprintln!(
                "producers: acks {PRODUCE_ACKS}, enable.idempotence {PRODUCE_IDEMPOTENCE}, \
                 linger.ms {PRODUCE_LINGER_MS}, batch.size {PRODUCE_BATCH_SIZE}, max in flight \
                 {PRODUCE_MAX_IN_FLIGHT}; librdkafka also queue.buffering.max.kbytes \
                 {PRODUCE_BUFFER_KBYTES}, queue.buffering.max.messages 0, partitioner \
                 murmur2_random"
            );
            if !sets.is_empty() {
                let mock = Mock::new(3);
                for set in &sets {
                    let leaders: Vec<i32> = (0..set.partitions).map(|p| p % 3 + 1).collect();
                    mock.cluster
                        .create_topic_with_leaders(set.topic, &leaders)
                        .expect("create topic");
                }
                let (bootstrap, ports) = (mock.bootstrap(), mock.ports());
                for set in &sets {
                    rounds(s, &mock, &bootstrap, &ports, set, runs);
                }
            }
            let mut all = sets;
            if scale {
                all.push(scale_case(s, runs));
            }
            Some(settings(&all))
        }

        /// 1000 bootstrap addresses (992 closed loopback ports and the 8
        /// brokers of a mock, shuffled with the consumer scale case's
        /// seed); 1000 records of 100 B to a topic of 6 partitions led by
        /// brokers 1, 2, 4, 5, 7 and 8 (3 and 6 lead nothing).
        fn scale_case(s: &Settings, runs: &mut Vec<Value>) -> ProduceSet {
            let mock = Mock::new(8);
            let set = ProduceSet {
                name: "produce-scale",
                topic: "pscale",
                records: 1000,
                partitions: 6,
                produce: Produce {
                    value_len: 100,
                    compression: "none",
                    keyed: false,
                },
            };
            mock.cluster
                .create_topic_with_leaders(set.topic, &[1, 2, 4, 5, 7, 8])
                .expect("scale topic");
            let (bootstrap, ports) = scale_bootstrap(&mock);
            rounds(s, &mock, &bootstrap, &ports, &set, runs);
            set
        }
    }

    fn median(mut v: Vec<f64>) -> Option<f64> {
        v.retain(|x| x.is_finite());
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let n = v.len();
        Some(if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        })
    }

    /// The median of `metric` over `runs`.
    fn median_of<'a>(runs: impl IntoIterator<Item = &'a Value>, metric: &str) -> Option<f64> {
        median(
            runs.into_iter()
                .filter_map(|r| r[metric].as_f64())
                .collect(),
        )
    }

    /// A table cell: `v` with `decimals` places, or "-".
    fn cell(v: Option<f64>, decimals: usize) -> String {
        v.map_or("-".into(), |x| format!("{x:.decimals$}"))
    }

    /// `x / y` as a table cell (3 places), or "-".
    fn ratio_cell(x: Option<f64>, y: Option<f64>) -> String {
        match (x, y) {
            (Some(x), Some(y)) if y != 0.0 => format!("{:.3}", x / y),
            _ => "-".into(),
        }
    }

    /// A run's number, NaN when it has none (for the lines printed per
    /// run).
    fn num(r: &Value, key: &str) -> f64 {
        r[key].as_f64().unwrap_or(f64::NAN)
    }

    /// The metrics summarised, with how each is shown.
    const METRICS: &[(&str, &str)] = &[
        ("rec_per_s", "records/s (from first poll)"),
        ("mb_per_s", "MB/s (from first poll)"),
        ("rec_per_s_steady", "records/s (from first record)"),
        ("mb_per_s_steady", "MB/s (from first record)"),
        ("ttfr_ms", "first record, ms"),
        ("requests_before_first_mock", "requests before it (mock)"),
        (
            "requests_before_first_own",
            "requests before it (own count)",
        ),
        ("connects", "connection attempts (own count)"),
        ("connect_calls", "connect() calls (strace)"),
        ("connect_ports", "addresses connected to (strace)"),
        ("seen", "sockets seen (census)"),
        ("held", "sockets held consuming"),
        ("vmhwm_mb", "peak RSS, MB"),
        ("cpu_s", "CPU time, s"),
        ("cpu_us_per_record", "CPU µs/record"),
        ("threads", "threads"),
        ("idle_cpu_ms_per_s", "CPU ms/s polling with no data"),
    ];

    fn summarise(runs: &[Value]) -> Vec<Value> {
        let mut keys: Vec<(String, String)> = Vec::new();
        for r in runs {
            let k = (
                r["broker"].as_str().unwrap_or("").to_owned(),
                r["case"].as_str().unwrap_or("").to_owned(),
            );
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let mut out = Vec::new();
        for (broker, case) in keys {
            let metrics = if case.starts_with("produce") {
                producing::METRICS
            } else {
                METRICS
            };
            for (metric, label) in metrics {
                let of = |client: &str| {
                    median(
                        runs.iter()
                            .filter(|r| {
                                r["broker"] == broker.as_str()
                                    && r["case"] == case.as_str()
                                    && r["client"] == client
                            })
                            .filter_map(|r| r[*metric].as_f64())
                            .collect(),
                    )
                };
                let (a, b) = (of("lazykafka"), of("librdkafka"));
                if a.is_none() && b.is_none() {
                    continue;
                }
                let ratio = match (a, b) {
                    (Some(a), Some(b)) if b != 0.0 => Some(a / b),
                    _ => None,
                };
                out.push(json!({
                    "broker": broker, "case": case, "metric": metric, "label": label,
                    "lazykafka": a, "librdkafka": b, "ratio": ratio,
                }));
            }
        }
        out
    }

    fn print_table(summary: &[Value]) {
        let mut last = (String::new(), String::new());
        for row in summary {
            let key = (
                row["broker"].as_str().unwrap().to_owned(),
                row["case"].as_str().unwrap().to_owned(),
            );
            if key != last {
                println!(
                    "\n{} / {}\n  {:<32} {:>14} {:>14} {:>8}",
                    key.0, key.1, "median", "lazykafka", "librdkafka", "ratio"
                );
                last = key;
            }
            let f = |v: &Value| match v.as_f64() {
                Some(x) if x.abs() >= 1000.0 => format!("{x:.0}"),
                Some(x) => format!("{x:.2}"),
                None => "-".into(),
            };
            println!(
                "  {:<32} {:>14} {:>14} {:>8}",
                row["label"].as_str().unwrap(),
                f(&row["lazykafka"]),
                f(&row["librdkafka"]),
                row["ratio"]
                    .as_f64()
                    .map_or("-".into(), |r| format!("{r:.2}"))
            );
        }
    }

    /// Creates `topic` with `partitions` partitions on tansu (its CLI).
    fn tansu_topic(bin: &str, addr: &str, topic: &str, partitions: i32) {
        let status = Command::new(bin)
            .args(["topic", "create", "--broker", &format!("tcp://{addr}")])
            .args(["--partitions", &partitions.to_string(), topic])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("tansu topic create");
        assert!(status.success(), "tansu topic create {topic}: {status}");
    }

    pub fn run(args: &[String]) {
        let s = settings(args);
        let started = Instant::now();
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
        let mut runs = Vec::new();
        let mut notes: Vec<String> = Vec::new();

        // lazykafka's mock cluster, in this process, filled from code.
        let sets = data_sets(s.scale);
        if sets.iter().any(|d| s.wants(d.name)) {
            let mock = Mock::new(3);
            for set in &sets {
                if !s.wants(set.name) {
                    continue;
                }
                let leaders: Vec<i32> = (0..set.partitions).map(|p| p % 3 + 1).collect();
                mock.cluster
                    .create_topic_with_leaders(set.topic, &leaders)
                    .expect("create topic");
                let t = Instant::now();
                mock.fill(set);
                eprintln!(
                    "mock: filled {} × {} B ({}) in {:.1} s",
                    set.records,
                    set.value_len,
                    set.compression,
                    t.elapsed().as_secs_f64()
                );
            }
            let bootstrap = mock.bootstrap();
            throughput(
                &s,
                "mock",
                &bootstrap,
                &mock.ports(),
                &sets,
                Some(&mock),
                None,
                &mut runs,
            );
        }

        // tansu, when given.
        let tsets = data_sets(s.tansu_scale);
        if tsets.iter().any(|d| s.wants(d.name)) {
            match std::env::var("LAZYKAFKA_TANSU_BIN") {
                Ok(bin) if !bin.is_empty() => {
                    let tansu = Tansu::start("compare").expect("tansu");
                    for set in &tsets {
                        if !s.wants(set.name) {
                            continue;
                        }
                        tansu_topic(&bin, &tansu.addr, set.topic, set.partitions);
                        let t = Instant::now();
                        produce(&tansu.addr, set);
                        eprintln!(
                            "tansu: produced {} × {} B ({}) in {:.1} s",
                            set.records,
                            set.value_len,
                            set.compression,
                            t.elapsed().as_secs_f64()
                        );
                    }
                    throughput(
                        &s,
                        "tansu",
                        &tansu.addr,
                        &[tansu.port],
                        &tsets,
                        None,
                        None,
                        &mut runs,
                    );
                }
                _ => {
                    let note = "tansu skipped: LAZYKAFKA_TANSU_BIN is not set".to_owned();
                    println!("{note}");
                    notes.push(note);
                }
            }
        }

        if s.wants("scale") {
            scale_case(&s, &mut runs);
        }
        if s.wants("sessions") {
            sessions_case(&s, &mut runs, true);
        }
        if s.wants("sessions-rdmock") {
            sessions_case(&s, &mut runs, false);
        }
        if s.wants("rebalance") {
            rebalance_case(&s, &mut runs);
        }
        many_partitions_chart(&runs, &s.out);
        if s.wants("tls") {
            tls_case(&s, &mut runs);
        }
        if s.wants("process") {
            process_case(&s, &mut runs, &mut notes);
        }
        let produced = producing::run(&s, &mut runs);

        let summary = summarise(&runs);
        print_table(&summary);
        let tls_vs_plain = tls_vs_plain(&summary);
        let mut floor_report = serde_json::Map::new();
        for set in sets
            .iter()
            .filter(|d| d.compression == "none" && s.wants(d.name))
        {
            let f = floors(set);
            let of = |client: &str| {
                median(
                    runs.iter()
                        .filter(|r| r["broker"] == "mock" && r["case"] == set.name)
                        .filter(|r| r["client"] == client)
                        .filter_map(|r| r["cpu_us_per_record"].as_f64())
                        .collect(),
                )
            };
            let floor = f["sum_us_per_record"].as_f64().unwrap_or(f64::NAN);
            let vs =
                |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3} ({:.2}x)", v / floor));
            println!(
                "\nfloor / {}: parse + CRC-32C {:.3} µs/record, loopback read {:.3} µs/record, \
                 sum {floor:.3}; CPU µs/record (x the floor): lazykafka {}, librdkafka {}",
                set.name,
                f["parse_crc_us_per_record"].as_f64().unwrap_or(f64::NAN),
                f["loopback_read_us_per_record"]
                    .as_f64()
                    .unwrap_or(f64::NAN),
                vs(of("lazykafka")),
                vs(of("librdkafka")),
            );
            floor_report.insert(set.name.to_owned(), f);
        }
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
        if let Some(dir) = s.out.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let mut f = std::fs::File::create(&s.out).expect("write the results");
        writeln!(f, "{}", serde_json::to_string_pretty(&report).unwrap()).unwrap();
        println!(
            "\nresults: {} ({:.0} s)",
            s.out.display(),
            started.elapsed().as_secs_f64()
        );
    }
}

/// `--consume-librdkafka`: the `consume` example's command line on
/// librdkafka, for the `process` case. It takes the flags that case uses
/// (`--bootstrap`, `--topic`, `--offset beginning|end`, `--count N`) and
/// does what the example does with them: looks up the topic's partitions,
/// assigns every one, and prints each record as the same JSON line through
/// a buffer flushed after each batch (the records librdkafka hands over
/// without waiting, up to 500), until `N` records; then closes.
mod twin {
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    use rdkafka::message::Message as _;
    use rdkafka::{Offset, TopicPartitionList};
    use std::io::{BufWriter, Write};
    use std::time::Duration;

    use super::record_line::RecordLine;

    /// Returns the exit code.
    pub fn run(args: &[String]) -> i32 {
        let flag = |name: &str| {
            args.iter()
                .position(|a| a == name)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        let (Some(bootstrap), Some(topic)) = (flag("--bootstrap"), flag("--topic")) else {
            eprintln!("error: --bootstrap and --topic are required");
            return 2;
        };
        let count: Option<usize> = flag("--count").and_then(|n| n.parse().ok());
        let offset = match flag("--offset").as_deref() {
            Some("beginning") => Offset::Beginning,
            Some("end") | None => Offset::End,
            Some(other) => {
                eprintln!("error: --offset {other} is not supported here");
                return 2;
            }
        };
        let consumer: BaseConsumer = match ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            // librdkafka's consumer needs a group for assign(); nothing is
            // committed.
            .set("group.id", "consume-librdkafka")
            .set("enable.auto.commit", "false")
            .create()
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        };
        let metadata = match consumer.fetch_metadata(Some(&topic), Duration::from_secs(10)) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        };
        let mut tpl = TopicPartitionList::new();
        for t in metadata.topics() {
            for p in t.partitions() {
                let _ = tpl.add_partition_offset(t.name(), p.id(), offset);
            }
        }
        if let Err(e) = consumer.assign(&tpl) {
            eprintln!("error: {e}");
            return 1;
        }
        let stdout = std::io::stdout();
        let mut printed = 0usize;
        while count.is_none_or(|n| printed < n) {
            let mut wait = Duration::from_millis(500);
            let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
            for _ in 0..500 {
                if count.is_some_and(|n| printed >= n) {
                    break;
                }
                match consumer.poll(wait) {
                    Some(Ok(m)) => {
                        let line = RecordLine {
                            topic: m.topic(),
                            partition: m.partition(),
                            offset: m.offset(),
                            timestamp: m.timestamp().to_millis().unwrap_or(-1),
                            key: m.key().map(String::from_utf8_lossy),
                            value: m.payload().map(String::from_utf8_lossy),
                        };
                        if serde_json::to_writer(&mut out, &line).is_err()
                            || out.write_all(b"\n").is_err()
                        {
                            return 1;
                        }
                        printed += 1;
                        // The rest of the batch: what is there already.
                        wait = Duration::ZERO;
                    }
                    Some(Err(e)) => eprintln!("error: {e}"),
                    None => break,
                }
            }
            if out.flush().is_err() {
                return 1;
            }
        }
        drop(consumer);
        0
    }
}

mod child {
    use super::*;

    /// The inodes of the sockets this process holds (`/proc/self/fd`).
    fn socket_inodes() -> Vec<u64> {
        let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
            return Vec::new();
        };
        dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter_map(|t| {
                t.to_str()?
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .parse()
                    .ok()
            })
            .collect()
    }

    /// (local port, remote port) of every TCP socket on the machine, by
    /// inode (`/proc/net/tcp{,6}`).
    fn tcp_sockets() -> BTreeMap<u64, (u16, u16)> {
        let mut out = BTreeMap::new();
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let Ok(text) = std::fs::read_to_string(table) else {
                continue;
            };
            for line in text.lines().skip(1) {
                let f: Vec<&str> = line.split_whitespace().collect();
                let port = |field: &str| {
                    u16::from_str_radix(field.rsplit(':').next().unwrap_or(""), 16).unwrap_or(0)
                };
                if let (Some(l), Some(r), Some(Ok(inode))) =
                    (f.get(1), f.get(2), f.get(9).map(|i| i.parse()))
                {
                    out.insert(inode, (port(l), port(r)));
                }
            }
        }
        out
    }

    /// Every (local port, remote port) of a TCP socket this process held to
    /// a broker port, and the sampler's own CPU time (to subtract). Every
    /// 2 ms it lists this process's socket inodes, which is cheap, and reads
    /// the machine's TCP tables only when an inode it cannot place yet shows
    /// up (walking those tables is costly in the kernel when the machine
    /// holds many sockets, and would take CPU from the client measured).
    struct Census {
        stop: Arc<AtomicBool>,
        /// The sampler thread's CPU time so far, in microseconds.
        cpu_us: Arc<AtomicU64>,
        handle: std::thread::JoinHandle<BTreeSet<(u16, u16)>>,
    }

    impl Census {
        fn start(ports: Vec<u16>) -> Census {
            let stop = Arc::new(AtomicBool::new(false));
            let flag = stop.clone();
            let cpu_us = Arc::new(AtomicU64::new(0));
            let cpu = cpu_us.clone();
            // Named, so that the per-thread idle figures leave it out.
            let handle = spawn_named(CENSUS_THREAD, move || {
                let mut seen = BTreeSet::new();
                // Inodes placed (connected somewhere, or given up on), and
                // how often an unplaced one was looked for.
                let mut placed: BTreeSet<u64> = BTreeSet::new();
                let mut tries: BTreeMap<u64, u32> = BTreeMap::new();
                while !flag.load(Ordering::Relaxed) {
                    let new: Vec<u64> = socket_inodes()
                        .into_iter()
                        .filter(|i| !placed.contains(i))
                        .collect();
                    if !new.is_empty() {
                        let table = tcp_sockets();
                        for inode in new {
                            match table.get(&inode) {
                                Some(&(local, remote)) if remote != 0 => {
                                    if ports.contains(&remote) {
                                        seen.insert((local, remote));
                                    }
                                    placed.insert(inode);
                                }
                                // Not connected yet (or not TCP): look
                                // again, for up to about 100 ms.
                                _ => {
                                    let n = tries.entry(inode).or_default();
                                    *n += 1;
                                    if *n > 50 {
                                        placed.insert(inode);
                                    }
                                }
                            }
                        }
                    }
                    cpu.store(
                        cpu_time(libc::RUSAGE_THREAD).as_micros() as u64,
                        Ordering::Relaxed,
                    );
                    std::thread::sleep(Duration::from_millis(2));
                }
                seen
            });
            Census {
                stop,
                cpu_us,
                handle,
            }
        }

        /// The process's CPU time less the sampler's, and the sockets held
        /// to the brokers now (ESTABLISHED).
        fn snapshot(&self, ports: &[u16], t: &mut Tally) {
            let now = client_sockets(ports);
            t.held = now.iter().filter(|s| s.state == ESTABLISHED).count();
            t.held_sockets = now.iter().map(|s| (s.local_port, s.remote_port)).collect();
            t.threads = status_field("Threads");
            t.cpu = self.process_cpu();
        }

        /// The process's CPU time less the sampler's.
        fn process_cpu(&self) -> Duration {
            let sampler = Duration::from_micros(self.cpu_us.load(Ordering::Relaxed));
            cpu_time(libc::RUSAGE_SELF).saturating_sub(sampler)
        }

        fn finish(self) -> (BTreeSet<(u16, u16)>, Duration) {
            self.stop.store(true, Ordering::Relaxed);
            let seen = self.handle.join().unwrap();
            (
                seen,
                Duration::from_micros(self.cpu_us.load(Ordering::Relaxed)),
            )
        }
    }

    /// What both clients' loops record.
    #[derive(Default)]
    struct Tally {
        records: usize,
        bytes: u64,
        errors: u64,
        first_poll_us: i64,
        first_record_us: Option<i64>,
        last_record_us: i64,
        timed_out: bool,
        /// CPU time (less the census thread's) and sockets held, right after
        /// the last record.
        cpu: Duration,
        held: usize,
        held_sockets: Vec<(u16, u16)>,
        threads: u64,
        /// CPU time per second of wall time spent polling after the last
        /// record, with nothing left to read.
        idle_cpu_per_s: Option<f64>,
        /// The same, per thread name (threads of one name summed), from
        /// each thread's own run time (`/proc/self/task/*/schedstat`),
        /// the census thread left out.
        idle_threads: BTreeMap<String, f64>,
        /// How many times per second each thread (by name) was put on a
        /// CPU in that window (the third field of `schedstat`): its
        /// wake-ups, about.
        idle_thread_runs: BTreeMap<String, f64>,
    }

    impl Tally {
        fn record(&mut self, value_len: usize) {
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

    /// The name of the census thread.
    const CENSUS_THREAD: &str = "census";

    /// A thread named `name`.
    fn spawn_named<T: Send + 'static>(
        name: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(f)
            .expect("spawn a thread")
    }

    /// Each thread's run time so far, by thread id and name, from
    /// `/proc/self/task/*/schedstat` (nanoseconds on a CPU).
    fn thread_run_times() -> BTreeMap<(u32, String), (u64, u64)> {
        let mut out = BTreeMap::new();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return out;
        };
        for task in tasks.flatten() {
            let Ok(tid) = task.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().ok());
            let (Some(Some(ns)), Some(_), Some(Some(slices))) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            out.insert((tid, name.trim_end().to_owned()), (ns, slices));
        }
        out
    }

    /// CPU seconds per wall second spent in `poll_once` calls for
    /// [`idle_window`], for the whole process less the census thread and
    /// per thread name.
    fn idle_cpu(census: &Census, tally: &mut Tally, poll_for: impl FnOnce(Duration)) {
        let threads0 = thread_run_times();
        let (cpu0, t0, window) = (census.process_cpu(), Instant::now(), idle_window());
        poll_for(window);
        let wall = t0.elapsed().as_secs_f64();
        let threads1 = thread_run_times();
        tally.idle_cpu_per_s =
            Some((census.process_cpu().saturating_sub(cpu0)).as_secs_f64() / wall);
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
    fn steady(
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

    /// The ports of a bootstrap list.
    fn ports_of(bootstrap: &str) -> Vec<u16> {
        bootstrap
            .split(',')
            .filter_map(|a| a.rsplit(':').next()?.parse().ok())
            .collect()
    }

    fn env(name: &str) -> String {
        std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
    }

    pub fn run() {
        if std::env::var_os("LKB_PRODUCE").is_some() {
            producing::run();
        }
        let client = env("LKB_CLIENT");
        let bootstrap = env("LKB_BOOTSTRAP");
        let topic = env("LKB_TOPIC");
        let partitions: i32 = env("LKB_PARTITIONS").parse().unwrap();
        let records: usize = env("LKB_RECORDS").parse().unwrap();
        let ports: Vec<u16> = env("LKB_PORTS")
            .split(',')
            .filter_map(|p| p.parse().ok())
            .collect();
        let census = Census::start(ports.clone());
        let mut extra = serde_json::Map::new();
        let tally = match client.as_str() {
            "lazykafka" => lazy(&bootstrap, &topic, partitions, records, &census, &mut extra),
            "librdkafka" => rd(&bootstrap, &topic, partitions, records, &census, &mut extra),
            other => panic!("unknown client {other}"),
        };
        let (mut seen, census_cpu) = census.finish();
        seen.extend(tally.held_sockets.iter().copied());
        let (cpu, held) = (tally.cpu, tally.held);
        let steady_s = tally
            .first_record_us
            .map_or(f64::NAN, |f| (tally.last_record_us - f) as f64 / 1e6);
        let first = tally.first_record_us;
        let elapsed_s = (tally.last_record_us - tally.first_poll_us) as f64 / 1e6;
        let mut out = json!({
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
            "seen": seen.len(),
            "held": held,
        });
        for (k, v) in extra {
            out[k] = v;
        }
        println!("{out}");
        let _ = std::io::stdout().flush();
        // No orderly close: the measurement is over, and closing is not
        // part of it.
        std::process::exit(0);
    }

    fn lazy(
        bootstrap: &str,
        topic: &str,
        partitions: i32,
        records: usize,
        census: &Census,
        extra: &mut serde_json::Map<String, Value>,
    ) -> Tally {
        use lazykafka::{Consumer, ConsumerConfig, TopicPartition};
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
        // The `rebalance` case: a group member (subscribe) instead of an
        // assignment.
        let group = std::env::var("LKB_GROUP").unwrap_or_default();
        if !group.is_empty() {
            config = config.set("group.id", &group).expect("group.id");
        }
        let config = config.build().expect("lazykafka config");
        let consumer = Consumer::new(config).expect("lazykafka consumer");
        if group.is_empty() {
            consumer
                .assign((0..partitions).map(|p| TopicPartition::new(topic, p)))
                .expect("assign");
        } else {
            consumer.subscribe([topic]).expect("subscribe");
        }
        let mut t = Tally::default();
        let deadline = Instant::now() + CHILD_TIMEOUT;
        let mut requests_before_first = None;
        // The consumer's runtime: async-std by default; built with
        // `--no-default-features --features runtime-tokio,...`, a tokio
        // runtime: current-thread (the consumer's task runs on the thread
        // that polls, so both polls below must use the same runtime), or
        // multi-thread with `LAZYKAFKA_BENCH_TOKIO=multi` (what
        // `#[tokio::main]` builds: one worker per core).
        #[cfg(feature = "runtime-tokio")]
        let runtime = if tokio_multi_thread() {
            tokio::runtime::Builder::new_multi_thread()
        } else {
            tokio::runtime::Builder::new_current_thread()
        }
        .enable_all()
        .build()
        .expect("tokio runtime");
        macro_rules! block_on {
            ($future:expr) => {{
                #[cfg(feature = "runtime-tokio")]
                let output = runtime.block_on($future);
                #[cfg(not(feature = "runtime-tokio"))]
                let output = async_std::task::block_on($future);
                output
            }};
        }
        block_on!(async {
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
        census.snapshot(&ports_of(bootstrap), &mut t);
        if !t.timed_out {
            // Both windows poll in a loop inside one `block_on`, as an
            // application's task does (a `block_on` per call would add the
            // runtime's own hand-offs to every poll).
            steady(
                census,
                |span| {
                    block_on!(async {
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
            idle_cpu(census, &mut t, |span| {
                block_on!(async {
                    let t0 = Instant::now();
                    while t0.elapsed() < span {
                        let _ = consumer.poll(Duration::from_millis(100)).await;
                    }
                })
            });
        }
        let counters = consumer.broker_counters();
        extra.insert(
            "connects".into(),
            json!(counters.values().map(|c| c.connects).sum::<u64>()),
        );
        extra.insert(
            "connect_failures".into(),
            json!(counters.values().map(|c| c.connect_failures).sum::<u64>()),
        );
        extra.insert(
            "requests_before_first_own".into(),
            json!(requests_before_first),
        );
        extra.insert(
            "runtime".into(),
            json!(if !cfg!(feature = "runtime-tokio") {
                "async-std"
            } else if tokio_multi_thread() {
                "tokio (multi-thread)"
            } else {
                "tokio (current thread)"
            }),
        );
        extra.insert(
            "bytes_in_own".into(),
            json!(counters.values().map(|c| c.bytes_in).sum::<u64>()),
        );
        extra.insert(
            "requests_total_own".into(),
            json!(counters.values().map(|c| c.requests).sum::<u64>()),
        );
        t
    }

    /// Collects librdkafka's statistics: the sum of every broker's
    /// `connects`, and how many statistics came.
    struct StatsContext {
        connects: Arc<Mutex<Option<i64>>>,
        generation: Arc<AtomicU64>,
    }

    impl rdkafka::ClientContext for StatsContext {
        fn stats_raw(&self, statistics: &[u8]) {
            if let Ok(v) = serde_json::from_slice::<Value>(statistics) {
                let sum = v["brokers"].as_object().map(|b| {
                    b.values()
                        .filter_map(|b| b["connects"].as_i64())
                        .sum::<i64>()
                });
                *self.connects.lock().unwrap() = sum;
                self.generation.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    impl rdkafka::consumer::ConsumerContext for StatsContext {}

    fn rd(
        bootstrap: &str,
        topic: &str,
        partitions: i32,
        records: usize,
        census: &Census,
        extra: &mut serde_json::Map<String, Value>,
    ) -> Tally {
        use rdkafka::config::ClientConfig;
        use rdkafka::consumer::{BaseConsumer, Consumer as _};
        use rdkafka::message::Message as _;
        use rdkafka::{Offset, TopicPartitionList};
        let connects = Arc::new(Mutex::new(None));
        let generation = Arc::new(AtomicU64::new(0));
        let context = StatsContext {
            connects: connects.clone(),
            generation: generation.clone(),
        };
        // librdkafka starts its threads and its first connection when the
        // client is created (lazykafka: at the first poll), so the clock
        // starts before that.
        let mut t = Tally::default();
        let deadline = Instant::now() + CHILD_TIMEOUT;
        t.first_poll_us = mono_us();
        let mut config = ClientConfig::new();
        let ca = std::env::var("LKB_CA").unwrap_or_default();
        if !ca.is_empty() {
            config
                .set("security.protocol", "SSL")
                .set("ssl.ca.location", &ca);
        }
        let consumer: BaseConsumer<StatsContext> = config
            .set("bootstrap.servers", bootstrap)
            .set("client.id", "bench-librdkafka")
            // librdkafka's consumer needs a group for assign(); it looks up
            // the coordinator even without subscribe, but commits nothing.
            .set(
                "group.id",
                std::env::var("LKB_GROUP")
                    .ok()
                    .filter(|g| !g.is_empty())
                    .unwrap_or_else(|| "bench-librdkafka".into()),
            )
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("fetch.min.bytes", FETCH_MIN_BYTES)
            .set("fetch.wait.max.ms", FETCH_MAX_WAIT_MS)
            .set("fetch.max.bytes", FETCH_MAX_BYTES)
            .set("max.partition.fetch.bytes", MAX_PARTITION_FETCH_BYTES)
            .set("check.crcs", CHECK_CRCS)
            .set("statistics.interval.ms", "1000")
            .set("log_level", "0")
            .create_with_context(context)
            .expect("librdkafka consumer");
        let group = std::env::var("LKB_GROUP").unwrap_or_default();
        if group.is_empty() {
            let mut tpl = TopicPartitionList::new();
            for p in 0..partitions {
                tpl.add_partition_offset(topic, p, Offset::Beginning)
                    .unwrap();
            }
            consumer.assign(&tpl).expect("assign");
        } else {
            consumer.subscribe(&[topic]).expect("subscribe");
        }
        while t.records < records {
            if Instant::now() > deadline {
                t.timed_out = true;
                break;
            }
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    t.record(m.payload().map_or(0, <[u8]>::len));
                    t.last_record_us = mono_us();
                }
                Some(Err(_)) => t.errors += 1,
                None => {}
            }
        }
        census.snapshot(&ports_of(bootstrap), &mut t);
        if !t.timed_out {
            steady(
                census,
                |span| {
                    let (t0, mut got) = (Instant::now(), 0);
                    while t0.elapsed() < span {
                        got += usize::from(matches!(
                            consumer.poll(Duration::from_millis(100)),
                            Some(Ok(_))
                        ));
                    }
                    got
                },
                extra,
            );
            idle_cpu(census, &mut t, |span| {
                let t0 = Instant::now();
                while t0.elapsed() < span {
                    let _ = consumer.poll(Duration::from_millis(100));
                }
            });
        }
        // The next statistics, for the connection attempts up to now.
        let gen = generation.load(Ordering::SeqCst);
        let wait = Instant::now() + Duration::from_secs(3);
        while generation.load(Ordering::SeqCst) == gen && Instant::now() < wait {
            let _ = consumer.poll(Duration::from_millis(50));
        }
        extra.insert("connects".into(), json!(*connects.lock().unwrap()));
        t
    }

    /// A producer child (`LKB_PRODUCE`): writes `LKB_RECORDS` records to
    /// `LKB_TOPIC` without waiting for each delivery, then waits for every
    /// delivery report, and reports as one JSON line.
    mod producing {
        use super::*;
        use bytes::Bytes;

        /// What to write.
        struct Work {
            topic: String,
            partitions: i32,
            records: usize,
            value_len: usize,
            compression: String,
            /// Values, used in turn.
            pool: Vec<Bytes>,
            /// Keys, used in turn; empty for keyless records.
            keys: Vec<Bytes>,
        }

        impl Work {
            fn value(&self, i: usize) -> &Bytes {
                &self.pool[i % self.pool.len()]
            }

            fn key(&self, i: usize) -> Option<&Bytes> {
                (!self.keys.is_empty()).then(|| &self.keys[i % self.keys.len()])
            }

            fn partition(&self, i: usize) -> i32 {
                (i % self.partitions as usize) as i32
            }
        }

        pub(super) fn run() -> ! {
            let client = env("LKB_CLIENT");
            let bootstrap = env("LKB_BOOTSTRAP");
            let ports: Vec<u16> = env("LKB_PORTS")
                .split(',')
                .filter_map(|p| p.parse().ok())
                .collect();
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
                "lazykafka" => lazy(&bootstrap, &work, &census, &mut extra),
                "librdkafka" => rd(&bootstrap, &work, &census, &mut extra),
                other => panic!("unknown client {other}"),
            };
            let (mut seen, census_cpu) = census.finish();
            seen.extend(t.held_sockets.iter().copied());
            let elapsed_s = (t.last_record_us - t.first_poll_us) as f64 / 1e6;
            let steady_s = t
                .first_record_us
                .map_or(f64::NAN, |f| (t.last_record_us - f) as f64 / 1e6);
            let mut out = json!({
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
                "seen": seen.len(),
                "held": t.held,
            });
            for (k, v) in extra {
                out[k] = v;
            }
            println!("{out}");
            let _ = std::io::stdout().flush();
            // No close: the measurement is over.
            std::process::exit(0);
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

        /// lazykafka: every `send` awaited (it waits only for the topic's
        /// metadata and for room in `buffer.memory`), each delivery future
        /// kept in a queue in the order sent, the done ones taken from its
        /// front after each send, then the rest awaited in order. The clock starts before `Producer::new`.
        fn lazy(
            bootstrap: &str,
            w: &Work,
            census: &Census,
            extra: &mut serde_json::Map<String, Value>,
        ) -> Tally {
            use futures::FutureExt as _;
            use lazykafka::{Producer, ProducerConfig, ProducerRecord};
            let mut t = Tally::default();
            let mut first_error: Option<String> = None;
            t.first_poll_us = mono_us();
            let config = ProducerConfig::builder()
                .set_all([
                    ("bootstrap.servers", bootstrap),
                    ("client.id", "bench-lazykafka"),
                    ("acks", PRODUCE_ACKS),
                    ("enable.idempotence", PRODUCE_IDEMPOTENCE),
                    ("linger.ms", PRODUCE_LINGER_MS),
                    ("batch.size", PRODUCE_BATCH_SIZE),
                    (
                        "max.in.flight.requests.per.connection",
                        PRODUCE_MAX_IN_FLIGHT,
                    ),
                    ("compression.type", w.compression.as_str()),
                ])
                .and_then(|b| b.build())
                .expect("lazykafka producer config");
            let producer = Producer::new(config).expect("lazykafka producer");
            // The runtime, as the consumer's child picks it.
            #[cfg(feature = "runtime-tokio")]
            let runtime = if tokio_multi_thread() {
                tokio::runtime::Builder::new_multi_thread()
            } else {
                tokio::runtime::Builder::new_current_thread()
            }
            .enable_all()
            .build()
            .expect("tokio runtime");
            // A watchdog thread aborts the work after CHILD_TIMEOUT; it is
            // gone before threads are counted.
            let (done, until_done) = std::sync::mpsc::channel::<()>();
            let (work, abort) = futures::future::abortable(async {
                let mut pending = std::collections::VecDeque::new();
                let mut settle = |t: &mut Tally, outcome: Result<_, lazykafka::Error>| match outcome
                {
                    Ok(_) => {
                        t.record(w.value_len);
                        t.last_record_us = mono_us();
                    }
                    Err(e) => {
                        t.errors += 1;
                        first_error.get_or_insert_with(|| e.to_string());
                    }
                };
                for i in 0..w.records {
                    let record = ProducerRecord::new(w.topic.as_str()).value(w.value(i).clone());
                    let record = match w.key(i) {
                        Some(key) => record.key(key.clone()),
                        None => record.partition(w.partition(i)),
                    };
                    match producer.send(record).await {
                        Ok(delivery) => pending.push_back(delivery),
                        Err(e) => settle(&mut t, Err(e)),
                    }
                    // The deliveries done, oldest first: they complete in
                    // the order of their partition's batches.
                    while let Some(outcome) = pending.front_mut().and_then(|d| d.now_or_never()) {
                        pending.pop_front();
                        settle(&mut t, outcome);
                    }
                }
                for delivery in pending {
                    settle(&mut t, delivery.await);
                }
            });
            let watchdog = spawn_named("watchdog", move || {
                if until_done.recv_timeout(CHILD_TIMEOUT).is_err() {
                    abort.abort();
                }
            });
            #[cfg(feature = "runtime-tokio")]
            let finished = runtime.block_on(work);
            #[cfg(not(feature = "runtime-tokio"))]
            let finished = async_std::task::block_on(work);
            let _ = done.send(());
            watchdog.join().expect("watchdog");
            t.timed_out = finished.is_err();
            census.snapshot(&ports_of(bootstrap), &mut t);
            let counters = producer.broker_counters();
            extra.insert(
                "connects".into(),
                json!(counters.values().map(|c| c.connects).sum::<u64>()),
            );
            extra.insert(
                "connect_failures".into(),
                json!(counters.values().map(|c| c.connect_failures).sum::<u64>()),
            );
            extra.insert(
                "requests_total_own".into(),
                json!(counters.values().map(|c| c.requests).sum::<u64>()),
            );
            let metrics = producer.metrics();
            extra.insert(
                "batches_own".into(),
                json!(metrics.partitions.iter().map(|p| p.batches).sum::<u64>()),
            );
            extra.insert(
                "batch_bytes_own".into(),
                json!(metrics.partitions.iter().map(|p| p.bytes).sum::<u64>()),
            );
            extra.insert("first_error".into(), json!(first_error));
            extra.insert(
                "runtime".into(),
                json!(if !cfg!(feature = "runtime-tokio") {
                    "async-std"
                } else if tokio_multi_thread() {
                    "tokio (multi-thread)"
                } else {
                    "tokio (current thread)"
                }),
            );
            t
        }

        /// Counts librdkafka's delivery reports (served by `poll` on the
        /// calling thread) and keeps its statistics' `connects`.
        struct Reports {
            value_len: usize,
            delivered: AtomicU64,
            failed: AtomicU64,
            first_us: std::sync::atomic::AtomicI64,
            last_us: std::sync::atomic::AtomicI64,
            first_error: Mutex<Option<String>>,
            connects: Mutex<Option<i64>>,
            generation: AtomicU64,
        }

        impl rdkafka::ClientContext for Reports {
            fn stats_raw(&self, statistics: &[u8]) {
                if let Ok(v) = serde_json::from_slice::<Value>(statistics) {
                    let sum = v["brokers"].as_object().map(|b| {
                        b.values()
                            .filter_map(|b| b["connects"].as_i64())
                            .sum::<i64>()
                    });
                    *self.connects.lock().unwrap() = sum;
                    self.generation.fetch_add(1, Ordering::SeqCst);
                }
            }
        }

        impl rdkafka::producer::ProducerContext for Reports {
            type DeliveryOpaque = ();

            fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
                let now = mono_us();
                match result {
                    Ok(_) => {
                        if self.delivered.fetch_add(1, Ordering::Relaxed) == 0 {
                            self.first_us.store(now, Ordering::Relaxed);
                        }
                        self.last_us.store(now, Ordering::Relaxed);
                    }
                    Err((e, _)) => {
                        self.failed.fetch_add(1, Ordering::Relaxed);
                        self.first_error
                            .lock()
                            .unwrap()
                            .get_or_insert_with(|| e.to_string());
                    }
                }
            }
        }

        impl Reports {
            fn settled(&self) -> usize {
                (self.delivered.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed))
                    as usize
            }
        }

        /// librdkafka: `BaseProducer::send` for every record, `poll(0)`
        /// after each (its delivery reports are served by `poll`), on
        /// `QueueFull` `poll(100 ms)` and the same record again; then
        /// `poll(100 ms)` until every report came. The clock starts before
        /// the producer is created (which starts its threads and connects).
        fn rd(
            bootstrap: &str,
            w: &Work,
            census: &Census,
            extra: &mut serde_json::Map<String, Value>,
        ) -> Tally {
            use rdkafka::config::ClientConfig;
            use rdkafka::error::{KafkaError, RDKafkaErrorCode};
            use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
            let mut t = Tally::default();
            let deadline = Instant::now() + CHILD_TIMEOUT;
            t.first_poll_us = mono_us();
            let producer: BaseProducer<Reports> = ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .set("client.id", "bench-librdkafka")
                .set("acks", PRODUCE_ACKS)
                .set("enable.idempotence", PRODUCE_IDEMPOTENCE)
                .set("linger.ms", PRODUCE_LINGER_MS)
                .set("batch.size", PRODUCE_BATCH_SIZE)
                .set(
                    "max.in.flight.requests.per.connection",
                    PRODUCE_MAX_IN_FLIGHT,
                )
                .set("compression.codec", &w.compression)
                .set("queue.buffering.max.kbytes", PRODUCE_BUFFER_KBYTES)
                .set("queue.buffering.max.messages", "0")
                .set("partitioner", "murmur2_random")
                .set("statistics.interval.ms", "1000")
                .set("log_level", "0")
                .create_with_context(Reports {
                    value_len: w.value_len,
                    delivered: AtomicU64::new(0),
                    failed: AtomicU64::new(0),
                    first_us: Default::default(),
                    last_us: Default::default(),
                    first_error: Mutex::new(None),
                    connects: Mutex::new(None),
                    generation: AtomicU64::new(0),
                })
                .expect("librdkafka producer");
            let mut refused = 0u64;
            'records: for i in 0..w.records {
                let mut record: BaseRecord<'_, [u8], [u8]> =
                    BaseRecord::to(&w.topic).payload(&w.value(i)[..]);
                record = match w.key(i) {
                    Some(key) => record.key(&key[..]),
                    None => record.partition(w.partition(i)),
                };
                loop {
                    match producer.send(record) {
                        Ok(()) => break,
                        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                            if Instant::now() > deadline {
                                t.timed_out = true;
                                break 'records;
                            }
                            producer.poll(Duration::from_millis(100));
                            record = back;
                        }
                        Err((e, _)) => {
                            refused += 1;
                            let ctx = producer.context();
                            ctx.first_error
                                .lock()
                                .unwrap()
                                .get_or_insert_with(|| e.to_string());
                            break;
                        }
                    }
                }
                producer.poll(Duration::ZERO);
            }
            let ctx = producer.context();
            let sent = w.records - refused as usize;
            while ctx.settled() < sent && !t.timed_out {
                if Instant::now() > deadline {
                    t.timed_out = true;
                    break;
                }
                producer.poll(Duration::from_millis(100));
            }
            let delivered = ctx.delivered.load(Ordering::Relaxed) as usize;
            t.records = delivered;
            t.bytes = (delivered * ctx.value_len) as u64;
            t.errors = refused + ctx.failed.load(Ordering::Relaxed);
            t.first_record_us = (delivered > 0).then(|| ctx.first_us.load(Ordering::Relaxed));
            t.last_record_us = ctx.last_us.load(Ordering::Relaxed);
            census.snapshot(&ports_of(bootstrap), &mut t);
            // The next statistics, for the connection attempts up to now.
            let generation = ctx.generation.load(Ordering::SeqCst);
            let wait = Instant::now() + Duration::from_secs(3);
            while ctx.generation.load(Ordering::SeqCst) == generation && Instant::now() < wait {
                producer.poll(Duration::from_millis(50));
            }
            extra.insert("connects".into(), json!(*ctx.connects.lock().unwrap()));
            extra.insert(
                "first_error".into(),
                json!(*ctx.first_error.lock().unwrap()),
            );
            t
        }
    }
}
