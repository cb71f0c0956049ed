//! Backoffs: the reconnect backoff and connection-setup timeout per broker
//! address, the one retry policy every request kind shares, and the
//! state of a request the connection manager repeats on its own
//! ([`Refresh`]).
//!
//! All grow exponentially with consecutive failures and carry ±20% jitter,
//! as the Java client's `ExponentialBackoff` does (KIP-580 for
//! `retry.backoff.max.ms`, KIP-601 for `reconnect.backoff.max.ms`,
//! KIP-601/KIP-711 for the setup timeout). The random source is passed in,
//! so tests can pin it.

use std::time::{Duration, Instant};

/// Exponential growth with jitter: `base * 2^(failures-1)`, capped at `max`,
/// then scaled by a factor drawn from `1 ± jitter`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExponentialBackoff {
    /// The first delay.
    pub base: Duration,
    /// The largest delay before jitter.
    pub max: Duration,
    /// Relative jitter, e.g. 0.2 for ±20%.
    pub jitter: f64,
}

impl ExponentialBackoff {
    /// The delay after `failures` consecutive failures (at least 1), with
    /// `unit` a random number in `[0, 1)`.
    pub fn delay(&self, failures: u32, unit: f64) -> Duration {
        let exp = failures.saturating_sub(1).min(31);
        let raw = self
            .base
            .saturating_mul(1u32 << exp.min(20))
            .min(self.max)
            .max(self.base.min(self.max));
        let factor = 1.0 - self.jitter + 2.0 * self.jitter * unit.clamp(0.0, 1.0);
        raw.mul_f64(factor)
    }
}

/// One request kind's run of failures under the retry policy
/// (`retry.backoff.ms` doubling to `retry.backoff.max.ms`, ±20% jitter;
/// KIP-580): Metadata, FindCoordinator, the group's requests, OffsetFetch,
/// ListOffsets, OffsetForLeaderEpoch and a partition's Fetch errors each
/// keep one, and every retry of them waits for it. The `n`-th failure in a
/// row makes the next attempt wait `policy.delay(n)`; a success ends the
/// run, so the next failure waits `retry.backoff.ms` again.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    failures: u32,
    not_before: Option<Instant>,
}

impl Retry {
    /// Whether an attempt may go out at `now`.
    pub fn ready(&self, now: Instant) -> bool {
        self.not_before.is_none_or(|t| now >= t)
    }

    /// When the next attempt may go out, while a failure holds it back.
    pub fn not_before(&self) -> Option<Instant> {
        self.not_before
    }

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// One more failure at `now`: the next attempt waits for the policy's
    /// delay (`unit`: a random number in `[0, 1)` for the jitter). Returns
    /// the delay.
    pub fn failed(&mut self, now: Instant, policy: &ExponentialBackoff, unit: f64) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let delay = policy.delay(self.failures, unit);
        self.not_before = Some(now + delay);
        delay
    }

    /// The attempt succeeded: the run is over.
    pub fn succeeded(&mut self) {
        *self = Retry::default();
    }

    /// The wait no longer holds an attempt back (it was sent, or its
    /// cause went away); the run of failures goes on.
    pub fn clear_wait(&mut self) {
        self.not_before = None;
    }

    /// Brings a run grown by failures back to its first step: the next
    /// attempt waits at most `policy.base` from `now`.
    pub fn hurry(&mut self, now: Instant, policy: &ExponentialBackoff) {
        self.failures = 0;
        if let Some(t) = self.not_before {
            self.not_before = Some(t.min(now + policy.base));
        }
    }
}

/// A small deterministic random source (SplitMix64). The runtime seeds it;
/// tests seed it with a constant.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// A repeated internal request (Metadata, FindCoordinator): in flight or
/// not, and its run of failures under the retry policy ([`Retry`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Refresh {
    /// Sent, and neither answered nor lost yet.
    pub in_flight: bool,
    /// Its run of failures.
    pub retry: Retry,
}

impl Refresh {
    /// Whether it may be sent at `now`: not in flight, not in backoff.
    pub fn may_send(&self, now: Instant) -> bool {
        !self.in_flight && self.retry.ready(now)
    }

    /// Marks it sent: in flight, and no longer waiting for its backoff.
    pub fn sent(&mut self) {
        self.in_flight = true;
        self.retry.clear_wait();
    }

    /// When it may be sent again, if it waits for that (not while in
    /// flight: its response, not time, moves it on).
    pub fn next_send(&self) -> Option<Instant> {
        (!self.in_flight)
            .then_some(self.retry.not_before())
            .flatten()
    }

    /// Answered: its run of failures is over.
    pub fn succeeded(&mut self) {
        *self = Refresh::default();
    }

    /// Brings a backoff grown by failures back to its first step: the
    /// next attempt waits at most `backoff.base` from `now`.
    pub fn hurry(&mut self, now: Instant, backoff: &ExponentialBackoff) {
        self.retry.hurry(now, backoff);
    }

    /// Failed (lost, refused, undecodable): not in flight, and the next
    /// attempt waits for the retry backoff.
    pub fn failed(&mut self, now: Instant, backoff: &ExponentialBackoff, rng: &mut Rng) {
        self.in_flight = false;
        self.retry.failed(now, backoff, rng.unit());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECONNECT: ExponentialBackoff = ExponentialBackoff {
        base: Duration::from_millis(50),
        max: Duration::from_millis(1000),
        jitter: 0.2,
    };

    #[test]
    fn doubles_up_to_the_cap() {
        let mid = |n| RECONNECT.delay(n, 0.5);
        assert_eq!(mid(1), Duration::from_millis(50));
        assert_eq!(mid(2), Duration::from_millis(100));
        assert_eq!(mid(3), Duration::from_millis(200));
        assert_eq!(mid(5), Duration::from_millis(800));
        assert_eq!(mid(6), Duration::from_millis(1000));
        assert_eq!(mid(60), Duration::from_millis(1000));
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let mut rng = Rng::new(7);
        let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
        for _ in 0..10_000 {
            let d = RECONNECT.delay(1, rng.unit());
            lo = lo.min(d);
            hi = hi.max(d);
        }
        assert!(lo >= Duration::from_millis(40), "{lo:?}");
        assert!(hi <= Duration::from_millis(60), "{hi:?}");
        // The jitter is really used: the spread covers most of the band.
        assert!(hi - lo > Duration::from_millis(18), "{lo:?}..{hi:?}");
    }

    #[test]
    fn a_retry_run_grows_to_the_max_and_a_success_ends_it() {
        let policy = ExponentialBackoff {
            base: Duration::from_millis(100),
            max: Duration::from_millis(1000),
            jitter: 0.0,
        };
        let t0 = Instant::now();
        let mut retry = Retry::default();
        assert!(retry.ready(t0));
        let delays: Vec<u128> = (0..6)
            .map(|_| retry.failed(t0, &policy, 0.5).as_millis())
            .collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        assert!(!retry.ready(t0 + Duration::from_millis(999)));
        assert!(retry.ready(t0 + Duration::from_millis(1000)));
        assert_eq!(retry.failures(), 6);
        retry.succeeded();
        assert_eq!(retry.failed(t0, &policy, 0.5), Duration::from_millis(100));
        retry.failed(t0, &policy, 0.5);
        retry.hurry(t0, &policy);
        assert_eq!(retry.not_before(), Some(t0 + Duration::from_millis(100)));
        assert_eq!(retry.failures(), 0);
    }

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let mut a = Rng::new(1);
        let mut b = Rng::new(1);
        for _ in 0..100 {
            let (x, y) = (a.unit(), b.unit());
            assert_eq!(x, y);
            assert!((0.0..1.0).contains(&x));
            assert!(a.below(3) < 3);
            b.below(3);
        }
    }
}
