//! Metadata: the live brokers (with their racks), the cluster id, a
//! controller, and the topics asked for (every topic for a null list; by
//! id from v12): each partition's leader (-1 and LEADER_NOT_AVAILABLE
//! while it is down), epoch, replicas, ISR and offline replicas. A topic
//! not there is created when the client allows it and
//! `MockCluster::set_auto_create_topics` is on.

use crate::error::ErrorCode;
use crate::mock::respond::Received;
use crate::mock::state::{State, Topic};
use crate::mock::topic::is_internal_topic;
use crate::protocol::messages::metadata::{
    MetadataRequest, MetadataResponse, MetadataResponseBroker, MetadataResponsePartition,
    MetadataResponseTopic,
};
use crate::protocol::ApiKey;

/// The answer to a Metadata request.
pub(crate) fn answer(st: &mut State, r: &Received, req: &MetadataRequest) -> MetadataResponse {
    let error = st.take_error(r.broker, ApiKey::Metadata);
    let topics = wanted(st, req)
        .into_iter()
        .map(|(name, id)| describe_topic(st, r.version, req, (name, id), error))
        .collect();
    MetadataResponse {
        brokers: live_brokers(st),
        cluster_id: Some(st.cluster_id.clone()),
        controller_id: st
            .brokers
            .iter()
            .find(|(_, b)| b.up)
            .map_or(-1, |(&id, _)| id),
        topics,
        ..Default::default()
    }
}

/// The brokers that are up, as Metadata lists them.
fn live_brokers(st: &State) -> Vec<MetadataResponseBroker> {
    st.brokers
        .iter()
        .filter(|(_, b)| b.up)
        .map(|(&id, b)| MetadataResponseBroker {
            node_id: id,
            host: b.addr.ip().to_string(),
            port: i32::from(b.addr.port()),
            rack: b.rack.clone(),
            unknown_tagged_fields: Vec::new(),
        })
        .collect()
}

/// The topics asked for, as `(name, id)`: every topic for a null list; a
/// topic asked for by id (v12) is named when a topic has that id.
fn wanted(st: &State, req: &MetadataRequest) -> Vec<(Option<String>, [u8; 16])> {
    match &req.topics {
        None => st
            .topics
            .keys()
            .map(|n| (Some(n.clone()), [0; 16]))
            .collect(),
        Some(topics) => topics
            .iter()
            .map(|t| {
                let name = t.name.clone().filter(|n| !n.is_empty()).or_else(|| {
                    st.topics
                        .iter()
                        .find(|(_, topic)| topic.id == t.topic_id)
                        .map(|(n, _)| n.clone())
                });
                (name, t.topic_id)
            })
            .collect(),
    }
}

/// One topic of the answer: an error (an unknown id or name, or the
/// injected `error`), or its partitions. An unknown topic is created first
/// when the request allows it and auto-creation is on.
fn describe_topic(
    st: &mut State,
    version: i16,
    req: &MetadataRequest,
    (name, id): (Option<String>, [u8; 16]),
    error: Option<ErrorCode>,
) -> MetadataResponseTopic {
    let Some(name) = name else {
        return MetadataResponseTopic {
            error_code: ErrorCode::UnknownTopicId.code(),
            name: None,
            topic_id: id,
            ..Default::default()
        };
    };
    if let Some(code) = error {
        return MetadataResponseTopic {
            error_code: code.code(),
            name: Some(name),
            ..Default::default()
        };
    }
    if !st.topics.contains_key(&name) && req.allow_auto_topic_creation {
        if let Some(n) = st.auto_create_partitions {
            let _ = st.create_topic(&name, n, None);
        }
    }
    let Some(topic) = st.topics.get(&name) else {
        return MetadataResponseTopic {
            error_code: ErrorCode::UnknownTopicOrPartition.code(),
            name: Some(name),
            ..Default::default()
        };
    };
    MetadataResponseTopic {
        error_code: 0,
        name: Some(name.clone()),
        topic_id: if version >= 10 { topic.id } else { [0; 16] },
        is_internal: is_internal_topic(&name),
        partitions: describe_partitions(st, topic),
        ..Default::default()
    }
}

/// A topic's partitions: leader (-1 while down), epoch, replicas (the
/// leader, then its followers), the ISR (those up) and offline replicas.
fn describe_partitions(st: &State, topic: &Topic) -> Vec<MetadataResponsePartition> {
    topic
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let leader = st.live_leader(p);
            let replicas: Vec<i32> = std::iter::once(p.leader)
                .chain(p.followers.iter().copied())
                .collect();
            let (isr, offline): (Vec<i32>, Vec<i32>) = replicas.iter().partition(|&&b| st.is_up(b));
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
        .collect()
}
