//! The committed offsets of every group (classic, simple, and KIP-848
//! consumer groups, whose commits `api/offset_commit.rs` checks first):
//! OffsetCommit (versions 2-9) with Kafka's `validateOffsetCommit`, and
//! OffsetFetch (versions 1-9).

use std::time::Instant;

use super::rebalance::Group;
use super::{GroupState, Groups};
use crate::error::ErrorCode;
use crate::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitResponse,
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchResponse, OffsetFetchResponseGroup,
    OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};

/// Kafka's default `offset.metadata.max.bytes`: longer commit metadata is
/// refused with OFFSET_METADATA_TOO_LARGE.
const OFFSET_METADATA_MAX_LEN: usize = 4096;

/// A committed offset.
#[derive(Debug, Clone)]
pub(super) struct Committed {
    offset: i64,
    leader_epoch: i32,
    metadata: String,
}

impl Committed {
    /// What OffsetFetch reports for a partition with no commit.
    fn none() -> Self {
        Committed {
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
        }
    }
}

/// A topic's partitions and their commits, as OffsetFetch reports them.
type TopicOffsets = (String, Vec<(i32, Committed)>);

/// The topics and partitions an OffsetFetch names (`None`: every one
/// committed).
type Wanted = Option<Vec<(String, Vec<i32>)>>;

impl Groups {
    /// OffsetCommit (versions 2-9). `partition_exists` says whether the
    /// cluster has the partition (else UNKNOWN_TOPIC_OR_PARTITION, checked
    /// first as Kafka's request handler does).
    pub fn commit(
        &mut self,
        now: Instant,
        version: i16,
        req: &OffsetCommitRequest,
        partition_exists: &dyn Fn(&str, i32) -> bool,
    ) -> OffsetCommitResponse {
        let verdict = self.check_commit(now, version, req);
        if verdict.is_ok() {
            self.groups
                .entry(req.group_id.clone())
                .or_insert_with(|| Group::new(&req.group_id));
        }
        let mut topics = Vec::new();
        for t in &req.topics {
            let mut partitions = Vec::new();
            for p in &t.partitions {
                let error = if !partition_exists(&t.name, p.partition_index) {
                    ErrorCode::UnknownTopicOrPartition
                } else if let Err(e) = verdict {
                    e
                } else {
                    self.store(version, &req.group_id, &t.name, p)
                };
                partitions.push(OffsetCommitResponsePartition {
                    partition_index: p.partition_index,
                    error_code: error.code(),
                    ..OffsetCommitResponsePartition::default()
                });
            }
            topics.push(OffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions,
                ..OffsetCommitResponseTopic::default()
            });
        }
        OffsetCommitResponse {
            topics,
            ..OffsetCommitResponse::default()
        }
    }

    /// Whether the commit may be made (Kafka's `validateOffsetCommit`); a
    /// member's commit in Stable or PreparingRebalance counts as its
    /// heartbeat.
    fn check_commit(
        &mut self,
        now: Instant,
        version: i16,
        req: &OffsetCommitRequest,
    ) -> Result<(), ErrorCode> {
        let generation = req.generation_id_or_member_epoch;
        let instance = if version >= 7 {
            req.group_instance_id.as_deref()
        } else {
            None
        };
        match self.groups.get_mut(&req.group_id) {
            _ if req.group_id.is_empty() => Err(ErrorCode::InvalidGroupId),
            Some(g) => {
                let v = g.validate_commit(&req.member_id, instance, generation);
                if v.is_ok()
                    && matches!(g.state, GroupState::Stable | GroupState::PreparingRebalance)
                {
                    // A commit counts as a heartbeat (Kafka's commitOffset).
                    if let Some(m) = g.member_mut(&req.member_id) {
                        m.session_deadline = now + m.session_timeout;
                    }
                }
                v
            }
            // A "simple" group, created by its first commit.
            None if generation < 0 => Ok(()),
            // Version 9 says so; older versions keep the old answer.
            None if version >= 9 => Err(ErrorCode::GroupIdNotFound),
            None => Err(ErrorCode::IllegalGeneration),
        }
    }

    /// Stores one partition's commit, unless its metadata is too long.
    fn store(
        &mut self,
        version: i16,
        group: &str,
        topic: &str,
        p: &OffsetCommitRequestPartition,
    ) -> ErrorCode {
        let metadata = p.committed_metadata.as_deref().unwrap_or("");
        if metadata.len() > OFFSET_METADATA_MAX_LEN {
            return ErrorCode::OffsetMetadataTooLarge;
        }
        let committed = Committed {
            offset: p.committed_offset,
            leader_epoch: if version >= 6 {
                p.committed_leader_epoch
            } else {
                -1
            },
            metadata: metadata.to_owned(),
        };
        if let Some(g) = self.groups.get_mut(group) {
            g.offsets
                .insert((topic.to_owned(), p.partition_index), committed);
        }
        ErrorCode::None
    }

    /// OffsetFetch (versions 1-9): one group in the top-level fields up to
    /// version 7, the `groups` array from version 8. Partitions with no
    /// commit (or of an unknown group) come back as offset -1; a null topic
    /// list asks for every committed partition.
    pub fn fetch_offsets(
        &mut self,
        _now: Instant,
        version: i16,
        req: &OffsetFetchRequest,
    ) -> OffsetFetchResponse {
        if version >= 8 {
            return OffsetFetchResponse {
                groups: req.groups.iter().map(|g| self.fetch_group(g)).collect(),
                ..OffsetFetchResponse::default()
            };
        }
        let topics = req.topics.as_ref().map(|ts| {
            ts.iter()
                .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                .collect()
        });
        let found = Group::fetch(self.groups.get(&req.group_id), topics);
        OffsetFetchResponse {
            topics: found
                .into_iter()
                .map(|(name, parts)| OffsetFetchResponseTopic {
                    name,
                    partitions: parts
                        .into_iter()
                        .map(|(p, c)| OffsetFetchResponsePartition {
                            partition_index: p,
                            committed_offset: c.offset,
                            committed_leader_epoch: if version >= 5 { c.leader_epoch } else { -1 },
                            metadata: Some(c.metadata),
                            error_code: 0,
                            unknown_tagged_fields: Vec::new(),
                        })
                        .collect(),
                    ..OffsetFetchResponseTopic::default()
                })
                .collect(),
            error_code: 0,
            ..OffsetFetchResponse::default()
        }
    }

    /// One group of an OffsetFetch from version 8.
    fn fetch_group(&self, g: &OffsetFetchRequestGroup) -> OffsetFetchResponseGroup {
        let topics = g.topics.as_ref().map(|ts| {
            ts.iter()
                .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                .collect()
        });
        let found = Group::fetch(self.groups.get(&g.group_id), topics);
        OffsetFetchResponseGroup {
            group_id: g.group_id.clone(),
            topics: found
                .into_iter()
                .map(|(name, parts)| OffsetFetchResponseTopics {
                    name,
                    partitions: parts
                        .into_iter()
                        .map(|(p, c)| OffsetFetchResponsePartitions {
                            partition_index: p,
                            committed_offset: c.offset,
                            committed_leader_epoch: c.leader_epoch,
                            metadata: Some(c.metadata),
                            error_code: 0,
                            unknown_tagged_fields: Vec::new(),
                        })
                        .collect(),
                    ..OffsetFetchResponseTopics::default()
                })
                .collect(),
            error_code: 0,
            ..OffsetFetchResponseGroup::default()
        }
    }
}

impl Group {
    /// Kafka's `validateOffsetCommit` for a group that exists.
    fn validate_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), ErrorCode> {
        if generation < 0 && self.state == GroupState::Empty {
            // The admin client or a consumer without group management.
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.validate_member(member_id, instance_id)?;
            if generation != self.generation {
                return Err(ErrorCode::IllegalGeneration);
            }
        } else if self.state != GroupState::Empty {
            return Err(ErrorCode::UnknownMemberId);
        }
        if self.state == GroupState::CompletingRebalance {
            // The member has its JoinGroup answer but not its assignment.
            return Err(ErrorCode::RebalanceInProgress);
        }
        Ok(())
    }

    /// Committed offsets: the requested partitions (missing ones as -1), or
    /// every committed partition when `topics` is `None`.
    fn fetch(group: Option<&Group>, topics: Wanted) -> Vec<TopicOffsets> {
        let get = |t: &str, p: i32| {
            group
                .and_then(|g| g.offsets.get(&(t.to_owned(), p)).cloned())
                .unwrap_or_else(Committed::none)
        };
        match topics {
            Some(topics) => topics
                .into_iter()
                .map(|(t, ps)| {
                    let parts = ps.into_iter().map(|p| (p, get(&t, p))).collect();
                    (t, parts)
                })
                .collect(),
            None => {
                let mut all: Vec<TopicOffsets> = Vec::new();
                for ((t, p), c) in group.iter().flat_map(|g| g.offsets.iter()) {
                    match all.last_mut() {
                        Some((last, parts)) if last == t => parts.push((*p, c.clone())),
                        _ => all.push((t.clone(), vec![(*p, c.clone())])),
                    }
                }
                all
            }
        }
    }
}

impl Groups {
    /// The committed offset of a partition, if any.
    pub fn committed(&self, group_id: &str, topic: &str, partition: i32) -> Option<i64> {
        self.groups
            .get(group_id)?
            .offsets
            .get(&(topic.to_owned(), partition))
            .map(|c| c.offset)
    }
}
