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
use std::str::FromStr;

mod common;
mod consumer;
mod librdkafka;
mod producer;
mod security;
mod table;
mod values;

pub use crate::records::Compression;
use common::{
    BOOTSTRAP_SERVERS, CLIENT_RUNTIME, METADATA_RECOVERY_STRATEGY, SECURITY_PROTOCOL,
    SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
};
pub use consumer::{ConsumerConfig, ConsumerConfigBuilder};
use consumer::{AUTO_OFFSET_RESET, ISOLATION_LEVEL};
pub use producer::{Acks, ProducerConfig, ProducerConfigBuilder};
use values::{config_error, invalid};

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

/// What a client does when the brokers it knows can no longer give it
/// metadata (`metadata.recovery.strategy`, KIP-899).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum MetadataRecoveryStrategy {
    /// Go back to the bootstrap addresses (resolved again) when no known
    /// broker can be reached, when a broker answers REBOOTSTRAP_REQUIRED
    /// (KIP-1102), or when no metadata came for
    /// `metadata.recovery.rebootstrap.trigger.ms` (`rebootstrap`, the
    /// default, as in the Java client 4.x).
    #[default]
    Rebootstrap,
    /// Once the cluster is known, ask only the brokers of the last
    /// metadata, never the bootstrap addresses again (`none`).
    None,
}

impl MetadataRecoveryStrategy {
    /// The property value: `rebootstrap` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            MetadataRecoveryStrategy::Rebootstrap => "rebootstrap",
            MetadataRecoveryStrategy::None => "none",
        }
    }
}

impl fmt::Display for MetadataRecoveryStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MetadataRecoveryStrategy {
    type Err = Error;

    /// Parses `rebootstrap` or `none` (any case).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "rebootstrap" => Ok(MetadataRecoveryStrategy::Rebootstrap),
            "none" => Ok(MetadataRecoveryStrategy::None),
            _ => Err(invalid(
                METADATA_RECOVERY_STRATEGY,
                s,
                "expected rebootstrap or none",
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

/// The error for a property a client does not know, with a hint when the
/// name is a known one's misspelling, librdkafka's name for one (the
/// shared [`common::ALIASES`] and the client's `aliases`), or a Java
/// property this client deliberately lacks (`refused`, with the reason).
/// A property of the other client (`owner`'s) given to this one
/// (`client`): accepted and ignored, with one `warn` line naming it, as the
/// Java client ("supplied but isn't a known config") and librdkafka do,
/// so that one property map serves both clients.
fn other_clients_property(property: &str, owner: &str, client: &str) {
    log::warn!("configuration property {property}: a {owner} property; the {client} ignores it");
}

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
