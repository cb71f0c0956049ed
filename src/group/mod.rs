//! Consumer-group logic that needs no network.
//!
//! Like [`protocol`](crate::protocol), this layer is pure: no sockets, no
//! async, no clock. Today it holds the partition assignors the group leader
//! runs between JoinGroup and SyncGroup ([`assignor`]); what follows is
//! `docs/assignors.md`.
//!
#![doc = include_str!("../../docs/assignors.md")]

pub mod assignor;
pub mod membership;

pub use assignor::{
    AssignmentStrategy, Assignor, CooperativeStickyAssignor, GroupAssignment, GroupMember,
    RangeAssignor, RebalanceProtocol, RoundRobinAssignor,
};

use std::fmt;

/// One partition of one topic.
///
/// Ordered by topic name, then partition number, which is the order the
/// assignors use when they list partitions.
///
/// ```
/// use lazykafka::group::TopicPartition;
///
/// let tp = TopicPartition::new("invoices", 3);
/// assert_eq!(tp.to_string(), "invoices-3");
/// assert!(TopicPartition::new("a", 9) < TopicPartition::new("b", 0));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic's name.
    pub topic: String,
    /// The partition's index within the topic, from 0.
    pub partition: i32,
}

impl TopicPartition {
    /// A topic-partition.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    /// `topic-partition`, as Kafka's tools print it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
