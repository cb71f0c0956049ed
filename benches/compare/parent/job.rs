//! Running one child: what it is told ([`Job`], passed in `LKB_*`
//! environment variables), the command it runs under (itself, `strace`,
//! `perf record` or the user's `LAZYKAFKA_BENCH_WRAP`), and the JSON line
//! it reports, with the parent's own CPU meanwhile; and the extra run per
//! client under strace that counts connect() calls.

use crate::data::Produce;
use crate::measure::cpu_time;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a child is told.
#[derive(Clone, Copy)]
pub(crate) struct Job<'a> {
    pub(crate) client: &'static str,
    pub(crate) bootstrap: &'a str,
    pub(crate) topic: &'a str,
    pub(crate) partitions: i32,
    pub(crate) records: usize,
    pub(crate) broker_ports: &'a [u16],
    /// Run under `strace -e trace=connect` to count connect() calls.
    pub(crate) strace: bool,
    /// `fetch.sessions.enable` for lazykafka (`None`: its default).
    pub(crate) sessions: Option<&'static str>,
    /// After the first `records`, poll this long and report the CPU
    /// and records of that window.
    pub(crate) steady_ms: Option<u64>,
    /// The CA file: both clients connect with `security.protocol=SSL`.
    pub(crate) ca: Option<&'a str>,
    /// Produce `records` to `topic` instead of consuming them.
    pub(crate) produce: Option<Produce>,
    /// Join this group (subscribe) instead of assigning the partitions.
    pub(crate) group: Option<&'a str>,
}

impl<'a> Job<'a> {
    /// `records` records on the `partitions` partitions of `topic`, with
    /// nothing else asked for: a consumer with the partitions assigned,
    /// not under strace, no steady window, no TLS.
    pub(crate) fn new(
        client: &'static str,
        bootstrap: &'a str,
        topic: &'a str,
        partitions: i32,
        records: usize,
        broker_ports: &'a [u16],
    ) -> Job<'a> {
        Job {
            client,
            bootstrap,
            topic,
            partitions,
            records,
            broker_ports,
            strace: false,
            sessions: None,
            steady_ms: None,
            ca: None,
            produce: None,
            group: None,
        }
    }
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

/// Runs `job` in a child and returns its JSON line, with the parent's CPU
/// meanwhile (`parent_cpu_s`); under strace, the connect() counts instead;
/// `{"failed": true}` when the child reported nothing.
pub(crate) fn run_child(job: &Job<'_>) -> Value {
    let trace =
        std::env::temp_dir().join(format!("lazykafka-compare-{}.strace", std::process::id()));
    let mut cmd = child_command(job, &trace);
    // The parent's CPU while the child runs: its mock brokers' (nothing
    // else in it is busy then).
    let parent_cpu0 = cpu_time(libc::RUSAGE_SELF);
    let out = tell(cmd.arg("--child"), job).output().expect("run child");
    let parent_cpu = cpu_time(libc::RUSAGE_SELF).saturating_sub(parent_cpu0);
    match report_line(&out) {
        Some(mut v) => {
            v["parent_cpu_s"] = json!(parent_cpu.as_secs_f64());
            if job.strace {
                v = connect_calls(job, &trace);
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

/// This binary, under strace (writing to `trace`), under `perf record`
/// (`LAZYKAFKA_BENCH_PERF`), under the user's command
/// (`LAZYKAFKA_BENCH_WRAP`), or alone.
fn child_command(job: &Job<'_>, trace: &Path) -> Command {
    let exe = std::env::current_exe().expect("current exe");
    if job.strace {
        let mut c = Command::new("strace");
        c.args(["-f", "-qq", "--seccomp-bpf", "-e", "trace=connect", "-o"])
            .arg(trace)
            .arg(exe);
        c
    } else if let Some(dir) = std::env::var_os("LAZYKAFKA_BENCH_PERF") {
        // A profile of every timed child, for `perf report -i`.
        let n = PROFILES.fetch_add(1, Ordering::Relaxed);
        let data = Path::new(&dir).join(format!("{}-{}-{}.perf.data", job.topic, job.client, n));
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
    }
}

/// Tells the child its job, in `LKB_*` environment variables.
fn tell<'c>(cmd: &'c mut Command, job: &Job<'_>) -> &'c mut Command {
    let ports: Vec<String> = job.broker_ports.iter().map(u16::to_string).collect();
    cmd.env("LKB_CLIENT", job.client)
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
}

/// The child's report: the last line of its output that is a JSON object.
fn report_line(out: &Output) -> Option<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    line.and_then(|l| serde_json::from_str::<Value>(l).ok())
}

/// Every connect() to a broker port in the strace output at `trace`,
/// whatever its outcome, and the distinct ports among them; the file is
/// removed.
fn connect_calls(job: &Job<'_>, trace: &Path) -> Value {
    let text = std::fs::read_to_string(trace).unwrap_or_default();
    let _ = std::fs::remove_file(trace);
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
    json!({
        "census": true,
        "connect_calls": calls.len(),
        "connect_ports": distinct.len(),
    })
}

/// One more run per client under strace, counting connect() calls (not
/// timed).
pub(crate) fn census_runs<'a>(
    broker: &str,
    case: &str,
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
