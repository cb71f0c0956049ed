//! OffsetCommit: refused here for an injected error or a group another
//! broker coordinates; a KIP-848 consumer group's member is checked by
//! its epoch (`ConsumerGroups::validate_commit`) and its offsets stored as
//! for a group without members; every other commit goes to the classic
//! coordinator (`Groups::commit`), which keeps the offsets of both.

use std::time::Instant;

use super::group_error;
use crate::error::ErrorCode;
use crate::mock::respond::Received;
use crate::mock::state::State;
use crate::mock::topic::partition_exists;
use crate::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
};
use crate::protocol::ApiKey;

/// The answer to an OffsetCommit request.
pub(crate) fn answer(
    st: &mut State,
    r: &Received,
    req: &OffsetCommitRequest,
    now: Instant,
) -> OffsetCommitResponse {
    if let Some(code) = group_error(st, r.broker, ApiKey::OffsetCommit, &req.group_id) {
        return refused(req, code);
    }
    if !st.consumer_groups.contains(&req.group_id) {
        return commit(st, r.version, req, now);
    }
    // A consumer group (KIP-848): the member epoch is checked here; the
    // offsets are stored as for a group without members.
    match st.consumer_groups.validate_commit(
        &req.group_id,
        &req.member_id,
        req.generation_id_or_member_epoch,
    ) {
        Err(code) => refused(req, code),
        Ok(()) => {
            let mut simple = req.clone();
            simple.generation_id_or_member_epoch = -1;
            simple.member_id = String::new();
            simple.group_instance_id = None;
            commit(st, r.version, &simple, now)
        }
    }
}

/// The classic coordinator's answer, knowing which partitions exist.
fn commit(
    st: &mut State,
    version: i16,
    req: &OffsetCommitRequest,
    now: Instant,
) -> OffsetCommitResponse {
    let topics = &st.topics;
    let exists = |t: &str, p: i32| partition_exists(topics, t, p);
    st.groups.commit(now, version, req, &exists)
}

/// Every partition of the request refused with `code`.
fn refused(req: &OffsetCommitRequest, code: ErrorCode) -> OffsetCommitResponse {
    OffsetCommitResponse {
        topics: req
            .topics
            .iter()
            .map(|t| OffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| OffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code.code(),
                        unknown_tagged_fields: Vec::new(),
                    })
                    .collect(),
                unknown_tagged_fields: Vec::new(),
            })
            .collect(),
        ..Default::default()
    }
}
