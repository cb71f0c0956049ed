//! What a request is to the connection manager: its id ([`RequestId`]),
//! where it goes ([`Target`], and which APIs may go where), its outcome
//! ([`Response`] or [`RequestError`]), and who waits for it ([`Origin`]).

use super::conn::Queued;
use crate::events::ConnectionError;
use crate::protocol::{ApiKey, DecodeError, EncodeError, Message, NoCommonVersion};
use bytes::Bytes;
use std::fmt;

/// Identifies a request made with [`Cluster::request`](super::Cluster::request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// Where a request should go.
///
/// Displayed as the connection it names: `any broker`, `the group
/// coordinator`, `broker 2's leader connection`, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The least-loaded broker (Metadata-like requests).
    AnyBroker,
    /// The group coordinator, over the dedicated coordinator connection.
    Coordinator,
    /// A broker by id, over its leader connection.
    Broker(i32),
    /// A broker by id, over its replica connection: a follower a
    /// partition's leader named as the preferred read replica (KIP-392).
    /// Only Fetch (and the any-broker requests) may go there. A request
    /// that cannot get such a connection now (the broker is unknown to the
    /// metadata or its address is in reconnect backoff), or whose
    /// connection fails before it is sent, fails at once with a retriable
    /// error instead of waiting, so that the caller can fetch from the
    /// leader instead.
    Replica(i32),
    /// The bootstrap connection itself, whichever broker it reached: for
    /// tools that speak to one broker directly (`runtime::BrokerConnection`)
    /// and send it any API. The consumer never uses it.
    Bootstrap,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::AnyBroker => f.write_str("any broker"),
            Target::Coordinator => f.write_str("the group coordinator"),
            Target::Broker(id) => write!(f, "broker {id}'s leader connection"),
            Target::Replica(id) => write!(f, "broker {id}'s replica connection"),
            Target::Bootstrap => f.write_str("the bootstrap connection"),
        }
    }
}

/// A response to a request made with [`Cluster::request`](super::Cluster::request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The API.
    pub api: ApiKey,
    /// The version the request was sent (and the response read) at.
    pub version: i16,
    /// The broker that answered, when known.
    pub broker: Option<i32>,
    /// The body, header removed.
    pub body: Bytes,
}

impl Response {
    /// Decodes the body as `M` (see
    /// [`decode_response_body`](crate::protocol::messages::decode_response_body)
    /// for bytes left over).
    pub fn decode<M: Message>(&self) -> Result<M, DecodeError> {
        let (m, trailing) =
            crate::protocol::messages::decode_response_body(self.body.clone(), self.version)?;
        if trailing > 0 {
            log::debug!(
                "{} response v{}: {trailing} bytes left over",
                self.api,
                self.version
            );
        }
        Ok(m)
    }
}

/// Why a request got no response.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// The connection closed while the request was in flight.
    ConnectionLost {
        /// The broker address.
        addr: String,
        /// What happened.
        cause: ConnectionError,
    },
    /// No response (or no connection) within `request.timeout.ms`.
    Timeout {
        /// The API.
        api: ApiKey,
        /// For a request that never got a connection: the last connection
        /// failure seen meanwhile (address, purpose and cause).
        last_error: Option<String>,
    },
    /// The broker and this client share no version of the API.
    NoCommonVersion(NoCommonVersion),
    /// The request could not be encoded.
    Encode(ApiKey, EncodeError),
    /// A coordinator request without `group.id`.
    NoGroup,
    /// The client is shutting down.
    Shutdown,
    /// The request was refused before it was sent: its API may not go to
    /// this kind of connection. A bug in the caller, so never retriable.
    WrongTarget {
        /// The API of the request.
        api: ApiKey,
        /// The connection it was sent to, in words (`the group
        /// coordinator`, `broker 2's replica connection`, ...).
        target: String,
    },
    /// A request for a broker's read replica connection (KIP-392) found
    /// no usable connection to that broker: it is not in the metadata, its address is in reconnect
    /// backoff, or its connection failed before the request was sent.
    /// Retriable: fetch from the leader meanwhile.
    ReplicaUnavailable {
        /// The broker.
        broker: i32,
        /// Why, in words (with the last connection failure when there is
        /// one).
        reason: String,
    },
}

impl RequestError {
    /// Whether the request can be tried again.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            RequestError::ConnectionLost { .. }
                | RequestError::Timeout { .. }
                | RequestError::ReplicaUnavailable { .. }
        )
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::ConnectionLost { addr, cause } => {
                write!(f, "connection to {addr} lost: {cause}")
            }
            RequestError::Timeout {
                api,
                last_error: None,
            } => write!(f, "{api} request timed out"),
            RequestError::Timeout {
                api,
                last_error: Some(e),
            } => write!(f, "{api} request timed out; last error: {e}"),
            RequestError::NoCommonVersion(e) => e.fmt(f),
            RequestError::Encode(api, e) => write!(f, "cannot encode {api} request: {e}"),
            RequestError::NoGroup => f.write_str("no group.id is configured"),
            RequestError::Shutdown => f.write_str("the client is shutting down"),
            RequestError::WrongTarget { api, target } => {
                write!(f, "a {api} request may not be sent to {target}")
            }
            RequestError::ReplicaUnavailable { broker, reason } => {
                write!(f, "no connection to read replica {broker}: {reason}")
            }
        }
    }
}

impl std::error::Error for RequestError {}

/// Whether a request of `api` may go to `target` (docs/connections.md, rules 3 and 4). Group
/// APIs belong on the coordinator connection alone: the coordinator is the
/// only broker that can answer them. Fetch and the other partition-leader
/// APIs belong on a leader connection: a broker serves one request per
/// connection at a time, so a Fetch long-polling on the coordinator
/// connection would hold up the heartbeats behind it, and `AnyBroker` may
/// pick the coordinator connection or a broker that leads nothing asked.
/// Fetch may also go to a replica connection (KIP-392); ListOffsets and
/// OffsetForLeaderEpoch may not: a follower answers them with
/// NOT_LEADER_OR_FOLLOWER (the Java consumer sends them to the leader).
pub(crate) fn check_route(api: ApiKey, target: Target) -> Result<(), RequestError> {
    if target == Target::Bootstrap {
        // A tool's one connection to one broker: it asks what it asks.
        return Ok(());
    }
    let allowed = match api {
        ApiKey::JoinGroup
        | ApiKey::SyncGroup
        | ApiKey::Heartbeat
        | ApiKey::LeaveGroup
        | ApiKey::OffsetCommit
        | ApiKey::OffsetFetch
        | ApiKey::ConsumerGroupHeartbeat => target == Target::Coordinator,
        ApiKey::Fetch => matches!(target, Target::Broker(_) | Target::Replica(_)),
        ApiKey::ListOffsets | ApiKey::OffsetForLeaderEpoch => {
            matches!(target, Target::Broker(_))
        }
        // Cluster-wide questions, the handshake, the test tools' writes and
        // producer ids (any broker gives an idempotent producer one): any
        // connection will do. (No `_` arm: a new API must be routed.)
        ApiKey::Metadata
        | ApiKey::FindCoordinator
        | ApiKey::ApiVersions
        | ApiKey::SaslHandshake
        | ApiKey::SaslAuthenticate
        | ApiKey::Produce
        | ApiKey::CreateTopics
        | ApiKey::InitProducerId => true,
    };
    if allowed {
        Ok(())
    } else {
        Err(RequestError::WrongTarget {
            api,
            target: target.to_string(),
        })
    }
}

/// Who is waiting for a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// ApiVersions, sent when the connection opens.
    Handshake,
    /// SaslHandshake, then SaslAuthenticate, before the connection is
    /// ready (or while it renews its session).
    SaslHandshake,
    SaslAuthenticate,
    Metadata,
    /// Metadata for topic ids the cache does not know (its answer is
    /// merged into the cache, not put in its place).
    MetadataById,
    FindCoordinator,
    User(RequestId),
}

impl Origin {
    /// Whether the request sets the connection up: its answer does not
    /// show that the broker serves requests (so it does not end a run of
    /// failures).
    pub(crate) fn is_setup(self) -> bool {
        matches!(
            self,
            Origin::Handshake | Origin::SaslHandshake | Origin::SaslAuthenticate
        )
    }
}

/// A request not yet given to a connection: it waits for one to
/// `target` (being opened, or out of backoff).
#[derive(Debug)]
pub(crate) struct Waiting {
    pub target: Target,
    pub queued: Queued,
}
