//! Fetching from the nearest replica (KIP-392) against peers nobody here
//! wrote, and against `lazykafka::mock`:
//!
//! - librdkafka's mock cluster: its leader names the follower set with
//!   `rd_kafka_mock_partition_set_follower` as the preferred read replica
//!   of every Fetch v11+ (whatever the client's rack) and then sends no
//!   records; its follower serves Fetch, can lag behind the leader
//!   (`rd_kafka_mock_partition_set_follower_wmarks`), go down, or stop
//!   being a follower. The scenarios follow librdkafka's own
//!   `tests/0104-fetch_from_follower_mock.c`.
//! - librdkafka's consumer with `client.rack` reading from
//!   `lazykafka::mock` with racks and followers: it judges the mock's side
//!   (it follows the mock's PreferredReadReplica and reads every record).
//! - `lazykafka::mock` for our consumer: racks, followers sharing the log,
//!   injected replica errors, a follower down and up, leases.
//!
//! Every record's value names its offset, and each scenario accounts for
//! every offset: none lost, none twice.

// Drives a `Consumer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::mock::RawMock;
use common::peers::config;
use common::polling::{poll_until, records_strictly, records_through_faults, Polled, Polling};
use futures::{FutureExt, StreamExt};
use lazykafka::error::ErrorCode;
use lazykafka::events::{
    CloseReason, ConnectionEvent, ConnectionEvents, ConnectionInfo, EventKind, Purpose,
};
use lazykafka::mock::{MockCluster, MockFetch, MockRecord};
use lazykafka::protocol::ApiKey;
use lazykafka::{Consumer, TopicPartition};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);
const TOPIC: &str = "near";
const FETCH: i16 = 1;
const LIST_OFFSETS: i16 = 2;

/// What was delivered: offset -> times. Each value is `value-<offset>`.
#[derive(Debug, Default)]
struct Ledger {
    seen: BTreeMap<i64, usize>,
}

impl Ledger {
    fn enter(&mut self, offset: i64, value: &[u8]) {
        assert_eq!(
            value,
            format!("value-{offset}").as_bytes(),
            "the record at offset {offset}"
        );
        *self.seen.entry(offset).or_default() += 1;
    }

    fn len(&self) -> usize {
        self.seen.len()
    }

    /// Every offset of `range` once, and nothing else.
    #[track_caller]
    fn assert_exactly(&self, range: std::ops::Range<i64>) {
        let twice: Vec<i64> = self
            .seen
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(o, _)| *o)
            .collect();
        assert!(twice.is_empty(), "delivered more than once: {twice:?}");
        let missing: Vec<i64> = range
            .clone()
            .filter(|o| !self.seen.contains_key(o))
            .collect();
        assert!(missing.is_empty(), "lost: {missing:?}");
        assert_eq!(self.seen.len(), range.count(), "offsets beyond the log");
    }
}

/// A [`poll_until`] `take`: each record into the ledger, through faults
/// (the scenarios that close connections meet them).
fn enter(ledger: &mut Ledger, polled: Polled) {
    for r in records_through_faults(polled) {
        assert_eq!(r.partition(), 0);
        ledger.enter(r.offset(), r.value().unwrap_or_default());
    }
}

/// As [`enter`], failing on any error from `poll`: the fallbacks from a
/// read replica are not the application's business.
fn enter_strictly(ledger: &mut Ledger, polled: Polled) {
    for r in records_strictly(polled) {
        ledger.enter(r.offset(), r.value().unwrap_or_default());
    }
}

const POLLING: Polling = Polling::every(100);

/// The broker of the consumer's replica connection, if it has one.
fn replica(connections: &[ConnectionInfo]) -> Option<i32> {
    connections
        .iter()
        .find(|c| c.purpose == Purpose::Replica)
        .and_then(|c| c.broker)
}

/// The events published so far.
fn drain(events: &mut ConnectionEvents) -> Vec<ConnectionEvent> {
    let mut out = Vec::new();
    while let Some(Some(e)) = events.next().now_or_never() {
        out.push(e);
    }
    out
}

fn tp() -> TopicPartition {
    TopicPartition::new(TOPIC, 0)
}

// ===== librdkafka's mock cluster =====

/// 3 brokers in racks r1..r3; `TOPIC` (one partition) led by broker 1,
/// followed by broker 2; `count` records; request tracking on.
fn librdkafka_mock(count: i64) -> (RawMock, String) {
    let mock = RawMock::new(3);
    for b in 1..=3 {
        mock.set_rack(b, &format!("r{b}"));
    }
    mock.create_topic(TOPIC, 1);
    mock.set_leader(TOPIC, 0, 1);
    mock.set_follower(TOPIC, 0, 2);
    let bootstrap = mock.bootstraps().join(",");
    produce(&bootstrap, 0..count);
    mock.start_tracking();
    (mock, bootstrap)
}

/// Produces `value-i` for `i` in `range` to partition 0 with librdkafka,
/// at most 10 records a batch, no batch across a multiple of 10.
///
/// librdkafka's mock keeps each batch as it came and a follower there
/// serves the whole batch holding the fetch offset, even records past the
/// follower's high watermark (`rd_kafka_mock_msgset_find` checks the
/// fetch offset only). A batch across 600 would hand out offset 600 from a
/// follower whose high watermark is 599: each group of 10 is flushed
/// before the next is sent, so that the watermarks the tests set (multiples
/// of 10, less one) fall on batch boundaries.
fn produce(bootstrap: &str, range: std::ops::Range<i64>) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("batch.num.messages", "10")
        .set("linger.ms", "0")
        .create()
        .expect("librdkafka producer");
    for i in range {
        let value = format!("value-{i}");
        common::peers::send(
            &producer,
            BaseRecord::<(), _>::to(TOPIC).payload(&value).partition(0),
        );
        if i % 10 == 9 {
            // Delivered before the next group goes (`flush` sleeps in
            // 100 ms steps here; polling is quicker).
            let deadline = Instant::now() + WAIT;
            while producer.in_flight_count() > 0 {
                assert!(Instant::now() < deadline, "librdkafka delivered nothing");
                producer.poll(Duration::from_millis(1));
            }
        }
    }
    producer.flush(WAIT).expect("flush");
}

fn rd_consumer(bootstrap: &str) -> Consumer {
    let consumer = Consumer::new(config(bootstrap, None).client_rack("r2").build().unwrap())
        .expect("consumer");
    consumer.assign([tp()]).unwrap();
    consumer
}

/// Requests of `api` each broker of librdkafka's mock got since tracking
/// started (or was last cleared).
fn count(mock: &RawMock, broker: i32, api: i16) -> usize {
    mock.requests()
        .iter()
        .filter(|(b, a)| *b == broker && *a == api)
        .count()
}

#[test]
fn librdkafka_mock_the_partition_is_read_from_the_follower_over_a_replica_connection() {
    crate::common::block_on(async {
        let (mock, bootstrap) = librdkafka_mock(1000);
        // Leases of 2 s (metadata.max.age.ms): the leader is asked again
        // after each.
        let consumer = Consumer::new(
            config(&bootstrap, None)
                .client_rack("r2")
                .metadata_max_age(Duration::from_secs(2))
                .build()
                .unwrap(),
        )
        .unwrap();
        let mut events = consumer.connection_events();
        consumer.assign([tp()]).unwrap();
        let mut ledger = Ledger::default();
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, l| l.len()
                >= 1000)
            .await
        );
        ledger.assert_exactly(0..1000);
        // Over a connection whose purpose says so, to broker 2, opened like
        // any other (connecting, opened, ready) and counted in its broker's
        // counters.
        assert_eq!(replica(&consumer.connections()), Some(2));
        let seen = drain(&mut events);
        let steps: Vec<String> = seen
            .iter()
            .filter(|e| e.purpose == Purpose::Replica)
            .map(|e| format!("{:?} {:?}", e.kind, e.broker))
            .collect();
        assert_eq!(
            &steps[..3],
            ["Connecting Some(2)", "Opened Some(2)", "Ready Some(2)"],
            "{seen:#?}"
        );
        let addr2 = mock.bootstraps()[1].clone();
        assert!(consumer.broker_counters()[&addr2].connects >= 1);
        // The follower served the records; nothing went to broker 3; offsets
        // were looked up at the leader only.
        assert!(count(&mock, 2, FETCH) > 0);
        assert_eq!(count(&mock, 3, FETCH), 0);
        assert_eq!(
            count(&mock, 2, LIST_OFFSETS) + count(&mock, 3, LIST_OFFSETS),
            0
        );
        // Each lease ends: the leader gets a Fetch again (and names the
        // follower again), while the follower keeps serving.
        let leader = count(&mock, 1, FETCH);
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, _| count(
                &mock, 1, FETCH
            ) >= leader
                + 2)
            .await,
            "the leader is asked again when each lease ends"
        );
        produce(&bootstrap, 1000..1100);
        let follower = count(&mock, 2, FETCH);
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, l| l.len()
                >= 1100)
            .await
        );
        ledger.assert_exactly(0..1100);
        assert!(count(&mock, 2, FETCH) > follower);
        assert_eq!(replica(&consumer.connections()), Some(2));
        consumer.close().await.unwrap();
    })
}

#[test]
fn librdkafka_mock_a_follower_that_goes_down_sends_the_partition_back_to_the_leader() {
    crate::common::block_on(async {
        let (mock, bootstrap) = librdkafka_mock(500);
        let consumer = rd_consumer(&bootstrap);
        let mut events = consumer.connection_events();
        let mut ledger = Ledger::default();
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, l| l.len()
                >= 500)
            .await
        );
        assert_eq!(replica(&consumer.connections()), Some(2));
        drain(&mut events);

        mock.clear_requests();
        mock.broker_down(2);
        produce(&bootstrap, 500..1000);
        // The replica connection is lost and the partition goes back to the
        // leader. (librdkafka's mock leader keeps naming the follower, down or
        // not, and sends no records while it does: nothing comes until the
        // cluster names another follower, as in librdkafka's own
        // do_test_follower_down.)
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |c, _| {
                count(&mock, 1, FETCH) >= 2 && replica(&c.connections()) != Some(2)
            })
            .await,
            "back to the leader after the follower went down"
        );
        let closed = drain(&mut events).into_iter().any(|e| {
            e.purpose == Purpose::Replica
                && e.broker == Some(2)
                && matches!(
                    e.kind,
                    EventKind::Closed {
                        reason: CloseReason::Peer | CloseReason::Error,
                        ..
                    }
                )
        });
        assert!(closed, "the replica connection's close is an event");
        ledger.assert_exactly(0..500);

        mock.set_follower(TOPIC, 0, 3);
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, l| l.len()
                >= 1000)
            .await
        );
        ledger.assert_exactly(0..1000);
        assert!(count(&mock, 3, FETCH) > 0);
        assert_eq!(replica(&consumer.connections()), Some(3));
        consumer.close().await.unwrap();
    })
}

#[test]
fn librdkafka_mock_a_lagging_follower_sends_the_partition_back_to_the_leader_without_a_reset() {
    crate::common::block_on(async {
        let (mock, bootstrap) = librdkafka_mock(1000);
        // The follower holds offsets up to 599 only.
        mock.set_follower_wmarks(TOPIC, 0, -1, 599);
        let consumer = rd_consumer(&bootstrap);
        let mut ledger = Ledger::default();
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, l| l.len()
                >= 600)
            .await
        );
        // At 600 the follower answers OFFSET_OUT_OF_RANGE: the partition goes
        // back to the leader (which names the follower again), again and
        // again, and its position is never reset (a reset to earliest would
        // deliver offset 0 again).
        let leader = count(&mock, 1, FETCH);
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, _| count(
                &mock, 1, FETCH
            ) >= leader
                + 3)
            .await
        );
        ledger.assert_exactly(0..600);
        assert_eq!(consumer.position(&tp()), Some(600));
        // Caught up, the follower serves the rest.
        mock.set_follower_wmarks(TOPIC, 0, -1, -1);
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, l| l.len()
                >= 1000)
            .await
        );
        ledger.assert_exactly(0..1000);
        let resets: usize = (1..=3).map(|b| count(&mock, b, LIST_OFFSETS)).sum();
        assert_eq!(resets, 1, "only the first lookup (auto.offset.reset)");
        consumer.close().await.unwrap();
    })
}

#[test]
fn librdkafka_mock_a_broker_that_stops_following_sends_the_partition_back_to_the_leader() {
    crate::common::block_on(async {
        let (mock, bootstrap) = librdkafka_mock(500);
        let consumer = rd_consumer(&bootstrap);
        let mut ledger = Ledger::default();
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, l| l.len()
                >= 500)
            .await
        );
        assert_eq!(replica(&consumer.connections()), Some(2));
        // Broker 2 is no follower any more: it answers NOT_LEADER_OR_FOLLOWER,
        // and the leader names no replica: it serves the rest itself.
        mock.set_follower(TOPIC, 0, -1);
        produce(&bootstrap, 500..1000);
        mock.clear_requests();
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, l| l.len()
                >= 1000)
            .await
        );
        ledger.assert_exactly(0..1000);
        assert!(count(&mock, 1, FETCH) > 0);
        consumer.close().await.unwrap();
    })
}

// ===== librdkafka's consumer judging lazykafka::mock =====

/// 3 brokers in racks r1..r3; `TOPIC` led by broker 1, followed by 2 and
/// 3; `count` records in batches of 100; fetches recorded.
fn our_mock(count: i64) -> MockCluster {
    let mock = MockCluster::builder()
        .brokers(3)
        .rack(1, "r1")
        .rack(2, "r2")
        .rack(3, "r3")
        .build()
        .unwrap();
    mock.create_topic_with_leaders(TOPIC, &[1]).unwrap();
    mock.set_followers(TOPIC, 0, &[2, 3]).unwrap();
    produce_to(&mock, 0..count);
    mock.record_fetches(true);
    mock
}

fn produce_to(mock: &MockCluster, range: std::ops::Range<i64>) {
    let mut next = range.start;
    while next < range.end {
        let end = (next + 100).min(range.end);
        let base = mock
            .produce(
                TOPIC,
                0,
                (next..end).map(|i| MockRecord::new(format!("value-{i}"))),
            )
            .unwrap();
        assert_eq!(base, next);
        next = end;
    }
}

/// Bytes of records each broker sent in the Fetches recorded.
fn record_bytes(fetches: &[MockFetch]) -> BTreeMap<i32, usize> {
    let mut out = BTreeMap::new();
    for f in fetches {
        *out.entry(f.broker).or_default() += f.record_bytes;
    }
    out
}

#[test]
fn librdkafka_with_client_rack_reads_from_the_follower_the_mock_names() {
    // In r3: broker 3 serves every record, the leader none. In the
    // leader's rack, and without a rack: the leader serves them all.
    for (rack, server) in [(Some("r3"), 3), (Some("r1"), 1), (None, 1)] {
        let mock = our_mock(1000);
        let mut settings = ClientConfig::new();
        settings
            .set("bootstrap.servers", mock.bootstrap_servers())
            .set("group.id", "unused")
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "100");
        if let Some(rack) = rack {
            settings.set("client.rack", rack);
        }
        let consumer: BaseConsumer = settings.create().unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(TOPIC, 0, Offset::Beginning)
            .unwrap();
        consumer.assign(&tpl).unwrap();
        let mut ledger = Ledger::default();
        let deadline = Instant::now() + WAIT;
        while ledger.len() < 1000 && Instant::now() < deadline {
            if let Some(m) = consumer.poll(Duration::from_millis(100)) {
                let m = m.expect("librdkafka consumer error");
                ledger.enter(m.offset(), m.payload().unwrap_or_default());
            }
        }
        ledger.assert_exactly(0..1000);
        let fetches = mock.fetches();
        let bytes = record_bytes(&fetches);
        for broker in 1..=3 {
            let sent = bytes.get(&broker).copied().unwrap_or(0);
            assert_eq!(
                sent > 0,
                broker == server,
                "{rack:?}: broker {broker}: {bytes:?}"
            );
        }
        let named: Vec<&MockFetch> = fetches
            .iter()
            .filter(|f| !f.preferred_read_replicas.is_empty())
            .collect();
        if server == 1 {
            assert!(named.is_empty(), "{rack:?}: {named:?}");
        } else {
            assert!(!named.is_empty());
            for f in named {
                assert_eq!(f.broker, 1);
                assert_eq!(f.preferred_read_replicas, [(TOPIC.to_owned(), 0, 3)]);
            }
        }
    }
}

// ===== our consumer on lazykafka::mock =====

fn our_consumer(mock: &MockCluster, rack: &str) -> Consumer {
    our_consumer_with(mock, rack, |b| b)
}

fn our_consumer_with(
    mock: &MockCluster,
    rack: &str,
    settings: impl FnOnce(
        lazykafka::config::ConsumerConfigBuilder,
    ) -> lazykafka::config::ConsumerConfigBuilder,
) -> Consumer {
    let builder = config(&mock.bootstrap_servers(), None).client_rack(rack);
    let consumer = Consumer::new(settings(builder).build().unwrap()).unwrap();
    consumer.assign([tp()]).unwrap();
    consumer
}

/// Requests of `api` broker `broker` of our mock got.
fn requests(mock: &MockCluster, broker: i32, api: ApiKey) -> usize {
    mock.requests()
        .iter()
        .filter(|r| r.broker == broker && r.api == Some(api))
        .count()
}

#[test]
fn the_follower_in_the_consumers_rack_serves_it_and_the_leader_connection_idles_out() {
    crate::common::block_on(async {
        let mock = our_mock(1000);
        let consumer = our_consumer_with(&mock, "r2", |b| {
            b.connections_max_idle(Some(Duration::from_millis(1500)))
                .metadata_max_age(Duration::from_secs(300))
        });
        let mut events = consumer.connection_events();
        let mut ledger = Ledger::default();
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter_strictly, |_, l| l
                .len()
                >= 1000)
            .await
        );
        ledger.assert_exactly(0..1000);
        let fetches = mock.fetches();
        let bytes = record_bytes(&fetches);
        assert_eq!(bytes.get(&1).copied().unwrap_or(0), 0, "{bytes:?}");
        assert!(bytes[&2] > 0);
        assert!(!bytes.contains_key(&3), "{bytes:?}");
        // The leader named broker 2 to this client (RackId r2).
        assert!(fetches
            .iter()
            .any(|f| f.broker == 1 && f.preferred_read_replicas == [(TOPIC.to_owned(), 0, 2)]));
        // Nothing needs the leader connection any more: it is closed as idle,
        // and the consumer keeps one socket, to its replica.
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter_strictly, |c, _| {
                let census: Vec<(Purpose, Option<i32>)> = c
                    .connections()
                    .iter()
                    .map(|c| (c.purpose, c.broker))
                    .collect();
                census == [(Purpose::Replica, Some(2))]
            })
            .await,
            "{:?}",
            consumer.connections()
        );
        // The replica connection has a fetch session of its own (KIP-227):
        // after the first Fetch to broker 2, incremental ones.
        assert!(mock
            .fetches()
            .iter()
            .any(|f| f.broker == 2 && f.session_id != 0 && f.session_epoch > 0));
        assert!(mock.fetch_sessions().iter().any(|s| s.broker == 2));
        let seen = drain(&mut events);
        assert!(seen.iter().any(|e| e.purpose == Purpose::Leader
            && e.broker == Some(1)
            && matches!(
                e.kind,
                EventKind::Closed {
                    reason: CloseReason::Idle,
                    ..
                }
            )));
        // More records come over the replica connection; no leader connection
        // is opened for them.
        produce_to(&mock, 1000..1100);
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter_strictly, |_, l| l
                .len()
                >= 1100)
            .await
        );
        ledger.assert_exactly(0..1100);
        assert!(!drain(&mut events)
            .iter()
            .any(|e| e.purpose == Purpose::Leader && matches!(e.kind, EventKind::Connecting)));
        assert_eq!(replica(&consumer.connections()), Some(2));
        consumer.close().await.unwrap();
    })
}

#[test]
fn errors_from_the_replica_send_the_partition_back_to_the_leader_each_time() {
    crate::common::block_on(async {
        let mock = our_mock(300);
        let consumer = our_consumer(&mock, "r2");
        let mut ledger = Ledger::default();
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter_strictly, |c, l| l
                .len()
                >= 100
                && replica(&c.connections()) == Some(2))
            .await
        );
        // Broker 2 answers its next three Fetches with these errors. Each
        // sends the partition back to the leader, which names broker 2 again;
        // none is reported, none resets the position (OFFSET_OUT_OF_RANGE from
        // a replica only means it is behind).
        let leader = requests(&mock, 1, ApiKey::Fetch);
        mock.push_broker_errors(
            2,
            ApiKey::Fetch,
            &[
                ErrorCode::NotLeaderOrFollower,
                ErrorCode::OffsetOutOfRange,
                ErrorCode::ReplicaNotAvailable,
            ],
        )
        .unwrap();
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter_strictly, |_, l| l
                .len()
                >= 300
                && mock.pending_errors(ApiKey::Fetch) == 0
                && requests(&mock, 1, ApiKey::Fetch) >= leader + 3)
            .await,
            "three fallbacks to the leader"
        );
        ledger.assert_exactly(0..300);
        let lookups: usize = (1..=3)
            .map(|b| requests(&mock, b, ApiKey::ListOffsets))
            .sum();
        assert_eq!(lookups, 1, "only the first lookup (auto.offset.reset)");
        assert_eq!(replica(&consumer.connections()), Some(2));
        consumer.close().await.unwrap();
    })
}

#[test]
fn a_follower_down_leaves_the_partition_to_the_leader_until_it_is_back() {
    crate::common::block_on(async {
        let mock = our_mock(500);
        let consumer = our_consumer(&mock, "r2");
        let mut ledger = Ledger::default();
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, l| l.len()
                >= 500)
            .await
        );
        assert_eq!(replica(&consumer.connections()), Some(2));

        // Broker 2 goes down: the leader names no replica in r2 any more and
        // serves the partition itself.
        mock.broker_down(2).unwrap();
        let down = mock.fetches().len();
        produce_to(&mock, 500..1000);
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, l| l.len()
                >= 1000)
            .await
        );
        ledger.assert_exactly(0..1000);
        let bytes = record_bytes(&mock.fetches()[down..]);
        assert!(bytes[&1] > 0, "{bytes:?}");
        // Broker 2 serves nothing once down. (An empty Fetch it was answering
        // as it went down may still be logged after `down`, with no records.)
        assert_eq!(bytes.get(&2).copied().unwrap_or(0), 0, "{bytes:?}");

        // Back up, broker 2 is named again at the next Fetch from the leader
        // (after a metadata refresh that makes it known again) and serves the
        // rest.
        mock.broker_up(2).unwrap();
        let up = mock.fetches().len();
        produce_to(&mock, 1000..1500);
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |c, l| l.len()
                >= 1500
                && replica(&c.connections()) == Some(2))
            .await
        );
        ledger.assert_exactly(0..1500);
        produce_to(&mock, 1500..1600);
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter, |_, l| l.len()
                >= 1600)
            .await
        );
        ledger.assert_exactly(0..1600);
        let bytes = record_bytes(&mock.fetches()[up..]);
        assert!(bytes.get(&2).is_some_and(|b| *b > 0), "{bytes:?}");
        consumer.close().await.unwrap();
    })
}

#[test]
fn the_leader_is_asked_again_when_each_lease_ends() {
    crate::common::block_on(async {
        let mock = our_mock(100);
        let consumer =
            our_consumer_with(&mock, "r3", |b| b.metadata_max_age(Duration::from_secs(1)));
        let mut ledger = Ledger::default();
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter_strictly, |_, l| l
                .len()
                >= 100)
            .await
        );
        // Every lease of 1 s ends with a Fetch to the leader, which names
        // broker 3 again; records keep coming from broker 3 only.
        let named = |mock: &MockCluster| {
            mock.fetches()
                .iter()
                .filter(|f| f.broker == 1 && !f.preferred_read_replicas.is_empty())
                .count()
        };
        assert!(
            poll_until(
                &consumer,
                &mut ledger,
                POLLING,
                enter_strictly,
                |_, _| named(&mock) >= 3
            )
            .await
        );
        produce_to(&mock, 100..200);
        assert!(
            poll_until(&consumer, &mut ledger, POLLING, enter_strictly, |_, l| l
                .len()
                >= 200)
            .await
        );
        ledger.assert_exactly(0..200);
        let bytes = record_bytes(&mock.fetches());
        assert_eq!(bytes.get(&1).copied().unwrap_or(0), 0, "{bytes:?}");
        assert_eq!(bytes.get(&2), None, "{bytes:?}");
        assert!(bytes[&3] > 0);
        consumer.close().await.unwrap();
    })
}
