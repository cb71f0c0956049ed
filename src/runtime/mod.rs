//! The only code that touches sockets, timers and tasks.
//!
//! Everything above this module is pure or sans-IO; this module connects
//! them to an async runtime through a small seam (spawn, sleep, resolve,
//! connect, a socket split into halves): async-std with the default feature
//! `runtime-async-std`, or tokio with `runtime-tokio`. No other module
//! names either runtime.
//!
//! - [`ClusterDriver`] drives the connection manager ([`Cluster`]) with
//!   real sockets, in the caller's task;
//! - [`BrokerConnection`] is one negotiated connection to one broker, built
//!   on a `ClusterDriver`;
//! - the consumer's background task runs the same driver loop.
//!
//! [`Cluster`]: crate::cluster::Cluster

#[cfg(all(feature = "runtime-async-std", feature = "runtime-tokio"))]
compile_error!(
    "lazykafka: the features `runtime-async-std` and `runtime-tokio` are both enabled; \
     the consumer needs exactly one runtime. For tokio, use \
     `default-features = false, features = [\"runtime-tokio\", ...]`."
);

#[cfg(feature = "runtime-async-std")]
mod async_std_rt;
mod connection;
mod driver;
pub(crate) mod engine;
mod frame_pool;
mod pump;
mod rt;
mod signal;
mod sockets;
#[cfg(feature = "runtime-async-std")]
mod timer;
#[cfg(feature = "runtime-tokio")]
mod tokio_rt;

pub use connection::{BrokerConnection, ConnectOptions};
pub use driver::ClusterDriver;
pub use sockets::SocketOptions;
