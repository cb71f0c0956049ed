//! The consumer: its state without IO (the crate-internal `core`) and,
//! with a runtime feature, the public [`Consumer`] around it.
//!
//! The state of a consumer (connections, group membership, fetching,
//! commits, `max.poll.interval.ms`) lives in a core that takes the time as
//! an argument and returns actions, as the `cluster`, `group` and `fetch`
//! layers do; it is built in every feature set and tested step by step
//! against `lazykafka::mock`'s in-memory state with a manual clock. Only
//! the `Consumer` methods and the background task that carries the core's
//! actions to sockets need a runtime.

#[cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]
mod api;
// Without a runtime nothing drives the core but its tests: it is built so
// that it stays free of IO (a runtime feature could not hide a socket in
// it), and its crate-internal API is not dead code in the builds that run.
#[cfg_attr(
    not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
    allow(dead_code)
)]
pub(crate) mod core;
#[cfg_attr(
    not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
    allow(dead_code)
)]
mod offsets;
// `metrics` is public in every feature set; its constructors serve the
// runtime's `Consumer::metrics` only.
#[cfg(test)]
mod error_table;
#[cfg_attr(
    not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
    allow(dead_code)
)]
pub mod metrics;
#[cfg(all(test, feature = "mock"))]
mod pair;

#[cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]
pub use api::{Consumer, RebalanceListener, RecordStream, Revocation, StatisticsStream};
pub use metrics::ConsumerMetrics;

// What the consumer hands the application, defined in the layers under it.
pub use crate::fetch::{ConsumerRecord, OffsetAndTimestamp};
pub use crate::group::TopicPartition;
pub use crate::records::{
    Header, HeaderIter, Headers, OwnedRecord, Record, Timestamp, TimestampType,
};
