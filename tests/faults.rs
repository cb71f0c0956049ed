//! Broker trouble while consuming, each case against librdkafka's mock
//! cluster and against `lazykafka::mock` with the same assertions: every
//! data set is deterministic and every offset is accounted for at the end.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::TestCluster;
use lazykafka::events::Purpose;
use lazykafka::protocol::ApiKey;
use lazykafka::{Consumer, ConsumerConfig, OffsetReset, TopicPartition};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

/// Produces `count` records with values `v{first + i}` to partition 0.
fn produce(bootstrap: &str, topic: &str, first: usize, count: usize) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    for i in first..first + count {
        let value = format!("v{i}");
        producer
            .send(BaseRecord::<(), _>::to(topic).payload(&value).partition(0))
            .map_err(|(e, _)| e)
            .unwrap();
        producer.poll(Duration::ZERO);
    }
    producer.flush(WAIT).unwrap();
}

fn config(bootstrap: &str) -> lazykafka::config::ConsumerConfigBuilder {
    ConsumerConfig::builder()
        .bootstrap_servers(bootstrap)
        .auto_offset_reset(OffsetReset::Earliest)
        .fetch_max_wait(Duration::from_millis(100))
        .enable_auto_commit(false)
        .session_timeout(Duration::from_secs(6))
        .heartbeat_interval(Duration::from_millis(300))
}

/// Polls until `offsets` holds `until` distinct offsets, recording each
/// delivery (so a duplicate shows as a count above one).
/// One poll: records, or none after an error the consumer goes on after
/// by itself (a broker unreachable, a connection lost); any other error
/// fails the test.
async fn poll_through_faults(consumer: &mut Consumer) -> Vec<lazykafka::ConsumerRecord> {
    match consumer.poll(Duration::from_millis(100)).await {
        Ok(records) => records,
        Err(e) if e.is_retriable() => {
            eprintln!("poll: {e}");
            Vec::new()
        }
        Err(e) => panic!("poll: {e}"),
    }
}

async fn consume_into(consumer: &mut Consumer, offsets: &mut BTreeMap<i64, usize>, until: usize) {
    let deadline = Instant::now() + WAIT;
    while offsets.len() < until && Instant::now() < deadline {
        for r in poll_through_faults(consumer).await {
            assert_eq!(r.value(), Some(format!("v{}", r.offset()).as_bytes()));
            *offsets.entry(r.offset()).or_default() += 1;
        }
    }
}

fn assert_exactly(offsets: &BTreeMap<i64, usize>, count: i64) {
    let expected: Vec<i64> = (0..count).collect();
    assert_eq!(
        offsets.keys().copied().collect::<Vec<_>>(),
        expected,
        "every offset"
    );
    assert!(offsets.values().all(|n| *n == 1), "none twice: {offsets:?}");
}

async fn a_leader_move_mid_stream_loses_nothing_and_the_old_connection_idles_out<C: TestCluster>() {
    let mock = C::start(3);
    mock.create_topic("moving", &[1]);
    let bootstrap = mock.bootstrap();
    produce(&bootstrap, "moving", 0, 300);
    let mut consumer = Consumer::new(
        config(&bootstrap)
            .max_poll_records(50)
            .connections_max_idle(Some(Duration::from_millis(1500)))
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.assign([TopicPartition::new("moving", 0)]).unwrap();
    let mut offsets = BTreeMap::new();
    consume_into(&mut consumer, &mut offsets, 100).await;
    assert!(offsets.len() >= 100);

    // The leader moves to broker 3 while the consumer is mid-stream.
    mock.set_leader("moving", 0, 3);
    produce(&bootstrap, "moving", 300, 200);
    consume_into(&mut consumer, &mut offsets, 500).await;
    assert_exactly(&offsets, 500);
    let leaders = |c: &Consumer| -> Vec<Option<i32>> {
        c.connections()
            .iter()
            .filter(|c| c.purpose == Purpose::Leader)
            .map(|c| c.broker)
            .collect()
    };
    assert!(
        leaders(&consumer).contains(&Some(3)),
        "{:?}",
        consumer.connections()
    );
    // Broker 1's connection carries nothing now and is reaped when idle.
    let deadline = Instant::now() + WAIT;
    while leaders(&consumer).contains(&Some(1)) && Instant::now() < deadline {
        consumer.poll(Duration::from_millis(100)).await.unwrap();
    }
    assert_eq!(leaders(&consumer), vec![Some(3)]);
    consumer.close().await.unwrap();
}

async fn a_coordinator_move_is_followed_and_commits_land<C: TestCluster>() {
    let mock = C::start(3);
    mock.create_topic("t", &[1]);
    mock.set_coordinator("g", 2);
    let bootstrap = mock.bootstrap();
    produce(&bootstrap, "t", 0, 100);
    let mut consumer = Consumer::new(config(&bootstrap).group_id("g").build().unwrap()).unwrap();
    consumer.subscribe(["t"]).unwrap();
    let mut offsets = BTreeMap::new();
    consume_into(&mut consumer, &mut offsets, 100).await;
    consumer.commit().await.expect("commit to broker 2");

    // The coordinator moves: broker 2 answers NOT_COORDINATOR from now on.
    mock.set_coordinator("g", 3);
    produce(&bootstrap, "t", 100, 50);
    consume_into(&mut consumer, &mut offsets, 150).await;
    assert_exactly(&offsets, 150);
    // Heartbeats to broker 2 now get NOT_COORDINATOR: the coordinator is
    // looked up again and gets its own connection on broker 3.
    let on_3 = |c: &Consumer| {
        c.connections()
            .iter()
            .any(|c| c.purpose == Purpose::Coordinator && c.broker == Some(3))
    };
    let deadline = Instant::now() + WAIT;
    while !on_3(&consumer) && Instant::now() < deadline {
        consumer.poll(Duration::from_millis(100)).await.unwrap();
    }
    assert!(on_3(&consumer), "{:?}", consumer.connections());
    // The member rejoins through the new coordinator; a commit lands once
    // it is back in a stable group.
    let deadline = Instant::now() + WAIT;
    let mut committed = false;
    while !committed && Instant::now() < deadline {
        consumer.poll(Duration::from_millis(100)).await.unwrap();
        committed = consumer.commit().await.is_ok();
    }
    assert!(committed, "commit after the coordinator moved");
    let read_back = consumer
        .committed([TopicPartition::new("t", 0)])
        .await
        .unwrap();
    assert_eq!(read_back[&TopicPartition::new("t", 0)], Some(150));
    consumer.close().await.unwrap();
}

async fn a_broker_down_is_retried_with_backoff_and_consumption_resumes<C: TestCluster>() {
    let mock = C::start(2);
    mock.create_topic("t", &[1]);
    let bootstrap = mock.bootstrap();
    let leader_addr = mock.bootstraps()[0].clone();
    produce(&bootstrap, "t", 0, 50);
    // A leaderless partition is reported after
    // `topic.metadata.propagation.max.ms`: 1 s here (5 s by default), so
    // that the three seconds below see the report.
    let mut consumer = Consumer::new(
        config(&bootstrap)
            .reconnect_backoff(Duration::from_millis(50))
            .reconnect_backoff_max(Duration::from_millis(1000))
            .topic_metadata_propagation_max(Duration::from_secs(1))
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.assign([TopicPartition::new("t", 0)]).unwrap();
    let mut offsets = BTreeMap::new();
    consume_into(&mut consumer, &mut offsets, 50).await;

    mock.broker_down(1);
    let connects = |c: &Consumer| {
        c.broker_counters()
            .get(&leader_addr)
            .map_or(0, |b| b.connects)
    };
    let requests = |c: &Consumer| -> u64 { c.broker_counters().values().map(|b| b.requests).sum() };
    let metadata_requests = || {
        mock.requests()
            .iter()
            .filter(|r| r.1 == ApiKey::Metadata.code())
            .count()
    };
    let (connects_before, requests_before) = (connects(&consumer), requests(&consumer));
    let metadata_before = metadata_requests();
    // Three seconds of a dead leader: `poll` says so, naming it, once.
    let start = Instant::now();
    let mut errors = Vec::new();
    while start.elapsed() < Duration::from_secs(3) {
        if let Err(e) = consumer.poll(Duration::from_millis(100)).await {
            errors.push(e);
        }
    }
    assert!(
        errors.iter().all(|e| e.is_retriable()),
        "{}: {errors:?}",
        mock.name()
    );
    // How the outage is reported depends on the metadata: while it still
    // names the dead broker as leader, reconnects fail and that is
    // reported, naming it; once it reports the partition leaderless,
    // nothing is dialled until a leader returns, and the missing leader is
    // reported after `topic.metadata.propagation.max.ms`.
    let named = |e: &lazykafka::Error| {
        matches!(
            e,
            lazykafka::Error::Connection {
                broker: Some(1),
                purpose: Purpose::Leader,
                ..
            } | lazykafka::Error::NoLeader { partition: 0, .. }
        )
    };
    assert!(
        !errors.is_empty() && errors.iter().all(named),
        "{}: {errors:?}",
        mock.name()
    );
    assert!(errors.len() <= 3, "{}: {errors:?}", mock.name());
    let attempts = connects(&consumer) - connects_before;
    let sent = requests(&consumer) - requests_before;
    // Reconnects to the dead broker back off exponentially from 50 ms to
    // 1 s (±20%): about 6 in 3 s at most (none at all once the metadata
    // says the partition has no leader). A busy loop would make hundreds
    // of connects or requests.
    assert!(attempts <= 12, "no busy loop: {attempts} connects in 3 s");
    assert!(sent <= 150, "no busy loop: {sent} requests in 3 s");
    // Metadata that names no usable leader is asked again with a backoff
    // that grows from 100 ms to 1 s (±20%): about 6 in 3 s. At a fixed
    // 100 ms it was about 30.
    let metadata = metadata_requests() - metadata_before;
    assert!(
        metadata <= 10,
        "{}: {metadata} Metadata requests in 3 s",
        mock.name()
    );

    mock.broker_up(1);
    produce(&bootstrap, "t", 50, 50);
    consume_into(&mut consumer, &mut offsets, 100).await;
    assert_exactly(&offsets, 100);
    consumer.close().await.unwrap();
}

async fn a_topic_that_appears_later_is_consumed<C: TestCluster>() {
    let mock = C::start(1);
    let bootstrap = mock.bootstrap();
    let mut consumer = Consumer::new(
        config(&bootstrap)
            .allow_auto_create_topics(false)
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.assign([TopicPartition::new("later", 0)]).unwrap();
    // Nothing yet: the topic does not exist.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(500) {
        assert!(consumer
            .poll(Duration::from_millis(100))
            .await
            .unwrap()
            .is_empty());
    }
    mock.create_topic("later", &[1]);
    produce(&bootstrap, "later", 0, 20);
    let mut offsets = BTreeMap::new();
    consume_into(&mut consumer, &mut offsets, 20).await;
    assert_exactly(&offsets, 20);
    consumer.close().await.unwrap();
}

async fn a_consumer_dropped_without_commit_is_resumed_from_the_last_commit<C: TestCluster>() {
    let mock = C::start(2);
    mock.create_topic("t", &[1]);
    mock.set_coordinator("resume", 2);
    let bootstrap = mock.bootstrap();
    produce(&bootstrap, "t", 0, 100);
    let cfg = || {
        config(&bootstrap)
            .group_id("resume")
            .session_timeout(Duration::from_secs(2))
            .build()
            .unwrap()
    };
    let mut first = Consumer::new(cfg()).unwrap();
    first.subscribe(["t"]).unwrap();
    let mut offsets = BTreeMap::new();
    consume_into(&mut first, &mut offsets, 100).await;
    first
        .commit_offsets([(TopicPartition::new("t", 0), 60)])
        .await
        .unwrap();
    // Dropped: no commit of what it read past 60, no LeaveGroup.
    drop(first);

    let mut second = Consumer::new(cfg()).unwrap();
    second.subscribe(["t"]).unwrap();
    let mut again = BTreeMap::new();
    consume_into(&mut second, &mut again, 40).await;
    assert_eq!(
        again.keys().copied().collect::<Vec<_>>(),
        (60..100).collect::<Vec<i64>>(),
        "from the commit, with no gap"
    );
    second.close().await.unwrap();
}

async fn requests_that_time_out_close_the_connection_and_consumption_resumes<C: TestCluster>() {
    use futures::{FutureExt, StreamExt};
    use lazykafka::events::{CloseReason, ConnectionError, EventKind};
    let mock = C::start(2);
    mock.create_topic("slow", &[1]);
    let bootstrap = mock.bootstrap();
    produce(&bootstrap, "slow", 0, 50);
    let mut consumer = Consumer::new(
        config(&bootstrap)
            .request_timeout(Duration::from_millis(1000))
            .build()
            .unwrap(),
    )
    .unwrap();
    let mut events = consumer.connection_events();
    consumer.assign([TopicPartition::new("slow", 0)]).unwrap();
    let mut offsets = BTreeMap::new();
    consume_into(&mut consumer, &mut offsets, 50).await;

    // Broker 1 answers after 3 s: every request to it times out.
    mock.set_delay(1, 3000);
    produce(&bootstrap, "slow", 50, 50);
    let mut timed_out = false;
    let deadline = Instant::now() + WAIT;
    while !timed_out && Instant::now() < deadline {
        for r in poll_through_faults(&mut consumer).await {
            *offsets.entry(r.offset()).or_default() += 1;
        }
        while let Some(Some(e)) = events.next().now_or_never() {
            if let EventKind::Closed {
                reason: CloseReason::Error,
                error: Some(error),
            } = &e.kind
            {
                timed_out |= matches!(error, ConnectionError::RequestTimeout { .. });
            }
        }
    }
    assert!(timed_out, "a request timed out and its connection closed");

    // Answers come at once again: fetching resumes, nothing lost or twice.
    mock.set_delay(1, 0);
    consume_into(&mut consumer, &mut offsets, 100).await;
    assert_exactly(&offsets, 100);
    consumer.close().await.unwrap();
}

/// KIP-320: after a leader change, the position (which carries the epoch
/// of the last record) is validated with OffsetForLeaderEpoch on the new
/// leader before anything is fetched from it; nothing is lost or repeated.
async fn a_leader_change_is_validated_on_the_new_leader_before_fetching<C: TestCluster>() {
    let mock = C::start(3);
    mock.create_topic("epochs", &[1]);
    let bootstrap = mock.bootstrap();
    produce(&bootstrap, "epochs", 0, 100);
    let mut consumer = Consumer::new(config(&bootstrap).build().unwrap()).unwrap();
    consumer.assign([TopicPartition::new("epochs", 0)]).unwrap();
    let mut offsets = BTreeMap::new();
    consume_into(&mut consumer, &mut offsets, 100).await;
    assert_exactly(&offsets, 100);

    mock.clear_requests();
    mock.set_leader("epochs", 0, 3);
    produce(&bootstrap, "epochs", 100, 50);
    consume_into(&mut consumer, &mut offsets, 150).await;
    assert_exactly(&offsets, 150);
    const FETCH: i16 = 1;
    const OFFSET_FOR_LEADER_EPOCH: i16 = 23;
    let requests: Vec<(i32, i16)> = mock
        .requests()
        .into_iter()
        .filter(|(_, api)| [FETCH, OFFSET_FOR_LEADER_EPOCH].contains(api))
        .collect();
    let validated = requests
        .iter()
        .position(|r| *r == (3, OFFSET_FOR_LEADER_EPOCH))
        .unwrap_or_else(|| {
            panic!(
                "{}: no OffsetForLeaderEpoch on broker 3: {requests:?}",
                mock.name()
            )
        });
    let first_fetch = requests
        .iter()
        .position(|r| *r == (3, FETCH))
        .expect("fetched from broker 3");
    assert!(
        validated < first_fetch,
        "{}: validated before fetching: {requests:?}",
        mock.name()
    );
    assert!(
        requests
            .iter()
            .all(|&(b, api)| api != OFFSET_FOR_LEADER_EPOCH || b == 3),
        "only the new leader is asked: {requests:?}"
    );
    consumer.close().await.unwrap();
}

on_both_mocks!(
    a_leader_change_is_validated_on_the_new_leader_before_fetching,
    a_leader_move_mid_stream_loses_nothing_and_the_old_connection_idles_out,
    a_coordinator_move_is_followed_and_commits_land,
    a_broker_down_is_retried_with_backoff_and_consumption_resumes,
    a_topic_that_appears_later_is_consumed,
    a_consumer_dropped_without_commit_is_resumed_from_the_last_commit,
    requests_that_time_out_close_the_connection_and_consumption_resumes,
);
