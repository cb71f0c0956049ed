//! Record batches written by a real producer: librdkafka produces with each
//! codec to a real broker (tansu, and librdkafka's mock cluster), and
//! lazykafka fetches and decodes them; every key and value must come back.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::mock::RawMock;
use lazykafka::{Consumer, ConsumerConfig, OffsetReset, TopicPartition};
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];

/// Produces `count` records to partition 0 of `topic` with `codec`: key
/// `k{i}`, a value of `i % 300` bytes (some empty, some larger than a
/// varint byte), every tenth value null, and a header.
fn produce(
    bootstrap: &str,
    topic: &str,
    codec: &str,
    count: usize,
) -> BTreeMap<i64, (String, Option<Vec<u8>>)> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("compression.codec", codec)
        .set("linger.ms", "20")
        .set("batch.num.messages", "100")
        .create()
        .expect("librdkafka producer");
    let mut expected = BTreeMap::new();
    for i in 0..count {
        let key = format!("k{i}");
        let value: Option<Vec<u8>> = (i % 10 != 0).then(|| vec![b'a' + (i % 26) as u8; i % 300]);
        let headers = OwnedHeaders::new().insert(Header {
            key: "n",
            value: Some(&i.to_string()),
        });
        let mut record = BaseRecord::to(topic)
            .key(&key)
            .partition(0)
            .headers(headers);
        if let Some(v) = &value {
            record = record.payload(v);
        }
        producer.send(record).map_err(|(e, _)| e).expect("send");
        expected.insert(i as i64, (key, value));
        producer.poll(Duration::ZERO);
    }
    producer.flush(WAIT).expect("flush");
    expected
}

async fn consume_all(bootstrap: &str, topic: &str, count: usize) -> Vec<lazykafka::ConsumerRecord> {
    let config = ConsumerConfig::builder()
        .bootstrap_servers(bootstrap)
        .auto_offset_reset(OffsetReset::Earliest)
        .fetch_max_wait(Duration::from_millis(100))
        .build()
        .unwrap();
    let consumer = Consumer::new(config).unwrap();
    consumer.assign([TopicPartition::new(topic, 0)]).unwrap();
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::new();
    while out.len() < count && Instant::now() < deadline {
        out.extend(
            consumer
                .poll(Duration::from_millis(200))
                .await
                .expect("poll"),
        );
    }
    consumer.close().await.unwrap();
    out
}

async fn check_codecs(bootstrap: &str, topic_prefix: &str, setup: impl Fn(&str)) {
    for codec in CODECS {
        let topic = format!("{topic_prefix}-{codec}");
        setup(&topic);
        let expected = produce(bootstrap, &topic, codec, 500);
        let records = consume_all(bootstrap, &topic, expected.len()).await;
        assert_eq!(records.len(), expected.len(), "{codec}: every record once");
        for r in &records {
            let (key, value) = &expected[&r.offset()];
            assert_eq!(r.key(), Some(key.as_bytes()), "{codec} @{}", r.offset());
            assert_eq!(r.value(), value.as_deref(), "{codec} @{}", r.offset());
            let header = r.headers().iter().next().expect("a header");
            assert_eq!(header.key(), "n");
            assert_eq!(header.value(), Some(r.offset().to_string().as_bytes()));
        }
    }
}

#[test]
fn every_codec_from_librdkafka_through_tansu() {
    crate::common::block_on(async {
        let Some(addr) = common::tansu_addr("every_codec_from_librdkafka_through_tansu") else {
            return;
        };
        check_codecs(&addr, &format!("lk-codec-{}", std::process::id()), |_| {}).await;
    })
}

#[test]
fn every_codec_from_librdkafka_through_the_mock_cluster() {
    crate::common::block_on(async {
        let mock = RawMock::new(1);
        let bootstrap = mock.bootstraps().join(",");
        check_codecs(&bootstrap, "codec", |topic| mock.create_topic(topic, 1)).await;
    })
}
