//! One retry policy for every request kind, against both mock clusters:
//! each API is answered K times in a row with an error that passes by
//! itself, and the K retries are spaced as the policy says
//! (`retry.backoff.ms` 100 doubling to `retry.backoff.max.ms` 1000, ±20%
//! jitter): not sent back to back (a coordinator loading its offsets
//! after a restart once got 15,000 OffsetFetch requests in 6 s), and not
//! held back much longer than the policy's longest wait. Consuming then
//! goes on: every record arrives, commits land, and nothing reaches
//! `poll` as an error the consumer does not go on after.
//!
//! See docs/reliability.md ("What each error code does").

// Drives a `Consumer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::{standard, TestCluster};
use common::peers::{config, poll_through_faults, produce_range};
use lazykafka::protocol::ApiKey;
use lazykafka::{Consumer, ErrorCode, TopicPartition};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

on_both_mocks!(
    find_coordinator_loading,
    offset_fetch_loading,
    join_group_loading,
    sync_group_coordinator_moved,
    heartbeat_loading,
    commit_loading,
    list_offsets_leader_moved,
    fetch_leader_storage_error,
    metadata_leader_not_available,
    offset_for_leader_epoch_leader_moved,
    committed_lookup_loading,
);

/// How many errors each case injects.
const K: usize = 5;

/// How long a case may take.
const WAIT: Duration = Duration::from_secs(30);

/// Checks that the first `K + 1` attempts (the K refused and the one that
/// got through) are spaced as the retry policy says: the `n`-th retry at
/// least 70% of `min(100 ms × 2^(n-1), 1 s)` after the one before (the
/// policy's jitter allows 80%; the rest is for the mock's clock), and none
/// more than 1.2 s + 1 s later (the longest wait, jitter, and a slow
/// machine).
fn assert_spaced_by_the_policy(what: &str, times: &[Duration]) {
    assert!(
        times.len() > K,
        "{what}: {} attempts, expected at least {}: {times:?}",
        times.len(),
        K + 1
    );
    for (n, pair) in times[..=K].windows(2).enumerate() {
        let least = Duration::from_millis(100)
            .saturating_mul(1 << n)
            .min(Duration::from_secs(1))
            .mul_f64(0.7);
        let gap = pair[1].saturating_sub(pair[0]);
        assert!(
            gap >= least,
            "{what}: retry {} came {gap:?} after the attempt before, under {least:?}: {times:?}",
            n + 1
        );
        assert!(
            gap <= Duration::from_millis(2200),
            "{what}: retry {} waited {gap:?}: {times:?}",
            n + 1
        );
    }
}

/// A group consumer of `t` on `mock`, subscribed.
fn member<C: TestCluster>(mock: &C) -> Consumer {
    let consumer = Consumer::new(config(&mock.bootstrap(), Some("g")).build().unwrap()).unwrap();
    consumer.subscribe(["t"]).unwrap();
    consumer
}

/// Polls until every one of `n` records produced (values 0..n) arrived;
/// fails on an error the consumer does not go on after.
async fn consume_all(consumer: &mut Consumer, n: usize, what: &str) {
    let deadline = Instant::now() + WAIT;
    let mut seen = BTreeSet::new();
    while seen.len() < n {
        assert!(
            Instant::now() < deadline,
            "{what}: {} of {n} records",
            seen.len()
        );
        for r in poll_through_faults(consumer, Duration::from_millis(100)).await {
            seen.insert(String::from_utf8_lossy(r.value().unwrap_or_default()).into_owned());
        }
    }
}

/// Answers `api` K times with `code` before the consumer that `start`
/// makes begins, then checks the spacing of its attempts and that all
/// `records` it reads arrive.
async fn refused<C: TestCluster>(
    api: ApiKey,
    code: ErrorCode,
    start: fn(&C) -> Consumer,
    records: usize,
) {
    let mock: C = standard();
    produce_range(&mock.bootstrap(), "t", 2, 0..10, "none");
    mock.push_errors(api, code, K);
    let mut consumer = start(&mock);
    let what = format!("{}: {api:?} answered {code} {K} times", mock.name());
    consume_all(&mut consumer, records, &what).await;
    assert_spaced_by_the_policy(&what, &mock.request_times(api));
    consumer.close().await.unwrap();
}

/// A group member of `t` answered K times with `code` on `api` as it
/// joins: all 10 records arrive.
async fn refused_on_the_way_in<C: TestCluster>(api: ApiKey, code: ErrorCode) {
    refused::<C>(api, code, member, 10).await
}

async fn find_coordinator_loading<C: TestCluster>() {
    refused_on_the_way_in::<C>(
        ApiKey::FindCoordinator,
        ErrorCode::CoordinatorLoadInProgress,
    )
    .await
}

async fn offset_fetch_loading<C: TestCluster>() {
    refused_on_the_way_in::<C>(ApiKey::OffsetFetch, ErrorCode::CoordinatorLoadInProgress).await
}

async fn join_group_loading<C: TestCluster>() {
    refused_on_the_way_in::<C>(ApiKey::JoinGroup, ErrorCode::CoordinatorLoadInProgress).await
}

async fn sync_group_coordinator_moved<C: TestCluster>() {
    refused_on_the_way_in::<C>(ApiKey::SyncGroup, ErrorCode::NotCoordinator).await
}

/// A stable member whose heartbeats meet a loading coordinator keeps its
/// partitions and retries under the policy.
async fn heartbeat_loading<C: TestCluster>() {
    let mock: C = standard();
    produce_range(&mock.bootstrap(), "t", 2, 0..10, "none");
    let mut consumer = member(&mock);
    let what = format!("{}: Heartbeat", mock.name());
    consume_all(&mut consumer, 10, &what).await;
    let before = mock.request_times(ApiKey::Heartbeat).len();
    mock.push_errors(ApiKey::Heartbeat, ErrorCode::CoordinatorLoadInProgress, K);
    let deadline = Instant::now() + WAIT;
    while mock.request_times(ApiKey::Heartbeat).len() < before + K + 1 {
        assert!(Instant::now() < deadline, "{what}: too few heartbeats");
        poll_through_faults(&mut consumer, Duration::from_millis(100)).await;
    }
    let times = mock.request_times(ApiKey::Heartbeat);
    assert_spaced_by_the_policy(&what, &times[before..]);
    let all: BTreeSet<TopicPartition> = (0..2).map(|p| TopicPartition::new("t", p)).collect();
    assert_eq!(consumer.assignment(), all, "{what}: partitions kept");
    consumer.close().await.unwrap();
}

/// The application's commit meets a loading coordinator: sent again under
/// the policy, and it lands.
async fn commit_loading<C: TestCluster>() {
    let mock: C = standard();
    produce_range(&mock.bootstrap(), "t", 2, 0..10, "none");
    let mut consumer = member(&mock);
    let what = format!("{}: OffsetCommit", mock.name());
    consume_all(&mut consumer, 10, &what).await;
    let before = mock.request_times(ApiKey::OffsetCommit).len();
    mock.push_errors(
        ApiKey::OffsetCommit,
        ErrorCode::CoordinatorLoadInProgress,
        K,
    );
    consumer
        .commit()
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let times = mock.request_times(ApiKey::OffsetCommit);
    assert_eq!(times.len() - before, K + 1, "{what}: {times:?}");
    assert_spaced_by_the_policy(&what, &times[before..]);
    let committed = consumer
        .committed([TopicPartition::new("t", 0), TopicPartition::new("t", 1)])
        .await
        .unwrap();
    assert_eq!(committed.values().flatten().sum::<i64>(), 10, "{what}");
    consumer.close().await.unwrap();
}

/// Partition 1 of `t` (led by broker 3, values 1, 3, 5, ...) assigned by
/// hand, from the earliest offset: a ListOffsets, then Fetch to broker 3
/// alone.
fn reader_of_t1<C: TestCluster>(mock: &C) -> Consumer {
    let consumer = Consumer::new(config(&mock.bootstrap(), None).build().unwrap()).unwrap();
    consumer.assign([TopicPartition::new("t", 1)]).unwrap();
    consumer
}

/// `api` answered K times with `code` while [`reader_of_t1`] starts: all
/// 5 records of the partition arrive.
async fn refused_reading_t1<C: TestCluster>(api: ApiKey, code: ErrorCode) {
    refused::<C>(api, code, reader_of_t1, 5).await
}

/// The offset lookup for `auto.offset.reset` answered NOT_LEADER_OR_FOLLOWER:
/// the metadata is refreshed and the lookup retried under the policy.
async fn list_offsets_leader_moved<C: TestCluster>() {
    refused_reading_t1::<C>(ApiKey::ListOffsets, ErrorCode::NotLeaderOrFollower).await
}

/// A leader refusing Fetch (KAFKA_STORAGE_ERROR: a failed log directory):
/// retried under the policy; every record arrives once it answers.
async fn fetch_leader_storage_error<C: TestCluster>() {
    refused_reading_t1::<C>(ApiKey::Fetch, ErrorCode::KafkaStorageError).await
}

/// Metadata naming no leader for the topic (LEADER_NOT_AVAILABLE, as while
/// a new topic's leaders are elected) for the first K lookups and more:
/// looked up again under the policy, and every record arrives once the
/// leaders are known.
async fn metadata_leader_not_available<C: TestCluster>() {
    let mock: C = standard();
    produce_range(&mock.bootstrap(), "t", 2, 0..10, "none");
    // The producer's lookups are not the consumer's.
    mock.clear_requests();
    mock.set_metadata_error("t", Some(ErrorCode::LeaderNotAvailable));
    let mut consumer = reader_of_t1(&mock);
    let what = format!("{}: Metadata without a leader", mock.name());
    let deadline = Instant::now() + WAIT;
    while mock.request_times(ApiKey::Metadata).len() <= K {
        assert!(
            Instant::now() < deadline,
            "{what}: fewer than {} lookups",
            K + 1
        );
        let records = poll_through_faults(&mut consumer, Duration::from_millis(100)).await;
        assert!(records.is_empty(), "{what}: records without a leader");
    }
    mock.set_metadata_error("t", None);
    consume_all(&mut consumer, 5, &what).await;
    assert_spaced_by_the_policy(&what, &mock.request_times(ApiKey::Metadata));
    consumer.close().await.unwrap();
}

/// The partition's leader moves while it is read: the position is checked
/// with the new leader (OffsetForLeaderEpoch, KIP-320), which answers
/// NOT_LEADER_OR_FOLLOWER K times; checked again under the policy, and
/// the records written after the move arrive.
async fn offset_for_leader_epoch_leader_moved<C: TestCluster>() {
    let mock: C = standard();
    produce_range(&mock.bootstrap(), "t", 2, 0..10, "none");
    let mut consumer = reader_of_t1(&mock);
    let what = format!("{}: OffsetForLeaderEpoch refused", mock.name());
    consume_all(&mut consumer, 5, &what).await;
    mock.clear_requests();
    mock.push_errors(
        ApiKey::OffsetForLeaderEpoch,
        ErrorCode::NotLeaderOrFollower,
        K,
    );
    // `t` is led by broker 1 for partition 0 and broker 3 for partition 1
    // (`standard`): broker 2 takes partition 1, with a new leader epoch.
    mock.set_leader("t", 1, 2);
    produce_range(&mock.bootstrap(), "t", 2, 10..20, "none");
    let deadline = Instant::now() + WAIT;
    let mut seen = BTreeSet::new();
    while seen.len() < 5 {
        assert!(
            Instant::now() < deadline,
            "{what}: {} of 5 records",
            seen.len()
        );
        for r in poll_through_faults(&mut consumer, Duration::from_millis(100)).await {
            seen.insert(r.offset());
        }
    }
    assert_eq!(seen, (5..10).collect(), "{what}");
    assert_spaced_by_the_policy(&what, &mock.request_times(ApiKey::OffsetForLeaderEpoch));
    consumer.close().await.unwrap();
}

/// The application's `committed()` answered COORDINATOR_LOAD_IN_PROGRESS
/// K times (the coordinator loading its offsets after a restart): asked
/// again under the policy within the call, and the committed offset comes
/// back instead of an error.
async fn committed_lookup_loading<C: TestCluster>() {
    let mock: C = standard();
    let consumer = Consumer::new(config(&mock.bootstrap(), Some("g")).build().unwrap()).unwrap();
    let t0 = TopicPartition::new("t", 0);
    // Nothing assigned: the consumer's own OffsetFetch (for positions)
    // stays out of the count.
    consumer.commit_offsets([(t0.clone(), 3)]).await.unwrap();
    mock.clear_requests();
    mock.push_errors(ApiKey::OffsetFetch, ErrorCode::CoordinatorLoadInProgress, K);
    let what = format!("{}: committed() while the coordinator loads", mock.name());
    let committed = common::timeout(WAIT, consumer.committed([t0.clone()]))
        .await
        .unwrap_or_else(|| panic!("{what}: no answer within {WAIT:?}"))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(committed[&t0], Some(3), "{what}");
    assert_spaced_by_the_policy(&what, &mock.request_times(ApiKey::OffsetFetch));
    consumer.close().await.unwrap();
}
