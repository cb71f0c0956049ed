//! OAUTHBEARER tokens for the SASL phase (see `authentication.rs`): the
//! last token and when it is renewed, and the calls of the application's
//! asynchronous token provider, made as a task of the runtime's
//! ([`Action::FetchOAuthToken`](super::Action::FetchOAuthToken)) once for
//! every connection that waits.

use super::backoff::{ExponentialBackoff, Retry, Rng};
use super::config::ClusterConfig;
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
    /// An [`Action::FetchOAuthToken`](super::Action::FetchOAuthToken) is out and its answer not in.
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

    /// The OAUTHBEARER token for a connection that authenticates now: the
    /// last one while less than 80% of its lifetime has passed; else, from
    /// a synchronous provider, a new one at once; from an asynchronous
    /// one, the last one while it lasts (a new one is asked for ahead,
    /// see [`OAuthState::due`]), else a wait for the one asked for.
    pub fn token_now(&mut self, now: Instant, sasl: &SaslConfig) -> TokenNow {
        let Some(provider) = sasl.token_provider.as_ref() else {
            return TokenNow::Failed("no OAUTHBEARER token provider is configured".into());
        };
        if let Some((token, at)) = &self.token {
            let age = now.saturating_duration_since(*at);
            if age < token.lifetime().mul_f64(0.8)
                || (provider.is_async() && age < token.lifetime())
            {
                return TokenNow::Ready(token.clone());
            }
        }
        if provider.is_async() {
            // Asked for by the next step, if it is not already on its way.
            return TokenNow::Wait;
        }
        match provider.token() {
            Ok(token) => {
                self.token = Some((token.clone(), now));
                TokenNow::Ready(token)
            }
            Err(e) => TokenNow::Failed(e),
        }
    }

    /// When the asynchronous token provider is to be called next, if it
    /// is: at `at_once` (after its backoff) when a connection waits for a
    /// token (`awaited`); at [`OAuthState::renew_at`] (or after the
    /// backoff of a renewal that failed) while connections live (`live`).
    /// `None` while a call is out.
    pub fn due(&self, awaited: bool, live: bool, at_once: Instant) -> Option<Instant> {
        if self.fetching {
            return None;
        }
        let wanted = if awaited {
            at_once
        } else if live {
            self.renew_at()?
        } else {
            return None;
        };
        Some(self.retry.not_before().map_or(wanted, |t| t.max(wanted)))
    }

    /// A call of the asynchronous provider goes out.
    pub fn fetching(&mut self) {
        self.fetching = true;
        self.retry.clear_wait();
    }

    /// The asynchronous provider answered: a token is kept, with when it
    /// came; a failure backs the next call off by `backoff`. Returns that
    /// backoff after a failure.
    pub fn answered(
        &mut self,
        now: Instant,
        token: &Result<OAuthToken, String>,
        backoff: &ExponentialBackoff,
        rng: &mut Rng,
    ) -> Option<Duration> {
        self.fetching = false;
        match token {
            Ok(token) => {
                self.retry.succeeded();
                self.token = Some((token.clone(), now));
                None
            }
            Err(_) => Some(self.retry.failed(now, backoff, rng.unit())),
        }
    }

    /// The provider's failures in a row.
    pub fn failures(&self) -> u32 {
        self.retry.failures()
    }
}

/// The asynchronous OAUTHBEARER token provider of `config`, if one is
/// configured.
pub(super) fn async_token_provider(config: &ClusterConfig) -> Option<&OAuthTokenProvider> {
    config
        .sasl
        .as_ref()
        .filter(|s| s.mechanism == Mechanism::OAuthBearer)
        .and_then(|s| s.token_provider.as_ref())
        .filter(|p| p.is_async())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backoff() -> ExponentialBackoff {
        ExponentialBackoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
            jitter: 0.0,
        }
    }

    #[test]
    fn the_provider_is_called_when_awaited_and_again_at_80_percent_of_a_lifetime() {
        let t = Instant::now();
        let mut rng = Rng::new(1);
        let mut oauth = OAuthState::default();
        assert_eq!(oauth.due(false, true, t), None);
        assert_eq!(oauth.due(true, true, t), Some(t));
        oauth.fetching();
        assert_eq!(oauth.due(true, true, t), None);

        let token = OAuthToken::new("good", Duration::from_secs(100));
        let now = t + Duration::from_secs(1);
        assert_eq!(oauth.answered(now, &Ok(token), &backoff(), &mut rng), None);
        assert_eq!(
            oauth.due(false, true, t),
            Some(now + Duration::from_secs(80))
        );
        assert_eq!(oauth.due(false, false, t), None);
    }

    #[test]
    fn a_failed_call_backs_the_next_one_off() {
        let t = Instant::now();
        let mut rng = Rng::new(1);
        let mut oauth = OAuthState::default();
        oauth.fetching();
        let failed = Err("down".to_owned());
        let delay = oauth.answered(t, &failed, &backoff(), &mut rng);
        assert_eq!(delay, Some(Duration::from_millis(100)));
        assert_eq!(oauth.failures(), 1);
        assert_eq!(
            oauth.due(true, true, t),
            Some(t + Duration::from_millis(100))
        );
    }
}
