//! Committed offsets: OffsetFetch and OffsetCommit, written for whichever
//! version the coordinator connection negotiated.

use crate::cluster::{RequestBody, Response};
use crate::error::ErrorCode;
use crate::group::TopicPartition;
use crate::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    OffsetCommitResponse,
};
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
    OffsetFetchResponse,
};
use crate::protocol::{ApiKey, DecodeError, EncodeError, Message, Writer};
use std::collections::{BTreeMap, BTreeSet};

/// An offset to commit, or one read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetAndEpoch {
    /// The next offset to consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record, when known.
    pub leader_epoch: Option<i32>,
}

fn group_topics(partitions: &BTreeSet<TopicPartition>) -> BTreeMap<String, Vec<i32>> {
    let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        topics
            .entry(tp.topic.clone())
            .or_default()
            .push(tp.partition);
    }
    topics
}

/// OffsetFetch for one group: v1-7 carry one group, v8+ a list (KIP-709).
#[derive(Debug)]
pub(crate) struct FetchCommitted {
    pub group: String,
    pub partitions: BTreeSet<TopicPartition>,
    pub require_stable: bool,
}

impl RequestBody for FetchCommitted {
    fn api_key(&self) -> ApiKey {
        ApiKey::OffsetFetch
    }

    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        let topics = group_topics(&self.partitions);
        // KIP-447: require_stable (v7+) makes the broker wait out pending
        // transactional commits instead of returning a stale offset.
        let require_stable = self.require_stable && version >= 7;
        let request = if version >= 8 {
            OffsetFetchRequest {
                groups: vec![OffsetFetchRequestGroup {
                    group_id: self.group.clone(),
                    topics: Some(
                        topics
                            .into_iter()
                            .map(|(name, partition_indexes)| OffsetFetchRequestTopics {
                                name,
                                partition_indexes,
                                ..Default::default()
                            })
                            .collect(),
                    ),
                    ..Default::default()
                }],
                require_stable,
                ..Default::default()
            }
        } else {
            OffsetFetchRequest {
                group_id: self.group.clone(),
                topics: Some(
                    topics
                        .into_iter()
                        .map(|(name, partition_indexes)| OffsetFetchRequestTopic {
                            name,
                            partition_indexes,
                            ..Default::default()
                        })
                        .collect(),
                ),
                require_stable,
                ..Default::default()
            }
        };
        request.encode(w, version)
    }
}

/// What an OffsetFetch answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommittedOffsets {
    /// Per partition: the committed offset, `None` when there is none.
    Offsets(BTreeMap<TopicPartition, Option<OffsetAndEpoch>>),
    /// A group-level (or partition-level) error.
    Error(ErrorCode),
}

pub(crate) fn read_committed(
    response: &Response,
    group: &str,
) -> Result<CommittedOffsets, DecodeError> {
    let r: OffsetFetchResponse = response.decode()?;
    let mut out = BTreeMap::new();
    let mut push = |topic: &str, partition: i32, offset: i64, epoch: i32, code: i16| {
        let code = ErrorCode::from_code(code);
        if code != ErrorCode::None {
            return Some(code);
        }
        out.insert(
            TopicPartition::new(topic, partition),
            (offset >= 0).then_some(OffsetAndEpoch {
                offset,
                leader_epoch: (epoch >= 0).then_some(epoch),
            }),
        );
        None
    };
    if response.version >= 8 {
        let Some(g) = r.groups.into_iter().find(|g| g.group_id == group) else {
            return Err(DecodeError::InvalidValue {
                what: "groups",
                reason: "the group asked for is missing",
            });
        };
        if g.error_code != 0 {
            return Ok(CommittedOffsets::Error(ErrorCode::from_code(g.error_code)));
        }
        for t in g.topics {
            for p in t.partitions {
                if let Some(code) = push(
                    &t.name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.error_code,
                ) {
                    return Ok(CommittedOffsets::Error(code));
                }
            }
        }
    } else {
        if r.error_code != 0 {
            return Ok(CommittedOffsets::Error(ErrorCode::from_code(r.error_code)));
        }
        for t in r.topics {
            for p in t.partitions {
                if let Some(code) = push(
                    &t.name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.error_code,
                ) {
                    return Ok(CommittedOffsets::Error(code));
                }
            }
        }
    }
    Ok(CommittedOffsets::Offsets(out))
}

/// OffsetCommit. `group_instance_id` only exists from v7 (KIP-345); below,
/// it is left out, which the coordinator accepts from dynamic-style commits.
#[derive(Debug)]
pub(crate) struct CommitOffsets {
    pub group: String,
    pub generation: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub offsets: BTreeMap<TopicPartition, OffsetAndEpoch>,
}

impl RequestBody for CommitOffsets {
    fn api_key(&self) -> ApiKey {
        ApiKey::OffsetCommit
    }

    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        let mut topics: BTreeMap<String, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for (tp, o) in &self.offsets {
            topics
                .entry(tp.topic.clone())
                .or_default()
                .push(OffsetCommitRequestPartition {
                    partition_index: tp.partition,
                    committed_offset: o.offset,
                    committed_leader_epoch: if version >= 6 {
                        o.leader_epoch.unwrap_or(-1)
                    } else {
                        -1
                    },
                    committed_metadata: Some(String::new()),
                    ..Default::default()
                });
        }
        OffsetCommitRequest {
            group_id: self.group.clone(),
            generation_id_or_member_epoch: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: if version >= 7 {
                self.group_instance_id.clone()
            } else {
                None
            },
            retention_time_ms: -1,
            topics: topics
                .into_iter()
                .map(|(name, partitions)| OffsetCommitRequestTopic {
                    name,
                    partitions,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
        .encode(w, version)
    }
}

/// The first error of an OffsetCommit response, `None` when all landed.
pub(crate) fn read_commit(response: &Response) -> Result<Option<ErrorCode>, DecodeError> {
    let r: OffsetCommitResponse = response.decode()?;
    Ok(r.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| ErrorCode::from_code(p.error_code))
        .find(|c| *c != ErrorCode::None))
}
