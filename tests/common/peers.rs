//! librdkafka as the reference producer and as a consumer sharing a group
//! with lazykafka, plus the consumer settings and loops the consumer tests
//! share.

use super::polling::{poll_until, records_through_faults, Polled, Polling};
use lazykafka::config::ConsumerConfigBuilder;
use lazykafka::{Consumer, ConsumerConfig, OffsetReset};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a test waits for a condition. librdkafka's mock paces group
/// rebalances with a timer of several seconds each (it waits most of the
/// session timeout for members to rejoin), and a test crosses several.
pub const WAIT: Duration = Duration::from_secs(60);

/// Produces `count` records `key-i` / `value-i` to `topic`, spread over
/// `partitions` partitions (i % partitions), with librdkafka.
pub fn produce(bootstrap: &str, topic: &str, partitions: i32, count: usize, compression: &str) {
    produce_range(bootstrap, topic, partitions, 0..count, compression);
}

/// As [`produce`], for records `key-i` / `value-i` with `i` in `range`.
pub fn produce_range(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    range: std::ops::Range<usize>,
    compression: &str,
) {
    produce_lingering(bootstrap, topic, partitions, range, compression, "5");
}

/// As [`produce_range`], with each partition's records in one batch: the
/// producer lingers a second, far longer than queueing the records takes,
/// so a Fetch answer brings all of a partition's new records or none.
///
/// The linger is not longer because librdkafka's `flush` sets it aside
/// only for brokers already connected when it is called (rd_kafka_flush
/// wakes broker threads in state UP once); one that connects later keeps
/// lingering, and with a linger of a minute the flush took up to 30 s.
pub fn produce_range_in_one_batch(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    range: std::ops::Range<usize>,
) {
    produce_lingering(bootstrap, topic, partitions, range, "none", "1000");
}

fn produce_lingering(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    range: std::ops::Range<usize>,
    compression: &str,
    linger_ms: &str,
) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("compression.codec", compression)
        .set("linger.ms", linger_ms)
        .create()
        .expect("librdkafka producer");
    for i in range {
        let key = format!("key-{i}");
        let value = format!("value-{i}");
        let record = BaseRecord::to(topic)
            .key(&key)
            .payload(&value)
            .partition(i as i32 % partitions);
        send(&producer, record);
    }
    producer.flush(WAIT).expect("flush");
}

/// Queues `record`, serving the producer's queue while it is full; any
/// other refusal fails the caller.
pub fn send<K, P>(producer: &BaseProducer, mut record: BaseRecord<'_, K, P>)
where
    K: rdkafka::message::ToBytes + ?Sized,
    P: rdkafka::message::ToBytes + ?Sized,
{
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((e, back)) => {
                assert!(
                    matches!(
                        e.rdkafka_error_code(),
                        Some(rdkafka::types::RDKafkaErrorCode::QueueFull)
                    ),
                    "produce: {e}"
                );
                producer.poll(Duration::from_millis(5));
                record = back;
            }
        }
    }
}

/// Test settings: earliest, no auto-commit, short session and waits.
pub fn config(bootstrap: &str, group: Option<&str>) -> ConsumerConfigBuilder {
    let mut b = ConsumerConfig::builder()
        .bootstrap_servers(bootstrap)
        .auto_offset_reset(OffsetReset::Earliest)
        .session_timeout(Duration::from_secs(6))
        .heartbeat_interval(Duration::from_millis(500))
        .fetch_max_wait(Duration::from_millis(100))
        .enable_auto_commit(false);
    if let Some(g) = group {
        b = b.group_id(g);
    }
    b
}

/// One poll: records, or none after an error the consumer goes on after by
/// itself (a broker unreachable, a connection lost: the scenarios that
/// close connections meet them); any other error fails the test.
pub async fn poll_through_faults(
    consumer: &mut Consumer,
    timeout: Duration,
) -> Vec<lazykafka::ConsumerRecord> {
    records_through_faults(consumer.poll(timeout).await)
}

/// One commit: an error the consumer goes on after by itself (a group
/// rebalancing, its coordinator moving) is printed, as the README's loop
/// does; any other error fails the test.
pub async fn commit_through_faults(consumer: &Consumer) {
    match consumer.commit().await {
        Ok(()) => {}
        Err(e) if e.is_retriable() => eprintln!("commit: {e}"),
        Err(e) => panic!("commit: {e}"),
    }
}

/// Polls until `count` records arrived (or [`WAIT`] passed), returning
/// (partition, offset, value) of each.
pub async fn consume(consumer: &mut Consumer, count: usize) -> Vec<(i32, i64, String)> {
    let mut out = Vec::new();
    let polling = Polling::every(200);
    poll_until(consumer, &mut out, polling, keep_values, |_, out| {
        out.len() >= count
    })
    .await;
    out
}

/// A [`poll_until`](super::polling::poll_until) `take`: (partition,
/// offset, value) of every record, through faults.
pub fn keep_values(seen: &mut Vec<(i32, i64, String)>, polled: Polled) {
    for r in records_through_faults(polled) {
        let value = String::from_utf8_lossy(r.value().unwrap_or_default()).into_owned();
        seen.push((r.partition(), r.offset(), value));
    }
}

pub fn values(records: &[(i32, i64, String)]) -> BTreeSet<String> {
    records.iter().map(|(_, _, v)| v.clone()).collect()
}

pub fn expected(count: usize) -> BTreeSet<String> {
    (0..count).map(|i| format!("value-{i}")).collect()
}

/// A librdkafka consumer in its own thread, collecting (partition, offset)
/// of what it reads and committing after each record (synchronously).
pub struct RdConsumer {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<(i32, i64)>>>,
    assignment: Arc<Mutex<BTreeSet<i32>>>,
    /// The same with topic names, for subscriptions to several topics
    /// (a pattern: librdkafka reads a subscription starting with `^` as a
    /// regular expression).
    seen_records: Arc<Mutex<Vec<(String, i32, i64)>>>,
    topic_assignment: Arc<Mutex<BTreeSet<(String, i32)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RdConsumer {
    /// A member of `group` on `topic` with the `range` assignor.
    pub fn start(bootstrap: &str, group: &str, topic: &str) -> RdConsumer {
        Self::start_with(
            bootstrap,
            group,
            topic,
            &[("partition.assignment.strategy", "range")],
        )
    }

    /// A member of `group` on `topic` with extra librdkafka properties.
    pub fn start_with(
        bootstrap: &str,
        group: &str,
        topic: &str,
        properties: &[(&str, &str)],
    ) -> RdConsumer {
        let mut cc = ClientConfig::new();
        cc.set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "500");
        for (k, v) in properties {
            cc.set(*k, *v);
        }
        Self::run(cc, bootstrap, group, topic)
    }

    /// A member of `group` on `topic` speaking the consumer group protocol
    /// (KIP-848, `group.protocol=consumer`): librdkafka refuses the
    /// classic-only session and heartbeat settings there.
    pub fn start_kip848(
        bootstrap: &str,
        group: &str,
        topic: &str,
        properties: &[(&str, &str)],
    ) -> RdConsumer {
        let mut cc = ClientConfig::new();
        cc.set("group.protocol", "consumer");
        for (k, v) in properties {
            cc.set(*k, *v);
        }
        Self::run(cc, bootstrap, group, topic)
    }

    fn run(mut cc: ClientConfig, bootstrap: &str, group: &str, topic: &str) -> RdConsumer {
        cc.set("bootstrap.servers", bootstrap)
            .set("group.id", group)
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false");
        let consumer: BaseConsumer = cc.create().unwrap();
        consumer.subscribe(&[topic]).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let assignment = Arc::new(Mutex::new(BTreeSet::new()));
        let seen_records = Arc::new(Mutex::new(Vec::new()));
        let topic_assignment = Arc::new(Mutex::new(BTreeSet::new()));
        let thread = {
            let (stop, seen, assignment) = (stop.clone(), seen.clone(), assignment.clone());
            let (seen_records, topic_assignment) = (seen_records.clone(), topic_assignment.clone());
            std::thread::spawn(move || {
                use rdkafka::message::Message as _;
                while !stop.load(Ordering::SeqCst) {
                    if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                        seen.lock().unwrap().push((m.partition(), m.offset()));
                        seen_records.lock().unwrap().push((
                            m.topic().to_owned(),
                            m.partition(),
                            m.offset(),
                        ));
                        // A commit refused in a rebalance shows up as a
                        // record read twice, which the tests count.
                        if let Err(e) =
                            consumer.commit_message(&m, rdkafka::consumer::CommitMode::Sync)
                        {
                            eprintln!("librdkafka commit of {}@{}: {e}", m.partition(), m.offset());
                        }
                    }
                    let now: BTreeSet<i32> = consumer
                        .assignment()
                        .map(|a| a.elements().iter().map(|e| e.partition()).collect())
                        .unwrap_or_default();
                    *assignment.lock().unwrap() = now;
                    let by_topic: BTreeSet<(String, i32)> = consumer
                        .assignment()
                        .map(|a| {
                            a.elements()
                                .iter()
                                .map(|e| (e.topic().to_owned(), e.partition()))
                                .collect()
                        })
                        .unwrap_or_default();
                    *topic_assignment.lock().unwrap() = by_topic;
                }
                // Leaves the group.
                drop(consumer);
            })
        };
        RdConsumer {
            stop,
            seen,
            assignment,
            seen_records,
            topic_assignment,
            thread: Some(thread),
        }
    }

    /// How many partitions librdkafka holds now.
    pub fn assigned(&self) -> usize {
        self.assignment.lock().unwrap().len()
    }

    /// The partitions librdkafka holds now.
    pub fn assignment(&self) -> BTreeSet<i32> {
        self.assignment.lock().unwrap().clone()
    }

    /// (partition, offset) of every record read so far.
    pub fn seen(&self) -> Vec<(i32, i64)> {
        self.seen.lock().unwrap().clone()
    }

    /// (topic, partition) of every partition librdkafka holds now.
    pub fn topic_assignment(&self) -> BTreeSet<(String, i32)> {
        self.topic_assignment.lock().unwrap().clone()
    }

    /// (topic, partition, offset) of every record read so far.
    pub fn seen_records(&self) -> Vec<(String, i32, i64)> {
        self.seen_records.lock().unwrap().clone()
    }

    /// Stops polling and closes the consumer (which leaves the group).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let joined = t.join();
            assert!(
                joined.is_ok() || std::thread::panicking(),
                "the librdkafka consumer thread panicked"
            );
        }
    }
}

impl Drop for RdConsumer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What librdkafka reads as the group's committed offsets of `partitions`
/// of `topic` (`None` where nothing is committed).
pub fn rd_committed(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> Vec<Option<i64>> {
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in partitions {
        tpl.add_partition(topic, *p);
    }
    let committed = reader.committed_offsets(tpl, WAIT).unwrap();
    partitions
        .iter()
        .map(|p| {
            match committed
                .find_partition(topic, *p)
                .expect("asked for")
                .offset()
            {
                rdkafka::Offset::Offset(o) => Some(o),
                _ => None,
            }
        })
        .collect()
}

/// A `log` logger that keeps every record at info level and above, for
/// tests that check what the consumer says.
pub mod logs {
    use std::sync::{Mutex, OnceLock};

    static LINES: OnceLock<Mutex<Vec<(log::Level, String)>>> = OnceLock::new();

    struct Capture;

    /// `LAZYKAFKA_TEST_LOG=debug` also prints every record to stderr.
    fn echo() -> bool {
        std::env::var("LAZYKAFKA_TEST_LOG").is_ok_and(|v| v == "debug")
    }

    impl log::Log for Capture {
        fn enabled(&self, m: &log::Metadata) -> bool {
            let level = if echo() {
                log::Level::Debug
            } else {
                log::Level::Info
            };
            m.level() <= level && m.target().starts_with("lazykafka")
        }
        fn log(&self, r: &log::Record) {
            if !self.enabled(r.metadata()) {
                return;
            }
            if echo() {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                eprintln!("{:?} {} {}: {}", t, r.level(), r.target(), r.args());
            }
            if r.level() <= log::Level::Info {
                lines()
                    .lock()
                    .unwrap()
                    .push((r.level(), r.args().to_string()));
            }
        }
        fn flush(&self) {}
    }

    fn lines() -> &'static Mutex<Vec<(log::Level, String)>> {
        LINES.get_or_init(|| Mutex::new(Vec::new()))
    }

    /// Installs the logger (once per test binary).
    pub fn capture() {
        static CAPTURE: Capture = Capture;
        if log::set_logger(&CAPTURE).is_ok() {
            log::set_max_level(if echo() {
                log::LevelFilter::Debug
            } else {
                log::LevelFilter::Info
            });
        }
    }

    /// The lines logged so far at `level` that contain `needle`.
    pub fn find(level: log::Level, needle: &str) -> Vec<String> {
        lines()
            .lock()
            .unwrap()
            .iter()
            .filter(|(l, s)| *l == level && s.contains(needle))
            .map(|(_, s)| s.clone())
            .collect()
    }
}
