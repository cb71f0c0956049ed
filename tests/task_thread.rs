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

use common::threads;
use std::time::Duration;

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

#[test]
fn each_polling_consumer_has_one_task_thread_until_it_is_closed() {
    crate::common::block_on(async {
        let mock = threads::mock_with_records();
        let mut first = threads::assigned_and_touched(&mock, NAME);

        let one_poll = Duration::from_millis(100);
        let first_seen = first.poll(one_poll).await.unwrap().len();
        assert!(
            threads::settles_at(NAME, expected(1)),
            "after one consumer's first poll: {} task threads",
            threads::named(NAME)
        );
        let mut second = threads::assigned(&mock);
        let second_seen = second.poll(one_poll).await.unwrap().len();
        assert!(
            threads::settles_at(NAME, expected(2)),
            "after two consumers' first polls: {} task threads",
            threads::named(NAME)
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
            threads::settles_at(NAME, expected(1)),
            "after one close: {} task threads",
            threads::named(NAME)
        );
        drop(second);
        assert!(
            threads::settles_at(NAME, 0),
            "after both consumers: {} task threads",
            threads::named(NAME)
        );
    })
}
