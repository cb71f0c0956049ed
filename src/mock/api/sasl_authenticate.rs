//! SaslAuthenticate (KIP-152): one message of the mechanism SaslHandshake
//! chose, checked against the cluster's users (`MockSasl`): PLAIN's
//! password, SCRAM's two rounds, an unsecured OAUTHBEARER token. Once
//! authenticated the connection's session lasts the cluster's session
//! lifetime (sent from v1, KIP-368), or to the token's end; the event log
//! notes who authenticated. A refusal closes the connection, as Kafka
//! does.

use std::time::{Duration, Instant};

use crate::error::ErrorCode;
use crate::mock::respond::{Answer, Received};
use crate::mock::sasl::{ConnAuth, SaslAnswer, SaslState};
use crate::mock::state::State;
use crate::mock::MockEventKind;
use crate::protocol::messages::sasl_authenticate::{
    SaslAuthenticateRequest, SaslAuthenticateResponse,
};
use crate::sasl::scram::{ScramServer, ScramServerError};
use crate::sasl::Mechanism;

/// Who a finished exchange authenticated, and when its token ends (an
/// OAUTHBEARER token's `exp`).
type Principal = Option<(String, Option<Instant>)>;

/// A step's outcome: the bytes to send back, and the principal once the
/// exchange is done; or why it failed.
type Outcome = Result<(Vec<u8>, Principal), String>;

/// One SaslAuthenticate step of a connection.
struct Step {
    mechanism: Mechanism,
    /// The principal of the session being renewed (KIP-368).
    renewing: Option<String>,
    outcome: Outcome,
}

/// The answer to a SaslAuthenticate request on a connection at `auth`.
pub(crate) fn respond(
    st: &mut State,
    r: &Received,
    auth: &mut ConnAuth,
    req: &SaslAuthenticateRequest,
    now: Instant,
) -> Answer {
    let mut answer = authenticate(st.sasl.as_ref(), auth, r.version, req, now);
    if let Some((mechanism, principal)) = answer.authenticated.take() {
        st.record(
            now,
            r.broker,
            MockEventKind::Authenticated {
                connection: r.conn,
                mechanism,
                principal,
            },
        );
    }
    answer.into_answer(r)
}

/// SaslAuthenticate at `version`: the next step of the exchange `auth` is
/// in, and `auth` moved on.
fn authenticate(
    state: Option<&SaslState>,
    auth: &mut ConnAuth,
    version: i16,
    req: &SaslAuthenticateRequest,
    now: Instant,
) -> SaslAnswer<SaslAuthenticateResponse> {
    let Some(state) = state else {
        return SaslAnswer {
            response: SaslAuthenticateResponse {
                error_code: ErrorCode::IllegalSaslState.code(),
                error_message: Some("this listener does not use SASL".into()),
                ..Default::default()
            },
            close: false,
            authenticated: None,
        };
    };
    let bytes = &req.auth_bytes[..];
    let text = std::str::from_utf8(bytes).unwrap_or("");
    let step = match std::mem::replace(auth, ConnAuth::Start) {
        ConnAuth::Chosen {
            mechanism: Mechanism::Plain,
            renewing,
        } => Step {
            mechanism: Mechanism::Plain,
            renewing,
            outcome: plain(state, bytes),
        },
        ConnAuth::Chosen {
            mechanism: m @ (Mechanism::ScramSha256 | Mechanism::ScramSha512),
            renewing,
        } => Step {
            mechanism: m,
            outcome: scram_first(state, auth, (m, renewing.clone()), text),
            renewing,
        },
        ConnAuth::Scram256 {
            mut server,
            credential,
            renewing,
        } => Step {
            mechanism: Mechanism::ScramSha256,
            renewing,
            outcome: scram_final(server.client_final(text, &credential))
                .map_err(|_| scram_failed(Mechanism::ScramSha256)),
        },
        ConnAuth::Scram512 {
            mut server,
            credential,
            renewing,
        } => Step {
            mechanism: Mechanism::ScramSha512,
            renewing,
            outcome: scram_final(server.client_final(text, &credential))
                .map_err(|_| scram_failed(Mechanism::ScramSha512)),
        },
        ConnAuth::Chosen {
            mechanism: Mechanism::OAuthBearer,
            renewing,
        } => Step {
            mechanism: Mechanism::OAuthBearer,
            renewing,
            outcome: oauthbearer(bytes, now),
        },
        other => {
            *auth = other;
            return fail("Unexpected SaslAuthenticate request".to_owned());
        }
    };
    conclude(state, auth, version, step, now)
}

/// The answer to a step: a refusal, the next challenge, or the session
/// started (`auth` done) with its lifetime.
fn conclude(
    state: &SaslState,
    auth: &mut ConnAuth,
    version: i16,
    step: Step,
    now: Instant,
) -> SaslAnswer<SaslAuthenticateResponse> {
    let (bytes, principal) = match step.outcome {
        Err(message) => return fail(message),
        Ok((bytes, None)) => {
            return SaslAnswer {
                response: SaslAuthenticateResponse {
                    auth_bytes: bytes.into(),
                    ..Default::default()
                },
                close: false,
                authenticated: None,
            }
        }
        Ok((bytes, Some(principal))) => (bytes, principal),
    };
    let (principal, token_end) = principal;
    if step.renewing.as_ref().is_some_and(|p| *p != principal) {
        return fail(format!(
            "Cannot change principals during re-authentication from {}: {principal}",
            step.renewing.unwrap_or_default()
        ));
    }
    let session_end = state.session_lifetime.map(|l| now + l);
    let expires = match (session_end, token_end) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    *auth = ConnAuth::Done {
        mechanism: step.mechanism,
        principal: principal.clone(),
        expires,
    };
    let lifetime_ms = if version >= 1 {
        expires.map_or(0, |t| t.saturating_duration_since(now).as_millis() as i64)
    } else {
        0
    };
    SaslAnswer {
        response: SaslAuthenticateResponse {
            auth_bytes: bytes.into(),
            session_lifetime_ms: lifetime_ms,
            ..Default::default()
        },
        close: false,
        authenticated: Some((step.mechanism, principal)),
    }
}

/// A refusal: SASL_AUTHENTICATION_FAILED with `message`, then the
/// connection closes.
fn fail(message: String) -> SaslAnswer<SaslAuthenticateResponse> {
    SaslAnswer {
        response: SaslAuthenticateResponse {
            error_code: ErrorCode::SaslAuthenticationFailed.code(),
            error_message: Some(message),
            ..Default::default()
        },
        close: true,
        authenticated: None,
    }
}

/// PLAIN (RFC 4616: `[authzid] NUL authcid NUL passwd`).
fn plain(state: &SaslState, bytes: &[u8]) -> Outcome {
    let mut parts = bytes.split(|b| *b == 0);
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(_), Some(user), Some(password), None) => {
            let user = String::from_utf8_lossy(user).into_owned();
            let ok = state
                .plain
                .get(&user)
                .is_some_and(|p| p.expose().as_bytes() == password);
            if ok {
                Ok((Vec::new(), Some((user, None))))
            } else {
                Err("Authentication failed: Invalid username or password".to_owned())
            }
        }
        _ => Err("Authentication failed: Invalid SASL/PLAIN message".to_owned()),
    }
}

/// SCRAM's client-first message: the server-first answer, `auth` waiting
/// for the client-final one.
fn scram_first(
    state: &SaslState,
    auth: &mut ConnAuth,
    (m, renewing): (Mechanism, Option<String>),
    text: &str,
) -> Outcome {
    let mut nonce = [0u8; 24];
    crate::sasl::os_random(&mut nonce);
    let server_nonce = crate::sasl::nonce(nonce);
    let outcome = if m == Mechanism::ScramSha256 {
        let mut server = ScramServer::new();
        server
            .client_first(text, &server_nonce, |u| state.scram256.get(u).cloned())
            .map(|(first, credential)| {
                *auth = ConnAuth::Scram256 {
                    server,
                    credential,
                    renewing,
                };
                (first.into_bytes(), None)
            })
    } else {
        let mut server = ScramServer::new();
        server
            .client_first(text, &server_nonce, |u| state.scram512.get(u).cloned())
            .map(|(first, credential)| {
                *auth = ConnAuth::Scram512 {
                    server,
                    credential,
                    renewing,
                };
                (first.into_bytes(), None)
            })
    };
    outcome.map_err(|_| scram_failed(m))
}

/// SCRAM's client-final message checked: the server-final answer and the
/// user.
fn scram_final(
    result: Result<(String, String), ScramServerError>,
) -> Result<(Vec<u8>, Principal), ScramServerError> {
    result.map(|(server_final, user)| (server_final.into_bytes(), Some((user, None))))
}

/// Kafka's message for a SCRAM exchange that failed.
fn scram_failed(m: Mechanism) -> String {
    format!(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {m}"
    )
}

/// OAUTHBEARER: an unsecured JWS token (`"alg":"none"`) whose `sub` is
/// the principal and whose `exp`, if any, has not passed.
fn oauthbearer(bytes: &[u8], now: Instant) -> Outcome {
    crate::sasl::parse_oauthbearer_message(bytes)
        .and_then(|(token, _extensions)| crate::sasl::parse_unsecured_jws(&token))
        .and_then(|(principal, exp)| {
            let unix_now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64();
            match exp {
                Some(exp) if exp <= unix_now => Err("the token has expired".to_owned()),
                _ => Ok((
                    Vec::new(),
                    Some((
                        principal,
                        exp.map(|e| now + Duration::from_secs_f64(e - unix_now)),
                    )),
                )),
            }
        })
        .map_err(|e| format!("Authentication failed: invalid OAUTHBEARER token: {e}"))
}
