//! On a current-thread tokio runtime the consumer runs on that thread: its
//! background task, connects and socket readers are tasks of that runtime,
//! and no other executor (async-std's, async-io's reactor) is started
//! beside it. The process's threads are counted (`/proc/self/task`) before
//! and after consuming from `lazykafka::mock`, whose own threads (named
//! `mock-*`) are left out; records come from the mock directly, so no
//! librdkafka thread exists. Built with `runtime-async-std` too, the
//! consumer made inside the runtime runs on tokio all the same.
//!
//! One test function: the test harness runs tests on threads of its own,
//! which would be counted.
#![cfg(feature = "runtime-tokio")]

mod common;

use common::peers::config;
use lazykafka::mock::{MockCluster, MockRecord};
use lazykafka::{Consumer, TopicPartition};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The threads of this process: id → name.
fn threads() -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let Ok(entry) = entry else { continue };
        let Ok(tid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // A thread that ended between the listing and this read is gone.
        if let Ok(name) = std::fs::read_to_string(entry.path().join("comm")) {
            out.insert(tid, name.trim_end().to_owned());
        }
    }
    out
}

/// Threads started since `before`, other than the mock cluster's.
fn new_threads(before: &BTreeMap<u32, String>) -> Vec<String> {
    threads()
        .into_iter()
        .filter(|(tid, name)| !before.contains_key(tid) && !name.starts_with("mock-"))
        .map(|(_, name)| name)
        .collect()
}

#[test]
fn the_consumer_starts_no_thread_on_a_current_thread_runtime() {
    let mock = MockCluster::new(2).expect("mock cluster");
    mock.create_topic("t", 2).unwrap();
    for i in 0..20 {
        mock.produce("t", i % 2, [MockRecord::new(format!("record {i}"))])
            .unwrap();
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let before = threads();

    let seen = runtime.block_on(async {
        let consumer =
            Consumer::new(config(&mock.bootstrap_servers(), None).build().unwrap()).unwrap();
        consumer
            .assign([TopicPartition::new("t", 0), TopicPartition::new("t", 1)])
            .unwrap();
        let deadline = Instant::now() + common::peers::WAIT;
        let mut seen = 0;
        while seen < 20 && Instant::now() < deadline {
            seen += consumer
                .poll(Duration::from_millis(100))
                .await
                .unwrap()
                .len();
        }
        assert!(
            !consumer.connections().is_empty(),
            "the consumer is connected while the threads are counted"
        );
        let started = new_threads(&before);
        consumer.close().await.unwrap();
        (seen, started)
    });
    assert_eq!(seen.0, 20, "records consumed");
    assert!(
        seen.1.is_empty(),
        "threads started beside the current-thread runtime: {:?}",
        seen.1
    );

    // The count sees an executor that starts threads: async-std's (a
    // dev-dependency here; a dependency of the crate only when
    // `runtime-async-std` is built too).
    let before = threads();
    async_std::task::block_on(async_std::task::spawn(async {}));
    assert!(
        common::wait_for(common::peers::WAIT, || !new_threads(&before).is_empty()),
        "async-std's executor threads were not seen"
    );
}
