//! The producer core's scenarios on the crate's test harness
//! ([`crate::harness`]: the mock's brokers in memory, a manual clock):
//! batching, sequence order through retries, a leader moving mid-flight,
//! a broker restart, and `buffer.memory` full.

use super::{OutRecord, ProducerCore, Refused};
use crate::config::{ProducerConfig, ProducerConfigBuilder};
use crate::harness::addr;
use crate::producer::delivery::BatchOutcome;
use crate::protocol::ApiKey;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

const TOPIC: &str = "invoices";

type Pair = crate::harness::Pair<ProducerCore>;

/// A record appended: its batch's outcome and its place there.
struct Sent {
    value: String,
    outcome: Arc<BatchOutcome>,
    index: u32,
}

/// `brokers` mock brokers, the topic's partitions led by `leaders`, and a
/// producer configured by `config` on a bootstrap list of broker 1.
fn pair(
    brokers: i32,
    leaders: &[i32],
    config: impl FnOnce(ProducerConfigBuilder) -> ProducerConfigBuilder,
) -> Pair {
    let builder = ProducerConfig::builder().bootstrap_servers(addr(1).to_string());
    let config = config(builder).build().unwrap();
    let mut pair = Pair::with_core(brokers, |start| {
        ProducerCore::from_config(&config, start, 7)
    });
    pair.mock
        .create_topic(TOPIC, leaders.len() as i32, Some(leaders))
        .unwrap();
    pair
}

/// Appends a record with `value` to `partition`, as `send` does: the
/// topic's metadata first (stepping the clock until it is known).
fn append(pair: &mut Pair, partition: i32, value: String) -> Result<Sent, Refused> {
    pair.core.use_topic(pair.now, TOPIC);
    for _ in 0..100 {
        if matches!(pair.core.topic_state(TOPIC), super::TopicState::Known(_)) {
            break;
        }
        pair.advance(Duration::from_millis(10));
    }
    let record = OutRecord {
        topic: TOPIC.to_owned(),
        partition: Some(partition),
        key: None,
        value: Some(value.clone().into()),
        headers: Vec::new(),
        timestamp: 1_000,
    };
    let queued = pair.core.append(pair.now, record)?;
    Ok(Sent {
        value,
        outcome: queued.outcome,
        index: queued.index,
    })
}

/// Where each record was written (partition, offset), once decided.
fn written(sent: &[Sent]) -> Vec<Option<(i32, i64)>> {
    let waker = futures::task::noop_waker();
    sent.iter()
        .map(|s| match s.outcome.poll(s.index, 1_000, &waker) {
            Poll::Ready(Ok(m)) => Some((m.partition, m.offset)),
            Poll::Ready(Err(e)) => panic!("{}: {e}", s.value),
            Poll::Pending => None,
        })
        .collect()
}

/// Each partition's records got offsets 0, 1, 2... in the order they were
/// appended, and the partition's log holds that many: every record once,
/// in order.
fn assert_once_in_order(pair: &Pair, sent: &[Sent]) {
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    for (s, w) in sent.iter().zip(written(sent)) {
        let (partition, offset) = w.unwrap_or_else(|| panic!("{} not decided", s.value));
        let expected = next.entry(partition).or_insert(0);
        assert_eq!(offset, *expected, "{} on partition {partition}", s.value);
        *expected += 1;
    }
    for (partition, count) in next {
        let log = &pair.mock.topics[TOPIC].partitions[partition as usize].log;
        assert_eq!(log.high_watermark(), count, "partition {partition}'s log");
    }
}

#[test]
fn records_are_batched_per_partition_and_written_once_in_order() {
    let mut pair = pair(3, &[2, 3], |b| b.linger(Duration::from_millis(5)));
    let sent: Vec<Sent> = (0..200)
        .map(|i| append(&mut pair, i % 2, format!("v-{i}")).unwrap())
        .collect();
    pair.advance(Duration::from_secs(1));
    assert_once_in_order(&pair, &sent);
    assert_eq!(pair.core.outstanding(), 0);
    // All appended within one linger: one batch per partition, one Produce
    // to each leader.
    let produced = pair.served(ApiKey::Produce);
    assert_eq!(produced.len(), 2, "{produced:?}");
    // The bootstrap connection (broker 1, which leads nothing) retired:
    // a connection to each leader only.
    assert_eq!(pair.connected_brokers(), [2, 3].into_iter().collect());
}

/// What a call waiting on the core is looked at again for: the topic's
/// metadata once it changed, deliveries once a batch is decided (memory
/// freed, a flush done), and nothing after a step that changed neither.
#[test]
fn the_core_tells_which_kinds_of_change_a_waiting_call_waits_for() {
    use crate::cluster::Changes;
    let mut pair = pair(3, &[2, 3], |b| b.linger(Duration::from_millis(5)));
    pair.core.take_changes();
    pair.core.use_topic(pair.now, TOPIC);
    pair.advance(Duration::from_millis(100));
    assert!(matches!(
        pair.core.topic_state(TOPIC),
        super::TopicState::Known(2)
    ));
    assert_eq!(pair.core.take_changes(), Changes::METADATA);
    let sent = vec![append(&mut pair, 0, "a".into()).unwrap()];
    assert_eq!(pair.core.take_changes(), Changes::NONE, "queued only");
    pair.advance(Duration::from_millis(100));
    assert_eq!(written(&sent), [Some((0, 0))]);
    assert_eq!(pair.core.take_changes(), Changes::DELIVERIES);
    pair.advance(Duration::from_secs(1));
    assert_eq!(pair.core.take_changes(), Changes::NONE, "idle");
}

#[test]
fn records_follow_a_leader_that_moves_mid_flight_once_and_in_order() {
    let mut pair = pair(3, &[2, 3], |b| b.linger(Duration::ZERO));
    let mut sent = Vec::new();
    for i in 0..100 {
        sent.push(append(&mut pair, 0, format!("v-{i}")).unwrap());
        if i == 40 {
            // Partition 0 moves from broker 2 to broker 3: broker 2 answers
            // NOT_LEADER_OR_FOLLOWER to what it gets from now on.
            let p = &mut pair.mock.topics.get_mut(TOPIC).unwrap().partitions[0];
            p.leader = 3;
            p.bump_epoch();
        }
        pair.advance(Duration::from_millis(3));
    }
    pair.advance(Duration::from_secs(5));
    assert_once_in_order(&pair, &sent);
    let to_3 = pair
        .served(ApiKey::Produce)
        .into_iter()
        .filter(|(_, b)| *b == 3)
        .count();
    assert!(to_3 > 0, "nothing produced to the new leader");
}

#[test]
fn a_leader_restart_loses_nothing_and_writes_nothing_twice() {
    let mut pair = pair(3, &[2, 3], |b| b.linger(Duration::ZERO));
    let mut sent = Vec::new();
    for i in 0..60 {
        sent.push(append(&mut pair, i % 2, format!("v-{i}")).unwrap());
        if i == 20 {
            // Broker 2 goes down with requests in flight (their answers
            // lost), and comes back 2 s later.
            pair.broker_down(2);
        }
        if i == 21 {
            pair.advance(Duration::from_secs(2));
            pair.mock.brokers.get_mut(&2).unwrap().up = true;
        }
        pair.advance(Duration::from_millis(3));
    }
    pair.advance(Duration::from_secs(10));
    assert_once_in_order(&pair, &sent);
    assert_eq!(pair.core.outstanding(), 0);
}

#[test]
fn a_full_buffer_refuses_the_record_and_takes_it_once_delivered() {
    // Room for a few records of 1 KiB, with a linger that holds them.
    let mut pair = pair(3, &[2, 3], |b| {
        b.buffer_memory(8 * 1024)
            .batch_size(64 * 1024)
            .linger(Duration::from_millis(50))
    });
    let value = "x".repeat(1024);
    let mut sent = Vec::new();
    let refused = loop {
        match append(&mut pair, 0, value.clone()) {
            Ok(s) => sent.push(s),
            Err(r) => break r,
        }
        assert!(sent.len() < 100, "buffer.memory never filled");
    };
    assert!(matches!(refused, Refused::Full(_)), "not Full");
    assert!(!sent.is_empty());
    // Once the linger is over and the batch delivered, there is room.
    pair.advance(Duration::from_secs(1));
    assert_once_in_order(&pair, &sent);
    sent.push(append(&mut pair, 0, value).unwrap_or_else(|_| panic!("still full")));
    pair.advance(Duration::from_secs(1));
    assert_once_in_order(&pair, &sent);
}

/// A keyless record, placed by the sticky partitioner.
fn keyless(value: String) -> OutRecord {
    OutRecord {
        topic: TOPIC.to_owned(),
        partition: None,
        key: None,
        value: Some(value.into()),
        headers: Vec::new(),
        timestamp: 1_000,
    }
}

/// A producer sending little (a keyless record every 20 ms, each in a
/// batch of its own, far below `batch.size`) changes partition after
/// `sticky.partitioning.linger.ms` (10 ms by default), so its records
/// spread over the partitions; with a linger longer than the run they all
/// go to one, as the Java client's partitioner (bytes only) sends them.
#[test]
fn a_producer_sending_little_spreads_its_records_by_the_sticky_linger() {
    let placed = |linger: Option<Duration>| -> Vec<i32> {
        let mut pair = pair(3, &[2, 3, 2, 3], |b| match linger {
            Some(l) => b.sticky_partitioning_linger(l),
            None => b,
        });
        append(&mut pair, 0, "first".into()).unwrap();
        (0..40)
            .map(|i| {
                let queued = pair
                    .core
                    .append(pair.now, keyless(format!("v-{i}")))
                    .unwrap();
                pair.advance(Duration::from_millis(20));
                let waker = futures::task::noop_waker();
                assert!(
                    matches!(
                        queued.outcome.poll(queued.index, 1_000, &waker),
                        Poll::Ready(Ok(_))
                    ),
                    "delivered within 20 ms: a batch of its own"
                );
                queued.outcome.partition()
            })
            .collect()
    };
    let spread = placed(None);
    let used: BTreeSet<i32> = spread.iter().copied().collect();
    assert_eq!(used, (0..4).collect(), "{spread:?}");
    // A stay lasts about two records (10 ms, told when a record opens a
    // batch 20 ms after the one before): never a long run on one.
    let longest = spread
        .chunk_by(|a, b| a == b)
        .map(<[i32]>::len)
        .max()
        .unwrap();
    assert!(longest <= 8, "{spread:?}");
    let held = placed(Some(Duration::from_secs(900)));
    assert!(held.iter().all(|p| *p == held[0]), "{held:?}");
}

#[test]
fn the_sticky_partitioner_leaves_out_a_partition_whose_leader_is_gone_once_metadata_says_so() {
    // Each record fills a batch, so the sticky partitioner moves on at
    // every record, and the partitions it chooses among come from the
    // list kept per metadata generation.
    let mut pair = pair(3, &[2, 3, 2, 3], |b| {
        b.batch_size(10)
            .metadata_max_age(Duration::from_millis(200))
    });
    append(&mut pair, 0, "first".into()).unwrap();
    let placed = |pair: &mut Pair, n: usize| -> Vec<i32> {
        (0..n)
            .map(|i| {
                let queued = pair
                    .core
                    .append(pair.now, keyless(format!("v-{i}")))
                    .unwrap();
                pair.advance(Duration::from_millis(1));
                queued.outcome.partition()
            })
            .collect()
    };
    let all: BTreeSet<i32> = placed(&mut pair, 200).into_iter().collect();
    assert_eq!(all, (0..4).collect());
    // Partition 2 loses its leader; once the metadata is asked again it
    // says so, and once the partitioner moves on (the partition current
    // then keeps its records until it does), no record goes there.
    let p = &mut pair.mock.topics.get_mut(TOPIC).unwrap().partitions[2];
    p.leader = -1;
    p.bump_epoch();
    pair.advance(Duration::from_secs(1));
    let later: BTreeSet<i32> = placed(&mut pair, 200)
        .into_iter()
        .skip_while(|p| *p == 2)
        .collect();
    assert_eq!(later, [0, 1, 3].into_iter().collect());
}

#[test]
fn the_random_partitioner_draws_among_partitions_with_a_leader() {
    let mut pair = pair(3, &[2, 3, 2, 3], |b| {
        b.set("partitioner", "random")
            .unwrap()
            .metadata_max_age(Duration::from_millis(200))
    });
    append(&mut pair, 0, "first".into()).unwrap();
    let placed = |pair: &mut Pair| -> BTreeSet<i32> {
        (0..200)
            .map(|i| {
                let mut record = keyless(format!("v-{i}"));
                record.key = Some(format!("k-{i}").into());
                let queued = pair.core.append(pair.now, record).unwrap();
                pair.advance(Duration::from_millis(1));
                queued.outcome.partition()
            })
            .collect()
    };
    assert_eq!(placed(&mut pair), (0..4).collect());
    let p = &mut pair.mock.topics.get_mut(TOPIC).unwrap().partitions[2];
    p.leader = -1;
    p.bump_epoch();
    pair.advance(Duration::from_secs(1));
    assert_eq!(placed(&mut pair), [0, 1, 3].into_iter().collect());
}

/// A record that opens a batch wakes the sender only when the sender does
/// not look again by the batch's `linger.ms` anyway; a record that fills a
/// batch (ready now) wakes it.
#[test]
fn an_opened_batch_wakes_the_sender_only_when_it_would_not_look_by_its_due_time() {
    let mut pair = pair(1, &[1, 1], |b| {
        b.batch_size(2 * 1024).linger(Duration::from_millis(100))
    });
    // The topic's metadata first, and a producer id (nothing in flight).
    append(&mut pair, 0, "first".into()).unwrap();
    pair.advance(Duration::from_secs(1));
    let to = |partition: i32, value: String| OutRecord {
        topic: TOPIC.to_owned(),
        partition: Some(partition),
        key: None,
        value: Some(value.into()),
        headers: Vec::new(),
        timestamp: 1_000,
    };
    // Nothing queued: the sender has no deadline for batches, so a batch
    // opened must wake it.
    let _ = pair.core.next_deadline_at(pair.now);
    let opened = pair.core.append(pair.now, to(0, "a".into())).unwrap();
    assert!(opened.news, "a batch opened with no wake-up planned");
    // The sender plans to wake when that batch is due: a batch opened at
    // the same time (due then too) needs no wake-up, nor one to join it.
    let planned = pair.core.next_deadline_at(pair.now);
    assert_eq!(planned, Some(pair.now + Duration::from_millis(100)));
    let second = pair.core.append(pair.now, to(1, "b".into())).unwrap();
    assert!(!second.news, "a batch due when the sender looks anyway");
    let joined = pair.core.append(pair.now, to(1, "c".into())).unwrap();
    assert!(!joined.news, "a record joining an open batch");
    // A record that fills partition 1's batch makes it ready now.
    let filled = pair
        .core
        .append(pair.now, to(1, "x".repeat(4 * 1024)))
        .unwrap();
    assert!(filled.news, "a full batch is ready now");
    // Every record goes out, in order, once.
    pair.advance(Duration::from_secs(1));
    assert_eq!(pair.core.outstanding(), 0);
}
