//! Client configuration: a typed builder, Kafka's property names, serde.
//!
//! Start with [`ConsumerConfig::builder`] or
//! [`ConsumerConfig::from_properties`] for a consumer,
//! [`ProducerConfig::builder`] or [`ProducerConfig::from_properties`] for a
//! producer; both take the same connection and security properties. What
//! follows is `docs/configuration.md`.
//!
#![doc = include_str!("../docs/configuration.md")]

use crate::error::Error;
pub use crate::group::{AssignmentStrategy, GroupProtocol, RebalanceProtocol, RemoteAssignor};
pub use crate::sasl::{Mechanism, OAuthToken, OAuthTokenFuture, OAuthTokenProvider, Secret};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

mod common;
mod librdkafka;
mod producer;
mod security;

pub use crate::records::Compression;
use common::{
    common_getters, common_setters, sort_properties, Common, CommonBuilder, BOOTSTRAP_SERVERS,
    CLIENT_DNS_LOOKUP, CLIENT_ID, CLIENT_RUNTIME, CONNECTIONS_MAX_IDLE_MS,
    ENABLE_SSL_CERTIFICATE_VERIFICATION, METADATA_MAX_AGE_MS, RECONNECT_BACKOFF_MAX_MS,
    RECONNECT_BACKOFF_MS, REQUEST_TIMEOUT_MS, RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS,
    SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS, SOCKET_CONNECTION_SETUP_TIMEOUT_MS,
    SOCKET_KEEPALIVE_ENABLE, SSL_CA_LOCATION, SSL_CA_PEM, SSL_CERTIFICATE_LOCATION,
    SSL_CERTIFICATE_PEM, SSL_ENDPOINT_IDENTIFICATION_ALGORITHM, SSL_KEY_LOCATION, SSL_KEY_PASSWORD,
    SSL_KEY_PEM,
};
pub use producer::{Acks, ProducerConfig, ProducerConfigBuilder};
use security::{
    ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT, SASL_MECHANISM, SASL_OAUTHBEARER_CONFIG, SASL_PASSWORD,
    SASL_USERNAME, SECURITY_PROTOCOL,
};

// Defined in `fetch`, which acts on it, so that `fetch` does not depend on
// this module (and through its `Error` on every layer).
pub use crate::fetch::OffsetReset;

impl FromStr for OffsetReset {
    type Err = Error;

    /// Parses `earliest`, `latest` or `none` (any case).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "earliest" => Ok(OffsetReset::Earliest),
            "latest" => Ok(OffsetReset::Latest),
            "none" => Ok(OffsetReset::None),
            _ => Err(invalid(
                AUTO_OFFSET_RESET,
                s,
                "expected earliest, latest or none",
            )),
        }
    }
}

/// Which records a Fetch returns from transactional producers
/// (`isolation.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IsolationLevel {
    /// Every record, including those of open and aborted transactions
    /// (`read_uncommitted`, wire value 0).
    #[default]
    ReadUncommitted,
    /// Only records of committed transactions, up to the last stable offset
    /// (`read_committed`, wire value 1).
    ReadCommitted,
}

impl IsolationLevel {
    /// The property value: `read_uncommitted` or `read_committed`.
    pub fn as_str(self) -> &'static str {
        match self {
            IsolationLevel::ReadUncommitted => "read_uncommitted",
            IsolationLevel::ReadCommitted => "read_committed",
        }
    }
}

impl fmt::Display for IsolationLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for IsolationLevel {
    type Err = Error;

    /// Parses `read_uncommitted` or `read_committed` (any case).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "read_uncommitted" => Ok(IsolationLevel::ReadUncommitted),
            "read_committed" => Ok(IsolationLevel::ReadCommitted),
            _ => Err(invalid(
                ISOLATION_LEVEL,
                s,
                "expected read_uncommitted or read_committed",
            )),
        }
    }
}

/// How connections to the brokers are secured (`security.protocol`).
///
/// Parsed in any case, rendered in upper case as Kafka spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum SecurityProtocol {
    /// Plain TCP (`PLAINTEXT`, the default).
    #[default]
    Plaintext,
    /// TLS (`SSL`).
    Ssl,
    /// SASL authentication over plain TCP (`SASL_PLAINTEXT`).
    SaslPlaintext,
    /// SASL authentication over TLS (`SASL_SSL`).
    SaslSsl,
}

impl SecurityProtocol {
    /// The property value: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or
    /// `SASL_SSL`.
    pub fn as_str(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections run over TLS (`SSL`, `SASL_SSL`): the only
    /// thing the transport depends on.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL (`SASL_PLAINTEXT`,
    /// `SASL_SSL`), after the transport is up.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SecurityProtocol {
    type Err = Error;

    /// Parses `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL` (any case).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(SecurityProtocol::Plaintext),
            "SSL" => Ok(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Ok(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Ok(SecurityProtocol::SaslSsl),
            _ => Err(invalid(
                SECURITY_PROTOCOL,
                s,
                "expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
            )),
        }
    }
}

/// Whether a broker's certificate must name the host it was dialled by
/// (`ssl.endpoint.identification.algorithm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum EndpointIdentification {
    /// The certificate must name the host (a DNS name SAN, or an IP
    /// address SAN for a literal address), as HTTPS checks it (`https`,
    /// the default).
    #[default]
    Https,
    /// The host name is not checked; the chain still is (`none`).
    None,
}

impl EndpointIdentification {
    /// The property value: `https` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            EndpointIdentification::Https => "https",
            EndpointIdentification::None => "none",
        }
    }
}

impl fmt::Display for EndpointIdentification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EndpointIdentification {
    type Err = Error;

    /// Parses `https` or `none` (any case; an empty value is `none`, as in
    /// the Java client).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "https" => Ok(EndpointIdentification::Https),
            "none" | "" => Ok(EndpointIdentification::None),
            _ => Err(invalid(
                SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
                s,
                "expected https or none",
            )),
        }
    }
}

/// Which async runtime a consumer runs on (`client.runtime`).
///
/// The cargo features `runtime-tokio` and `runtime-async-std` decide which
/// runtimes are built in (both may be); this property decides, per
/// consumer, which one it uses. [`Consumer::new`](crate::Consumer) checks
/// it: a runtime that is not built in, or `tokio` outside a tokio runtime,
/// is an [`Error::Config`] there. See the README's "Choosing a runtime".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ClientRuntime {
    /// tokio when the consumer is created inside a tokio runtime (and
    /// `runtime-tokio` is built), async-std otherwise (`auto`, the
    /// default). Built with `runtime-tokio` alone, a consumer created
    /// outside a tokio runtime runs on the one its first `poll` runs in.
    #[default]
    Auto,
    /// The tokio runtime the consumer is created in (`tokio`; needs the
    /// feature `runtime-tokio`).
    Tokio,
    /// async-std, even inside a tokio runtime (`async-std`; needs the
    /// feature `runtime-async-std`).
    AsyncStd,
}

impl ClientRuntime {
    /// The property value: `auto`, `tokio` or `async-std`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientRuntime::Auto => "auto",
            ClientRuntime::Tokio => "tokio",
            ClientRuntime::AsyncStd => "async-std",
        }
    }
}

impl fmt::Display for ClientRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ClientRuntime {
    type Err = Error;

    /// Parses `auto`, `tokio` or `async-std` (any case).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(ClientRuntime::Auto),
            "tokio" => Ok(ClientRuntime::Tokio),
            "async-std" => Ok(ClientRuntime::AsyncStd),
            _ => Err(invalid(
                CLIENT_RUNTIME,
                s,
                "expected auto, tokio or async-std",
            )),
        }
    }
}

/// One `host:port` entry of `bootstrap.servers`.
///
/// Parsing accepts `host:port`, `[ipv6]:port`, an unbracketed IPv6 address
/// whose last `:` separates the port (as Java does), and an optional
/// `PLAINTEXT://` prefix (or any other security protocol's, as librdkafka
/// accepts and ignores it: `security.protocol` decides). The name is not resolved:
/// that happens at connect time.
///
/// ```
/// use lazykafka::config::BrokerAddress;
///
/// let a: BrokerAddress = "kafka-1:9092".parse()?;
/// assert_eq!((a.host(), a.port()), ("kafka-1", 9092));
/// let b: BrokerAddress = "::1:9093".parse()?;
/// assert_eq!(b.to_string(), "[::1]:9093");
/// assert!("kafka-1".parse::<BrokerAddress>().is_err());
/// # Ok::<(), lazykafka::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BrokerAddress {
    host: String,
    port: u16,
}

impl BrokerAddress {
    /// The host name or IP address (IPv6 without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl fmt::Display for BrokerAddress {
    /// `host:port`, with IPv6 addresses in brackets: a form
    /// `std::net::ToSocketAddrs` accepts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl FromStr for BrokerAddress {
    type Err = Error;

    fn from_str(entry: &str) -> Result<Self, Error> {
        let bad = |why: &str| invalid(BOOTSTRAP_SERVERS, entry, why);
        let mut rest = entry.trim();
        if let Some((scheme, after)) = rest.split_once("://") {
            if scheme.parse::<SecurityProtocol>().is_err() {
                return Err(bad(
                    "the prefix must be a security protocol (PLAINTEXT://, SSL://, \
                     SASL_PLAINTEXT://, SASL_SSL://)",
                ));
            }
            rest = after;
        }
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| bad("expected host:port"))?;
        let host = match host.strip_prefix('[') {
            Some(inner) => inner
                .strip_suffix(']')
                .ok_or_else(|| bad("unclosed '[' in the host"))?,
            None => host,
        };
        if host.is_empty() {
            return Err(bad("the host is empty"));
        }
        if !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '%'))
        {
            return Err(bad("the host has characters a host name cannot have"));
        }
        let port: u16 = port
            .parse()
            .map_err(|_| bad("the port is not a number from 1 to 65535"))?;
        if port == 0 {
            return Err(bad("the port is not a number from 1 to 65535"));
        }
        Ok(BrokerAddress {
            host: host.to_owned(),
            port,
        })
    }
}

// Property names of the consumer alone, in the order of
// `ConsumerConfig::PROPERTIES` (the shared ones are in `common`).
const GROUP_ID: &str = "group.id";
const GROUP_INSTANCE_ID: &str = "group.instance.id";
const GROUP_PROTOCOL: &str = "group.protocol";
const GROUP_REMOTE_ASSIGNOR: &str = "group.remote.assignor";
/// Properties of the classic protocol only: under `group.protocol=consumer`
/// the coordinator owns the session timeout, the heartbeat interval and the
/// assignment (KIP-848).
const CLASSIC_ONLY: [&str; 3] = [
    SESSION_TIMEOUT_MS,
    HEARTBEAT_INTERVAL_MS,
    PARTITION_ASSIGNMENT_STRATEGY,
];
const CLIENT_RACK: &str = "client.rack";
const AUTO_OFFSET_RESET: &str = "auto.offset.reset";
const ENABLE_AUTO_COMMIT: &str = "enable.auto.commit";
const AUTO_COMMIT_INTERVAL_MS: &str = "auto.commit.interval.ms";
const ENABLE_AUTO_OFFSET_STORE: &str = "enable.auto.offset.store";
const ISOLATION_LEVEL: &str = "isolation.level";
const FETCH_MIN_BYTES: &str = "fetch.min.bytes";
const FETCH_MAX_WAIT_MS: &str = "fetch.max.wait.ms";
const FETCH_MAX_BYTES: &str = "fetch.max.bytes";
const MAX_PARTITION_FETCH_BYTES: &str = "max.partition.fetch.bytes";
const MAX_POLL_RECORDS: &str = "max.poll.records";
const SESSION_TIMEOUT_MS: &str = "session.timeout.ms";
const HEARTBEAT_INTERVAL_MS: &str = "heartbeat.interval.ms";
const MAX_POLL_INTERVAL_MS: &str = "max.poll.interval.ms";
const PARTITION_ASSIGNMENT_STRATEGY: &str = "partition.assignment.strategy";
const DEFAULT_API_TIMEOUT_MS: &str = "default.api.timeout.ms";
const TOPIC_METADATA_PROPAGATION_MAX_MS: &str = "topic.metadata.propagation.max.ms";
const MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION: &str = "max.in.flight.requests.per.connection";
const CHECK_CRCS: &str = "check.crcs";
const ENABLE_PARTITION_EOF: &str = "enable.partition.eof";
const STATISTICS_INTERVAL_MS: &str = "statistics.interval.ms";
const FETCH_SESSIONS_ENABLE: &str = "fetch.sessions.enable";
const ALLOW_AUTO_CREATE_TOPICS: &str = "allow.auto.create.topics";
const EXCLUDE_INTERNAL_TOPICS: &str = "exclude.internal.topics";
const RECEIVE_MESSAGE_MAX_BYTES: &str = "receive.message.max.bytes";

/// The largest value of a property sent in an `int32` field or kept in a
/// Java `int`.
const INT_MAX: u64 = i32::MAX as u64;
/// librdkafka's lower bound for `receive.message.max.bytes`.
const RECEIVE_MESSAGE_MIN: u32 = 1000;
/// librdkafka's margin between `fetch.max.bytes` and
/// `receive.message.max.bytes`, for the response's own headers.
const FETCH_RESPONSE_OVERHEAD: u32 = 512;

/// 100 MiB, the frame limit of [`crate::protocol::DEFAULT_MAX_FRAME_SIZE`].
const DEFAULT_RECEIVE_MESSAGE_MAX_BYTES: u32 = 100 * 1024 * 1024;

/// The configuration of a consumer.
///
/// Every value has been validated; read them with the getters, which are
/// named after the properties (`fetch.max.wait.ms` is
/// [`fetch_max_wait`](Self::fetch_max_wait), a [`Duration`]).
///
/// ```
/// use lazykafka::{ConsumerConfig, OffsetReset};
/// use std::time::Duration;
///
/// let config = ConsumerConfig::builder()
///     .bootstrap_servers("kafka-1:9092,kafka-2:9092")
///     .group_id("billing")
///     .auto_offset_reset(OffsetReset::Earliest)
///     .session_timeout(Duration::from_secs(30))
///     .build()?;
/// assert_eq!(config.bootstrap_servers().len(), 2);
/// assert_eq!(config.heartbeat_interval(), Duration::from_secs(3));
///
/// // The same from Kafka property names...
/// let same = ConsumerConfig::from_properties([
///     ("bootstrap.servers", "kafka-1:9092,kafka-2:9092"),
///     ("group.id", "billing"),
///     ("auto.offset.reset", "earliest"),
///     ("session.timeout.ms", "30000"),
/// ])?;
/// assert_eq!(config, same);
///
/// // ...and from a JSON (or TOML, or any serde) map.
/// let json = r#"{"bootstrap.servers": ["kafka-1:9092", "kafka-2:9092"], "group.id": "billing",
///                "auto.offset.reset": "earliest", "session.timeout.ms": 30000}"#;
/// let from_json: ConsumerConfig = serde_json::from_str(json).unwrap();
/// assert_eq!(config, from_json);
/// # Ok::<(), lazykafka::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// The properties every client takes.
    common: Common,
    group_id: Option<String>,
    group_instance_id: Option<String>,
    group_protocol: GroupProtocol,
    group_remote_assignor: Option<RemoteAssignor>,
    client_rack: Option<String>,
    auto_offset_reset: OffsetReset,
    enable_auto_commit: bool,
    auto_commit_interval: Duration,
    enable_auto_offset_store: bool,
    isolation_level: IsolationLevel,
    fetch_min_bytes: u32,
    fetch_max_wait: Duration,
    fetch_max_bytes: u32,
    max_partition_fetch_bytes: u32,
    max_poll_records: u32,
    session_timeout: Duration,
    heartbeat_interval: Duration,
    max_poll_interval: Duration,
    partition_assignment_strategy: Vec<AssignmentStrategy>,
    default_api_timeout: Duration,
    topic_metadata_propagation_max: Duration,
    max_in_flight_requests_per_connection: u32,
    check_crcs: bool,
    enable_partition_eof: bool,
    statistics_interval: Duration,
    fetch_sessions: bool,
    allow_auto_create_topics: bool,
    exclude_internal_topics: bool,
    receive_message_max_bytes: u32,
}

impl ConsumerConfig {
    /// Every property name [`from_properties`](Self::from_properties)
    /// accepts (and `sasl.mechanisms`, librdkafka's name for
    /// `sasl.mechanism`). `client.dns.lookup` has a single accepted value
    /// (`use_all_dns_ips`: names are resolved at connect time and every
    /// address is tried) and no getter; it is accepted so that a Java
    /// properties file that sets it loads.
    pub const PROPERTIES: &'static [&'static str] = &[
        BOOTSTRAP_SERVERS,
        GROUP_ID,
        GROUP_INSTANCE_ID,
        GROUP_PROTOCOL,
        GROUP_REMOTE_ASSIGNOR,
        CLIENT_ID,
        CLIENT_RACK,
        AUTO_OFFSET_RESET,
        ENABLE_AUTO_COMMIT,
        AUTO_COMMIT_INTERVAL_MS,
        ENABLE_AUTO_OFFSET_STORE,
        ISOLATION_LEVEL,
        FETCH_MIN_BYTES,
        FETCH_MAX_WAIT_MS,
        FETCH_MAX_BYTES,
        MAX_PARTITION_FETCH_BYTES,
        MAX_POLL_RECORDS,
        SESSION_TIMEOUT_MS,
        HEARTBEAT_INTERVAL_MS,
        MAX_POLL_INTERVAL_MS,
        PARTITION_ASSIGNMENT_STRATEGY,
        CONNECTIONS_MAX_IDLE_MS,
        REQUEST_TIMEOUT_MS,
        DEFAULT_API_TIMEOUT_MS,
        METADATA_MAX_AGE_MS,
        TOPIC_METADATA_PROPAGATION_MAX_MS,
        RECONNECT_BACKOFF_MS,
        RECONNECT_BACKOFF_MAX_MS,
        SOCKET_CONNECTION_SETUP_TIMEOUT_MS,
        SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS,
        SOCKET_KEEPALIVE_ENABLE,
        RETRY_BACKOFF_MS,
        RETRY_BACKOFF_MAX_MS,
        MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
        CHECK_CRCS,
        ENABLE_PARTITION_EOF,
        STATISTICS_INTERVAL_MS,
        FETCH_SESSIONS_ENABLE,
        ALLOW_AUTO_CREATE_TOPICS,
        EXCLUDE_INTERNAL_TOPICS,
        RECEIVE_MESSAGE_MAX_BYTES,
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
        SASL_MECHANISM,
        SASL_USERNAME,
        SASL_PASSWORD,
        SASL_OAUTHBEARER_CONFIG,
        ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT,
    ];

    /// The properties whose values are secrets: never rendered by
    /// [`to_properties`](Self::to_properties) nor shown by `Debug`, and
    /// never quoted in an error.
    pub const SECRET_PROPERTIES: &'static [&'static str] = common::SECRET_PROPERTIES;

    /// A builder with every property at its default; only
    /// `bootstrap.servers` must be set.
    ///
    /// ```
    /// use lazykafka::{ConsumerConfig, IsolationLevel};
    ///
    /// let config = ConsumerConfig::builder()
    ///     .bootstrap_servers("localhost:9092")
    ///     .isolation_level(IsolationLevel::ReadCommitted)
    ///     .max_poll_records(100)
    ///     .build()?;
    /// assert_eq!(config.group_id(), None); // manual assignment only
    /// assert!(!config.enable_auto_commit()); // nothing to commit to without a group
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn builder() -> ConsumerConfigBuilder {
        ConsumerConfigBuilder::new()
    }

    /// Builds a configuration from Kafka property names and values, as a
    /// Java `.properties` file has them. Later entries override earlier
    /// ones; values are trimmed.
    ///
    /// Fails on an unknown property, an invalid value, or values that
    /// contradict each other, with [`Error::Config`] naming the property.
    ///
    /// ```
    /// use lazykafka::{ConsumerConfig, Error};
    /// use std::time::Duration;
    ///
    /// let config = ConsumerConfig::from_properties([
    ///     ("bootstrap.servers", "localhost:9092"),
    ///     ("group.id", "g"),
    ///     ("connections.max.idle.ms", "-1"),
    /// ])?;
    /// assert_eq!(config.connections_max_idle(), None);
    ///
    /// let err = ConsumerConfig::from_properties([
    ///     ("bootstrap.servers", "localhost:9092"),
    ///     ("fetch.min.byte", "1"),
    /// ])
    /// .unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     r#"configuration property fetch.min.byte: unknown property; did you mean "fetch.min.bytes"?"#
    /// );
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn from_properties<I, K, V>(properties: I) -> Result<ConsumerConfig, Error>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        ConsumerConfig::builder().set_all(properties)?.build()
    }

    /// Every property with its value, as strings that
    /// [`from_properties`](Self::from_properties) reads back into an equal
    /// configuration, except for the secrets
    /// ([`SECRET_PROPERTIES`](Self::SECRET_PROPERTIES): `ssl.key.pem`,
    /// `ssl.key.password` and `sasl.password`; an OAUTHBEARER token provider
    /// is code, not a property), which are left out so that the output can
    /// be logged: a configuration with them reads back only once they are
    /// set again. Unset optional properties (`group.id`,
    /// `group.instance.id`, `client.rack`, the `ssl.*` files and PEM texts,
    /// `sasl.mechanism`, `sasl.username`, `sasl.oauthbearer.config`) are
    /// left out too.
    ///
    /// ```
    /// use lazykafka::ConsumerConfig;
    ///
    /// let config = ConsumerConfig::from_properties([
    ///     ("bootstrap.servers", "localhost:9092"),
    ///     ("security.protocol", "SASL_PLAINTEXT"),
    ///     ("sasl.mechanism", "SCRAM-SHA-256"),
    ///     ("sasl.username", "alice"),
    ///     ("sasl.password", "alice-secret"),
    /// ])?;
    /// let listed = format!("{:?}", config.to_properties());
    /// assert!(listed.contains("alice") && !listed.contains("alice-secret"));
    /// assert!(!format!("{config:?}").contains("alice-secret"));
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn to_properties(&self) -> Vec<(&'static str, String)> {
        let ms = |d: Duration| d.as_millis().to_string();
        let mut out = Vec::with_capacity(Self::PROPERTIES.len());
        self.common.render(&mut out);
        let optional = [
            (GROUP_ID, &self.group_id),
            (GROUP_INSTANCE_ID, &self.group_instance_id),
            (CLIENT_RACK, &self.client_rack),
        ];
        out.extend(
            optional
                .into_iter()
                .filter_map(|(k, v)| v.clone().map(|v| (k, v))),
        );
        out.push((GROUP_PROTOCOL, self.group_protocol.to_string()));
        if let Some(assignor) = self.group_remote_assignor {
            out.push((GROUP_REMOTE_ASSIGNOR, assignor.to_string()));
        }
        out.extend([
            (AUTO_OFFSET_RESET, self.auto_offset_reset.to_string()),
            (ENABLE_AUTO_COMMIT, self.enable_auto_commit.to_string()),
            (AUTO_COMMIT_INTERVAL_MS, ms(self.auto_commit_interval)),
            (
                ENABLE_AUTO_OFFSET_STORE,
                self.enable_auto_offset_store.to_string(),
            ),
            (ISOLATION_LEVEL, self.isolation_level.to_string()),
            (FETCH_MIN_BYTES, self.fetch_min_bytes.to_string()),
            (FETCH_MAX_WAIT_MS, ms(self.fetch_max_wait)),
            (FETCH_MAX_BYTES, self.fetch_max_bytes.to_string()),
            (
                MAX_PARTITION_FETCH_BYTES,
                self.max_partition_fetch_bytes.to_string(),
            ),
            (MAX_POLL_RECORDS, self.max_poll_records.to_string()),
            (SESSION_TIMEOUT_MS, ms(self.session_timeout)),
            (HEARTBEAT_INTERVAL_MS, ms(self.heartbeat_interval)),
            (MAX_POLL_INTERVAL_MS, ms(self.max_poll_interval)),
            (
                PARTITION_ASSIGNMENT_STRATEGY,
                self.partition_assignment_strategy
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (DEFAULT_API_TIMEOUT_MS, ms(self.default_api_timeout)),
            (
                TOPIC_METADATA_PROPAGATION_MAX_MS,
                ms(self.topic_metadata_propagation_max),
            ),
            (
                MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
                self.max_in_flight_requests_per_connection.to_string(),
            ),
            (CHECK_CRCS, self.check_crcs.to_string()),
            (ENABLE_PARTITION_EOF, self.enable_partition_eof.to_string()),
            (STATISTICS_INTERVAL_MS, ms(self.statistics_interval)),
            (FETCH_SESSIONS_ENABLE, self.fetch_sessions.to_string()),
            (
                ALLOW_AUTO_CREATE_TOPICS,
                self.allow_auto_create_topics.to_string(),
            ),
            (
                EXCLUDE_INTERNAL_TOPICS,
                self.exclude_internal_topics.to_string(),
            ),
            (
                RECEIVE_MESSAGE_MAX_BYTES,
                self.receive_message_max_bytes.to_string(),
            ),
        ]);
        sort_properties(&mut out, Self::PROPERTIES);
        if self.group_protocol == GroupProtocol::Consumer {
            // Not part of the consumer protocol: setting them there is an
            // error, so they are left out to read back.
            out.retain(|(k, _)| !CLASSIC_ONLY.contains(k));
        }
        out
    }

    /// `group.protocol`: `classic` (default; JoinGroup, SyncGroup and
    /// client-side assignors) or `consumer` (KIP-848: ConsumerGroupHeartbeat
    /// and assignment by the coordinator, Kafka 4.0+).
    pub fn group_protocol(&self) -> GroupProtocol {
        self.group_protocol
    }

    /// `group.remote.assignor`: the coordinator-side assignor a member of
    /// the consumer protocol asks for; `None` (default) lets the broker use
    /// its default (`uniform` in Kafka).
    pub fn group_remote_assignor(&self) -> Option<RemoteAssignor> {
        self.group_remote_assignor
    }

    /// `group.id`: the consumer group; `None` means manual assignment only
    /// (no coordinator, no commits).
    pub fn group_id(&self) -> Option<&str> {
        self.group_id.as_deref()
    }

    /// `group.instance.id`: makes this member static (KIP-345).
    pub fn group_instance_id(&self) -> Option<&str> {
        self.group_instance_id.as_deref()
    }

    /// `client.rack`: the rack this consumer runs in, sent in the group
    /// subscription and in every Fetch (v11+), so that a partition's
    /// leader may name a follower in this rack to fetch from instead
    /// (KIP-392; see `docs/consumer.md`).
    pub fn client_rack(&self) -> Option<&str> {
        self.client_rack.as_deref()
    }

    /// `auto.offset.reset` (default `latest`).
    pub fn auto_offset_reset(&self) -> OffsetReset {
        self.auto_offset_reset
    }

    /// `enable.auto.commit` (default `true` with a `group.id`; always
    /// `false` without one, as in the Java client).
    pub fn enable_auto_commit(&self) -> bool {
        self.enable_auto_commit
    }

    /// `auto.commit.interval.ms` (default 5 s).
    pub fn auto_commit_interval(&self) -> Duration {
        self.auto_commit_interval
    }

    /// `enable.auto.offset.store` (default `true`, as in librdkafka): every
    /// record `poll` returns counts as processed, and commits (automatic,
    /// [`Consumer::commit`](crate::Consumer::commit), on `close`) take the
    /// consumed positions. With `false` they take only the offsets the
    /// application stored with
    /// [`Consumer::store_offset`](crate::Consumer::store_offset).
    pub fn enable_auto_offset_store(&self) -> bool {
        self.enable_auto_offset_store
    }

    /// `isolation.level` (default `read_uncommitted`).
    pub fn isolation_level(&self) -> IsolationLevel {
        self.isolation_level
    }

    /// `fetch.min.bytes`: how much data a Fetch waits for (default 1).
    pub fn fetch_min_bytes(&self) -> u32 {
        self.fetch_min_bytes
    }

    /// `fetch.max.wait.ms`: how long a Fetch waits for `fetch.min.bytes`
    /// (default 500 ms).
    pub fn fetch_max_wait(&self) -> Duration {
        self.fetch_max_wait
    }

    /// `fetch.max.bytes`: the size a Fetch response aims to stay under
    /// (default 52428800, 50 MiB).
    pub fn fetch_max_bytes(&self) -> u32 {
        self.fetch_max_bytes
    }

    /// `max.partition.fetch.bytes`: the same per partition (default
    /// 1048576, 1 MiB).
    pub fn max_partition_fetch_bytes(&self) -> u32 {
        self.max_partition_fetch_bytes
    }

    /// `max.poll.records`: the most records one `poll` returns (default
    /// 500).
    pub fn max_poll_records(&self) -> u32 {
        self.max_poll_records
    }

    /// `session.timeout.ms`: how long the coordinator waits for a heartbeat
    /// before it removes this member (default 45 s).
    pub fn session_timeout(&self) -> Duration {
        self.session_timeout
    }

    /// `heartbeat.interval.ms` (default 3 s); always below the session
    /// timeout.
    pub fn heartbeat_interval(&self) -> Duration {
        self.heartbeat_interval
    }

    /// `max.poll.interval.ms`: the longest time between two polls before
    /// the member leaves the group; also the JoinGroup rebalance timeout
    /// (default 5 min).
    pub fn max_poll_interval(&self) -> Duration {
        self.max_poll_interval
    }

    /// `partition.assignment.strategy`, in order of preference (default
    /// `range,cooperative-sticky`).
    pub fn partition_assignment_strategy(&self) -> &[AssignmentStrategy] {
        &self.partition_assignment_strategy
    }

    /// The rebalance protocol the assignment strategies allow: cooperative
    /// only when every listed strategy is cooperative (see
    /// [`RebalanceProtocol::for_strategies`]).
    pub fn rebalance_protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::for_strategies(&self.partition_assignment_strategy)
    }

    /// `default.api.timeout.ms`: the timeout of blocking calls that take
    /// none, such as `committed` (default 60 s).
    pub fn default_api_timeout(&self) -> Duration {
        self.default_api_timeout
    }

    /// `topic.metadata.propagation.max.ms` (as librdkafka names it): how
    /// long a subscribed or assigned topic (or partition) may be missing
    /// from the cluster's metadata before `poll` reports it with
    /// [`Error::Topic`] or [`Error::UnknownPartition`], and
    /// `partitions_for` gives up on it (default 1 s: a new topic reaches
    /// every broker within it on a healthy cluster; librdkafka waits 30 s).
    /// A partition being fetched whose metadata names no leader is
    /// reported ([`Error::NoLeader`]) after the same time.
    pub fn topic_metadata_propagation_max(&self) -> Duration {
        self.topic_metadata_propagation_max
    }

    /// `max.in.flight.requests.per.connection`: requests sent on one
    /// connection before waiting for an answer (default 5).
    pub fn max_in_flight_requests_per_connection(&self) -> u32 {
        self.max_in_flight_requests_per_connection
    }

    /// `check.crcs`: verify the CRC of every fetched record batch (default
    /// `true`).
    pub fn check_crcs(&self) -> bool {
        self.check_crcs
    }

    /// `enable.partition.eof` (librdkafka's name; default `false`): when
    /// `true`, `poll` (and the stream) says once each time a partition's
    /// position reaches the end of its log (the high watermark; the last
    /// stable offset under `read_committed`), as an
    /// [`Error::Fetch`] holding
    /// [`FetchError::PartitionEof`](crate::error::FetchError::PartitionEof),
    /// after the partition's records before it. It is retriable: a loop
    /// that polls on past retriable errors goes on; one that reads until
    /// caught up stops there ([`Error::partition_eof`](crate::Error::partition_eof)).
    pub fn enable_partition_eof(&self) -> bool {
        self.enable_partition_eof
    }

    /// `statistics.interval.ms` (librdkafka's name; default 0, none):
    /// how often [`Consumer::statistics`](crate::Consumer::statistics)
    /// yields the consumer's [metrics](crate::ConsumerMetrics). `None`
    /// when 0.
    pub fn statistics_interval(&self) -> Option<Duration> {
        (!self.statistics_interval.is_zero()).then_some(self.statistics_interval)
    }

    /// `fetch.sessions.enable`: use incremental fetch sessions (KIP-227)
    /// on each leader connection: after a full Fetch, requests list only
    /// the partitions that changed. On by default, as in the Java client
    /// (`false`: every Fetch is a full one outside any session); see
    /// `docs/fetching.md`.
    pub fn fetch_sessions(&self) -> bool {
        self.fetch_sessions
    }

    /// `allow.auto.create.topics`: let Metadata requests create subscribed
    /// topics that do not exist, where the broker allows it (default
    /// `true`).
    pub fn allow_auto_create_topics(&self) -> bool {
        self.allow_auto_create_topics
    }

    /// `exclude.internal.topics` (default `true`): a pattern subscription
    /// ([`Consumer::subscribe_pattern`](crate::Consumer)) under the classic
    /// group protocol never matches an internal topic (one the metadata
    /// marks IsInternal, such as `__consumer_offsets`), as in the Java
    /// client; with `false` it may. Subscribing to an internal topic by
    /// name always works. Under `group.protocol=consumer` the coordinator
    /// resolves the pattern and this property does not apply.
    pub fn exclude_internal_topics(&self) -> bool {
        self.exclude_internal_topics
    }

    /// `receive.message.max.bytes` (librdkafka's name): the largest response
    /// frame accepted, checked before it is buffered (default 104857600,
    /// 100 MiB; raised to `fetch.max.bytes` + 512 when that is larger and
    /// this is not set).
    pub fn receive_message_max_bytes(&self) -> u32 {
        self.receive_message_max_bytes
    }

    common_getters!(ConsumerConfig);
}

impl<'de> Deserialize<'de> for ConsumerConfig {
    /// Reads a map of property names to values. A value may be a string, a
    /// number, a boolean, a list of those (joined with commas, for
    /// `bootstrap.servers` and `partition.assignment.strategy`), or null
    /// (the property keeps its default).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ConsumerConfig::from_properties(serde_properties(deserializer)?).map_err(de::Error::custom)
    }
}

/// The properties of a serde map of property names to values, as strings;
/// null values left out (they keep the default).
fn serde_properties<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<(String, String)>, D::Error> {
    let map = BTreeMap::<String, PropertyValue>::deserialize(deserializer)?;
    Ok(map
        .into_iter()
        .filter_map(|(k, v)| v.0.map(|v| (k, v)))
        .collect())
}

/// A property value from serde, as the string a `.properties` file would
/// hold; `None` for null.
struct PropertyValue(Option<String>);

impl<'de> Deserialize<'de> for PropertyValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(PropertyValueVisitor)
    }
}

struct PropertyValueVisitor;

impl<'de> Visitor<'de> for PropertyValueVisitor {
    type Value = PropertyValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, number, boolean, null, or a list of those")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<PropertyValue, E> {
        Ok(PropertyValue(Some(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<PropertyValue, E> {
        Ok(PropertyValue(Some(v)))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<PropertyValue, E> {
        Ok(PropertyValue(Some(v.to_string())))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<PropertyValue, E> {
        Ok(PropertyValue(Some(v.to_string())))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<PropertyValue, E> {
        Ok(PropertyValue(Some(v.to_string())))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<PropertyValue, E> {
        // 1.0 reads as "1"; 1.5 stays "1.5" and fails as "not an integer".
        Ok(PropertyValue(Some(v.to_string())))
    }

    fn visit_unit<E: de::Error>(self) -> Result<PropertyValue, E> {
        Ok(PropertyValue(None))
    }

    fn visit_none<E: de::Error>(self) -> Result<PropertyValue, E> {
        Ok(PropertyValue(None))
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<PropertyValue, D::Error> {
        PropertyValue::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PropertyValue, A::Error> {
        let mut items = Vec::new();
        while let Some(PropertyValue(item)) = seq.next_element()? {
            items.extend(item);
        }
        Ok(PropertyValue(Some(items.join(","))))
    }

    fn visit_map<A: MapAccess<'de>>(self, _map: A) -> Result<PropertyValue, A::Error> {
        Err(de::Error::custom(
            "a property value cannot be a map; property names are flat, such as \"fetch.min.bytes\"",
        ))
    }
}

/// Builds a [`ConsumerConfig`]; see [`ConsumerConfig::builder`].
///
/// Typed setters take the value as the typed getters return it; their
/// values are checked by [`build`](Self::build). [`set`](Self::set) takes a
/// Kafka property name and a string value and checks its syntax at once.
#[derive(Debug, Clone)]
pub struct ConsumerConfigBuilder {
    /// The properties every client takes.
    common: CommonBuilder,
    group_id: Option<String>,
    group_instance_id: Option<String>,
    group_protocol: GroupProtocol,
    group_remote_assignor: Option<RemoteAssignor>,
    client_rack: Option<String>,
    auto_offset_reset: OffsetReset,
    enable_auto_commit: Option<bool>,
    auto_commit_interval: Duration,
    enable_auto_offset_store: bool,
    isolation_level: IsolationLevel,
    fetch_min_bytes: u32,
    fetch_max_wait: Duration,
    fetch_max_bytes: u32,
    max_partition_fetch_bytes: u32,
    max_poll_records: u32,
    session_timeout: Duration,
    heartbeat_interval: Duration,
    max_poll_interval: Duration,
    partition_assignment_strategy: Vec<AssignmentStrategy>,
    default_api_timeout: Duration,
    topic_metadata_propagation_max: Duration,
    max_in_flight_requests_per_connection: u32,
    check_crcs: bool,
    enable_partition_eof: bool,
    statistics_interval: Duration,
    fetch_sessions: bool,
    allow_auto_create_topics: bool,
    exclude_internal_topics: bool,
    receive_message_max_bytes: Option<u32>,
    /// Classic-only properties set explicitly, which `group.protocol=consumer`
    /// refuses (as Java's `ConsumerConfig` does).
    explicit: Vec<&'static str>,
}

impl Default for ConsumerConfigBuilder {
    fn default() -> Self {
        ConsumerConfigBuilder::new()
    }
}

impl ConsumerConfigBuilder {
    /// Every property at its default.
    pub fn new() -> Self {
        ConsumerConfigBuilder {
            common: CommonBuilder::default(),
            group_id: None,
            group_instance_id: None,
            group_protocol: GroupProtocol::Classic,
            group_remote_assignor: None,
            client_rack: None,
            auto_offset_reset: OffsetReset::Latest,
            enable_auto_commit: None,
            auto_commit_interval: Duration::from_millis(5_000),
            enable_auto_offset_store: true,
            isolation_level: IsolationLevel::ReadUncommitted,
            fetch_min_bytes: 1,
            fetch_max_wait: Duration::from_millis(500),
            fetch_max_bytes: 52_428_800,
            max_partition_fetch_bytes: 1_048_576,
            max_poll_records: 500,
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(3_000),
            max_poll_interval: Duration::from_millis(300_000),
            partition_assignment_strategy: vec![
                AssignmentStrategy::Range,
                AssignmentStrategy::CooperativeSticky,
            ],
            default_api_timeout: Duration::from_millis(60_000),
            topic_metadata_propagation_max: Duration::from_millis(1_000),
            max_in_flight_requests_per_connection: 5,
            check_crcs: true,
            enable_partition_eof: false,
            statistics_interval: Duration::ZERO,
            fetch_sessions: true,
            allow_auto_create_topics: true,
            exclude_internal_topics: true,
            receive_message_max_bytes: None,
            explicit: Vec::new(),
        }
    }

    /// Sets one property by its Kafka name from a string, as
    /// [`ConsumerConfig::from_properties`] does. The value's syntax is
    /// checked now; its range and its agreement with other properties in
    /// [`build`](Self::build). librdkafka's names are read too (as
    /// docs/configuration.md, "A librdkafka configuration", lists): its
    /// names for Java properties as those properties, its own properties
    /// accepted where their value changes nothing here and refused with
    /// what to use instead otherwise.
    ///
    /// ```
    /// use lazykafka::ConsumerConfig;
    ///
    /// let config = ConsumerConfig::builder()
    ///     .bootstrap_servers("localhost:9092")
    ///     .set("max.poll.records", "50")?
    ///     .build()?;
    /// assert_eq!(config.max_poll_records(), 50);
    ///
    /// let err = ConsumerConfig::builder().set("max.poll.records", "lots").unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     r#"configuration property max.poll.records: invalid value "lots": not an integer"#
    /// );
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn set(self, property: &str, value: &str) -> Result<Self, Error> {
        if librdkafka::only_librdkafka(property, value, true)? {
            return Ok(self);
        }
        let known = librdkafka::canonical(property, true);
        self.set_known(known, value)
            .map_err(|e| librdkafka::as_written(e, property, known))
    }

    /// [`set`](Self::set) for a property by the name this crate knows it.
    fn set_known(mut self, property: &str, value: &str) -> Result<Self, Error> {
        let p = property;
        let v = value.trim();
        match property {
            GROUP_ID => self.group_id = Some(v.to_owned()),
            GROUP_INSTANCE_ID => self.group_instance_id = Some(v.to_owned()),
            GROUP_PROTOCOL => {
                self.group_protocol = v
                    .parse()
                    .map_err(|()| invalid(p, v, "expected classic or consumer"))?
            }
            GROUP_REMOTE_ASSIGNOR => {
                // Java's default is null; "" reads as unset, as for client.rack.
                self.group_remote_assignor = if v.is_empty() {
                    None
                } else {
                    Some(
                        v.parse()
                            .map_err(|()| invalid(p, v, "expected uniform or range"))?,
                    )
                }
            }
            // Java's default is "", meaning no rack.
            CLIENT_RACK => self.client_rack = (!v.is_empty()).then(|| v.to_owned()),
            AUTO_OFFSET_RESET => self.auto_offset_reset = v.parse()?,
            ENABLE_AUTO_COMMIT => self.enable_auto_commit = Some(parse_bool(p, v)?),
            AUTO_COMMIT_INTERVAL_MS => self.auto_commit_interval = parse_ms(p, v)?,
            ENABLE_AUTO_OFFSET_STORE => self.enable_auto_offset_store = parse_bool(p, v)?,
            ISOLATION_LEVEL => self.isolation_level = v.parse()?,
            FETCH_MIN_BYTES => self.fetch_min_bytes = parse_u32(p, v)?,
            FETCH_MAX_WAIT_MS => self.fetch_max_wait = parse_ms(p, v)?,
            FETCH_MAX_BYTES => self.fetch_max_bytes = parse_u32(p, v)?,
            MAX_PARTITION_FETCH_BYTES => self.max_partition_fetch_bytes = parse_u32(p, v)?,
            MAX_POLL_RECORDS => self.max_poll_records = parse_u32(p, v)?,
            SESSION_TIMEOUT_MS => {
                self.session_timeout = parse_ms(p, v)?;
                self.mark_explicit(SESSION_TIMEOUT_MS);
            }
            HEARTBEAT_INTERVAL_MS => {
                self.heartbeat_interval = parse_ms(p, v)?;
                self.mark_explicit(HEARTBEAT_INTERVAL_MS);
            }
            MAX_POLL_INTERVAL_MS => self.max_poll_interval = parse_ms(p, v)?,
            PARTITION_ASSIGNMENT_STRATEGY => {
                self.partition_assignment_strategy = parse_strategies(v)?;
                self.mark_explicit(PARTITION_ASSIGNMENT_STRATEGY);
            }
            DEFAULT_API_TIMEOUT_MS => self.default_api_timeout = parse_ms(p, v)?,
            TOPIC_METADATA_PROPAGATION_MAX_MS => {
                self.topic_metadata_propagation_max = parse_ms(p, v)?
            }
            MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION => {
                self.max_in_flight_requests_per_connection = parse_u32(p, v)?
            }
            CHECK_CRCS => self.check_crcs = parse_bool(p, v)?,
            ENABLE_PARTITION_EOF => self.enable_partition_eof = parse_bool(p, v)?,
            STATISTICS_INTERVAL_MS => self.statistics_interval = parse_ms(p, v)?,
            FETCH_SESSIONS_ENABLE => self.fetch_sessions = parse_bool(p, v)?,
            ALLOW_AUTO_CREATE_TOPICS => self.allow_auto_create_topics = parse_bool(p, v)?,
            EXCLUDE_INTERNAL_TOPICS => self.exclude_internal_topics = parse_bool(p, v)?,
            RECEIVE_MESSAGE_MAX_BYTES => self.receive_message_max_bytes = Some(parse_u32(p, v)?),
            _ => match self.common.set(property, value) {
                Some(result) => result?,
                None => return Err(unknown_consumer_property(property)),
            },
        }
        Ok(self)
    }

    /// Sets every property of `properties` with [`set`](Self::set), in
    /// order.
    pub fn set_all<I, K, V>(self, properties: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        properties
            .into_iter()
            .try_fold(self, |b, (k, v)| b.set(k.as_ref(), v.as_ref()))
    }

    /// `group.id`. Without one the consumer can only be assigned
    /// partitions by hand.
    pub fn group_id(mut self, group_id: impl Into<String>) -> Self {
        self.group_id = Some(group_id.into());
        self
    }

    /// `group.instance.id` (static membership, KIP-345); needs a
    /// `group.id`.
    pub fn group_instance_id(mut self, id: impl Into<String>) -> Self {
        self.group_instance_id = Some(id.into());
        self
    }

    /// `group.protocol`: classic (default) or consumer (KIP-848).
    pub fn group_protocol(mut self, protocol: GroupProtocol) -> Self {
        self.group_protocol = protocol;
        self
    }

    /// `group.remote.assignor`: the coordinator-side assignor of the
    /// consumer protocol; only with `group.protocol=consumer`.
    pub fn group_remote_assignor(mut self, assignor: RemoteAssignor) -> Self {
        self.group_remote_assignor = Some(assignor);
        self
    }

    fn mark_explicit(&mut self, property: &'static str) {
        if !self.explicit.contains(&property) {
            self.explicit.push(property);
        }
    }

    /// `client.rack`: sent in the group subscription and in Fetch (v11+),
    /// so that a leader may name a follower in this rack to fetch from
    /// (KIP-392). Empty means none.
    pub fn client_rack(mut self, rack: impl Into<String>) -> Self {
        self.client_rack = Some(rack.into());
        self
    }

    /// `auto.offset.reset`.
    pub fn auto_offset_reset(mut self, reset: OffsetReset) -> Self {
        self.auto_offset_reset = reset;
        self
    }

    /// `enable.auto.commit`. `true` needs a `group.id`.
    pub fn enable_auto_commit(mut self, enable: bool) -> Self {
        self.enable_auto_commit = Some(enable);
        self
    }

    /// `enable.auto.offset.store`: `false` makes commits take only the
    /// offsets stored with
    /// [`Consumer::store_offset`](crate::Consumer::store_offset).
    pub fn enable_auto_offset_store(mut self, enable: bool) -> Self {
        self.enable_auto_offset_store = enable;
        self
    }

    /// `auto.commit.interval.ms`.
    pub fn auto_commit_interval(mut self, interval: Duration) -> Self {
        self.auto_commit_interval = interval;
        self
    }

    /// `isolation.level`.
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.isolation_level = level;
        self
    }

    /// `fetch.min.bytes`; at most `fetch.max.bytes`.
    pub fn fetch_min_bytes(mut self, bytes: u32) -> Self {
        self.fetch_min_bytes = bytes;
        self
    }

    /// `fetch.max.wait.ms`.
    pub fn fetch_max_wait(mut self, wait: Duration) -> Self {
        self.fetch_max_wait = wait;
        self
    }

    /// `fetch.max.bytes`.
    pub fn fetch_max_bytes(mut self, bytes: u32) -> Self {
        self.fetch_max_bytes = bytes;
        self
    }

    /// `max.partition.fetch.bytes`.
    pub fn max_partition_fetch_bytes(mut self, bytes: u32) -> Self {
        self.max_partition_fetch_bytes = bytes;
        self
    }

    /// `max.poll.records`; at least 1.
    pub fn max_poll_records(mut self, records: u32) -> Self {
        self.max_poll_records = records;
        self
    }

    /// `session.timeout.ms`.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self.mark_explicit(SESSION_TIMEOUT_MS);
        self
    }

    /// `heartbeat.interval.ms`; must be lower than `session.timeout.ms`.
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self.mark_explicit(HEARTBEAT_INTERVAL_MS);
        self
    }

    /// `max.poll.interval.ms`.
    pub fn max_poll_interval(mut self, interval: Duration) -> Self {
        self.max_poll_interval = interval;
        self
    }

    /// `partition.assignment.strategy`, in order of preference.
    pub fn partition_assignment_strategy(
        mut self,
        strategies: impl IntoIterator<Item = AssignmentStrategy>,
    ) -> Self {
        self.partition_assignment_strategy = strategies.into_iter().collect();
        self.mark_explicit(PARTITION_ASSIGNMENT_STRATEGY);
        self
    }

    /// `default.api.timeout.ms`.
    pub fn default_api_timeout(mut self, timeout: Duration) -> Self {
        self.default_api_timeout = timeout;
        self
    }

    /// `topic.metadata.propagation.max.ms`.
    pub fn topic_metadata_propagation_max(mut self, max: Duration) -> Self {
        self.topic_metadata_propagation_max = max;
        self
    }

    /// `max.in.flight.requests.per.connection`; at least 1.
    pub fn max_in_flight_requests_per_connection(mut self, requests: u32) -> Self {
        self.max_in_flight_requests_per_connection = requests;
        self
    }

    /// `check.crcs`.
    pub fn check_crcs(mut self, check: bool) -> Self {
        self.check_crcs = check;
        self
    }

    /// `enable.partition.eof`: say when a partition's position reaches
    /// the end of its log (see [`ConsumerConfig::enable_partition_eof`]).
    pub fn enable_partition_eof(mut self, enable: bool) -> Self {
        self.enable_partition_eof = enable;
        self
    }

    /// `statistics.interval.ms`: how often
    /// [`Consumer::statistics`](crate::Consumer::statistics) yields the
    /// metrics; zero for never.
    pub fn statistics_interval(mut self, interval: Duration) -> Self {
        self.statistics_interval = interval;
        self
    }

    /// `fetch.sessions.enable`.
    pub fn fetch_sessions(mut self, enable: bool) -> Self {
        self.fetch_sessions = enable;
        self
    }

    /// `allow.auto.create.topics`.
    pub fn allow_auto_create_topics(mut self, allow: bool) -> Self {
        self.allow_auto_create_topics = allow;
        self
    }

    /// `exclude.internal.topics`: whether a classic pattern subscription
    /// leaves internal topics out (default `true`).
    pub fn exclude_internal_topics(mut self, exclude: bool) -> Self {
        self.exclude_internal_topics = exclude;
        self
    }

    /// `receive.message.max.bytes`; from 1000 to 2147483647, and at least
    /// `fetch.max.bytes` + 512.
    pub fn receive_message_max_bytes(mut self, bytes: u32) -> Self {
        self.receive_message_max_bytes = Some(bytes);
        self
    }

    common_setters!(ConsumerConfig);

    /// Checks every value and how they agree, and returns the
    /// configuration; an [`Error::Config`] names the first property that is
    /// wrong.
    pub fn build(self) -> Result<ConsumerConfig, Error> {
        let b = self;
        // The shared properties first (bootstrap.servers, then the
        // connections and security), the consumer's own after.
        let common = b.common.build("ConsumerConfigBuilder")?;

        if b.group_id.as_deref() == Some("") {
            return Err(config_error(
                GROUP_ID,
                "must not be empty; leave it unset for a consumer without a group",
            ));
        }
        if let Some(id) = &b.group_instance_id {
            validate_group_instance_id(id)?;
            if b.group_id.is_none() {
                return Err(invalid(
                    GROUP_INSTANCE_ID,
                    id,
                    "static membership needs a group.id",
                ));
            }
        }
        // Java: without a group there is nothing to commit to; asking for
        // auto-commit then is an error, and the default turns into false.
        let enable_auto_commit = match (b.enable_auto_commit, &b.group_id) {
            (Some(true), None) => {
                return Err(invalid(
                    ENABLE_AUTO_COMMIT,
                    "true",
                    "auto-commit needs a group.id",
                ))
            }
            (_, None) => false,
            (explicit, Some(_)) => explicit.unwrap_or(true),
        };

        check_ms(AUTO_COMMIT_INTERVAL_MS, b.auto_commit_interval, 0, INT_MAX)?;
        check_ms(FETCH_MAX_WAIT_MS, b.fetch_max_wait, 0, INT_MAX)?;
        check_ms(SESSION_TIMEOUT_MS, b.session_timeout, 1, INT_MAX)?;
        check_ms(HEARTBEAT_INTERVAL_MS, b.heartbeat_interval, 1, INT_MAX)?;
        check_ms(MAX_POLL_INTERVAL_MS, b.max_poll_interval, 1, INT_MAX)?;
        check_ms(DEFAULT_API_TIMEOUT_MS, b.default_api_timeout, 0, INT_MAX)?;
        // librdkafka's bound: a day.
        check_ms(STATISTICS_INTERVAL_MS, b.statistics_interval, 0, 86_400_000)?;
        check_ms(
            TOPIC_METADATA_PROPAGATION_MAX_MS,
            b.topic_metadata_propagation_max,
            0,
            INT_MAX,
        )?;

        check_int(FETCH_MIN_BYTES, b.fetch_min_bytes, 0)?;
        check_int(FETCH_MAX_BYTES, b.fetch_max_bytes, 0)?;
        check_int(MAX_PARTITION_FETCH_BYTES, b.max_partition_fetch_bytes, 0)?;
        check_int(MAX_POLL_RECORDS, b.max_poll_records, 1)?;
        check_int(
            MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
            b.max_in_flight_requests_per_connection,
            1,
        )?;

        // Java's ConsumerConfig rule: a property of one protocol set under
        // the other is a mistake worth saying, not something to ignore.
        match b.group_protocol {
            GroupProtocol::Consumer => {
                if let Some(property) = CLASSIC_ONLY.iter().find(|p| b.explicit.contains(p)) {
                    return Err(config_error(
                        property,
                        format!(
                            "not supported with {GROUP_PROTOCOL}=consumer: the group coordinator \
                             sets the session timeout, the heartbeat interval and the assignment \
                             (KIP-848; choose a server-side assignor with {GROUP_REMOTE_ASSIGNOR})"
                        ),
                    ));
                }
            }
            GroupProtocol::Classic => {
                if let Some(assignor) = b.group_remote_assignor {
                    return Err(invalid(
                        GROUP_REMOTE_ASSIGNOR,
                        assignor,
                        format!(
                            "not supported with {GROUP_PROTOCOL}=classic: classic groups assign \
                             on the client ({PARTITION_ASSIGNMENT_STRATEGY}); set \
                             {GROUP_PROTOCOL}=consumer"
                        ),
                    ));
                }
            }
        }
        if b.partition_assignment_strategy.is_empty() {
            return Err(config_error(
                PARTITION_ASSIGNMENT_STRATEGY,
                "must name at least one assignor",
            ));
        }
        for (i, s) in b.partition_assignment_strategy.iter().enumerate() {
            if b.partition_assignment_strategy[..i].contains(s) {
                return Err(config_error(
                    PARTITION_ASSIGNMENT_STRATEGY,
                    format!("{s} is listed twice"),
                ));
            }
        }

        // How the values agree.
        if b.heartbeat_interval >= b.session_timeout {
            return Err(invalid(
                HEARTBEAT_INTERVAL_MS,
                b.heartbeat_interval.as_millis(),
                format!(
                    "must be lower than {SESSION_TIMEOUT_MS} ({})",
                    b.session_timeout.as_millis()
                ),
            ));
        }
        if b.fetch_min_bytes > b.fetch_max_bytes {
            return Err(invalid(
                FETCH_MIN_BYTES,
                b.fetch_min_bytes,
                format!("must not exceed {FETCH_MAX_BYTES} ({})", b.fetch_max_bytes),
            ));
        }

        // librdkafka's rule: a whole Fetch response must fit in a frame.
        // Unset, the limit grows to fit; set, it must be large enough.
        let fetch_frame = b.fetch_max_bytes.saturating_add(FETCH_RESPONSE_OVERHEAD);
        let receive_message_max_bytes = match b.receive_message_max_bytes {
            None => DEFAULT_RECEIVE_MESSAGE_MAX_BYTES.max(fetch_frame),
            Some(limit) => {
                if !(u64::from(RECEIVE_MESSAGE_MIN)..=INT_MAX).contains(&u64::from(limit)) {
                    return Err(invalid(
                        RECEIVE_MESSAGE_MAX_BYTES,
                        limit,
                        format!("must be from {RECEIVE_MESSAGE_MIN} to {INT_MAX}"),
                    ));
                }
                if limit < fetch_frame {
                    return Err(invalid(
                        RECEIVE_MESSAGE_MAX_BYTES,
                        limit,
                        format!(
                            "must be at least {FETCH_MAX_BYTES} ({}) + {FETCH_RESPONSE_OVERHEAD}",
                            b.fetch_max_bytes
                        ),
                    ));
                }
                limit
            }
        };

        Ok(ConsumerConfig {
            common,
            group_id: b.group_id,
            group_instance_id: b.group_instance_id,
            group_protocol: b.group_protocol,
            group_remote_assignor: b.group_remote_assignor,
            // Java's default is "", meaning no rack.
            client_rack: b.client_rack.filter(|rack| !rack.is_empty()),
            auto_offset_reset: b.auto_offset_reset,
            enable_auto_commit,
            auto_commit_interval: b.auto_commit_interval,
            enable_auto_offset_store: b.enable_auto_offset_store,
            isolation_level: b.isolation_level,
            fetch_min_bytes: b.fetch_min_bytes,
            fetch_max_wait: b.fetch_max_wait,
            fetch_max_bytes: b.fetch_max_bytes,
            max_partition_fetch_bytes: b.max_partition_fetch_bytes,
            max_poll_records: b.max_poll_records,
            session_timeout: b.session_timeout,
            heartbeat_interval: b.heartbeat_interval,
            max_poll_interval: b.max_poll_interval,
            partition_assignment_strategy: b.partition_assignment_strategy,
            default_api_timeout: b.default_api_timeout,
            topic_metadata_propagation_max: b.topic_metadata_propagation_max,
            max_in_flight_requests_per_connection: b.max_in_flight_requests_per_connection,
            check_crcs: b.check_crcs,
            enable_partition_eof: b.enable_partition_eof,
            statistics_interval: b.statistics_interval,
            fetch_sessions: b.fetch_sessions,
            allow_auto_create_topics: b.allow_auto_create_topics,
            exclude_internal_topics: b.exclude_internal_topics,
            receive_message_max_bytes,
        })
    }
}

// ---------------------------------------------------------------------------
// Parsing and checking

fn config_error(property: &str, reason: impl Into<String>) -> Error {
    Error::Config {
        property: property.to_owned(),
        reason: reason.into(),
    }
}

fn invalid(property: &str, value: impl fmt::Display, why: impl fmt::Display) -> Error {
    config_error(
        property,
        format!("invalid value {:?}: {why}", value.to_string()),
    )
}

/// `true` or `false`, any case (Java's `ConfigDef` BOOLEAN).
fn non_empty(value: &str) -> Option<&str> {
    (!value.is_empty()).then_some(value)
}

fn parse_bool(property: &str, value: &str) -> Result<bool, Error> {
    if value.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(invalid(property, value, "expected true or false"))
    }
}

fn parse_integer(property: &str, value: &str) -> Result<u64, Error> {
    let n: i64 = value
        .parse()
        .map_err(|_| invalid(property, value, "not an integer"))?;
    u64::try_from(n).map_err(|_| invalid(property, value, "must not be negative"))
}

fn parse_u32(property: &str, value: &str) -> Result<u32, Error> {
    let n = parse_integer(property, value)?;
    u32::try_from(n)
        .ok()
        .filter(|&n| u64::from(n) <= INT_MAX)
        .ok_or_else(|| invalid(property, value, format!("must be at most {INT_MAX}")))
}

fn parse_ms(property: &str, value: &str) -> Result<Duration, Error> {
    parse_integer(property, value).map(Duration::from_millis)
}

/// Durations are whole milliseconds on the wire; a fraction is dropped.
fn check_ms(property: &str, d: Duration, min: u64, max: u64) -> Result<(), Error> {
    let ms = d.as_millis();
    if ms < u128::from(min) {
        return Err(invalid(property, ms, format!("must be at least {min}")));
    }
    if ms > u128::from(max) {
        return Err(invalid(property, ms, format!("must be at most {max}")));
    }
    Ok(())
}

fn check_int(property: &str, n: u32, min: u32) -> Result<(), Error> {
    if n < min {
        return Err(invalid(property, n, format!("must be at least {min}")));
    }
    if u64::from(n) > INT_MAX {
        return Err(invalid(property, n, format!("must be at most {INT_MAX}")));
    }
    Ok(())
}

fn parse_bootstrap_servers(list: &str) -> Result<Vec<BrokerAddress>, Error> {
    // As Java's ClientUtils: entries are trimmed and empty ones skipped.
    let servers = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::parse)
        .collect::<Result<Vec<BrokerAddress>, Error>>()?;
    if servers.is_empty() {
        return Err(invalid(
            BOOTSTRAP_SERVERS,
            list,
            "no broker address; expected host:port[,host:port...]",
        ));
    }
    Ok(servers)
}

/// Java's `JoinGroupRequest.validateGroupInstanceId`: the rules of topic
/// names.
fn validate_group_instance_id(id: &str) -> Result<(), Error> {
    let why = if id.is_empty() {
        "must not be empty"
    } else if id.len() > 249 {
        "longer than 249 characters"
    } else if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        "may only contain ASCII letters, digits, '.', '_' and '-'"
    } else {
        return Ok(());
    };
    Err(invalid(GROUP_INSTANCE_ID, id, why))
}

fn parse_strategies(list: &str) -> Result<Vec<AssignmentStrategy>, Error> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|name| {
            AssignmentStrategy::from_name(name).ok_or_else(|| {
                let why = if name == "sticky" || name.ends_with(".StickyAssignor") {
                    "the eager sticky assignor is not supported; use cooperative-sticky".to_owned()
                } else {
                    format!(
                        "unknown assignor {name:?}; expected range, roundrobin or cooperative-sticky \
                         (or the Java class names)"
                    )
                };
                invalid(PARTITION_ASSIGNMENT_STRATEGY, list, why)
            })
        })
        .collect()
}

/// The error for a property the consumer does not know.
fn unknown_consumer_property(property: &str) -> Error {
    const DESERIALIZERS: &str =
        "records are handed out as bytes; deserialize them in the application";
    unknown_property(
        property,
        ConsumerConfig::PROPERTIES,
        librdkafka::CONSUMER_ALIASES,
        &[
            ("key.deserializer", DESERIALIZERS),
            ("value.deserializer", DESERIALIZERS),
        ],
    )
}

/// The error for a property a client does not know, with a hint when the
/// name is a known one's misspelling, librdkafka's name for one (the
/// shared [`common::ALIASES`] and the client's `aliases`), or a Java
/// property this client deliberately lacks (`refused`, with the reason).
fn unknown_property(
    property: &str,
    known: &[&str],
    aliases: &[(&str, &str)],
    refused: &[(&str, &str)],
) -> Error {
    let reason = if property.starts_with("ssl.keystore.") || property.starts_with("ssl.truststore.")
    {
        "Java keystores are not read: give PEM files (ssl.certificate.location, ssl.key.location, ssl.ca.location)".to_owned()
    } else if property.starts_with("sasl.kerberos.") {
        "GSSAPI (Kerberos) is not supported".to_owned()
    } else if let Some((_, why)) = refused.iter().find(|(name, _)| *name == property) {
        (*why).to_owned()
    } else if let Some((_, known)) = common::ALIASES
        .iter()
        .chain(aliases)
        .find(|(alias, _)| *alias == property)
    {
        format!("unknown property; did you mean {known:?}?")
    } else if let Some(near) = known
        .iter()
        .map(|known| (edit_distance(property, known), *known))
        .filter(|(d, _)| *d <= 3)
        .min()
    {
        format!("unknown property; did you mean {:?}?", near.1)
    } else {
        "unknown property".to_owned()
    };
    config_error(property, reason)
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests;
