//! SASL on the mock's brokers, as Kafka's `SaslServerAuthenticator` does
//! it: after ApiVersions, SaslHandshake v1 picks the mechanism (KIP-43),
//! SaslAuthenticate carries its messages (KIP-152), and any other request
//! before that closes the connection. A session may be given a lifetime
//! (Kafka's `connections.max.reauth.ms`, KIP-368): the client must
//! authenticate again on the same connection before it ends, or the next
//! request after it closes the connection.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

use crate::error::ErrorCode;
use crate::protocol::messages::sasl_authenticate::{
    SaslAuthenticateRequest, SaslAuthenticateResponse,
};
use crate::protocol::messages::sasl_handshake::{SaslHandshakeRequest, SaslHandshakeResponse};
use crate::protocol::ApiKey;
use crate::sasl::scram::{ScramCredential, ScramServer, ScramServerError};
use crate::sasl::{Mechanism, Secret};

/// The SCRAM iterations the mock stores credentials with (Kafka's
/// minimum, and `kafka-configs`' default for SCRAM-SHA-256 is 8192; the
/// lower count keeps tests fast).
const SCRAM_ITERATIONS: u32 = crate::sasl::scram::MIN_ITERATIONS;

/// SASL settings of a mock cluster ([`MockClusterBuilder::sasl`]): the
/// mechanisms its brokers enable, its users, and the session lifetime.
///
/// Every mechanism checks the same users: PLAIN and SCRAM by password;
/// OAUTHBEARER accepts unsecured JWS tokens (`"alg":"none"`, as
/// librdkafka's `enable.sasl.oauthbearer.unsecure.jwt` and
/// [`OAuthTokenProvider::unsecured`](crate::sasl::OAuthTokenProvider::unsecured)
/// make them) whose `sub` claim is set and whose `exp` has not passed; the
/// `sub` need not be a configured user.
///
/// ```
/// use lazykafka::mock::{MockCluster, MockSasl};
/// use lazykafka::config::Mechanism;
/// use std::time::Duration;
///
/// let mock = MockCluster::builder()
///     .sasl(
///         MockSasl::new()
///             .user("alice", "alice-secret")
///             .mechanisms([Mechanism::ScramSha256, Mechanism::ScramSha512])
///             .session_lifetime(Duration::from_secs(60)),
///     )
///     .build()?;
/// # Ok::<(), lazykafka::mock::MockError>(())
/// ```
///
/// [`MockClusterBuilder::sasl`]: super::MockClusterBuilder::sasl
#[derive(Clone)]
pub struct MockSasl {
    mechanisms: BTreeSet<Mechanism>,
    users: BTreeMap<String, Secret>,
    session_lifetime: Option<Duration>,
}

impl fmt::Debug for MockSasl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockSasl")
            .field("mechanisms", &self.mechanisms)
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .field("session_lifetime", &self.session_lifetime)
            .finish()
    }
}

impl Default for MockSasl {
    fn default() -> Self {
        MockSasl::new()
    }
}

impl MockSasl {
    /// Every mechanism enabled, no user, sessions without a lifetime.
    pub fn new() -> Self {
        MockSasl {
            mechanisms: Mechanism::ALL.into_iter().collect(),
            users: BTreeMap::new(),
            session_lifetime: None,
        }
    }

    /// Adds (or replaces) a user.
    pub fn user(mut self, name: impl Into<String>, password: impl Into<String>) -> Self {
        self.users.insert(name.into(), Secret::new(password.into()));
        self
    }

    /// The mechanisms enabled (Kafka's `sasl.enabled.mechanisms`); the
    /// others are refused with UNSUPPORTED_SASL_MECHANISM.
    pub fn mechanisms(mut self, mechanisms: impl IntoIterator<Item = Mechanism>) -> Self {
        self.mechanisms = mechanisms.into_iter().collect();
        self
    }

    /// The session lifetime sent in SaslAuthenticate v1+ responses (Kafka's
    /// `connections.max.reauth.ms`, KIP-368); an OAUTHBEARER session also
    /// ends with its token.
    pub fn session_lifetime(mut self, lifetime: Duration) -> Self {
        self.session_lifetime = Some(lifetime);
        self
    }
}

/// What the brokers check credentials against.
pub(crate) struct SaslState {
    mechanisms: BTreeSet<Mechanism>,
    plain: BTreeMap<String, Secret>,
    scram256: BTreeMap<String, ScramCredential>,
    scram512: BTreeMap<String, ScramCredential>,
    pub session_lifetime: Option<Duration>,
}

impl SaslState {
    pub fn new(config: MockSasl) -> Self {
        let mut salt = [0u8; 16];
        crate::sasl::os_random(&mut salt);
        let creds = |f: fn(&str, &[u8]) -> ScramCredential| {
            config
                .users
                .iter()
                .map(|(u, p)| (u.clone(), f(p.expose(), &salt)))
                .collect()
        };
        SaslState {
            scram256: creds(|p, s| ScramCredential::new::<sha2::Sha256>(p, s, SCRAM_ITERATIONS)),
            scram512: creds(|p, s| ScramCredential::new::<sha2::Sha512>(p, s, SCRAM_ITERATIONS)),
            mechanisms: config.mechanisms,
            plain: config.users,
            session_lifetime: config.session_lifetime,
        }
    }

    fn enabled(&self) -> Vec<String> {
        self.mechanisms
            .iter()
            .map(|m| m.name().to_owned())
            .collect()
    }
}

/// Where one connection is in its authentication.
#[derive(Debug)]
pub(crate) enum ConnAuth {
    /// The cluster has no SASL: every request is served.
    Off,
    /// Waiting for SaslHandshake (ApiVersions may come first).
    Start,
    /// SaslHandshake chose `mechanism`; SaslAuthenticate comes next.
    Chosen {
        mechanism: Mechanism,
        /// The principal of the session being renewed (KIP-368: it must
        /// not change).
        renewing: Option<String>,
    },
    Scram256 {
        server: ScramServer<sha2::Sha256>,
        credential: ScramCredential,
        renewing: Option<String>,
    },
    Scram512 {
        server: ScramServer<sha2::Sha512>,
        credential: ScramCredential,
        renewing: Option<String>,
    },
    /// Authenticated as `principal` until `expires` (if it does).
    Done {
        mechanism: Mechanism,
        principal: String,
        expires: Option<Instant>,
    },
}

impl ConnAuth {
    pub fn new(sasl: bool) -> Self {
        if sasl {
            ConnAuth::Start
        } else {
            ConnAuth::Off
        }
    }
}

/// What the gate decided about a request.
pub(crate) enum Gate {
    /// Serve it.
    Pass,
    /// Close the connection: a request before authentication, or after
    /// the session ended (Kafka closes the connection for both).
    Close(super::BrokerClose),
}

/// Whether a request of `api` may be served now.
pub(crate) fn gate(auth: &ConnAuth, api: Option<ApiKey>, now: Instant) -> Gate {
    use super::BrokerClose;
    match auth {
        ConnAuth::Off => Gate::Pass,
        ConnAuth::Done { expires, .. } => {
            if api == Some(ApiKey::SaslHandshake) || expires.is_none_or(|t| now < t) {
                Gate::Pass
            } else {
                Gate::Close(BrokerClose::SessionExpired)
            }
        }
        ConnAuth::Start => match api {
            Some(ApiKey::ApiVersions | ApiKey::SaslHandshake) => Gate::Pass,
            _ => Gate::Close(BrokerClose::Unauthenticated),
        },
        ConnAuth::Chosen { .. } | ConnAuth::Scram256 { .. } | ConnAuth::Scram512 { .. } => {
            match api {
                Some(ApiKey::SaslAuthenticate) => Gate::Pass,
                _ => Gate::Close(BrokerClose::Unauthenticated),
            }
        }
    }
}

/// The answer to a SASL request, and whether the connection closes after
/// it (Kafka closes it after a refusal).
pub(crate) struct SaslAnswer<R> {
    pub response: R,
    pub close: bool,
    /// Set when the exchange authenticated the connection: the mechanism
    /// and principal, for the event log.
    pub authenticated: Option<(Mechanism, String)>,
}

/// SaslHandshake (KIP-43).
pub(crate) fn handshake(
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

/// SaslAuthenticate (KIP-152), at `version` (the session lifetime is sent
/// from v1 on, KIP-368).
pub(crate) fn authenticate(
    state: Option<&SaslState>,
    auth: &mut ConnAuth,
    version: i16,
    req: &SaslAuthenticateRequest,
    now: Instant,
) -> SaslAnswer<SaslAuthenticateResponse> {
    let fail = |message: String| SaslAnswer {
        response: SaslAuthenticateResponse {
            error_code: ErrorCode::SaslAuthenticationFailed.code(),
            error_message: Some(message),
            ..Default::default()
        },
        close: true,
        authenticated: None,
    };
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
    let scram_failed = |m: Mechanism| {
        format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {m}"
        )
    };
    let bytes = &req.auth_bytes[..];
    let text = std::str::from_utf8(bytes).unwrap_or("");
    // The exchange's outcome: the bytes to send back, and the principal
    // once it is authenticated (with the token's own end, for OAUTHBEARER).
    type Outcome = Result<(Vec<u8>, Option<(String, Option<Instant>)>), String>;
    let taken = std::mem::replace(auth, ConnAuth::Start);
    let (mechanism, renewing, outcome): (Mechanism, Option<String>, Outcome) = match taken {
        ConnAuth::Chosen {
            mechanism: Mechanism::Plain,
            renewing,
        } => {
            // RFC 4616: [authzid] NUL authcid NUL passwd.
            let mut parts = bytes.split(|b| *b == 0);
            let outcome = match (parts.next(), parts.next(), parts.next(), parts.next()) {
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
            };
            (Mechanism::Plain, renewing, outcome)
        }
        ConnAuth::Chosen {
            mechanism: m @ (Mechanism::ScramSha256 | Mechanism::ScramSha512),
            renewing,
        } => {
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
                            renewing: renewing.clone(),
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
                            renewing: renewing.clone(),
                        };
                        (first.into_bytes(), None)
                    })
            };
            (m, renewing, outcome.map_err(|_| scram_failed(m)))
        }
        ConnAuth::Scram256 {
            mut server,
            credential,
            renewing,
        } => {
            let outcome = scram_final(server.client_final(text, &credential));
            let m = Mechanism::ScramSha256;
            (m, renewing, outcome.map_err(|_| scram_failed(m)))
        }
        ConnAuth::Scram512 {
            mut server,
            credential,
            renewing,
        } => {
            let outcome = scram_final(server.client_final(text, &credential));
            let m = Mechanism::ScramSha512;
            (m, renewing, outcome.map_err(|_| scram_failed(m)))
        }
        ConnAuth::Chosen {
            mechanism: Mechanism::OAuthBearer,
            renewing,
        } => {
            let outcome = crate::sasl::parse_oauthbearer_message(bytes)
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
                .map_err(|e| format!("Authentication failed: invalid OAUTHBEARER token: {e}"));
            (Mechanism::OAuthBearer, renewing, outcome)
        }
        other => {
            *auth = other;
            return fail("Unexpected SaslAuthenticate request".to_owned());
        }
    };
    match outcome {
        Err(message) => fail(message),
        Ok((bytes, None)) => SaslAnswer {
            response: SaslAuthenticateResponse {
                auth_bytes: bytes.into(),
                ..Default::default()
            },
            close: false,
            authenticated: None,
        },
        Ok((bytes, Some((principal, token_end)))) => {
            if renewing.as_ref().is_some_and(|p| *p != principal) {
                return fail(format!(
                    "Cannot change principals during re-authentication from {}: {principal}",
                    renewing.unwrap_or_default()
                ));
            }
            let session_end = state.session_lifetime.map(|l| now + l);
            let expires = match (session_end, token_end) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            *auth = ConnAuth::Done {
                mechanism,
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
                authenticated: Some((mechanism, principal)),
            }
        }
    }
}

type Principal = Option<(String, Option<Instant>)>;

fn scram_final(
    result: Result<(String, String), ScramServerError>,
) -> Result<(Vec<u8>, Principal), ScramServerError> {
    result.map(|(server_final, user)| (server_final.into_bytes(), Some((user, None))))
}
