//! What a rebalance costs, for lazykafka beside librdkafka and the Java
//! client, in one run, the clients alternating (A B C, A B C, ...).
//!
//! ```sh
//! cargo bench --bench rebalance                              # librdkafka's mock only
//! eval "$(scripts/kafka.sh env)" && cargo bench --bench rebalance  # and Apache Kafka
//! LAZYKAFKA_BENCH_ROUNDS=3 cargo bench --bench rebalance
//! ```
//!
//! Two scenarios, each with every member of the group the same client, on a
//! 6-partition topic that a lazykafka producer keeps writing (a record to
//! each partition every 20 ms, 300 records a second), every member running
//! the README's loop (poll, automatic commits, `auto.offset.reset=earliest`)
//! with its client's defaults but the classic session (6 s, heartbeats
//! every 500 ms, for every client; KIP-848's session is the broker's):
//!
//! - **split**: one member holds the six partitions and delivers; a second
//!   one starts. Reported: the time from the second member's start until
//!   the two hold three partitions each (and keep them 3 s), the JoinGroups
//!   per member over the whole run (the first join included), and the
//!   records delivered more than once.
//! - **churn**: three members start one after the other; then one leaves
//!   (closes) and a new one starts, twice. After each change the group is
//!   waited on until its members hold disjoint, balanced shares of the six
//!   partitions for 2 s. Reported: the total time those waits took, the
//!   JoinGroups, the records delivered more than once, and the records not
//!   delivered within 60 s of the producer stopping (`not_delivered`).
//!
//! Where:
//!
//! - librdkafka's mock cluster (the one `rdkafka-sys` bundles, 3 brokers, in
//!   this process), the classic protocol, lazykafka and librdkafka. The
//!   JoinGroups are counted by the mock (its request log).
//! - Apache Kafka (the cluster of `scripts/kafka.sh`, when
//!   `LAZYKAFKA_KAFKA_BOOTSTRAP` and the rest of its variables are set),
//!   both protocols, lazykafka, librdkafka and the Java client
//!   (`tests/java/Peer.java`). JoinGroups come from the clients' own
//!   counters: lazykafka's `GroupMetrics::joins` (every request sent, the
//!   KIP-394 member-id round included), Java's `join-total` (the JoinGroups
//!   answered without error); librdkafka keeps none (`-`). The consumer
//!   protocol (KIP-848) has no JoinGroup.
//! - The rebalances each member completed (assignments received), where
//!   the client counts them: lazykafka's `GroupMetrics::rebalances`, Java's
//!   `rebalance-total`. That is the figure the two count alike.
//!
//! Environment: `LAZYKAFKA_BENCH_ROUNDS` (default 1);
//! `LAZYKAFKA_BENCH_CLIENTS`, `LAZYKAFKA_BENCH_PROTOCOLS`,
//! `LAZYKAFKA_BENCH_SCENARIOS`: comma-separated subsets (`lazykafka,
//! librdkafka,java`; `classic,consumer`; `split,churn`);
//! `LAZYKAFKA_BENCH_REBALANCE_ON` (`mock`, `kafka`, or both, comma-separated;
//! default both, Kafka when its variables are set); `LAZYKAFKA_BENCH_OUT`
//! (default `target/bench-rebalance.json`): every run, as JSON. Medians are
//! printed in a table (docs/reliability.md holds one).
//! `LAZYKAFKA_BENCH_LOG=debug` (or `info`, `warn`): lazykafka's log lines on
//! stderr, each with the time since the start and the thread it comes from.

#[path = "../tests/common/mod.rs"]
#[allow(unused_macros, unused_imports)]
mod common;

use common::kafka::{Kafka, Peer};
use common::mock::RawMock;
use lazykafka::group::GroupProtocol;
use lazykafka::{Consumer, ConsumerConfig, OffsetReset, Producer, ProducerConfig, ProducerRecord};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const PARTITIONS: i32 = 6;
/// How long a split must hold before it counts as settled.
const SPLIT_HOLD: Duration = Duration::from_secs(3);
/// How long a churn step's assignment must hold.
const CHURN_HOLD: Duration = Duration::from_secs(2);
/// The longest any settling may take before the run is reported failed.
const SETTLE_LIMIT: Duration = Duration::from_secs(120);
/// The classic session of every client here.
const SESSION_MS: &str = "6000";
const HEARTBEAT_MS: &str = "500";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Client {
    Lazykafka,
    Librdkafka,
    Java,
}

impl Client {
    fn name(self) -> &'static str {
        match self {
            Client::Lazykafka => "lazykafka",
            Client::Librdkafka => "librdkafka",
            Client::Java => "java",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Classic,
    Consumer,
}

impl Protocol {
    fn name(self) -> &'static str {
        match self {
            Protocol::Classic => "classic",
            Protocol::Consumer => "consumer",
        }
    }
}

/// Where the group runs.
enum Cluster {
    Mock(RawMock),
    Kafka(Box<Kafka>),
}

impl Cluster {
    fn name(&self) -> &'static str {
        match self {
            Cluster::Mock(_) => "librdkafka mock 2.12.1",
            Cluster::Kafka(_) => "Apache Kafka",
        }
    }

    fn bootstrap(&self) -> String {
        match self {
            Cluster::Mock(m) => m.bootstraps().join(","),
            Cluster::Kafka(k) => k.bootstrap.clone(),
        }
    }

    fn topic(&self, what: &str) -> String {
        match self {
            Cluster::Mock(m) => {
                let topic = unique(what);
                m.create_topic(&topic, PARTITIONS);
                topic
            }
            Cluster::Kafka(k) => {
                let topic = k.unique(what);
                k.create_topic(&topic, PARTITIONS, 3, &[]);
                topic
            }
        }
    }

    fn group(&self, what: &str) -> String {
        match self {
            Cluster::Mock(_) => unique(what),
            Cluster::Kafka(k) => k.unique(what),
        }
    }

    /// Starts counting requests (the mock).
    fn start_counting(&self) {
        if let Cluster::Mock(m) = self {
            m.clear_requests();
        }
    }

    /// The JoinGroups the cluster received since [`Cluster::start_counting`]
    /// (the mock's request log; Kafka keeps none the bench can read).
    fn join_groups(&self) -> Option<u64> {
        match self {
            Cluster::Mock(m) => {
                Some(m.requests().iter().filter(|(_, api)| *api == 11).count() as u64)
            }
            Cluster::Kafka(_) => None,
        }
    }
}

fn unique(what: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A lazykafka producer writing a record to each partition every 20 ms,
/// on a thread of its own, until stopped.
struct Flow {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<usize>,
}

impl Flow {
    fn start(bootstrap: &str, topic: &str) -> Flow {
        let stop = Arc::new(AtomicBool::new(false));
        let config = ProducerConfig::builder()
            .bootstrap_servers(bootstrap)
            .linger(Duration::from_millis(5))
            .build()
            .expect("producer config");
        let (topic, flag) = (topic.to_owned(), stop.clone());
        let thread = std::thread::spawn(move || {
            common::block_on(async move {
                let producer = Producer::new(config).expect("producer");
                let mut deliveries = Vec::new();
                let mut i = 0usize;
                while !flag.load(Ordering::SeqCst) {
                    for p in 0..PARTITIONS {
                        let record = ProducerRecord::new(&topic)
                            .partition(p)
                            .value(format!("v-{i}"));
                        deliveries.push(producer.send(record).await.expect("send"));
                        i += 1;
                    }
                    common::sleep(Duration::from_millis(20)).await;
                }
                for d in deliveries {
                    d.await.expect("every record is delivered");
                }
                producer
                    .close_timeout(Duration::from_secs(30))
                    .await
                    .expect("close the producer");
                i
            })
        });
        Flow { stop, thread }
    }

    /// Stops writing; the records written, each acknowledged.
    fn stop(self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the producer's thread")
    }
}

/// What a member thread shares with the bench.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    seen: Mutex<Vec<(i32, i64)>>,
    assignment: Mutex<BTreeSet<i32>>,
}

/// A member's own group counters, where its client keeps them.
#[derive(Default)]
struct JoinCounts {
    /// JoinGroups by reason (lazykafka), or Java's `join-total`.
    joins: Option<BTreeMap<String, u64>>,
    /// Rebalances completed: lazykafka's `GroupMetrics::rebalances`,
    /// Java's `rebalance-total`.
    rebalances: Option<u64>,
}

/// One member of the group.
enum Member {
    /// lazykafka or librdkafka on a thread of ours; the thread returns the
    /// member's JoinGroups by reason when it counts them.
    Thread(Arc<Shared>, JoinHandle<JoinCounts>),
    Java(Peer),
}

impl Member {
    fn start(
        cluster: &Cluster,
        client: Client,
        protocol: Protocol,
        topic: &str,
        group: &str,
        name: &str,
    ) -> Member {
        let bootstrap = cluster.bootstrap();
        let shared = Arc::new(Shared::default());
        match client {
            Client::Lazykafka => {
                let mut config = ConsumerConfig::builder()
                    .bootstrap_servers(&bootstrap)
                    .group_id(group)
                    .client_id(name)
                    .auto_offset_reset(OffsetReset::Earliest);
                config = match protocol {
                    Protocol::Classic => config
                        .set("session.timeout.ms", SESSION_MS)
                        .and_then(|c| c.set("heartbeat.interval.ms", HEARTBEAT_MS))
                        .expect("the session's properties"),
                    Protocol::Consumer => config.group_protocol(GroupProtocol::Consumer),
                };
                let config = config.build().expect("consumer config");
                let (topic, s) = (topic.to_owned(), shared.clone());
                let named = std::thread::Builder::new().name(name.to_owned());
                let thread = named.spawn(move || {
                    common::block_on(async move {
                        let consumer = Consumer::new(config).expect("consumer");
                        consumer.subscribe([topic.as_str()]).expect("subscribe");
                        // The README's loop.
                        while !s.stop.load(Ordering::SeqCst) {
                            match consumer.poll(Duration::from_millis(100)).await {
                                Ok(records) => {
                                    let mut seen = s.seen.lock().unwrap();
                                    seen.extend(
                                        records.iter().map(|r| (r.partition(), r.offset())),
                                    );
                                }
                                Err(e) if e.is_retriable() => eprintln!("    lazykafka: {e}"),
                                Err(e) => panic!("lazykafka: a non-retriable error: {e}"),
                            }
                            *s.assignment.lock().unwrap() = consumer
                                .assignment()
                                .iter()
                                .map(|tp| tp.partition)
                                .collect();
                        }
                        let group = consumer.metrics().group;
                        let _ = consumer.close().await;
                        JoinCounts {
                            rebalances: group.as_ref().map(|g| g.rebalances),
                            joins: group
                                .map(|g| g.joins)
                                .filter(|_| protocol == Protocol::Classic),
                        }
                    })
                });
                Member::Thread(shared, thread.expect("a member's thread"))
            }
            Client::Librdkafka => {
                let mut cc = ClientConfig::new();
                cc.set("bootstrap.servers", &bootstrap)
                    .set("group.id", group)
                    .set("client.id", name)
                    .set("auto.offset.reset", "earliest");
                match protocol {
                    Protocol::Classic => cc
                        .set("session.timeout.ms", SESSION_MS)
                        .set("heartbeat.interval.ms", HEARTBEAT_MS),
                    Protocol::Consumer => cc.set("group.protocol", "consumer"),
                };
                let consumer: BaseConsumer = cc.create().expect("librdkafka consumer");
                consumer.subscribe(&[topic]).expect("subscribe");
                let s = shared.clone();
                let thread = std::thread::spawn(move || {
                    while !s.stop.load(Ordering::SeqCst) {
                        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                            s.seen.lock().unwrap().push((m.partition(), m.offset()));
                        }
                        *s.assignment.lock().unwrap() = consumer
                            .assignment()
                            .map(|a| a.elements().iter().map(|e| e.partition()).collect())
                            .unwrap_or_default();
                    }
                    drop(consumer); // closes: commits, leaves the group
                    JoinCounts::default()
                });
                Member::Thread(shared, thread)
            }
            Client::Java => {
                let Cluster::Kafka(kafka) = cluster else {
                    unreachable!("the Java client runs on Apache Kafka only");
                };
                let client_id = format!("client.id={name}");
                let mut args = vec![
                    "consume",
                    "--topic",
                    topic,
                    "--group",
                    group,
                    "--commit",
                    "auto",
                    "--timeout-ms",
                    "3600000",
                    "--property",
                    &client_id,
                ];
                let session = format!("session.timeout.ms={SESSION_MS}");
                let heartbeat = format!("heartbeat.interval.ms={HEARTBEAT_MS}");
                match protocol {
                    Protocol::Classic => {
                        args.extend(["--property", &session, "--property", &heartbeat])
                    }
                    Protocol::Consumer => args.extend(["--property", "group.protocol=consumer"]),
                }
                Member::Java(kafka.spawn_peer(&args))
            }
        }
    }

    fn assignment(&self) -> BTreeSet<i32> {
        match self {
            Member::Thread(s, _) => s.assignment.lock().unwrap().clone(),
            Member::Java(peer) => peer.assignment(),
        }
    }

    fn seen(&self) -> Vec<(i32, i64)> {
        match self {
            Member::Thread(s, _) => s.seen.lock().unwrap().clone(),
            Member::Java(peer) => peer
                .records()
                .into_iter()
                .map(|(_, p, o, _, _)| (p, o))
                .collect(),
        }
    }

    /// Closes it (it leaves the group); what it delivered, and its
    /// JoinGroups when it counts them.
    fn stop(self) -> (Vec<(i32, i64)>, JoinCounts) {
        match self {
            Member::Thread(s, thread) => {
                s.stop.store(true, Ordering::SeqCst);
                let joins = thread.join().expect("a member's thread");
                let seen = s.seen.lock().unwrap().clone();
                (seen, joins)
            }
            Member::Java(mut peer) => {
                assert!(
                    peer.stop(Duration::from_secs(60)),
                    "the Java member did not close: {}",
                    peer.report()
                );
                let seen = peer
                    .records()
                    .into_iter()
                    .map(|(_, p, o, _, _)| (p, o))
                    .collect();
                let metrics = peer.events_of("group-metrics");
                let counter = |name: &str| metrics.first().and_then(|e| e[name].as_u64());
                let joins = JoinCounts {
                    joins: counter("join-total")
                        .map(|n| BTreeMap::from([("join-total".to_owned(), n)])),
                    rebalances: counter("rebalance-total"),
                };
                (seen, joins)
            }
        }
    }
}

/// Whether the members' assignments are disjoint, cover the partitions and
/// are balanced.
fn balanced(members: &[Member]) -> bool {
    let views: Vec<BTreeSet<i32>> = members.iter().map(Member::assignment).collect();
    let total: usize = views.iter().map(BTreeSet::len).sum();
    let union: BTreeSet<i32> = views.iter().flatten().copied().collect();
    let (least, most) = views
        .iter()
        .map(BTreeSet::len)
        .fold((usize::MAX, 0), |(l, m), n| (l.min(n), m.max(n)));
    total == PARTITIONS as usize && union.len() == total && most - least <= 1
}

/// Waits until the group is [`balanced`] and stays so for `hold`; the time
/// from `since` to the start of that stable stretch, or `None` after
/// [`SETTLE_LIMIT`].
fn settle(members: &[Member], since: Instant, hold: Duration) -> Option<Duration> {
    let mut stable_from: Option<Instant> = None;
    let mut views: Vec<BTreeSet<i32>> = Vec::new();
    loop {
        let now = Instant::now();
        let current: Vec<BTreeSet<i32>> = members.iter().map(Member::assignment).collect();
        if balanced(members) && current == views {
            let from = *stable_from.get_or_insert(now);
            if now - from >= hold {
                return Some(from - since);
            }
        } else if balanced(members) {
            stable_from = Some(now);
        } else {
            stable_from = None;
        }
        views = current;
        if now - since > SETTLE_LIMIT {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (at most 60 s) until the members delivered every one of the
/// `written` records; how many distinct ones they delivered.
fn drained(delivered: impl Fn() -> Vec<(i32, i64)>, written: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let distinct = delivered().into_iter().collect::<BTreeSet<_>>().len();
        if distinct >= written || Instant::now() > deadline {
            return distinct;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Counts of one scenario run.
struct Outcome {
    settle_ms: Option<f64>,
    /// The members' own counts by reason, summed (lazykafka's reasons).
    reasons: BTreeMap<String, u64>,
    joins_per_member: Option<f64>,
    rebalances_per_member: Option<f64>,
    written: usize,
    deliveries: usize,
    distinct: usize,
    /// By partition, the records not delivered: how many, and the first
    /// one's offset.
    missing: BTreeMap<i32, (usize, i64)>,
}

impl Outcome {
    fn new(
        settle: Option<Duration>,
        totals: Totals,
        members: usize,
        written: usize,
        seen: &[(i32, i64)],
    ) -> Outcome {
        let set = seen.iter().copied().collect::<BTreeSet<_>>();
        let distinct = set.len();
        // The flow writes a record to each partition in turn: each holds
        // `written / PARTITIONS` of them, from offset 0.
        let per_partition = (written / PARTITIONS as usize) as i64;
        let mut missing = BTreeMap::new();
        for p in 0..PARTITIONS {
            let absent: Vec<i64> = (0..per_partition)
                .filter(|o| !set.contains(&(p, *o)))
                .collect();
            if let Some(first) = absent.first() {
                missing.insert(p, (absent.len(), *first));
            }
        }
        Outcome {
            missing,
            settle_ms: settle.map(|d| d.as_secs_f64() * 1000.0),
            reasons: totals.reasons,
            joins_per_member: totals.joins.map(|j| j as f64 / members as f64),
            rebalances_per_member: totals.rebalances.map(|r| r as f64 / members as f64),
            written,
            deliveries: seen.len(),
            distinct,
        }
    }

    fn json(&self) -> Value {
        json!({
            "settle_ms": self.settle_ms,
            "join_reasons": self.reasons,
            "joins_per_member": self.joins_per_member,
            "rebalances_per_member": self.rebalances_per_member,
            "written": self.written,
            "deliveries": self.deliveries,
            "extra_deliveries": self.deliveries - self.distinct,
            "not_delivered": self.written.saturating_sub(self.distinct),
            "missing_by_partition": self.missing,
        })
    }
}

/// A run's group counters, summed over its members.
struct Totals {
    /// The JoinGroups: the cluster's count, else the members' own (all of
    /// them, or none).
    joins: Option<u64>,
    /// The members' JoinGroups by reason.
    reasons: BTreeMap<String, u64>,
    /// The rebalances the members completed (all of them, or none).
    rebalances: Option<u64>,
}

fn totals(cluster: &Cluster, own: &[JoinCounts]) -> Totals {
    let mut reasons = BTreeMap::new();
    for (reason, n) in own.iter().filter_map(|c| c.joins.as_ref()).flatten() {
        *reasons.entry(reason.clone()).or_default() += n;
    }
    let joins = cluster.join_groups().or_else(|| {
        own.iter()
            .map(|c| c.joins.as_ref().map(|j| j.values().sum::<u64>()))
            .sum::<Option<u64>>()
    });
    let rebalances = own.iter().map(|c| c.rebalances).sum::<Option<u64>>();
    Totals {
        joins,
        reasons,
        rebalances,
    }
}

fn split(cluster: &Cluster, client: Client, protocol: Protocol) -> Outcome {
    let topic = cluster.topic("split");
    let group = cluster.group("split");
    let flow = Flow::start(&cluster.bootstrap(), &topic);
    cluster.start_counting();
    let mut members = vec![Member::start(
        cluster, client, protocol, &topic, &group, "a",
    )];
    let start = Instant::now();
    settle(&members, start, Duration::from_millis(500)).expect("one member holds every partition");
    let b_started = Instant::now();
    members.push(Member::start(
        cluster, client, protocol, &topic, &group, "b",
    ));
    let settled = settle(&members, b_started, SPLIT_HOLD);
    let written = flow.stop();
    drained(|| members.iter().flat_map(Member::seen).collect(), written);
    let mut seen = Vec::new();
    let mut own = Vec::new();
    for m in members {
        let (s, j) = m.stop();
        seen.extend(s);
        own.push(j);
    }
    Outcome::new(settled, totals(cluster, &own), 2, written, &seen)
}

/// Adds a settling time to a total (`None`, a settling that never came,
/// makes the total `None`).
fn add(d: Option<Duration>, waited: &mut Option<Duration>) {
    *waited = waited.zip(d).map(|(a, b)| a + b);
}

fn churn(cluster: &Cluster, client: Client, protocol: Protocol) -> Outcome {
    let topic = cluster.topic("churn");
    let group = cluster.group("churn");
    let flow = Flow::start(&cluster.bootstrap(), &topic);
    cluster.start_counting();
    let mut live: Vec<Member> = Vec::new();
    let mut seen = Vec::new();
    let mut own = Vec::new();
    let mut waited = Some(Duration::ZERO);
    let mut joined = 0;
    // A new member joins, and the group settles.
    let mut join = |live: &mut Vec<Member>, waited: &mut Option<Duration>| {
        joined += 1;
        let since = Instant::now();
        let name = format!("m{joined}");
        live.push(Member::start(
            cluster, client, protocol, &topic, &group, &name,
        ));
        add(settle(live, since, CHURN_HOLD), waited);
    };
    for _ in 0..3 {
        join(&mut live, &mut waited);
    }
    for leaving in [1, 0] {
        let since = Instant::now();
        let (s, j) = live.remove(leaving).stop();
        seen.extend(s);
        own.push(j);
        add(settle(&live, since, CHURN_HOLD), &mut waited);
        join(&mut live, &mut waited);
    }
    let written = flow.stop();
    let before = seen.clone();
    drained(
        || {
            before
                .iter()
                .copied()
                .chain(live.iter().flat_map(Member::seen))
                .collect()
        },
        written,
    );
    let members = own.len() + live.len();
    for m in live {
        let (s, j) = m.stop();
        seen.extend(s);
        own.push(j);
    }
    Outcome::new(waited, totals(cluster, &own), members, written, &seen)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn cell(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// lazykafka's log lines on stderr: seconds since the start, the thread
/// name, the level, the line.
struct StderrLog {
    start: Instant,
    level: log::LevelFilter,
}

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= self.level && m.target().starts_with("lazykafka")
    }

    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            eprintln!(
                "{:9.3} {} {} {}",
                self.start.elapsed().as_secs_f64(),
                std::thread::current().name().unwrap_or("-"),
                r.level(),
                r.args()
            );
        }
    }

    fn flush(&self) {}
}

fn main() {
    if let Some(level) = std::env::var("LAZYKAFKA_BENCH_LOG")
        .ok()
        .and_then(|l| l.parse().ok())
    {
        let logger = Box::leak(Box::new(StderrLog {
            start: Instant::now(),
            level,
        }));
        log::set_logger(logger).expect("the only logger");
        log::set_max_level(level);
    }
    // `cargo bench` passes `--bench`; nothing else is taken.
    let rounds: usize = std::env::var("LAZYKAFKA_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let on = std::env::var("LAZYKAFKA_BENCH_REBALANCE_ON").unwrap_or_else(|_| "mock,kafka".into());
    let mut clusters: Vec<(Cluster, Vec<Protocol>, Vec<Client>)> = Vec::new();
    if on.split(',').any(|w| w == "mock") {
        let mock = RawMock::new(3);
        // librdkafka's mock misreads the newest JoinGroup, SyncGroup and
        // LeaveGroup versions (docs/migrating-from-rdkafka.md).
        mock.cap_group_versions();
        mock.start_tracking();
        clusters.push((
            Cluster::Mock(mock),
            vec![Protocol::Classic],
            vec![Client::Lazykafka, Client::Librdkafka],
        ));
    }
    if on.split(',').any(|w| w == "kafka") {
        if let Some(kafka) = Kafka::get("bench rebalance") {
            clusters.push((
                Cluster::Kafka(Box::new(kafka)),
                vec![Protocol::Classic, Protocol::Consumer],
                vec![Client::Lazykafka, Client::Librdkafka, Client::Java],
            ));
        }
    }
    let only = |var: &str, name: &str| {
        std::env::var(var).map_or(true, |v| v.split(',').any(|w| w == name))
    };
    let mut runs = Vec::new();
    for (cluster, protocols, clients) in &clusters {
        for &protocol in protocols
            .iter()
            .filter(|p| only("LAZYKAFKA_BENCH_PROTOCOLS", p.name()))
        {
            for round in 0..rounds {
                for &client in clients
                    .iter()
                    .filter(|c| only("LAZYKAFKA_BENCH_CLIENTS", c.name()))
                {
                    for (scenario, run) in [
                        ("split", split as fn(&Cluster, Client, Protocol) -> Outcome),
                        ("churn", churn),
                    ] {
                        if !only("LAZYKAFKA_BENCH_SCENARIOS", scenario) {
                            continue;
                        }
                        let outcome = run(cluster, client, protocol);
                        let mut r = outcome.json();
                        r["cluster"] = json!(cluster.name());
                        r["protocol"] = json!(protocol.name());
                        r["client"] = json!(client.name());
                        r["scenario"] = json!(scenario);
                        r["round"] = json!(round);
                        eprintln!("  {r}");
                        runs.push(r);
                    }
                }
            }
        }
    }
    let out = std::env::var("LAZYKAFKA_BENCH_OUT").unwrap_or_else(|_| {
        format!(
            "{}/bench-rebalance.json",
            std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into())
        )
    });
    std::fs::write(&out, serde_json::to_string_pretty(&runs).unwrap()).expect("write the results");
    print_table(&runs);
    println!("\nevery run: {out}");
}

/// One row per cluster, protocol and client: medians over the rounds.
fn print_table(runs: &[Value]) {
    println!(
        "\n| cluster | protocol | client | split settles (ms) | JoinGroups / rebalances per \
         member (split) | extra deliveries (split) | churn: time settling (ms) | JoinGroups / \
         rebalances per member (churn) | extra deliveries (churn) | not delivered |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut rows: BTreeMap<(String, String, String), Vec<&Value>> = BTreeMap::new();
    for r in runs {
        let key = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
        rows.entry((key("cluster"), key("protocol"), key("client")))
            .or_default()
            .push(r);
    }
    for ((cluster, protocol, client), rs) in rows {
        let of = |scenario: &str, field: &str| {
            median(
                rs.iter()
                    .filter(|r| r["scenario"] == scenario)
                    .filter_map(|r| r[field].as_f64())
                    .collect(),
            )
        };
        let extra = |scenario: &str| {
            let written = of(scenario, "written").unwrap_or(0.0);
            of(scenario, "extra_deliveries").map(|e| {
                format!(
                    "{e:.0} ({:.1} %)",
                    if written > 0.0 {
                        100.0 * e / written
                    } else {
                        0.0
                    }
                )
            })
        };
        let per_member = |scenario: &str| {
            format!(
                "{} / {}",
                cell(of(scenario, "joins_per_member"), 1),
                cell(of(scenario, "rebalances_per_member"), 1)
            )
        };
        let lost: f64 = rs.iter().filter_map(|r| r["not_delivered"].as_f64()).sum();
        println!(
            "| {cluster} | {protocol} | {client} | {} | {} | {} | {} | {} | {} | {lost:.0} |",
            cell(of("split", "settle_ms"), 0),
            per_member("split"),
            extra("split").unwrap_or_else(|| "-".into()),
            cell(of("churn", "settle_ms"), 0),
            per_member("churn"),
            extra("churn").unwrap_or_else(|| "-".into()),
        );
    }
}
