//! Cancel safety, on librdkafka's mock and on `lazykafka::mock`: a `poll`
//! future dropped (by a timeout, or after a single poll as a losing
//! `select!` branch leaves it) loses no record; a dropped `stream()` loses
//! none either; a dropped `commit` lands or
//! not, and leaves the consumer usable. Every wait has a deadline; nothing
//! sleeps and hopes.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::{standard, TestCluster};
use common::peers::{config, produce_range, WAIT};
use common::timeout;
use futures::{FutureExt, StreamExt};
use lazykafka::{Consumer, ConsumerRecord, TopicPartition};
use std::time::{Duration, Instant};

fn p0() -> TopicPartition {
    TopicPartition::new("t", 0)
}

/// Offsets of partition 0's records, in the order received.
fn offsets(records: &[ConsumerRecord]) -> Vec<i64> {
    records
        .iter()
        .filter(|r| r.partition() == 0)
        .map(|r| r.offset())
        .collect()
}

/// Polls until `count` records of partition 0 came (or [`WAIT`] passed).
async fn poll_offsets(consumer: &mut Consumer, count: usize) -> Vec<i64> {
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::new();
    while out.len() < count && Instant::now() < deadline {
        out.extend(offsets(
            &consumer.poll(Duration::from_millis(100)).await.unwrap(),
        ));
    }
    out
}

/// 300 records come in while most polls are cut short: dropped after one
/// poll of the future (`now_or_never`, as a `select!` that another branch
/// won leaves it), or by a timeout shorter than the poll's own. Every
/// record still arrives exactly once, in order.
async fn a_dropped_poll_loses_no_record<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    // Partition 0 only (records i with i % 2 == 0 land there).
    produce_range(&bootstrap, "t", 2, 0..200, "none");
    let consumer = Consumer::new(
        config(&bootstrap, None)
            .max_poll_records(7)
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.assign([p0()]).unwrap();
    let mut seen: Vec<i64> = Vec::new();
    // The first poll cannot have records yet (nothing is connected): it
    // is dropped for sure, whatever the timing of the ones below.
    let mut dropped = 0;
    if consumer
        .poll(Duration::from_secs(5))
        .now_or_never()
        .is_none()
    {
        dropped += 1;
    }
    let mut produced_more = false;
    let deadline = Instant::now() + WAIT;
    let mut i = 0u32;
    while seen.len() < 150 && Instant::now() < deadline {
        i += 1;
        if !produced_more && seen.len() >= 50 {
            // More records while polls keep being dropped.
            produce_range(&bootstrap, "t", 2, 200..300, "none");
            produced_more = true;
        }
        match i % 3 {
            0 => match consumer.poll(Duration::from_secs(5)).now_or_never() {
                Some(records) => seen.extend(offsets(&records.unwrap())),
                None => dropped += 1,
            },
            1 => match timeout(
                Duration::from_micros(300),
                consumer.poll(Duration::from_secs(5)),
            )
            .await
            {
                Some(records) => seen.extend(offsets(&records.unwrap())),
                None => dropped += 1,
            },
            _ => seen.extend(offsets(
                &consumer.poll(Duration::from_millis(20)).await.unwrap(),
            )),
        }
    }
    assert!(dropped > 0, "{}: some polls were dropped", mock.name());
    let expected: Vec<i64> = (0..150).collect();
    assert_eq!(
        seen,
        expected,
        "{}: every record once, in order, after {dropped} dropped polls",
        mock.name()
    );
    consumer.close().await.unwrap();
}

/// A stream that yielded 3 records, then dropped: the next stream returns
/// the other 7 (the stream takes one record at a time and holds none). A
/// `next()` dropped by a timeout loses nothing either.
async fn a_dropped_stream_gives_back_its_records<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    produce_range(&bootstrap, "t", 2, 0..20, "none");
    let consumer = Consumer::new(config(&bootstrap, None).build().unwrap()).unwrap();
    consumer.assign([p0()]).unwrap();
    // One Fetch answer brings the partition's 10 records; the stream takes
    // and yields 3 of them.
    let first: Vec<i64> = {
        let stream = consumer.stream();
        let records: Vec<_> = timeout(WAIT, stream.take(3).collect::<Vec<_>>())
            .await
            .expect("3 records within the deadline");
        records.into_iter().map(|r| r.unwrap().offset()).collect()
    };
    assert_eq!(first, [0, 1, 2], "{}", mock.name());
    assert_eq!(
        consumer.position(&p0()),
        Some(3),
        "{}: the stream took only the records it yielded",
        mock.name()
    );
    // `next()` futures cut short by a timeout, then a stream that runs on.
    let mut more = Vec::new();
    {
        let mut stream = std::pin::pin!(consumer.stream());
        let deadline = Instant::now() + WAIT;
        let mut cut = 0;
        while more.len() < 7 && Instant::now() < deadline {
            if cut < 20 {
                cut += 1;
                if let Some(Some(r)) = stream.next().now_or_never() {
                    more.push(r.unwrap().offset());
                }
                continue;
            }
            if let Some(Some(r)) = timeout(Duration::from_millis(200), stream.next()).await {
                more.push(r.unwrap().offset());
            }
        }
    }
    assert_eq!(more, [3, 4, 5, 6, 7, 8, 9], "{}", mock.name());
    consumer.close().await.unwrap();
}

/// Commits dropped after their OffsetCommit went out (the coordinator
/// answers slowly): the consumer polls on, and a commit awaited afterwards
/// lands and is read back.
async fn a_dropped_commit_leaves_the_consumer_usable<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    produce_range(&bootstrap, "t", 2, 0..20, "none");
    let mut consumer = Consumer::new(config(&bootstrap, Some("g")).build().unwrap()).unwrap();
    consumer.assign([p0()]).unwrap();
    assert_eq!(
        poll_offsets(&mut consumer, 10).await,
        (0..10).collect::<Vec<_>>()
    );
    // The coordinator (broker 2) answers after 300 ms: each commit below is
    // surely dropped before its answer.
    mock.set_delay(2, 300);
    for _ in 0..5 {
        assert!(
            consumer.commit().now_or_never().is_none(),
            "{}: a commit cannot be answered within one poll",
            mock.name()
        );
    }
    assert!(
        timeout(Duration::from_millis(50), consumer.commit())
            .await
            .is_none(),
        "{}",
        mock.name()
    );
    // Whatever became of them, the consumer goes on.
    produce_range(&bootstrap, "t", 2, 20..30, "none");
    assert_eq!(
        poll_offsets(&mut consumer, 5).await,
        (10..15).collect::<Vec<_>>(),
        "{}",
        mock.name()
    );
    mock.set_delay(2, 0);
    consumer.commit().await.unwrap();
    let committed = consumer.committed([p0()]).await.unwrap();
    assert_eq!(committed[&p0()], Some(15), "{}", mock.name());
    consumer.close().await.unwrap();
}

on_both_mocks!(
    a_dropped_poll_loses_no_record,
    a_dropped_stream_gives_back_its_records,
    a_dropped_commit_leaves_the_consumer_usable,
);
