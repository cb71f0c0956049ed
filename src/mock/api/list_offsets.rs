//! ListOffsets: from the leader only (with the leader epoch checks of
//! KIP-320), the earliest or latest offset, the first at or after a
//! timestamp, or the record with the largest timestamp (KIP-734).

use crate::error::ErrorCode;
use crate::mock::respond::Received;
use crate::mock::state::{Partition, State};
use crate::protocol::messages::list_offsets::{
    ListOffsetsPartition, ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse,
    ListOffsetsTopicResponse,
};
use crate::protocol::ApiKey;

/// `ListOffsets` timestamps with a meaning.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// The answer to a ListOffsets request.
pub(crate) fn answer(
    st: &mut State,
    r: &Received,
    req: &ListOffsetsRequest,
) -> ListOffsetsResponse {
    let error = st.take_error(r.broker, ApiKey::ListOffsets);
    let topics = req
        .topics
        .iter()
        .map(|t| ListOffsetsTopicResponse {
            name: t.name.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    let partition = st
                        .topics
                        .get(&t.name)
                        .and_then(|topic| topic.partitions.get(p.partition_index as usize));
                    list_partition(st, r.broker, p, partition, error)
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

/// One partition's answer: the offset and timestamp found, or why not.
fn list_partition(
    st: &State,
    broker: i32,
    p: &ListOffsetsPartition,
    partition: Option<&Partition>,
    error: Option<ErrorCode>,
) -> ListOffsetsPartitionResponse {
    let mut out = ListOffsetsPartitionResponse {
        partition_index: p.partition_index,
        timestamp: -1,
        offset: -1,
        leader_epoch: -1,
        ..Default::default()
    };
    let checked = match (error, partition) {
        (Some(code), _) => Err(code),
        (None, None) => Err(ErrorCode::UnknownTopicOrPartition),
        (None, Some(part)) => st
            .check_leader(broker, part, p.current_leader_epoch)
            .map(|()| part),
    };
    let code = match checked {
        Err(code) => code,
        Ok(part) => {
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
    };
    out.error_code = code.code();
    out
}
