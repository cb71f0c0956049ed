//! # lazykafka
//!
//! An async Kafka consumer library that is careful with connections: no
//! socket exists before the first `poll`, every socket has a stated purpose,
//! bootstrap connections are retired once the cluster is known, and idle
//! connections are closed.
//!
//! The public API:
//!
//! - [`Consumer`] ([`consumer`]): subscribe or assign, `poll`, commit,
//!   seek, pause, offsets lookups, metrics; the records it hands out
//!   ([`ConsumerRecord`], their headers) and the [`RebalanceListener`];
//! - [`config`]: [`ConsumerConfig`] and [`ProducerConfig`], from a typed
//!   builder, Kafka property names, or any serde format, and the enums
//!   their properties take;
//! - [`error`]: [`Error`] (with [`Error::is_retriable`]), the broker's
//!   [`ErrorCode`], and the errors its variants carry;
//! - [`events`]: the consumer's connections, as events, snapshots and
//!   per-broker counters;
//! - [`Producer`] ([`producer`]): `send`, `flush`, `close`, idempotent by
//!   default, with the consumer's connection rules; the [`ProducerRecord`]
//!   it takes, what it says of each record (`RecordMetadata`,
//!   `DeliveryError`), and which partition a record goes to (murmur2 for
//!   keys, KIP-794's sticky partitioner); its configuration is
//!   [`ProducerConfig`] (docs/producer.md);
//! - `mock` (feature `mock`): a Kafka cluster in this process, for tests.
//!
//! [`Consumer`] runs on tokio (feature `runtime-tokio`) or async-std (the
//! default feature `runtime-async-std`); both may be on: each consumer then
//! runs on tokio when it is created inside a tokio runtime, on async-std
//! otherwise (`client.runtime`).
//!
//! Under it the crate is built in layers (the wire protocol, record
//! batches, the connection manager, the fetcher, the group state machines,
//! the runtime's sockets and timers; docs/architecture.md), which it keeps
//! to itself: the feature `unstable-internals` makes them public for the
//! crate's own tests, benchmarks and fuzz targets, with no semver promise.
//!
//! ## A consumer
//!
//! ```
//! # // The same body on whichever runtime feature is enabled.
//! # let body = async {
//! # // A 3-broker cluster in this process (lazykafka::mock), with a few
//! # // records in it.
//! # use lazykafka::mock::{MockCluster, MockRecord};
//! # let mock = MockCluster::new(3).unwrap();
//! # mock.create_topic("invoices", 2).unwrap();
//! # for i in 0..4 {
//! #     mock.produce("invoices", i % 2, [MockRecord::new(format!("invoice {i}"))]).unwrap();
//! # }
//! # let bootstrap = mock.bootstrap_servers();
//! use lazykafka::{Consumer, ConsumerConfig, OffsetReset, TopicPartition};
//! use std::time::Duration;
//!
//! let config = ConsumerConfig::builder()
//!     .bootstrap_servers(&bootstrap)
//!     .auto_offset_reset(OffsetReset::Earliest)
//!     .build()?;
//! let consumer = Consumer::new(config)?; // no socket, no DNS, no task
//! consumer.assign([TopicPartition::new("invoices", 0), TopicPartition::new("invoices", 1)])?;
//! assert!(consumer.connections().is_empty());
//!
//! let mut seen = 0;
//! while seen < 4 {
//!     // Sockets begin here: a bootstrap broker, then each partition leader.
//!     for record in consumer.poll(Duration::from_secs(1)).await? {
//!         let value = String::from_utf8_lossy(record.value().unwrap_or_default());
//!         println!("{}/{}@{}: {value}", record.topic(), record.partition(), record.offset());
//!         seen += 1;
//!     }
//! }
//! // One connection per partition leader; the bootstrap connection is gone.
//! for c in consumer.connections() {
//!     println!("{:?} broker {:?} {}", c.purpose, c.broker, c.addr);
//! }
//! consumer.close().await?;
//! # Ok::<(), lazykafka::Error>(())
//! # };
//! # #[cfg(feature = "runtime-async-std")]
//! # async_std::task::block_on(body).unwrap();
//! # #[cfg(not(feature = "runtime-async-std"))]
//! # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
//! ```
//!
//! With a `group.id`, [`Consumer::subscribe`] joins a consumer group
//! instead (classic protocol; `range`, `roundrobin` or `cooperative-sticky`
//! assignment), and [`Consumer::commit`] stores offsets with the group
//! coordinator, over a connection that carries group traffic only.
//!
//! `mock::MockCluster` (feature `mock`) runs a Kafka cluster in this
//! process for tests and demonstrations; the examples above run against it.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// Declares an item public with the `unstable-internals` feature and
/// crate-private without it: the layers below the consumer, reachable by
/// the crate's own tests, benchmarks and fuzz targets, with no semver
/// promise (see docs/architecture.md, "The public API").
macro_rules! unstable {
    ($(#[$attr:meta])* pub $($item:tt)*) => {
        #[cfg(feature = "unstable-internals")]
        $(#[$attr])*
        pub $($item)*
        #[cfg(not(feature = "unstable-internals"))]
        $(#[$attr])*
        pub(crate) $($item)*
    };
}

// The layers under the consumer: their items are `pub` for one another and
// for `unstable-internals`; without it, what they export that no build of
// the consumer calls (codecs only the mock or the tests use, say) is not
// dead code to be removed but internals kept whole, hence `allow`.
unstable! {
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code, unused_imports))]
    pub mod cluster;
}
pub mod config;
pub mod consumer;
pub mod error;
pub mod events;
pub mod metrics;
unstable! {
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code, unused_imports))]
    pub mod fetch;
}
unstable! {
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code, unused_imports))]
    pub mod group;
}
// The test harness every client core's unit tests step on the mock.
#[cfg(all(test, feature = "mock"))]
mod harness;
#[cfg(feature = "mock")]
pub mod mock;
pub mod producer;
unstable! {
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code, unused_imports))]
    pub mod protocol;
}
unstable! {
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code, unused_imports))]
    pub mod records;
}
unstable! {
    #[cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code, unused_imports))]
    pub mod runtime;
}
unstable! {
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code, unused_imports))]
    pub mod sasl;
}
unstable! {
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code, unused_imports))]
    pub mod tls;
}
// The clients' statistics streams (one implementation for both; the
// stream's type is public through `consumer` and `producer`).
#[cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]
mod statistics;
// A run of failures and when it was last reported, shared by the layers
// that report failures which go on (crate-internal in every build).
mod streak;

pub use config::{
    Acks, ConsumerConfig, ConsumerConfigBuilder, IsolationLevel, OffsetReset, ProducerConfig,
    ProducerConfigBuilder, SecurityProtocol,
};
#[cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]
pub use consumer::{Consumer, ConsumerMetrics, RebalanceListener, RecordStream, Revocation};
pub use error::{Error, ErrorCode};
pub use fetch::ConsumerRecord;
pub use group::TopicPartition;
#[cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]
pub use producer::{DeliveryFuture, Producer, ProducerRecord};

/// The README's Rust code, compiled as a doc-test (`no_run`: it needs a
/// cluster) so that the quick start keeps compiling.
#[cfg(all(doctest, feature = "runtime-async-std"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// docs/migrating-from-rdkafka.md's lazykafka code, compiled as a
/// doc-test (`no_run`: it needs a cluster) so that the note keeps
/// compiling.
#[cfg(all(doctest, feature = "runtime-tokio"))]
#[doc = include_str!("../docs/migrating-from-rdkafka.md")]
pub struct MigrationGuideDoctests;

/// docs/producer.md's Rust code, compiled as a doc-test (`no_run`: it
/// needs a cluster) so that the guide keeps compiling.
#[cfg(all(doctest, feature = "runtime-tokio"))]
#[doc = include_str!("../docs/producer.md")]
pub struct ProducerGuideDoctests;
