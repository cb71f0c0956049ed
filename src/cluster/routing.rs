//! Where requests go (docs/connections.md, rules 2 to 6): the requests the
//! connection manager makes on its own, each waiting request moved onto
//! the connection for its [`Target`] (opening one if needed, or promoting
//! a bootstrap connection that reached the broker), and each connection's
//! queue written out as far as `max.in.flight` allows.

use super::conn::{Conn, Phase, Queued, RequestBody};
use super::requests::Origin;
use super::{Action, Cluster, RequestError, Response, Target};
use crate::events::{ConnectionId, EventKind, Purpose};
use crate::protocol::ApiVersionTable;
use bytes::{Bytes, BytesMut};
use std::time::Instant;

impl Cluster {
    /// Queues the Metadata and FindCoordinator requests that are due.
    pub(super) fn schedule_internal_requests(&mut self, now: Instant) {
        let max_age = self.config.metadata_max_age;
        let auto_create = self.config.allow_auto_create_topics;
        if let Some(body) = self.metadata.request_due(now, max_age, auto_create) {
            let target = self.metadata_target(now);
            self.queue_internal(now, target, Origin::Metadata, body);
        }
        if let Some(body) = self.metadata.by_id_request_due(now) {
            self.queue_internal(now, Target::AnyBroker, Origin::MetadataById, body);
        }
        let needed = self.coordinator_needed();
        let group = self.config.group_id.as_deref();
        if let Some(body) = self.coordinator.request_due(now, group, needed) {
            self.queue_internal(now, Target::AnyBroker, Origin::FindCoordinator, body);
        }
    }

    /// Where the regular Metadata request goes: the least-loaded broker,
    /// or a bootstrap address when the client rebootstraps
    /// (`metadata.recovery.strategy=rebootstrap`, docs/connections.md,
    /// "Rebootstrap"): a broker answered REBOOTSTRAP_REQUIRED, or no answer
    /// came for `metadata.recovery.rebootstrap.trigger.ms`.
    fn metadata_target(&mut self, now: Instant) -> Target {
        let Some(trigger) = self.config.rebootstrap else {
            return Target::AnyBroker;
        };
        let Some(reason) = self.metadata.rebootstrap_reason(now, trigger) else {
            return Target::AnyBroker;
        };
        log::warn!(
            "rebootstrapping: {reason}; asking the bootstrap addresses ({}) for metadata",
            self.config.bootstrap.join(",")
        );
        self.metadata.rebootstrapping(now);
        Target::Bootstrap
    }

    /// Queues a request the connection manager makes on its own.
    fn queue_internal(
        &mut self,
        now: Instant,
        target: Target,
        origin: Origin,
        body: Box<dyn RequestBody>,
    ) {
        self.waiting.push(
            target,
            Queued {
                origin,
                body,
                deadline: now + self.config.request_timeout,
                answered: true,
            },
        );
    }

    /// Whether a request waits for the coordinator connection.
    pub(super) fn coordinator_needed(&self) -> bool {
        self.waiting.wants(Target::Coordinator)
    }

    /// Moves waiting requests onto connections, opening connections where
    /// a request needs one.
    pub(super) fn dispatch_waiting(&mut self, now: Instant) {
        let mut still = std::collections::VecDeque::new();
        for w in self.waiting.take_all() {
            match self.connection_for(now, w.target) {
                Ok(Some(id)) => {
                    self.conns
                        .get_mut(id)
                        .expect("connection_for returns live ids")
                        .queue
                        .push_back(w.queued);
                }
                Ok(None) => still.push_back(w),
                Err(e) => self.fail(w.queued.origin, e),
            }
        }
        self.waiting.restore(still);
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
            Target::Bootstrap => match self.conns.find(Purpose::Bootstrap, None) {
                Some(id) => Ok(Some(id)),
                None => Ok(self.open_bootstrap(now)),
            },
            Target::Coordinator => self.coordinator_connection(now),
            Target::Broker(id) => Ok(self.leader_connection(now, id)),
            Target::Replica(id) => self.replica_connection(now, id),
        }
    }

    /// The coordinator connection, opened once the coordinator is known.
    fn coordinator_connection(
        &mut self,
        now: Instant,
    ) -> Result<Option<ConnectionId>, RequestError> {
        if self.config.group_id.is_none() {
            return Err(RequestError::NoGroup);
        }
        if let Some(id) = self.conns.find(Purpose::Coordinator, None) {
            return Ok(Some(id));
        }
        let Some(coordinator) = self.coordinator.known().cloned() else {
            return Ok(None);
        };
        Ok(self.open(
            now,
            coordinator.addr(),
            Some(coordinator.id),
            Purpose::Coordinator,
        ))
    }

    /// Broker `id`'s leader connection. A broker not in the metadata (yet)
    /// is looked up, and the request waits; its own deadline bounds the
    /// wait.
    fn leader_connection(&mut self, now: Instant, id: i32) -> Option<ConnectionId> {
        if let Some(cid) = self.conns.find(Purpose::Leader, Some(id)) {
            return Some(cid);
        }
        let Some(broker) = self.metadata.cache().brokers.get(&id).cloned() else {
            // Refreshed after the retry backoff if it is already fresh.
            self.metadata
                .broker_missing(now, &self.config.retry_backoff, &mut self.rng);
            return None;
        };
        let addr = broker.addr();
        if let Some(cid) = self.promote(now, &addr, id, Purpose::Leader) {
            return Some(cid);
        }
        self.open(now, addr, Some(id), Purpose::Leader)
    }

    /// Broker `id`'s replica connection. Unlike a leader, a read replica is
    /// not waited for: the caller fetches from the leader instead (KIP-392,
    /// as the Java consumer falls back when the preferred replica is
    /// offline or missing from its metadata).
    fn replica_connection(
        &mut self,
        now: Instant,
        id: i32,
    ) -> Result<Option<ConnectionId>, RequestError> {
        if let Some(cid) = self.conns.find(Purpose::Replica, Some(id)) {
            return Ok(Some(cid));
        }
        let Some(broker) = self.metadata.cache().brokers.get(&id).cloned() else {
            return Err(RequestError::ReplicaUnavailable {
                broker: id,
                reason: "the broker is not in the metadata".into(),
            });
        };
        let addr = broker.addr();
        if self.failures.in_backoff(now, &addr) {
            let reason = match self.failures.last_error(&addr) {
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
        let cid = self.conns.promote(addr, id, purpose)?;
        self.emit(now, cid, EventKind::Promoted);
        Some(cid)
    }

    /// docs/connections.md, rule 2: the least-loaded ready leader or replica
    /// connection, else the coordinator connection, else the bootstrap
    /// connection (at most one exists), else a new bootstrap connection.
    pub(super) fn least_loaded(&mut self, now: Instant) -> Option<ConnectionId> {
        let conns = &self.conns;
        if let Some(id) = conns
            .least_loaded(&[Purpose::Leader, Purpose::Replica], true)
            .or_else(|| conns.least_loaded(&[Purpose::Coordinator], true))
            .or_else(|| conns.least_loaded(&[Purpose::Bootstrap], false))
        {
            return Some(id);
        }
        if self.config.rebootstrap.is_none() && !self.metadata.cache().brokers.is_empty() {
            // `metadata.recovery.strategy=none`: once the cluster is known,
            // only its brokers are asked (as the Java client's least-loaded
            // node among those of its last metadata).
            return self.open_known_broker(now);
        }
        self.open_bootstrap(now)
    }

    /// A connection to the next broker of the last metadata not in
    /// backoff, if any (`metadata.recovery.strategy=none`): one for
    /// metadata and lookups, as a bootstrap connection is (promoted if the
    /// broker turns out to be a needed leader, retired otherwise).
    fn open_known_broker(&mut self, now: Instant) -> Option<ConnectionId> {
        let brokers: Vec<(i32, String)> = self
            .metadata
            .cache()
            .brokers
            .values()
            .map(|b| (b.id, b.addr()))
            .collect();
        let failures = &self.failures;
        let i = self
            .conns
            .next_in_turn(brokers.len(), |i| failures.in_backoff(now, &brokers[i].1))?;
        let (id, addr) = brokers[i].clone();
        self.open(now, addr, Some(id), Purpose::Bootstrap)
    }

    /// A connection to the next bootstrap address not in backoff, if any.
    fn open_bootstrap(&mut self, now: Instant) -> Option<ConnectionId> {
        let (failures, bootstrap) = (&self.failures, &self.config.bootstrap);
        let i = self
            .conns
            .next_in_turn(bootstrap.len(), |i| failures.in_backoff(now, &bootstrap[i]))?;
        let addr = self.config.bootstrap[i].clone();
        self.open(now, addr, None, Purpose::Bootstrap)
    }

    /// Asks the runtime to connect to `addr`, unless it is in backoff; the
    /// setup timeout grows with the address's failures.
    fn open(
        &mut self,
        now: Instant,
        addr: String,
        broker: Option<i32>,
        purpose: Purpose,
    ) -> Option<ConnectionId> {
        if self.failures.in_backoff(now, &addr) {
            return None;
        }
        let failures = self.failures.failures(&addr);
        let timeout = self
            .config
            .setup_timeout
            .delay(failures + 1, self.rng.unit());
        let id = self.conns.open(
            now,
            addr.clone(),
            broker,
            purpose,
            now + timeout,
            self.config.max_frame_size,
        );
        self.out.act(Action::Connect {
            conn: id,
            addr,
            timeout,
        });
        self.emit(now, id, EventKind::Connecting);
        Some(id)
    }

    /// Writes out every ready connection's queue, as far as
    /// `max.in.flight` allows.
    pub(super) fn flush_queues(&mut self, now: Instant) {
        for id in self.conns.ids() {
            self.flush_queue(now, id);
        }
    }

    /// Writes out `id`'s queue, unless it is not ready or renews its SASL
    /// session (KIP-368: requests wait meanwhile): every frame in one
    /// buffer, one [`Action::Transmit`], nothing copied to join them.
    fn flush_queue(&mut self, now: Instant, id: ConnectionId) {
        let client_id = self.config.client_id.clone();
        let max_in_flight = self.config.max_in_flight;
        let c = self.conns.get_mut(id).expect("present");
        let Phase::Ready {
            versions,
            reauth_at,
        } = &c.phase
        else {
            return;
        };
        if reauth_at.is_some_and(|t| now >= t) {
            return;
        }
        let versions = versions.clone();
        let batch = encode_queue(c, now, &versions, max_in_flight, client_id.as_deref());
        let addr = c.addr.clone();
        for (origin, e) in batch.failed {
            self.fail(origin, e);
        }
        if !batch.frames.is_empty() {
            let bytes = batch.frames.freeze();
            let counter = self.conns.counter(&addr);
            counter.requests += batch.sent;
            counter.bytes_out += bytes.len() as u64;
            self.out.act(Action::Transmit {
                conn: id,
                bytes,
                written: batch.written,
            });
        }
    }

    /// The runtime handed to `conn`'s socket every byte up to the
    /// [`Action::Transmit`] whose `written` was `n`: the requests it
    /// carried that the broker does not answer are done.
    pub fn handle_written(&mut self, conn: ConnectionId, n: u64) {
        let Some(c) = self.conns.get_mut(conn) else {
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
                self.out.respond(id, Ok(response));
            }
        }
    }
}

/// What one connection's queue became when written out.
struct Batch {
    /// The request frames, one after the other.
    frames: BytesMut,
    /// How many requests they carry.
    sent: u64,
    /// Requests that could not be written, with why.
    failed: Vec<(Origin, RequestError)>,
    /// The number of the transmit, when it carries requests the broker
    /// does not answer (see [`Action::Transmit`]).
    written: Option<u64>,
}

/// Encodes `c`'s queued requests at the versions negotiated until
/// `max_in_flight` are out: answered ones join the requests in flight;
/// those the broker does not answer are done once written.
fn encode_queue(
    c: &mut Conn,
    now: Instant,
    versions: &ApiVersionTable,
    max_in_flight: usize,
    client_id: Option<&str>,
) -> Batch {
    let mut frames = BytesMut::new();
    let mut failed = Vec::new();
    let mut unanswered = Vec::new();
    let mut sent = 0u64;
    while c.in_flight.len() < max_in_flight {
        let Some(q) = c.queue.pop_front() else { break };
        let api = q.body.api_key();
        let version = match versions.version(api) {
            Ok(v) => v,
            Err(e) => {
                failed.push((q.origin, RequestError::NoCommonVersion(e)));
                continue;
            }
        };
        let encoded = c.encode(
            &mut frames,
            now,
            q.origin,
            q.body.as_ref(),
            version,
            client_id,
            q.deadline,
        );
        match encoded {
            Ok(()) => {
                sent += 1;
                if !q.answered {
                    // Nothing will come back for it: not in flight; done
                    // once written.
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
    Batch {
        frames,
        sent,
        failed,
        written,
    }
}
