//! What happens to connections, as typed events, snapshots and counters.
//!
//! Every step of a connection's life is reported: it was opened (TCP
//! connected), became ready (API versions negotiated), was promoted (a
//! bootstrap connection kept as a leader connection), was retired (a
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
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Purpose::Bootstrap => "bootstrap",
            Purpose::Coordinator => "coordinator",
            Purpose::Leader => "leader",
        })
    }
}

/// Why a connection was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
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

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// A connection attempt started (no socket is connected yet).
    Connecting,
    /// The TCP connection is established.
    Opened,
    /// The connection attempt failed; no socket remains.
    ConnectFailed {
        /// Why.
        error: String,
    },
    /// API versions are negotiated; requests can flow.
    Ready,
    /// A bootstrap connection turned out to reach a needed leader and is
    /// kept as that leader's connection instead of opening another socket.
    Promoted,
    /// A bootstrap connection is no longer needed; it is closed next.
    Retired,
    /// The socket is closed.
    Closed {
        /// Why.
        reason: CloseReason,
        /// Details for [`CloseReason::Error`] and [`CloseReason::Peer`].
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

/// One step in a connection's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
pub enum ConnectionState {
    /// TCP connect in progress.
    Connecting,
    /// Connected; ApiVersions exchange in progress.
    Handshake,
    /// Requests can flow.
    Ready,
}

/// One live connection, as seen at the time of the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
}

fn opt_micros<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&(d.as_micros() as u64)),
        None => s.serialize_none(),
    }
}

impl BrokerCounters {
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
