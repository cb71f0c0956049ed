//! `--produce-librdkafka`: the `produce` example's command line on
//! librdkafka's `BaseProducer`, for the `produce-process` case. It takes
//! the flags that case uses (`--bootstrap`, `--topic`, `--generate N`,
//! `--size B`, `--property KEY=VALUE`) and does what the example does
//! with them: sends `N` generated records (record `i`'s value is `i` in 10
//! digits, then `.` bytes up to `B`; no key, so each client's partitioner
//! spreads them), takes the delivery reports as they come (`poll(0)` after
//! each send; on `QueueFull`, `poll(100 ms)` and the same record again),
//! flushes at the end, and exits 1 when a record was not delivered.

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counts the records not delivered.
#[derive(Default)]
struct Reports {
    failed: AtomicU64,
}

impl ClientContext for Reports {}

impl ProducerContext for Reports {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            if self.failed.fetch_add(1, Ordering::Relaxed) == 0 {
                eprintln!("error: {e}");
            }
        }
    }
}

/// Returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let (Some(bootstrap), Some(topic), Some(count), Some(size)) = (
        flag("--bootstrap"),
        flag("--topic"),
        flag("--generate").and_then(|n| n.parse::<u64>().ok()),
        flag("--size").and_then(|n| n.parse::<usize>().ok()),
    ) else {
        eprintln!("error: --bootstrap, --topic, --generate N and --size B are required");
        return 2;
    };
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &bootstrap);
    for (i, a) in args.iter().enumerate() {
        if a == "--property" {
            let Some((k, v)) = args.get(i + 1).and_then(|p| p.split_once('=')) else {
                eprintln!("error: --property KEY=VALUE");
                return 2;
            };
            config.set(k, v);
        }
    }
    let producer: BaseProducer<Reports> = match config.create_with_context(Reports::default()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let mut value = Vec::with_capacity(size.max(10));
    for i in 0..count {
        value.clear();
        value.extend_from_slice(format!("{i:010}").as_bytes());
        value.resize(size.max(10), b'.');
        let mut record = BaseRecord::<(), [u8]>::to(&topic).payload(&value[..]);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    producer.poll(Duration::from_millis(100));
                    record = back;
                }
                Err((e, _)) => {
                    eprintln!("error: record {i}: {e}");
                    return 1;
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    if let Err(e) = producer.flush(Duration::from_secs(60)) {
        eprintln!("error: flush: {e}");
        return 1;
    }
    i32::from(producer.context().failed.load(Ordering::Relaxed) > 0)
}
