//! On async-std each consumer's background task runs on a thread of its
//! own, `lazykafka-task` (docs/architecture.md): started by the first
//! `poll`, never by `Consumer::new`, `subscribe`, `assign`, `pause`,
//! `resume` or `seek`, one per polling consumer, and gone once the
//! consumer is closed or dropped. On tokio the task runs on the runtime:
//! the same test checks that no such thread appears. The process's threads
//! are counted by name (`/proc/self/task`).
//!
//! One test function: the threads are counted per process, and the test
//! harness would run other tests beside it.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::peers::{config, WAIT};
use lazykafka::mock::{MockCluster, MockRecord};
use lazykafka::{Consumer, TopicPartition};
use std::time::Duration;

/// How many threads of this process are named `name`.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(Result::ok)
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

/// How many threads this process has.
fn all_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

const NAME: &str = "lazykafka-task";

/// The task threads `consumers` polling consumers make: one each on
/// async-std, none on tokio.
fn expected(consumers: usize) -> usize {
    if cfg!(feature = "runtime-async-std") {
        consumers
    } else {
        0
    }
}

/// Waits until the count is `want` (a new thread names itself as it
/// starts, and one ends shortly after its task).
fn settles_at(want: usize) -> bool {
    common::wait_for(WAIT, || threads_named(NAME) == want)
}

#[cfg_attr(feature = "runtime-async-std", async_std::test)]
#[cfg_attr(feature = "runtime-tokio", tokio::test(flavor = "multi_thread"))]
async fn each_polling_consumer_has_one_task_thread_until_it_is_closed() {
    let mock = MockCluster::new(2).expect("mock cluster");
    mock.create_topic("t", 2).unwrap();
    for i in 0..20 {
        mock.produce("t", i % 2, [MockRecord::new(format!("record {i}"))])
            .unwrap();
    }
    let parts = [TopicPartition::new("t", 0), TopicPartition::new("t", 1)];
    let new_consumer = || {
        let mut consumer =
            Consumer::new(config(&mock.bootstrap_servers(), None).build().unwrap()).unwrap();
        consumer.assign(parts.clone()).unwrap();
        consumer
    };

    // A thread names itself only once it runs, so the calls below are
    // checked against every thread of the process: none may start.
    let threads_before = all_threads();
    let mut first = new_consumer();
    first.pause(&parts[..1]);
    first.resume(&parts[..1]);
    first.seek(&parts[1], 0).unwrap();
    let mut grouped = Consumer::new(
        config(&mock.bootstrap_servers(), Some("g"))
            .build()
            .unwrap(),
    )
    .unwrap();
    grouped.subscribe(["t"]).unwrap();
    drop(grouped);
    assert_eq!(
        all_threads(),
        threads_before,
        "threads started before the first poll"
    );
    assert_eq!(
        threads_named(NAME),
        0,
        "a task thread before the first poll"
    );

    let one_poll = Duration::from_millis(100);
    let first_seen = first.poll(one_poll).await.unwrap().len();
    assert!(
        settles_at(expected(1)),
        "after one consumer's first poll: {} task threads",
        threads_named(NAME)
    );
    let mut second = new_consumer();
    let second_seen = second.poll(one_poll).await.unwrap().len();
    assert!(
        settles_at(expected(2)),
        "after two consumers' first polls: {} task threads",
        threads_named(NAME)
    );

    // Both read everything through their tasks.
    let seen = first_seen
        + common::peers::consume(&mut first, 20 - first_seen)
            .await
            .len();
    assert_eq!(seen, 20, "records the first consumer read");
    let seen = second_seen
        + common::peers::consume(&mut second, 20 - second_seen)
            .await
            .len();
    assert_eq!(seen, 20, "records the second consumer read");

    // Closed, then dropped without a close: each thread ends with its task.
    first.close().await.unwrap();
    assert!(
        settles_at(expected(1)),
        "after one close: {} task threads",
        threads_named(NAME)
    );
    drop(second);
    assert!(
        settles_at(0),
        "after both consumers: {} task threads",
        threads_named(NAME)
    );
}
