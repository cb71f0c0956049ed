//! The connection manager's settings ([`ClusterConfig`]) and their
//! defaults, which are the Java client's.

use super::backoff::ExponentialBackoff;
use crate::protocol::DEFAULT_MAX_FRAME_SIZE;
use std::time::Duration;

/// Settings of the connection manager (a subset of the consumer's).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// `bootstrap.servers`, as `host:port` strings.
    pub bootstrap: Vec<String>,
    /// `client.id`, sent in every request header.
    pub client_id: Option<String>,
    /// `group.id`: when set, the coordinator is looked up.
    pub group_id: Option<String>,
    /// `request.timeout.ms`.
    pub request_timeout: Duration,
    /// `connections.max.idle.ms`; `None` disables idle reaping.
    pub connections_max_idle: Option<Duration>,
    /// `reconnect.backoff.ms` growing to `reconnect.backoff.max.ms`.
    pub reconnect_backoff: ExponentialBackoff,
    /// `socket.connection.setup.timeout.ms` growing to `...max.ms`.
    pub setup_timeout: ExponentialBackoff,
    /// The backoff of an address that refused this client in a way
    /// waiting does not cure (authentication, TLS, protocol; see
    /// [`ConnectionError::is_refusal`](crate::events::ConnectionError::is_refusal)): much longer than the reconnect
    /// backoff. By default `reconnect.backoff.max.ms` (at least 1 s)
    /// doubling to 30 s.
    pub refusal_backoff: ExponentialBackoff,
    /// `retry.backoff.ms` growing to `retry.backoff.max.ms`: between
    /// Metadata or FindCoordinator retries.
    pub retry_backoff: ExponentialBackoff,
    /// `metadata.max.age.ms`.
    pub metadata_max_age: Duration,
    /// `metadata.recovery.strategy=rebootstrap` (KIP-899) with its
    /// `metadata.recovery.rebootstrap.trigger.ms` (KIP-1102): the
    /// bootstrap addresses are asked again when no known broker can be
    /// reached, on REBOOTSTRAP_REQUIRED, or when metadata was wanted this
    /// long without an answer. `None` (`none`): once the cluster is known,
    /// only the brokers of the last metadata are asked.
    pub rebootstrap: Option<Duration>,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight: usize,
    /// The largest response frame accepted.
    pub max_frame_size: usize,
    /// `allow.auto.create.topics`, sent in Metadata requests.
    pub allow_auto_create_topics: bool,
    /// SASL authentication of every connection (`SASL_PLAINTEXT`,
    /// `SASL_SSL`); `None` for none.
    pub sasl: Option<crate::sasl::SaslConfig>,
    /// Fills a buffer with random bytes, for SCRAM client nonces
    /// ([`os_random`](crate::sasl::os_random) by default; tests pass their
    /// own).
    pub random_bytes: fn(&mut [u8]),
}

impl ClusterConfig {
    /// The Java client's defaults for `bootstrap`.
    pub fn new(bootstrap: impl IntoIterator<Item = impl Into<String>>) -> Self {
        ClusterConfig {
            bootstrap: bootstrap.into_iter().map(Into::into).collect(),
            client_id: Some(env!("CARGO_PKG_NAME").to_owned()),
            group_id: None,
            request_timeout: Duration::from_millis(30_000),
            connections_max_idle: Some(Duration::from_millis(540_000)),
            reconnect_backoff: ExponentialBackoff {
                base: Duration::from_millis(50),
                max: Duration::from_millis(1000),
                jitter: 0.2,
            },
            setup_timeout: ExponentialBackoff {
                base: Duration::from_millis(10_000),
                max: Duration::from_millis(30_000),
                jitter: 0.2,
            },
            refusal_backoff: ExponentialBackoff {
                base: Duration::from_millis(1000),
                max: REFUSAL_BACKOFF_MAX,
                jitter: 0.2,
            },
            retry_backoff: ExponentialBackoff {
                base: Duration::from_millis(100),
                max: Duration::from_millis(1000),
                jitter: 0.2,
            },
            metadata_max_age: Duration::from_millis(300_000),
            rebootstrap: Some(Duration::from_millis(300_000)),
            max_in_flight: 5,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            allow_auto_create_topics: true,
            sasl: None,
            random_bytes: crate::sasl::os_random,
        }
    }
}

/// The longest wait between two attempts at an address that keeps refusing
/// this client (authentication, TLS, protocol failures).
pub const REFUSAL_BACKOFF_MAX: Duration = Duration::from_secs(30);
