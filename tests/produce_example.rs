//! The `produce` example, run as a child process against librdkafka's mock
//! cluster and `lazykafka::mock` (the same assertions on both): stdin lines
//! with keys, generated records, `--partition`, `--report`, `--events`,
//! records refused, an unreachable cluster and bad flags. What arrived is
//! read back by librdkafka's consumer. Every wait has a deadline.
//!
//! The binary comes from `cargo build --example produce`, as in
//! `tests/consume_example.rs` (see `common::examples`).

// Drives a `Producer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::{standard, TestCluster};
use common::examples::{close_inherited_fds, example_bin};
use common::wait_for;
use lazykafka::error::{ApiKey, ErrorCode};
use lazykafka::producer::partition_for_key;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::ClientConfig;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

/// What a run of the example left.
struct Finished {
    code: Option<i32>,
    stdout: Vec<String>,
    stderr: Vec<String>,
    took: Duration,
}

/// Runs the example with `stdin` as its input and the library's log lines
/// off (`RUST_LOG=off`: stderr holds the example's own lines only); kills
/// it (and fails) if it has not exited within `timeout`.
fn run_with(args: &[String], stdin: &[u8], timeout: Duration) -> Finished {
    let mut command = Command::new(example_bin("produce"));
    command
        .args(args)
        .env("RUST_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // librdkafka's mock accepts without SOCK_CLOEXEC: the child must not
    // hold the broker side of this process's connections.
    let started = Instant::now();
    let mut child = close_inherited_fds(&mut command)
        .spawn()
        .expect("start the example");
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    // Written (and closed) by a thread: the pipes must not fill up while
    // the test waits for the child.
    std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let lines = |pipe: Box<dyn std::io::Read + Send>| {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let lines: Vec<String> = BufReader::new(pipe).lines().map_while(Result::ok).collect();
            let _ = tx.send(lines);
        });
        rx
    };
    let stdout = lines(Box::new(child.stdout.take().unwrap()));
    let stderr = lines(Box::new(child.stderr.take().unwrap()));
    let mut status = None;
    let exited = wait_for(timeout, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let took = started.elapsed();
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
        let stderr = stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        panic!("the example did not exit within {timeout:?}; stderr: {stderr:?}");
    }
    // Both pipes close with the process.
    Finished {
        code: status.unwrap().code(),
        stdout: stdout.recv_timeout(Duration::from_secs(5)).unwrap(),
        stderr: stderr.recv_timeout(Duration::from_secs(5)).unwrap(),
        took,
    }
}

fn run(args: &[String], stdin: &[u8]) -> Finished {
    run_with(args, stdin, WAIT)
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// The example's flags for `bootstrap`, topic `t`, and `extra`.
fn to_t(bootstrap: &str, extra: &[&str]) -> Vec<String> {
    let mut a = args(&["--bootstrap", bootstrap, "--topic", "t"]);
    a.extend(args(extra));
    a
}

/// A record read back: partition, offset, key, value.
type Read = (i32, i64, Option<Vec<u8>>, Vec<u8>);

/// Every record of `topic`'s partitions 0 and 1, read from the beginning
/// by librdkafka's consumer until `count` came (or the deadline passed),
/// and the partitions' high watermarks.
fn read_back(bootstrap: &str, topic: &str, count: usize) -> (Vec<Read>, BTreeMap<i32, i64>) {
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "reader")
        .set("enable.auto.commit", "false")
        .create()
        .expect("librdkafka consumer");
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..2 {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .unwrap();
    }
    reader.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + WAIT;
    while out.len() < count && Instant::now() < deadline {
        let Some(message) = reader.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = message.expect("librdkafka reads what was produced");
        out.push((
            m.partition(),
            m.offset(),
            m.key().map(<[u8]>::to_vec),
            m.payload().unwrap_or_default().to_vec(),
        ));
    }
    let highs = (0..2)
        .map(|p| (p, reader.fetch_watermarks(topic, p, WAIT).unwrap().1))
        .collect();
    (out, highs)
}

/// The report lines, checked for exactly the documented keys: (partition,
/// offset, key, value).
fn reports(stdout: &[String]) -> Vec<(i32, i64, Option<String>, String)> {
    stdout
        .iter()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let keys: BTreeSet<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                BTreeSet::from(["topic", "partition", "offset", "key", "value"]),
                "{line}"
            );
            assert_eq!(v["topic"], "t", "{line}");
            (
                v["partition"].as_i64().unwrap() as i32,
                v["offset"].as_i64().unwrap(),
                v["key"].as_str().map(str::to_owned),
                v["value"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Whether the items of each partition come in ascending order of `of`.
fn ascending_per_partition<T>(items: &[T], of: impl Fn(&T) -> (i32, i64)) -> bool {
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    items.iter().all(|item| {
        let (p, n) = of(item);
        last.insert(p, n).is_none_or(|before| before < n)
    })
}

/// Lines `key:value` with keys, values holding the separator again, and
/// lines without it (no key): each arrives once, in order per partition,
/// keyed ones where the key hashes to; the report names exactly where
/// librdkafka finds them.
async fn stdin_lines_with_keys_arrive_in_order<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    // (key, value) of line i.
    let expected: Vec<(Option<String>, String)> = (0..60)
        .map(|i| match i % 10 {
            9 => (None, format!("v{i}")),
            4 => (Some(format!("k{}", i % 7)), format!("v{i}:more")),
            _ => (Some(format!("k{}", i % 7)), format!("v{i}")),
        })
        .collect();
    let mut input = String::new();
    for (key, value) in &expected {
        match key {
            Some(k) => input.push_str(&format!("{k}:{value}\n")),
            None => input.push_str(&format!("{value}\n")),
        }
    }
    let done = run(
        &to_t(&bootstrap, &["--key-separator=:", "--report"]),
        input.as_bytes(),
    );
    assert_eq!(done.code, Some(0), "{} {:?}", mock.name(), done.stderr);
    assert!(done.stderr.is_empty(), "{:?}", done.stderr);
    let reported = reports(&done.stdout);
    assert_eq!(reported.len(), expected.len(), "{:?}", done.stdout);
    let index_of = |value: &str| -> usize {
        let number = value.strip_prefix('v').unwrap();
        number.split(':').next().unwrap().parse().unwrap()
    };
    for (p, _, key, value) in &reported {
        let i = index_of(value);
        assert_eq!((key, value), (&expected[i].0, &expected[i].1));
        if let Some(k) = key {
            assert_eq!(*p, partition_for_key(k.as_bytes(), 2).unwrap(), "{k}");
        }
    }
    // In delivery order: offsets ascend per partition.
    assert!(
        ascending_per_partition(&reported, |r| (r.0, r.1)),
        "{:?}",
        done.stdout
    );

    let (read, highs) = read_back(&bootstrap, "t", expected.len());
    assert_eq!(read.len(), expected.len(), "{}", mock.name());
    assert_eq!(highs.values().sum::<i64>(), expected.len() as i64);
    let from_report: BTreeMap<(i32, i64), (Option<String>, String)> = reported
        .iter()
        .map(|(p, o, k, v)| ((*p, *o), (k.clone(), v.clone())))
        .collect();
    let from_reader: BTreeMap<(i32, i64), (Option<String>, String)> = read
        .iter()
        .map(|(p, o, k, v)| {
            let k = k.as_ref().map(|k| String::from_utf8(k.clone()).unwrap());
            ((*p, *o), (k, String::from_utf8(v.clone()).unwrap()))
        })
        .collect();
    assert_eq!(from_report, from_reader, "{}", mock.name());
    // Each partition holds its lines in input order.
    assert!(ascending_per_partition(&read, |r| (
        r.0,
        index_of(std::str::from_utf8(&r.3).unwrap()) as i64
    )));
}

/// `--generate 1000 --size 100 --keys 7`: 1000 records of 100 bytes, each
/// starting with its zero-padded sequence number, keyed `k<i mod 7>`.
async fn generated_records_arrive_with_their_sequence_numbers<C: TestCluster>() {
    const N: usize = 1000;
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    let done = run(
        &to_t(
            &bootstrap,
            &["--generate", "1000", "--size", "100", "--keys", "7"],
        ),
        b"",
    );
    assert_eq!(done.code, Some(0), "{} {:?}", mock.name(), done.stderr);
    assert!(done.stderr.is_empty(), "{:?}", done.stderr);
    assert!(done.stdout.is_empty(), "no --report: {:?}", done.stdout);
    let (read, highs) = read_back(&bootstrap, "t", N);
    assert_eq!(read.len(), N, "{}", mock.name());
    assert_eq!(highs.values().sum::<i64>(), N as i64);
    let mut seen = BTreeSet::new();
    let mut numbered = Vec::new();
    for (p, o, key, value) in &read {
        assert_eq!(value.len(), 100, "{p}@{o}");
        let i: u64 = std::str::from_utf8(&value[..10]).unwrap().parse().unwrap();
        assert!(value[10..].iter().all(|b| *b == b'.'), "{p}@{o}");
        let k = format!("k{}", i % 7);
        assert_eq!(key.as_deref(), Some(k.as_bytes()), "{p}@{o}");
        assert_eq!(*p, partition_for_key(k.as_bytes(), 2).unwrap(), "{k}");
        assert!(seen.insert(i), "{i} twice");
        numbered.push((*p, i as i64));
    }
    assert_eq!(seen, (0..N as u64).collect());
    // Sent in sequence order: each partition holds them so.
    assert!(ascending_per_partition(&numbered, |r| *r));
}

/// `--partition 1`: every record there, keyed or not, in input order.
async fn partition_flag_sends_every_record_there<C: TestCluster>() {
    const N: usize = 20;
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    let input: String = (0..N)
        .map(|i| match i % 2 {
            0 => format!("k{i},v{i}\n"),
            _ => format!("v{i}\n"),
        })
        .collect();
    let done = run(
        &to_t(
            &bootstrap,
            &["--partition", "1", "--key-separator", ",", "--report"],
        ),
        input.as_bytes(),
    );
    assert_eq!(done.code, Some(0), "{} {:?}", mock.name(), done.stderr);
    let reported = reports(&done.stdout);
    let places: Vec<(i32, i64)> = reported.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(
        places,
        (0..N as i64).map(|o| (1, o)).collect::<Vec<_>>(),
        "{}",
        mock.name()
    );
    let (read, highs) = read_back(&bootstrap, "t", N);
    assert_eq!(highs, BTreeMap::from([(0, 0), (1, N as i64)]));
    let values: Vec<(i32, i64, Vec<u8>)> = read.into_iter().map(|r| (r.0, r.1, r.3)).collect();
    let expected: Vec<(i32, i64, Vec<u8>)> = (0..N)
        .map(|i| (1, i as i64, format!("v{i}").into_bytes()))
        .collect();
    assert_eq!(values, expected, "{}", mock.name());
}

/// The connection events as JSON lines, checked for exactly the
/// documented keys.
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
                ["bootstrap", "leader"].contains(&v["purpose"].as_str().unwrap()),
                "{line}"
            );
            assert_eq!(v["event"] == "closed", !v["reason"].is_null(), "{line}");
            v
        })
        .collect()
}

/// `--events`: a bootstrap connection first (its broker unknown), then one
/// per leader written to (brokers 1 and 3), closed on close.
async fn events_name_the_bootstrap_and_leader_connections<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    // Keys k0..k6 cover both partitions.
    let partitions: BTreeSet<i32> = (0..7)
        .map(|k| partition_for_key(format!("k{k}").as_bytes(), 2).unwrap())
        .collect();
    assert_eq!(partitions, BTreeSet::from([0, 1]));
    let done = run(
        &to_t(
            &bootstrap,
            &[
                "--generate",
                "100",
                "--size",
                "10",
                "--keys",
                "7",
                "--events",
            ],
        ),
        b"",
    );
    assert_eq!(done.code, Some(0), "{} {:?}", mock.name(), done.stderr);
    let events = events(&done.stderr);
    let first = events.iter().find(|e| e["event"] == "opened").unwrap();
    assert_eq!(first["purpose"], "bootstrap", "{:?}", done.stderr);
    assert!(first["broker"].is_null(), "{first}");
    let leaders: BTreeSet<i64> = events
        .iter()
        .filter(|e| e["purpose"] == "leader" && e["event"] == "closed")
        .map(|e| e["broker"].as_i64().unwrap())
        .collect();
    assert_eq!(
        leaders,
        BTreeSet::from([1, 3]),
        "{} {:?}",
        mock.name(),
        done.stderr
    );
    let times: Vec<u64> = events.iter().map(|e| e["t_ms"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

/// Records the leader refuses for good: one `error:` line each, naming
/// the record, topic, partition and the broker's error; exit 1.
async fn refused_records_are_named_one_line_each<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    mock.push_errors(ApiKey::Produce, ErrorCode::TopicAuthorizationFailed, 100);
    let done = run(
        &to_t(&bootstrap, &["--partition", "0", "--report"]),
        b"a\nb\nc\nd\ne\n",
    );
    assert_eq!(done.code, Some(1), "{} {:?}", mock.name(), done.stderr);
    assert!(done.stdout.is_empty(), "{:?}", done.stdout);
    let lines: BTreeSet<String> = done.stderr.iter().cloned().collect();
    let expected: BTreeSet<String> = (0..5)
        .map(|i| {
            format!("error: record {i}: t-0: Produce refused with TOPIC_AUTHORIZATION_FAILED (29)")
        })
        .collect();
    assert_eq!(lines, expected, "{}", mock.name());
    assert_eq!(done.stderr.len(), 5, "{:?}", done.stderr);
}

/// A partition the topic does not have: `send` refuses the first record,
/// which ends the input; exit 1.
async fn a_partition_out_of_range_ends_the_input<C: TestCluster>() {
    let mock: C = standard();
    let done = run(
        &to_t(&mock.bootstrap(), &["--partition", "5"]),
        b"a\nb\nc\n",
    );
    assert_eq!(done.code, Some(1), "{} {:?}", mock.name(), done.stderr);
    assert_eq!(
        done.stderr,
        [
            "error: record 0: t-5: no partition for a record: the record names partition 5 \
             of topic \"t\", which has partitions 0..2"
        ],
        "{}",
        mock.name()
    );
}

/// Lines are sent as they come, not at the end of the input: their
/// reports arrive while stdin is still open; SIGTERM then ends the input,
/// and the run exits 0 (everything sent was delivered).
async fn reports_come_while_stdin_is_open_and_sigterm_ends_the_input<C: TestCluster>() {
    let mock: C = standard();
    let mut command = Command::new(example_bin("produce"));
    command
        .args(to_t(&mock.bootstrap(), &["--report", "--events"]))
        .env("RUST_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = close_inherited_fds(&mut command)
        .spawn()
        .expect("start the example");
    let mut input = child.stdin.take().unwrap();
    input.write_all(b"one\ntwo\nthree\n").unwrap();
    input.flush().unwrap();
    let (tx, lines) = channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    let reported = reports(&seen);
    let values: BTreeSet<String> = reported.into_iter().map(|r| r.3).collect();
    if values.len() < 3 {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{}: reports before the end of stdin: {seen:?}", mock.name());
    }
    assert_eq!(
        values,
        BTreeSet::from(["one", "two", "three"].map(String::from))
    );
    // stdin stays open: only the signal ends the run.
    assert!(child.try_wait().unwrap().is_none());
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM failed");
    let mut code = None;
    let exited = wait_for(Duration::from_secs(20), || {
        code = child.try_wait().unwrap().map(|s| s.code());
        code.is_some()
    });
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(exited, "{}: no exit after SIGTERM", mock.name());
    assert_eq!(code.unwrap(), Some(0), "{}", mock.name());
    drop(input);
}

on_both_mocks!(
    stdin_lines_with_keys_arrive_in_order,
    generated_records_arrive_with_their_sequence_numbers,
    partition_flag_sends_every_record_there,
    events_name_the_bootstrap_and_leader_connections,
    refused_records_are_named_one_line_each,
    a_partition_out_of_range_ends_the_input,
    reports_come_while_stdin_is_open_and_sigterm_ends_the_input,
);

/// Nothing listens on port 9 (discard) on loopback here: the first record
/// is refused within seconds (every bootstrap address failed), not after
/// `max.block.ms` (60 s, the default), named with the cause, and the run
/// ends with exit 1.
#[test]
fn an_unreachable_cluster_fails_within_seconds() {
    let done = run_with(
        &to_t("127.0.0.1:9", &[]),
        b"a\nb\nc\n",
        Duration::from_secs(30),
    );
    assert_eq!(done.code, Some(1), "{:?}", done.stderr);
    assert!(done.took < Duration::from_secs(15), "{:?}", done.took);
    assert_eq!(done.stderr.len(), 1, "{:?}", done.stderr);
    let line = &done.stderr[0];
    assert!(line.starts_with("error: record 0: t: "), "{line}");
    assert!(line.contains("unreachable"), "{line}");
    assert!(line.contains("127.0.0.1:9 refused"), "{line}");
    assert!(done.stdout.is_empty());
}

#[test]
fn bad_flags_exit_two_with_one_line() {
    let b = "127.0.0.1:9";
    let cases: &[&[&str]] = &[
        &["--bogus"],
        &["--topic", "t"],
        &["--bootstrap", b],
        &["--bootstrap", b, "--topic"],
        &["--bootstrap", b, "--topic", "t", "--topic", "u"],
        &["--bootstrap", b, "--topic", "t", "--partition", "-1"],
        &["--bootstrap", b, "--topic", "t", "--partition", "one"],
        &["--bootstrap", b, "--topic", "t", "--key-separator="],
        &["--bootstrap", b, "--topic", "t", "--generate", "10"],
        &["--bootstrap", b, "--topic", "t", "--size", "100"],
        &[
            "--bootstrap",
            b,
            "--topic",
            "t",
            "--generate",
            "x",
            "--size",
            "100",
        ],
        &[
            "--bootstrap",
            b,
            "--topic",
            "t",
            "--generate",
            "10",
            "--size",
            "9",
        ],
        &["--bootstrap", b, "--topic", "t", "--keys", "3"],
        &[
            "--bootstrap",
            b,
            "--topic",
            "t",
            "--generate",
            "10",
            "--size",
            "10",
            "--keys",
            "0",
        ],
        &["--bootstrap", b, "--topic", "t", "--property", "x"],
        &["--bootstrap", b, "--topic", "t", "--property", "no.such=1"],
        &[
            "--bootstrap",
            b,
            "--topic",
            "t",
            "--property",
            "linger.ms=soon",
        ],
        &[
            "--bootstrap",
            b,
            "--topic",
            "t",
            "--property",
            "transactional.id=x",
        ],
        &["--bootstrap", b, "--topic", "t", "--events=yes"],
        &["--bootstrap", b, "--topic", "t", "--report=1"],
    ];
    for case in cases {
        let done = run(&args(case), b"a\n");
        assert_eq!(done.code, Some(2), "{case:?}: {:?}", done.stderr);
        assert_eq!(done.stderr.len(), 1, "{case:?}: {:?}", done.stderr);
        assert!(done.stderr[0].starts_with("error: "), "{:?}", done.stderr);
        assert!(done.stdout.is_empty(), "{case:?}: {:?}", done.stdout);
    }
    let help = run(&args(&["--help"]), b"");
    assert_eq!(help.code, Some(0));
    assert!(help.stdout.iter().any(|l| l.contains("--key-separator")));
}
