//! One connection to one broker, for tools and tests: a [`ClusterDriver`]
//! whose only bootstrap address is that broker. Bytes become responses
//! along the same path as the clients' (frames, correlation ids and
//! response headers are the cluster's business), and failures carry the
//! same causes as the connection events.

use super::cluster_driver::ClusterDriver;
use super::sockets::SocketOptions;
use crate::cluster::{Cluster, ClusterConfig, ExponentialBackoff, Target};
use crate::error::Error;
use crate::events::{ConnectionError, ConnectionId, EventKind};
use crate::protocol::{ApiVersionTable, Request, DEFAULT_MAX_FRAME_SIZE};
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How a [`BrokerConnection`] is set up.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Sent as `client_id` in every request header (`client.id`).
    pub client_id: Option<String>,
    /// How long one TCP connect may take (`socket.connection.setup.timeout.ms`).
    pub setup_timeout: Duration,
    /// How long a request may wait for its response (`request.timeout.ms`).
    pub request_timeout: Duration,
    /// Turn on TCP keepalive (`socket.keepalive.enable`).
    pub keepalive: bool,
    /// The largest response frame accepted, checked before it is buffered.
    pub max_frame_size: usize,
    /// The TLS handshake to run after the TCP connect (`None`: plain TCP);
    /// the setup timeout covers both.
    pub tls: Option<crate::tls::TlsConnector>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            client_id: Some(env!("CARGO_PKG_NAME").to_owned()),
            setup_timeout: Duration::from_millis(10_000),
            request_timeout: Duration::from_millis(30_000),
            keepalive: true,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            tls: None,
        }
    }
}

/// A connection to one broker whose API versions have been negotiated.
///
/// Each [`BrokerConnection::request`] waits for its response; the
/// connection is driven only while a method is awaited (no background
/// task). If the broker closes the connection, the next request opens a
/// new one (ApiVersions first, as on every socket). It runs on tokio when
/// connected inside a tokio runtime, on async-std otherwise (the rule of
/// [`ClusterDriver::new`]).
pub struct BrokerConnection {
    driver: ClusterDriver,
    addr: String,
    peer: SocketAddr,
    versions: ApiVersionTable,
    request_timeout: Duration,
}

impl fmt::Debug for BrokerConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerConnection")
            .field("addr", &self.addr)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl BrokerConnection {
    /// Resolves `addr` (`host:port`), connects to the first address that
    /// answers (every resolved address is tried in turn), sets TCP_NODELAY
    /// and keepalive, runs the TLS handshake when `options.tls` asks for
    /// it, and runs the ApiVersions exchange.
    ///
    /// # Panics
    ///
    /// Built with the feature `runtime-tokio` alone, outside a tokio
    /// runtime (see [`ClusterDriver::new`]).
    pub async fn connect(addr: &str, options: ConnectOptions) -> Result<Self, Error> {
        let mut config = ClusterConfig::new([addr]);
        config.client_id = options.client_id.clone();
        config.request_timeout = options.request_timeout;
        config.max_frame_size = options.max_frame_size;
        // One attempt, with exactly the timeout asked for.
        config.setup_timeout = ExponentialBackoff {
            base: options.setup_timeout,
            max: options.setup_timeout,
            jitter: 0.0,
        };
        // A tool's connection lives as long as the tool wants it.
        config.connections_max_idle = None;
        let now = Instant::now();
        let mut driver = ClusterDriver::new(
            Cluster::new(config, now, 0),
            SocketOptions {
                keepalive: options.keepalive,
                tls: options.tls.clone(),
            },
        );
        let conn = driver
            .cluster()
            .connect_least_loaded(now)
            .expect("a new cluster has no address in backoff");
        let mut failure: Option<ConnectionError> = None;
        // The setup timeout bounds the connect, the request timeout each
        // ApiVersions round trip (at most two: a retry at the version the
        // broker lists); the cluster enforces both, this only bounds the
        // wait if it did not.
        let bound = options.setup_timeout + 2 * options.request_timeout;
        let ready = driver
            .run_until(bound, |d| {
                for e in d.take_events() {
                    if e.connection != conn {
                        continue;
                    }
                    match e.kind {
                        EventKind::ConnectFailed { error } => failure = Some(error),
                        EventKind::Closed { error, reason } => {
                            failure =
                                Some(error.unwrap_or(ConnectionError::ClosedByClient { reason }))
                        }
                        _ => {}
                    }
                }
                failure.is_some() || d.cluster().connection_versions(conn).is_some()
            })
            .await;
        if let Some(cause) = failure {
            return Err(Error::Connection {
                broker: None,
                addr: addr.to_owned(),
                purpose: crate::events::Purpose::Bootstrap,
                cause,
            });
        }
        if !ready {
            return Err(Error::ConnectTimeout {
                addr: addr.to_owned(),
            });
        }
        Ok(BrokerConnection {
            addr: addr.to_owned(),
            peer: peer_of(&mut driver, conn),
            versions: driver
                .cluster()
                .connection_versions(conn)
                .expect("ready")
                .clone(),
            driver,
            request_timeout: options.request_timeout,
        })
    }

    /// The address this connection was asked to reach (`host:port`).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The socket address actually connected to.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The versions negotiated on this connection.
    pub fn versions(&self) -> &ApiVersionTable {
        &self.versions
    }

    /// Sends `request` at the negotiated version and waits for its response.
    pub async fn request<R>(&mut self, request: &R) -> Result<R::Response, Error>
    where
        R: Request + Clone + Send + fmt::Debug + 'static,
    {
        let api = R::API_KEY;
        let id = self
            .driver
            .request(Target::Bootstrap, Box::new(request.clone()));
        // The cluster times the request out; the margin only bounds the
        // wait should it not.
        let response = self
            .driver
            .wait_response(id, self.request_timeout + Duration::from_secs(1))
            .await
            .ok_or(Error::RequestTimeout {
                api,
                addr: self.addr.clone(),
            })?
            .map_err(|source| Error::Request { api, source })?;
        crate::protocol::messages::decode_response_body::<R::Response>(
            response.body,
            response.version,
        )
        .map(|(response, _)| response)
        .map_err(|source| Error::Decode {
            api,
            addr: self.addr.clone(),
            source,
        })
    }

    /// Closes the connection (both directions) now.
    pub async fn close(mut self) {
        self.driver.shutdown();
    }
}

fn peer_of(driver: &mut ClusterDriver, conn: ConnectionId) -> SocketAddr {
    driver
        .cluster()
        .connection_peer(conn)
        .expect("a ready connection has a peer")
}
