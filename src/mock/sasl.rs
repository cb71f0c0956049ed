//! SASL on the mock's brokers, as Kafka's `SaslServerAuthenticator` does
//! it: after ApiVersions, SaslHandshake v1 picks the mechanism (KIP-43),
//! SaslAuthenticate carries its messages (KIP-152), and any other request
//! before that closes the connection. A session may be given a lifetime
//! (Kafka's `connections.max.reauth.ms`, KIP-368): the client must
//! authenticate again on the same connection before it ends, or the next
//! request after it closes the connection.
//!
//! This file holds the settings ([`MockSasl`]), the users' credentials,
//! where each connection is in its authentication ([`ConnAuth`]) and the
//! gate `respond.rs` checks every request against; the two requests
//! themselves are answered in `api/sasl_handshake.rs` and
//! `api/sasl_authenticate.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

use super::respond::{reply, Answer, Received};
use super::BrokerClose;
use crate::protocol::messages::Message;
use crate::protocol::ApiKey;
use crate::sasl::scram::{ScramCredential, ScramServer};
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
    /// The mechanisms enabled.
    pub mechanisms: BTreeSet<Mechanism>,
    /// Each user's password (PLAIN).
    pub plain: BTreeMap<String, Secret>,
    /// Each user's SCRAM-SHA-256 credential.
    pub scram256: BTreeMap<String, ScramCredential>,
    /// Each user's SCRAM-SHA-512 credential.
    pub scram512: BTreeMap<String, ScramCredential>,
    /// How long a session lasts (`None`: until the connection closes).
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

    /// The names of the mechanisms enabled, as SaslHandshake lists them.
    pub fn enabled(&self) -> Vec<String> {
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
    Close(BrokerClose),
}

/// Whether a request of `api` may be served now.
pub(crate) fn gate(auth: &ConnAuth, api: Option<ApiKey>, now: Instant) -> Gate {
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

impl<R: Message> SaslAnswer<R> {
    /// The answer framed for request `r`, closing the connection after a
    /// refusal (as Kafka does).
    pub fn into_answer(self, r: &Received) -> Answer {
        match reply(&self.response, r.version, r.correlation_id) {
            Answer::Reply(bytes) if self.close => {
                Answer::ReplyThenClose(bytes, BrokerClose::AuthenticationFailed)
            }
            other => other,
        }
    }
}
