//! OAUTHBEARER tokens for the SASL phase (see `authentication.rs`): the
//! last token and when it is renewed, and the application's asynchronous
//! token provider, called as a task of the runtime's
//! ([`Action::FetchOAuthToken`]) once for every connection that waits.

use super::backoff::Retry;
use super::conn::Phase;
use super::{Action, Cluster};
use crate::events::ConnectionId;
use crate::sasl::{Mechanism, OAuthToken, OAuthTokenProvider, SaslConfig};
use std::time::{Duration, Instant};

/// The OAUTHBEARER token for a connection that authenticates now.
pub(super) enum TokenNow {
    /// The token to use.
    Ready(OAuthToken),
    /// The asynchronous provider's answer is waited for.
    Wait,
    /// The provider failed, with its message.
    Failed(String),
}

/// token provider made ahead of need (a provider that hands out tokens of
/// a very short lifetime is not called in a loop).
pub const OAUTH_REFRESH_MIN: Duration = Duration::from_secs(1);

/// OAUTHBEARER tokens (see [`OAuthTokenProvider`]).
#[derive(Debug, Default)]
pub(super) struct OAuthState {
    /// The last token and when it came: reused while less than 80% of its
    /// lifetime has passed (with an asynchronous provider, until its
    /// lifetime ends, a new one being asked for ahead).
    token: Option<(OAuthToken, Instant)>,
    /// An [`Action::FetchOAuthToken`] is out and its answer not in.
    fetching: bool,
    /// The asynchronous provider's failures in a row: the next call waits
    /// for the reconnect backoff.
    retry: Retry,
}

impl OAuthState {
    /// When the last token is due for renewal: 80% of its lifetime after
    /// it came (at least [`OAUTH_REFRESH_MIN`]).
    fn renew_at(&self) -> Option<Instant> {
        self.token
            .as_ref()
            .map(|(t, at)| *at + t.lifetime().mul_f64(0.8).max(OAUTH_REFRESH_MIN))
    }
}


impl Cluster {
    /// The OAUTHBEARER token for a connection that authenticates now: the
    /// last one while less than 80% of its lifetime has passed; else, from
    /// a synchronous provider, a new one at once; from an asynchronous
    /// one, the last one while it lasts (a new one is asked for ahead,
    /// [`Cluster::drive_oauth`]), else a wait for the one asked for.
    pub(super) fn oauth_token(&mut self, now: Instant, sasl: &SaslConfig) -> TokenNow {
        let Some(provider) = sasl.token_provider.as_ref() else {
            return TokenNow::Failed("no OAUTHBEARER token provider is configured".into());
        };
        if let Some((token, at)) = &self.oauth.token {
            let age = now.saturating_duration_since(*at);
            if age < token.lifetime().mul_f64(0.8)
                || (provider.is_async() && age < token.lifetime())
            {
                return TokenNow::Ready(token.clone());
            }
        }
        if provider.is_async() {
            // Asked for by the next step (`drive_oauth`), if it is not
            // already on its way.
            return TokenNow::Wait;
        }
        match provider.token() {
            Ok(token) => {
                self.oauth.token = Some((token.clone(), now));
                TokenNow::Ready(token)
            }
            Err(e) => TokenNow::Failed(e),
        }
    }

    /// The asynchronous token provider, if one is configured.
    fn async_token_provider(&self) -> Option<&OAuthTokenProvider> {
        self.config
            .sasl
            .as_ref()
            .filter(|s| s.mechanism == Mechanism::OAuthBearer)
            .and_then(|s| s.token_provider.as_ref())
            .filter(|p| p.is_async())
    }

    /// Whether a connection waits for an OAUTHBEARER token.
    pub(super) fn awaits_token(&self) -> bool {
        self.conns.values().any(|c| {
            matches!(&c.phase, Phase::Authenticating(auth) if auth.awaiting_token)
        })
    }

    /// When the asynchronous token provider is to be called next, if it
    /// is: at once (after its backoff) for a connection that waits; at
    /// [`OAuthState::renew_at`] (or after the backoff of a renewal that
    /// failed) while connections live. `None` while a call is out.
    pub(super) fn oauth_due(&self) -> Option<Instant> {
        self.async_token_provider()?;
        if self.oauth.fetching {
            return None;
        }
        let wanted = if self.awaits_token() {
            self.epoch
        } else if !self.conns.is_empty() {
            self.oauth.renew_at()?
        } else {
            return None;
        };
        Some(self.oauth.retry.not_before().map_or(wanted, |t| t.max(wanted)))
    }

    /// Asks the runtime for an OAUTHBEARER token when it is due
    /// ([`Cluster::oauth_due`]).
    pub(super) fn drive_oauth(&mut self, now: Instant) {
        if self.oauth_due().is_none_or(|t| now < t) {
            return;
        }
        let Some(provider) = self.async_token_provider().cloned() else {
            return;
        };
        self.oauth.fetching = true;
        self.oauth.retry.clear_wait();
        log::debug!("asking the OAUTHBEARER token provider for a token");
        self.actions.push_back(Action::FetchOAuthToken {
            provider,
            timeout: self.config.request_timeout,
        });
    }

    /// The asynchronous OAUTHBEARER token provider answered (the runtime
    /// ran the future of an [`Action::FetchOAuthToken`]): with a token,
    /// the connections that waited for one start their exchange with it,
    /// and it is kept for the next ones until 80% of its lifetime has
    /// passed, when a new one is asked for; with an `Err`, each of them is
    /// closed with [`ConnectionError::TokenProvider`](crate::events::ConnectionError::TokenProvider) (a failure of its
    /// address, backed off and reported as connection failures are), and
    /// the provider is called again only after the reconnect backoff.
    pub fn handle_oauth_token(
        &mut self,
        now: Instant,
        token: Result<OAuthToken, String>,
    ) {
        self.oauth.fetching = false;
        let waiting: Vec<ConnectionId> = self
            .conns
            .values()
            .filter(|c| matches!(&c.phase, Phase::Authenticating(auth) if auth.awaiting_token))
            .map(|c| c.id)
            .collect();
        for id in &waiting {
            if let Some(Phase::Authenticating(auth)) = self.conns.get_mut(id).map(|c| &mut c.phase) {
                auth.awaiting_token = false;
            }
        }
        match token {
            Ok(token) => {
                self.oauth.retry.succeeded();
                self.oauth.token = Some((token.clone(), now));
                if let Some(sasl) = self.config.sasl.clone() {
                    for id in waiting {
                        self.start_sasl_session(now, id, &sasl, Some(&token));
                    }
                }
            }
            Err(message) => {
                let delay =
                    self.oauth
                        .retry
                        .failed(now, &self.config.reconnect_backoff, self.rng.unit());
                if waiting.is_empty() {
                    // A renewal ahead of need: the last token still serves.
                    let log = if self.oauth.retry.failures() == 1 {
                        log::Level::Warn
                    } else {
                        log::Level::Debug
                    };
                    log::log!(
                        log,
                        "the OAUTHBEARER token provider failed: {message}; asked again in {delay:?}"
                    );
                }
                for id in waiting {
                    self.token_provider_failed(now, id, message.clone());
                }
            }
        }
        self.drive(now);
    }
}
