//! The consumer child on librdkafka: `BaseConsumer::poll(100 ms)` in a
//! loop, one record per call, and its statistics for the connection
//! attempts.

use super::Reading;
use crate::child::census::Census;
use crate::child::tally::{idle_cpu, steady, Tally};
use crate::child::{ports_of, statistics_connects, CHILD_TIMEOUT};
use crate::client_config::{
    CHECK_CRCS, FETCH_MAX_BYTES, FETCH_MAX_WAIT_MS, FETCH_MIN_BYTES, MAX_PARTITION_FETCH_BYTES,
};
use crate::measure::mono_us;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Collects librdkafka's statistics: the sum of every broker's
/// `connects`, and how many statistics came.
struct StatsContext {
    connects: Arc<Mutex<Option<i64>>>,
    generation: Arc<AtomicU64>,
}

impl rdkafka::ClientContext for StatsContext {
    fn stats_raw(&self, statistics: &[u8]) {
        if let Some(sum) = statistics_connects(statistics) {
            *self.connects.lock().unwrap() = sum;
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl rdkafka::consumer::ConsumerContext for StatsContext {}

/// Reads `job`'s records, then polls through the windows; adds the
/// connection attempts from the statistics to `extra`.
pub(crate) fn consume(
    job: &Reading,
    census: &Census,
    extra: &mut serde_json::Map<String, Value>,
) -> Tally {
    let connects = Arc::new(Mutex::new(None));
    let generation = Arc::new(AtomicU64::new(0));
    let context = StatsContext {
        connects: connects.clone(),
        generation: generation.clone(),
    };
    // librdkafka starts its threads and its first connection when the
    // client is created (lazykafka: at the first poll), so the clock
    // starts before that.
    let mut t = Tally::default();
    let deadline = Instant::now() + CHILD_TIMEOUT;
    t.first_poll_us = mono_us();
    let consumer = create(&job.bootstrap, context);
    let group = std::env::var("LKB_GROUP").unwrap_or_default();
    if group.is_empty() {
        let mut tpl = TopicPartitionList::new();
        for p in 0..job.partitions {
            tpl.add_partition_offset(&job.topic, p, Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&tpl).expect("assign");
    } else {
        consumer
            .subscribe(&[job.topic.as_str()])
            .expect("subscribe");
    }
    read_all(&consumer, &mut t, job.records, deadline);
    census.snapshot(&ports_of(&job.bootstrap), &mut t);
    if !t.timed_out {
        windows(&consumer, census, &mut t, extra);
    }
    // The next statistics, for the connection attempts up to now.
    let gen = generation.load(Ordering::SeqCst);
    let wait = Instant::now() + Duration::from_secs(3);
    while generation.load(Ordering::SeqCst) == gen && Instant::now() < wait {
        let _ = consumer.poll(Duration::from_millis(50));
    }
    extra.insert("connects".into(), json!(*connects.lock().unwrap()));
    t
}

/// The consumer, configured as lazykafka's is (with TLS when `LKB_CA`
/// is set), statistics every second.
fn create(bootstrap: &str, context: StatsContext) -> BaseConsumer<StatsContext> {
    let mut config = ClientConfig::new();
    let ca = std::env::var("LKB_CA").unwrap_or_default();
    if !ca.is_empty() {
        config
            .set("security.protocol", "SSL")
            .set("ssl.ca.location", &ca);
    }
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "bench-librdkafka")
        // librdkafka's consumer needs a group for assign(); it looks up
        // the coordinator even without subscribe, but commits nothing.
        .set(
            "group.id",
            std::env::var("LKB_GROUP")
                .ok()
                .filter(|g| !g.is_empty())
                .unwrap_or_else(|| "bench-librdkafka".into()),
        )
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.min.bytes", FETCH_MIN_BYTES)
        .set("fetch.wait.max.ms", FETCH_MAX_WAIT_MS)
        .set("fetch.max.bytes", FETCH_MAX_BYTES)
        .set("max.partition.fetch.bytes", MAX_PARTITION_FETCH_BYTES)
        .set("check.crcs", CHECK_CRCS)
        .set("statistics.interval.ms", "1000")
        .set("log_level", "0")
        .create_with_context(context)
        .expect("librdkafka consumer")
}

/// Polls until `records` records came (or `deadline` passed).
fn read_all(
    consumer: &BaseConsumer<StatsContext>,
    t: &mut Tally,
    records: usize,
    deadline: Instant,
) {
    while t.records < records {
        if Instant::now() > deadline {
            t.timed_out = true;
            break;
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                t.record(m.payload().map_or(0, <[u8]>::len));
                t.last_record_us = mono_us();
            }
            Some(Err(_)) => t.errors += 1,
            None => {}
        }
    }
}

/// The steady window (when asked for), then the idle window.
fn windows(
    consumer: &BaseConsumer<StatsContext>,
    census: &Census,
    t: &mut Tally,
    extra: &mut serde_json::Map<String, Value>,
) {
    steady(
        census,
        |span| {
            let (t0, mut got) = (Instant::now(), 0);
            while t0.elapsed() < span {
                got += usize::from(matches!(
                    consumer.poll(Duration::from_millis(100)),
                    Some(Ok(_))
                ));
            }
            got
        },
        extra,
    );
    idle_cpu(census, t, |span| {
        let t0 = Instant::now();
        while t0.elapsed() < span {
            let _ = consumer.poll(Duration::from_millis(100));
        }
    });
}
