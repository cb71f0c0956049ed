//! ApiVersions: the APIs served and their versions (`api::SERVED`, as
//! narrowed by `MockCluster::set_api_versions`). A request at a version
//! not served gets this answer in v0 with UNSUPPORTED_VERSION (KIP-511;
//! `respond.rs` sends it).

use super::SERVED;
use crate::error::ErrorCode;
use crate::mock::respond::Received;
use crate::mock::state::State;
use crate::protocol::messages::api_versions::{ApiVersionRange, ApiVersionsResponse};
use crate::protocol::ApiKey;

/// The answer to an ApiVersions request.
pub(crate) fn answer(st: &mut State, r: &Received) -> ApiVersionsResponse {
    let error = st.take_error(r.broker, ApiKey::ApiVersions);
    versions(st, error)
}

/// The versions served, with `error` at the top level.
pub(crate) fn versions(st: &State, error: Option<ErrorCode>) -> ApiVersionsResponse {
    let api_keys = SERVED
        .iter()
        .filter_map(|&api| {
            let range = st.served(api)?;
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
