//! The properties every client takes: the brokers, `client.id`, the
//! connections (timeouts, backoffs, keepalive), `client.runtime`, and
//! security (`security.protocol`, `ssl.*`, `sasl.*`).
//!
//! [`ConsumerConfig`](super::ConsumerConfig) and
//! [`ProducerConfig`](super::ProducerConfig) both embed them: one parser
//! ([`CommonBuilder::set`]), one validation ([`CommonBuilder::build`]), one
//! rendering ([`Common::render`]), and one set of getters and setters
//! ([`common_getters`], [`common_setters`]), written once for both types.

use super::security::{SaslProperties, SASL_PASSWORD, SECURITY_PROTOCOL};
use super::{
    check_ms, config_error, invalid, non_empty, parse_bool, parse_bootstrap_servers, parse_ms,
    BrokerAddress, ClientRuntime, EndpointIdentification, SecurityProtocol, INT_MAX,
};
use crate::error::Error;
use crate::sasl::{SaslConfig, Secret};
use std::path::PathBuf;
use std::time::Duration;

pub(super) const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";
pub(super) const CLIENT_ID: &str = "client.id";
pub(super) const CONNECTIONS_MAX_IDLE_MS: &str = "connections.max.idle.ms";
pub(super) const REQUEST_TIMEOUT_MS: &str = "request.timeout.ms";
pub(super) const METADATA_MAX_AGE_MS: &str = "metadata.max.age.ms";
pub(super) const RECONNECT_BACKOFF_MS: &str = "reconnect.backoff.ms";
pub(super) const RECONNECT_BACKOFF_MAX_MS: &str = "reconnect.backoff.max.ms";
pub(super) const SOCKET_CONNECTION_SETUP_TIMEOUT_MS: &str = "socket.connection.setup.timeout.ms";
pub(super) const SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS: &str =
    "socket.connection.setup.timeout.max.ms";
pub(super) const SOCKET_KEEPALIVE_ENABLE: &str = "socket.keepalive.enable";
pub(super) const RETRY_BACKOFF_MS: &str = "retry.backoff.ms";
pub(super) const RETRY_BACKOFF_MAX_MS: &str = "retry.backoff.max.ms";
pub(super) const CLIENT_DNS_LOOKUP: &str = "client.dns.lookup";
pub(super) const CLIENT_RUNTIME: &str = "client.runtime";
pub(super) const SSL_CA_LOCATION: &str = "ssl.ca.location";
pub(super) const SSL_CA_PEM: &str = "ssl.ca.pem";
pub(super) const SSL_CERTIFICATE_LOCATION: &str = "ssl.certificate.location";
pub(super) const SSL_CERTIFICATE_PEM: &str = "ssl.certificate.pem";
pub(super) const SSL_KEY_LOCATION: &str = "ssl.key.location";
pub(super) const SSL_KEY_PEM: &str = "ssl.key.pem";
pub(super) const SSL_KEY_PASSWORD: &str = "ssl.key.password";
pub(super) const SSL_ENDPOINT_IDENTIFICATION_ALGORITHM: &str =
    "ssl.endpoint.identification.algorithm";
pub(super) const ENABLE_SSL_CERTIFICATE_VERIFICATION: &str = "enable.ssl.certificate.verification";

/// Every shared property; each client's `PROPERTIES` lists them all, in
/// its own order.
#[cfg(test)]
pub(super) const PROPERTIES: &[&str] = &[
    BOOTSTRAP_SERVERS,
    CLIENT_ID,
    CONNECTIONS_MAX_IDLE_MS,
    REQUEST_TIMEOUT_MS,
    METADATA_MAX_AGE_MS,
    RECONNECT_BACKOFF_MS,
    RECONNECT_BACKOFF_MAX_MS,
    SOCKET_CONNECTION_SETUP_TIMEOUT_MS,
    SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS,
    SOCKET_KEEPALIVE_ENABLE,
    RETRY_BACKOFF_MS,
    RETRY_BACKOFF_MAX_MS,
    CLIENT_DNS_LOOKUP,
    CLIENT_RUNTIME,
    SECURITY_PROTOCOL,
    SSL_CA_LOCATION,
    SSL_CA_PEM,
    SSL_CERTIFICATE_LOCATION,
    SSL_CERTIFICATE_PEM,
    SSL_KEY_LOCATION,
    SSL_KEY_PEM,
    SSL_KEY_PASSWORD,
    SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
    ENABLE_SSL_CERTIFICATE_VERIFICATION,
    super::security::SASL_MECHANISM,
    super::security::SASL_USERNAME,
    SASL_PASSWORD,
    super::security::SASL_OAUTHBEARER_CONFIG,
    super::security::ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT,
];

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

/// The shared properties as set, before they are checked.
#[derive(Debug, Clone)]
pub(super) struct CommonBuilder {
    pub(super) bootstrap_servers: Option<String>,
    pub(super) client_id: String,
    pub(super) connections_max_idle: Option<Duration>,
    pub(super) request_timeout: Duration,
    pub(super) metadata_max_age: Duration,
    pub(super) reconnect_backoff: Option<Duration>,
    pub(super) reconnect_backoff_max: Option<Duration>,
    pub(super) socket_connection_setup_timeout: Duration,
    pub(super) socket_connection_setup_timeout_max: Duration,
    pub(super) socket_keepalive: bool,
    pub(super) retry_backoff: Duration,
    pub(super) retry_backoff_max: Duration,
    pub(super) client_runtime: ClientRuntime,
    pub(super) security_protocol: SecurityProtocol,
    pub(super) ssl_ca_location: Option<PathBuf>,
    pub(super) ssl_ca_pem: Option<String>,
    pub(super) ssl_certificate_location: Option<PathBuf>,
    pub(super) ssl_certificate_pem: Option<String>,
    pub(super) ssl_key_location: Option<PathBuf>,
    pub(super) ssl_key_pem: Option<Secret>,
    pub(super) ssl_key_password: Option<Secret>,
    pub(super) ssl_endpoint_identification_algorithm: EndpointIdentification,
    pub(super) enable_ssl_certificate_verification: bool,
    pub(super) sasl: SaslProperties,
}

impl Default for CommonBuilder {
    /// The defaults, the Java client's unless the documentation says
    /// otherwise (the same for the consumer and the producer).
    fn default() -> Self {
        CommonBuilder {
            bootstrap_servers: None,
            client_id: "lazykafka".to_owned(),
            connections_max_idle: Some(Duration::from_millis(540_000)),
            request_timeout: Duration::from_millis(30_000),
            metadata_max_age: Duration::from_millis(300_000),
            reconnect_backoff: None,
            reconnect_backoff_max: None,
            socket_connection_setup_timeout: Duration::from_millis(10_000),
            socket_connection_setup_timeout_max: Duration::from_millis(30_000),
            socket_keepalive: true,
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_millis(1000),
            client_runtime: ClientRuntime::Auto,
            security_protocol: SecurityProtocol::Plaintext,
            ssl_ca_location: None,
            ssl_ca_pem: None,
            ssl_certificate_location: None,
            ssl_certificate_pem: None,
            ssl_key_location: None,
            ssl_key_pem: None,
            ssl_key_password: None,
            ssl_endpoint_identification_algorithm: EndpointIdentification::Https,
            enable_ssl_certificate_verification: true,
            sasl: SaslProperties::default(),
        }
    }
}

impl CommonBuilder {
    /// Sets `property` from its untrimmed `value` if it is a shared one;
    /// `None` if it is not.
    pub(super) fn set(&mut self, property: &str, value: &str) -> Option<Result<(), Error>> {
        match self.try_set(property, value) {
            Ok(()) => Some(Ok(())),
            Err(Some(e)) => Some(Err(e)),
            Err(None) => None,
        }
    }

    /// `Err(None)`: not a shared property.
    fn try_set(&mut self, property: &str, value: &str) -> Result<(), Option<Error>> {
        let p = property;
        let v = value.trim();
        match property {
            BOOTSTRAP_SERVERS => self.bootstrap_servers = Some(v.to_owned()),
            CLIENT_ID => self.client_id = v.to_owned(),
            CONNECTIONS_MAX_IDLE_MS => {
                self.connections_max_idle = if v == "-1" {
                    None
                } else {
                    Some(parse_ms(p, v).map_err(|_| invalid(p, v, "expected -1 or milliseconds"))?)
                }
            }
            REQUEST_TIMEOUT_MS => self.request_timeout = parse_ms(p, v)?,
            METADATA_MAX_AGE_MS => self.metadata_max_age = parse_ms(p, v)?,
            RECONNECT_BACKOFF_MS => self.reconnect_backoff = Some(parse_ms(p, v)?),
            RECONNECT_BACKOFF_MAX_MS => self.reconnect_backoff_max = Some(parse_ms(p, v)?),
            SOCKET_CONNECTION_SETUP_TIMEOUT_MS => {
                self.socket_connection_setup_timeout = parse_ms(p, v)?
            }
            SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS => {
                self.socket_connection_setup_timeout_max = parse_ms(p, v)?
            }
            SOCKET_KEEPALIVE_ENABLE => self.socket_keepalive = parse_bool(p, v)?,
            RETRY_BACKOFF_MS => self.retry_backoff = parse_ms(p, v)?,
            RETRY_BACKOFF_MAX_MS => self.retry_backoff_max = parse_ms(p, v)?,
            CLIENT_DNS_LOOKUP => {
                if !v.eq_ignore_ascii_case("use_all_dns_ips") {
                    return Err(Some(invalid(
                        p,
                        v,
                        "only use_all_dns_ips is supported: names are resolved at connect time \
                         and every address is tried",
                    )));
                }
            }
            CLIENT_RUNTIME => self.client_runtime = v.parse()?,
            SECURITY_PROTOCOL => self.security_protocol = v.parse()?,
            // An empty value unsets, as in librdkafka; its `probe` (look
            // for the system's CA file) is what no value does here.
            SSL_CA_LOCATION => {
                self.ssl_ca_location = non_empty(v)
                    .filter(|v| !v.eq_ignore_ascii_case("probe"))
                    .map(PathBuf::from)
            }
            SSL_CA_PEM => self.ssl_ca_pem = non_empty(v).map(str::to_owned),
            SSL_CERTIFICATE_LOCATION => {
                self.ssl_certificate_location = non_empty(v).map(PathBuf::from)
            }
            SSL_CERTIFICATE_PEM => self.ssl_certificate_pem = non_empty(v).map(str::to_owned),
            SSL_KEY_LOCATION => self.ssl_key_location = non_empty(v).map(PathBuf::from),
            SSL_KEY_PEM => self.ssl_key_pem = non_empty(v).map(Secret::new),
            // Not trimmed: a password may begin or end with a space.
            SSL_KEY_PASSWORD => {
                self.ssl_key_password = (!value.is_empty()).then(|| Secret::new(value))
            }
            SSL_ENDPOINT_IDENTIFICATION_ALGORITHM => {
                self.ssl_endpoint_identification_algorithm = v.parse()?
            }
            ENABLE_SSL_CERTIFICATE_VERIFICATION => {
                self.enable_ssl_certificate_verification = parse_bool(p, v)?
            }
            _ => return self.sasl.set(property, v).ok_or(None)?.map_err(Some),
        }
        Ok(())
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

        check_ms(REQUEST_TIMEOUT_MS, b.request_timeout, 0, INT_MAX)?;
        check_ms(METADATA_MAX_AGE_MS, b.metadata_max_age, 0, i64::MAX as u64)?;
        check_ms(RETRY_BACKOFF_MS, b.retry_backoff, 0, i64::MAX as u64)?;
        check_ms(
            RETRY_BACKOFF_MAX_MS,
            b.retry_backoff_max,
            0,
            i64::MAX as u64,
        )?;
        check_ms(
            SOCKET_CONNECTION_SETUP_TIMEOUT_MS,
            b.socket_connection_setup_timeout,
            1,
            i64::MAX as u64,
        )?;
        check_ms(
            SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS,
            b.socket_connection_setup_timeout_max,
            1,
            i64::MAX as u64,
        )?;
        if let Some(idle) = b.connections_max_idle {
            if idle.as_millis() == 0 {
                return Err(invalid(
                    CONNECTIONS_MAX_IDLE_MS,
                    "0",
                    "expected -1 (never close idle connections) or a positive number",
                ));
            }
            check_ms(CONNECTIONS_MAX_IDLE_MS, idle, 1, i64::MAX as u64)?;
        }

        // Java's rule: reconnect.backoff.ms alone also sets the maximum,
        // which turns exponential backoff off.
        let reconnect_backoff = b.reconnect_backoff.unwrap_or(DEFAULT_RECONNECT_BACKOFF);
        let reconnect_backoff_max = b
            .reconnect_backoff_max
            .or(b.reconnect_backoff)
            .unwrap_or(DEFAULT_RECONNECT_BACKOFF_MAX);
        check_ms(RECONNECT_BACKOFF_MS, reconnect_backoff, 0, i64::MAX as u64)?;
        check_ms(
            RECONNECT_BACKOFF_MAX_MS,
            reconnect_backoff_max,
            0,
            i64::MAX as u64,
        )?;
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
        b.sasl.check(b.security_protocol, builder)?;

        for (location, pem, present) in [
            (
                SSL_CA_LOCATION,
                SSL_CA_PEM,
                (b.ssl_ca_location.is_some(), b.ssl_ca_pem.is_some()),
            ),
            (
                SSL_CERTIFICATE_LOCATION,
                SSL_CERTIFICATE_PEM,
                (
                    b.ssl_certificate_location.is_some(),
                    b.ssl_certificate_pem.is_some(),
                ),
            ),
            (
                SSL_KEY_LOCATION,
                SSL_KEY_PEM,
                (b.ssl_key_location.is_some(), b.ssl_key_pem.is_some()),
            ),
        ] {
            if present == (true, true) {
                return Err(config_error(
                    pem,
                    format!("set only one of {location} and {pem}"),
                ));
            }
        }
        Ok(Common {
            bootstrap_servers,
            client_id: b.client_id,
            connections_max_idle: b.connections_max_idle,
            request_timeout: b.request_timeout,
            metadata_max_age: b.metadata_max_age,
            reconnect_backoff,
            reconnect_backoff_max,
            socket_connection_setup_timeout: b.socket_connection_setup_timeout,
            socket_connection_setup_timeout_max: b.socket_connection_setup_timeout_max,
            socket_keepalive: b.socket_keepalive,
            retry_backoff: b.retry_backoff,
            retry_backoff_max: b.retry_backoff_max.max(b.retry_backoff),
            client_runtime: b.client_runtime,
            security_protocol: b.security_protocol,
            ssl_ca_location: b.ssl_ca_location,
            ssl_ca_pem: b.ssl_ca_pem,
            ssl_certificate_location: b.ssl_certificate_location,
            ssl_certificate_pem: b.ssl_certificate_pem,
            ssl_key_location: b.ssl_key_location,
            ssl_key_pem: b.ssl_key_pem,
            ssl_key_password: b.ssl_key_password,
            ssl_endpoint_identification_algorithm: b.ssl_endpoint_identification_algorithm,
            enable_ssl_certificate_verification: b.enable_ssl_certificate_verification,
            sasl: b.sasl,
        })
    }
}

/// The shared properties, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Common {
    pub(super) bootstrap_servers: Vec<BrokerAddress>,
    pub(super) client_id: String,
    pub(super) connections_max_idle: Option<Duration>,
    pub(super) request_timeout: Duration,
    pub(super) metadata_max_age: Duration,
    pub(super) reconnect_backoff: Duration,
    pub(super) reconnect_backoff_max: Duration,
    pub(super) socket_connection_setup_timeout: Duration,
    pub(super) socket_connection_setup_timeout_max: Duration,
    pub(super) socket_keepalive: bool,
    pub(super) retry_backoff: Duration,
    pub(super) retry_backoff_max: Duration,
    pub(super) client_runtime: ClientRuntime,
    pub(super) security_protocol: SecurityProtocol,
    pub(super) ssl_ca_location: Option<PathBuf>,
    pub(super) ssl_ca_pem: Option<String>,
    pub(super) ssl_certificate_location: Option<PathBuf>,
    pub(super) ssl_certificate_pem: Option<String>,
    pub(super) ssl_key_location: Option<PathBuf>,
    pub(super) ssl_key_pem: Option<Secret>,
    pub(super) ssl_key_password: Option<Secret>,
    pub(super) ssl_endpoint_identification_algorithm: EndpointIdentification,
    pub(super) enable_ssl_certificate_verification: bool,
    pub(super) sasl: SaslProperties,
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
        cc.sasl = self.sasl_config();
        cc
    }

    /// Appends every shared property with its value, as `to_properties`
    /// lists them: the secrets never, unset optional ones not at all. The
    /// client sorts the list into its own order.
    pub(super) fn render(&self, out: &mut Vec<(&'static str, String)>) {
        let ms = |d: Duration| d.as_millis().to_string();
        out.extend([
            (
                BOOTSTRAP_SERVERS,
                self.bootstrap_servers
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (CLIENT_ID, self.client_id.clone()),
            (
                CONNECTIONS_MAX_IDLE_MS,
                self.connections_max_idle.map_or("-1".to_owned(), ms),
            ),
            (REQUEST_TIMEOUT_MS, ms(self.request_timeout)),
            (METADATA_MAX_AGE_MS, ms(self.metadata_max_age)),
            (RECONNECT_BACKOFF_MS, ms(self.reconnect_backoff)),
            (RECONNECT_BACKOFF_MAX_MS, ms(self.reconnect_backoff_max)),
            (
                SOCKET_CONNECTION_SETUP_TIMEOUT_MS,
                ms(self.socket_connection_setup_timeout),
            ),
            (
                SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS,
                ms(self.socket_connection_setup_timeout_max),
            ),
            (SOCKET_KEEPALIVE_ENABLE, self.socket_keepalive.to_string()),
            (RETRY_BACKOFF_MS, ms(self.retry_backoff)),
            (RETRY_BACKOFF_MAX_MS, ms(self.retry_backoff_max)),
            (CLIENT_DNS_LOOKUP, "use_all_dns_ips".to_owned()),
            (CLIENT_RUNTIME, self.client_runtime.to_string()),
            (SECURITY_PROTOCOL, self.security_protocol.to_string()),
        ]);
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let ssl = [
            (SSL_CA_LOCATION, path(&self.ssl_ca_location)),
            (SSL_CA_PEM, self.ssl_ca_pem.clone()),
            (
                SSL_CERTIFICATE_LOCATION,
                path(&self.ssl_certificate_location),
            ),
            (SSL_CERTIFICATE_PEM, self.ssl_certificate_pem.clone()),
            (SSL_KEY_LOCATION, path(&self.ssl_key_location)),
            // ssl.key.pem and ssl.key.password: secrets, never rendered.
        ];
        out.extend(ssl.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))));
        out.extend([
            (
                SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
                self.ssl_endpoint_identification_algorithm.to_string(),
            ),
            (
                ENABLE_SSL_CERTIFICATE_VERIFICATION,
                self.enable_ssl_certificate_verification.to_string(),
            ),
        ]);
        self.sasl.render(out);
        debug_assert!(out.iter().all(|(k, _)| !SECRET_PROPERTIES.contains(k)));
    }

    /// How connections authenticate: `None` unless `security.protocol`
    /// uses SASL.
    pub(crate) fn sasl_config(&self) -> Option<SaslConfig> {
        self.sasl.cluster_config(self.security_protocol)
    }
}

/// Sorts `to_properties` output into the order of a client's
/// `PROPERTIES` (stable: a name not listed keeps its place at the end).
pub(super) fn sort_properties(out: &mut [(&'static str, String)], order: &[&str]) {
    out.sort_by_key(|(k, _)| order.iter().position(|p| p == k).unwrap_or(order.len()));
}

/// The getters of the shared properties, for a configuration type with a
/// `common: Common` field; `$config` names the type in the documentation.
macro_rules! common_getters {
    ($config:ident) => {
        /// The properties every client shares, checked.
        #[allow(dead_code)] // the producer's core, with a runtime feature
        pub(crate) fn common(&self) -> &crate::config::common::Common {
            &self.common
        }

        /// `bootstrap.servers`: the brokers to ask for the cluster's metadata
        /// before any broker is known. Required.
        pub fn bootstrap_servers(&self) -> &[BrokerAddress] {
            &self.common.bootstrap_servers
        }

        /// `client.id`, sent in every request header (default `lazykafka`).
        pub fn client_id(&self) -> &str {
            &self.common.client_id
        }

        /// `connections.max.idle.ms`: how long a connection may sit idle before
        /// the client closes it (default 9 min); `None` (`-1`) never closes
        /// idle connections.
        pub fn connections_max_idle(&self) -> Option<Duration> {
            self.common.connections_max_idle
        }

        /// `request.timeout.ms`: how long a request waits for its response
        /// (default 30 s).
        pub fn request_timeout(&self) -> Duration {
            self.common.request_timeout
        }

        /// `metadata.max.age.ms`: metadata older than this is refreshed
        /// (default 5 min). A consumer also fetches from a preferred read
        /// replica (KIP-392) this long before it asks the partition's leader
        /// again.
        pub fn metadata_max_age(&self) -> Duration {
            self.common.metadata_max_age
        }

        /// `reconnect.backoff.ms`: the first wait before reconnecting to a
        /// broker (default 50 ms).
        pub fn reconnect_backoff(&self) -> Duration {
            self.common.reconnect_backoff
        }

        /// `reconnect.backoff.max.ms`: the wait doubles up to this (default
        /// 1 s). As in the Java client, setting only `reconnect.backoff.ms`
        /// makes this the same value, which turns the doubling off.
        pub fn reconnect_backoff_max(&self) -> Duration {
            self.common.reconnect_backoff_max
        }

        /// `socket.connection.setup.timeout.ms`: how long the first connect
        /// attempt to a broker may take (default 10 s).
        pub fn socket_connection_setup_timeout(&self) -> Duration {
            self.common.socket_connection_setup_timeout
        }

        /// `socket.connection.setup.timeout.max.ms`: the setup timeout grows on
        /// consecutive failures up to this (default 30 s).
        pub fn socket_connection_setup_timeout_max(&self) -> Duration {
            self.common.socket_connection_setup_timeout_max
        }

        /// `socket.keepalive.enable`: turn on TCP keepalive (default `true`).
        pub fn socket_keepalive(&self) -> bool {
            self.common.socket_keepalive
        }

        /// `retry.backoff.ms`: the wait before retrying a failed request
        /// (default 100 ms).
        pub fn retry_backoff(&self) -> Duration {
            self.common.retry_backoff
        }

        /// `retry.backoff.max.ms`: the wait before retrying a request that
        /// failed again doubles (±20% jitter) up to this (default 1 s;
        /// KIP-580). Never below `retry.backoff.ms`. A consumer applies one
        /// policy to every request kind: Metadata, FindCoordinator, the
        /// group's requests, OffsetFetch, ListOffsets, OffsetForLeaderEpoch
        /// and Fetch errors.
        pub fn retry_backoff_max(&self) -> Duration {
            self.common.retry_backoff_max
        }

        /// `client.runtime` (default `auto`): which async runtime the client
        /// runs on; see [`ClientRuntime`].
        pub fn client_runtime(&self) -> ClientRuntime {
            self.common.client_runtime
        }

        /// `security.protocol`: plain TCP or TLS, with or without SASL (default
        /// `PLAINTEXT`). See `docs/security.md`.
        pub fn security_protocol(&self) -> SecurityProtocol {
            self.common.security_protocol
        }

        /// `ssl.ca.location`: a PEM file (or a directory of PEM files) of the
        /// certificates that may sign a broker's certificate. With neither this
        /// nor `ssl.ca.pem`, the system's root certificates are trusted.
        pub fn ssl_ca_location(&self) -> Option<&Path> {
            self.common.ssl_ca_location.as_deref()
        }

        /// `ssl.ca.pem`: the CA certificates as PEM text, instead of a file.
        pub fn ssl_ca_pem(&self) -> Option<&str> {
            self.common.ssl_ca_pem.as_deref()
        }

        /// `ssl.certificate.location`: this client's certificate chain (PEM
        /// file), for brokers that authenticate clients by certificate.
        pub fn ssl_certificate_location(&self) -> Option<&Path> {
            self.common.ssl_certificate_location.as_deref()
        }

        /// `ssl.certificate.pem`: this client's certificate chain as PEM text.
        pub fn ssl_certificate_pem(&self) -> Option<&str> {
            self.common.ssl_certificate_pem.as_deref()
        }

        /// `ssl.key.location`: the private key of this client's certificate
        /// (PEM file: PKCS#8, PKCS#1 RSA, SEC1 EC, or encrypted PKCS#8 with
        /// `ssl.key.password`).
        pub fn ssl_key_location(&self) -> Option<&Path> {
            self.common.ssl_key_location.as_deref()
        }

        /// `ssl.key.pem`: the private key as PEM text (a secret: never shown by
        /// `Debug` nor rendered by [`to_properties`](Self::to_properties)).
        pub fn ssl_key_pem(&self) -> Option<&str> {
            self.common.ssl_key_pem.as_ref().map(Secret::expose)
        }

        /// `ssl.key.password`: the password of an encrypted PKCS#8 key (a
        /// secret, like `ssl.key.pem`).
        pub fn ssl_key_password(&self) -> Option<&str> {
            self.common.ssl_key_password.as_ref().map(Secret::expose)
        }

        /// `ssl.endpoint.identification.algorithm`: whether a broker's
        /// certificate must name the host it was dialled by (default `https`:
        /// it must).
        pub fn ssl_endpoint_identification_algorithm(&self) -> EndpointIdentification {
            self.common.ssl_endpoint_identification_algorithm
        }

        /// `enable.ssl.certificate.verification` (librdkafka's name): verify
        /// brokers' certificates at all (default `true`; `false` accepts any
        /// certificate, which encrypts but does not authenticate).
        pub fn enable_ssl_certificate_verification(&self) -> bool {
            self.common.enable_ssl_certificate_verification
        }

        /// `sasl.mechanism` (librdkafka: `sasl.mechanisms`), if set.
        pub fn sasl_mechanism(&self) -> Option<crate::sasl::Mechanism> {
            self.common.sasl.mechanism
        }

        /// `sasl.username`, if set.
        pub fn sasl_username(&self) -> Option<&str> {
            self.common.sasl.username.as_deref()
        }

        /// `sasl.password`, if set (its `Debug` and `Display` show
        /// `[redacted]`).
        pub fn sasl_password(&self) -> Option<&Secret> {
            self.common.sasl.password.as_ref()
        }

        /// `sasl.oauthbearer.config`, if set.
        pub fn sasl_oauthbearer_config(&self) -> Option<&str> {
            self.common.sasl.oauthbearer_config.as_deref()
        }

        /// `enable.sasl.oauthbearer.unsecure.jwt` (default `false`).
        pub fn enable_sasl_oauthbearer_unsecure_jwt(&self) -> bool {
            self.common.sasl.unsecure_jwt
        }

        /// The OAUTHBEARER token provider, if set.
        pub fn oauthbearer_token_provider(&self) -> Option<&crate::sasl::OAuthTokenProvider> {
            self.common.sasl.token_provider.as_ref()
        }
    };
}

/// The setters of the shared properties, for a builder type with a
/// `common: CommonBuilder` field; `$config` names the configuration type
/// it builds, in the documentation.
macro_rules! common_setters {
    ($config:ident) => {
        /// `bootstrap.servers`: a comma-separated list of `host:port`.
        pub fn bootstrap_servers(mut self, servers: impl AsRef<str>) -> Self {
            self.common.bootstrap_servers = Some(servers.as_ref().to_owned());
            self
        }

        /// `client.id`.
        pub fn client_id(mut self, client_id: impl Into<String>) -> Self {
            self.common.client_id = client_id.into();
            self
        }

        /// `connections.max.idle.ms`; `None` never closes idle connections.
        pub fn connections_max_idle(mut self, idle: Option<Duration>) -> Self {
            self.common.connections_max_idle = idle;
            self
        }

        /// `request.timeout.ms`.
        pub fn request_timeout(mut self, timeout: Duration) -> Self {
            self.common.request_timeout = timeout;
            self
        }

        /// `metadata.max.age.ms`: for a consumer, also the lease of a
        /// preferred read replica (KIP-392).
        pub fn metadata_max_age(mut self, age: Duration) -> Self {
            self.common.metadata_max_age = age;
            self
        }

        /// `reconnect.backoff.ms`. Setting it without
        /// `reconnect.backoff.max.ms` turns exponential backoff off, as in the
        /// Java client.
        pub fn reconnect_backoff(mut self, backoff: Duration) -> Self {
            self.common.reconnect_backoff = Some(backoff);
            self
        }

        /// `reconnect.backoff.max.ms`; at least `reconnect.backoff.ms`.
        pub fn reconnect_backoff_max(mut self, backoff: Duration) -> Self {
            self.common.reconnect_backoff_max = Some(backoff);
            self
        }

        /// `socket.connection.setup.timeout.ms`.
        pub fn socket_connection_setup_timeout(mut self, timeout: Duration) -> Self {
            self.common.socket_connection_setup_timeout = timeout;
            self
        }

        /// `socket.connection.setup.timeout.max.ms`; at least
        /// `socket.connection.setup.timeout.ms`.
        pub fn socket_connection_setup_timeout_max(mut self, timeout: Duration) -> Self {
            self.common.socket_connection_setup_timeout_max = timeout;
            self
        }

        /// `socket.keepalive.enable`.
        pub fn socket_keepalive(mut self, enable: bool) -> Self {
            self.common.socket_keepalive = enable;
            self
        }

        /// `retry.backoff.ms`.
        pub fn retry_backoff(mut self, backoff: Duration) -> Self {
            self.common.retry_backoff = backoff;
            self
        }

        /// `retry.backoff.max.ms`; a value below `retry.backoff.ms` is taken
        /// as `retry.backoff.ms` (no doubling).
        pub fn retry_backoff_max(mut self, backoff: Duration) -> Self {
            self.common.retry_backoff_max = backoff;
            self
        }

        /// `client.runtime`: which async runtime the client runs on.
        pub fn client_runtime(mut self, runtime: ClientRuntime) -> Self {
            self.common.client_runtime = runtime;
            self
        }

        /// `security.protocol`.
        pub fn security_protocol(mut self, protocol: SecurityProtocol) -> Self {
            self.common.security_protocol = protocol;
            self
        }

        /// `ssl.ca.location`: a PEM file or a directory of PEM files.
        pub fn ssl_ca_location(mut self, path: impl Into<PathBuf>) -> Self {
            self.common.ssl_ca_location = Some(path.into());
            self
        }

        /// `ssl.ca.pem`.
        pub fn ssl_ca_pem(mut self, pem: impl Into<String>) -> Self {
            self.common.ssl_ca_pem = Some(pem.into());
            self
        }

        /// `ssl.certificate.location`.
        pub fn ssl_certificate_location(mut self, path: impl Into<PathBuf>) -> Self {
            self.common.ssl_certificate_location = Some(path.into());
            self
        }

        /// `ssl.certificate.pem`.
        pub fn ssl_certificate_pem(mut self, pem: impl Into<String>) -> Self {
            self.common.ssl_certificate_pem = Some(pem.into());
            self
        }

        /// `ssl.key.location`.
        pub fn ssl_key_location(mut self, path: impl Into<PathBuf>) -> Self {
            self.common.ssl_key_location = Some(path.into());
            self
        }

        /// `ssl.key.pem` (a secret).
        pub fn ssl_key_pem(mut self, pem: impl Into<String>) -> Self {
            self.common.ssl_key_pem = Some(Secret::new(pem));
            self
        }

        /// `ssl.key.password` (a secret).
        pub fn ssl_key_password(mut self, password: impl Into<String>) -> Self {
            self.common.ssl_key_password = Some(Secret::new(password));
            self
        }

        /// `ssl.endpoint.identification.algorithm`.
        pub fn ssl_endpoint_identification_algorithm(
            mut self,
            check: EndpointIdentification,
        ) -> Self {
            self.common.ssl_endpoint_identification_algorithm = check;
            self
        }

        /// `enable.ssl.certificate.verification`.
        pub fn enable_ssl_certificate_verification(mut self, enable: bool) -> Self {
            self.common.enable_ssl_certificate_verification = enable;
            self
        }

        /// `sasl.mechanism`: required with `SASL_PLAINTEXT` and `SASL_SSL`.
        pub fn sasl_mechanism(mut self, mechanism: crate::sasl::Mechanism) -> Self {
            self.common.sasl.mechanism = Some(mechanism);
            self
        }

        /// `sasl.username` (PLAIN, SCRAM).
        pub fn sasl_username(mut self, username: impl Into<String>) -> Self {
            self.common.sasl.username = Some(username.into());
            self
        }

        #[doc = concat!(
                                    "`sasl.password` (PLAIN, SCRAM). Kept out of `Debug` and\n[`",
                                    stringify!($config),
                                    "::to_properties`]."
                                )]
        pub fn sasl_password(mut self, password: impl Into<String>) -> Self {
            self.common.sasl.password = Some(Secret::new(password.into()));
            self
        }

        /// `sasl.oauthbearer.config`: for unsecured OAUTHBEARER tokens,
        /// `principal=NAME` and optionally `lifeSeconds=N` (3600), `scope=S`,
        /// `extension_KEY=VALUE`, separated by spaces (librdkafka's syntax).
        pub fn sasl_oauthbearer_config(mut self, config: impl Into<String>) -> Self {
            let config = config.into();
            self.common.sasl.oauthbearer_config = (!config.is_empty()).then_some(config);
            self
        }

        /// `enable.sasl.oauthbearer.unsecure.jwt`: make unsecured
        /// (`"alg":"none"`) OAUTHBEARER tokens from `sasl.oauthbearer.config`,
        /// for test brokers that accept them.
        pub fn enable_sasl_oauthbearer_unsecure_jwt(mut self, enable: bool) -> Self {
            self.common.sasl.unsecure_jwt = enable;
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
            self.common.sasl.token_provider = Some(crate::sasl::OAuthTokenProvider::new(provider));
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
            self.common.sasl.token_provider =
                Some(crate::sasl::OAuthTokenProvider::new_async(provider));
            self
        }
    };
}

pub(super) use {common_getters, common_setters};
