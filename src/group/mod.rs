//! Consumer-group logic that needs no network.
//!
//! Like [`protocol`](crate::protocol), this layer is pure: no sockets, no
//! async, no clock. It holds the membership state machines of both group
//! protocols behind one enum that drives either through the same calls
//! ([`membership`], [`consumer_membership`], [`either_membership`]), the
//! topic patterns of pattern subscriptions ([`pattern`]),
//! and the partition assignors the classic group leader runs between
//! JoinGroup and SyncGroup ([`assignor`]); what follows is
//! `docs/assignors.md`.
//!
#![doc = include_str!("../../docs/assignors.md")]

pub mod assignor;
pub mod consumer_membership;
pub mod either_membership;
pub mod errors;
pub mod membership;
pub mod pattern;

pub use assignor::{
    AssignmentStrategy, Assignor, CooperativeStickyAssignor, GroupAssignment, GroupMember,
    RangeAssignor, RebalanceProtocol, RoundRobinAssignor,
};
pub use pattern::{PatternError, TopicPattern};

use std::fmt;
use std::str::FromStr;

/// Which group protocol a consumer speaks (`group.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum GroupProtocol {
    /// The classic protocol: JoinGroup, SyncGroup and Heartbeat, with the
    /// assignment computed by the group leader (a client).
    #[default]
    Classic,
    /// The consumer group protocol of KIP-848: ConsumerGroupHeartbeat only,
    /// with the assignment computed by the coordinator (Kafka 4.0+).
    Consumer,
}

impl GroupProtocol {
    /// The property value: `classic` or `consumer`.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupProtocol::Classic => "classic",
            GroupProtocol::Consumer => "consumer",
        }
    }
}

impl fmt::Display for GroupProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for GroupProtocol {
    type Err = ();

    /// Parses `classic` or `consumer` (any case, as Java does).
    fn from_str(s: &str) -> Result<Self, ()> {
        match s.trim().to_ascii_lowercase().as_str() {
            "classic" => Ok(GroupProtocol::Classic),
            "consumer" => Ok(GroupProtocol::Consumer),
            _ => Err(()),
        }
    }
}

/// The coordinator-side assignor a KIP-848 member asks for
/// (`group.remote.assignor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RemoteAssignor {
    /// `uniform`: spreads partitions evenly, sticky across rebalances
    /// (Kafka's default).
    Uniform,
    /// `range`: co-partitions topics, like the classic range assignor.
    Range,
}

impl RemoteAssignor {
    /// The name sent as ServerAssignor.
    pub fn as_str(self) -> &'static str {
        match self {
            RemoteAssignor::Uniform => "uniform",
            RemoteAssignor::Range => "range",
        }
    }
}

impl fmt::Display for RemoteAssignor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RemoteAssignor {
    type Err = ();

    /// Parses `uniform` or `range` (any case).
    fn from_str(s: &str) -> Result<Self, ()> {
        match s.trim().to_ascii_lowercase().as_str() {
            "uniform" => Ok(RemoteAssignor::Uniform),
            "range" => Ok(RemoteAssignor::Range),
            _ => Err(()),
        }
    }
}

/// One partition of one topic.
///
/// Ordered by topic name, then partition number, which is the order the
/// assignors use when they list partitions.
///
/// ```
/// use lazykafka::TopicPartition;
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
