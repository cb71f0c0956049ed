//! The `consume` example, run as a child process against librdkafka's mock
//! cluster and tansu: records as JSON lines, `--count`, group commits that a
//! second run resumes from, connection events, bad flags, and SIGTERM.
//!
//! The binary comes from `cargo build --example consume` run from here with
//! the cargo that runs the tests (`env!("CARGO")`), the same features and
//! profile, and `--message-format=json`: cargo names the executable it
//! built. That works with `cargo test --test consume_example` too (which
//! does not build examples), and is a no-op when `cargo test` built it
//! already.
//!
//! Also covers [`Consumer::partitions_for`], which the example uses to
//! assign every partition when no group is given.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::examples::example_bin;
use common::mock::RawMock;
use common::peers::produce_range;
use common::wait_for;
use lazykafka::{Consumer, ConsumerConfig, Error, ErrorCode, TopicPartition};
use rdkafka::config::ClientConfig;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

/// Flags that keep the runs quick.
fn quick() -> Vec<String> {
    [
        "fetch.max.wait.ms=100",
        "session.timeout.ms=6000",
        "heartbeat.interval.ms=500",
    ]
    .iter()
    .flat_map(|p| ["--property".to_owned(), (*p).to_owned()])
    .collect()
}

/// The example running, its output collected line by line.
struct Run {
    child: Child,
    stdout: Receiver<String>,
    stdout_seen: Vec<String>,
    stderr: Arc<Mutex<Vec<String>>>,
    stderr_done: Receiver<()>,
}

/// Starts the example with the library's log lines off (`RUST_LOG=off`), so
/// that stderr holds only the example's own lines.
fn start(args: &[String]) -> Run {
    start_logging(args, "off")
}

/// Starts the example with `RUST_LOG` set to `log`.
fn start_logging(args: &[String], log: &str) -> Run {
    let mut child = Command::new(example_bin("consume"))
        .args(args)
        .env("RUST_LOG", log)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the example");
    let (tx, stdout) = channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let (done, stderr_done) = channel();
    let err = child.stderr.take().unwrap();
    let lines = stderr.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            lines.lock().unwrap().push(line);
        }
        let _ = done.send(());
    });
    Run {
        child,
        stdout,
        stdout_seen: Vec::new(),
        stderr,
        stderr_done,
    }
}

struct Finished {
    code: Option<i32>,
    stdout: Vec<String>,
    stderr: Vec<String>,
}

impl Run {
    /// Waits until `n` lines came on stdout (false at the deadline).
    fn wait_lines(&mut self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.stdout_seen.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) => self.stdout_seen.push(line),
                Err(_) => return false,
            }
        }
        true
    }

    /// Waits for the process to exit; kills it (and fails) at the deadline.
    fn finish(mut self, timeout: Duration) -> Finished {
        let mut status = None;
        let exited = wait_for(timeout, || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        if !exited {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!(
                "the example did not exit within {timeout:?}; stderr: {:?}",
                self.stderr.lock().unwrap()
            );
        }
        // Both pipes are closed once the process is gone.
        while let Ok(line) = self.stdout.recv_timeout(Duration::from_secs(5)) {
            self.stdout_seen.push(line);
        }
        let _ = self.stderr_done.recv_timeout(Duration::from_secs(5));
        let stderr = self.stderr.lock().unwrap().clone();
        Finished {
            code: status.unwrap().code(),
            stdout: std::mem::take(&mut self.stdout_seen),
            stderr,
        }
    }

    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // A failed test leaves no process behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn run(args: &[String]) -> Finished {
    start(args).finish(WAIT)
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// A record line, checked for exactly the documented keys and a key/value
/// pair the producer wrote together: (topic, partition, offset, i).
fn record(line: &str) -> (String, i32, i64, usize) {
    let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let keys: BTreeSet<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["topic", "partition", "offset", "timestamp", "key", "value"]),
        "{line}"
    );
    assert!(v["timestamp"].as_i64().unwrap() > 0, "{line}");
    let value = v["value"].as_str().unwrap();
    let i: usize = value.strip_prefix("value-").unwrap().parse().unwrap();
    assert_eq!(v["key"], format!("key-{i}"), "{line}");
    (
        v["topic"].as_str().unwrap().to_owned(),
        v["partition"].as_i64().unwrap() as i32,
        v["offset"].as_i64().unwrap(),
        i,
    )
}

/// The event lines, checked for exactly the documented keys.
fn events(stderr: &[String]) -> Vec<Value> {
    stderr
        .iter()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let keys: BTreeSet<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                BTreeSet::from(["t_ms", "event", "broker", "addr", "purpose", "reason"]),
                "{line}"
            );
            assert!(v["t_ms"].is_u64(), "{line}");
            assert!(v["addr"].is_string(), "{line}");
            assert!(
                ["bootstrap", "coordinator", "leader"].contains(&v["purpose"].as_str().unwrap()),
                "{line}"
            );
            assert_eq!(v["event"] == "closed", !v["reason"].is_null(), "{line}");
            v
        })
        .collect()
}

fn mock_cluster(topic: &str, group: &str) -> RawMock {
    let mock = RawMock::new(3);
    mock.create_topic(topic, 2);
    mock.set_leader(topic, 0, 1);
    mock.set_leader(topic, 1, 3);
    mock.set_group_coordinator(group, 2);
    mock.cap_group_versions();
    mock
}

/// The group's committed offsets of `topic`'s partitions 0..`partitions`,
/// read by librdkafka (`None` where nothing is committed).
fn committed(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: i32,
) -> BTreeMap<i32, Option<i64>> {
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let committed = reader.committed_offsets(tpl, WAIT).unwrap();
    committed
        .elements()
        .iter()
        .map(|e| match e.offset() {
            rdkafka::Offset::Offset(o) => (e.partition(), Some(o)),
            _ => (e.partition(), None),
        })
        .collect()
}

/// Offsets per partition of a set of records.
fn by_partition(records: &[(String, i32, i64, usize)]) -> BTreeMap<i32, Vec<i64>> {
    let mut out: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (_, p, o, _) in records {
        out.entry(*p).or_default().push(*o);
    }
    out
}

#[test]
fn bad_flags_exit_non_zero_with_one_line() {
    let cases: &[&[&str]] = &[
        &["--bogus"],
        &["--topic", "t"],
        &["--bootstrap", "127.0.0.1:9"],
        &["--bootstrap", "127.0.0.1:9", "--topic"],
        &[
            "--bootstrap",
            "127.0.0.1:9",
            "--topic",
            "t",
            "--count",
            "ten",
        ],
        &[
            "--bootstrap",
            "127.0.0.1:9",
            "--topic",
            "t",
            "--property",
            "x",
        ],
        &[
            "--bootstrap",
            "127.0.0.1:9",
            "--topic",
            "t",
            "--property",
            "no.such=1",
        ],
        &[
            "--bootstrap",
            "127.0.0.1:9",
            "--topic",
            "t",
            "--property",
            "fetch.min.bytes=-1",
        ],
        &["--bootstrap", "127.0.0.1:9", "--topic", "t", "--events=yes"],
    ];
    for case in cases {
        let done = run(&args(case));
        assert_eq!(done.code, Some(2), "{case:?}: {:?}", done.stderr);
        assert_eq!(done.stderr.len(), 1, "{case:?}: {:?}", done.stderr);
        assert!(done.stderr[0].starts_with("error: "), "{:?}", done.stderr);
        assert!(done.stdout.is_empty(), "{case:?}: {:?}", done.stdout);
    }
    let help = run(&args(&["--help"]));
    assert_eq!(help.code, Some(0));
    assert!(help.stdout.iter().any(|l| l.contains("--bootstrap")));
}

/// Without `--group` the example looks the topic's partitions up first: a
/// broker that is not there is named within seconds (not after
/// `default.api.timeout.ms`), and the lookup goes on until a signal.
#[test]
fn a_broker_that_is_not_there_is_named_within_seconds_and_the_lookup_goes_on() {
    // Nothing listens on port 9 (discard) on loopback here.
    let a = args(&["--bootstrap", "127.0.0.1:9", "--topic", "t"]);
    let mut running = start(&a);
    // From the process's start (the first `start` also builds it).
    let started = Instant::now();
    let said = |running: &Run| {
        running
            .stderr
            .lock()
            .unwrap()
            .iter()
            .filter(|l| {
                l.starts_with(
                    "error: topic t: all bootstrap brokers unreachable: 127.0.0.1:9 refused",
                )
            })
            .count()
    };
    assert!(
        wait_for(Duration::from_secs(10), || said(&running) >= 1),
        "{:?}",
        running.stderr.lock().unwrap()
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // Asked again about once a second, said each time; still running.
    assert!(
        wait_for(Duration::from_secs(10), || said(&running) >= 3),
        "{:?}",
        running.stderr.lock().unwrap()
    );
    assert!(running.child.try_wait().unwrap().is_none());
    running.terminate();
    let done = running.finish(Duration::from_secs(20));
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
}

/// With `RUST_LOG` unset, the library's warn lines reach stderr beside the
/// example's own error lines.
#[test]
fn the_library_warn_lines_reach_stderr() {
    let mut a = args(&["--bootstrap", "127.0.0.1:9", "--topic", "t", "--group", "g"]);
    a.extend(quick());
    let mut child = Command::new(example_bin("consume"))
        .args(&a)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the example");
    let err = BufReader::new(child.stderr.take().unwrap());
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        match lines.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                let found = line.starts_with("warn: lazykafka: all bootstrap brokers unreachable");
                seen.push(line);
                if found {
                    break;
                }
            }
            Err(_) => continue,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        seen.iter()
            .any(|l| l.starts_with("warn: lazykafka: all bootstrap brokers unreachable")),
        "{seen:?}"
    );
}

#[test]
fn retriable_errors_are_printed_and_consuming_goes_on() {
    // Nothing listens on port 9 (discard) on loopback here; with a group the
    // example subscribes and polls, and `poll` says the broker is
    // unreachable.
    let mut a = args(&["--bootstrap", "127.0.0.1:9", "--topic", "t", "--group", "g"]);
    a.extend(quick());
    let mut running = start(&a);
    let reported =
        wait_for(WAIT, || {
            running.stderr.lock().unwrap().iter().any(|l| {
                l.starts_with("error: all bootstrap brokers unreachable: 127.0.0.1:9 refused")
            })
        });
    assert!(reported, "{:?}", running.stderr.lock().unwrap());
    // Still running, until told to stop.
    assert!(
        running.child.try_wait().unwrap().is_none(),
        "it exited: {:?}",
        running.stderr.lock().unwrap()
    );
    running.terminate();
    let done = running.finish(Duration::from_secs(20));
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    assert!(
        done.stderr.iter().all(|l| l.starts_with("error: ")),
        "{:?}",
        done.stderr
    );
}

#[test]
fn a_fatal_error_ends_the_run_with_one_line() {
    let mock = lazykafka::mock::MockCluster::new(1).unwrap();
    mock.create_topic("t", 1).unwrap();
    mock.push_errors(
        lazykafka::protocol::ApiKey::JoinGroup,
        &[ErrorCode::GroupAuthorizationFailed],
    );
    let mut a = args(&["--bootstrap", &mock.bootstrap_servers(), "--topic", "t"]);
    a.extend(args(&["--group", "g"]));
    a.extend(quick());
    let done = run(&a);
    assert_eq!(done.code, Some(1), "{:?}", done.stderr);
    assert_eq!(done.stderr.len(), 1, "{:?}", done.stderr);
    assert!(
        done.stderr[0]
            .starts_with("error: group \"g\": JoinGroup failed: GROUP_AUTHORIZATION_FAILED"),
        "{:?}",
        done.stderr
    );
}

#[test]
fn count_from_beginning_prints_records_of_every_partition_from_the_mock() {
    let mock = mock_cluster("t", "g");
    let bootstrap = mock.bootstraps().join(",");
    produce_range(&bootstrap, "t", 2, 0..20, "none");
    let mut a = args(&[
        "--bootstrap",
        &bootstrap,
        "--topic",
        "t",
        "--from-beginning",
    ]);
    a.extend(quick());

    let mut seven = a.clone();
    seven.extend(args(&["--count", "7"]));
    let done = run(&seven);
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    assert!(done.stderr.is_empty(), "{:?}", done.stderr);
    assert_eq!(done.stdout.len(), 7, "{:?}", done.stdout);
    for line in &done.stdout {
        let (topic, partition, offset, i) = record(line);
        assert_eq!(topic, "t");
        assert_eq!(partition, (i % 2) as i32, "{line}");
        assert_eq!(offset, (i / 2) as i64, "{line}");
    }

    // Every partition is assigned: all 20 come, once each.
    let mut all = a.clone();
    all.extend(args(&["--count", "20"]));
    let done = run(&all);
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    let seen: BTreeSet<usize> = done.stdout.iter().map(|l| record(l).3).collect();
    assert_eq!(seen, (0..20).collect());
    assert_eq!(done.stdout.len(), 20);
}

// librdkafka's mock does not let a lazykafka member join a group that an
// earlier lazykafka member left (the join stalls), so the mock tests read
// the commit back with librdkafka; tansu_count_group_resume_and_events runs
// the second member.
#[test]
fn a_group_run_commits_exactly_what_it_printed() {
    let mock = mock_cluster("t", "g");
    let bootstrap = mock.bootstraps().join(",");
    produce_range(&bootstrap, "t", 2, 0..30, "none");
    let mut a = args(&["--bootstrap", &bootstrap, "--topic", "t", "--group", "g"]);
    a.extend(args(&["--from-beginning", "--count", "7"]));
    a.extend(quick());
    let done = run(&a);
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    let printed: Vec<_> = done.stdout.iter().map(|l| record(l)).collect();
    assert_eq!(printed.len(), 7);
    // Each partition's printed offsets run from 0 with no gap, and the
    // commit is the next one: the records fetched past the count are not
    // committed.
    let printed = by_partition(&printed);
    let committed = committed(&bootstrap, "g", "t", 2);
    for p in 0..2 {
        let offsets = printed.get(&p).cloned().unwrap_or_default();
        let n = offsets.len() as i64;
        assert_eq!(offsets, (0..n).collect::<Vec<i64>>(), "partition {p}");
        let expected = (n > 0).then_some(n);
        assert!(
            committed[&p] == expected || (n == 0 && committed[&p] == Some(0)),
            "partition {p}: committed {:?}, printed {n}",
            committed[&p]
        );
    }
}

#[test]
fn events_are_json_lines_from_opened_to_closed() {
    let mock = mock_cluster("t", "g");
    let bootstrap = mock.bootstraps().join(",");
    produce_range(&bootstrap, "t", 2, 0..10, "none");
    let mut a = args(&["--bootstrap", &bootstrap, "--topic", "t", "--group", "g"]);
    a.extend(args(&["--from-beginning", "--count", "10", "--events"]));
    a.extend(quick());
    let done = run(&a);
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    assert_eq!(done.stdout.len(), 10);
    let events = events(&done.stderr);
    let kinds: BTreeSet<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    for kind in ["opened", "ready", "closed"] {
        assert!(kinds.contains(kind), "no {kind}: {:?}", done.stderr);
    }
    // The bootstrap connection's broker is not known when it opens.
    let first = events.iter().find(|e| e["event"] == "opened").unwrap();
    assert_eq!(first["purpose"], "bootstrap");
    assert!(first["broker"].is_null(), "{first}");
    // Closing closes the coordinator and leader connections.
    let closed: BTreeSet<(String, i64)> = events
        .iter()
        .filter(|e| e["event"] == "closed" && e["purpose"] != "bootstrap")
        .map(|e| {
            (
                e["purpose"].as_str().unwrap().to_owned(),
                e["broker"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        closed,
        BTreeSet::from([
            ("coordinator".to_owned(), 2),
            ("leader".to_owned(), 1),
            ("leader".to_owned(), 3),
        ]),
        "{:?}",
        done.stderr
    );
    // Times only go forward.
    let times: Vec<u64> = events.iter().map(|e| e["t_ms"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

#[test]
fn sigterm_commits_closes_and_exits_zero() {
    let mock = mock_cluster("t", "g");
    let bootstrap = mock.bootstraps().join(",");
    produce_range(&bootstrap, "t", 2, 0..6, "none");
    let mut a = args(&["--bootstrap", &bootstrap, "--topic", "t", "--group", "g"]);
    a.extend(args(&["--from-beginning", "--events"]));
    a.extend(quick());
    let mut running = start(&a);
    assert!(
        running.wait_lines(6, WAIT),
        "6 records did not come: {:?}",
        running.stdout_seen
    );
    // It now waits for records that never come.
    running.terminate();
    let done = running.finish(Duration::from_secs(20));
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    assert_eq!(done.stdout.len(), 6);
    let events = events(&done.stderr);
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "closed" && e["purpose"] == "coordinator"),
        "{:?}",
        done.stderr
    );
    // It committed what it printed: three records of each partition.
    let committed = committed(&bootstrap, "g", "t", 2);
    assert_eq!(committed, BTreeMap::from([(0, Some(3)), (1, Some(3))]));
}

#[test]
fn sigterm_without_a_group_while_waiting_for_records() {
    let mock = mock_cluster("t", "g");
    let bootstrap = mock.bootstraps().join(",");
    // Latest: nothing comes.
    let mut a = args(&["--bootstrap", &bootstrap, "--topic", "t", "--events"]);
    a.extend(quick());
    let running = start(&a);
    // Terminate once both leader connections are ready (it is polling).
    assert!(
        wait_for(WAIT, || {
            let stderr = running.stderr.lock().unwrap();
            stderr
                .iter()
                .filter(|l| l.contains(r#""purpose":"leader""#))
                .filter(|l| l.contains(r#""event":"ready""#) || l.contains(r#""event":"promoted""#))
                .count()
                >= 2
        }),
        "no leader connections: {:?}",
        running.stderr.lock().unwrap()
    );
    running.terminate();
    let done = running.finish(Duration::from_secs(20));
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    assert!(done.stdout.is_empty());
    let closed = events(&done.stderr)
        .iter()
        .filter(|e| e["event"] == "closed" && e["reason"] == "shutdown")
        .count();
    assert_eq!(closed, 2, "{:?}", done.stderr);
}

#[test]
fn partitions_for_lists_every_partition_of_a_topic() {
    crate::common::block_on(async {
        let mock = RawMock::new(3);
        mock.create_topic("four", 4);
        let bootstrap = mock.bootstraps().join(",");
        let config = ConsumerConfig::builder()
            .bootstrap_servers(&bootstrap)
            .set("allow.auto.create.topics", "false")
            .unwrap()
            .set("default.api.timeout.ms", "2000")
            .unwrap()
            .build()
            .unwrap();
        let consumer = Consumer::new(config).unwrap();
        let found = consumer.partitions_for("four").await.unwrap();
        assert_eq!(
            found,
            (0..4)
                .map(|p| TopicPartition::new("four", p))
                .collect::<Vec<_>>()
        );
        // A topic the cluster does not have: its error, naming it, once
        // topic.metadata.propagation.max.ms (5 s) is up.
        let started = Instant::now();
        match consumer.partitions_for("missing").await {
            Err(Error::Topic { topic, code }) => {
                assert_eq!(topic, "missing");
                assert_eq!(code, ErrorCode::UnknownTopicOrPartition)
            }
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(10));
        consumer.close().await.unwrap();
        assert!(matches!(
            consumer.partitions_for("four").await,
            Err(Error::Closed)
        ));
    })
}

/// `--exit-at-end` (as `kcat -e`): every record of both partitions, then
/// exit 0 by itself; in a group, the commit covers everything printed.
#[test]
fn exit_at_end_reads_every_partition_to_its_end_and_exits_zero() {
    let mock = mock_cluster("t", "g");
    let bootstrap = mock.bootstraps().join(",");
    produce_range(&bootstrap, "t", 2, 0..20, "none");
    let mut a = args(&[
        "--bootstrap",
        &bootstrap,
        "--topic",
        "t",
        "--from-beginning",
        "--exit-at-end",
    ]);
    a.extend(quick());
    let done = run(&a);
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    let printed: Vec<_> = done.stdout.iter().map(|l| record(l)).collect();
    let printed = by_partition(&printed);
    for p in 0..2 {
        assert_eq!(printed[&p], (0..10).collect::<Vec<i64>>(), "partition {p}");
    }
    // The end of a partition is no error: nothing said on stderr.
    assert!(done.stderr.is_empty(), "{:?}", done.stderr);

    let mut grouped = a.clone();
    grouped.extend(args(&["--group", "g"]));
    let done = run(&grouped);
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    assert_eq!(done.stdout.len(), 20, "{:?}", done.stdout);
    let committed = committed(&bootstrap, "g", "t", 2);
    assert_eq!(committed, BTreeMap::from([(0, Some(10)), (1, Some(10))]));
}

#[test]
fn tansu_count_group_resume_and_events() {
    let Some(addr) = common::tansu_addr("tansu_count_group_resume_and_events") else {
        return;
    };
    let topic = format!("lk-example-{}", std::process::id());
    let group = format!("lk-example-group-{}", std::process::id());
    produce_range(&addr, &topic, 1, 0..10, "none");
    let base = {
        let mut a = args(&["--bootstrap", &addr, "--topic", &topic, "--from-beginning"]);
        a.extend(quick());
        a
    };

    // Manual assignment, with events.
    let mut manual = base.clone();
    manual.extend(args(&["--count", "4", "--events"]));
    let done = run(&manual);
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    let offsets: Vec<i64> = done.stdout.iter().map(|l| record(l).2).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3]);
    let events = events(&done.stderr);
    for kind in ["opened", "ready", "closed"] {
        assert!(
            events.iter().any(|e| e["event"] == kind),
            "no {kind}: {:?}",
            done.stderr
        );
    }

    // A group: the second run goes on where the first stopped.
    let mut grouped = base.clone();
    grouped.extend(args(&["--group", &group, "--count", "6"]));
    let done = run(&grouped);
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    let offsets: Vec<i64> = done.stdout.iter().map(|l| record(l).2).collect();
    assert_eq!(offsets, (0..6).collect::<Vec<i64>>());
    let mut rest = base.clone();
    rest.extend(args(&["--group", &group]));
    let mut running = start(&rest);
    assert!(running.wait_lines(4, WAIT), "{:?}", running.stdout_seen);
    running.terminate();
    let done = running.finish(Duration::from_secs(20));
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    let offsets: Vec<i64> = done.stdout.iter().map(|l| record(l).2).collect();
    assert_eq!(offsets, (6..10).collect::<Vec<i64>>());

    // Everything committed: with `--exit-at-end` the group's next member
    // finds the partition at its end at once, prints nothing and exits 0.
    let mut at_end = base.clone();
    at_end.extend(args(&["--group", &group, "--exit-at-end"]));
    let done = run(&at_end);
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    assert!(done.stdout.is_empty(), "{:?}", done.stdout);
}

#[test]
fn formats_and_start_offsets() {
    let mock = mock_cluster("t", "g");
    let bootstrap = mock.bootstraps().join(",");
    // Record i goes to partition i % 2 at offset i / 2.
    produce_range(&bootstrap, "t", 2, 0..20, "none");
    let base = |extra: &[&str]| {
        let mut a = args(&["--bootstrap", &bootstrap, "--topic", "t"]);
        a.extend(quick());
        a.extend(args(extra));
        a
    };
    let sorted = |mut v: Vec<String>| {
        v.sort_unstable();
        v
    };

    // Offset 5 of each partition, values only.
    let done = run(&base(&[
        "--format", "value", "--offset", "5", "--count", "10",
    ]));
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    let expected: Vec<String> = (10..20).map(|i| format!("value-{i}")).collect();
    assert_eq!(sorted(done.stdout), sorted(expected));

    // The last 2 of each partition, key TAB value.
    let done = run(&base(&[
        "--format=key-value",
        "--offset=-2",
        "--count",
        "4",
    ]));
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    let expected: Vec<String> = (16..20).map(|i| format!("key-{i}\tvalue-{i}")).collect();
    assert_eq!(sorted(done.stdout), sorted(expected));

    // More records back than there are: from the beginning.
    let done = run(&base(&["--offset", "-100", "--count", "20"]));
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    let seen: BTreeSet<usize> = done.stdout.iter().map(|l| record(l).3).collect();
    assert_eq!(seen, (0..20).collect());

    // Bad values, and --offset with a group.
    for bad in [
        &["--offset", "x"][..],
        &["--offset", "--5"],
        &["--offset", "@soon"],
        &["--format", "xml"],
        &["--offset", "3", "--group", "g"],
        &["--stats", "0"],
    ] {
        let done = run(&base(bad));
        assert_eq!(done.code, Some(2), "{bad:?}: {:?}", done.stderr);
        assert_eq!(done.stderr.len(), 1, "{bad:?}: {:?}", done.stderr);
        assert!(done.stderr[0].starts_with("error: "), "{:?}", done.stderr);
    }
}

/// `--offset @T` on `lazykafka::mock`, whose records carry the timestamps
/// given: each partition starts at its first record at or after T.
#[test]
fn offset_at_a_timestamp() {
    let mock = lazykafka::mock::MockCluster::new(1).unwrap();
    mock.create_topic("t", 2).unwrap();
    for p in 0..2 {
        let records = (0..5).map(|i| {
            lazykafka::mock::MockRecord::new(format!("{p}-{i}")).timestamp(1000 * (i + 1))
        });
        mock.produce("t", p, records).unwrap();
    }
    let mut a = args(&[
        "--bootstrap",
        &mock.bootstrap_servers(),
        "--topic",
        "t",
        "--format",
        "value",
        "--offset",
        "@3500",
        "--count",
        "4",
    ]);
    a.extend(quick());
    let done = run(&a);
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
    let mut got = done.stdout;
    got.sort_unstable();
    assert_eq!(got, ["0-3", "0-4", "1-3", "1-4"]);
}

/// `--stats N`: metrics JSON lines on stderr; once everything is read the
/// lag of both partitions is 0.
#[test]
fn stats_print_the_lag_as_json() {
    let mock = mock_cluster("t", "g");
    let bootstrap = mock.bootstraps().join(",");
    produce_range(&bootstrap, "t", 2, 0..20, "none");
    let mut a = args(&[
        "--bootstrap",
        &bootstrap,
        "--topic",
        "t",
        "--from-beginning",
        "--stats",
        "50",
    ]);
    a.extend(quick());
    let mut running = start(&a);
    assert!(running.wait_lines(20, WAIT), "{:?}", running.stdout_seen);
    let caught_up = |lines: &[String]| {
        lines.iter().any(|l| {
            let Ok(v) = serde_json::from_str::<Value>(l) else {
                return false;
            };
            let parts = v["partitions"].as_array().cloned().unwrap_or_default();
            parts.len() == 2
                && parts.iter().all(|p| p["lag"] == 0 && p["position"] == 10)
                && v["total_lag"] == 0
                && v["brokers"].as_object().is_some_and(|b| !b.is_empty())
        })
    };
    assert!(
        wait_for(WAIT, || caught_up(&running.stderr.lock().unwrap())),
        "{:?}",
        running.stderr.lock().unwrap()
    );
    running.terminate();
    let done = running.finish(WAIT);
    assert_eq!(done.code, Some(0), "{:?}", done.stderr);
}

/// A reader that goes away (`consume ... | head -1`): the next batch's
/// write fails, and the example closes and exits 0.
#[test]
fn a_closed_stdout_ends_the_run_with_exit_zero() {
    let mock = mock_cluster("t", "g");
    let bootstrap = mock.bootstraps().join(",");
    produce_range(&bootstrap, "t", 2, 0..4, "none");
    let mut a = args(&[
        "--bootstrap",
        &bootstrap,
        "--topic",
        "t",
        "--from-beginning",
    ]);
    a.extend(quick());
    let mut child = Command::new(example_bin("consume"))
        .args(&a)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the example");
    {
        let mut first = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut first).unwrap();
        assert!(first.contains(r#""topic":"t""#), "{first}");
        // The read end closes here.
    }
    // The next records meet the closed pipe.
    let mut status = None;
    let mut more = 4;
    let exited = wait_for(WAIT, || {
        produce_range(&bootstrap, "t", 2, more..more + 2, "none");
        more += 2;
        status = child.try_wait().unwrap();
        status.is_some()
    });
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(exited, "the example went on after its stdout closed");
    assert_eq!(status.unwrap().code(), Some(0));
}
