//! The settings a cluster starts with ([`MockClusterBuilder`]): brokers,
//! racks, the group coordinator's timeouts, SASL and TLS.

use std::collections::BTreeMap;
use std::fmt;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::group::GroupSettings;
use super::sasl::{MockSasl, SaslState};
use super::state::State;
use super::{MockCluster, MockError};

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
        // rustls 0.23.48 deprecates its *ring* provider (no post-quantum key
        // exchange); *ring* stays the choice, since aws-lc-rs needs cmake and a
        // C toolchain to build (Cargo.toml). No warning for those who depend on
        // this crate.
        #[allow(deprecated)]
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
    /// One broker, no initial rebalance delay, Kafka's session timeout
    /// bounds, no SASL, no TLS, no racks.
    pub(super) fn new() -> Self {
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
        state.sasl = self.sasl.map(SaslState::new);
        for (id, rack) in self.racks {
            if let Some(b) = state.brokers.get_mut(&id) {
                b.rack = Some(rack);
            }
        }
        MockCluster::start(state, sockets, tls)
    }
}
