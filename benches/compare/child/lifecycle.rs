//! A lifecycle child (`LKB_LIFECYCLE` = `consumer` or `producer`): one
//! client, lazykafka or librdkafka, that pauses at named points so that
//! the parent can count its sockets, threads and memory from outside
//! (see `parent/lifecycle`), as the Java peer's `census-consumer` and
//! `census-producer` modes do (`tests/java/Peer.java`), with the same
//! events on standard output, one JSON line each, and the same pauses:
//! each waits for a line on standard input (its end counts as a line).
//!
//! - consumer: `subscribed` (created and subscribed to `LKB_TOPIC` as a
//!   member of `LKB_GROUP`, or assigned every partition without a group;
//!   not polled) | polls until `LKB_RECORDS` records, `consumed` (with its
//!   timings) | polls on until a line | closes, `closed` | exits after a
//!   line;
//! - producer: `created` | sends `LKB_RECORDS` records of `LKB_VALUE_LEN`
//!   bytes (record `i` to partition `i % LKB_PARTITIONS`) and waits for
//!   every delivery, `sent` | idles until a line | closes, `closed` | exits
//!   after a line.
//!
//! `LKB_PROPERTIES` (`key=value` lines) is added to the client's
//! configuration. Nothing measures itself here: no census thread, so the
//! parent's `wait4` CPU is the client's alone. A thread reads standard
//! input, as the Java peer's does.

use super::runtime::Runtime;
use super::{env, CHILD_TIMEOUT};
use crate::client_config::{
    CHECK_CRCS, FETCH_MAX_BYTES, FETCH_MAX_WAIT_MS, FETCH_MIN_BYTES, MAX_PARTITION_FETCH_BYTES,
    PRODUCE_ACKS, PRODUCE_BATCH_SIZE, PRODUCE_BUFFER_KBYTES, PRODUCE_IDEMPOTENCE,
    PRODUCE_LINGER_MS, PRODUCE_MAX_IN_FLIGHT,
};
use crate::data::values;
use futures::channel::mpsc::{unbounded, UnboundedReceiver};
use futures::StreamExt as _;
use serde_json::{json, Value};
use std::io::{BufRead as _, Write as _};
use std::time::{Duration, Instant};

/// The lines of standard input, read by a thread of their own; its end
/// counts as a line, again and again. Waited for without polling: on
/// this thread, or as a future on the client's runtime.
struct Lines(UnboundedReceiver<()>);

impl Lines {
    fn start() -> Lines {
        let (tx, rx) = unbounded();
        super::threads::spawn_named("stdin", move || {
            for line in std::io::stdin().lock().lines() {
                if line.is_err() || tx.unbounded_send(()).is_err() {
                    break;
                }
            }
            // Dropping `tx` ends the channel: every later wait returns.
        });
        Lines(rx)
    }

    /// Waits for the next line, blocking this thread.
    fn wait(&mut self) {
        futures::executor::block_on(self.next());
    }

    /// Waits for the next line, as a future.
    async fn next(&mut self) {
        let _ = self.0.next().await;
    }

    /// Whether a line came (taking it), without waiting.
    fn ready(&mut self) -> bool {
        // Empty: nothing yet; closed: the end of the input.
        !matches!(self.0.try_recv(), Err(e) if e.is_empty())
    }
}

/// Prints one event line, `fields` added.
fn event(name: &str, fields: Value) {
    let mut v = json!({ "event": name });
    if let Value::Object(m) = fields {
        for (k, x) in m {
            v[k] = x;
        }
    }
    println!("{v}");
    let _ = std::io::stdout().flush();
}

/// What the child is told.
struct Life {
    bootstrap: String,
    topic: String,
    partitions: i32,
    records: usize,
    group: String,
    /// `LKB_PROPERTIES`: added to every client's configuration.
    properties: Vec<(String, String)>,
}

/// Runs the lifecycle `LKB_LIFECYCLE` of `LKB_CLIENT`, then exits.
pub(crate) fn run() -> ! {
    let life = Life {
        bootstrap: env("LKB_BOOTSTRAP"),
        topic: env("LKB_TOPIC"),
        partitions: env("LKB_PARTITIONS").parse().unwrap(),
        records: env("LKB_RECORDS").parse().unwrap(),
        group: std::env::var("LKB_GROUP").unwrap_or_default(),
        properties: std::env::var("LKB_PROPERTIES")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    };
    let lines = &mut Lines::start();
    match (env("LKB_LIFECYCLE").as_str(), env("LKB_CLIENT").as_str()) {
        ("consumer", "lazykafka") => lazykafka_consumer(&life, lines),
        ("consumer", "librdkafka") => librdkafka_consumer(&life, lines),
        ("producer", "lazykafka") => lazykafka_producer(&life, lines),
        ("producer", "librdkafka") => librdkafka_producer(&life, lines),
        (role, client) => panic!("no lifecycle {role} for {client}"),
    }
    std::process::exit(0);
}

/// What a consumer's loop counted up to its last record.
#[derive(Default)]
struct Count {
    records: usize,
    bytes: u64,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Count {
    fn record(&mut self, len: usize) {
        let now = Instant::now();
        self.first.get_or_insert(now);
        self.last = Some(now);
        self.records += 1;
        self.bytes += len as u64;
    }

    /// The `consumed` event's fields, the clock started at `start`.
    fn fields(&self, start: Instant, wanted: usize) -> Value {
        let ms = |t: Option<Instant>| t.map(|t| t.duration_since(start).as_secs_f64() * 1e3);
        json!({
            "records": self.records,
            "bytes": self.bytes,
            "timed_out": self.records < wanted,
            "first_record_ms": ms(self.first),
            "elapsed_ms": ms(self.last).unwrap_or(0.0),
        })
    }
}

/// lazykafka's consumer, configured as in the throughput cases, with a
/// group when `LKB_GROUP` is set; `poll(100 ms)` in a loop inside one
/// `block_on`.
fn lazykafka_consumer(life: &Life, lines: &mut Lines) {
    use lazykafka::{Consumer, ConsumerConfig, TopicPartition};
    let mut config = ConsumerConfig::builder()
        .set_all([
            ("bootstrap.servers", life.bootstrap.as_str()),
            ("client.id", "bench-lazykafka"),
            ("enable.auto.commit", "false"),
            ("auto.offset.reset", "earliest"),
            ("fetch.min.bytes", FETCH_MIN_BYTES),
            ("fetch.max.wait.ms", FETCH_MAX_WAIT_MS),
            ("fetch.max.bytes", FETCH_MAX_BYTES),
            ("max.partition.fetch.bytes", MAX_PARTITION_FETCH_BYTES),
            ("check.crcs", CHECK_CRCS),
        ])
        .expect("lazykafka config");
    if !life.group.is_empty() {
        config = config.set("group.id", &life.group).expect("group.id");
    }
    for (k, v) in &life.properties {
        config = config.set(k, v).expect("LKB_PROPERTIES");
    }
    let consumer = Consumer::new(config.build().expect("lazykafka config")).expect("consumer");
    if life.group.is_empty() {
        consumer
            .assign((0..life.partitions).map(|p| TopicPartition::new(life.topic.as_str(), p)))
            .expect("assign");
    } else {
        consumer
            .subscribe([life.topic.as_str()])
            .expect("subscribe");
    }
    event("subscribed", json!({}));
    lines.wait();
    let runtime = Runtime::new();
    let start = Instant::now();
    let count = runtime.block_on(async {
        let mut c = Count::default();
        while c.records < life.records && start.elapsed() < CHILD_TIMEOUT {
            if let Ok(batch) = consumer.poll(Duration::from_millis(100)).await {
                for r in &batch {
                    c.record(r.value().map_or(0, <[u8]>::len));
                }
            }
        }
        c
    });
    event("consumed", count.fields(start, life.records));
    runtime.block_on(async {
        while !lines.ready() {
            let _ = consumer.poll(Duration::from_millis(100)).await;
        }
        let _ = consumer.close().await;
    });
    drop(consumer);
    event("closed", json!({}));
    lines.wait();
}

/// librdkafka's `BaseConsumer`, configured as in the throughput cases
/// (`group.id` `bench-librdkafka` without `LKB_GROUP`: it needs one for
/// `assign`); `poll(100 ms)` in a loop, one record per call; closed by
/// dropping it (`rd_kafka_consumer_close`, then `rd_kafka_destroy`).
fn librdkafka_consumer(life: &Life, lines: &mut Lines) {
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    use rdkafka::message::Message as _;
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &life.bootstrap)
        .set("client.id", "bench-librdkafka")
        .set(
            "group.id",
            if life.group.is_empty() {
                "bench-librdkafka"
            } else {
                &life.group
            },
        )
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.min.bytes", FETCH_MIN_BYTES)
        .set("fetch.wait.max.ms", FETCH_MAX_WAIT_MS)
        .set("fetch.max.bytes", FETCH_MAX_BYTES)
        .set("max.partition.fetch.bytes", MAX_PARTITION_FETCH_BYTES)
        .set("check.crcs", CHECK_CRCS)
        .set("log_level", "0");
    for (k, v) in &life.properties {
        config.set(k, v);
    }
    let consumer: BaseConsumer = config.create().expect("librdkafka consumer");
    if life.group.is_empty() {
        let mut tpl = rdkafka::TopicPartitionList::new();
        for p in 0..life.partitions {
            tpl.add_partition_offset(&life.topic, p, rdkafka::Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&tpl).expect("assign");
    } else {
        consumer
            .subscribe(&[life.topic.as_str()])
            .expect("subscribe");
    }
    event("subscribed", json!({}));
    lines.wait();
    let start = Instant::now();
    let mut c = Count::default();
    while c.records < life.records && start.elapsed() < CHILD_TIMEOUT {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            c.record(m.payload().map_or(0, <[u8]>::len));
        }
    }
    event("consumed", c.fields(start, life.records));
    while !lines.ready() {
        let _ = consumer.poll(Duration::from_millis(100));
    }
    drop(consumer);
    event("closed", json!({}));
    lines.wait();
}

/// The `sent` event's fields: deliveries, failures, and the times of the
/// first and last delivery from `start`.
fn sent_fields(
    start: Instant,
    delivered: usize,
    failed: usize,
    value_len: usize,
    first: Option<Instant>,
    last: Option<Instant>,
) -> Value {
    let ms = |t: Option<Instant>| t.map(|t| t.duration_since(start).as_secs_f64() * 1e3);
    json!({
        "records": delivered,
        "failed": failed,
        "bytes": delivered * value_len,
        "first_delivery_ms": ms(first),
        "elapsed_ms": ms(last),
    })
}

/// The producer's value length (`LKB_VALUE_LEN`, default 100).
fn value_len() -> usize {
    std::env::var("LKB_VALUE_LEN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// lazykafka's `Producer` with the producer cases' settings; every
/// `send` awaited, the deliveries awaited in order after the last. The
/// runtime runs while it waits for the next line.
fn lazykafka_producer(life: &Life, lines: &mut Lines) {
    use lazykafka::{Producer, ProducerConfig, ProducerRecord};
    let mut config = ProducerConfig::builder()
        .set_all([
            ("bootstrap.servers", life.bootstrap.as_str()),
            ("client.id", "bench-lazykafka"),
            ("acks", PRODUCE_ACKS),
            ("enable.idempotence", PRODUCE_IDEMPOTENCE),
            ("linger.ms", PRODUCE_LINGER_MS),
            ("batch.size", PRODUCE_BATCH_SIZE),
            (
                "max.in.flight.requests.per.connection",
                PRODUCE_MAX_IN_FLIGHT,
            ),
        ])
        .expect("lazykafka producer config");
    for (k, v) in &life.properties {
        config = config.set(k, v).expect("LKB_PROPERTIES");
    }
    let producer = Producer::new(config.build().expect("producer config")).expect("producer");
    let runtime = Runtime::new();
    event("created", json!({}));
    runtime.block_on(lines.next());
    let len = value_len();
    let pool: Vec<bytes::Bytes> = values(len).into_iter().map(Into::into).collect();
    let start = Instant::now();
    let (mut delivered, mut failed, mut first, mut last) = (0, 0, None, None);
    runtime.block_on(async {
        let mut pending = Vec::with_capacity(life.records);
        for i in 0..life.records {
            let record = ProducerRecord::new(life.topic.as_str())
                .value(pool[i % pool.len()].clone())
                .partition((i % life.partitions as usize) as i32);
            match producer.send(record).await {
                Ok(d) => pending.push(d),
                Err(_) => failed += 1,
            }
        }
        for d in pending {
            if d.await.is_ok() {
                delivered += 1;
                let now = Instant::now();
                first.get_or_insert(now);
                last = Some(now);
            } else {
                failed += 1;
            }
        }
    });
    event(
        "sent",
        sent_fields(start, delivered, failed, len, first, last),
    );
    runtime.block_on(async {
        lines.next().await;
        let _ = producer.close_timeout(Duration::from_secs(30)).await;
    });
    drop(producer);
    event("closed", json!({}));
    lines.wait();
}

/// librdkafka's `BaseProducer` with the producer cases' settings:
/// `send` and `poll(0)` for every record, then `flush`; closed by
/// dropping it.
fn librdkafka_producer(life: &Life, lines: &mut Lines) {
    use rdkafka::config::ClientConfig;
    use rdkafka::error::{KafkaError, RDKafkaErrorCode};
    use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer as _};
    use std::sync::Mutex;

    /// Deliveries: how many, how many failed, the first and last.
    #[derive(Default)]
    struct Reports(Mutex<(usize, usize, Option<Instant>, Option<Instant>)>);
    impl rdkafka::ClientContext for Reports {}
    impl rdkafka::producer::ProducerContext for Reports {
        type DeliveryOpaque = ();
        fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
            let now = Instant::now();
            let mut r = self.0.lock().unwrap();
            if result.is_ok() {
                r.0 += 1;
                r.2.get_or_insert(now);
                r.3 = Some(now);
            } else {
                r.1 += 1;
            }
        }
    }

    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &life.bootstrap)
        .set("client.id", "bench-librdkafka")
        .set("acks", PRODUCE_ACKS)
        .set("enable.idempotence", PRODUCE_IDEMPOTENCE)
        .set("linger.ms", PRODUCE_LINGER_MS)
        .set("batch.size", PRODUCE_BATCH_SIZE)
        .set(
            "max.in.flight.requests.per.connection",
            PRODUCE_MAX_IN_FLIGHT,
        )
        .set("queue.buffering.max.kbytes", PRODUCE_BUFFER_KBYTES)
        .set("queue.buffering.max.messages", "0")
        .set("log_level", "0");
    for (k, v) in &life.properties {
        config.set(k, v);
    }
    let producer: BaseProducer<Reports> = config
        .create_with_context(Reports::default())
        .expect("librdkafka producer");
    event("created", json!({}));
    while !lines.ready() {
        producer.poll(Duration::from_millis(20));
    }
    let len = value_len();
    let pool = values(len);
    let start = Instant::now();
    let mut refused = 0;
    for i in 0..life.records {
        let mut record: BaseRecord<'_, (), [u8]> = BaseRecord::to(&life.topic)
            .payload(&pool[i % pool.len()][..])
            .partition((i % life.partitions as usize) as i32);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    producer.poll(Duration::from_millis(100));
                    record = back;
                }
                Err(_) => {
                    refused += 1;
                    break;
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    let _ = producer.flush(Duration::from_secs(60));
    let (delivered, failed, first, last) = *producer.context().0.lock().unwrap();
    event(
        "sent",
        sent_fields(start, delivered, failed + refused, len, first, last),
    );
    while !lines.ready() {
        producer.poll(Duration::from_millis(100));
    }
    drop(producer);
    event("closed", json!({}));
    lines.wait();
}
