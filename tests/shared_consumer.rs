//! One consumer shared by several tasks, as a tokio user of rust-rdkafka's
//! `StreamConsumer` shares it: `Consumer` is `Clone + Send + Sync`, every
//! method takes `&self`, and a call in one task does not wait for another
//! task's `poll`. On librdkafka's mock and on `lazykafka::mock`, on both
//! runtimes. Every wait has a deadline; nothing sleeps and hopes.

// Drives a `Consumer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::{standard, TestCluster};
use common::peers::{config, produce_range, WAIT};
use common::timeout;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use lazykafka::{Consumer, Error, RecordStream, TopicPartition};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p)
}

/// What the compiler checks: a handle to share, a stream to move.
#[test]
fn the_consumer_is_a_handle_and_its_stream_is_unpin() {
    fn handle<T: Clone + Send + Sync + 'static>() {}
    fn movable<T: Unpin + Send + 'static>() {}
    handle::<Consumer>();
    movable::<RecordStream>();
}

/// Where the tasks of [`three_tasks_on`] run, and its clock.
trait Tasks {
    fn spawn<F>(future: F) -> BoxFuture<'static, F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;
    fn sleep(duration: Duration) -> BoxFuture<'static, ()>;
    async fn timeout<F: Future>(duration: Duration, future: F) -> Option<F::Output>;
}

/// The tests' runtime (async-std whenever it is built).
struct TestRuntime;

impl Tasks for TestRuntime {
    fn spawn<F>(future: F) -> BoxFuture<'static, F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        common::spawn(future).boxed()
    }
    fn sleep(duration: Duration) -> BoxFuture<'static, ()> {
        common::sleep(duration).boxed()
    }
    async fn timeout<F: Future>(duration: Duration, future: F) -> Option<F::Output> {
        timeout(duration, future).await
    }
}

/// Three tasks on clones of one consumer: one polls every record, one
/// pauses and resumes a partition and reads metrics meanwhile, and one
/// commits and reads the commit back while the first waits in a long
/// `poll` with nothing to fetch. The commit does not wait for that `poll`,
/// and `close` from a fourth ends it.
async fn three_tasks_share_one_consumer<C: TestCluster>() {
    three_tasks_on::<C, TestRuntime>().await
}

async fn three_tasks_on<C: TestCluster, T: Tasks>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    produce_range(&bootstrap, "t", 2, 0..200, "none");
    let consumer = Consumer::new(config(&bootstrap, Some("shared")).build().unwrap()).unwrap();
    consumer.assign([tp(0), tp(1)]).unwrap();
    let caught_up = Arc::new(AtomicBool::new(false));
    let long_poll_over = Arc::new(AtomicBool::new(false));

    // Task 1: every record, then a long poll with nothing to fetch.
    let poller = {
        let consumer = consumer.clone();
        let caught_up = caught_up.clone();
        let long_poll_over = long_poll_over.clone();
        T::spawn(async move {
            let deadline = Instant::now() + WAIT;
            let mut seen: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
            while seen.values().map(Vec::len).sum::<usize>() < 200 && Instant::now() < deadline {
                for r in consumer.poll(Duration::from_millis(200)).await.unwrap() {
                    seen.entry(r.partition()).or_default().push(r.offset());
                }
            }
            caught_up.store(true, Ordering::SeqCst);
            let last = consumer.poll(Duration::from_secs(30)).await;
            long_poll_over.store(true, Ordering::SeqCst);
            (seen, last)
        })
    };

    // Task 2: pause, resume and metrics while the first polls.
    let pauser = {
        let consumer = consumer.clone();
        let caught_up = caught_up.clone();
        T::spawn(async move {
            let mut rounds = 0;
            while !caught_up.load(Ordering::SeqCst) && rounds < 1000 {
                consumer.pause([&tp(1)]);
                assert!(consumer.paused().contains(&tp(1)));
                assert_eq!(consumer.metrics().partitions.len(), 2);
                consumer.resume([&tp(1)]);
                assert!(consumer.paused().is_empty());
                rounds += 1;
                T::sleep(Duration::from_millis(5)).await;
            }
            rounds
        })
    };

    // Task 3: once every record came, commit and read back while task 1
    // waits in its long poll.
    let committer = {
        let consumer = consumer.clone();
        let caught_up = caught_up.clone();
        let long_poll_over = long_poll_over.clone();
        T::spawn(async move {
            let deadline = Instant::now() + WAIT;
            while !caught_up.load(Ordering::SeqCst) {
                assert!(Instant::now() < deadline, "the poller did not catch up");
                T::sleep(Duration::from_millis(10)).await;
            }
            consumer.commit().await.unwrap();
            let committed = consumer.committed([tp(0), tp(1)]).await.unwrap();
            // Answered while the other task's poll(30 s) still waits.
            let poll_still_waiting = !long_poll_over.load(Ordering::SeqCst);
            (committed, poll_still_waiting)
        })
    };

    let (committed, poll_still_waiting) = T::timeout(WAIT, committer)
        .await
        .expect("the commit within the deadline");
    assert_eq!(
        committed,
        BTreeMap::from([(tp(0), Some(100)), (tp(1), Some(100))]),
        "{}",
        mock.name()
    );
    assert!(
        poll_still_waiting,
        "{}: the commit waited for another task's poll",
        mock.name()
    );
    let rounds = T::timeout(WAIT, pauser).await.expect("the pauser ends");
    assert!(rounds > 0, "{}", mock.name());

    // Closing from here ends the other task's poll at once.
    consumer.close().await.unwrap();
    let (seen, last) = T::timeout(Duration::from_secs(20), poller)
        .await
        .expect("close ends the waiting poll before its timeout");
    assert!(
        matches!(last, Err(Error::Closed)),
        "{}: {last:?}",
        mock.name()
    );
    for p in [0, 1] {
        let mut offsets = seen[&p].clone();
        offsets.sort();
        offsets.dedup();
        assert_eq!(
            offsets,
            (0..100).collect::<Vec<_>>(),
            "{}: partition {p}",
            mock.name()
        );
    }
    assert!(matches!(
        consumer.poll(Duration::ZERO).await,
        Err(Error::Closed)
    ));
}

/// Inside a stream loop the consumer commits and seeks: the stream holds a
/// clone and borrows nothing.
async fn a_stream_loop_commits_and_seeks<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    produce_range(&bootstrap, "t", 2, 0..20, "none");
    let consumer = Consumer::new(config(&bootstrap, Some("streaming")).build().unwrap()).unwrap();
    consumer.assign([tp(0)]).unwrap();
    let mut stream = consumer.stream();
    let mut offsets = Vec::new();
    let deadline = Instant::now() + WAIT;
    let mut sought = false;
    while offsets.len() < 13 && Instant::now() < deadline {
        let Some(record) = timeout(WAIT, stream.next()).await.flatten() else {
            break;
        };
        let record = record.unwrap();
        offsets.push(record.offset());
        if record.offset() == 4 {
            consumer.commit_offsets([(tp(0), 5)]).await.unwrap();
        }
        // Once: back to offset 2 after offset 7.
        if record.offset() == 7 && !sought {
            sought = true;
            consumer.seek(&tp(0), 2).unwrap();
        }
    }
    drop(stream);
    // After the seek the stream's buffered records were dropped by the
    // consumer's new position: 0..=7, then 2 on.
    assert_eq!(offsets[..8], (0..8).collect::<Vec<_>>(), "{}", mock.name());
    assert_eq!(offsets[8..], [2, 3, 4, 5, 6], "{}", mock.name());
    assert_eq!(consumer.committed([tp(0)]).await.unwrap()[&tp(0)], Some(5));
    consumer.close().await.unwrap();
}

/// Two tasks polling one consumer at once, over record sets large enough
/// that each `poll` decodes them a chunk at a time outside the consumer's
/// state (see docs/architecture.md): every record reaches exactly one of
/// them, and each task sees a partition's offsets in order.
async fn two_polling_tasks_take_every_record_once<C: TestCluster>() {
    const PARTITIONS: i32 = 2;
    const RECORDS: usize = 30_000;
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    produce_range(&bootstrap, "t", PARTITIONS, 0..RECORDS, "none");
    let consumer = Consumer::new(
        config(&bootstrap, None)
            .max_poll_records(100)
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.assign((0..PARTITIONS).map(tp)).unwrap();
    let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (by_a, by_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // `mine` counts what this task took, `other` what the other did. A
    // task that took records first waits (with a deadline) until the other
    // took some too: on a loaded machine one task could otherwise take all
    // 30,000 before the other is first scheduled, and this shows that both
    // can take, not how a scheduler shares its threads.
    let polling = |consumer: Consumer,
                   taken: Arc<AtomicUsize>,
                   mine: Arc<AtomicUsize>,
                   other: Arc<AtomicUsize>| async move {
        let mut seen: Vec<(i32, i64, Vec<u8>)> = Vec::new();
        let deadline = Instant::now() + WAIT;
        while taken.load(Ordering::SeqCst) < RECORDS && Instant::now() < deadline {
            let records = consumer.poll(Duration::from_millis(200)).await.unwrap();
            taken.fetch_add(records.len(), Ordering::SeqCst);
            mine.fetch_add(records.len(), Ordering::SeqCst);
            seen.extend(
                records
                    .iter()
                    .map(|r| (r.partition(), r.offset(), r.key().unwrap().to_vec())),
            );
            if !records.is_empty() && other.load(Ordering::SeqCst) == 0 {
                common::wait_for_async(WAIT, || {
                    other.load(Ordering::SeqCst) > 0 || taken.load(Ordering::SeqCst) >= RECORDS
                })
                .await;
            }
        }
        seen
    };
    let a = common::spawn(polling(
        consumer.clone(),
        taken.clone(),
        by_a.clone(),
        by_b.clone(),
    ));
    let b = common::spawn(polling(consumer.clone(), taken.clone(), by_b, by_a));
    let (a, b) = futures::join!(a, b);
    let mut every: BTreeMap<(i32, i64), Vec<u8>> = BTreeMap::new();
    for seen in [&a, &b] {
        for p in 0..PARTITIONS {
            let offsets: Vec<i64> = seen.iter().filter(|r| r.0 == p).map(|r| r.1).collect();
            assert!(
                offsets.windows(2).all(|w| w[0] < w[1]),
                "partition {p} out of order in one task ({})",
                mock.name()
            );
        }
        for (p, offset, key) in seen {
            let twice = every.insert((*p, *offset), key.clone());
            assert!(
                twice.is_none(),
                "{p}@{offset} taken twice ({})",
                mock.name()
            );
        }
    }
    assert_eq!(every.len(), RECORDS, "{}", mock.name());
    // produce_range writes record i to partition i % PARTITIONS, in order.
    for ((p, offset), key) in &every {
        let i = *offset as usize * PARTITIONS as usize + *p as usize;
        assert_eq!(key, format!("key-{i}").as_bytes(), "{p}@{offset}");
    }
    assert!(!a.is_empty() && !b.is_empty(), "both tasks took records");
    consumer.close().await.unwrap();
}

on_both_mocks!(
    three_tasks_share_one_consumer,
    a_stream_loop_commits_and_seeks,
    two_polling_tasks_take_every_record_once
);

/// What a tokio user of rust-rdkafka's `StreamConsumer` does, with both
/// runtime features built (as a dependency graph where another crate keeps
/// lazykafka's defaults builds it): the consumer is created inside a tokio
/// runtime, so it runs on tokio, and three `tokio::spawn`ed tasks share it.
#[cfg(all(feature = "runtime-tokio", feature = "runtime-async-std"))]
mod tokio_user {
    use super::*;

    struct Tokio;

    impl Tasks for Tokio {
        fn spawn<F>(future: F) -> BoxFuture<'static, F::Output>
        where
            F: Future + Send + 'static,
            F::Output: Send + 'static,
        {
            let handle = tokio::spawn(future);
            async move { handle.await.expect("the task ran to its end") }.boxed()
        }
        fn sleep(duration: Duration) -> BoxFuture<'static, ()> {
            tokio::time::sleep(duration).boxed()
        }
        async fn timeout<F: Future>(duration: Duration, future: F) -> Option<F::Output> {
            tokio::time::timeout(duration, future).await.ok()
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn librdkafka_mock() {
        three_tasks_on::<crate::common::mock::RawMock, Tokio>().await
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn lazykafka_mock() {
        three_tasks_on::<lazykafka::mock::MockCluster, Tokio>().await
    }
}
