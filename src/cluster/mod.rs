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
//!
//! # What it is made of
//!
//! `Cluster` holds one part per job, each a type that owns its state, in a
//! file of its own:
//!
//! - `connections.rs`: the connections themselves (each one's protocol
//!   state in `conn.rs`, its received bytes cut into frames in
//!   `framing.rs`), the lookups over them, each broker's connection generations, the turn of
//!   the bootstrap addresses, and the counters of each address;
//! - `waiting.rs`: the requests not yet given to a connection, and the
//!   request ids;
//! - `outputs.rs`: the queues the runtime, the observer, the callers and
//!   the application poll (actions, events, responses, [`Problem`]s);
//! - `address_failures.rs`: each address's failures, its backoff, and the
//!   [`Problem`]s they make;
//! - `metadata_manager.rs`: the metadata cache and its refresh schedules,
//!   over `metadata.rs` (the cache's contents, the request and answer);
//! - `coordinator.rs`: the group coordinator's lookup;
//! - `authentication.rs`: a connection's SASL phase, between ApiVersions
//!   and ready; `oauth.rs`: OAUTHBEARER tokens and the provider's calls.
//!
//! `impl Cluster` steps the parts where they meet: this file (the
//! interface, one step of the machine, answers handed to whoever waits),
//! `routing.rs` (which connection a request goes on, opening one if
//! needed; the queues written out) and `lifecycle.rs` (a connection's
//! setup with its SASL steps, expiry, retirement, idle reaping and close).

mod address_failures;
mod authentication;
mod backoff;
mod client_core;
mod config;
mod conn;
mod connections;
mod coordinator;
pub(crate) mod framing;
mod lifecycle;
pub mod metadata;
mod metadata_manager;
mod oauth;
mod outputs;
mod requests;
mod routing;
mod waiting;

pub use backoff::{ExponentialBackoff, Retry, Rng};
pub use client_core::{Changes, ClientCore, Deferred};
pub use config::{ClusterConfig, REFUSAL_BACKOFF_MAX};
pub use conn::RequestBody;
pub use metadata::{BrokerAddress, LeaderHint, Metadata, PartitionInfo, TopicInfo};
pub use oauth::OAUTH_REFRESH_MIN;
pub use requests::{RequestError, RequestId, Response, Target};

use crate::events::{
    BrokerCounters, CloseReason, ConnectionError, ConnectionEvent, ConnectionId, ConnectionInfo,
    Purpose,
};
use crate::protocol::{ApiKey, ErrorCode};
use address_failures::AddressFailures;
use bytes::Bytes;
use conn::Queued;
use connections::Connections;
use coordinator::CoordinatorLookup;
use metadata_manager::MetadataManager;
use oauth::OAuthState;
use outputs::Outputs;
use requests::{check_route, Origin};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use waiting::WaitingRequests;

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

/// How long a condition that goes on (a broker still unreachable, a topic
/// still unknown) waits before it is reported again.
pub const REPORT_AGAIN_AFTER: Duration = crate::streak::REPORT_AGAIN_AFTER;

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

/// The connection manager. See the [module documentation](self).
#[derive(Debug)]
pub struct Cluster {
    config: ClusterConfig,
    /// The time event timestamps count from.
    epoch: Instant,
    rng: Rng,
    /// The connections, their generations and counters, and the turn of
    /// the bootstrap addresses (connections.rs).
    conns: Connections,
    /// Requests not yet given to a connection (waiting.rs).
    waiting: WaitingRequests,
    /// Each address's failures and backoff (address_failures.rs).
    failures: AddressFailures,
    /// The metadata cache and its refreshes (metadata_manager.rs).
    metadata: MetadataManager,
    /// The group coordinator's lookup (coordinator.rs).
    coordinator: CoordinatorLookup,
    /// OAUTHBEARER tokens: the last one, and the asynchronous provider's
    /// calls (oauth.rs).
    oauth: OAuthState,
    /// What the runtime, the observer, the callers and the application
    /// poll (outputs.rs).
    out: Outputs,
    /// Set by [`Cluster::shutdown`]: nothing is stepped any more.
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
            conns: Connections::new(bootstrap_cursor),
            waiting: WaitingRequests::default(),
            failures: AddressFailures::default(),
            metadata: MetadataManager::default(),
            coordinator: CoordinatorLookup::default(),
            oauth: OAuthState::default(),
            out: Outputs::default(),
            shut_down: false,
        }
    }

    // ===== inputs =====

    /// Sets the topics whose metadata is kept. A topic not yet in the cache
    /// makes the next [`Cluster::handle_timeout`] (or request) send a
    /// Metadata request; this call itself connects nothing, and
    /// [`Cluster::poll_timeout`] reports the work as due at once.
    pub fn set_topics(&mut self, topics: impl IntoIterator<Item = String>) {
        self.metadata.set_topics(topics);
    }

    /// The partitions being fetched (their topics among those of
    /// [`Cluster::set_topics`]): while the metadata names no leader for one
    /// of them (a partition it does not list, such as one the group
    /// assigned after the topic grew, or a leaderless one), Metadata is
    /// asked again with the retry backoff, as for a missing topic, not only
    /// after `metadata.max.age.ms`. Connects nothing.
    pub fn set_partitions_wanted(&mut self, partitions: BTreeSet<(String, i32)>) {
        self.metadata.set_partitions_wanted(partitions);
    }

    /// Makes Metadata requests ask for every topic (`true`: a classic
    /// pattern subscription matches the pattern against them) or for the
    /// topics of [`Cluster::set_topics`] only. Turning it on asks for
    /// metadata at the next step; afterwards it is refreshed every
    /// `metadata.max.age.ms`, as for named topics. Connects nothing.
    pub fn set_all_topics(&mut self, all: bool) {
        self.metadata.set_all_topics(all);
    }

    /// Sets the topic ids whose names (and partitions) the caller needs: a
    /// KIP-848 assignment names topics by id. Ids the cache does not know
    /// are looked up with a Metadata request by id (v12+; every topic
    /// below v12) at the next step, merged into the cache, and asked for
    /// again after the retry backoff while some stay unknown. Connects
    /// nothing by itself.
    pub fn set_topic_ids(&mut self, ids: impl IntoIterator<Item = [u8; 16]>) {
        self.metadata.set_topic_ids(ids);
    }

    /// Asks for fresh metadata (after a leader error, for instance). A
    /// backoff grown by incomplete answers (an unrelated topic unknown, a
    /// partition without a leader for a while) comes back to
    /// `retry.backoff.ms`: a leader that moved is looked up as soon as
    /// when all was well. (What calls this is itself backed off.)
    pub fn request_metadata_refresh(&mut self, now: Instant) {
        self.metadata.hurry(now, &self.config.retry_backoff);
        self.drive(now);
    }

    /// Takes the partition leaders that brokers named in Fetch or Produce
    /// answers (KIP-951, `current_leader` and `node_endpoints`) into the
    /// cache, each when it is newer than the cached one (see
    /// [`Metadata::apply_hint`]); returns the partitions moved, whose
    /// requests can go to the new leader at once, with no Metadata round
    /// trip. The others are left to the caller (a refresh, as before).
    pub fn apply_leader_hints(
        &mut self,
        now: Instant,
        hints: &[LeaderHint],
        endpoints: &[BrokerAddress],
    ) -> Vec<(String, i32)> {
        let taken = self.metadata.apply_hints(hints, endpoints);
        if !taken.is_empty() {
            self.drive(now);
        }
        taken
    }

    /// Asks for fresh metadata at the next step, without acting now.
    pub fn request_metadata_refresh_later(&mut self) {
        self.metadata.want();
    }

    /// Forgets the coordinator (after NOT_COORDINATOR or
    /// COORDINATOR_NOT_AVAILABLE): its connection is closed and the next
    /// coordinator request looks it up again.
    pub fn coordinator_unknown(&mut self, now: Instant) {
        self.coordinator.forget();
        self.close_coordinator_connections(now);
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
        let id = self.waiting.next_id();
        if let Err(e) = check_route(body.api_key(), target) {
            self.out.respond(id, Err(e));
            return id;
        }
        self.waiting.push(
            target,
            Queued {
                origin: Origin::User(id),
                body,
                deadline: now + timeout,
                answered,
            },
        );
        self.drive(now);
        id
    }

    /// The TCP connection of `conn` is established.
    pub fn handle_connected(&mut self, now: Instant, conn: ConnectionId, peer: SocketAddr) {
        self.start_handshake(now, conn, peer);
        self.drive(now);
    }

    /// Connecting `conn` failed (refused, unreachable, DNS, timeout).
    pub fn handle_connect_failed(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        error: ConnectionError,
    ) {
        if let Some(c) = self.conns.remove(conn) {
            self.connect_failed(now, c, error);
        }
        self.drive(now);
    }

    /// The largest response frame accepted (`receive.message.max.bytes`):
    /// a reader may buffer up to this much for one frame.
    pub fn max_frame_size(&self) -> usize {
        self.config.max_frame_size
    }

    /// Bytes arrived on `conn`: the one way in for what a broker sends.
    /// One whole frame (its size prefix included), as the runtime's reader
    /// delivers it, is taken as it is, and the response body is a slice of
    /// it; bytes cut anywhere else are joined until they make whole frames
    /// (see `framing.rs`).
    pub fn handle_received(&mut self, now: Instant, conn: ConnectionId, bytes: Bytes) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        let addr = c.addr.clone();
        let len = bytes.len() as u64;
        let received = c.receive(now, bytes);
        self.conns.counter(&addr).bytes_in += len;
        for (request, body) in received.answers {
            let rtt = now.saturating_duration_since(request.sent_at);
            self.conns.counter(&addr).count_rtt(rtt);
            let (origin, api, version) = (request.origin, request.api, request.version);
            self.handle_response(now, conn, origin, api, version, body);
        }
        if let Some(e) = received.error {
            // The requests still in flight, the one whose frame was bad
            // first, fail with the connection.
            self.close(
                now,
                conn,
                CloseReason::Error,
                Some(ConnectionError::protocol(e)),
            );
        }
        self.drive(now);
    }

    /// The peer closed `conn` (EOF: [`ConnectionError::ClosedByBroker`]) or
    /// it failed (reset, IO error). The client closes its side at once: a
    /// [`Action::Close`] follows.
    pub fn handle_closed(&mut self, now: Instant, conn: ConnectionId, cause: ConnectionError) {
        if self.conns.contains(conn) {
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
        for id in self.conns.ids() {
            self.close(now, id, CloseReason::Shutdown, None);
        }
        for w in self.waiting.take_all() {
            self.fail(w.queued.origin, RequestError::Shutdown);
        }
    }

    // ===== outputs =====

    /// The next thing the runtime must do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.out.next_action()
    }

    /// The next connection event.
    pub fn poll_event(&mut self) -> Option<ConnectionEvent> {
        self.out.next_event()
    }

    /// The next condition to report to the application.
    pub fn poll_problem(&mut self) -> Option<Problem> {
        self.out.next_problem()
    }

    /// The next finished request.
    pub fn poll_response(&mut self) -> Option<(RequestId, Result<Response, RequestError>)> {
        self.out.next_response()
    }

    /// When [`Cluster::handle_timeout`] must be called next, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        for c in self.conns.iter() {
            consider(self.connection_deadline(c));
        }
        consider(self.waiting.next_deadline());
        if !self.waiting.is_empty() {
            // A waiting request may get its connection when a backoff ends
            // (ended ones were cleared by the last step).
            consider(self.failures.next_backoff_end());
        }
        consider(
            self.metadata
                .next_due(self.epoch, self.config.metadata_max_age),
        );
        consider(
            self.coordinator
                .next_due(self.config.group_id.as_deref(), self.coordinator_needed()),
        );
        consider(self.oauth_due());
        next
    }

    // ===== getters =====

    /// The cached metadata.
    pub fn metadata(&self) -> &Metadata {
        self.metadata.cache()
    }

    /// Per broker id, how many leader connections to it have closed (for
    /// any reason: idle reaping, the peer, an error, retirement). A number
    /// that changed means the connection `Target::Broker(id)` requests go
    /// on is not the one they went on before: state kept per connection,
    /// such as the fetcher's fetch sessions (KIP-227), ends with it.
    /// Brokers whose leader connections never closed are absent (0).
    pub fn leader_generations(&self) -> &BTreeMap<i32, u64> {
        self.conns.leader_generations()
    }

    /// Like [`Cluster::leader_generations`], for replica connections
    /// (`Target::Replica(id)`, KIP-392): per broker, how many replica
    /// connections to it have closed.
    pub fn replica_generations(&self) -> &BTreeMap<i32, u64> {
        self.conns.replica_generations()
    }

    /// Metadata requests sent so far, and partition leaders taken from
    /// Fetch and Produce answers instead (KIP-951,
    /// [`Cluster::apply_leader_hints`]).
    pub fn metadata_counts(&self) -> (u64, u64) {
        self.metadata.counts()
    }

    /// Grows by one with every metadata update.
    pub fn metadata_generation(&self) -> u64 {
        self.metadata.generation()
    }

    /// When the last answer to the regular Metadata request (the topics
    /// kept, or every topic) came, if one did: a new value means a new
    /// look at the cluster, unlike a generation that leader hints or a
    /// lookup by topic id also move.
    pub fn metadata_answered_at(&self) -> Option<Instant> {
        self.metadata.answered_at()
    }

    /// The group coordinator, once found.
    pub fn coordinator(&self) -> Option<&BrokerAddress> {
        self.coordinator.known()
    }

    /// A snapshot of the live connections.
    pub fn connections(&self, now: Instant) -> Vec<ConnectionInfo> {
        self.conns.snapshot(now)
    }

    /// Whether `conn` is a connection attempt still wanted (a runtime whose
    /// connect completes late must close the socket otherwise).
    pub fn is_connecting(&self, conn: ConnectionId) -> bool {
        self.conns.is_connecting(conn)
    }

    /// Counters per broker address.
    pub fn counters(&self) -> &BTreeMap<String, BrokerCounters> {
        self.conns.counters()
    }

    /// The versions negotiated on connection `conn`, once it is ready.
    pub fn connection_versions(
        &self,
        conn: ConnectionId,
    ) -> Option<&crate::protocol::ApiVersionTable> {
        self.conns.get(conn).and_then(|c| c.versions())
    }

    /// The socket address connection `conn` reached, once connected.
    pub fn connection_peer(&self, conn: ConnectionId) -> Option<SocketAddr> {
        self.conns.get(conn).and_then(|c| c.peer)
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

    /// When no connection is ready and every bootstrap address failed
    /// since one last answered, each with a cause waiting does not cure
    /// soon (refused, a name that does not resolve, authentication, TLS,
    /// protocol; not a setup timeout or a dropped connection): each address
    /// with its last failure. A call that waits for the network then
    /// returns this cause instead of waiting for its timeout.
    pub fn refused_everywhere(&self) -> Option<Vec<(String, ConnectionError)>> {
        if self.conns.any_ready() {
            return None;
        }
        self.failures.refused_everywhere(&self.config.bootstrap)
    }

    // ===== the machine =====

    /// One step at `now`: every deadline, schedule and queue is looked at.
    fn drive(&mut self, now: Instant) {
        if self.shut_down {
            return;
        }
        self.failures.clear_ended_backoffs(now);
        self.expire(now);
        self.schedule_internal_requests(now);
        self.dispatch_waiting(now);
        self.reauthenticate(now);
        self.drive_oauth(now);
        self.flush_queues(now);
        self.retire_bootstrap(now);
        self.reap_idle(now);
    }

    /// A response arrived on `conn`, for `origin`'s request sent at
    /// `version`: it goes to whoever waits for it.
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
            Origin::Handshake => self.on_api_versions(now, conn, body),
            Origin::SaslHandshake => self.on_sasl_handshake(now, conn, version, body),
            Origin::SaslAuthenticate => self.on_sasl_authenticate(now, conn, version, body),
            Origin::Metadata | Origin::MetadataById => {
                self.on_metadata(now, conn, origin, api, version, body)
            }
            Origin::FindCoordinator => self.on_find_coordinator(now, conn, version, body),
            Origin::User(id) => {
                let broker = self.conns.get(conn).and_then(|c| c.broker);
                self.out.respond(
                    id,
                    Ok(Response {
                        api,
                        version,
                        broker,
                        body,
                    }),
                );
            }
        }
    }

    /// A Metadata answer (the regular request's, or by topic id) on `conn`.
    fn on_metadata(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        origin: Origin,
        api: ApiKey,
        version: i16,
        body: Bytes,
    ) {
        let backoff = self.config.retry_backoff;
        match metadata::parse(version, body) {
            Ok((_, ErrorCode::RebootstrapRequired)) => {
                // Nothing of such an answer is taken (its brokers and
                // topics may be empty).
                self.metadata
                    .answer_failed(origin, now, &backoff, &mut self.rng);
                if self.config.rebootstrap.is_some() {
                    log::warn!(
                        "a broker answered Metadata with REBOOTSTRAP_REQUIRED (KIP-1102): asking the bootstrap addresses ({}) again",
                        self.config.bootstrap.join(",")
                    );
                    self.metadata.rebootstrap_required();
                } else {
                    log::warn!(
                        "a broker answered Metadata with REBOOTSTRAP_REQUIRED (KIP-1102), but metadata.recovery.strategy is none: asking the known brokers again after the retry backoff"
                    );
                }
            }
            Ok((md, _)) => {
                self.forget_replaced_cluster(now, conn, &md);
                self.conns.name_brokers(&md);
                if origin == Origin::MetadataById {
                    self.metadata
                        .take_by_id_answer(now, md, &backoff, &mut self.rng);
                } else {
                    self.metadata.take_answer(now, md, &backoff, &mut self.rng);
                }
            }
            Err(e) => {
                self.metadata
                    .answer_failed(origin, now, &backoff, &mut self.rng);
                self.close_undecodable(now, conn, api, &e);
            }
        }
    }

    /// An answer from a cluster other than the one cached (its cluster id
    /// changed: the bootstrap addresses now reach another cluster, KIP-899)
    /// drops everything learned from the old one before it is taken: its
    /// brokers and leader epochs (the new cluster counts its own), its
    /// coordinator, and every connection but `conn` (the ones to the old
    /// cluster's brokers are retired; `conn` becomes a bootstrap
    /// connection).
    fn forget_replaced_cluster(&mut self, now: Instant, conn: ConnectionId, md: &Metadata) {
        let (Some(old), Some(new)) = (
            self.metadata.cache().cluster_id.as_deref(),
            md.cluster_id.as_deref(),
        ) else {
            return;
        };
        if old == new {
            return;
        }
        log::warn!(
            "the brokers now answer for cluster {new}, not {old}: the old cluster's metadata, coordinator and connections are dropped"
        );
        self.metadata.forget_cluster();
        self.coordinator.forget();
        for id in self.conns.ids_where(|c| c.id != conn) {
            self.close(now, id, CloseReason::Retired, None);
        }
        // The answering connection reaches the new cluster, but not as the
        // broker it was opened for: it serves as a bootstrap connection
        // (promoted if it reaches a needed broker, retired otherwise).
        if let Some(c) = self.conns.get_mut(conn) {
            c.purpose = Purpose::Bootstrap;
            c.broker = None;
        }
    }

    /// The coordinator lookup's answer on `conn`.
    fn on_find_coordinator(&mut self, now: Instant, conn: ConnectionId, version: i16, body: Bytes) {
        let group = self.config.group_id.clone().unwrap_or_default();
        let backoff = self.config.retry_backoff;
        match self
            .coordinator
            .take_answer(now, version, body, &group, &backoff, &mut self.rng)
        {
            Ok(problem) => self.out.report(problem),
            Err(e) => self.close_undecodable(now, conn, ApiKey::FindCoordinator, &e),
        }
    }
}

#[cfg(test)]
mod tests;
