//! The seam between this crate and an async runtime: spawning a task, a
//! timer, resolving a name, and a TCP connection split into a read half, a
//! write half and a handle on the socket itself (for socket options, and
//! for a shutdown that needs no `.await`, so that `Drop` can close every
//! socket without blocking).
//!
//! Two implementations exist, chosen by cargo feature: `runtime-async-std`
//! ([`super::async_std_rt`]) and `runtime-tokio` ([`super::tokio_rt`]).
//! Everything else in `runtime/` (the connect routine, the socket readers,
//! the driver loop) is written against this seam only, as quinn's
//! `Runtime` trait does for its endpoint.

use futures::io::{AsyncRead, AsyncWrite};
use futures::FutureExt;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A boxed future the runtime can run on any of its threads.
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What this crate needs of an async runtime.
pub(crate) trait Runtime: Send + Sync + fmt::Debug + 'static {
    /// Runs `task` to completion in the background.
    fn spawn(&self, task: BoxFuture<()>);
    /// Completes after `duration` (on the runtime's own timer).
    fn sleep(&self, duration: Duration) -> BoxFuture<()>;
    /// Resolves `host:port` into every address it names.
    fn resolve(&self, addr: String) -> BoxFuture<io::Result<Vec<SocketAddr>>>;
    /// Opens a TCP connection to `addr` (options are set afterwards through
    /// [`Socket::handle`]).
    fn connect(&self, addr: SocketAddr) -> BoxFuture<io::Result<Socket>>;
}

/// The socket itself, shared by both halves of a [`Socket`]: for socket
/// options, and for shutting it down from anywhere, without `.await`.
pub(crate) trait SocketHandle: Send + Sync + fmt::Debug {
    /// A borrowed view of the operating-system socket.
    fn sock_ref(&self) -> socket2::SockRef<'_>;

    /// Shuts the socket down in both directions: the reader sees the end of
    /// the stream at once and a write fails. The peer may be gone already;
    /// there is nothing to do about that, so the result is ignored.
    fn shutdown(&self) {
        let _ = self.sock_ref().shutdown(std::net::Shutdown::Both);
    }
}

/// One connected TCP socket, split so that a reader task and the writer
/// (the driver loop) own a half each.
pub(crate) struct Socket {
    /// Bytes from the peer.
    pub read: Box<dyn AsyncRead + Send + Unpin>,
    /// Bytes to the peer.
    pub write: Box<dyn AsyncWrite + Send + Unpin>,
    /// The socket both halves use.
    pub handle: Arc<dyn SocketHandle>,
}

impl fmt::Debug for Socket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Socket")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

/// The runtime the enabled cargo feature selects.
pub(crate) fn current() -> Arc<dyn Runtime> {
    #[cfg(feature = "runtime-async-std")]
    {
        Arc::new(super::async_std_rt::AsyncStd)
    }
    #[cfg(all(feature = "runtime-tokio", not(feature = "runtime-async-std")))]
    {
        Arc::new(super::tokio_rt::Tokio)
    }
}

/// Why a connection could not be set up.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// The setup timeout passed.
    Timeout,
    /// The name did not resolve (or resolved to no address).
    Resolve(io::Error),
    /// Connecting failed; the error of the last address tried.
    Io(io::Error),
}

impl ConnectError {
    /// The cause, as the cluster and the events carry it.
    pub fn cause(&self) -> crate::events::ConnectionError {
        match self {
            ConnectError::Timeout => crate::events::ConnectionError::SetupTimeout,
            ConnectError::Resolve(e) => crate::events::ConnectionError::Resolve {
                message: e.to_string(),
            },
            ConnectError::Io(e) => crate::events::ConnectionError::from_io(e),
        }
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Timeout => f.write_str("connection setup timed out"),
            ConnectError::Resolve(e) | ConnectError::Io(e) => e.fmt(f),
        }
    }
}

/// `future`, or `None` once `duration` passed.
pub(crate) async fn timeout<T>(
    rt: &dyn Runtime,
    duration: Duration,
    future: impl Future<Output = T>,
) -> Option<T> {
    futures::select_biased! {
        t = future.fuse() => Some(t),
        _ = rt.sleep(duration).fuse() => None,
    }
}

/// Opens a TCP connection the way every connection of this crate is
/// opened: the name resolved at connect time, every resolved address tried
/// in turn (`client.dns.lookup=use_all_dns_ips`), one setup timeout across
/// them all, TCP_NODELAY, and SO_KEEPALIVE when asked.
pub(crate) async fn connect_socket(
    rt: &dyn Runtime,
    addr: &str,
    setup_timeout: Duration,
    keepalive: bool,
) -> Result<(Socket, SocketAddr), ConnectError> {
    let deadline = Instant::now() + setup_timeout;
    // A literal address needs no resolver (on tokio the resolver is a
    // blocking-pool thread).
    let candidates = match addr.parse::<SocketAddr>() {
        Ok(literal) => vec![literal],
        Err(_) => match timeout(rt, setup_timeout, rt.resolve(addr.to_owned())).await {
            Some(Ok(addrs)) => addrs,
            Some(Err(e)) => return Err(ConnectError::Resolve(e)),
            None => return Err(ConnectError::Timeout),
        },
    };
    let mut last_error = ConnectError::Resolve(io::Error::new(
        io::ErrorKind::NotFound,
        "the name resolved to no address",
    ));
    for candidate in candidates {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ConnectError::Timeout);
        }
        match timeout(rt, left, rt.connect(candidate)).await {
            Some(Ok(socket)) => {
                configure(&*socket.handle, keepalive).map_err(ConnectError::Io)?;
                return Ok((socket, candidate));
            }
            Some(Err(e)) => last_error = ConnectError::Io(e),
            None => return Err(ConnectError::Timeout),
        }
    }
    Err(last_error)
}

fn configure(handle: &dyn SocketHandle, keepalive: bool) -> io::Result<()> {
    let socket = handle.sock_ref();
    socket.set_tcp_nodelay(true)?;
    if keepalive {
        socket.set_keepalive(true)?;
    }
    Ok(())
}
