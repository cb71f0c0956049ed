//! The [`Runtime`] on tokio (feature `runtime-tokio`): tokio's own
//! reactor, timers and tasks, and its blocking pool for DNS; TLS through
//! tokio-rustls. Nothing of async-std runs beside it, even when
//! `runtime-async-std` is built too.
//!
//! A client on tokio keeps the [`Handle`] of the runtime it was created in
//! (or, built with `runtime-tokio` alone, of the one its background task
//! is first started in) and spawns every task onto it, so it works when
//! polled from any thread, and on a current-thread runtime it runs on that
//! runtime's thread and starts none of its own.

use super::rt::{configure, BoxFuture, ConnectError, Runtime, Setup, Socket, SocketHandle};
use crate::error::Error;
use futures::io::{AsyncRead, AsyncWrite};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::runtime::Handle;

/// A tokio runtime, by its [`Handle`].
#[derive(Debug, Default)]
pub(crate) struct Tokio {
    /// The runtime tasks are spawned on; empty until one is found.
    handle: OnceLock<Handle>,
}

impl Tokio {
    /// The runtime the calling thread runs in, if any.
    pub fn current() -> Option<Tokio> {
        Handle::try_current().ok().map(|handle| Tokio {
            handle: OnceLock::from(handle),
        })
    }

    /// No runtime yet: the one current when it is first needed
    /// ([`Runtime::ready`], or a spawn) is kept. (With async-std built
    /// too, a client made outside a tokio runtime runs on async-std.)
    #[cfg(not(feature = "runtime-async-std"))]
    pub fn deferred() -> Tokio {
        Tokio::default()
    }

    /// The runtime kept, or else the one current now (then kept).
    fn try_handle(&self) -> Option<&Handle> {
        if let Some(handle) = self.handle.get() {
            return Some(handle);
        }
        let current = Handle::try_current().ok()?;
        Some(self.handle.get_or_init(|| current))
    }

    /// [`Tokio::try_handle`] where there is no way to report its absence
    /// (a [`ClusterDriver`](super::ClusterDriver) used outside a tokio
    /// runtime in a build with `runtime-tokio` alone).
    fn handle(&self) -> &Handle {
        self.try_handle().unwrap_or_else(|| {
            panic!(
                "lazykafka: no tokio runtime: built with the feature `runtime-tokio` only, \
                 lazykafka's clients must be used inside a tokio runtime"
            )
        })
    }
}

/// The error of a client started where no tokio runtime is current.
pub(crate) fn no_runtime() -> Error {
    Error::Config {
        property: "client.runtime".into(),
        reason: "no tokio runtime is current, and the client was created outside one: \
                 built with the feature `runtime-tokio` only, it runs on the tokio runtime \
                 it is created in or first polled in; create or poll it inside one \
                 (or enable the feature `runtime-async-std` to run it on async-std)"
            .into(),
    }
}

impl Runtime for Tokio {
    fn ready(&self) -> Result<(), Error> {
        self.try_handle().map(drop).ok_or_else(no_runtime)
    }

    fn spawn(&self, task: BoxFuture<()>) {
        self.handle().spawn(task);
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<()> {
        // A tokio timer belongs to the runtime current when it is made.
        let _entered = self.handle().enter();
        Box::pin(tokio::time::sleep(duration))
    }

    fn resolve(&self, addr: String) -> BoxFuture<io::Result<Vec<SocketAddr>>> {
        // What `tokio::net::lookup_host` does, on this runtime's blocking
        // pool whatever thread polls it.
        let lookup = self.handle().spawn_blocking(move || {
            std::net::ToSocketAddrs::to_socket_addrs(&addr).map(Iterator::collect)
        });
        Box::pin(async move { lookup.await.map_err(io::Error::other)? })
    }

    fn connect(&self, addr: SocketAddr, setup: Setup) -> BoxFuture<Result<Socket, ConnectError>> {
        Box::pin(Entered {
            handle: self.handle().clone(),
            inner: Box::pin(connect(addr, setup)),
        })
    }
}

/// A future polled inside a runtime's context: what it registers (a
/// socket with the reactor) goes to that runtime, whatever thread polls.
struct Entered<F> {
    handle: Handle,
    inner: Pin<Box<F>>,
}

impl<F: Future> Future for Entered<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let _entered = this.handle.enter();
        this.inner.as_mut().poll(cx)
    }
}

/// Opens a TCP connection, sets its options, and runs the TLS handshake
/// `setup` asks for.
async fn connect(addr: SocketAddr, setup: Setup) -> Result<Socket, ConnectError> {
    let stream = TcpStream::connect(addr).await.map_err(ConnectError::Io)?;
    configure(socket2::SockRef::from(&stream), setup.keepalive).map_err(ConnectError::Io)?;
    let Some(tls) = setup.tls else {
        let stream = Arc::new(stream);
        return Ok(Socket {
            read: Box::new(Half(stream.clone())),
            write: Box::new(Half(stream.clone())),
            handle: stream,
        });
    };
    // The TLS stream owns the TCP stream; the handle is a second
    // descriptor of the same socket, so that a shutdown through it ends
    // both halves.
    let handle = Arc::new(Dup(socket2::SockRef::from(&stream)
        .try_clone()
        .map_err(ConnectError::Io)?));
    let tls_stream = tokio_rustls::TlsConnector::from(tls.config)
        .connect(tls.server_name, stream)
        .await
        .map_err(|e| ConnectError::tls(&e))?;
    let (read, write) = tokio::io::split(tls_stream);
    Ok(Socket {
        read: Box::new(Compat(read)),
        write: Box::new(Compat(write)),
        handle,
    })
}

/// A second descriptor of a socket whose stream something else owns.
#[derive(Debug)]
struct Dup(socket2::Socket);

impl SocketHandle for Dup {
    fn sock_ref(&self) -> socket2::SockRef<'_> {
        socket2::SockRef::from(&self.0)
    }
}

/// A tokio reader or writer (a half of a TLS stream) as a `futures` one.
#[derive(Debug)]
struct Compat<T>(T);

impl<T: tokio::io::AsyncRead + Unpin> AsyncRead for Compat<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let mut read = tokio::io::ReadBuf::new(buf);
        ready!(Pin::new(&mut self.0).poll_read(cx, &mut read))?;
        Poll::Ready(Ok(read.filled().len()))
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> AsyncWrite for Compat<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl SocketHandle for TcpStream {
    fn sock_ref(&self) -> socket2::SockRef<'_> {
        socket2::SockRef::from(self)
    }
}

/// One direction of a shared tokio stream, as a `futures` reader or writer.
///
/// Reading and writing go through `&TcpStream` (readiness, then a
/// non-blocking `try_read`/`try_write`), so the two halves and the
/// shutdown handle share one stream without a lock. tokio keeps one waker
/// per direction, and each half is used by one task only.
#[derive(Debug)]
struct Half(Arc<TcpStream>);

impl AsyncRead for Half {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.0.poll_read_ready(cx))?;
            match self.0.try_read(buf) {
                // The readiness was stale; it is cleared now, so the next
                // poll registers the waker.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                result => return Poll::Ready(result),
            }
        }
    }
}

impl AsyncWrite for Half {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                result => return Poll::Ready(result),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing is buffered above the kernel.
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(socket2::SockRef::from(&*self.0).shutdown(std::net::Shutdown::Write))
    }
}
