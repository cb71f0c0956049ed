//! The `lifecycle` example (the README's main command), run as a child
//! process: on its own in-process cluster (`lazykafka::mock`) and, with
//! `--bootstrap`, on librdkafka's mock cluster, the same census of sockets
//! per phase, under the classic group protocol and, with
//! `--group-protocol consumer`, under KIP-848's; and with `--producer`, a
//! producer's connection events in the order docs/producer.md promises.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::clusters::{self, TestCluster};
use common::examples::{close_inherited_fds, example_bin};
use common::peers::produce;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs the example and returns its stdout; fails on a non-zero exit.
fn run(args: &[&str]) -> String {
    let out = Command::new(example_bin("lifecycle"))
        .args(args)
        .output()
        .expect("run the lifecycle example");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The census line of a phase, with runs of spaces collapsed.
fn census(stdout: &str, phase: &str) -> String {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(phase))
        .unwrap_or_else(|| panic!("no census line for {phase:?} in\n{stdout}"));
    line.trim_start()[phase.len()..]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The phases every cluster with the coordinator on broker 2 and leaders on
/// brokers 1 and 3 must show.
fn assert_phases(stdout: &str) {
    let all = "3 socket(s): coordinator (broker 2), leader (broker 1), leader (broker 3)";
    assert_eq!(census(stdout, "after new + subscribe"), "no sockets");
    assert_eq!(census(stdout, "while consuming"), all);
    assert_eq!(
        census(stdout, "paused, after connections.max.idle.ms"),
        "1 socket(s): coordinator (broker 2)"
    );
    assert_eq!(census(stdout, "resumed"), all);
    assert_eq!(census(stdout, "after close"), "no sockets");
    // The leaders' reconnection is printed under the resume step, and
    // closing only closes.
    let resumed = step_events(stdout, 4);
    for broker in ["1", "3"] {
        assert!(
            resumed
                .iter()
                .any(|e| e.0 == "ready" && e.1 == broker && e.2 == "leader"),
            "no ready leader {broker} under step 4\n{stdout}"
        );
    }
    let closing = step_events(stdout, 5);
    assert!(
        closing.iter().all(|e| e.0 == "closed"),
        "step 5 shows more than closes: {closing:?}\n{stdout}"
    );
    // The bootstrap connection was retired (or promoted to a leader one).
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(" retired ") || l.contains(" promoted ")),
        "{stdout}"
    );
    // Leader connections closed as idle while paused.
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("leader") && l.trim_end().ends_with("idle")),
        "{stdout}"
    );
}

/// The APIs broker `id` of the example's own cluster saw, from the
/// "what the brokers saw" lines.
fn broker_apis(stdout: &str, id: i32) -> (String, Vec<String>) {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("broker {id}:")))
        .unwrap_or_else(|| panic!("no line for broker {id} in\n{stdout}"))
        .to_owned();
    let list = line.split("; ").nth(1).unwrap_or_default().to_owned();
    let apis = list
        .split(", ")
        .filter_map(|item| item.split_whitespace().next().map(str::to_owned))
        .collect();
    (line, apis)
}

#[test]
fn with_no_arguments_it_walks_its_own_cluster() {
    let stdout = run(&[]);
    assert!(stdout.contains("lazykafka::mock cluster"), "{stdout}");
    assert!(stdout.contains("group protocol: classic"), "{stdout}");
    assert_phases(&stdout);
    // The brokers' own view: the coordinator got the group traffic, the
    // leaders the fetches.
    let broker = |id: i32| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("broker {id}:")))
            .unwrap_or_else(|| panic!("no line for broker {id} in\n{stdout}"))
            .to_owned()
    };
    let apis = |id: i32| -> Vec<String> {
        let line = broker(id);
        let list = line.split("; ").nth(1).unwrap_or_default().to_owned();
        list.split(", ")
            .filter_map(|item| item.split_whitespace().next().map(str::to_owned))
            .collect()
    };
    let has = |id: i32, api: &str| apis(id).iter().any(|a| a == api);
    assert!(has(2, "JoinGroup") && !has(2, "Fetch"), "{}", broker(2));
    assert!(has(1, "Fetch") && !has(1, "JoinGroup"), "{}", broker(1));
    assert!(has(3, "Fetch") && !has(3, "JoinGroup"), "{}", broker(3));
}

#[test]
fn with_bootstrap_it_walks_librdkafkas_mock() {
    let mock = clusters::librdkafka();
    TestCluster::create_topic(&mock, "walk", &[1, 3]);
    TestCluster::set_coordinator(&mock, "walkers", 2);
    produce(&mock.bootstrap(), "walk", 2, 10, "none");
    let stdout = run(&[
        "--bootstrap",
        &mock.bootstrap(),
        "--topic",
        "walk",
        "--group",
        "walkers",
    ]);
    assert_phases(&stdout);
}

#[test]
fn with_group_protocol_consumer_it_walks_its_own_cluster() {
    let stdout = run(&["--group-protocol", "consumer"]);
    assert!(stdout.contains("group protocol: consumer"), "{stdout}");
    assert_phases(&stdout);
    // KIP-848 on the coordinator: ConsumerGroupHeartbeat (the join, the
    // heartbeats, the leave), no classic group API anywhere.
    let (line, apis) = broker_apis(&stdout, 2);
    assert!(apis.iter().any(|a| a == "ConsumerGroupHeartbeat"), "{line}");
    assert!(apis.iter().any(|a| a == "OffsetCommit"), "{line}");
    for id in 1..=3 {
        let (line, apis) = broker_apis(&stdout, id);
        for classic in ["JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"] {
            assert!(!apis.iter().any(|a| a == classic), "{line}");
        }
        if id != 2 {
            assert!(apis.iter().any(|a| a == "Fetch"), "{line}");
            assert!(
                !apis.iter().any(|a| a == "ConsumerGroupHeartbeat"),
                "{line}"
            );
        }
    }
}

#[test]
fn with_group_protocol_consumer_it_walks_librdkafkas_mock() {
    let mock = clusters::librdkafka();
    TestCluster::create_topic(&mock, "walk", &[1, 3]);
    TestCluster::set_coordinator(&mock, "walkers", 2);
    // Heartbeats every second, as on the example's own cluster
    // (librdkafka's mock: 3 s by default).
    TestCluster::set_consumer_group_timing(&mock, 1_000, 10_000);
    produce(&mock.bootstrap(), "walk", 2, 10, "none");
    mock.clear_requests();
    let stdout = run(&[
        "--bootstrap",
        &mock.bootstrap(),
        "--topic",
        "walk",
        "--group",
        "walkers",
        "--group-protocol",
        "consumer",
    ]);
    assert_phases(&stdout);
    let requests = TestCluster::requests(&mock);
    let heartbeats: Vec<i32> = requests
        .iter()
        .filter(|(_, api)| *api == 68)
        .map(|(b, _)| *b)
        .collect();
    assert!(
        !heartbeats.is_empty() && heartbeats.iter().all(|b| *b == 2),
        "{heartbeats:?}"
    );
    assert!(
        requests
            .iter()
            .all(|(_, api)| ![11, 12, 13, 14].contains(api)),
        "classic group requests: {requests:?}"
    );
}

#[test]
fn a_bad_group_protocol_is_refused() {
    let out = Command::new(example_bin("lifecycle"))
        .args(["--group-protocol", "eager"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("classic or consumer"));
}

#[test]
fn a_bad_flag_is_refused() {
    let out = Command::new(example_bin("lifecycle"))
        .arg("--nonsense")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown argument --nonsense"));
}

/// Runs the example with `args` and returns its stdout; kills it and fails
/// if it has not exited within `deadline`, fails on a non-zero exit.
fn run_within(args: &[&str], deadline: Duration) -> String {
    let mut cmd = Command::new(example_bin("lifecycle"));
    // Not the broker side of librdkafka's mock connections (see there).
    close_inherited_fds(&mut cmd);
    let mut child = cmd
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the lifecycle example");
    let pipe = |mut p: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = p.read_to_string(&mut text);
            text
        })
    };
    let stdout = pipe(Box::new(child.stdout.take().unwrap()));
    let stderr = pipe(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the example did not exit within {deadline:?}\n{}\n{}",
                stdout.join().unwrap(),
                stderr.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    assert!(status.success(), "exit {status:?}\n{stdout}\n{stderr}");
    stdout
}

/// One printed connection event: (event, broker, purpose, reason).
type Event = (String, String, String, String);

/// The connection events printed under step `step` (from its numbered
/// line to the next one, or to the census).
fn step_events(stdout: &str, step: u32) -> Vec<Event> {
    let start = format!("{step}. ");
    let next = format!("{}. ", step + 1);
    stdout
        .lines()
        .skip_while(|l| !l.starts_with(&start))
        .skip(1)
        .take_while(|l| !l.starts_with(&next) && !l.starts_with("census"))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            if words.get(1) != Some(&"ms") {
                return None;
            }
            let b = words.iter().position(|w| *w == "broker")?;
            Some((
                words[2..b].join(" "),
                words.get(b + 1)?.to_string(),
                words.get(b + 2)?.to_string(),
                words.get(b + 4..).unwrap_or_default().join(" "),
            ))
        })
        .collect()
}

/// The producer's walk on a cluster whose topic has two partitions led by
/// brokers 1 and 3: no connection before the first send, one bootstrap
/// connection first, then the leaders, the bootstrap connection retired or
/// promoted, the leaders reaped when idle and connected again without a
/// bootstrap connection, everything closed at the end.
fn assert_producer_walk(stdout: &str) {
    let stdout = stdout.to_owned();
    let leaders = "2 socket(s): leader (broker 1), leader (broker 3)";
    // 1. Nothing before the first send.
    assert_eq!(census(&stdout, "after new"), "no sockets");
    assert!(step_events(&stdout, 1).is_empty(), "{stdout}");

    // 2. The first sends: one bootstrap connection first, then the
    // leaders, then the bootstrap connection retired (or promoted).
    let first = step_events(&stdout, 2);
    let at = |pred: &dyn Fn(&Event) -> bool| first.iter().position(pred);
    let bootstrap = at(&|e| e.0 == "connecting" && e.2 == "bootstrap")
        .unwrap_or_else(|| panic!("no bootstrap connection\n{stdout}"));
    assert_eq!(
        bootstrap, 0,
        "the bootstrap connection comes first\n{stdout}"
    );
    assert_eq!(
        first
            .iter()
            .filter(|e| e.2 == "bootstrap" && e.0 == "connecting")
            .count(),
        1,
        "one bootstrap connection\n{stdout}"
    );
    let leader = at(&|e| e.2 == "leader" && matches!(e.0.as_str(), "connecting" | "promoted"))
        .unwrap_or_else(|| panic!("no leader connection\n{stdout}"));
    assert!(bootstrap < leader, "{stdout}");
    let retired = at(&|e| e.0 == "retired" || e.0 == "promoted")
        .unwrap_or_else(|| panic!("the bootstrap connection stayed\n{stdout}"));
    assert!(bootstrap < retired, "{stdout}");
    // A leader connection to each leader: opened for it, or the bootstrap
    // connection (ready already) promoted to it.
    for broker in ["1", "3"] {
        assert!(
            first.iter().any(|e| e.1 == broker
                && e.2 == "leader"
                && matches!(e.0.as_str(), "ready" | "promoted")),
            "no leader connection to broker {broker}\n{stdout}"
        );
    }
    assert_eq!(census(&stdout, "after the first deliveries"), leaders);

    // 3. Idle: the leader connections are reaped.
    let idle = step_events(&stdout, 3);
    assert!(
        idle.iter()
            .filter(|e| e.0 == "closed" && e.2 == "leader" && e.3 == "idle")
            .count()
            == 2,
        "{stdout}"
    );
    assert_eq!(
        census(&stdout, "idle, after connections.max.idle.ms"),
        "no sockets"
    );

    // 4. Sending again: the leaders again, no bootstrap connection.
    let again = step_events(&stdout, 4);
    assert!(again.iter().all(|e| e.2 == "leader"), "{stdout}");
    assert_eq!(census(&stdout, "sending again"), leaders);

    // 5. Everything closed at the end.
    let closing = step_events(&stdout, 5);
    assert!(
        closing
            .iter()
            .filter(|e| e.0 == "closed" && e.3 == "shutdown")
            .count()
            == 2,
        "{stdout}"
    );
    assert_eq!(census(&stdout, "after close"), "no sockets");
}

#[test]
fn with_producer_it_walks_a_producer_on_its_own_cluster() {
    let stdout = run_within(&["--producer"], Duration::from_secs(120));
    assert!(stdout.contains("lazykafka::mock cluster"), "{stdout}");
    assert_producer_walk(&stdout);
    // The brokers' own view: Produce to the leaders only, one
    // InitProducerId in all (over the bootstrap connection).
    let mut init_producer_ids = 0;
    for id in 1..=3 {
        let (line, apis) = broker_apis(&stdout, id);
        assert_eq!(apis.iter().any(|a| a == "Produce"), id != 2, "{line}");
        init_producer_ids += line.matches("InitProducerId 1").count();
    }
    assert_eq!(init_producer_ids, 1, "{stdout}");
}

#[test]
fn with_producer_and_bootstrap_it_walks_librdkafkas_mock() {
    let mock = clusters::librdkafka();
    TestCluster::create_topic(&mock, "walk", &[1, 3]);
    let stdout = run_within(
        &[
            "--producer",
            "--bootstrap",
            &mock.bootstrap(),
            "--topic",
            "walk",
        ],
        Duration::from_secs(120),
    );
    assert_producer_walk(&stdout);
    // Produce went to the leaders only.
    let produce: Vec<i32> = TestCluster::requests(&mock)
        .iter()
        .filter(|(_, api)| *api == 0)
        .map(|(b, _)| *b)
        .collect();
    assert!(
        !produce.is_empty() && produce.iter().all(|b| *b == 1 || *b == 3),
        "{produce:?}"
    );
}

/// Apache Kafka itself (`scripts/kafka.sh`): a topic whose partitions live
/// on brokers 1 and 3 alone, ten records from the Java producer, and a
/// group name whose coordinator is broker 2, so the census per phase is the
/// one every cluster above shows.
fn apache_kafka_walk(test: &str) -> Option<(common::kafka::Kafka, String, String)> {
    let kafka = common::kafka::Kafka::get(test)?;
    let topic = kafka.unique("walk");
    kafka.create_topic_on(&topic, &[&[1], &[3]]);
    kafka.peer(&["produce", "--topic", &topic, "--count", "10"]);
    let group = kafka.group_on("walkers", 2);
    Some((kafka, topic, group))
}

#[test]
fn with_bootstrap_it_walks_apache_kafka() {
    let Some((kafka, topic, group)) = apache_kafka_walk("with_bootstrap_it_walks_apache_kafka")
    else {
        return;
    };
    let stdout = run_within(
        &[
            "--bootstrap",
            &kafka.bootstrap,
            "--topic",
            &topic,
            "--group",
            &group,
        ],
        Duration::from_secs(120),
    );
    assert_phases(&stdout);
}

#[test]
fn with_group_protocol_consumer_it_walks_apache_kafka() {
    let Some((kafka, topic, group)) =
        apache_kafka_walk("with_group_protocol_consumer_it_walks_apache_kafka")
    else {
        return;
    };
    let stdout = run_within(
        &[
            "--bootstrap",
            &kafka.bootstrap,
            "--topic",
            &topic,
            "--group",
            &group,
            "--group-protocol",
            "consumer",
        ],
        Duration::from_secs(120),
    );
    assert_phases(&stdout);
}

#[test]
fn with_producer_it_walks_a_producer_on_apache_kafka() {
    let Some((kafka, topic, _)) =
        apache_kafka_walk("with_producer_it_walks_a_producer_on_apache_kafka")
    else {
        return;
    };
    let stdout = run_within(
        &[
            "--producer",
            "--bootstrap",
            &kafka.bootstrap,
            "--topic",
            &topic,
        ],
        Duration::from_secs(120),
    );
    assert_producer_walk(&stdout);
}
