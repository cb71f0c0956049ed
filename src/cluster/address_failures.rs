//! Each broker address's record of failures: its run of failed connects
//! (and, apart, its run of refusals), the backoff before it is dialled
//! again, and whether the application was told ([`Problem`]).

use super::backoff::Rng;
use super::config::ClusterConfig;
use super::conn::Conn;
use super::Problem;
use crate::events::{ConnectionError, Purpose};
use crate::streak::Streak;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A refusal this long after the last one of its address starts a new run
/// (its backoff from the first step, reported at once).
const REFUSAL_RUN_GAP: Duration = Duration::from_secs(300);

/// An address's run of refusals ([`ConnectionError::is_refusal`]): unlike
/// a run of failed connects, it is not ended by a connection that
/// answered (a broker that answers ApiVersions, then garbage, refuses
/// again and again), only by [`REFUSAL_RUN_GAP`] without a refusal.
type RefusalRun = Streak<()>;

/// One address's run of failures: its backoff, and whether the
/// application was told.
#[derive(Debug, Default, Clone)]
struct AddrBackoff {
    /// Failures since a connection to it last answered a request (a
    /// connection that only completed TCP, or the ApiVersions exchange,
    /// does not end the run: a broker that drops every request is backed
    /// off like one that refuses).
    failures: u32,
    until: Option<Instant>,
    last_error: Option<ConnectionError>,
    /// This run as a [`Problem`] to report: said at its start, then again
    /// only every [`REPORT_AGAIN_AFTER`](crate::streak::REPORT_AGAIN_AFTER).
    report: Option<Streak<()>>,
}

/// The failures of every address the connection manager dialled.
#[derive(Debug, Default)]
pub(crate) struct AddressFailures {
    /// Per address, its run of failures and its backoff.
    backoff: HashMap<String, AddrBackoff>,
    /// Per address, its run of refusals.
    refusals: HashMap<String, Option<RefusalRun>>,
    /// "Every bootstrap address failed", reported once, then again only
    /// every [`REPORT_AGAIN_AFTER`](crate::streak::REPORT_AGAIN_AFTER).
    bootstrap_outage: Option<Streak<()>>,
    /// The last connection failure, in words, for requests that time out
    /// waiting for a connection.
    last_failure: Option<String>,
}

impl AddressFailures {
    /// Backoffs that ended are no longer waited for (their failure counts
    /// stay, for the next delay).
    pub fn clear_ended_backoffs(&mut self, now: Instant) {
        for b in self.backoff.values_mut() {
            if b.until.is_some_and(|t| now >= t) {
                b.until = None;
            }
        }
    }

    /// Whether `addr` may not be dialled at `now`.
    pub fn in_backoff(&self, now: Instant, addr: &str) -> bool {
        self.backoff
            .get(addr)
            .and_then(|b| b.until)
            .is_some_and(|until| now < until)
    }

    /// Failures in `addr`'s current run.
    pub fn failures(&self, addr: &str) -> u32 {
        self.backoff.get(addr).map_or(0, |b| b.failures)
    }

    /// The last failure of `addr`'s current run.
    pub fn last_error(&self, addr: &str) -> Option<&ConnectionError> {
        self.backoff.get(addr).and_then(|b| b.last_error.as_ref())
    }

    /// When the first backoff still waited for ends.
    pub fn next_backoff_end(&self) -> Option<Instant> {
        self.backoff.values().filter_map(|b| b.until).min()
    }

    /// The last connection failure, in words.
    pub fn last_failure(&self) -> Option<String> {
        self.last_failure.clone()
    }

    /// A connection to `c`'s address failed, or broke: one more failure in
    /// its run (a connection that had answered starts a new run), its next
    /// attempt backed off, and the application told when the run starts
    /// (or again after a long time). `any_ready`: whether a connection is
    /// ready (then no bootstrap outage is reported). Returns the backoff
    /// and the problem to report, if any.
    pub fn failed(
        &mut self,
        now: Instant,
        c: &Conn,
        error: &ConnectionError,
        config: &ClusterConfig,
        rng: &mut Rng,
        any_ready: bool,
    ) -> (Duration, Option<Problem>) {
        let entry = self.backoff.entry(c.addr.clone()).or_default();
        entry.failures = if c.answered {
            1
        } else {
            entry.failures.saturating_add(1)
        };
        entry.last_error = Some(error.clone());
        let failures = entry.failures;
        let refusal = error.is_refusal();
        // A refusal (credentials refused, a certificate not trusted, a
        // broker that answers garbage) will be met again: a backoff of its
        // own, much longer than a refused connect's, which keeps a
        // restarting broker found quickly.
        let (delay, due) = if refusal {
            self.count_refusal(now, &c.addr, config, rng)
        } else {
            let delay = config.reconnect_backoff.delay(failures, rng.unit());
            let due =
                Streak::note(&mut entry.report, (), now, Duration::MAX).due(now, Duration::ZERO);
            (delay, due)
        };
        self.backoff.get_mut(&c.addr).expect("inserted").until = Some(now + delay);
        self.last_failure = Some(format!(
            "{} connection to {} failed: {error}",
            c.purpose, c.addr
        ));
        let problem = self.problem(now, c, error, failures, due, any_ready, &config.bootstrap);
        log::debug!(
            "{} connection to {} failed: {error}; next attempt in {delay:?}",
            c.purpose,
            c.addr
        );
        (delay, problem)
    }

    /// One more refusal in `addr`'s run of them: its backoff, and whether
    /// the run is due to be reported.
    fn count_refusal(
        &mut self,
        now: Instant,
        addr: &str,
        config: &ClusterConfig,
        rng: &mut Rng,
    ) -> (Duration, bool) {
        let slot = self.refusals.entry(addr.to_owned()).or_default();
        let run = RefusalRun::note(slot, (), now, REFUSAL_RUN_GAP);
        let delay = config.refusal_backoff.delay(run.failures(), rng.unit());
        (delay, run.due(now, Duration::ZERO))
    }

    /// What a failure of `c` tells the application, if anything: a token
    /// provider or authentication failure at once, a bootstrap outage once
    /// every address failed, a known broker from its second failure in a
    /// row (a refusal at once); each only when `due`.
    #[allow(clippy::too_many_arguments)]
    fn problem(
        &mut self,
        now: Instant,
        c: &Conn,
        error: &ConnectionError,
        failures: u32,
        due: bool,
        any_ready: bool,
        bootstrap: &[String],
    ) -> Option<Problem> {
        let refusal = error.is_refusal();
        let unreachable = || Problem::BrokerUnreachable {
            broker: c.broker,
            addr: c.addr.clone(),
            purpose: c.purpose,
            cause: error.clone(),
        };
        let problem = match error {
            // At the first failure, for any connection: the application's
            // provider (its token endpoint) is down, which it should hear
            // of; the client retries by itself.
            ConnectionError::TokenProvider { .. } => due.then(unreachable),
            // At the first failure: it will not pass by itself.
            ConnectionError::Authentication { mechanism, message } => {
                due.then(|| Problem::AuthenticationFailed {
                    broker: c.broker,
                    addr: c.addr.clone(),
                    purpose: c.purpose,
                    mechanism: mechanism.clone(),
                    message: message.clone(),
                })
            }
            _ if c.purpose == Purpose::Bootstrap => {
                return self.bootstrap_unreachable(now, any_ready, bootstrap);
            }
            // From the second failure in a row: a connection that worked
            // and broke once (a broker restarting, an idle close racing a
            // request) is reconnected at once and is no news; one whose
            // reconnect fails too, or that keeps breaking before answering,
            // is. A refusal is news at once: a certificate does not become
            // trusted by waiting.
            _ => (due && (failures >= 2 || refusal)).then(unreachable),
        };
        if problem.is_some() {
            self.mark_reported(now, &c.addr, refusal);
        }
        problem
    }

    /// Notes that `addr`'s run (of refusals, or of failures) was reported.
    fn mark_reported(&mut self, now: Instant, addr: &str, refusal: bool) {
        if refusal {
            if let Some(Some(run)) = self.refusals.get_mut(addr) {
                run.mark_reported(now);
            }
        } else if let Some(run) = &mut self.backoff.get_mut(addr).expect("inserted").report {
            run.mark_reported(now);
        }
    }

    /// Every bootstrap address with its last failure, once each failed
    /// since one last answered and nothing else is ready: reported once,
    /// then again after [`REPORT_AGAIN_AFTER`](crate::streak::REPORT_AGAIN_AFTER).
    fn bootstrap_unreachable(
        &mut self,
        now: Instant,
        any_ready: bool,
        bootstrap: &[String],
    ) -> Option<Problem> {
        if any_ready {
            return None;
        }
        let outage = Streak::note(&mut self.bootstrap_outage, (), now, Duration::MAX);
        if !outage.due(now, Duration::ZERO) {
            return None;
        }
        let mut attempts = Vec::new();
        for addr in bootstrap {
            match self.backoff.get(addr) {
                Some(AddrBackoff {
                    failures: 1..,
                    last_error: Some(e),
                    ..
                }) => attempts.push((addr.clone(), e.clone())),
                _ => return None,
            }
        }
        outage.mark_reported(now);
        Some(Problem::BootstrapUnreachable { attempts })
    }

    /// Each of `bootstrap` with its last failure, when every one failed
    /// since one last answered with a cause waiting does not cure soon
    /// (see [`Cluster::refused_everywhere`](super::Cluster::refused_everywhere)).
    pub fn refused_everywhere(
        &self,
        bootstrap: &[String],
    ) -> Option<Vec<(String, ConnectionError)>> {
        bootstrap
            .iter()
            .map(|addr| match self.backoff.get(addr) {
                Some(AddrBackoff {
                    failures: 1..,
                    last_error: Some(e),
                    ..
                }) if e.is_refusal()
                    || matches!(
                        e,
                        ConnectionError::Refused { .. } | ConnectionError::Resolve { .. }
                    ) =>
                {
                    Some((addr.clone(), e.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// A connection to `addr` answered a request: its run of failures is
    /// over.
    pub fn answered(&mut self, addr: &str) {
        self.backoff.remove(addr);
        // An address that refuses this client after answering (a broker
        // that answers garbage sometimes) is not news again before its
        // time.
        if !self.refusals.contains_key(addr) {
            self.bootstrap_outage = None;
        }
    }
}
