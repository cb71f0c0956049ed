//! Keyed placement judged by librdkafka: its producer, with
//! `partitioner=murmur2_random` (the Java client's murmur2 placement; its
//! default, `consistent_random`, hashes with CRC-32), produces keyed
//! records to topics of several partition counts on librdkafka's mock
//! cluster; its consumer reads them all back, and for every record the
//! partition it landed on must be the one `producer::partition_for_key`
//! gives for its key. No lazykafka runtime is involved.

#[path = "common/mock.rs"]
#[allow(dead_code)]
mod mock;

use lazykafka::producer::partition_for_key;
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
