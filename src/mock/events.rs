//! What the brokers saw and how connections ended: the event log
//! ([`MockCluster::events`](crate::mock::MockCluster::events)), requests as logged
//! ([`MockCluster::requests`](crate::mock::MockCluster::requests)), Fetch requests with their answers
//! ([`MockCluster::fetches`](crate::mock::MockCluster::fetches)), and the ways an answer is lost
//! ([`MockCluster::push_lost_answers`](crate::mock::MockCluster::push_lost_answers)).
//!
//! [`MockCluster::events`]: super::MockCluster::events
//! [`MockCluster::requests`]: super::MockCluster::requests
//! [`MockCluster::fetches`]: super::MockCluster::fetches
//! [`MockCluster::push_lost_answers`]: super::MockCluster::push_lost_answers

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::ErrorCode;
use crate::protocol::ApiKey;

/// Something a broker of the mock saw.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockEvent {
    /// When, from the cluster's start.
    pub at: Duration,
    /// The broker id.
    pub broker: i32,
    /// What happened.
    pub kind: MockEventKind,
}

/// What a broker saw.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MockEventKind {
    /// A client connected.
    Connected {
        /// The connection's id (unique in the cluster, from 1).
        connection: u64,
        /// The client's address.
        peer: SocketAddr,
    },
    /// A request arrived (logged before it is answered).
    Request {
        /// The connection it came on.
        connection: u64,
        /// The raw API key.
        api_key: i16,
        /// The API version.
        api_version: i16,
        /// The request's correlation id.
        correlation_id: i32,
        /// The client id from the request header.
        client_id: Option<String>,
    },
    /// A connection authenticated with SASL (or renewed its session,
    /// KIP-368).
    Authenticated {
        /// The connection.
        connection: u64,
        /// The mechanism.
        mechanism: crate::sasl::Mechanism,
        /// Who it authenticated as.
        principal: String,
    },
    /// A connection closed.
    Closed {
        /// The connection.
        connection: u64,
        /// Which side closed it, and why.
        by: ClosedBy,
    },
}

/// Which side closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClosedBy {
    /// The client closed it (EOF or reset seen by the broker).
    Client,
    /// The broker closed it.
    Broker(BrokerClose),
}

/// Why the broker closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BrokerClose {
    /// Silent longer than the broker's idle timeout
    /// ([`MockCluster::set_idle_timeout`](crate::mock::MockCluster::set_idle_timeout)).
    Idle,
    /// The broker went down ([`MockCluster::broker_down`](crate::mock::MockCluster::broker_down)).
    Down,
    /// [`MockCluster::close_connections`](crate::mock::MockCluster::close_connections) closed it.
    Closed,
    /// A request could not be read, or named an API or version the broker
    /// does not serve (Kafka closes the connection then).
    BadRequest,
    /// The cluster was dropped.
    Shutdown,
    /// SASL is on and a request other than ApiVersions, SaslHandshake or
    /// SaslAuthenticate came before the connection authenticated (Kafka
    /// closes the connection then).
    Unauthenticated,
    /// SASL authentication failed: the broker sent its refusal
    /// (UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED) and closed
    /// the connection, as Kafka does.
    AuthenticationFailed,
    /// A request came after the connection's SASL session ended without a
    /// re-authentication (KIP-368).
    SessionExpired,
    /// A request took effect and the broker closed the connection instead
    /// of answering it ([`MockCluster::push_lost_answers`](crate::mock::MockCluster::push_lost_answers) with
    /// [`LostAnswer::Close`]).
    AnswerLost,
}

/// How the answer to a request that took effect is lost
/// ([`MockCluster::push_lost_answers`](crate::mock::MockCluster::push_lost_answers)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostAnswer {
    /// The broker closes the connection instead of answering
    /// ([`BrokerClose::AnswerLost`]): the client sees its connection end
    /// with the request outstanding, as when a broker's answer is lost
    /// with its connection.
    Close,
    /// The answer is never sent; the connection stays open and later
    /// requests on it are answered: the client's request times out.
    Unanswered,
}

/// A request as logged, with the API resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockRequest {
    /// When, from the cluster's start.
    pub at: Duration,
    /// The broker that got it.
    pub broker: i32,
    /// The connection it came on.
    pub connection: u64,
    /// The API (`None` for a key this crate does not know).
    pub api: Option<ApiKey>,
    /// The API version.
    pub version: i16,
}

/// A Fetch request and its answer, as recorded once
/// [`MockCluster::record_fetches`](crate::mock::MockCluster::record_fetches) is on. Topics are named even where the
/// request named them by id (v13+; an empty name for an unknown id).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockFetch {
    /// When it was answered, from the cluster's start.
    pub at: Duration,
    /// The broker that got it.
    pub broker: i32,
    /// The connection it came on.
    pub connection: u64,
    /// The Fetch version.
    pub version: i16,
    /// The request's size in bytes, with its size prefix.
    pub size: usize,
    /// The request's `session_id` (KIP-227; 0: none).
    pub session_id: i32,
    /// The request's `session_epoch`: 0 asks for a new session, -1 for
    /// none, anything else continues the session (an incremental Fetch).
    pub session_epoch: i32,
    /// The partitions the request listed, as `(topic, partition)`.
    pub listed: Vec<(String, i32)>,
    /// The partitions it asked to forget (`forgotten_topics_data`).
    pub forgotten: Vec<(String, i32)>,
    /// The answer's top-level error.
    pub error: ErrorCode,
    /// The answer's `session_id`: the session made or continued, 0 for none.
    pub response_session_id: i32,
    /// The bytes of records in the answer.
    pub record_bytes: usize,
    /// The partitions the answer named a preferred read replica for
    /// (KIP-392), as `(topic, partition, broker)`.
    pub preferred_read_replicas: Vec<(String, i32, i32)>,
    /// The partitions in the answer.
    pub answered: Vec<(String, i32)>,
}
