//! The producer child on librdkafka: `BaseProducer::send` for every
//! record with `poll` serving its delivery reports, counted by the
//! client context ([`Reports`]).

use super::Work;
use crate::child::census::Census;
use crate::child::tally::Tally;
use crate::child::{ports_of, statistics_connects, CHILD_TIMEOUT};
use crate::client_config::{
    PRODUCE_ACKS, PRODUCE_BATCH_SIZE, PRODUCE_BUFFER_KBYTES, PRODUCE_IDEMPOTENCE,
    PRODUCE_LINGER_MS, PRODUCE_MAX_IN_FLIGHT,
};
use crate::measure::mono_us;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Counts librdkafka's delivery reports (served by `poll` on the
/// calling thread) and keeps its statistics' `connects`.
struct Reports {
    value_len: usize,
    delivered: AtomicU64,
    failed: AtomicU64,
    first_us: AtomicI64,
    last_us: AtomicI64,
    first_error: Mutex<Option<String>>,
    connects: Mutex<Option<i64>>,
    generation: AtomicU64,
}

impl rdkafka::ClientContext for Reports {
    fn stats_raw(&self, statistics: &[u8]) {
        if let Some(sum) = statistics_connects(statistics) {
            *self.connects.lock().unwrap() = sum;
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl rdkafka::producer::ProducerContext for Reports {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        let now = mono_us();
        match result {
            Ok(_) => {
                if self.delivered.fetch_add(1, Ordering::Relaxed) == 0 {
                    self.first_us.store(now, Ordering::Relaxed);
                }
                self.last_us.store(now, Ordering::Relaxed);
            }
            Err((e, _)) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                self.note_error(e);
            }
        }
    }
}

impl Reports {
    /// Records delivered or failed so far.
    fn settled(&self) -> usize {
        (self.delivered.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed)) as usize
    }

    /// Keeps `e` when it is the first error.
    fn note_error(&self, e: &KafkaError) {
        self.first_error
            .lock()
            .unwrap()
            .get_or_insert_with(|| e.to_string());
    }
}

/// librdkafka: `BaseProducer::send` for every record, `poll(0)`
/// after each (its delivery reports are served by `poll`), on
/// `QueueFull` `poll(100 ms)` and the same record again; then
/// `poll(100 ms)` until every report came. The clock starts before
/// the producer is created (which starts its threads and connects).
pub(crate) fn produce(
    bootstrap: &str,
    w: &Work,
    census: &Census,
    extra: &mut serde_json::Map<String, Value>,
) -> Tally {
    let mut t = Tally::default();
    let deadline = Instant::now() + CHILD_TIMEOUT;
    t.first_poll_us = mono_us();
    let producer = create(bootstrap, w);
    let refused = send_all(&producer, w, &mut t, deadline);
    let ctx = producer.context();
    let sent = w.records - refused as usize;
    while ctx.settled() < sent && !t.timed_out {
        if Instant::now() > deadline {
            t.timed_out = true;
            break;
        }
        producer.poll(Duration::from_millis(100));
    }
    let delivered = ctx.delivered.load(Ordering::Relaxed) as usize;
    t.records = delivered;
    t.bytes = (delivered * ctx.value_len) as u64;
    t.errors = refused + ctx.failed.load(Ordering::Relaxed);
    t.first_record_us = (delivered > 0).then(|| ctx.first_us.load(Ordering::Relaxed));
    t.last_record_us = ctx.last_us.load(Ordering::Relaxed);
    census.snapshot(&ports_of(bootstrap), &mut t);
    // The next statistics, for the connection attempts up to now.
    let generation = ctx.generation.load(Ordering::SeqCst);
    let wait = Instant::now() + Duration::from_secs(3);
    while ctx.generation.load(Ordering::SeqCst) == generation && Instant::now() < wait {
        producer.poll(Duration::from_millis(50));
    }
    extra.insert("connects".into(), json!(*ctx.connects.lock().unwrap()));
    extra.insert(
        "first_error".into(),
        json!(*ctx.first_error.lock().unwrap()),
    );
    t
}

/// The producer, with the settings both producers get, librdkafka's
/// own for `buffer.memory`, no count limit, murmur2 partitioning, and
/// statistics every second.
fn create(bootstrap: &str, w: &Work) -> BaseProducer<Reports> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "bench-librdkafka")
        .set("acks", PRODUCE_ACKS)
        .set("enable.idempotence", PRODUCE_IDEMPOTENCE)
        .set("linger.ms", PRODUCE_LINGER_MS)
        .set("batch.size", PRODUCE_BATCH_SIZE)
        .set(
            "max.in.flight.requests.per.connection",
            PRODUCE_MAX_IN_FLIGHT,
        )
        .set("compression.codec", &w.compression)
        .set("queue.buffering.max.kbytes", PRODUCE_BUFFER_KBYTES)
        .set("queue.buffering.max.messages", "0")
        .set("partitioner", "murmur2_random")
        .set("statistics.interval.ms", "1000")
        .set("log_level", "0")
        .create_with_context(Reports {
            value_len: w.value_len,
            delivered: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            first_us: Default::default(),
            last_us: Default::default(),
            first_error: Mutex::new(None),
            connects: Mutex::new(None),
            generation: AtomicU64::new(0),
        })
        .expect("librdkafka producer")
}

/// Sends every record of `w` (on `QueueFull`, after `poll(100 ms)`, again,
/// until `deadline`), `poll(0)` after each; returns how many were
/// refused.
fn send_all(producer: &BaseProducer<Reports>, w: &Work, t: &mut Tally, deadline: Instant) -> u64 {
    let mut refused = 0u64;
    'records: for i in 0..w.records {
        let mut record: BaseRecord<'_, [u8], [u8]> =
            BaseRecord::to(&w.topic).payload(&w.value(i)[..]);
        record = match w.key(i) {
            Some(key) => record.key(&key[..]),
            None => record.partition(w.partition(i)),
        };
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    if Instant::now() > deadline {
                        t.timed_out = true;
                        break 'records;
                    }
                    producer.poll(Duration::from_millis(100));
                    record = back;
                }
                Err((e, _)) => {
                    refused += 1;
                    producer.context().note_error(&e);
                    break;
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    refused
}
