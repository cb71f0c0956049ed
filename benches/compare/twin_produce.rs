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

/// The command line the twins share with the `produce` example.
struct Flags {
    bootstrap: String,
    topic: String,
    count: u64,
    size: usize,
    properties: Vec<(String, String)>,
}

/// The flags, or the exit code of a usage error (said on standard error).
fn flags(args: &[String]) -> Result<Flags, i32> {
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
        return Err(2);
    };
    let mut properties = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a == "--property" {
            let Some((k, v)) = args.get(i + 1).and_then(|p| p.split_once('=')) else {
                eprintln!("error: --property KEY=VALUE");
                return Err(2);
            };
            properties.push((k.to_owned(), v.to_owned()));
        }
    }
    Ok(Flags {
        bootstrap,
        topic,
        count,
        size: size.max(10),
        properties,
    })
}

/// Returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let f = match flags(args) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &f.bootstrap);
    for (k, v) in &f.properties {
        config.set(k, v);
    }
    let producer: BaseProducer<Reports> = match config.create_with_context(Reports::default()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let mut value = Vec::with_capacity(f.size);
    for i in 0..f.count {
        value.clear();
        value.extend_from_slice(format!("{i:010}").as_bytes());
        value.resize(f.size, b'.');
        let mut record = BaseRecord::<(), [u8]>::to(&f.topic).payload(&value[..]);
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

/// `--produce-futures` and `--produce-reports`: the same flags and records
/// on lazykafka, as a tokio program (`#[tokio::main]`'s multi-thread
/// runtime) would write them: `send` with each record's `DeliveryFuture`
/// in a `FuturesUnordered`, the ones done taken after each send and the
/// rest awaited at the end (`futures`); or `send_reported` with the
/// delivery reports read by a task of their own (`reports`). Exits 1 when
/// a record was not delivered.
pub fn run_lazykafka(args: &[String], reports: bool) -> i32 {
    use futures::stream::FuturesUnordered;
    use futures::{FutureExt, StreamExt};
    use lazykafka::{Producer, ProducerConfig, ProducerRecord};
    let f = match flags(args) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let mut builder = ProducerConfig::builder().bootstrap_servers(&f.bootstrap);
    for (k, v) in &f.properties {
        builder = match builder.set(k, v) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("error: {e}");
                return 2;
            }
        };
    }
    let config = match builder.build() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let Flags {
        topic, count, size, ..
    } = f;
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(async move {
        let producer = Producer::new(config).expect("producer");
        let value = |i: u64| {
            let mut v = format!("{i:010}").into_bytes();
            v.resize(size, b'.');
            v
        };
        let mut failed = 0u64;
        if reports {
            let mut stream = producer.delivery_reports();
            let reader = tokio::spawn(async move {
                let mut failed = 0u64;
                while let Some(r) = stream.next().await {
                    failed += u64::from(r.outcome.is_err());
                }
                failed
            });
            for i in 0..count {
                let record = ProducerRecord::new(&topic).value(value(i));
                if let Err(e) = producer.send_reported(record, i).await {
                    eprintln!("error: record {i}: {e}");
                    return 1;
                }
            }
            if let Err(e) = producer.close_timeout(Duration::from_secs(60)).await {
                eprintln!("error: close: {e}");
                return 1;
            }
            failed += reader.await.expect("the reader");
        } else {
            let mut inflight = FuturesUnordered::new();
            for i in 0..count {
                let record = ProducerRecord::new(&topic).value(value(i));
                match producer.send(record).await {
                    Ok(d) => inflight.push(d),
                    Err(e) => {
                        eprintln!("error: record {i}: {e}");
                        return 1;
                    }
                }
                while let Some(Some(r)) = inflight.next().now_or_never() {
                    failed += u64::from(r.is_err());
                }
            }
            while let Some(r) = inflight.next().await {
                failed += u64::from(r.is_err());
            }
            if let Err(e) = producer.close_timeout(Duration::from_secs(60)).await {
                eprintln!("error: close: {e}");
                return 1;
            }
        }
        i32::from(failed > 0)
    })
}
