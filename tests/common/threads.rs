//! The process's threads (`/proc/self/task`), for the tests that check
//! which threads the consumer starts and when, and the consumers those
//! tests use before their first `poll`.

// Drives a `Consumer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

use super::peers::{config, WAIT};
use lazykafka::mock::{MockCluster, MockRecord};
use lazykafka::{Consumer, TopicPartition};

/// How many threads this process has (a new one counts at once, before it
/// names itself).
pub fn all() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

/// The names of this process's threads, sorted (a thread that ended
/// between the listing and the read of its name is left out).
pub fn names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(Result::ok)
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("comm")).ok())
        .map(|comm| comm.trim_end().to_owned())
        .collect();
    names.sort();
    names
}

/// The threads async-std starts (its executor, `async-std/runtime`; its
/// reactor, `async-io`; its blocking pool, `blocking-N`) and the two the
/// consumer starts on async-std (`lazykafka-task`, `lazykafka-timer`), by
/// name: none of them may run beside a consumer on tokio.
pub fn async_std_threads() -> Vec<String> {
    names()
        .into_iter()
        .filter(|name| {
            [
                "async-std",
                "async-io",
                "blocking",
                "lazykafka-task",
                "lazykafka-timer",
            ]
            .iter()
            .any(|prefix| name.starts_with(prefix))
        })
        .collect()
}

/// How many threads of this process are named `name`.
pub fn named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(Result::ok)
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

/// Waits (up to [`WAIT`]) until exactly `want` threads are named `name`:
/// a new thread names itself as it starts, and one ends shortly after its
/// work.
pub fn settles_at(name: &str, want: usize) -> bool {
    super::wait_for(WAIT, || named(name) == want)
}

/// The partitions of [`mock_with_records`]'s topic `t`.
pub fn parts() -> [TopicPartition; 2] {
    [TopicPartition::new("t", 0), TopicPartition::new("t", 1)]
}

/// A two-broker mock with 20 records over the two partitions of `t`.
pub fn mock_with_records() -> MockCluster {
    let mock = MockCluster::new(2).expect("mock cluster");
    mock.create_topic("t", 2).unwrap();
    for i in 0..20 {
        mock.produce("t", i % 2, [MockRecord::new(format!("record {i}"))])
            .unwrap();
    }
    mock
}

/// A consumer of [`parts`], assigned, not polled.
pub fn assigned(mock: &MockCluster) -> Consumer {
    let consumer = Consumer::new(config(&mock.bootstrap_servers(), None).build().unwrap()).unwrap();
    consumer.assign(parts()).unwrap();
    consumer
}

/// A consumer of [`parts`] after every call that must start nothing:
/// `new`, `assign`, `pause`, `resume`, `seek`; and a group member made,
/// subscribed and dropped beside it. Asserts that the process has as many
/// threads after them as before, and none named `name`.
pub fn assigned_and_touched(mock: &MockCluster, name: &str) -> Consumer {
    let before = all();
    let parts = parts();
    let consumer = assigned(mock);
    consumer.pause(&parts[..1]);
    consumer.resume(&parts[..1]);
    consumer.seek(&parts[1], 0).unwrap();
    let grouped = Consumer::new(
        config(&mock.bootstrap_servers(), Some("g"))
            .build()
            .unwrap(),
    )
    .unwrap();
    grouped.subscribe(["t"]).unwrap();
    drop(grouped);
    assert_eq!(all(), before, "threads started before the first poll");
    assert_eq!(named(name), 0, "a {name} thread before the first poll");
    consumer
}
