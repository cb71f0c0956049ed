//! The producer's errors for one record: why it was not delivered
//! ([`DeliveryError`]) and why no partition could be chosen for it
//! ([`PartitionerError`]). They live here, under [`Error`](crate::Error)
//! that wraps them, so that the producer uses `error` and `error` uses
//! nothing of the producer; `lazykafka::producer` names them too.

use crate::protocol::ErrorCode;
use std::fmt;
use std::time::Duration;

/// Why a record was not delivered. Each names the topic and partition.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeliveryError {
    /// The partition's leader refused the record's batch with an error
    /// that retrying cannot cure (or retries were used up).
    Broker {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The broker's error code.
        code: ErrorCode,
        /// The broker's message, when it sent one.
        message: Option<String>,
    },
    /// `delivery.timeout.ms` passed before the record was written; `last`
    /// says what held it back (the last error, a leader unknown, ...).
    TimedOut {
        /// The topic.
        topic: String,
        /// The partition (-1 when none was chosen yet).
        partition: i32,
        /// `delivery.timeout.ms`.
        after: Duration,
        /// The last failure seen meanwhile, if any.
        last: Option<String>,
    },
    /// The record's batch could not be encoded (a record within the size
    /// limits always can: this names a fault rather than hide it).
    Encode {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// What the batch builder said.
        reason: String,
    },
    /// The producer was closed (or dropped) before the record was written.
    Closed {
        /// The topic.
        topic: String,
        /// The partition (-1 when none was chosen yet).
        partition: i32,
    },
    /// The record's topic does not exist: every Metadata answer for at
    /// least `topic.metadata.propagation.max.ms` said so (`code`,
    /// UNKNOWN_TOPIC_OR_PARTITION), so the cluster does not create it (the
    /// brokers' `auto.create.topics.enable` is off, or
    /// `allow.auto.create.topics=false`). `send` returns it, in an
    /// [`Error::Delivery`](crate::Error::Delivery): the record was not
    /// queued (no partition was chosen: [`DeliveryError::partition`] is
    /// -1). A `send` once the topic exists is produced to as usual.
    UnknownTopic {
        /// The topic.
        topic: String,
        /// The code the Metadata answers gave for it.
        code: ErrorCode,
        /// From the first Metadata answer that lacked the topic to the
        /// last (at least `topic.metadata.propagation.max.ms`).
        after: Duration,
    },
}

impl DeliveryError {
    /// The record's topic.
    pub fn topic(&self) -> &str {
        match self {
            DeliveryError::Broker { topic, .. }
            | DeliveryError::TimedOut { topic, .. }
            | DeliveryError::Encode { topic, .. }
            | DeliveryError::Closed { topic, .. }
            | DeliveryError::UnknownTopic { topic, .. } => topic,
        }
    }

    /// The record's partition (-1 when none was chosen).
    pub fn partition(&self) -> i32 {
        match self {
            DeliveryError::Broker { partition, .. }
            | DeliveryError::TimedOut { partition, .. }
            | DeliveryError::Encode { partition, .. }
            | DeliveryError::Closed { partition, .. } => *partition,
            DeliveryError::UnknownTopic { .. } => -1,
        }
    }
}

impl fmt::Display for DeliveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeliveryError::Broker {
                topic,
                partition,
                code,
                message,
            } => {
                write!(f, "{topic}-{partition}: Produce refused with {code}")?;
                if let Some(m) = message {
                    write!(f, " ({m})")?;
                }
                Ok(())
            }
            DeliveryError::TimedOut {
                topic,
                partition,
                after,
                last,
            } => {
                write!(
                    f,
                    "{topic}-{partition}: not delivered within delivery.timeout.ms ({after:?})"
                )?;
                if let Some(l) = last {
                    write!(f, "; last failure: {l}")?;
                }
                Ok(())
            }
            DeliveryError::Encode {
                topic,
                partition,
                reason,
            } => write!(
                f,
                "{topic}-{partition}: the batch could not be encoded: {reason}"
            ),
            DeliveryError::Closed { topic, partition } => {
                write!(
                    f,
                    "{topic}-{partition}: the producer closed before delivering"
                )
            }
            DeliveryError::UnknownTopic { topic, code, after } => write!(
                f,
                "topic {topic:?} does not exist: {code} in every Metadata answer for {after:?}; \
                 the record was not queued"
            ),
        }
    }
}

impl std::error::Error for DeliveryError {}

/// Why no partition could be chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartitionerError {
    /// The topic has no partitions to choose from (its metadata says
    /// `partition_count`, zero or less).
    NoPartitions {
        /// The topic, where known.
        topic: Option<String>,
        /// The count that was given.
        partition_count: i32,
    },
    /// The record named a partition the topic does not have (the Java
    /// client's "Invalid partition given with record").
    RecordPartitionOutOfRange {
        /// The topic.
        topic: String,
        /// The partition the record named.
        partition: i32,
        /// How many partitions the topic has.
        partition_count: i32,
    },
    /// A custom partitioner (`producer::Partitioner`) chose a partition the topic does not have
    /// (the Java client refuses a negative one, "The partitioner generated
    /// an invalid partition number"; one at or past the count is refused
    /// here too, before any batch is made for it).
    CustomPartitionOutOfRange {
        /// The topic.
        topic: String,
        /// The partition chosen.
        partition: i32,
        /// How many partitions the topic has.
        partition_count: i32,
    },
}

impl fmt::Display for PartitionerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionerError::NoPartitions {
                topic: Some(topic),
                partition_count,
            } => write!(
                f,
                "topic {topic:?} has no partitions to choose from ({partition_count})"
            ),
            PartitionerError::NoPartitions {
                topic: None,
                partition_count,
            } => write!(f, "no partitions to choose from ({partition_count})"),
            PartitionerError::RecordPartitionOutOfRange {
                topic,
                partition,
                partition_count,
            } => write!(
                f,
                "the record names partition {partition} of topic {topic:?}, \
                 which has partitions 0..{partition_count}"
            ),
            PartitionerError::CustomPartitionOutOfRange {
                topic,
                partition,
                partition_count,
            } => write!(
                f,
                "the custom partitioner chose partition {partition} of topic {topic:?}, \
                 which has partitions 0..{partition_count}"
            ),
        }
    }
}

impl std::error::Error for PartitionerError {}
