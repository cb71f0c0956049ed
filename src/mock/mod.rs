//! An in-process Kafka cluster for tests, examples and benchmarks.
//!
#![doc = include_str!("../../docs/mock-cluster.md")]

mod api;
mod certs;
mod consumer_group;
mod fetch_session;
pub(crate) mod group;
mod log;
mod producers;
pub(crate) mod respond;
pub(crate) mod sasl;
mod server;
pub(crate) mod state;
mod topic;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

pub use certs::TestCertificates;
pub use fetch_session::MockFetchSession;
pub use group::{GroupSnapshot, GroupState, MemberSnapshot};
pub use sasl::MockSasl;

use crate::error::ErrorCode;
use crate::protocol::{ApiKey, VersionRange};
use crate::records::{Compression, RecordBatchBuilder, RecordsError};
use group::GroupSettings;
use server::{Listener, Shared};
use state::State;

/// A record to produce into the mock from code.
#[derive(Debug, Clone, Default)]
pub struct MockRecord {
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<(Bytes, Option<Bytes>)>,
    timestamp: Option<i64>,
}

impl MockRecord {
    /// A record with `value`, no key, no headers, timestamped when produced.
    pub fn new(value: impl Into<Bytes>) -> Self {
        MockRecord {
            value: Some(value.into()),
            ..Default::default()
        }
    }

    /// A record with a key and a null value (a tombstone).
    pub fn tombstone(key: impl Into<Bytes>) -> Self {
        MockRecord {
            key: Some(key.into()),
            ..Default::default()
        }
    }

    /// Sets the key.
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Adds a header.
    pub fn header(mut self, key: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        self.headers.push((key.into(), Some(value.into())));
        self
    }

    /// Sets the timestamp (milliseconds since the Unix epoch; by default the
    /// time of the `produce` call).
    pub fn timestamp(mut self, millis: i64) -> Self {
        self.timestamp = Some(millis);
        self
    }
}

/// Why the mock refused an operation.
#[derive(Debug)]
#[non_exhaustive]
pub enum MockError {
    /// No topic of that name.
    UnknownTopic(String),
    /// The topic has no such partition.
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
    },
    /// No broker with that id.
    UnknownBroker(i32),
    /// The cluster refused it with this Kafka error (e.g.
    /// `TOPIC_ALREADY_EXISTS`).
    Refused(ErrorCode),
    /// The records could not be encoded.
    Records(RecordsError),
    /// A socket could not be bound.
    Io(std::io::Error),
    /// The certificate or key given to [`MockClusterBuilder::tls`] cannot
    /// be used.
    Tls(String),
}

impl fmt::Display for MockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MockError::UnknownTopic(t) => write!(f, "mock cluster: no topic {t:?}"),
            MockError::UnknownPartition { topic, partition } => {
                write!(
                    f,
                    "mock cluster: topic {topic:?} has no partition {partition}"
                )
            }
            MockError::UnknownBroker(b) => write!(f, "mock cluster: no broker {b}"),
            MockError::Refused(code) => write!(f, "mock cluster: refused with {}", code.name()),
            MockError::Records(e) => write!(f, "mock cluster: records: {e}"),
            MockError::Io(e) => write!(f, "mock cluster: {e}"),
            MockError::Tls(e) => write!(f, "mock cluster: TLS: {e}"),
        }
    }
}

impl std::error::Error for MockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MockError::Records(e) => Some(e),
            MockError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for MockError {
    fn from(e: std::io::Error) -> Self {
        MockError::Io(e)
    }
}

/// Something a broker of the mock saw.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockEvent {
    /// When, from the cluster's start.
    pub at: Duration,
    /// The broker id.
    pub broker: i32,
    /// What happened.
    pub kind: MockEventKind,
}

/// What a broker saw.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MockEventKind {
    /// A client connected.
    Connected {
        /// The connection's id (unique in the cluster, from 1).
        connection: u64,
        /// The client's address.
        peer: SocketAddr,
    },
    /// A request arrived (logged before it is answered).
    Request {
        /// The connection it came on.
        connection: u64,
        /// The raw API key.
        api_key: i16,
        /// The API version.
        api_version: i16,
        /// The request's correlation id.
        correlation_id: i32,
        /// The client id from the request header.
        client_id: Option<String>,
    },
    /// A connection authenticated with SASL (or renewed its session,
    /// KIP-368).
    Authenticated {
        /// The connection.
        connection: u64,
        /// The mechanism.
        mechanism: crate::sasl::Mechanism,
        /// Who it authenticated as.
        principal: String,
    },
    /// A connection closed.
    Closed {
        /// The connection.
        connection: u64,
        /// Which side closed it, and why.
        by: ClosedBy,
    },
}

/// Which side closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClosedBy {
    /// The client closed it (EOF or reset seen by the broker).
    Client,
    /// The broker closed it.
    Broker(BrokerClose),
}

/// Why the broker closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BrokerClose {
    /// Silent longer than the broker's idle timeout
    /// ([`MockCluster::set_idle_timeout`]).
    Idle,
    /// The broker went down ([`MockCluster::broker_down`]).
    Down,
    /// [`MockCluster::close_connections`] closed it.
    Closed,
    /// A request could not be read, or named an API or version the broker
    /// does not serve (Kafka closes the connection then).
    BadRequest,
    /// The cluster was dropped.
    Shutdown,
    /// SASL is on and a request other than ApiVersions, SaslHandshake or
    /// SaslAuthenticate came before the connection authenticated (Kafka
    /// closes the connection then).
    Unauthenticated,
    /// SASL authentication failed: the broker sent its refusal
    /// (UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED) and closed
    /// the connection, as Kafka does.
    AuthenticationFailed,
    /// A request came after the connection's SASL session ended without a
    /// re-authentication (KIP-368).
    SessionExpired,
    /// A request took effect and the broker closed the connection instead
    /// of answering it ([`MockCluster::push_lost_answers`] with
    /// [`LostAnswer::Close`]).
    AnswerLost,
}

/// How the answer to a request that took effect is lost
/// ([`MockCluster::push_lost_answers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostAnswer {
    /// The broker closes the connection instead of answering
    /// ([`BrokerClose::AnswerLost`]): the client sees its connection end
    /// with the request outstanding, as when a broker's answer is lost
    /// with its connection.
    Close,
    /// The answer is never sent; the connection stays open and later
    /// requests on it are answered: the client's request times out.
    Unanswered,
}

/// A request as logged, with the API resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockRequest {
    /// When, from the cluster's start.
    pub at: Duration,
    /// The broker that got it.
    pub broker: i32,
    /// The connection it came on.
    pub connection: u64,
    /// The API (`None` for a key this crate does not know).
    pub api: Option<ApiKey>,
    /// The API version.
    pub version: i16,
}

/// A Fetch request and its answer, as recorded once
/// [`MockCluster::record_fetches`] is on. Topics are named even where the
/// request named them by id (v13+; an empty name for an unknown id).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockFetch {
    /// When it was answered, from the cluster's start.
    pub at: Duration,
    /// The broker that got it.
    pub broker: i32,
    /// The connection it came on.
    pub connection: u64,
    /// The Fetch version.
    pub version: i16,
    /// The request's size in bytes, with its size prefix.
    pub size: usize,
    /// The request's `session_id` (KIP-227; 0: none).
    pub session_id: i32,
    /// The request's `session_epoch`: 0 asks for a new session, -1 for
    /// none, anything else continues the session (an incremental Fetch).
    pub session_epoch: i32,
    /// The partitions the request listed, as `(topic, partition)`.
    pub listed: Vec<(String, i32)>,
    /// The partitions it asked to forget (`forgotten_topics_data`).
    pub forgotten: Vec<(String, i32)>,
    /// The answer's top-level error.
    pub error: ErrorCode,
    /// The answer's `session_id`: the session made or continued, 0 for none.
    pub response_session_id: i32,
    /// The bytes of records in the answer.
    pub record_bytes: usize,
    /// The partitions the answer named a preferred read replica for
    /// (KIP-392), as `(topic, partition, broker)`.
    pub preferred_read_replicas: Vec<(String, i32, i32)>,
    /// The partitions in the answer.
    pub answered: Vec<(String, i32)>,
}

/// Settings fixed when a cluster starts.
#[derive(Debug, Clone)]
pub struct MockClusterBuilder {
    sasl: Option<MockSasl>,
    brokers: i32,
    initial_rebalance_delay: Duration,
    min_session_timeout: Duration,
    max_session_timeout: Duration,
    tls: Option<MockTls>,
    racks: BTreeMap<i32, String>,
}

/// A certificate and key for the mock's TLS listeners (PEM).
#[derive(Clone)]
struct MockTls {
    cert_chain_pem: String,
    key_pem: String,
}

impl fmt::Debug for MockTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key is a secret even in a test.
        f.debug_struct("MockTls").finish_non_exhaustive()
    }
}

impl MockTls {
    fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, MockError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let chain = CertificateDer::pem_slice_iter(self.cert_chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| MockError::Tls(format!("certificate chain: {e}")))?;
        if chain.is_empty() {
            return Err(MockError::Tls("no PEM certificate given".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|_| MockError::Tls("no PEM private key given".into()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| MockError::Tls(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| MockError::Tls(e.to_string()))?;
        Ok(Arc::new(config))
    }
}

impl MockClusterBuilder {
    /// Every broker listens with TLS (Kafka's `SSL` listener), presenting
    /// `cert_chain_pem` (the broker's certificate first, then any
    /// intermediates) and proving it with `key_pem` (PKCS#8, PKCS#1 or
    /// SEC1). Clients connect with `security.protocol=SSL` and a CA that
    /// signed the certificate; the addresses in
    /// [`MockCluster::bootstrap_servers`] are `127.0.0.1`, so the
    /// certificate should name that IP address (or clients dial
    /// `localhost` with a certificate for it, or skip the name check).
    /// Client certificates are not asked for.
    pub fn tls(mut self, cert_chain_pem: impl Into<String>, key_pem: impl Into<String>) -> Self {
        self.tls = Some(MockTls {
            cert_chain_pem: cert_chain_pem.into(),
            key_pem: key_pem.into(),
        });
        self
    }

    /// The number of brokers (ids 1..=n; at least 1).
    pub fn brokers(mut self, n: i32) -> Self {
        self.brokers = n;
        self
    }

    /// Puts `broker` in `rack` (Kafka's `broker.rack`): Metadata reports
    /// it, and a leader whose client sends a RackId (Fetch v11+,
    /// `client.rack`) names a follower in that rack as the preferred read
    /// replica (KIP-392; see [`MockCluster::set_followers`]). Brokers have
    /// no rack by default. [`build`](Self::build) fails with
    /// [`MockError::UnknownBroker`] for an id outside 1..=n.
    ///
    /// ```
    /// use lazykafka::mock::MockCluster;
    ///
    /// let cluster = MockCluster::builder()
    ///     .brokers(3)
    ///     .rack(1, "eu-west-1a")
    ///     .rack(2, "eu-west-1b")
    ///     .rack(3, "eu-west-1c")
    ///     .build()?;
    /// cluster.create_topic_with_leaders("orders", &[1])?;
    /// // Brokers 2 and 3 replicate it: a consumer with
    /// // client.rack=eu-west-1b reads it from broker 2.
    /// cluster.set_followers("orders", 0, &[2, 3])?;
    /// assert_eq!(cluster.rack(2).as_deref(), Some("eu-west-1b"));
    /// # Ok::<(), lazykafka::mock::MockError>(())
    /// ```
    pub fn rack(mut self, broker: i32, rack: impl Into<String>) -> Self {
        self.racks.insert(broker, rack.into());
        self
    }

    /// How long the first rebalance of an empty group waits for more
    /// members (Kafka's `group.initial.rebalance.delay.ms`, 3 s there; 0
    /// here by default so tests do not wait).
    pub fn initial_rebalance_delay(mut self, delay: Duration) -> Self {
        self.initial_rebalance_delay = delay;
        self
    }

    /// The session timeouts members may ask for (Kafka's
    /// `group.min.session.timeout.ms` and `group.max.session.timeout.ms`;
    /// 100 ms to 30 min by default).
    pub fn session_timeout_bounds(mut self, min: Duration, max: Duration) -> Self {
        self.min_session_timeout = min;
        self.max_session_timeout = max;
        self
    }

    /// Turns SASL on for every broker (as `SASL_PLAINTEXT` listeners, or
    /// `SASL_SSL` ones with [`MockClusterBuilder::tls`] too): a client
    /// must authenticate with one of the enabled mechanisms before any
    /// request but ApiVersions is served. See [`MockSasl`].
    pub fn sasl(mut self, sasl: MockSasl) -> Self {
        self.sasl = Some(sasl);
        self
    }

    /// Binds the brokers and starts serving.
    pub fn build(self) -> Result<MockCluster, MockError> {
        let tls = self.tls.as_ref().map(MockTls::server_config).transpose()?;
        let n = self.brokers.max(1);
        if let Some(&id) = self.racks.keys().find(|id| !(1..=n).contains(*id)) {
            return Err(MockError::UnknownBroker(id));
        }
        let mut sockets = Vec::new();
        let mut addrs = BTreeMap::new();
        for id in 1..=n {
            let listener = TcpListener::bind(("127.0.0.1", 0))?;
            addrs.insert(id, listener.local_addr()?);
            sockets.push((id, listener));
        }
        let settings = GroupSettings {
            initial_rebalance_delay: self.initial_rebalance_delay,
            min_session_timeout: self.min_session_timeout,
            max_session_timeout: self.max_session_timeout,
        };
        let mut state = State::new(Instant::now(), addrs, settings);
        state.sasl = self.sasl.map(sasl::SaslState::new);
        for (id, rack) in self.racks {
            if let Some(b) = state.brokers.get_mut(&id) {
                b.rack = Some(rack);
            }
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            changed: Condvar::new(),
            conns: Mutex::new(HashMap::new()),
            tls,
        });
        let mut listeners = HashMap::new();
        for (id, listener) in sockets {
            listeners.insert(id, Listener::start(shared.clone(), id, listener)?);
        }
        let timer_shared = shared.clone();
        let timer = std::thread::Builder::new()
            .name("mock-group-timer".into())
            .spawn(move || server::run_timer(timer_shared))?;
        Ok(MockCluster {
            shared,
            listeners: Mutex::new(listeners),
            held: Mutex::new(HashMap::new()),
            timer: Some(timer),
        })
    }
}

/// A Kafka cluster in this process. See the [module docs](self).
///
/// Dropping it closes every connection and stops every thread it started.
pub struct MockCluster {
    shared: Arc<Shared>,
    listeners: Mutex<HashMap<i32, Listener>>,
    /// The ports of the brokers that are down, each held by a socket that
    /// is bound and does not listen: connecting is refused, as to a
    /// stopped broker, and no other socket (another cluster, another test
    /// process) can take the port before the broker comes back on it.
    held: Mutex<HashMap<i32, socket2::Socket>>,
    timer: Option<JoinHandle<()>>,
}

impl fmt::Debug for MockCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockCluster")
            .field("bootstrap_servers", &self.bootstrap_servers())
            .finish_non_exhaustive()
    }
}

impl MockCluster {
    /// A cluster of `brokers` brokers (ids 1..=n) with default settings.
    pub fn new(brokers: i32) -> Result<MockCluster, MockError> {
        Self::builder().brokers(brokers).build()
    }

    /// Settings for a cluster: one broker, no initial rebalance delay.
    pub fn builder() -> MockClusterBuilder {
        MockClusterBuilder {
            sasl: None,
            brokers: 1,
            initial_rebalance_delay: Duration::ZERO,
            min_session_timeout: Duration::from_millis(100),
            max_session_timeout: Duration::from_secs(30 * 60),
            tls: None,
            racks: BTreeMap::new(),
        }
    }

    /// `host:port` of every broker, comma-separated, for
    /// `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> String {
        let st = self.shared.lock();
        let addrs: Vec<String> = st.brokers.values().map(|b| b.addr.to_string()).collect();
        addrs.join(",")
    }

    /// When the cluster started: the zero of every [`MockEvent::at`] and
    /// [`MockRequest::at`].
    pub fn started(&self) -> Instant {
        self.shared.lock().started
    }

    /// The broker ids.
    pub fn broker_ids(&self) -> Vec<i32> {
        self.shared.lock().brokers.keys().copied().collect()
    }

    /// The address a broker listens on.
    pub fn broker_addr(&self, broker: i32) -> Option<SocketAddr> {
        self.shared.lock().brokers.get(&broker).map(|b| b.addr)
    }

    /// The broker whose address is `addr`.
    pub fn broker_at(&self, addr: SocketAddr) -> Option<i32> {
        let st = self.shared.lock();
        st.brokers
            .iter()
            .find(|(_, b)| b.addr == addr)
            .map(|(&id, _)| id)
    }

    fn change<T>(
        &self,
        f: impl FnOnce(&mut State) -> Result<T, MockError>,
    ) -> Result<T, MockError> {
        let out = f(&mut self.shared.lock());
        self.shared.changed.notify_all();
        out
    }

    /// Creates a topic of `partitions` partitions, leaders spread over the
    /// brokers.
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), MockError> {
        self.change(|st| {
            st.create_topic(topic, partitions, None)
                .map_err(MockError::Refused)
        })
    }

    /// Creates a topic with one partition per entry of `leaders`, led by
    /// that broker.
    pub fn create_topic_with_leaders(&self, topic: &str, leaders: &[i32]) -> Result<(), MockError> {
        self.change(|st| {
            st.create_topic(topic, leaders.len() as i32, Some(leaders))
                .map_err(MockError::Refused)
        })
    }

    /// Topics a Metadata request names get created on demand with this many
    /// partitions (when the client allows it); `None`, the default,
    /// answers `UNKNOWN_TOPIC_OR_PARTITION` instead.
    pub fn set_auto_create_topics(&self, partitions: Option<i32>) {
        let _ = self.change(|st| {
            st.auto_create_partitions = partitions;
            Ok(())
        });
    }

    fn with_partition<T>(
        &self,
        topic: &str,
        partition: i32,
        f: impl FnOnce(&mut state::Partition) -> Result<T, MockError>,
    ) -> Result<T, MockError> {
        self.change(|st| {
            let t = st
                .topics
                .get_mut(topic)
                .ok_or_else(|| MockError::UnknownTopic(topic.into()))?;
            let p = usize::try_from(partition)
                .ok()
                .and_then(|i| t.partitions.get_mut(i))
                .ok_or_else(|| MockError::UnknownPartition {
                    topic: topic.into(),
                    partition,
                })?;
            f(p)
        })
    }

    /// Moves a partition's leadership to `broker`; its leader epoch grows.
    /// A follower that becomes the leader swaps places with the old
    /// leader, which stays a follower.
    pub fn set_leader(&self, topic: &str, partition: i32, broker: i32) -> Result<(), MockError> {
        if self.broker_addr(broker).is_none() {
            return Err(MockError::UnknownBroker(broker));
        }
        self.with_partition(topic, partition, |p| {
            if let Some(f) = p.followers.iter_mut().find(|f| **f == broker) {
                *f = p.leader;
            }
            p.leader = broker;
            p.bump_epoch();
            Ok(())
        })
    }

    /// Makes `followers` replicate a partition besides its leader (by
    /// default none does: replication factor 1). Followers share the
    /// leader's log, so they are always in sync: Metadata lists them as
    /// replicas (in the ISR while up, offline while down), and they serve
    /// Fetch from consumers (KIP-392; ListOffsets and OffsetForLeaderEpoch
    /// stay the leader's). A leader names a follower in a fetching
    /// client's rack as the preferred read replica (see
    /// [`MockClusterBuilder::rack`]); to make one answer errors, use
    /// [`MockCluster::push_broker_errors`] with [`ApiKey::Fetch`]. The
    /// leader itself in `followers` is ignored; an unknown broker is
    /// [`MockError::UnknownBroker`].
    pub fn set_followers(
        &self,
        topic: &str,
        partition: i32,
        followers: &[i32],
    ) -> Result<(), MockError> {
        if let Some(&b) = followers.iter().find(|b| self.broker_addr(**b).is_none()) {
            return Err(MockError::UnknownBroker(b));
        }
        self.with_partition(topic, partition, |p| {
            let mut set: Vec<i32> = followers
                .iter()
                .copied()
                .filter(|&b| b != p.leader)
                .collect();
            set.sort_unstable();
            set.dedup();
            p.followers = set;
            Ok(())
        })
    }

    /// The followers of a partition (see [`MockCluster::set_followers`]).
    pub fn followers(&self, topic: &str, partition: i32) -> Option<Vec<i32>> {
        self.with_partition(topic, partition, |p| Ok(p.followers.clone()))
            .ok()
    }

    /// A broker's rack (see [`MockClusterBuilder::rack`]).
    pub fn rack(&self, broker: i32) -> Option<String> {
        self.shared
            .lock()
            .brokers
            .get(&broker)
            .and_then(|b| b.rack.clone())
    }

    /// Moves a partition's leadership to `broker`, whose copy of the log
    /// ends at `end_offset`: the records from there on never reached it
    /// and are gone (an unclean election, the case KIP-320 detects). The
    /// log is cut at the batch boundary at or below `end_offset`, the
    /// leader epoch grows, and the new epoch starts at the cut, so
    /// OffsetForLeaderEpoch and Fetch (`diverging_epoch`, v12+) tell a
    /// consumer past it where the log diverges. Returns the new log end.
    pub fn set_leader_truncated(
        &self,
        topic: &str,
        partition: i32,
        broker: i32,
        end_offset: i64,
    ) -> Result<i64, MockError> {
        if self.broker_addr(broker).is_none() {
            return Err(MockError::UnknownBroker(broker));
        }
        self.with_partition(topic, partition, |p| {
            if let Some(f) = p.followers.iter_mut().find(|f| **f == broker) {
                *f = p.leader;
            }
            p.leader = broker;
            Ok(p.truncate_to(end_offset))
        })
    }

    /// A partition's leader epoch.
    pub fn leader_epoch(&self, topic: &str, partition: i32) -> Option<i32> {
        self.with_partition(topic, partition, |p| Ok(p.leader_epoch))
            .ok()
    }

    /// The broker leading a partition (whether up or not).
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.with_partition(topic, partition, |p| Ok(p.leader)).ok()
    }

    /// Makes `broker` coordinate `group` (moving it if it was elsewhere:
    /// members get `NOT_COORDINATOR` from the old one).
    pub fn set_coordinator(&self, group: &str, broker: i32) -> Result<(), MockError> {
        self.change(|st| {
            if !st.brokers.contains_key(&broker) {
                return Err(MockError::UnknownBroker(broker));
            }
            st.coordinators.insert(group.to_owned(), broker);
            Ok(())
        })
    }

    /// The heartbeat interval and session timeout of consumer groups of
    /// the KIP-848 protocol (Kafka's `group.consumer.heartbeat.interval.ms`
    /// and `group.consumer.session.timeout.ms`; defaults 5 s and 45 s).
    pub fn set_consumer_group_timing(
        &self,
        heartbeat_interval: Duration,
        session_timeout: Duration,
    ) {
        let mut st = self.shared.lock();
        st.consumer_groups.heartbeat_interval = heartbeat_interval;
        st.consumer_groups.session_timeout = session_timeout;
    }

    /// The least time between two resolutions of a consumer group's
    /// regex subscriptions (KIP-848 SubscribedTopicRegex) for topics
    /// created since the last one: Kafka 4.0 waits 10 s (the default here),
    /// 4.1 `group.consumer.regex.refresh.interval.ms` (10 minutes by
    /// default). A regex no member had before is resolved at once.
    pub fn set_consumer_group_regex_refresh(&self, interval: Duration) {
        self.shared.lock().consumer_groups.regex_refresh_interval = interval;
    }

    /// The broker coordinating `group`.
    pub fn coordinator(&self, group: &str) -> i32 {
        self.shared.lock().coordinator(group)
    }

    /// Appends `records` to a partition as one uncompressed batch; returns
    /// the offset of the first.
    pub fn produce(
        &self,
        topic: &str,
        partition: i32,
        records: impl IntoIterator<Item = MockRecord>,
    ) -> Result<i64, MockError> {
        self.produce_compressed(topic, partition, Compression::None, records)
    }

    /// Appends `records` to a partition as one batch compressed with
    /// `compression`; returns the offset of the first.
    pub fn produce_compressed(
        &self,
        topic: &str,
        partition: i32,
        compression: Compression,
        records: impl IntoIterator<Item = MockRecord>,
    ) -> Result<i64, MockError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut builder = RecordBatchBuilder::new(0).compression(compression);
        for r in records {
            let headers: Vec<_> = r
                .headers
                .iter()
                .map(|(k, v)| (&k[..], v.as_deref()))
                .collect();
            builder
                .append(
                    r.timestamp.unwrap_or(now),
                    r.key.as_deref(),
                    r.value.as_deref(),
                    &headers,
                )
                .map_err(MockError::Records)?;
        }
        if builder.is_empty() {
            return self.high_watermark(topic, partition).ok_or_else(|| {
                MockError::UnknownPartition {
                    topic: topic.into(),
                    partition,
                }
            });
        }
        let batch = builder.build().map_err(MockError::Records)?;
        self.with_partition(topic, partition, |p| {
            p.log
                .append(&batch, p.leader_epoch)
                .map_err(|_| MockError::Refused(ErrorCode::CorruptMessage))
        })
    }

    /// The offset the next record of a partition gets.
    pub fn high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        self.with_partition(topic, partition, |p| Ok(p.log.high_watermark()))
            .ok()
    }

    /// The first offset a partition still holds.
    pub fn log_start_offset(&self, topic: &str, partition: i32) -> Option<i64> {
        self.with_partition(topic, partition, |p| Ok(p.log.log_start_offset()))
            .ok()
    }

    /// Drops a partition's records below `offset`, as retention would.
    pub fn delete_records_before(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<(), MockError> {
        self.with_partition(topic, partition, |p| {
            p.log.truncate_before(offset);
            Ok(())
        })
    }

    /// Takes a broker down: it stops listening (connects are refused; its
    /// port stays held, so nothing else takes it meanwhile), its
    /// connections are closed, and the partitions it leads have no leader
    /// (`LEADER_NOT_AVAILABLE` in Metadata) until it is up again.
    pub fn broker_down(&self, broker: i32) -> Result<(), MockError> {
        self.change(|st| {
            let b = st
                .brokers
                .get_mut(&broker)
                .ok_or(MockError::UnknownBroker(broker))?;
            b.up = false;
            Ok(())
        })?;
        if let Some(mut l) = self.listeners().remove(&broker) {
            l.stop();
            if let Some(addr) = self.broker_addr(broker) {
                match hold(addr) {
                    Ok(socket) => {
                        self.held_ports().insert(broker, socket);
                    }
                    // Taken already: `broker_up` says so.
                    Err(e) => ::log::debug!("mock broker {broker}: cannot hold {addr}: {e}"),
                }
            }
        }
        self.shared
            .close_connections(BrokerClose::Down, |_, c| c.broker == broker);
        Ok(())
    }

    /// Brings a broker back on its old address; the partitions it leads get
    /// a new leader epoch.
    pub fn broker_up(&self, broker: i32) -> Result<(), MockError> {
        let addr = self
            .broker_addr(broker)
            .ok_or(MockError::UnknownBroker(broker))?;
        let mut listeners = self.listeners();
        if listeners.contains_key(&broker) {
            return Ok(());
        }
        let listener = match self.held_ports().remove(&broker) {
            Some(socket) => {
                socket.listen(128)?;
                TcpListener::from(socket)
            }
            None => TcpListener::bind(addr)?,
        };
        self.change(|st| {
            st.brokers.get_mut(&broker).expect("checked").up = true;
            for t in st.topics.values_mut() {
                for p in t.partitions.iter_mut().filter(|p| p.leader == broker) {
                    p.bump_epoch();
                }
            }
            Ok(())
        })?;
        listeners.insert(
            broker,
            Listener::start(self.shared.clone(), broker, listener)?,
        );
        Ok(())
    }

    fn listeners(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Listener>> {
        self.listeners.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn held_ports(&self) -> std::sync::MutexGuard<'_, HashMap<i32, socket2::Socket>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers the next `errors.len()` requests of `api`, on any broker,
    /// with these errors in turn (where the response has per-partition
    /// errors, every partition gets it). Nothing else of those requests
    /// takes effect.
    pub fn push_errors(&self, api: ApiKey, errors: &[ErrorCode]) {
        let _ = self.change(|st| {
            st.errors
                .entry(api.code())
                .or_default()
                .extend(errors.iter().copied());
            Ok(())
        });
    }

    /// Forgets the errors pushed with [`MockCluster::push_errors`] for
    /// `api` that no request got yet.
    pub fn clear_errors(&self, api: ApiKey) {
        let _ = self.change(|st| {
            st.errors.remove(&api.code());
            Ok(())
        });
    }

    /// Like [`MockCluster::push_errors`], for requests to one broker only.
    pub fn push_broker_errors(
        &self,
        broker: i32,
        api: ApiKey,
        errors: &[ErrorCode],
    ) -> Result<(), MockError> {
        self.change(|st| {
            st.brokers
                .get_mut(&broker)
                .ok_or(MockError::UnknownBroker(broker))?
                .errors
                .entry(api.code())
                .or_default()
                .extend(errors.iter().copied());
            Ok(())
        })
    }

    /// Loses the answers of the next `lost.len()` requests of `api`, on any
    /// broker, in turn: each request takes full effect (a Produce is
    /// appended, an InitProducerId gives its producer id), then its answer
    /// is lost as the [`LostAnswer`] says. What a client sees when a broker
    /// did its work but the answer never came: a retry must not do it
    /// twice (an idempotent producer's retried batch is a duplicate, see
    /// [idempotent producers](crate::mock#idempotent-producers)). Requests
    /// the broker refuses by closing the connection (a version it does not
    /// serve, an unauthenticated request) do not count.
    pub fn push_lost_answers(&self, api: ApiKey, lost: &[LostAnswer]) {
        let _ = self.change(|st| {
            st.lost_answers
                .entry(api.code())
                .or_default()
                .extend(lost.iter().copied());
            Ok(())
        });
    }

    /// How many answers of `api` are still to be lost
    /// ([`MockCluster::push_lost_answers`]).
    pub fn pending_lost_answers(&self, api: ApiKey) -> usize {
        self.shared
            .lock()
            .lost_answers
            .get(&api.code())
            .map_or(0, |q| q.len())
    }

    /// How many injected errors for `api` are still to be served (cluster
    /// and per-broker queues together).
    pub fn pending_errors(&self, api: ApiKey) -> usize {
        let st = self.shared.lock();
        let cluster = st.errors.get(&api.code()).map_or(0, |q| q.len());
        let brokers: usize = st
            .brokers
            .values()
            .filter_map(|b| b.errors.get(&api.code()))
            .map(|q| q.len())
            .sum();
        cluster + brokers
    }

    /// Delays every answer of `broker` by `delay` (a slow broker or a long
    /// round trip).
    pub fn set_delay(&self, broker: i32, delay: Duration) -> Result<(), MockError> {
        self.change(|st| {
            st.brokers
                .get_mut(&broker)
                .ok_or(MockError::UnknownBroker(broker))?
                .delay = delay;
            Ok(())
        })
    }

    /// Makes `broker` close connections silent for `timeout` (Kafka's
    /// broker-side `connections.max.idle.ms`); `None` keeps them open.
    pub fn set_idle_timeout(
        &self,
        broker: i32,
        timeout: Option<Duration>,
    ) -> Result<(), MockError> {
        self.change(|st| {
            st.brokers
                .get_mut(&broker)
                .ok_or(MockError::UnknownBroker(broker))?
                .idle_timeout = timeout;
            Ok(())
        })
    }

    /// Closes every open connection of `broker`, or of every broker with
    /// `None`, from the broker's side. The brokers keep listening.
    pub fn close_connections(&self, broker: Option<i32>) {
        self.shared.close_connections(BrokerClose::Closed, |_, c| {
            broker.is_none_or(|b| b == c.broker)
        });
    }

    /// Serves `api` only at versions `min..=max` (ApiVersions says so and
    /// other versions close the connection, as Kafka does).
    pub fn set_api_versions(&self, api: ApiKey, min: i16, max: i16) {
        let _ = self.change(|st| {
            st.versions.insert(api.code(), VersionRange::new(min, max));
            Ok(())
        });
    }

    /// Everything the brokers saw, in order.
    pub fn events(&self) -> Vec<MockEvent> {
        self.shared.lock().events.clone()
    }

    /// Forgets the events so far.
    pub fn clear_events(&self) {
        self.shared.lock().events.clear();
    }

    /// The requests the brokers received, in order.
    pub fn requests(&self) -> Vec<MockRequest> {
        self.shared
            .lock()
            .events
            .iter()
            .filter_map(|e| match e.kind {
                MockEventKind::Request {
                    connection,
                    api_key,
                    api_version,
                    ..
                } => Some(MockRequest {
                    at: e.at,
                    broker: e.broker,
                    connection,
                    api: ApiKey::from_code(api_key),
                    version: api_version,
                }),
                _ => None,
            })
            .collect()
    }

    /// Changes the SASL session lifetime given to the next
    /// authentications (KIP-368; `None`: sessions do not end). No effect
    /// on a cluster built without [`MockClusterBuilder::sasl`].
    pub fn set_sasl_session_lifetime(&self, lifetime: Option<Duration>) {
        if let Some(sasl) = self.shared.lock().sasl.as_mut() {
            sasl.session_lifetime = lifetime;
        }
    }

    /// The connections open now, as `(connection id, broker)`.
    pub fn open_connections(&self) -> Vec<(u64, i32)> {
        let conns = self.shared.conns.lock().unwrap_or_else(|e| e.into_inner());
        let mut open: Vec<(u64, i32)> = conns.iter().map(|(&id, c)| (id, c.broker)).collect();
        open.sort_unstable();
        open
    }

    /// Sets every broker's fetch session cache (KIP-227): at most `slots`
    /// sessions (Kafka's `max.incremental.fetch.session.cache.slots`,
    /// 1000 by default; 0 keeps none, so every Fetch is served
    /// sessionless), and after how long unused a session may be evicted
    /// for a new one, or how old one must be before a session with more
    /// partitions may evict it (`min.incremental.fetch.session.eviction.ms`,
    /// 120 s by default).
    pub fn set_fetch_session_cache(&self, slots: usize, eviction: Duration) {
        let _ = self.change(|st| {
            for b in st.brokers.values_mut() {
                b.fetch_sessions.slots = slots;
                b.fetch_sessions.eviction = eviction;
            }
            Ok(())
        });
    }

    /// Drops every fetch session of `broker`, or of every broker with
    /// `None`, as an eviction would: their next incremental Fetch gets
    /// `FETCH_SESSION_ID_NOT_FOUND`. Returns how many were dropped.
    pub fn evict_fetch_sessions(&self, broker: Option<i32>) -> usize {
        let mut st = self.shared.lock();
        st.brokers
            .iter_mut()
            .filter(|(&id, _)| broker.is_none_or(|b| b == id))
            .map(|(_, b)| b.fetch_sessions.clear())
            .sum()
    }

    /// The fetch sessions the brokers keep, by broker and id.
    pub fn fetch_sessions(&self) -> Vec<MockFetchSession> {
        let st = self.shared.lock();
        st.brokers
            .iter()
            .flat_map(|(&id, b)| b.fetch_sessions.snapshot(id))
            .collect()
    }

    /// Starts (or stops) recording each Fetch served with what it listed,
    /// forgot and got back ([`MockCluster::fetches`]). Off by default: a
    /// consumer of many partitions sends many of them.
    pub fn record_fetches(&self, on: bool) {
        let mut st = self.shared.lock();
        if !on {
            st.fetches = None;
        } else if st.fetches.is_none() {
            st.fetches = Some(Vec::new());
        }
    }

    /// The Fetch requests recorded since [`MockCluster::record_fetches`],
    /// in the order they were answered.
    pub fn fetches(&self) -> Vec<MockFetch> {
        self.shared.lock().fetches.clone().unwrap_or_default()
    }

    /// Bytes of requests of `api` received so far by every broker (each
    /// frame with its size prefix).
    pub fn request_bytes(&self, api: ApiKey) -> u64 {
        self.shared
            .lock()
            .request_bytes
            .get(&api.code())
            .copied()
            .unwrap_or(0)
    }

    /// A group as its coordinator sees it.
    pub fn group(&self, group: &str) -> Option<GroupSnapshot> {
        self.shared.lock().groups.snapshot(group)
    }

    /// The offset a group committed for a partition.
    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<i64> {
        self.shared.lock().groups.committed(group, topic, partition)
    }

    /// What a partition keeps of an idempotent producer: its epoch and
    /// last batches (see [idempotent producers](crate::mock#idempotent-producers));
    /// `None` when it has written nothing there.
    pub fn producer_state(
        &self,
        topic: &str,
        partition: i32,
        producer_id: i64,
    ) -> Option<MockProducerState> {
        self.with_partition(topic, partition, |p| {
            Ok(p.producers.get(producer_id).map(|entry| MockProducerState {
                epoch: entry.epoch,
                batches: entry
                    .batches
                    .iter()
                    .map(|b| MockProducerBatch {
                        first_sequence: b.first_seq(),
                        last_sequence: b.last_seq,
                        base_offset: b.first_offset(),
                        last_offset: b.last_offset,
                    })
                    .collect(),
            }))
        })
        .ok()
        .flatten()
    }
}

/// What a partition of the mock keeps of an idempotent producer
/// ([`MockCluster::producer_state`]), as Kafka's `ProducerStateEntry` does.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockProducerState {
    /// The producer's epoch there.
    pub epoch: i16,
    /// Its last batches there, at most 5, oldest first.
    pub batches: Vec<MockProducerBatch>,
}

/// One batch a producer wrote ([`MockProducerState::batches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockProducerBatch {
    /// The sequence of its first record.
    pub first_sequence: i32,
    /// The sequence of its last record.
    pub last_sequence: i32,
    /// The offset of its first record.
    pub base_offset: i64,
    /// The offset of its last record.
    pub last_offset: i64,
}

/// A socket bound to `addr` that does not listen (see `MockCluster::held`).
/// `SO_REUSEADDR`: the connections the broker closed may still hold the
/// port in TIME_WAIT.
fn hold(addr: SocketAddr) -> std::io::Result<socket2::Socket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    Ok(socket)
}

impl Drop for MockCluster {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.changed.notify_all();
        for (_, mut l) in self.listeners().drain() {
            l.stop();
        }
        self.shared
            .close_connections(BrokerClose::Shutdown, |_, _| true);
        if let Some(t) = self.timer.take() {
            let _ = t.join();
        }
    }
}
