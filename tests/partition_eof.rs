//! `enable.partition.eof` and `statistics.interval.ms`, against
//! librdkafka's mock cluster (2.12.1 and 2.16), `lazykafka::mock` and tansu,
//! with records produced by librdkafka:
//!
//! - the end of a partition is said once per arrival, after the records
//!   before it, again after new records were read or after a seek, and as
//!   a retriable error (a README loop polls on past it);
//! - statistics come every interval as serde-serializable metrics, open no
//!   connection, and end with the consumer.

// Drives a `Consumer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::TestCluster;
use common::peers::{config, produce_range, WAIT};
use common::polling::{poll_until, Polled, Polling};
use futures::StreamExt;
use lazykafka::protocol::ApiKey;
use lazykafka::{Consumer, TopicPartition};
use std::time::{Duration, Instant};

/// What `poll` gave, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Record(i32, i64),
    Eof(i32, i64),
}

/// What a `poll` gave, kept for [`poll_until`]. Every error must be a
/// partition EOF: any other fails the test.
fn keep(seen: &mut Vec<Seen>, polled: Polled) {
    match polled {
        Ok(records) => seen.extend(
            records
                .iter()
                .map(|r| Seen::Record(r.partition(), r.offset())),
        ),
        Err(e) => {
            assert!(e.is_retriable(), "the end of a partition is retriable: {e}");
            let (tp, offset) = e.partition_eof().unwrap_or_else(|| panic!("poll: {e}"));
            seen.push(Seen::Eof(tp.partition, offset));
        }
    }
}

const POLLING: Polling = Polling::every(100);

fn count(seen: &[Seen], item: &Seen) -> usize {
    seen.iter().filter(|s| *s == item).count()
}

fn position(seen: &[Seen], item: &Seen) -> usize {
    seen.iter()
        .position(|s| s == item)
        .unwrap_or_else(|| panic!("{item:?} not in {seen:?}"))
}

/// Partition 0 holds 10 records, partition 1 none. Each partition's end is
/// said once, partition 0's after its 10 records; 5 more records bring
/// them and the end again, at 15; a seek says the end again.
async fn the_end_of_a_partition_is_said_once_per_arrival<C: TestCluster>() {
    let cluster = C::start(2);
    cluster.create_topic("eof", &[1, 2]);
    let bootstrap = cluster.bootstrap();
    produce_range(&bootstrap, "eof", 1, 0..10, "none");
    let consumer = Consumer::new(
        config(&bootstrap, None)
            .enable_partition_eof(true)
            .build()
            .unwrap(),
    )
    .unwrap();
    let (p0, p1) = (TopicPartition::new("eof", 0), TopicPartition::new("eof", 1));
    consumer.assign([p0.clone(), p1.clone()]).unwrap();

    let mut seen = Vec::new();
    let both = |s: &[Seen]| s.contains(&Seen::Eof(0, 10)) && s.contains(&Seen::Eof(1, 0));
    assert!(
        poll_until(&consumer, &mut seen, POLLING, keep, |_, s| both(s)).await,
        "{} {seen:?}",
        cluster.name()
    );
    let records: Vec<i64> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Record(0, o) => Some(*o),
            _ => None,
        })
        .collect();
    assert_eq!(records, (0..10).collect::<Vec<_>>(), "{seen:?}");
    assert!(
        position(&seen, &Seen::Record(0, 9)) < position(&seen, &Seen::Eof(0, 10)),
        "{seen:?}"
    );

    // Caught up and fetching on (empty answers every 100 ms): nothing more
    // is said for either partition while the brokers get ten more Fetch
    // requests (each sent once the one before it to that broker was
    // answered: about five empty answers per broker read meanwhile).
    let fetches = || {
        cluster
            .requests()
            .iter()
            .filter(|(_, api)| *api == ApiKey::Fetch.code())
            .count()
    };
    let more = fetches() + 10;
    assert!(
        poll_until(&consumer, &mut seen, POLLING, keep, |_, _| fetches()
            >= more)
        .await,
        "{} {seen:?}",
        cluster.name()
    );
    assert_eq!(count(&seen, &Seen::Eof(0, 10)), 1, "{seen:?}");
    assert_eq!(count(&seen, &Seen::Eof(1, 0)), 1, "{seen:?}");
    assert_eq!(seen.len(), 12, "{seen:?}");

    // New records: read, then the end again, at the new end.
    produce_range(&bootstrap, "eof", 1, 10..15, "none");
    assert!(
        poll_until(&consumer, &mut seen, POLLING, keep, |_, s| s
            .contains(&Seen::Eof(0, 15)))
        .await,
        "{seen:?}"
    );
    assert!(
        position(&seen, &Seen::Record(0, 14)) < position(&seen, &Seen::Eof(0, 15)),
        "{seen:?}"
    );
    assert_eq!(
        seen[12..]
            .iter()
            .filter(|s| matches!(s, Seen::Record(0, _)))
            .count(),
        5,
        "{seen:?}"
    );

    // A seek starts over: partition 1's end is said again.
    consumer.seek(&p1, 0).unwrap();
    assert!(
        poll_until(&consumer, &mut seen, POLLING, keep, |_, s| count(
            s,
            &Seen::Eof(1, 0)
        ) == 2)
        .await,
        "{seen:?}"
    );
    consumer.close().await.unwrap();
}

/// Statistics every 100 ms, before any `poll` too: no connection is opened
/// for them. Once records are read, they show them; the stream ends when
/// the consumer is closed.
async fn statistics_come_every_interval_and_end_with_the_consumer<C: TestCluster>() {
    let cluster = C::start(1);
    cluster.create_topic("stats", &[1]);
    let bootstrap = cluster.bootstrap();
    produce_range(&bootstrap, "stats", 1, 0..10, "none");
    let consumer = Consumer::new(
        config(&bootstrap, None)
            .statistics_interval(Duration::from_millis(100))
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.assign([TopicPartition::new("stats", 0)]).unwrap();
    let mut statistics = consumer.statistics().unwrap();
    for _ in 0..2 {
        let idle = common::timeout(WAIT, statistics.next())
            .await
            .expect("statistics within the deadline")
            .expect("open");
        assert_eq!(idle.partitions[0].records_consumed, 0);
        assert!(idle.connections.is_empty(), "{:?}", idle.connections);
    }
    assert!(consumer.connections().is_empty());

    let mut read = 0;
    let deadline = Instant::now() + WAIT;
    while read < 10 && Instant::now() < deadline {
        read += consumer
            .poll(Duration::from_millis(100))
            .await
            .unwrap()
            .len();
    }
    assert_eq!(read, 10);
    let caught_up = common::timeout(WAIT, async {
        while let Some(m) = statistics.next().await {
            let json = serde_json::to_value(&m).unwrap();
            if json["partitions"][0]["records_consumed"] == 10 && json["total_lag"] == 0 {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(caught_up, Some(true), "{}", cluster.name());
    consumer.close().await.unwrap();
    let ended = common::timeout(WAIT, statistics.next()).await;
    assert!(
        matches!(ended, Some(None)),
        "the stream ends with the consumer"
    );
}

on_both_mocks!(
    the_end_of_a_partition_is_said_once_per_arrival,
    statistics_come_every_interval_and_end_with_the_consumer
);
on_mock216!(the_end_of_a_partition_is_said_once_per_arrival);

/// Without `statistics.interval.ms`, asking for statistics is a
/// configuration error naming it.
#[test]
fn statistics_need_an_interval() {
    let consumer = Consumer::new(config("127.0.0.1:9", None).build().unwrap()).unwrap();
    let e = consumer.statistics().unwrap_err();
    assert!(e.to_string().contains("statistics.interval.ms"), "{e}");
}

/// Against tansu, a broker with fetch sessions (KIP-227: partitions with
/// nothing new are left out of the answers): both ends are said, and again
/// for new records.
#[test]
fn the_end_of_a_partition_on_tansu() {
    crate::common::block_on(async {
        let Some(addr) = common::tansu_addr("the_end_of_a_partition_on_tansu") else {
            return;
        };
        let topic = format!("lk-eof-{}", std::process::id());
        produce_range(&addr, &topic, 2, 0..6, "none");
        let consumer = Consumer::new(
            config(&addr, None)
                .enable_partition_eof(true)
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer
            .assign([
                TopicPartition::new(&topic, 0),
                TopicPartition::new(&topic, 1),
            ])
            .unwrap();
        let mut seen = Vec::new();
        let both = |s: &[Seen]| s.contains(&Seen::Eof(0, 3)) && s.contains(&Seen::Eof(1, 3));
        assert!(
            poll_until(&consumer, &mut seen, POLLING, keep, |_, s| both(s)).await,
            "{seen:?}"
        );
        for p in 0..2 {
            assert!(
                position(&seen, &Seen::Record(p, 2)) < position(&seen, &Seen::Eof(p, 3)),
                "{seen:?}"
            );
        }
        produce_range(&addr, &topic, 2, 6..8, "none");
        let again = |s: &[Seen]| s.contains(&Seen::Eof(0, 4)) && s.contains(&Seen::Eof(1, 4));
        assert!(
            poll_until(&consumer, &mut seen, POLLING, keep, |_, s| again(s)).await,
            "{seen:?}"
        );
        assert_eq!(count(&seen, &Seen::Eof(0, 3)), 1, "{seen:?}");
        consumer.close().await.unwrap();
    })
}
