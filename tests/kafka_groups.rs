//! Consumer groups on Apache Kafka itself (the 3-broker KRaft cluster of
//! `scripts/kafka.sh`), with the reference clients as members of the same
//! group as ours: the Java client (`tests/java/Peer.java`, a child
//! process) and librdkafka (`RdConsumer`, in this process).
//!
//! The mocks (`tests/consumer_group.rs`, `tests/consumer_group_kip848.rs`,
//! `tests/user_path.rs`) check each group rule against a model of the
//! broker; here Kafka is the authority, and the other members are the
//! clients every Kafka user runs. Each scenario keeps a lazykafka producer
//! writing records with unique values to a 6-partition topic (one record
//! to each partition per round, between two polls of our members) while
//! members join, one leaves cleanly and one is killed with SIGKILL (its
//! partitions wait out its session, then move). After each change the
//! group is waited on until it has *settled*: every member's own view of
//! its assignment (lazykafka's `assignment()`, librdkafka's, the Java
//! member's assigned/revoked/lost callbacks) and Kafka's (the Java Admin
//! client's DescribeConsumerGroups) agree, are disjoint, cover the six
//! partitions and are balanced; then each member still there delivers
//! new records. At the end every record the producer had acknowledged was
//! delivered to some member with the value written at its offset (nothing
//! lost), and the records delivered more than once are counted, printed,
//! and held to what the semantics promise (see [`Report::check`]).
//!
//! - `classic_*`: the classic protocol with each client-side assignor
//!   (range, roundrobin, cooperative-sticky), every member configured
//!   with the same one;
//! - `kip848_*`: the consumer protocol (KIP-848) with each of Kafka's
//!   assignors (`group.remote.assignor` uniform and range);
//! - `a_static_member_restarts_without_a_rebalance`: static membership
//!   (KIP-345) under the classic protocol;
//! - `a_split_sends_only_the_joingroups_the_protocol_needs`: two of ours
//!   split a topic with no JoinGroup beyond those the classic protocol
//!   needs (`GroupMetrics::joins`, by reason) and one rebalance each;
//! - `a_commit_after_a_poll_lands_when_an_eager_rebalance_revokes_meanwhile`:
//!   the README loop's commit after a batch, when an eager rebalance comes
//!   between the batch and the commit (a bug these scenarios found);
//! - `child_processes::*` (built with both runtime features, as the test
//!   command's main run builds them): the README's program
//!   (`examples/readme.rs`) and the `group` example in a group with a
//!   Java member while members come and go.
//!
//! Every wait is on a condition with a deadline.

// Drives a `Consumer` or a `Producer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::kafka::{java_partitions, Kafka, Peer};
use common::peers::RdConsumer;
use lazykafka::group::{AssignmentStrategy, GroupProtocol, RemoteAssignor};
use lazykafka::{
    Consumer, ConsumerConfig, DeliveryFuture, OffsetReset, Producer, ProducerConfig, ProducerRecord,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const PARTITIONS: i32 = 6;
/// How long a group may take to settle after a change: a classic
/// rebalance waits for every member to rejoin, and a killed member holds
/// its partitions until its session ends (10 s, under both protocols).
/// Generous: in the test command these scenarios share two cores with
/// three brokers, the JVMs of the Java members and eight other tests (a
/// member alone once took 29 s to settle there); a healthy group settles in
/// seconds, and the deadline is only reached by one that does not.
const SETTLE: Duration = Duration::from_secs(90);
/// How long the members may take, once the producer stopped, to deliver
/// every record.
const DRAIN: Duration = Duration::from_secs(45);
/// How long a member may take to close.
const LEAVE: Duration = Duration::from_secs(30);
/// Session timeout and heartbeat of the classic members (ours, Java's,
/// librdkafka's): the broker's KIP-848 session here
/// (`group.consumer.session.timeout.ms`), so that a killed member's
/// partitions move within seconds, yet a JVM that stalls a few seconds on
/// a loaded machine keeps its membership.
const SESSION: Duration = Duration::from_secs(10);
/// The shortest round ([`Run::tick`]): a record to each partition and a
/// poll of each member at most twenty times a second. Records and commits
/// flow all along (what the scenarios need), without a round as fast as a
/// poll and a commit can go, which kept the brokers' CPUs busy for nothing
/// (about 400 records and 70 commits a second).
const TICK: Duration = Duration::from_millis(50);
const HEARTBEAT: Duration = Duration::from_millis(500);
/// Java's `max.poll.records` (its default): the most records one of its
/// polls returns, and so the most it can have printed and not committed
/// when it is killed (it commits synchronously after each poll).
const JAVA_MAX_POLL_RECORDS: usize = 500;

// --- the members -------------------------------------------------------

/// One of ours: the README's loop, one poll at a time (records kept,
/// `commit` after each non-empty batch; a retriable error said and polled
/// past, any other fails the test: on real Kafka, a routine group event
/// that reaches the application as a non-retriable error is a bug).
struct Ours {
    consumer: Consumer,
    seen: Vec<(i32, i64, String)>,
    /// The retriable errors `poll` returned, and the commits refused.
    said: Vec<String>,
}

impl Ours {
    async fn step(&mut self, name: &str) {
        let records = match self.consumer.poll(Duration::from_millis(100)).await {
            Ok(records) => records,
            Err(e) if e.is_retriable() => {
                eprintln!("{name}: poll: {e}");
                self.said.push(format!("poll: {e}"));
                return;
            }
            Err(e) => panic!("{name}: poll returned a non-retriable error: {e:?}"),
        };
        for r in &records {
            let value = String::from_utf8_lossy(r.value().unwrap_or_default()).into_owned();
            self.seen.push((r.partition(), r.offset(), value));
        }
        if !records.is_empty() {
            match self.consumer.commit().await {
                Ok(()) => {}
                Err(e) if e.is_retriable() => {
                    eprintln!("{name}: commit: {e}");
                    self.said.push(format!("commit: {e}"));
                }
                Err(e) => panic!("{name}: commit returned a non-retriable error: {e:?}"),
            }
        }
    }
}

/// A member of the group.
enum Client {
    Ours(Box<Ours>),
    Java(Peer),
    Rd(RdConsumer),
    #[cfg(all(feature = "runtime-async-std", feature = "runtime-tokio"))]
    Example(children::ExampleChild),
    /// Closing on a thread of its own (see [`Run::leave`]).
    Away,
}

/// Whether a member is still in the group, and how it went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gone {
    No,
    /// Closed: its partitions handed over at once.
    Left,
    /// SIGKILL: no commit of what it printed last, no LeaveGroup.
    Killed,
}

struct Member {
    name: String,
    client: Client,
    gone: Gone,
}

impl Member {
    /// The partitions it says it holds (`None`: it does not say).
    fn assignment(&self) -> Option<BTreeSet<i32>> {
        match &self.client {
            Client::Ours(o) => Some(
                o.consumer
                    .assignment()
                    .iter()
                    .map(|tp| tp.partition)
                    .collect(),
            ),
            Client::Java(p) => Some(p.assignment()),
            Client::Rd(r) => Some(r.assignment()),
            #[cfg(all(feature = "runtime-async-std", feature = "runtime-tokio"))]
            Client::Example(c) => c.assignment(),
            Client::Away => None,
        }
    }

    /// (partition, offset, value) of each record it delivered to its
    /// application (librdkafka's member keeps no values).
    fn delivered(&self) -> Vec<(i32, i64, Option<String>)> {
        match &self.client {
            Client::Ours(o) => o
                .seen
                .iter()
                .map(|(p, o, v)| (*p, *o, Some(v.clone())))
                .collect(),
            Client::Java(peer) => peer
                .records()
                .into_iter()
                .map(|(_, p, o, _, v)| (p, o, Some(v)))
                .collect(),
            Client::Rd(r) => r.seen().into_iter().map(|(p, o)| (p, o, None)).collect(),
            #[cfg(all(feature = "runtime-async-std", feature = "runtime-tokio"))]
            Client::Example(c) => c.delivered(),
            Client::Away => Vec::new(),
        }
    }

    /// Fails the test if it ended without being told to.
    fn check_alive(&mut self) {
        if self.gone != Gone::No {
            return;
        }
        match &mut self.client {
            Client::Java(p) => assert!(
                p.events_of("error").is_empty() && p.events_of("closed").is_empty(),
                "{} ended by itself: {}",
                self.name,
                p.report()
            ),
            #[cfg(all(feature = "runtime-async-std", feature = "runtime-tokio"))]
            Client::Example(c) => c.check_alive(&self.name),
            _ => {}
        }
    }
}

// --- a run -------------------------------------------------------------

/// A topic, a group, the producer and the members.
struct Run {
    kafka: Kafka,
    topic: String,
    group: String,
    producer: Producer,
    /// Each record sent: its value, and the answer to come.
    sent: Vec<(String, DeliveryFuture)>,
    producing: bool,
    members: Vec<Member>,
    started: Instant,
}

/// What was delivered, against what was written.
#[derive(Debug)]
struct Report {
    written: usize,
    delivered: usize,
    /// Deliveries beyond the first of a record whose deliveries include
    /// one by a member that was killed (it could not commit it).
    after_the_kill: usize,
    /// The other deliveries beyond the first, by record.
    others: BTreeMap<(i32, i64), Vec<String>>,
    /// The Java members that were told their partitions were lost (their
    /// session expired: the coordinator gave their partitions away
    /// without a revocation), with those partitions.
    lost: Vec<String>,
}

impl Report {
    fn other_duplicates(&self) -> usize {
        self.others.values().map(|who| who.len() - 1).sum()
    }

    /// The duplicates the semantics promise not to have.
    ///
    /// Every member commits synchronously after each batch it processed
    /// (ours: the README's loop; Java: `--commit sync`; librdkafka: after
    /// each record), so at any moment a live member has processed at most
    /// its last batch beyond its last commit. Then:
    ///
    /// - a member killed with SIGKILL may have printed its last batch
    ///   without committing it: its successor reads that again. Java's
    ///   batch is at most `max.poll.records` (500) records.
    /// - under eager rebalancing (classic range and roundrobin) a member
    ///   gives up its partitions inside `poll` (before it rejoins), after
    ///   committing the previous batch; Kafka accepts that commit (the
    ///   group waits in PreparingRebalance, at the same generation, until
    ///   the member rejoins). A clean hand-over duplicates nothing.
    /// - under cooperative rebalancing (classic cooperative-sticky, and
    ///   KIP-848) members keep consuming the partitions they keep through
    ///   a rebalance, and Kafka refuses a commit made while the group
    ///   completes one (REBALANCE_IN_PROGRESS under classic; under
    ///   KIP-848 a commit at an epoch the coordinator has moved past,
    ///   STALE_MEMBER_EPOCH): a partition revoked right after such a
    ///   refusal hands over a batch its next owner reads again. Those are
    ///   counted and printed, not bounded.
    /// - a live member whose session expired all the same (a JVM stalled
    ///   on a loaded machine: Java's `lost` callback says so) hands over
    ///   without a revocation, as a killed one does: then the eager bound
    ///   does not apply, and the test says so.
    fn check(&self, what: &str, eager: bool) {
        eprintln!(
            "{what}: {} records written, {} deliveries; duplicates: {} after the kill, {} \
             others {:?}; lost assignments: {:?}",
            self.written,
            self.delivered,
            self.after_the_kill,
            self.other_duplicates(),
            self.others.iter().take(20).collect::<Vec<_>>(),
            self.lost
        );
        assert!(
            self.after_the_kill <= JAVA_MAX_POLL_RECORDS,
            "{what}: {} records delivered again after the kill: more than the killed member's \
             last batch",
            self.after_the_kill
        );
        if eager && !self.lost.is_empty() {
            eprintln!("{what}: a member lost its partitions: duplicates not bounded");
        } else if eager {
            assert!(
                self.others.is_empty(),
                "{what}: records delivered twice after a clean hand-over (eager rebalances, \
                 synchronous commits): {:?}",
                self.others
            );
        }
    }
}

impl Run {
    async fn start(kafka: &Kafka, what: &str) -> Run {
        // The library's log lines (LAZYKAFKA_TEST_LOG=debug: on stderr).
        common::peers::logs::capture();
        let topic = kafka.unique(&format!("{what}-t"));
        kafka.create_topic(&topic, PARTITIONS, 3, &[]);
        let group = kafka.unique(&format!("{what}-g"));
        let producer = Producer::new(
            ProducerConfig::builder()
                .bootstrap_servers(&kafka.bootstrap)
                .linger(Duration::from_millis(5))
                .build()
                .unwrap(),
        )
        .unwrap();
        Run {
            kafka: kafka.clone(),
            topic,
            group,
            producer,
            sent: Vec::new(),
            producing: true,
            members: Vec::new(),
            started: Instant::now(),
        }
    }

    fn say(&self, what: &str) {
        eprintln!("{:>6.1} s: {what}", self.started.elapsed().as_secs_f64());
    }

    /// One round: a record to each partition (while producing), a poll of
    /// each of our members, a look at the others.
    async fn tick(&mut self) {
        let began = Instant::now();
        if self.producing {
            self.produce_round().await;
        }
        let mut polled = false;
        for m in &mut self.members {
            m.check_alive();
            if m.gone != Gone::No {
                continue;
            }
            if let Client::Ours(o) = &mut m.client {
                o.step(&m.name).await;
                polled = true;
            }
        }
        let least = if polled { TICK } else { 2 * TICK };
        let rest = least.saturating_sub(began.elapsed());
        if !rest.is_zero() {
            common::sleep(rest).await;
        }
    }

    /// A record to each partition.
    async fn produce_round(&mut self) {
        for _ in 0..PARTITIONS {
            let i = self.sent.len();
            let value = format!("v-{i}");
            let record = ProducerRecord::new(&self.topic)
                .partition(i as i32 % PARTITIONS)
                .key(format!("k-{i}"))
                .value(value.clone());
            let delivery = self
                .producer
                .send(record)
                .await
                .unwrap_or_else(|e| panic!("send {value}: {e}"));
            self.sent.push((value, delivery));
        }
    }

    /// Ticks until `cond` holds; fails the test at the deadline.
    async fn until(&mut self, what: &str, timeout: Duration, mut cond: impl FnMut(&Run) -> bool) {
        let deadline = Instant::now() + timeout;
        while !cond(self) {
            assert!(
                Instant::now() < deadline,
                "{what}: not within {timeout:?}; {}",
                self.status()
            );
            self.tick().await;
        }
    }

    /// Runs `f` on a thread of its own, ticking meanwhile (a member that
    /// closes may wait for the group, which waits for our members' polls).
    async fn off_thread<T: Send + 'static>(&mut self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let thread = std::thread::spawn(f);
        while !thread.is_finished() {
            self.tick().await;
        }
        thread
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
    }

    fn add(&mut self, name: &str, client: Client) {
        self.say(&format!("{name} joins"));
        self.members.push(Member {
            name: name.to_owned(),
            client,
            gone: Gone::No,
        });
    }

    fn index(&self, name: &str) -> usize {
        self.members
            .iter()
            .position(|m| m.name == name && m.gone == Gone::No)
            .unwrap_or_else(|| panic!("no member {name} in the group"))
    }

    /// `name` leaves cleanly (close, LeaveGroup).
    async fn leave(&mut self, name: &str) {
        self.say(&format!("{name} leaves"));
        let i = self.index(name);
        self.members[i].gone = Gone::Left;
        let client = std::mem::replace(&mut self.members[i].client, Client::Away);
        let client = match client {
            Client::Ours(o) => {
                o.consumer
                    .close()
                    .await
                    .unwrap_or_else(|e| panic!("{name}: close: {e:?}"));
                Client::Ours(o)
            }
            Client::Java(mut p) => {
                let (p, ok) = self
                    .off_thread(move || {
                        let ok = p.stop(LEAVE);
                        (p, ok)
                    })
                    .await;
                assert!(ok, "{name} did not close cleanly: {}", p.report());
                Client::Java(p)
            }
            Client::Rd(mut r) => Client::Rd(
                self.off_thread(move || {
                    r.stop();
                    r
                })
                .await,
            ),
            #[cfg(all(feature = "runtime-async-std", feature = "runtime-tokio"))]
            Client::Example(c) => Client::Example(self.off_thread(move || c.terminate()).await),
            Client::Away => unreachable!(),
        };
        self.members[i].client = client;
    }

    /// SIGKILL of a child member.
    fn kill(&mut self, name: &str) {
        self.say(&format!("{name} is killed"));
        let i = self.index(name);
        self.members[i].gone = Gone::Killed;
        match &mut self.members[i].client {
            Client::Java(p) => p.signal(libc::SIGKILL),
            #[cfg(all(feature = "runtime-async-std", feature = "runtime-tokio"))]
            Client::Example(c) => c.kill(),
            _ => panic!("{name}: only a child process is killed"),
        }
    }

    fn live(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| m.gone == Gone::No)
    }

    /// Whether the members' own views are a settled assignment: disjoint,
    /// covering every partition, balanced.
    fn views_settled(&self) -> Result<(), String> {
        let views: Vec<(&str, BTreeSet<i32>)> = self
            .live()
            .filter_map(|m| Some((m.name.as_str(), m.assignment()?)))
            .collect();
        let reporting = views.len();
        let live = self.live().count();
        settled(
            views.into_iter().map(|(_, v)| v).collect(),
            live,
            reporting == live,
        )
    }

    /// DescribeConsumerGroups, by the Java Admin client (on a thread of
    /// its own: our members go on polling).
    async fn describe(&mut self) -> Value {
        let (kafka, group) = (self.kafka.clone(), self.group.clone());
        let events = self
            .off_thread(move || kafka.try_peer(&["admin", "describe-group", "--group", &group]))
            .await;
        match events {
            Ok(events) => events
                .into_iter()
                .find(|e| e["event"] == "group")
                .expect("a group line"),
            // The coordinator does not know the group yet (its members'
            // JoinGroups may not have reached it): no members.
            Err(e) if e.contains("GroupIdNotFoundException") => {
                serde_json::json!({"event": "group", "members": []})
            }
            Err(e) => panic!("describe-group: {e}"),
        }
    }

    /// Whether Kafka's view of the group is the settled assignment the
    /// members hold: as many members, each with what it says it holds.
    fn kafka_agrees(&self, group: &Value) -> Result<(), String> {
        let members = group["members"].as_array().cloned().unwrap_or_default();
        let live = self.live().count();
        if members.len() != live {
            return Err(format!("{} members for Kafka, {live} here", members.len()));
        }
        let mut assignments = Vec::new();
        for m in &members {
            let held = java_partitions(&m["assignment"]);
            // Each member's client.id is its name here (the examples keep
            // their default).
            if let Some(ours) = self
                .live()
                .find(|x| Some(x.name.as_str()) == m["client_id"].as_str())
            {
                if let Some(view) = ours.assignment() {
                    if view != held {
                        return Err(format!("{} holds {view:?}, Kafka says {held:?}", ours.name));
                    }
                }
            }
            assignments.push(held);
        }
        settled(assignments, live, true)
    }

    /// Waits until the group settled (its members' views, then Kafka's),
    /// and every member in it delivered records since.
    async fn settle(&mut self, what: &str) {
        let deadline = Instant::now() + SETTLE;
        let what = format!("{what}: settled");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            self.until(&what, left, |r| r.views_settled().is_ok()).await;
            let group = self.describe().await;
            let agreed = self
                .kafka_agrees(&group)
                .and_then(|()| self.views_settled());
            match agreed {
                Ok(()) => {
                    self.say(&format!("{what}: {}", self.assignments()));
                    break;
                }
                Err(why) => assert!(
                    Instant::now() < deadline,
                    "{what}: not within {SETTLE:?}: {why}; Kafka says {group}; {}",
                    self.status()
                ),
            }
        }
        // And records flow to each of them.
        let before: Vec<usize> = self.live().map(|m| m.delivered().len()).collect();
        self.until(&format!("{what}: records after"), SETTLE, |r| {
            r.live().zip(&before).all(|(m, n)| m.delivered().len() > *n)
        })
        .await;
    }

    fn assignments(&self) -> String {
        self.live()
            .map(|m| format!("{} {:?}", m.name, m.assignment()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn status(&self) -> String {
        let members: Vec<String> = self
            .members
            .iter()
            .map(|m| {
                let mut last: BTreeMap<i32, i64> = BTreeMap::new();
                for (p, o, _) in m.delivered() {
                    let e = last.entry(p).or_insert(o);
                    *e = (*e).max(o);
                }
                format!(
                    "{} ({:?}): holds {:?}, last offsets {last:?}",
                    m.name,
                    m.gone,
                    m.assignment()
                )
            })
            .collect();
        format!(
            "at {:.1} s, {} sent; members: {members:#?}",
            self.started.elapsed().as_secs_f64(),
            self.sent.len()
        )
    }

    /// Stops producing, waits until every record written was delivered to
    /// some member, checks the values, counts the duplicates.
    async fn finish(&mut self, what: &str) -> Report {
        self.producing = false;
        self.say(&format!("{what}: the producer stops"));
        let mut written: BTreeMap<(i32, i64), String> = BTreeMap::new();
        for (value, delivery) in std::mem::take(&mut self.sent) {
            let md = delivery
                .await
                .unwrap_or_else(|e| panic!("{what}: {value} not written: {e}"));
            written.insert((md.partition, md.offset), value);
        }
        self.until(&format!("{what}: every record delivered"), DRAIN, |r| {
            let got: BTreeSet<(i32, i64)> = r
                .members
                .iter()
                .flat_map(|m| m.delivered())
                .map(|(p, o, _)| (p, o))
                .collect();
            written.keys().all(|k| got.contains(k))
        })
        .await;
        self.say(&format!("{what}: every record delivered"));
        let mut by_record: BTreeMap<(i32, i64), Vec<(String, Gone)>> = BTreeMap::new();
        let mut delivered = 0;
        for m in &self.members {
            for (p, o, value) in m.delivered() {
                delivered += 1;
                let w = written.get(&(p, o)).unwrap_or_else(|| {
                    panic!("{what}: {} delivered {p}@{o}, never written", m.name)
                });
                if let Some(v) = value {
                    assert_eq!(&v, w, "{what}: {} delivered {p}@{o}", m.name);
                }
                by_record
                    .entry((p, o))
                    .or_default()
                    .push((m.name.clone(), m.gone));
            }
        }
        let lost = self
            .members
            .iter()
            .filter_map(|m| match &m.client {
                Client::Java(p) => Some((m, p.events_of("lost"))),
                _ => None,
            })
            .filter(|(_, lost)| !lost.is_empty())
            .map(|(m, lost)| format!("{}: {lost:?}", m.name))
            .collect();
        let mut report = Report {
            written: written.len(),
            delivered,
            after_the_kill: 0,
            others: BTreeMap::new(),
            lost,
        };
        for (record, who) in by_record {
            if who.len() < 2 {
                continue;
            }
            if who.iter().any(|(_, gone)| *gone == Gone::Killed) {
                report.after_the_kill += who.len() - 1;
            } else {
                report
                    .others
                    .insert(record, who.into_iter().map(|(n, _)| n).collect());
            }
        }
        report
    }

    /// Closes the members still there; the Java ones must close cleanly.
    async fn close(&mut self) {
        let names: Vec<String> = self.live().map(|m| m.name.clone()).collect();
        for name in names {
            self.leave(&name).await;
        }
        let debug = std::env::var("LAZYKAFKA_TEST_LOG").is_ok_and(|v| v == "debug");
        for m in &self.members {
            match &m.client {
                Client::Ours(o) if !o.said.is_empty() => {
                    eprintln!("{} said {} times: {:?}", m.name, o.said.len(), o.said)
                }
                Client::Java(p) if debug => eprintln!("{}'s stderr:\n{}", m.name, p.stderr()),
                _ => {}
            }
        }
        self.producer
            .close_timeout(Duration::from_secs(10))
            .await
            .unwrap();
    }
}

/// Whether `assignments` (one per member of `members`) are disjoint,
/// cover every partition and are balanced (their sizes within one); with
/// `all` false some members do not say what they hold: only disjointness.
fn settled(assignments: Vec<BTreeSet<i32>>, members: usize, all: bool) -> Result<(), String> {
    let mut union = BTreeSet::new();
    let total: usize = assignments.iter().map(BTreeSet::len).sum();
    for a in &assignments {
        union.extend(a.iter().copied());
    }
    if union.len() != total {
        return Err(format!("overlapping: {assignments:?}"));
    }
    if !all {
        return Ok(());
    }
    if union != (0..PARTITIONS).collect() || assignments.len() != members {
        return Err(format!("not covering every partition: {assignments:?}"));
    }
    let (min, max) = (
        assignments.iter().map(BTreeSet::len).min().unwrap_or(0),
        assignments.iter().map(BTreeSet::len).max().unwrap_or(0),
    );
    if max - min > 1 {
        return Err(format!("unbalanced: {assignments:?}"));
    }
    Ok(())
}

// --- the members' settings ---------------------------------------------

fn ours(config: ConsumerConfig) -> Client {
    let consumer = Consumer::new(config).unwrap();
    Client::Ours(Box::new(Ours {
        consumer,
        seen: Vec::new(),
        said: Vec::new(),
    }))
}

fn our_config(run: &Run, name: &str) -> lazykafka::config::ConsumerConfigBuilder {
    config_for(&run.kafka.bootstrap, &run.group, name)
}

fn config_for(
    bootstrap: &str,
    group: &str,
    name: &str,
) -> lazykafka::config::ConsumerConfigBuilder {
    ConsumerConfig::builder()
        .bootstrap_servers(bootstrap)
        .group_id(group)
        .client_id(name)
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .fetch_max_wait(Duration::from_millis(100))
}

fn subscribed(run: &Run, client: Client) -> Client {
    if let Client::Ours(o) = &client {
        o.consumer.subscribe([run.topic.as_str()]).unwrap();
    }
    client
}

/// The Java peer as a member: commits synchronously after each poll, runs
/// until told to stop.
fn java(run: &Run, name: &str, properties: &[String]) -> Client {
    let client_id = format!("client.id={name}");
    let mut args = vec![
        "consume",
        "--topic",
        &run.topic,
        "--group",
        &run.group,
        "--commit",
        "sync",
        "--timeout-ms",
        "600000",
        "--property",
        &client_id,
    ];
    for p in properties {
        args.extend(["--property", p]);
    }
    Client::Java(run.kafka.spawn_peer(&args))
}

// --- 1. the classic protocol, each assignor ----------------------------

/// Java's class and librdkafka's name of each of our strategies.
fn names(strategy: AssignmentStrategy) -> (&'static str, &'static str) {
    match strategy {
        AssignmentStrategy::Range => ("org.apache.kafka.clients.consumer.RangeAssignor", "range"),
        AssignmentStrategy::RoundRobin => (
            "org.apache.kafka.clients.consumer.RoundRobinAssignor",
            "roundrobin",
        ),
        AssignmentStrategy::CooperativeSticky => (
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
            "cooperative-sticky",
        ),
        other => panic!("no peer names for {other:?}"),
    }
}

/// Ours alone, then the Java member joins, then librdkafka's; librdkafka
/// leaves (LeaveGroup), then the Java member is killed: after its session
/// (10 s) ours holds everything.
async fn classic(strategy: AssignmentStrategy) {
    let what = format!("classic {}", names(strategy).1);
    let Some(kafka) = Kafka::get(&what) else {
        return;
    };
    let mut run = Run::start(&kafka, "classic").await;
    let (java_class, rd_name) = names(strategy);

    let config = our_config(&run, "ours")
        .session_timeout(SESSION)
        .heartbeat_interval(HEARTBEAT)
        .partition_assignment_strategy([strategy])
        .build()
        .unwrap();
    let client = subscribed(&run, ours(config));
    run.add("ours", client);
    run.settle(&format!("{what}: ours alone")).await;

    let client = java(
        &run,
        "java",
        &[
            format!("partition.assignment.strategy={java_class}"),
            format!("session.timeout.ms={}", SESSION.as_millis()),
            format!("heartbeat.interval.ms={}", HEARTBEAT.as_millis()),
        ],
    );
    run.add("java", client);
    run.settle(&format!("{what}: java joined")).await;

    let client = Client::Rd(RdConsumer::start_with(
        &kafka.bootstrap,
        &run.group,
        &run.topic,
        &[
            ("partition.assignment.strategy", rd_name),
            ("client.id", "librdkafka"),
        ],
    ));
    run.add("librdkafka", client);
    run.settle(&format!("{what}: librdkafka joined")).await;

    run.leave("librdkafka").await;
    run.settle(&format!("{what}: librdkafka left")).await;

    run.kill("java");
    run.settle(&format!("{what}: java killed")).await;

    let report = run.finish(&what).await;
    report.check(&what, strategy != AssignmentStrategy::CooperativeSticky);
    run.close().await;
}

async fn classic_range() {
    classic(AssignmentStrategy::Range).await
}

async fn classic_roundrobin() {
    classic(AssignmentStrategy::RoundRobin).await
}

async fn classic_cooperative_sticky() {
    classic(AssignmentStrategy::CooperativeSticky).await
}

// --- 2. the consumer protocol (KIP-848), each of Kafka's assignors -----

/// As [`classic`] under KIP-848: the coordinator assigns with
/// `group.remote.assignor`, the session is the broker's
/// (`group.consumer.session.timeout.ms`, 10 s here).
async fn kip848(assignor: RemoteAssignor) {
    let what = format!("kip848 {}", assignor.as_str());
    let Some(kafka) = Kafka::get(&what) else {
        return;
    };
    let mut run = Run::start(&kafka, "kip848").await;
    let config = our_config(&run, "ours")
        .group_protocol(GroupProtocol::Consumer)
        .group_remote_assignor(assignor)
        .build()
        .unwrap();
    let client = subscribed(&run, ours(config));
    run.add("ours", client);
    run.settle(&format!("{what}: ours alone")).await;

    let client = java(
        &run,
        "java",
        &[
            "group.protocol=consumer".to_owned(),
            format!("group.remote.assignor={}", assignor.as_str()),
        ],
    );
    run.add("java", client);
    run.settle(&format!("{what}: java joined")).await;

    let client = Client::Rd(RdConsumer::start_kip848(
        &kafka.bootstrap,
        &run.group,
        &run.topic,
        &[
            ("group.remote.assignor", assignor.as_str()),
            ("client.id", "librdkafka"),
        ],
    ));
    run.add("librdkafka", client);
    run.settle(&format!("{what}: librdkafka joined")).await;

    run.leave("librdkafka").await;
    run.settle(&format!("{what}: librdkafka left")).await;

    run.kill("java");
    run.settle(&format!("{what}: java killed")).await;

    // The group is Kafka's consumer group, with the assignor asked for.
    let group = run.describe().await;
    assert_eq!(
        (group["type"].as_str(), group["assignor"].as_str()),
        (Some("Consumer"), Some(assignor.as_str())),
        "{what}: {group}"
    );

    let report = run.finish(&what).await;
    report.check(&what, false);
    run.close().await;
}

async fn kip848_uniform() {
    kip848(RemoteAssignor::Uniform).await
}

async fn kip848_range() {
    kip848(RemoteAssignor::Range).await
}

// --- 3. static membership ----------------------------------------------

/// Ours, static (`group.instance.id`), and a Java member share the topic
/// (range: an eager assignor, so any rebalance revokes every partition of
/// the Java member and shows in its callbacks); ours closes (a static
/// member sends no LeaveGroup) and a new consumer with the same instance
/// id joins within the session: Kafka gives it the same partitions back
/// without a rebalance, and the Java member is told nothing.
async fn a_static_member_restarts_without_a_rebalance() {
    let what = "static";
    let Some(kafka) = Kafka::get(what) else {
        return;
    };
    let mut run = Run::start(&kafka, "static").await;
    let instance = "ours-static";
    // A session long enough for the restart; the broker keeps the member
    // that long after its last heartbeat.
    let (bootstrap, group) = (kafka.bootstrap.clone(), run.group.clone());
    let config = || {
        config_for(&bootstrap, &group, "ours")
            .group_instance_id(instance)
            .session_timeout(Duration::from_secs(20))
            .heartbeat_interval(HEARTBEAT)
            .partition_assignment_strategy([AssignmentStrategy::Range])
            .build()
            .unwrap()
    };
    let client = subscribed(&run, ours(config()));
    run.add("ours", client);
    run.settle("static: ours alone").await;
    let client = java(
        &run,
        "java",
        &[
            format!(
                "partition.assignment.strategy={}",
                names(AssignmentStrategy::Range).0
            ),
            format!("session.timeout.ms={}", SESSION.as_millis()),
            format!("heartbeat.interval.ms={}", HEARTBEAT.as_millis()),
        ],
    );
    run.add("java", client);
    run.settle("static: java joined").await;

    let java_callbacks = |run: &Run| -> Vec<Value> {
        let Client::Java(p) = &run.members[run.index("java")].client else {
            unreachable!()
        };
        p.events()
            .into_iter()
            .filter(|e| matches!(e["event"].as_str(), Some("assigned" | "revoked" | "lost")))
            .collect()
    };
    let before = java_callbacks(&run);
    let held = run.members[run.index("ours")]
        .assignment()
        .expect("ours says");

    // The restart: close (no LeaveGroup for a static member), then a new
    // consumer with the same group.instance.id.
    run.leave("ours").await;
    let client = subscribed(&run, ours(config()));
    run.add("ours-restarted", client);
    run.until("static: the same partitions back", SETTLE, |r| {
        let m = &r.members[r.index("ours-restarted")];
        m.assignment().as_ref() == Some(&held) && !m.delivered().is_empty()
    })
    .await;
    // Kafka's view: the static member is still the one with the instance
    // id, holding what it held.
    let group = run.describe().await;
    let statics: Vec<&Value> = group["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter(|m| m["group_instance_id"] == instance)
        .collect();
    assert!(
        statics.len() == 1 && java_partitions(&statics[0]["assignment"]) == held,
        "static: Kafka's members: {group}"
    );
    // A rebalance could not have ended without the Java member rejoining,
    // and under range it revokes everything before it rejoins: its
    // callbacks would show it by now.
    let after = java_callbacks(&run);
    assert_eq!(
        after, before,
        "static: the Java member saw a rebalance when ours restarted"
    );
    run.settle("static: after the restart").await;
    assert_eq!(java_callbacks(&run), before, "static: a rebalance later");

    let report = run.finish(what).await;
    report.check(what, true);
    assert_eq!(
        report.after_the_kill + report.other_duplicates(),
        0,
        "static: the restarted member resumes at the commits of the one before"
    );
    run.close().await;
}

// --- the JoinGroups a split needs, and no more --------------------------

/// Why a classic member may send a JoinGroup in a split: its first join,
/// the KIP-394 round with the member id the coordinator gave, a heartbeat
/// answering REBALANCE_IN_PROGRESS (the member already there), and a
/// JoinGroup sent again after coordinator trouble (a new group's
/// coordinator may still be loading).
const FIRST: &str = "first join";
const KIP394: &str = "MEMBER_ID_REQUIRED: again with the member id given (KIP-394)";
const HEARTBEAT_SAID: &str = "a heartbeat answered REBALANCE_IN_PROGRESS";
const AGAIN: &str =
    "the JoinGroup before failed (no answer, or the coordinator moved, is loading or unavailable)";

/// Two of ours split six partitions (range, eager): the member already
/// there rejoins once, when a heartbeat says the group rebalances; the new
/// one joins once (with its KIP-394 round); one rebalance each beyond the
/// first. Any other JoinGroup (a refused SyncGroup, a commit refused for
/// the rebalance, a rejoin the protocol does not need) fails the test.
async fn a_split_sends_only_the_joingroups_the_protocol_needs() {
    let what = "split joins";
    let Some(kafka) = Kafka::get(what) else {
        return;
    };
    let mut run = Run::start(&kafka, "split-joins").await;
    let config = |run: &Run, name: &str| {
        our_config(run, name)
            .session_timeout(SESSION)
            .heartbeat_interval(HEARTBEAT)
            .partition_assignment_strategy([AssignmentStrategy::Range])
            .build()
            .unwrap()
    };
    let client = subscribed(&run, ours(config(&run, "a")));
    run.add("a", client);
    run.settle("split joins: a alone").await;
    let client = subscribed(&run, ours(config(&run, "b")));
    run.add("b", client);
    run.settle("split joins: b joined").await;
    let report = run.finish(what).await;
    report.check(what, true);
    let group = |run: &Run, name: &str| {
        let Client::Ours(o) = &run.members[run.index(name)].client else {
            unreachable!("{name} is ours")
        };
        o.consumer.metrics().group.expect("a group member")
    };
    for (name, heartbeats, rebalances) in [("a", 1, 2), ("b", 0, 1)] {
        let g = group(&run, name);
        let mut joins = g.joins.clone();
        joins.remove(AGAIN);
        let expected: BTreeMap<String, u64> =
            [(FIRST, 1), (KIP394, 1), (HEARTBEAT_SAID, heartbeats)]
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(reason, n)| (reason.to_owned(), n))
                .collect();
        assert_eq!(
            joins, expected,
            "{what}: {name}'s JoinGroups by reason (beside {AGAIN:?}): {:?}",
            g.joins
        );
        assert_eq!(
            g.rebalances, rebalances,
            "{what}: {name}'s rebalances completed"
        );
    }
    run.close().await;
}

// --- the commit after a poll, when a rebalance comes in between ---------

/// The README's loop commits after processing each batch. An eager
/// rebalance (here: a Java member joins) may reach our member between the
/// `poll` that returned a batch and that commit: Kafka still accepts the
/// commit at the member's generation (the group waits in
/// PreparingRebalance for this member's JoinGroup), and the Java consumer
/// makes it, since it revokes only inside `poll`. The commit must land:
/// the batch is not read again when its partitions are assigned next.
///
/// Found on real Kafka (`classic_roundrobin` on tokio, a record that
/// never left our member read twice): lazykafka revoked in the
/// background, and the commit then committed nothing and returned
/// `Ok(())`. The window is made certain here: the member does not poll
/// between its batch and its commit.
async fn a_commit_after_a_poll_lands_when_an_eager_rebalance_revokes_meanwhile() {
    let what = "revoked between poll and commit";
    let Some(kafka) = Kafka::get(what) else {
        return;
    };
    let mut run = Run::start(&kafka, "between").await;
    let config = our_config(&run, "ours")
        .session_timeout(SESSION)
        .heartbeat_interval(HEARTBEAT)
        .partition_assignment_strategy([AssignmentStrategy::Range])
        .build()
        .unwrap();
    let client = subscribed(&run, ours(config));
    run.add("ours", client);
    run.settle("between: ours alone").await;

    // A batch polled, not committed yet.
    run.producing = false;
    run.produce_round().await;
    let i = run.index("ours");
    let deadline = Instant::now() + SETTLE;
    let (held, batch) = loop {
        let Client::Ours(o) = &mut run.members[i].client else {
            unreachable!()
        };
        let records = match o.consumer.poll(Duration::from_millis(100)).await {
            Ok(records) => records,
            Err(e) if e.is_retriable() => Vec::new(),
            Err(e) => panic!("between: poll: {e:?}"),
        };
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        for r in &records {
            let value = String::from_utf8_lossy(r.value().unwrap_or_default()).into_owned();
            o.seen.push((r.partition(), r.offset(), value));
            let e = next.entry(r.partition()).or_default();
            *e = (*e).max(r.offset() + 1);
        }
        if !next.is_empty() {
            break (o.consumer.assignment(), next);
        }
        assert!(Instant::now() < deadline, "between: no batch");
    };

    // A Java member joins; without a poll, ours hears of the rebalance
    // from its heartbeats and gives up its partitions.
    let client = java(
        &run,
        "java",
        &[
            format!(
                "partition.assignment.strategy={}",
                names(AssignmentStrategy::Range).0
            ),
            format!("session.timeout.ms={}", SESSION.as_millis()),
            format!("heartbeat.interval.ms={}", HEARTBEAT.as_millis()),
        ],
    );
    run.add("java", client);
    let deadline = Instant::now() + SETTLE;
    while run.members[i].assignment().as_ref()
        == Some(&held.iter().map(|tp| tp.partition).collect())
    {
        let java = run.index("java");
        run.members[java].check_alive();
        assert!(
            Instant::now() < deadline,
            "between: ours still holds {held:?} {SETTLE:?} after the Java member started"
        );
        common::sleep(Duration::from_millis(20)).await;
    }
    run.say(&format!(
        "between: ours holds {:?}, held {:?}",
        run.members[i].assignment(),
        held.iter().map(|tp| tp.partition).collect::<BTreeSet<_>>()
    ));

    // The commit of the batch lands.
    let Client::Ours(o) = &run.members[i].client else {
        unreachable!()
    };
    let committed = o.consumer.commit().await;
    assert!(
        committed.is_ok(),
        "between: the commit after the batch: {committed:?}"
    );
    let partitions = batch
        .keys()
        .map(|p| lazykafka::TopicPartition::new(&run.topic, *p));
    let read_back: BTreeMap<i32, i64> = o
        .consumer
        .committed(partitions)
        .await
        .unwrap()
        .into_iter()
        .map(|(tp, offset)| (tp.partition, offset.unwrap_or(-1)))
        .collect();
    assert_eq!(
        read_back, batch,
        "between: committed offsets after `commit()` returned Ok (expected the batch's)"
    );

    run.producing = true;
    run.settle("between: java joined").await;
    let report = run.finish(what).await;
    report.check(what, true);
    run.close().await;
}

// --- 4. the examples as child processes --------------------------------

#[cfg(all(feature = "runtime-async-std", feature = "runtime-tokio"))]
mod children {
    use crate::common::examples::{close_inherited_fds, example_bin};
    use std::collections::BTreeSet;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Child, Command, ExitStatus, Stdio};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Example {
        /// `examples/readme.rs`: the README's program (tokio), killed by
        /// SIGTERM (no signal handling).
        Readme,
        /// `examples/group.rs` (async-std): closes on SIGTERM, exit 0.
        Group,
    }

    /// An example running, its output kept line by line.
    pub struct ExampleChild {
        example: Example,
        topic: String,
        child: Child,
        stdout: Arc<Mutex<Vec<String>>>,
        stderr: Arc<Mutex<Vec<String>>>,
    }

    fn keep(pipe: impl std::io::Read + Send + 'static, into: Arc<Mutex<Vec<String>>>) {
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                into.lock().unwrap().push(line);
            }
        });
    }

    /// `TOPIC-PARTITION@OFFSET: VALUE`.
    fn parse(topic: &str, line: &str) -> Option<(i32, i64, Option<String>)> {
        let (at, value) = line.split_once(": ")?;
        let (tp, offset) = at.rsplit_once('@')?;
        let (t, p) = tp.rsplit_once('-')?;
        (t == topic).then_some(())?;
        Some((
            p.parse().ok()?,
            offset.parse().ok()?,
            Some(value.to_owned()),
        ))
    }

    impl ExampleChild {
        pub fn start(
            example: Example,
            bootstrap: &str,
            group: &str,
            topic: &str,
            session: Duration,
            heartbeat: Duration,
        ) -> ExampleChild {
            let name = match example {
                Example::Readme => "readme",
                Example::Group => "group",
            };
            let mut command = Command::new(example_bin(name));
            let mut child = close_inherited_fds(&mut command)
                .args(["--bootstrap", bootstrap, "--group", group, "--topic", topic])
                .args([
                    "--session-timeout-ms",
                    &session.as_millis().to_string(),
                    "--heartbeat-interval-ms",
                    &heartbeat.as_millis().to_string(),
                ])
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start the example");
            let stdout = Arc::new(Mutex::new(Vec::new()));
            let stderr = Arc::new(Mutex::new(Vec::new()));
            keep(child.stdout.take().unwrap(), stdout.clone());
            keep(child.stderr.take().unwrap(), stderr.clone());
            ExampleChild {
                example,
                topic: topic.to_owned(),
                child,
                stdout,
                stderr,
            }
        }

        pub fn delivered(&self) -> Vec<(i32, i64, Option<String>)> {
            let stdout = self.stdout.lock().unwrap();
            match self.example {
                Example::Readme => stdout
                    .iter()
                    .map(|l| parse(&self.topic, l).unwrap_or_else(|| panic!("readme: {l:?}")))
                    .collect(),
                // `record T-3@17 key=k-5 value=v-5`
                Example::Group => stdout
                    .iter()
                    .filter_map(|l| l.strip_prefix("record "))
                    .map(|rest| {
                        let (at, kv) = rest.split_once(" key=").expect("a record line");
                        let (_, value) = kv.split_once(" value=").expect("a value");
                        parse(&self.topic, &format!("{at}: {value}")).expect("a record line")
                    })
                    .collect(),
            }
        }

        /// The `group` example's assignment from its listener's lines; the
        /// README's program does not say.
        pub fn assignment(&self) -> Option<BTreeSet<i32>> {
            if self.example != Example::Group {
                return None;
            }
            let partitions = |list: &str| -> BTreeSet<i32> {
                list.split(',')
                    .filter_map(|tp| tp.rsplit_once('-'))
                    .filter_map(|(_, p)| p.parse().ok())
                    .collect()
            };
            let mut now = BTreeSet::new();
            for line in self.stdout.lock().unwrap().iter() {
                if let Some(list) = line.strip_prefix("assigned ") {
                    now.extend(partitions(list));
                } else if let Some(list) = line
                    .strip_prefix("revoked ")
                    .or_else(|| line.strip_prefix("lost "))
                {
                    let gone = partitions(list);
                    now.retain(|p| !gone.contains(p));
                }
            }
            Some(now)
        }

        pub fn stderr(&self) -> Vec<String> {
            self.stderr.lock().unwrap().clone()
        }

        fn describe(&self, status: Option<ExitStatus>) -> String {
            let stderr = self.stderr();
            let tail = &stderr[stderr.len().saturating_sub(20)..];
            format!(
                "{:?} example: {status:?}; its last stderr lines: {tail:#?}",
                self.example
            )
        }

        pub fn check_alive(&mut self, name: &str) {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "{name} ended by itself (the loop returned an error): {}",
                    self.describe(Some(status))
                );
            }
        }

        pub fn kill(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }

        /// SIGTERM, and how each example ends on it: the README's program
        /// is ended by the signal (no handler, and `main` returned no
        /// error: no `Error:` line); the `group` example closes and exits 0.
        pub fn terminate(mut self) -> ExampleChild {
            // SAFETY: kill(2) of our own child, not waited for yet.
            assert_eq!(
                unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) },
                0
            );
            let deadline = Instant::now() + crate::LEAVE;
            let status = loop {
                if let Some(status) = self.child.try_wait().unwrap() {
                    break status;
                }
                assert!(Instant::now() < deadline, "{}", self.describe(None));
                std::thread::sleep(Duration::from_millis(50));
            };
            let stderr = self.stderr();
            assert!(
                !stderr.iter().any(|l| l.starts_with("Error:")),
                "{}",
                self.describe(Some(status))
            );
            match self.example {
                Example::Readme => assert_eq!(
                    status.signal(),
                    Some(libc::SIGTERM),
                    "{}",
                    self.describe(Some(status))
                ),
                Example::Group => {
                    assert_eq!(status.code(), Some(0), "{}", self.describe(Some(status)));
                    // The pipe closes with the process.
                    assert!(
                        crate::common::wait_for(Duration::from_secs(5), || self
                            .stdout
                            .lock()
                            .unwrap()
                            .last()
                            .is_some_and(|l| l == "closed")),
                        "group: no `closed` line: {:?}",
                        self.stdout.lock().unwrap().last()
                    );
                }
            }
            self
        }
    }

    impl Drop for ExampleChild {
        fn drop(&mut self) {
            if let Ok(None) = self.child.try_wait() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

/// The README's program and the `group` example with a Java member: a
/// second README program joins, the Java member leaves, the second README
/// program is killed, a second Java member joins. The loops never end by
/// themselves (no non-retriable error), nothing is lost.
///
/// The examples get 10 s sessions and 1 s heartbeats (their flags; the
/// README's defaults are 45 s and 3 s): the killed member's partitions
/// would wait out 45 s otherwise. Their loops are the README's, unchanged.
#[cfg(all(feature = "runtime-async-std", feature = "runtime-tokio"))]
async fn the_readme_loop_and_the_group_example_share_a_group_with_java() {
    use children::{Example, ExampleChild};
    let what = "examples";
    let Some(kafka) = Kafka::get(what) else {
        return;
    };
    // Built before the clock starts.
    for example in ["readme", "group"] {
        common::examples::example_bin(example);
    }
    let (session, heartbeat) = (Duration::from_secs(10), Duration::from_secs(1));
    let mut run = Run::start(&kafka, "examples").await;
    let example = |run: &Run, example| {
        Client::Example(ExampleChild::start(
            example,
            &run.kafka.bootstrap,
            &run.group,
            &run.topic,
            session,
            heartbeat,
        ))
    };
    let java_timing = [
        format!("session.timeout.ms={}", session.as_millis()),
        format!("heartbeat.interval.ms={}", heartbeat.as_millis()),
    ];

    let client = example(&run, Example::Readme);
    run.add("readme-1", client);
    let client = example(&run, Example::Group);
    run.add("group", client);
    let client = java(&run, "java-1", &java_timing);
    run.add("java-1", client);
    run.settle("examples: three members").await;

    let client = example(&run, Example::Readme);
    run.add("readme-2", client);
    run.settle("examples: readme-2 joined").await;

    run.leave("java-1").await;
    run.settle("examples: java-1 left").await;

    run.kill("readme-2");
    run.settle("examples: readme-2 killed").await;

    let client = java(&run, "java-2", &java_timing);
    run.add("java-2", client);
    run.settle("examples: java-2 joined").await;

    let report = run.finish(what).await;
    report.check(what, true);
    for m in &run.members {
        if let Client::Example(c) = &m.client {
            let stderr = c.stderr();
            eprintln!(
                "{} said on stderr ({} lines, the first 20): {:#?}",
                m.name,
                stderr.len(),
                &stderr[..stderr.len().min(20)]
            );
        }
    }
    run.close().await;
}

on_apache_kafka!(
    classic_range,
    classic_roundrobin,
    classic_cooperative_sticky,
    kip848_uniform,
    kip848_range,
    a_static_member_restarts_without_a_rebalance,
    a_split_sends_only_the_joingroups_the_protocol_needs,
    a_commit_after_a_poll_lands_when_an_eager_rebalance_revokes_meanwhile,
);

/// The examples as child processes: built with both runtimes (the
/// `readme` example is the README's tokio program, `group` runs on
/// async-std), as the test command's main run builds them.
#[cfg(all(feature = "runtime-async-std", feature = "runtime-tokio"))]
mod child_processes {
    #[async_std::test]
    async fn the_readme_loop_and_the_group_example_share_a_group_with_java() {
        super::the_readme_loop_and_the_group_example_share_a_group_with_java().await
    }
}
