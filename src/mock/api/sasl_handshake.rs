//! SaslHandshake (KIP-43, v1 only): picks the connection's mechanism
//! among those enabled, or starts a re-authentication with the same one
//! (KIP-368); a refusal closes the connection, as Kafka does. Without SASL
//! the answer is ILLEGAL_SASL_STATE, as on a Kafka `PLAINTEXT` listener.

use crate::error::ErrorCode;
use crate::mock::respond::{Answer, Received};
use crate::mock::sasl::{ConnAuth, SaslAnswer, SaslState};
use crate::mock::state::State;
use crate::protocol::messages::sasl_handshake::{SaslHandshakeRequest, SaslHandshakeResponse};
use crate::sasl::Mechanism;

/// The answer to a SaslHandshake request on a connection at `auth`.
pub(crate) fn respond(
    st: &State,
    r: &Received,
    auth: &mut ConnAuth,
    req: &SaslHandshakeRequest,
) -> Answer {
    handshake(st.sasl.as_ref(), auth, req).into_answer(r)
}

/// SaslHandshake's answer, moving `auth` to the mechanism chosen.
fn handshake(
    state: Option<&SaslState>,
    auth: &mut ConnAuth,
    req: &SaslHandshakeRequest,
) -> SaslAnswer<SaslHandshakeResponse> {
    let refuse = |code: ErrorCode, mechanisms: Vec<String>| SaslAnswer {
        response: SaslHandshakeResponse {
            error_code: code.code(),
            mechanisms,
        },
        close: true,
        authenticated: None,
    };
    let Some(state) = state else {
        // A listener without SASL, as Kafka answers on PLAINTEXT.
        return SaslAnswer {
            close: false,
            ..refuse(ErrorCode::IllegalSaslState, Vec::new())
        };
    };
    let renewing = match auth {
        ConnAuth::Start => None,
        ConnAuth::Done {
            mechanism,
            principal,
            ..
        } => {
            // KIP-368: a re-authentication keeps the mechanism.
            if !mechanism.name().eq_ignore_ascii_case(&req.mechanism) {
                return refuse(ErrorCode::IllegalSaslState, state.enabled());
            }
            Some(principal.clone())
        }
        _ => return refuse(ErrorCode::IllegalSaslState, state.enabled()),
    };
    match req
        .mechanism
        .parse::<Mechanism>()
        .ok()
        .filter(|m| state.mechanisms.contains(m))
    {
        Some(mechanism) => {
            *auth = ConnAuth::Chosen {
                mechanism,
                renewing,
            };
            SaslAnswer {
                response: SaslHandshakeResponse {
                    error_code: 0,
                    mechanisms: state.enabled(),
                },
                close: false,
                authenticated: None,
            }
        }
        None => refuse(ErrorCode::UnsupportedSaslMechanism, state.enabled()),
    }
}
