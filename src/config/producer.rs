//! The producer's configuration: its own properties, with the Java
//! producer's names, defaults and checks (`ProducerConfig` and
//! `KafkaProducer` in apache/kafka's
//! `clients/src/main/java/org/apache/kafka/clients/producer/`), and the
//! properties every client takes ([`super::common`]).

use super::common::{
    common_getters, common_setters, sort_properties, Common, CommonBuilder, BOOTSTRAP_SERVERS,
    CLIENT_DNS_LOOKUP, CLIENT_ID, CLIENT_RUNTIME, CONNECTIONS_MAX_IDLE_MS,
    ENABLE_SSL_CERTIFICATE_VERIFICATION, METADATA_MAX_AGE_MS, RECONNECT_BACKOFF_MAX_MS,
    RECONNECT_BACKOFF_MS, REQUEST_TIMEOUT_MS, RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS,
    SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS, SOCKET_CONNECTION_SETUP_TIMEOUT_MS,
    SOCKET_KEEPALIVE_ENABLE, SSL_CA_LOCATION, SSL_CA_PEM, SSL_CERTIFICATE_LOCATION,
    SSL_CERTIFICATE_PEM, SSL_ENDPOINT_IDENTIFICATION_ALGORITHM, SSL_KEY_LOCATION, SSL_KEY_PASSWORD,
    SSL_KEY_PEM,
};
use super::security::{
    ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT, SASL_MECHANISM, SASL_OAUTHBEARER_CONFIG, SASL_PASSWORD,
    SASL_USERNAME, SECURITY_PROTOCOL,
};
use super::{
    check_int, check_ms, config_error, invalid, parse_bool, parse_integer, parse_ms, parse_u32,
    serde_properties, unknown_property, BrokerAddress, ClientRuntime, Compression, ConsumerConfig,
    EndpointIdentification, SecurityProtocol, INT_MAX, MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
};
use crate::error::Error;
use crate::sasl::Secret;
use serde::de::{self, Deserialize, Deserializer};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

// Property names of the producer alone, in the order of
// `ProducerConfig::PROPERTIES` (the shared ones are in `common`).
const ACKS: &str = "acks";
const ENABLE_IDEMPOTENCE: &str = "enable.idempotence";
const LINGER_MS: &str = "linger.ms";
const BATCH_SIZE: &str = "batch.size";
const COMPRESSION_TYPE: &str = "compression.type";
const MAX_REQUEST_SIZE: &str = "max.request.size";
const BUFFER_MEMORY: &str = "buffer.memory";
const MAX_BLOCK_MS: &str = "max.block.ms";
const DELIVERY_TIMEOUT_MS: &str = "delivery.timeout.ms";
const RETRIES: &str = "retries";
const PARTITIONER_IGNORE_KEYS: &str = "partitioner.ignore.keys";
const METADATA_MAX_IDLE_MS: &str = "metadata.max.idle.ms";
const TRANSACTIONAL_ID: &str = "transactional.id";

// librdkafka's names for some of them, accepted (see `set`).
const QUEUE_BUFFERING_MAX_MS: &str = "queue.buffering.max.ms";
const COMPRESSION_CODEC: &str = "compression.codec";
const MESSAGE_TIMEOUT_MS: &str = "message.timeout.ms";
const REQUEST_REQUIRED_ACKS: &str = "request.required.acks";
const QUEUE_BUFFERING_MAX_KBYTES: &str = "queue.buffering.max.kbytes";
const MESSAGE_MAX_BYTES: &str = "message.max.bytes";
const MESSAGE_SEND_MAX_RETRIES: &str = "message.send.max.retries";

/// The most batches a broker keeps the sequence numbers of, per producer
/// and partition: more requests in flight than this cannot be idempotent
/// (Java's `MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE`).
const MAX_IN_FLIGHT_FOR_IDEMPOTENCE: u32 = 5;
const DEFAULT_DELIVERY_TIMEOUT: Duration = Duration::from_millis(120_000);
/// Java's lower bound for `metadata.max.idle.ms`.
const METADATA_MAX_IDLE_MIN_MS: u64 = 5_000;

/// How many acknowledgements a Produce request waits for (`acks`).
///
/// Parsed from `all`, `-1`, `0` or `1` (`all` in any case), rendered as
/// `all`, `0` or `1`.
///
/// ```
/// use lazykafka::config::Acks;
///
/// assert_eq!("-1".parse::<Acks>()?, Acks::All);
/// assert_eq!(Acks::Leader.to_string(), "1");
/// assert!("2".parse::<Acks>().is_err());
/// # Ok::<(), lazykafka::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Acks {
    /// None: the broker does not answer, and a record counts as sent once
    /// it is written to the socket (`0`). Nothing is retried.
    None,
    /// The partition leader's: it answers once the record is in its log
    /// (`1`); a record is lost if the leader fails before a follower
    /// copies it.
    Leader,
    /// Every in-sync replica's (`all` or `-1`, the default): the strongest
    /// guarantee, and the one the idempotent producer needs.
    #[default]
    All,
}

impl Acks {
    /// The property value: `0`, `1` or `all`.
    pub fn as_str(self) -> &'static str {
        match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        }
    }
}

impl fmt::Display for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Acks {
    type Err = Error;

    /// Parses `all` (any case), `-1`, `0` or `1`.
    fn from_str(s: &str) -> Result<Self, Error> {
        parse_acks(ACKS, s)
    }
}

fn parse_acks(property: &str, s: &str) -> Result<Acks, Error> {
    match s.trim() {
        "-1" => Ok(Acks::All),
        "0" => Ok(Acks::None),
        "1" => Ok(Acks::Leader),
        all if all.eq_ignore_ascii_case("all") => Ok(Acks::All),
        _ => Err(invalid(property, s, "expected all, -1, 0 or 1")),
    }
}

impl FromStr for Compression {
    type Err = Error;

    /// Parses `none`, `gzip`, `snappy`, `lz4` or `zstd` (any case), the
    /// values of `compression.type`.
    fn from_str(s: &str) -> Result<Self, Error> {
        parse_compression(COMPRESSION_TYPE, s)
    }
}

fn parse_compression(property: &str, s: &str) -> Result<Compression, Error> {
    match s.trim().to_ascii_lowercase().as_str() {
        "none" => Ok(Compression::None),
        "gzip" => Ok(Compression::Gzip),
        "snappy" => Ok(Compression::Snappy),
        "lz4" => Ok(Compression::Lz4),
        "zstd" => Ok(Compression::Zstd),
        _ => Err(invalid(
            property,
            s,
            "expected none, gzip, snappy, lz4 or zstd",
        )),
    }
}

/// The configuration of a producer.
///
/// Every value has been validated, as the Java producer validates it; read
/// them with the getters, which are named after the properties
/// (`linger.ms` is [`linger`](Self::linger), a [`Duration`]). The
/// connection and security properties are the consumer's
/// ([`ConsumerConfig`]), with the same names, defaults and checks.
///
/// [`Producer::new`](crate::Producer::new) takes it (with a runtime
/// feature); docs/producer.md says what each property does to the
/// producer.
///
/// ```
/// use lazykafka::config::{Acks, Compression};
/// use lazykafka::ProducerConfig;
/// use std::time::Duration;
///
/// let config = ProducerConfig::builder()
///     .bootstrap_servers("kafka-1:9092,kafka-2:9092")
///     .linger(Duration::from_millis(20))
///     .compression_type(Compression::Zstd)
///     .build()?;
/// assert_eq!(config.acks(), Acks::All);
/// assert!(config.enable_idempotence());
///
/// // The same from Kafka property names...
/// let same = ProducerConfig::from_properties([
///     ("bootstrap.servers", "kafka-1:9092,kafka-2:9092"),
///     ("linger.ms", "20"),
///     ("compression.type", "zstd"),
/// ])?;
/// assert_eq!(config, same);
///
/// // ...and from a JSON (or TOML, or any serde) map.
/// let json = r#"{"bootstrap.servers": ["kafka-1:9092", "kafka-2:9092"],
///                "linger.ms": 20, "compression.type": "zstd"}"#;
/// let from_json: ProducerConfig = serde_json::from_str(json).unwrap();
/// assert_eq!(config, from_json);
/// # Ok::<(), lazykafka::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerConfig {
    /// The properties every client takes.
    common: Common,
    acks: Acks,
    enable_idempotence: bool,
    linger: Duration,
    batch_size: u32,
    compression_type: Compression,
    max_request_size: u32,
    buffer_memory: u64,
    max_block: Duration,
    delivery_timeout: Duration,
    retries: u32,
    max_in_flight_requests_per_connection: u32,
    partitioner_ignore_keys: bool,
    metadata_max_idle: Duration,
}

impl ProducerConfig {
    /// Every property name [`from_properties`](Self::from_properties)
    /// accepts under its Java name.
    ///
    /// It also takes librdkafka's names for some of them, with the same
    /// meaning: `queue.buffering.max.ms` (`linger.ms`), `compression.codec`
    /// (`compression.type`), `message.timeout.ms` (`delivery.timeout.ms`;
    /// its `0`, no timeout, is refused), `request.required.acks` (`acks`),
    /// `queue.buffering.max.kbytes` (`buffer.memory`, in KiB),
    /// `message.max.bytes` (`max.request.size`), `message.send.max.retries`
    /// (`retries`) and `sasl.mechanisms` (`sasl.mechanism`);
    /// [`to_properties`](Self::to_properties) renders the Java names.
    ///
    /// `transactional.id` is listed so that its error says why: transactions
    /// are not supported yet, and any value is refused. `client.dns.lookup`
    /// has a single accepted value, as for the consumer.
    pub const PROPERTIES: &'static [&'static str] = &[
        BOOTSTRAP_SERVERS,
        CLIENT_ID,
        ACKS,
        ENABLE_IDEMPOTENCE,
        LINGER_MS,
        BATCH_SIZE,
        COMPRESSION_TYPE,
        MAX_REQUEST_SIZE,
        BUFFER_MEMORY,
        MAX_BLOCK_MS,
        DELIVERY_TIMEOUT_MS,
        REQUEST_TIMEOUT_MS,
        RETRIES,
        MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
        PARTITIONER_IGNORE_KEYS,
        METADATA_MAX_AGE_MS,
        METADATA_MAX_IDLE_MS,
        TRANSACTIONAL_ID,
        CONNECTIONS_MAX_IDLE_MS,
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
        SASL_MECHANISM,
        SASL_USERNAME,
        SASL_PASSWORD,
        SASL_OAUTHBEARER_CONFIG,
        ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT,
    ];

    /// The properties whose values are secrets: never rendered by
    /// [`to_properties`](Self::to_properties) nor shown by `Debug`, and
    /// never quoted in an error (the consumer's, the same).
    pub const SECRET_PROPERTIES: &'static [&'static str] = super::common::SECRET_PROPERTIES;

    /// A builder with every property at its default; only
    /// `bootstrap.servers` must be set.
    ///
    /// ```
    /// use lazykafka::config::Acks;
    /// use lazykafka::ProducerConfig;
    ///
    /// let config = ProducerConfig::builder()
    ///     .bootstrap_servers("localhost:9092")
    ///     .acks(Acks::Leader)
    ///     .build()?;
    /// // Idempotence was only the default: acks=1 turns it off.
    /// assert!(!config.enable_idempotence());
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn builder() -> ProducerConfigBuilder {
        ProducerConfigBuilder::new()
    }

    /// Builds a configuration from Kafka property names and values, as a
    /// Java `.properties` file has them. Later entries override earlier
    /// ones; values are trimmed.
    ///
    /// Fails on an unknown property, an invalid value, or values that
    /// contradict each other, with [`Error::Config`] naming the property.
    ///
    /// ```
    /// use lazykafka::ProducerConfig;
    /// use std::time::Duration;
    ///
    /// let config = ProducerConfig::from_properties([
    ///     ("bootstrap.servers", "localhost:9092"),
    ///     ("queue.buffering.max.ms", "50"), // librdkafka's linger.ms
    /// ])?;
    /// assert_eq!(config.linger(), Duration::from_millis(50));
    ///
    /// let err = ProducerConfig::from_properties([
    ///     ("bootstrap.servers", "localhost:9092"),
    ///     ("linger.m", "5"),
    /// ])
    /// .unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     r#"configuration property linger.m: unknown property; did you mean "linger.ms"?"#
    /// );
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn from_properties<I, K, V>(properties: I) -> Result<ProducerConfig, Error>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        ProducerConfig::builder().set_all(properties)?.build()
    }

    /// Every property with its value, under its Java name, as strings that
    /// [`from_properties`](Self::from_properties) reads back into an equal
    /// configuration, except for the secrets
    /// ([`SECRET_PROPERTIES`](Self::SECRET_PROPERTIES)), which are left out
    /// so that the output can be logged. Unset optional properties (the
    /// `ssl.*` files and PEM texts, `sasl.mechanism`, `sasl.username`,
    /// `sasl.oauthbearer.config`) are left out too. The values are the
    /// effective ones: `enable.idempotence` is `false` when idempotence was
    /// turned off, and `delivery.timeout.ms` is raised when its default was.
    ///
    /// ```
    /// use lazykafka::ProducerConfig;
    ///
    /// let config = ProducerConfig::from_properties([
    ///     ("bootstrap.servers", "localhost:9092"),
    ///     ("acks", "1"),
    /// ])?;
    /// let listed = config.to_properties();
    /// assert!(listed.contains(&("enable.idempotence", "false".to_owned())));
    /// assert_eq!(ProducerConfig::from_properties(listed)?, config);
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn to_properties(&self) -> Vec<(&'static str, String)> {
        let ms = |d: Duration| d.as_millis().to_string();
        let mut out = Vec::with_capacity(Self::PROPERTIES.len());
        self.common.render(&mut out);
        out.extend([
            (ACKS, self.acks.to_string()),
            (ENABLE_IDEMPOTENCE, self.enable_idempotence.to_string()),
            (LINGER_MS, ms(self.linger)),
            (BATCH_SIZE, self.batch_size.to_string()),
            (COMPRESSION_TYPE, self.compression_type.to_string()),
            (MAX_REQUEST_SIZE, self.max_request_size.to_string()),
            (BUFFER_MEMORY, self.buffer_memory.to_string()),
            (MAX_BLOCK_MS, ms(self.max_block)),
            (DELIVERY_TIMEOUT_MS, ms(self.delivery_timeout)),
            (RETRIES, self.retries.to_string()),
            (
                MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
                self.max_in_flight_requests_per_connection.to_string(),
            ),
            (
                PARTITIONER_IGNORE_KEYS,
                self.partitioner_ignore_keys.to_string(),
            ),
            (METADATA_MAX_IDLE_MS, ms(self.metadata_max_idle)),
        ]);
        sort_properties(&mut out, Self::PROPERTIES);
        out
    }

    /// `acks`: how many acknowledgements a Produce request waits for
    /// (default [`Acks::All`]).
    pub fn acks(&self) -> Acks {
        self.acks
    }

    /// `enable.idempotence`: whether the producer is idempotent (KIP-98: a
    /// producer id and per-partition sequence numbers, so that a retried
    /// batch is written once and in order). On by default, as in the Java
    /// client; this is the effective value. Left at its default, it is
    /// turned off (as the Java 3.x client does) by `acks` other than `all`,
    /// `retries=0` or `max.in.flight.requests.per.connection` above 5; set
    /// to `true` explicitly, those are errors.
    pub fn enable_idempotence(&self) -> bool {
        self.enable_idempotence
    }

    /// `linger.ms`: how long a batch waits for more records before it is
    /// sent (default 5 ms). Values above 2147483647 ms are taken as
    /// 2147483647, as the Java client does.
    pub fn linger(&self) -> Duration {
        self.linger
    }

    /// `batch.size`: the most bytes of records one partition's batch holds
    /// (default 16384); a larger record goes in a batch of its own. `0`
    /// turns batching off.
    pub fn batch_size(&self) -> u32 {
        self.batch_size
    }

    /// `compression.type`: the codec record batches are compressed with
    /// (default [`Compression::None`]).
    pub fn compression_type(&self) -> Compression {
        self.compression_type
    }

    /// `max.request.size`: the largest Produce request, and so the largest
    /// record, the producer sends (default 1048576, 1 MiB).
    pub fn max_request_size(&self) -> u32 {
        self.max_request_size
    }

    /// `buffer.memory`: the bytes of records waiting to be sent the
    /// producer holds before `send` waits (default 33554432, 32 MiB).
    pub fn buffer_memory(&self) -> u64 {
        self.buffer_memory
    }

    /// `max.block.ms`: how long `send` may wait for metadata or for room in
    /// `buffer.memory` before it fails (default 60 s).
    pub fn max_block(&self) -> Duration {
        self.max_block
    }

    /// `delivery.timeout.ms`: how long after `send` a record may take to be
    /// acknowledged, retries included, before it fails (default 120 s).
    /// At least `linger.ms` + `request.timeout.ms`: set lower, it is an
    /// error; left at its default, it is raised to that sum, as in the Java
    /// client.
    pub fn delivery_timeout(&self) -> Duration {
        self.delivery_timeout
    }

    /// `retries`: how many times a failed batch is sent again, within
    /// `delivery.timeout.ms` (default 2147483647: as many as that allows).
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// `max.in.flight.requests.per.connection`: Produce requests sent on
    /// one connection before waiting for an answer (default 5; at most 5
    /// with idempotence).
    pub fn max_in_flight_requests_per_connection(&self) -> u32 {
        self.max_in_flight_requests_per_connection
    }

    /// `partitioner.ignore.keys`: place keyed records as if they had no key,
    /// with the sticky partitioner (default `false`; see
    /// [`producer::place`](crate::producer::place)).
    pub fn partitioner_ignore_keys(&self) -> bool {
        self.partitioner_ignore_keys
    }

    /// `metadata.max.idle.ms`: a topic not produced to for this long is
    /// dropped from the metadata the producer keeps (default 5 min; at
    /// least 5 s).
    pub fn metadata_max_idle(&self) -> Duration {
        self.metadata_max_idle
    }

    common_getters!(ProducerConfig);
}

impl<'de> Deserialize<'de> for ProducerConfig {
    /// Reads a map of property names to values, as
    /// [`ConsumerConfig`]'s `Deserialize` does: a value may be a string, a
    /// number, a boolean, a list of those (joined with commas), or null
    /// (the property keeps its default).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ProducerConfig::from_properties(serde_properties(deserializer)?).map_err(de::Error::custom)
    }
}

/// Builds a [`ProducerConfig`]; see [`ProducerConfig::builder`].
///
/// Typed setters take the value as the typed getters return it; their
/// values are checked by [`build`](Self::build). [`set`](Self::set) takes a
/// Kafka property name and a string value and checks its syntax at once.
#[derive(Debug, Clone)]
pub struct ProducerConfigBuilder {
    /// The properties every client takes.
    common: CommonBuilder,
    acks: Acks,
    /// `None`: the default, which incompatible settings turn off.
    enable_idempotence: Option<bool>,
    linger: Duration,
    batch_size: u32,
    compression_type: Compression,
    max_request_size: u32,
    buffer_memory: u64,
    max_block: Duration,
    /// `None`: the default, which `linger.ms` + `request.timeout.ms` raise.
    delivery_timeout: Option<Duration>,
    retries: u32,
    max_in_flight_requests_per_connection: u32,
    partitioner_ignore_keys: bool,
    metadata_max_idle: Duration,
}

impl Default for ProducerConfigBuilder {
    fn default() -> Self {
        ProducerConfigBuilder::new()
    }
}

impl ProducerConfigBuilder {
    /// Every property at its default.
    pub fn new() -> Self {
        ProducerConfigBuilder {
            common: CommonBuilder::default(),
            acks: Acks::All,
            enable_idempotence: None,
            linger: Duration::from_millis(5),
            batch_size: 16_384,
            compression_type: Compression::None,
            max_request_size: 1_048_576,
            buffer_memory: 33_554_432,
            max_block: Duration::from_millis(60_000),
            delivery_timeout: None,
            retries: i32::MAX as u32,
            max_in_flight_requests_per_connection: 5,
            partitioner_ignore_keys: false,
            metadata_max_idle: Duration::from_millis(300_000),
        }
    }

    /// Sets one property by its Kafka name (or one of the librdkafka names
    /// listed with [`ProducerConfig::PROPERTIES`]) from a string, as
    /// [`ProducerConfig::from_properties`] does. The value's syntax is
    /// checked now, and an error names the property as given; its range
    /// and its agreement with other properties are checked in
    /// [`build`](Self::build), whose errors name the Java property.
    ///
    /// ```
    /// use lazykafka::config::Compression;
    /// use lazykafka::ProducerConfig;
    ///
    /// let config = ProducerConfig::builder()
    ///     .bootstrap_servers("localhost:9092")
    ///     .set("compression.codec", "lz4")?
    ///     .build()?;
    /// assert_eq!(config.compression_type(), Compression::Lz4);
    ///
    /// let err = ProducerConfig::builder().set("transactional.id", "tx-1").unwrap_err();
    /// assert!(err.to_string().contains("transactions are not supported"));
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn set(self, property: &str, value: &str) -> Result<Self, Error> {
        if super::librdkafka::only_librdkafka(property, value, false)? {
            return Ok(self);
        }
        let known = super::librdkafka::canonical(property, false);
        self.set_known(known, value)
            .map_err(|e| super::librdkafka::as_written(e, property, known))
    }

    /// [`set`](Self::set) for a property by the name this crate knows it.
    fn set_known(mut self, property: &str, value: &str) -> Result<Self, Error> {
        let p = property;
        let v = value.trim();
        match property {
            ACKS | REQUEST_REQUIRED_ACKS => self.acks = parse_acks(p, v)?,
            ENABLE_IDEMPOTENCE => self.enable_idempotence = Some(parse_bool(p, v)?),
            LINGER_MS | QUEUE_BUFFERING_MAX_MS => self.linger = parse_ms(p, v)?,
            BATCH_SIZE => self.batch_size = parse_u32(p, v)?,
            COMPRESSION_TYPE | COMPRESSION_CODEC => {
                self.compression_type = parse_compression(p, v)?
            }
            MAX_REQUEST_SIZE | MESSAGE_MAX_BYTES => self.max_request_size = parse_u32(p, v)?,
            BUFFER_MEMORY => self.buffer_memory = parse_integer(p, v)?,
            QUEUE_BUFFERING_MAX_KBYTES => {
                self.buffer_memory = parse_integer(p, v)?
                    .checked_mul(1024)
                    .ok_or_else(|| invalid(p, v, "too large"))?
            }
            MAX_BLOCK_MS => self.max_block = parse_ms(p, v)?,
            DELIVERY_TIMEOUT_MS => self.delivery_timeout = Some(parse_ms(p, v)?),
            MESSAGE_TIMEOUT_MS => {
                let timeout = parse_ms(p, v)?;
                if timeout.is_zero() {
                    return Err(invalid(
                        p,
                        v,
                        format!(
                            "librdkafka's 0 (no timeout) has no equivalent: \
                             {DELIVERY_TIMEOUT_MS} is at most {INT_MAX}"
                        ),
                    ));
                }
                self.delivery_timeout = Some(timeout);
            }
            RETRIES | MESSAGE_SEND_MAX_RETRIES => self.retries = parse_u32(p, v)?,
            MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION => {
                self.max_in_flight_requests_per_connection = parse_u32(p, v)?
            }
            PARTITIONER_IGNORE_KEYS => self.partitioner_ignore_keys = parse_bool(p, v)?,
            METADATA_MAX_IDLE_MS => self.metadata_max_idle = parse_ms(p, v)?,
            TRANSACTIONAL_ID => {
                return Err(config_error(
                    p,
                    "transactions are not supported yet; leave transactional.id unset \
                     (enable.idempotence gives an idempotent producer without one)",
                ))
            }
            _ => match self.common.set(property, value) {
                Some(result) => result?,
                None => return Err(unknown_producer_property(property)),
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

    /// `acks`. Other than [`Acks::All`], it turns default idempotence off,
    /// and is an error with `enable_idempotence(true)`.
    pub fn acks(mut self, acks: Acks) -> Self {
        self.acks = acks;
        self
    }

    /// `enable.idempotence`. Set to `true`, the settings it needs (`acks`
    /// all, `retries` above 0, at most 5 requests in flight) are checked;
    /// left unset, settings that contradict it turn it off.
    pub fn enable_idempotence(mut self, enable: bool) -> Self {
        self.enable_idempotence = Some(enable);
        self
    }

    /// `linger.ms`.
    pub fn linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// `batch.size`; at most 2147483647.
    pub fn batch_size(mut self, bytes: u32) -> Self {
        self.batch_size = bytes;
        self
    }

    /// `compression.type`; the codec's cargo feature must be built.
    pub fn compression_type(mut self, compression: Compression) -> Self {
        self.compression_type = compression;
        self
    }

    /// `max.request.size`; at most 2147483647.
    pub fn max_request_size(mut self, bytes: u32) -> Self {
        self.max_request_size = bytes;
        self
    }

    /// `buffer.memory`; at most 9223372036854775807.
    pub fn buffer_memory(mut self, bytes: u64) -> Self {
        self.buffer_memory = bytes;
        self
    }

    /// `max.block.ms`.
    pub fn max_block(mut self, max_block: Duration) -> Self {
        self.max_block = max_block;
        self
    }

    /// `delivery.timeout.ms`; at least `linger.ms` + `request.timeout.ms`.
    pub fn delivery_timeout(mut self, timeout: Duration) -> Self {
        self.delivery_timeout = Some(timeout);
        self
    }

    /// `retries`; at most 2147483647. `0` turns default idempotence off,
    /// and is an error with `enable_idempotence(true)`.
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// `max.in.flight.requests.per.connection`; at least 1. Above 5, it
    /// turns default idempotence off, and is an error with
    /// `enable_idempotence(true)`.
    pub fn max_in_flight_requests_per_connection(mut self, requests: u32) -> Self {
        self.max_in_flight_requests_per_connection = requests;
        self
    }

    /// `partitioner.ignore.keys`.
    pub fn partitioner_ignore_keys(mut self, ignore: bool) -> Self {
        self.partitioner_ignore_keys = ignore;
        self
    }

    /// `metadata.max.idle.ms`; at least 5 s.
    pub fn metadata_max_idle(mut self, idle: Duration) -> Self {
        self.metadata_max_idle = idle;
        self
    }

    common_setters!(ProducerConfig);

    /// Checks every value and how they agree, as the Java producer does,
    /// and returns the configuration; an [`Error::Config`] names the first
    /// property that is wrong.
    pub fn build(self) -> Result<ProducerConfig, Error> {
        let b = self;
        let common = b.common.build("ProducerConfigBuilder")?;

        check_ms(LINGER_MS, b.linger, 0, i64::MAX as u64)?;
        check_int(BATCH_SIZE, b.batch_size, 0)?;
        check_int(MAX_REQUEST_SIZE, b.max_request_size, 0)?;
        if b.buffer_memory > i64::MAX as u64 {
            return Err(invalid(
                BUFFER_MEMORY,
                b.buffer_memory,
                format!("must be at most {}", i64::MAX),
            ));
        }
        check_ms(MAX_BLOCK_MS, b.max_block, 0, i64::MAX as u64)?;
        if let Some(timeout) = b.delivery_timeout {
            check_ms(DELIVERY_TIMEOUT_MS, timeout, 0, INT_MAX)?;
        }
        check_int(RETRIES, b.retries, 0)?;
        check_int(
            MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
            b.max_in_flight_requests_per_connection,
            1,
        )?;
        check_ms(
            METADATA_MAX_IDLE_MS,
            b.metadata_max_idle,
            METADATA_MAX_IDLE_MIN_MS,
            i64::MAX as u64,
        )?;
        if !b.compression_type.is_enabled() {
            return Err(invalid(
                COMPRESSION_TYPE,
                b.compression_type,
                format!(
                    "this build lacks the cargo feature {:?}",
                    b.compression_type.name()
                ),
            ));
        }

        // Java's ProducerConfig.postProcessAndValidateIdempotenceConfigs
        // (3.x): what idempotence needs, in its order. Asked for
        // explicitly, a setting against it is an error naming that
        // setting; left at its default, idempotence is turned off.
        let mut enable_idempotence = b.enable_idempotence.unwrap_or(true);
        if enable_idempotence {
            let requirements = [
                (
                    RETRIES,
                    b.retries.to_string(),
                    b.retries > 0,
                    "must not be 0 for the idempotent producer, which retries",
                ),
                (
                    ACKS,
                    b.acks.to_string(),
                    b.acks == Acks::All,
                    "must be all for the idempotent producer: only then is a batch \
                     written by every in-sync replica before it is acknowledged",
                ),
                (
                    MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
                    b.max_in_flight_requests_per_connection.to_string(),
                    b.max_in_flight_requests_per_connection <= MAX_IN_FLIGHT_FOR_IDEMPOTENCE,
                    "must be at most 5 for the idempotent producer: brokers keep the \
                     sequence numbers of a producer's last 5 batches per partition",
                ),
            ];
            for (property, value, holds, why) in requirements {
                if holds {
                    continue;
                }
                if b.enable_idempotence == Some(true) {
                    return Err(invalid(
                        property,
                        value,
                        format!(
                            "{why}; {ENABLE_IDEMPOTENCE} is set to true (set it to false to \
                             allow this)"
                        ),
                    ));
                }
                log::info!("{ENABLE_IDEMPOTENCE} is turned off because {property} is {value}");
                enable_idempotence = false;
            }
        }

        // Java's KafkaProducer.configureDeliveryTimeout: a record must be
        // given the time to linger and for one request.
        let linger = b.linger.min(Duration::from_millis(INT_MAX));
        let floor = Duration::from_millis(
            (linger.as_millis() + common.request_timeout.as_millis()).min(u128::from(INT_MAX))
                as u64,
        );
        let delivery_timeout = match b.delivery_timeout {
            Some(timeout) => {
                if timeout.as_millis() < floor.as_millis() {
                    return Err(invalid(
                        DELIVERY_TIMEOUT_MS,
                        timeout.as_millis(),
                        format!(
                            "must be at least {LINGER_MS} + {REQUEST_TIMEOUT_MS} ({} + {})",
                            linger.as_millis(),
                            common.request_timeout.as_millis()
                        ),
                    ));
                }
                timeout
            }
            None => DEFAULT_DELIVERY_TIMEOUT.max(floor),
        };

        Ok(ProducerConfig {
            common,
            acks: b.acks,
            enable_idempotence,
            linger,
            batch_size: b.batch_size,
            compression_type: b.compression_type,
            max_request_size: b.max_request_size,
            buffer_memory: b.buffer_memory,
            max_block: b.max_block,
            delivery_timeout,
            retries: b.retries,
            max_in_flight_requests_per_connection: b.max_in_flight_requests_per_connection,
            partitioner_ignore_keys: b.partitioner_ignore_keys,
            metadata_max_idle: b.metadata_max_idle,
        })
    }
}

/// The error for a property the producer does not know.
fn unknown_producer_property(property: &str) -> Error {
    const SERIALIZERS: &str = "records are given as bytes; serialize them in the application";
    const LEVELS: &str = "compression levels are not configurable: each codec compresses at a \
                          fixed level (zstd's is 3, the Java client's default)";
    if ConsumerConfig::PROPERTIES.contains(&property) {
        return config_error(property, "a consumer property; a producer does not take it");
    }
    unknown_property(
        property,
        ProducerConfig::PROPERTIES,
        &[],
        &[
            ("key.serializer", SERIALIZERS),
            ("value.serializer", SERIALIZERS),
            (
                "transaction.timeout.ms",
                "transactions are not supported yet",
            ),
            ("compression.gzip.level", LEVELS),
            ("compression.lz4.level", LEVELS),
            ("compression.zstd.level", LEVELS),
            (
                "partitioner.class",
                "no class is loaded: a custom partitioner implements \
                 lazykafka::producer::Partitioner",
            ),
        ],
    )
}
