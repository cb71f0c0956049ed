//! The cluster's state: its brokers, topics, group coordinators, producer
//! ids, the faults a test queued and what the brokers saw. One lock guards
//! it (`server.rs`); the request handlers (`api/`, through `respond.rs`)
//! and [`MockCluster`](super::MockCluster)'s methods read and change it
//! under that lock, and the consumer's unit tests (`consumer/pair.rs`)
//! step it with a manual clock.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::api::SERVED;
use super::consumer_group::ConsumerGroups;
use super::fetch_session::FetchSessions;
use super::group::{GroupSettings, Groups};
use super::producers::ProducerIds;
use super::sasl::SaslState;
use super::topic::MAX_PARTITIONS;
pub(crate) use super::topic::{Partition, Topic};
use super::{LostAnswer, MockEvent, MockEventKind, MockFetch};
use crate::error::ErrorCode;
use crate::protocol::{ApiKey, VersionRange};

/// The coordinator of a group or transactional id: the broker set for it,
/// else one chosen by its Java `String.hashCode`, so that placement is
/// stable across runs.
pub(crate) fn coordinator_of(set: &HashMap<String, i32>, brokers: &[i32], key: &str) -> i32 {
    if let Some(&b) = set.get(key) {
        return b;
    }
    let hash = key
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    brokers[(hash.unsigned_abs() as usize) % brokers.len()]
}

/// One broker.
#[derive(Debug)]
pub(crate) struct Broker {
    pub addr: SocketAddr,
    pub up: bool,
    /// Added before each answer.
    pub delay: Duration,
    /// Connections silent this long are closed by the broker.
    pub idle_timeout: Option<Duration>,
    /// Errors to answer the next requests of an API with, on this broker.
    pub errors: HashMap<i16, VecDeque<ErrorCode>>,
    /// The broker's fetch session cache (KIP-227).
    pub fetch_sessions: FetchSessions,
    /// Its rack (`broker.rack`), reported in Metadata and matched against
    /// a fetching client's RackId (KIP-392).
    pub rack: Option<String>,
}

/// Everything the cluster knows.
pub(crate) struct State {
    pub started: Instant,
    pub cluster_id: String,
    pub brokers: BTreeMap<i32, Broker>,
    pub topics: BTreeMap<String, Topic>,
    pub coordinators: HashMap<String, i32>,
    pub groups: Groups,
    /// Consumer groups of the KIP-848 protocol.
    pub consumer_groups: ConsumerGroups,
    /// Errors to answer the next requests of an API with, on any broker.
    pub errors: HashMap<i16, VecDeque<ErrorCode>>,
    /// Answers to lose, by API: the next requests take effect, then their
    /// answers are lost (`MockCluster::push_lost_answers`).
    pub lost_answers: HashMap<i16, VecDeque<LostAnswer>>,
    /// Producer ids given out, and the transactional ids' producers.
    pub producer_ids: ProducerIds,
    /// Versions narrowed by the test (`MockCluster::set_api_versions`).
    pub versions: HashMap<i16, VersionRange>,
    /// Partitions a topic created on demand gets (Metadata with
    /// `allow_auto_topic_creation`); `None` disables auto-creation.
    pub auto_create_partitions: Option<i32>,
    /// SASL users and settings; `None`: no SASL.
    pub sasl: Option<SaslState>,
    pub events: Vec<MockEvent>,
    /// The Fetch requests served, when recording is on
    /// (`MockCluster::record_fetches`).
    pub fetches: Option<Vec<MockFetch>>,
    /// Request bytes received (frames with their size prefix), by API key.
    pub request_bytes: HashMap<i16, u64>,
    pub next_connection: u64,
    pub next_topic: u64,
    pub shutdown: bool,
}

impl State {
    /// A cluster of brokers at `addrs` (all up), with no topics or groups,
    /// started at `started`.
    pub fn new(started: Instant, addrs: BTreeMap<i32, SocketAddr>, groups: GroupSettings) -> Self {
        let brokers = addrs
            .into_iter()
            .map(|(id, addr)| {
                let broker = Broker {
                    addr,
                    up: true,
                    delay: Duration::ZERO,
                    idle_timeout: None,
                    errors: HashMap::new(),
                    fetch_sessions: FetchSessions::new(id),
                    rack: None,
                };
                (id, broker)
            })
            .collect();
        State {
            started,
            // Each cluster an id of its own, as Kafka's (a client told
            // another cluster is behind its addresses sees it change).
            cluster_id: format!("lazykafka-mock-{}", next_cluster_number()),
            brokers,
            topics: BTreeMap::new(),
            coordinators: HashMap::new(),
            groups: Groups::new(groups),
            consumer_groups: ConsumerGroups::default(),
            errors: HashMap::new(),
            lost_answers: HashMap::new(),
            producer_ids: ProducerIds::default(),
            versions: HashMap::new(),
            auto_create_partitions: None,
            sasl: None,
            events: Vec::new(),
            fetches: None,
            request_bytes: HashMap::new(),
            next_connection: 0,
            next_topic: 0,
            shutdown: false,
        }
    }

    /// Records an event.
    pub fn record(&mut self, now: Instant, broker: i32, kind: MockEventKind) {
        self.events.push(MockEvent {
            at: now.saturating_duration_since(self.started),
            broker,
            kind,
        });
    }

    /// The versions served for `api`, if it is served.
    pub fn served(&self, api: ApiKey) -> Option<VersionRange> {
        if !SERVED.contains(&api) {
            return None;
        }
        // SaslHandshake v0 would be followed by raw SASL tokens outside
        // Kafka's framing (before KIP-152); the mock serves v1 only.
        let default = match api {
            ApiKey::SaslHandshake => VersionRange::new(1, 1),
            _ => api.client_versions(),
        };
        Some(self.versions.get(&api.code()).copied().unwrap_or(default))
    }

    /// Takes the next injected error for `api` on `broker`, if any: the
    /// broker's own queue first, then the cluster's.
    pub fn take_error(&mut self, broker: i32, api: ApiKey) -> Option<ErrorCode> {
        if let Some(code) = self
            .brokers
            .get_mut(&broker)
            .and_then(|b| b.errors.get_mut(&api.code()))
            .and_then(VecDeque::pop_front)
        {
            return Some(code);
        }
        self.errors
            .get_mut(&api.code())
            .and_then(VecDeque::pop_front)
    }

    /// Whether `broker` is up.
    pub fn is_up(&self, broker: i32) -> bool {
        self.brokers.get(&broker).is_some_and(|b| b.up)
    }

    /// The leader to report for a partition: -1 while its broker is down.
    /// The live brokers among `ids`, as (id, host, port, rack): what
    /// Kafka puts in a Fetch or Produce answer's `node_endpoints` for the
    /// leaders its `current_leader`s name (KIP-951).
    pub fn endpoints(
        &self,
        ids: impl IntoIterator<Item = i32>,
    ) -> Vec<(i32, String, i32, Option<String>)> {
        let ids: std::collections::BTreeSet<i32> = ids.into_iter().collect();
        ids.into_iter()
            .filter_map(|id| {
                let b = self.brokers.get(&id).filter(|b| b.up)?;
                Some((
                    id,
                    b.addr.ip().to_string(),
                    i32::from(b.addr.port()),
                    b.rack.clone(),
                ))
            })
            .collect()
    }

    pub fn live_leader(&self, p: &Partition) -> i32 {
        if self.is_up(p.leader) {
            p.leader
        } else {
            -1
        }
    }

    /// Creates a topic; leaders go round the brokers unless given.
    pub fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        leaders: Option<&[i32]>,
    ) -> Result<(), ErrorCode> {
        if name.is_empty() || name.len() > 249 || name == "." || name == ".." {
            return Err(ErrorCode::InvalidTopicException);
        }
        if self.topics.contains_key(name) {
            return Err(ErrorCode::TopicAlreadyExists);
        }
        // A bound, so a CreateTopics request cannot make the mock allocate
        // without limit.
        if !(1..=MAX_PARTITIONS).contains(&partitions) {
            return Err(ErrorCode::InvalidPartitions);
        }
        let ids: Vec<i32> = self.brokers.keys().copied().collect();
        let mut parts = Vec::new();
        for i in 0..partitions {
            let leader = match leaders {
                Some(l) => *l
                    .get(i as usize)
                    .ok_or(ErrorCode::InvalidReplicaAssignment)?,
                None => ids[(i as usize + self.topics.len()) % ids.len()],
            };
            if !self.brokers.contains_key(&leader) {
                return Err(ErrorCode::InvalidReplicaAssignment);
            }
            parts.push(Partition::new(leader));
        }
        self.next_topic += 1;
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&0x6c61_7a79_6b61_666bu64.to_be_bytes()); // "lazykafk"
        id[8..].copy_from_slice(&self.next_topic.to_be_bytes());
        self.topics.insert(
            name.to_owned(),
            Topic {
                id,
                partitions: parts,
            },
        );
        Ok(())
    }

    /// The broker coordinating `group`: the one set for it, else one chosen
    /// by a hash of the name (as Kafka maps a group to a partition of
    /// `__consumer_offsets`).
    pub fn coordinator(&self, group: &str) -> i32 {
        let ids: Vec<i32> = self.brokers.keys().copied().collect();
        coordinator_of(&self.coordinators, &ids, group)
    }

    /// The host and port clients reach broker `id` at.
    pub fn broker_entry(&self, id: i32) -> (String, i32) {
        let addr = self.brokers[&id].addr;
        (addr.ip().to_string(), i32::from(addr.port()))
    }

    /// Whether `broker` leads `part` at the epoch the client believes in
    /// (-1: not checked), per KIP-320.
    pub fn check_leader(&self, broker: i32, part: &Partition, epoch: i32) -> Result<(), ErrorCode> {
        if part.leader != broker {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        self.check_replica(broker, part, epoch)
    }

    /// Whether `broker` holds a copy of `part` (as leader or follower) and
    /// the client's leader epoch (-1: not checked) is the partition's:
    /// what a Fetch from a consumer needs (KIP-392 lets followers serve
    /// it; the epoch is fenced the same way, KIP-320).
    pub fn check_replica(
        &self,
        broker: i32,
        part: &Partition,
        epoch: i32,
    ) -> Result<(), ErrorCode> {
        if (part.leader != broker && !part.followers.contains(&broker)) || !self.is_up(broker) {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        if epoch >= 0 && epoch < part.leader_epoch {
            return Err(ErrorCode::FencedLeaderEpoch);
        }
        if epoch > part.leader_epoch {
            return Err(ErrorCode::UnknownLeaderEpoch);
        }
        Ok(())
    }
}

/// A number no other mock cluster of this process has.
fn next_cluster_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
