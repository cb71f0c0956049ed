//! docs/reliability.md's table of what the consumer does with each error
//! code of each API it sends, rendered from the group layer's and the
//! fetcher's classes of the codes: `the_table_in_docs_is_current` fails
//! when the page and the code part (`LAZYKAFKA_WRITE_DOCS=1` writes it).

use crate::fetch::request::{classify as classify_partition, ErrorClass};
use crate::group::errors::{classify, GroupErrorClass};
use crate::protocol::ErrorCode;

/// The APIs of the group coordinator, as the table names them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GroupApi {
    FindCoordinator,
    JoinSyncHeartbeat,
    ConsumerGroupHeartbeat,
    OffsetFetch,
    AutoCommit,
    Commit,
}

impl GroupApi {
    fn name(self) -> &'static str {
        match self {
            GroupApi::FindCoordinator => "FindCoordinator",
            GroupApi::JoinSyncHeartbeat => "JoinGroup, SyncGroup, Heartbeat",
            GroupApi::ConsumerGroupHeartbeat => "ConsumerGroupHeartbeat (KIP-848)",
            GroupApi::OffsetFetch => "OffsetFetch (positions to start from; `committed()`)",
            GroupApi::AutoCommit => "OffsetCommit (automatic)",
            GroupApi::Commit => "OffsetCommit (`commit()`, `commit_offsets()`)",
        }
    }

    /// The codes the table lists for it: those Kafka's brokers answer
    /// it with (the Java consumer's response handlers), and UNKNOWN_SERVER_ERROR.
    fn codes(self) -> Vec<ErrorCode> {
        use ErrorCode::*;
        let coordinator = [
            NotCoordinator,
            CoordinatorNotAvailable,
            CoordinatorLoadInProgress,
            RequestTimedOut,
        ];
        let mut codes: Vec<ErrorCode> = coordinator.to_vec();
        codes.extend(match self {
            GroupApi::FindCoordinator => vec![GroupAuthorizationFailed, InvalidRequest],
            GroupApi::JoinSyncHeartbeat => vec![
                RebalanceInProgress,
                IllegalGeneration,
                UnknownMemberId,
                MemberIdRequired,
                GroupAuthorizationFailed,
                InvalidGroupId,
                InconsistentGroupProtocol,
                InvalidSessionTimeout,
                FencedInstanceId,
                GroupMaxSizeReached,
            ],
            GroupApi::ConsumerGroupHeartbeat => vec![
                FencedMemberEpoch,
                UnknownMemberId,
                GroupAuthorizationFailed,
                InvalidRequest,
                FencedInstanceId,
                UnreleasedInstanceId,
                UnsupportedAssignor,
                GroupMaxSizeReached,
            ],
            GroupApi::OffsetFetch => vec![
                UnstableOffsetCommit,
                UnknownMemberId,
                StaleMemberEpoch,
                GroupAuthorizationFailed,
                TopicAuthorizationFailed,
                InvalidGroupId,
            ],
            GroupApi::AutoCommit | GroupApi::Commit => vec![
                RebalanceInProgress,
                IllegalGeneration,
                UnknownMemberId,
                StaleMemberEpoch,
                FencedMemberEpoch,
                UnknownTopicOrPartition,
                GroupAuthorizationFailed,
                TopicAuthorizationFailed,
                OffsetMetadataTooLarge,
                InvalidCommitOffsetSize,
                FencedInstanceId,
            ],
        });
        codes.push(UnknownServerError);
        codes
    }

    /// What the consumer does, and what the application sees.
    fn handling(self, class: GroupErrorClass) -> (&'static str, &'static str) {
        use GroupApi::*;
        use GroupErrorClass::*;
        const POLICY: &str = "retried under the retry policy";
        match (self, class) {
            (FindCoordinator, Coordinator | Transient | Rebalance) => (POLICY, "nothing"),
            (FindCoordinator, Refused) => (
                "retried under the retry policy (a fix is picked up)",
                "`Group` from `poll` at once, again every 60 s; not retriable",
            ),
            (JoinSyncHeartbeat | ConsumerGroupHeartbeat | OffsetFetch, Coordinator) => (
                "the coordinator is looked up again; the request retried under the retry policy",
                "nothing",
            ),
            (JoinSyncHeartbeat | ConsumerGroupHeartbeat, Transient) => (POLICY, "nothing"),
            (JoinSyncHeartbeat, Rebalance) => (
                "joins (again) at once; UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION lose the partitions first (the listener's `on_partitions_lost`)",
                "nothing",
            ),
            (ConsumerGroupHeartbeat, Rebalance) => (
                "the partitions are lost and the member joins again at epoch 0",
                "nothing",
            ),
            (JoinSyncHeartbeat, Refused) => (
                "the member stops (a SyncGroup refused with another code than GROUP_AUTHORIZATION_FAILED or FENCED_INSTANCE_ID joins again after the retry backoff instead, as librdkafka does)",
                "`Group` with `is_fatal()` from `poll`, once",
            ),
            (ConsumerGroupHeartbeat, Refused) => {
                ("the member stops", "`Group` with `is_fatal()` from `poll`, once")
            }
            (OffsetFetch, Transient) => (
                POLICY,
                "nothing; `committed()` asks again under the policy, and returns it (retriable) only when `default.api.timeout.ms` would pass first",
            ),
            (OffsetFetch, Rebalance) => (POLICY, "nothing; `committed()` returns it (retriable)"),
            (OffsetFetch, Refused) => (
                "retried under the retry policy",
                "`Group` from `poll` at once, again every 60 s; `committed()` returns it; not retriable",
            ),
            (AutoCommit, Coordinator) => (
                "the coordinator is looked up again; committed again at the next interval",
                "nothing (an `info` line)",
            ),
            (AutoCommit, Transient) => (
                "committed again at the next interval",
                "nothing (an `info` line)",
            ),
            (AutoCommit, Rebalance) => (
                "a stable member rejoins; the next interval commits the partitions then owned",
                "nothing (an `info` line)",
            ),
            (AutoCommit, Refused) => (
                "committed again at the next interval",
                "`Group` from `poll`, again every 60 s; not retriable",
            ),
            (Commit, Coordinator | Transient) => (
                "sent again under the retry policy (the coordinator looked up again first) until it lands or the call gives up",
                "`Ok` once it lands; else `Timeout` after `default.api.timeout.ms`, naming the last error",
            ),
            (Commit, Rebalance) => (
                "a stable member rejoins; the offsets are not committed",
                "`Group`, retriable, saying the group is rebalancing",
            ),
            (Commit, Refused) => ("nothing more", "`Group`, not retriable"),
        }
    }
}

fn codes_text(codes: &[ErrorCode]) -> String {
    codes
        .iter()
        .map(|c| format!("{} ({})", c.name(), c.code()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The table, as docs/reliability.md holds it between its markers.
pub(crate) fn render() -> String {
    let mut out = String::from(
        "| API | error codes | class | what the consumer does | what the application sees |\n|---|---|---|---|---|\n",
    );
    for api in [
        GroupApi::FindCoordinator,
        GroupApi::JoinSyncHeartbeat,
        GroupApi::ConsumerGroupHeartbeat,
        GroupApi::OffsetFetch,
        GroupApi::AutoCommit,
        GroupApi::Commit,
    ] {
        let codes = api.codes();
        for class in [
            GroupErrorClass::Coordinator,
            GroupErrorClass::Transient,
            GroupErrorClass::Rebalance,
            GroupErrorClass::Refused,
        ] {
            let of_class: Vec<ErrorCode> = codes
                .iter()
                .copied()
                .filter(|c| classify(*c) == class)
                .collect();
            if of_class.is_empty() {
                continue;
            }
            let (does, sees) = api.handling(class);
            out.push_str(&format!(
                "| {} | {} | {} | {does} | {sees} |\n",
                api.name(),
                codes_text(&of_class),
                class.describe()
            ));
        }
    }
    out.push_str("| OffsetCommit (automatic and `commit()`) | FENCED_LEADER_EPOCH (74) | stale leader epoch | not sent again with the same offsets (the broker knows a newer leader epoch than the last record read; the next commit, after reading on, carries it) | automatic: nothing (an `info` line); `commit()`: `Group`, retriable, saying the offsets were not committed |\n");
    use ErrorCode::*;
    let partition_codes = [
        NotLeaderOrFollower,
        LeaderNotAvailable,
        FencedLeaderEpoch,
        UnknownLeaderEpoch,
        UnknownTopicOrPartition,
        UnknownTopicId,
        KafkaStorageError,
        OffsetNotAvailable,
        TopicAuthorizationFailed,
        CorruptMessage,
        UnknownServerError,
    ];
    for class in [
        ErrorClass::Leader,
        ErrorClass::Authorization,
        ErrorClass::Other,
    ] {
        let of_class: Vec<ErrorCode> = partition_codes
            .iter()
            .copied()
            .filter(|c| classify_partition(*c) == class)
            .collect();
        let (name, does, sees) = match class {
            ErrorClass::Leader => (
                "leader moved or not ready",
                "metadata refreshed at once; the partition retried under the retry policy",
                "`Fetch` (retriable) from `poll` once it has lasted 1 s, again every 60 s",
            ),
            ErrorClass::Authorization => (
                "refusal",
                "retried under the retry policy",
                "`Fetch` from `poll` at once, again every 60 s; not retriable",
            ),
            ErrorClass::Other => (
                "other",
                "retried under the retry policy",
                "`Fetch` from `poll` at once, again every 60 s",
            ),
        };
        out.push_str(&format!(
            "| Fetch, ListOffsets, OffsetForLeaderEpoch (per partition) | {} | {name} | {does} | {sees} |\n",
            codes_text(&of_class)
        ));
    }
    out.push_str("| Fetch, ListOffsets (per partition) | OFFSET_OUT_OF_RANGE (1) | position lost | reset per `auto.offset.reset` (an `info` line) | nothing; with `none`, `Fetch` (not retriable) and the position kept |\n");
    out.push_str("| Metadata (per topic) | UNKNOWN_TOPIC_OR_PARTITION (3), LEADER_NOT_AVAILABLE (5) | not there yet | asked again under the retry policy | `Topic` or `NoLeader` (retriable) once it has lasted `topic.metadata.propagation.max.ms`, again every 60 s |\n");
    out.push_str("| Metadata (per topic) | TOPIC_AUTHORIZATION_FAILED (29), INVALID_TOPIC_EXCEPTION (17) | refusal | asked again under the retry policy | `Topic` at once, again every 60 s; not retriable |\n");
    out
}

const BEGIN: &str = "<!-- error-table:begin (generated: src/consumer/error_table.rs) -->\n";
const END: &str = "<!-- error-table:end -->";

#[test]
fn the_table_in_docs_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reliability.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let table = render();
    if std::env::var_os("LAZYKAFKA_WRITE_DOCS").is_some() {
        let start = doc.find(BEGIN).expect("begin marker") + BEGIN.len();
        let end = doc.find(END).expect("end marker");
        let mut fresh = doc[..start].to_owned();
        fresh.push_str(&table);
        fresh.push_str(&doc[end..]);
        std::fs::write(path, fresh).unwrap();
        return;
    }
    let start = doc
        .find(BEGIN)
        .unwrap_or_else(|| panic!("docs/reliability.md lacks {BEGIN:?}"))
        + BEGIN.len();
    let end = doc.find(END).expect("end marker");
    assert!(
        doc[start..end] == table,
        "docs/reliability.md's error table is not what the code does; run LAZYKAFKA_WRITE_DOCS=1 cargo test --lib the_table_in_docs_is_current. Expected:\n{table}"
    );
}
