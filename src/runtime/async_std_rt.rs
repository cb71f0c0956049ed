//! The [`Runtime`] on async-std (feature `runtime-async-std`, the default);
//! TLS through futures-rustls, timers on a thread of their own
//! ([`super::timer`]), and each client's background task on a thread of
//! its own ([`DRIVER_THREAD`]).

use super::rt::{configure, BoxFuture, ConnectError, Runtime, Setup, Socket, SocketHandle};
use async_std::net::{TcpStream, ToSocketAddrs};
use futures::AsyncReadExt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// async-std's global executor and reactor, and [`super::timer`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AsyncStd;

/// The name of the thread each client's background task runs on.
pub(crate) const DRIVER_THREAD: &str = "lazykafka-task";

impl Runtime for AsyncStd {
    fn spawn(&self, task: BoxFuture<()>) {
        async_std::task::spawn(task);
    }

    /// On a thread of its own, parked between wake-ups, not on async-std's
    /// executor. There, every socket event woke one executor thread, which
    /// woke the other (async-executor hands on the search for work), which
    /// found nothing and went to wait in async-io's reactor, sending
    /// async-io's driver thread through its back-off of up to ten timed
    /// waits: about twelve thread wake-ups per long-polled Fetch answered
    /// while idle. On its own thread the reactor wakes the task directly
    /// (docs/benchmarks.md, "The background task on a thread of its own").
    /// The thread waits in async-io's reactor itself (`async_io::block_on`)
    /// when it is free, so that a socket event wakes it directly rather
    /// than async-io's driver thread, which then woke it (docs/benchmarks.md,
    /// "The producer's task waits in the reactor").
    /// The thread ends with the task (`close`, or the client dropped).
    fn spawn_driver(&self, task: BoxFuture<()>) {
        // The task is handed back if the thread cannot be made.
        let slot = Arc::new(std::sync::Mutex::new(Some(task)));
        let ours = slot.clone();
        let spawned = std::thread::Builder::new()
            .name(DRIVER_THREAD.into())
            .spawn(move || {
                let task = ours.lock().ok().and_then(|mut t| t.take());
                if let Some(task) = task {
                    async_io::block_on(task);
                }
            });
        if let Err(e) = spawned {
            log::warn!(
                "no thread for the client's background task ({e}); it runs on async-std's executor"
            );
            let task = slot.lock().ok().and_then(|mut t| t.take());
            if let Some(task) = task {
                async_std::task::spawn(task);
            }
        }
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<()> {
        // Not async-io's timers: see `super::timer`.
        super::timer::sleep(duration)
    }

    fn resolve(&self, addr: String) -> BoxFuture<io::Result<Vec<SocketAddr>>> {
        Box::pin(async move { Ok(addr.as_str().to_socket_addrs().await?.collect()) })
    }

    fn connect(&self, addr: SocketAddr, setup: Setup) -> BoxFuture<Result<Socket, ConnectError>> {
        Box::pin(async move {
            let stream = TcpStream::connect(addr).await.map_err(ConnectError::Io)?;
            configure(socket2::SockRef::from(&stream), setup.keepalive)
                .map_err(ConnectError::Io)?;
            // An async-std stream is a shared handle on one socket: the
            // handle holds a clone, and so does each half of a plain
            // connection.
            let handle = Arc::new(Handle(stream.clone()));
            let Some(tls) = setup.tls else {
                return Ok(Socket {
                    read: Box::new(stream.clone()),
                    write: Box::new(stream),
                    handle,
                });
            };
            let tls_stream = futures_rustls::TlsConnector::from(tls.config)
                .connect(tls.server_name, stream)
                .await
                .map_err(|e| ConnectError::tls(&e))?;
            // The TLS state is one object: its halves share it through a
            // lock that is held only while a half is polled.
            let (read, write) = tls_stream.split();
            Ok(Socket {
                read: Box::new(read),
                write: Box::new(write),
                handle,
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
