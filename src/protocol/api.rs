//! API keys, the version ranges this client speaks, and the choice of one
//! version per API for each connection.
//!
//! Every connection starts with ApiVersions; the broker's answer lists, per
//! API, the versions it accepts. [`ApiVersionTable::negotiate`] intersects
//! that with [`ApiKey::client_versions`] and keeps the highest common
//! version of each API.

use super::codec::{DecodeError, Reader};
use super::messages::api_versions::ApiVersionsResponse;
use super::messages::Message;
use bytes::Bytes;
use std::fmt;

// `ApiKey::client_versions` and `ApiKey::first_flexible_version`, generated
// by scripts/gen_messages.py from the ranges its codecs are generated for.
mod versions;

/// The Kafka APIs this client knows by name.
///
/// The numbers are the `apiKey` of each schema in Kafka's
/// `clients/src/main/resources/common/message/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ApiKey {
    /// Produce (0): the producer's request; test tools and the mock cluster
    /// use it too.
    Produce,
    /// Fetch (1).
    Fetch,
    /// ListOffsets (2).
    ListOffsets,
    /// Metadata (3).
    Metadata,
    /// OffsetCommit (8).
    OffsetCommit,
    /// OffsetFetch (9).
    OffsetFetch,
    /// FindCoordinator (10).
    FindCoordinator,
    /// JoinGroup (11).
    JoinGroup,
    /// Heartbeat (12).
    Heartbeat,
    /// LeaveGroup (13).
    LeaveGroup,
    /// SyncGroup (14).
    SyncGroup,
    /// SaslHandshake (17).
    SaslHandshake,
    /// ApiVersions (18).
    ApiVersions,
    /// CreateTopics (19): used by test tools and the mock cluster.
    CreateTopics,
    /// InitProducerId (22): a producer id and epoch for an idempotent or
    /// transactional producer (KIP-98, KIP-360).
    InitProducerId,
    /// OffsetForLeaderEpoch (23).
    OffsetForLeaderEpoch,
    /// SaslAuthenticate (36).
    SaslAuthenticate,
    /// ConsumerGroupHeartbeat (68, KIP-848).
    ConsumerGroupHeartbeat,
}

/// An inclusive range of API versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VersionRange {
    /// Lowest version, inclusive.
    pub min: i16,
    /// Highest version, inclusive.
    pub max: i16,
}

impl VersionRange {
    /// The range `min..=max`.
    pub const fn new(min: i16, max: i16) -> Self {
        VersionRange { min, max }
    }

    /// Whether `version` lies in the range.
    pub fn contains(&self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }

    /// The highest version in both ranges, if they overlap.
    pub fn highest_common(&self, other: &VersionRange) -> Option<i16> {
        let max = self.max.min(other.max);
        (max >= self.min.max(other.min)).then_some(max)
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={}", self.min, self.max)
    }
}

impl ApiKey {
    unstable! {
        /// Every API this client knows, in key order.
        pub const ALL: [ApiKey; 18] = [
            ApiKey::Produce,
            ApiKey::Fetch,
            ApiKey::ListOffsets,
            ApiKey::Metadata,
            ApiKey::OffsetCommit,
            ApiKey::OffsetFetch,
            ApiKey::FindCoordinator,
            ApiKey::JoinGroup,
            ApiKey::Heartbeat,
            ApiKey::LeaveGroup,
            ApiKey::SyncGroup,
            ApiKey::SaslHandshake,
            ApiKey::ApiVersions,
            ApiKey::CreateTopics,
            ApiKey::InitProducerId,
            ApiKey::OffsetForLeaderEpoch,
            ApiKey::SaslAuthenticate,
            ApiKey::ConsumerGroupHeartbeat,
        ];
    }

    /// The key number on the wire.
    pub const fn code(self) -> i16 {
        match self {
            ApiKey::Produce => 0,
            ApiKey::Fetch => 1,
            ApiKey::ListOffsets => 2,
            ApiKey::Metadata => 3,
            ApiKey::OffsetCommit => 8,
            ApiKey::OffsetFetch => 9,
            ApiKey::FindCoordinator => 10,
            ApiKey::JoinGroup => 11,
            ApiKey::Heartbeat => 12,
            ApiKey::LeaveGroup => 13,
            ApiKey::SyncGroup => 14,
            ApiKey::SaslHandshake => 17,
            ApiKey::ApiVersions => 18,
            ApiKey::CreateTopics => 19,
            ApiKey::InitProducerId => 22,
            ApiKey::OffsetForLeaderEpoch => 23,
            ApiKey::SaslAuthenticate => 36,
            ApiKey::ConsumerGroupHeartbeat => 68,
        }
    }

    /// The API with this key number, if this client knows it.
    pub fn from_code(code: i16) -> Option<ApiKey> {
        ApiKey::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The schema name, as Kafka spells it.
    pub const fn name(self) -> &'static str {
        match self {
            ApiKey::Produce => "Produce",
            ApiKey::Fetch => "Fetch",
            ApiKey::ListOffsets => "ListOffsets",
            ApiKey::Metadata => "Metadata",
            ApiKey::OffsetCommit => "OffsetCommit",
            ApiKey::OffsetFetch => "OffsetFetch",
            ApiKey::FindCoordinator => "FindCoordinator",
            ApiKey::JoinGroup => "JoinGroup",
            ApiKey::Heartbeat => "Heartbeat",
            ApiKey::LeaveGroup => "LeaveGroup",
            ApiKey::SyncGroup => "SyncGroup",
            ApiKey::SaslHandshake => "SaslHandshake",
            ApiKey::ApiVersions => "ApiVersions",
            ApiKey::CreateTopics => "CreateTopics",
            ApiKey::InitProducerId => "InitProducerId",
            ApiKey::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
            ApiKey::SaslAuthenticate => "SaslAuthenticate",
            ApiKey::ConsumerGroupHeartbeat => "ConsumerGroupHeartbeat",
        }
    }

    unstable! {
        /// Whether `version` of this API uses the flexible encoding.
        pub fn is_flexible(self, version: i16) -> bool {
            matches!(self.first_flexible_version(), Some(first) if version >= first)
        }
    }

    unstable! {
        /// The request header version for `version`: 2 when flexible, else 1.
        pub fn request_header_version(self, version: i16) -> i16 {
            if self.is_flexible(version) {
                2
            } else {
                1
            }
        }
    }

    unstable! {
        /// The response header version for `version`: 1 when flexible, else 0.
        ///
        /// ApiVersions responses always use header v0, so that a client can read
        /// them before it knows which versions the broker speaks (KIP-511).
        pub fn response_header_version(self, version: i16) -> i16 {
            if self != ApiKey::ApiVersions && self.is_flexible(version) {
                1
            } else {
                0
            }
        }
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// No version of an API is spoken by both this client and the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoCommonVersion {
    /// The API.
    pub api: ApiKey,
    /// What this client speaks.
    pub client: VersionRange,
    /// What the broker speaks; `None` when it does not list the API at all.
    pub broker: Option<VersionRange>,
}

impl fmt::Display for NoCommonVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.broker {
            Some(broker) => write!(
                f,
                "no common version of {}: this client speaks {}, the broker {}",
                self.api, self.client, broker
            ),
            None => write!(
                f,
                "the broker does not support {} (this client speaks {})",
                self.api, self.client
            ),
        }
    }
}

impl std::error::Error for NoCommonVersion {}

/// The versions negotiated on one connection: for each API both sides know,
/// the highest version both speak.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiVersionTable {
    // Indexed by position in `ApiKey::ALL`; small and fixed, so a plain array.
    chosen: [Option<i16>; ApiKey::ALL.len()],
    broker: [Option<VersionRange>; ApiKey::ALL.len()],
}

impl ApiVersionTable {
    /// Builds the table from the broker's advertised `(api_key, min, max)`
    /// ranges. Keys this client does not know are ignored.
    pub fn negotiate(broker_ranges: impl IntoIterator<Item = (i16, i16, i16)>) -> Self {
        let mut table = ApiVersionTable::default();
        for (code, min, max) in broker_ranges {
            if let Some(api) = ApiKey::from_code(code) {
                let i = Self::index(api);
                let broker = VersionRange::new(min, max);
                table.broker[i] = Some(broker);
                table.chosen[i] = api.client_versions().highest_common(&broker);
            }
        }
        table
    }

    fn index(api: ApiKey) -> usize {
        ApiKey::ALL
            .iter()
            .position(|k| *k == api)
            .expect("every ApiKey is in ApiKey::ALL")
    }

    /// The version to use for `api`, or why there is none.
    pub fn version(&self, api: ApiKey) -> Result<i16, NoCommonVersion> {
        let i = Self::index(api);
        self.chosen[i].ok_or(NoCommonVersion {
            api,
            client: api.client_versions(),
            broker: self.broker[i],
        })
    }

    /// The range the broker advertised for `api`, if any.
    pub fn broker_range(&self, api: ApiKey) -> Option<VersionRange> {
        self.broker[Self::index(api)]
    }

    /// Every API with a negotiated version, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (ApiKey, i16)> + '_ {
        ApiKey::ALL
            .iter()
            .zip(self.chosen.iter())
            .filter_map(|(k, v)| v.map(|v| (*k, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for api in ApiKey::ALL {
            assert_eq!(ApiKey::from_code(api.code()), Some(api));
        }
        assert_eq!(ApiKey::from_code(1000), None);
    }

    #[test]
    fn highest_common_version_is_chosen() {
        let table = ApiVersionTable::negotiate([
            (1, 0, 16),  // Fetch: broker below our ceiling
            (10, 0, 99), // FindCoordinator: broker above our ceiling
            (11, 0, 1),  // JoinGroup: below our floor of 2
            (57, 0, 3),  // an API this client does not know
        ]);
        assert_eq!(table.version(ApiKey::Fetch), Ok(16));
        assert_eq!(table.version(ApiKey::FindCoordinator), Ok(6));
        let err = table.version(ApiKey::JoinGroup).unwrap_err();
        assert_eq!(err.broker, Some(VersionRange::new(0, 1)));
        assert!(err.to_string().contains("JoinGroup"), "{err}");
        let err = table.version(ApiKey::Metadata).unwrap_err();
        assert_eq!(err.broker, None);
        assert!(err.to_string().contains("Metadata"), "{err}");
        assert_eq!(table.iter().count(), 2);
    }

    fn encoded(resp: &ApiVersionsResponse, version: i16) -> Bytes {
        let mut w = crate::protocol::codec::Writer::new();
        resp.encode(&mut w, version).unwrap();
        w.into_inner().freeze()
    }

    fn ranges(list: &[(i16, i16, i16)]) -> ApiVersionsResponse {
        use crate::protocol::messages::api_versions::ApiVersionRange;
        ApiVersionsResponse {
            api_keys: list
                .iter()
                .map(|&(api_key, min_version, max_version)| ApiVersionRange {
                    api_key,
                    min_version,
                    max_version,
                    unknown_tagged_fields: Vec::new(),
                })
                .collect(),
            ..ApiVersionsResponse::default()
        }
    }

    #[test]
    fn exchange_accepts_a_direct_answer() {
        let mut ex = ApiVersionsExchange::new();
        assert_eq!(ex.version(), 4);
        let step = ex
            .handle_response(encoded(&ranges(&[(18, 0, 4), (1, 4, 17)]), 4))
            .unwrap();
        let ExchangeStep::Done(table) = step else {
            panic!("expected Done, got {step:?}")
        };
        assert_eq!(table.version(ApiKey::Fetch), Ok(17));
        assert_eq!(table.version(ApiKey::ApiVersions), Ok(4));
    }

    #[test]
    fn exchange_falls_back_on_unsupported_version() {
        let mut ex = ApiVersionsExchange::new();
        // The broker speaks ApiVersions 0..=2 and answers in v0 with error 35.
        let refusal = ApiVersionsResponse {
            error_code: 35,
            ..ranges(&[(18, 0, 2)])
        };
        assert_eq!(
            ex.handle_response(encoded(&refusal, 0)),
            Ok(ExchangeStep::Retry(2))
        );
        assert_eq!(ex.version(), 2);
        let step = ex
            .handle_response(encoded(&ranges(&[(18, 0, 2), (3, 0, 9)]), 2))
            .unwrap();
        let ExchangeStep::Done(table) = step else {
            panic!("expected Done, got {step:?}")
        };
        assert_eq!(table.version(ApiKey::Metadata), Ok(9));
        assert_eq!(table.version(ApiKey::ApiVersions), Ok(2));
    }

    #[test]
    fn exchange_retries_once_then_gives_up() {
        let mut ex = ApiVersionsExchange::new();
        let refusal = ApiVersionsResponse {
            error_code: 35,
            ..ranges(&[])
        };
        // No range listed: fall back to v0.
        assert_eq!(
            ex.handle_response(encoded(&refusal, 0)),
            Ok(ExchangeStep::Retry(0))
        );
        assert_eq!(
            ex.handle_response(encoded(&refusal, 0)),
            Err(ExchangeError::Broker(
                crate::protocol::ErrorCode::UnsupportedVersion
            ))
        );
        let mut ex = ApiVersionsExchange::new();
        assert!(matches!(
            ex.handle_response(Bytes::from_static(&[0, 0, 0])),
            Err(ExchangeError::Decode(_))
        ));
    }

    // Bytes librdkafka's mock cluster (rdkafka-sys 4.10.0, librdkafka 2.12.1,
    // rdkafka_mock_handlers.c) sent for an ApiVersions v4 request: error 35,
    // a one-byte count, one range (ApiVersions 0..=2) and a throttle time —
    // valid as neither v0 nor v4. Captured with a raw socket.
    const LIBRDKAFKA_MOCK_REFUSAL: &[u8] = &[
        0x00, 0x23, 0x01, 0x00, 0x12, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn exchange_falls_back_to_v0_on_an_unreadable_refusal() {
        let mut ex = ApiVersionsExchange::new();
        assert_eq!(
            ex.handle_response(Bytes::from_static(LIBRDKAFKA_MOCK_REFUSAL)),
            Ok(ExchangeStep::Retry(0))
        );
        // Only once: the same answer again is a decode error.
        assert!(matches!(
            ex.handle_response(Bytes::from_static(LIBRDKAFKA_MOCK_REFUSAL)),
            Err(ExchangeError::Decode(_))
        ));
    }

    // docs/protocol.md repeats the version table for readers; the table is
    // generated from scripts/gen_messages.py, so the page must follow it.
    #[test]
    fn the_documented_version_table_matches_the_generated_one() {
        let page = include_str!("../../docs/protocol.md");
        let mut seen = Vec::new();
        for line in page.lines() {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            // | API | key | versions implemented | schemas define | flexible from | module |
            let [_, name, key, implemented, _, flexible, _, _] = cells[..] else {
                continue;
            };
            let Ok(key) = key.parse::<i16>() else {
                continue;
            };
            let api = ApiKey::from_code(key).unwrap_or_else(|| panic!("{line}"));
            assert_eq!(api.name(), name, "{line}");
            let (min, max) = implemented.split_once('-').expect(line);
            let documented = VersionRange::new(min.parse().unwrap(), max.parse().unwrap());
            assert_eq!(documented, api.client_versions(), "{line}");
            let flexible = (flexible != "never").then(|| flexible.parse::<i16>().unwrap());
            assert_eq!(flexible, api.first_flexible_version(), "{line}");
            seen.push(api);
        }
        seen.sort();
        assert_eq!(seen, ApiKey::ALL.to_vec(), "every API has one row");
    }

    #[test]
    fn header_versions_follow_flexibility() {
        assert_eq!(ApiKey::Fetch.request_header_version(11), 1);
        assert_eq!(ApiKey::Fetch.request_header_version(12), 2);
        assert_eq!(ApiKey::Fetch.response_header_version(12), 1);
        assert_eq!(ApiKey::ApiVersions.request_header_version(3), 2);
        // The exception: ApiVersions responses always carry header v0.
        assert_eq!(ApiKey::ApiVersions.response_header_version(4), 0);
        assert_eq!(ApiKey::SaslHandshake.request_header_version(1), 1);
    }
}

/// The ApiVersions exchange that opens every connection, as a pure state
/// machine: it says which version to send, reads each answer, and ends with
/// the connection's [`ApiVersionTable`].
///
/// It starts at the newest version this client speaks. A broker that does
/// not know that version answers UNSUPPORTED_VERSION (35) encoded as v0,
/// listing its own ApiVersions range (KIP-511); the exchange then retries
/// once with the highest common version, or with v0 when the broker listed
/// none. This is what the Java client's `ApiVersionsResponse.parse` fallback
/// and librdkafka's ApiVersion retry do.
#[derive(Debug, Clone)]
pub struct ApiVersionsExchange {
    version: i16,
    retried: bool,
}

/// What to do after an ApiVersions answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeStep {
    /// Send the request again at this version.
    Retry(i16),
    /// The exchange is over; these are the connection's versions.
    Done(ApiVersionTable),
}

/// The ApiVersions exchange failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeError {
    /// The answer could not be decoded at the version sent nor as v0.
    Decode(DecodeError),
    /// The broker answered with an error other than a version mismatch, or
    /// kept refusing after the retry.
    Broker(crate::protocol::ErrorCode),
}

impl fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExchangeError::Decode(e) => write!(f, "cannot decode ApiVersions response: {e}"),
            ExchangeError::Broker(code) => write!(f, "ApiVersions failed: {code}"),
        }
    }
}

impl std::error::Error for ExchangeError {}

impl Default for ApiVersionsExchange {
    fn default() -> Self {
        ApiVersionsExchange::new()
    }
}

impl ApiVersionsExchange {
    /// Starts at the newest ApiVersions version this client speaks.
    pub fn new() -> Self {
        ApiVersionsExchange {
            version: ApiKey::ApiVersions.client_versions().max,
            retried: false,
        }
    }

    /// The version of the request to send now.
    pub fn version(&self) -> i16 {
        self.version
    }

    /// Reads the body of an ApiVersions response (header already removed).
    pub fn handle_response(&mut self, body: Bytes) -> Result<ExchangeStep, ExchangeError> {
        let response = match decode_api_versions(body.clone(), self.version) {
            Ok(response) => response,
            // The error code leads every version of the body. Some peers
            // (librdkafka's mock among them) answer an unknown version with a
            // body that is neither v0 nor the version asked for; the code
            // alone is enough to fall back to v0, as librdkafka's client does.
            Err(_) if !self.retried && body.get(..2) == Some(&UNSUPPORTED_VERSION_BYTES[..]) => {
                self.version = 0;
                self.retried = true;
                return Ok(ExchangeStep::Retry(0));
            }
            Err(e) => return Err(ExchangeError::Decode(e)),
        };
        let code = crate::protocol::ErrorCode::from_code(response.error_code);
        match code {
            crate::protocol::ErrorCode::None => Ok(ExchangeStep::Done(ApiVersionTable::negotiate(
                response.ranges(),
            ))),
            crate::protocol::ErrorCode::UnsupportedVersion if !self.retried => {
                let listed = response
                    .ranges()
                    .find(|(key, _, _)| *key == ApiKey::ApiVersions.code())
                    .map(|(_, min, max)| VersionRange::new(min, max));
                let next = listed
                    .and_then(|broker| {
                        ApiKey::ApiVersions
                            .client_versions()
                            .highest_common(&broker)
                    })
                    .filter(|v| *v < self.version)
                    .unwrap_or(0);
                self.version = next;
                self.retried = true;
                Ok(ExchangeStep::Retry(next))
            }
            other => Err(ExchangeError::Broker(other)),
        }
    }
}

/// Error 35 (UNSUPPORTED_VERSION) as the two bytes that open a response body.
const UNSUPPORTED_VERSION_BYTES: [u8; 2] = 35i16.to_be_bytes();

/// Decodes an ApiVersions response body sent for `version`, falling back to
/// v0: a broker that does not know `version` answers in v0.
fn decode_api_versions(body: Bytes, version: i16) -> Result<ApiVersionsResponse, DecodeError> {
    let attempt = |v: i16| {
        let mut r = Reader::new(body.clone());
        let resp = ApiVersionsResponse::decode(&mut r, v)?;
        r.finish()?;
        Ok(resp)
    };
    match attempt(version) {
        Ok(resp) => Ok(resp),
        Err(_) if version != 0 => attempt(0),
        Err(e) => Err(e),
    }
}
