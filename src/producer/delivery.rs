//! What a producer says about each record it was given: where it was
//! written, or why it was not.

use crate::protocol::ErrorCode;
use std::fmt;
use std::time::Duration;

/// Where a record was written: its partition, offset and timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordMetadata {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The record's offset; -1 when the broker did not say (a batch it had
    /// written already, recognised by its sequence number, is answered
    /// without one by older brokers).
    pub offset: i64,
    /// The record's timestamp: the one it was sent with, or the broker's
    /// append time for a topic with `message.timestamp.type=LogAppendTime`.
    pub timestamp: i64,
}

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
}

impl DeliveryError {
    /// The record's topic.
    pub fn topic(&self) -> &str {
        match self {
            DeliveryError::Broker { topic, .. }
            | DeliveryError::TimedOut { topic, .. }
            | DeliveryError::Encode { topic, .. }
            | DeliveryError::Closed { topic, .. } => topic,
        }
    }

    /// The record's partition (-1 when none was chosen).
    pub fn partition(&self) -> i32 {
        match self {
            DeliveryError::Broker { partition, .. }
            | DeliveryError::TimedOut { partition, .. }
            | DeliveryError::Encode { partition, .. }
            | DeliveryError::Closed { partition, .. } => *partition,
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
        }
    }
}

impl std::error::Error for DeliveryError {}
