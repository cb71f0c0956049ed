//! ListOffsets: the offsets at a timestamp, or the first and last offsets of
//! partitions (`offsets_for_times`, `beginning_offsets`, `end_offsets`), and
//! the requests of offset resets.

use super::TopicPartition;
use crate::cluster::{Metadata, RequestBody, Response};
use crate::protocol::messages::list_offsets::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic,
};
use crate::protocol::ErrorCode;
use crate::protocol::{ApiKey, DecodeError};
use crate::records::IsolationLevel;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Which offset of a partition to look up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OffsetSpec {
    /// The log start offset (ListOffsets timestamp -2).
    Earliest,
    /// The log end offset: the high watermark, or under read_committed the
    /// last stable offset (timestamp -1).
    Latest,
    /// The first offset whose record timestamp is at or after this many
    /// milliseconds since the Unix epoch (KIP-79). Kafka reads negative
    /// values as the special lookups above (and -3 as the offset of the
    /// largest timestamp, ListOffsets v7+); give a real timestamp here.
    Timestamp(i64),
}

impl OffsetSpec {
    /// The ListOffsets `timestamp` field.
    fn wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(t) => t,
        }
    }
}

/// An offset found by ListOffsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OffsetAndTimestamp {
    /// The offset.
    pub offset: i64,
    /// The timestamp of the record at `offset` for a timestamp lookup; -1
    /// for a lookup of the earliest or latest offset.
    pub timestamp: i64,
    /// The leader epoch of the record at `offset`, when the broker says.
    pub leader_epoch: Option<i32>,
}

/// What [`ListOffsetsPlan`]'s requests found for one partition: the offset
/// (`None` when no record has a timestamp at or after the one asked), or
/// the broker's error for it (leader errors mean: refresh metadata, plan
/// again).
pub type ListedOffset = Result<Option<OffsetAndTimestamp>, ErrorCode>;

/// The ListOffsets requests for a query, one per partition leader.
#[derive(Debug, Default)]
pub struct ListOffsetsPlan {
    /// `(broker id, request)`; send each to `Target::Broker(id)` and read
    /// the response with [`read_list_offsets`].
    pub requests: Vec<(i32, Box<dyn RequestBody>)>,
    /// Partitions whose leader the metadata does not know: refresh it and
    /// plan those again.
    pub leader_unknown: BTreeSet<TopicPartition>,
}

/// Builds one ListOffsets request per leader for `query`.
pub(crate) fn plan<'a>(
    query: impl IntoIterator<Item = (&'a TopicPartition, OffsetSpec)>,
    metadata: &Metadata,
    isolation: IsolationLevel,
    timeout: Duration,
) -> ListOffsetsPlan {
    let mut per_leader: BTreeMap<i32, BTreeMap<&str, Vec<ListOffsetsPartition>>> = BTreeMap::new();
    let mut leader_unknown = BTreeSet::new();
    for (tp, spec) in query {
        let Some(leader) = metadata.leader(&tp.topic, tp.partition) else {
            leader_unknown.insert(tp.clone());
            continue;
        };
        per_leader
            .entry(leader)
            .or_default()
            .entry(tp.topic.as_str())
            .or_default()
            .push(ListOffsetsPartition {
                partition_index: tp.partition,
                current_leader_epoch: leader_epoch(metadata, tp),
                timestamp: spec.wire(),
                ..ListOffsetsPartition::default()
            });
    }
    let requests = per_leader
        .into_iter()
        .map(|(broker, topics)| {
            let body: Box<dyn RequestBody> = Box::new(ListOffsetsRequest {
                replica_id: -1,
                isolation_level: isolation_byte(isolation),
                topics: topics
                    .into_iter()
                    .map(|(name, partitions)| ListOffsetsTopic {
                        name: name.to_owned(),
                        partitions,
                        ..ListOffsetsTopic::default()
                    })
                    .collect(),
                timeout_ms: i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX),
                ..ListOffsetsRequest::default()
            });
            (broker, body)
        })
        .collect();
    ListOffsetsPlan {
        requests,
        leader_unknown,
    }
}

/// Reads a ListOffsets response: every partition it answers, with its
/// offset or error.
pub fn read_list_offsets(
    response: &Response,
) -> Result<BTreeMap<TopicPartition, ListedOffset>, DecodeError> {
    if response.api != ApiKey::ListOffsets {
        return Err(DecodeError::InvalidValue {
            what: "response",
            reason: "not a ListOffsets response",
        });
    }
    let decoded: ListOffsetsResponse = response.decode()?;
    let mut out = BTreeMap::new();
    for topic in decoded.topics {
        for p in topic.partitions {
            let result = match ErrorCode::from_code(p.error_code) {
                ErrorCode::None if p.offset >= 0 => Ok(Some(OffsetAndTimestamp {
                    offset: p.offset,
                    timestamp: p.timestamp,
                    leader_epoch: (p.leader_epoch >= 0).then_some(p.leader_epoch),
                })),
                // Kafka's "no such offset": no record at or after the
                // timestamp.
                ErrorCode::None => Ok(None),
                code => Err(code),
            };
            out.insert(
                TopicPartition::new(topic.name.clone(), p.partition_index),
                result,
            );
        }
    }
    Ok(out)
}

/// The leader epoch the metadata knows for a partition, -1 when none
/// (sent as `current_leader_epoch` for fencing, KIP-320).
pub(crate) fn leader_epoch(metadata: &Metadata, tp: &TopicPartition) -> i32 {
    metadata
        .topics
        .get(&tp.topic)
        .and_then(|t| t.partitions.get(&tp.partition))
        .map_or(-1, |p| p.leader_epoch)
}

/// The wire value of an isolation level.
pub(crate) fn isolation_byte(isolation: IsolationLevel) -> i8 {
    match isolation {
        IsolationLevel::ReadUncommitted => 0,
        IsolationLevel::ReadCommitted => 1,
    }
}
