//! On async-std the consumer's timers run on one thread of its own,
//! `lazykafka-timer` (docs/architecture.md): it is started by the first
//! `poll`, never by `Consumer::new`, `subscribe`, `assign`, `pause`,
//! `resume` or `seek`, and there is one per process however many consumers
//! poll. On tokio there is none (the timer module is not built there;
//! tokio's own timers serve): the same test checks that none appears. The
//! process's threads are counted by name (`/proc/self/task`).
//!
//! One test function: the timer thread is per process, and the test
//! harness would run other tests beside it.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::peers::config;
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

/// The timer threads a polling process has: one on async-std, none on
/// tokio.
const EXPECTED: usize = if cfg!(feature = "runtime-async-std") {
    1
} else {
    0
};

#[cfg_attr(feature = "runtime-async-std", async_std::test)]
#[cfg_attr(feature = "runtime-tokio", tokio::test(flavor = "multi_thread"))]
async fn the_timer_thread_starts_with_the_first_poll_and_once_per_process() {
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
    // also checked against every thread of the process: none may start.
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
        threads_named("lazykafka-timer"),
        0,
        "a timer thread before the first poll"
    );

    // One poll each of two consumers, at once: the first timers made.
    let mut second = new_consumer();
    let one_poll = Duration::from_millis(100);
    let (a, b) = futures::join!(first.poll(one_poll), second.poll(one_poll));
    let (first_seen, second_seen) = (a.unwrap().len(), b.unwrap().len());
    // A new thread names itself as it starts: wait for the name.
    assert!(
        common::wait_for(common::peers::WAIT, || threads_named("lazykafka-timer")
            == EXPECTED),
        "after the first poll: {} timer threads",
        threads_named("lazykafka-timer")
    );

    let consume = |mut consumer: Consumer, seen: usize| async move {
        let seen = seen + common::peers::consume(&mut consumer, 20 - seen).await.len();
        consumer.close().await.unwrap();
        seen
    };
    let (a, b) = futures::join!(consume(first, first_seen), consume(second, second_seen));
    assert_eq!((a, b), (20, 20), "records consumed");
    // A third consumer later: still one thread.
    assert_eq!(consume(new_consumer(), 0).await, 20, "records consumed");
    assert_eq!(
        threads_named("lazykafka-timer"),
        EXPECTED,
        "after more consumers"
    );
}
