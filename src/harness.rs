//! A client's core stepped against `lazykafka::mock`'s brokers in memory,
//! with a manual clock: no socket, no thread, no sleep. One harness for
//! every core ([`ClientCore`]: the consumer's, the producer's); each
//! client's tests add what its application does (`consumer/pair.rs`: poll
//! and subscribe; `producer/core/tests.rs`: append).
//!
//! [`Pair`] (after quinn-proto's test `Pair`, two state machines stepped
//! against each other) carries the core's connection actions: a connect
//! reaches the broker at that address when it is up (and is refused when
//! it is down), each request frame sent is answered from the mock's
//! [`State`] with the same code the mock's server threads use
//! (`mock::respond`), and a close forgets the connection. Requests the mock
//! parks (a Fetch below `fetch.min.bytes`, a JoinGroup or SyncGroup waiting
//! for other members) are answered at the step where the manual clock or a
//! change of the state makes them ready. Each broker connection answers its
//! requests in order, one at a time, as Kafka's do.
//!
//! The clock only moves through [`Pair::advance`], from deadline to
//! deadline (the core's, the group coordinator's, a parked Fetch's), so
//! every timer fires at its exact time and each run is the same.

use crate::cluster::{Action, ClientCore};
use crate::error::Error;
use crate::events::{ConnectionError, ConnectionId};
use crate::mock::group::GroupSettings;
use crate::mock::respond::{self, Answer, Reply, Waiting};
use crate::mock::sasl::ConnAuth;
use crate::mock::state::State;
use crate::protocol::{ApiKey, Reader, RequestHeader};
use crate::records::RecordBatchBuilder;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Broker `id`'s address: TEST-NET-1 (RFC 5737), so that nothing could
/// reach it even if a socket were opened by mistake.
pub(crate) fn addr(id: i32) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, id as u8], 9092))
}

/// One connection between the core and a mock broker.
pub(crate) struct Link {
    pub broker: i32,
    /// The mock's number for it (its event log's `connection`).
    id: u64,
    auth: ConnAuth,
    /// Request frames (size prefix removed) not answered yet, in order.
    queue: VecDeque<Bytes>,
    /// The request at the head of the queue, parked by the mock.
    waiting: Option<Waiting>,
}

/// A request the mock answered or parked: when, where, which API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Served {
    /// Time since the pair started.
    pub at: Duration,
    pub broker: i32,
    pub api: ApiKey,
}

/// See the [module documentation](self).
pub(crate) struct Pair<C> {
    /// The client's core under test.
    pub core: C,
    /// The brokers' state.
    pub mock: State,
    pub start: Instant,
    /// The manual clock.
    pub now: Instant,
    pub links: BTreeMap<ConnectionId, Link>,
    /// Every request served, in order.
    pub log: Vec<Served>,
    /// What each Metadata request asked for, when it was served: its
    /// version and topics as (name, id), `None` for every topic.
    pub metadata_asked: Vec<MetadataAsked>,
    /// The errors the client reported (its own harness methods collect
    /// them).
    pub errors: Vec<Error>,
}

/// A Metadata request as served: when, version, topics (name, id) or
/// `None` for every topic.
pub(crate) type MetadataAsked = (Duration, i16, Option<Vec<(Option<String>, [u8; 16])>>);

impl<C: ClientCore> Pair<C> {
    /// `brokers` mock brokers (ids from 1, each at [`addr`]) and the core
    /// `make` gives for the start of the clock.
    pub fn with_core(brokers: i32, make: impl FnOnce(Instant) -> C) -> Self {
        // The only clock read: the start. Time moves by `advance` alone.
        let start = Instant::now();
        let addrs = (1..=brokers).map(|id| (id, addr(id))).collect();
        let settings = GroupSettings {
            initial_rebalance_delay: Duration::ZERO,
            min_session_timeout: Duration::from_millis(100),
            max_session_timeout: Duration::from_secs(1800),
        };
        Pair {
            core: make(start),
            mock: State::new(start, addrs, settings),
            start,
            now: start,
            links: BTreeMap::new(),
            log: Vec::new(),
            metadata_asked: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Time since the pair started.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// Appends `n` records to a partition, values `"{partition}-{i}"`.
    pub fn produce(&mut self, topic: &str, partition: i32, n: usize) {
        let p = &mut self.mock.topics.get_mut(topic).unwrap().partitions[partition as usize];
        let mut batch = RecordBatchBuilder::new(0);
        for i in 0..n {
            let value = format!("{partition}-{i}");
            batch
                .append(1_000, None, Some(value.as_bytes()), &[])
                .unwrap();
        }
        let batch = batch.build().unwrap();
        p.log.append(&batch, p.leader_epoch).unwrap();
    }

    /// Moves the clock forward by `span`, stopping at every deadline on the
    /// way so that each fires at its time.
    pub fn advance(&mut self, span: Duration) {
        let end = self.now + span;
        loop {
            self.settle();
            let parked = self
                .links
                .values()
                .filter_map(|l| l.waiting.as_ref()?.wake_at(&self.mock));
            // What the runtime's driver sleeps until: never `now` or
            // earlier (it would wake at once, again and again).
            let core_next = self.core.next_deadline_after(self.now);
            assert!(
                core_next.is_none_or(|t| t > self.now),
                "the core's next deadline is not after now"
            );
            let next = [core_next, self.mock.groups.next_deadline()]
                .into_iter()
                .flatten()
                .chain(parked)
                .filter(|t| *t > self.now)
                .min();
            match next {
                Some(t) if t < end => self.now = t,
                _ => {
                    self.now = end;
                    self.settle();
                    return;
                }
            }
        }
    }

    /// Steps both sides at the current time until neither has anything
    /// more to do.
    pub fn settle(&mut self) {
        for _ in 0..10_000 {
            // The mock's timer thread: session expiry, rebalance timeouts.
            if self
                .mock
                .groups
                .next_deadline()
                .is_some_and(|t| t <= self.now)
            {
                self.mock.groups.tick(self.now);
            }
            self.core.drive(self.now);
            // What the task does once it let go of the core's lock (the
            // producer decides its records' outcomes there).
            if let Some(work) = self.core.take_deferred() {
                work();
            }
            let mut progressed = false;
            while let Some(action) = self.core.io().poll_action() {
                progressed = true;
                self.carry(action);
            }
            progressed |= self.serve();
            // Nothing reads the connection events here; keep the queue
            // from growing.
            while self.core.io().poll_event().is_some() {}
            if !progressed {
                return;
            }
        }
        panic!("the pair never settled at {:?}", self.elapsed());
    }

    pub fn carry(&mut self, action: Action) {
        let now = self.now;
        match action {
            Action::Connect { conn, addr: to, .. } => {
                let broker = self
                    .mock
                    .brokers
                    .iter()
                    .find(|(_, b)| b.addr.to_string() == to)
                    .map(|(&id, _)| id);
                match broker.filter(|&b| self.mock.is_up(b)) {
                    Some(broker) => {
                        self.mock.next_connection += 1;
                        let link = Link {
                            broker,
                            id: self.mock.next_connection,
                            auth: ConnAuth::new(self.mock.sasl.is_some()),
                            queue: VecDeque::new(),
                            waiting: None,
                        };
                        self.links.insert(conn, link);
                        self.core.io().handle_connected(now, conn, addr(broker));
                    }
                    None => {
                        let refused = ConnectionError::Refused {
                            message: format!("nothing listens on {to}"),
                        };
                        self.core.io().handle_connect_failed(now, conn, refused);
                    }
                }
            }
            Action::Transmit { conn, bytes, .. } => {
                let link = self
                    .links
                    .get_mut(&conn)
                    .expect("a write to a live connection");
                let mut rest = bytes;
                while !rest.is_empty() {
                    let size = i32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
                    link.queue.push_back(rest.slice(4..4 + size));
                    rest = rest.slice(4 + size..);
                }
            }
            Action::Close { conn } => {
                if let Some(waiting) = self.links.remove(&conn).and_then(|l| l.waiting) {
                    waiting.cancel(&mut self.mock);
                }
            }
            Action::FetchOAuthToken { provider, .. } => {
                // Answered at this step (a provider here awaits nothing).
                let token = futures::executor::block_on(provider.fetch());
                self.core.io().handle_oauth_token(now, token);
            }
        }
    }

    /// Answers what each connection can have answered now, in order;
    /// returns whether anything was answered.
    pub fn serve(&mut self) -> bool {
        let mut progressed = false;
        let conns: Vec<ConnectionId> = self.links.keys().copied().collect();
        for conn in conns {
            // A connection the broker closed meanwhile is gone.
            while let Some(link) = self.links.get_mut(&conn) {
                let answer = match &link.waiting {
                    Some(waiting) => match waiting.poll(&mut self.mock, self.now) {
                        Some(answer) => {
                            link.waiting = None;
                            answer
                        }
                        None => break,
                    },
                    None => {
                        let Some(frame) = link.queue.pop_front() else {
                            break;
                        };
                        let header = RequestHeader::decode(&mut Reader::new(frame.clone()))
                            .expect("the core sends well-formed headers");
                        let api = ApiKey::from_code(header.api_key).unwrap();
                        self.log.push(Served {
                            at: self.now - self.start,
                            broker: link.broker,
                            api,
                        });
                        if api == ApiKey::Metadata {
                            let (_, req) = crate::protocol::frame::decode_request::<
                                crate::protocol::messages::metadata::MetadataRequest,
                            >(frame.clone())
                            .expect("the core writes Metadata requests the mock reads");
                            self.metadata_asked.push((
                                self.now - self.start,
                                header.api_version,
                                req.topics.map(|ts| {
                                    ts.into_iter().map(|t| (t.name, t.topic_id)).collect()
                                }),
                            ));
                        }
                        let (broker, id) = (link.broker, link.id);
                        let size = frame.len() + 4;
                        respond::note_request(
                            &mut self.mock,
                            broker,
                            id,
                            (&header, size),
                            self.now,
                        );
                        let reply = respond::respond(
                            &mut self.mock,
                            broker,
                            id,
                            &header,
                            frame,
                            &mut link.auth,
                            self.now,
                        );
                        match reply {
                            Reply::Now(answer) => answer,
                            Reply::Later(waiting) => {
                                link.waiting = Some(waiting);
                                progressed = true;
                                continue;
                            }
                        }
                    }
                };
                progressed = true;
                self.deliver(conn, answer);
            }
        }
        progressed
    }

    pub fn deliver(&mut self, conn: ConnectionId, answer: Answer) {
        match answer.encoded() {
            Answer::Reply(bytes) => self.core.io().handle_received(self.now, conn, bytes),
            Answer::ReplyThenClose(bytes, _) => {
                self.core.io().handle_received(self.now, conn, bytes);
                self.broker_closes(conn);
            }
            Answer::Silent => {}
            Answer::Fetch(..) => unreachable!("encoded above"),
            Answer::Close(_) => self.broker_closes(conn),
            Answer::PeerClosed => unreachable!("only the server looks at sockets"),
        }
    }

    /// The broker's side of `conn` closes: the core sees end of stream.
    pub fn broker_closes(&mut self, conn: ConnectionId) {
        if let Some(waiting) = self.links.remove(&conn).and_then(|l| l.waiting) {
            waiting.cancel(&mut self.mock);
        }
        let closed = ConnectionError::ClosedByBroker;
        self.core.io().handle_closed(self.now, conn, closed);
    }

    /// Takes a broker down, as `MockCluster::broker_down` does: it refuses
    /// connects and its connections close.
    pub fn broker_down(&mut self, broker: i32) {
        self.mock.brokers.get_mut(&broker).unwrap().up = false;
        let conns: Vec<ConnectionId> = self
            .links
            .iter()
            .filter(|(_, l)| l.broker == broker)
            .map(|(&c, _)| c)
            .collect();
        for conn in conns {
            self.broker_closes(conn);
        }
    }

    /// The brokers the core has connections to.
    pub fn connected_brokers(&self) -> BTreeSet<i32> {
        self.links.values().map(|l| l.broker).collect()
    }

    /// When `api` requests were served, with the broker.
    pub fn served(&self, api: ApiKey) -> Vec<(Duration, i32)> {
        self.log
            .iter()
            .filter(|s| s.api == api)
            .map(|s| (s.at, s.broker))
            .collect()
    }
}
