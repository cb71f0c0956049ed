//! What happens to connections, as typed events, snapshots and counters.
//!
//! Every step of a connection's life is reported: it was opened (TCP
//! connected), became ready (API versions negotiated), was promoted (a
//! bootstrap connection kept as a leader or replica connection), was retired (a
//! bootstrap connection no longer needed), or closed, with the reason. Idle
//! closes and retirements are normal and are logged at debug level only.

use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// Identifies one connection for its whole life (never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ConnectionId(pub u64);

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Why a connection exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Purpose {
    /// To an address from `bootstrap.servers`, before the broker behind it is
    /// known: carries FindCoordinator and Metadata until leader connections
    /// exist.
    Bootstrap,
    /// To the group coordinator: group traffic only (JoinGroup, SyncGroup,
    /// Heartbeat, OffsetFetch, OffsetCommit, LeaveGroup).
    Coordinator,
    /// To a partition leader: Fetch, ListOffsets, OffsetForLeaderEpoch and
    /// Metadata.
    Leader,
    /// To a follower that a partition's leader named as the preferred read
    /// replica (KIP-392, with `client.rack` set): Fetch for those
    /// partitions, and Metadata. ListOffsets and OffsetForLeaderEpoch stay
    /// on the leader connection, as the Java consumer keeps them.
    Replica,
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Purpose::Bootstrap => "bootstrap",
            Purpose::Coordinator => "coordinator",
            Purpose::Leader => "leader",
            Purpose::Replica => "replica",
        })
    }
}

/// Why a connection was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CloseReason {
    /// Nothing crossed it for `connections.max.idle.ms`.
    Idle,
    /// The broker closed it (EOF or reset).
    Peer,
    /// A request timed out, a response was malformed, or the handshake
    /// failed.
    Error,
    /// It was no longer needed (a bootstrap connection once the cluster is
    /// known, or a coordinator connection after the coordinator moved).
    Retired,
    /// The client is shutting down.
    Shutdown,
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CloseReason::Idle => "idle",
            CloseReason::Peer => "peer",
            CloseReason::Error => "error",
            CloseReason::Retired => "retired",
            CloseReason::Shutdown => "shutdown",
        })
    }
}

/// What kept a connection from opening, or ended it: the cause carried by
/// [`EventKind::ConnectFailed`], [`EventKind::Closed`] and the errors built
/// on them, from the socket up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConnectionError {
    /// The host name did not resolve, or resolved to no address.
    Resolve {
        /// The resolver's message.
        message: String,
    },
    /// Nothing accepted the connection (`ECONNREFUSED`).
    Refused {
        /// The operating system's message.
        message: String,
    },
    /// No connection within `socket.connection.setup.timeout.ms`.
    SetupTimeout,
    /// The broker closed the connection (end of stream).
    ClosedByBroker,
    /// Any other operating-system error on connect, read or write (reset,
    /// unreachable, ...).
    Io {
        /// The error's kind (`ConnectionReset`, ...; serialised by its
        /// name).
        #[serde(serialize_with = "by_debug_name")]
        kind: std::io::ErrorKind,
        /// The operating system's message, with its error number.
        message: String,
    },
    /// A request got no response within its timeout; the connection is
    /// closed, since a broker answers in order.
    RequestTimeout {
        /// The API of the request (`Fetch`, `JoinGroup`, ...; serialised
        /// by its name).
        #[serde(serialize_with = "by_debug_name")]
        api: crate::protocol::ApiKey,
    },
    /// The broker broke the protocol: a refused frame size, an undecodable
    /// response, an unknown correlation id, or a failed ApiVersions
    /// exchange.
    Protocol {
        /// What was wrong.
        message: String,
    },
    /// The TLS handshake failed: the broker's certificate is not trusted,
    /// has expired or does not name the host dialled, the broker refused
    /// the handshake (an alert), or it is not a TLS listener. Retrying
    /// does not help until the certificates or the configuration change.
    Tls {
        /// rustls' description of the failure.
        message: String,
    },
    /// This client closed the connection with requests still in flight
    /// (the coordinator moved, or the client shut down).
    ClosedByClient {
        /// Why.
        reason: CloseReason,
    },
    /// SASL authentication failed: the broker refused the credentials
    /// (SASL_AUTHENTICATION_FAILED, with its message), does not enable the
    /// mechanism (UNSUPPORTED_SASL_MECHANISM, with the ones it enables), or
    /// failed to prove it knows the SCRAM password. Retrying does not help
    /// until the configuration (or the broker's) changes.
    Authentication {
        /// The mechanism (`PLAIN`, `SCRAM-SHA-256`, ...).
        mechanism: String,
        /// What the broker said, or what was wrong with its answer. Never
        /// holds a secret.
        message: String,
    },
    /// The OAUTHBEARER token provider the application gave failed: it
    /// returned an `Err` (the message is its own), panicked, or (an
    /// asynchronous provider) did not answer within `request.timeout.ms`.
    /// The connections waiting for the token are closed without
    /// authenticating. Unlike [`ConnectionError::Authentication`], this is
    /// not the broker refusing anything, and a token endpoint that is down
    /// often comes back: the client tries again after the reconnect
    /// backoff (`reconnect.backoff.ms` doubling to
    /// `reconnect.backoff.max.ms`), calling the provider at that pace.
    TokenProvider {
        /// The mechanism (`OAUTHBEARER`).
        mechanism: String,
        /// The provider's error.
        message: String,
    },
}

/// Serialises a value by its `Debug` name (an `io::ErrorKind`, an
/// `ApiKey`), as a string.
fn by_debug_name<T: fmt::Debug, S: serde::Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{value:?}"))
}

impl ConnectionError {
    /// Sorts an operating-system error (from connect, read or write), or a
    /// TLS error a TLS stream reported through `std::io` (such as an alert
    /// from a broker that refused this client's certificate, which under
    /// TLS 1.3 arrives after the client finished its handshake).
    #[cfg_attr(
        not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
        allow(dead_code)
    )]
    pub(crate) fn from_io(e: &std::io::Error) -> Self {
        if let Some(tls) = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return ConnectionError::Tls {
                message: format!("TLS error: {tls}"),
            };
        }
        match e.kind() {
            std::io::ErrorKind::ConnectionRefused => ConnectionError::Refused {
                message: e.to_string(),
            },
            std::io::ErrorKind::UnexpectedEof => ConnectionError::ClosedByBroker,
            std::io::ErrorKind::TimedOut => ConnectionError::SetupTimeout,
            kind => ConnectionError::Io {
                kind,
                message: e.to_string(),
            },
        }
    }

    /// Whether the failure is a refusal that waiting does not cure: an
    /// authentication, TLS or protocol failure (a broker that answers
    /// garbage, or a TLS listener dialled in plaintext). Such an address is
    /// tried again with a much longer backoff than a refused TCP connect
    /// (1 s doubling to 30 s rather than 50 ms to 1 s), and the failure is
    /// reported at once and again every minute while it lasts.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            ConnectionError::Authentication { .. }
                | ConnectionError::Tls { .. }
                | ConnectionError::Protocol { .. }
        )
    }

    /// A protocol violation described by `message`.
    pub(crate) fn protocol(message: impl fmt::Display) -> Self {
        ConnectionError::Protocol {
            message: message.to_string(),
        }
    }

    /// The [`CloseReason`] of a connection closed for this cause.
    pub fn close_reason(&self) -> CloseReason {
        match self {
            ConnectionError::ClosedByBroker => CloseReason::Peer,
            ConnectionError::ClosedByClient { reason } => *reason,
            _ => CloseReason::Error,
        }
    }
}

impl fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectionError::Resolve { message } => write!(f, "name resolution failed: {message}"),
            ConnectionError::Refused { message } => write!(f, "refused ({message})"),
            ConnectionError::SetupTimeout => f.write_str("connection setup timed out"),
            ConnectionError::ClosedByBroker => f.write_str("closed by the broker"),
            ConnectionError::Io { message, .. } => f.write_str(message),
            ConnectionError::RequestTimeout { api } => write!(f, "{api} request timed out"),
            ConnectionError::Protocol { message } => f.write_str(message),
            ConnectionError::Tls { message } => f.write_str(message),
            ConnectionError::ClosedByClient { reason } => {
                write!(f, "closed by this client ({reason})")
            }
            ConnectionError::Authentication { mechanism, message } => {
                write!(f, "SASL {mechanism} authentication failed: {message}")
            }
            ConnectionError::TokenProvider { mechanism, message } => write!(
                f,
                "SASL {mechanism} authentication failed: the {mechanism} token provider failed: {message}"
            ),
        }
    }
}

impl std::error::Error for ConnectionError {}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// A connection attempt started (no socket is connected yet).
    Connecting,
    /// The TCP connection is established.
    Opened,
    /// The connection attempt failed; no socket remains.
    ConnectFailed {
        /// Why.
        error: ConnectionError,
    },
    /// API versions are negotiated (and SASL authentication, when
    /// configured, succeeded); requests can flow.
    Ready,
    /// SASL authentication succeeded: the first one, just before
    /// [`EventKind::Ready`], or a re-authentication of a ready connection
    /// (KIP-368).
    Authenticated {
        /// The mechanism.
        mechanism: String,
        /// The session lifetime the broker set (SaslAuthenticate v1+), after
        /// which the client authenticates again on the same connection.
        #[serde(
            rename = "session_lifetime_ms",
            serialize_with = "opt_millis",
            skip_serializing_if = "Option::is_none"
        )]
        session_lifetime: Option<Duration>,
        /// Whether it renewed the session of a ready connection.
        reauthentication: bool,
    },
    /// A bootstrap connection turned out to reach a needed leader (or a
    /// preferred read replica, KIP-392) and is kept as that broker's leader
    /// (or replica) connection instead of opening another socket.
    Promoted,
    /// A bootstrap connection is no longer needed; it is closed next.
    Retired,
    /// The socket is closed.
    Closed {
        /// Why.
        reason: CloseReason,
        /// The cause, for [`CloseReason::Error`] and [`CloseReason::Peer`].
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<ConnectionError>,
    },
}

/// One step in a connection's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ConnectionEvent {
    /// Time since the client was created.
    #[serde(rename = "t_ms", serialize_with = "as_millis")]
    pub at: Duration,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
    /// The connection.
    pub connection: ConnectionId,
    /// The broker id, once known (`None` for a bootstrap connection whose
    /// broker is not identified).
    pub broker: Option<i32>,
    /// The address dialled (`host:port`).
    pub addr: String,
    /// Why the connection exists (after the event).
    pub purpose: Purpose,
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

fn opt_millis<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&(d.as_millis() as u64)),
        None => s.serialize_none(),
    }
}

impl fmt::Display for ConnectionEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.at.as_secs_f64() * 1000.0;
        let broker = self
            .broker
            .map_or_else(|| "?".to_owned(), |b| b.to_string());
        write!(
            f,
            "{t:>9.1} ms  {:<8} broker {broker:>4} {:<22} {:<12}",
            self.connection,
            self.addr,
            self.purpose.to_string()
        )?;
        match &self.kind {
            EventKind::Connecting => f.write_str("connecting"),
            EventKind::Opened => f.write_str("opened"),
            EventKind::ConnectFailed { error } => write!(f, "connect failed: {error}"),
            EventKind::Ready => f.write_str("ready"),
            EventKind::Authenticated {
                mechanism,
                session_lifetime,
                reauthentication,
            } => {
                f.write_str(if *reauthentication {
                    "re-authenticated"
                } else {
                    "authenticated"
                })?;
                write!(f, " ({mechanism}")?;
                if let Some(t) = session_lifetime {
                    write!(f, ", session {} ms", t.as_millis())?;
                }
                f.write_str(")")
            }
            EventKind::Promoted => f.write_str("promoted"),
            EventKind::Retired => f.write_str("retired"),
            EventKind::Closed {
                reason,
                error: None,
            } => write!(f, "closed ({reason})"),
            EventKind::Closed {
                reason,
                error: Some(e),
            } => write!(f, "closed ({reason}: {e})"),
        }
    }
}

/// The state of a connection in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConnectionState {
    /// TCP connect in progress.
    Connecting,
    /// Connected; ApiVersions exchange in progress.
    Handshake,
    /// SASL authentication in progress (SaslHandshake, SaslAuthenticate):
    /// the first one, or a re-authentication (KIP-368) during which the
    /// connection's requests wait.
    Authenticating,
    /// Requests can flow.
    Ready,
}

/// One live connection, as seen at the time of the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ConnectionInfo {
    /// The connection.
    pub id: ConnectionId,
    /// The broker id, once known.
    pub broker: Option<i32>,
    /// The address dialled.
    pub addr: String,
    /// Why it exists.
    pub purpose: Purpose,
    /// Where it is in its life.
    pub state: ConnectionState,
    /// Requests sent and not yet answered.
    pub in_flight: usize,
    /// Time since the last byte crossed it (or since it was started).
    #[serde(rename = "idle_ms", serialize_with = "as_millis")]
    pub idle_for: Duration,
}

/// Counters for one broker address, kept for the client's life.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BrokerCounters {
    /// The broker id, once known.
    pub broker: Option<i32>,
    /// Connection attempts started.
    pub connects: u64,
    /// Attempts that failed before the socket was ready.
    pub connect_failures: u64,
    /// Closes by reason: idle.
    pub closed_idle: u64,
    /// Closes by reason: peer.
    pub closed_peer: u64,
    /// Closes by reason: error.
    pub closed_error: u64,
    /// Closes by reason: retired.
    pub closed_retired: u64,
    /// Closes by reason: shutdown.
    pub closed_shutdown: u64,
    /// Requests sent.
    pub requests: u64,
    /// Bytes written.
    pub bytes_out: u64,
    /// Bytes read.
    pub bytes_in: u64,
    /// Round-trip time of the last answered request.
    #[serde(rename = "last_rtt_us", serialize_with = "opt_micros")]
    pub last_rtt: Option<Duration>,
    /// Responses received (requests answered).
    pub responses: u64,
    /// Requests that got no answer: their connection was lost or they
    /// timed out.
    pub request_errors: u64,
    /// The shortest round trip of an answered request.
    #[serde(rename = "rtt_min_us", serialize_with = "opt_micros")]
    pub rtt_min: Option<Duration>,
    /// The longest round trip of an answered request.
    #[serde(rename = "rtt_max_us", serialize_with = "opt_micros")]
    pub rtt_max: Option<Duration>,
    /// The round trips of every answered request added up (divided by
    /// `responses`: the mean, [`BrokerCounters::rtt_avg`]).
    #[serde(rename = "rtt_total_us", serialize_with = "micros")]
    pub rtt_total: Duration,
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

fn opt_micros<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&(d.as_micros() as u64)),
        None => s.serialize_none(),
    }
}

impl BrokerCounters {
    /// The mean round trip of the answered requests.
    pub fn rtt_avg(&self) -> Option<Duration> {
        u32::try_from(self.responses)
            .ok()
            .filter(|&n| n > 0)
            .map(|n| self.rtt_total / n)
    }

    /// Failed connection attempts and connections that broke (closed by
    /// the broker or on an error).
    pub fn connection_errors(&self) -> u64 {
        self.connect_failures + self.closed_peer + self.closed_error
    }

    pub(crate) fn count_rtt(&mut self, rtt: Duration) {
        self.last_rtt = Some(rtt);
        self.responses += 1;
        self.rtt_total += rtt;
        self.rtt_min = Some(self.rtt_min.map_or(rtt, |m| m.min(rtt)));
        self.rtt_max = Some(self.rtt_max.map_or(rtt, |m| m.max(rtt)));
    }

    pub(crate) fn count_close(&mut self, reason: CloseReason) {
        match reason {
            CloseReason::Idle => self.closed_idle += 1,
            CloseReason::Peer => self.closed_peer += 1,
            CloseReason::Error => self.closed_error += 1,
            CloseReason::Retired => self.closed_retired += 1,
            CloseReason::Shutdown => self.closed_shutdown += 1,
        }
    }
}

/// How many events a [`ConnectionEvents`] stream holds for a reader that
/// does not keep up; later events are dropped and counted
/// ([`ConnectionEvents::dropped`]).
pub const EVENT_BUFFER: usize = 4096;

// The queue and hub serve the runtime's consumer; without a runtime they
// are built for their unit tests only.
#[cfg_attr(
    not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
    allow(dead_code)
)]
#[derive(Debug, Default)]
struct EventQueue {
    buffer: std::collections::VecDeque<ConnectionEvent>,
    capacity: usize,
    dropped: u64,
    closed: bool,
    waker: Option<std::task::Waker>,
}

type SharedQueue = std::sync::Arc<std::sync::Mutex<EventQueue>>;

fn lock_queue(q: &SharedQueue) -> std::sync::MutexGuard<'_, EventQueue> {
    q.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A stream of connection events (from
/// [`Consumer::connection_events`](crate::Consumer::connection_events)).
///
/// It holds at most [`EVENT_BUFFER`] events that were not read yet: a
/// reader that falls behind loses the newest events, never memory, and
/// [`ConnectionEvents::dropped`] says how many. The stream ends once the
/// consumer is closed or dropped and every buffered event is read.
#[derive(Debug)]
pub struct ConnectionEvents {
    queue: SharedQueue,
}

impl ConnectionEvents {
    /// Events lost so far because this stream was not read fast enough.
    pub fn dropped(&self) -> u64 {
        lock_queue(&self.queue).dropped
    }
}

impl futures::Stream for ConnectionEvents {
    type Item = ConnectionEvent;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<ConnectionEvent>> {
        let mut q = lock_queue(&self.queue);
        if let Some(e) = q.buffer.pop_front() {
            return std::task::Poll::Ready(Some(e));
        }
        if q.closed {
            return std::task::Poll::Ready(None);
        }
        q.waker = Some(cx.waker().clone());
        std::task::Poll::Pending
    }
}

/// Hands every event to every live [`ConnectionEvents`] stream.
#[cfg_attr(
    not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
    allow(dead_code)
)]
#[derive(Debug, Default)]
pub(crate) struct EventHub {
    streams: std::sync::Mutex<Vec<SharedQueue>>,
}

#[cfg_attr(
    not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
    allow(dead_code)
)]
impl EventHub {
    fn streams(&self) -> std::sync::MutexGuard<'_, Vec<SharedQueue>> {
        self.streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new stream of the events from now on, holding at most `capacity`
    /// unread ones.
    pub fn subscribe(&self, capacity: usize) -> ConnectionEvents {
        let queue = SharedQueue::new(std::sync::Mutex::new(EventQueue {
            capacity,
            ..EventQueue::default()
        }));
        self.streams().push(queue.clone());
        ConnectionEvents { queue }
    }

    /// Delivers `events` (streams whose reader is gone are forgotten).
    pub fn publish(&self, events: impl IntoIterator<Item = ConnectionEvent>) {
        let mut streams = self.streams();
        streams.retain(|q| std::sync::Arc::strong_count(q) > 1);
        if streams.is_empty() {
            return;
        }
        for event in events {
            for q in streams.iter() {
                let mut q = lock_queue(q);
                if q.buffer.len() < q.capacity {
                    q.buffer.push_back(event.clone());
                    if let Some(w) = q.waker.take() {
                        w.wake();
                    }
                } else {
                    q.dropped += 1;
                }
            }
        }
    }

    /// Ends every stream (once its buffered events are read).
    pub fn close(&self) {
        for q in self.streams().drain(..) {
            let mut q = lock_queue(&q);
            q.closed = true;
            if let Some(w) = q.waker.take() {
                w.wake();
            }
        }
    }
}

#[cfg(test)]
mod hub_tests {
    use super::*;
    use futures::StreamExt;

    fn event(n: u64) -> ConnectionEvent {
        ConnectionEvent {
            at: Duration::from_millis(n),
            kind: EventKind::Connecting,
            connection: ConnectionId(n),
            broker: None,
            addr: "127.0.0.1:9092".into(),
            purpose: Purpose::Bootstrap,
        }
    }

    #[test]
    fn a_slow_reader_loses_the_newest_events_and_counts_them() {
        let hub = EventHub::default();
        let mut events = hub.subscribe(3);
        hub.publish((1..=5).map(event));
        assert_eq!(events.dropped(), 2);
        hub.close();
        let got: Vec<u64> = futures::executor::block_on(events.by_ref().collect::<Vec<_>>())
            .iter()
            .map(|e| e.connection.0)
            .collect();
        assert_eq!(got, [1, 2, 3]);
        assert_eq!(events.dropped(), 2);
    }

    #[test]
    fn a_dropped_stream_is_forgotten() {
        let hub = EventHub::default();
        let events = hub.subscribe(3);
        drop(events);
        hub.publish([event(1)]);
        assert!(hub.streams().is_empty());
    }
}
