//! The crate's public error type and Kafka's broker error codes.

use crate::protocol::{DecodeError, EncodeError, FrameError, NoCommonVersion};
use std::fmt;
use std::io;

mod codes;
pub use codes::ErrorCode;

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

/// Everything that can go wrong in this crate.
///
/// [`Error::is_retriable`] tells whether trying again (after a backoff, a
/// reconnect or a metadata refresh) can help.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A socket operation failed (connect, read, write, DNS).
    Io {
        /// The broker address involved.
        addr: String,
        /// The underlying error.
        source: io::Error,
    },
    /// Connecting did not complete within the setup timeout.
    ConnectTimeout {
        /// The broker address.
        addr: String,
    },
    /// A connection could not be set up, or was lost before it was ready
    /// (the same causes the connection events carry).
    Connection {
        /// The broker address.
        addr: String,
        /// What happened.
        cause: crate::events::ConnectionError,
    },
    /// A request got no answer within `request.timeout.ms`.
    RequestTimeout {
        /// The API of the request.
        api: &'static str,
        /// The broker address.
        addr: String,
    },
    /// The peer closed the connection.
    ConnectionClosed {
        /// The broker address.
        addr: String,
    },
    /// A frame's size prefix was refused.
    Frame {
        /// The broker address.
        addr: String,
        /// What was wrong with it.
        source: FrameError,
    },
    /// A response could not be decoded.
    Decode {
        /// The API whose response it was.
        api: &'static str,
        /// The broker address.
        addr: String,
        /// Where decoding failed.
        source: DecodeError,
    },
    /// A request could not be encoded.
    Encode {
        /// The API.
        api: &'static str,
        /// Why.
        source: EncodeError,
    },
    /// A response carried a correlation id that matches no request in flight.
    UnexpectedCorrelationId {
        /// The broker address.
        addr: String,
        /// The id expected.
        expected: i32,
        /// The id received.
        received: i32,
    },
    /// The broker and this client share no version of an API.
    NoCommonVersion {
        /// The broker address.
        addr: String,
        /// Which API and both ranges.
        source: NoCommonVersion,
    },
    /// A request got no response (connection lost, timeout, no common
    /// version).
    Request {
        /// The API of the request.
        api: &'static str,
        /// Why.
        source: crate::cluster::RequestError,
    },
    /// Fetching a partition failed in a way the application must see
    /// (corrupt records, no committed offset under `auto.offset.reset=none`,
    /// authorization, ...). It names the topic, partition and offset.
    Fetch(crate::fetch::FetchError),
    /// A seek was refused (partition not assigned, negative offset).
    Seek(crate::fetch::SeekError),
    /// The consumer was closed.
    Closed,
    /// An operation did not finish within `default.api.timeout.ms`.
    Timeout {
        /// What timed out.
        what: &'static str,
    },
    /// The broker answered with an error code.
    Broker {
        /// The API of the request.
        api: &'static str,
        /// The error.
        code: ErrorCode,
    },
    /// A configuration property is unknown, missing, or has an invalid
    /// value (see [`ConsumerConfig`](crate::ConsumerConfig)).
    Config {
        /// The property's Kafka name, such as `fetch.min.bytes`.
        property: String,
        /// What is wrong, with the offending value.
        reason: String,
    },
}

impl Error {
    /// Whether the same operation can succeed if tried again later.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Io { .. }
            | Error::ConnectTimeout { .. }
            | Error::RequestTimeout { .. }
            | Error::ConnectionClosed { .. } => true,
            Error::Broker { code, .. } => code.is_retriable(),
            Error::Request { source, .. } => source.is_retriable(),
            // A broker that broke the protocol will do it again.
            Error::Connection { cause, .. } => {
                !matches!(cause, crate::events::ConnectionError::Protocol { .. })
            }
            Error::Timeout { .. } => true,
            Error::Closed => false,
            Error::Fetch(e) => e.is_retriable(),
            Error::Seek(_) => false,
            Error::Frame { .. }
            | Error::Decode { .. }
            | Error::Encode { .. }
            | Error::UnexpectedCorrelationId { .. }
            | Error::NoCommonVersion { .. }
            | Error::Config { .. } => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { addr, source } => write!(f, "{addr}: {source}"),
            Error::ConnectTimeout { addr } => write!(f, "{addr}: connection setup timed out"),
            Error::Connection { addr, cause } => write!(f, "{addr}: {cause}"),
            Error::RequestTimeout { api, addr } => write!(f, "{addr}: {api} request timed out"),
            Error::ConnectionClosed { addr } => write!(f, "{addr}: connection closed by the peer"),
            Error::Frame { addr, source } => write!(f, "{addr}: {source}"),
            Error::Decode { api, addr, source } => {
                write!(f, "{addr}: cannot decode {api} response: {source}")
            }
            Error::Encode { api, source } => write!(f, "cannot encode {api} request: {source}"),
            Error::UnexpectedCorrelationId {
                addr,
                expected,
                received,
            } => write!(
                f,
                "{addr}: response with correlation id {received}, expected {expected}"
            ),
            Error::NoCommonVersion { addr, source } => write!(f, "{addr}: {source}"),
            Error::Broker { api, code } => write!(f, "{api} failed: {code}"),
            Error::Request { api, source } => write!(f, "{api}: {source}"),
            Error::Closed => f.write_str("the consumer is closed"),
            Error::Fetch(e) => e.fmt(f),
            Error::Seek(e) => e.fmt(f),
            Error::Timeout { what } => write!(f, "{what} timed out"),
            Error::Config { property, reason } => {
                write!(f, "configuration property {property}: {reason}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Frame { source, .. } => Some(source),
            Error::Decode { source, .. } => Some(source),
            Error::Encode { source, .. } => Some(source),
            Error::NoCommonVersion { source, .. } => Some(source),
            Error::Request { source, .. } => Some(source),
            Error::Fetch(e) => Some(e),
            Error::Seek(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_round_trip_and_classify() {
        for code in -1..=200 {
            assert_eq!(ErrorCode::from_code(code).code(), code);
        }
        assert_eq!(ErrorCode::from_code(6), ErrorCode::NotLeaderOrFollower);
        assert!(ErrorCode::NotLeaderOrFollower.is_retriable());
        assert!(!ErrorCode::OffsetOutOfRange.is_retriable());
        assert_eq!(ErrorCode::UnsupportedVersion.name(), "UNSUPPORTED_VERSION");
        assert_eq!(ErrorCode::from_code(9999), ErrorCode::Unknown(9999));
        assert_eq!(
            ErrorCode::RebalanceInProgress.to_string(),
            "REBALANCE_IN_PROGRESS (27)"
        );
    }
}
