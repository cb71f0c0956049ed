//! The [`Runtime`] on tokio (feature `runtime-tokio`): tokio's own
//! reactor, timers and tasks, and its blocking pool for DNS. Nothing of
//! async-std runs beside it.
//!
//! Tasks are spawned onto the runtime of the caller (the first
//! `Consumer::poll`), so on a current-thread runtime the consumer runs on
//! that thread and starts none of its own.

use super::rt::{BoxFuture, Runtime, Socket, SocketHandle};
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

    fn connect(&self, addr: SocketAddr) -> BoxFuture<io::Result<Socket>> {
        Box::pin(async move {
            let stream = Arc::new(TcpStream::connect(addr).await?);
            Ok(Socket {
                read: Box::new(Half(stream.clone())),
                write: Box::new(Half(stream.clone())),
                handle: stream,
            })
        })
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
