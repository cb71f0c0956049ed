//! The sockets behind a [`Cluster`]: connect tasks, frame readers, writes,
//! and closes, on the runtime behind the [seam](super::rt).
//!
//! Writes never wait: each request's bytes join their connection's outbox,
//! written as far as the socket takes them at once and the rest as it
//! drains, while the driver waits ([`Sockets::wait`]). A broker that stops
//! reading fills only its own connection's outbox: the other connections,
//! timers and heartbeats go on, and the stalled requests fail at
//! `request.timeout.ms`, when the cluster closes that connection and names
//! the cause.
//!
//! Frames are read as they arrive, by the client's background task itself
//! while it waits ([`Readers::Inline`]) or by a task per socket for a
//! driver that runs only while awaited ([`Readers::Tasks`]), so an EOF from
//! the broker reaches the cluster at once and the socket is closed on our
//! side too: nothing is left in CLOSE_WAIT.

use super::frame_pool::FramePool;
use super::rt::{connect_socket, BoxFuture, Runtime, Socket, SocketHandle};
use super::signal::Signal;
use crate::cluster::framing::body_len;
use crate::cluster::{Action, Cluster};
use crate::events::{ConnectionError, ConnectionId};
use crate::tls::TlsConnector;
use bytes::Bytes;
use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures::io::{AsyncRead, AsyncWrite};
use futures::stream::{BoxStream, SelectAll};
use futures::{AsyncReadExt, FutureExt, StreamExt};
use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

/// What a socket task reports.
#[derive(Debug)]
pub(crate) enum SocketInput {
    Connected(Socket, std::net::SocketAddr),
    ConnectFailed(ConnectionError),
    /// One whole response frame (size prefix included), or, when the
    /// prefix announces a frame too large, the prefix alone (the cluster
    /// refuses it and closes the connection).
    Data(Bytes),
    Eof,
    Failed(ConnectionError),
    /// Every byte up to the transmit numbered so was handed to the socket
    /// (see [`Action::Transmit`]).
    Written(u64),
}

impl SocketInput {
    /// The bytes it brings: a frame's length, 0 for the others.
    pub(crate) fn len(&self) -> usize {
        match self {
            SocketInput::Data(frame) => frame.len(),
            _ => 0,
        }
    }
}

/// What the tasks behind [`Sockets`] report to the driver loop.
#[derive(Debug)]
pub(crate) enum Report {
    /// News of one socket.
    Socket(ConnectionId, SocketInput),
    /// The answer of the asynchronous OAUTHBEARER token provider (see
    /// [`Action::FetchOAuthToken`]).
    OAuthToken(Result<crate::sasl::OAuthToken, String>),
}

impl Report {
    /// The bytes it brings: a frame's length, 0 for the others.
    pub(crate) fn len(&self) -> usize {
        match self {
            Report::Socket(_, input) => input.len(),
            Report::OAuthToken(_) => 0,
        }
    }
}

/// Socket-level settings the cluster does not decide.
#[derive(Debug, Clone)]
pub struct SocketOptions {
    /// Turn on SO_KEEPALIVE (`socket.keepalive.enable`).
    pub keepalive: bool,
    /// Run a TLS handshake on every new socket, before anything else
    /// crosses it (`security.protocol` `SSL` or `SASL_SSL`); `None` for
    /// plain TCP.
    pub tls: Option<TlsConnector>,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            keepalive: true,
            tls: None,
        }
    }
}

/// The open sockets, shared so that they can be shut down from `Drop`
/// without waiting for any task.
#[derive(Debug, Clone, Default)]
pub(crate) struct SocketTable(Arc<Mutex<HashMap<ConnectionId, Arc<dyn SocketHandle>>>>);

impl SocketTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ConnectionId, Arc<dyn SocketHandle>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn insert(&self, id: ConnectionId, handle: Arc<dyn SocketHandle>) {
        self.lock().insert(id, handle);
    }

    /// Shuts one socket down (both directions) and forgets it.
    fn close(&self, id: ConnectionId) {
        if let Some(s) = self.lock().remove(&id) {
            s.shutdown();
        }
    }

    /// Shuts every socket down, without blocking.
    pub fn close_all(&self) {
        for (_, s) in self.lock().drain() {
            s.shutdown();
        }
    }
}

/// Carries out a cluster's actions and collects what the sockets report.
pub(crate) struct Sockets {
    rt: Arc<dyn Runtime>,
    options: SocketOptions,
    table: SocketTable,
    /// The write half of each open socket; only the driver loop writes.
    writers: HashMap<ConnectionId, Box<dyn AsyncWrite + Send + Unpin>>,
    /// Per socket, the bytes not written yet.
    outboxes: HashMap<ConnectionId, Outbox>,
    /// Buffers for large frames, shared by the reader tasks.
    frames: FramePool,
    /// The wait's timer and when it fires, kept from one wait to the next
    /// while no earlier wake-up is needed (see [`Sockets::wait`]).
    timer: Option<(Instant, BoxFuture<()>)>,
    /// With [`Readers::Inline`], each socket's frames, read by whoever
    /// waits in [`Sockets::wait`].
    readers: SelectAll<BoxStream<'static, (ConnectionId, SocketInput)>>,
    mode: Readers,
    tx: UnboundedSender<Report>,
    rx: UnboundedReceiver<Report>,
    /// Passes in a row that acted or found an input waiting, since the
    /// driver loop last suspended or yielded (see `drive_pass::pass`).
    pub(super) busy_passes: u32,
}

impl std::fmt::Debug for Sockets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sockets")
            .field("runtime", &self.rt)
            .field("options", &self.options)
            .field("table", &self.table)
            .field("writers", &self.writers.len())
            .finish_non_exhaustive()
    }
}

/// Who reads the sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Readers {
    /// A task per socket, reading whatever its owner does: for a driver
    /// that runs only while the application awaits it, so that a broker's
    /// close is seen (and answered) at once all the same.
    Tasks,
    /// The loop that waits in [`Sockets::wait`] reads the sockets itself:
    /// for the client's background task, which is always waiting when
    /// not busy. A frame reaches the cluster without a hop through another
    /// task (one wake-up less per response).
    Inline,
}

impl Sockets {
    pub fn new(rt: Arc<dyn Runtime>, options: SocketOptions, mode: Readers) -> Self {
        let (tx, rx) = unbounded();
        Sockets {
            rt,
            options,
            table: SocketTable::default(),
            writers: HashMap::new(),
            outboxes: HashMap::new(),
            frames: FramePool::default(),
            timer: None,
            readers: SelectAll::new(),
            mode,
            tx,
            rx,
            busy_passes: 0,
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
                let tls = self.options.tls.clone();
                let rt = self.rt.clone();
                self.rt.spawn(Box::pin(async move {
                    let connected =
                        connect_socket(&*rt, &addr, timeout, keepalive, tls.as_ref()).await;
                    let input = match connected {
                        Ok((socket, peer)) => SocketInput::Connected(socket, peer),
                        Err(e) => SocketInput::ConnectFailed(e.cause()),
                    };
                    let _ = tx.unbounded_send(Report::Socket(conn, input));
                }));
                None
            }
            Action::FetchOAuthToken { provider, timeout } => {
                // A task of its own: the provider's future (an HTTP call,
                // say) never holds up the driver loop.
                let tx = self.tx.clone();
                let rt = self.rt.clone();
                self.rt.spawn(Box::pin(async move {
                    let answer = match super::rt::timeout(&*rt, timeout, provider.fetch()).await {
                        Some(answer) => answer,
                        None => Err(format!(
                            "no answer within request.timeout.ms ({} ms)",
                            timeout.as_millis()
                        )),
                    };
                    let _ = tx.unbounded_send(Report::OAuthToken(answer));
                }));
                None
            }
            Action::Transmit {
                conn,
                bytes,
                written,
            } => {
                if !self.writers.contains_key(&conn) {
                    return None;
                }
                let outbox = self.outboxes.entry(conn).or_default();
                outbox.push(bytes);
                if written.is_some() {
                    outbox.written = written;
                }
                // As much as the socket takes now; the rest while waiting.
                futures::future::poll_fn(|cx| Poll::Ready(self.poll_writes(cx))).await
            }
            Action::Close { conn } => {
                self.writers.remove(&conn);
                self.outboxes.remove(&conn);
                self.table.close(conn);
                None
            }
        }
    }

    /// Writes what each outbox holds, as far as its socket takes it without
    /// waiting (a socket that takes no more wakes the driver when it
    /// does). Returns the first write that failed; that outbox is dropped.
    fn poll_writes(&mut self, cx: &mut Context<'_>) -> Option<(ConnectionId, ConnectionError)> {
        let mut failed = None;
        for (conn, outbox) in &mut self.outboxes {
            let Some(writer) = self.writers.get_mut(conn) else {
                continue;
            };
            match outbox.poll_drain(writer, cx) {
                Poll::Ready(Err(e)) => {
                    failed = Some((*conn, ConnectionError::from_io(&e)));
                    break;
                }
                Poll::Ready(Ok(())) => {
                    if let Some(n) = outbox.written.take() {
                        let _ = self
                            .tx
                            .unbounded_send(Report::Socket(*conn, SocketInput::Written(n)));
                    }
                }
                Poll::Pending => {}
            }
        }
        if let Some((conn, _)) = &failed {
            self.outboxes.remove(conn);
        }
        self.outboxes.retain(|_, o| !o.is_empty());
        failed
    }

    /// Waits for the next socket report, for `kick`, or until `at`;
    /// returns the report, if one ended the wait, and whether the wait
    /// suspended at least once (it did not when something was ready at
    /// once).
    ///
    /// The timer is kept for the next wait when it fires no later than
    /// that wait's `at`, and replaced only when an earlier wake-up is
    /// needed: creating a timer costs a wake-up of the runtime's timer
    /// thread, and the usual next deadline (a request's timeout) moves a
    /// little later with every request. A kept timer that fires early
    /// costs one pass that finds nothing due and sets the next timer.
    pub async fn wait(&mut self, at: Instant, kick: Option<&Signal>) -> (Option<Report>, bool) {
        if !matches!(&self.timer, Some((t, _)) if *t <= at) {
            let sleep = self.rt.sleep(at.saturating_duration_since(Instant::now()));
            self.timer = Some((at, sleep));
        }
        let mut suspended = false;
        let input = futures::future::poll_fn(|cx| {
            if let Some((conn, e)) = self.poll_writes(cx) {
                return Poll::Ready(Some(Report::Socket(conn, SocketInput::Failed(e))));
            }
            if let Poll::Ready(input) = self.rx.poll_next_unpin(cx) {
                return Poll::Ready(input);
            }
            // `None` here only means no socket is open yet.
            if let Poll::Ready(Some((conn, input))) = self.readers.poll_next_unpin(cx) {
                return Poll::Ready(Some(Report::Socket(conn, input)));
            }
            if kick.is_some_and(|k| k.poll_wait(cx).is_ready()) {
                return Poll::Ready(None);
            }
            let (_, timer) = self.timer.as_mut().expect("set above");
            if timer.poll_unpin(cx).is_ready() {
                // Fired: the next wait sets a new one.
                self.timer = None;
                return Poll::Ready(None);
            }
            suspended = true;
            Poll::Pending
        })
        .await;
        (input, suspended)
    }

    /// A report already waiting, if any. (A socket found not ready here
    /// is polled again, with the real waker, by the next
    /// [`Sockets::wait`].)
    pub fn try_next(&mut self) -> Option<Report> {
        self.rx.try_recv().ok().or_else(|| {
            self.readers
                .next()
                .now_or_never()
                .flatten()
                .map(|(conn, input)| Report::Socket(conn, input))
        })
    }

    /// Hands a report to the cluster (registering a new socket first).
    pub fn feed(&mut self, cluster: &mut Cluster, now: Instant, report: Report) {
        let (id, input) = match report {
            Report::Socket(id, input) => (id, input),
            Report::OAuthToken(answer) => return cluster.handle_oauth_token(now, answer),
        };
        match input {
            SocketInput::Connected(socket, peer) => {
                if !cluster.is_connecting(id) {
                    // The attempt was given up (setup timeout, shutdown)
                    // while it completed: close the socket at once.
                    socket.handle.shutdown();
                    return;
                }
                let Socket {
                    read,
                    write,
                    handle,
                } = socket;
                self.table.insert(id, handle);
                self.writers.insert(id, write);
                let frames = read_frames(id, read, cluster.max_frame_size(), self.frames.clone());
                match self.mode {
                    Readers::Inline => self.readers.push(frames),
                    Readers::Tasks => self.rt.spawn(Box::pin(forward(frames, self.tx.clone()))),
                }
                cluster.handle_connected(now, id, peer);
            }
            SocketInput::ConnectFailed(e) => cluster.handle_connect_failed(now, id, e),
            SocketInput::Data(frame) => cluster.handle_received(now, id, frame),
            SocketInput::Eof => cluster.handle_closed(now, id, ConnectionError::ClosedByBroker),
            SocketInput::Failed(e) => cluster.handle_closed(now, id, e),
            SocketInput::Written(n) => cluster.handle_written(id, n),
        }
    }
}

/// A socket's bytes not written yet, in order, and whether what was written
/// still needs a flush.
#[derive(Default)]
struct Outbox {
    queue: VecDeque<Bytes>,
    unflushed: bool,
    /// The number to report once the queue is written (see
    /// [`Action::Transmit`]).
    written: Option<u64>,
}

impl Outbox {
    fn push(&mut self, bytes: Bytes) {
        if !bytes.is_empty() {
            self.queue.push_back(bytes);
        }
    }

    fn is_empty(&self) -> bool {
        self.queue.is_empty() && !self.unflushed && self.written.is_none()
    }

    /// Writes the queue to `writer` until it is empty and flushed
    /// (`Ready(Ok)`), the socket takes no more (`Pending`, `cx` woken when
    /// it does), or a write fails.
    fn poll_drain(
        &mut self,
        writer: &mut Box<dyn AsyncWrite + Send + Unpin>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        while let Some(front) = self.queue.front_mut() {
            match Pin::new(&mut **writer).poll_write(cx, front) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()))
                }
                Poll::Ready(Ok(n)) => {
                    self.unflushed = true;
                    if n >= front.len() {
                        self.queue.pop_front();
                    } else {
                        let _ = front.split_to(n);
                    }
                }
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        // The flush matters under TLS only: the TLS writer may keep
        // encrypted bytes it could not write at once until flushed.
        if self.unflushed {
            match Pin::new(&mut **writer).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// A socket's whole frames, each as it completes: one buffer of at least
/// the frame's size (checked against `max_frame_size` first; a large one
/// reused from `frames`), read into directly, and handed to the cluster
/// without a copy. (Forwarding fixed-size chunks instead cost two more
/// copies of every byte and, for large Fetch responses, a buffer regrown
/// many times over.) The stream ends after the socket's end: EOF, a
/// failure, or a size prefix refused (the cluster sees the prefix, refuses
/// it and closes the socket; nothing more is read).
fn read_frames(
    id: ConnectionId,
    stream: Box<dyn AsyncRead + Send + Unpin>,
    max_frame_size: usize,
    frames: FramePool,
) -> BoxStream<'static, (ConnectionId, SocketInput)> {
    futures::stream::unfold(Some(stream), move |stream| {
        let frames = frames.clone();
        async move {
            let mut stream = stream?;
            let (input, last) = match read_frame(&mut *stream, max_frame_size, &frames).await {
                Ok(frame) => (SocketInput::Data(frame), false),
                Err(ReadEnd::Refused(prefix)) => (SocketInput::Data(prefix), true),
                Err(ReadEnd::Eof) => (SocketInput::Eof, true),
                Err(ReadEnd::Failed(e)) => (SocketInput::Failed(e), true),
            };
            Some(((id, input), (!last).then_some(stream)))
        }
    })
    .boxed()
}

/// A reader task ([`Readers::Tasks`]): forwards a socket's frames until
/// its end, or until nobody listens.
async fn forward(
    mut frames: BoxStream<'static, (ConnectionId, SocketInput)>,
    tx: UnboundedSender<Report>,
) {
    while let Some((conn, input)) = frames.next().await {
        if tx.unbounded_send(Report::Socket(conn, input)).is_err() {
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
    Refused(Bytes),
}

/// Reads one frame: the 4-byte size prefix, checked by the cluster's
/// framing ([`body_len`]) before anything else is read, then the body into
/// a buffer from `frames` (a large body lands on a page boundary:
/// [`super::frame_pool::BODY_ALIGN`]).
async fn read_frame(
    stream: &mut (dyn AsyncRead + Send + Unpin),
    max_frame_size: usize,
    frames: &FramePool,
) -> Result<Bytes, ReadEnd> {
    let mut prefix = [0u8; 4];
    read_full(stream, &mut prefix).await?;
    let Ok(size) = body_len(prefix, max_frame_size) else {
        return Err(ReadEnd::Refused(Bytes::copy_from_slice(&prefix)));
    };
    let mut buf = frames.frame_buf(prefix, size);
    read_full(stream, buf.body()).await?;
    Ok(frames.finish(buf))
}

async fn read_full(
    stream: &mut (dyn AsyncRead + Send + Unpin),
    mut buf: &mut [u8],
) -> Result<(), ReadEnd> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::net::SocketAddr;
    use std::time::Duration;

    /// A runtime that is never asked to do anything in these tests.
    #[derive(Debug)]
    struct Unused;

    impl Runtime for Unused {
        fn spawn(&self, _task: BoxFuture<()>) {
            unreachable!("nothing is spawned")
        }
        fn sleep(&self, _duration: Duration) -> BoxFuture<()> {
            Box::pin(futures::future::pending())
        }
        fn resolve(&self, _addr: String) -> BoxFuture<io::Result<Vec<SocketAddr>>> {
            unreachable!("nothing is resolved")
        }
        fn connect(
            &self,
            _addr: SocketAddr,
            _setup: super::super::rt::Setup,
        ) -> BoxFuture<Result<Socket, super::super::rt::ConnectError>> {
            unreachable!("nothing is dialled")
        }
    }

    /// A socket whose peer stopped reading: it takes nothing, ever.
    struct Stalled;

    impl AsyncWrite for Stalled {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &[u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Pending
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// A socket that takes at most `chunk` bytes a write, or fails.
    struct Sink {
        taken: Arc<Mutex<Vec<u8>>>,
        chunk: usize,
        fail: bool,
    }

    impl AsyncWrite for Sink {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            if self.fail {
                return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
            }
            let n = buf.len().min(self.chunk);
            self.taken.lock().unwrap().extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn sockets() -> Sockets {
        Sockets::new(Arc::new(Unused), SocketOptions::default(), Readers::Inline)
    }

    fn transmit(conn: u64, bytes: &'static [u8]) -> Action {
        Action::Transmit {
            conn: ConnectionId(conn),
            bytes: Bytes::from_static(bytes),
            written: None,
        }
    }

    #[test]
    fn a_socket_that_takes_no_more_holds_up_only_its_own_connection() {
        let mut s = sockets();
        let taken = Arc::new(Mutex::new(Vec::new()));
        s.writers.insert(ConnectionId(1), Box::new(Stalled));
        s.writers.insert(
            ConnectionId(2),
            Box::new(Sink {
                taken: taken.clone(),
                chunk: 3,
                fail: false,
            }),
        );
        // Each `perform` completes at once (a write that waited for the
        // stalled socket would never complete here: nothing wakes it).
        let perform = |s: &mut Sockets, a| {
            s.perform(a)
                .now_or_never()
                .expect("perform does not wait for a socket")
        };
        assert!(perform(&mut s, transmit(1, b"stuck request")).is_none());
        assert!(perform(&mut s, transmit(2, b"first ")).is_none());
        assert!(perform(&mut s, transmit(1, b"another")).is_none());
        assert!(perform(&mut s, transmit(2, b"second")).is_none());
        // The other connection's requests went out whole, in order, three
        // bytes a write.
        assert_eq!(taken.lock().unwrap().as_slice(), b"first second");
        // The stalled one keeps its bytes, in order, until it is closed.
        let held: Vec<u8> = s.outboxes[&ConnectionId(1)]
            .queue
            .iter()
            .flat_map(|b| b.iter().copied())
            .collect();
        assert_eq!(held, b"stuck requestanother");
        assert!(!s.outboxes.contains_key(&ConnectionId(2)));
        assert!(perform(
            &mut s,
            Action::Close {
                conn: ConnectionId(1)
            }
        )
        .is_none());
        assert!(s.outboxes.is_empty());
    }

    /// A runtime that keeps the tasks it is given, for the test to run.
    #[derive(Default)]
    struct Keeper {
        tasks: Mutex<Vec<BoxFuture<()>>>,
    }

    impl std::fmt::Debug for Keeper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Keeper")
        }
    }

    impl Runtime for Keeper {
        fn spawn(&self, task: BoxFuture<()>) {
            self.tasks.lock().unwrap().push(task);
        }
        fn sleep(&self, _duration: Duration) -> BoxFuture<()> {
            Box::pin(futures::future::pending())
        }
        fn resolve(&self, _addr: String) -> BoxFuture<io::Result<Vec<SocketAddr>>> {
            unreachable!("nothing is resolved")
        }
        fn connect(
            &self,
            _addr: SocketAddr,
            _setup: super::super::rt::Setup,
        ) -> BoxFuture<Result<Socket, super::super::rt::ConnectError>> {
            unreachable!("nothing is dialled")
        }
    }

    /// The token provider's future is a task of its own: `perform` hands
    /// it to the runtime and returns at once, however long the provider
    /// takes; its answer comes back as a report once it completes.
    #[test]
    fn the_token_provider_runs_as_a_task_and_its_answer_is_reported() {
        let rt = Arc::new(Keeper::default());
        let mut s = Sockets::new(rt.clone(), SocketOptions::default(), Readers::Inline);
        let (release, gate) = futures::channel::oneshot::channel::<()>();
        let gate = Arc::new(Mutex::new(Some(gate)));
        let provider = crate::sasl::OAuthTokenProvider::new_async(move || {
            let gate = gate.lock().unwrap().take().expect("called once");
            async move {
                gate.await.map_err(|e| e.to_string())?;
                Ok(crate::sasl::OAuthToken::new(
                    "token",
                    Duration::from_secs(60),
                ))
            }
        });
        let action = Action::FetchOAuthToken {
            provider,
            timeout: Duration::from_secs(30),
        };
        let performed = s.perform(action).now_or_never();
        assert!(matches!(performed, Some(None)), "perform does not wait");
        let mut task = rt.tasks.lock().unwrap().pop().expect("a task");
        assert!(s.try_next().is_none());
        // Pending while the provider is.
        assert!((&mut task).now_or_never().is_none());
        assert!(s.try_next().is_none());
        release.send(()).unwrap();
        assert!(task.now_or_never().is_some());
        match s.try_next() {
            Some(Report::OAuthToken(Ok(token))) => assert_eq!(token.value().expose(), "token"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_failed_write_names_its_connection_once() {
        let mut s = sockets();
        s.writers.insert(
            ConnectionId(7),
            Box::new(Sink {
                taken: Arc::default(),
                chunk: 100,
                fail: true,
            }),
        );
        let failed = futures::executor::block_on(s.perform(transmit(7, b"request")));
        match failed {
            Some((ConnectionId(7), ConnectionError::Io { kind, .. })) => {
                assert_eq!(kind, std::io::ErrorKind::BrokenPipe)
            }
            other => panic!("{other:?}"),
        }
        assert!(s.outboxes.is_empty(), "dropped with the failure");
    }
}
