//! The metadata cache's contents (brokers, topics, partition leaders) and
//! the Metadata request and answer on the wire. When it is asked for is
//! the metadata manager's (`metadata_manager.rs`).

use super::conn::RequestBody;
use crate::protocol::messages::decode_response_body;
use crate::protocol::messages::metadata::{
    MetadataRequest, MetadataRequestTopic, MetadataResponse,
};
use crate::protocol::ErrorCode;
use crate::protocol::{ApiKey, DecodeError, EncodeError, Message, Writer};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

/// A broker as the metadata (or FindCoordinator) describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerAddress {
    /// Node id.
    pub id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
    /// Rack, if any.
    pub rack: Option<String>,
}

impl BrokerAddress {
    /// `host:port`, as dialled.
    pub fn addr(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// One partition's leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// The leader's node id, -1 when there is none.
    pub leader: i32,
    /// The leader epoch, -1 when unknown.
    pub leader_epoch: i32,
    /// The partition's error (LEADER_NOT_AVAILABLE, ...), `None` when fine.
    pub error: ErrorCode,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// The topic's error (UNKNOWN_TOPIC_OR_PARTITION, ...).
    pub error: ErrorCode,
    /// The topic id (all zeros when the broker does not send one).
    pub topic_id: [u8; 16],
    /// Whether it is an internal topic.
    pub is_internal: bool,
    /// Partitions by index.
    pub partitions: BTreeMap<i32, PartitionInfo>,
}

/// The cluster as the last Metadata response described it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    /// Brokers by node id.
    pub brokers: BTreeMap<i32, BrokerAddress>,
    /// Topics by name (only those asked for).
    pub topics: BTreeMap<String, TopicInfo>,
    /// The cluster id, when sent.
    pub cluster_id: Option<String>,
    /// The controller's node id, -1 when unknown.
    pub controller: i32,
}

impl Metadata {
    /// The leader of a partition, when known and live.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.topics
            .get(topic)
            .and_then(|t| t.partitions.get(&partition))
            .map(|p| p.leader)
            .filter(|l| *l >= 0)
    }

    /// Whether every topic in `topics` is known without error and each of
    /// its partitions has a leader.
    pub fn covers(&self, topics: &BTreeSet<String>) -> bool {
        topics.iter().all(|name| {
            self.topics.get(name).is_some_and(|t| {
                t.error == ErrorCode::None
                    && !t.partitions.is_empty()
                    && t.partitions.values().all(|p| p.leader >= 0)
            })
        })
    }
}

/// A partition's leader as a broker named it in a Fetch or Produce answer
/// that refused the partition (KIP-951: the partition's `current_leader`,
/// with the leader's address among the answer's `node_endpoints`), so the
/// client can go to it before any Metadata answer says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderHint {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The leader's node id.
    pub leader: i32,
    /// Its leader epoch.
    pub leader_epoch: i32,
}

impl Metadata {
    /// Takes `hint` when it is newer than what the cache knows: the
    /// partition is known, the hint's epoch is above the cached one (a
    /// leader epoch only grows, so an older or equal hint says nothing
    /// new), and the leader's address is known, from the cache or from
    /// `endpoints` (then added to the brokers). Returns whether it was
    /// taken.
    pub fn apply_hint(&mut self, hint: &LeaderHint, endpoints: &[BrokerAddress]) -> bool {
        if hint.leader < 0 || hint.leader_epoch < 0 {
            return false;
        }
        let Some(p) = self
            .topics
            .get(&hint.topic)
            .and_then(|t| t.partitions.get(&hint.partition))
        else {
            return false;
        };
        if p.leader_epoch >= hint.leader_epoch {
            return false;
        }
        if !self.brokers.contains_key(&hint.leader) {
            let Some(b) = endpoints.iter().find(|b| b.id == hint.leader) else {
                return false;
            };
            self.brokers.insert(b.id, b.clone());
        }
        let p = self
            .topics
            .get_mut(&hint.topic)
            .and_then(|t| t.partitions.get_mut(&hint.partition))
            .expect("found above");
        *p = PartitionInfo {
            leader: hint.leader,
            leader_epoch: hint.leader_epoch,
            error: ErrorCode::None,
        };
        true
    }

    /// Keeps, of `older`'s partitions, those whose leader epoch is above
    /// the one this (newer) answer gives for the same topic id (as the
    /// Java client's `Metadata.update`): a broker whose metadata lags
    /// answered, and the leader learned before (from a hint, or a broker
    /// ahead of it) stays, as long as this answer lists its broker.
    pub(crate) fn keep_newer_epochs(&mut self, older: &Metadata) {
        for (name, topic) in self.topics.iter_mut() {
            let Some(old) = older.topics.get(name) else {
                continue;
            };
            if old.topic_id != topic.topic_id || topic.topic_id == [0; 16] {
                continue;
            }
            for (index, p) in topic.partitions.iter_mut() {
                if let Some(o) = old.partitions.get(index) {
                    if o.leader_epoch > p.leader_epoch && self.brokers.contains_key(&o.leader) {
                        log::debug!(
                            "{name}-{index}: metadata answer with leader epoch {} kept at the known epoch {} (broker {})",
                            p.leader_epoch,
                            o.leader_epoch,
                            o.leader
                        );
                        *p = o.clone();
                    }
                }
            }
        }
    }
}

/// A Metadata request for `topics`, or for every topic when `all` (a
/// null topic array, v1+: what a classic pattern subscription matches
/// against).
pub(crate) fn request(
    topics: &BTreeSet<String>,
    all: bool,
    allow_auto_create: bool,
) -> Box<dyn RequestBody> {
    Box::new(MetadataRequest {
        topics: (!all).then(|| {
            topics
                .iter()
                .map(|name| MetadataRequestTopic {
                    name: Some(name.clone()),
                    ..MetadataRequestTopic::default()
                })
                .collect()
        }),
        allow_auto_topic_creation: allow_auto_create && !all,
        ..MetadataRequest::default()
    })
}

/// A Metadata request that names topics by id (KIP-848 assigns partitions
/// by topic id; an id the cache does not know is a topic the client never
/// asked for by name).
///
/// MetadataRequest.json: "Version 12 supports topic Id"; versions 10 and
/// 11 carry the field but "should not use the topicId field or set topic
/// name to null", and Kafka answers a request that does with
/// INVALID_REQUEST. Below v12 the request therefore asks for every topic
/// (a null array), whose answer carries each topic's id from v10 on.
#[derive(Debug)]
pub(crate) struct MetadataByTopicId(pub Vec<[u8; 16]>);

/// The first Metadata version that looks topics up by id.
pub(crate) const METADATA_BY_ID_VERSION: i16 = 12;

impl RequestBody for MetadataByTopicId {
    fn api_key(&self) -> ApiKey {
        ApiKey::Metadata
    }

    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        let topics = (version >= METADATA_BY_ID_VERSION).then(|| {
            self.0
                .iter()
                .map(|id| MetadataRequestTopic {
                    topic_id: *id,
                    name: None,
                    ..MetadataRequestTopic::default()
                })
                .collect()
        });
        MetadataRequest {
            topics,
            // An id names a topic that exists; nothing to create.
            allow_auto_topic_creation: false,
            ..MetadataRequest::default()
        }
        .encode(w, version)
    }
}

/// Reads a Metadata response into the cache's form, with its top-level
/// error code (v13, KIP-1102: REBOOTSTRAP_REQUIRED; `None` before).
pub(crate) fn parse(version: i16, body: Bytes) -> Result<(Metadata, ErrorCode), DecodeError> {
    let (resp, _) = decode_response_body::<MetadataResponse>(body, version)?;
    let brokers: BTreeMap<i32, BrokerAddress> = resp
        .brokers
        .into_iter()
        .map(|b| {
            (
                b.node_id,
                BrokerAddress {
                    id: b.node_id,
                    host: b.host,
                    port: b.port,
                    rack: b.rack,
                },
            )
        })
        .collect();
    let topics = resp
        .topics
        .into_iter()
        .filter_map(|t| {
            let name = t.name?;
            // A topic with an error has no partitions to use, whatever the
            // answer lists beside it (as the Java client's
            // `MetadataResponse::cluster`, which leaves such topics out;
            // librdkafka's mock lists the partitions and their leaders
            // with a topic error set).
            let usable = t.error_code == ErrorCode::None.code();
            let partitions = t
                .partitions
                .into_iter()
                .filter(|_| usable)
                .map(|p| {
                    (
                        p.partition_index,
                        PartitionInfo {
                            // A leader the response does not list among its
                            // brokers is none (as the Java client's
                            // `MetadataResponse` has it): Kafka lists live
                            // brokers only, so it is down and leadership
                            // has not moved yet. Dialling it cannot work.
                            leader: if brokers.contains_key(&p.leader_id) {
                                p.leader_id
                            } else {
                                -1
                            },
                            leader_epoch: p.leader_epoch,
                            error: ErrorCode::from_code(p.error_code),
                        },
                    )
                })
                .collect();
            Some((
                name,
                TopicInfo {
                    error: ErrorCode::from_code(t.error_code),
                    topic_id: t.topic_id,
                    is_internal: t.is_internal,
                    partitions,
                },
            ))
        })
        .collect();
    let metadata = Metadata {
        brokers,
        topics,
        cluster_id: resp.cluster_id,
        controller: resp.controller_id,
    };
    Ok((metadata, ErrorCode::from_code(resp.error_code)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Message;

    /// A partition's leader missing from the response's brokers (down,
    /// leadership not yet moved) is read as no leader.
    #[test]
    fn a_leader_not_among_the_brokers_is_no_leader() {
        use crate::protocol::messages::metadata::{
            MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
        };
        let response = MetadataResponse {
            brokers: vec![MetadataResponseBroker {
                node_id: 2,
                host: "b2".into(),
                port: 9092,
                ..Default::default()
            }],
            topics: vec![MetadataResponseTopic {
                name: Some("t".into()),
                partitions: [(0, 1), (1, 2), (2, -1)]
                    .into_iter()
                    .map(|(partition_index, leader_id)| MetadataResponsePartition {
                        partition_index,
                        leader_id,
                        leader_epoch: 5,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        for version in [1, 9, 12] {
            let mut w = Writer::new();
            response.encode(&mut w, version).unwrap();
            let (md, _) = parse(version, w.into_inner().freeze()).unwrap();
            assert_eq!(md.leader("t", 0), None, "v{version}");
            assert_eq!(md.leader("t", 1), Some(2), "v{version}");
            assert_eq!(md.leader("t", 2), None, "v{version}");
            if version >= 7 {
                assert_eq!(md.topics["t"].partitions[&0].leader_epoch, 5);
            }
            assert!(!md.covers(&BTreeSet::from(["t".to_owned()])));
        }
    }

    fn cache(epoch: i32, id: [u8; 16]) -> Metadata {
        let broker = |id: i32| BrokerAddress {
            id,
            host: format!("b{id}"),
            port: 9092,
            rack: None,
        };
        Metadata {
            brokers: [(1, broker(1)), (2, broker(2))].into(),
            topics: [(
                "t".to_owned(),
                TopicInfo {
                    error: ErrorCode::None,
                    topic_id: id,
                    is_internal: false,
                    partitions: [(
                        0,
                        PartitionInfo {
                            leader: 1,
                            leader_epoch: epoch,
                            error: ErrorCode::None,
                        },
                    )]
                    .into(),
                },
            )]
            .into(),
            cluster_id: None,
            controller: 1,
        }
    }

    /// KIP-951: a hint with a newer epoch moves the leader (its address
    /// from the answer's endpoints when the cache lacks it); an older or
    /// equal one, an unknown partition or an unknown address change
    /// nothing.
    #[test]
    fn a_newer_leader_hint_moves_the_leader() {
        let hint = |partition, leader, leader_epoch| LeaderHint {
            topic: "t".into(),
            partition,
            leader,
            leader_epoch,
        };
        let mut md = cache(5, [1; 16]);
        assert!(!md.apply_hint(&hint(0, 2, 5), &[]), "same epoch");
        assert!(!md.apply_hint(&hint(0, 2, 4), &[]), "older epoch");
        assert!(!md.apply_hint(&hint(1, 2, 6), &[]), "unknown partition");
        assert!(!md.apply_hint(&hint(0, 3, 6), &[]), "address unknown");
        assert_eq!(md, cache(5, [1; 16]));
        assert!(md.apply_hint(&hint(0, 2, 6), &[]));
        assert_eq!(md.leader("t", 0), Some(2));
        assert_eq!(md.topics["t"].partitions[&0].leader_epoch, 6);
        let three = BrokerAddress {
            id: 3,
            host: "b3".into(),
            port: 9093,
            rack: Some("r".into()),
        };
        assert!(md.apply_hint(&hint(0, 3, 7), std::slice::from_ref(&three)));
        assert_eq!(md.leader("t", 0), Some(3));
        assert_eq!(md.brokers[&3], three);
    }

    /// A Metadata answer older than what the cache knows (a lagging
    /// broker) does not take a partition back to an older leader epoch;
    /// a new topic id (the topic created again) or a leader no longer
    /// listed among the brokers does.
    #[test]
    fn an_older_answer_keeps_the_newer_epoch() {
        let known = cache(7, [1; 16]);
        let mut answer = cache(5, [1; 16]);
        answer
            .topics
            .get_mut("t")
            .unwrap()
            .partitions
            .get_mut(&0)
            .unwrap()
            .leader = 2;
        answer.keep_newer_epochs(&known);
        assert_eq!(
            answer.topics["t"].partitions[&0],
            known.topics["t"].partitions[&0]
        );

        let mut recreated = cache(0, [2; 16]);
        recreated.keep_newer_epochs(&known);
        assert_eq!(recreated.topics["t"].partitions[&0].leader_epoch, 0);

        let mut gone = cache(5, [1; 16]);
        gone.brokers.remove(&1);
        gone.topics
            .get_mut("t")
            .unwrap()
            .partitions
            .get_mut(&0)
            .unwrap()
            .leader = 2;
        gone.keep_newer_epochs(&known);
        assert_eq!(gone.leader("t", 0), Some(2));
    }

    /// A topic answered with an error has no partitions to use, even when
    /// the answer lists some with leaders (librdkafka's mock does).
    #[test]
    fn a_topic_with_an_error_has_no_usable_partition() {
        use crate::protocol::messages::metadata::{
            MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
        };
        let response = MetadataResponse {
            brokers: vec![MetadataResponseBroker {
                node_id: 1,
                host: "b1".into(),
                port: 9092,
                ..Default::default()
            }],
            topics: vec![MetadataResponseTopic {
                name: Some("t".into()),
                error_code: ErrorCode::LeaderNotAvailable.code(),
                partitions: vec![MetadataResponsePartition {
                    partition_index: 0,
                    leader_id: 1,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut w = Writer::new();
        response.encode(&mut w, 9).unwrap();
        let (md, _) = parse(9, w.into_inner().freeze()).unwrap();
        assert_eq!(md.leader("t", 0), None);
        assert_eq!(md.topics["t"].error, ErrorCode::LeaderNotAvailable);
        assert!(md.topics["t"].partitions.is_empty());
    }
}
