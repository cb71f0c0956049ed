//! The connections themselves, from their connect to their close: their
//! ids, the lookups over them (which connection serves a purpose and a
//! broker, the least loaded, those past a deadline), how many leader and
//! replica connections of each broker closed (their generations), the
//! turn of the next bootstrap address, and the counters of each address.

use super::authentication::Authentication;
use super::conn::{Conn, Phase, Queued};
use super::metadata::Metadata;
use crate::events::{BrokerCounters, ConnectionId, ConnectionInfo, Purpose};
use crate::protocol::ApiKey;
use std::collections::BTreeMap;
use std::time::Instant;

/// Every live connection, with what is counted of connections over time.
#[derive(Debug)]
pub(crate) struct Connections {
    /// The connections, by id.
    conns: BTreeMap<ConnectionId, Conn>,
    /// Per broker, how many of its leader connections have closed (see
    /// [`Cluster::leader_generations`](super::Cluster::leader_generations)).
    leader_generations: BTreeMap<i32, u64>,
    /// The same for replica connections
    /// ([`Cluster::replica_generations`](super::Cluster::replica_generations)).
    replica_generations: BTreeMap<i32, u64>,
    /// The id the next connection gets.
    next_id: u64,
    /// Where the next turn through the bootstrap addresses (or the known
    /// brokers) starts.
    bootstrap_cursor: usize,
    /// Counters per broker address.
    counters: BTreeMap<String, BrokerCounters>,
}

impl Connections {
    /// No connection yet; the first turn through the bootstrap addresses
    /// starts at `bootstrap_cursor`.
    pub fn new(bootstrap_cursor: usize) -> Self {
        Connections {
            conns: BTreeMap::new(),
            leader_generations: BTreeMap::new(),
            replica_generations: BTreeMap::new(),
            next_id: 1,
            bootstrap_cursor,
            counters: BTreeMap::new(),
        }
    }

    // ===== the connections =====

    /// A new connection to `addr` (of `broker`, when known) for `purpose`,
    /// connecting until `connect_deadline`; counted as a connect of its
    /// address. Returns its id.
    pub fn open(
        &mut self,
        now: Instant,
        addr: String,
        broker: Option<i32>,
        purpose: Purpose,
        connect_deadline: Instant,
        max_frame_size: usize,
    ) -> ConnectionId {
        let id = ConnectionId(self.next_id);
        self.next_id += 1;
        let counter = self.counter(&addr);
        counter.connects += 1;
        if broker.is_some() {
            counter.broker = broker;
        }
        let conn = Conn::new(
            id,
            addr,
            broker,
            purpose,
            now,
            connect_deadline,
            max_frame_size,
        );
        self.conns.insert(id, conn);
        id
    }

    /// Connection `id`, if it is live.
    pub fn get(&self, id: ConnectionId) -> Option<&Conn> {
        self.conns.get(&id)
    }

    /// Connection `id`, if it is live, to change.
    pub fn get_mut(&mut self, id: ConnectionId) -> Option<&mut Conn> {
        self.conns.get_mut(&id)
    }

    /// Takes connection `id` out (it is closed, or failed to connect).
    pub fn remove(&mut self, id: ConnectionId) -> Option<Conn> {
        self.conns.remove(&id)
    }

    /// Whether connection `id` is live.
    pub fn contains(&self, id: ConnectionId) -> bool {
        self.conns.contains_key(&id)
    }

    /// Whether no connection is live.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// The live connections, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Conn> {
        self.conns.values()
    }

    /// The ids of the live connections, in order.
    pub fn ids(&self) -> Vec<ConnectionId> {
        self.conns.keys().copied().collect()
    }

    /// The ids of the connections `keep` says yes to, in order.
    pub fn ids_where(&self, keep: impl Fn(&Conn) -> bool) -> Vec<ConnectionId> {
        self.conns
            .values()
            .filter(|c| keep(c))
            .map(|c| c.id)
            .collect()
    }

    // ===== lookups =====

    /// The connection of `purpose` (to `broker`, when given), if there is
    /// one.
    pub fn find(&self, purpose: Purpose, broker: Option<i32>) -> Option<ConnectionId> {
        self.conns
            .values()
            .find(|c| c.purpose == purpose && (broker.is_none() || c.broker == broker))
            .map(|c| c.id)
    }

    /// The connection of one of `purposes` (usable ones only, if
    /// `usable_only`) with the fewest requests sent or queued; the lowest
    /// id among equals.
    pub fn least_loaded(&self, purposes: &[Purpose], usable_only: bool) -> Option<ConnectionId> {
        self.conns
            .values()
            .filter(|c| purposes.contains(&c.purpose) && (!usable_only || c.is_usable()))
            .min_by_key(|c| (c.load(), c.id))
            .map(|c| c.id)
    }

    /// Whether some connection is ready.
    pub fn any_ready(&self) -> bool {
        self.conns.values().any(|c| c.is_ready())
    }

    /// Whether some connection of one of `purposes` is ready.
    pub fn any_ready_for(&self, purposes: &[Purpose]) -> bool {
        self.conns
            .values()
            .any(|c| purposes.contains(&c.purpose) && c.is_ready())
    }

    /// Whether connection `id` is still connecting.
    pub fn is_connecting(&self, id: ConnectionId) -> bool {
        self.conns
            .get(&id)
            .is_some_and(|c| matches!(c.phase, Phase::Connecting { .. }))
    }

    /// A snapshot of the live connections at `now`.
    pub fn snapshot(&self, now: Instant) -> Vec<ConnectionInfo> {
        self.conns
            .values()
            .map(|c| ConnectionInfo {
                id: c.id,
                broker: c.broker,
                addr: c.addr.clone(),
                purpose: c.purpose,
                state: c.state(),
                in_flight: c.in_flight.len(),
                idle_for: now.saturating_duration_since(c.last_activity),
            })
            .collect()
    }

    /// Connect attempts past their deadline at `now`.
    pub fn late_connects(&self, now: Instant) -> Vec<ConnectionId> {
        self.ids_where(|c| matches!(c.phase, Phase::Connecting { deadline } if now >= deadline))
    }

    /// Connected, but not set up (ApiVersions, SASL) by their setup
    /// deadline at `now`.
    pub fn late_setups(&self, now: Instant) -> Vec<ConnectionId> {
        self.ids_where(|c| {
            !matches!(c.phase, Phase::Connecting { .. })
                && !c.is_usable()
                && c.setup_deadline.is_some_and(|t| now >= t)
        })
    }

    /// The connections with a request in flight past its deadline at
    /// `now`, each with the API of its first such request.
    pub fn timed_out(&self, now: Instant) -> Vec<(ConnectionId, ApiKey)> {
        self.conns
            .values()
            .filter_map(|c| {
                c.in_flight
                    .iter()
                    .find(|r| now >= r.deadline)
                    .map(|r| (c.id, r.api))
            })
            .collect()
    }

    /// Takes out the queued requests (not yet written) whose deadline
    /// passed at `now`, counted as request errors of their address; the
    /// others stay queued in order.
    pub fn take_expired_queued(&mut self, now: Instant) -> Vec<Queued> {
        let mut taken = Vec::new();
        for c in self.conns.values_mut() {
            let (expired, kept): (Vec<Queued>, Vec<Queued>) =
                c.queue.drain(..).partition(|q| now >= q.deadline);
            c.queue = kept.into();
            if !expired.is_empty() {
                self.counters
                    .entry(c.addr.clone())
                    .or_default()
                    .request_errors += expired.len() as u64;
            }
            taken.extend(expired);
        }
        taken
    }

    /// Ready connections whose SASL session is due for renewal at `now`
    /// and that have nothing in flight.
    pub fn reauthentication_due(&self, now: Instant) -> Vec<ConnectionId> {
        self.ids_where(|c| {
            c.in_flight.is_empty()
                && matches!(c.phase, Phase::Ready { reauth_at: Some(t), .. } if now >= t)
        })
    }

    /// Connection `id`'s SASL phase, if it is in it.
    pub fn authentication(&mut self, id: ConnectionId) -> Option<&mut Authentication> {
        match self.conns.get_mut(&id).map(|c| &mut c.phase) {
            Some(Phase::Authenticating(auth)) => Some(auth),
            _ => None,
        }
    }

    /// Whether a connection waits for an OAUTHBEARER token.
    pub fn awaiting_token(&self) -> bool {
        self.conns
            .values()
            .any(|c| matches!(&c.phase, Phase::Authenticating(auth) if auth.awaiting_token))
    }

    /// The connections that wait for an OAUTHBEARER token, which no longer
    /// wait once taken.
    pub fn take_token_waiters(&mut self) -> Vec<ConnectionId> {
        let mut waiters = Vec::new();
        for c in self.conns.values_mut() {
            if let Phase::Authenticating(auth) = &mut c.phase {
                if auth.awaiting_token {
                    auth.awaiting_token = false;
                    waiters.push(c.id);
                }
            }
        }
        waiters
    }

    // ===== what a bootstrap connection turns into =====

    /// docs/connections.md, rule 6: a bootstrap connection that reaches
    /// broker `broker` at `addr` becomes its connection for `purpose`.
    /// Returns that connection, if there is one.
    pub fn promote(&mut self, addr: &str, broker: i32, purpose: Purpose) -> Option<ConnectionId> {
        let c = self.conns.values_mut().find(|c| {
            c.purpose == Purpose::Bootstrap
                && (c.addr == addr || c.peer.is_some_and(|p| p.to_string() == addr))
        })?;
        c.purpose = purpose;
        c.broker = Some(broker);
        let (id, addr) = (c.id, c.addr.clone());
        self.counter(&addr).broker = Some(broker);
        Some(id)
    }

    /// Names the brokers of connections opened to a bootstrap address
    /// once a Metadata answer lists their addresses; the counters of an
    /// address follow the broker found behind it.
    pub fn name_brokers(&mut self, md: &Metadata) {
        for c in self.conns.values_mut() {
            if c.broker.is_none() {
                c.broker = md
                    .brokers
                    .values()
                    .find(|b| {
                        let addr = b.addr();
                        c.addr == addr || c.peer.is_some_and(|p| p.to_string() == addr)
                    })
                    .map(|b| b.id);
            }
        }
        let named: Vec<(String, i32)> = self
            .conns
            .values()
            .filter_map(|c| c.broker.map(|b| (c.addr.clone(), b)))
            .collect();
        for (addr, broker) in named {
            self.counter(&addr).broker = Some(broker);
        }
    }

    /// The next of `n` addresses in turn that `skip` does not pass over,
    /// starting where the last turn stopped; the turn then goes on after
    /// it. `None` when every one is passed over.
    pub fn next_in_turn(&mut self, n: usize, skip: impl Fn(usize) -> bool) -> Option<usize> {
        for step in 0..n {
            let i = (self.bootstrap_cursor + step) % n;
            if skip(i) {
                continue;
            }
            self.bootstrap_cursor = (i + 1) % n;
            return Some(i);
        }
        None
    }

    // ===== what is counted =====

    /// `c` closed: a leader or replica connection counts in its broker's
    /// generations.
    pub fn count_closed(&mut self, c: &Conn) {
        if let Some(broker) = c.broker {
            match c.purpose {
                Purpose::Leader => *self.leader_generations.entry(broker).or_default() += 1,
                Purpose::Replica => *self.replica_generations.entry(broker).or_default() += 1,
                Purpose::Bootstrap | Purpose::Coordinator => {}
            }
        }
    }

    /// Per broker, how many of its leader connections closed.
    pub fn leader_generations(&self) -> &BTreeMap<i32, u64> {
        &self.leader_generations
    }

    /// Per broker, how many of its replica connections closed.
    pub fn replica_generations(&self) -> &BTreeMap<i32, u64> {
        &self.replica_generations
    }

    /// The counters of `addr`.
    pub fn counter(&mut self, addr: &str) -> &mut BrokerCounters {
        if !self.counters.contains_key(addr) {
            self.counters
                .insert(addr.to_owned(), BrokerCounters::default());
        }
        self.counters.get_mut(addr).expect("inserted")
    }

    /// Counters per broker address.
    pub fn counters(&self) -> &BTreeMap<String, BrokerCounters> {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ApiVersionTable;
    use std::time::Duration;

    fn open(conns: &mut Connections, now: Instant, addr: &str, purpose: Purpose) -> ConnectionId {
        let deadline = now + Duration::from_secs(10);
        conns.open(now, addr.into(), None, purpose, deadline, 1 << 20)
    }

    fn make_ready(conns: &mut Connections, id: ConnectionId) {
        conns.get_mut(id).expect("live").phase = Phase::Ready {
            versions: ApiVersionTable::default(),
            reauth_at: None,
        };
    }

    #[test]
    fn ids_count_from_one_and_connects_are_counted_per_address() {
        let now = Instant::now();
        let mut conns = Connections::new(0);
        assert_eq!(
            open(&mut conns, now, "b1:9092", Purpose::Bootstrap),
            ConnectionId(1)
        );
        assert_eq!(
            open(&mut conns, now, "b1:9092", Purpose::Bootstrap),
            ConnectionId(2)
        );
        assert_eq!(
            open(&mut conns, now, "b2:9092", Purpose::Bootstrap),
            ConnectionId(3)
        );
        assert_eq!(conns.counters()["b1:9092"].connects, 2);
        assert_eq!(conns.counters()["b2:9092"].connects, 1);
        assert!(conns.remove(ConnectionId(2)).is_some());
        assert_eq!(conns.ids(), [ConnectionId(1), ConnectionId(3)]);
        assert_eq!(
            open(&mut conns, now, "b1:9092", Purpose::Bootstrap),
            ConnectionId(4)
        );
    }

    #[test]
    fn the_turn_goes_on_after_the_address_picked_and_skips_the_others() {
        let mut conns = Connections::new(2);
        assert_eq!(conns.next_in_turn(4, |_| false), Some(2));
        assert_eq!(conns.next_in_turn(4, |_| false), Some(3));
        assert_eq!(conns.next_in_turn(4, |i| i == 0), Some(1));
        assert_eq!(conns.next_in_turn(4, |i| i != 3), Some(3));
        assert_eq!(conns.next_in_turn(4, |_| true), None);
        assert_eq!(conns.next_in_turn(4, |_| false), Some(0));
        assert_eq!(conns.next_in_turn(0, |_| false), None);
    }

    #[test]
    fn the_least_loaded_usable_connection_is_picked() {
        let now = Instant::now();
        let mut conns = Connections::new(0);
        let a = open(&mut conns, now, "b1:9092", Purpose::Leader);
        let b = open(&mut conns, now, "b2:9092", Purpose::Leader);
        let boot = open(&mut conns, now, "boot:9092", Purpose::Bootstrap);
        assert_eq!(conns.least_loaded(&[Purpose::Leader], true), None);
        assert_eq!(conns.least_loaded(&[Purpose::Leader], false), Some(a));
        make_ready(&mut conns, a);
        make_ready(&mut conns, b);
        conns.get_mut(a).expect("live").queue.push_back(Queued {
            origin: super::super::requests::Origin::Metadata,
            body: Box::new(crate::protocol::messages::metadata::MetadataRequest::default()),
            deadline: now,
            answered: true,
        });
        assert_eq!(conns.least_loaded(&[Purpose::Leader], true), Some(b));
        assert_eq!(conns.least_loaded(&[Purpose::Bootstrap], false), Some(boot));
        assert!(conns.any_ready_for(&[Purpose::Leader]));
        assert!(!conns.any_ready_for(&[Purpose::Bootstrap]));

        let expired = conns.take_expired_queued(now);
        assert_eq!(expired.len(), 1);
        assert_eq!(conns.counters()["b1:9092"].request_errors, 1);
        assert_eq!(conns.least_loaded(&[Purpose::Leader], true), Some(a));
    }

    #[test]
    fn a_promoted_bootstrap_connection_serves_its_broker_and_closes_count_per_broker() {
        let now = Instant::now();
        let mut conns = Connections::new(0);
        let boot = open(&mut conns, now, "b1:9092", Purpose::Bootstrap);
        assert_eq!(conns.promote("b2:9092", 2, Purpose::Leader), None);
        assert_eq!(conns.promote("b1:9092", 1, Purpose::Leader), Some(boot));
        assert_eq!(conns.find(Purpose::Leader, Some(1)), Some(boot));
        assert_eq!(conns.find(Purpose::Bootstrap, None), None);
        assert_eq!(conns.counters()["b1:9092"].broker, Some(1));

        let c = conns.remove(boot).expect("live");
        conns.count_closed(&c);
        conns.count_closed(&c);
        assert_eq!(conns.leader_generations().get(&1), Some(&2));
        assert!(conns.replica_generations().is_empty());
    }
}
