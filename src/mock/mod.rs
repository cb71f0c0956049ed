//! An in-process Kafka cluster for tests, examples and benchmarks.
//!
#![doc = include_str!("../../docs/mock-cluster.md")]

// The layout, for whoever works on the mock:
//
// - the handle a test holds: `cluster.rs` (`MockCluster`: brokers, topics,
//   produce), `faults.rs` (what a test does to it), `observe.rs` (what it
//   reads back), `builder.rs` (`MockClusterBuilder`), `events.rs` (the
//   event log's types), `certs.rs` (test certificates);
// - the network: `server.rs` (threads, sockets, waiting);
// - the answers, without IO: `respond.rs` (the SASL gate, the version
//   check, the dispatch, lost answers) and `api/`, one file per request
//   kind;
// - the cluster's state: `state.rs` (brokers, topics, coordinators, faults
//   queued, logs), `topic.rs` (partitions and leader epochs), `log.rs`
//   (record batches), `producers.rs` (idempotent producers),
//   `fetch_session.rs` (KIP-227), `sasl.rs` (credentials and each
//   connection's authentication);
// - the coordinators: `group/` (the classic protocol and every group's
//   offsets) and `consumer_group/` (KIP-848).

mod api;
mod builder;
mod certs;
mod cluster;
mod consumer_group;
mod events;
mod faults;
mod fetch_session;
pub(crate) mod group;
mod log;
mod observe;
mod producers;
pub(crate) mod respond;
pub(crate) mod sasl;
mod server;
pub(crate) mod state;
mod topic;

use std::fmt;

use bytes::Bytes;

pub use builder::MockClusterBuilder;
pub use certs::TestCertificates;
pub use cluster::MockCluster;
pub use events::{
    BrokerClose, ClosedBy, LostAnswer, MockEvent, MockEventKind, MockFetch, MockRequest,
};
pub use fetch_session::MockFetchSession;
pub use group::{GroupSnapshot, GroupState, MemberSnapshot};
pub use observe::{MockProducerBatch, MockProducerState};
pub use sasl::MockSasl;

use crate::error::ErrorCode;
use crate::records::RecordsError;

/// A record to produce into the mock from code.
#[derive(Debug, Clone, Default)]
pub struct MockRecord {
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<(Bytes, Option<Bytes>)>,
    timestamp: Option<i64>,
}

impl MockRecord {
    /// A record with `value`, no key, no headers, timestamped when produced.
    pub fn new(value: impl Into<Bytes>) -> Self {
        MockRecord {
            value: Some(value.into()),
            ..Default::default()
        }
    }

    /// A record with a key and a null value (a tombstone).
    pub fn tombstone(key: impl Into<Bytes>) -> Self {
        MockRecord {
            key: Some(key.into()),
            ..Default::default()
        }
    }

    /// Sets the key.
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Adds a header.
    pub fn header(mut self, key: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        self.headers.push((key.into(), Some(value.into())));
        self
    }

    /// Sets the timestamp (milliseconds since the Unix epoch; by default the
    /// time of the `produce` call).
    pub fn timestamp(mut self, millis: i64) -> Self {
        self.timestamp = Some(millis);
        self
    }
}

/// Why the mock refused an operation.
#[derive(Debug)]
#[non_exhaustive]
pub enum MockError {
    /// No topic of that name.
    UnknownTopic(String),
    /// The topic has no such partition.
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
    },
    /// No broker with that id.
    UnknownBroker(i32),
    /// The cluster refused it with this Kafka error (e.g.
    /// `TOPIC_ALREADY_EXISTS`).
    Refused(ErrorCode),
    /// The records could not be encoded.
    Records(RecordsError),
    /// A socket could not be bound.
    Io(std::io::Error),
    /// The certificate or key given to [`MockClusterBuilder::tls`] cannot
    /// be used.
    Tls(String),
}

impl fmt::Display for MockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MockError::UnknownTopic(t) => write!(f, "mock cluster: no topic {t:?}"),
            MockError::UnknownPartition { topic, partition } => {
                write!(
                    f,
                    "mock cluster: topic {topic:?} has no partition {partition}"
                )
            }
            MockError::UnknownBroker(b) => write!(f, "mock cluster: no broker {b}"),
            MockError::Refused(code) => write!(f, "mock cluster: refused with {}", code.name()),
            MockError::Records(e) => write!(f, "mock cluster: records: {e}"),
            MockError::Io(e) => write!(f, "mock cluster: {e}"),
            MockError::Tls(e) => write!(f, "mock cluster: TLS: {e}"),
        }
    }
}

impl std::error::Error for MockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MockError::Records(e) => Some(e),
            MockError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for MockError {
    fn from(e: std::io::Error) -> Self {
        MockError::Io(e)
    }
}
