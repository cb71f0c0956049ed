//! A connection's SASL phase (KIP-43, KIP-152), between the ApiVersions
//! exchange and ready, and again when its session is renewed (KIP-368).
//!
//! [`Authentication`] is the phase's state, in the connection's
//! [`Phase::Authenticating`](super::conn::Phase::Authenticating):
//! SaslHandshake v1 names the mechanism, then SaslAuthenticate round trips
//! carry the mechanism's messages until the broker accepts the
//! credentials. It says what to do next as an
//! [`AuthStep`]; the connection manager carries steps out (sends, closes,
//! events, in `lifecycle.rs`) and supplies the OAUTHBEARER token (see
//! `oauth.rs`).

use crate::protocol::messages::decode_response_body;
use crate::protocol::messages::sasl_authenticate::{
    SaslAuthenticateRequest, SaslAuthenticateResponse,
};
use crate::protocol::messages::sasl_handshake::{SaslHandshakeRequest, SaslHandshakeResponse};
use crate::protocol::{ApiKey, ApiVersionTable, DecodeError, ErrorCode};
use crate::sasl::{Mechanism, OAuthToken, SaslConfig, SaslSession, SaslStep};
use bytes::Bytes;
use std::time::Duration;

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
    pub fn start(
        versions: ApiVersionTable,
        reauth: bool,
        mechanism: Mechanism,
    ) -> (Self, AuthStep) {
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
        Ok(Err(
            match response.error_message.filter(|m| !m.is_empty()) {
                Some(m) => format!("{m} ({code})"),
                None => code.to_string(),
            },
        ))
    }

    /// Takes a SaslAuthenticate answer the broker did not refuse: the next
    /// message to send, the session accepted (with its lifetime when it
    /// ends), or the mechanism's failure. `None` before the exchange
    /// started.
    pub fn authenticate_answered(
        &mut self,
        response: &SaslAuthenticateResponse,
    ) -> Option<AuthStep> {
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
