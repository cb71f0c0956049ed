//! The mock's network side: a listener thread per broker, a thread per
//! connection answering its requests in order (as a Kafka broker does: one
//! request per connection at a time), and a timer thread for the group
//! coordinator's deadlines. What each answer is comes from `respond.rs`;
//! this file carries the bytes and does the waiting. Blocking std sockets
//! and threads keep the mock independent of any async runtime.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::respond::{self, Answer, Reply};
use super::sasl::ConnAuth;
use super::state::State;
use super::{BrokerClose, ClosedBy, MockEventKind};
use crate::protocol::{FrameDecoder, Reader, RequestHeader};

/// The largest request the mock reads (Kafka's `socket.request.max.bytes`).
const MAX_REQUEST: usize = 100 * 1024 * 1024;
/// How often a blocked read wakes to look at idle deadlines.
const READ_SLICE: Duration = Duration::from_millis(50);

/// What every thread shares.
pub(crate) struct Shared {
    pub state: Mutex<State>,
    /// Notified after every change of `state`.
    pub changed: Condvar,
    /// Open connections, to shut them from outside their thread.
    pub conns: Mutex<HashMap<u64, Conn>>,
    /// Every listener speaks TLS with this configuration, when set.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// An open connection as seen from outside its thread.
pub(crate) struct Conn {
    pub broker: i32,
    pub stream: TcpStream,
    /// Set by whoever closes it from the broker's side, before the shutdown.
    pub closing: Option<BrokerClose>,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking connection thread must not take the cluster down.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn conns(&self) -> MutexGuard<'_, HashMap<u64, Conn>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the client closed connection `conn` (its FIN is the next
    /// thing to read), looked at without reading or blocking. Bytes still
    /// unread (a pipelined request) count as open.
    fn peer_closed(&self, conn: u64) -> bool {
        let conns = self.conns();
        let Some(c) = conns.get(&conn) else {
            return false;
        };
        peer_closed(&c.stream)
    }

    /// Closes the connections `which` selects from the broker's side.
    pub fn close_connections(&self, reason: BrokerClose, which: impl Fn(u64, &Conn) -> bool) {
        for (&id, conn) in self.conns().iter_mut() {
            if which(id, conn) {
                conn.closing.get_or_insert(reason);
                let _ = conn.stream.shutdown(Shutdown::Both);
            }
        }
        self.changed.notify_all();
    }
}

/// Whether the peer of `stream` closed its side: a non-blocking peek reads
/// end-of-stream. (A blocking `peek` would wait for the read timeout the
/// connection's thread set on the shared socket.)
#[cfg(unix)]
fn peer_closed(stream: &TcpStream) -> bool {
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit()];
    let peeked = socket2::SockRef::from(stream)
        .recv_with_flags(&mut byte, libc::MSG_PEEK | libc::MSG_DONTWAIT);
    matches!(peeked, Ok(0))
}

/// Elsewhere a held Fetch ends at its deadline only.
#[cfg(not(unix))]
fn peer_closed(_stream: &TcpStream) -> bool {
    false
}

/// A broker's accept loop, running while the broker is up.
pub(crate) struct Listener {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl Listener {
    /// Starts accepting on `listener` for `broker`.
    pub fn start(shared: Arc<Shared>, broker: i32, listener: TcpListener) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("mock-broker-{broker}"))
            .spawn(move || {
                for stream in listener.incoming() {
                    if flag.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    accept(&shared, broker, stream);
                }
            })?;
        Ok(Listener {
            stop,
            addr,
            thread: Some(thread),
        })
    }

    /// Stops accepting and closes the listening socket.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocked accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept(shared: &Arc<Shared>, broker: i32, stream: TcpStream) {
    let now = Instant::now();
    let peer = match stream.peer_addr() {
        Ok(p) => p,
        Err(_) => return,
    };
    let _ = stream.set_nodelay(true);
    let Ok(outside) = stream.try_clone() else {
        return;
    };
    let id = {
        let mut st = shared.lock();
        if st.shutdown || !st.is_up(broker) {
            return;
        }
        st.next_connection += 1;
        let id = st.next_connection;
        st.record(
            now,
            broker,
            MockEventKind::Connected {
                connection: id,
                peer,
            },
        );
        id
    };
    shared.conns().insert(
        id,
        Conn {
            broker,
            stream: outside,
            closing: None,
        },
    );
    shared.changed.notify_all();
    let shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("mock-conn-{id}"))
        .spawn(move || {
            // Blocking reads wake every READ_SLICE to look at idle
            // deadlines; under TLS the handshake runs inside the first
            // reads, with the same slices.
            let _ = stream.set_read_timeout(Some(READ_SLICE));
            match shared.tls.clone() {
                None => serve_connection(&shared, broker, id, stream),
                Some(config) => match rustls::ServerConnection::new(config) {
                    Ok(tls) => {
                        serve_connection(&shared, broker, id, rustls::StreamOwned::new(tls, stream))
                    }
                    Err(e) => {
                        log::debug!("mock broker {broker}: no TLS for connection {id}: {e}");
                        let _ = stream.shutdown(Shutdown::Both);
                    }
                },
            }
        });
    if spawned.is_err() {
        log::debug!("mock broker {broker}: no thread for connection {id}");
    }
}

/// A connection's byte stream: plain TCP, or TLS over it.
trait Transport: Read + Write {
    /// The TCP socket underneath.
    fn tcp(&self) -> &TcpStream;
}

impl Transport for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

impl Transport for rustls::StreamOwned<rustls::ServerConnection, TcpStream> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref()
    }
}

/// Reads requests and answers them until either side closes.
fn serve_connection(shared: &Arc<Shared>, broker: i32, id: u64, mut stream: impl Transport) {
    let decoder = FrameDecoder::new(MAX_REQUEST);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut last_activity = Instant::now();
    let mut auth = ConnAuth::new(shared.lock().sasl.is_some());
    let closed_by = 'conn: loop {
        // Answer every whole request already read.
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => {
                    // Encoded here, without the state's lock.
                    match answer(shared, broker, id, frame, &mut auth).encoded() {
                        Answer::Reply(bytes) => {
                            // The flush sends what TLS still holds.
                            if stream
                                .write_all(&bytes)
                                .and_then(|()| stream.flush())
                                .is_err()
                            {
                                break 'conn None;
                            }
                        }
                        Answer::ReplyThenClose(bytes, reason) => {
                            let _ = stream.write_all(&bytes).and_then(|()| stream.flush());
                            break 'conn Some(reason);
                        }
                        Answer::Silent => {}
                        Answer::Fetch(..) => unreachable!("encoded above"),
                        Answer::Close(reason) => break 'conn Some(reason),
                        Answer::PeerClosed => break 'conn None,
                    }
                    last_activity = Instant::now();
                }
                Ok(None) => break,
                Err(_) => break 'conn Some(BrokerClose::BadRequest),
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => break None,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                last_activity = Instant::now();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                let idle = shared
                    .lock()
                    .brokers
                    .get(&broker)
                    .and_then(|b| b.idle_timeout);
                if idle.is_some_and(|idle| last_activity.elapsed() >= idle) {
                    break Some(BrokerClose::Idle);
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break None,
        }
    };
    let _ = stream.tcp().shutdown(Shutdown::Both);
    let conn = shared.conns().remove(&id);
    let by = match (closed_by, conn.and_then(|c| c.closing)) {
        (_, Some(reason)) => ClosedBy::Broker(reason),
        (Some(reason), None) => ClosedBy::Broker(reason),
        (None, None) => ClosedBy::Client,
    };
    let mut st = shared.lock();
    st.record(
        Instant::now(),
        broker,
        MockEventKind::Closed { connection: id, by },
    );
    drop(st);
    shared.changed.notify_all();
}

/// Sleeps `delay` unless the cluster shuts down first.
fn pause(shared: &Shared, delay: Duration) {
    if delay.is_zero() {
        return;
    }
    let deadline = Instant::now() + delay;
    let mut st = shared.lock();
    while !st.shutdown {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        st = shared
            .changed
            .wait_timeout(st, deadline - now)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// Answers one request: notes it, waits out the broker's delay, then
/// answers now or waits (without holding the lock) until the answer is
/// ready.
fn answer(shared: &Shared, broker: i32, conn: u64, frame: Bytes, auth: &mut ConnAuth) -> Answer {
    let Ok(header) = RequestHeader::decode(&mut Reader::new(frame.clone())) else {
        return Answer::Close(BrokerClose::BadRequest);
    };
    let size = frame.len() + 4;
    let delay = respond::note_request(
        &mut shared.lock(),
        broker,
        conn,
        (&header, size),
        Instant::now(),
    );
    pause(shared, delay);
    let mut st = shared.lock();
    let reply = respond::respond(&mut st, broker, conn, &header, frame, auth, Instant::now());
    shared.changed.notify_all();
    let waiting = match reply {
        Reply::Now(answer) => return answer,
        Reply::Later(waiting) => waiting,
    };
    loop {
        let now = Instant::now();
        if let Some(answer) = waiting.poll(&mut st, now) {
            shared.changed.notify_all();
            return answer;
        }
        // Woken by any change of the state (records produced, a member
        // joining, the timer thread's tick); at most a second apart.
        let mut wait = waiting
            .wake_at(&st)
            .map_or(Duration::from_secs(1), |t| t.saturating_duration_since(now))
            .clamp(Duration::from_millis(1), Duration::from_secs(1));
        if waiting.is_fetch() {
            wait = wait.min(PEER_CHECK);
        }
        st = shared
            .changed
            .wait_timeout(st, wait)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if waiting.is_fetch() {
            // A held Fetch looks whether its client closed the connection
            // (a consumer's `close` while its leader connections wait):
            // then the connection ends at once, as a broker's would when
            // its reactor sees the FIN, rather than when the wait is over.
            drop(st);
            if shared.peer_closed(conn) {
                return Answer::PeerClosed;
            }
            st = shared.lock();
        }
    }
}

/// How often a held Fetch looks whether its client is still there.
const PEER_CHECK: Duration = Duration::from_millis(10);

/// How long a waiting request may sleep: until the coordinator's next
/// deadline (the timer thread ticks it and notifies), at most a second.
fn next_wait(st: &State) -> Duration {
    let max = Duration::from_secs(1);
    st.groups
        .next_deadline()
        .map_or(max, |d| {
            d.saturating_duration_since(Instant::now()).min(max)
        })
        .max(Duration::from_millis(1))
}

/// Runs the coordinator's deadlines (session expiry, rebalance timeouts)
/// until the cluster shuts down.
pub(crate) fn run_timer(shared: Arc<Shared>) {
    let mut st = shared.lock();
    while !st.shutdown {
        let now = Instant::now();
        if st.groups.next_deadline().is_some_and(|d| d <= now) {
            st.groups.tick(now);
            shared.changed.notify_all();
        }
        let wait = next_wait(&st);
        st = shared
            .changed
            .wait_timeout(st, wait)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}
