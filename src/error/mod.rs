//! The crate's public error type, Kafka's broker error codes, and the
//! errors and values that [`Error`]'s variants carry.
//!
//! The types re-exported here are defined in the layers under the consumer
//! (the wire protocol, record batches, the connection manager, the
//! fetcher), which the crate keeps to itself; this module is where an
//! application names them.

use crate::events::{ConnectionError, Purpose};
use std::fmt;

pub use crate::cluster::{RequestError, REPORT_AGAIN_AFTER};
pub use crate::fetch::{FetchError, SeekError};
pub use crate::group::PatternError;
pub use crate::protocol::{ApiKey, DecodeError, EncodeError, NoCommonVersion, VersionRange};
pub use crate::records::{Checksum, Compression, RecordsError, RecordsErrorKind};

// Defined in `protocol` so that the layers below this module can name broker
// errors without depending on it; re-exported here for `lazykafka::error::ErrorCode`.
pub use crate::protocol::ErrorCode;
pub use producer::{DeliveryError, PartitionerError};

mod producer;

/// Everything that can go wrong in this crate.
///
/// [`Error::is_retriable`] tells whether trying again (after a backoff, a
/// reconnect or a metadata refresh) can help.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Connecting did not complete within the setup timeout.
    ConnectTimeout {
        /// The broker address.
        addr: String,
    },
    /// A request got no answer within `request.timeout.ms`.
    RequestTimeout {
        /// The API of the request.
        api: ApiKey,
        /// The broker address.
        addr: String,
    },
    /// A response could not be decoded.
    Decode {
        /// The API whose response it was.
        api: ApiKey,
        /// The broker address.
        addr: String,
        /// Where decoding failed.
        source: DecodeError,
    },
    /// A request got no response (connection lost, timeout, no common
    /// version).
    Request {
        /// The API of the request.
        api: ApiKey,
        /// Why.
        source: crate::cluster::RequestError,
    },
    /// Fetching a partition failed in a way the application must see
    /// (corrupt records, no committed offset under `auto.offset.reset=none`,
    /// authorization, ...). It names the topic, partition and offset.
    Fetch(crate::fetch::FetchError),
    /// A seek was refused (partition not assigned, negative offset).
    Seek(crate::fetch::SeekError),
    /// The client (consumer or producer) was closed.
    Closed,
    /// An operation named a partition that is not assigned to the
    /// consumer (`Consumer::store_offsets`).
    NotAssigned {
        /// The operation.
        operation: &'static str,
        /// The partition.
        partition: crate::group::TopicPartition,
    },
    /// An operation did not finish within `default.api.timeout.ms`.
    Timeout {
        /// What timed out.
        what: &'static str,
        /// How long it was given.
        after: std::time::Duration,
        /// The last failure seen meanwhile (a refused connection, an
        /// unknown topic, ...), if any.
        last_error: Option<String>,
    },
    /// No bootstrap broker could be reached: each address failed, for the
    /// cause given. The consumer goes on trying (with backoff); this is
    /// reported once when it starts, and again after a broker was reached
    /// or after [`REPORT_AGAIN_AFTER`].
    BrokersUnreachable {
        /// Each bootstrap address with its last failure.
        attempts: Vec<(String, ConnectionError)>,
    },
    /// Connecting to a known broker (the group coordinator or a partition
    /// leader) failed, or its connection broke before answering. The
    /// consumer goes on trying (with backoff); reported once when it
    /// starts, and again after the broker answered or after
    /// [`REPORT_AGAIN_AFTER`].
    ///
    /// A failure of the application's OAUTHBEARER token provider comes
    /// here too, for any connection (a bootstrap one included), at its
    /// first failure: `cause` is [`ConnectionError::TokenProvider`], with
    /// the provider's message. It is retriable: the client calls the
    /// provider again after the reconnect backoff.
    Connection {
        /// The broker id, when known.
        broker: Option<i32>,
        /// The address dialled.
        addr: String,
        /// What the connection is for.
        purpose: Purpose,
        /// What happened.
        cause: ConnectionError,
    },
    /// SASL authentication with a broker failed: the broker refused the
    /// credentials (SASL_AUTHENTICATION_FAILED, with the broker's
    /// message), does not enable the mechanism (UNSUPPORTED_SASL_MECHANISM,
    /// with the mechanisms it enables), refused the OAUTHBEARER token, or
    /// could not prove it knows the SCRAM password. (A failure of the
    /// application's token provider is an [`Error::Connection`] instead,
    /// retriable.) Reported at the first failure, and again only after the
    /// broker accepted us or after [`REPORT_AGAIN_AFTER`]. Not retriable:
    /// it will not pass until the credentials (or the broker's) change;
    /// the consumer still tries the address every
    /// `reconnect.backoff.max.ms`, so a fix on the broker's side is
    /// picked up. The same cause reaches the connection events as
    /// [`ConnectionError::Authentication`].
    Authentication {
        /// The broker id, when known (`None` for a bootstrap address).
        broker: Option<i32>,
        /// The address dialled.
        addr: String,
        /// The mechanism (`PLAIN`, `SCRAM-SHA-256`, ...).
        mechanism: String,
        /// What the broker said, or what was wrong with its answer.
        message: String,
    },
    /// A subscribed or assigned topic is unknown to the cluster (or
    /// refused to this client) for longer than
    /// `topic.metadata.propagation.max.ms`. The consumer keeps asking for
    /// its metadata and starts on it once it appears.
    Topic {
        /// The topic.
        topic: String,
        /// Why (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, ...).
        code: ErrorCode,
    },
    /// An assigned partition does not exist: the topic has fewer
    /// partitions. The consumer keeps asking for the topic's metadata.
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
        /// How many partitions the topic has.
        partitions: usize,
    },
    /// An assigned partition has had no leader for longer than
    /// `topic.metadata.propagation.max.ms`: the metadata names none (a
    /// leader election, or every replica down), so nothing is fetched from
    /// it. The consumer keeps refreshing the metadata (after
    /// `retry.backoff.ms`, doubling to `retry.backoff.max.ms`) and fetches
    /// again from the same position once a leader is named; reported again
    /// after [`REPORT_AGAIN_AFTER`] while it lasts.
    NoLeader {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The partition's error in the metadata (LEADER_NOT_AVAILABLE
        /// when the broker gave none with its leader of -1).
        code: ErrorCode,
    },
    /// The consumer group refused a request with an error code (or its
    /// answer could not be used). When [`Error::is_fatal`] is true the
    /// member has stopped: it no longer joins the group nor fetches its
    /// partitions, and the consumer must be closed (and made anew once the
    /// cause, such as a missing ACL, is fixed).
    Group {
        /// The group.
        group: String,
        /// The request (`JoinGroup`, `OffsetCommit`, ...).
        api: ApiKey,
        /// The broker's error code, when it gave one.
        code: Option<ErrorCode>,
        /// What happened, in words.
        reason: String,
        /// Whether the member stopped because of it.
        stopped: bool,
    },
    /// The broker answered with an error code.
    Broker {
        /// The API of the request.
        api: ApiKey,
        /// The error.
        code: ErrorCode,
    },
    /// A topic pattern given to `Consumer::subscribe_pattern` cannot be
    /// used: empty, not valid RE2 syntax, or too large once compiled. The
    /// subscription is unchanged.
    InvalidPattern {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it (the `regex` crate's words).
        reason: String,
    },
    /// A configuration property is unknown, missing, or has an invalid
    /// value (see [`ConsumerConfig`](crate::ConsumerConfig)).
    Config {
        /// The property's Kafka name, such as `fetch.min.bytes`.
        property: String,
        /// What is wrong, with the offending value.
        reason: String,
    },
    /// A record given to a producer was not delivered: its topic,
    /// partition and why.
    Delivery(DeliveryError),
    /// A record's partition could not be chosen (a custom partitioner or
    /// the record named one outside the topic, a topic without
    /// partitions).
    Partitioner(PartitionerError),
}

impl Error {
    /// Whether the consumer cannot go on: it was closed, or its group
    /// member stopped for an error no retry can fix (authorization, an
    /// invalid group id, a fenced static member, ...). Close the consumer
    /// then, and make a new one once the cause is fixed.
    pub fn is_fatal(&self) -> bool {
        match self {
            Error::Closed => true,
            Error::Group { stopped, .. } => *stopped,
            _ => false,
        }
    }

    /// Whether the consumer goes on by itself: it retries in the
    /// background (after a backoff, a reconnect, a metadata refresh or a
    /// rejoin), and the same call can succeed if made again. A routine
    /// event (a rebalance, a coordinator that moved or is loading, a
    /// leader change, a broker restart) is always retriable, so a loop that
    /// stops on errors that are not survives every one of them:
    ///
    /// ```no_run
    /// # async fn run(consumer: &mut lazykafka::Consumer) -> Result<(), lazykafka::Error> {
    /// loop {
    ///     match consumer.poll(std::time::Duration::from_millis(500)).await {
    ///         Ok(records) => { /* ... */ }
    ///         Err(e) if e.is_retriable() => eprintln!("{e}"), // goes on by itself
    ///         Err(e) => return Err(e), // a refusal, a closed consumer, ...
    ///     }
    /// }
    /// # }
    /// ```
    ///
    /// With `enable.partition.eof=true`: the partition whose position
    /// reached the end of its log, and that position, when this is that
    /// report ([`FetchError::PartitionEof`]);
    /// `None` for any other error. A batch job reads until every assigned
    /// partition said so:
    ///
    /// ```
    /// # use lazykafka::Error;
    /// fn on_error(e: &Error, at_end: &mut std::collections::BTreeSet<lazykafka::TopicPartition>) {
    ///     match e.partition_eof() {
    ///         Some((partition, _offset)) => {
    ///             at_end.insert(partition.clone());
    ///         }
    ///         None => eprintln!("lazykafka: {e}"),
    ///     }
    /// }
    /// ```
    pub fn partition_eof(&self) -> Option<(&crate::group::TopicPartition, i64)> {
        match self {
            Error::Fetch(crate::fetch::FetchError::PartitionEof { partition, offset }) => {
                Some((partition, *offset))
            }
            _ => None,
        }
    }

    /// docs/reliability.md lists what each API's error codes do.
    pub fn is_retriable(&self) -> bool {
        match self {
            // A failed TLS handshake, refused credentials or a broker that
            // breaks the protocol fail again until the certificates, the
            // configuration or the broker change.
            Error::BrokersUnreachable { attempts } => {
                !attempts.iter().all(|(_, cause)| cause.is_refusal())
            }
            Error::Topic { code, .. } => code.is_retriable(),
            Error::UnknownPartition { .. } | Error::NoLeader { .. } => true,
            // A rebalance, a coordinator that moved or is loading: the
            // member rejoins and retries by itself (docs/reliability.md).
            Error::Group { code, stopped, .. } => {
                !stopped && code.is_some_and(|c| crate::group::errors::classify(c).goes_on())
            }
            Error::ConnectTimeout { .. } | Error::RequestTimeout { .. } => true,
            Error::Broker { code, .. } => code.is_retriable(),
            Error::Request { source, .. } => source.is_retriable(),
            // A broker that broke the protocol will do it again; a
            // certificate that failed verification, or credentials that were
            // refused, fail again. (A token provider that failed is not a
            // refusal: its endpoint may be back at the next attempt.)
            Error::Connection { cause, .. } => !matches!(
                cause,
                crate::events::ConnectionError::Protocol { .. }
                    | crate::events::ConnectionError::Tls { .. }
                    | crate::events::ConnectionError::Authentication { .. }
            ),
            Error::Timeout { .. } => true,
            Error::Authentication { .. } => false,
            Error::Closed => false,
            Error::Fetch(e) => e.is_retriable(),
            Error::Seek(_) => false,
            Error::NotAssigned { .. } => false,
            Error::Decode { .. } | Error::InvalidPattern { .. } | Error::Config { .. } => false,
            // Retries were made (up to `retries` and `delivery.timeout.ms`)
            // before a record is failed.
            Error::Delivery(_) | Error::Partitioner(_) => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ConnectTimeout { addr } => write!(f, "{addr}: connection setup timed out"),
            Error::RequestTimeout { api, addr } => write!(f, "{addr}: {api} request timed out"),
            Error::Decode { api, addr, source } => {
                write!(f, "{addr}: cannot decode {api} response: {source}")
            }
            Error::Broker { api, code } => write!(f, "{api} failed: {code}"),
            Error::Request { api, source } => write!(f, "{api}: {source}"),
            Error::Closed => f.write_str("the client is closed"),
            Error::Fetch(e) => e.fmt(f),
            Error::Seek(e) => e.fmt(f),
            Error::NotAssigned {
                operation,
                partition,
            } => write!(f, "{operation}: {partition} is not assigned"),
            Error::Timeout {
                what,
                after,
                last_error,
            } => fmt_timeout(f, what, after, last_error.as_deref()),
            Error::BrokersUnreachable { attempts } => fmt_unreachable(f, attempts),
            Error::Connection {
                broker,
                addr,
                purpose,
                cause,
            } => fmt_connection(f, *broker, addr, purpose, cause),
            Error::Authentication {
                broker,
                addr,
                mechanism,
                message,
            } => fmt_authentication(f, *broker, addr, mechanism, message),
            Error::Topic { topic, code } => write!(f, "topic {topic:?}: {code}"),
            Error::UnknownPartition {
                topic,
                partition,
                partitions,
            } => write!(
                f,
                "partition {partition} of topic {topic:?} does not exist (the topic has {partitions})"
            ),
            Error::NoLeader {
                topic,
                partition,
                code,
            } => write!(
                f,
                "partition {partition} of topic {topic:?} has no leader ({code}); fetching it resumes once the metadata names one"
            ),
            Error::Group {
                group,
                api,
                code,
                reason,
                stopped,
            } => fmt_group(f, group, *api, *code, reason, *stopped),
            Error::InvalidPattern { pattern, reason } => {
                write!(f, "topic pattern {pattern:?}: {reason}")
            }
            Error::Delivery(e) => write!(f, "record not delivered: {e}"),
            Error::Partitioner(e) => write!(f, "no partition for a record: {e}"),
            Error::Config { property, reason } => {
                write!(f, "configuration property {property}: {reason}")
            }
        }
    }
}

/// [`Error::Timeout`]: what timed out, and the last error seen meanwhile.
fn fmt_timeout(
    f: &mut fmt::Formatter<'_>,
    what: &str,
    after: &std::time::Duration,
    last_error: Option<&str>,
) -> fmt::Result {
    write!(f, "{what} timed out after {after:?}")?;
    match last_error {
        Some(e) => write!(f, "; last error: {e}"),
        None => Ok(()),
    }
}

/// [`Error::BrokersUnreachable`]: the first few addresses and their causes.
fn fmt_unreachable(
    f: &mut fmt::Formatter<'_>,
    attempts: &[(String, ConnectionError)],
) -> fmt::Result {
    f.write_str("all bootstrap brokers unreachable: ")?;
    const SHOWN: usize = 5;
    for (i, (addr, cause)) in attempts.iter().take(SHOWN).enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{addr} {cause}")?;
    }
    if attempts.len() > SHOWN {
        write!(f, ", and {} more", attempts.len() - SHOWN)?;
    }
    Ok(())
}

/// [`Error::Connection`]: the broker (when known), the connection and why
/// it failed.
fn fmt_connection(
    f: &mut fmt::Formatter<'_>,
    broker: Option<i32>,
    addr: &str,
    purpose: &Purpose,
    cause: &ConnectionError,
) -> fmt::Result {
    match broker {
        Some(b) => write!(f, "broker {b} ({purpose} connection to {addr})")?,
        None => write!(f, "{purpose} connection to {addr}")?,
    }
    write!(f, ": {cause}")
}

/// [`Error::Authentication`]: the broker (when known), the mechanism and
/// the broker's message.
fn fmt_authentication(
    f: &mut fmt::Formatter<'_>,
    broker: Option<i32>,
    addr: &str,
    mechanism: &str,
    message: &str,
) -> fmt::Result {
    match broker {
        Some(b) => write!(f, "broker {b} ({addr})")?,
        None => write!(f, "{addr}")?,
    }
    write!(f, ": SASL {mechanism} authentication failed: {message}")
}

/// [`Error::Group`]: the failure, then what comes of it ([`group_next`]).
fn fmt_group(
    f: &mut fmt::Formatter<'_>,
    group: &str,
    api: ApiKey,
    code: Option<ErrorCode>,
    reason: &str,
    stopped: bool,
) -> fmt::Result {
    write!(f, "group {group:?}: {api} failed: ")?;
    match code {
        Some(code) => write!(f, "{code}")?,
        None => f.write_str(reason)?,
    }
    if stopped {
        return f.write_str("; the member stopped");
    }
    f.write_str(group_next(api, code))
}

/// What comes of a group request `api` refused with `code`, as the tail
/// of [`Error::Group`]'s message (empty without a code).
fn group_next(api: ApiKey, code: Option<ErrorCode>) -> &'static str {
    use crate::group::errors::GroupErrorClass;
    match code.map(crate::group::errors::classify) {
        Some(GroupErrorClass::Rebalance) if api == ApiKey::OffsetCommit => {
            "; the group is rebalancing and the member rejoins by itself: the offsets were not committed (commit again once partitions are assigned)"
        }
        Some(GroupErrorClass::Rebalance) => {
            "; the group is rebalancing and the member rejoins by itself"
        }
        Some(GroupErrorClass::Coordinator) => {
            "; the coordinator is looked up again and the request retried"
        }
        // The same offsets would be refused again (the consumer's core
        // does not send them again: `commit_refused`).
        Some(GroupErrorClass::Transient)
            if api == ApiKey::OffsetCommit
                && code == Some(crate::protocol::ErrorCode::FencedLeaderEpoch) =>
        {
            "; the broker knows a newer leader epoch than the last record read: the offsets were not committed (commit again after reading on)"
        }
        Some(GroupErrorClass::Transient) => "; retried after a backoff",
        Some(GroupErrorClass::Refused) => {
            "; refused: the consumer asks again with backoff, but retrying does not cure it"
        }
        None => "",
    }
}

impl From<crate::group::PatternError> for Error {
    fn from(e: crate::group::PatternError) -> Error {
        Error::InvalidPattern {
            pattern: e.pattern,
            reason: e.reason,
        }
    }
}

impl Error {
    /// The error a problem the connection manager reports becomes, for
    /// `poll` and the producer's calls alike.
    pub(crate) fn from_problem(problem: crate::cluster::Problem) -> Error {
        use crate::cluster::Problem;
        match problem {
            Problem::BootstrapUnreachable { attempts } => Error::BrokersUnreachable { attempts },
            Problem::BrokerUnreachable {
                broker,
                addr,
                purpose,
                cause,
            } => Error::Connection {
                broker,
                addr,
                purpose,
                cause,
            },
            Problem::AuthenticationFailed {
                broker,
                addr,
                mechanism,
                message,
                ..
            } => Error::Authentication {
                broker,
                addr,
                mechanism,
                message,
            },
            Problem::CoordinatorRefused { group, code } => Error::Group {
                reason: format!("FindCoordinator failed: {code}"),
                group,
                api: ApiKey::FindCoordinator,
                code: Some(code),
                stopped: false,
            },
            // `Problem` is non-exhaustive for other crates only.
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Decode { source, .. } => Some(source),
            Error::Request { source, .. } => Some(source),
            Error::Connection { cause, .. } => Some(cause),
            Error::Fetch(e) => Some(e),
            Error::Seek(e) => Some(e),
            Error::Delivery(e) => Some(e),
            Error::Partitioner(e) => Some(e),
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
