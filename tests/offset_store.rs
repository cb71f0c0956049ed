//! `enable.auto.offset.store=false` with `Consumer::store_offset`, on
//! librdkafka's mock and on `lazykafka::mock`: auto-commit, `commit()` and
//! `close()` commit what the application stored (processed), not what it
//! polled; with the default, storing is refused.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::{standard, TestCluster};
use common::peers::{config, produce_range, WAIT};
use common::sleep;
use lazykafka::{Consumer, ConsumerRecord, Error, TopicPartition};
use std::time::{Duration, Instant};

fn p0() -> TopicPartition {
    TopicPartition::new("t", 0)
}

async fn poll_records(consumer: &mut Consumer, count: usize) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::new();
    while out.len() < count && Instant::now() < deadline {
        out.extend(consumer.poll(Duration::from_millis(100)).await.unwrap());
    }
    out
}

async fn committed(consumer: &mut Consumer) -> Option<i64> {
    consumer.committed([p0()]).await.unwrap()[&p0()]
}

async fn commits_take_the_stored_offsets<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    produce_range(&bootstrap, "t", 2, 0..20, "none");
    let mut consumer = Consumer::new(
        config(&bootstrap, Some("g"))
            .enable_auto_commit(true)
            .auto_commit_interval(Duration::from_millis(50))
            .enable_auto_offset_store(false)
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.assign([p0()]).unwrap();
    let records = poll_records(&mut consumer, 10).await;
    assert_eq!(records.len(), 10, "{}", mock.name());
    assert_eq!(consumer.position(&p0()), Some(10));
    // Nothing stored: commit() commits nothing, though 10 were polled.
    consumer.commit().await.unwrap();
    assert_eq!(committed(&mut consumer).await, None, "{}", mock.name());

    // Records 0..=4 processed: auto-commit takes offset 5 (a few intervals
    // pass without a poll; the background task commits).
    consumer.store_offset(&records[4]).unwrap();
    assert_eq!(consumer.stored_offsets()[&p0()], 5);
    let deadline = Instant::now() + WAIT;
    while committed(&mut consumer).await != Some(5) {
        assert!(
            Instant::now() < deadline,
            "{}: auto-commit of 5",
            mock.name()
        );
        sleep(Duration::from_millis(20)).await;
    }
    // Several intervals later it is still 5, not the position 10.
    let later = Instant::now() + Duration::from_millis(300);
    while Instant::now() < later {
        assert_eq!(committed(&mut consumer).await, Some(5), "{}", mock.name());
        sleep(Duration::from_millis(50)).await;
    }

    // commit() takes the stored offset too.
    consumer.store_offsets([(p0(), 8)]).unwrap();
    consumer.commit().await.unwrap();
    assert_eq!(committed(&mut consumer).await, Some(8), "{}", mock.name());

    // close() commits what is stored: 10.
    consumer.store_offset(&records[9]).unwrap();
    assert!(matches!(
        consumer.store_offsets([(TopicPartition::new("t", 1), 1)]),
        Err(Error::NotAssigned { .. })
    ));
    consumer.close().await.unwrap();
    let mut reader = Consumer::new(config(&bootstrap, Some("g")).build().unwrap()).unwrap();
    assert_eq!(committed(&mut reader).await, Some(10), "{}", mock.name());
    reader.close().await.unwrap();
}

/// With the default `enable.auto.offset.store=true`, storing is refused
/// (the consumed positions are committed) and nothing is stored.
async fn storing_needs_the_manual_store<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    let consumer = Consumer::new(config(&bootstrap, Some("g")).build().unwrap()).unwrap();
    consumer.assign([p0()]).unwrap();
    let e = consumer.store_offsets([(p0(), 3)]).unwrap_err();
    assert!(
        matches!(&e, Error::Config { property, .. } if property == "enable.auto.offset.store"),
        "{e:?}"
    );
    assert!(consumer.stored_offsets().is_empty());
    consumer.close().await.unwrap();
}

on_both_mocks!(
    commits_take_the_stored_offsets,
    storing_needs_the_manual_store
);
