//! The [`Runtime`] on async-std (feature `runtime-async-std`, the default).

use super::rt::{BoxFuture, Runtime, Socket, SocketHandle};
use async_std::net::{TcpStream, ToSocketAddrs};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// async-std's global executor, reactor and timers.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AsyncStd;

impl Runtime for AsyncStd {
    fn spawn(&self, task: BoxFuture<()>) {
        async_std::task::spawn(task);
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<()> {
        Box::pin(async_std::task::sleep(duration))
    }

    fn resolve(&self, addr: String) -> BoxFuture<io::Result<Vec<SocketAddr>>> {
        Box::pin(async move { Ok(addr.as_str().to_socket_addrs().await?.collect()) })
    }

    fn connect(&self, addr: SocketAddr) -> BoxFuture<io::Result<Socket>> {
        Box::pin(async move {
            let stream = TcpStream::connect(addr).await?;
            // An async-std stream is a shared handle on one socket: each
            // half and the handle hold a clone.
            Ok(Socket {
                read: Box::new(stream.clone()),
                write: Box::new(stream.clone()),
                handle: Arc::new(Handle(stream)),
            })
        })
    }
}

#[derive(Debug)]
struct Handle(TcpStream);

impl SocketHandle for Handle {
    fn sock_ref(&self) -> socket2::SockRef<'_> {
        socket2::SockRef::from(&self.0)
    }
}
