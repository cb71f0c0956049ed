//! The [`Runtime`] on tokio (feature `runtime-tokio`): tokio's own
//! reactor, timers and tasks, and its blocking pool for DNS; TLS through
//! tokio-rustls. Nothing of async-std runs beside it.
//!
//! Tasks are spawned onto the runtime of the caller (the first
//! `Consumer::poll`), so on a current-thread runtime the consumer runs on
//! that thread and starts none of its own.

use super::rt::{configure, BoxFuture, ConnectError, Runtime, Setup, Socket, SocketHandle};
use futures::io::{AsyncRead, AsyncWrite};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;

/// The tokio runtime the caller runs in.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tokio;

impl Runtime for Tokio {
    fn spawn(&self, task: BoxFuture<()>) {
        tokio::spawn(task);
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<()> {
        Box::pin(tokio::time::sleep(duration))
    }

    fn resolve(&self, addr: String) -> BoxFuture<io::Result<Vec<SocketAddr>>> {
        Box::pin(async move { Ok(tokio::net::lookup_host(addr).await?.collect()) })
    }

    fn connect(&self, addr: SocketAddr, setup: Setup) -> BoxFuture<Result<Socket, ConnectError>> {
        Box::pin(async move {
            let stream = TcpStream::connect(addr).await.map_err(ConnectError::Io)?;
            configure(socket2::SockRef::from(&stream), setup.keepalive)
                .map_err(ConnectError::Io)?;
            let Some(tls) = setup.tls else {
                let stream = Arc::new(stream);
                return Ok(Socket {
                    read: Box::new(Half(stream.clone())),
                    write: Box::new(Half(stream.clone())),
                    handle: stream,
                });
            };
            // The TLS stream owns the TCP stream; the handle is a second
            // descriptor of the same socket, so that a shutdown through it
            // ends both halves.
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
        })
    }
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
