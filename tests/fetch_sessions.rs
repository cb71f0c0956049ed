//! Incremental fetch sessions (KIP-227) end to end against
//! `lazykafka::mock`, which keeps sessions as a Kafka broker does
//! (librdkafka's mock keeps none). Every value is unique, so each scenario
//! accounts for every record: none lost, none twice. The mock's request
//! log (`MockCluster::record_fetches`) shows what each Fetch listed,
//! forgot and got back.
//!
//! librdkafka's consumer, which never asks for a session, judges the
//! mock's side: sessionless Fetches are served as before.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use lazykafka::error::ErrorCode;
use lazykafka::mock::{MockCluster, MockFetch, MockRecord};
use lazykafka::protocol::ApiKey;
use lazykafka::{Consumer, ConsumerConfig, Error, OffsetReset, TopicPartition};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
const TOPIC: &str = "s";
/// Partitions of `TOPIC`, led round the 3 brokers (0 on 1, 1 on 2, ...).
const PARTITIONS: i32 = 9;

/// What was delivered: value -> (partition, offset, times).
type Seen = BTreeMap<String, (i32, i64, usize)>;

fn cluster() -> MockCluster {
    let mock = MockCluster::new(3).unwrap();
    let leaders: Vec<i32> = (0..PARTITIONS).map(|p| p % 3 + 1).collect();
    mock.create_topic_with_leaders(TOPIC, &leaders).unwrap();
    mock.record_fetches(true);
    mock
}

fn consumer(mock: &MockCluster) -> Consumer {
    let config = ConsumerConfig::builder()
        .bootstrap_servers(mock.bootstrap_servers())
        .auto_offset_reset(OffsetReset::Earliest)
        .fetch_max_wait(Duration::from_millis(100))
        .fetch_sessions(true)
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let consumer = Consumer::new(config).unwrap();
    consumer
        .assign((0..PARTITIONS).map(|p| TopicPartition::new(TOPIC, p)))
        .unwrap();
    consumer
}

/// Produces `count` records to `partition`, named by partition and offset,
/// as one batch.
fn produce(mock: &MockCluster, partition: i32, count: i64) {
    let base = mock.high_watermark(TOPIC, partition).unwrap();
    mock.produce(
        TOPIC,
        partition,
        (base..base + count).map(|o| MockRecord::new(format!("p{partition}-{o}"))),
    )
    .unwrap();
}

fn take(records: Vec<lazykafka::ConsumerRecord>, seen: &mut Seen) {
    for r in records {
        let value = String::from_utf8(r.value().unwrap().to_vec()).unwrap();
        seen.entry(value)
            .or_insert((r.partition(), r.offset(), 0))
            .2 += 1;
    }
}

/// Polls until `seen` holds `until` values or an error comes (returned).
async fn consume_until(consumer: &mut Consumer, seen: &mut Seen, until: usize) -> Option<Error> {
    let deadline = Instant::now() + WAIT;
    while seen.len() < until && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)).await {
            Ok(records) => take(records, seen),
            Err(e) => return Some(e),
        }
    }
    None
}

/// Every record the mock holds, each delivered once at its offset.
fn assert_every_offset_once(mock: &MockCluster, seen: &Seen) {
    let mut expected = Seen::new();
    for p in 0..PARTITIONS {
        for o in 0..mock.high_watermark(TOPIC, p).unwrap() {
            expected.insert(format!("p{p}-{o}"), (p, o, 1));
        }
    }
    assert_eq!(*seen, expected);
}

fn incremental(f: &MockFetch) -> bool {
    f.session_id != 0 && f.session_epoch > 0
}

fn full(f: &MockFetch) -> bool {
    f.session_id == 0 && f.session_epoch == 0
}

#[test]
fn incremental_fetches_deliver_every_offset_once_as_records_trickle_in() {
    crate::common::block_on(async {
        let mock = cluster();
        for p in 0..PARTITIONS {
            produce(&mock, p, 20);
        }
        let mut consumer = consumer(&mock);
        let mut seen = Seen::new();
        let total = (PARTITIONS * 20) as usize;
        assert!(consume_until(&mut consumer, &mut seen, total)
            .await
            .is_none());
        // A trickle: a few records at a time on one partition or another,
        // between polls.
        let mut produced = total;
        for round in 0..60 {
            let p = (round * 7) % PARTITIONS;
            let n = 1 + i64::from(round % 3);
            produce(&mock, p, n);
            produced += n as usize;
            let records = consumer.poll(Duration::from_millis(20)).await.unwrap();
            take(records, &mut seen);
        }
        assert!(consume_until(&mut consumer, &mut seen, produced)
            .await
            .is_none());
        assert_every_offset_once(&mock, &seen);

        // Every broker kept a session, and most Fetches were incremental.
        let fetches = mock.fetches();
        for broker in 1..=3 {
            let ours: Vec<&MockFetch> = fetches.iter().filter(|f| f.broker == broker).collect();
            assert!(
                full(ours[0]),
                "the first Fetch asks for a session: {:?}",
                ours[0]
            );
            assert_ne!(ours[0].response_session_id, 0);
            let incrementals = ours.iter().filter(|f| incremental(f)).count();
            assert!(
                incrementals * 2 > ours.len(),
                "broker {broker}: {incrementals} incremental of {}",
                ours.len()
            );
            assert!(ours.iter().all(|f| f.error == ErrorCode::None));
        }

        // Quiet: caught up, nothing new (after a round that tells the brokers
        // the last offsets taken). Incremental Fetches list nothing and get
        // nothing back.
        assert!(consumer
            .poll(Duration::from_millis(300))
            .await
            .unwrap()
            .is_empty());
        mock.record_fetches(false);
        mock.record_fetches(true);
        assert!(consumer
            .poll(Duration::from_millis(400))
            .await
            .unwrap()
            .is_empty());
        let quiet = mock.fetches();
        assert!(quiet.len() >= 3, "{quiet:?}");
        for f in &quiet {
            assert!(incremental(f), "{f:?}");
            assert!(
                f.listed.is_empty() && f.forgotten.is_empty() && f.answered.is_empty(),
                "{f:?}"
            );
        }

        // Records on partition 4 (broker 2) only: Fetches to broker 2 list and
        // forget partition 4 only (records taken move its offset; records
        // buffered take it out of the session until taken), and the others
        // still list nothing.
        mock.record_fetches(false);
        mock.record_fetches(true);
        produce(&mock, 4, 5);
        assert!(consume_until(&mut consumer, &mut seen, produced + 5)
            .await
            .is_none());
        assert!(consumer
            .poll(Duration::from_millis(300))
            .await
            .unwrap()
            .is_empty());
        assert_every_offset_once(&mock, &seen);
        let p4 = (TOPIC.to_owned(), 4);
        let fetches = mock.fetches();
        for f in &fetches {
            assert!(incremental(f), "{f:?}");
            let allowed = if f.broker == 2 {
                vec![p4.clone()]
            } else {
                vec![]
            };
            assert!(f.listed.iter().all(|l| allowed.contains(l)), "{f:?}");
            assert!(f.forgotten.iter().all(|l| allowed.contains(l)), "{f:?}");
            assert!(f.answered.iter().all(|l| allowed.contains(l)), "{f:?}");
        }
        assert!(
            fetches
                .iter()
                .any(|f| f.broker == 2 && f.answered == [p4.clone()]),
            "partition 4 answered alone: {fetches:?}"
        );
        assert!(
            fetches
                .iter()
                .any(|f| f.broker == 2 && f.listed == [p4.clone()]),
            "partition 4 listed again at its new offset: {fetches:?}"
        );
        consumer.close().await.unwrap();
    })
}

#[test]
fn a_closed_connection_ends_the_session_and_a_full_fetch_starts_another() {
    crate::common::block_on(async {
        let mock = cluster();
        for p in 0..PARTITIONS {
            produce(&mock, p, 10);
        }
        let mut consumer = consumer(&mock);
        let mut seen = Seen::new();
        let mut produced = (PARTITIONS * 10) as usize;
        assert!(consume_until(&mut consumer, &mut seen, produced)
            .await
            .is_none());
        let deadline = Instant::now() + WAIT;
        while !mock
            .fetches()
            .iter()
            .any(|f| f.broker == 1 && incremental(f))
        {
            assert!(
                Instant::now() < deadline,
                "no incremental Fetch to broker 1"
            );
            consumer.poll(Duration::from_millis(50)).await.unwrap();
        }
        let before: BTreeSet<u64> = mock.fetches().iter().map(|f| f.connection).collect();
        mock.close_connections(Some(1));
        for p in 0..PARTITIONS {
            produce(&mock, p, 10);
        }
        produced += (PARTITIONS * 10) as usize;
        let error = consume_until(&mut consumer, &mut seen, produced).await;
        assert!(error.is_none(), "{error:?}");
        // A few more rounds on the new connection.
        for _ in 0..3 {
            consumer.poll(Duration::from_millis(150)).await.unwrap();
        }
        assert_every_offset_once(&mock, &seen);

        let after: Vec<MockFetch> = mock
            .fetches()
            .into_iter()
            .filter(|f| f.broker == 1 && !before.contains(&f.connection))
            .collect();
        assert!(!after.is_empty(), "broker 1 fetched from again");
        // The first Fetch on the new connection is full, asking for a new
        // session; the rest continue that one.
        assert!(full(&after[0]), "{:?}", after[0]);
        let id = after[0].response_session_id;
        assert_ne!(id, 0);
        assert!(after.len() > 1, "{after:?}");
        for f in &after[1..] {
            assert!(incremental(f) && f.session_id == id, "{f:?}");
        }
        consumer.close().await.unwrap();
    })
}

/// A leader connection reaped while nothing was in flight on it: the
/// session ended with it although no request failed, so the first Fetch
/// on the next connection is full (an incremental one would be served by a
/// broker that still holds the session, as Kafka's are not tied to
/// connections, which is exactly what must not happen: the client cannot
/// know what the broker kept).
#[test]
fn a_reaped_connection_ends_the_session_and_a_full_fetch_starts_another() {
    crate::common::block_on(async {
        let mock = cluster();
        for p in 0..PARTITIONS {
            produce(&mock, p, 10);
        }
        let config = ConsumerConfig::builder()
            .bootstrap_servers(mock.bootstrap_servers())
            .auto_offset_reset(OffsetReset::Earliest)
            .fetch_max_wait(Duration::from_millis(100))
            .fetch_sessions(true)
            .connections_max_idle(Some(Duration::from_millis(400)))
            .enable_auto_commit(false)
            .build()
            .unwrap();
        let mut consumer = Consumer::new(config).unwrap();
        let all: Vec<TopicPartition> = (0..PARTITIONS)
            .map(|p| TopicPartition::new(TOPIC, p))
            .collect();
        consumer.assign(all.clone()).unwrap();
        let mut seen = Seen::new();
        let mut produced = (PARTITIONS * 10) as usize;
        assert!(consume_until(&mut consumer, &mut seen, produced)
            .await
            .is_none());
        let deadline = Instant::now() + WAIT;
        while !mock
            .fetches()
            .iter()
            .any(|f| f.broker == 1 && incremental(f))
        {
            assert!(
                Instant::now() < deadline,
                "no incremental Fetch to broker 1"
            );
            consumer.poll(Duration::from_millis(50)).await.unwrap();
        }
        // Broker 1's partitions paused: nothing to fetch there, its connection
        // falls idle and is reaped.
        let on_1: Vec<TopicPartition> = all
            .iter()
            .filter(|tp| tp.partition % 3 == 0)
            .cloned()
            .collect();
        consumer.pause(&on_1);
        let deadline = Instant::now() + WAIT;
        while consumer.connections().iter().any(|c| c.broker == Some(1)) {
            assert!(Instant::now() < deadline, "{:?}", consumer.connections());
            consumer.poll(Duration::from_millis(50)).await.unwrap();
        }
        let before: BTreeSet<u64> = mock.fetches().iter().map(|f| f.connection).collect();
        assert_eq!(
            mock.fetch_sessions()
                .iter()
                .filter(|s| s.broker == 1)
                .count(),
            1
        );
        consumer.resume(&on_1);
        for p in 0..PARTITIONS {
            produce(&mock, p, 10);
        }
        produced += (PARTITIONS * 10) as usize;
        let error = consume_until(&mut consumer, &mut seen, produced).await;
        assert!(error.is_none(), "{error:?}");
        for _ in 0..3 {
            consumer.poll(Duration::from_millis(150)).await.unwrap();
        }
        assert_every_offset_once(&mock, &seen);
        let after: Vec<MockFetch> = mock
            .fetches()
            .into_iter()
            .filter(|f| f.broker == 1 && !before.contains(&f.connection))
            .collect();
        assert!(full(&after[0]), "{:?}", after[0]);
        assert_ne!(after[0].response_session_id, 0);
        assert!(after[1..].iter().all(incremental), "{after:?}");
        consumer.close().await.unwrap();
    })
}

#[test]
fn session_errors_and_evictions_fall_back_to_a_full_fetch() {
    crate::common::block_on(async {
        let mock = cluster();
        for p in 0..PARTITIONS {
            produce(&mock, p, 10);
        }
        let mut consumer = consumer(&mock);
        let mut seen = Seen::new();
        let mut produced = (PARTITIONS * 10) as usize;
        assert!(consume_until(&mut consumer, &mut seen, produced)
            .await
            .is_none());
        let deadline = Instant::now() + WAIT;
        while mock.fetch_sessions().len() < 3 {
            assert!(Instant::now() < deadline, "{:?}", mock.fetch_sessions());
            consumer.poll(Duration::from_millis(50)).await.unwrap();
        }
        mock.record_fetches(false);
        mock.record_fetches(true);
        // Broker 1 answers its next Fetch with INVALID_FETCH_SESSION_EPOCH,
        // broker 3 with FETCH_SESSION_ID_NOT_FOUND; broker 2 loses its session
        // (evicted: its next incremental Fetch, or the one waiting, gets
        // FETCH_SESSION_ID_NOT_FOUND).
        mock.push_broker_errors(1, ApiKey::Fetch, &[ErrorCode::InvalidFetchSessionEpoch])
            .unwrap();
        mock.push_broker_errors(3, ApiKey::Fetch, &[ErrorCode::FetchSessionIdNotFound])
            .unwrap();
        assert_eq!(mock.evict_fetch_sessions(Some(2)), 1);
        for p in 0..PARTITIONS {
            produce(&mock, p, 10);
        }
        produced += (PARTITIONS * 10) as usize;
        // Not the application's business: no error comes out of poll.
        let error = consume_until(&mut consumer, &mut seen, produced).await;
        assert!(error.is_none(), "{error:?}");
        let deadline = Instant::now() + WAIT;
        // Until every error was served and each broker answered a Fetch after
        // its error (a session kept through INVALID_FETCH_SESSION_EPOCH means
        // three sessions exist before the Fetch that follows the error).
        let answered_after_error = |mock: &MockCluster| {
            let fetches = mock.fetches();
            (1..=3).all(|b| {
                let ours: Vec<&MockFetch> = fetches.iter().filter(|f| f.broker == b).collect();
                ours.iter()
                    .position(|f| f.error != ErrorCode::None)
                    .is_some_and(|at| ours.len() > at + 1)
            })
        };
        while mock.pending_errors(ApiKey::Fetch) > 0
            || mock.fetch_sessions().len() < 3
            || !answered_after_error(&mock)
        {
            assert!(Instant::now() < deadline, "{:?}", mock.fetch_sessions());
            take(
                consumer.poll(Duration::from_millis(50)).await.unwrap(),
                &mut seen,
            );
        }
        assert_every_offset_once(&mock, &seen);

        let fetches = mock.fetches();
        for (broker, error) in [
            (1, ErrorCode::InvalidFetchSessionEpoch),
            (2, ErrorCode::FetchSessionIdNotFound),
            (3, ErrorCode::FetchSessionIdNotFound),
        ] {
            let ours: Vec<&MockFetch> = fetches.iter().filter(|f| f.broker == broker).collect();
            let got: Vec<ErrorCode> = ours
                .iter()
                .map(|f| f.error)
                .filter(|&e| e != ErrorCode::None)
                .collect();
            assert_eq!(got, [error], "broker {broker}");
            // Up to the error, incremental; then at once a full Fetch asking
            // for a new session, which gets one and goes on incrementally.
            let at = ours
                .iter()
                .position(|f| f.error != ErrorCode::None)
                .unwrap();
            assert!(ours[..=at].iter().all(|f| incremental(f)), "{ours:?}");
            let next = ours.get(at + 1).expect("a Fetch after the error");
            assert!(full(next), "{next:?}");
            assert_ne!(next.response_session_id, 0);
            assert!(ours[at + 2..].iter().all(|f| incremental(f)), "{ours:?}");
        }
        consumer.close().await.unwrap();
    })
}

/// librdkafka's consumer asks for no session: the mock serves its Fetches
/// sessionless (session id 0 back) and it reads everything.
#[test]
fn librdkafka_reads_everything_from_a_mock_that_keeps_sessions() {
    let mock = cluster();
    for p in 0..PARTITIONS {
        produce(&mock, p, 30);
    }
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", mock.bootstrap_servers())
        .set("group.id", "rd")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning)
            .unwrap();
    }
    reader.assign(&tpl).unwrap();
    let mut seen = Seen::new();
    let mut total = (PARTITIONS * 30) as usize;
    let mut trickled = false;
    let deadline = Instant::now() + WAIT;
    while seen.len() < total && Instant::now() < deadline {
        if let Some(m) = reader.poll(Duration::from_millis(100)) {
            let m = m.unwrap();
            let value = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
            seen.entry(value)
                .or_insert((m.partition(), m.offset(), 0))
                .2 += 1;
        }
        if seen.len() == total && !trickled {
            trickled = true;
            for p in 0..PARTITIONS {
                produce(&mock, p, 2);
            }
            total += (PARTITIONS * 2) as usize;
        }
    }
    assert_every_offset_once(&mock, &seen);
    let fetches = mock.fetches();
    assert!(!fetches.is_empty());
    for f in &fetches {
        assert_eq!(f.response_session_id, 0, "{f:?}");
        assert_eq!(f.error, ErrorCode::None, "{f:?}");
    }
    assert!(
        mock.fetch_sessions().is_empty(),
        "{:?}",
        mock.fetch_sessions()
    );
}
