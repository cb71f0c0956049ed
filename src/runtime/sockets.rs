//! The sockets behind a [`Cluster`]: connect tasks, one reader task per
//! socket, writes, and closes, on async-std.
//!
//! Each reader task forwards bytes as they arrive, so an EOF from the broker
//! reaches the cluster at once and the socket is closed on our side too:
//! nothing is left in CLOSE_WAIT.

use super::socket::connect_socket;
use crate::cluster::{Action, Cluster};
use crate::events::ConnectionId;
use async_std::net::TcpStream;
use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures::{AsyncReadExt, AsyncWriteExt, StreamExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// What a socket task reports.
#[derive(Debug)]
pub(crate) enum SocketInput {
    Connected(TcpStream, std::net::SocketAddr),
    ConnectFailed(String),
    Data(Vec<u8>),
    Eof,
    Failed(String),
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
    pub async fn perform(&mut self, action: Action) -> Option<(ConnectionId, String)> {
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
                        Err(e) => SocketInput::ConnectFailed(e.to_string()),
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
                    .map(|e| (conn, e.to_string()))
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
                async_std::task::spawn(read_loop(id, reader, self.tx.clone()));
                cluster.handle_connected(now, id, peer);
            }
            SocketInput::ConnectFailed(e) => cluster.handle_connect_failed(now, id, e),
            SocketInput::Data(bytes) => cluster.handle_received(now, id, &bytes),
            SocketInput::Eof => cluster.handle_closed(now, id, None),
            SocketInput::Failed(e) => cluster.handle_closed(now, id, Some(e)),
        }
    }
}

async fn read_loop(
    id: ConnectionId,
    mut stream: TcpStream,
    tx: UnboundedSender<(ConnectionId, SocketInput)>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let input = match stream.read(&mut buf).await {
            Ok(0) => SocketInput::Eof,
            Ok(n) => SocketInput::Data(buf[..n].to_vec()),
            Err(e) => SocketInput::Failed(e.to_string()),
        };
        let last = !matches!(input, SocketInput::Data(_));
        if tx.unbounded_send((id, input)).is_err() || last {
            return;
        }
    }
}
