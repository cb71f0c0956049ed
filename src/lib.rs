//! # lazykafka
//!
//! An async Kafka consumer library that is careful with connections: no
//! socket exists before the first `poll`, every socket has a stated purpose,
//! bootstrap connections are retired once the cluster is known, and idle
//! connections are closed.
//!
//! The crate is built in layers:
//!
//! - [`config`]: [`ConsumerConfig`], from a typed builder, Kafka property
//!   names, or any serde format;
//! - [`protocol`]: the Kafka wire protocol, pure (bytes in, typed messages
//!   out; no sockets, no async, no clock);
//! - [`records`]: record batches and message sets, codecs and checksums,
//!   pure as well;
//! - [`fetch`]: positions, fetch planning, record buffering and offset
//!   resets for the assigned partitions, without IO;
//! - [`group`]: consumer-group logic, pure: the partition assignors
//!   (`range`, `roundrobin`, `cooperative-sticky`);
//! - [`runtime`]: the only code that touches sockets and timers
//!   (async-std, behind the default `runtime-async-std` feature).
//!
//! Today the crate connects to a broker and negotiates the API versions
//! both sides speak:
//!
//! ```
//! use lazykafka::runtime::{BrokerConnection, ConnectOptions};
//! use lazykafka::protocol::ApiKey;
//!
//! # async_std::task::block_on(async {
//! # // The test command starts a broker and names it here; without one,
//! # // this example has nothing to talk to.
//! # let Ok(addr) = std::env::var("LAZYKAFKA_TEST_BROKER") else {
//! #     eprintln!("skipped: LAZYKAFKA_TEST_BROKER is not set");
//! #     return Ok(());
//! # };
//! let conn = BrokerConnection::connect(&addr, ConnectOptions::default()).await?;
//! println!("Fetch v{}", conn.versions().version(ApiKey::Fetch)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # });
//! ```
//!
//! See the `api_versions` example for a runnable version of the above.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cluster;
pub mod config;
pub mod consumer;
pub mod error;
pub mod events;
pub mod fetch;
pub mod group;
pub mod protocol;
pub mod records;
#[cfg(feature = "runtime-async-std")]
pub mod runtime;

pub use config::{ConsumerConfig, IsolationLevel, OffsetReset};
pub use consumer::{Consumer, RebalanceListener, Revocation};
pub use error::{Error, ErrorCode};
pub use fetch::ConsumerRecord;
pub use group::TopicPartition;
