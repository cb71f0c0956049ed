//! A connection's life from its connect to its close (docs/connections.md,
//! rules 6 to 10): the setup (ApiVersions, then SASL when configured,
//! under one setup timeout, with its renewal and the OAUTHBEARER token
//! provider's calls), deadlines (connect, setup, requests), the bootstrap
//! connection's retirement, idle reaping, and what a close or a failed
//! connect leaves behind: requests failed or waiting again, the address
//! backed off, the event and the counters.
//!
//! This is where the parts meet over one connection: its state is in
//! [`Connections`](super::connections::Connections), its SASL phase in
//! [`Authentication`], its address's failures in
//! [`AddressFailures`](super::address_failures::AddressFailures), what it
//! tells the runtime in [`Outputs`](super::outputs::Outputs).

use super::authentication::{AuthStep, Authentication};
use super::conn::{Conn, Phase};
use super::oauth::{self, TokenNow};
use super::requests::Origin;
use super::{Action, Cluster, Problem, RequestBody, RequestError, Target};
use crate::events::{CloseReason, ConnectionError, ConnectionId, EventKind, Purpose};
use crate::protocol::{ApiKey, ApiVersionTable, ExchangeStep};
use crate::sasl::{Mechanism, OAuthToken, SaslConfig};
use bytes::{Bytes, BytesMut};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

impl Cluster {
    // ===== setup =====

    /// `conn`'s TCP connection is established: the ApiVersions exchange
    /// starts.
    pub(super) fn start_handshake(&mut self, now: Instant, conn: ConnectionId, peer: SocketAddr) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        c.peer = Some(peer);
        c.last_activity = now;
        let exchange = crate::protocol::ApiVersionsExchange::new();
        let version = exchange.version();
        c.phase = Phase::Handshake { exchange };
        self.emit(now, conn, EventKind::Opened);
        self.send_handshake(now, conn, version);
    }

    fn send_handshake(&mut self, now: Instant, conn: ConnectionId, version: i16) {
        let request =
            crate::protocol::messages::api_versions::ApiVersionsRequest::from_this_client();
        self.send_setup(now, conn, Origin::Handshake, &request, version);
    }

    /// ApiVersions answered on `conn`: asked again at another version, or
    /// the versions are negotiated and SASL (when configured) follows.
    pub(super) fn on_api_versions(&mut self, now: Instant, conn: ConnectionId, body: Bytes) {
        let Some(c) = self.conns.get_mut(conn) else {
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

    /// Sends a request that sets the connection up (ApiVersions, SASL)
    /// ahead of anything queued: it is encoded here and never stored, so
    /// SASL messages (which carry secrets) live no longer than the write.
    pub(super) fn send_setup(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        origin: Origin,
        request: &dyn RequestBody,
        version: i16,
    ) {
        let client_id = self.config.client_id.clone();
        let deadline = now + self.config.request_timeout;
        let Some(c) = self.conns.get_mut(conn) else {
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
                let counter = self.conns.counter(&addr);
                counter.requests += 1;
                counter.bytes_out += bytes.len() as u64;
                self.out.act(Action::Transmit {
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
    pub(super) fn became_ready(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        versions: ApiVersionTable,
        reauth_at: Option<Instant>,
    ) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        c.phase = Phase::Ready {
            versions,
            reauth_at,
        };
        c.setup_deadline = None;
        self.emit(now, conn, EventKind::Ready);
    }

    // ===== SASL =====

    /// Starts SASL on `conn` (KIP-43, KIP-152): SaslHandshake v1 names the
    /// mechanism; the SaslAuthenticate exchange follows its answer.
    pub(super) fn start_authentication(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        versions: ApiVersionTable,
        reauth: bool,
    ) {
        let Some(sasl) = self.config.sasl.as_ref() else {
            return;
        };
        let (auth, step) = Authentication::start(versions, reauth, sasl.mechanism);
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        c.phase = Phase::Authenticating(auth);
        self.take_auth_step(now, conn, step);
    }

    /// Carries out `step` of `conn`'s SASL phase.
    fn take_auth_step(&mut self, now: Instant, conn: ConnectionId, step: AuthStep) {
        match step {
            AuthStep::Handshake(request, v) => {
                self.send_setup(now, conn, Origin::SaslHandshake, &request, v)
            }
            AuthStep::Authenticate(request, v) => {
                self.send_setup(now, conn, Origin::SaslAuthenticate, &request, v)
            }
            AuthStep::Done(lifetime) => self.authenticated(now, conn, lifetime),
            AuthStep::Failed(message) => self.authentication_failed(now, conn, message),
        }
    }

    /// The SASL mechanism configured, by its name (`?` without SASL).
    fn mechanism_name(&self) -> String {
        self.config
            .sasl
            .as_ref()
            .map_or("?", |s| s.mechanism.name())
            .to_owned()
    }

    /// Closes `conn` for a failed authentication; the address's failures
    /// ([`AddressFailures::failed`](super::address_failures::AddressFailures::failed))
    /// report it and back the address off.
    fn authentication_failed(&mut self, now: Instant, conn: ConnectionId, message: String) {
        let mechanism = self.mechanism_name();
        self.close(
            now,
            conn,
            CloseReason::Error,
            Some(ConnectionError::Authentication { mechanism, message }),
        );
    }

    /// SaslHandshake answered on `conn`: the exchange starts, once the
    /// OAUTHBEARER token is at hand when the mechanism needs one.
    pub(super) fn on_sasl_handshake(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        version: i16,
        body: Bytes,
    ) {
        match Authentication::handshake_answered(version, body, self.config.sasl.as_ref()) {
            Err(e) => return self.close_undecodable(now, conn, ApiKey::SaslHandshake, &e),
            Ok(Some(step)) => return self.take_auth_step(now, conn, step),
            Ok(None) => {}
        }
        let Some(sasl) = self.config.sasl.clone() else {
            return;
        };
        let token = if sasl.mechanism == Mechanism::OAuthBearer {
            match self.oauth.token_now(now, &sasl) {
                TokenNow::Ready(t) => Some(t),
                TokenNow::Wait => {
                    // The exchange starts when the token comes
                    // (`handle_oauth_token`); the setup timeout still
                    // covers the wait.
                    if let Some(auth) = self.conns.authentication(conn) {
                        auth.awaiting_token = true;
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
    pub(super) fn start_sasl_session(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        sasl: &SaslConfig,
        token: Option<&OAuthToken>,
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
        let Some(step) = self
            .conns
            .authentication(conn)
            .and_then(|auth| auth.begin(sasl, random, token))
        else {
            return;
        };
        self.take_auth_step(now, conn, step);
    }

    /// Closes `conn` because the OAUTHBEARER token provider failed (a
    /// retriable cause, not a refusal: see
    /// [`ConnectionError::TokenProvider`]).
    pub(super) fn token_provider_failed(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        message: String,
    ) {
        self.close(
            now,
            conn,
            CloseReason::Error,
            Some(ConnectionError::TokenProvider {
                mechanism: Mechanism::OAuthBearer.name().to_owned(),
                message,
            }),
        );
    }

    /// SaslAuthenticate answered on `conn`.
    pub(super) fn on_sasl_authenticate(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        version: i16,
        body: Bytes,
    ) {
        let response = match Authentication::read_authenticate_answer(version, body) {
            Ok(Ok(response)) => response,
            Ok(Err(message)) => return self.authentication_failed(now, conn, message),
            Err(e) => return self.close_undecodable(now, conn, ApiKey::SaslAuthenticate, &e),
        };
        let Some(step) = self
            .conns
            .authentication(conn)
            .and_then(|auth| auth.authenticate_answered(&response))
        else {
            return;
        };
        self.take_auth_step(now, conn, step);
    }

    /// The broker accepted the credentials. With a session lifetime, the
    /// next authentication is due at 85-95% of it, as the Java client
    /// picks (KIP-368: time for the round trips, and jitter so that many
    /// connections do not renew at once).
    fn authenticated(&mut self, now: Instant, conn: ConnectionId, lifetime: Option<Duration>) {
        let reauth_at = lifetime.map(|l| now + l.mul_f64(0.85 + 0.10 * self.rng.unit()));
        let mechanism = self.mechanism_name();
        let Some(auth) = self.conns.authentication(conn) else {
            return;
        };
        let (versions, reauth) = (auth.versions.clone(), auth.reauth);
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
            let c = self.conns.get_mut(conn).expect("present");
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
    pub(super) fn reauthenticate(&mut self, now: Instant) {
        for id in self.conns.reauthentication_due(now) {
            let c = self.conns.get_mut(id).expect("present");
            let Phase::Ready { versions, .. } = &c.phase else {
                continue;
            };
            let versions = versions.clone();
            log::debug!("connection {id} to {}: renewing its SASL session", c.addr);
            self.start_authentication(now, id, versions, true);
        }
    }

    /// When the asynchronous OAUTHBEARER token provider is to be called
    /// next, if one is configured (see [`OAuthState::due`](super::oauth::OAuthState::due)):
    /// at once for a connection that waits for a token, for a renewal
    /// while connections live.
    pub(super) fn oauth_due(&self) -> Option<Instant> {
        oauth::async_token_provider(&self.config)?;
        self.oauth.due(
            self.conns.awaiting_token(),
            !self.conns.is_empty(),
            self.epoch,
        )
    }

    /// Asks the runtime for an OAUTHBEARER token when it is due
    /// ([`Cluster::oauth_due`]).
    pub(super) fn drive_oauth(&mut self, now: Instant) {
        if self.oauth_due().is_none_or(|t| now < t) {
            return;
        }
        let Some(provider) = oauth::async_token_provider(&self.config).cloned() else {
            return;
        };
        self.oauth.fetching();
        log::debug!("asking the OAUTHBEARER token provider for a token");
        self.out.act(Action::FetchOAuthToken {
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
    pub fn handle_oauth_token(&mut self, now: Instant, token: Result<OAuthToken, String>) {
        let waiting = self.conns.take_token_waiters();
        let backoff = self.config.reconnect_backoff;
        let delay = self.oauth.answered(now, &token, &backoff, &mut self.rng);
        match token {
            Ok(token) => {
                if let Some(sasl) = self.config.sasl.clone() {
                    for id in waiting {
                        self.start_sasl_session(now, id, &sasl, Some(&token));
                    }
                }
            }
            Err(message) => {
                if waiting.is_empty() {
                    // A renewal ahead of need: the last token still serves.
                    let log = if self.oauth.failures() == 1 {
                        log::Level::Warn
                    } else {
                        log::Level::Debug
                    };
                    let delay = delay.unwrap_or_default();
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

    // ===== deadlines =====

    /// The earliest deadline of `c`: its connect or setup timeout, its
    /// SASL session's renewal, a request's timeout, its idle time.
    pub(super) fn connection_deadline(&self, c: &Conn) -> Option<Instant> {
        let connect = match c.phase {
            Phase::Connecting { deadline } => Some(deadline),
            _ => None,
        };
        let setup = (!c.is_usable()).then_some(c.setup_deadline).flatten();
        // With requests in flight, the last response starts the
        // re-authentication, not time.
        let reauth = match c.phase {
            Phase::Ready {
                reauth_at: Some(t), ..
            } if c.in_flight.is_empty() => Some(t),
            _ => None,
        };
        [
            connect,
            setup,
            reauth,
            c.next_request_deadline(),
            self.idle_deadline(c),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Acts on every deadline passed at `now`.
    pub(super) fn expire(&mut self, now: Instant) {
        self.expire_connects(now);
        self.expire_setups(now);
        self.expire_in_flight(now);
        self.expire_waiting(now);
        self.expire_queued(now);
    }

    /// Connect attempts past their setup timeout.
    fn expire_connects(&mut self, now: Instant) {
        for id in self.conns.late_connects(now) {
            let c = self.conns.remove(id).expect("present");
            self.out.act(Action::Close { conn: id });
            self.connect_failed(now, c, ConnectionError::SetupTimeout);
        }
    }

    /// Connected, but the setup (ApiVersions, SASL) did not finish within
    /// the setup timeout, which covers it all.
    fn expire_setups(&mut self, now: Instant) {
        for id in self.conns.late_setups(now) {
            self.close(
                now,
                id,
                CloseReason::Error,
                Some(ConnectionError::SetupTimeout),
            );
        }
    }

    /// Requests past request.timeout.ms: the connection is closed, as the
    /// Java client does, since the broker may never answer in order again.
    fn expire_in_flight(&mut self, now: Instant) {
        for (id, api) in self.conns.timed_out(now) {
            self.close(
                now,
                id,
                CloseReason::Error,
                Some(ConnectionError::RequestTimeout { api }),
            );
        }
    }

    /// Requests that never got a connection in time.
    fn expire_waiting(&mut self, now: Instant) {
        for w in self.waiting.take_expired(now) {
            let api = w.queued.body.api_key();
            let last_error = self.failures.last_failure();
            self.fail(w.queued.origin, RequestError::Timeout { api, last_error });
        }
    }

    /// Requests queued on a connection that did not write them in time:
    /// the caller's fail, and a request of the connection manager's own
    /// (Metadata, FindCoordinator) is wanted again.
    fn expire_queued(&mut self, now: Instant) {
        for q in self.conns.take_expired_queued(now) {
            let api = q.body.api_key();
            let error = RequestError::Timeout {
                api,
                last_error: None,
            };
            self.fail(q.origin, error);
        }
    }

    // ===== retirement and idle reaping =====

    /// docs/connections.md, rule 6: the bootstrap connection goes once the coordinator (in
    /// group mode) and at least one leader (or replica) connection are
    /// ready, and nothing is in flight on it.
    pub(super) fn retire_bootstrap(&mut self, now: Instant) {
        let leader_ready = self
            .conns
            .any_ready_for(&[Purpose::Leader, Purpose::Replica]);
        let coordinator_ready =
            self.config.group_id.is_none() || self.conns.any_ready_for(&[Purpose::Coordinator]);
        if !(leader_ready && coordinator_ready) {
            return;
        }
        let idle_bootstrap = self
            .conns
            .ids_where(|c| c.purpose == Purpose::Bootstrap && c.load() == 0 && c.is_ready());
        for id in idle_bootstrap {
            self.emit(now, id, EventKind::Retired);
            self.close(now, id, CloseReason::Retired, None);
        }
    }

    /// When `c` is idle for `connections.max.idle.ms`: ready with nothing
    /// in flight or queued.
    fn idle_deadline(&self, c: &Conn) -> Option<Instant> {
        let max_idle = self.config.connections_max_idle?;
        (c.is_ready() && c.load() == 0).then(|| c.last_activity + max_idle)
    }

    /// Closes the connections idle for `connections.max.idle.ms`.
    pub(super) fn reap_idle(&mut self, now: Instant) {
        let idle = self
            .conns
            .ids_where(|c| self.idle_deadline(c).is_some_and(|t| now >= t));
        for id in idle {
            self.close(now, id, CloseReason::Idle, None);
        }
    }

    /// Closes the coordinator connection (the coordinator moved).
    pub(super) fn close_coordinator_connections(&mut self, now: Instant) {
        let coordinator_conns = self.conns.ids_where(|c| c.purpose == Purpose::Coordinator);
        for id in coordinator_conns {
            self.close(now, id, CloseReason::Retired, None);
        }
    }

    // ===== closing and failing =====

    /// Closes `conn` after a response that could not be decoded: the
    /// broker and the client disagree on the protocol, and nothing more
    /// read from it can be trusted.
    pub(super) fn close_undecodable(
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

    /// `origin`'s request got no response: its caller hears why; a
    /// request of the connection manager's own is wanted again.
    pub(super) fn fail(&mut self, origin: Origin, error: RequestError) {
        match origin {
            Origin::User(id) => self.out.respond(id, Err(error)),
            Origin::Metadata | Origin::MetadataById => self.metadata.request_lost(origin),
            Origin::FindCoordinator => self.coordinator.request_lost(),
            Origin::Handshake | Origin::SaslHandshake | Origin::SaslAuthenticate => {}
        }
    }

    /// Connecting `c` (already removed) failed.
    pub(super) fn connect_failed(&mut self, now: Instant, c: Conn, error: ConnectionError) {
        self.conns.counter(&c.addr).connect_failures += 1;
        let delay = self.failed(now, &c, &error);
        log::debug!(
            "connection {} to {} ({}) failed: {error}; next attempt in {delay:?}",
            c.id,
            c.addr,
            c.purpose
        );
        self.out.event(
            self.epoch,
            now,
            &c,
            EventKind::ConnectFailed {
                error: error.clone(),
            },
        );
        if c.purpose == Purpose::Coordinator {
            self.coordinator.forget();
        }
        self.requeue(c, &error);
    }

    /// A connection to `c`'s address failed, or broke: the address's
    /// failures ([`AddressFailures::failed`](super::address_failures::AddressFailures::failed))
    /// back it off and say what to report. Returns the backoff.
    fn failed(&mut self, now: Instant, c: &Conn, error: &ConnectionError) -> Duration {
        let any_ready = self.conns.any_ready();
        let (delay, mut problem) =
            self.failures
                .failed(now, c, error, &self.config, &mut self.rng, any_ready);
        // One report per address: a broker that is the group coordinator
        // is named as that, whichever of its connections failed first (its
        // leader connection, often), since the group's traffic stops with
        // it.
        let coordinator = self.coordinator.known().map(|b| b.id);
        if let Some(Problem::BrokerUnreachable {
            broker, purpose, ..
        }) = &mut problem
        {
            if broker.is_some() && *broker == coordinator {
                *purpose = Purpose::Coordinator;
            }
        }
        self.out.report(problem);
        // A known broker that cannot be reached (a connect that failed, a
        // connection that broke before it answered a request) may have
        // left the cluster, or the cluster moved: the metadata is asked
        // again (after the retry backoff, as the Java client asks for an
        // update on a disconnect), from a broker that answers, else from a
        // bootstrap address (docs/connections.md, rule 14). A connection
        // that had answered and is closed by its broker (its idle limit,
        // say) asks nothing: the next request that needs the broker
        // connects again, and asks then if that fails.
        if c.broker.is_some() && !c.answered {
            self.metadata
                .broker_missing(now, &self.config.retry_backoff, &mut self.rng);
        }
        delay
    }

    /// A connection answered a request: its address's run of failures is
    /// over.
    pub(super) fn answered(&mut self, conn: ConnectionId) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        if c.answered {
            return;
        }
        c.answered = true;
        let addr = c.addr.clone();
        self.failures.answered(&addr);
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
            self.waiting.push(target, queued);
        }
    }

    /// Closes `id` for `reason` (with the `error` that caused it): its
    /// requests in flight fail, its queued ones wait again (or fail, at
    /// shutdown), a connection that broke backs its address off.
    pub(super) fn close(
        &mut self,
        now: Instant,
        id: ConnectionId,
        reason: CloseReason,
        error: Option<ConnectionError>,
    ) {
        let Some(mut c) = self.conns.remove(id) else {
            return;
        };
        self.out.act(Action::Close { conn: id });
        self.conns.counter(&c.addr).count_close(reason);
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
            self.conns.counter(&c.addr).request_errors += c.in_flight.len() as u64;
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
        self.count_closed(&c, reason);
        match reason {
            CloseReason::Error | CloseReason::Peer => {
                log::debug!("connection {id} to {} closed ({reason}): {lost}", c.addr)
            }
            _ => log::debug!("connection {id} to {} closed ({reason})", c.addr),
        }
        self.out
            .event(self.epoch, now, &c, EventKind::Closed { reason, error });
        if reason == CloseReason::Shutdown {
            for q in c.queue.drain(..) {
                self.fail(q.origin, RequestError::Shutdown);
            }
        } else {
            self.requeue(c, &lost);
        }
    }

    /// What closing `c` changes beyond itself: a coordinator connection
    /// that broke forgets the coordinator; a leader or replica connection
    /// counts in its broker's generations.
    fn count_closed(&mut self, c: &Conn, reason: CloseReason) {
        if c.purpose == Purpose::Coordinator
            && matches!(reason, CloseReason::Peer | CloseReason::Error)
        {
            self.coordinator.forget();
        }
        self.conns.count_closed(c);
    }

    // ===== bookkeeping =====

    /// Records an event of the live connection `id`.
    pub(super) fn emit(&mut self, now: Instant, id: ConnectionId, kind: EventKind) {
        if let Some(c) = self.conns.get(id) {
            self.out.event(self.epoch, now, c, kind);
        }
    }
}
