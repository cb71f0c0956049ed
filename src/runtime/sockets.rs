//! The sockets behind a [`Cluster`]: connect tasks, one reader task per
//! socket, writes, and closes, on async-std.
//!
//! Each reader task forwards bytes as they arrive, so an EOF from the broker
//! reaches the cluster at once and the socket is closed on our side too:
//! nothing is left in CLOSE_WAIT.

use super::socket::connect_socket;
use crate::cluster::{Action, Cluster};
use crate::events::{ConnectionError, ConnectionId};
use crate::protocol::frame::frame_size;
use async_std::net::TcpStream;
use bytes::BytesMut;
use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures::{AsyncReadExt, AsyncWriteExt, StreamExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// What a socket task reports.
#[derive(Debug)]
pub(crate) enum SocketInput {
    Connected(TcpStream, std::net::SocketAddr),
    ConnectFailed(ConnectionError),
    /// One whole response frame (size prefix included), or, when the
    /// prefix announces a frame too large, the prefix alone (the cluster
    /// refuses it and closes the connection).
    Data(BytesMut),
    Eof,
    Failed(ConnectionError),
}

/// Socket-level settings the cluster does not decide.
#[derive(Debug, Clone, Copy)]
pub struct SocketOptions {
    /// Turn on SO_KEEPALIVE (`socket.keepalive.enable`).
    pub keepalive: bool,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions { keepalive: true }
    }
}

/// The open sockets, shared so that they can be shut down from `Drop`
/// without waiting for any task.
#[derive(Debug, Clone, Default)]
pub(crate) struct SocketTable(Arc<Mutex<HashMap<ConnectionId, TcpStream>>>);

impl SocketTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ConnectionId, TcpStream>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn get(&self, id: ConnectionId) -> Option<TcpStream> {
        self.lock().get(&id).cloned()
    }

    fn insert(&self, id: ConnectionId, stream: TcpStream) {
        self.lock().insert(id, stream);
    }

    /// Shuts one socket down (both directions) and forgets it.
    fn close(&self, id: ConnectionId) {
        if let Some(s) = self.lock().remove(&id) {
            // The peer may be gone already; nothing to do then.
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Shuts every socket down, without blocking.
    pub fn close_all(&self) {
        for (_, s) in self.lock().drain() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Carries out a cluster's actions and collects what the sockets report.
#[derive(Debug)]
pub(crate) struct Sockets {
    options: SocketOptions,
    table: SocketTable,
    tx: UnboundedSender<(ConnectionId, SocketInput)>,
    rx: UnboundedReceiver<(ConnectionId, SocketInput)>,
}

impl Sockets {
    pub fn new(options: SocketOptions) -> Self {
        let (tx, rx) = unbounded();
        Sockets {
            options,
            table: SocketTable::default(),
            tx,
            rx,
        }
    }

    pub fn table(&self) -> SocketTable {
        self.table.clone()
    }

    /// Does one action; returns the error of a failed write.
    pub async fn perform(&mut self, action: Action) -> Option<(ConnectionId, ConnectionError)> {
        match action {
            Action::Connect {
                conn,
                addr,
                timeout,
            } => {
                let tx = self.tx.clone();
                let keepalive = self.options.keepalive;
                async_std::task::spawn(async move {
                    let input = match connect_socket(&addr, timeout, keepalive).await {
                        Ok((stream, peer)) => SocketInput::Connected(stream, peer),
                        Err(e) => SocketInput::ConnectFailed(e.cause()),
                    };
                    let _ = tx.unbounded_send((conn, input));
                });
                None
            }
            Action::Transmit { conn, bytes } => {
                let mut stream = self.table.get(conn)?;
                stream
                    .write_all(&bytes)
                    .await
                    .err()
                    .map(|e| (conn, ConnectionError::from_io(&e)))
            }
            Action::Close { conn } => {
                self.table.close(conn);
                None
            }
        }
    }

    /// Waits for the next socket report.
    pub async fn next(&mut self) -> Option<(ConnectionId, SocketInput)> {
        self.rx.next().await
    }

    /// A report already waiting, if any.
    pub fn try_next(&mut self) -> Option<(ConnectionId, SocketInput)> {
        self.rx.try_recv().ok()
    }

    /// Hands a report to the cluster (registering a new socket first).
    pub fn feed(
        &mut self,
        cluster: &mut Cluster,
        now: Instant,
        id: ConnectionId,
        input: SocketInput,
    ) {
        match input {
            SocketInput::Connected(stream, peer) => {
                if !cluster.is_connecting(id) {
                    // The attempt was given up (setup timeout, shutdown)
                    // while it completed: close the socket at once.
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    return;
                }
                let reader = stream.clone();
                self.table.insert(id, stream);
                async_std::task::spawn(read_loop(
                    id,
                    reader,
                    self.tx.clone(),
                    cluster.max_frame_size(),
                ));
                cluster.handle_connected(now, id, peer);
            }
            SocketInput::ConnectFailed(e) => cluster.handle_connect_failed(now, id, e),
            SocketInput::Data(bytes) => cluster.handle_received_buf(now, id, bytes),
            SocketInput::Eof => cluster.handle_closed(now, id, ConnectionError::ClosedByBroker),
            SocketInput::Failed(e) => cluster.handle_closed(now, id, e),
        }
    }
}

/// Reads whole frames and forwards each as it completes: one allocation
/// of the frame's own size (checked against `max_frame_size` first), read
/// into directly, and handed to the cluster without a copy. (Forwarding
/// fixed-size chunks instead cost two more copies of every byte and, for
/// large Fetch responses, a buffer regrown many times over.)
async fn read_loop(
    id: ConnectionId,
    mut stream: TcpStream,
    tx: UnboundedSender<(ConnectionId, SocketInput)>,
    max_frame_size: usize,
) {
    loop {
        let (input, last) = match read_frame(&mut stream, max_frame_size).await {
            Ok(frame) => (SocketInput::Data(frame), false),
            // Too large: the cluster sees the prefix, refuses it and
            // closes the socket; nothing more is read.
            Err(ReadEnd::Refused(prefix)) => (SocketInput::Data(prefix), true),
            Err(ReadEnd::Eof) => (SocketInput::Eof, true),
            Err(ReadEnd::Failed(e)) => (SocketInput::Failed(e), true),
        };
        if tx.unbounded_send((id, input)).is_err() || last {
            return;
        }
    }
}

/// Why [`read_frame`] stopped.
enum ReadEnd {
    /// The peer closed the connection (a frame cut short included: the
    /// cluster drops what it has of it either way).
    Eof,
    Failed(ConnectionError),
    /// The size prefix was refused (too large or negative).
    Refused(BytesMut),
}

/// Reads one frame: the 4-byte size prefix, then the body into a buffer of
/// exactly that size.
async fn read_frame(stream: &mut TcpStream, max_frame_size: usize) -> Result<BytesMut, ReadEnd> {
    let mut prefix = [0u8; 4];
    read_full(stream, &mut prefix).await?;
    let Ok(size) = frame_size(prefix, max_frame_size) else {
        return Err(ReadEnd::Refused(BytesMut::from(&prefix[..])));
    };
    let mut frame = BytesMut::zeroed(4 + size);
    frame[..4].copy_from_slice(&prefix);
    read_full(stream, &mut frame[4..]).await?;
    Ok(frame)
}

async fn read_full(stream: &mut TcpStream, mut buf: &mut [u8]) -> Result<(), ReadEnd> {
    while !buf.is_empty() {
        match stream.read(buf).await {
            Ok(0) => return Err(ReadEnd::Eof),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadEnd::Failed(ConnectionError::from_io(&e))),
        }
    }
    Ok(())
}
