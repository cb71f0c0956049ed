//! `lazykafka::mock::MockCluster` judged by peers nobody here wrote:
//! librdkafka's consumer reads what it serves (every codec), librdkafka's
//! producer and admin client write into it; and its fault injection and
//! log, seen from lazykafka's consumer and connection manager.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::peers::{config, consume, expected, produce, values, WAIT};
use common::{client_sockets, wait_for, CLOSE_WAIT};
use lazykafka::cluster::{Cluster, ClusterConfig, Target};
use lazykafka::error::ErrorCode;
use lazykafka::events::{CloseReason, EventKind};
use lazykafka::mock::{BrokerClose, ClosedBy, MockCluster, MockEventKind, MockRecord};
use lazykafka::protocol::messages::list_offsets::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic,
};
use lazykafka::protocol::messages::produce::{
    PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
};
use lazykafka::protocol::ApiKey;
use lazykafka::records::{Compression, RecordBatchBuilder};
use lazykafka::runtime::{BrokerConnection, ClusterDriver, ConnectOptions, SocketOptions};
use lazykafka::{Consumer, TopicPartition};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const CODECS: [(Compression, &str); 5] = [
    (Compression::None, "none"),
    (Compression::Gzip, "gzip"),
    (Compression::Snappy, "snappy"),
    (Compression::Lz4, "lz4"),
    (Compression::Zstd, "zstd"),
];

#[test]
fn librdkafka_reads_every_codec_the_mock_serves() {
    let mock = MockCluster::new(2).unwrap();
    mock.create_topic_with_leaders("codecs", &[1, 2, 1, 2, 1])
        .unwrap();
    for (p, (codec, name)) in CODECS.iter().enumerate() {
        let records = (0..20).map(|i| {
            MockRecord::new(format!("{name}-{i}"))
                .key(format!("k{i}"))
                .header("codec", *name)
                .timestamp(1_700_000_000_000 + i)
        });
        assert_eq!(
            mock.produce_compressed("codecs", p as i32, *codec, records)
                .unwrap(),
            0
        );
    }
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", mock.bootstrap_servers())
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..5 {
        tpl.add_partition_offset("codecs", p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut seen: BTreeMap<(i32, i64), (String, String, String, i64)> = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    while seen.len() < 100 && Instant::now() < deadline {
        let Some(m) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = m.expect("librdkafka consumer error");
        let header = m.headers().expect("headers").get(0);
        seen.insert(
            (m.partition(), m.offset()),
            (
                String::from_utf8_lossy(m.key().unwrap()).into_owned(),
                String::from_utf8_lossy(m.payload().unwrap()).into_owned(),
                String::from_utf8_lossy(header.value.unwrap()).into_owned(),
                m.timestamp().to_millis().unwrap(),
            ),
        );
    }
    assert_eq!(seen.len(), 100, "every record once");
    for (p, (_, name)) in CODECS.iter().enumerate() {
        for i in 0..20i64 {
            assert_eq!(
                seen[&(p as i32, i)],
                (
                    format!("k{i}"),
                    format!("{name}-{i}"),
                    name.to_string(),
                    1_700_000_000_000 + i
                ),
                "{name} offset {i}"
            );
        }
    }
}

/// A broker taken down refuses connections and keeps its port: a socket
/// of another cluster (or another test process) cannot take it meanwhile,
/// and the broker comes back on it, where librdkafka's consumer reads again.
#[test]
fn a_broker_down_refuses_connections_and_keeps_its_port() {
    let mock = MockCluster::new(2).unwrap();
    mock.create_topic_with_leaders("held", &[2]).unwrap();
    mock.produce("held", 0, [MockRecord::new("v")]).unwrap();
    let addr = mock.broker_addr(2).unwrap();
    mock.broker_down(2).unwrap();
    let refused = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5));
    assert_eq!(
        refused.map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::ConnectionRefused)
    );
    let other = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let taken = other.bind(&addr.into());
    assert_eq!(
        taken.map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::AddrInUse)
    );
    drop(other);
    mock.broker_up(2).unwrap();
    assert_eq!(mock.broker_addr(2), Some(addr));
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", mock.bootstrap_servers())
        .set("group.id", "held")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&["held"]).unwrap();
    let deadline = Instant::now() + WAIT;
    let read = loop {
        assert!(Instant::now() < deadline, "nothing read after broker_up");
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            break m.payload().map(<[u8]>::to_vec);
        }
    };
    assert_eq!(read.as_deref(), Some(&b"v"[..]));
}

#[test]
fn librdkafka_admin_creates_topics_and_its_producer_writes_them() {
    let mock = MockCluster::new(3).unwrap();
    let bootstrap = mock.bootstrap_servers();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let topics = [
        NewTopic::new("made", 3, TopicReplication::Fixed(1)),
        NewTopic::new("made", 3, TopicReplication::Fixed(1)),
    ];
    let results = futures::executor::block_on(admin.create_topics(
        &topics[..1],
        &AdminOptions::new().operation_timeout(Some(WAIT)),
    ))
    .unwrap();
    assert_eq!(results.len(), 1);
    assert!(results[0].is_ok(), "{results:?}");
    let again =
        futures::executor::block_on(admin.create_topics(&topics[1..], &AdminOptions::new()))
            .unwrap();
    assert!(
        matches!(
            &again[0],
            Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists))
        ),
        "{again:?}"
    );
    assert!(mock
        .requests()
        .iter()
        .any(|r| r.api == Some(ApiKey::CreateTopics)));
    // Leaders go round the brokers.
    let leaders: Vec<i32> = (0..3).map(|p| mock.leader("made", p).unwrap()).collect();
    assert_eq!(leaders, [1, 2, 3]);
    produce(&bootstrap, "made", 3, 30, "zstd");
    for p in 0..3 {
        assert_eq!(mock.high_watermark("made", p), Some(10));
    }
}

#[test]
fn a_waiting_fetch_is_answered_as_soon_as_records_arrive() {
    crate::common::block_on(async {
        let mock = MockCluster::new(1).unwrap();
        mock.create_topic("t", 1).unwrap();
        let bootstrap = mock.bootstrap_servers();
        // The Fetch may wait 60 s; the test allows 20 s for the record: only
        // an answer on arrival passes.
        let consumer = Consumer::new(
            config(&bootstrap, None)
                .fetch_max_wait(Duration::from_secs(60))
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer.assign([TopicPartition::new("t", 0)]).unwrap();
        let fetches = || {
            mock.requests()
                .iter()
                .filter(|r| r.api == Some(ApiKey::Fetch))
                .count()
        };
        // Poll until a Fetch is waiting at the broker.
        let deadline = Instant::now() + WAIT;
        while fetches() == 0 && Instant::now() < deadline {
            assert!(consumer
                .poll(Duration::from_millis(50))
                .await
                .unwrap()
                .is_empty());
        }
        assert!(fetches() >= 1, "a Fetch reached the broker");
        mock.produce("t", 0, [MockRecord::new("late")]).unwrap();
        let started = Instant::now();
        let mut got = Vec::new();
        while got.is_empty() && started.elapsed() < Duration::from_secs(20) {
            got = consumer.poll(Duration::from_millis(100)).await.unwrap();
        }
        assert_eq!(got.len(), 1, "the record came before the Fetch's max wait");
        assert_eq!(got[0].value(), Some(&b"late"[..]));
        consumer.close().await.unwrap();
    })
}

/// A consumer closed while its Fetch waits at the broker (`fetch.max.wait.ms`
/// 500) leaves no connection open at the mock: the connection's thread sees
/// the client's FIN at once instead of sitting out the wait. The deadline
/// (200 ms) is well below the wait, so a mock that notices only when the
/// Fetch is answered fails.
#[test]
fn the_mock_sees_a_closed_consumer_at_once_during_a_waiting_fetch() {
    crate::common::block_on(async {
        let mock = MockCluster::new(1).unwrap();
        mock.create_topic("t", 1).unwrap();
        mock.produce("t", 0, [MockRecord::new("one")]).unwrap();
        let bootstrap = mock.bootstrap_servers();
        let consumer = Consumer::new(
            config(&bootstrap, None)
                .fetch_max_wait(Duration::from_millis(500))
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer.assign([TopicPartition::new("t", 0)]).unwrap();
        let fetches = || {
            mock.requests()
                .iter()
                .filter(|r| r.api == Some(ApiKey::Fetch))
                .count()
        };
        let deadline = Instant::now() + WAIT;
        let mut got = 0;
        while got == 0 && Instant::now() < deadline {
            got += consumer
                .poll(Duration::from_millis(50))
                .await
                .unwrap()
                .len();
        }
        assert_eq!(got, 1);
        // Caught up: the next Fetch waits at the broker. Close right after it
        // arrives, so most of its 500 ms are still to come.
        let before = fetches();
        while fetches() == before && Instant::now() < deadline {
            assert!(consumer
                .poll(Duration::from_millis(5))
                .await
                .unwrap()
                .is_empty());
        }
        assert!(fetches() > before, "a Fetch is waiting at the broker");
        assert!(!mock.open_connections().is_empty());
        consumer.close().await.unwrap();
        let closed_at = Instant::now();
        let gone = wait_for(Duration::from_millis(200), || {
            mock.open_connections().is_empty()
        });
        assert!(
            gone,
            "connections still open {:?} after close: {:?}",
            closed_at.elapsed(),
            mock.open_connections()
        );
        // The mock's log says the client closed them.
        let closes: Vec<ClosedBy> = mock
            .events()
            .into_iter()
            .filter_map(|e| match e.kind {
                MockEventKind::Closed { by, .. } => Some(by),
                _ => None,
            })
            .collect();
        assert!(!closes.is_empty());
        assert!(
            closes.iter().all(|by| *by == ClosedBy::Client),
            "{closes:?}"
        );
    })
}

#[test]
fn offsets_for_times_and_the_ends_of_the_log() {
    crate::common::block_on(async {
        let mock = MockCluster::new(1).unwrap();
        mock.create_topic("t", 1).unwrap();
        mock.produce(
            "t",
            0,
            (0..5).map(|i| MockRecord::new(format!("{i}")).timestamp(1000 * (i + 1))),
        )
        .unwrap();
        mock.delete_records_before("t", 0, 0).unwrap();
        let consumer =
            Consumer::new(config(&mock.bootstrap_servers(), None).build().unwrap()).unwrap();
        let tp = TopicPartition::new("t", 0);
        let found = consumer
            .offsets_for_times([(tp.clone(), 2500)])
            .await
            .unwrap();
        let hit = found[&tp].expect("a record at or after 2500");
        assert_eq!((hit.offset, hit.timestamp), (2, 3000));
        let none = consumer
            .offsets_for_times([(tp.clone(), 9999)])
            .await
            .unwrap();
        assert_eq!(none[&tp], None);
        assert_eq!(consumer.end_offsets([tp.clone()]).await.unwrap()[&tp], 5);
        assert_eq!(
            consumer.beginning_offsets([tp.clone()]).await.unwrap()[&tp],
            0
        );
        consumer.close().await.unwrap();
    })
}

fn list_latest(topic: &str) -> Box<ListOffsetsRequest> {
    Box::new(ListOffsetsRequest {
        replica_id: -1,
        topics: vec![ListOffsetsTopic {
            name: topic.into(),
            partitions: vec![ListOffsetsPartition {
                partition_index: 0,
                current_leader_epoch: -1,
                timestamp: -1,
                ..ListOffsetsPartition::default()
            }],
            ..ListOffsetsTopic::default()
        }],
        ..ListOffsetsRequest::default()
    })
}

#[test]
fn a_broker_closing_idle_connections_is_seen_at_once_and_leaves_no_close_wait() {
    crate::common::block_on(async {
        let mock = MockCluster::new(2).unwrap();
        mock.create_topic_with_leaders("t", &[2]).unwrap();
        for b in [1, 2] {
            mock.set_idle_timeout(b, Some(Duration::from_millis(300)))
                .unwrap();
        }
        let ports: Vec<u16> = [1, 2]
            .iter()
            .map(|&b| mock.broker_addr(b).unwrap().port())
            .collect();
        let bootstraps: Vec<String> = mock
            .bootstrap_servers()
            .split(',')
            .map(str::to_owned)
            .collect();
        let config = ClusterConfig::new(bootstraps);
        let mut driver = ClusterDriver::new(
            Cluster::new(config, Instant::now(), 3),
            SocketOptions::default(),
        );
        driver.cluster().set_topics(["t".to_owned()]);
        let id = driver.request(Target::Broker(2), list_latest("t"));
        driver
            .wait_response(id, WAIT)
            .await
            .expect("answered")
            .unwrap()
            .decode::<ListOffsetsResponse>()
            .unwrap();
        // Nothing more is asked: the broker closes the connection after 300 ms
        // of silence, and the client sees it and closes its side.
        let closed = driver
            .run_until(WAIT, |d| {
                d.take_events().iter().any(|e| {
                    e.broker == Some(2)
                        && matches!(
                            e.kind,
                            EventKind::Closed {
                                reason: CloseReason::Peer,
                                ..
                            }
                        )
                })
            })
            .await;
        assert!(closed, "the broker's close was not seen");
        assert!(wait_for(WAIT, || client_sockets(&ports[1..]).is_empty()));
        assert!(!client_sockets(&ports).iter().any(|s| s.state == CLOSE_WAIT));
        assert!(mock.events().iter().any(|e| e.broker == 2
            && matches!(
                e.kind,
                MockEventKind::Closed {
                    by: ClosedBy::Broker(BrokerClose::Idle),
                    ..
                }
            )));
        driver.shutdown();
    })
}

#[test]
fn closing_every_connection_at_once_loses_nothing() {
    crate::common::block_on(async {
        let mock = MockCluster::new(3).unwrap();
        mock.create_topic_with_leaders("t", &[1, 3]).unwrap();
        let bootstrap = mock.bootstrap_servers();
        produce(&bootstrap, "t", 2, 200, "none");
        let mut consumer = Consumer::new(
            config(&bootstrap, None)
                .max_poll_records(25)
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer
            .assign([TopicPartition::new("t", 0), TopicPartition::new("t", 1)])
            .unwrap();
        let mut records = consume(&mut consumer, 100).await;
        mock.close_connections(None);
        common::peers::produce_range(&bootstrap, "t", 2, 200..300, "lz4");
        let rest = consume(&mut consumer, 300 - records.len()).await;
        records.extend(rest);
        assert_eq!(values(&records), expected(300));
        assert_eq!(records.len(), 300, "none twice");
        let ports: Vec<u16> = mock
            .broker_ids()
            .iter()
            .map(|&b| mock.broker_addr(b).unwrap().port())
            .collect();
        assert!(!client_sockets(&ports).iter().any(|s| s.state == CLOSE_WAIT));
        consumer.close().await.unwrap();
    })
}

#[test]
fn injected_errors_are_answered_and_consumption_goes_on() {
    crate::common::block_on(async {
        let mock = MockCluster::new(2).unwrap();
        mock.create_topic_with_leaders("t", &[2]).unwrap();
        let bootstrap = mock.bootstrap_servers();
        produce(&bootstrap, "t", 1, 100, "none");
        mock.push_errors(
            ApiKey::Fetch,
            &[
                ErrorCode::NotLeaderOrFollower,
                ErrorCode::UnknownTopicOrPartition,
            ],
        );
        mock.push_broker_errors(2, ApiKey::ListOffsets, &[ErrorCode::LeaderNotAvailable])
            .unwrap();
        let mut consumer = Consumer::new(config(&bootstrap, None).build().unwrap()).unwrap();
        consumer.assign([TopicPartition::new("t", 0)]).unwrap();
        let records = consume(&mut consumer, 100).await;
        assert_eq!(values(&records), expected(100));
        assert_eq!(records.len(), 100);
        // Every injected error was served, and retried past.
        assert_eq!(mock.pending_errors(ApiKey::Fetch), 0);
        assert_eq!(mock.pending_errors(ApiKey::ListOffsets), 0);
        consumer.close().await.unwrap();
    })
}

#[test]
fn the_log_shows_every_connection_and_request() {
    crate::common::block_on(async {
        let mock = MockCluster::new(3).unwrap();
        mock.create_topic_with_leaders("t", &[1, 3]).unwrap();
        let bootstrap = mock.bootstrap_servers();
        mock.produce("t", 0, [MockRecord::new("a")]).unwrap();
        mock.produce("t", 1, [MockRecord::new("b")]).unwrap();
        let mut consumer = Consumer::new(config(&bootstrap, None).build().unwrap()).unwrap();
        consumer
            .assign([TopicPartition::new("t", 0), TopicPartition::new("t", 1)])
            .unwrap();
        assert!(mock.events().is_empty(), "nothing before the first poll");
        let got = consume(&mut consumer, 2).await;
        assert_eq!(got.len(), 2);
        consumer.close().await.unwrap();
        assert!(wait_for(WAIT, || mock.open_connections().is_empty()));

        let events = mock.events();
        let mut first_api: BTreeMap<u64, i16> = BTreeMap::new();
        let mut opened = Vec::new();
        let mut closed = Vec::new();
        for e in &events {
            match &e.kind {
                MockEventKind::Connected { connection, .. } => opened.push(*connection),
                MockEventKind::Request {
                    connection,
                    api_key,
                    ..
                } => {
                    first_api.entry(*connection).or_insert(*api_key);
                }
                MockEventKind::Closed { connection, by } => {
                    assert_eq!(*by, ClosedBy::Client, "the client closes every socket");
                    closed.push(*connection);
                }
                _ => {}
            }
        }
        opened.sort_unstable();
        closed.sort_unstable();
        assert_eq!(opened, closed, "every connection opened was closed");
        assert!(
            first_api.values().all(|&k| k == ApiKey::ApiVersions.code()),
            "ApiVersions first on every connection: {first_api:?}"
        );
        // Fetches went to the leaders only.
        let fetched_from: std::collections::BTreeSet<i32> = mock
            .requests()
            .iter()
            .filter(|r| r.api == Some(ApiKey::Fetch))
            .map(|r| r.broker)
            .collect();
        assert_eq!(fetched_from, [1, 3].into());
    })
}

#[test]
fn a_corrupt_batch_is_refused_whole() {
    crate::common::block_on(async {
        let mock = MockCluster::new(1).unwrap();
        mock.create_topic("t", 1).unwrap();
        let addr = mock.broker_addr(1).unwrap().to_string();
        let mut conn = BrokerConnection::connect(&addr, ConnectOptions::default())
            .await
            .unwrap();
        let mut builder = RecordBatchBuilder::new(0);
        builder.append(0, None, Some(b"x"), &[]).unwrap();
        let good = builder.build().unwrap();
        let mut bad = good.to_vec();
        *bad.last_mut().unwrap() ^= 0xff;
        let request = |records: Vec<u8>| ProduceRequest {
            acks: -1,
            timeout_ms: 1000,
            topic_data: vec![TopicProduceData {
                name: "t".into(),
                partition_data: vec![PartitionProduceData {
                    index: 0,
                    records: Some(records.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let code = |r: &ProduceResponse| r.responses[0].partition_responses[0].error_code;
        let refused = conn.request(&request(bad)).await.unwrap();
        assert_eq!(code(&refused), ErrorCode::CorruptMessage.code());
        assert_eq!(mock.high_watermark("t", 0), Some(0));
        let accepted = conn.request(&request(good.to_vec())).await.unwrap();
        assert_eq!(code(&accepted), 0);
        assert_eq!(mock.high_watermark("t", 0), Some(1));
        conn.close().await;
    })
}

#[test]
fn bad_requests_close_only_their_connection() {
    crate::common::block_on(async {
        use lazykafka::protocol::messages::create_topics::{
            CreatableTopic, CreateTopicsRequest, CreateTopicsResponse,
        };
        use std::io::{Read, Write};
        let mock = MockCluster::new(1).unwrap();
        let addr = mock.broker_addr(1).unwrap();
        // An absurd length prefix, then garbage after a plausible one.
        for bytes in [
            &[0x7f, 0xff, 0xff, 0xff, 0, 0][..],
            &[0, 0, 0, 6, 0xde, 0xad, 0xbe, 0xef, 0, 1][..],
        ] {
            let mut raw = std::net::TcpStream::connect(addr).unwrap();
            raw.set_read_timeout(Some(WAIT)).unwrap();
            raw.write_all(bytes).unwrap();
            let mut buf = [0u8; 16];
            assert_eq!(raw.read(&mut buf).unwrap(), 0, "the broker closed it");
        }
        // The broker logs each close as its connection thread ends.
        let bad = || {
            mock.events()
                .iter()
                .filter(|e| {
                    matches!(
                        e.kind,
                        MockEventKind::Closed {
                            by: ClosedBy::Broker(BrokerClose::BadRequest),
                            ..
                        }
                    )
                })
                .count()
        };
        assert!(wait_for(WAIT, || bad() == 2), "{:?}", mock.events());
        // The broker still serves, and refuses a topic too large to hold.
        let mut conn = BrokerConnection::connect(&addr.to_string(), ConnectOptions::default())
            .await
            .unwrap();
        let response: CreateTopicsResponse = conn
            .request(&CreateTopicsRequest {
                topics: vec![CreatableTopic {
                    name: "huge".into(),
                    num_partitions: i32::MAX,
                    replication_factor: 1,
                    ..Default::default()
                }],
                timeout_ms: 1000,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            response.topics[0].error_code,
            ErrorCode::InvalidPartitions.code()
        );
        assert_eq!(mock.high_watermark("huge", 0), None);
        conn.close().await;
    })
}

/// Commits the revoked positions through `Revocation::commit_with` and
/// keeps each outcome.
struct CommitOnRevoke(std::sync::Arc<std::sync::Mutex<Vec<Result<(), String>>>>);

impl lazykafka::RebalanceListener for CommitOnRevoke {
    fn on_partitions_revoked(
        &mut self,
        _partitions: &std::collections::BTreeSet<TopicPartition>,
        revocation: &mut lazykafka::Revocation<'_>,
    ) {
        let outcomes = self.0.clone();
        revocation.commit_with(revocation.positions(), move |result| {
            outcomes
                .lock()
                .unwrap()
                .push(result.map_err(|e| e.to_string()));
        });
    }
}

#[test]
fn the_outcome_of_a_commit_made_while_revoking_reaches_the_application() {
    crate::common::block_on(async {
        for refused in [false, true] {
            let mock = MockCluster::new(2).unwrap();
            mock.create_topic_with_leaders("rv", &[1]).unwrap();
            mock.set_coordinator("g-rv", 2).unwrap();
            mock.produce("rv", 0, (0..10).map(|i| MockRecord::new(format!("{i}"))))
                .unwrap();
            let outcomes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let mut consumer = Consumer::new(
                config(&mock.bootstrap_servers(), Some("g-rv"))
                    .build()
                    .unwrap(),
            )
            .unwrap();
            consumer
                .subscribe_with_listener(["rv"], CommitOnRevoke(outcomes.clone()))
                .unwrap();
            assert_eq!(consume(&mut consumer, 10).await.len(), 10);
            if refused {
                mock.push_errors(ApiKey::OffsetCommit, &[ErrorCode::OffsetMetadataTooLarge]);
            }
            // close revokes through the listener, then reports the outcome.
            consumer.close().await.unwrap();
            let outcomes = outcomes.lock().unwrap().clone();
            assert_eq!(outcomes.len(), 1, "{outcomes:?}");
            if refused {
                let error = outcomes[0].as_ref().unwrap_err();
                assert!(error.contains("OFFSET_METADATA_TOO_LARGE"), "{error}");
                assert_eq!(mock.committed("g-rv", "rv", 0), None);
            } else {
                assert_eq!(outcomes[0], Ok(()));
                assert_eq!(mock.committed("g-rv", "rv", 0), Some(10));
            }
        }
    })
}
