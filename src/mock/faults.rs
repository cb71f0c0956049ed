//! The faults a test brings on a running cluster: brokers going down and
//! coming back, injected errors, lost answers, slow brokers, idle and
//! forced closes, narrowed API versions, SASL session lifetimes, fetch
//! session caches.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use super::server::Listener;
use super::{BrokerClose, LostAnswer, MockCluster, MockError};
use crate::error::ErrorCode;
use crate::protocol::{ApiKey, VersionRange};

impl MockCluster {
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

    /// Changes the SASL session lifetime given to the next
    /// authentications (KIP-368; `None`: sessions do not end). No effect
    /// on a cluster built without [`MockClusterBuilder::sasl`](crate::mock::MockClusterBuilder::sasl).
    pub fn set_sasl_session_lifetime(&self, lifetime: Option<Duration>) {
        if let Some(sasl) = self.shared.lock().sasl.as_mut() {
            sasl.session_lifetime = lifetime;
        }
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
