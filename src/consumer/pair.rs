//! The consumer core on the crate's test harness ([`crate::harness`]: the
//! mock's brokers in memory, a manual clock), with what the application
//! does to it (poll, subscribe, commit), and the consumer core's
//! scenarios.

use super::core::{CommitId, ConsumerCore, Mode};
use crate::cluster::Changes;
use crate::config::{ConsumerConfig, ConsumerConfigBuilder};
use crate::error::Error;
use crate::fetch::ConsumerRecord;
use crate::group::{GroupProtocol, TopicPartition};
use crate::harness::{addr, MetadataAsked};
use crate::mock::group::{GroupState, Step, Ticket};
use crate::mock::state::State;
use crate::protocol::group::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
use crate::protocol::messages::join_group::{JoinGroupRequest, JoinGroupRequestProtocol};
use crate::protocol::messages::sync_group::SyncGroupRequest;
use crate::protocol::ApiKey;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The consumer core on the harness.
type Pair = crate::harness::Pair<ConsumerCore>;

const GROUP: &str = "billing";
const TOPIC: &str = "invoices";

impl Pair {
    /// `brokers` mock brokers (ids from 1) and a consumer configured by
    /// `config` on top of a bootstrap list of `bootstrap` only.
    fn new(
        brokers: i32,
        bootstrap: i32,
        config: impl FnOnce(ConsumerConfigBuilder) -> ConsumerConfigBuilder,
    ) -> Self {
        let builder = ConsumerConfig::builder().bootstrap_servers(addr(bootstrap).to_string());
        let config = config(builder).build().unwrap();
        // A fixed seed: the same bootstrap choice and jitter each run.
        Pair::with_core(brokers, |start| {
            ConsumerCore::from_config(&config, start, 7)
        })
    }

    /// What the application's `poll` does to the core: note the poll,
    /// deliver the group events (to no listener), then take the errors and
    /// up to 500 records.
    fn poll(&mut self) -> Vec<ConsumerRecord> {
        self.core.polled(self.now);
        self.settle();
        // A revocation waits for it (without automatic commits), as in
        // `Consumer::take_now`.
        while self.core.take_group_event().is_some() {
            self.core.group_event_delivered();
        }
        self.settle();
        while let Some(e) = self.core.take_error() {
            self.errors.push(e);
        }
        self.core.take_records(500)
    }

    /// Polls every `every` for `span`, as an application's loop would, and
    /// returns the records taken.
    fn poll_for(&mut self, span: Duration, every: Duration) -> Vec<ConsumerRecord> {
        let end = self.now + span;
        let mut records = self.poll();
        while self.now < end {
            self.advance(every.min(end - self.now));
            records.extend(self.poll());
        }
        records
    }

    /// The partitions the core's group membership holds.
    fn assignment(&self) -> BTreeSet<TopicPartition> {
        self.core.membership().unwrap().assignment().clone()
    }

    /// Subscribes to `topic`.
    fn subscribe(&mut self, topic: &str) {
        let topics = [topic.to_owned()].into_iter().collect();
        self.core.set_mode(self.now, Mode::Subscribed(topics));
    }

    /// Subscribes to the topics matching `pattern`.
    fn subscribe_pattern(&mut self, pattern: &str) {
        let pattern = crate::group::TopicPattern::new(pattern).unwrap();
        self.core.set_mode(self.now, Mode::Pattern(pattern));
    }

    /// The topics of the partitions the member holds.
    fn assigned_topics(&self) -> BTreeSet<String> {
        self.assignment().into_iter().map(|tp| tp.topic).collect()
    }

    /// Waits (polling every 100 ms) for the commit `id` to finish.
    fn commit_result(&mut self, id: CommitId) -> Result<(), Error> {
        for _ in 0..100 {
            if let Some(result) = self.core.take_commit_result(id) {
                return result;
            }
            self.advance(Duration::from_millis(100));
            self.poll();
        }
        panic!("commit {id:?} never finished");
    }
}

fn tp(partition: i32) -> TopicPartition {
    TopicPartition::new(TOPIC, partition)
}

/// A classic-group consumer: range assignment, 3 s heartbeats, 10 s
/// sessions, 30 s `max.poll.interval.ms`, no auto-commit.
fn group_config(b: ConsumerConfigBuilder) -> ConsumerConfigBuilder {
    b.group_id(GROUP)
        .enable_auto_commit(false)
        .auto_offset_reset(crate::OffsetReset::Earliest)
        .session_timeout(Duration::from_secs(10))
        .heartbeat_interval(Duration::from_secs(3))
        .max_poll_interval(Duration::from_secs(30))
        .set("partition.assignment.strategy", "range")
        .unwrap()
}

/// 3 brokers (broker 1 the only bootstrap address), topic [`TOPIC`] with
/// 5 records on partition 0 (led by broker 2) and 3 on partition 1 (broker
/// 3), both assigned by hand, from the earliest offset; nothing polled yet.
fn assigned_two_leaders() -> Pair {
    let mut pair = Pair::new(3, 1, |b| b.auto_offset_reset(crate::OffsetReset::Earliest));
    pair.mock.create_topic(TOPIC, 2, Some(&[2, 3])).unwrap();
    pair.produce(TOPIC, 0, 5);
    pair.produce(TOPIC, 1, 3);
    let assigned: BTreeSet<_> = [tp(0), tp(1)].into_iter().collect();
    pair.core.set_mode(pair.now, Mode::Assigned(assigned));
    pair
}

#[test]
fn manual_assignment_fetches_every_record_from_the_leaders_only() {
    // Broker 1 is the only bootstrap address and leads nothing.
    let mut pair = assigned_two_leaders();
    assert!(pair.links.is_empty(), "no connection before the first poll");

    let records = pair.poll_for(Duration::from_secs(2), Duration::from_millis(100));
    let mut seen: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    for r in &records {
        let value = String::from_utf8_lossy(r.value().unwrap()).into_owned();
        seen.entry(r.partition())
            .or_default()
            .push((r.offset(), value));
    }
    let expected = |p: i32, n: i64| -> Vec<(i64, String)> {
        (0..n).map(|i| (i, format!("{p}-{i}"))).collect()
    };
    assert_eq!(seen[&0], expected(0, 5));
    assert_eq!(seen[&1], expected(1, 3));
    assert_eq!(pair.core.fetcher().position(&tp(0)), Some(5));
    assert_eq!(pair.core.fetcher().position(&tp(1)), Some(3));
    // The bootstrap connection is retired: sockets to the leaders only.
    assert_eq!(pair.connected_brokers(), [2, 3].into_iter().collect());
    let fetches: BTreeSet<i32> = pair.served(ApiKey::Fetch).iter().map(|f| f.1).collect();
    assert_eq!(fetches, [2, 3].into_iter().collect());
    assert!(pair.served(ApiKey::JoinGroup).is_empty());
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);

    // Records produced later arrive through the parked (long-poll) Fetch.
    pair.produce(TOPIC, 1, 2);
    let more = pair.poll_for(Duration::from_secs(1), Duration::from_millis(100));
    let offsets: Vec<i64> = more.iter().map(ConsumerRecord::offset).collect();
    assert_eq!(offsets, [3, 4]);
}

/// What a call waiting on the core is looked at again for: `poll`'s output
/// while there is some, the metadata when it changed, answers when a
/// query (or commit) was answered, and nothing after a step that changed
/// none of these (an empty Fetch answer, a timer).
#[test]
fn the_core_tells_which_kinds_of_change_a_waiting_call_waits_for() {
    use crate::fetch::OffsetSpec;
    let mut pair = assigned_two_leaders();
    pair.core.take_changes();
    pair.core.polled(pair.now);
    pair.advance(Duration::from_millis(100));
    let changes = pair.core.take_changes();
    assert!(changes.intersects(Changes::OUTPUT), "{changes:?}");
    assert!(changes.intersects(Changes::METADATA), "{changes:?}");
    assert!(!changes.intersects(Changes::ANSWERS), "{changes:?}");
    assert_eq!(pair.core.take_records(500).len(), 8);
    assert_eq!(pair.core.take_changes(), Changes::NONE);
    pair.advance(Duration::from_secs(1));
    assert_eq!(
        pair.core.take_changes(),
        Changes::NONE,
        "empty Fetch answers"
    );

    let query = BTreeMap::from([(tp(0), OffsetSpec::Latest)]);
    let asked = pair.core.query_offsets(pair.now, &query);
    assert_eq!(asked.len(), 1);
    // Answered once the Fetch parked before it on the leader's connection
    // is (a broker answers a connection's requests in order).
    pair.advance(Duration::from_secs(1));
    assert_eq!(pair.core.take_changes(), Changes::ANSWERS);
    assert!(pair.core.take_query(asked[0]).is_some());
    assert_eq!(pair.core.take_changes(), Changes::NONE);
}

/// Joins with `pair`'s member alone, polling every 100 ms, and returns
/// when it is stable, with the records polled meanwhile.
fn join_alone(pair: &mut Pair) -> Vec<ConsumerRecord> {
    pair.subscribe(TOPIC);
    let mut records = Vec::new();
    for _ in 0..50 {
        records.extend(pair.poll());
        if pair.core.membership().unwrap().is_stable() {
            return records;
        }
        pair.advance(Duration::from_millis(100));
    }
    panic!("never joined: {:?}", pair.log);
}

#[test]
fn a_member_joins_heartbeats_on_time_and_commits() {
    let mut pair = Pair::new(3, 1, group_config);
    pair.mock.create_topic(TOPIC, 4, None).unwrap();
    pair.mock.coordinators.insert(GROUP.into(), 2);
    for p in 0..4 {
        pair.produce(TOPIC, p, 2);
    }
    let mut records = join_alone(&mut pair);
    let all: BTreeSet<_> = (0..4).map(tp).collect();
    assert_eq!(pair.assignment(), all);
    let snapshot = pair.mock.groups.snapshot(GROUP).unwrap();
    assert_eq!(snapshot.state, GroupState::Stable);
    assert_eq!(snapshot.members.len(), 1);
    // Group traffic went to the coordinator, broker 2, and nowhere else.
    for api in [ApiKey::JoinGroup, ApiKey::SyncGroup, ApiKey::OffsetFetch] {
        let brokers: BTreeSet<i32> = pair.served(api).iter().map(|s| s.1).collect();
        assert_eq!(brokers, [2].into_iter().collect(), "{api:?}");
    }

    let synced = pair.served(ApiKey::SyncGroup).last().unwrap().0;
    records.extend(pair.poll_for(Duration::from_secs(10), Duration::from_millis(100)));
    // Every record once, each partition from its start (no commit yet:
    // auto.offset.reset=earliest).
    let mut offsets: Vec<(i32, i64)> = records
        .iter()
        .map(|r| (r.partition(), r.offset()))
        .collect();
    offsets.sort_unstable();
    let expected: Vec<(i32, i64)> = (0..4).flat_map(|p| [(p, 0), (p, 1)]).collect();
    assert_eq!(offsets, expected);
    // Heartbeats every heartbeat.interval.ms after the SyncGroup answer
    // (answers are instant here), to the coordinator.
    let beats = pair.served(ApiKey::Heartbeat);
    let expected: Vec<(Duration, i32)> = (1..=3)
        .map(|i| (synced + Duration::from_secs(3) * i, 2))
        .collect();
    assert_eq!(beats, expected);

    // Heartbeats answered are nothing a waiting call waits for (a
    // `commit` waiting meanwhile is not looked at again); a commit's
    // answer is.
    pair.core.take_changes();
    let heartbeats = pair.served(ApiKey::Heartbeat).len();
    pair.advance(Duration::from_secs(4));
    assert!(pair.served(ApiKey::Heartbeat).len() > heartbeats);
    let changes = pair.core.take_changes();
    assert!(!changes.intersects(Changes::ANSWERS), "{changes:?}");
    let id = pair.core.commit(pair.now, None);
    pair.commit_result(id).unwrap();
    let changes = pair.core.take_changes();
    assert!(changes.intersects(Changes::ANSWERS), "{changes:?}");
    for p in 0..4 {
        assert_eq!(
            pair.mock.groups.committed(GROUP, TOPIC, p),
            Some(2),
            "partition {p}"
        );
    }
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);
}

/// A second member of the group, driven through the coordinator's API
/// directly (no connection): JoinGroup, then SyncGroup.
struct Other {
    member_id: String,
    generation: i32,
    join: Option<Ticket>,
    sync: Option<Ticket>,
    assignment: Option<BTreeSet<TopicPartition>>,
}

impl Other {
    const VERSION: i16 = 5;

    fn join_request(member_id: &str) -> JoinGroupRequest {
        let subscription = ConsumerProtocolSubscription {
            topics: vec![TOPIC.into()],
            ..Default::default()
        };
        JoinGroupRequest {
            group_id: GROUP.into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            member_id: member_id.into(),
            protocol_type: "consumer".into(),
            protocols: vec![JoinGroupRequestProtocol {
                name: "range".into(),
                metadata: subscription.to_bytes(0).unwrap(),
                unknown_tagged_fields: Vec::new(),
            }],
            ..Default::default()
        }
    }

    /// Asks to join: the first JoinGroup gets MEMBER_ID_REQUIRED (KIP-394),
    /// the second parks until the group's members have rejoined.
    fn start(mock: &mut State, now: Instant) -> Other {
        let first = match mock
            .groups
            .join(now, Self::VERSION, "other", &Self::join_request(""))
        {
            Step::Done(r) => r,
            Step::Wait(_) => panic!("a new member's first JoinGroup is answered at once"),
        };
        assert_eq!(first.error_code, crate::ErrorCode::MemberIdRequired.code());
        let join = match mock.groups.join(
            now,
            Self::VERSION,
            "other",
            &Self::join_request(&first.member_id),
        ) {
            Step::Wait(ticket) => ticket,
            Step::Done(r) => panic!("joined at once: {r:?}"),
        };
        Other {
            member_id: first.member_id,
            generation: -1,
            join: Some(join),
            sync: None,
            assignment: None,
        }
    }

    /// Moves on when the coordinator has answered.
    fn step(&mut self, mock: &mut State, now: Instant) {
        if let Some(ticket) = &self.join {
            let Some(joined) = mock.groups.poll_join(now, ticket) else {
                return;
            };
            assert_eq!(joined.error_code, 0, "{joined:?}");
            self.join = None;
            self.generation = joined.generation_id;
            let sync = SyncGroupRequest {
                group_id: GROUP.into(),
                generation_id: joined.generation_id,
                member_id: self.member_id.clone(),
                ..Default::default()
            };
            match mock.groups.sync(now, Self::VERSION, &sync) {
                Step::Wait(ticket) => self.sync = Some(ticket),
                Step::Done(r) => self.assignment = Some(decode_assignment(r.assignment)),
            }
        }
        if let Some(ticket) = &self.sync {
            if let Some(synced) = mock.groups.poll_sync(now, ticket) {
                assert_eq!(synced.error_code, 0, "{synced:?}");
                self.sync = None;
                self.assignment = Some(decode_assignment(synced.assignment));
            }
        }
    }
}

fn decode_assignment(bytes: Bytes) -> BTreeSet<TopicPartition> {
    let (_, assignment) = ConsumerProtocolAssignment::from_bytes(bytes).unwrap();
    assignment
        .assigned_partitions
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|&p| TopicPartition::new(&t.topic, p))
        })
        .collect()
}

#[test]
fn a_second_member_joining_splits_the_partitions() {
    let mut pair = Pair::new(3, 1, group_config);
    pair.mock.create_topic(TOPIC, 4, None).unwrap();
    let _ = join_alone(&mut pair);
    let first_generation = pair.mock.groups.snapshot(GROUP).unwrap().generation_id;
    pair.poll_for(Duration::from_secs(1), Duration::from_millis(100));

    let mut other = Other::start(&mut pair.mock, pair.now);
    // Our member hears of the rebalance at its next heartbeat, rejoins,
    // and (as the leader) assigns the partitions to both.
    for _ in 0..100 {
        pair.advance(Duration::from_millis(100));
        pair.poll();
        other.step(&mut pair.mock, pair.now);
        if other.assignment.is_some() && pair.core.membership().unwrap().is_stable() {
            break;
        }
    }
    let theirs = other
        .assignment
        .clone()
        .expect("the second member got an assignment");
    let ours = pair.assignment();
    assert_eq!(ours, [tp(0), tp(1)].into_iter().collect());
    assert_eq!(theirs, [tp(2), tp(3)].into_iter().collect());
    let snapshot = pair.mock.groups.snapshot(GROUP).unwrap();
    assert_eq!(snapshot.state, GroupState::Stable);
    assert_eq!(snapshot.members.len(), 2);
    assert_eq!(snapshot.generation_id, first_generation + 1);
    assert_eq!(other.generation, snapshot.generation_id);
    // The fetcher follows the group: it fetches only what it owns now.
    assert_eq!(pair.core.fetcher().assignment(), ours);
}

#[test]
fn a_member_that_stops_polling_leaves_after_max_poll_interval() {
    let mut pair = Pair::new(1, 1, group_config);
    pair.mock.create_topic(TOPIC, 2, None).unwrap();
    let _ = join_alone(&mut pair);
    let last_poll = pair.now;
    // The application works for 40 s without polling; heartbeats go on
    // until max.poll.interval.ms (30 s) has passed since the last poll.
    pair.advance(Duration::from_secs(40));
    let leaves = pair.served(ApiKey::LeaveGroup);
    assert_eq!(leaves.len(), 1, "{:?}", pair.log);
    assert_eq!(
        pair.start + leaves[0].0,
        last_poll + Duration::from_secs(30)
    );
    let heartbeats_after = pair
        .served(ApiKey::Heartbeat)
        .iter()
        .filter(|h| h.0 > leaves[0].0)
        .count();
    assert_eq!(heartbeats_after, 0);
    let snapshot = pair.mock.groups.snapshot(GROUP).unwrap();
    assert!(snapshot.members.is_empty(), "{snapshot:?}");
    assert!(pair.assignment().is_empty());

    // The next poll joins again.
    let joins = pair.served(ApiKey::JoinGroup).len();
    pair.poll_for(Duration::from_secs(1), Duration::from_millis(100));
    assert!(pair.served(ApiKey::JoinGroup).len() > joins);
    assert_eq!(pair.assignment(), [tp(0), tp(1)].into_iter().collect());
    assert_eq!(pair.mock.groups.snapshot(GROUP).unwrap().members.len(), 1);
}

#[test]
fn a_lost_coordinator_is_found_again() {
    let mut pair = Pair::new(3, 1, group_config);
    pair.mock.create_topic(TOPIC, 2, Some(&[1, 1])).unwrap();
    pair.mock.coordinators.insert(GROUP.into(), 2);
    let _ = join_alone(&mut pair);
    let generation = pair.mock.groups.snapshot(GROUP).unwrap().generation_id;
    pair.poll_for(Duration::from_secs(1), Duration::from_millis(100));
    assert!(pair.connected_brokers().contains(&2));

    // The coordinator's broker goes down; its connection closes and
    // connecting again is refused. A second later the group's coordinator
    // moves to broker 3 (as Kafka elects a new leader of the group's
    // `__consumer_offsets` partition).
    pair.broker_down(2);
    let down = pair.elapsed();
    pair.poll_for(Duration::from_secs(1), Duration::from_millis(100));
    pair.mock.coordinators.insert(GROUP.into(), 3);
    let moved = pair.elapsed();
    pair.poll_for(Duration::from_secs(8), Duration::from_millis(100));

    let finds: Vec<_> = pair
        .served(ApiKey::FindCoordinator)
        .into_iter()
        .filter(|f| f.0 >= down)
        .collect();
    assert!(
        !finds.is_empty(),
        "FindCoordinator after the loss: {:?}",
        pair.log
    );
    let beats: Vec<_> = pair
        .served(ApiKey::Heartbeat)
        .into_iter()
        .filter(|h| h.0 > moved)
        .collect();
    assert!(beats.len() >= 2, "{beats:?}");
    assert!(beats.iter().all(|b| b.1 == 3), "{beats:?}");
    // Found within the session: the same generation, the same partitions.
    let snapshot = pair.mock.groups.snapshot(GROUP).unwrap();
    assert_eq!(snapshot.generation_id, generation);
    assert_eq!(snapshot.members.len(), 1);
    assert_eq!(pair.assignment(), [tp(0), tp(1)].into_iter().collect());
    assert!(!pair.connected_brokers().contains(&2));
}

/// 3 brokers, topic [`TOPIC`] with `partitions` partitions, a KIP-848
/// group (coordinated by broker 3, heartbeats every `heartbeat`) that the
/// pair's member is to join from the earliest offsets, without
/// auto-commit; nothing subscribed yet.
fn kip848_pair(partitions: i32, heartbeat: Duration) -> Pair {
    let mut pair = Pair::new(3, 1, |b| {
        b.group_id(GROUP)
            .group_protocol(GroupProtocol::Consumer)
            .enable_auto_commit(false)
            .auto_offset_reset(crate::OffsetReset::Earliest)
    });
    pair.mock.consumer_groups.heartbeat_interval = heartbeat;
    pair.mock.create_topic(TOPIC, partitions, None).unwrap();
    pair.mock.coordinators.insert(GROUP.into(), 3);
    pair
}

#[test]
fn a_consumer_group_member_kip_848_gets_its_partitions_and_commits() {
    let mut pair = kip848_pair(3, Duration::from_secs(2));
    for p in 0..3 {
        pair.produce(TOPIC, p, 4);
    }
    pair.subscribe(TOPIC);
    let records = pair.poll_for(Duration::from_secs(7), Duration::from_millis(100));
    assert_eq!(records.len(), 12);
    assert_eq!(pair.assignment(), (0..3).map(tp).collect());
    // ConsumerGroupHeartbeat to the coordinator only, and no classic
    // group API at all.
    let beats = pair.served(ApiKey::ConsumerGroupHeartbeat);
    assert!(beats.iter().all(|b| b.1 == 3), "{beats:?}");
    assert!(pair.served(ApiKey::JoinGroup).is_empty());
    assert!(pair.served(ApiKey::Heartbeat).is_empty());
    // Once stable, every heartbeat.interval.ms the broker gave (2 s).
    let steady: Vec<Duration> = beats
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .skip_while(|gap| *gap < Duration::from_secs(2))
        .collect();
    assert!(steady.len() >= 2, "{beats:?}");
    assert!(
        steady.iter().all(|gap| *gap == Duration::from_secs(2)),
        "{beats:?}"
    );

    let id = pair.core.commit(pair.now, None);
    pair.commit_result(id).unwrap();
    for p in 0..3 {
        assert_eq!(
            pair.mock.groups.committed(GROUP, TOPIC, p),
            Some(4),
            "partition {p}"
        );
    }
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);
}

#[test]
fn a_consumer_in_a_rack_reads_from_its_replica_and_asks_the_leader_only_when_each_lease_ends() {
    use crate::events::Purpose;
    // Broker 1 leads the partition (and is the bootstrap address); brokers
    // 2 and 3 follow it. The consumer is in r2: the leader names broker 2
    // (KIP-392) for metadata.max.age.ms (30 s); a connection with nothing
    // to carry closes after 10 s.
    let mut pair = Pair::new(3, 1, |b| {
        b.auto_offset_reset(crate::OffsetReset::Earliest)
            .client_rack("r2")
            .metadata_max_age(Duration::from_secs(30))
            .connections_max_idle(Some(Duration::from_secs(10)))
    });
    for (id, rack) in [(1, "r1"), (2, "r2"), (3, "r3")] {
        pair.mock.brokers.get_mut(&id).unwrap().rack = Some(rack.into());
    }
    pair.mock.create_topic(TOPIC, 1, Some(&[1])).unwrap();
    pair.mock.topics.get_mut(TOPIC).unwrap().partitions[0].followers = vec![2, 3];
    pair.produce(TOPIC, 0, 5);
    pair.core
        .set_mode(pair.now, Mode::Assigned([tp(0)].into_iter().collect()));
    let census = |pair: &Pair| -> Vec<(Purpose, Option<i32>)> {
        pair.core
            .connections(pair.now)
            .into_iter()
            .map(|c| (c.purpose, c.broker))
            .collect()
    };
    let mut records = pair.poll_for(Duration::from_secs(2), Duration::from_millis(100));
    let fetches = pair.served(ApiKey::Fetch);
    // The leader is asked once and names broker 2, which serves the rest.
    assert_eq!(fetches[0].1, 1);
    assert!(fetches[1..].iter().all(|f| f.1 == 2), "{fetches:?}");
    let named = fetches[0].0;
    assert_eq!(
        census(&pair),
        [(Purpose::Leader, Some(1)), (Purpose::Replica, Some(2))]
    );
    // The leader connection has nothing to carry: closed at exactly
    // connections.max.idle.ms after its last answer (the Fetch naming the
    // replica); the replica connection, long-polling, stays.
    pair.advance(named + Duration::from_secs(10) - Duration::from_millis(1) - pair.elapsed());
    assert_eq!(census(&pair).len(), 2);
    pair.advance(Duration::from_millis(1));
    assert_eq!(census(&pair), [(Purpose::Replica, Some(2))]);
    // Records keep coming from the replica.
    pair.produce(TOPIC, 0, 3);
    records.extend(pair.poll_for(Duration::from_secs(2), Duration::from_millis(100)));
    let lease_end = named + Duration::from_secs(30);
    records.extend(pair.poll_for(
        lease_end - Duration::from_millis(1) - pair.elapsed(),
        Duration::from_millis(100),
    ));
    assert!(pair.served(ApiKey::Fetch)[1..].iter().all(|f| f.1 == 2));
    // The lease ends: the next Fetch goes to the leader (over a new leader
    // connection), which names broker 2 again, within the replica's long
    // poll (fetch.max.wait.ms, 500 ms) of the end. Metadata, 30 s old then
    // too, went over the replica connection (the only one left): no
    // bootstrap connection, no leader connection for it.
    records.extend(pair.poll_for(Duration::from_secs(1), Duration::from_millis(100)));
    let to_leader: Vec<Duration> = pair
        .served(ApiKey::Fetch)
        .iter()
        .filter(|f| f.1 == 1)
        .map(|f| f.0)
        .collect();
    assert_eq!(to_leader.len(), 2, "{to_leader:?}");
    assert!(
        to_leader[1] >= lease_end && to_leader[1] <= lease_end + Duration::from_millis(500),
        "{to_leader:?}, lease end {lease_end:?}"
    );
    assert_eq!(pair.core.fetcher().read_replica(&tp(0)), Some(2));
    let metadata = pair.served(ApiKey::Metadata);
    let refresh: Vec<(Duration, i32)> = metadata
        .iter()
        .copied()
        .filter(|m| m.0 > named + Duration::from_secs(10))
        .collect();
    assert_eq!(refresh, [(Duration::from_secs(30), 2)], "{metadata:?}");
    let offsets: Vec<i64> = records.iter().map(ConsumerRecord::offset).collect();
    assert_eq!(offsets, (0..8).collect::<Vec<i64>>());
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);
}

#[test]
fn a_classic_pattern_member_matches_every_topic_and_rejoins_when_one_appears() {
    // Classic protocol; the pattern matches `invoices` and, later,
    // `invoices-eu`; never `audit` nor the internal `__consumer_offsets`
    // (exclude.internal.topics, the default), though `.*`-like.
    let mut pair = Pair::new(3, 1, |b| {
        group_config(b).metadata_max_age(Duration::from_secs(5))
    });
    pair.mock.create_topic(TOPIC, 2, None).unwrap();
    pair.mock.create_topic("audit", 1, None).unwrap();
    pair.mock
        .create_topic("__consumer_offsets", 1, None)
        .unwrap();
    pair.produce(TOPIC, 0, 3);
    pair.subscribe_pattern("(invoices|__consumer_offsets).*");
    let records = pair.poll_for(Duration::from_secs(2), Duration::from_millis(100));
    assert_eq!(records.len(), 3);
    assert_eq!(pair.assigned_topics(), BTreeSet::from([TOPIC.to_owned()]));
    let joins = pair.served(ApiKey::JoinGroup).len();
    // Every Metadata request asked for every topic (a null array).
    assert!(
        pair.metadata_asked.iter().all(|m| m.2.is_none()),
        "{:?}",
        pair.metadata_asked
    );

    let created = pair.elapsed();
    pair.mock.create_topic("invoices-eu", 1, None).unwrap();
    pair.produce("invoices-eu", 0, 2);
    let more = pair.poll_for(Duration::from_secs(6), Duration::from_millis(100));
    // (The eager rejoin hands `invoices` back from its committed offset:
    // none here, so it is read again.)
    let new: Vec<_> = more.iter().filter(|r| r.topic() == "invoices-eu").collect();
    assert_eq!(new.len(), 2, "the new topic's records");
    assert_eq!(
        pair.assigned_topics(),
        BTreeSet::from([TOPIC.to_owned(), "invoices-eu".to_owned()])
    );
    // Seen at the next refresh, metadata.max.age.ms after the last one,
    // and a rejoin brought it.
    let refreshes: Vec<Duration> = pair
        .metadata_asked
        .iter()
        .map(|m| m.0)
        .filter(|t| *t > created)
        .collect();
    assert_eq!(
        refreshes
            .first()
            .map(|t| *t <= created + Duration::from_secs(5)),
        Some(true)
    );
    assert!(pair.served(ApiKey::JoinGroup).len() > joins);
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);

    // The topic goes: the subscription shrinks, with one more rejoin.
    let joins = pair.served(ApiKey::JoinGroup).len();
    pair.mock.topics.remove("invoices-eu");
    pair.poll_for(Duration::from_secs(6), Duration::from_millis(100));
    assert_eq!(pair.assigned_topics(), BTreeSet::from([TOPIC.to_owned()]));
    assert!(pair.served(ApiKey::JoinGroup).len() > joins);
}

#[test]
fn a_kip_848_regex_member_names_a_topic_created_later_by_its_id() {
    // The coordinator resolves the regex; the member learns of a topic
    // created after it subscribed only as an id in its assignment, and
    // looks it up with Metadata v12 by id.
    let mut pair = Pair::new(3, 1, |b| {
        b.group_id(GROUP)
            .group_protocol(GroupProtocol::Consumer)
            .enable_auto_commit(false)
            .auto_offset_reset(crate::OffsetReset::Earliest)
    });
    pair.mock.consumer_groups.heartbeat_interval = Duration::from_secs(1);
    pair.mock.consumer_groups.regex_refresh_interval = Duration::from_secs(2);
    pair.mock.create_topic(TOPIC, 2, None).unwrap();
    pair.mock.coordinators.insert(GROUP.into(), 3);
    pair.produce(TOPIC, 1, 4);
    pair.subscribe_pattern("invoices.*");
    let records = pair.poll_for(Duration::from_secs(3), Duration::from_millis(100));
    assert_eq!(records.len(), 4);
    assert_eq!(pair.assigned_topics(), BTreeSet::from([TOPIC.to_owned()]));

    let created = pair.elapsed();
    pair.mock
        .create_topic("invoices-eu", 2, Some(&[2, 2]))
        .unwrap();
    let id = pair.mock.topics["invoices-eu"].id;
    pair.produce("invoices-eu", 1, 3);
    let more = pair.poll_for(Duration::from_secs(5), Duration::from_millis(100));
    assert_eq!(more.len(), 3);
    assert!(more.iter().all(|r| r.topic() == "invoices-eu"));
    assert_eq!(
        pair.assigned_topics(),
        BTreeSet::from([TOPIC.to_owned(), "invoices-eu".to_owned()])
    );
    let by_id: Vec<&MetadataAsked> = pair
        .metadata_asked
        .iter()
        .filter(|m| m.0 >= created && m.2.as_ref().is_some_and(|t| t.iter().any(|e| e.1 == id)))
        .collect();
    assert_eq!(by_id.len(), 1, "{:?}", pair.metadata_asked);
    assert_eq!(by_id[0].1, 13);
    assert_eq!(by_id[0].2, Some(vec![(None, id)]));
    // Leaders of it: a connection to broker 2 for its fetches.
    assert!(pair.connected_brokers().contains(&2));
    // Only ConsumerGroupHeartbeat, to the coordinator.
    assert!(pair.served(ApiKey::JoinGroup).is_empty());
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);
}

/// A partition missing from the metadata is reported once it has been
/// missing for `topic.metadata.propagation.max.ms`, not before, and
/// without waiting for the application to poll again and again.
#[test]
fn a_missing_topic_is_reported_when_the_propagation_time_ends() {
    // Metadata for the missing topic is retried every 500 ms
    // (retry.backoff.ms): at 0, 0.5, 1.0 and
    // 1.5 s; the report is due at 1.2 s.
    let mut pair = Pair::new(3, 1, |b| {
        b.topic_metadata_propagation_max(Duration::from_millis(1200))
            .retry_backoff(Duration::from_millis(500))
    });
    pair.core.set_mode(
        pair.now,
        Mode::Assigned([TopicPartition::new("absent", 0)].into_iter().collect()),
    );
    pair.poll();
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);
    pair.advance(Duration::from_millis(1199));
    pair.poll();
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);
    // Reported by 1.35 s, within one step of the clock.
    pair.advance(Duration::from_millis(151));
    pair.poll();
    assert!(
        matches!(pair.errors.as_slice(), [crate::Error::Topic { .. }]),
        "{:?} (Metadata at {:?})",
        pair.errors,
        pair.served(ApiKey::Metadata)
    );
}

#[test]
fn a_partition_without_a_leader_is_reported_and_fetched_again_once_it_has_one() {
    let mut pair = assigned_two_leaders();
    assert_eq!(
        pair.poll_for(Duration::from_secs(2), Duration::from_millis(100))
            .len(),
        8
    );
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);

    // Partition 0's only replica goes down: the metadata names no leader
    // for it (LEADER_NOT_AVAILABLE).
    pair.broker_down(2);
    let no_leader = |errors: &[Error]| -> usize {
        errors
            .iter()
            .filter(|e| {
                matches!(e, Error::NoLeader { topic, partition: 0, code: crate::ErrorCode::LeaderNotAvailable } if topic == TOPIC)
            })
            .count()
    };
    // Not before `topic.metadata.propagation.max.ms` (5 s) has passed...
    pair.poll_for(Duration::from_millis(4900), Duration::from_millis(100));
    assert_eq!(no_leader(&pair.errors), 0, "{:?}", pair.errors);
    // ...then once, within seconds, while the refused connection was
    // reported on its own.
    pair.poll_for(Duration::from_millis(2100), Duration::from_millis(100));
    assert_eq!(no_leader(&pair.errors), 1, "{:?}", pair.errors);
    let reported = pair
        .errors
        .iter()
        .find(|e| matches!(e, Error::NoLeader { .. }))
        .unwrap();
    assert!(reported.is_retriable() && !reported.is_fatal());
    let text = reported.to_string();
    assert!(
        text.contains("partition 0")
            && text.contains(TOPIC)
            && text.contains("LEADER_NOT_AVAILABLE"),
        "{text}"
    );
    pair.poll_for(Duration::from_secs(10), Duration::from_millis(100));
    assert_eq!(no_leader(&pair.errors), 1, "{:?}", pair.errors);

    // Back: fetched again from where it stood, and nothing more reported.
    pair.mock.brokers.get_mut(&2).unwrap().up = true;
    pair.produce(TOPIC, 0, 2);
    pair.errors.clear();
    let more = pair.poll_for(Duration::from_secs(5), Duration::from_millis(100));
    let offsets: Vec<(i32, i64)> = more.iter().map(|r| (r.partition(), r.offset())).collect();
    assert_eq!(offsets, [(0, 5), (0, 6)]);
    assert_eq!(no_leader(&pair.errors), 0, "{:?}", pair.errors);
}

#[test]
fn a_partition_the_group_assigns_before_the_metadata_lists_it_is_fetched_within_seconds() {
    let mut pair = kip848_pair(2, Duration::from_secs(1));
    pair.subscribe(TOPIC);
    pair.poll_for(Duration::from_secs(5), Duration::from_millis(100));
    assert_eq!(pair.assignment(), [tp(0), tp(1)].into_iter().collect());

    // The topic grows: the coordinator assigns the new partition at the
    // next heartbeat, before the consumer's metadata (refreshed every
    // `metadata.max.age.ms`, 5 min) lists it.
    pair.mock
        .topics
        .get_mut(TOPIC)
        .unwrap()
        .partitions
        .push(crate::mock::state::Partition::new(2));
    pair.produce(TOPIC, 2, 3);
    let records = pair.poll_for(Duration::from_secs(5), Duration::from_millis(100));
    assert_eq!(pair.assignment(), (0..3).map(tp).collect());
    let offsets: Vec<(i32, i64)> = records
        .iter()
        .map(|r| (r.partition(), r.offset()))
        .collect();
    assert_eq!(offsets, [(2, 0), (2, 1), (2, 2)]);
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);
}

/// Whether the attempts at `times` (oldest first) are spaced as the retry
/// policy (`retry.backoff.ms` 100 doubling to `retry.backoff.max.ms` 1000,
/// ±20% jitter) allows: the `n`-th retry waits at least 80% of
/// `min(100 ms × 2^(n-1), 1 s)` after the attempt before it.
fn spaced_by_the_retry_policy(times: &[Duration]) -> Result<(), String> {
    for (n, pair) in times.windows(2).enumerate() {
        let wanted = Duration::from_millis(100)
            .saturating_mul(1 << n.min(10))
            .min(Duration::from_secs(1))
            .mul_f64(0.8);
        let gap = pair[1] - pair[0];
        if gap < wanted {
            return Err(format!(
                "retry {} came {gap:?} after the attempt before it, under {wanted:?}: {times:?}",
                n + 1
            ));
        }
    }
    Ok(())
}

/// Errors that pass by themselves (a coordinator loading its offsets after
/// a restart, one that moved), answered K times in a row to each group
/// API: each is retried under the one retry policy (no more requests than
/// K + 1 until the answer is good, spaced as the policy says), nothing
/// reaches `poll`, and the member joins and consumes every record.
#[test]
fn passing_group_errors_are_retried_under_the_retry_policy_on_every_group_api() {
    use crate::error::ErrorCode;
    const K: usize = 6;
    for code in [
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::CoordinatorNotAvailable,
    ] {
        for api in [
            ApiKey::FindCoordinator,
            ApiKey::OffsetFetch,
            ApiKey::JoinGroup,
            ApiKey::SyncGroup,
        ] {
            let mut pair = Pair::new(3, 1, group_config);
            pair.mock.create_topic(TOPIC, 2, None).unwrap();
            pair.mock.coordinators.insert(GROUP.into(), 2);
            pair.produce(TOPIC, 0, 3);
            pair.produce(TOPIC, 1, 2);
            pair.mock
                .errors
                .entry(api.code())
                .or_default()
                .extend([code; K]);
            pair.subscribe(TOPIC);
            let records = pair.poll_for(Duration::from_secs(15), Duration::from_millis(100));
            let what = format!("{api:?} answered {code} {K} times");
            assert_eq!(records.len(), 5, "{what}: {:?}", pair.log);
            let times: Vec<Duration> = pair.served(api).iter().map(|s| s.0).collect();
            // JoinGroup is sent twice when it succeeds (KIP-394's member id
            // round); SyncGroup's refusals may make the member join again.
            assert!(
                (K + 1..=K + 2).contains(&times.len()),
                "{what}: {} requests: {times:?}",
                times.len()
            );
            spaced_by_the_retry_policy(&times[..K + 1]).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(pair.errors.is_empty(), "{what}: {:?}", pair.errors);
        }
    }
}

/// A stable member's heartbeats answered COORDINATOR_LOAD_IN_PROGRESS: each
/// retry waits for the retry policy, the member keeps its partitions.
#[test]
fn heartbeats_refused_while_the_coordinator_loads_back_off() {
    use crate::error::ErrorCode;
    const K: usize = 6;
    let mut pair = Pair::new(3, 1, group_config);
    pair.mock.create_topic(TOPIC, 2, None).unwrap();
    pair.mock.coordinators.insert(GROUP.into(), 2);
    join_alone(&mut pair);
    let before = pair.served(ApiKey::Heartbeat).len();
    pair.mock
        .errors
        .entry(ApiKey::Heartbeat.code())
        .or_default()
        .extend([ErrorCode::CoordinatorLoadInProgress; K]);
    pair.poll_for(Duration::from_secs(9), Duration::from_millis(100));
    let times: Vec<Duration> = pair.served(ApiKey::Heartbeat)[before..]
        .iter()
        .map(|s| s.0)
        .collect();
    assert!(times.len() > K, "{times:?}");
    spaced_by_the_retry_policy(&times[..K + 1]).unwrap();
    assert!(pair.core.membership().unwrap().is_stable());
    assert_eq!(pair.assignment(), [tp(0), tp(1)].into_iter().collect());
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);
}

/// The application's commit answered COORDINATOR_LOAD_IN_PROGRESS K times
/// is sent again under the retry policy and lands, as the Java
/// consumer's `commitSync` does.
#[test]
fn an_application_commit_is_retried_while_the_coordinator_loads_and_lands() {
    use crate::error::ErrorCode;
    const K: usize = 5;
    let mut pair = Pair::new(3, 1, group_config);
    pair.mock.create_topic(TOPIC, 2, None).unwrap();
    pair.mock.coordinators.insert(GROUP.into(), 2);
    pair.produce(TOPIC, 0, 3);
    join_alone(&mut pair);
    pair.poll_for(Duration::from_secs(1), Duration::from_millis(100));
    pair.mock
        .errors
        .entry(ApiKey::OffsetCommit.code())
        .or_default()
        .extend([ErrorCode::CoordinatorLoadInProgress; K]);
    let id = pair.core.commit(pair.now, None);
    pair.commit_result(id).unwrap();
    assert_eq!(pair.mock.groups.committed(GROUP, TOPIC, 0), Some(3));
    let times: Vec<Duration> = pair
        .served(ApiKey::OffsetCommit)
        .iter()
        .map(|s| s.0)
        .collect();
    assert_eq!(times.len(), K + 1, "{times:?}");
    spaced_by_the_retry_policy(&times).unwrap();
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);
}

/// A commit refused with FENCED_LEADER_EPOCH (the coordinator knows a
/// newer leader epoch than the commit carries, as librdkafka's mock
/// cluster answers after a leader change) is not sent again with the same
/// offsets, which would be refused until `default.api.timeout.ms`: the
/// application's commit fails at once with a retriable error, and the
/// next commit lands.
#[test]
fn a_commit_refused_for_a_stale_leader_epoch_fails_at_once() {
    use crate::error::ErrorCode;
    let mut pair = Pair::new(3, 1, group_config);
    pair.mock.create_topic(TOPIC, 2, None).unwrap();
    pair.mock.coordinators.insert(GROUP.into(), 2);
    pair.produce(TOPIC, 0, 3);
    join_alone(&mut pair);
    pair.poll_for(Duration::from_secs(1), Duration::from_millis(100));
    pair.mock
        .errors
        .entry(ApiKey::OffsetCommit.code())
        .or_default()
        .push_back(ErrorCode::FencedLeaderEpoch);
    let id = pair.core.commit(pair.now, None);
    let e = pair.commit_result(id).unwrap_err();
    assert!(e.is_retriable(), "{e}");
    assert!(!e.is_fatal(), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("FENCED_LEADER_EPOCH") && text.contains("not committed"),
        "{text}"
    );
    assert_eq!(pair.served(ApiKey::OffsetCommit).len(), 1, "not sent again");
    assert_eq!(pair.mock.groups.committed(GROUP, TOPIC, 0), None);
    let id = pair.core.commit(pair.now, None);
    pair.commit_result(id).unwrap();
    assert_eq!(pair.mock.groups.committed(GROUP, TOPIC, 0), Some(3));
    assert!(pair.errors.is_empty(), "{:?}", pair.errors);
}

/// A rebalance refusing commits: an automatic commit refused with
/// REBALANCE_IN_PROGRESS (or UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION) never
/// reaches `poll`; the application's own commit fails with a retriable
/// error that says the group is rebalancing.
#[test]
fn a_commit_refused_for_a_rebalance_is_routine() {
    use crate::error::ErrorCode;
    for code in [
        ErrorCode::RebalanceInProgress,
        ErrorCode::UnknownMemberId,
        ErrorCode::IllegalGeneration,
    ] {
        let mut pair = Pair::new(3, 1, |b| {
            group_config(b)
                .enable_auto_commit(true)
                .auto_commit_interval(Duration::from_secs(1))
        });
        pair.mock.create_topic(TOPIC, 2, None).unwrap();
        pair.mock.coordinators.insert(GROUP.into(), 2);
        pair.produce(TOPIC, 0, 3);
        join_alone(&mut pair);
        pair.mock
            .errors
            .entry(ApiKey::OffsetCommit.code())
            .or_default()
            .extend([code; 2]);
        // The automatic commit meets the refusal; the member rejoins and the
        // next interval's commit lands.
        pair.poll_for(Duration::from_secs(5), Duration::from_millis(100));
        assert!(pair.errors.is_empty(), "{code}: {:?}", pair.errors);
        assert_eq!(
            pair.mock.groups.committed(GROUP, TOPIC, 0),
            Some(3),
            "{code}"
        );

        pair.mock
            .errors
            .entry(ApiKey::OffsetCommit.code())
            .or_default()
            .push_back(code);
        let id = pair.core.commit(pair.now, None);
        let e = pair.commit_result(id).unwrap_err();
        assert!(e.is_retriable(), "{code}: {e}");
        assert!(!e.is_fatal(), "{code}: {e}");
        let text = e.to_string();
        assert!(
            text.contains("rebalancing") && text.contains(&code.to_string()),
            "{text}"
        );
        pair.poll_for(Duration::from_secs(5), Duration::from_millis(100));
        assert!(pair.errors.is_empty(), "{code}: {:?}", pair.errors);
        assert!(pair.core.membership().unwrap().is_stable(), "{code}");
    }
}

/// OffsetFetch refused with GROUP_AUTHORIZATION_FAILED: named through
/// `poll` at once (not retriable), said again only after
/// `REPORT_AGAIN_AFTER`, and asked again under the retry policy (about
/// one request a second, not thousands); FindCoordinator refused so is
/// named the same way.
#[test]
fn a_group_refused_by_its_coordinator_is_named_at_once_and_asked_again_with_backoff() {
    use crate::error::ErrorCode;
    for api in [ApiKey::OffsetFetch, ApiKey::FindCoordinator] {
        let mut pair = Pair::new(3, 1, group_config);
        pair.mock.create_topic(TOPIC, 2, None).unwrap();
        pair.mock.coordinators.insert(GROUP.into(), 2);
        pair.mock
            .errors
            .entry(api.code())
            .or_default()
            .extend([ErrorCode::GroupAuthorizationFailed; 10_000]);
        pair.subscribe(TOPIC);
        pair.poll_for(Duration::from_secs(2), Duration::from_millis(100));
        let refusals = |pair: &Pair| {
            pair.errors
                .iter()
                .filter(|e| {
                    matches!(e, Error::Group { api: a, code: Some(ErrorCode::GroupAuthorizationFailed), stopped: false, .. } if *a == api)
                })
                .count()
        };
        assert_eq!(refusals(&pair), 1, "{api:?}: {:?}", pair.errors);
        let e = pair
            .errors
            .iter()
            .find(|e| matches!(e, Error::Group { .. }))
            .unwrap();
        assert!(!e.is_retriable(), "{e}");
        assert!(e.to_string().contains(GROUP), "{e}");
        pair.poll_for(Duration::from_secs(20), Duration::from_millis(100));
        assert_eq!(refusals(&pair), 1, "{api:?}: said once within a minute");
        // 22 s at 1 s apart at most (jitter: 0.8 s): about 25 requests.
        let asked = pair.served(api).len();
        assert!(
            (10..=32).contains(&asked),
            "{api:?}: {asked} requests in 22 s"
        );
        pair.poll_for(Duration::from_secs(40), Duration::from_millis(500));
        assert_eq!(refusals(&pair), 2, "{api:?}: said again after a minute");
    }
}
