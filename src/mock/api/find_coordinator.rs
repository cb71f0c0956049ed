//! FindCoordinator: the broker coordinating a group or transactional id
//! (`MockCluster::set_coordinator`, else by the key's Java `hashCode`, as
//! `State::coordinator` places it); COORDINATOR_NOT_AVAILABLE while that
//! broker is down; batched keys from v4.

use crate::error::ErrorCode;
use crate::mock::respond::Received;
use crate::mock::state::State;
use crate::protocol::messages::find_coordinator::{
    Coordinator, FindCoordinatorRequest, FindCoordinatorResponse,
};
use crate::protocol::ApiKey;

/// One key's coordinator as the answer carries it: error, node id, host
/// and port.
type Found = (i16, i32, String, i32);

/// The answer to a FindCoordinator request.
pub(crate) fn answer(
    st: &mut State,
    r: &Received,
    req: &FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let error = st.take_error(r.broker, ApiKey::FindCoordinator);
    let find = |key: &str| find(st, key, error);
    if r.version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(|key| {
                let (error_code, node_id, host, port) = find(key);
                Coordinator {
                    key: key.clone(),
                    node_id,
                    host,
                    port,
                    error_code,
                    error_message: None,
                    unknown_tagged_fields: Vec::new(),
                }
            })
            .collect();
        FindCoordinatorResponse {
            coordinators,
            ..Default::default()
        }
    } else {
        let (error_code, node_id, host, port) = find(&req.key);
        FindCoordinatorResponse {
            error_code,
            node_id,
            host,
            port,
            ..Default::default()
        }
    }
}

/// The coordinator of `key`, or why there is none.
fn find(st: &State, key: &str, error: Option<ErrorCode>) -> Found {
    if let Some(code) = error {
        return (code.code(), -1, String::new(), -1);
    }
    let id = st.coordinator(key);
    if !st.is_up(id) {
        return (
            ErrorCode::CoordinatorNotAvailable.code(),
            -1,
            String::new(),
            -1,
        );
    }
    let (host, port) = st.broker_entry(id);
    (0, id, host, port)
}
