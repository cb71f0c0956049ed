//! The pieces the property tables are made of: how a value is read from
//! its text (`parse_*`, and the small readers below, all
//! `fn(property, value) -> Result<T, Error>`), how it is checked on its own
//! (`check_*`: `fn(property, &T) -> Result<(), Error>` or a range), how it
//! is rendered by `to_properties` (`fn(&T) -> Option<String>`), and the
//! errors they give.

use super::{AssignmentStrategy, BrokerAddress};
use crate::error::Error;
use crate::sasl::Secret;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// The largest value of a property sent in an `int32` field or kept in a
/// Java `int`.
pub(super) const INT_MAX: u64 = i32::MAX as u64;
/// The largest value of a property kept in a Java `long`.
pub(super) const LONG_MAX: u64 = i64::MAX as u64;

// ---------------------------------------------------------------------------
// Errors

pub(super) fn config_error(property: &str, reason: impl Into<String>) -> Error {
    Error::Config {
        property: property.to_owned(),
        reason: reason.into(),
    }
}

pub(super) fn invalid(property: &str, value: impl fmt::Display, why: impl fmt::Display) -> Error {
    config_error(
        property,
        format!("invalid value {:?}: {why}", value.to_string()),
    )
}

// ---------------------------------------------------------------------------
// Reading values

/// `true` or `false`, any case (Java's `ConfigDef` BOOLEAN).
pub(super) fn parse_bool(property: &str, value: &str) -> Result<bool, Error> {
    if value.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(invalid(property, value, "expected true or false"))
    }
}

pub(super) fn parse_integer(property: &str, value: &str) -> Result<u64, Error> {
    let n: i64 = value
        .parse()
        .map_err(|_| invalid(property, value, "not an integer"))?;
    u64::try_from(n).map_err(|_| invalid(property, value, "must not be negative"))
}

pub(super) fn parse_u32(property: &str, value: &str) -> Result<u32, Error> {
    let n = parse_integer(property, value)?;
    u32::try_from(n)
        .ok()
        .filter(|&n| u64::from(n) <= INT_MAX)
        .ok_or_else(|| invalid(property, value, format!("must be at most {INT_MAX}")))
}

pub(super) fn parse_ms(property: &str, value: &str) -> Result<Duration, Error> {
    parse_integer(property, value).map(Duration::from_millis)
}

/// A value whose type says how it is written (its `FromStr`).
pub(super) fn parsed<T: FromStr<Err = Error>>(_: &str, value: &str) -> Result<T, Error> {
    value.parse()
}

/// `parse`, for a property whose builder field is `None` until it is set.
pub(super) fn optional<T>(
    parse: fn(&str, &str) -> Result<T, Error>,
) -> impl Fn(&str, &str) -> Result<Option<T>, Error> {
    move |property, value| parse(property, value).map(Some)
}

/// Any text.
pub(super) fn text(_: &str, value: &str) -> Result<String, Error> {
    Ok(value.to_owned())
}

/// Any text, set.
pub(super) fn some_text(_: &str, value: &str) -> Result<Option<String>, Error> {
    Ok(Some(value.to_owned()))
}

/// Any text; empty unsets, as in librdkafka.
pub(super) fn text_or_none(_: &str, value: &str) -> Result<Option<String>, Error> {
    Ok(non_empty(value).map(str::to_owned))
}

/// A path; empty unsets, as in librdkafka.
pub(super) fn path_or_none(_: &str, value: &str) -> Result<Option<PathBuf>, Error> {
    Ok(non_empty(value).map(PathBuf::from))
}

/// A secret; empty unsets, as in librdkafka.
pub(super) fn secret_or_none(_: &str, value: &str) -> Result<Option<Secret>, Error> {
    Ok(non_empty(value).map(Secret::new))
}

/// A secret, set (even empty).
pub(super) fn some_secret(_: &str, value: &str) -> Result<Option<Secret>, Error> {
    Ok(Some(Secret::new(value)))
}

fn non_empty(value: &str) -> Option<&str> {
    (!value.is_empty()).then_some(value)
}

pub(super) fn parse_bootstrap_servers(list: &str) -> Result<Vec<BrokerAddress>, Error> {
    // As Java's ClientUtils: entries are trimmed and empty ones skipped.
    let servers = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::parse)
        .collect::<Result<Vec<BrokerAddress>, Error>>()?;
    if servers.is_empty() {
        return Err(invalid(
            super::common::BOOTSTRAP_SERVERS,
            list,
            "no broker address; expected host:port[,host:port...]",
        ));
    }
    Ok(servers)
}

pub(super) fn parse_strategies(
    property: &str,
    list: &str,
) -> Result<Vec<AssignmentStrategy>, Error> {
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
                invalid(property, list, why)
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Checking values on their own

/// Durations are whole milliseconds on the wire; a fraction is dropped.
/// An unset value (`None`) is not checked.
pub(super) fn check_ms(
    property: &str,
    d: impl Into<Option<Duration>>,
    min: u64,
    max: u64,
) -> Result<(), Error> {
    let Some(d) = d.into() else {
        return Ok(());
    };
    let ms = d.as_millis();
    if ms < u128::from(min) {
        return Err(invalid(property, ms, format!("must be at least {min}")));
    }
    if ms > u128::from(max) {
        return Err(invalid(property, ms, format!("must be at most {max}")));
    }
    Ok(())
}

pub(super) fn check_int(property: &str, n: u32, min: u32) -> Result<(), Error> {
    if n < min {
        return Err(invalid(property, n, format!("must be at least {min}")));
    }
    if u64::from(n) > INT_MAX {
        return Err(invalid(property, n, format!("must be at most {INT_MAX}")));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Rendering values for `to_properties`

/// Whole milliseconds.
pub(super) fn ms(d: &Duration) -> Option<String> {
    Some(d.as_millis().to_string())
}

/// As the value displays itself.
pub(super) fn shown<T: fmt::Display>(value: &T) -> Option<String> {
    Some(value.to_string())
}

/// As the value displays itself; left out when unset.
pub(super) fn shown_if_set<T: fmt::Display>(value: &Option<T>) -> Option<String> {
    value.as_ref().map(ToString::to_string)
}

/// A path; left out when unset.
pub(super) fn path_if_set(path: &Option<PathBuf>) -> Option<String> {
    path.as_ref().map(|p| p.display().to_string())
}

/// A list, comma-separated.
pub(super) fn comma_list<T: fmt::Display>(items: &[T]) -> Option<String> {
    Some(
        items
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// A secret: never rendered.
pub(super) fn secret<T>(_: &T) -> Option<String> {
    None
}
