//! The seam between this crate and an async runtime: spawning a task, a
//! timer, resolving a name, and a connection (TCP, or TLS over TCP) split
//! into a read half, a write half and a handle on the TCP socket itself
//! (for socket options, and for a shutdown that needs no `.await`, so that
//! `Drop` can close every socket without blocking; under TLS that shutdown
//! skips the close_notify alert, which a broker does not need).
//!
//! Two implementations exist, each built by its cargo feature (both may
//! be): `runtime-async-std` ([`super::async_std_rt`]) and `runtime-tokio`
//! ([`super::tokio_rt`]). Which one a client runs on is chosen when it is
//! made ([`select`], [`auto`]). Everything else in `runtime/` (the connect
//! routine, the socket readers, the driver loop) is written against this
//! seam only, as quinn's `Runtime` trait does for its endpoint.

use crate::config::ClientRuntime;
use crate::error::Error;
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
    /// Checks, before a client's background task is started, that the
    /// runtime can run it: by default it can. (On tokio, a runtime not
    /// found when the client was made is looked for again here.)
    fn ready(&self) -> Result<(), Error> {
        Ok(())
    }
    /// Runs `task` to completion in the background.
    fn spawn(&self, task: BoxFuture<()>);
    /// Runs a client's background task (the driver loop of
    /// [`super::background_task`], which lives as long as the client) to
    /// completion: by default as any other task.
    fn spawn_driver(&self, task: BoxFuture<()>) {
        self.spawn(task);
    }
    /// Completes after `duration` (on the runtime's own timer).
    fn sleep(&self, duration: Duration) -> BoxFuture<()>;
    /// Resolves `host:port` into every address it names.
    fn resolve(&self, addr: String) -> BoxFuture<io::Result<Vec<SocketAddr>>>;
    /// Opens a TCP connection to `addr`, sets its options, and, when
    /// `setup.tls` asks for it, runs the TLS handshake over it.
    fn connect(&self, addr: SocketAddr, setup: Setup) -> BoxFuture<Result<Socket, ConnectError>>;
}

/// How a new connection is set up after the TCP connect.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    /// Turn on SO_KEEPALIVE.
    pub keepalive: bool,
    /// The TLS handshake to run, if any.
    pub tls: Option<TlsSetup>,
}

/// One TLS handshake: the client configuration and the name of the
/// broker as dialled (sent as SNI and checked against its certificate).
#[derive(Debug, Clone)]
pub(crate) struct TlsSetup {
    pub config: Arc<rustls::ClientConfig>,
    pub server_name: rustls::pki_types::ServerName<'static>,
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

/// The runtime a client made now runs on, by `client.runtime`
/// ([`ClientRuntime`]):
///
/// - `auto`: [`auto`];
/// - `tokio`: the tokio runtime the caller runs in; an [`Error::Config`]
///   without the feature `runtime-tokio` or outside a tokio runtime;
/// - `async-std`: async-std; an [`Error::Config`] without the feature
///   `runtime-async-std`.
pub(crate) fn select(choice: ClientRuntime) -> Result<Arc<dyn Runtime>, Error> {
    match choice {
        ClientRuntime::Auto => Ok(auto()),
        ClientRuntime::Tokio => {
            #[cfg(feature = "runtime-tokio")]
            {
                match super::tokio_rt::Tokio::current() {
                    Some(tokio) => Ok(Arc::new(tokio)),
                    None => Err(config_error(
                        "tokio, and no tokio runtime is current: create the client \
                         inside the tokio runtime it is to run on",
                    )),
                }
            }
            #[cfg(not(feature = "runtime-tokio"))]
            {
                Err(config_error(
                    "tokio, which needs the cargo feature `runtime-tokio`: enable it",
                ))
            }
        }
        ClientRuntime::AsyncStd => {
            #[cfg(feature = "runtime-async-std")]
            {
                Ok(Arc::new(super::async_std_rt::AsyncStd))
            }
            #[cfg(not(feature = "runtime-async-std"))]
            {
                Err(config_error(
                    "async-std, which needs the cargo feature `runtime-async-std`: enable it",
                ))
            }
        }
    }
}

/// `client.runtime=auto`, and the rule of every client that takes no
/// configuration ([`ClusterDriver`](super::ClusterDriver),
/// [`BrokerConnection`](super::BrokerConnection)): tokio when the caller
/// runs inside a tokio runtime (and `runtime-tokio` is built), async-std
/// otherwise. Built with `runtime-tokio` alone, outside a tokio runtime:
/// the one current when a task is first spawned (see [`Runtime::ready`]).
pub(crate) fn auto() -> Arc<dyn Runtime> {
    #[cfg(feature = "runtime-tokio")]
    if let Some(tokio) = super::tokio_rt::Tokio::current() {
        return Arc::new(tokio);
    }
    #[cfg(feature = "runtime-async-std")]
    {
        Arc::new(super::async_std_rt::AsyncStd)
    }
    #[cfg(not(feature = "runtime-async-std"))]
    {
        Arc::new(super::tokio_rt::Tokio::deferred())
    }
}

/// A `client.runtime` value that cannot be had.
fn config_error(reason: &str) -> Error {
    Error::Config {
        property: "client.runtime".into(),
        reason: format!("client.runtime is {reason}"),
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
    /// TCP connected, and the TLS handshake failed (the message names the
    /// cause).
    Tls(String),
}

impl ConnectError {
    /// A failed handshake, from the error the TLS stream gave.
    pub fn tls(e: &io::Error) -> Self {
        ConnectError::Tls(crate::tls::handshake_error(e))
    }
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
            ConnectError::Tls(message) => crate::events::ConnectionError::Tls {
                message: message.clone(),
            },
        }
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Timeout => f.write_str("connection setup timed out"),
            ConnectError::Resolve(e) | ConnectError::Io(e) => e.fmt(f),
            ConnectError::Tls(message) => f.write_str(message),
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

/// Opens a connection the way every connection of this crate is opened:
/// the name resolved at connect time, every resolved address tried in turn
/// (`client.dns.lookup=use_all_dns_ips`), TCP_NODELAY, SO_KEEPALIVE when
/// asked, then the TLS handshake with `tls` (SNI and the certificate check
/// use the host of `addr`, as dialled), one setup timeout across it all
/// (`socket.connection.setup.timeout.ms` covers TCP and TLS).
pub(crate) async fn connect_socket(
    rt: &dyn Runtime,
    addr: &str,
    setup_timeout: Duration,
    keepalive: bool,
    tls: Option<&crate::tls::TlsConnector>,
) -> Result<(Socket, SocketAddr), ConnectError> {
    let tls = match tls {
        Some(connector) => Some(TlsSetup {
            config: connector.client_config(),
            server_name: crate::tls::server_name(addr).map_err(ConnectError::Tls)?,
        }),
        None => None,
    };
    let setup = Setup { keepalive, tls };
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
    let mut tls_error = None;
    for candidate in candidates {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(tls_error.unwrap_or(ConnectError::Timeout));
        }
        match timeout(rt, left, rt.connect(candidate, setup.clone())).await {
            Some(Ok(socket)) => return Ok((socket, candidate)),
            // The next address may work; if none does, a failed handshake
            // says more than a later refusal (the address that answered
            // is the one with the wrong certificate).
            Some(Err(e @ ConnectError::Tls(_))) => tls_error = tls_error.or(Some(e)),
            Some(Err(e)) => last_error = e,
            None => return Err(tls_error.unwrap_or(ConnectError::Timeout)),
        }
    }
    Err(tls_error.unwrap_or(last_error))
}

/// Sets the options every socket gets, before any byte crosses it (so the
/// TLS handshake runs with TCP_NODELAY too).
pub(crate) fn configure(socket: socket2::SockRef<'_>, keepalive: bool) -> io::Result<()> {
    socket.set_tcp_nodelay(true)?;
    if keepalive {
        socket.set_keepalive(true)?;
    }
    Ok(())
}
