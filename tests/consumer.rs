//! The consumer against real peers: records produced by librdkafka,
//! consumed by lazykafka from librdkafka's mock cluster and from tansu;
//! commits read back by librdkafka and the other way round. (Groups shared
//! with librdkafka consumers: tests/consumer_group.rs and
//! tests/consumer_tansu_group.rs.)

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::clusters::{self, TestCluster};
use common::mock::RawMock;
use common::peers::{config, consume, expected, produce, values, WAIT};
use common::{client_sockets, wait_for};
use lazykafka::events::Purpose;
use lazykafka::{Consumer, TopicPartition};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};

fn mock_cluster() -> RawMock {
    let mock = RawMock::new(3);
    mock.create_topic("t", 2);
    mock.set_leader("t", 0, 1);
    mock.set_leader("t", 1, 3);
    mock.set_group_coordinator("g", 2);
    mock.cap_group_versions();
    mock
}

#[test]
fn manual_assignment_reads_every_record_from_the_mock() {
    crate::common::block_on(async {
        manual_assignment_reads_every_record(&clusters::librdkafka()).await;
    })
}

#[test]
fn manual_assignment_reads_every_record_from_our_mock() {
    crate::common::block_on(async {
        manual_assignment_reads_every_record(&clusters::ours()).await;
    })
}

/// librdkafka produces 500 records; lazykafka reads them, with leader
/// connections only.
async fn manual_assignment_reads_every_record(mock: &impl TestCluster) {
    let bootstrap = mock.bootstrap();
    produce(&bootstrap, "t", 2, 500, "none");
    let mut consumer = Consumer::new(config(&bootstrap, None).build().unwrap()).unwrap();
    consumer
        .assign([TopicPartition::new("t", 0), TopicPartition::new("t", 1)])
        .unwrap();
    // Nothing is connected before the first poll.
    assert!(consumer.connections().is_empty());
    assert!(client_sockets(&mock.ports()).is_empty());
    let records = consume(&mut consumer, 500).await;
    assert_eq!(values(&records), expected(500));
    assert_eq!(records.len(), 500, "no duplicates");
    // Offsets per partition are contiguous from 0.
    for p in 0..2 {
        let offsets: Vec<i64> = records
            .iter()
            .filter(|(q, _, _)| *q == p)
            .map(|(_, o, _)| *o)
            .collect();
        assert_eq!(offsets, (0..250).collect::<Vec<i64>>());
    }
    // Leaders only (brokers 1 and 3), the bootstrap connection retired or
    // promoted; never a socket to broker 2, which leads nothing of ours.
    let purposes: BTreeSet<(Purpose, Option<i32>)> = consumer
        .connections()
        .iter()
        .map(|c| (c.purpose, c.broker))
        .collect();
    assert_eq!(
        purposes,
        BTreeSet::from([(Purpose::Leader, Some(1)), (Purpose::Leader, Some(3))])
    );
    consumer.close().await.unwrap();
    assert!(wait_for(WAIT, || client_sockets(&mock.ports()).is_empty()));
}

#[test]
fn group_consumer_commits_and_librdkafka_reads_the_commit() {
    crate::common::block_on(async {
        let mock = mock_cluster();
        let bootstrap = mock.bootstraps().join(",");
        produce(&bootstrap, "t", 2, 200, "lz4");
        let mut consumer = Consumer::new(config(&bootstrap, Some("g")).build().unwrap()).unwrap();
        consumer.subscribe(["t"]).unwrap();
        let records = consume(&mut consumer, 200).await;
        assert_eq!(values(&records), expected(200));
        // Coordinator on broker 2, leaders on 1 and 3: three sockets, each with
        // its purpose.
        let purposes: BTreeSet<(Purpose, Option<i32>)> = consumer
            .connections()
            .iter()
            .map(|c| (c.purpose, c.broker))
            .collect();
        assert_eq!(
            purposes,
            BTreeSet::from([
                (Purpose::Coordinator, Some(2)),
                (Purpose::Leader, Some(1)),
                (Purpose::Leader, Some(3)),
            ])
        );
        consumer.commit().await.expect("commit");
        let ours = consumer
            .committed([TopicPartition::new("t", 0), TopicPartition::new("t", 1)])
            .await
            .unwrap();
        assert_eq!(ours[&TopicPartition::new("t", 0)], Some(100));
        assert_eq!(ours[&TopicPartition::new("t", 1)], Some(100));
        consumer.close().await.unwrap();

        // librdkafka reads what lazykafka committed.
        let reader: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "g")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition("t", 0);
        tpl.add_partition("t", 1);
        let committed = reader.committed_offsets(tpl, WAIT).unwrap();
        for e in committed.elements() {
            assert_eq!(e.offset(), Offset::Offset(100), "{e:?}");
        }
    })
}

#[test]
fn a_commit_by_librdkafka_is_where_lazykafka_resumes() {
    crate::common::block_on(async {
        let mock = mock_cluster();
        let bootstrap = mock.bootstraps().join(",");
        produce(&bootstrap, "t", 2, 100, "none");
        let writer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "g")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("t", 0, Offset::Offset(40))
            .unwrap();
        tpl.add_partition_offset("t", 1, Offset::Offset(45))
            .unwrap();
        writer
            .commit(&tpl, rdkafka::consumer::CommitMode::Sync)
            .expect("librdkafka commit");
        drop(writer);

        let mut consumer = Consumer::new(config(&bootstrap, Some("g")).build().unwrap()).unwrap();
        consumer.subscribe(["t"]).unwrap();
        let records = consume(&mut consumer, 15).await;
        let mut first: BTreeMap<i32, i64> = BTreeMap::new();
        for (p, o, _) in &records {
            first.entry(*p).or_insert(*o);
        }
        assert_eq!(first.get(&0), Some(&40));
        assert_eq!(first.get(&1), Some(&45));
        assert_eq!(records.len(), 15);
        consumer.close().await.unwrap();
    })
}

#[test]
fn tansu_group_consume_commit_and_resume() {
    crate::common::block_on(async {
        let Some(addr) = common::tansu_addr("tansu_group_consume_commit_and_resume") else {
            return;
        };
        let topic = format!("lk-consumer-{}", std::process::id());
        produce(&addr, &topic, 1, 300, "gzip");
        let group = format!("lk-group-{}", std::process::id());
        let mut consumer = Consumer::new(config(&addr, Some(&group)).build().unwrap()).unwrap();
        consumer.subscribe([topic.clone()]).unwrap();
        let records = consume(&mut consumer, 300).await;
        assert_eq!(values(&records), expected(300));
        // Commit where the application is (the first 200), then close.
        consumer
            .commit_offsets([(TopicPartition::new(topic.clone(), 0), 200)])
            .await
            .unwrap();
        consumer.close().await.unwrap();

        let mut again = Consumer::new(config(&addr, Some(&group)).build().unwrap()).unwrap();
        again.subscribe([topic.clone()]).unwrap();
        let rest = consume(&mut again, 100).await;
        let offsets: Vec<i64> = rest.iter().map(|(_, o, _)| *o).collect();
        assert_eq!(offsets, (200..300).collect::<Vec<i64>>());
        again.close().await.unwrap();
    })
}

#[test]
fn log_bounds_come_from_the_leaders() {
    crate::common::block_on(async {
        let mock = mock_cluster();
        let bootstrap = mock.bootstraps().join(",");
        produce(&bootstrap, "t", 2, 20, "none");
        let consumer = Consumer::new(config(&bootstrap, None).build().unwrap()).unwrap();
        let tps = [TopicPartition::new("t", 0), TopicPartition::new("t", 1)];
        let begin = consumer.beginning_offsets(tps.clone()).await.unwrap();
        let end = consumer.end_offsets(tps.clone()).await.unwrap();
        for tp in &tps {
            assert_eq!(begin[tp], 0, "{tp}");
            assert_eq!(end[tp], 10, "{tp}");
        }
        // No record is an hour ahead: "no offset" comes back as None.
        let far = consumer
            .offsets_for_times(tps.iter().map(|tp| (tp.clone(), i64::MAX / 2)))
            .await
            .unwrap();
        assert_eq!(far.len(), 2);
        assert!(far.values().all(Option::is_none), "{far:?}");
        // Only the leaders were asked: broker 2 leads nothing and gets no
        // leader connection.
        assert!(consumer
            .connections()
            .iter()
            .all(|c| !(c.purpose == Purpose::Leader && c.broker == Some(2))));
        consumer.close().await.unwrap();
    })
}

// librdkafka's mock answers every timestamp lookup with -1 (a FIXME in its
// ListOffsets handler), so this runs against tansu.
#[test]
fn offsets_for_times_finds_the_first_record_at_or_after_a_time() {
    crate::common::block_on(async {
        let Some(addr) = common::tansu_addr("offsets_for_times_finds_the_first_record") else {
            return;
        };
        let topic = format!("lk-times-{}", std::process::id());
        let now_ms = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64
        };
        let before = now_ms() - 1000;
        produce(&addr, &topic, 1, 10, "none");
        let tp = TopicPartition::new(topic.clone(), 0);
        let consumer = Consumer::new(config(&addr, None).build().unwrap()).unwrap();
        let found = consumer
            .offsets_for_times([(tp.clone(), before)])
            .await
            .unwrap();
        let first = found[&tp].expect("a record after the timestamp");
        assert_eq!(first.offset, 0);
        assert!(first.timestamp >= before, "{first:?}");
        // (tansu answers a timestamp past the last record with offset 0 and
        // timestamp -1 where Kafka answers -1: that case is checked against
        // librdkafka's mock in log_bounds_come_from_the_leaders.)
        consumer.close().await.unwrap();
    })
}
