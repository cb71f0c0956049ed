//! The `lifecycle` example (the README's main command), run as a child
//! process: on its own in-process cluster (`lazykafka::mock`) and, with
//! `--bootstrap`, on librdkafka's mock cluster, the same census of sockets
//! per phase, under the classic group protocol and, with
//! `--group-protocol consumer`, under KIP-848's.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::clusters::{self, TestCluster};
use common::examples::example_bin;
use common::peers::produce;
use std::process::Command;

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
