//! The lifecycle runs: lazykafka, librdkafka and the Java client, each a
//! child process that pauses at named points (the bench's own
//! `LKB_LIFECYCLE` child, `child/lifecycle.rs`; the Java peer's
//! `census-consumer` and `census-producer` modes), all three measured the
//! same way from here: the sockets the child holds to the brokers at each
//! point (its `/proc/PID/fd` placed in `/proc/net/tcp*`, with their
//! states), every socket it ever held (a sampler every 2 ms), its threads
//! and memory (`/proc/PID/status`), its CPU time while it reads or writes
//! (`/proc/PID/stat`) and in all (`wait4`).
//!
//! The points: created (producer) or subscribed (consumer), not yet sent
//! to or polled, after [`settle`] (3 s); the last delivery or record, then the
//! steady census after the steady window (the consumer polling on, the
//! producer idle); closed (the client closed, the process still alive),
//! after [`AFTER_CLOSE`]. On a mock, the connections it accepted come
//! from its log, at the first point and in all.
//!
//! Used by the `scale` and `produce-scale` cases (the 1000-address
//! bootstrap list in front of an 8-broker mock), by `mock-lifecycle`
//! ([`mock_lifecycle`]: the consumer's throughput on a 3-broker mock) and
//! by `kafka-lifecycle` and `kafka-broker-idle` (Apache Kafka, [`kafka`]).

mod census;
mod java;
pub(crate) mod kafka;

use super::mock::Mock;
use super::options::Settings;
use crate::client_config::{
    CHECK_CRCS, FETCH_MAX_BYTES, FETCH_MAX_WAIT_MS, FETCH_MIN_BYTES, MAX_PARTITION_FETCH_BYTES,
    PRODUCE_ACKS, PRODUCE_BATCH_SIZE, PRODUCE_IDEMPOTENCE, PRODUCE_LINGER_MS,
    PRODUCE_MAX_IN_FLIGHT,
};
use crate::data::DataSet;
use census::{cpu_s, sockets, state_name, status_field, Sock, Watch, CLOSE_WAIT, ESTABLISHED};
pub(crate) use java::Java;
use lazykafka::mock::MockEventKind;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The clients, in the order they run each round.
pub(crate) const CLIENTS: [&str; 3] = ["lazykafka", "librdkafka", "java"];

/// How long after `subscribed` or `created` the first census is taken:
/// what a client opens on its own, before it is asked for anything, has
/// had that long. `LAZYKAFKA_BENCH_SETTLE_MS`, default 3000 (a JVM on a
/// busy machine took more than 1 s to open what it opens at once).
fn settle() -> Duration {
    Duration::from_millis(
        std::env::var("LAZYKAFKA_BENCH_SETTLE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3000),
    )
}

/// How long after `closed` the last census is taken.
const AFTER_CLOSE: Duration = Duration::from_millis(500);

/// The metrics summarised for a lifecycle case, with how each is shown.
pub(crate) const METRICS: &[(&str, &str)] = &[
    ("sockets_before_poll", "sockets before 1st poll/send"),
    ("connections_mock_before_poll", "connections by then (mock)"),
    ("sockets_steady", "sockets held, steady"),
    ("close_wait_steady", "CLOSE_WAIT, steady"),
    ("sockets_after_close", "sockets held after close()"),
    ("close_wait_after_close", "CLOSE_WAIT after close()"),
    ("seen", "sockets seen (census)"),
    ("brokers_seen", "brokers connected (census)"),
    ("connections_mock", "connections accepted (mock)"),
    ("brokers_connected_mock", "brokers connected (mock)"),
    ("threads_before_poll", "threads before 1st poll/send"),
    ("threads", "threads, steady"),
    ("vmhwm_mb", "peak RSS, MB"),
    ("records", "records"),
    ("rec_per_s", "records/s (1st poll/send on)"),
    ("rec_per_s_steady", "records/s (1st record on)"),
    ("first_ms", "1st record/delivery, ms"),
    ("cpu_work_s", "CPU reading/writing, s"),
    ("cpu_us_per_record", "CPU µs/record (that CPU)"),
    ("idle_cpu_ms_per_s", "CPU ms/s in the steady window"),
    ("cpu_s", "CPU, whole process, s"),
    ("wall_s", "wall time of the run, s"),
];

/// What the client does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Consumer,
    Producer,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Consumer => "consumer",
            Role::Producer => "producer",
        }
    }
}

/// One lifecycle: what the client does, and where.
pub(crate) struct Life<'a> {
    pub(crate) role: Role,
    pub(crate) bootstrap: &'a str,
    /// The brokers, node id and port: sockets are counted to these ports.
    pub(crate) brokers: &'a [(i32, u16)],
    pub(crate) topic: &'a str,
    pub(crate) partitions: i32,
    /// Records to read (from the earliest offset) or write, 100 B each.
    pub(crate) records: usize,
    /// The consumer's group (it subscribes); `None`: it is assigned every
    /// partition.
    pub(crate) group: Option<String>,
    /// Added to every client's configuration.
    pub(crate) properties: Vec<(String, String)>,
    /// From the last record or delivery to the steady census.
    pub(crate) steady: Duration,
}

impl Life<'_> {
    fn ports(&self) -> Vec<u16> {
        self.brokers.iter().map(|(_, p)| *p).collect()
    }

    /// The node ids behind `socks`, in their order.
    fn brokers_of(&self, socks: &[Sock]) -> Vec<i32> {
        let mut ids: Vec<i32> = socks
            .iter()
            .filter_map(|s| self.brokers.iter().find(|(_, p)| *p == s.remote))
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }
}

/// The child's command: this binary (`--child`, `LKB_LIFECYCLE`) or the
/// Java peer; `None` for Java when it cannot run.
fn command(client: &str, life: &Life<'_>, java: Option<&Java>) -> Option<Command> {
    if client == "java" {
        let java = java?;
        let mut args: Vec<String> = vec![
            "--bootstrap".into(),
            life.bootstrap.into(),
            "--topic".into(),
            life.topic.into(),
            "--count".into(),
            life.records.to_string(),
        ];
        let mut props: Vec<(&str, &str)> = vec![("client.id", "bench-java")];
        let mode = match life.role {
            Role::Consumer => {
                if let Some(g) = &life.group {
                    args.extend(["--group".into(), g.clone()]);
                }
                props.extend([
                    ("fetch.min.bytes", FETCH_MIN_BYTES),
                    ("fetch.max.wait.ms", FETCH_MAX_WAIT_MS),
                    ("fetch.max.bytes", FETCH_MAX_BYTES),
                    ("max.partition.fetch.bytes", MAX_PARTITION_FETCH_BYTES),
                    ("check.crcs", CHECK_CRCS),
                ]);
                "census-consumer"
            }
            Role::Producer => {
                args.extend([
                    "--partitions".into(),
                    life.partitions.to_string(),
                    "--value-bytes".into(),
                    "100".into(),
                ]);
                props.extend([
                    ("acks", PRODUCE_ACKS),
                    ("enable.idempotence", PRODUCE_IDEMPOTENCE),
                    ("linger.ms", PRODUCE_LINGER_MS),
                    ("batch.size", PRODUCE_BATCH_SIZE),
                    (
                        "max.in.flight.requests.per.connection",
                        PRODUCE_MAX_IN_FLIGHT,
                    ),
                ]);
                "census-producer"
            }
        };
        for (k, v) in props.into_iter().chain(
            life.properties
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        ) {
            args.extend(["--property".into(), format!("{k}={v}")]);
        }
        return Some(java.command(mode, &args));
    }
    let mut c = Command::new(std::env::current_exe().expect("current exe"));
    let properties: Vec<String> = life
        .properties
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    c.arg("--child")
        .env("LKB_LIFECYCLE", life.role.name())
        .env("LKB_CLIENT", client)
        .env("LKB_BOOTSTRAP", life.bootstrap)
        .env("LKB_TOPIC", life.topic)
        .env("LKB_PARTITIONS", life.partitions.to_string())
        .env("LKB_RECORDS", life.records.to_string())
        .env("LKB_GROUP", life.group.as_deref().unwrap_or(""))
        .env("LKB_VALUE_LEN", "100")
        .env("LKB_PROPERTIES", properties.join("\n"));
    Some(c)
}

/// A child under observation: its events as they come, its input, the
/// end of its standard error.
struct Observed {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Receiver<Value>,
    stderr: Arc<Mutex<String>>,
}

impl Observed {
    // Reaped with `wait4` (see `reap`), which gives its resource usage.
    #[allow(clippy::zombie_processes)]
    fn spawn(mut cmd: Command) -> Observed {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a lifecycle child");
        let (tx, events) = channel();
        let out = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut s = sink.lock().unwrap();
                s.push_str(&String::from_utf8_lossy(&buf[..n]));
                if s.len() > 16 * 1024 {
                    let cut = s.len() - 8 * 1024;
                    let cut = (cut..s.len()).find(|i| s.is_char_boundary(*i)).unwrap_or(0);
                    s.drain(..cut);
                }
            }
        });
        let stdin = child.stdin.take();
        Observed {
            child,
            stdin,
            events,
            stderr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the event `name`; `Err` when the child reports an error,
    /// exits, or `timeout` passes first.
    fn expect(&self, name: &str, timeout: Duration) -> Result<Value, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(v) if v["event"] == name => return Ok(v),
                Ok(v) if v["event"] == "error" => return Err(format!("error: {}", v["message"])),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("no `{name}` in {timeout:?}"))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("exited before `{name}`"))
                }
            }
        }
    }

    /// Writes a line to its input: the next step.
    fn next(&mut self) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(b"next\n");
            let _ = stdin.flush();
        }
    }

    /// Ends its input and waits (at most `timeout`, then kills it) for it
    /// to exit; its resource usage (`wait4`) and whether it exited with
    /// success.
    fn reap(mut self, timeout: Duration) -> (libc::rusage, bool) {
        drop(self.stdin.take());
        let pid = self.child.id() as libc::pid_t;
        let deadline = Instant::now() + timeout;
        let mut status = 0;
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
            if r == pid {
                break;
            }
            if r < 0 {
                return (ru, false);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
                return (ru, false);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        (
            ru,
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        )
    }
}

/// The sockets of a census: ESTABLISHED ones, CLOSE_WAIT ones, the
/// brokers of the ESTABLISHED ones, and how many are in each state.
fn census_fields(life: &Life<'_>, socks: &[Sock], prefix: &str, out: &mut Value) {
    let established: Vec<Sock> = socks
        .iter()
        .filter(|s| s.state == ESTABLISHED)
        .copied()
        .collect();
    let mut states: BTreeMap<&str, usize> = BTreeMap::new();
    for s in socks {
        *states.entry(state_name(s.state)).or_default() += 1;
    }
    out[format!("sockets_{prefix}")] = json!(established.len());
    out[format!("close_wait_{prefix}")] =
        json!(socks.iter().filter(|s| s.state == CLOSE_WAIT).count());
    out[format!("brokers_{prefix}")] = json!(life.brokers_of(&established));
    out[format!("states_{prefix}")] = json!(states);
}

/// The connections `mock` accepted since its log was cleared, by broker.
fn mock_connections(mock: &Mock) -> Vec<i32> {
    mock.cluster
        .events()
        .iter()
        .filter(|e| matches!(e.kind, MockEventKind::Connected { .. }))
        .map(|e| e.broker)
        .collect()
}

/// Runs one lifecycle of `client` and returns what was seen of it
/// (`{"failed": true, ...}` when it did not get through); `mock`, when
/// the brokers are ours, adds the connections it accepted.
pub(crate) fn run_one(
    client: &str,
    life: &Life<'_>,
    java: Option<&Java>,
    mock: Option<&Mock>,
) -> Value {
    let Some(cmd) = command(client, life, java) else {
        return json!({"failed": true, "why": "no Java"});
    };
    if let Some(m) = mock {
        m.cluster.clear_events();
    }
    let t0 = Instant::now();
    let mut child = Observed::spawn(cmd);
    let pid = child.pid();
    let ports = life.ports();
    let watch = Watch::start(pid, ports.clone());
    let mut out = json!({
        "role": life.role.name(),
        "client": client,
        "records_wanted": life.records,
    });
    let first = match life.role {
        Role::Consumer => ("subscribed", "consumed"),
        Role::Producer => ("created", "sent"),
    };
    let steps = (|| -> Result<(), String> {
        child.expect(first.0, Duration::from_secs(120))?;
        std::thread::sleep(settle());
        census_fields(life, &sockets(pid, &ports), "before_poll", &mut out);
        out["threads_before_poll"] = json!(status_field(pid, "Threads"));
        out["rss_before_poll_mb"] = json!(status_field(pid, "VmRSS") as f64 / 1024.0);
        if let Some(m) = mock {
            out["connections_mock_before_poll"] = json!(mock_connections(m).len());
        }
        let cpu0 = cpu_s(pid);
        child.next();
        let done = child.expect(first.1, Duration::from_secs(300))?;
        let cpu1 = cpu_s(pid);
        work_fields(&done, cpu0, cpu1, &mut out);
        std::thread::sleep(life.steady);
        if let (Some(a), Some(b)) = (cpu1, cpu_s(pid)) {
            out["idle_cpu_ms_per_s"] = json!((b - a) * 1e3 / life.steady.as_secs_f64());
        }
        census_fields(life, &sockets(pid, &ports), "steady", &mut out);
        out["threads"] = json!(status_field(pid, "Threads"));
        out["rss_steady_mb"] = json!(status_field(pid, "VmRSS") as f64 / 1024.0);
        child.next();
        child.expect("closed", Duration::from_secs(60))?;
        std::thread::sleep(AFTER_CLOSE);
        let after: Vec<Sock> = sockets(pid, &ports);
        census_fields(life, &after, "after_close", &mut out);
        // Any socket still held after close(), in any state.
        out["sockets_after_close"] = json!(after.len());
        out["threads_after_close"] = json!(status_field(pid, "Threads"));
        // VmHWM only grows: read last, before the process exits.
        out["vmhwm_mb"] = json!(status_field(pid, "VmHWM") as f64 / 1024.0);
        Ok(())
    })();
    let stderr = child.stderr.lock().unwrap().clone();
    let (ru, exit_ok) = child.reap(Duration::from_secs(30));
    let seen = watch.finish();
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    out["cpu_s"] = json!(tv(ru.ru_utime) + tv(ru.ru_stime));
    out["user_s"] = json!(tv(ru.ru_utime));
    out["sys_s"] = json!(tv(ru.ru_stime));
    out["exit_ok"] = json!(exit_ok);
    out["wall_s"] = json!(t0.elapsed().as_secs_f64());
    out["seen"] = json!(seen.len());
    out["brokers_seen"] = json!(seen.iter().map(|s| s.1).collect::<BTreeSet<_>>().len());
    if let Some(m) = mock {
        let connected = mock_connections(m);
        let ids: BTreeSet<i32> = connected.iter().copied().collect();
        out["connections_mock"] = json!(connected.len());
        out["brokers_connected_mock"] = json!(ids.len());
        out["brokers_connected_ids"] = json!(ids);
    }
    if let Err(why) = steps {
        let tail: String = stderr
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        eprintln!("lifecycle {client} {}: {why}\n{tail}", life.role.name());
        out["failed"] = json!(true);
        out["why"] = json!(why);
    }
    out
}

/// The figures of the `consumed` or `sent` event, and the CPU the
/// process used from the step that started the work to that event.
fn work_fields(done: &Value, cpu0: Option<f64>, cpu1: Option<f64>, out: &mut Value) {
    let records = done["records"].as_f64().unwrap_or(0.0);
    let elapsed_s = done["elapsed_ms"].as_f64().unwrap_or(f64::NAN) / 1e3;
    out["records"] = done["records"].clone();
    out["bytes"] = done["bytes"].clone();
    out["errors"] = done["failed"].clone();
    out["timed_out"] = done["timed_out"].clone();
    out["elapsed_s"] = json!(elapsed_s);
    out["rec_per_s"] = json!(records / elapsed_s);
    out["mb_per_s"] = json!(done["bytes"].as_f64().unwrap_or(0.0) / elapsed_s / 1e6);
    out["first_ms"] = done
        .get("first_record_ms")
        .or_else(|| done.get("first_delivery_ms"))
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(first_s) = out["first_ms"].as_f64().map(|ms| ms / 1e3) {
        if elapsed_s > first_s {
            out["rec_per_s_steady"] = json!(records / (elapsed_s - first_s));
        }
    }
    if let (Some(a), Some(b)) = (cpu0, cpu1) {
        out["cpu_work_s"] = json!(b - a);
        if records > 0.0 {
            out["cpu_us_per_record"] = json!((b - a) * 1e6 / records);
        }
    }
}

/// A lifecycle run's line on standard error.
fn brief(r: &Value) -> String {
    let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    format!(
        "  {:<6} {:<28} {:<10} round {}: sockets {} before poll {}, {} steady {} \
         ({} CLOSE_WAIT), {} after close {}; seen {} to {} brokers{}; threads {}/{}; \
         hwm {:.0} MB; {} records, {:.0} rec/s, cpu {:.2} s work / {:.2} s all{}",
        r["broker"].as_str().unwrap_or(""),
        r["case"].as_str().unwrap_or(""),
        r["client"].as_str().unwrap_or(""),
        r["round"],
        r["sockets_before_poll"],
        r["brokers_before_poll"],
        r["sockets_steady"],
        r["brokers_steady"],
        r["close_wait_steady"],
        r["sockets_after_close"],
        r["states_after_close"],
        r["seen"],
        r["brokers_seen"],
        match r.get("connections_mock") {
            Some(c) => format!(
                " (mock: {c} connections to {} brokers)",
                r["brokers_connected_mock"]
            ),
            None => String::new(),
        },
        r["threads_before_poll"],
        r["threads"],
        f("vmhwm_mb"),
        r["records"],
        f("rec_per_s"),
        f("cpu_work_s"),
        f("cpu_s"),
        if r["failed"] == true { " FAILED" } else { "" },
    )
}

/// `rounds` rounds of every client's lifecycle (alternated in
/// [`CLIENTS`] order), each run labelled with `broker`, `case` and its
/// round; `life` makes each run's lifecycle (a fresh group, say) from the
/// client and the round.
pub(crate) fn rounds<'a>(
    s: &Settings,
    broker: &str,
    case: &str,
    java: Option<&Java>,
    mock: Option<&Mock>,
    life: impl Fn(&str, usize) -> Life<'a>,
    runs: &mut Vec<Value>,
) {
    for round in 0..s.rounds {
        for client in CLIENTS {
            if client == "java" && java.is_none() {
                continue;
            }
            let mut r = run_one(client, &life(client, round), java, mock);
            r["broker"] = json!(broker);
            r["case"] = json!(case);
            r["round"] = json!(round);
            r["lifecycle"] = json!(true);
            eprintln!("{}", brief(&r));
            runs.push(r);
        }
    }
    print_brokers(broker, case, runs);
}

/// Prints, per client, the brokers of the sockets held at each census of
/// `case` (the most frequent over the rounds).
pub(crate) fn print_brokers(broker: &str, case: &str, runs: &[Value]) {
    println!("\n{broker} / {case}: the brokers of the sockets held (node ids; the most frequent over the rounds)");
    for client in CLIENTS {
        let mine: Vec<&Value> = runs
            .iter()
            .filter(|r| r["broker"] == broker && r["case"] == case && r["client"] == client)
            .collect();
        if mine.is_empty() {
            continue;
        }
        // The most frequent list; on a tie the earliest round's.
        let mode = |key: &str| {
            let lists: Vec<String> = mine.iter().map(|r| r[key].to_string()).collect();
            let count = |l: &String| lists.iter().filter(|x| *x == l).count();
            lists
                .iter()
                .fold(None::<&String>, |best, l| match best {
                    Some(b) if count(b) >= count(l) => Some(b),
                    _ => Some(l),
                })
                .cloned()
                .unwrap_or_default()
        };
        println!(
            "  {client:<10} before 1st poll/send {:<14} steady {:<22} after close {}",
            mode("brokers_before_poll"),
            mode("brokers_steady"),
            mode("states_after_close"),
        );
    }
}

/// The `mock-lifecycle` case: the three clients' lifecycles as group
/// consumers reading 200,000 × scale records of 100 B (at least 1,000)
/// from 6 partitions of a 3-broker mock (partition `p` led by broker
/// `p % 3 + 1`), as `kafka-lifecycle` does on Apache Kafka: the same
/// figures, the mock's own connection log added.
pub(crate) fn mock_lifecycle(s: &Settings, java: Option<&Java>, runs: &mut Vec<Value>) {
    let mock = Mock::new(3);
    let set = DataSet {
        name: "mock-lifecycle",
        topic: "lifecycle",
        records: ((200_000.0 * s.scale).round() as usize).max(1000),
        value_len: 100,
        compression: "none",
        partitions: 6,
    };
    mock.create_topic_round_robin(set.topic, set.partitions, "lifecycle topic");
    mock.fill(&set);
    let (bootstrap, ids) = (mock.bootstrap(), mock.brokers());
    rounds(
        s,
        "mock",
        "mock-lifecycle",
        java,
        Some(&mock),
        |client, round| Life {
            role: Role::Consumer,
            bootstrap: &bootstrap,
            brokers: &ids,
            topic: set.topic,
            partitions: set.partitions,
            records: set.records,
            group: Some(format!(
                "bench-lifecycle-{client}-{round}-{}",
                std::process::id()
            )),
            properties: Vec::new(),
            steady: Duration::from_millis(2000),
        },
        runs,
    );
}

/// The Java client for the lifecycle runs, or `None` with a note of why.
pub(crate) fn java(notes: &mut Vec<String>) -> Option<Java> {
    match Java::find() {
        Ok(j) => {
            eprintln!(
                "java: {} {}(the Java peer, tests/java/Peer.java)",
                j.version,
                if j.opts().is_empty() {
                    String::new()
                } else {
                    format!("with {} ", j.opts())
                }
            );
            notes.push(format!(
                "java: {}; JVM options: {}",
                j.version,
                if j.opts().is_empty() {
                    "the defaults"
                } else {
                    "LAZYKAFKA_BENCH_JAVA_OPTS"
                }
            ));
            Some(j)
        }
        Err(why) => {
            let note = format!("Java client skipped: {why}");
            println!("{note}");
            notes.push(note);
            None
        }
    }
}
