//! The producer's requests in flight: which request is which, how many
//! Produce requests each broker has (`max.in.flight.requests.per.connection`),
//! and the brokers that throttle the producer (KIP-219).

use super::super::accumulator::ProducerBatch;
use crate::cluster::RequestId;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A request in flight.
#[derive(Debug)]
pub(super) enum Pending {
    InitPid,
    Produce {
        broker: i32,
        batches: Vec<ProducerBatch>,
        sent: Instant,
    },
}

/// The requests in flight and the brokers' throttles.
#[derive(Debug)]
pub(super) struct Requests {
    in_flight: BTreeMap<RequestId, Pending>,
    /// Produce requests in flight per broker.
    per_broker: BTreeMap<i32, usize>,
    /// `max.in.flight.requests.per.connection`.
    max_per_broker: usize,
    /// Brokers that throttle this producer (a Produce answer's
    /// `throttle_time_ms`, KIP-219), until when: nothing is sent to them
    /// before.
    throttled: BTreeMap<i32, Instant>,
    /// Produce answers that asked for a wait, and the longest wait asked.
    throttles: (u64, Duration),
}

impl Requests {
    pub(super) fn new(max_per_broker: usize) -> Self {
        Requests {
            in_flight: BTreeMap::new(),
            per_broker: BTreeMap::new(),
            max_per_broker: max_per_broker.max(1),
            throttled: BTreeMap::new(),
            throttles: (0, Duration::ZERO),
        }
    }

    /// InitProducerId went out as `id`.
    pub(super) fn asked_pid(&mut self, id: RequestId) {
        self.in_flight.insert(id, Pending::InitPid);
    }

    /// A Produce of `batches` went to `broker` at `now` as `id`.
    pub(super) fn produced(
        &mut self,
        id: RequestId,
        broker: i32,
        batches: Vec<ProducerBatch>,
        now: Instant,
    ) {
        *self.per_broker.entry(broker).or_default() += 1;
        self.in_flight.insert(
            id,
            Pending::Produce {
                broker,
                batches,
                sent: now,
            },
        );
    }

    /// Request `id` was answered (or failed): what it was, if it is ours.
    pub(super) fn answered(&mut self, id: RequestId) -> Option<Pending> {
        let pending = self.in_flight.remove(&id)?;
        if let Pending::Produce { broker, .. } = &pending {
            if let Some(n) = self.per_broker.get_mut(broker) {
                *n = n.saturating_sub(1);
            }
        }
        Some(pending)
    }

    /// Every request in flight, taken (the producer closes).
    pub(super) fn take_all(&mut self) -> impl Iterator<Item = Pending> {
        self.per_broker.clear();
        std::mem::take(&mut self.in_flight).into_values()
    }

    /// Requests in flight.
    pub(super) fn len(&self) -> usize {
        self.in_flight.len()
    }

    /// Produce requests in flight, to every broker.
    pub(super) fn produce_in_flight(&self) -> usize {
        self.per_broker.values().sum()
    }

    /// Whether another Produce may go to `broker` at `now`: fewer than
    /// the most in flight, and not throttled.
    pub(super) fn may_send(&self, broker: i32, now: Instant) -> bool {
        self.per_broker.get(&broker).copied().unwrap_or(0) < self.max_per_broker
            && self
                .throttled
                .get(&broker)
                .is_none_or(|until| *until <= now)
    }

    /// The brokers with a Produce in flight.
    pub(super) fn busy(&self) -> impl Iterator<Item = i32> + '_ {
        self.per_broker
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(b, _)| *b)
    }

    /// `broker` asked, at `now`, for nothing more for `wait`.
    pub(super) fn throttle(&mut self, broker: i32, now: Instant, wait: Duration) {
        self.throttled.insert(broker, now + wait);
        self.throttles.0 += 1;
        self.throttles.1 = self.throttles.1.max(wait);
    }

    /// Forgets the throttles over at `now`.
    pub(super) fn end_throttles(&mut self, now: Instant) {
        self.throttled.retain(|_, until| *until > now);
    }

    /// When the first throttle ends.
    pub(super) fn next_throttle_end(&self) -> Option<Instant> {
        self.throttled.values().min().copied()
    }

    /// Produce answers that asked for a wait, and the longest wait asked.
    pub(super) fn throttles(&self) -> (u64, Duration) {
        self.throttles
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_takes_at_most_the_most_in_flight_and_nothing_while_it_throttles() {
        let mut requests = Requests::new(2);
        let now = Instant::now();
        let ids: Vec<RequestId> = (1..=3).map(RequestId).collect();
        assert!(requests.may_send(1, now));
        requests.produced(ids[0], 1, Vec::new(), now);
        requests.produced(ids[1], 1, Vec::new(), now);
        assert!(!requests.may_send(1, now), "two in flight");
        assert!(requests.may_send(2, now), "another broker's count");
        assert_eq!(requests.busy().collect::<Vec<_>>(), [1]);
        assert!(matches!(
            requests.answered(ids[0]),
            Some(Pending::Produce { broker: 1, .. })
        ));
        assert!(requests.answered(ids[0]).is_none(), "answered once");
        assert!(requests.may_send(1, now));
        requests.throttle(1, now, Duration::from_millis(50));
        assert!(!requests.may_send(1, now), "throttled");
        assert_eq!(
            requests.next_throttle_end(),
            Some(now + Duration::from_millis(50))
        );
        let later = now + Duration::from_millis(50);
        requests.end_throttles(later);
        assert!(requests.may_send(1, later));
        assert_eq!(requests.throttles(), (1, Duration::from_millis(50)));
        requests.asked_pid(ids[2]);
        assert_eq!(requests.produce_in_flight(), 1);
        assert_eq!(requests.take_all().count(), 2);
        assert_eq!((requests.len(), requests.produce_in_flight()), (0, 0));
    }
}
