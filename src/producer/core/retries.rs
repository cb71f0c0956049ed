//! Each partition's run of retried failures: how long its next retry
//! waits (the one retry policy), the last failure (for a timeout's
//! message), and the rate-limited `warn` line that names a failure which
//! lasts. A delivery ends the run.

use crate::cluster::{ExponentialBackoff, Retry};
use crate::group::TopicPartition;
use crate::streak::Streak;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a partition's Produce requests fail (and are retried) before a
/// `warn` line names the failure: longer than a leader move takes to be
/// found again, short enough that a user hears within seconds.
pub(super) const RETRY_WARN_GRACE: Duration = Duration::from_secs(1);

/// The partitions' runs of failures.
#[derive(Debug, Default)]
pub(super) struct Retries {
    /// Each partition's retries wait longer each time, under the policy.
    backoff: BTreeMap<TopicPartition, Retry>,
    /// The last failure of each partition.
    last_failure: BTreeMap<TopicPartition, String>,
    /// Each partition's run, for the `warn` line.
    runs: BTreeMap<TopicPartition, Option<Streak<String>>>,
}

impl Retries {
    /// A batch of `tp` was delivered: its run ends.
    pub(super) fn delivered(&mut self, tp: &TopicPartition) {
        self.backoff.remove(tp);
        self.last_failure.remove(tp);
        self.runs.remove(tp);
    }

    /// A batch of `records` records of `tp` failed at `now` for `why` and
    /// is sent again: returns how long it waits first (none when `at_once`,
    /// else `policy`'s delay with jitter `unit`). Names the failure at
    /// `warn` once the run lasts `RETRY_WARN_GRACE`, then again every
    /// `REPORT_AGAIN_AFTER` while it goes on: a leader that moves is found
    /// again within the grace and says nothing above debug.
    pub(super) fn failed(
        &mut self,
        now: Instant,
        tp: &TopicPartition,
        records: usize,
        why: String,
        at_once: bool,
        (policy, unit): (&ExponentialBackoff, f64),
    ) -> Duration {
        let run = Streak::note(
            self.runs.entry(tp.clone()).or_default(),
            why.clone(),
            now,
            Duration::MAX,
        );
        if run.due(now, RETRY_WARN_GRACE) {
            log::warn!(
                "{tp}: Produce failing for {} ms ({why}); {records} records wait, retried until delivery.timeout.ms (the producer goes on by itself)",
                run.lasted(now).as_millis(),
            );
            run.mark_reported(now);
        }
        let delay = if at_once {
            Duration::ZERO
        } else {
            self.backoff
                .entry(tp.clone())
                .or_default()
                .failed(now, policy, unit)
        };
        self.last_failure.insert(tp.clone(), why);
        delay
    }

    /// The last failure of `tp`, if a run goes on.
    pub(super) fn last_failure(&self, tp: &TopicPartition) -> Option<&String> {
        self.last_failure.get(tp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_longer_each_time_but_not_for_a_moved_leader_and_a_delivery_ends_the_run() {
        let mut retries = Retries::default();
        let policy = ExponentialBackoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(10),
            jitter: 0.0,
        };
        let tp = TopicPartition::new("t", 0);
        let now = Instant::now();
        let first = retries.failed(now, &tp, 1, "a".into(), false, (&policy, 0.5));
        let second = retries.failed(now, &tp, 1, "b".into(), false, (&policy, 0.5));
        assert_eq!(
            (first, second),
            (Duration::from_millis(100), Duration::from_millis(200))
        );
        assert_eq!(
            retries.failed(now, &tp, 1, "moved".into(), true, (&policy, 0.5)),
            Duration::ZERO
        );
        assert_eq!(retries.last_failure(&tp).map(String::as_str), Some("moved"));
        retries.delivered(&tp);
        assert_eq!(retries.last_failure(&tp), None);
        let again = retries.failed(now, &tp, 1, "c".into(), false, (&policy, 0.5));
        assert_eq!(again, Duration::from_millis(100), "a new run");
    }
}
