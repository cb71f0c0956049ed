//! The only code that touches sockets, timers and tasks.
//!
//! Everything above this module is pure or sans-IO; this module connects
//! them to an async runtime through a small seam (spawn, sleep, resolve,
//! connect, a socket split into halves). No other module names either
//! runtime.
//!
//! # Runtimes
//!
//! Two runtimes can be built in, each by its cargo feature, and both may
//! be at once (the features are additive):
//!
//! - `runtime-tokio`: tokio's own reactor, timers and tasks, on the tokio
//!   runtime the client is made in (its `Handle` is kept, so the client
//!   works when polled from any thread);
//! - `runtime-async-std` (a default feature): async-std's reactor, the
//!   clients' timers on one thread per process (`lazykafka-timer`), and
//!   each client's background task on a thread of its own
//!   (`lazykafka-task`).
//!
//! Each client picks one when it is made: a
//! [`Consumer`](crate::Consumer) by its `client.runtime` property
//! ([`ClientRuntime`](crate::config::ClientRuntime)), whose default,
//! `auto`, is the rule [`ClusterDriver`] and [`BrokerConnection`] follow
//! too: tokio when made inside a tokio runtime (with `runtime-tokio`
//! built), async-std otherwise. A client on tokio starts nothing of
//! async-std. Built with `runtime-tokio` alone, a client made outside a
//! tokio runtime runs on the one it is first used in; a client whose
//! first `poll` or `send` finds none returns an [`Error::Config`](crate::Error)
//! naming `client.runtime`. With neither feature this module and
//! `Consumer` are not built.
//!
//! # What it holds
//!
//! - [`ClusterDriver`] (`cluster_driver.rs`) drives the connection manager
//!   ([`Cluster`]) with real sockets, in the caller's task;
//! - [`BrokerConnection`] (`broker_connection.rs`) is one negotiated
//!   connection to one broker, built on a `ClusterDriver`;
//! - `background_task.rs`: each client's background task, which owns the
//!   client's sockets and drives its core between the application's calls;
//! - `drive_pass.rs`: one pass of the driver loop, which the background
//!   task and `ClusterDriver` both run;
//! - `sockets.rs`: the sockets behind a `Cluster` (connect tasks, the frame
//!   reader, writes, closes), with `frame_pool.rs`, the buffers large
//!   frames are read into;
//! - `rt.rs`: the seam to an async runtime, with `tokio_rt.rs` and
//!   `async_std_rt.rs` behind it (and `timer.rs`, the timer thread of
//!   async-std clients); `signal.rs`: the wake-up a client sends its task.
//!
//! [`Cluster`]: crate::cluster::Cluster

#[cfg(feature = "runtime-async-std")]
mod async_std_rt;
pub(crate) mod background_task;
mod broker_connection;
mod cluster_driver;
mod drive_pass;
mod frame_pool;
pub(crate) mod rt;
mod signal;
mod sockets;
#[cfg(feature = "runtime-async-std")]
mod timer;
#[cfg(feature = "runtime-tokio")]
mod tokio_rt;

pub use broker_connection::{BrokerConnection, ConnectOptions};
pub use cluster_driver::ClusterDriver;
pub use sockets::SocketOptions;
