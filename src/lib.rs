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
//! - [`producer`]: the runtime-free parts of a producer to come, pure:
//!   which partition a record goes to (murmur2 for keys, KIP-794's sticky
//!   partitioner, custom partitioners);
//! - [`consumer`]: the consumer's state without IO (connections, group,
//!   fetching and commits tied together, time as an argument), built in
//!   every feature set, and around it [`Consumer`];
//! - [`runtime`]: the only code that touches sockets and timers, on tokio
//!   (feature `runtime-tokio`) or async-std (the default feature
//!   `runtime-async-std`); either builds [`Consumer`] and `runtime`, and
//!   both may be on: each consumer then runs on tokio when it is created
//!   inside a tokio runtime, on async-std otherwise (`client.runtime`).
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
//!
//! The lower layers are public too: [`runtime::BrokerConnection`] talks to
//! one broker (the `api_versions` example prints the versions negotiated),
//! and [`runtime::ClusterDriver`] drives the connection manager alone.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cluster;
pub mod config;
pub mod consumer;
pub mod error;
pub mod events;
pub mod fetch;
pub mod group;
#[cfg(feature = "mock")]
pub mod mock;
pub mod producer;
pub mod protocol;
pub mod records;
#[cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]
pub mod runtime;
pub mod sasl;
pub mod tls;

pub use config::{ConsumerConfig, IsolationLevel, OffsetReset, SecurityProtocol};
#[cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]
pub use consumer::{Consumer, ConsumerMetrics, RebalanceListener, RecordStream, Revocation};
pub use error::{Error, ErrorCode};
pub use fetch::ConsumerRecord;
pub use group::TopicPartition;

/// The README's Rust code, compiled as a doc-test (`no_run`: it needs a
/// cluster) so that the quick start keeps compiling.
#[cfg(all(doctest, feature = "runtime-async-std"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
