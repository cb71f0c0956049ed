//! The consumer's positioning and flow-control API against librdkafka's
//! mock cluster, with records produced by librdkafka: seek, seek to the
//! beginning and the end, pause and resume, automatic commits,
//! `auto.offset.reset` (earliest, latest, none) and OFFSET_OUT_OF_RANGE,
//! and the `Stream` of records.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::client_sockets;
use common::mock::RawMock;
use common::peers::{
    config, consume, expected, keep_values, logs, produce, produce_range, rd_committed, values,
    WAIT,
};
use common::polling::{poll_until, Polling};
use futures::StreamExt;
use lazykafka::fetch::FetchError;
use lazykafka::{Consumer, Error, OffsetReset, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Topic `topic` with two partitions (leaders 1 and 3, or both on 1 when
/// `one_leader`), group coordinator for `group` on broker 2.
fn mock(topic: &str, group: &str, one_leader: bool) -> RawMock {
    let mock = RawMock::new(3);
    mock.create_topic(topic, 2);
    mock.set_leader(topic, 0, 1);
    mock.set_leader(topic, 1, if one_leader { 1 } else { 3 });
    mock.set_group_coordinator(group, 2);
    mock.cap_group_versions();
    mock
}

fn tp(topic: &str, p: i32) -> TopicPartition {
    TopicPartition::new(topic, p)
}

/// The first offset seen per partition.
fn first_offsets(records: &[(i32, i64, String)]) -> BTreeMap<i32, i64> {
    let mut first = BTreeMap::new();
    for (p, o, _) in records {
        first.entry(*p).or_insert(*o);
    }
    first
}

#[test]
fn seek_to_an_offset_then_to_the_beginning_and_the_end() {
    crate::common::block_on(async {
        let mock = mock("seek", "unused", false);
        let bootstrap = mock.bootstraps().join(",");
        produce(&bootstrap, "seek", 2, 100, "none"); // 50 per partition
        let (p0, p1) = (tp("seek", 0), tp("seek", 1));
        let mut consumer = Consumer::new(config(&bootstrap, None).build().unwrap()).unwrap();
        consumer.assign([p0.clone(), p1.clone()]).unwrap();
        consumer.seek(&p0, 30).unwrap();
        consumer.seek(&p1, 45).unwrap();
        // A seek to a known offset is local: no socket, and the position is
        // known at once.
        assert!(consumer.connections().is_empty());
        assert!(client_sockets(&mock.ports()).is_empty());
        assert_eq!(consumer.position(&p0), Some(30));
        assert_eq!(consumer.position(&p1), Some(45));
        // Seeking a partition that is not assigned is refused.
        assert!(matches!(
            consumer.seek(&tp("seek", 7), 0),
            Err(Error::Seek(_))
        ));

        let records = consume(&mut consumer, 25).await;
        assert_eq!(records.len(), 25, "{records:?}");
        assert_eq!(first_offsets(&records), BTreeMap::from([(0, 30), (1, 45)]));
        for p in [0, 1] {
            let offsets: Vec<i64> = records.iter().filter(|r| r.0 == p).map(|r| r.1).collect();
            let from = if p == 0 { 30 } else { 45 };
            assert_eq!(offsets, (from..50).collect::<Vec<_>>(), "partition {p}");
        }

        // Back to the beginning of partition 0; partition 1 to its end, where
        // only records produced afterwards arrive.
        consumer.seek_to_beginning([&p0]).unwrap();
        consumer.seek_to_end([&p1]).unwrap();
        let mut seen = Vec::new();
        assert!(
            poll_until(
                &consumer,
                &mut seen,
                Polling::every(100),
                keep_values,
                |c, seen| {
                    c.position(&p1) == Some(50) && seen.iter().filter(|r| r.0 == 0).count() == 50
                }
            )
            .await,
            "positions {:?} {:?}, {} records",
            consumer.position(&p0),
            consumer.position(&p1),
            seen.len()
        );
        assert!(seen.iter().all(|r| r.0 == 0), "nothing new on p1 yet");
        let offsets: Vec<i64> = seen.iter().map(|r| r.1).collect();
        assert_eq!(offsets, (0..50).collect::<Vec<_>>());
        produce_range(&bootstrap, "seek", 2, 100..110, "none");
        let more = consume(&mut consumer, 10).await;
        assert_eq!(more.len(), 10, "{more:?}");
        let expect: BTreeSet<(i32, i64)> =
            (0..5).flat_map(|i| [(0, 50 + i), (1, 50 + i)]).collect();
        assert_eq!(
            more.iter().map(|r| (r.0, r.1)).collect::<BTreeSet<_>>(),
            expect
        );
        consumer.close().await.unwrap();
    })
}

#[test]
fn paused_partitions_deliver_nothing_until_resumed() {
    crate::common::block_on(async {
        // Both partitions on one leader: they share every Fetch, so records of
        // partition 0 arriving means a fetch happened that would have carried
        // partition 1's too.
        let mock = mock("pause", "unused", true);
        let bootstrap = mock.bootstraps().join(",");
        produce(&bootstrap, "pause", 2, 40, "none"); // 20 per partition
        let (p0, p1) = (tp("pause", 0), tp("pause", 1));
        let mut consumer = Consumer::new(config(&bootstrap, None).build().unwrap()).unwrap();
        consumer.assign([p0.clone(), p1.clone()]).unwrap();
        consumer.pause([&p1]);
        assert_eq!(consumer.paused(), BTreeSet::from([p1.clone()]));
        assert!(consumer.connections().is_empty(), "pause opens nothing");

        let first = consume(&mut consumer, 20).await;
        assert_eq!(first.len(), 20);
        assert!(first.iter().all(|r| r.0 == 0), "{first:?}");
        // A second wave on both partitions: partition 0's arrives, partition
        // 1 still gives nothing.
        produce_range(&bootstrap, "pause", 2, 40..60, "none");
        let second = consume(&mut consumer, 10).await;
        assert_eq!(second.len(), 10);
        assert!(second.iter().all(|r| r.0 == 0), "{second:?}");
        assert_eq!(consumer.position(&p0), Some(30));
        assert_eq!(consumer.paused(), BTreeSet::from([p1.clone()]));

        consumer.resume([&p1]);
        assert!(consumer.paused().is_empty());
        let resumed = consume(&mut consumer, 30).await;
        assert_eq!(resumed.len(), 30, "{resumed:?}");
        assert!(resumed.iter().all(|r| r.0 == 1));
        let offsets: Vec<i64> = resumed.iter().map(|r| r.1).collect();
        assert_eq!(offsets, (0..30).collect::<Vec<_>>());
        consumer.close().await.unwrap();
    })
}

#[test]
fn auto_commit_commits_without_being_asked() {
    crate::common::block_on(async {
        let mock = mock("auto", "g-auto", false);
        let bootstrap = mock.bootstraps().join(",");
        produce(&bootstrap, "auto", 2, 100, "none");
        let mut consumer = Consumer::new(
            config(&bootstrap, Some("g-auto"))
                .enable_auto_commit(true)
                .auto_commit_interval(Duration::from_millis(200))
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer.subscribe(["auto"]).unwrap();
        let records = consume(&mut consumer, 100).await;
        assert_eq!(values(&records), expected(100));
        // No commit call: the positions (50 each) get committed by themselves.
        let partitions = [tp("auto", 0), tp("auto", 1)];
        let deadline = Instant::now() + WAIT;
        let mut committed = BTreeMap::new();
        while Instant::now() < deadline {
            consumer.poll(Duration::from_millis(100)).await.unwrap();
            committed = consumer.committed(partitions.clone()).await.unwrap();
            if committed.values().all(|o| *o == Some(50)) {
                break;
            }
        }
        assert!(
            committed.values().all(|o| *o == Some(50)),
            "committed {committed:?}"
        );
        // librdkafka reads the same offsets, while our member is still in the
        // group (close would commit too, so ask before it).
        assert_eq!(
            rd_committed(&bootstrap, "g-auto", "auto", &[0, 1]),
            vec![Some(50), Some(50)]
        );
        consumer.close().await.unwrap();
    })
}

/// `close_timeout` bounds every step of closing together: with the group
/// coordinator gone (its broker down, so the final automatic commit and
/// the LeaveGroup get no answer), it returns within its time, names the
/// commit left unanswered (`Error::Timeout`), and closes every socket
/// anyway.
#[test]
fn close_timeout_gives_up_on_a_coordinator_that_is_gone() {
    crate::common::block_on(async {
        let mock = mock("gone", "g-gone", false);
        let bootstrap = mock.bootstraps().join(",");
        produce(&bootstrap, "gone", 2, 20, "none");
        let mut consumer = Consumer::new(
            config(&bootstrap, Some("g-gone"))
                .enable_auto_commit(true)
                // No commit by the interval while the test runs: the one at
                // close is the one left unanswered.
                .auto_commit_interval(Duration::from_secs(600))
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer.subscribe(["gone"]).unwrap();
        assert_eq!(values(&consume(&mut consumer, 20).await), expected(20));
        mock.broker_down(2);
        let within = Duration::from_secs(2);
        let started = Instant::now();
        let closed = common::timeout(WAIT, consumer.close_timeout(within))
            .await
            .expect("close_timeout returns");
        let took = started.elapsed();
        assert!(
            took >= within && took < within + Duration::from_secs(3),
            "close_timeout({within:?}) took {took:?}"
        );
        match &closed {
            Err(e @ Error::Timeout { .. }) => {
                assert!(e.to_string().contains("commit"), "{e}");
            }
            other => panic!("expected the commit's Error::Timeout, got {other:?}"),
        }
        let deadline = Instant::now() + WAIT;
        while !client_sockets(&mock.ports()).is_empty() {
            assert!(
                Instant::now() < deadline,
                "sockets left after close_timeout: {:?}",
                client_sockets(&mock.ports())
            );
            common::sleep(Duration::from_millis(20)).await;
        }
        assert!(matches!(
            consumer.poll(Duration::ZERO).await,
            Err(Error::Closed)
        ));
    })
}

#[test]
fn reset_earliest_and_latest_when_nothing_is_committed() {
    crate::common::block_on(async {
        let mock = mock("reset", "g-reset", false);
        let bootstrap = mock.bootstraps().join(",");
        produce(&bootstrap, "reset", 2, 20, "none"); // offsets 0..10 each
        let (p0, p1) = (tp("reset", 0), tp("reset", 1));

        // latest: what was there before the first poll is skipped.
        let mut latest = Consumer::new(
            config(&bootstrap, Some("g-reset"))
                .auto_offset_reset(OffsetReset::Latest)
                .build()
                .unwrap(),
        )
        .unwrap();
        latest.subscribe(["reset"]).unwrap();
        let mut seen = Vec::new();
        assert!(
            poll_until(
                &latest,
                &mut seen,
                Polling::every(100),
                keep_values,
                |c, _| { c.position(&p0).is_some() && c.position(&p1).is_some() }
            )
            .await
        );
        assert!(seen.is_empty(), "{seen:?}");
        assert_eq!(latest.position(&p0), Some(10));
        assert_eq!(latest.position(&p1), Some(10));
        produce_range(&bootstrap, "reset", 2, 20..30, "none");
        let records = consume(&mut latest, 10).await;
        assert_eq!(
            values(&records),
            (20..30).map(|i| format!("value-{i}")).collect()
        );
        assert!(records.iter().all(|r| r.1 >= 10));
        latest.close().await.unwrap();

        // earliest, in another group with nothing committed: from offset 0.
        let mut earliest = Consumer::new(
            config(&bootstrap, Some("g-reset-2"))
                .auto_offset_reset(OffsetReset::Earliest)
                .build()
                .unwrap(),
        )
        .unwrap();
        earliest.subscribe(["reset"]).unwrap();
        let records = consume(&mut earliest, 30).await;
        assert_eq!(records.len(), 30);
        assert_eq!(first_offsets(&records), BTreeMap::from([(0, 0), (1, 0)]));
        earliest.close().await.unwrap();
    })
}

#[test]
fn reset_none_names_every_partition_without_a_commit() {
    crate::common::block_on(async {
        let mock = RawMock::new(1);
        mock.create_topic("none", 3);
        mock.cap_group_versions();
        let bootstrap = mock.bootstraps().join(",");
        produce(&bootstrap, "none", 3, 30, "none"); // 10 per partition
                                                    // Only partition 0 has a committed offset.
        let writer = Consumer::new(config(&bootstrap, Some("g-none")).build().unwrap()).unwrap();
        writer
            .commit_offsets([(tp("none", 0), 4)])
            .await
            .expect("commit");
        writer.close().await.unwrap();

        let mut consumer = Consumer::new(
            config(&bootstrap, Some("g-none"))
                .auto_offset_reset(OffsetReset::None)
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer.subscribe(["none"]).unwrap();
        let deadline = Instant::now() + WAIT;
        let mut records = Vec::new();
        let mut errors = Vec::new();
        while errors.is_empty() && Instant::now() < deadline {
            match consumer.poll(Duration::from_millis(100)).await {
                Ok(batch) => records.extend(batch.iter().map(|r| (r.partition(), r.offset()))),
                Err(e) => errors.push(e),
            }
        }
        let [Error::Fetch(FetchError::NoOffset { partitions })] = errors.as_slice() else {
            panic!("expected one NoOffset error, got {errors:?}");
        };
        assert_eq!(partitions, &vec![tp("none", 1), tp("none", 2)]);
        // Partition 0 goes on from its commit; the others wait for a seek.
        while records.len() < 6 && Instant::now() < deadline {
            for r in consumer.poll(Duration::from_millis(100)).await.unwrap() {
                records.push((r.partition(), r.offset()));
            }
        }
        assert_eq!(records, (4..10).map(|o| (0, o)).collect::<Vec<_>>());
        assert_eq!(consumer.position(&tp("none", 1)), None);
        // A seek gets a waiting partition going.
        consumer.seek(&tp("none", 2), 8).unwrap();
        let rest = consume(&mut consumer, 2).await;
        assert_eq!(
            rest.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
            vec![(2, 8), (2, 9)]
        );
        consumer.close().await.unwrap();
    })
}

#[test]
fn offset_out_of_range_resets_per_policy_and_says_so() {
    crate::common::block_on(async {
        logs::capture();
        let mock = mock("oor", "g-oor", false);
        let bootstrap = mock.bootstraps().join(",");
        produce(&bootstrap, "oor", 2, 20, "none"); // offsets 0..10 each
        let (p0, p1) = (tp("oor", 0), tp("oor", 1));

        // earliest: a seek past the end comes back to the start.
        let mut consumer = Consumer::new(config(&bootstrap, None).build().unwrap()).unwrap();
        consumer.assign([p0.clone()]).unwrap();
        consumer.seek(&p0, 1000).unwrap();
        let records = consume(&mut consumer, 10).await;
        assert_eq!(
            records.iter().map(|r| r.1).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
        let said = logs::find(
            log::Level::Info,
            "fetch offset 1000 is out of range for oor-0",
        );
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("earliest"), "{said:?}");
        consumer.close().await.unwrap();

        // latest: a committed offset past the end goes to the end; only new
        // records arrive.
        let writer = Consumer::new(config(&bootstrap, Some("g-oor")).build().unwrap()).unwrap();
        writer.commit_offsets([(p1.clone(), 500)]).await.unwrap();
        writer.close().await.unwrap();
        let mut consumer = Consumer::new(
            config(&bootstrap, Some("g-oor"))
                .auto_offset_reset(OffsetReset::Latest)
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer.assign([p1.clone()]).unwrap();
        let mut seen = Vec::new();
        assert!(
            poll_until(
                &consumer,
                &mut seen,
                Polling::every(100),
                keep_values,
                |c, _| c.position(&p1) == Some(10)
            )
            .await,
            "position {:?}",
            consumer.position(&p1)
        );
        assert!(seen.is_empty(), "{seen:?}");
        // librdkafka's mock answers OffsetFetch with the partition's current
        // leader epoch as the committed one, although the commit carried none
        // (-1; Kafka returns -1 then). With an epoch the position is validated
        // first (KIP-320) and the leader's end for that epoch, 10, is where it
        // resumes, as the Java consumer does; without one, the Fetch goes out
        // of range and `latest` resets it to 10. Either way it is said.
        let out_of_range = logs::find(
            log::Level::Info,
            "fetch offset 500 is out of range for oor-1",
        );
        let truncated = logs::find(
            log::Level::Warn,
            "log truncation detected for oor-1: the leader's log diverges at offset 10",
        );
        assert_eq!(
            out_of_range.len() + truncated.len(),
            1,
            "{out_of_range:?} {truncated:?}"
        );
        assert!(
            out_of_range.iter().all(|l| l.contains("latest")),
            "{out_of_range:?}"
        );
        produce_range(&bootstrap, "oor", 2, 20..24, "none");
        let records = consume(&mut consumer, 2).await;
        assert_eq!(
            records.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
            vec![(1, 10), (1, 11)]
        );
        consumer.close().await.unwrap();

        // none: an error naming the partition and the offset; nothing moves.
        let consumer = Consumer::new(
            config(&bootstrap, None)
                .auto_offset_reset(OffsetReset::None)
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer.assign([p0.clone()]).unwrap();
        consumer.seek(&p0, 77).unwrap();
        let deadline = Instant::now() + WAIT;
        let error = loop {
            match consumer.poll(Duration::from_millis(100)).await {
                Ok(batch) => assert!(batch.is_empty(), "{} records", batch.len()),
                Err(e) => break e,
            }
            assert!(Instant::now() < deadline, "no error");
        };
        assert!(
            matches!(
                &error,
                Error::Fetch(FetchError::OffsetOutOfRange { partition, offset: 77 }) if *partition == p0
            ),
            "{error:?}"
        );
        assert_eq!(consumer.position(&p0), Some(77));
        consumer.close().await.unwrap();
    })
}

#[test]
fn the_stream_yields_every_record() {
    crate::common::block_on(async {
        let mock = mock("stream", "unused", false);
        let bootstrap = mock.bootstraps().join(",");
        produce(&bootstrap, "stream", 2, 60, "gzip");
        let consumer = Consumer::new(config(&bootstrap, None).build().unwrap()).unwrap();
        consumer.assign([tp("stream", 0), tp("stream", 1)]).unwrap();
        let records: Vec<(i32, i64, String)> = common::timeout(
            WAIT,
            consumer
                .stream()
                .take(60)
                .map(|r| {
                    let r = r.expect("record");
                    let value = String::from_utf8_lossy(r.value().unwrap_or_default()).into_owned();
                    (r.partition(), r.offset(), value)
                })
                .collect(),
        )
        .await
        .expect("60 records within the deadline");
        assert_eq!(values(&records), expected(60));
        for p in [0, 1] {
            let offsets: Vec<i64> = records.iter().filter(|r| r.0 == p).map(|r| r.1).collect();
            assert_eq!(offsets, (0..30).collect::<Vec<_>>());
        }
        consumer.close().await.unwrap();
    })
}

/// One property map for both clients: a producer property given to the
/// consumer is accepted, changes nothing, and is named in one `warn` line.
#[test]
fn a_producer_property_is_ignored_with_a_warn_line() {
    logs::capture();
    let base = || lazykafka::ConsumerConfig::builder().bootstrap_servers("localhost:9092");
    let config = base()
        .set("queue.buffering.max.ms", "5")
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(config, base().build().unwrap());
    let lines = logs::find(log::Level::Warn, "queue.buffering.max.ms");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("a producer property; the consumer ignores it"),
        "{}",
        lines[0]
    );
}
