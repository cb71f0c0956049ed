//! Drives a [`Cluster`] with real sockets on async-std.
//!
//! The driver carries out the cluster's actions (connect, write, close),
//! feeds back what the sockets report (connected, bytes, EOF, errors), and
//! wakes the cluster at its deadlines. One reader task per socket forwards
//! bytes as they arrive, so an EOF from the broker is seen at once and the
//! socket is closed on our side too: nothing is left in CLOSE_WAIT.

use super::socket::connect_socket;
use crate::cluster::{Action, Cluster, RequestBody, RequestError, RequestId, Response, Target};
use crate::events::{ConnectionEvent, ConnectionId, ConnectionInfo};
use async_std::net::TcpStream;
use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures::{AsyncReadExt, AsyncWriteExt, FutureExt, StreamExt};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// What a socket task reports.
#[derive(Debug)]
enum SocketInput {
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

/// A [`Cluster`] with its sockets.
#[derive(Debug)]
pub struct ClusterDriver {
    cluster: Cluster,
    options: SocketOptions,
    sockets: HashMap<ConnectionId, TcpStream>,
    tx: UnboundedSender<(ConnectionId, SocketInput)>,
    rx: UnboundedReceiver<(ConnectionId, SocketInput)>,
    events: VecDeque<ConnectionEvent>,
    responses: HashMap<RequestId, Result<Response, RequestError>>,
}

impl ClusterDriver {
    /// Wraps `cluster`. Nothing is connected and no task is started until a
    /// request needs it.
    pub fn new(cluster: Cluster, options: SocketOptions) -> Self {
        let (tx, rx) = unbounded();
        ClusterDriver {
            cluster,
            options,
            sockets: HashMap::new(),
            tx,
            rx,
            events: VecDeque::new(),
            responses: HashMap::new(),
        }
    }

    /// The state machine, for inputs that need no IO (topics, metadata
    /// refresh) and for getters.
    pub fn cluster(&mut self) -> &mut Cluster {
        &mut self.cluster
    }

    /// Queues a request; see [`Cluster::request`].
    pub fn request(&mut self, target: Target, body: Box<dyn RequestBody>) -> RequestId {
        self.cluster.request(Instant::now(), target, body)
    }

    /// Takes the response to `id` if it has arrived.
    pub fn take_response(&mut self, id: RequestId) -> Option<Result<Response, RequestError>> {
        self.responses.remove(&id)
    }

    /// Runs until `id` is answered, or `timeout` passes (then `None`).
    pub async fn wait_response(
        &mut self,
        id: RequestId,
        timeout: Duration,
    ) -> Option<Result<Response, RequestError>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.take_response(id) {
                return Some(r);
            }
            if Instant::now() >= deadline {
                return None;
            }
            self.step(deadline).await;
        }
    }

    /// Runs until `done` holds, or `timeout` passes; returns whether it held.
    pub async fn run_until(
        &mut self,
        timeout: Duration,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            self.step(deadline).await;
        }
    }

    /// Connection events so far, oldest first.
    pub fn take_events(&mut self) -> Vec<ConnectionEvent> {
        self.events.drain(..).collect()
    }

    /// A snapshot of the live connections.
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.cluster.connections(Instant::now())
    }

    /// Closes every connection (event reason `shutdown`).
    pub fn shutdown(&mut self) {
        self.cluster.shutdown(Instant::now());
        self.apply_actions();
    }

    /// Does what the cluster asked, then waits for one input or the next
    /// deadline (at the latest `until`) and hands it to the cluster.
    pub async fn step(&mut self, until: Instant) {
        self.apply_actions_async().await;
        let wake = self.cluster.poll_timeout().map_or(until, |t| t.min(until));
        let sleep = wake.saturating_duration_since(Instant::now());
        let input = futures::select! {
            input = self.rx.next().fuse() => input,
            _ = async_std::task::sleep(sleep).fuse() => None,
        };
        let now = Instant::now();
        match input {
            Some((id, input)) => self.handle_input(now, id, input),
            None => self.cluster.handle_timeout(now),
        }
        // Take every input already waiting before acting again.
        while let Ok((id, input)) = self.rx.try_recv() {
            self.handle_input(Instant::now(), id, input);
        }
        self.apply_actions_async().await;
    }

    fn handle_input(&mut self, now: Instant, id: ConnectionId, input: SocketInput) {
        match input {
            SocketInput::Connected(stream, peer) => {
                if !self.cluster.is_connecting(id) {
                    // The attempt was given up (setup timeout, shutdown)
                    // while it completed: close the socket at once.
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    return;
                }
                let reader = stream.clone();
                self.sockets.insert(id, stream);
                let tx = self.tx.clone();
                async_std::task::spawn(read_loop(id, reader, tx));
                self.cluster.handle_connected(now, id, peer);
            }
            SocketInput::ConnectFailed(e) => self.cluster.handle_connect_failed(now, id, e),
            SocketInput::Data(bytes) => self.cluster.handle_received(now, id, &bytes),
            SocketInput::Eof => self.cluster.handle_closed(now, id, None),
            SocketInput::Failed(e) => self.cluster.handle_closed(now, id, Some(e)),
        }
    }

    fn collect_outputs(&mut self) {
        while let Some(e) = self.cluster.poll_event() {
            self.events.push_back(e);
        }
        while let Some((id, r)) = self.cluster.poll_response() {
            self.responses.insert(id, r);
        }
    }

    /// Applies actions without waiting on writes (used when shutting down).
    fn apply_actions(&mut self) {
        while let Some(action) = self.cluster.poll_action() {
            if let Action::Close { conn } = action {
                if let Some(s) = self.sockets.remove(&conn) {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
            }
        }
        self.collect_outputs();
    }

    async fn apply_actions_async(&mut self) {
        while let Some(action) = self.cluster.poll_action() {
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
                }
                Action::Transmit { conn, bytes } => {
                    let failed = match self.sockets.get_mut(&conn) {
                        Some(s) => s.write_all(&bytes).await.err(),
                        None => None,
                    };
                    if let Some(e) = failed {
                        self.cluster
                            .handle_closed(Instant::now(), conn, Some(e.to_string()));
                    }
                }
                Action::Close { conn } => {
                    if let Some(s) = self.sockets.remove(&conn) {
                        // The peer may be gone already; nothing to do then.
                        let _ = s.shutdown(std::net::Shutdown::Both);
                    }
                }
            }
        }
        self.collect_outputs();
    }
}

impl Drop for ClusterDriver {
    /// Closes every socket without blocking.
    fn drop(&mut self) {
        for (_, s) in self.sockets.drain() {
            let _ = s.shutdown(std::net::Shutdown::Both);
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
