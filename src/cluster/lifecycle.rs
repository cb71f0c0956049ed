//! A connection's life from its connect to its close (docs/connections.md,
//! rules 6 to 10): the setup (ApiVersions, then SASL when configured,
//! under one setup timeout), deadlines (connect, setup, requests), the
//! bootstrap connection's retirement, idle reaping, and what a close or a
//! failed connect leaves behind: requests failed or waiting again, the
//! address backed off, the event and the counters.

use super::conn::{Conn, Phase, Queued};
use super::metadata::Metadata;
use super::requests::{Origin, Waiting};
use super::{Action, Cluster, Problem, RequestBody, RequestError, Target};
use crate::events::{
    BrokerCounters, CloseReason, ConnectionError, ConnectionEvent, ConnectionId, EventKind,
    Purpose,
};
use crate::protocol::{ApiKey, ApiVersionTable, ExchangeStep};
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

impl Cluster {
    // ===== setup =====

    /// `conn`'s TCP connection is established: the ApiVersions exchange
    /// starts.
    pub(super) fn start_handshake(&mut self, now: Instant, conn: ConnectionId, peer: SocketAddr) {
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
    }

    fn send_handshake(&mut self, now: Instant, conn: ConnectionId, version: i16) {
        let request =
            crate::protocol::messages::api_versions::ApiVersionsRequest::from_this_client();
        self.send_setup(now, conn, Origin::Handshake, &request, version);
    }

    /// ApiVersions answered on `conn`: asked again at another version, or
    /// the versions are negotiated and SASL (when configured) follows.
    pub(super) fn on_api_versions(&mut self, now: Instant, conn: ConnectionId, body: Bytes) {
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
    pub(super) fn became_ready(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        versions: ApiVersionTable,
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

    /// Names the brokers of connections opened to a bootstrap address
    /// once a Metadata answer lists their addresses; the counters of an
    /// address follow the broker found behind it.
    pub(super) fn name_brokers(&mut self, md: &Metadata) {
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
        let named: Vec<(String, i32)> = self
            .conns
            .values()
            .filter_map(|c| c.broker.map(|b| (c.addr.clone(), b)))
            .collect();
        for (addr, broker) in named {
            self.counter(&addr).broker = Some(broker);
        }
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
    }

    /// Connected, but the setup (ApiVersions, SASL) did not finish within
    /// the setup timeout, which covers it all.
    fn expire_setups(&mut self, now: Instant) {
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
    }

    /// Requests past request.timeout.ms: the connection is closed, as the
    /// Java client does, since the broker may never answer in order again.
    fn expire_in_flight(&mut self, now: Instant) {
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
                Some(ConnectionError::RequestTimeout { api }),
            );
        }
    }

    /// Requests that never got a connection in time.
    fn expire_waiting(&mut self, now: Instant) {
        let mut kept = VecDeque::new();
        for w in std::mem::take(&mut self.waiting) {
            if now >= w.queued.deadline {
                let api = w.queued.body.api_key();
                let last_error = self.failures.last_failure();
                self.fail(w.queued.origin, RequestError::Timeout { api, last_error });
            } else {
                kept.push_back(w);
            }
        }
        self.waiting = kept;
    }

    /// Requests queued on a connection that did not write them in time.
    fn expire_queued(&mut self, now: Instant) {
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

    // ===== retirement and idle reaping =====

    /// docs/connections.md, rule 6: the bootstrap connection goes once the coordinator (in
    /// group mode) and at least one leader (or replica) connection are
    /// ready, and nothing is in flight on it.
    pub(super) fn retire_bootstrap(&mut self, now: Instant) {
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

    /// When `c` is idle for `connections.max.idle.ms`: ready with nothing
    /// in flight or queued.
    fn idle_deadline(&self, c: &Conn) -> Option<Instant> {
        let max_idle = self.config.connections_max_idle?;
        (c.is_ready() && c.load() == 0).then(|| c.last_activity + max_idle)
    }

    /// Closes the connections idle for `connections.max.idle.ms`.
    pub(super) fn reap_idle(&mut self, now: Instant) {
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

    /// Closes the coordinator connection (the coordinator moved).
    pub(super) fn close_coordinator_connections(&mut self, now: Instant) {
        let coordinator_conns: Vec<ConnectionId> = self
            .conns
            .values()
            .filter(|c| c.purpose == Purpose::Coordinator)
            .map(|c| c.id)
            .collect();
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
            Origin::User(id) => self.responses.push_back((id, Err(error))),
            Origin::Metadata | Origin::MetadataById => self.metadata.request_lost(origin),
            Origin::FindCoordinator => self.coordinator.request_lost(),
            Origin::Handshake | Origin::SaslHandshake | Origin::SaslAuthenticate => {}
        }
    }

    /// Connecting `c` (already removed) failed.
    pub(super) fn connect_failed(&mut self, now: Instant, c: Conn, error: ConnectionError) {
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
            self.coordinator.forget();
        }
        self.requeue(c, &error);
    }

    /// A connection to `c`'s address failed, or broke: the address's
    /// failures ([`AddressFailures::failed`](super::address_failures::AddressFailures::failed))
    /// back it off and say what to report. Returns the backoff.
    fn failed(&mut self, now: Instant, c: &Conn, error: &ConnectionError) -> Duration {
        let any_ready = self.any_ready();
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
        self.problems.extend(problem);
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

    /// Whether some connection is ready.
    pub(super) fn any_ready(&self) -> bool {
        self.conns.values().any(|c| c.is_ready())
    }

    /// A connection answered a request: its address's run of failures is
    /// over.
    pub(super) fn answered(&mut self, conn: ConnectionId) {
        let Some(c) = self.conns.get_mut(&conn) else {
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
            self.waiting.push_back(Waiting { target, queued });
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
        self.count_closed(&c, reason);
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

    /// What closing `c` changes beyond itself: a coordinator connection
    /// that broke forgets the coordinator; a leader or replica connection
    /// counts in its broker's generations.
    fn count_closed(&mut self, c: &Conn, reason: CloseReason) {
        if c.purpose == Purpose::Coordinator
            && matches!(reason, CloseReason::Peer | CloseReason::Error)
        {
            self.coordinator.forget();
        }
        if let Some(broker) = c.broker {
            match c.purpose {
                Purpose::Leader => *self.leader_generations.entry(broker).or_default() += 1,
                Purpose::Replica => *self.replica_generations.entry(broker).or_default() += 1,
                Purpose::Bootstrap | Purpose::Coordinator => {}
            }
        }
    }

    // ===== bookkeeping =====

    /// The counters of `addr`.
    pub(super) fn counter(&mut self, addr: &str) -> &mut BrokerCounters {
        if !self.counters.contains_key(addr) {
            self.counters
                .insert(addr.to_owned(), BrokerCounters::default());
        }
        self.counters.get_mut(addr).expect("inserted")
    }

    /// Records an event of the live connection `id`.
    pub(super) fn emit(&mut self, now: Instant, id: ConnectionId, kind: EventKind) {
        if let Some(c) = self.conns.get(&id) {
            let event = connection_event(self.epoch, now, c, kind);
            self.record(event);
        }
    }

    /// Records an event of `c`, live or not.
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
