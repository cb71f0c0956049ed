//! librdkafka's property names, as a configuration map moved over from a
//! librdkafka client has them: names for properties this crate has under
//! their Java name are read as that property, and librdkafka's own
//! properties are accepted where their value changes nothing here and
//! otherwise refused with what to use instead (docs/configuration.md,
//! "librdkafka's names").

use super::consumer::{ENABLE_AUTO_COMMIT, FETCH_MAX_WAIT_MS, MAX_PARTITION_FETCH_BYTES};
use super::{common, values::invalid};
use crate::error::Error;

/// librdkafka's names for consumer properties (besides the shared ones,
/// [`common::ALIASES`]).
pub(super) const CONSUMER_ALIASES: &[(&str, &str)] = &[
    ("fetch.wait.max.ms", FETCH_MAX_WAIT_MS),
    ("fetch.message.max.bytes", MAX_PARTITION_FETCH_BYTES),
    ("auto.commit.enable", ENABLE_AUTO_COMMIT),
];

/// The property `property` names: itself, or the one it is librdkafka's
/// name for (`consumer`: the consumer's names too).
pub(super) fn canonical(property: &str, consumer: bool) -> &str {
    let consumer_aliases: &[(&'static str, &'static str)] =
        if consumer { CONSUMER_ALIASES } else { &[] };
    common::ALIASES
        .iter()
        .chain(consumer_aliases)
        .find(|(alias, _)| *alias == property)
        .map_or(property, |(_, known)| known)
}

/// For librdkafka's own properties: `Ok(true)` when `value` is accepted
/// (it asks for what this crate does anyway), an error saying what to use
/// instead when it is not; `Ok(false)` for any other property.
pub(super) fn only_librdkafka(property: &str, value: &str) -> Result<bool, Error> {
    let v = value.trim();
    let p = property;
    let is = |want: &str| v.eq_ignore_ascii_case(want);
    match property {
        // Logging goes through the `log` facade: its filter decides.
        "debug" => Ok(true),
        "api.version.request" if is("true") => Ok(true),
        "api.version.request" => Err(invalid(
            p,
            v,
            "ApiVersions is always asked (brokers before Kafka 0.10 are not supported)",
        )),
        "broker.address.family" if is("any") => Ok(true),
        "broker.address.family" => Err(invalid(
            p,
            v,
            "every address a broker's name resolves to is tried in turn; to use one family, \
             give its addresses in bootstrap.servers",
        )),
        _ => Ok(false),
    }
}

/// An error `set` gave for `known`, the property librdkafka's `alias`
/// names, told as for `alias` (the name the application wrote).
pub(super) fn as_written(e: Error, alias: &str, known: &str) -> Error {
    match e {
        Error::Config { property, reason } if alias != known && property == known => {
            Error::Config {
                property: alias.to_owned(),
                reason: format!("{reason} (read as {known})"),
            }
        }
        e => e,
    }
}
