//! A run of failures of one kind, and when it was last reported: so that
//! a failure that goes on is said once it has lasted its grace, and then
//! again only every [`REPORT_AGAIN_AFTER`], not at every retry.
//!
//! ```text
//!  note(what) ──> a run begins (since = now)       another `what`, or a gap
//!      │                                           longer than `max_gap`:
//!      v                                           a new run begins
//!  due(now, grace)?  lasted `grace`, and not reported within REPORT_AGAIN_AFTER
//!      │ yes
//!      v
//!  mark_reported(now) ──> due again at next_due(grace)
//! ```
//!
//! `what` is whatever tells one kind of failure from another: an error
//! code, or `()` where any failure continues the run. A run a success
//! ends is dropped by its owner (an `Option<Streak<_>>` set to `None`).

use std::time::{Duration, Instant};

/// How long a condition that goes on (a broker still unreachable, a topic
/// still unknown, a partition still refused) waits before it is reported
/// again; the application sees it as `lazykafka::error::REPORT_AGAIN_AFTER`.
/// It is defined in this module, below `cluster`, so that every layer can
/// report with it.
pub(crate) const REPORT_AGAIN_AFTER: Duration = Duration::from_secs(60);

/// A run of failures with one `what` (an error code, say), and when it
/// was last reported.
///
/// A failure with another `what`, or one after a gap longer than the
/// `max_gap` given to [`Streak::note`], starts a new run: so a run that
/// is reported once it lasted is one failure after another, not two
/// outages far apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Streak<W> {
    what: W,
    since: Instant,
    last: Instant,
    failures: u32,
    reported: Option<Instant>,
}

impl<W: PartialEq> Streak<W> {
    /// A run that begins at `now` with one failure.
    pub(crate) fn new(what: W, now: Instant) -> Self {
        Streak {
            what,
            since: now,
            last: now,
            failures: 1,
            reported: None,
        }
    }

    /// Notes a failure with `what` at `now` in `slot` and returns the run
    /// it belongs to: the run in `slot` when it has the same `what` and
    /// its last failure was at most `max_gap` ago (`Duration::MAX`: no
    /// gap ends a run), else a new one.
    pub(crate) fn note(
        slot: &mut Option<Streak<W>>,
        what: W,
        now: Instant,
        max_gap: Duration,
    ) -> &mut Streak<W> {
        let goes_on = slot
            .as_ref()
            .is_some_and(|s| s.what == what && now.saturating_duration_since(s.last) <= max_gap);
        if goes_on {
            let streak = slot.as_mut().expect("checked above");
            streak.last = now;
            streak.failures = streak.failures.saturating_add(1);
            streak
        } else {
            slot.insert(Streak::new(what, now))
        }
    }

    /// Whether to report it at `now`: it has lasted `grace`, and was not
    /// reported within [`REPORT_AGAIN_AFTER`]. With a zero grace, a run
    /// is due at its first failure.
    pub(crate) fn due(&self, now: Instant, grace: Duration) -> bool {
        self.lasted(now) >= grace
            && self
                .reported
                .is_none_or(|t| now.saturating_duration_since(t) >= REPORT_AGAIN_AFTER)
    }

    /// How long it has lasted at `now`.
    pub(crate) fn lasted(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.since)
    }

    /// How long from its first failure to its last.
    pub(crate) fn span(&self) -> Duration {
        self.last.saturating_duration_since(self.since)
    }

    /// Notes that it was reported at `now`: it is due again
    /// [`REPORT_AGAIN_AFTER`] later.
    pub(crate) fn mark_reported(&mut self, now: Instant) {
        self.reported = Some(now);
    }
}

impl<W: PartialEq> Streak<W> {
    /// When it is due ([`Streak::due`]) with this `grace`: once it has
    /// lasted `grace`, and [`REPORT_AGAIN_AFTER`] after it was last
    /// reported. A deadline for a caller that wakes up to report it.
    pub(crate) fn next_due(&self, grace: Duration) -> Instant {
        let lasted = self.since + grace;
        match self.reported {
            None => lasted,
            Some(t) => lasted.max(t + REPORT_AGAIN_AFTER),
        }
    }

    /// What fails in it.
    pub(crate) fn what(&self) -> &W {
        &self.what
    }

    /// When it began.
    #[cfg(test)]
    pub(crate) fn since(&self) -> Instant {
        self.since
    }

    /// How many failures it has seen (at least 1).
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// When it was last reported, if it was.
    #[cfg(test)]
    pub(crate) fn reported(&self) -> Option<Instant> {
        self.reported
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stands for the error codes of a real caller.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum ErrorCode {
        NotLeaderOrFollower,
        KafkaStorageError,
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_run_goes_on_with_the_same_code_within_the_gap() {
        let t0 = Instant::now();
        let mut slot = None;
        Streak::note(&mut slot, ErrorCode::NotLeaderOrFollower, t0, 2 * SECOND);
        let run = Streak::note(
            &mut slot,
            ErrorCode::NotLeaderOrFollower,
            t0 + SECOND,
            2 * SECOND,
        );
        assert_eq!(run.since(), t0);
        assert_eq!(run.failures(), 2);
        assert_eq!(run.span(), SECOND);
        assert_eq!(run.lasted(t0 + 3 * SECOND), 3 * SECOND);
        assert_eq!(*run.what(), ErrorCode::NotLeaderOrFollower);
    }

    #[test]
    fn another_code_or_a_long_gap_starts_a_new_run() {
        let t0 = Instant::now();
        let mut slot = None;
        Streak::note(&mut slot, ErrorCode::NotLeaderOrFollower, t0, 2 * SECOND);
        let run = Streak::note(
            &mut slot,
            ErrorCode::KafkaStorageError,
            t0 + SECOND,
            2 * SECOND,
        );
        assert_eq!((run.since(), run.failures()), (t0 + SECOND, 1));
        // Exactly the gap still goes on; past it, a new run.
        let run = Streak::note(
            &mut slot,
            ErrorCode::KafkaStorageError,
            t0 + 3 * SECOND,
            2 * SECOND,
        );
        assert_eq!(run.since(), t0 + SECOND);
        let later = t0 + 5 * SECOND + Duration::from_millis(1);
        let run = Streak::note(&mut slot, ErrorCode::KafkaStorageError, later, 2 * SECOND);
        assert_eq!((run.since(), run.failures()), (later, 1));
    }

    #[test]
    fn a_reported_run_is_not_reset_by_the_same_failure() {
        let t0 = Instant::now();
        let mut slot = None;
        Streak::note(&mut slot, (), t0, Duration::MAX).mark_reported(t0);
        let run = Streak::note(&mut slot, (), t0 + 10 * REPORT_AGAIN_AFTER, Duration::MAX);
        assert_eq!(run.reported(), Some(t0));
        assert_eq!(run.since(), t0);
    }

    #[test]
    fn it_is_due_once_it_lasted_its_grace_then_after_report_again_after() {
        let t0 = Instant::now();
        let mut run = Streak::new(ErrorCode::NotLeaderOrFollower, t0);
        assert!(!run.due(t0, SECOND));
        assert_eq!(run.next_due(SECOND), t0 + SECOND);
        assert!(run.due(t0 + SECOND, SECOND));
        run.mark_reported(t0 + SECOND);
        assert!(!run.due(t0 + 2 * SECOND, SECOND));
        assert_eq!(run.next_due(SECOND), t0 + SECOND + REPORT_AGAIN_AFTER);
        assert!(!run.due(t0 + REPORT_AGAIN_AFTER, SECOND));
        assert!(run.due(t0 + SECOND + REPORT_AGAIN_AFTER, SECOND));
    }

    #[test]
    fn with_no_grace_it_is_due_at_once() {
        let t0 = Instant::now();
        let mut run = Streak::new((), t0);
        assert!(run.due(t0, Duration::ZERO));
        assert_eq!(run.next_due(Duration::ZERO), t0);
        run.mark_reported(t0);
        assert_eq!(run.next_due(Duration::ZERO), t0 + REPORT_AGAIN_AFTER);
    }

    #[test]
    fn next_due_agrees_with_due() {
        let t0 = Instant::now();
        for grace in [Duration::ZERO, SECOND, 2 * REPORT_AGAIN_AFTER] {
            for reported in [None, Some(t0), Some(t0 + 3 * SECOND)] {
                let mut run = Streak::new((), t0);
                if let Some(t) = reported {
                    run.mark_reported(t);
                }
                let at = run.next_due(grace);
                assert!(run.due(at, grace), "{grace:?} {reported:?}");
                if at > t0 {
                    let before = at - Duration::from_millis(1);
                    assert!(!run.due(before, grace), "{grace:?} {reported:?}");
                }
            }
        }
    }
}
