//! Keyed placement judged by librdkafka. Each value of the `partitioner`
//! property (`BuiltinPartitioner`) against librdkafka's producer with the
//! same value, on 10,000 keys. And the default placement: its producer, with
//! `partitioner=murmur2_random` (the Java client's murmur2 placement; its
//! default, `consistent_random`, hashes with CRC-32), produces keyed
//! records to topics of several partition counts on librdkafka's mock
//! cluster; its consumer reads them all back, and for every record the
//! partition it landed on must be the one `producer::partition_for_key`
//! gives for its key. No lazykafka runtime is involved.

#[path = "common/mock.rs"]
#[allow(dead_code)]
mod mock;

use lazykafka::producer::{partition_for_key, BuiltinPartitioner, Placement};
use mock::RawMock;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
const PARTITION_COUNTS: [i32; 6] = [1, 2, 3, 7, 16, 61];

/// Text keys, then binary ones of every length from 0 (an empty key: a key
/// all the same, hashed) to 40, bytes above 0x7f included.
fn keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..300).map(|i| format!("key-{i}").into_bytes()).collect();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..300usize {
        let len = i % 41;
        let key = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        keys.push(key);
    }
    keys
}

/// 10,000 keys: text, binary of every length up to 40, the empty key, and
/// (index 0) the null key.
fn ten_thousand_keys() -> Vec<Option<Vec<u8>>> {
    let mut keys: Vec<Option<Vec<u8>>> = vec![None, Some(Vec::new())];
    keys.extend((0..5_000).map(|i| Some(format!("order-{i}").into_bytes())));
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while keys.len() < 10_000 {
        let len = 1 + keys.len() % 40;
        let key = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        keys.push(Some(key));
    }
    keys
}

/// Where librdkafka's producer with `partitioner` put each of `keys`
/// (key index -> partition) in a topic of `n` partitions: produced, then
/// read back by its consumer.
fn librdkafka_placements(
    mock: &RawMock,
    partitioner: &str,
    n: i32,
    keys: &[Option<Vec<u8>>],
) -> BTreeMap<usize, i32> {
    let bootstrap = mock.bootstraps().join(",");
    let topic = format!("placed-{partitioner}-{n}");
    mock.create_topic(&topic, n);
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("partitioner", partitioner)
        .set("linger.ms", "5")
        .create()
        .expect("librdkafka producer");
    for (i, key) in keys.iter().enumerate() {
        let value = i.to_string();
        let mut record = BaseRecord::<[u8], _>::to(&topic).payload(&value);
        if let Some(key) = key {
            record = record.key(&key[..]);
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((e, back)) => {
                    // A full queue: let it drain.
                    assert!(
                        matches!(
                            e,
                            rdkafka::error::KafkaError::MessageProduction(
                                rdkafka::types::RDKafkaErrorCode::QueueFull
                            )
                        ),
                        "send: {e}"
                    );
                    producer.poll(Duration::from_millis(10));
                    record = back;
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(WAIT).expect("flush");
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .create()
        .expect("librdkafka consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..n {
        assignment
            .add_partition_offset(&topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut landed = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    while landed.len() < keys.len() && Instant::now() < deadline {
        let Some(m) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = m.expect("librdkafka consumer error");
        let i: usize = std::str::from_utf8(m.payload().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            landed.insert(i, m.partition()).is_none(),
            "{partitioner}: key {i} read twice"
        );
    }
    assert_eq!(landed.len(), keys.len(), "{partitioner}: every record read");
    landed
}

/// The `partitioner` property's values, each judged by librdkafka's own
/// producer with the same value on 10,000 keys (the empty and null keys
/// among them) and topics of 7 and 61 partitions: every record our
/// `BuiltinPartitioner` places on a partition (keys, and null keys under
/// `consistent`, `murmur2` and `fnv1a`) landed there with librdkafka. What
/// either client places at random (null keys under the `_random` values,
/// the empty key under `consistent_random`, every key under `random`) is
/// not compared.
#[test]
fn every_builtin_partitioner_places_keys_where_librdkafka_does() {
    let mock = RawMock::new(3);
    let keys = ten_thousand_keys();
    for partitioner in BuiltinPartitioner::ALL {
        if partitioner == BuiltinPartitioner::Random {
            continue;
        }
        for n in [7, 61] {
            let landed = librdkafka_placements(&mock, partitioner.name(), n, &keys);
            let mut compared = 0;
            let mut wrong = Vec::new();
            let mut spread = std::collections::BTreeSet::new();
            for (i, key) in keys.iter().enumerate() {
                match partitioner.placement(key.as_deref(), n) {
                    Placement::Partition(p) => {
                        compared += 1;
                        spread.insert(p);
                        if landed[&i] != p {
                            wrong.push((i, key.clone(), landed[&i], p));
                        }
                    }
                    Placement::Sticky | Placement::Random => {}
                    other => panic!("{other:?}"),
                }
            }
            assert!(
                wrong.is_empty(),
                "{partitioner}, {n} partitions: (key index, key, librdkafka's, ours) {:?}",
                &wrong[..wrong.len().min(10)]
            );
            assert!(compared >= 9_998, "{partitioner}: {compared} compared");
            assert_eq!(
                spread.len(),
                n as usize,
                "{partitioner}: every partition hit"
            );
        }
    }
}

#[test]
fn librdkafka_places_every_key_where_partition_for_key_says() {
    let mock = RawMock::new(3);
    let bootstrap = mock.bootstraps().join(",");
    let topic = |n: i32| format!("keyed-{n}");
    for n in PARTITION_COUNTS {
        mock.create_topic(&topic(n), n);
    }
    let keys = keys();

    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .create()
        .expect("librdkafka producer");
    for n in PARTITION_COUNTS {
        for (i, key) in keys.iter().enumerate() {
            let value = i.to_string();
            let name = topic(n);
            let record = BaseRecord::to(&name).key(&key[..]).payload(&value);
            producer.send(record).map_err(|(e, _)| e).expect("send");
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(WAIT).expect("flush");

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .create()
        .expect("librdkafka consumer");
    let mut assignment = TopicPartitionList::new();
    for n in PARTITION_COUNTS {
        for p in 0..n {
            assignment
                .add_partition_offset(&topic(n), p, Offset::Beginning)
                .unwrap();
        }
    }
    consumer.assign(&assignment).unwrap();

    // (partition count, key index) -> the partitions it was read from.
    let mut landed: BTreeMap<(i32, usize), Vec<i32>> = BTreeMap::new();
    let expected = PARTITION_COUNTS.len() * keys.len();
    let deadline = Instant::now() + WAIT;
    let mut read = 0;
    while read < expected && Instant::now() < deadline {
        let Some(m) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = m.expect("librdkafka consumer error");
        let n: i32 = m.topic().strip_prefix("keyed-").unwrap().parse().unwrap();
        let i: usize = std::str::from_utf8(m.payload().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        landed.entry((n, i)).or_default().push(m.partition());
        read += 1;
    }
    assert_eq!(read, expected, "every record read");

    let mut wrong = Vec::new();
    let mut spread: BTreeMap<i32, std::collections::BTreeSet<i32>> = BTreeMap::new();
    for n in PARTITION_COUNTS {
        for (i, key) in keys.iter().enumerate() {
            let partitions = &landed[&(n, i)];
            assert_eq!(partitions.len(), 1, "{n} partitions, key {i}: read once");
            let ours = partition_for_key(key, n).unwrap();
            if partitions[0] != ours {
                wrong.push((n, key.clone(), partitions[0], ours));
            }
            spread.entry(n).or_default().insert(partitions[0]);
        }
    }
    assert!(
        wrong.is_empty(),
        "(partitions, key, librdkafka's partition, ours): {wrong:?}"
    );
    // Every partition got keys: the comparison covers all of them.
    for n in PARTITION_COUNTS {
        assert_eq!(spread[&n].len(), n as usize, "{n} partitions");
    }
}
