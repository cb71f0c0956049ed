//! Log truncation after a leader change (KIP-320) against
//! `lazykafka::mock`, whose leader can come back with a shorter log
//! (`MockCluster::set_leader_truncated`; librdkafka's mock cannot cut a
//! log, so it only judges the validation path, in `tests/faults.rs`).
//! Every value is unique, so each scenario accounts for every record: none
//! lost, none twice.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use lazykafka::fetch::FetchError;
use lazykafka::mock::{MockCluster, MockRecord};
use lazykafka::protocol::ApiKey;
use lazykafka::{Consumer, ConsumerConfig, Error, OffsetReset, TopicPartition};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

/// 3 brokers; topic `cut`, partition 0 on broker 1, holding `old-0` to
/// `old-99` in batches of 10.
fn cluster() -> MockCluster {
    let mock = MockCluster::new(3).unwrap();
    mock.create_topic_with_leaders("cut", &[1]).unwrap();
    for first in (0..100).step_by(10) {
        mock.produce(
            "cut",
            0,
            (first..first + 10).map(|i| MockRecord::new(format!("old-{i}"))),
        )
        .unwrap();
    }
    mock
}

fn consumer(mock: &MockCluster, reset: OffsetReset) -> Consumer {
    let config = ConsumerConfig::builder()
        .bootstrap_servers(mock.bootstrap_servers())
        .auto_offset_reset(reset)
        .fetch_max_wait(Duration::from_millis(100))
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let consumer = Consumer::new(config).unwrap();
    consumer.assign([TopicPartition::new("cut", 0)]).unwrap();
    consumer
}

/// Polls until `values` holds `until` entries (value -> (offset, times
/// delivered)), or an error comes; returns the error.
async fn consume_into(
    consumer: &mut Consumer,
    values: &mut BTreeMap<String, (i64, usize)>,
    until: usize,
) -> Option<Error> {
    let deadline = Instant::now() + WAIT;
    while values.len() < until && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)).await {
            Ok(records) => {
                for r in records {
                    let value = String::from_utf8(r.value().unwrap().to_vec()).unwrap();
                    values.entry(value).or_insert((r.offset(), 0)).1 += 1;
                }
            }
            Err(e) => return Some(e),
        }
    }
    None
}

fn produce_new(mock: &MockCluster, from: i64, count: i64) {
    let base = mock
        .produce(
            "cut",
            0,
            (from..from + count).map(|i| MockRecord::new(format!("new-{i}"))),
        )
        .unwrap();
    assert_eq!(base, from);
}

/// Every `old-i` for `old` and every `new-i` for `new`, each once, at its
/// offset.
fn assert_exactly(
    values: &BTreeMap<String, (i64, usize)>,
    old: std::ops::Range<i64>,
    new: std::ops::Range<i64>,
) {
    let expected: BTreeMap<String, (i64, usize)> = old
        .map(|i| (format!("old-{i}"), (i, 1)))
        .chain(new.map(|i| (format!("new-{i}"), (i, 1))))
        .collect();
    assert_eq!(*values, expected);
}

fn validations_on(mock: &MockCluster, broker: i32) -> usize {
    mock.requests()
        .iter()
        .filter(|r| r.broker == broker && r.api == Some(ApiKey::OffsetForLeaderEpoch))
        .count()
}

#[test]
fn a_truncated_log_moves_the_position_back_to_where_it_diverges() {
    crate::common::block_on(async {
        let mock = cluster();
        let mut consumer = consumer(&mock, OffsetReset::Earliest);
        let mut values = BTreeMap::new();
        assert!(consume_into(&mut consumer, &mut values, 100)
            .await
            .is_none());
        assert_exactly(&values, 0..100, 0..0);

        // Broker 2 takes over with only offsets 0..60: old-60..old-99 are gone,
        // and new records take their offsets.
        assert_eq!(mock.set_leader_truncated("cut", 0, 2, 60).unwrap(), 60);
        produce_new(&mock, 60, 30);
        let error = consume_into(&mut consumer, &mut values, 130).await;
        assert!(error.is_none(), "{error:?}");
        assert_exactly(&values, 0..100, 60..90);
        assert_eq!(consumer.position(&TopicPartition::new("cut", 0)), Some(90));
        assert!(validations_on(&mock, 2) >= 1, "validated on broker 2");
        consumer.close().await.unwrap();
    })
}

#[test]
fn a_truncated_log_without_a_reset_policy_is_an_error_naming_the_offsets() {
    crate::common::block_on(async {
        let mock = cluster();
        let mut consumer = consumer(&mock, OffsetReset::None);
        let tp = TopicPartition::new("cut", 0);
        // No committed offset under `none`: start from a seek.
        consumer.seek(&tp, 0).unwrap();
        let mut values = BTreeMap::new();
        assert!(consume_into(&mut consumer, &mut values, 100)
            .await
            .is_none());

        assert_eq!(mock.set_leader_truncated("cut", 0, 3, 60).unwrap(), 60);
        produce_new(&mock, 60, 30);
        let error = consume_into(&mut consumer, &mut values, 130).await;
        match error {
            Some(Error::Fetch(FetchError::LogTruncation {
                partition,
                offset,
                divergent_offset,
            })) => {
                assert_eq!(partition, tp);
                assert_eq!(offset, 100);
                assert_eq!(divergent_offset, Some(60));
            }
            other => panic!("expected a log truncation error, got {other:?}"),
        }
        // Nothing was skipped or delivered again meanwhile.
        assert_exactly(&values, 0..100, 0..0);
        assert_eq!(consumer.position(&tp), Some(100));
        // The application decides: read what the log holds from the cut on.
        consumer.seek(&tp, 60).unwrap();
        let error = consume_into(&mut consumer, &mut values, 130).await;
        assert!(error.is_none(), "{error:?}");
        assert_exactly(&values, 0..100, 60..90);
        consumer.close().await.unwrap();
    })
}
