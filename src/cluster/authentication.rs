//! A connection's SASL phase (KIP-43, KIP-152), between the ApiVersions
//! exchange and ready, and again when its session is renewed (KIP-368).
//!
//! [`Authentication`] is the phase's state, in the connection's
//! [`Phase::Authenticating`]: SaslHandshake v1 names the mechanism, then
//! SaslAuthenticate round trips carry the mechanism's messages until the
//! broker accepts the credentials. It says what to do next as an
//! [`AuthStep`]; the `impl Cluster` below carries steps out (sends, closes,
//! events) and supplies the OAUTHBEARER token (see `oauth.rs`).

use super::conn::Phase;
use super::requests::Origin;
use super::Cluster;
use crate::events::{CloseReason, ConnectionError, ConnectionId, EventKind};
use crate::protocol::messages::decode_response_body;
use crate::protocol::messages::sasl_authenticate::{
    SaslAuthenticateRequest, SaslAuthenticateResponse,
};
use crate::protocol::messages::sasl_handshake::{SaslHandshakeRequest, SaslHandshakeResponse};
use crate::protocol::{ApiKey, ApiVersionTable, DecodeError, ErrorCode};
use crate::sasl::{Mechanism, OAuthToken, SaslConfig, SaslSession, SaslStep};
use bytes::Bytes;
use std::time::{Duration, Instant};

/// A connection's SASL exchange under way.
#[derive(Debug)]
pub(crate) struct Authentication {
    /// The versions the connection negotiated.
    pub versions: ApiVersionTable,
    /// The mechanism's exchange: `None` while SaslHandshake is in flight
    /// (or the token is waited for), then SaslAuthenticate round trips.
    /// Nothing else is sent meanwhile.
    session: Option<SaslSession>,
    /// Whether this renews the session of a connection that was ready.
    pub reauth: bool,
    /// SaslHandshake was answered and the OAUTHBEARER token is asked of
    /// the application's asynchronous provider: the exchange starts once
    /// the runtime hands it in
    /// ([`Cluster::handle_oauth_token`](super::Cluster::handle_oauth_token)).
    pub awaiting_token: bool,
}

/// What a connection in its SASL phase does next.
#[derive(Debug)]
pub(crate) enum AuthStep {
    /// Send SaslHandshake at this version.
    Handshake(SaslHandshakeRequest, i16),
    /// Send SaslAuthenticate at this version.
    Authenticate(SaslAuthenticateRequest, i16),
    /// The broker accepted the credentials, for a session of this
    /// lifetime if it ends.
    Done(Option<Duration>),
    /// Authentication failed: the message says why.
    Failed(String),
}

impl Authentication {
    /// The phase of a connection that negotiated `versions`, and its first
    /// step: SaslHandshake v1 naming `mechanism`. (v0 would mean raw SASL
    /// tokens outside Kafka's framing, before KIP-152; this client speaks
    /// only v1, with SaslAuthenticate.)
    pub fn start(versions: ApiVersionTable, reauth: bool, mechanism: Mechanism) -> (Self, AuthStep) {
        let handshake = versions
            .version(ApiKey::SaslHandshake)
            .ok()
            .filter(|v| *v >= 1);
        let authenticate = versions.version(ApiKey::SaslAuthenticate).ok();
        let step = match (handshake, authenticate) {
            (Some(v), Some(_)) => AuthStep::Handshake(
                SaslHandshakeRequest {
                    mechanism: mechanism.name().to_owned(),
                },
                v,
            ),
            _ => AuthStep::Failed(
                "the broker does not support SaslHandshake v1 and SaslAuthenticate \
                 (KIP-152); is this a SASL listener of Kafka 1.0 or later?"
                    .to_owned(),
            ),
        };
        let phase = Authentication {
            versions,
            session: None,
            reauth,
            awaiting_token: false,
        };
        (phase, step)
    }

    /// Reads SaslHandshake's answer: `Ok(None)` when the broker enables
    /// the mechanism (the exchange may start), else the failure.
    pub fn handshake_answered(
        version: i16,
        body: Bytes,
        sasl: Option<&SaslConfig>,
    ) -> Result<Option<AuthStep>, DecodeError> {
        let (response, _) = decode_response_body::<SaslHandshakeResponse>(body, version)?;
        let Some(sasl) = sasl else {
            return Ok(None);
        };
        if response.error_code == 0 {
            return Ok(None);
        }
        let code = ErrorCode::from_code(response.error_code);
        let message = if code == ErrorCode::UnsupportedSaslMechanism {
            format!(
                "the broker does not enable {}; it enables [{}] ({code})",
                sasl.mechanism,
                response.mechanisms.join(", ")
            )
        } else {
            format!("SaslHandshake refused: {code}")
        };
        Ok(Some(AuthStep::Failed(message)))
    }

    /// Starts the mechanism's exchange (SaslHandshake answered) with a
    /// client nonce made of `random`, and the OAUTHBEARER token when the
    /// mechanism is that: its first SaslAuthenticate.
    pub fn begin(
        &mut self,
        sasl: &SaslConfig,
        random: [u8; 24],
        token: Option<&OAuthToken>,
    ) -> Option<AuthStep> {
        let nonce = crate::sasl::nonce(random);
        match SaslSession::start(sasl, &nonce, token) {
            Ok((session, first)) => {
                self.session = Some(session);
                self.authenticate(first)
            }
            Err(e) => Some(AuthStep::Failed(e)),
        }
    }

    /// SaslAuthenticate carrying `bytes`, at the version negotiated.
    fn authenticate(&self, bytes: Vec<u8>) -> Option<AuthStep> {
        let version = self.versions.version(ApiKey::SaslAuthenticate).ok()?;
        let request = SaslAuthenticateRequest {
            auth_bytes: bytes.into(),
            ..Default::default()
        };
        Some(AuthStep::Authenticate(request, version))
    }

    /// Reads a SaslAuthenticate answer: the response, or the broker's
    /// refusal in words.
    pub fn read_authenticate_answer(
        version: i16,
        body: Bytes,
    ) -> Result<Result<SaslAuthenticateResponse, String>, DecodeError> {
        let (response, _) = decode_response_body::<SaslAuthenticateResponse>(body, version)?;
        if response.error_code == 0 {
            return Ok(Ok(response));
        }
        let code = ErrorCode::from_code(response.error_code);
        Ok(Err(match response.error_message.filter(|m| !m.is_empty()) {
            Some(m) => format!("{m} ({code})"),
            None => code.to_string(),
        }))
    }

    /// Takes a SaslAuthenticate answer the broker did not refuse: the next
    /// message to send, the session accepted (with its lifetime when it
    /// ends), or the mechanism's failure. `None` before the exchange
    /// started.
    pub fn authenticate_answered(&mut self, response: &SaslAuthenticateResponse) -> Option<AuthStep> {
        let session = self.session.as_mut()?;
        match session.step(&response.auth_bytes) {
            Ok(SaslStep::Send(next)) => self.authenticate(next),
            Ok(SaslStep::Done) => {
                let lifetime = (response.session_lifetime_ms > 0)
                    .then(|| Duration::from_millis(response.session_lifetime_ms as u64));
                Some(AuthStep::Done(lifetime))
            }
            Err(e) => Some(AuthStep::Failed(e)),
        }
    }
}

impl Cluster {
    /// `conn`'s SASL phase, if it is in it.
    fn authentication(&mut self, conn: ConnectionId) -> Option<&mut Authentication> {
        match self.conns.get_mut(&conn).map(|c| &mut c.phase) {
            Some(Phase::Authenticating(auth)) => Some(auth),
            _ => None,
        }
    }

    /// Starts SASL on `conn` (KIP-43, KIP-152): SaslHandshake v1 names the
    /// mechanism; the SaslAuthenticate exchange follows its answer.
    pub(super) fn start_authentication(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        versions: ApiVersionTable,
        reauth: bool,
    ) {
        let Some(sasl) = self.config.sasl.as_ref() else {
            return;
        };
        let (auth, step) = Authentication::start(versions, reauth, sasl.mechanism);
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.phase = Phase::Authenticating(auth);
        self.take_auth_step(now, conn, step);
    }

    /// Carries out `step` of `conn`'s SASL phase.
    fn take_auth_step(&mut self, now: Instant, conn: ConnectionId, step: AuthStep) {
        match step {
            AuthStep::Handshake(request, v) => {
                self.send_setup(now, conn, Origin::SaslHandshake, &request, v)
            }
            AuthStep::Authenticate(request, v) => {
                self.send_setup(now, conn, Origin::SaslAuthenticate, &request, v)
            }
            AuthStep::Done(lifetime) => self.authenticated(now, conn, lifetime),
            AuthStep::Failed(message) => self.authentication_failed(now, conn, message),
        }
    }

    /// Closes `conn` for a failed authentication; the address's failures
    /// ([`AddressFailures::failed`](super::address_failures::AddressFailures::failed))
    /// report it and back the address off.
    fn authentication_failed(&mut self, now: Instant, conn: ConnectionId, message: String) {
        let mechanism = self
            .config
            .sasl
            .as_ref()
            .map_or("?", |s| s.mechanism.name())
            .to_owned();
        self.close(
            now,
            conn,
            CloseReason::Error,
            Some(ConnectionError::Authentication { mechanism, message }),
        );
    }

    /// SaslHandshake answered on `conn`: the exchange starts, once the
    /// OAUTHBEARER token is at hand when the mechanism needs one.
    pub(super) fn on_sasl_handshake(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        version: i16,
        body: Bytes,
    ) {
        match Authentication::handshake_answered(version, body, self.config.sasl.as_ref()) {
            Err(e) => return self.close_undecodable(now, conn, ApiKey::SaslHandshake, &e),
            Ok(Some(step)) => return self.take_auth_step(now, conn, step),
            Ok(None) => {}
        }
        let Some(sasl) = self.config.sasl.clone() else {
            return;
        };
        let token = if sasl.mechanism == Mechanism::OAuthBearer {
            match self.oauth_token(now, &sasl) {
                super::oauth::TokenNow::Ready(t) => Some(t),
                super::oauth::TokenNow::Wait => {
                    // The exchange starts when the token comes
                    // (`handle_oauth_token`); the setup timeout still
                    // covers the wait.
                    if let Some(auth) = self.authentication(conn) {
                        auth.awaiting_token = true;
                    }
                    return;
                }
                super::oauth::TokenNow::Failed(e) => {
                    return self.token_provider_failed(now, conn, e)
                }
            }
        } else {
            None
        };
        self.start_sasl_session(now, conn, &sasl, token.as_ref());
    }

    /// Starts the SASL exchange on `conn` (its SaslHandshake answered): the
    /// session and its first SaslAuthenticate.
    pub(super) fn start_sasl_session(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        sasl: &SaslConfig,
        token: Option<&OAuthToken>,
    ) {
        let mut random = [0u8; 24];
        (self.config.random_bytes)(&mut random);
        // Mixed with the cluster's own generator: a broken OS source alone
        // does not make nonces repeat.
        for chunk in random.chunks_mut(8) {
            let r = self.rng.next_u64().to_le_bytes();
            for (b, x) in chunk.iter_mut().zip(r) {
                *b ^= x;
            }
        }
        let Some(step) = self
            .authentication(conn)
            .and_then(|auth| auth.begin(sasl, random, token))
        else {
            return;
        };
        self.take_auth_step(now, conn, step);
    }

    /// Closes `conn` because the OAUTHBEARER token provider failed (a
    /// retriable cause, not a refusal: see
    /// [`ConnectionError::TokenProvider`]).
    pub(super) fn token_provider_failed(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        message: String,
    ) {
        self.close(
            now,
            conn,
            CloseReason::Error,
            Some(ConnectionError::TokenProvider {
                mechanism: Mechanism::OAuthBearer.name().to_owned(),
                message,
            }),
        );
    }

    /// SaslAuthenticate answered on `conn`.
    pub(super) fn on_sasl_authenticate(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        version: i16,
        body: Bytes,
    ) {
        let response = match Authentication::read_authenticate_answer(version, body) {
            Ok(Ok(response)) => response,
            Ok(Err(message)) => return self.authentication_failed(now, conn, message),
            Err(e) => return self.close_undecodable(now, conn, ApiKey::SaslAuthenticate, &e),
        };
        let Some(step) = self
            .authentication(conn)
            .and_then(|auth| auth.authenticate_answered(&response))
        else {
            return;
        };
        self.take_auth_step(now, conn, step);
    }

    /// The broker accepted the credentials. With a session lifetime, the
    /// next authentication is due at 85-95% of it, as the Java client
    /// picks (KIP-368: time for the round trips, and jitter so that many
    /// connections do not renew at once).
    fn authenticated(&mut self, now: Instant, conn: ConnectionId, lifetime: Option<Duration>) {
        let reauth_at = lifetime.map(|l| now + l.mul_f64(0.85 + 0.10 * self.rng.unit()));
        let mechanism = self
            .config
            .sasl
            .as_ref()
            .map_or("?", |s| s.mechanism.name())
            .to_owned();
        let Some(auth) = self.authentication(conn) else {
            return;
        };
        let (versions, reauth) = (auth.versions.clone(), auth.reauth);
        self.emit(
            now,
            conn,
            EventKind::Authenticated {
                mechanism,
                session_lifetime: lifetime,
                reauthentication: reauth,
            },
        );
        if reauth {
            let c = self.conns.get_mut(&conn).expect("present");
            c.phase = Phase::Ready {
                versions,
                reauth_at,
            };
        } else {
            self.became_ready(now, conn, versions, reauth_at);
        }
    }

    /// KIP-368: a ready connection whose SASL session is due for renewal
    /// authenticates again once its requests in flight are answered (new
    /// ones wait in its queue meanwhile), on the same socket.
    pub(super) fn reauthenticate(&mut self, now: Instant) {
        let due: Vec<ConnectionId> = self
            .conns
            .values()
            .filter(|c| {
                c.in_flight.is_empty()
                    && matches!(c.phase, Phase::Ready { reauth_at: Some(t), .. } if now >= t)
            })
            .map(|c| c.id)
            .collect();
        for id in due {
            let c = self.conns.get_mut(&id).expect("present");
            let Phase::Ready { versions, .. } = &c.phase else {
                continue;
            };
            let versions = versions.clone();
            log::debug!("connection {id} to {}: renewing its SASL session", c.addr);
            self.start_authentication(now, id, versions, true);
        }
    }
}
