//! `Consumer::metrics` on librdkafka's mock and on `lazykafka::mock`: the
//! lag follows the log from Fetch answers alone (0 when caught up, growing
//! while records are produced and not polled), the counters match what was
//! consumed and what the brokers were asked, the group's membership shows,
//! and the snapshot serialises to JSON. Waits are condition-based with
//! deadlines.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::{standard, TestCluster};
use common::peers::{config, produce_range, produce_range_in_one_batch, WAIT};
use common::sleep;
use lazykafka::consumer::metrics::PartitionMetrics;
use lazykafka::{Consumer, ConsumerMetrics, TopicPartition};
use std::time::{Duration, Instant};

fn p0() -> TopicPartition {
    TopicPartition::new("t", 0)
}

fn partition(m: &ConsumerMetrics, p: i32) -> PartitionMetrics {
    m.partitions
        .iter()
        .find(|x| x.topic == "t" && x.partition == p)
        .cloned()
        .unwrap_or_else(|| panic!("partition {p} in {m:?}"))
}

/// Waits (without polling: the background task fetches on its own) until
/// `cond` holds on the consumer's metrics; returns the last snapshot.
async fn metrics_until(
    consumer: &Consumer,
    what: &str,
    mut cond: impl FnMut(&ConsumerMetrics) -> bool,
) -> ConsumerMetrics {
    let deadline = Instant::now() + WAIT;
    loop {
        let m = consumer.metrics();
        if cond(&m) {
            return m;
        }
        assert!(Instant::now() < deadline, "{what}: last metrics {m:#?}");
        sleep(Duration::from_millis(10)).await;
    }
}

async fn poll_count(consumer: &mut Consumer, count: usize) -> usize {
    let deadline = Instant::now() + WAIT;
    let mut n = 0;
    while n < count && Instant::now() < deadline {
        n += consumer
            .poll(Duration::from_millis(100))
            .await
            .unwrap()
            .len();
    }
    n
}

/// 20 records read: lag 0 and the counters say 20. 15 more produced and
/// not polled: the lag becomes 15 from the Fetch answer that brings them.
/// Polled: 0 again, 35 consumed.
async fn lag_follows_the_log_and_counts_match<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    // Partition 0 gets the even records: 20 of 40.
    produce_range(&bootstrap, "t", 2, 0..40, "none");
    let mut consumer = Consumer::new(config(&bootstrap, None).build().unwrap()).unwrap();
    consumer.assign([p0()]).unwrap();
    let before = partition(&consumer.metrics(), 0);
    assert_eq!(
        (before.position, before.high_watermark, before.lag),
        (None, None, None)
    );
    assert_eq!(poll_count(&mut consumer, 20).await, 20, "{}", mock.name());

    let m = metrics_until(&consumer, "caught up", |m| partition(m, 0).lag == Some(0)).await;
    let p = partition(&m, 0);
    assert_eq!(p.position, Some(20), "{}", mock.name());
    assert_eq!(p.high_watermark, Some(20), "{}", mock.name());
    assert_eq!(p.records_consumed, 20, "{}", mock.name());
    assert_eq!(p.records_fetched, 20, "{}", mock.name());
    assert!(p.bytes_fetched > 0, "{}", mock.name());
    assert_eq!(m.total_lag, 0);
    // Broker 1 leads partition 0: its counters agree with the requests it
    // received.
    let leader = m
        .brokers
        .values()
        .find(|b| b.broker == Some(1))
        .unwrap_or_else(|| panic!("{}: broker 1 in {m:#?}", mock.name()));
    assert!(leader.responses > 0 && leader.requests >= leader.responses);
    assert!(leader.bytes_in >= p.bytes_fetched);
    assert!(leader.connects >= 1);
    let l = leader.latency;
    assert!(
        l.min_us.unwrap() <= l.avg_us.unwrap() && l.avg_us.unwrap() <= l.max_us.unwrap(),
        "{l:?}"
    );
    let received = mock.requests().iter().filter(|(b, _)| *b == 1).count() as u64;
    assert!(
        leader.responses <= received,
        "{}: {} answers, {received} requests seen by broker 1",
        mock.name(),
        leader.responses
    );
    assert!(m.group.is_none());

    // In one batch: the consumer does not fetch a partition again while
    // records it fetched wait to be polled, so a Fetch answer that caught
    // only the first of several batches would leave the lag at 1.
    produce_range_in_one_batch(&bootstrap, "t", 2, 40..70);
    let m = metrics_until(&consumer, "lag of the records not polled", |m| {
        partition(m, 0).lag == Some(15)
    })
    .await;
    assert_eq!(partition(&m, 0).high_watermark, Some(35), "{}", mock.name());
    assert_eq!(partition(&m, 0).records_consumed, 20, "nothing polled");

    assert_eq!(poll_count(&mut consumer, 15).await, 15);
    let m = metrics_until(&consumer, "caught up again", |m| {
        partition(m, 0).lag == Some(0)
    })
    .await;
    let p = partition(&m, 0);
    assert_eq!(
        (p.position, p.records_consumed, p.records_fetched),
        (Some(35), 35, 35)
    );

    // The JSON form carries the same numbers.
    let json = serde_json::to_value(&m).unwrap();
    let jp = &json["partitions"][0];
    assert_eq!(jp["topic"], "t");
    assert_eq!(jp["lag"], 0);
    assert_eq!(jp["position"], 35);
    assert!(json["brokers"]
        .as_object()
        .unwrap()
        .values()
        .any(|b| b["broker"] == 1));
    consumer.close().await.unwrap();
}

/// In a group: stable, a generation (or epoch) of at least 1, one
/// rebalance with its time.
async fn group_membership_shows<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    produce_range(&bootstrap, "t", 2, 0..4, "none");
    let mut consumer = Consumer::new(config(&bootstrap, Some("g")).build().unwrap()).unwrap();
    consumer.subscribe(["t"]).unwrap();
    let group = consumer.metrics().group.expect("a group.id");
    assert_eq!((group.state.as_str(), group.rebalances), ("unjoined", 0));
    assert_eq!(poll_count(&mut consumer, 4).await, 4, "{}", mock.name());
    let m = consumer.metrics();
    let group = m.group.expect("a group.id");
    assert_eq!(group.group, "g");
    assert_eq!(group.protocol, "classic");
    assert_eq!(group.state, "stable", "{}", mock.name());
    assert!(group.generation >= 1, "{group:?}");
    assert!(!group.member_id.is_empty());
    assert_eq!(group.rebalances, 1, "{}", mock.name());
    assert!(group.last_rebalance_ms.unwrap() > 0);
    assert!(group.last_rebalance_age_ms.unwrap() < WAIT.as_millis() as u64);
    assert_eq!(m.partitions.len(), 2, "both partitions assigned");
    assert_eq!(m.total_lag, 0);
    consumer.close().await.unwrap();
}

on_both_mocks!(lag_follows_the_log_and_counts_match, group_membership_shows);
