//! What comes of failures: a partition's retry wait ([`Retry`], under the
//! [`Backoff`] policy), and which failures are reported to the
//! application and when ([`Reports`]): a failure that goes on is said
//! once it has lasted its grace, then again only every
//! [`REPORT_AGAIN_AFTER`](crate::cluster::REPORT_AGAIN_AFTER), as a
//! [`Streak`] of one error code.

use super::request::{classify, ErrorClass};
use super::{FetchError, TopicPartition};
use crate::cluster::{ExponentialBackoff, Rng, Target};
use crate::protocol::{ApiKey, ErrorCode};
use crate::streak::Streak;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a partition's fetches may keep failing with an error that a
/// metadata refresh should cure ([`ErrorClass::Leader`]:
/// NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR, ...) before it is
/// reported: a leader that moved is found within it.
pub(super) const LEADER_ERRORS_REPORTED_AFTER: Duration = Duration::from_secs(1);

/// A partition's failures: its run under the retry policy, and the run of
/// one error code it is in (for reporting).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Retry {
    pub(super) run: crate::cluster::Retry,
    /// The run of failures with one error code this partition is in.
    pub(super) streak: Option<Streak<ErrorCode>>,
}

impl Retry {
    /// Whether its retry wait ended by `now` (and is still to be cleared).
    pub(super) fn due(&self, now: Instant) -> bool {
        self.run.not_before().is_some_and(|t| t <= now)
    }

    /// Whether it waits at `now` before it is asked again.
    pub(super) fn backing_off(&self, now: Instant) -> bool {
        !self.run.ready(now)
    }
}

/// The retry policy (`retry.backoff.ms` growing to
/// `retry.backoff.max.ms`) with its jitter source.
#[derive(Debug)]
pub(super) struct Backoff {
    policy: ExponentialBackoff,
    rng: Rng,
}

impl Backoff {
    /// The policy, its jitter seeded with `seed`.
    pub(super) fn new(policy: ExponentialBackoff, seed: u64) -> Self {
        Backoff {
            policy,
            rng: Rng::new(seed),
        }
    }

    /// A failure at `now`: `retry` waits before it is asked again.
    pub(super) fn failed(&mut self, retry: &mut Retry, now: Instant) {
        retry.run.failed(now, &self.policy, self.rng.unit());
    }

    /// The longest wait between two failures of one run ([`Streak`]):
    /// twice the longest retry backoff.
    pub(super) fn max_gap(&self) -> Duration {
        self.policy.max.saturating_mul(2)
    }
}

/// How long failures of `class` must last before they are reported.
pub(super) fn report_grace(class: ErrorClass) -> Duration {
    match class {
        ErrorClass::Leader => LEADER_ERRORS_REPORTED_AFTER,
        ErrorClass::Authorization | ErrorClass::Other => Duration::ZERO,
    }
}

/// A partition's error code from `broker` in an `api` answer (Fetch,
/// ListOffsets, OffsetForLeaderEpoch).
#[derive(Debug, Clone, Copy)]
pub(super) struct Refusal<'a> {
    pub(super) api: ApiKey,
    pub(super) broker: i32,
    pub(super) partition: &'a TopicPartition,
    pub(super) code: ErrorCode,
}

/// The errors waiting for [`Fetcher::take_errors`](super::Fetcher::take_errors),
/// and per connection target the run of whole-response Fetch errors it
/// is in (gone once it answers without one).
#[derive(Debug)]
pub(super) struct Reports {
    queue: Vec<FetchError>,
    top: BTreeMap<Target, Option<Streak<ErrorCode>>>,
    /// The longest wait between two failures of one run.
    max_gap: Duration,
}

impl Reports {
    /// No error yet; `max_gap`: see [`Backoff::max_gap`].
    pub(super) fn new(max_gap: Duration) -> Self {
        Reports {
            queue: Vec::new(),
            top: BTreeMap::new(),
            max_gap,
        }
    }

    /// Queues `error`.
    pub(super) fn push(&mut self, error: FetchError) {
        self.queue.push(error);
    }

    /// How many errors are queued.
    pub(super) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether none is queued.
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Moves the queued errors, oldest first, to the end of `out`.
    pub(super) fn take_into(&mut self, out: &mut Vec<FetchError>) {
        out.append(&mut self.queue);
    }

    /// What a partition's error code does besides the retry: an
    /// authorization failure is reported for its topic; any other error
    /// is reported when its run (in `streak`, the partition's) is due
    /// ([`Streak::due`]: at once for an error of no known cure, once it
    /// has lasted [`LEADER_ERRORS_REPORTED_AFTER`] for one a metadata
    /// refresh should cure, since a leader that moved is found within it;
    /// then only after
    /// [`REPORT_AGAIN_AFTER`](crate::cluster::REPORT_AGAIN_AFTER)).
    /// Returns whether the metadata is to be refreshed.
    pub(super) fn partition_error(
        &mut self,
        streak: &mut Option<Streak<ErrorCode>>,
        now: Instant,
        refusal: Refusal<'_>,
    ) -> bool {
        let Refusal {
            api,
            broker,
            partition: tp,
            code,
        } = refusal;
        let class = classify(code);
        if class == ErrorClass::Authorization {
            self.authorization(&tp.topic);
            return false;
        }
        let leader = class == ErrorClass::Leader;
        let api = api.name();
        let streak = Streak::note(streak, code, now, self.max_gap);
        if streak.due(now, report_grace(class)) {
            log::warn!(
                "{api} of {tp} from broker {broker}: {code} (failing for {:?}); {}retrying",
                streak.lasted(now),
                if leader {
                    "refreshing metadata and "
                } else {
                    ""
                }
            );
            streak.mark_reported(now);
            self.queue.push(FetchError::Broker {
                broker,
                partition: Some(tp.clone()),
                code,
            });
        } else {
            log::debug!("{api} of {tp} from broker {broker}: {code}; retrying");
        }
        // UNKNOWN_LEADER_EPOCH: the broker has not yet seen the leader
        // epoch we know (a leader change it learns a moment later, as
        // after a KIP-951 hint); the metadata cannot be newer than ours,
        // so it is asked for only if the broker stays behind.
        leader && (code != ErrorCode::UnknownLeaderEpoch || streak.failures() > 1)
    }

    /// A Fetch answer from `target` with the whole-response error `code`:
    /// said once while it lasts, as a partition's error is (per
    /// connection target), once it has lasted its grace.
    pub(super) fn response_error(&mut self, now: Instant, target: Target, code: ErrorCode) {
        let broker = super::broker_of(target);
        let slot = self.top.entry(target).or_default();
        let streak = Streak::note(slot, code, now, self.max_gap);
        if streak.due(now, report_grace(classify(code))) {
            log::warn!(
                "Fetch response of broker {broker}: {code} (failing for {:?}); retrying",
                streak.lasted(now)
            );
            streak.mark_reported(now);
            self.queue.push(FetchError::Broker {
                broker,
                partition: None,
                code,
            });
        } else {
            log::debug!("Fetch response of broker {broker}: {code}; retrying");
        }
    }

    /// A Fetch answer from `target` without a whole-response error: its
    /// run is over.
    pub(super) fn response_good(&mut self, target: Target) {
        self.top.remove(&target);
    }

    /// Queues a [`FetchError::TopicAuthorization`] unless one for the
    /// topic is still waiting to be taken: one per topic, not one per
    /// partition.
    pub(super) fn authorization(&mut self, topic: &str) {
        let known = self
            .queue
            .iter()
            .any(|e| matches!(e, FetchError::TopicAuthorization { topic: t } if t == topic));
        if !known {
            log::warn!("not authorized to read topic {topic}");
            self.queue.push(FetchError::TopicAuthorization {
                topic: topic.to_owned(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::REPORT_AGAIN_AFTER;

    const MS: Duration = Duration::from_millis(1);

    fn reports() -> Reports {
        Reports::new(Duration::from_secs(2))
    }

    fn taken(r: &mut Reports) -> Vec<FetchError> {
        let mut out = Vec::new();
        r.take_into(&mut out);
        out
    }

    fn refusal(tp: &TopicPartition, code: ErrorCode) -> Refusal<'_> {
        Refusal {
            api: ApiKey::Fetch,
            broker: 1,
            partition: tp,
            code,
        }
    }

    #[test]
    fn a_leader_error_is_reported_once_it_lasted_then_a_while_later() {
        let tp = TopicPartition::new("t", 0);
        let mut r = reports();
        let mut streak = None;
        let t0 = Instant::now();
        let mut reported = Vec::new();
        let mut now = t0;
        while now <= t0 + REPORT_AGAIN_AFTER + LEADER_ERRORS_REPORTED_AFTER {
            let refresh = r.partition_error(
                &mut streak,
                now,
                refusal(&tp, ErrorCode::NotLeaderOrFollower),
            );
            assert!(refresh);
            if !r.is_empty() {
                assert_eq!(r.len(), 1);
                taken(&mut r);
                reported.push(now - t0);
            }
            now += 500 * MS;
        }
        assert_eq!(
            reported,
            [
                LEADER_ERRORS_REPORTED_AFTER,
                LEADER_ERRORS_REPORTED_AFTER + REPORT_AGAIN_AFTER
            ]
        );
    }

    #[test]
    fn another_error_is_reported_at_once_and_asks_no_refresh() {
        let tp = TopicPartition::new("t", 0);
        let mut r = reports();
        let mut streak = None;
        let now = Instant::now();
        assert!(!r.partition_error(&mut streak, now, refusal(&tp, ErrorCode::CorruptMessage)));
        assert_eq!(
            taken(&mut r),
            [FetchError::Broker {
                broker: 1,
                partition: Some(tp.clone()),
                code: ErrorCode::CorruptMessage
            }]
        );
        assert!(!r.partition_error(
            &mut streak,
            now + MS,
            refusal(&tp, ErrorCode::CorruptMessage)
        ));
        assert!(r.is_empty(), "said once while it lasts");
    }

    #[test]
    fn an_authorization_failure_is_said_once_per_topic_while_it_waits() {
        let mut r = reports();
        let now = Instant::now();
        for p in 0..3 {
            let tp = TopicPartition::new("secret", p);
            let mut streak = None;
            let refused = refusal(&tp, ErrorCode::TopicAuthorizationFailed);
            assert!(!r.partition_error(&mut streak, now, refused));
            assert!(streak.is_none());
        }
        let said = taken(&mut r);
        assert_eq!(
            said,
            [FetchError::TopicAuthorization {
                topic: "secret".into()
            }]
        );
        // Taken: said again at the next one.
        r.authorization("secret");
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn a_response_error_is_said_per_target_and_a_good_answer_ends_its_run() {
        let mut r = reports();
        let t0 = Instant::now();
        let target = Target::Broker(2);
        r.response_error(t0, target, ErrorCode::NotLeaderOrFollower);
        r.response_error(t0, Target::Replica(2), ErrorCode::NotLeaderOrFollower);
        assert!(r.is_empty(), "within its grace");
        r.response_error(
            t0 + LEADER_ERRORS_REPORTED_AFTER,
            target,
            ErrorCode::NotLeaderOrFollower,
        );
        assert_eq!(
            taken(&mut r),
            [FetchError::Broker {
                broker: 2,
                partition: None,
                code: ErrorCode::NotLeaderOrFollower
            }]
        );
        r.response_good(target);
        let later = t0 + 2 * LEADER_ERRORS_REPORTED_AFTER;
        r.response_error(later, target, ErrorCode::NotLeaderOrFollower);
        assert!(r.is_empty(), "a new run, within its grace again");
    }

    #[test]
    fn backing_off_waits_for_the_policy() {
        let policy = ExponentialBackoff {
            base: 100 * MS,
            max: 1000 * MS,
            jitter: 0.0,
        };
        let mut backoff = Backoff::new(policy, 0);
        assert_eq!(backoff.max_gap(), 2000 * MS);
        let mut retry = Retry::default();
        let now = Instant::now();
        assert!(!retry.backing_off(now) && !retry.due(now));
        backoff.failed(&mut retry, now);
        assert!(retry.backing_off(now) && !retry.due(now));
        assert!(!retry.backing_off(now + 100 * MS) && retry.due(now + 100 * MS));
    }
}
