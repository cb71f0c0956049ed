//! The Fetch request body, written at the version its connection
//! negotiated, and how partition errors are sorted.

use crate::cluster::RequestBody;
use crate::protocol::messages::fetch::FetchRequest;
use crate::protocol::ErrorCode;
use crate::protocol::{ApiKey, EncodeError, Message, Writer};

/// The first Fetch version that names topics by id instead of by name
/// (KIP-516).
pub(crate) const FIRST_TOPIC_ID_VERSION: i16 = 13;

/// The first Fetch version with `last_fetched_epoch` (KIP-320 for
/// followers, KIP-595).
const LAST_FETCHED_EPOCH_VERSION: i16 = 12;

/// A Fetch request holding both the name and the id of every topic, so it
/// can be written at any version 4..=17: names up to v12, ids from v13.
///
/// The session fields (KIP-227) are the fetcher's: see
/// `docs/fetching.md`.
#[derive(Debug)]
pub(crate) struct FetchRequestBody(pub(crate) FetchRequest);

impl RequestBody for FetchRequestBody {
    fn api_key(&self) -> ApiKey {
        ApiKey::Fetch
    }

    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        if version >= FIRST_TOPIC_ID_VERSION {
            // An all-zero id would name no topic; the broker would answer
            // UNKNOWN_TOPIC_ID. Refuse instead, naming the topic, so the
            // metadata can be asked for ids.
            if let Some(t) = self.0.topics.iter().find(|t| t.topic_id == [0; 16]) {
                return Err(EncodeError::UnknownTopicId {
                    topic: t.topic.clone(),
                    version,
                });
            }
        }
        if version < LAST_FETCHED_EPOCH_VERSION
            && self
                .0
                .topics
                .iter()
                .any(|t| t.partitions.iter().any(|p| p.last_fetched_epoch != -1))
        {
            // `last_fetched_epoch` exists from v12 only; older brokers do
            // not look for divergence (positions are validated with
            // OffsetForLeaderEpoch instead).
            let mut older = self.0.clone();
            for p in older
                .topics
                .iter_mut()
                .flat_map(|t| t.partitions.iter_mut())
            {
                p.last_fetched_epoch = -1;
            }
            return older.encode(w, version);
        }
        self.0.encode(w, version)
    }
}

/// What a partition-level error asks of the consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// The leader this client knows is stale or not ready: refresh
    /// metadata and retry after backoff.
    Leader,
    /// Not allowed to read the topic: report, retry after backoff.
    Authorization,
    /// Anything else: report, retry after backoff.
    Other,
}

/// Sorts a partition error of a Fetch or ListOffsets response (the Java
/// consumer's `FetchCollector.handleInitializeErrors` and
/// `OffsetFetcherUtils`).
pub(crate) fn classify(code: ErrorCode) -> ErrorClass {
    match code {
        ErrorCode::NotLeaderOrFollower
        | ErrorCode::LeaderNotAvailable
        | ErrorCode::ReplicaNotAvailable
        | ErrorCode::FencedLeaderEpoch
        | ErrorCode::UnknownLeaderEpoch
        | ErrorCode::UnknownTopicOrPartition
        | ErrorCode::UnknownTopicId
        | ErrorCode::InconsistentTopicId
        | ErrorCode::KafkaStorageError
        | ErrorCode::OffsetNotAvailable
        | ErrorCode::BrokerNotAvailable => ErrorClass::Leader,
        ErrorCode::TopicAuthorizationFailed => ErrorClass::Authorization,
        _ => ErrorClass::Other,
    }
}
