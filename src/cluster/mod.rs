//! The lazy connection manager, as a state machine without IO.
//!
//! [`Cluster`] decides which sockets exist and why. It never opens one
//! itself: it asks for it with an [`Action`], and the runtime reports back
//! with the `handle_*` methods. Time is always an argument (`now`); nothing
//! here reads a clock, so whole connection lifecycles can be stepped through
//! in tests.
//!
//! ```text
//!   request(Target)        handle_connected / handle_connect_failed
//!        |                 handle_received / handle_closed / handle_timeout
//!        |                 handle_oauth_token
//!        v                              |
//!   +---------+   poll_action() ->  Connect | Transmit | Close   (runtime)
//!   |         |                     | FetchOAuthToken
//!   | Cluster |   poll_event()  ->  ConnectionEvent               (observer)
//!   +---------+   poll_response() -> (RequestId, Result<Response>) (caller)
//!                 poll_timeout() -> next deadline
//! ```
//!
//! Call order: after any `handle_*` or [`Cluster::request`], drain
//! `poll_action`, `poll_event` and `poll_response`, then wait for IO or for
//! `poll_timeout()`, and call [`Cluster::handle_timeout`] when it passes.
//!
//! The rules it keeps (see `docs/connection-lifecycle.md`):
//!
//! - nothing is connected until a request needs it;
//! - requests for "any broker" (Metadata, FindCoordinator) go to the
//!   least-loaded ready leader or replica connection, else the coordinator
//!   connection, else a bootstrap connection; at most one bootstrap
//!   connection exists at a time, so a long bootstrap list is tried one
//!   address after another;
//! - group requests go to a dedicated coordinator connection, Fetch to one
//!   connection per leader broker, or to one replica connection per
//!   preferred read replica (KIP-392), which fails fast instead of waiting
//!   when it cannot be had;
//! - a bootstrap connection is retired once the coordinator (in group mode)
//!   and a leader (or replica) connection are ready, or promoted when it
//!   reaches a leader (or replica) that is needed;
//! - a connection with nothing in flight for `connections.max.idle.ms` is
//!   closed by the client;
//! - a failed connect backs off per address, exponentially with jitter.

mod backoff;
mod conn;
pub mod metadata;

pub use backoff::{ExponentialBackoff, Retry, Rng};
pub use conn::RequestBody;
pub use metadata::{BrokerAddress, Metadata, PartitionInfo, TopicInfo};

use crate::events::{
    BrokerCounters, CloseReason, ConnectionError, ConnectionEvent, ConnectionId, ConnectionInfo,
    EventKind, Purpose,
};
use crate::protocol::{
    ApiKey, DecodeError, EncodeError, ExchangeStep, Message, NoCommonVersion,
    DEFAULT_MAX_FRAME_SIZE,
};
use bytes::{Bytes, BytesMut};
use conn::{Conn, InFlight, Phase, Queued, StreamError};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Settings of the connection manager (a subset of the consumer's).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// `bootstrap.servers`, as `host:port` strings.
    pub bootstrap: Vec<String>,
    /// `client.id`, sent in every request header.
    pub client_id: Option<String>,
    /// `group.id`: when set, the coordinator is looked up.
    pub group_id: Option<String>,
    /// `request.timeout.ms`.
    pub request_timeout: Duration,
    /// `connections.max.idle.ms`; `None` disables idle reaping.
    pub connections_max_idle: Option<Duration>,
    /// `reconnect.backoff.ms` growing to `reconnect.backoff.max.ms`.
    pub reconnect_backoff: ExponentialBackoff,
    /// `socket.connection.setup.timeout.ms` growing to `...max.ms`.
    pub setup_timeout: ExponentialBackoff,
    /// The backoff of an address that refused this client in a way
    /// waiting does not cure (authentication, TLS, protocol; see
    /// [`ConnectionError::is_refusal`]): much longer than the reconnect
    /// backoff. By default `reconnect.backoff.max.ms` (at least 1 s)
    /// doubling to 30 s.
    pub refusal_backoff: ExponentialBackoff,
    /// `retry.backoff.ms` growing to `retry.backoff.max.ms`: between
    /// Metadata or FindCoordinator retries.
    pub retry_backoff: ExponentialBackoff,
    /// `metadata.max.age.ms`.
    pub metadata_max_age: Duration,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight: usize,
    /// The largest response frame accepted.
    pub max_frame_size: usize,
    /// `allow.auto.create.topics`, sent in Metadata requests.
    pub allow_auto_create_topics: bool,
    /// SASL authentication of every connection (`SASL_PLAINTEXT`,
    /// `SASL_SSL`); `None` for none.
    pub sasl: Option<crate::sasl::SaslConfig>,
    /// Fills a buffer with random bytes, for SCRAM client nonces
    /// ([`os_random`](crate::sasl::os_random) by default; tests pass their
    /// own).
    pub random_bytes: fn(&mut [u8]),
}

impl ClusterConfig {
    /// The Java client's defaults for `bootstrap`.
    pub fn new(bootstrap: impl IntoIterator<Item = impl Into<String>>) -> Self {
        ClusterConfig {
            bootstrap: bootstrap.into_iter().map(Into::into).collect(),
            client_id: Some(env!("CARGO_PKG_NAME").to_owned()),
            group_id: None,
            request_timeout: Duration::from_millis(30_000),
            connections_max_idle: Some(Duration::from_millis(540_000)),
            reconnect_backoff: ExponentialBackoff {
                base: Duration::from_millis(50),
                max: Duration::from_millis(1000),
                jitter: 0.2,
            },
            setup_timeout: ExponentialBackoff {
                base: Duration::from_millis(10_000),
                max: Duration::from_millis(30_000),
                jitter: 0.2,
            },
            refusal_backoff: ExponentialBackoff {
                base: Duration::from_millis(1000),
                max: REFUSAL_BACKOFF_MAX,
                jitter: 0.2,
            },
            retry_backoff: ExponentialBackoff {
                base: Duration::from_millis(100),
                max: Duration::from_millis(1000),
                jitter: 0.2,
            },
            metadata_max_age: Duration::from_millis(300_000),
            max_in_flight: 5,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            allow_auto_create_topics: true,
            sasl: None,
            random_bytes: crate::sasl::os_random,
        }
    }
}

/// Identifies a request made with [`Cluster::request`].
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

/// What the runtime must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Resolve `addr` and connect, trying every resolved address, giving up
    /// after `timeout`; then report with `handle_connected` or
    /// `handle_connect_failed`.
    Connect {
        /// The connection.
        conn: ConnectionId,
        /// `host:port`.
        addr: String,
        /// The setup timeout for this attempt.
        timeout: Duration,
    },
    /// Write these bytes to the connection's socket, in order.
    Transmit {
        /// The connection.
        conn: ConnectionId,
        /// One or more whole request frames.
        bytes: Bytes,
        /// When set, the bytes carry requests the broker does not answer:
        /// once they (and everything before them on the connection) are
        /// handed to the socket, report it with
        /// [`Cluster::handle_written`] and this number.
        written: Option<u64>,
    },
    /// Close the connection's socket (both directions) and forget it.
    Close {
        /// The connection.
        conn: ConnectionId,
    },
    /// Run the asynchronous OAUTHBEARER token provider's future
    /// ([`OAuthTokenProvider::fetch`](crate::sasl::OAuthTokenProvider::fetch))
    /// as a task of its own, and report its answer with
    /// [`Cluster::handle_oauth_token`]; an `Err` naming the wait once
    /// `timeout` passed without one. One is asked at a time: every
    /// connection waiting for a token shares its answer.
    FetchOAuthToken {
        /// The provider.
        provider: crate::sasl::OAuthTokenProvider,
        /// How long the provider may take (`request.timeout.ms`).
        timeout: Duration,
    },
}

/// A response to a request made with [`Cluster::request`].
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

/// The longest wait between two attempts at an address that keeps refusing
/// this client (authentication, TLS, protocol failures).
pub const REFUSAL_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// A refusal this long after the last one of its address starts a new run
/// (its backoff from the first step, reported at once).
const REFUSAL_RUN_GAP: Duration = Duration::from_secs(300);

/// An address's run of refusals ([`ConnectionError::is_refusal`]): unlike
/// a run of failed connects, it is not ended by a connection that
/// answered (a broker that answers ApiVersions, then garbage, refuses
/// again and again), only by [`REFUSAL_RUN_GAP`] without a refusal.
#[derive(Debug, Clone, Copy)]
struct RefusalRun {
    count: u32,
    last: Instant,
    reported: Option<Instant>,
}

/// How long a condition that goes on (a broker still unreachable, a topic
/// still unknown) waits before it is reported again.
pub const REPORT_AGAIN_AFTER: Duration = Duration::from_secs(60);

/// A condition the application should hear of, reported once when it
/// starts (and again once it cleared, or after
/// [`REPORT_AGAIN_AFTER`]): the cluster
/// goes on trying by itself meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// Every bootstrap address failed since one last answered, and no
    /// connection is live.
    BootstrapUnreachable {
        /// Each address with its last failure.
        attempts: Vec<(String, ConnectionError)>,
    },
    /// A connection to a known broker (coordinator or leader) failed, or
    /// broke before it answered a request; or any connection (a bootstrap
    /// one too) could not authenticate because the OAUTHBEARER token
    /// provider failed ([`ConnectionError::TokenProvider`], reported at
    /// its first failure).
    BrokerUnreachable {
        /// The broker id, when known.
        broker: Option<i32>,
        /// The address.
        addr: String,
        /// What the connection was for.
        purpose: Purpose,
        /// What happened.
        cause: ConnectionError,
    },
    /// SASL authentication with a broker failed (wrong credentials, a
    /// mechanism the broker does not enable, a token refused). Reported
    /// at the first failure, since it will not pass by itself; the address
    /// is then tried again only every `reconnect.backoff.max.ms`.
    AuthenticationFailed {
        /// The broker id, when known.
        broker: Option<i32>,
        /// The address.
        addr: String,
        /// What the connection was for.
        purpose: Purpose,
        /// The mechanism.
        mechanism: String,
        /// What the broker said, or what was wrong with its answer.
        message: String,
    },
    /// The coordinator lookup (FindCoordinator) was refused with an error
    /// retrying does not cure (GROUP_AUTHORIZATION_FAILED: the principal
    /// may not describe the group; INVALID_GROUP_ID, ...). Reported at
    /// once, then every [`REPORT_AGAIN_AFTER`] while it lasts; the lookup
    /// goes on under the retry policy, so a fix (an ACL added) is picked
    /// up.
    CoordinatorRefused {
        /// The group.
        group: String,
        /// The broker's error code.
        code: crate::protocol::ErrorCode,
    },
}

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
fn check_route(api: ApiKey, target: Target) -> Result<(), RequestError> {
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

/// The OAUTHBEARER token for a connection that authenticates now.
enum TokenNow {
    Ready(crate::sasl::OAuthToken),
    /// The asynchronous provider's answer is waited for.
    Wait,
    /// The provider failed, with its message.
    Failed(String),
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
    fn is_setup(self) -> bool {
        matches!(
            self,
            Origin::Handshake | Origin::SaslHandshake | Origin::SaslAuthenticate
        )
    }
}

#[derive(Debug)]
struct Waiting {
    target: Target,
    queued: Queued,
}

/// One address's run of failures: its backoff, and whether the
/// application was told.
#[derive(Debug, Default, Clone)]
struct AddrBackoff {
    /// Failures since a connection to it last answered a request (a
    /// connection that only completed TCP, or the ApiVersions exchange,
    /// does not end the run: a broker that drops every request is backed
    /// off like one that refuses).
    failures: u32,
    until: Option<Instant>,
    last_error: Option<ConnectionError>,
    /// When this run was last reported as a [`Problem`].
    reported: Option<Instant>,
}

/// A repeated internal request (Metadata, FindCoordinator): in flight or
/// not, and its run of failures under the retry policy ([`Retry`]).
#[derive(Debug, Default, Clone, Copy)]
struct Refresh {
    in_flight: bool,
    retry: Retry,
}

impl Refresh {
    fn may_send(&self, now: Instant) -> bool {
        !self.in_flight && self.retry.ready(now)
    }

    /// Marks it sent: in flight, and no longer waiting for its backoff.
    fn sent(&mut self) {
        self.in_flight = true;
        self.retry.clear_wait();
    }

    /// When it may be sent again, if it waits for that (not while in
    /// flight: its response, not time, moves it on).
    fn next_send(&self) -> Option<Instant> {
        (!self.in_flight)
            .then_some(self.retry.not_before())
            .flatten()
    }

    fn succeeded(&mut self) {
        *self = Refresh::default();
    }

    /// Brings a backoff grown by failures back to its first step: the
    /// next attempt waits at most `backoff.base` from `now`.
    fn hurry(&mut self, now: Instant, backoff: &ExponentialBackoff) {
        self.retry.hurry(now, backoff);
    }

    fn failed(&mut self, now: Instant, backoff: &ExponentialBackoff, rng: &mut Rng) {
        self.in_flight = false;
        self.retry.failed(now, backoff, rng.unit());
    }
}

/// The shortest time between two calls of an asynchronous OAUTHBEARER
/// token provider made ahead of need (a provider that hands out tokens of
/// a very short lifetime is not called in a loop).
pub const OAUTH_REFRESH_MIN: Duration = Duration::from_secs(1);

/// OAUTHBEARER tokens (see [`OAuthTokenProvider`](crate::sasl::OAuthTokenProvider)).
#[derive(Debug, Default)]
struct OAuthState {
    /// The last token and when it came: reused while less than 80% of its
    /// lifetime has passed (with an asynchronous provider, until its
    /// lifetime ends, a new one being asked for ahead).
    token: Option<(crate::sasl::OAuthToken, Instant)>,
    /// An [`Action::FetchOAuthToken`] is out and its answer not in.
    fetching: bool,
    /// The asynchronous provider's failures in a row: the next call waits
    /// for the reconnect backoff.
    retry: Retry,
}

impl OAuthState {
    /// When the last token is due for renewal: 80% of its lifetime after
    /// it came (at least [`OAUTH_REFRESH_MIN`]).
    fn renew_at(&self) -> Option<Instant> {
        self.token
            .as_ref()
            .map(|(t, at)| *at + t.lifetime().mul_f64(0.8).max(OAUTH_REFRESH_MIN))
    }
}

/// The connection manager. See the [module documentation](self).
#[derive(Debug)]
pub struct Cluster {
    config: ClusterConfig,
    epoch: Instant,
    rng: Rng,
    conns: BTreeMap<ConnectionId, Conn>,
    /// Per broker, how many of its leader connections have closed (see
    /// [`Cluster::leader_generations`]).
    leader_generations: BTreeMap<i32, u64>,
    /// The same for replica connections ([`Cluster::replica_generations`]).
    replica_generations: BTreeMap<i32, u64>,
    next_conn: u64,
    next_request: u64,
    bootstrap_cursor: usize,
    backoff: HashMap<String, AddrBackoff>,
    counters: BTreeMap<String, BrokerCounters>,
    // metadata
    metadata: Metadata,
    metadata_generation: u64,
    metadata_fetched_at: Option<Instant>,
    metadata_refresh: Refresh,
    metadata_wanted: bool,
    topics: BTreeSet<String>,
    /// Partitions being fetched ([`Cluster::set_partitions_wanted`]): an
    /// answer that names no leader for one of them is incomplete.
    partitions_wanted: BTreeSet<(String, i32)>,
    /// Metadata asks for every topic (a classic pattern subscription).
    all_topics: bool,
    /// Topic ids whose names are wanted (a KIP-848 assignment).
    topic_ids: BTreeSet<[u8; 16]>,
    by_id_refresh: Refresh,
    // group coordinator
    coordinator: Option<BrokerAddress>,
    coordinator_refresh: Refresh,
    // requests
    waiting: VecDeque<Waiting>,
    actions: VecDeque<Action>,
    events: VecDeque<ConnectionEvent>,
    responses: VecDeque<(RequestId, Result<Response, RequestError>)>,
    problems: VecDeque<Problem>,
    /// When "every bootstrap address failed" was last reported.
    bootstrap_reported: Option<Instant>,
    /// When a refused coordinator lookup was last reported.
    coordinator_refusal_reported: Option<Instant>,
    /// Per address, its run of refusals.
    refusals: HashMap<String, RefusalRun>,
    /// The last connection failure, in words, for requests that time out
    /// waiting for a connection.
    last_failure: Option<String>,
    /// OAUTHBEARER tokens: the last one, and the asynchronous provider's
    /// calls.
    oauth: OAuthState,
    shut_down: bool,
}

impl Cluster {
    /// A manager with no connection. `epoch` is the time event timestamps
    /// count from; `seed` drives jitter and the choice of the first
    /// bootstrap address.
    pub fn new(config: ClusterConfig, epoch: Instant, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let bootstrap_cursor = if config.bootstrap.is_empty() {
            0
        } else {
            rng.below(config.bootstrap.len())
        };
        Cluster {
            config,
            epoch,
            rng,
            leader_generations: BTreeMap::new(),
            replica_generations: BTreeMap::new(),
            conns: BTreeMap::new(),
            next_conn: 1,
            next_request: 1,
            bootstrap_cursor,
            backoff: HashMap::new(),
            counters: BTreeMap::new(),
            metadata: Metadata::default(),
            metadata_generation: 0,
            metadata_fetched_at: None,
            metadata_refresh: Refresh::default(),
            metadata_wanted: false,
            topics: BTreeSet::new(),
            partitions_wanted: BTreeSet::new(),
            all_topics: false,
            topic_ids: BTreeSet::new(),
            by_id_refresh: Refresh::default(),
            coordinator: None,
            coordinator_refresh: Refresh::default(),
            waiting: VecDeque::new(),
            actions: VecDeque::new(),
            events: VecDeque::new(),
            responses: VecDeque::new(),
            problems: VecDeque::new(),
            bootstrap_reported: None,
            coordinator_refusal_reported: None,
            refusals: HashMap::new(),
            last_failure: None,
            oauth: OAuthState::default(),
            shut_down: false,
        }
    }

    // ===== inputs =====

    /// Sets the topics whose metadata is kept. A topic not yet in the cache
    /// makes the next [`Cluster::handle_timeout`] (or request) send a
    /// Metadata request; this call itself connects nothing, and
    /// [`Cluster::poll_timeout`] reports the work as due at once.
    pub fn set_topics(&mut self, topics: impl IntoIterator<Item = String>) {
        let topics: BTreeSet<String> = topics.into_iter().collect();
        if topics != self.topics {
            self.topics = topics;
            if !self
                .topics
                .iter()
                .all(|t| self.metadata.topics.contains_key(t))
            {
                self.metadata_wanted = true;
            }
        }
    }

    /// The partitions being fetched (their topics among those of
    /// [`Cluster::set_topics`]): while the metadata names no leader for one
    /// of them (a partition it does not list, such as one the group
    /// assigned after the topic grew, or a leaderless one), Metadata is
    /// asked again with the retry backoff, as for a missing topic, not only
    /// after `metadata.max.age.ms`. Connects nothing.
    pub fn set_partitions_wanted(&mut self, partitions: BTreeSet<(String, i32)>) {
        if partitions != self.partitions_wanted {
            self.partitions_wanted = partitions;
            if !self.leaders_known(&self.metadata) {
                self.metadata_wanted = true;
            }
        }
    }

    /// Whether `md` names a leader for every partition wanted.
    fn leaders_known(&self, md: &Metadata) -> bool {
        self.partitions_wanted
            .iter()
            .all(|(t, p)| md.leader(t, *p).is_some())
    }

    /// Makes Metadata requests ask for every topic (`true`: a classic
    /// pattern subscription matches the pattern against them) or for the
    /// topics of [`Cluster::set_topics`] only. Turning it on asks for
    /// metadata at the next step; afterwards it is refreshed every
    /// `metadata.max.age.ms`, as for named topics. Connects nothing.
    pub fn set_all_topics(&mut self, all: bool) {
        if all != self.all_topics {
            self.all_topics = all;
            if all {
                self.metadata_wanted = true;
            }
        }
    }

    /// Sets the topic ids whose names (and partitions) the caller needs: a
    /// KIP-848 assignment names topics by id. Ids the cache does not know
    /// are looked up with a Metadata request by id (v12+; every topic
    /// below v12) at the next step, merged into the cache, and asked for
    /// again after the retry backoff while some stay unknown. Connects
    /// nothing by itself.
    pub fn set_topic_ids(&mut self, ids: impl IntoIterator<Item = [u8; 16]>) {
        let ids: BTreeSet<[u8; 16]> = ids.into_iter().filter(|id| *id != [0; 16]).collect();
        if ids != self.topic_ids {
            // New ids are looked up at once, not after an old backoff.
            if !ids.is_subset(&self.topic_ids) {
                self.by_id_refresh.retry.clear_wait();
            }
            self.topic_ids = ids;
        }
    }

    /// The wanted topic ids no cached topic has.
    fn unresolved_ids(&self) -> Vec<[u8; 16]> {
        let known: BTreeSet<[u8; 16]> = self.metadata.topics.values().map(|t| t.topic_id).collect();
        self.topic_ids
            .iter()
            .filter(|id| !known.contains(*id))
            .copied()
            .collect()
    }

    /// Whether metadata is kept at all (and so refreshed when it ages).
    fn keeps_metadata(&self) -> bool {
        self.all_topics || !self.topics.is_empty()
    }

    /// Asks for fresh metadata (after a leader error, for instance). A
    /// backoff grown by incomplete answers (an unrelated topic unknown, a
    /// partition without a leader for a while) comes back to
    /// `retry.backoff.ms`: a leader that moved is looked up as soon as
    /// when all was well. (What calls this is itself backed off.)
    pub fn request_metadata_refresh(&mut self, now: Instant) {
        self.metadata_refresh.hurry(now, &self.config.retry_backoff);
        self.metadata_wanted = true;
        self.drive(now);
    }

    /// Asks for fresh metadata at the next step, without acting now.
    pub fn request_metadata_refresh_later(&mut self) {
        self.metadata_wanted = true;
    }

    /// Forgets the coordinator (after NOT_COORDINATOR or
    /// COORDINATOR_NOT_AVAILABLE): its connection is closed and the next
    /// coordinator request looks it up again.
    pub fn coordinator_unknown(&mut self, now: Instant) {
        self.coordinator = None;
        let coordinator_conns: Vec<ConnectionId> = self
            .conns
            .values()
            .filter(|c| c.purpose == Purpose::Coordinator)
            .map(|c| c.id)
            .collect();
        for id in coordinator_conns {
            self.close(now, id, CloseReason::Retired, None);
        }
        self.drive(now);
    }

    /// Queues a request for `target`. Its outcome comes out of
    /// [`Cluster::poll_response`].
    ///
    /// Group APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
    /// OffsetCommit, OffsetFetch, ConsumerGroupHeartbeat) must go to
    /// [`Target::Coordinator`], ListOffsets and OffsetForLeaderEpoch to a
    /// [`Target::Broker`], and Fetch to a [`Target::Broker`] or a
    /// [`Target::Replica`]; otherwise the request fails with
    /// [`RequestError::WrongTarget`] without being sent.
    pub fn request(
        &mut self,
        now: Instant,
        target: Target,
        body: Box<dyn RequestBody>,
    ) -> RequestId {
        let timeout = self.config.request_timeout;
        self.request_with_timeout(now, target, body, timeout)
    }

    /// Like [`Cluster::request`], for a request the broker does not answer
    /// (a Produce with `acks=0`): it is written like any other, nothing is
    /// waited for, and its outcome, a [`Response`] with an empty body, comes
    /// out of [`Cluster::poll_response`] once its bytes are handed to the
    /// socket (or an error, if it could not be).
    pub fn request_unanswered(
        &mut self,
        now: Instant,
        target: Target,
        body: Box<dyn RequestBody>,
    ) -> RequestId {
        let timeout = self.config.request_timeout;
        self.queue_request(now, target, body, timeout, false)
    }

    /// Like [`Cluster::request`], with its own timeout (JoinGroup waits up
    /// to the rebalance timeout on the broker, longer than
    /// `request.timeout.ms`).
    pub fn request_with_timeout(
        &mut self,
        now: Instant,
        target: Target,
        body: Box<dyn RequestBody>,
        timeout: Duration,
    ) -> RequestId {
        self.queue_request(now, target, body, timeout, true)
    }

    fn queue_request(
        &mut self,
        now: Instant,
        target: Target,
        body: Box<dyn RequestBody>,
        timeout: Duration,
        answered: bool,
    ) -> RequestId {
        let id = RequestId(self.next_request);
        self.next_request += 1;
        if let Err(e) = check_route(body.api_key(), target) {
            self.responses.push_back((id, Err(e)));
            return id;
        }
        self.waiting.push_back(Waiting {
            target,
            queued: Queued {
                origin: Origin::User(id),
                body,
                deadline: now + timeout,
                answered,
            },
        });
        self.drive(now);
        id
    }

    /// The TCP connection of `conn` is established.
    pub fn handle_connected(&mut self, now: Instant, conn: ConnectionId, peer: SocketAddr) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.peer = Some(peer);
        c.last_activity = now;
        let exchange = crate::protocol::ApiVersionsExchange::new();
        let version = exchange.version();
        c.phase = Phase::Handshake { exchange };
        self.emit(now, conn, EventKind::Opened);
        self.send_handshake(now, conn, version);
        self.drive(now);
    }

    /// Connecting `conn` failed (refused, unreachable, DNS, timeout).
    pub fn handle_connect_failed(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        error: ConnectionError,
    ) {
        if let Some(c) = self.conns.remove(&conn) {
            self.connect_failed(now, c, error);
        }
        self.drive(now);
    }

    /// The largest response frame accepted (`receive.message.max.bytes`):
    /// a reader may buffer up to this much for one frame.
    pub fn max_frame_size(&self) -> usize {
        self.config.max_frame_size
    }

    /// Bytes arrived on `conn`.
    pub fn handle_received(&mut self, now: Instant, conn: ConnectionId, bytes: &[u8]) {
        self.handle_received_buf(now, conn, BytesMut::from(bytes));
    }

    /// Like [`Cluster::handle_received`], taking the buffer: when it holds
    /// whole frames (as the runtime's reader delivers them), the response
    /// bodies are slices of it and nothing is copied.
    pub fn handle_received_buf(&mut self, now: Instant, conn: ConnectionId, bytes: BytesMut) {
        self.handle_received_with(now, conn, bytes.len(), |c| c.receive(now, bytes));
    }

    /// Like [`Cluster::handle_received_buf`], for one whole frame (its size
    /// prefix included) in a buffer of its own, as the runtime's reader
    /// delivers it: the response body is a slice of `frame`.
    pub fn handle_received_frame(&mut self, now: Instant, conn: ConnectionId, frame: Bytes) {
        self.handle_received_with(now, conn, frame.len(), |c| c.receive_frame(now, frame));
    }

    fn handle_received_with(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        len: usize,
        receive: impl FnOnce(&mut Conn) -> Result<Vec<(InFlight, Bytes)>, StreamError>,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let addr = c.addr.clone();
        self.counter(&addr).bytes_in += len as u64;
        let c = self.conns.get_mut(&conn).expect("present");
        match receive(c) {
            Ok(responses) => {
                for (request, body) in responses {
                    let rtt = now.saturating_duration_since(request.sent_at);
                    self.counter(&addr).count_rtt(rtt);
                    self.handle_response(
                        now,
                        conn,
                        request.origin,
                        request.api,
                        request.version,
                        body,
                    );
                }
            }
            Err(e) => {
                let cause = match e {
                    StreamError::Frame(_)
                    | StreamError::Decode(..)
                    | StreamError::Correlation { .. } => ConnectionError::protocol(e),
                };
                self.close(now, conn, CloseReason::Error, Some(cause));
            }
        }
        self.drive(now);
    }

    /// The peer closed `conn` (EOF: [`ConnectionError::ClosedByBroker`]) or
    /// it failed (reset, IO error). The client closes its side at once: a
    /// [`Action::Close`] follows.
    pub fn handle_closed(&mut self, now: Instant, conn: ConnectionId, cause: ConnectionError) {
        if self.conns.contains_key(&conn) {
            let reason = cause.close_reason();
            self.close(now, conn, reason, Some(cause));
        }
        self.drive(now);
    }

    /// Time passed: expire deadlines, reap idle connections, refresh
    /// metadata.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.drive(now);
    }

    /// Closes every connection and fails every request.
    pub fn shutdown(&mut self, now: Instant) {
        self.shut_down = true;
        let ids: Vec<ConnectionId> = self.conns.keys().copied().collect();
        for id in ids {
            self.close(now, id, CloseReason::Shutdown, None);
        }
        for w in std::mem::take(&mut self.waiting) {
            self.fail(w.queued.origin, RequestError::Shutdown);
        }
    }

    // ===== outputs =====

    /// The next thing the runtime must do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The next connection event.
    pub fn poll_event(&mut self) -> Option<ConnectionEvent> {
        self.events.pop_front()
    }

    /// The next condition to report to the application.
    pub fn poll_problem(&mut self) -> Option<Problem> {
        self.problems.pop_front()
    }

    /// The next finished request.
    pub fn poll_response(&mut self) -> Option<(RequestId, Result<Response, RequestError>)> {
        self.responses.pop_front()
    }

    /// When [`Cluster::handle_timeout`] must be called next, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        for c in self.conns.values() {
            if let Phase::Connecting { deadline } = c.phase {
                consider(Some(deadline));
            }
            if !c.is_usable() {
                consider(c.setup_deadline);
            }
            if let Phase::Ready {
                reauth_at: Some(t), ..
            } = c.phase
            {
                // With requests in flight, the last response starts the
                // re-authentication, not time.
                if c.in_flight.is_empty() {
                    consider(Some(t));
                }
            }
            consider(c.next_request_deadline());
            consider(self.idle_deadline(c));
        }
        for w in &self.waiting {
            consider(Some(w.queued.deadline));
        }
        if !self.waiting.is_empty() {
            // A waiting request may get its connection when a backoff ends
            // (ended ones were cleared by the last step).
            consider(self.backoff.values().filter_map(|b| b.until).min());
        }
        if !self.metadata_refresh.in_flight && (self.metadata_wanted || self.keeps_metadata()) {
            // Wanted now (the epoch is in the past: due at the first step),
            // or when the cache grows old; never before the retry backoff
            // ends. (While in flight, its response moves it on, not time.)
            let due = match self.metadata_fetched_at {
                Some(t) if !self.metadata_wanted => t + self.config.metadata_max_age,
                _ => self.epoch,
            };
            consider(Some(
                self.metadata_refresh
                    .next_send()
                    .map_or(due, |t| t.max(due)),
            ));
        }
        if !self.by_id_refresh.in_flight && !self.unresolved_ids().is_empty() {
            consider(Some(self.by_id_refresh.next_send().unwrap_or(self.epoch)));
        }
        if self.config.group_id.is_some()
            && self.coordinator.is_none()
            && self.waiting.iter().any(|w| w.target == Target::Coordinator)
        {
            consider(self.coordinator_refresh.next_send());
        }
        consider(self.oauth_due());
        next
    }

    // ===== getters =====

    /// The cached metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Per broker id, how many leader connections to it have closed (for
    /// any reason: idle reaping, the peer, an error, retirement). A number
    /// that changed means the connection `Target::Broker(id)` requests go
    /// on is not the one they went on before: state kept per connection,
    /// such as the fetcher's fetch sessions (KIP-227), ends with it.
    /// Brokers whose leader connections never closed are absent (0).
    pub fn leader_generations(&self) -> &BTreeMap<i32, u64> {
        &self.leader_generations
    }

    /// Like [`Cluster::leader_generations`], for replica connections
    /// (`Target::Replica(id)`, KIP-392): per broker, how many replica
    /// connections to it have closed.
    pub fn replica_generations(&self) -> &BTreeMap<i32, u64> {
        &self.replica_generations
    }

    /// Grows by one with every metadata update.
    pub fn metadata_generation(&self) -> u64 {
        self.metadata_generation
    }

    /// The group coordinator, once found.
    pub fn coordinator(&self) -> Option<&BrokerAddress> {
        self.coordinator.as_ref()
    }

    /// A snapshot of the live connections.
    pub fn connections(&self, now: Instant) -> Vec<ConnectionInfo> {
        self.conns
            .values()
            .map(|c| ConnectionInfo {
                id: c.id,
                broker: c.broker,
                addr: c.addr.clone(),
                purpose: c.purpose,
                state: c.state(),
                in_flight: c.in_flight.len(),
                idle_for: now.saturating_duration_since(c.last_activity),
            })
            .collect()
    }

    /// Whether `conn` is a connection attempt still wanted (a runtime whose
    /// connect completes late must close the socket otherwise).
    pub fn is_connecting(&self, conn: ConnectionId) -> bool {
        self.conns
            .get(&conn)
            .is_some_and(|c| matches!(c.phase, Phase::Connecting { .. }))
    }

    /// Counters per broker address.
    pub fn counters(&self) -> &BTreeMap<String, BrokerCounters> {
        &self.counters
    }

    /// The versions negotiated on connection `conn`, once it is ready.
    pub fn connection_versions(
        &self,
        conn: ConnectionId,
    ) -> Option<&crate::protocol::ApiVersionTable> {
        self.conns.get(&conn).and_then(|c| c.versions())
    }

    /// The socket address connection `conn` reached, once connected.
    pub fn connection_peer(&self, conn: ConnectionId) -> Option<SocketAddr> {
        self.conns.get(&conn).and_then(|c| c.peer)
    }

    /// Opens a connection to the least-loaded broker ahead of any request
    /// (docs/connections.md, rule 2: a live connection if there is one, else a bootstrap
    /// address not in backoff), for a tool that wants a ready connection
    /// before it sends anything. `None` while every bootstrap address is
    /// in reconnect backoff.
    pub fn connect_least_loaded(&mut self, now: Instant) -> Option<ConnectionId> {
        let id = self.least_loaded(now);
        self.drive(now);
        id
    }

    /// The versions negotiated with broker `broker` on its leader connection,
    /// if that connection is ready.
    pub fn leader_versions(&self, broker: i32) -> Option<&crate::protocol::ApiVersionTable> {
        self.conns
            .values()
            .find(|c| c.purpose == Purpose::Leader && c.broker == Some(broker))
            .and_then(|c| c.versions())
    }

    // ===== the machine =====

    fn drive(&mut self, now: Instant) {
        if self.shut_down {
            return;
        }
        // Backoffs that ended are no longer waited for (their failure
        // counts stay, for the next delay).
        for b in self.backoff.values_mut() {
            if b.until.is_some_and(|t| now >= t) {
                b.until = None;
            }
        }
        self.expire(now);
        self.schedule_internal_requests(now);
        self.dispatch_waiting(now);
        self.reauthenticate(now);
        self.drive_oauth(now);
        self.flush_queues(now);
        self.retire_bootstrap(now);
        self.reap_idle(now);
    }

    fn expire(&mut self, now: Instant) {
        // Connect attempts past their setup timeout.
        let late: Vec<ConnectionId> = self
            .conns
            .values()
            .filter(|c| matches!(c.phase, Phase::Connecting { deadline } if now >= deadline))
            .map(|c| c.id)
            .collect();
        for id in late {
            let c = self.conns.remove(&id).expect("present");
            self.actions.push_back(Action::Close { conn: id });
            self.connect_failed(now, c, ConnectionError::SetupTimeout);
        }
        // Connected, but the setup (ApiVersions, SASL) did not finish within
        // the setup timeout, which covers it all.
        let slow: Vec<ConnectionId> = self
            .conns
            .values()
            .filter(|c| {
                !matches!(c.phase, Phase::Connecting { .. })
                    && !c.is_usable()
                    && c.setup_deadline.is_some_and(|t| now >= t)
            })
            .map(|c| c.id)
            .collect();
        for id in slow {
            self.close(
                now,
                id,
                CloseReason::Error,
                Some(ConnectionError::SetupTimeout),
            );
        }
        // Requests past request.timeout.ms: the connection is closed, as the
        // Java client does, since the broker may never answer in order again.
        let timed_out: Vec<(ConnectionId, ApiKey)> = self
            .conns
            .values()
            .filter_map(|c| {
                c.in_flight
                    .iter()
                    .find(|r| now >= r.deadline)
                    .map(|r| (c.id, r.api))
            })
            .collect();
        for (id, api) in timed_out {
            self.close(
                now,
                id,
                CloseReason::Error,
                Some(ConnectionError::RequestTimeout {
                    api: api.to_string(),
                }),
            );
        }
        // Requests that never got a connection in time.
        let mut kept = VecDeque::new();
        for w in std::mem::take(&mut self.waiting) {
            if now >= w.queued.deadline {
                let api = w.queued.body.api_key();
                let last_error = self.last_failure.clone();
                self.fail(w.queued.origin, RequestError::Timeout { api, last_error });
            } else {
                kept.push_back(w);
            }
        }
        self.waiting = kept;
        for c in self.conns.values_mut() {
            let (expired, kept): (Vec<Queued>, Vec<Queued>) =
                c.queue.drain(..).partition(|q| now >= q.deadline);
            c.queue = kept.into();
            if !expired.is_empty() {
                self.counters
                    .entry(c.addr.clone())
                    .or_default()
                    .request_errors += expired.len() as u64;
            }
            for q in expired {
                let api = q.body.api_key();
                if let Origin::User(id) = q.origin {
                    self.responses.push_back((
                        id,
                        Err(RequestError::Timeout {
                            api,
                            last_error: None,
                        }),
                    ));
                }
            }
        }
    }

    fn schedule_internal_requests(&mut self, now: Instant) {
        let stale = match self.metadata_fetched_at {
            None => true,
            Some(t) => now.saturating_duration_since(t) >= self.config.metadata_max_age,
        };
        if ((self.keeps_metadata() && stale) || self.metadata_wanted)
            && self.metadata_refresh.may_send(now)
        {
            self.metadata_refresh.sent();
            self.metadata_wanted = false;
            let body = metadata::request(
                &self.topics,
                self.all_topics,
                self.config.allow_auto_create_topics,
            );
            self.waiting.push_back(Waiting {
                target: Target::AnyBroker,
                queued: Queued {
                    origin: Origin::Metadata,
                    body,
                    deadline: now + self.config.request_timeout,
                    answered: true,
                },
            });
        }
        let unresolved = self.unresolved_ids();
        if !unresolved.is_empty() && self.by_id_refresh.may_send(now) {
            self.by_id_refresh.sent();
            log::debug!(
                "looking up {} topic id(s) the metadata does not know",
                unresolved.len()
            );
            self.waiting.push_back(Waiting {
                target: Target::AnyBroker,
                queued: Queued {
                    origin: Origin::MetadataById,
                    body: Box::new(metadata::MetadataByTopicId(unresolved)),
                    deadline: now + self.config.request_timeout,
                    answered: true,
                },
            });
        }
        let coordinator_needed = self.waiting.iter().any(|w| w.target == Target::Coordinator);
        if let Some(group) = &self.config.group_id {
            if self.coordinator.is_none()
                && coordinator_needed
                && self.coordinator_refresh.may_send(now)
            {
                self.coordinator_refresh.sent();
                let body = metadata::find_coordinator_request(group);
                self.waiting.push_back(Waiting {
                    target: Target::AnyBroker,
                    queued: Queued {
                        origin: Origin::FindCoordinator,
                        body,
                        deadline: now + self.config.request_timeout,
                        answered: true,
                    },
                });
            }
        }
    }

    /// Moves waiting requests onto connections, opening connections where
    /// a request needs one.
    fn dispatch_waiting(&mut self, now: Instant) {
        let mut still = VecDeque::new();
        for w in std::mem::take(&mut self.waiting) {
            match self.connection_for(now, w.target) {
                Ok(Some(id)) => {
                    self.conns
                        .get_mut(&id)
                        .expect("connection_for returns live ids")
                        .queue
                        .push_back(w.queued);
                }
                Ok(None) => still.push_back(w),
                Err(e) => self.fail(w.queued.origin, e),
            }
        }
        self.waiting = still;
    }

    /// The connection a request for `target` should use, opening one if
    /// needed. `Ok(None)`: not now (backoff, coordinator unknown).
    fn connection_for(
        &mut self,
        now: Instant,
        target: Target,
    ) -> Result<Option<ConnectionId>, RequestError> {
        match target {
            Target::AnyBroker => Ok(self.least_loaded(now)),
            Target::Bootstrap => match self
                .conns
                .values()
                .find(|c| c.purpose == Purpose::Bootstrap)
            {
                Some(c) => Ok(Some(c.id)),
                None => Ok(self.open_bootstrap(now)),
            },
            Target::Coordinator => {
                if self.config.group_id.is_none() {
                    return Err(RequestError::NoGroup);
                }
                if let Some(c) = self
                    .conns
                    .values()
                    .find(|c| c.purpose == Purpose::Coordinator)
                {
                    return Ok(Some(c.id));
                }
                let Some(coordinator) = self.coordinator.clone() else {
                    return Ok(None);
                };
                Ok(self.open(
                    now,
                    coordinator.addr(),
                    Some(coordinator.id),
                    Purpose::Coordinator,
                ))
            }
            Target::Broker(id) => {
                if let Some(c) = self
                    .conns
                    .values()
                    .find(|c| c.purpose == Purpose::Leader && c.broker == Some(id))
                {
                    return Ok(Some(c.id));
                }
                let Some(broker) = self.metadata.brokers.get(&id).cloned() else {
                    // Not in the metadata (yet): refresh it, after the retry
                    // backoff if it is already fresh, and wait; the request's
                    // own deadline bounds the wait.
                    if !self.metadata_wanted && !self.metadata_refresh.in_flight {
                        self.metadata_wanted = true;
                        if self.metadata_fetched_at.is_some() {
                            self.metadata_refresh.failed(
                                now,
                                &self.config.retry_backoff,
                                &mut self.rng,
                            );
                        }
                    }
                    return Ok(None);
                };
                let addr = broker.addr();
                if let Some(cid) = self.promote(now, &addr, id, Purpose::Leader) {
                    return Ok(Some(cid));
                }
                Ok(self.open(now, addr, Some(id), Purpose::Leader))
            }
            Target::Replica(id) => {
                if let Some(c) = self
                    .conns
                    .values()
                    .find(|c| c.purpose == Purpose::Replica && c.broker == Some(id))
                {
                    return Ok(Some(c.id));
                }
                // Unlike a leader, a read replica is not waited for: the
                // caller fetches from the leader instead (KIP-392, as the
                // Java consumer falls back when the preferred replica is
                // offline or missing from its metadata).
                let Some(broker) = self.metadata.brokers.get(&id).cloned() else {
                    return Err(RequestError::ReplicaUnavailable {
                        broker: id,
                        reason: "the broker is not in the metadata".into(),
                    });
                };
                let addr = broker.addr();
                if self.in_backoff(now, &addr) {
                    let reason = match self.backoff.get(&addr).and_then(|b| b.last_error.as_ref()) {
                        Some(e) => format!("{addr} is in reconnect backoff after: {e}"),
                        None => format!("{addr} is in reconnect backoff"),
                    };
                    return Err(RequestError::ReplicaUnavailable { broker: id, reason });
                }
                if let Some(cid) = self.promote(now, &addr, id, Purpose::Replica) {
                    return Ok(Some(cid));
                }
                Ok(self.open(now, addr, Some(id), Purpose::Replica))
            }
        }
    }

    /// docs/connections.md, rule 6: a bootstrap connection that reaches broker `id` (at
    /// `addr`) becomes its leader (or replica) connection instead of a
    /// second socket being opened. Returns that connection.
    fn promote(
        &mut self,
        now: Instant,
        addr: &str,
        id: i32,
        purpose: Purpose,
    ) -> Option<ConnectionId> {
        let cid = self
            .conns
            .values()
            .find(|c| {
                c.purpose == Purpose::Bootstrap
                    && (c.addr == addr || c.peer.is_some_and(|p| p.to_string() == addr))
            })
            .map(|c| c.id)?;
        let c = self.conns.get_mut(&cid).expect("present");
        c.purpose = purpose;
        c.broker = Some(id);
        let addr = c.addr.clone();
        self.counter(&addr).broker = Some(id);
        self.emit(now, cid, EventKind::Promoted);
        Some(cid)
    }

    /// docs/connections.md, rule 2: the least-loaded ready leader or replica
    /// connection, else the coordinator connection, else the bootstrap
    /// connection (at most one exists), else a new bootstrap connection.
    fn least_loaded(&mut self, now: Instant) -> Option<ConnectionId> {
        let pick = |purposes: &[Purpose], ready_only: bool| {
            self.conns
                .values()
                .filter(|c| purposes.contains(&c.purpose) && (!ready_only || c.is_usable()))
                .min_by_key(|c| (c.load(), c.id))
                .map(|c| c.id)
        };
        if let Some(id) = pick(&[Purpose::Leader, Purpose::Replica], true)
            .or_else(|| pick(&[Purpose::Coordinator], true))
            .or_else(|| pick(&[Purpose::Bootstrap], false))
        {
            return Some(id);
        }
        self.open_bootstrap(now)
    }

    fn open_bootstrap(&mut self, now: Instant) -> Option<ConnectionId> {
        let n = self.config.bootstrap.len();
        for step in 0..n {
            let i = (self.bootstrap_cursor + step) % n;
            let addr = self.config.bootstrap[i].clone();
            if self.in_backoff(now, &addr) {
                continue;
            }
            self.bootstrap_cursor = (i + 1) % n;
            return self.open(now, addr, None, Purpose::Bootstrap);
        }
        None
    }

    fn in_backoff(&self, now: Instant, addr: &str) -> bool {
        self.backoff
            .get(addr)
            .and_then(|b| b.until)
            .is_some_and(|until| now < until)
    }

    fn open(
        &mut self,
        now: Instant,
        addr: String,
        broker: Option<i32>,
        purpose: Purpose,
    ) -> Option<ConnectionId> {
        if self.in_backoff(now, &addr) {
            return None;
        }
        let failures = self.backoff.get(&addr).map_or(0, |b| b.failures);
        let timeout = self
            .config
            .setup_timeout
            .delay(failures + 1, self.rng.unit());
        let id = ConnectionId(self.next_conn);
        self.next_conn += 1;
        let conn = Conn::new(
            id,
            addr.clone(),
            broker,
            purpose,
            now,
            now + timeout,
            self.config.max_frame_size,
        );
        self.conns.insert(id, conn);
        let counter = self.counter(&addr);
        counter.connects += 1;
        if broker.is_some() {
            counter.broker = broker;
        }
        self.actions.push_back(Action::Connect {
            conn: id,
            addr,
            timeout,
        });
        self.emit(now, id, EventKind::Connecting);
        Some(id)
    }

    fn flush_queues(&mut self, now: Instant) {
        let ids: Vec<ConnectionId> = self.conns.keys().copied().collect();
        for id in ids {
            let mut frames = BytesMut::new();
            let mut failed = Vec::new();
            let mut unanswered = Vec::new();
            let mut sent = 0u64;
            let client_id = self.config.client_id.clone();
            let c = self.conns.get_mut(&id).expect("present");
            let Phase::Ready {
                versions,
                reauth_at,
            } = &c.phase
            else {
                continue;
            };
            if reauth_at.is_some_and(|t| now >= t) {
                // KIP-368: the session is being renewed; requests wait.
                continue;
            }
            let versions = versions.clone();
            while c.in_flight.len() < self.config.max_in_flight {
                let Some(q) = c.queue.pop_front() else { break };
                let api = q.body.api_key();
                let version = match versions.version(api) {
                    Ok(v) => v,
                    Err(e) => {
                        failed.push((q.origin, RequestError::NoCommonVersion(e)));
                        continue;
                    }
                };
                match c.encode(
                    &mut frames,
                    now,
                    q.origin,
                    q.body.as_ref(),
                    version,
                    client_id.as_deref(),
                    q.deadline,
                ) {
                    Ok(()) => {
                        sent += 1;
                        if !q.answered {
                            // Nothing will come back for it: not in flight;
                            // done once written.
                            c.in_flight.pop_back();
                            unanswered.push((q.origin, api, version));
                        }
                    }
                    Err(e) => failed.push((q.origin, RequestError::Encode(api, e))),
                }
            }
            let written = (!unanswered.is_empty()).then(|| {
                c.transmits += 1;
                let n = c.transmits;
                c.unwritten
                    .extend(unanswered.into_iter().map(|(o, a, v)| (n, o, a, v)));
                n
            });
            let addr = c.addr.clone();
            for (origin, e) in failed {
                self.fail(origin, e);
            }
            if !frames.is_empty() {
                // Every frame in one buffer: one write, nothing copied to
                // join them.
                let bytes = frames.freeze();
                let counter = self.counter(&addr);
                counter.requests += sent;
                counter.bytes_out += bytes.len() as u64;
                self.actions.push_back(Action::Transmit {
                    conn: id,
                    bytes,
                    written,
                });
            }
        }
    }

    /// The runtime handed to `conn`'s socket every byte up to the
    /// [`Action::Transmit`] whose `written` was `n`: the requests it
    /// carried that the broker does not answer are done.
    pub fn handle_written(&mut self, conn: ConnectionId, n: u64) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let broker = c.broker;
        while c.unwritten.front().is_some_and(|(t, ..)| *t <= n) {
            let (_, origin, api, version) = c.unwritten.pop_front().expect("checked");
            if let Origin::User(id) = origin {
                let response = Response {
                    api,
                    version,
                    broker,
                    body: Bytes::new(),
                };
                self.responses.push_back((id, Ok(response)));
            }
        }
    }

    /// Closes `conn` after a response that could not be decoded: the
    /// broker and the client disagree on the protocol, and nothing more
    /// read from it can be trusted.
    fn close_undecodable(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        api: ApiKey,
        e: &dyn std::fmt::Display,
    ) {
        self.close(
            now,
            conn,
            CloseReason::Error,
            Some(ConnectionError::protocol(format_args!(
                "cannot decode {api} response: {e}"
            ))),
        );
    }

    /// docs/connections.md, rule 6: the bootstrap connection goes once the coordinator (in
    /// group mode) and at least one leader (or replica) connection are
    /// ready, and nothing is in flight on it.
    fn retire_bootstrap(&mut self, now: Instant) {
        let leader_ready = self
            .conns
            .values()
            .any(|c| matches!(c.purpose, Purpose::Leader | Purpose::Replica) && c.is_ready());
        let coordinator_ready = self.config.group_id.is_none()
            || self
                .conns
                .values()
                .any(|c| c.purpose == Purpose::Coordinator && c.is_ready());
        if !(leader_ready && coordinator_ready) {
            return;
        }
        let idle_bootstrap: Vec<ConnectionId> = self
            .conns
            .values()
            .filter(|c| c.purpose == Purpose::Bootstrap && c.load() == 0 && c.is_ready())
            .map(|c| c.id)
            .collect();
        for id in idle_bootstrap {
            self.emit(now, id, EventKind::Retired);
            self.close(now, id, CloseReason::Retired, None);
        }
    }

    fn idle_deadline(&self, c: &Conn) -> Option<Instant> {
        let max_idle = self.config.connections_max_idle?;
        (c.is_ready() && c.load() == 0).then(|| c.last_activity + max_idle)
    }

    fn reap_idle(&mut self, now: Instant) {
        let idle: Vec<ConnectionId> = self
            .conns
            .values()
            .filter(|c| self.idle_deadline(c).is_some_and(|t| now >= t))
            .map(|c| c.id)
            .collect();
        for id in idle {
            self.close(now, id, CloseReason::Idle, None);
        }
    }

    // ===== responses =====

    fn send_handshake(&mut self, now: Instant, conn: ConnectionId, version: i16) {
        let request =
            crate::protocol::messages::api_versions::ApiVersionsRequest::from_this_client();
        self.send_setup(now, conn, Origin::Handshake, &request, version);
    }

    /// Sends a request that sets the connection up (ApiVersions, SASL)
    /// ahead of anything queued: it is encoded here and never stored, so
    /// SASL messages (which carry secrets) live no longer than the write.
    fn send_setup(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        origin: Origin,
        request: &dyn RequestBody,
        version: i16,
    ) {
        let client_id = self.config.client_id.clone();
        let deadline = now + self.config.request_timeout;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let mut frame = BytesMut::new();
        match c.encode(
            &mut frame,
            now,
            origin,
            request,
            version,
            client_id.as_deref(),
            deadline,
        ) {
            Ok(()) => {
                let bytes = frame.freeze();
                let addr = c.addr.clone();
                let counter = self.counter(&addr);
                counter.requests += 1;
                counter.bytes_out += bytes.len() as u64;
                self.actions.push_back(Action::Transmit {
                    conn,
                    bytes,
                    written: None,
                });
            }
            Err(e) => self.close(
                now,
                conn,
                CloseReason::Error,
                Some(ConnectionError::protocol(e)),
            ),
        }
    }

    /// The connection may carry requests: versions negotiated and, with
    /// SASL, authenticated.
    fn became_ready(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        versions: crate::protocol::ApiVersionTable,
        reauth_at: Option<Instant>,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.phase = Phase::Ready {
            versions,
            reauth_at,
        };
        c.setup_deadline = None;
        self.emit(now, conn, EventKind::Ready);
    }

    /// Starts SASL on `conn` (KIP-43, KIP-152): SaslHandshake v1 names the
    /// mechanism; the SaslAuthenticate exchange follows its answer.
    fn start_authentication(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        versions: crate::protocol::ApiVersionTable,
        reauth: bool,
    ) {
        let Some(sasl) = self.config.sasl.as_ref() else {
            return;
        };
        let mechanism = sasl.mechanism;
        // v0 would mean raw SASL tokens outside Kafka's framing (before
        // KIP-152); this client speaks only v1, with SaslAuthenticate.
        let handshake = versions
            .version(ApiKey::SaslHandshake)
            .ok()
            .filter(|v| *v >= 1);
        let authenticate = versions.version(ApiKey::SaslAuthenticate).ok();
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.phase = Phase::Authenticating {
            versions,
            session: None,
            reauth,
            awaiting_token: false,
        };
        match (handshake, authenticate) {
            (Some(v), Some(_)) => {
                let request = crate::protocol::messages::sasl_handshake::SaslHandshakeRequest {
                    mechanism: mechanism.name().to_owned(),
                };
                self.send_setup(now, conn, Origin::SaslHandshake, &request, v);
            }
            _ => self.authentication_failed(
                now,
                conn,
                "the broker does not support SaslHandshake v1 and SaslAuthenticate \
                 (KIP-152); is this a SASL listener of Kafka 1.0 or later?"
                    .to_owned(),
            ),
        }
    }

    /// Closes `conn` for a failed authentication; [`Cluster::failed`]
    /// reports it and backs the address off.
    fn authentication_failed(&mut self, now: Instant, conn: ConnectionId, message: String) {
        let mechanism = self
            .config
            .sasl
            .as_ref()
            .map_or("?", |s| s.mechanism.name())
            .to_owned();
        self.close(
            now,
            conn,
            CloseReason::Error,
            Some(ConnectionError::Authentication { mechanism, message }),
        );
    }

    fn handle_sasl_handshake(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        version: i16,
        body: Bytes,
    ) {
        use crate::protocol::messages::sasl_handshake::SaslHandshakeResponse;
        let response = match crate::protocol::messages::decode_response_body::<SaslHandshakeResponse>(
            body, version,
        ) {
            Ok((r, _)) => r,
            Err(e) => return self.close_undecodable(now, conn, ApiKey::SaslHandshake, &e),
        };
        let Some(sasl) = self.config.sasl.clone() else {
            return;
        };
        if response.error_code != 0 {
            let code = crate::protocol::ErrorCode::from_code(response.error_code);
            let message = if code == crate::protocol::ErrorCode::UnsupportedSaslMechanism {
                format!(
                    "the broker does not enable {}; it enables [{}] ({code})",
                    sasl.mechanism,
                    response.mechanisms.join(", ")
                )
            } else {
                format!("SaslHandshake refused: {code}")
            };
            return self.authentication_failed(now, conn, message);
        }
        let token = if sasl.mechanism == crate::sasl::Mechanism::OAuthBearer {
            match self.oauth_token(now, &sasl) {
                TokenNow::Ready(t) => Some(t),
                TokenNow::Wait => {
                    // The exchange starts when the token comes
                    // (`handle_oauth_token`); the setup timeout still
                    // covers the wait.
                    if let Some(Phase::Authenticating { awaiting_token, .. }) =
                        self.conns.get_mut(&conn).map(|c| &mut c.phase)
                    {
                        *awaiting_token = true;
                    }
                    return;
                }
                TokenNow::Failed(e) => return self.token_provider_failed(now, conn, e),
            }
        } else {
            None
        };
        self.start_sasl_session(now, conn, &sasl, token.as_ref());
    }

    /// Starts the SASL exchange on `conn` (its SaslHandshake answered): the
    /// session and its first SaslAuthenticate.
    fn start_sasl_session(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        sasl: &crate::sasl::SaslConfig,
        token: Option<&crate::sasl::OAuthToken>,
    ) {
        let mut random = [0u8; 24];
        (self.config.random_bytes)(&mut random);
        // Mixed with the cluster's own generator: a broken OS source alone
        // does not make nonces repeat.
        for chunk in random.chunks_mut(8) {
            let r = self.rng.next_u64().to_le_bytes();
            for (b, x) in chunk.iter_mut().zip(r) {
                *b ^= x;
            }
        }
        let nonce = crate::sasl::nonce(random);
        match crate::sasl::SaslSession::start(sasl, &nonce, token) {
            Ok((session, first)) => {
                if let Some(Phase::Authenticating { session: s, .. }) =
                    self.conns.get_mut(&conn).map(|c| &mut c.phase)
                {
                    *s = Some(session);
                }
                self.send_sasl_authenticate(now, conn, first);
            }
            Err(e) => self.authentication_failed(now, conn, e),
        }
    }

    /// Closes `conn` because the OAUTHBEARER token provider failed (a
    /// retriable cause, not a refusal: see
    /// [`ConnectionError::TokenProvider`]).
    fn token_provider_failed(&mut self, now: Instant, conn: ConnectionId, message: String) {
        self.close(
            now,
            conn,
            CloseReason::Error,
            Some(ConnectionError::TokenProvider {
                mechanism: crate::sasl::Mechanism::OAuthBearer.name().to_owned(),
                message,
            }),
        );
    }

    /// The OAUTHBEARER token for a connection that authenticates now: the
    /// last one while less than 80% of its lifetime has passed; else, from
    /// a synchronous provider, a new one at once; from an asynchronous
    /// one, the last one while it lasts (a new one is asked for ahead,
    /// [`Cluster::drive_oauth`]), else a wait for the one asked for.
    fn oauth_token(&mut self, now: Instant, sasl: &crate::sasl::SaslConfig) -> TokenNow {
        let Some(provider) = sasl.token_provider.as_ref() else {
            return TokenNow::Failed("no OAUTHBEARER token provider is configured".into());
        };
        if let Some((token, at)) = &self.oauth.token {
            let age = now.saturating_duration_since(*at);
            if age < token.lifetime().mul_f64(0.8)
                || (provider.is_async() && age < token.lifetime())
            {
                return TokenNow::Ready(token.clone());
            }
        }
        if provider.is_async() {
            // Asked for by the next step (`drive_oauth`), if it is not
            // already on its way.
            return TokenNow::Wait;
        }
        match provider.token() {
            Ok(token) => {
                self.oauth.token = Some((token.clone(), now));
                TokenNow::Ready(token)
            }
            Err(e) => TokenNow::Failed(e),
        }
    }

    /// The asynchronous token provider, if one is configured.
    fn async_token_provider(&self) -> Option<&crate::sasl::OAuthTokenProvider> {
        self.config
            .sasl
            .as_ref()
            .filter(|s| s.mechanism == crate::sasl::Mechanism::OAuthBearer)
            .and_then(|s| s.token_provider.as_ref())
            .filter(|p| p.is_async())
    }

    /// Whether a connection waits for an OAUTHBEARER token.
    fn awaits_token(&self) -> bool {
        self.conns.values().any(|c| {
            matches!(
                c.phase,
                Phase::Authenticating {
                    awaiting_token: true,
                    ..
                }
            )
        })
    }

    /// When the asynchronous token provider is to be called next, if it
    /// is: at once (after its backoff) for a connection that waits; at
    /// [`OAuthState::renew_at`] (or after the backoff of a renewal that
    /// failed) while connections live. `None` while a call is out.
    fn oauth_due(&self) -> Option<Instant> {
        self.async_token_provider()?;
        if self.oauth.fetching {
            return None;
        }
        let wanted = if self.awaits_token() {
            self.epoch
        } else if !self.conns.is_empty() {
            self.oauth.renew_at()?
        } else {
            return None;
        };
        Some(self.oauth.retry.not_before().map_or(wanted, |t| t.max(wanted)))
    }

    /// Asks the runtime for an OAUTHBEARER token when it is due
    /// ([`Cluster::oauth_due`]).
    fn drive_oauth(&mut self, now: Instant) {
        if self.oauth_due().is_none_or(|t| now < t) {
            return;
        }
        let Some(provider) = self.async_token_provider().cloned() else {
            return;
        };
        self.oauth.fetching = true;
        self.oauth.retry.clear_wait();
        log::debug!("asking the OAUTHBEARER token provider for a token");
        self.actions.push_back(Action::FetchOAuthToken {
            provider,
            timeout: self.config.request_timeout,
        });
    }

    /// The asynchronous OAUTHBEARER token provider answered (the runtime
    /// ran the future of an [`Action::FetchOAuthToken`]): with a token,
    /// the connections that waited for one start their exchange with it,
    /// and it is kept for the next ones until 80% of its lifetime has
    /// passed, when a new one is asked for; with an `Err`, each of them is
    /// closed with [`ConnectionError::TokenProvider`] (a failure of its
    /// address, backed off and reported as connection failures are), and
    /// the provider is called again only after the reconnect backoff.
    pub fn handle_oauth_token(
        &mut self,
        now: Instant,
        token: Result<crate::sasl::OAuthToken, String>,
    ) {
        self.oauth.fetching = false;
        let waiting: Vec<ConnectionId> = self
            .conns
            .values()
            .filter(|c| {
                matches!(
                    c.phase,
                    Phase::Authenticating {
                        awaiting_token: true,
                        ..
                    }
                )
            })
            .map(|c| c.id)
            .collect();
        for id in &waiting {
            if let Some(Phase::Authenticating { awaiting_token, .. }) =
                self.conns.get_mut(id).map(|c| &mut c.phase)
            {
                *awaiting_token = false;
            }
        }
        match token {
            Ok(token) => {
                self.oauth.retry.succeeded();
                self.oauth.token = Some((token.clone(), now));
                if let Some(sasl) = self.config.sasl.clone() {
                    for id in waiting {
                        self.start_sasl_session(now, id, &sasl, Some(&token));
                    }
                }
            }
            Err(message) => {
                let delay =
                    self.oauth
                        .retry
                        .failed(now, &self.config.reconnect_backoff, self.rng.unit());
                if waiting.is_empty() {
                    // A renewal ahead of need: the last token still serves.
                    let log = if self.oauth.retry.failures() == 1 {
                        log::Level::Warn
                    } else {
                        log::Level::Debug
                    };
                    log::log!(
                        log,
                        "the OAUTHBEARER token provider failed: {message}; asked again in {delay:?}"
                    );
                }
                for id in waiting {
                    self.token_provider_failed(now, id, message.clone());
                }
            }
        }
        self.drive(now);
    }

    fn send_sasl_authenticate(&mut self, now: Instant, conn: ConnectionId, bytes: Vec<u8>) {
        let Some(version) = self
            .conns
            .get(&conn)
            .and_then(|c| c.versions())
            .and_then(|v| v.version(ApiKey::SaslAuthenticate).ok())
        else {
            return;
        };
        let request = crate::protocol::messages::sasl_authenticate::SaslAuthenticateRequest {
            auth_bytes: bytes.into(),
            ..Default::default()
        };
        self.send_setup(now, conn, Origin::SaslAuthenticate, &request, version);
    }

    fn handle_sasl_authenticate(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        version: i16,
        body: Bytes,
    ) {
        use crate::protocol::messages::sasl_authenticate::SaslAuthenticateResponse;
        let response = match crate::protocol::messages::decode_response_body::<
            SaslAuthenticateResponse,
        >(body, version)
        {
            Ok((r, _)) => r,
            Err(e) => return self.close_undecodable(now, conn, ApiKey::SaslAuthenticate, &e),
        };
        if response.error_code != 0 {
            let code = crate::protocol::ErrorCode::from_code(response.error_code);
            let message = match response.error_message.filter(|m| !m.is_empty()) {
                Some(m) => format!("{m} ({code})"),
                None => code.to_string(),
            };
            return self.authentication_failed(now, conn, message);
        }
        let Some(Phase::Authenticating {
            session: Some(session),
            ..
        }) = self.conns.get_mut(&conn).map(|c| &mut c.phase)
        else {
            return;
        };
        match session.step(&response.auth_bytes) {
            Ok(crate::sasl::SaslStep::Send(next)) => self.send_sasl_authenticate(now, conn, next),
            Ok(crate::sasl::SaslStep::Done) => {
                let lifetime = (response.session_lifetime_ms > 0)
                    .then(|| Duration::from_millis(response.session_lifetime_ms as u64));
                self.authenticated(now, conn, lifetime);
            }
            Err(e) => self.authentication_failed(now, conn, e),
        }
    }

    /// The broker accepted the credentials. With a session lifetime, the
    /// next authentication is due at 85-95% of it, as the Java client
    /// picks (KIP-368: time for the round trips, and jitter so that many
    /// connections do not renew at once).
    fn authenticated(&mut self, now: Instant, conn: ConnectionId, lifetime: Option<Duration>) {
        let reauth_at = lifetime.map(|l| now + l.mul_f64(0.85 + 0.10 * self.rng.unit()));
        let mechanism = self
            .config
            .sasl
            .as_ref()
            .map_or("?", |s| s.mechanism.name())
            .to_owned();
        let Some(Phase::Authenticating {
            versions, reauth, ..
        }) = self.conns.get(&conn).map(|c| &c.phase)
        else {
            return;
        };
        let (versions, reauth) = (versions.clone(), *reauth);
        self.emit(
            now,
            conn,
            EventKind::Authenticated {
                mechanism,
                session_lifetime: lifetime,
                reauthentication: reauth,
            },
        );
        if reauth {
            let c = self.conns.get_mut(&conn).expect("present");
            c.phase = Phase::Ready {
                versions,
                reauth_at,
            };
        } else {
            self.became_ready(now, conn, versions, reauth_at);
        }
    }

    /// KIP-368: a ready connection whose SASL session is due for renewal
    /// authenticates again once its requests in flight are answered (new
    /// ones wait in its queue meanwhile), on the same socket.
    fn reauthenticate(&mut self, now: Instant) {
        let due: Vec<ConnectionId> = self
            .conns
            .values()
            .filter(|c| {
                c.in_flight.is_empty()
                    && matches!(c.phase, Phase::Ready { reauth_at: Some(t), .. } if now >= t)
            })
            .map(|c| c.id)
            .collect();
        for id in due {
            let c = self.conns.get_mut(&id).expect("present");
            let Phase::Ready { versions, .. } = &c.phase else {
                continue;
            };
            let versions = versions.clone();
            log::debug!("connection {id} to {}: renewing its SASL session", c.addr);
            self.start_authentication(now, id, versions, true);
        }
    }

    fn handle_response(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        origin: Origin,
        api: ApiKey,
        version: i16,
        body: Bytes,
    ) {
        if !origin.is_setup() {
            self.answered(conn);
        }
        match origin {
            Origin::Handshake => {
                let Some(c) = self.conns.get_mut(&conn) else {
                    return;
                };
                let Phase::Handshake { exchange } = &mut c.phase else {
                    return;
                };
                match exchange.handle_response(body) {
                    Ok(ExchangeStep::Retry(v)) => self.send_handshake(now, conn, v),
                    Ok(ExchangeStep::Done(versions)) => {
                        if self.config.sasl.is_some() {
                            self.start_authentication(now, conn, versions, false);
                        } else {
                            self.became_ready(now, conn, versions, None);
                        }
                    }
                    Err(e) => self.close(
                        now,
                        conn,
                        CloseReason::Error,
                        Some(ConnectionError::protocol(e)),
                    ),
                }
            }
            Origin::SaslHandshake => self.handle_sasl_handshake(now, conn, version, body),
            Origin::SaslAuthenticate => self.handle_sasl_authenticate(now, conn, version, body),
            Origin::MetadataById => match metadata::parse(version, body) {
                Ok(md) => {
                    self.by_id_refresh.succeeded();
                    self.update_metadata(now, md, true);
                    if !self.unresolved_ids().is_empty() {
                        // Not (yet) known to this broker: a topic just
                        // created, say. Asked again after the backoff.
                        self.by_id_refresh
                            .failed(now, &self.config.retry_backoff, &mut self.rng);
                    }
                }
                Err(e) => {
                    self.by_id_refresh
                        .failed(now, &self.config.retry_backoff, &mut self.rng);
                    self.close_undecodable(now, conn, api, &e);
                }
            },
            Origin::Metadata => match metadata::parse(version, body) {
                Ok(md) => {
                    let complete = md.covers(&self.topics) && self.leaders_known(&md);
                    self.update_metadata(now, md, false);
                    if complete {
                        self.metadata_refresh.succeeded();
                    } else {
                        // Some topic is unknown or has a partition without a
                        // leader yet: ask again after the retry backoff,
                        // which grows while the answers stay incomplete (to
                        // `retry.backoff.max.ms`, as KIP-580 has it): a
                        // partition without a leader for minutes must not
                        // cost its broker ten Metadata requests a second.
                        self.metadata_wanted = true;
                        self.metadata_refresh.failed(
                            now,
                            &self.config.retry_backoff,
                            &mut self.rng,
                        );
                    }
                }
                Err(e) => {
                    self.metadata_refresh
                        .failed(now, &self.config.retry_backoff, &mut self.rng);
                    self.close_undecodable(now, conn, api, &e);
                }
            },
            Origin::FindCoordinator => {
                let group = self.config.group_id.clone().unwrap_or_default();
                match metadata::parse_find_coordinator(version, body, &group) {
                    Ok(Ok(coordinator)) => {
                        self.coordinator_refresh.succeeded();
                        self.coordinator_refusal_reported = None;
                        self.coordinator = Some(coordinator);
                    }
                    Ok(Err(code)) => {
                        log::debug!("FindCoordinator for {group:?}: {code}");
                        self.coordinator_refresh.failed(
                            now,
                            &self.config.retry_backoff,
                            &mut self.rng,
                        );
                        // COORDINATOR_NOT_AVAILABLE and the like pass by
                        // themselves (a coordinator being elected or
                        // loading); a refusal does not, and is news.
                        let due = self
                            .coordinator_refusal_reported
                            .is_none_or(|t| now.saturating_duration_since(t) >= REPORT_AGAIN_AFTER);
                        if !code.is_retriable() && due {
                            self.coordinator_refusal_reported = Some(now);
                            self.problems
                                .push_back(Problem::CoordinatorRefused { group, code });
                        }
                    }
                    Err(e) => {
                        self.coordinator_refresh.failed(
                            now,
                            &self.config.retry_backoff,
                            &mut self.rng,
                        );
                        self.close_undecodable(now, conn, api, &e);
                    }
                }
            }
            Origin::User(id) => {
                let broker = self.conns.get(&conn).and_then(|c| c.broker);
                self.responses.push_back((
                    id,
                    Ok(Response {
                        api,
                        version,
                        broker,
                        body,
                    }),
                ));
            }
        }
    }

    /// Takes a Metadata answer: in place of the cache (`merge` false: the
    /// answer to the regular request, which names every topic kept), or
    /// into it (`merge`: topics looked up by id).
    fn update_metadata(&mut self, now: Instant, mut md: Metadata, merge: bool) {
        // Name bootstrap connections' brokers once the addresses are known.
        for c in self.conns.values_mut() {
            if c.broker.is_none() {
                c.broker = md
                    .brokers
                    .values()
                    .find(|b| {
                        let addr = b.addr();
                        c.addr == addr || c.peer.is_some_and(|p| p.to_string() == addr)
                    })
                    .map(|b| b.id);
            }
        }
        // The counters of an address follow the broker found behind it.
        let named: Vec<(String, i32)> = self
            .conns
            .values()
            .filter_map(|c| c.broker.map(|b| (c.addr.clone(), b)))
            .collect();
        for (addr, broker) in named {
            self.counter(&addr).broker = Some(broker);
        }
        if merge {
            let old = std::mem::take(&mut self.metadata.topics);
            for (name, info) in old {
                md.topics.entry(name).or_insert(info);
            }
            // The cache's age is that of the regular request's answer.
            self.metadata = md;
            self.metadata_generation += 1;
            return;
        }
        // Topics found by id stay while their ids are wanted, until the
        // caller names them (the regular request may have been sent before
        // they were found).
        for (name, info) in std::mem::take(&mut self.metadata.topics) {
            if self.topic_ids.contains(&info.topic_id) && !md.topics.contains_key(&name) {
                md.topics.insert(name, info);
            }
        }
        self.metadata = md;
        self.metadata_generation += 1;
        self.metadata_fetched_at = Some(now);
    }

    // ===== closing and failing =====

    fn fail(&mut self, origin: Origin, error: RequestError) {
        match origin {
            Origin::User(id) => self.responses.push_back((id, Err(error))),
            Origin::Metadata => {
                self.metadata_refresh.in_flight = false;
                self.metadata_wanted = true;
            }
            Origin::MetadataById => self.by_id_refresh.in_flight = false,
            Origin::FindCoordinator => self.coordinator_refresh.in_flight = false,
            Origin::Handshake | Origin::SaslHandshake | Origin::SaslAuthenticate => {}
        }
    }

    fn connect_failed(&mut self, now: Instant, c: Conn, error: ConnectionError) {
        self.counter(&c.addr).connect_failures += 1;
        let delay = self.failed(now, &c, &error);
        log::debug!(
            "connection {} to {} ({}) failed: {error}; next attempt in {delay:?}",
            c.id,
            c.addr,
            c.purpose
        );
        self.push_event(
            now,
            &c,
            EventKind::ConnectFailed {
                error: error.clone(),
            },
        );
        if c.purpose == Purpose::Coordinator {
            self.coordinator = None;
        }
        self.requeue(c, &error);
    }

    /// A connection to `c`'s address failed, or broke: one more failure in
    /// its run (a connection that had answered starts a new run), its next
    /// attempt backed off, and the application told when the run starts
    /// (or again after a long time). Returns the backoff.
    fn failed(&mut self, now: Instant, c: &Conn, error: &ConnectionError) -> Duration {
        let entry = self.backoff.entry(c.addr.clone()).or_default();
        entry.failures = if c.answered {
            1
        } else {
            entry.failures.saturating_add(1)
        };
        entry.last_error = Some(error.clone());
        let failures = entry.failures;
        let refusal = error.is_refusal();
        // A refusal (credentials refused, a certificate not trusted, a
        // broker that answers garbage) will be met again: a backoff of its
        // own, much longer than a refused connect's, which keeps a
        // restarting broker found quickly.
        let (delay, due) = if refusal {
            let run = self.refusals.entry(c.addr.clone()).or_insert(RefusalRun {
                count: 0,
                last: now,
                reported: None,
            });
            if now.saturating_duration_since(run.last) > REFUSAL_RUN_GAP {
                *run = RefusalRun {
                    count: 0,
                    last: now,
                    reported: None,
                };
            }
            run.count = run.count.saturating_add(1);
            run.last = now;
            let delay = self
                .config
                .refusal_backoff
                .delay(run.count, self.rng.unit());
            let due = run
                .reported
                .is_none_or(|t| now.saturating_duration_since(t) >= REPORT_AGAIN_AFTER);
            (delay, due)
        } else {
            let delay = self
                .config
                .reconnect_backoff
                .delay(failures, self.rng.unit());
            let due = entry
                .reported
                .is_none_or(|t| now.saturating_duration_since(t) >= REPORT_AGAIN_AFTER);
            (delay, due)
        };
        self.backoff.get_mut(&c.addr).expect("inserted").until = Some(now + delay);
        self.last_failure = Some(format!(
            "{} connection to {} failed: {error}",
            c.purpose, c.addr
        ));
        let mark_reported = |cluster: &mut Cluster| {
            if refusal {
                if let Some(run) = cluster.refusals.get_mut(&c.addr) {
                    run.reported = Some(now);
                }
            } else {
                cluster.backoff.get_mut(&c.addr).expect("inserted").reported = Some(now);
            }
        };
        if let ConnectionError::TokenProvider { .. } = error {
            // At the first failure, for any connection: the application's
            // provider (its token endpoint) is down, which it should hear
            // of; the client retries by itself.
            if due {
                mark_reported(self);
                self.problems.push_back(Problem::BrokerUnreachable {
                    broker: c.broker,
                    addr: c.addr.clone(),
                    purpose: c.purpose,
                    cause: error.clone(),
                });
            }
        } else if let ConnectionError::Authentication { mechanism, message } = error {
            // At the first failure: it will not pass by itself.
            if due {
                mark_reported(self);
                self.problems.push_back(Problem::AuthenticationFailed {
                    broker: c.broker,
                    addr: c.addr.clone(),
                    purpose: c.purpose,
                    mechanism: mechanism.clone(),
                    message: message.clone(),
                });
            }
        } else if c.purpose == Purpose::Bootstrap {
            self.check_bootstrap_unreachable(now);
        } else if due && (failures >= 2 || refusal) {
            // From the second failure in a row: a connection that worked
            // and broke once (a broker restarting, an idle close racing a
            // request) is reconnected at once and is no news; one whose
            // reconnect fails too, or that keeps breaking before answering,
            // is. A refusal is news at once: a certificate does not become
            // trusted by waiting.
            mark_reported(self);
            self.problems.push_back(Problem::BrokerUnreachable {
                broker: c.broker,
                addr: c.addr.clone(),
                purpose: c.purpose,
                cause: error.clone(),
            });
        }
        log::debug!(
            "{} connection to {} failed: {error}; next attempt in {delay:?}",
            c.purpose,
            c.addr
        );
        delay
    }

    /// When no connection is ready and every bootstrap address failed
    /// since one last answered, each with a cause waiting does not cure
    /// soon (refused, a name that does not resolve, authentication, TLS,
    /// protocol; not a setup timeout or a dropped connection): each address
    /// with its last failure. A call that waits for the network then
    /// returns this cause instead of waiting for its timeout.
    pub fn refused_everywhere(&self) -> Option<Vec<(String, ConnectionError)>> {
        if self.conns.values().any(|c| c.is_ready()) {
            return None;
        }
        self.config
            .bootstrap
            .iter()
            .map(|addr| match self.backoff.get(addr) {
                Some(AddrBackoff {
                    failures: 1..,
                    last_error: Some(e),
                    ..
                }) if e.is_refusal()
                    || matches!(
                        e,
                        ConnectionError::Refused { .. } | ConnectionError::Resolve { .. }
                    ) =>
                {
                    Some((addr.clone(), e.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// Reports that no bootstrap address can be reached, when every one
    /// failed since one last answered and nothing else is live.
    fn check_bootstrap_unreachable(&mut self, now: Instant) {
        if self.conns.values().any(|c| c.is_ready()) {
            return;
        }
        let due = self
            .bootstrap_reported
            .is_none_or(|t| now.saturating_duration_since(t) >= REPORT_AGAIN_AFTER);
        if !due {
            return;
        }
        let mut attempts = Vec::new();
        for addr in &self.config.bootstrap {
            match self.backoff.get(addr) {
                Some(AddrBackoff {
                    failures: 1..,
                    last_error: Some(e),
                    ..
                }) => attempts.push((addr.clone(), e.clone())),
                _ => return,
            }
        }
        self.bootstrap_reported = Some(now);
        self.problems
            .push_back(Problem::BootstrapUnreachable { attempts });
    }

    /// A connection answered a request: its address's run of failures is
    /// over.
    fn answered(&mut self, conn: ConnectionId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.answered {
            return;
        }
        c.answered = true;
        let addr = c.addr.clone();
        self.backoff.remove(&addr);
        // An address that refuses this client after answering (a broker
        // that answers garbage sometimes) is not news again before its
        // time.
        if !self.refusals.contains_key(&addr) {
            self.bootstrap_reported = None;
        }
    }

    /// Puts a dead connection's unsent requests back in the waiting list;
    /// those of a replica connection fail instead (`cause`: why it died),
    /// so that their caller fetches from the leader (see
    /// [`Target::Replica`]).
    fn requeue(&mut self, mut c: Conn, cause: &ConnectionError) {
        let target = match c.purpose {
            Purpose::Bootstrap => Target::AnyBroker,
            Purpose::Coordinator => Target::Coordinator,
            Purpose::Leader => c.broker.map_or(Target::AnyBroker, Target::Broker),
            Purpose::Replica => c.broker.map_or(Target::AnyBroker, Target::Replica),
        };
        for queued in c.queue.drain(..) {
            let target = match queued.origin {
                Origin::Metadata | Origin::MetadataById | Origin::FindCoordinator => {
                    Target::AnyBroker
                }
                _ => target,
            };
            if let Target::Replica(broker) = target {
                self.fail(
                    queued.origin,
                    RequestError::ReplicaUnavailable {
                        broker,
                        reason: format!("the connection to {} ended: {cause}", c.addr),
                    },
                );
                continue;
            }
            self.waiting.push_back(Waiting { target, queued });
        }
    }

    fn close(
        &mut self,
        now: Instant,
        id: ConnectionId,
        reason: CloseReason,
        error: Option<ConnectionError>,
    ) {
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        self.actions.push_back(Action::Close { conn: id });
        self.counter(&c.addr).count_close(reason);
        if matches!(reason, CloseReason::Peer | CloseReason::Error) {
            // A connection that broke backs its address off like a failed
            // connect (a first failure if it had answered requests), so a
            // broker that accepts and drops connections is not hammered.
            let cause = error.clone().unwrap_or(ConnectionError::ClosedByBroker);
            self.failed(now, &c, &cause);
        }
        let lost = error
            .clone()
            .unwrap_or(ConnectionError::ClosedByClient { reason });
        if reason != CloseReason::Shutdown {
            self.counter(&c.addr).request_errors += c.in_flight.len() as u64;
        }
        let unwritten = c.unwritten.drain(..).map(|(_, origin, ..)| origin);
        for origin in c.in_flight.drain(..).map(|r| r.origin).chain(unwritten) {
            self.fail(
                origin,
                RequestError::ConnectionLost {
                    addr: c.addr.clone(),
                    cause: lost.clone(),
                },
            );
        }
        if c.purpose == Purpose::Coordinator
            && matches!(reason, CloseReason::Peer | CloseReason::Error)
        {
            self.coordinator = None;
        }
        if let Some(broker) = c.broker {
            match c.purpose {
                Purpose::Leader => *self.leader_generations.entry(broker).or_default() += 1,
                Purpose::Replica => *self.replica_generations.entry(broker).or_default() += 1,
                Purpose::Bootstrap | Purpose::Coordinator => {}
            }
        }
        match reason {
            CloseReason::Error | CloseReason::Peer => {
                log::debug!("connection {id} to {} closed ({reason}): {lost}", c.addr)
            }
            _ => log::debug!("connection {id} to {} closed ({reason})", c.addr),
        }
        self.push_event(now, &c, EventKind::Closed { reason, error });
        if reason == CloseReason::Shutdown {
            for q in c.queue.drain(..) {
                self.fail(q.origin, RequestError::Shutdown);
            }
        } else {
            self.requeue(c, &lost);
        }
    }

    // ===== bookkeeping =====

    fn counter(&mut self, addr: &str) -> &mut BrokerCounters {
        if !self.counters.contains_key(addr) {
            self.counters
                .insert(addr.to_owned(), BrokerCounters::default());
        }
        self.counters.get_mut(addr).expect("inserted")
    }

    fn emit(&mut self, now: Instant, id: ConnectionId, kind: EventKind) {
        if let Some(c) = self.conns.get(&id) {
            let event = connection_event(self.epoch, now, c, kind);
            self.record(event);
        }
    }

    fn push_event(&mut self, now: Instant, c: &Conn, kind: EventKind) {
        let event = connection_event(self.epoch, now, c, kind);
        self.record(event);
    }

    fn record(&mut self, event: ConnectionEvent) {
        log::debug!("{event}");
        self.events.push_back(event);
    }
}

fn connection_event(epoch: Instant, now: Instant, c: &Conn, kind: EventKind) -> ConnectionEvent {
    ConnectionEvent {
        at: now.saturating_duration_since(epoch),
        kind,
        connection: c.id,
        broker: c.broker,
        addr: c.addr.clone(),
        purpose: c.purpose,
    }
}

#[cfg(test)]
mod tests;
