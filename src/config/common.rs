//! The properties every client takes: the brokers, `client.id`, the
//! connections (timeouts, backoffs, keepalive), `client.runtime`, and
//! security (`security.protocol`, `ssl.*`, `sasl.*`).
//!
//! [`ConsumerConfig`](super::ConsumerConfig) and
//! [`ProducerConfig`](super::ProducerConfig) both embed them. Their table
//! ([`properties`]) gives the fields, the parser, each value's check, the
//! rendering, and the getters and setters both clients have; this module
//! adds what the table does not say: how the values agree
//! ([`CommonBuilder::build`]), the one property without a field
//! (`client.dns.lookup`), what the connections are made of
//! ([`Common::cluster_config`]), and the getters and setters that are code
//! rather than properties ([`common_getters`], [`common_setters`]).

mod properties;

pub(super) use properties::common_table;

use super::security::{parse_mechanism, parse_oauthbearer_config, SaslSettings, SASL_MECHANISMS};
use super::table::property_values;
use super::values::{
    comma_list, config_error, invalid, ms, optional, parse_bool, parse_bootstrap_servers, parse_ms,
    parsed, path_if_set, path_or_none, secret, secret_or_none, shown, shown_if_set, some_secret,
    some_text, text, text_or_none, INT_MAX, LONG_MAX,
};
use super::{
    BrokerAddress, ClientRuntime, EndpointIdentification, MetadataRecoveryStrategy,
    SecurityProtocol,
};
use crate::error::Error;
use crate::sasl::{OAuthTokenProvider, SaslConfig, Secret};
use std::path::PathBuf;
use std::time::Duration;

common_table!(property_values! {
    /// The shared properties as set, before they are checked.
    #[derive(Debug, Clone)]
    pub(crate) builder CommonBuilder;
    /// The shared properties, checked.
    #[derive(Debug, Clone, PartialEq, Eq)]
    values Common;
    computed Computed;
    extra {
        /// Where OAUTHBEARER tokens come from (code, not a property).
        token_provider: Option<OAuthTokenProvider> = None;
    }
});

/// The properties whose values are secrets, for every client.
pub(super) const SECRET_PROPERTIES: &[&str] = &[SSL_KEY_PEM, SSL_KEY_PASSWORD, SASL_PASSWORD];

/// librdkafka's names for shared properties, suggested by "did you mean"
/// (not accepted: the Java names are).
pub(super) const ALIASES: &[(&str, &str)] = &[
    ("metadata.broker.list", BOOTSTRAP_SERVERS),
    ("topic.metadata.refresh.interval.ms", METADATA_MAX_AGE_MS),
    ("socket.timeout.ms", REQUEST_TIMEOUT_MS),
];

const DEFAULT_RECONNECT_BACKOFF: Duration = Duration::from_millis(50);
const DEFAULT_RECONNECT_BACKOFF_MAX: Duration = Duration::from_millis(1000);

/// The shared values [`CommonBuilder::build`] computes from several
/// properties.
pub(in crate::config) struct Computed {
    bootstrap_servers: Vec<BrokerAddress>,
    reconnect_backoff: Duration,
    reconnect_backoff_max: Duration,
    retry_backoff_max: Duration,
}

impl CommonBuilder {
    /// Sets `property` from its untrimmed `value` if it is a shared one;
    /// `None` if it is not.
    pub(super) fn set(&mut self, property: &str, value: &str) -> Option<Result<(), Error>> {
        if property == CLIENT_DNS_LOOKUP {
            let v = value.trim();
            if !v.eq_ignore_ascii_case("use_all_dns_ips") {
                return Some(Err(invalid(
                    property,
                    v,
                    "only use_all_dns_ips is supported: names are resolved at connect time \
                     and every address is tried",
                )));
            }
            return Some(Ok(()));
        }
        self.parse(property, value)
    }

    /// Checks every shared value and how they agree. `builder` names the
    /// builder type in advice ("ConsumerConfigBuilder").
    pub(super) fn build(self, builder: &str) -> Result<Common, Error> {
        let b = self;
        let bootstrap_servers = parse_bootstrap_servers(
            b.bootstrap_servers
                .as_deref()
                .ok_or_else(|| config_error(BOOTSTRAP_SERVERS, "required, but not set"))?,
        )?;
        b.check_each()?;

        // Java's rule: reconnect.backoff.ms alone also sets the maximum,
        // which turns exponential backoff off.
        let reconnect_backoff = b.reconnect_backoff.unwrap_or(DEFAULT_RECONNECT_BACKOFF);
        let reconnect_backoff_max = b
            .reconnect_backoff_max
            .or(b.reconnect_backoff)
            .unwrap_or(DEFAULT_RECONNECT_BACKOFF_MAX);
        if reconnect_backoff_max < reconnect_backoff {
            return Err(invalid(
                RECONNECT_BACKOFF_MAX_MS,
                reconnect_backoff_max.as_millis(),
                format!(
                    "must not be lower than {RECONNECT_BACKOFF_MS} ({})",
                    reconnect_backoff.as_millis()
                ),
            ));
        }
        if b.socket_connection_setup_timeout_max < b.socket_connection_setup_timeout {
            return Err(invalid(
                SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS,
                b.socket_connection_setup_timeout_max.as_millis(),
                format!(
                    "must not be lower than {SOCKET_CONNECTION_SETUP_TIMEOUT_MS} ({})",
                    b.socket_connection_setup_timeout.as_millis()
                ),
            ));
        }
        b.sasl().check(b.security_protocol, builder)?;
        b.check_one_source_each()?;

        let computed = Computed {
            bootstrap_servers,
            reconnect_backoff,
            reconnect_backoff_max,
            retry_backoff_max: b.retry_backoff_max.max(b.retry_backoff),
        };
        Ok(b.into_values(computed))
    }

    /// A file and a PEM text for the same thing are one too many.
    fn check_one_source_each(&self) -> Result<(), Error> {
        for (location, pem, present) in [
            (
                SSL_CA_LOCATION,
                SSL_CA_PEM,
                (self.ssl_ca_location.is_some(), self.ssl_ca_pem.is_some()),
            ),
            (
                SSL_CERTIFICATE_LOCATION,
                SSL_CERTIFICATE_PEM,
                (
                    self.ssl_certificate_location.is_some(),
                    self.ssl_certificate_pem.is_some(),
                ),
            ),
            (
                SSL_KEY_LOCATION,
                SSL_KEY_PEM,
                (self.ssl_key_location.is_some(), self.ssl_key_pem.is_some()),
            ),
        ] {
            if present == (true, true) {
                return Err(config_error(
                    pem,
                    format!("set only one of {location} and {pem}"),
                ));
            }
        }
        Ok(())
    }

    /// The `sasl.*` settings as set.
    fn sasl(&self) -> SaslSettings<'_> {
        SaslSettings {
            mechanism: self.sasl_mechanism,
            username: self.sasl_username.as_deref(),
            password: self.sasl_password.as_ref(),
            oauthbearer_config: self.sasl_oauthbearer_config.as_deref(),
            unsecure_jwt: self.enable_sasl_oauthbearer_unsecure_jwt,
            token_provider: self.token_provider.as_ref(),
        }
    }
}

/// `connections.max.idle.ms`: `-1` (never close) or milliseconds.
/// `statistics.interval.ms`: 0 is none.
pub(in crate::config) fn non_zero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

fn parse_idle(property: &str, value: &str) -> Result<Option<Duration>, Error> {
    if value == "-1" {
        return Ok(None);
    }
    parse_ms(property, value)
        .map(Some)
        .map_err(|_| invalid(property, value, "expected -1 or milliseconds"))
}

fn check_idle(property: &str, idle: &Option<Duration>) -> Result<(), Error> {
    match idle {
        Some(idle) if idle.as_millis() == 0 => Err(invalid(
            property,
            "0",
            "expected -1 (never close idle connections) or a positive number",
        )),
        _ => super::values::check_ms(property, *idle, 1, LONG_MAX),
    }
}

fn render_idle(idle: &Option<Duration>) -> Option<String> {
    Some(idle.map_or("-1".to_owned(), |d| d.as_millis().to_string()))
}

/// `ssl.ca.location`: an empty value unsets, as in librdkafka; its `probe`
/// (look for the system's CA file) is what no value does here.
fn ca_location(_: &str, value: &str) -> Result<Option<PathBuf>, Error> {
    Ok(Some(value)
        .filter(|v| !v.is_empty() && !v.eq_ignore_ascii_case("probe"))
        .map(PathBuf::from))
}

/// `base` doubling to `max` (at least `base`), ±20% jitter.
fn backoff(base: Duration, max: Duration) -> crate::cluster::ExponentialBackoff {
    crate::cluster::ExponentialBackoff {
        base,
        max: max.max(base),
        jitter: 0.2,
    }
}

impl Common {
    /// The retry policy every request kind shares: `retry.backoff.ms`
    /// doubling to `retry.backoff.max.ms`, ±20% jitter (KIP-580).
    pub(crate) fn retry_policy(&self) -> crate::cluster::ExponentialBackoff {
        backoff(self.retry_backoff, self.retry_backoff_max)
    }

    /// The connection manager's settings from the properties every client
    /// shares; the client sets the rest (`group.id`, in-flight limit,
    /// frame size, topic creation).
    pub(crate) fn cluster_config(&self) -> crate::cluster::ClusterConfig {
        let mut cc = crate::cluster::ClusterConfig::new(
            self.bootstrap_servers.iter().map(|b| b.to_string()),
        );
        cc.client_id = Some(self.client_id.clone());
        cc.request_timeout = self.request_timeout;
        cc.connections_max_idle = self.connections_max_idle;
        cc.reconnect_backoff = backoff(self.reconnect_backoff, self.reconnect_backoff_max);
        cc.refusal_backoff = backoff(
            self.reconnect_backoff_max.max(Duration::from_secs(1)),
            crate::cluster::REFUSAL_BACKOFF_MAX,
        );
        cc.setup_timeout = backoff(
            self.socket_connection_setup_timeout,
            self.socket_connection_setup_timeout_max,
        );
        cc.retry_backoff = self.retry_policy();
        cc.metadata_max_age = self.metadata_max_age;
        cc.rebootstrap = match self.metadata_recovery_strategy {
            MetadataRecoveryStrategy::Rebootstrap => {
                Some(self.metadata_recovery_rebootstrap_trigger)
            }
            MetadataRecoveryStrategy::None => None,
        };
        cc.sasl = self.sasl_config();
        cc
    }

    /// Appends every shared property with its value, as `to_properties`
    /// lists them: the secrets never, unset optional ones not at all. The
    /// client sorts the list into its own order.
    pub(super) fn render_all(&self, out: &mut Vec<(&'static str, String)>) {
        self.render(out);
        out.push((CLIENT_DNS_LOOKUP, "use_all_dns_ips".to_owned()));
        debug_assert!(out.iter().all(|(k, _)| !SECRET_PROPERTIES.contains(k)));
    }

    /// How connections authenticate: `None` unless `security.protocol`
    /// uses SASL.
    pub(crate) fn sasl_config(&self) -> Option<SaslConfig> {
        self.sasl().cluster_config(self.security_protocol)
    }

    /// The `sasl.*` settings, checked.
    fn sasl(&self) -> SaslSettings<'_> {
        SaslSettings {
            mechanism: self.sasl_mechanism,
            username: self.sasl_username.as_deref(),
            password: self.sasl_password.as_ref(),
            oauthbearer_config: self.sasl_oauthbearer_config.as_deref(),
            unsecure_jwt: self.enable_sasl_oauthbearer_unsecure_jwt,
            token_provider: self.token_provider.as_ref(),
        }
    }
}

/// Sorts `to_properties` output into the order of a client's
/// `PROPERTIES` (stable: a name not listed keeps its place at the end).
pub(super) fn sort_properties(out: &mut [(&'static str, String)], order: &[&str]) {
    out.sort_by_key(|(k, _)| order.iter().position(|p| p == k).unwrap_or(order.len()));
}

/// docs/configuration.md's rows for the two setters that are code, not
/// properties ([`common_setters`]): typed API, default, meaning,
/// validation.
#[cfg(test)]
pub(super) const CODE_DOCS: &[[&str; 4]] = &[
    [
        "`oauthbearer_token_provider(Fn)`",
        "none",
        "where OAUTHBEARER tokens come from",
        "OAUTHBEARER needs it (or the async one) or unsecured tokens",
    ],
    [
        "`oauthbearer_token_provider_async(Fn -> Future)`",
        "none",
        "the same, from a future run on the client's runtime (security.md, \"OAUTHBEARER token providers\")",
        "as above",
    ],
];

/// The getters besides the shared properties' (which the table makes,
/// [`common_table`]), for a configuration type with a `common: Common`
/// field.
macro_rules! common_getters {
    () => {
        /// The properties every client shares, checked.
        #[allow(dead_code)] // the producer's core, with a runtime feature
        pub(crate) fn common(&self) -> &crate::config::common::Common {
            &self.common
        }

        /// The OAUTHBEARER token provider, if set.
        pub fn oauthbearer_token_provider(&self) -> Option<&crate::sasl::OAuthTokenProvider> {
            self.common.token_provider.as_ref()
        }
    };
}

/// The setters besides the shared properties' (which the table makes,
/// [`common_table`]), for a builder type with a `common: CommonBuilder`
/// field; `$config` names the configuration type it builds, in the
/// documentation.
macro_rules! common_setters {
    ($config:ident) => {
        #[doc = concat!(
                                    "`sasl.password` (PLAIN, SCRAM). Kept out of `Debug` and\n[`",
                                    stringify!($config),
                                    "::to_properties`]."
                                )]
        pub fn sasl_password(mut self, password: impl Into<String>) -> Self {
            self.common.sasl_password = Some(Secret::new(password.into()));
            self.on_set("sasl.password");
            self
        }

        /// Where OAUTHBEARER tokens come from: `provider` is called when a
        /// connection authenticates and the last token has used 80% of its
        /// lifetime; an `Err` fails that authentication with its message
        /// (retriable: the client tries again after the reconnect backoff).
        /// It runs on the client's background task and must not block for
        /// long: a token that takes a network call to get belongs in
        /// [`oauthbearer_token_provider_async`](Self::oauthbearer_token_provider_async).
        /// See [`OAuthTokenProvider`](crate::config::OAuthTokenProvider).
        ///
        /// ```
        /// use lazykafka::config::{Mechanism, OAuthToken};
        /// use lazykafka::config::SecurityProtocol;
        #[doc = concat!("use lazykafka::", stringify!($config), ";")]
        /// use std::time::Duration;
        ///
        #[doc = concat!("let config = ", stringify!($config), "::builder()")]
        ///     .bootstrap_servers("localhost:9092")
        ///     .security_protocol(SecurityProtocol::SaslPlaintext)
        ///     .sasl_mechanism(Mechanism::OAuthBearer)
        ///     .oauthbearer_token_provider(|| {
        ///         // Fetch (or take from a cache) a token for this client.
        ///         Ok(OAuthToken::new("eyJhbGciOi...", Duration::from_secs(3600)))
        ///     })
        ///     .build()?;
        /// assert!(config.oauthbearer_token_provider().is_some());
        /// # Ok::<(), lazykafka::Error>(())
        /// ```
        pub fn oauthbearer_token_provider(
            mut self,
            provider: impl Fn() -> Result<crate::sasl::OAuthToken, String> + Send + Sync + 'static,
        ) -> Self {
            self.common.token_provider = Some(crate::sasl::OAuthTokenProvider::new(provider));
            self
        }

        /// Where OAUTHBEARER tokens come from, asynchronously: `provider`
        /// returns a future (an HTTP call to an OIDC token endpoint, say),
        /// which the client runs as a task of its own runtime (tokio or
        /// async-std), never blocking its own task. Connections that need a
        /// token wait for it during their authentication, and share one
        /// call; once 80% of a token's lifetime has passed, a new one is
        /// asked for ahead of need. An `Err` (or a panic, or no answer
        /// within `request.timeout.ms`) fails the waiting connections'
        /// authentication with a retriable error naming the provider; the
        /// client calls it again after the reconnect backoff. See
        /// [`OAuthTokenProvider::new_async`](crate::config::OAuthTokenProvider::new_async)
        /// and `docs/security.md`.
        ///
        /// ```
        /// use lazykafka::config::{Mechanism, OAuthToken};
        /// use lazykafka::config::SecurityProtocol;
        #[doc = concat!("use lazykafka::", stringify!($config), ";")]
        /// use std::time::Duration;
        ///
        /// async fn token_from_endpoint() -> Result<OAuthToken, String> {
        ///     // POST to the token endpoint; read access_token and expires_in.
        ///     Ok(OAuthToken::new("eyJhbGciOi...", Duration::from_secs(3600)))
        /// }
        ///
        #[doc = concat!("let config = ", stringify!($config), "::builder()")]
        ///     .bootstrap_servers("localhost:9092")
        ///     .security_protocol(SecurityProtocol::SaslPlaintext)
        ///     .sasl_mechanism(Mechanism::OAuthBearer)
        ///     .oauthbearer_token_provider_async(token_from_endpoint)
        ///     .build()?;
        /// assert!(config.oauthbearer_token_provider().unwrap().is_async());
        /// # Ok::<(), lazykafka::Error>(())
        /// ```
        pub fn oauthbearer_token_provider_async<F, Fut>(mut self, provider: F) -> Self
        where
            F: Fn() -> Fut + Send + Sync + 'static,
            Fut: std::future::Future<Output = Result<crate::sasl::OAuthToken, String>>
                + Send
                + 'static,
        {
            self.common.token_provider =
                Some(crate::sasl::OAuthTokenProvider::new_async(provider));
            self
        }
    };
}

pub(super) use {common_getters, common_setters};
