//! What a `poll` takes from the core (records, decoded here or by the
//! caller, and errors), and `max.poll.interval.ms`: the member leaves the
//! group when the application stops polling, and rejoins at its next poll.

use super::{ConsumerCore, Mode, Taken};
use crate::error::Error;
use crate::fetch::{ConsumerRecord, Decoded};
use std::time::{Duration, Instant};

/// `max.poll.interval.ms`: when the application last polled, and whether
/// the member left the group for want of a `poll`.
#[derive(Debug)]
pub(super) struct PollInterval {
    max: Duration,
    last_poll: Option<Instant>,
    left: bool,
}

impl PollInterval {
    pub(super) fn new(max: Duration) -> Self {
        PollInterval {
            max,
            last_poll: None,
            left: false,
        }
    }

    /// The application polled at `now`; `true` when the member had left
    /// for want of a `poll` (it joins again).
    fn polled(&mut self, now: Instant) -> bool {
        self.last_poll = Some(now);
        std::mem::take(&mut self.left)
    }

    /// Whether the member left the group for want of a `poll`.
    pub(super) fn left(&self) -> bool {
        self.left
    }

    /// When the member leaves without a `poll`, while `active` (a stable
    /// member, not closing).
    fn deadline(&self, active: bool) -> Option<Instant> {
        active
            .then_some(self.last_poll)
            .flatten()
            .map(|t| t + self.max)
    }
}

impl ConsumerCore {
    /// What a `poll` takes: the first error, else at most `max` records
    /// (added to `out`) of those decoded already, and the chunks to decode
    /// next (see [`Fetcher::take_ready`]). `Taken::wake` says whether the
    /// step freed something the background task acts on (a partition's
    /// buffer emptied, an error taken), so that it is woken then and only
    /// then.
    pub fn take_for_poll(&mut self, max: usize, out: &mut Vec<ConsumerRecord>) -> Taken {
        if let Some(e) = self.take_error() {
            return Taken {
                error: Some(e),
                had_buffered: true,
                wake: true,
                decode: Vec::new(),
            };
        }
        let had_buffered = self.fetcher.has_buffered();
        let before = self.fetcher.drained();
        let decode = self.fetcher.take_ready(max, out);
        Taken {
            error: None,
            had_buffered,
            wake: self.fetcher.drained() != before,
            decode,
        }
    }

    /// Puts back the chunks a `poll` decoded, then takes on as
    /// [`ConsumerCore::take_for_poll`] does (no error is taken: the
    /// records come first).
    pub fn take_decoded(
        &mut self,
        decoded: Vec<Decoded>,
        max: usize,
        out: &mut Vec<ConsumerRecord>,
    ) -> Taken {
        let before = self.fetcher.drained();
        for d in decoded {
            self.fetcher.put_decoded(d);
        }
        let decode = self.fetcher.take_ready(max, out);
        Taken {
            error: None,
            had_buffered: true,
            wake: self.fetcher.drained() != before,
            decode,
        }
    }

    /// Records for the application, at most `max` (decoded here).
    #[cfg(all(test, feature = "mock"))]
    pub fn take_records(&mut self, max: usize) -> Vec<ConsumerRecord> {
        self.fetcher.take_records(max)
    }

    /// Whether `poll` has something to take: records, an error or a group
    /// event for the rebalance listener. The background task wakes a
    /// waiting `poll` only then.
    pub fn has_output(&self) -> bool {
        self.reports.has_errors()
            || self.listener.has_output()
            || self.fetcher.has_buffered()
            || self.fetcher.has_errors()
    }

    /// Errors for the application.
    pub fn take_error(&mut self) -> Option<Error> {
        if let Some(e) = self.reports.take_error() {
            return Some(e);
        }
        let mut errors = self.fetcher.take_errors().into_iter().map(Error::Fetch);
        let first = errors.next();
        self.reports.queue(errors);
        first
    }

    /// Records that the application polled (for `max.poll.interval.ms`).
    /// Returns whether the driver has something new to do (a rejoin, or a
    /// first auto-commit deadline); a later `max.poll.interval.ms`
    /// deadline alone needs no wake-up: the driver re-reads `last_poll`
    /// when the earlier one comes.
    pub fn polled(&mut self, now: Instant) -> bool {
        let mut changed = false;
        if self.poll_interval.polled(now) {
            // Join again: the next drive sends JoinGroup.
            match (&mut self.membership, &self.mode) {
                (Some(m), Mode::Subscribed(topics)) => m.subscribe(topics.clone()),
                (Some(m), Mode::Pattern(pattern)) => {
                    self.matched_generation = Some(self.cluster.metadata_generation());
                    m.subscribe_pattern(
                        pattern,
                        self.cluster.metadata(),
                        self.exclude_internal_topics,
                    );
                }
                _ => {}
            }
            changed = true;
        }
        if self.commits.start_auto(now) {
            changed = true;
        }
        changed
    }

    pub(super) fn poll_deadline(&self) -> Option<Instant> {
        let stable = self.membership.as_ref().is_some_and(|m| m.is_stable());
        self.poll_interval.deadline(stable && !self.closing)
    }

    pub(super) fn check_poll_interval(&mut self, now: Instant) {
        let Some(deadline) = self.poll_deadline() else {
            return;
        };
        if now < deadline {
            return;
        }
        // Java's behaviour: a member that does not poll within
        // max.poll.interval.ms leaves the group, so its partitions go to
        // members that make progress; it joins again at its next poll.
        log::warn!(
            "no poll for max.poll.interval.ms ({:?}): leaving the group",
            self.poll_interval.max
        );
        self.leave_group(now, "max.poll.interval.ms passed without a poll");
        self.poll_interval.left = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poll_interval_counts_from_the_last_poll_while_active() {
        let now = Instant::now();
        let max = Duration::from_secs(30);
        let mut interval = PollInterval::new(max);
        assert_eq!(interval.deadline(true), None, "no poll yet");
        assert!(!interval.polled(now));
        assert_eq!(interval.deadline(true), Some(now + max));
        assert_eq!(interval.deadline(false), None, "not a stable member");
        interval.left = true;
        assert!(interval.left());
        assert!(
            interval.polled(now + max),
            "the member left: it joins again"
        );
        assert!(!interval.left());
        assert_eq!(interval.deadline(true), Some(now + 2 * max));
    }
}
