//! InitProducerId: a producer id (see `producers.rs`) from any broker for
//! an idempotent producer, from the transactional id's coordinator (placed
//! as groups are, `State::coordinator`) for a transactional one.

use crate::mock::respond::Received;
use crate::mock::state::{coordinator_of, State};
use crate::protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::ApiKey;

/// The answer to an InitProducerId request.
pub(crate) fn answer(
    st: &mut State,
    r: &Received,
    req: &InitProducerIdRequest,
) -> InitProducerIdResponse {
    if let Some(code) = st.take_error(r.broker, ApiKey::InitProducerId) {
        return InitProducerIdResponse {
            error_code: code.code(),
            producer_id: -1,
            producer_epoch: -1,
            ..Default::default()
        };
    }
    let coordinators = &st.coordinators;
    let brokers: Vec<i32> = st.brokers.keys().copied().collect();
    let coordinates = |id: &str| coordinator_of(coordinators, &brokers, id) == r.broker;
    st.producer_ids.init(r.version, req, coordinates)
}
