//! The producer's configuration: its own properties, with the Java
//! producer's names, defaults and checks (`ProducerConfig` and
//! `KafkaProducer` in apache/kafka's
//! `clients/src/main/java/org/apache/kafka/clients/producer/`), and the
//! properties every client takes ([`super::common`]).

mod properties;

use super::common::{
    common_getters, common_setters, common_table, sort_properties, Common, CommonBuilder,
    ALLOW_AUTO_CREATE_TOPICS, BOOTSTRAP_SERVERS, CLIENT_DNS_LOOKUP, CLIENT_ID, CLIENT_RUNTIME,
    CONNECTIONS_MAX_IDLE_MS, ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT,
    ENABLE_SSL_CERTIFICATE_VERIFICATION, METADATA_MAX_AGE_MS,
    METADATA_RECOVERY_REBOOTSTRAP_TRIGGER_MS, METADATA_RECOVERY_STRATEGY, RECONNECT_BACKOFF_MAX_MS,
    RECONNECT_BACKOFF_MS, REQUEST_TIMEOUT_MS, RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS,
    SASL_MECHANISM, SASL_OAUTHBEARER_CONFIG, SASL_PASSWORD, SASL_USERNAME, SECURITY_PROTOCOL,
    SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS, SOCKET_CONNECTION_SETUP_TIMEOUT_MS,
    SOCKET_KEEPALIVE_ENABLE, SSL_CA_LOCATION, SSL_CA_PEM, SSL_CERTIFICATE_LOCATION,
    SSL_CERTIFICATE_PEM, SSL_ENDPOINT_IDENTIFICATION_ALGORITHM, SSL_KEY_LOCATION, SSL_KEY_PASSWORD,
    SSL_KEY_PEM, STATISTICS_INTERVAL_MS, TOPIC_METADATA_PROPAGATION_MAX_MS,
};
use super::table::{property_getters, property_setters, property_values};
use super::values::{
    config_error, invalid, ms, optional, parse_bool, parse_integer, parse_ms, parse_u32, shown,
    INT_MAX, LONG_MAX,
};
use super::{
    serde_properties, unknown_property, BrokerAddress, ClientRuntime, Compression, ConsumerConfig,
    EndpointIdentification, MetadataRecoveryStrategy, SecurityProtocol,
};
use crate::error::Error;
use crate::producer::BuiltinPartitioner;
use crate::sasl::Secret;
use properties::producer_table;
use serde::de::{self, Deserialize, Deserializer};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

// librdkafka's names for some of the producer's properties: the table's
// `also` reads five of them as the Java property; the last two are read by
// `ProducerConfigBuilder::set_known`.
const REQUEST_REQUIRED_ACKS: &str = "request.required.acks";
const QUEUE_BUFFERING_MAX_MS: &str = "queue.buffering.max.ms";
const COMPRESSION_CODEC: &str = "compression.codec";
const MESSAGE_MAX_BYTES: &str = "message.max.bytes";
const MESSAGE_SEND_MAX_RETRIES: &str = "message.send.max.retries";
const QUEUE_BUFFERING_MAX_KBYTES: &str = "queue.buffering.max.kbytes";
const MESSAGE_TIMEOUT_MS: &str = "message.timeout.ms";

/// librdkafka's names of producer-only properties (beside the Java ones in
/// [`ProducerConfig::PROPERTIES`]): a consumer given one ignores it.
const LIBRDKAFKA_PRODUCER_NAMES: &[&str] = &[
    REQUEST_REQUIRED_ACKS,
    QUEUE_BUFFERING_MAX_MS,
    COMPRESSION_CODEC,
    MESSAGE_SEND_MAX_RETRIES,
    QUEUE_BUFFERING_MAX_KBYTES,
    MESSAGE_TIMEOUT_MS,
];

/// Whether `property` is the producer's and not the consumer's (a Java or
/// a librdkafka name): one property map for both clients works, as in
/// Java and librdkafka.
pub(super) fn producer_only(property: &str) -> bool {
    (ProducerConfig::PROPERTIES.contains(&property)
        && !ConsumerConfig::PROPERTIES.contains(&property))
        || LIBRDKAFKA_PRODUCER_NAMES.contains(&property)
}

/// The most batches a broker keeps the sequence numbers of, per producer
/// and partition: more requests in flight than this cannot be idempotent
/// (Java's `MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE`).
const MAX_IN_FLIGHT_FOR_IDEMPOTENCE: u32 = 5;
const DEFAULT_DELIVERY_TIMEOUT: Duration = Duration::from_millis(120_000);
/// Java's lower bound for `metadata.max.idle.ms`.
const METADATA_MAX_IDLE_MIN_MS: u64 = 5_000;

producer_table!(property_values! {
    /// The producer's own properties as set, before they are checked.
    #[derive(Debug, Clone)]
    pub(super) builder OwnPropertiesBuilder;
    /// The producer's own properties, checked.
    #[derive(Debug, Clone, PartialEq, Eq)]
    values OwnProperties;
    computed Computed;
    extra {}
});

/// The producer's values [`ProducerConfigBuilder::build`] computes from
/// several properties.
pub(in crate::config) struct Computed {
    enable_idempotence: bool,
    linger: Duration,
    delivery_timeout: Duration,
}

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

fn parse_partitioner(property: &str, s: &str) -> Result<BuiltinPartitioner, Error> {
    BuiltinPartitioner::from_name(s).ok_or_else(|| {
        invalid(
            property,
            s,
            "expected murmur2_random, murmur2, consistent_random, consistent, fnv1a_random, fnv1a or random",
        )
    })
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
    /// The producer's own.
    own: OwnProperties,
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
        PARTITIONER,
        STICKY_PARTITIONING_LINGER_MS,
        METADATA_MAX_AGE_MS,
        TOPIC_METADATA_PROPAGATION_MAX_MS,
        ALLOW_AUTO_CREATE_TOPICS,
        METADATA_RECOVERY_STRATEGY,
        METADATA_RECOVERY_REBOOTSTRAP_TRIGGER_MS,
        METADATA_MAX_IDLE_MS,
        STATISTICS_INTERVAL_MS,
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
        let mut out = Vec::with_capacity(Self::PROPERTIES.len());
        self.common.render_all(&mut out);
        self.own.render(&mut out);
        sort_properties(&mut out, Self::PROPERTIES);
        out
    }

    producer_table!(property_getters! { own; });
    common_table!(property_getters! { common; });
    common_getters!();
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
    /// The producer's own.
    own: OwnPropertiesBuilder,
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
            own: OwnPropertiesBuilder::default(),
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
        if super::librdkafka::only_librdkafka(property, value)? {
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
            QUEUE_BUFFERING_MAX_KBYTES => {
                self.own.buffer_memory = parse_integer(p, v)?
                    .checked_mul(1024)
                    .ok_or_else(|| invalid(p, v, "too large"))?
            }
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
                self.own.delivery_timeout = Some(timeout);
            }
            TRANSACTIONAL_ID => {
                return Err(config_error(
                    p,
                    "transactions are not supported yet; leave transactional.id unset \
                     (enable.idempotence gives an idempotent producer without one)",
                ))
            }
            _ => match self.own.parse(property, value) {
                Some(result) => result?,
                None => match self.common.set(property, value) {
                    Some(result) => result?,
                    None if super::consumer::consumer_only(property) => {
                        super::other_clients_property(property, "consumer", "producer")
                    }
                    None => return Err(unknown_producer_property(property)),
                },
            },
        }
        Ok(self)
    }

    /// Notes that a property was set by a typed setter: the producer has
    /// no use for it (the consumer's builder has).
    fn on_set(&mut self, _property: &str) {}

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

    producer_table!(property_setters! { own; });
    common_table!(property_setters! { common; });
    common_setters!(ProducerConfig);

    /// Checks every value and how they agree, as the Java producer does,
    /// and returns the configuration; an [`Error::Config`] names the first
    /// property that is wrong.
    pub fn build(self) -> Result<ProducerConfig, Error> {
        let common = self.common.build("ProducerConfigBuilder")?;
        self.own.check_each()?;
        let computed = Computed {
            enable_idempotence: self.own.enable_idempotence()?,
            linger: self.own.linger.min(Duration::from_millis(INT_MAX)),
            delivery_timeout: self.own.delivery_timeout(&common)?,
        };
        Ok(ProducerConfig {
            common,
            own: self.own.into_values(computed),
        })
    }
}

impl OwnPropertiesBuilder {
    /// Whether the producer is idempotent.
    fn enable_idempotence(&self) -> Result<bool, Error> {
        let b = self;
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

        Ok(enable_idempotence)
    }

    /// `delivery.timeout.ms`, raised or checked against the time a record
    /// needs.
    fn delivery_timeout(&self, common: &Common) -> Result<Duration, Error> {
        let b = self;
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

        Ok(delivery_timeout)
    }
}

fn check_buffer_memory(property: &str, bytes: &u64) -> Result<(), Error> {
    if *bytes > LONG_MAX {
        return Err(invalid(
            property,
            bytes,
            format!("must be at most {}", i64::MAX),
        ));
    }
    Ok(())
}

fn check_codec_built(property: &str, codec: &Compression) -> Result<(), Error> {
    if !codec.is_enabled() {
        return Err(invalid(
            property,
            codec,
            format!("this build lacks the cargo feature {:?}", codec.name()),
        ));
    }
    Ok(())
}

/// The error for a property the producer does not know.
fn unknown_producer_property(property: &str) -> Error {
    const SERIALIZERS: &str = "records are given as bytes; serialize them in the application";
    const LEVELS: &str = "compression levels are not configurable: each codec compresses at a \
                          fixed level (zstd's is 3, the Java client's default)";
    // A misspelt consumer property is named too: one map may serve both.
    let known: Vec<&str> = ProducerConfig::PROPERTIES
        .iter()
        .chain(ConsumerConfig::PROPERTIES)
        .copied()
        .collect();
    unknown_property(
        property,
        &known,
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
