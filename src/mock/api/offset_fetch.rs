//! OffsetFetch: the committed offsets from the classic coordinator
//! (`Groups::fetch_offsets`, which keeps every group's offsets). Up to v7
//! one group, refused as a whole for an injected error or a group another
//! broker coordinates (v1 has no top-level error: each partition carries
//! it); from v8 each group of the `groups` array is refused or answered on
//! its own.

use std::time::Instant;

use super::group_error;
use crate::error::ErrorCode;
use crate::mock::respond::Received;
use crate::mock::state::State;
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchResponse, OffsetFetchResponseGroup,
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use crate::protocol::ApiKey;

/// The answer to an OffsetFetch request.
pub(crate) fn answer(
    st: &mut State,
    r: &Received,
    req: &OffsetFetchRequest,
    now: Instant,
) -> OffsetFetchResponse {
    let version = r.version;
    if version >= 8 {
        return answer_groups(st, r, req, now);
    }
    match group_error(st, r.broker, ApiKey::OffsetFetch, &req.group_id) {
        None => st.groups.fetch_offsets(now, version, req),
        // v1 has no top-level error: every partition carries it.
        Some(code) if version < 2 => OffsetFetchResponse {
            topics: req
                .topics
                .iter()
                .flatten()
                .map(|t| OffsetFetchResponseTopic {
                    name: t.name.clone(),
                    partitions: t
                        .partition_indexes
                        .iter()
                        .map(|&p| OffsetFetchResponsePartition {
                            partition_index: p,
                            committed_offset: -1,
                            error_code: code.code(),
                            ..Default::default()
                        })
                        .collect(),
                    unknown_tagged_fields: Vec::new(),
                })
                .collect(),
            ..Default::default()
        },
        Some(code) => OffsetFetchResponse {
            error_code: code.code(),
            ..Default::default()
        },
    }
}

/// v8+: each group has its own coordinator; the groups this broker
/// coordinates are answered and the others refused (all of them with an
/// injected error).
fn answer_groups(
    st: &mut State,
    r: &Received,
    req: &OffsetFetchRequest,
    now: Instant,
) -> OffsetFetchResponse {
    let injected = st.take_error(r.broker, ApiKey::OffsetFetch);
    let mut resp = st.groups.fetch_offsets(now, r.version, req);
    for g in &mut resp.groups {
        let refused = injected.or_else(|| {
            (st.coordinator(&g.group_id) != r.broker).then_some(ErrorCode::NotCoordinator)
        });
        if let Some(code) = refused {
            *g = OffsetFetchResponseGroup {
                group_id: g.group_id.clone(),
                error_code: code.code(),
                ..Default::default()
            };
        }
    }
    resp
}
