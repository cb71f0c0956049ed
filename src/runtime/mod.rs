//! The only code that touches sockets, timers and tasks.
//!
//! Everything above this module is pure or sans-IO; this module connects
//! them to the async-std runtime. No other module names async-std.

mod connection;
mod driver;
pub(crate) mod engine;
mod signal;
mod socket;
mod sockets;

pub use connection::{BrokerConnection, ConnectOptions};
pub use driver::ClusterDriver;
pub use sockets::SocketOptions;
