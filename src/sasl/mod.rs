//! SASL authentication: the mechanisms, their secrets, and the client side
//! of each exchange.
//!
//! A connection with SASL configured (`security.protocol` `SASL_PLAINTEXT`
//! or `SASL_SSL`) runs, after ApiVersions, a SaslHandshake v1 naming the
//! mechanism (KIP-43) and then SaslAuthenticate requests carrying the
//! mechanism's messages (KIP-152) until the broker accepts; only then do
//! the consumer's requests flow. When the broker gives the session a
//! lifetime (SaslAuthenticate v1+, KIP-368), the client authenticates again
//! on the same connection before it ends. See `docs/security.md`.
//!
//! This module is pure: the exchanges take and return bytes; the
//! [`cluster`](crate::cluster) state machine carries them. The properties,
//! mechanisms and failures are described in `docs/security.md` (the
//! [`tls`](crate::tls) module's documentation).

pub(crate) mod scram;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use base64::prelude::{Engine as _, BASE64_URL_SAFE_NO_PAD};

/// A SASL mechanism (`sasl.mechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Mechanism {
    /// `PLAIN` (RFC 4616): the password travels as it is, so use it over
    /// TLS (`SASL_SSL`) only, outside tests.
    Plain,
    /// `SCRAM-SHA-256` (RFC 5802, RFC 7677; Kafka's KIP-84): the password
    /// never travels, and the broker proves it knows it too.
    ScramSha256,
    /// `SCRAM-SHA-512` (RFC 5802; KIP-84).
    ScramSha512,
    /// `OAUTHBEARER` (RFC 7628; KIP-255): a bearer token from a provider
    /// the application supplies.
    OAuthBearer,
}

impl Mechanism {
    /// Every mechanism.
    pub const ALL: [Mechanism; 4] = [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
        Mechanism::OAuthBearer,
    ];

    /// The name Kafka uses (`PLAIN`, `SCRAM-SHA-256`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// Whether it authenticates with `sasl.username` and `sasl.password`.
    pub fn uses_password(self) -> bool {
        self != Mechanism::OAuthBearer
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mechanism {
    type Err = String;

    /// Reads a mechanism's name, in any case.
    fn from_str(s: &str) -> Result<Self, String> {
        Mechanism::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                "unknown SASL mechanism; expected PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"
                    .to_owned()
            })
    }
}

/// A secret (a password, a token): kept out of `Debug` and `Display`, which
/// show `[redacted]`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps `secret`.
    pub fn new(secret: impl Into<String>) -> Self {
        Secret(secret.into())
    }

    /// The secret itself, for the code that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Secret::new(s)
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret::new(s)
    }
}

/// An OAUTHBEARER token, as a [token provider](OAuthTokenProvider) returns
/// it (KIP-255).
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthToken {
    value: Secret,
    lifetime: Duration,
    extensions: BTreeMap<String, String>,
}

impl OAuthToken {
    /// A token (its compact serialization, such as a JWT) good for
    /// `lifetime` from now: it is used for new connections and
    /// re-authentications until 80% of that has passed, and asked for
    /// again then.
    pub fn new(value: impl Into<String>, lifetime: Duration) -> Self {
        OAuthToken {
            value: Secret::new(value),
            lifetime,
            extensions: BTreeMap::new(),
        }
    }

    /// Adds a SASL extension (KIP-342: `key=value` pairs sent beside the
    /// token, such as `logicalCluster`).
    pub fn extension(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extensions.insert(key.into(), value.into());
        self
    }

    /// The token.
    pub fn value(&self) -> &Secret {
        &self.value
    }

    /// How long it is good for, from when the provider returned it.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// The SASL extensions.
    pub fn extensions(&self) -> &BTreeMap<String, String> {
        &self.extensions
    }
}

impl fmt::Debug for OAuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthToken")
            .field("value", &self.value)
            .field("lifetime", &self.lifetime)
            .field("extensions", &self.extensions.keys().collect::<Vec<_>>())
            .finish()
    }
}

type SyncProviderFn = dyn Fn() -> Result<OAuthToken, String> + Send + Sync;
type AsyncProviderFn = dyn Fn() -> OAuthTokenFuture + Send + Sync;

/// What an asynchronous [`OAuthTokenProvider`] returns: a future that
/// yields a token, or why there is none.
pub type OAuthTokenFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<OAuthToken, String>> + Send>>;

/// Where a provider's tokens come from.
#[derive(Clone)]
enum Source {
    /// A function called where the token is needed.
    Sync(Arc<SyncProviderFn>),
    /// A function whose future is run as a task of the client's runtime.
    Async(Arc<AsyncProviderFn>),
}

/// Supplies OAUTHBEARER tokens: a function the application gives, called
/// when a connection authenticates and the last token has used 80% of its
/// lifetime. It comes in two kinds:
///
/// - [`OAuthTokenProvider::new`] (from
///   [`ConsumerConfigBuilder::oauthbearer_token_provider`](crate::config::ConsumerConfigBuilder::oauthbearer_token_provider)):
///   a plain function, called on the client's background task when a
///   token is needed. It must not block for long: the client's
///   connections, timers and heartbeats wait while it runs. Fit for a
///   token the application keeps at hand (fetched ahead, from a cache).
/// - [`OAuthTokenProvider::new_async`] (from
///   [`ConsumerConfigBuilder::oauthbearer_token_provider_async`](crate::config::ConsumerConfigBuilder::oauthbearer_token_provider_async)):
///   a function returning a future, such as an HTTP call to an OIDC
///   token endpoint. The future runs as a task of its own on the client's
///   runtime (tokio or async-std), so it may await that runtime's timers
///   and sockets, and the client goes on meanwhile: connections that need
///   the token wait for it in their authentication (several share one
///   call), and once 80% of a token's lifetime has passed a new one is
///   asked for ahead of need, so that re-authentications (KIP-368) find it
///   ready. A call that does not answer within `request.timeout.ms` counts
///   as failed.
///
/// A provider that fails (returns `Err`, or panics) fails the
/// authentication of the connections that waited for it with
/// [`ConnectionError::TokenProvider`](crate::events::ConnectionError::TokenProvider),
/// naming its message: the client reports it (a retriable
/// [`Error::Connection`](crate::Error::Connection)) and tries again after
/// the reconnect backoff (`reconnect.backoff.ms` doubling to
/// `reconnect.backoff.max.ms`), so a token endpoint that is down for a
/// while is called at that pace, not in a loop. See `docs/security.md`.
#[derive(Clone)]
pub struct OAuthTokenProvider(Source);

impl OAuthTokenProvider {
    /// Wraps a synchronous `provider`.
    pub fn new(provider: impl Fn() -> Result<OAuthToken, String> + Send + Sync + 'static) -> Self {
        OAuthTokenProvider(Source::Sync(Arc::new(provider)))
    }

    /// Wraps an asynchronous `provider`: each call returns a future that
    /// the client runs on its runtime.
    ///
    /// ```
    /// use lazykafka::config::{OAuthToken, OAuthTokenProvider};
    /// use std::time::Duration;
    ///
    /// let provider = OAuthTokenProvider::new_async(|| async {
    ///     // An HTTP call to the token endpoint would go here.
    ///     Ok(OAuthToken::new("eyJhbGciOi...", Duration::from_secs(3600)))
    /// });
    /// assert!(provider.is_async());
    /// let token = futures::executor::block_on(provider.fetch()).unwrap();
    /// assert_eq!(token.lifetime(), Duration::from_secs(3600));
    /// ```
    pub fn new_async<F, Fut>(provider: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<OAuthToken, String>> + Send + 'static,
    {
        OAuthTokenProvider(Source::Async(Arc::new(move || {
            Box::pin(provider()) as OAuthTokenFuture
        })))
    }

    /// Whether it was made with [`OAuthTokenProvider::new_async`].
    pub fn is_async(&self) -> bool {
        matches!(self.0, Source::Async(_))
    }

    /// A new token, or why there is none, from a synchronous provider. A
    /// panic of the provider is returned as an `Err` naming it. An
    /// asynchronous provider is not called: the answer is an `Err` saying
    /// to use [`OAuthTokenProvider::fetch`].
    pub fn token(&self) -> Result<OAuthToken, String> {
        match &self.0 {
            Source::Sync(f) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f()))
                .unwrap_or_else(|panic| {
                    Err(format!("the provider panicked: {}", panic_message(&*panic)))
                }),
            Source::Async(_) => Err(
                "this OAUTHBEARER token provider is asynchronous: use OAuthTokenProvider::fetch"
                    .to_owned(),
            ),
        }
    }

    /// A new token, or why there is none, from either kind of provider: an
    /// asynchronous provider's future (a panic, when it is called or
    /// polled, is an `Err` naming it), or a synchronous provider's answer,
    /// got at this call.
    pub fn fetch(&self) -> OAuthTokenFuture {
        match &self.0 {
            Source::Sync(_) => Box::pin(futures::future::ready(self.token())),
            Source::Async(f) => {
                use futures::FutureExt;
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f())) {
                    Ok(future) => Box::pin(
                        std::panic::AssertUnwindSafe(future)
                            .catch_unwind()
                            .map(|r| {
                                r.unwrap_or_else(|panic| {
                                    Err(format!(
                                        "the provider panicked: {}",
                                        panic_message(&*panic)
                                    ))
                                })
                            }),
                    ),
                    Err(panic) => Box::pin(futures::future::ready(Err(format!(
                        "the provider panicked: {}",
                        panic_message(&*panic)
                    )))),
                }
            }
        }
    }

    /// An unsecured JWS (`"alg":"none"`) token for `principal`, good for
    /// `lifetime`, as librdkafka's `enable.sasl.oauthbearer.unsecure.jwt`
    /// makes: for brokers (and the mock cluster) that accept unsecured
    /// tokens, in tests only.
    pub fn unsecured(
        principal: impl Into<String>,
        lifetime: Duration,
        scope: Option<String>,
        extensions: BTreeMap<String, String>,
    ) -> Self {
        let principal = principal.into();
        OAuthTokenProvider::new(move || {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_err(|e| e.to_string())?;
            let mut token = OAuthToken::new(
                unsecured_jws(&principal, now, lifetime, scope.as_deref()),
                lifetime,
            );
            token.extensions = extensions.clone();
            Ok(token)
        })
    }
}

/// The message a panic carried, when it is a string.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

impl fmt::Debug for OAuthTokenProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_async() {
            "OAuthTokenProvider(async ..)"
        } else {
            "OAuthTokenProvider(..)"
        })
    }
}

impl PartialEq for OAuthTokenProvider {
    /// The same provider (not merely one that returns equal tokens).
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Source::Sync(a), Source::Sync(b)) => Arc::ptr_eq(a, b),
            (Source::Async(a), Source::Async(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for OAuthTokenProvider {}

/// Escapes a string for a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An unsecured JWS (RFC 7515 with `"alg":"none"`, RFC 7519 claims `sub`,
/// `iat`, `exp`), the token Kafka's `OAuthBearerUnsecuredJws` reads.
/// `now` is the time since the Unix epoch.
pub(crate) fn unsecured_jws(
    principal: &str,
    now: Duration,
    lifetime: Duration,
    scope: Option<&str>,
) -> String {
    let header = BASE64_URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
    let iat = now.as_secs_f64();
    let exp = (now + lifetime).as_secs_f64();
    let scope = scope
        .map(|s| format!(",\"scope\":{}", json_string(s)))
        .unwrap_or_default();
    let claims = format!(
        "{{\"sub\":{},\"iat\":{iat:.3},\"exp\":{exp:.3}{scope}}}",
        json_string(principal)
    );
    format!("{header}.{}.", BASE64_URL_SAFE_NO_PAD.encode(claims))
}

/// What the cluster needs to authenticate its connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslConfig {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// `sasl.username` (PLAIN, SCRAM).
    pub username: String,
    /// `sasl.password` (PLAIN, SCRAM).
    pub password: Secret,
    /// Where OAUTHBEARER tokens come from.
    pub token_provider: Option<OAuthTokenProvider>,
}

impl SaslConfig {
    /// PLAIN or SCRAM with a user name and password.
    pub fn password(mechanism: Mechanism, username: &str, password: &str) -> Self {
        SaslConfig {
            mechanism,
            username: username.to_owned(),
            password: Secret::new(password),
            token_provider: None,
        }
    }

    /// OAUTHBEARER with tokens from `provider`.
    pub fn oauthbearer(provider: OAuthTokenProvider) -> Self {
        SaslConfig {
            mechanism: Mechanism::OAuthBearer,
            username: String::new(),
            password: Secret::default(),
            token_provider: Some(provider),
        }
    }
}

/// What the client sends next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SaslStep {
    /// Another SaslAuthenticate with these bytes.
    Send(Vec<u8>),
    /// The exchange is complete on the client's side.
    Done,
}

/// The client side of one authentication exchange.
#[derive(Debug)]
pub(crate) enum SaslSession {
    /// Sent the PLAIN message; the broker's answer ends it.
    Plain,
    ScramSha256(scram::ScramClient<sha2::Sha256>),
    ScramSha512(scram::ScramClient<sha2::Sha512>),
    /// Sent the token; the broker's answer ends it.
    OAuthBearer,
}

impl SaslSession {
    /// Starts an exchange: the session and its first message. `nonce` is
    /// the SCRAM client nonce (random, printable, without `,`); `token` the
    /// OAUTHBEARER token.
    pub fn start(
        config: &SaslConfig,
        nonce: &str,
        token: Option<&OAuthToken>,
    ) -> Result<(SaslSession, Vec<u8>), String> {
        let user = &config.username;
        let password = config.password.expose();
        Ok(match config.mechanism {
            Mechanism::Plain => {
                // RFC 4616: [authzid] NUL authcid NUL passwd.
                let message = format!("\0{user}\0{password}").into_bytes();
                (SaslSession::Plain, message)
            }
            Mechanism::ScramSha256 => {
                let c = scram::ScramClient::new(user, password, nonce);
                let first = c.client_first().into_bytes();
                (SaslSession::ScramSha256(c), first)
            }
            Mechanism::ScramSha512 => {
                let c = scram::ScramClient::new(user, password, nonce);
                let first = c.client_first().into_bytes();
                (SaslSession::ScramSha512(c), first)
            }
            Mechanism::OAuthBearer => {
                let token = token.ok_or("no OAUTHBEARER token")?;
                (SaslSession::OAuthBearer, oauthbearer_message(token))
            }
        })
    }

    /// Takes the broker's bytes from a SaslAuthenticate response that
    /// carried no error.
    pub fn step(&mut self, server: &[u8]) -> Result<SaslStep, String> {
        let text =
            || std::str::from_utf8(server).map_err(|_| "the server's SASL message is not UTF-8");
        match self {
            SaslSession::Plain | SaslSession::OAuthBearer => Ok(SaslStep::Done),
            SaslSession::ScramSha256(c) => scram_step(c, text()?),
            SaslSession::ScramSha512(c) => scram_step(c, text()?),
        }
    }
}

fn scram_step<D: hmac::EagerHash>(
    c: &mut scram::ScramClient<D>,
    server: &str,
) -> Result<SaslStep, String> {
    if server.starts_with("r=") || server.starts_with("m=") {
        c.server_first(server)
            .map(|m| SaslStep::Send(m.into_bytes()))
            .map_err(|e| e.to_string())
    } else {
        c.server_final(server)
            .map(|()| SaslStep::Done)
            .map_err(|e| e.to_string())
    }
}

/// The OAUTHBEARER client's initial response (RFC 7628 §3.1), with the
/// KIP-342 extensions: `n,,` ^A `auth=Bearer <token>` ^A [`k=v` ^A]... ^A.
pub(crate) fn oauthbearer_message(token: &OAuthToken) -> Vec<u8> {
    let mut m = format!("n,,\x01auth=Bearer {}\x01", token.value.expose());
    for (k, v) in &token.extensions {
        m.push_str(&format!("{k}={v}\x01"));
    }
    m.push('\x01');
    m.into_bytes()
}

/// Fills `buf` from the operating system's random source (the default
/// [`ClusterConfig::random_bytes`](crate::cluster::ClusterConfig::random_bytes)).
/// Should that fail, `buf` is left as it is; the cluster mixes its own
/// generator in too.
pub fn os_random(buf: &mut [u8]) {
    if let Err(e) = getrandom::fill(buf) {
        log::warn!("the operating system's random source failed: {e}");
    }
}

/// A SCRAM client nonce: 24 random bytes, base64 (printable, no `,`, as
/// RFC 5802 §5.1 requires).
pub(crate) fn nonce(random: [u8; 24]) -> String {
    base64::prelude::BASE64_STANDARD.encode(random)
}

/// The parts of an OAUTHBEARER client message a server reads: the token and
/// the extensions (for the mock cluster).
#[cfg(any(test, feature = "mock"))]
pub(crate) fn parse_oauthbearer_message(
    message: &[u8],
) -> Result<(String, BTreeMap<String, String>), String> {
    let text = std::str::from_utf8(message).map_err(|_| "not UTF-8")?;
    let (gs2, rest) = text.split_once('\x01').ok_or("no GS2 header")?;
    if !gs2.starts_with("n,") && !gs2.starts_with("y,") {
        return Err("invalid GS2 header".into());
    }
    let mut token = None;
    let mut extensions = BTreeMap::new();
    for kv in rest.split('\x01').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').ok_or("invalid key=value")?;
        if k == "auth" {
            let t = v
                .strip_prefix("Bearer ")
                .ok_or("auth is not a Bearer token")?;
            token = Some(t.to_owned());
        } else {
            extensions.insert(k.to_owned(), v.to_owned());
        }
    }
    Ok((token.ok_or("no auth=")?, extensions))
}

/// Reads an unsecured JWS as Kafka's unsecured validator does: the
/// principal (`sub`) and the expiry (`exp`, seconds since the epoch), and
/// refuses a token that has a signature (for the mock cluster).
#[cfg(any(test, feature = "mock"))]
pub(crate) fn parse_unsecured_jws(token: &str) -> Result<(String, Option<f64>), String> {
    let mut parts = token.split('.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a JWS compact serialization".into());
    };
    if !signature.is_empty() {
        return Err("only unsecured (unsigned) tokens are accepted".into());
    }
    let decode = |s: &str| {
        BASE64_URL_SAFE_NO_PAD
            .decode(s.trim_end_matches('='))
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| "token part is not base64url JSON".to_owned())
    };
    let header = decode(header)?;
    if !header.replace(' ', "").contains(r#""alg":"none""#) {
        return Err("the token's alg is not none".into());
    }
    let claims = decode(claims)?;
    let sub = json_field(&claims, "sub")
        .and_then(|v| v.strip_prefix('"')?.split('"').next().map(str::to_owned))
        .filter(|s| !s.is_empty())
        .ok_or("the token has no sub claim")?;
    let exp =
        json_field(&claims, "exp").and_then(|v| v.split([',', '}']).next()?.trim().parse().ok());
    Ok((sub, exp))
}

/// The text after `"name":` in a flat JSON object (enough for the claims of
/// an unsecured test token).
#[cfg(any(test, feature = "mock"))]
fn json_field<'a>(json: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("\"{name}\"");
    let at = json.find(&key)? + key.len();
    Some(json[at..].trim_start().strip_prefix(':')?.trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanisms_parse_in_any_case() {
        for m in Mechanism::ALL {
            assert_eq!(m.name().to_lowercase().parse::<Mechanism>(), Ok(m));
            assert_eq!(m.to_string(), m.name());
        }
        assert!("GSSAPI".parse::<Mechanism>().is_err());
    }

    #[test]
    fn secrets_stay_out_of_debug_and_display() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?} {s}"), "[redacted] [redacted]");
        let t = OAuthToken::new("eyJ.secret.", Duration::from_secs(1)).extension("k", "v");
        assert!(!format!("{t:?}").contains("secret"));
        let c = SaslConfig::password(Mechanism::Plain, "alice", "hunter2");
        assert!(!format!("{c:?}").contains("hunter2"));
        let (session, _) = SaslSession::start(&c, "n", None).unwrap();
        assert!(!format!("{session:?}").contains("hunter2"));
    }

    #[test]
    fn plain_message_is_rfc4616() {
        let c = SaslConfig::password(Mechanism::Plain, "alice", "pw");
        let (mut s, first) = SaslSession::start(&c, "unused", None).unwrap();
        assert_eq!(first, b"\0alice\0pw");
        assert_eq!(s.step(b""), Ok(SaslStep::Done));
    }

    #[test]
    fn oauthbearer_message_round_trips_and_unsecured_tokens_read_back() {
        let jws = unsecured_jws(
            "alice",
            Duration::from_secs(1_700_000_000),
            Duration::from_secs(60),
            Some("read"),
        );
        let (sub, exp) = parse_unsecured_jws(&jws).unwrap();
        assert_eq!(sub, "alice");
        assert_eq!(exp, Some(1_700_000_060.0));
        let token = OAuthToken::new(jws.clone(), Duration::from_secs(60)).extension("a", "b");
        let message = oauthbearer_message(&token);
        assert_eq!(
            message,
            format!("n,,\x01auth=Bearer {jws}\x01a=b\x01\x01").into_bytes()
        );
        let (back, ext) = parse_oauthbearer_message(&message).unwrap();
        assert_eq!(back, jws);
        assert_eq!(ext.get("a").map(String::as_str), Some("b"));
        assert!(parse_unsecured_jws("a.b.signature").is_err());
    }

    #[test]
    fn nonces_are_printable_without_commas() {
        let n = nonce([0xfb; 24]);
        assert_eq!(n.len(), 32);
        assert!(n.chars().all(|c| c.is_ascii_graphic() && c != ','));
    }
}
