//! OffsetForLeaderEpoch (KIP-101, KIP-320): from the leader only, with the
//! leader epoch checks, where each asked epoch ends in the partition's
//! epoch cache (`Partition::end_offset_for`).

use crate::error::ErrorCode;
use crate::mock::respond::Received;
use crate::mock::state::{Partition, State};
use crate::protocol::messages::offset_for_leader_epoch::{
    EpochEndOffset, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition, OffsetForLeaderTopicResult,
};
use crate::protocol::ApiKey;

/// The answer to an OffsetForLeaderEpoch request.
pub(crate) fn answer(
    st: &mut State,
    r: &Received,
    req: &OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let error = st.take_error(r.broker, ApiKey::OffsetForLeaderEpoch);
    let topics = req
        .topics
        .iter()
        .map(|t| OffsetForLeaderTopicResult {
            topic: t.topic.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    let part = st
                        .topics
                        .get(&t.topic)
                        .and_then(|topic| topic.partitions.get(p.partition as usize));
                    epoch_end(st, r.broker, p, part, error)
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

/// One partition's answer: where the asked epoch ends, or why not.
fn epoch_end(
    st: &State,
    broker: i32,
    p: &OffsetForLeaderPartition,
    part: Option<&Partition>,
    error: Option<ErrorCode>,
) -> EpochEndOffset {
    let mut out = EpochEndOffset {
        partition: p.partition,
        leader_epoch: -1,
        end_offset: -1,
        ..Default::default()
    };
    let code = match (error, part) {
        (Some(code), _) => code,
        (None, None) => ErrorCode::UnknownTopicOrPartition,
        (None, Some(part)) => match st.check_leader(broker, part, p.current_leader_epoch) {
            Err(code) => code,
            Ok(()) => {
                (out.leader_epoch, out.end_offset) = part.end_offset_for(p.leader_epoch);
                ErrorCode::None
            }
        },
    };
    out.error_code = code.code();
    out
}
