//! The producer: [`Producer`] (with a runtime feature),
//! and the parts under it.
//!
//! Under the handle (`api`), the producer's core (`core`: the sender's
//! state machine, on the same connection layer as the consumer's) drives
//! pieces that are pure like the consumer's lower layers (no sockets, no
//! async, no clock, no random source of their own): which partition a
//! record goes to, and where records wait for the sender (`accumulator`). Keyed records by Kafka's murmur2
//! hash (the Java client's `BuiltInPartitioner`, and librdkafka's
//! `murmur2_random`), records without a key (or every record, with
//! `partitioner.ignore.keys`) by the uniform sticky partitioner of KIP-794,
//! and a [`Partitioner`] trait for custom choices.
//!
//! ## Which partition a record goes to
//!
//! As the Java client decides it (`KafkaProducer.partition` and
//! `RecordAccumulator.append` in apache/kafka's
//! `clients/src/main/java/org/apache/kafka/clients/producer/`):
//!
//! 1. a partition the record names is taken as it is;
//! 2. else a custom [`Partitioner`], when there is one, chooses;
//! 3. else a record with a key (unless `partitioner.ignore.keys`) goes to
//!    `toPositive(murmur2(key)) % partitions` ([`partition_for_key`]), or
//!    where the `partitioner` property ([`BuiltinPartitioner`], librdkafka's
//!    values) puts it;
//! 4. else the topic's sticky partitioner chooses (KIP-794).
//!
//! [`BuiltinPartitioner::placement`] says where a record goes by its key,
//! or that step 4 decides ([`Placement::Sticky`]). The default keyed placement is the Java
//! client's, the same as librdkafka's with `partitioner=murmur2_random`;
//! librdkafka's default, `consistent_random`, hashes with CRC-32 and
//! places keys elsewhere: `partitioner=consistent_random` keeps them where
//! librdkafka (rust-rdkafka) put them.
//!
//! Everything here is pure: the sticky partitioner takes its random numbers
//! from a source it is handed (the runtime seeds a generator of its own;
//! tests count), and the cluster's partitions as an argument.
//!
//! ## Where records wait
//!
//! The record accumulator (crate-private, `accumulator.rs`) holds the
//! records appended to each partition in batches until the sender takes
//! them: `batch.size`, `linger.ms`, `buffer.memory`, `max.request.size` and
//! `delivery.timeout.ms` as the Java client's `RecordAccumulator` keeps
//! them, batches encoded when drained with the idempotent producer's id,
//! epoch and sequence, retries first in sequence order.
//!
//! The wire side is in the crate's protocol layer: Produce (versions 3-11)
//! and InitProducerId (0-5); its record batch builder writes the batches,
//! producer id, epoch and sequence included (both public only with the
//! unstable feature `unstable-internals`).

pub(crate) mod accumulator;
// Driven by the runtime's task (and, in tests, by the harness): without a
// runtime feature nothing calls it, yet it is built and checked.
#[cfg_attr(
    not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
    allow(dead_code)
)]
pub(crate) mod core;
mod delivery;
mod partitioner;

#[cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]
mod api;

pub use crate::error::{DeliveryError, PartitionerError};
#[cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]
pub use api::{
    DeliveryFuture, DeliveryReports, Producer, ProducerMetrics, ProducerPartitionMetrics,
    ProducerRecord, StatisticsStream,
};
pub use delivery::{DeliveryReport, RecordMetadata};
pub use partitioner::{
    fnv1a, murmur2, partition_for_key, to_positive, BuiltinPartitioner, Partitioner, Placement,
};
// The producer's own way of placing records (the sticky partitioner's
// state, the steps of `KafkaProducer.partition`): public only with
// `unstable-internals`, for the tests that hold it to the Java client's.
#[cfg(feature = "unstable-internals")]
pub use partitioner::{place, RandomSource, RecordToPlace, StickyPartitioner, TopicPartitions};
