//! What an error code in a group coordinator's answer means to the
//! consumer: whether it passes by itself, needs the coordinator found
//! again, is news of a rebalance, or is a refusal.
//!
//! The classes follow the Java consumer's `ConsumerCoordinator` and
//! `AbstractCoordinator` response handlers (OffsetCommit, OffsetFetch,
//! JoinGroup, SyncGroup, Heartbeat) and `CommitRequestManager` /
//! `ConsumerMembershipManager` for KIP-848. docs/reliability.md has the
//! table of what the consumer does with each (API, code), rendered from
//! these classes by `src/consumer/error_table.rs`; the behaviour of each
//! class is shown by the tests in `src/consumer/pair.rs`.

use crate::protocol::ErrorCode;

/// The class of a group API's error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupErrorClass {
    /// The coordinator moved or is not there (NOT_COORDINATOR,
    /// COORDINATOR_NOT_AVAILABLE): it is looked up again and the request
    /// retried under the retry policy.
    Coordinator,
    /// Passes by itself (COORDINATOR_LOAD_IN_PROGRESS after a broker
    /// restart, UNSTABLE_OFFSET_COMMIT, REQUEST_TIMED_OUT, ...): retried
    /// under the retry policy.
    Transient,
    /// News of a rebalance, or of a generation (epoch) that moved on
    /// (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
    /// FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH): the member (re)joins by
    /// itself. A commit refused so is not retried with the same offsets
    /// (the partitions may have moved): the application's own commit
    /// fails with a retriable error that says so; an automatic one is
    /// dropped (and made again at the next interval).
    Rebalance,
    /// A refusal that waiting does not cure (GROUP_AUTHORIZATION_FAILED,
    /// TOPIC_AUTHORIZATION_FAILED, INVALID_GROUP_ID, FENCED_INSTANCE_ID,
    /// OFFSET_METADATA_TOO_LARGE, ...): reported at once; not retriable.
    Refused,
}

impl GroupErrorClass {
    /// Whether the consumer goes on by itself after it (every class but a
    /// refusal).
    pub fn goes_on(self) -> bool {
        self != GroupErrorClass::Refused
    }

    /// A short phrase for logs and the docs table.
    pub fn describe(self) -> &'static str {
        match self {
            GroupErrorClass::Coordinator => "coordinator moved",
            GroupErrorClass::Transient => "passes by itself",
            GroupErrorClass::Rebalance => "rebalance",
            GroupErrorClass::Refused => "refusal",
        }
    }
}

/// The class of `code` in a group coordinator's answer.
pub fn classify(code: ErrorCode) -> GroupErrorClass {
    match code {
        ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable => {
            GroupErrorClass::Coordinator
        }
        ErrorCode::RebalanceInProgress
        | ErrorCode::IllegalGeneration
        | ErrorCode::UnknownMemberId
        // A member's group the coordinator does not hold: join again.
        | ErrorCode::GroupIdNotFound
        | ErrorCode::FencedMemberEpoch
        | ErrorCode::StaleMemberEpoch
        | ErrorCode::MemberIdRequired => GroupErrorClass::Rebalance,
        // Kafka's own retriable codes (COORDINATOR_LOAD_IN_PROGRESS,
        // REQUEST_TIMED_OUT, UNSTABLE_OFFSET_COMMIT, UNKNOWN_TOPIC_OR_PARTITION,
        // NETWORK_EXCEPTION, ...).
        code if code.is_retriable() => GroupErrorClass::Transient,
        _ => GroupErrorClass::Refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routine_group_events_are_never_refusals() {
        for code in [
            ErrorCode::RebalanceInProgress,
            ErrorCode::IllegalGeneration,
            ErrorCode::UnknownMemberId,
            ErrorCode::GroupIdNotFound,
            ErrorCode::FencedMemberEpoch,
            ErrorCode::StaleMemberEpoch,
            ErrorCode::CoordinatorLoadInProgress,
            ErrorCode::CoordinatorNotAvailable,
            ErrorCode::NotCoordinator,
            ErrorCode::UnstableOffsetCommit,
            ErrorCode::RequestTimedOut,
        ] {
            assert!(classify(code).goes_on(), "{code}");
        }
        for code in [
            ErrorCode::GroupAuthorizationFailed,
            ErrorCode::TopicAuthorizationFailed,
            ErrorCode::InvalidGroupId,
            ErrorCode::FencedInstanceId,
            ErrorCode::OffsetMetadataTooLarge,
            ErrorCode::UnsupportedVersion,
        ] {
            assert_eq!(classify(code), GroupErrorClass::Refused, "{code}");
        }
    }
}
