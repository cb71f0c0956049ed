//! An in-process Kafka cluster for tests and demonstrations.

mod group;

pub use group::{GroupSnapshot, GroupState, MemberSnapshot};
