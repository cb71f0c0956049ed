//! The cluster's state and the answer to each request, without IO: the
//! server threads (`server.rs`) lock it, ask, and wait where an answer has
//! to wait (a Fetch below `min_bytes`, a JoinGroup or SyncGroup for other
//! members).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::fetch_session::FetchSessions;
use super::group::{GroupSettings, Groups};
use super::log::{AppendError, PartitionLog};
use super::producers::{Outcome, ProducerIds, ProducerStates};
use super::MockFetch;
use super::{MockEvent, MockEventKind};
use crate::error::ErrorCode;
use crate::protocol::messages::api_versions::{ApiVersionRange, ApiVersionsResponse};
use crate::protocol::messages::create_topics::{
    CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse,
};
use crate::protocol::messages::fetch::{
    EpochEndOffset as DivergingEpoch, FetchRequest, FetchResponse, FetchTopic,
    FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
};
use crate::protocol::messages::find_coordinator::{
    Coordinator, FindCoordinatorRequest, FindCoordinatorResponse,
};
use crate::protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::messages::list_offsets::{
    ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use crate::protocol::messages::metadata::{
    MetadataRequest, MetadataResponse, MetadataResponseBroker, MetadataResponsePartition,
    MetadataResponseTopic,
};
use crate::protocol::messages::offset_for_leader_epoch::{
    EpochEndOffset, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
};
use crate::protocol::messages::produce::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use crate::protocol::{ApiKey, VersionRange};

/// The APIs the mock serves, at the versions this crate's protocol layer
/// implements.
pub(crate) const SERVED: [ApiKey; 18] = [
    ApiKey::Produce,
    ApiKey::InitProducerId,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::Metadata,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::SyncGroup,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::ConsumerGroupHeartbeat,
    // Answered with ILLEGAL_SASL_STATE when SASL is off, as Kafka does on a
    // PLAINTEXT listener.
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
];

/// The most partitions a topic of the mock may have.
pub(crate) const MAX_PARTITIONS: i32 = 10_000;

/// `ListOffsets` timestamps with a meaning.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// The coordinator of a group or transactional id: the broker set for it,
/// else one chosen by its Java `String.hashCode`, so that placement is
/// stable across runs.
fn coordinator_of(set: &HashMap<String, i32>, brokers: &[i32], key: &str) -> i32 {
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

/// One partition.
#[derive(Debug)]
pub(crate) struct Partition {
    /// The broker that leads it (reported as -1 while that broker is down).
    pub leader: i32,
    /// The other brokers that replicate it (KIP-392: they serve Fetch from
    /// consumers too). They share the leader's log, so they are always in
    /// sync while up.
    pub followers: Vec<i32>,
    pub leader_epoch: i32,
    pub log: PartitionLog,
    /// The leader epoch cache: each epoch with the offset its leader
    /// started at, oldest first (Kafka's `LeaderEpochFileCache`; an epoch
    /// starts at the log end when its leader is elected).
    pub epochs: Vec<(i32, i64)>,
    /// What the log holds of each idempotent producer (Kafka's
    /// `ProducerStateManager`).
    pub producers: ProducerStates,
}

impl Partition {
    pub fn new(leader: i32) -> Self {
        Partition {
            leader,
            followers: Vec::new(),
            leader_epoch: 0,
            log: PartitionLog::default(),
            epochs: vec![(0, 0)],
            producers: ProducerStates::default(),
        }
    }

    /// A new leader epoch, starting at the log end.
    pub fn bump_epoch(&mut self) {
        self.leader_epoch += 1;
        self.epochs
            .push((self.leader_epoch, self.log.high_watermark()));
    }

    /// Cuts the log back to `offset` (at the batch boundary at or below
    /// it) and starts a new epoch there: what a leader that never had the
    /// later records would hold after an unclean election. Returns the new
    /// log end.
    pub fn truncate_to(&mut self, offset: i64) -> i64 {
        let end = self.log.truncate_after(offset);
        self.epochs.retain(|&(_, start)| start <= end);
        // As Kafka rebuilds it from what the log still holds.
        self.producers = ProducerStates::rebuild(self.log.headers());
        self.bump_epoch();
        end
    }

    /// The largest epoch at or below `requested` and the offset where it
    /// ends (the start of the next epoch, or the log end for the current
    /// one): Kafka's `LeaderEpochFileCache.endOffsetFor`. `(-1, -1)` when
    /// `requested` is newer than every epoch known.
    pub fn end_offset_for(&self, requested: i32) -> (i32, i64) {
        if requested == self.leader_epoch {
            return (requested, self.log.high_watermark());
        }
        let Some(&(_, next_start)) = self.epochs.iter().find(|(e, _)| *e > requested) else {
            return (-1, -1);
        };
        let floor = self
            .epochs
            .iter()
            .rev()
            .find(|(e, _)| *e <= requested)
            .map_or(requested, |(e, _)| *e);
        (floor, next_start)
    }
}

/// One topic.
#[derive(Debug)]
pub(crate) struct Topic {
    pub id: [u8; 16],
    pub partitions: Vec<Partition>,
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
    pub consumer_groups: super::consumer_group::ConsumerGroups,
    /// Errors to answer the next requests of an API with, on any broker.
    pub errors: HashMap<i16, VecDeque<ErrorCode>>,
    /// Answers to lose, by API: the next requests take effect, then their
    /// answers are lost (`MockCluster::push_lost_answers`).
    pub lost_answers: HashMap<i16, VecDeque<super::LostAnswer>>,
    /// Producer ids given out, and the transactional ids' producers.
    pub producer_ids: ProducerIds,
    /// Versions narrowed by the test (`MockCluster::set_api_versions`).
    pub versions: HashMap<i16, VersionRange>,
    /// Partitions a topic created on demand gets (Metadata with
    /// `allow_auto_topic_creation`); `None` disables auto-creation.
    pub auto_create_partitions: Option<i32>,
    /// SASL users and settings; `None`: no SASL.
    pub sasl: Option<super::sasl::SaslState>,
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
            cluster_id: "lazykafka-mock".into(),
            brokers,
            topics: BTreeMap::new(),
            coordinators: HashMap::new(),
            groups: Groups::new(groups),
            consumer_groups: super::consumer_group::ConsumerGroups::default(),
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
    fn live_leader(&self, p: &Partition) -> i32 {
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

    fn broker_entry(&self, id: i32) -> (String, i32) {
        let addr = self.brokers[&id].addr;
        (addr.ip().to_string(), i32::from(addr.port()))
    }

    // ---------------------------------------------------------------------
    // ApiVersions

    pub fn api_versions(&self, error: Option<ErrorCode>) -> ApiVersionsResponse {
        let api_keys = SERVED
            .iter()
            .filter_map(|&api| {
                let range = self.served(api)?;
                Some(ApiVersionRange {
                    api_key: api.code(),
                    min_version: range.min,
                    max_version: range.max,
                    unknown_tagged_fields: Vec::new(),
                })
            })
            .collect();
        ApiVersionsResponse {
            error_code: error.map_or(0, ErrorCode::code),
            api_keys,
            ..Default::default()
        }
    }

    // ---------------------------------------------------------------------
    // Metadata

    pub fn metadata(
        &mut self,
        version: i16,
        req: &MetadataRequest,
        error: Option<ErrorCode>,
    ) -> MetadataResponse {
        let brokers = self
            .brokers
            .iter()
            .filter(|(_, b)| b.up)
            .map(|(&id, b)| MetadataResponseBroker {
                node_id: id,
                host: b.addr.ip().to_string(),
                port: i32::from(b.addr.port()),
                rack: b.rack.clone(),
                unknown_tagged_fields: Vec::new(),
            })
            .collect();
        let controller_id = self
            .brokers
            .iter()
            .find(|(_, b)| b.up)
            .map_or(-1, |(&id, _)| id);
        let wanted: Vec<(Option<String>, [u8; 16])> = match &req.topics {
            None => self
                .topics
                .keys()
                .map(|n| (Some(n.clone()), [0; 16]))
                .collect(),
            Some(topics) => topics
                .iter()
                .map(|t| {
                    let name = t.name.clone().filter(|n| !n.is_empty()).or_else(|| {
                        self.topics
                            .iter()
                            .find(|(_, topic)| topic.id == t.topic_id)
                            .map(|(n, _)| n.clone())
                    });
                    (name, t.topic_id)
                })
                .collect(),
        };
        let mut topics = Vec::new();
        for (name, id) in wanted {
            let Some(name) = name else {
                topics.push(MetadataResponseTopic {
                    error_code: ErrorCode::UnknownTopicId.code(),
                    name: None,
                    topic_id: id,
                    ..Default::default()
                });
                continue;
            };
            if let Some(code) = error {
                topics.push(MetadataResponseTopic {
                    error_code: code.code(),
                    name: Some(name),
                    ..Default::default()
                });
                continue;
            }
            if !self.topics.contains_key(&name) && req.allow_auto_topic_creation {
                if let Some(n) = self.auto_create_partitions {
                    let _ = self.create_topic(&name, n, None);
                }
            }
            let Some(topic) = self.topics.get(&name) else {
                topics.push(MetadataResponseTopic {
                    error_code: ErrorCode::UnknownTopicOrPartition.code(),
                    name: Some(name),
                    ..Default::default()
                });
                continue;
            };
            let partitions = topic
                .partitions
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let leader = self.live_leader(p);
                    let replicas: Vec<i32> = std::iter::once(p.leader)
                        .chain(p.followers.iter().copied())
                        .collect();
                    let (isr, offline): (Vec<i32>, Vec<i32>) =
                        replicas.iter().partition(|&&b| self.is_up(b));
                    MetadataResponsePartition {
                        error_code: if leader < 0 {
                            ErrorCode::LeaderNotAvailable.code()
                        } else {
                            0
                        },
                        partition_index: i as i32,
                        leader_id: leader,
                        leader_epoch: p.leader_epoch,
                        replica_nodes: replicas,
                        isr_nodes: if leader < 0 { vec![] } else { isr },
                        offline_replicas: offline,
                        unknown_tagged_fields: Vec::new(),
                    }
                })
                .collect();
            topics.push(MetadataResponseTopic {
                error_code: 0,
                name: Some(name.clone()),
                topic_id: if version >= 10 { topic.id } else { [0; 16] },
                is_internal: is_internal_topic(&name),
                partitions,
                ..Default::default()
            });
        }
        MetadataResponse {
            brokers,
            cluster_id: Some(self.cluster_id.clone()),
            controller_id,
            topics,
            ..Default::default()
        }
    }

    // ---------------------------------------------------------------------
    // FindCoordinator

    pub fn find_coordinator(
        &self,
        version: i16,
        req: &FindCoordinatorRequest,
        error: Option<ErrorCode>,
    ) -> FindCoordinatorResponse {
        let answer = |key: &str| -> (i16, i32, String, i32) {
            if let Some(code) = error {
                return (code.code(), -1, String::new(), -1);
            }
            let id = self.coordinator(key);
            if !self.is_up(id) {
                return (
                    ErrorCode::CoordinatorNotAvailable.code(),
                    -1,
                    String::new(),
                    -1,
                );
            }
            let (host, port) = self.broker_entry(id);
            (0, id, host, port)
        };
        if version >= 4 {
            let coordinators = req
                .coordinator_keys
                .iter()
                .map(|key| {
                    let (error_code, node_id, host, port) = answer(key);
                    Coordinator {
                        key: key.clone(),
                        node_id,
                        host,
                        port,
                        error_code,
                        error_message: None,
                        unknown_tagged_fields: Vec::new(),
                    }
                })
                .collect();
            FindCoordinatorResponse {
                coordinators,
                ..Default::default()
            }
        } else {
            let (error_code, node_id, host, port) = answer(&req.key);
            FindCoordinatorResponse {
                error_code,
                node_id,
                host,
                port,
                ..Default::default()
            }
        }
    }

    // ---------------------------------------------------------------------
    // ListOffsets

    pub fn list_offsets(
        &self,
        broker: i32,
        req: &ListOffsetsRequest,
        error: Option<ErrorCode>,
    ) -> ListOffsetsResponse {
        let topics = req
            .topics
            .iter()
            .map(|t| ListOffsetsTopicResponse {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let mut out = ListOffsetsPartitionResponse {
                            partition_index: p.partition_index,
                            timestamp: -1,
                            offset: -1,
                            leader_epoch: -1,
                            ..Default::default()
                        };
                        let partition = self
                            .topics
                            .get(&t.name)
                            .and_then(|topic| topic.partitions.get(p.partition_index as usize));
                        let code = match (error, partition) {
                            (Some(code), _) => code,
                            (None, None) => ErrorCode::UnknownTopicOrPartition,
                            (None, Some(part)) => {
                                match self.check_leader(broker, part, p.current_leader_epoch) {
                                    Err(code) => code,
                                    Ok(()) => {
                                        out.leader_epoch = part.leader_epoch;
                                        let found = match p.timestamp {
                                            LATEST => Some((part.log.high_watermark(), -1)),
                                            EARLIEST => Some((part.log.log_start_offset(), -1)),
                                            MAX_TIMESTAMP => part.log.max_timestamp(),
                                            t => part.log.offset_for_time(t),
                                        };
                                        if let Some((offset, timestamp)) = found {
                                            out.offset = offset;
                                            out.timestamp = timestamp;
                                        }
                                        ErrorCode::None
                                    }
                                }
                            }
                        };
                        out.error_code = code.code();
                        out
                    })
                    .collect(),
                unknown_tagged_fields: Vec::new(),
            })
            .collect();
        ListOffsetsResponse {
            topics,
            ..Default::default()
        }
    }

    // ---------------------------------------------------------------------
    // OffsetForLeaderEpoch

    /// Where each asked epoch ends on this leader (KIP-101, KIP-320).
    pub fn offset_for_leader_epoch(
        &self,
        broker: i32,
        req: &OffsetForLeaderEpochRequest,
        error: Option<ErrorCode>,
    ) -> OffsetForLeaderEpochResponse {
        let topics = req
            .topics
            .iter()
            .map(|t| OffsetForLeaderTopicResult {
                topic: t.topic.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let mut out = EpochEndOffset {
                            partition: p.partition,
                            leader_epoch: -1,
                            end_offset: -1,
                            ..Default::default()
                        };
                        let part = self
                            .topics
                            .get(&t.topic)
                            .and_then(|topic| topic.partitions.get(p.partition as usize));
                        let code = match (error, part) {
                            (Some(code), _) => code,
                            (None, None) => ErrorCode::UnknownTopicOrPartition,
                            (None, Some(part)) => {
                                match self.check_leader(broker, part, p.current_leader_epoch) {
                                    Err(code) => code,
                                    Ok(()) => {
                                        (out.leader_epoch, out.end_offset) =
                                            part.end_offset_for(p.leader_epoch);
                                        ErrorCode::None
                                    }
                                }
                            }
                        };
                        out.error_code = code.code();
                        out
                    })
                    .collect(),
                unknown_tagged_fields: Vec::new(),
            })
            .collect();
        OffsetForLeaderEpochResponse {
            topics,
            ..Default::default()
        }
    }

    /// Whether `broker` leads `part` at the epoch the client believes in
    /// (-1: not checked), per KIP-320.
    fn check_leader(&self, broker: i32, part: &Partition, epoch: i32) -> Result<(), ErrorCode> {
        if part.leader != broker {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        self.check_replica(broker, part, epoch)
    }

    /// Whether `broker` holds a copy of `part` (as leader or follower) and
    /// the client's leader epoch (-1: not checked) is the partition's:
    /// what a Fetch from a consumer needs (KIP-392 lets followers serve
    /// it; the epoch is fenced the same way, KIP-320).
    fn check_replica(&self, broker: i32, part: &Partition, epoch: i32) -> Result<(), ErrorCode> {
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

    // ---------------------------------------------------------------------
    // Fetch

    /// The follower a leader names to a client in `rack` as the preferred
    /// read replica of `part` (KIP-392), as Kafka's
    /// `RackAwareReplicaSelector` picks: none when the client sends no rack
    /// or the leader is in its rack; else a follower in that rack (in
    /// sync: the mock's followers share the log; and up), the lowest id
    /// first; none when no follower is.
    fn preferred_read_replica(&self, part: &Partition, rack: &str) -> Option<i32> {
        if rack.is_empty() {
            return None;
        }
        let in_rack = |b: i32| {
            self.brokers
                .get(&b)
                .is_some_and(|b| b.rack.as_deref() == Some(rack))
        };
        if in_rack(part.leader) {
            return None;
        }
        part.followers
            .iter()
            .copied()
            .filter(|&b| self.is_up(b) && in_rack(b))
            .min()
    }

    /// Answers a Fetch of `topics` (the request's, or a fetch session's,
    /// KIP-227) from a client in `rack` (RackId, v11+; empty for none) as
    /// it stands now, with the bytes of records in it and whether it must
    /// be answered at once (a partition with an error, a diverging epoch
    /// or a preferred read replica).
    pub fn fetch(
        &self,
        broker: i32,
        (version, rack): (i16, &str),
        max_bytes: i32,
        topics: &[FetchTopic],
        error: Option<ErrorCode>,
    ) -> (FetchResponse, usize, bool) {
        let mut total = 0usize;
        let mut errors = false;
        let max_total = usize::try_from(max_bytes).unwrap_or(0);
        let mut responses = Vec::new();
        for t in topics {
            let (name, topic) = if version >= 13 {
                match self.topics.iter().find(|(_, topic)| topic.id == t.topic_id) {
                    Some((n, topic)) => (n.clone(), Some(topic)),
                    None => (String::new(), None),
                }
            } else {
                (t.topic.clone(), self.topics.get(&t.topic))
            };
            let mut partitions = Vec::new();
            for p in &t.partitions {
                let mut out = PartitionData {
                    partition_index: p.partition,
                    high_watermark: -1,
                    ..Default::default()
                };
                let part = topic.and_then(|topic| topic.partitions.get(p.partition as usize));
                let code = match (error, topic, part) {
                    (Some(code), _, _) => code,
                    (None, None, _) if version >= 13 => ErrorCode::UnknownTopicId,
                    (None, _, None) => ErrorCode::UnknownTopicOrPartition,
                    (None, _, Some(part)) => {
                        match self.check_replica(broker, part, p.current_leader_epoch) {
                            Err(code) => {
                                out.current_leader = LeaderIdAndEpoch {
                                    leader_id: self.live_leader(part),
                                    leader_epoch: part.leader_epoch,
                                    unknown_tagged_fields: Vec::new(),
                                };
                                code
                            }
                            Ok(()) => {
                                let log = &part.log;
                                out.high_watermark = log.high_watermark();
                                out.last_stable_offset = log.high_watermark();
                                out.log_start_offset = log.log_start_offset();
                                // v12+: a `last_fetched_epoch` is checked against the
                                // epoch cache, as Kafka's `Partition.fetchRecords`
                                // does (KIP-320 for consumers).
                                let end = (p.last_fetched_epoch >= 0)
                                    .then(|| part.end_offset_for(p.last_fetched_epoch));
                                if matches!(end, Some((_, -1))) {
                                    ErrorCode::OffsetOutOfRange
                                } else if let Some((epoch, end_offset)) = end.filter(|&(e, o)| {
                                    e < p.last_fetched_epoch || o < p.fetch_offset
                                }) {
                                    out.diverging_epoch = DivergingEpoch {
                                        epoch,
                                        end_offset,
                                        ..Default::default()
                                    };
                                    errors = true;
                                    ErrorCode::None
                                } else if p.fetch_offset < log.log_start_offset()
                                    || p.fetch_offset > log.high_watermark()
                                {
                                    ErrorCode::OffsetOutOfRange
                                } else if let Some(replica) = (part.leader == broker
                                    && version >= 11)
                                    .then(|| self.preferred_read_replica(part, rack))
                                    .flatten()
                                {
                                    // Kafka's `ReplicaManager.readFromLocalLog`: a
                                    // leader that prefers another replica for this
                                    // client sends no records, and answers at once.
                                    out.preferred_read_replica = replica;
                                    errors = true;
                                    ErrorCode::None
                                } else {
                                    let room = max_total.saturating_sub(total);
                                    let want = usize::try_from(p.partition_max_bytes)
                                        .unwrap_or(0)
                                        .min(room);
                                    // The first batch of the response is sent whole even
                                    // when larger than the limits (KIP-74).
                                    let records = if want == 0 && total > 0 {
                                        Bytes::new()
                                    } else {
                                        log.read(p.fetch_offset, want.max(1))
                                    };
                                    total += records.len();
                                    out.records = Some(records);
                                    ErrorCode::None
                                }
                            }
                        }
                    }
                };
                if code != ErrorCode::None {
                    errors = true;
                }
                out.error_code = code.code();
                if out.records.is_none() {
                    out.records = Some(Bytes::new());
                }
                partitions.push(out);
            }
            responses.push(FetchableTopicResponse {
                topic: name,
                topic_id: t.topic_id,
                partitions,
                unknown_tagged_fields: Vec::new(),
            });
        }
        let response = FetchResponse {
            responses,
            ..Default::default()
        };
        (response, total, errors)
    }

    /// A Fetch and its answer as [`super::MockCluster::fetches`] shows
    /// them, topic ids (v13+) named.
    pub fn describe_fetch(
        &self,
        now: Instant,
        (broker, connection): (i32, u64),
        version: i16,
        size: usize,
        req: &FetchRequest,
        resp: &FetchResponse,
    ) -> MockFetch {
        let name = |topic: &str, id: &[u8; 16]| -> String {
            if version >= 13 {
                self.topics
                    .iter()
                    .find(|(_, t)| &t.id == id)
                    .map_or_else(String::new, |(n, _)| n.clone())
            } else {
                topic.to_owned()
            }
        };
        MockFetch {
            at: now.saturating_duration_since(self.started),
            broker,
            connection,
            version,
            size,
            session_id: req.session_id,
            session_epoch: req.session_epoch,
            listed: req
                .topics
                .iter()
                .flat_map(|t| {
                    let n = name(&t.topic, &t.topic_id);
                    t.partitions.iter().map(move |p| (n.clone(), p.partition))
                })
                .collect(),
            forgotten: req
                .forgotten_topics_data
                .iter()
                .flat_map(|t| {
                    let n = name(&t.topic, &t.topic_id);
                    t.partitions.iter().map(move |&p| (n.clone(), p))
                })
                .collect(),
            error: ErrorCode::from_code(resp.error_code),
            response_session_id: resp.session_id,
            record_bytes: resp
                .responses
                .iter()
                .flat_map(|t| &t.partitions)
                .filter_map(|p| p.records.as_ref())
                .map(Bytes::len)
                .sum(),
            preferred_read_replicas: resp
                .responses
                .iter()
                .flat_map(|t| {
                    let n = name(&t.topic, &t.topic_id);
                    t.partitions
                        .iter()
                        .filter(|p| p.preferred_read_replica >= 0)
                        .map(move |p| (n.clone(), p.partition_index, p.preferred_read_replica))
                })
                .collect(),
            answered: resp
                .responses
                .iter()
                .flat_map(|t| {
                    let n = name(&t.topic, &t.topic_id);
                    t.partitions
                        .iter()
                        .map(move |p| (n.clone(), p.partition_index))
                })
                .collect(),
        }
    }

    // ---------------------------------------------------------------------
    // Produce

    /// Appends the request's batches; the partitions that received any.
    pub fn produce(
        &mut self,
        broker: i32,
        req: &ProduceRequest,
        error: Option<ErrorCode>,
    ) -> ProduceResponse {
        let mut responses = Vec::new();
        for t in &req.topic_data {
            let mut partition_responses = Vec::new();
            for p in &t.partition_data {
                let mut out = PartitionProduceResponse {
                    index: p.index,
                    base_offset: -1,
                    log_append_time_ms: -1,
                    log_start_offset: -1,
                    ..Default::default()
                };
                let code = match error {
                    Some(code) => code,
                    None => self.append(broker, &t.name, p.index, p.records.as_ref(), &mut out),
                };
                out.error_code = code.code();
                partition_responses.push(out);
            }
            responses.push(TopicProduceResponse {
                name: t.name.clone(),
                partition_responses,
                unknown_tagged_fields: Vec::new(),
            });
        }
        ProduceResponse {
            responses,
            ..Default::default()
        }
    }

    /// Appends one partition's record set of a Produce, as Kafka's leader
    /// does: every batch well-formed (else CORRUPT_MESSAGE, or
    /// UNSUPPORTED_FOR_MESSAGE_FORMAT below v2), a batch with a producer id
    /// has a sequence (`LogValidator`: else INVALID_RECORD), then the
    /// producers' epochs and sequences (`mock::producers`): a repeat of a
    /// batch already written is answered with its offsets (and its
    /// timestamp as the log append time, as `UnifiedLog.append` reports a
    /// duplicate) and not written again.
    fn append(
        &mut self,
        broker: i32,
        topic: &str,
        partition: i32,
        records: Option<&Bytes>,
        out: &mut PartitionProduceResponse,
    ) -> ErrorCode {
        let up = self.is_up(broker);
        let Some(part) = self
            .topics
            .get_mut(topic)
            .and_then(|t| t.partitions.get_mut(partition as usize))
        else {
            return ErrorCode::UnknownTopicOrPartition;
        };
        if part.leader != broker || !up {
            return ErrorCode::NotLeaderOrFollower;
        }
        let Some(records) = records.filter(|r| !r.is_empty()) else {
            return ErrorCode::InvalidRecord;
        };
        let batches = match PartitionLog::parse(records) {
            Ok(batches) => batches,
            Err(AppendError::Corrupt) => return ErrorCode::CorruptMessage,
            Err(AppendError::OldFormat) => return ErrorCode::UnsupportedForMessageFormat,
        };
        // From here on Kafka's answers carry the log start offset, errors
        // included (`ReplicaManager.appendToLocalLog`).
        out.log_start_offset = part.log.log_start_offset();
        if batches
            .iter()
            .any(|b| b.producer_id >= 0 && b.base_sequence < 0)
        {
            return ErrorCode::InvalidRecord;
        }
        let outcome = match part.producers.check(&batches, part.log.high_watermark()) {
            Ok(outcome) => outcome,
            Err(code) => return code,
        };
        match outcome {
            Outcome::Duplicate(original) => {
                out.base_offset = original.first_offset();
                out.log_append_time_ms = original.timestamp;
            }
            Outcome::Append(updated) => {
                out.base_offset = part.log.append_parsed(records, &batches, part.leader_epoch);
                part.producers.update(updated);
            }
        }
        ErrorCode::None
    }

    // ---------------------------------------------------------------------
    // InitProducerId

    /// Gives a producer id (see `mock::producers`): any broker for an
    /// idempotent producer, the transactional id's coordinator (placed as
    /// groups are, `coordinator`) for a transactional one.
    pub fn init_producer_id(
        &mut self,
        broker: i32,
        version: i16,
        req: &InitProducerIdRequest,
        error: Option<ErrorCode>,
    ) -> InitProducerIdResponse {
        if let Some(code) = error {
            return InitProducerIdResponse {
                error_code: code.code(),
                producer_id: -1,
                producer_epoch: -1,
                ..Default::default()
            };
        }
        let coordinators = &self.coordinators;
        let brokers: Vec<i32> = self.brokers.keys().copied().collect();
        let coordinates = |id: &str| coordinator_of(coordinators, &brokers, id) == broker;
        self.producer_ids.init(version, req, coordinates)
    }

    // ---------------------------------------------------------------------
    // CreateTopics

    pub fn create_topics(
        &mut self,
        version: i16,
        req: &CreateTopicsRequest,
        error: Option<ErrorCode>,
    ) -> CreateTopicsResponse {
        let topics = req
            .topics
            .iter()
            .map(|t| {
                let partitions = if t.num_partitions == -1 && t.assignments.is_empty() {
                    1
                } else if t.num_partitions == -1 {
                    t.assignments.len() as i32
                } else {
                    t.num_partitions
                };
                let leaders: Option<Vec<i32>> = (!t.assignments.is_empty()).then(|| {
                    let mut a: Vec<_> = t.assignments.iter().collect();
                    a.sort_by_key(|a| a.partition_index);
                    a.iter()
                        .map(|a| a.broker_ids.first().copied().unwrap_or(-1))
                        .collect()
                });
                let result = match error {
                    Some(code) => Err(code),
                    None if req.validate_only => {
                        if self.topics.contains_key(&t.name) {
                            Err(ErrorCode::TopicAlreadyExists)
                        } else if !(1..=MAX_PARTITIONS).contains(&partitions) {
                            Err(ErrorCode::InvalidPartitions)
                        } else {
                            Ok(())
                        }
                    }
                    None => self.create_topic(&t.name, partitions, leaders.as_deref()),
                };
                let created = result.is_ok() && !req.validate_only;
                CreatableTopicResult {
                    name: t.name.clone(),
                    topic_id: match self.topics.get(&t.name) {
                        Some(topic) if created && version >= 7 => topic.id,
                        _ => [0; 16],
                    },
                    error_code: result.err().map_or(0, ErrorCode::code),
                    num_partitions: if result.is_ok() { partitions } else { -1 },
                    replication_factor: if result.is_ok() { 1 } else { -1 },
                    configs: if version >= 5 { Some(Vec::new()) } else { None },
                    ..Default::default()
                }
            })
            .collect();
        CreateTopicsResponse {
            topics,
            ..Default::default()
        }
    }
}

/// Whether a topic partition exists (for offset commits).
pub(crate) fn partition_exists(
    topics: &BTreeMap<String, Topic>,
    topic: &str,
    partition: i32,
) -> bool {
    topics
        .get(topic)
        .is_some_and(|t| partition >= 0 && (partition as usize) < t.partitions.len())
}

/// Kafka's internal topics (`Topic.INTERNAL_TOPICS`): a topic of one of
/// these names, created in the mock, is described with IsInternal set, as
/// a broker describes its own (a classic pattern subscription leaves them
/// out under `exclude.internal.topics`).
pub(crate) fn is_internal_topic(name: &str) -> bool {
    matches!(
        name,
        "__consumer_offsets" | "__transaction_state" | "__share_group_state"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::RecordBatchBuilder;

    fn ten() -> Bytes {
        let mut b = RecordBatchBuilder::new(0);
        for i in 0..10 {
            b.append(i, None, Some(b"v"), &[]).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn the_epoch_cache_says_where_each_epoch_ends() {
        let mut p = Partition::new(1);
        p.log.append(&ten(), p.leader_epoch).unwrap(); // 0..10 at epoch 0
        assert_eq!(p.end_offset_for(0), (0, 10));
        p.bump_epoch(); // epoch 1 from 10
        p.log.append(&ten(), p.leader_epoch).unwrap(); // 10..20
        p.bump_epoch(); // epoch 2 from 20, nothing written yet
        assert_eq!(p.end_offset_for(0), (0, 10));
        assert_eq!(p.end_offset_for(1), (1, 20));
        assert_eq!(p.end_offset_for(2), (2, 20));
        assert_eq!(p.end_offset_for(3), (-1, -1), "an epoch not seen yet");
    }

    #[test]
    fn truncation_cuts_at_a_batch_boundary_and_starts_an_epoch_there() {
        let mut p = Partition::new(1);
        for _ in 0..5 {
            p.log.append(&ten(), p.leader_epoch).unwrap(); // 0..50 at epoch 0
        }
        assert_eq!(p.truncate_to(35), 30);
        assert_eq!(p.log.high_watermark(), 30);
        assert_eq!(p.leader_epoch, 1);
        // A consumer at 50 in epoch 0 learns the log diverges at 30.
        assert_eq!(p.end_offset_for(0), (0, 30));
        p.log.append(&ten(), p.leader_epoch).unwrap(); // 30..40 at epoch 1
        assert_eq!(p.end_offset_for(1), (1, 40));
        // A second cut drops the epochs that started after it.
        p.bump_epoch(); // epoch 2 from 40
        assert_eq!(p.truncate_to(20), 20);
        assert_eq!(p.epochs, [(0, 0), (3, 20)]);
        assert_eq!(p.end_offset_for(1), (0, 20));
    }
}

#[cfg(test)]
mod replica_tests {
    //! KIP-392 on the mock's side: racks, followers serving Fetch, and the
    //! preferred read replica a leader names (Kafka's
    //! `RackAwareReplicaSelector`).

    use super::*;
    use crate::protocol::messages::fetch::FetchPartition;
    use crate::records::RecordBatchBuilder;

    /// Brokers 1..=4 in racks r1, r2, r2, r4; topic "t" led by 1 with
    /// followers 2 and 3, holding 5 records.
    fn state() -> State {
        let addrs = (1..=4)
            .map(|id| (id, SocketAddr::from(([127, 0, 0, 1], 9000 + id as u16))))
            .collect();
        let settings = GroupSettings {
            initial_rebalance_delay: Duration::ZERO,
            min_session_timeout: Duration::from_millis(100),
            max_session_timeout: Duration::from_secs(60),
        };
        let mut st = State::new(Instant::now(), addrs, settings);
        for (id, rack) in [(1, "r1"), (2, "r2"), (3, "r2"), (4, "r4")] {
            st.brokers.get_mut(&id).unwrap().rack = Some(rack.into());
        }
        st.create_topic("t", 1, Some(&[1])).unwrap();
        let part = &mut st.topics.get_mut("t").unwrap().partitions[0];
        part.followers = vec![2, 3];
        let mut b = RecordBatchBuilder::new(0);
        for i in 0..5 {
            b.append(i, None, Some(b"v"), &[]).unwrap();
        }
        part.log.append(&b.build().unwrap(), 0).unwrap();
        st
    }

    fn topics() -> Vec<FetchTopic> {
        vec![FetchTopic {
            topic: "t".into(),
            partitions: vec![FetchPartition {
                partition: 0,
                fetch_offset: 0,
                partition_max_bytes: 1 << 20,
                current_leader_epoch: 0,
                ..Default::default()
            }],
            ..Default::default()
        }]
    }

    /// (error, preferred read replica, record bytes, answer at once) of a
    /// Fetch of t-0 from offset 0 to `broker` at `version` from `rack`.
    fn fetch(st: &State, broker: i32, version: i16, rack: &str) -> (ErrorCode, i32, usize, bool) {
        let (resp, bytes, now) = st.fetch(broker, (version, rack), 1 << 20, &topics(), None);
        let p = &resp.responses[0].partitions[0];
        (
            ErrorCode::from_code(p.error_code),
            p.preferred_read_replica,
            bytes,
            now,
        )
    }

    #[test]
    fn a_leader_names_the_lowest_follower_in_the_clients_rack_and_sends_no_records() {
        let st = state();
        let (code, replica, bytes, now) = fetch(&st, 1, 11, "r2");
        assert_eq!((code, replica, bytes), (ErrorCode::None, 2, 0));
        assert!(now, "answered at once, not held for max_wait_ms");
    }

    #[test]
    fn no_preferred_replica_without_a_rack_match_or_before_v11() {
        let st = state();
        // No rack, the leader's own rack, a rack with no follower, and a
        // version without the field: the leader serves the records.
        for (version, rack) in [(12, ""), (12, "r1"), (12, "r4"), (10, "r2")] {
            let (code, replica, bytes, _) = fetch(&st, 1, version, rack);
            assert_eq!(
                (code, replica),
                (ErrorCode::None, -1),
                "v{version} {rack:?}"
            );
            assert!(bytes > 0, "v{version} {rack:?}");
        }
    }

    #[test]
    fn a_follower_that_is_down_is_not_named() {
        let mut st = state();
        st.brokers.get_mut(&2).unwrap().up = false;
        assert_eq!(fetch(&st, 1, 12, "r2").1, 3);
        st.brokers.get_mut(&3).unwrap().up = false;
        let (_, replica, bytes, _) = fetch(&st, 1, 12, "r2");
        assert_eq!(replica, -1);
        assert!(bytes > 0);
    }

    #[test]
    fn followers_serve_fetch_and_other_brokers_do_not() {
        let st = state();
        for follower in [2, 3] {
            let (code, replica, bytes, _) = fetch(&st, follower, 12, "r2");
            assert_eq!((code, replica), (ErrorCode::None, -1), "{follower}");
            assert!(
                bytes > 0,
                "a follower sends records, never a replica to go to"
            );
        }
        assert_eq!(fetch(&st, 4, 12, "r2").0, ErrorCode::NotLeaderOrFollower);
    }

    #[test]
    fn metadata_lists_racks_replicas_and_the_isr() {
        let mut st = state();
        st.brokers.get_mut(&3).unwrap().up = false;
        let resp = st.metadata(12, &MetadataRequest::default(), None);
        let racks: Vec<(i32, Option<String>)> = resp
            .brokers
            .iter()
            .map(|b| (b.node_id, b.rack.clone()))
            .collect();
        assert_eq!(
            racks,
            [
                (1, Some("r1".into())),
                (2, Some("r2".into())),
                (4, Some("r4".into()))
            ]
        );
        let p = &resp.topics[0].partitions[0];
        assert_eq!(p.replica_nodes, [1, 2, 3]);
        assert_eq!(p.isr_nodes, [1, 2]);
        assert_eq!(p.offline_replicas, [3]);
    }
}
