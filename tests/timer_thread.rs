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

use common::threads;
use lazykafka::Consumer;
use std::time::Duration;

const NAME: &str = "lazykafka-timer";

/// The timer threads a polling process has: one on async-std, none on
/// tokio.
const EXPECTED: usize = if cfg!(feature = "runtime-async-std") {
    1
} else {
    0
};

#[test]
fn the_timer_thread_starts_with_the_first_poll_and_once_per_process() {
    crate::common::block_on(async {
        let mock = threads::mock_with_records();
        let first = threads::assigned_and_touched(&mock, NAME);

        // One poll each of two consumers, at once: the first timers made.
        let second = threads::assigned(&mock);
        let one_poll = Duration::from_millis(100);
        let (a, b) = futures::join!(first.poll(one_poll), second.poll(one_poll));
        let (first_seen, second_seen) = (a.unwrap().len(), b.unwrap().len());
        assert!(
            threads::settles_at(NAME, EXPECTED),
            "after the first poll: {} timer threads",
            threads::named(NAME)
        );

        let consume = |mut consumer: Consumer, seen: usize| async move {
            let seen = seen + common::peers::consume(&mut consumer, 20 - seen).await.len();
            consumer.close().await.unwrap();
            seen
        };
        let (a, b) = futures::join!(consume(first, first_seen), consume(second, second_seen));
        assert_eq!((a, b), (20, 20), "records consumed");
        // A third consumer later: still one thread.
        assert_eq!(
            consume(threads::assigned(&mock), 0).await,
            20,
            "records consumed"
        );
        assert_eq!(threads::named(NAME), EXPECTED, "after more consumers");
    })
}
