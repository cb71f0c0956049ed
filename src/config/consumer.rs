//! The consumer's configuration: [`ConsumerConfig`] and its builder. The
//! consumer's own properties are a table ([`properties`]), the properties
//! every client takes another ([`super::common`]); this module says how
//! the values agree ([`ConsumerConfigBuilder::build`]), reads properties
//! by name (with librdkafka's names, [`super::librdkafka`]) and lists them
//! back.

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
    comma_list, config_error, invalid, ms, optional, parse_bool, parse_ms, parse_strategies,
    parse_u32, parsed, shown, shown_if_set, some_text, text_or_none, INT_MAX,
};
use super::{
    librdkafka, serde_properties, unknown_property, AssignmentStrategy, BrokerAddress,
    ClientRuntime, EndpointIdentification, GroupProtocol, IsolationLevel, MetadataRecoveryStrategy,
    OffsetReset, RebalanceProtocol, RemoteAssignor, SecurityProtocol,
};
use crate::error::Error;
use crate::sasl::Secret;
use properties::consumer_table;
use serde::de::{self, Deserialize, Deserializer};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Properties of the classic protocol only: under `group.protocol=consumer`
/// the coordinator owns the session timeout, the heartbeat interval and the
/// assignment (KIP-848).
const CLASSIC_ONLY: [&str; 3] = [
    SESSION_TIMEOUT_MS,
    HEARTBEAT_INTERVAL_MS,
    PARTITION_ASSIGNMENT_STRATEGY,
];
/// librdkafka's lower bound for `receive.message.max.bytes`.
const RECEIVE_MESSAGE_MIN: u32 = 1000;
/// librdkafka's margin between `fetch.max.bytes` and
/// `receive.message.max.bytes`, for the response's own headers.
const FETCH_RESPONSE_OVERHEAD: u32 = 512;

/// 100 MiB, the frame limit of [`crate::protocol::DEFAULT_MAX_FRAME_SIZE`].
const DEFAULT_RECEIVE_MESSAGE_MAX_BYTES: u32 = 100 * 1024 * 1024;

consumer_table!(property_values! {
    /// The consumer's own properties as set, before they are checked.
    #[derive(Debug, Clone)]
    pub(super) builder OwnPropertiesBuilder;
    /// The consumer's own properties, checked.
    #[derive(Debug, Clone, PartialEq, Eq)]
    values OwnProperties;
    computed Computed;
    extra {}
});

/// The consumer's values [`ConsumerConfigBuilder::build`] computes from
/// several properties.
pub(in crate::config) struct Computed {
    enable_auto_commit: bool,
    receive_message_max_bytes: u32,
}

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
    /// The consumer's own.
    own: OwnProperties,
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
        METADATA_RECOVERY_STRATEGY,
        METADATA_RECOVERY_REBOOTSTRAP_TRIGGER_MS,
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
    pub const SECRET_PROPERTIES: &'static [&'static str] = super::common::SECRET_PROPERTIES;

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
        let mut out = Vec::with_capacity(Self::PROPERTIES.len());
        self.common.render_all(&mut out);
        self.own.render(&mut out);
        sort_properties(&mut out, Self::PROPERTIES);
        if self.own.group_protocol == GroupProtocol::Consumer {
            // Not part of the consumer protocol: setting them there is an
            // error, so they are left out to read back.
            out.retain(|(k, _)| !CLASSIC_ONLY.contains(k));
        }
        out
    }

    /// The rebalance protocol the assignment strategies allow: cooperative
    /// only when every listed strategy is cooperative (see
    /// [`RebalanceProtocol::for_strategies`]).
    pub fn rebalance_protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::for_strategies(&self.own.partition_assignment_strategy)
    }

    consumer_table!(property_getters! { own; });
    common_table!(property_getters! { common; });
    common_getters!();
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

/// Builds a [`ConsumerConfig`]; see [`ConsumerConfig::builder`].
///
/// Typed setters take the value as the typed getters return it; their
/// values are checked by [`build`](Self::build). [`set`](Self::set) takes a
/// Kafka property name and a string value and checks its syntax at once.
#[derive(Debug, Clone)]
pub struct ConsumerConfigBuilder {
    /// The properties every client takes.
    common: CommonBuilder,
    /// The consumer's own.
    own: OwnPropertiesBuilder,
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
            own: OwnPropertiesBuilder::default(),
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
        if librdkafka::only_librdkafka(property, value)? {
            return Ok(self);
        }
        let known = librdkafka::canonical(property, true);
        self.set_known(known, value)
            .map_err(|e| librdkafka::as_written(e, property, known))
    }
    /// [`set`](Self::set) for a property by the name this crate knows it.
    fn set_known(mut self, property: &str, value: &str) -> Result<Self, Error> {
        let result = match self.own.parse(property, value) {
            Some(result) => result,
            None => match self.common.set(property, value) {
                Some(result) => result,
                None if super::producer::producer_only(property) => {
                    super::other_clients_property(property, "producer", "consumer");
                    Ok(())
                }
                None => return Err(unknown_consumer_property(property)),
            },
        };
        result?;
        self.on_set(property);
        Ok(self)
    }

    /// Notes that `property` was set (by name or by a typed setter): a
    /// classic-only one is then refused under `group.protocol=consumer`.
    fn on_set(&mut self, property: &str) {
        if let Some(classic_only) = CLASSIC_ONLY.iter().find(|p| **p == property) {
            if !self.explicit.contains(classic_only) {
                self.explicit.push(classic_only);
            }
        }
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

    consumer_table!(property_setters! { own; });
    common_table!(property_setters! { common; });
    common_setters!(ConsumerConfig);

    /// Checks every value and how they agree, and returns the
    /// configuration; an [`Error::Config`] names the first property that is
    /// wrong.
    pub fn build(self) -> Result<ConsumerConfig, Error> {
        // The shared properties first (bootstrap.servers, then the
        // connections and security), the consumer's own after: each on its
        // own, then how they agree.
        let common = self.common.build("ConsumerConfigBuilder")?;
        let b = &self.own;
        b.check_each()?;
        if let (Some(id), None) = (&b.group_instance_id, &b.group_id) {
            return Err(invalid(
                GROUP_INSTANCE_ID,
                id,
                "static membership needs a group.id",
            ));
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
        b.check_group_protocol(&self.explicit)?;
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
        let computed = Computed {
            enable_auto_commit,
            receive_message_max_bytes: b.receive_limit()?,
        };
        Ok(ConsumerConfig {
            common,
            own: self.own.into_values(computed),
        })
    }
}

impl OwnPropertiesBuilder {
    /// Java's ConsumerConfig rule: a property of one group protocol set
    /// under the other is a mistake worth saying, not something to ignore.
    fn check_group_protocol(&self, explicit: &[&str]) -> Result<(), Error> {
        match self.group_protocol {
            GroupProtocol::Consumer => {
                if let Some(property) = CLASSIC_ONLY.iter().find(|p| explicit.contains(p)) {
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
                if let Some(assignor) = self.group_remote_assignor {
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
        Ok(())
    }

    /// librdkafka's rule: a whole Fetch response must fit in a frame.
    /// Unset, the limit grows to fit; set, it must be large enough.
    fn receive_limit(&self) -> Result<u32, Error> {
        let b = self;
        let fetch_frame = b.fetch_max_bytes.saturating_add(FETCH_RESPONSE_OVERHEAD);
        match b.receive_message_max_bytes {
            None => Ok(DEFAULT_RECEIVE_MESSAGE_MAX_BYTES.max(fetch_frame)),
            Some(limit) if limit < fetch_frame => Err(invalid(
                RECEIVE_MESSAGE_MAX_BYTES,
                limit,
                format!(
                    "must be at least {FETCH_MAX_BYTES} ({}) + {FETCH_RESPONSE_OVERHEAD}",
                    b.fetch_max_bytes
                ),
            )),
            Some(limit) => Ok(limit),
        }
    }
}

// ---------------------------------------------------------------------------
// The table's readers and checks particular to the consumer

fn parse_group_protocol(property: &str, v: &str) -> Result<GroupProtocol, Error> {
    v.parse()
        .map_err(|()| invalid(property, v, "expected classic or consumer"))
}

/// Java's default is null; "" reads as unset, as for client.rack.
fn parse_remote_assignor(property: &str, v: &str) -> Result<Option<RemoteAssignor>, Error> {
    if v.is_empty() {
        return Ok(None);
    }
    v.parse()
        .map(Some)
        .map_err(|()| invalid(property, v, "expected uniform or range"))
}

fn check_group_id(property: &str, id: &Option<String>) -> Result<(), Error> {
    if id.as_deref() == Some("") {
        return Err(config_error(
            property,
            "must not be empty; leave it unset for a consumer without a group",
        ));
    }
    Ok(())
}

fn check_group_instance_id(_: &str, id: &Option<String>) -> Result<(), Error> {
    id.as_deref().map_or(Ok(()), validate_group_instance_id)
}

fn check_strategies(property: &str, strategies: &[AssignmentStrategy]) -> Result<(), Error> {
    if strategies.is_empty() {
        return Err(config_error(property, "must name at least one assignor"));
    }
    for (i, s) in strategies.iter().enumerate() {
        if strategies[..i].contains(s) {
            return Err(config_error(property, format!("{s} is listed twice")));
        }
    }
    Ok(())
}

fn check_receive_limit(property: &str, limit: &Option<u32>) -> Result<(), Error> {
    match *limit {
        Some(limit) if !(u64::from(RECEIVE_MESSAGE_MIN)..=INT_MAX).contains(&u64::from(limit)) => {
            Err(invalid(
                property,
                limit,
                format!("must be from {RECEIVE_MESSAGE_MIN} to {INT_MAX}"),
            ))
        }
        _ => Ok(()),
    }
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

/// The error for a property the consumer does not know.
/// Whether `property` is the consumer's and not the producer's (a Java or
/// a librdkafka name): a producer given one ignores it.
pub(super) fn consumer_only(property: &str) -> bool {
    (ConsumerConfig::PROPERTIES.contains(&property)
        && !super::ProducerConfig::PROPERTIES.contains(&property))
        || librdkafka::CONSUMER_ALIASES
            .iter()
            .any(|(alias, _)| *alias == property)
}

fn unknown_consumer_property(property: &str) -> Error {
    const DESERIALIZERS: &str =
        "records are handed out as bytes; deserialize them in the application";
    // A misspelt producer property is named too: one map may serve both.
    let known: Vec<&str> = ConsumerConfig::PROPERTIES
        .iter()
        .chain(super::ProducerConfig::PROPERTIES)
        .copied()
        .collect();
    unknown_property(
        property,
        &known,
        librdkafka::CONSUMER_ALIASES,
        &[
            ("key.deserializer", DESERIALIZERS),
            ("value.deserializer", DESERIALIZERS),
        ],
    )
}
