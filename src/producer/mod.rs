//! The producer's runtime-free parts.
//!
//! There is no producer yet; these are the pieces it will be built on, pure
//! like the consumer's lower layers (no sockets, no async, no clock, no
//! random source of their own):
//!
//! - [`partitioner`]: which partition a record goes to. Keyed records by
//!   Kafka's murmur2 hash (the Java client's `BuiltInPartitioner`, and
//!   librdkafka's `murmur2_random`), records without a key (or every record,
//!   with `partitioner.ignore.keys`) by the uniform sticky partitioner of
//!   KIP-794, and a [`Partitioner`] trait for custom choices.
//!
//! The wire side is in the crate's protocol layer: Produce (versions 3-11)
//! and InitProducerId (0-5); its record batch builder writes the batches,
//! producer id, epoch and sequence included (both public only with the
//! unstable feature `unstable-internals`).

mod partitioner;

pub use partitioner::{
    murmur2, partition_for_key, place, to_positive, Partitioner, PartitionerError, Placement,
    RandomSource, RecordToPlace, StickyPartitioner, TopicPartitions,
};
