//! The group side of the consumer: the mode (subscribe, subscribe to a
//! pattern, assign, unsubscribe), the membership driven each step, its
//! events (assignments, revocations) for the fetcher and the rebalance
//! listener, and the steps of closing (commit, revoke, LeaveGroup).

use super::{CommitId, ConsumerCore, Mode, Pending};
use crate::cluster::{RequestId, Target};
use crate::group::membership::{GroupEvent, GroupRequestKind};
use crate::group::{GroupProtocol, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

impl ConsumerCore {
    /// Completed rebalances and when the last one completed (the core reads
    /// no clock: the caller turns it into wall time).
    pub fn rebalances(&self) -> (u64, Option<Instant>) {
        (self.rebalances, self.last_rebalance)
    }

    /// Sets the mode (subscribe, assign, unsubscribe).
    pub fn set_mode(&mut self, now: Instant, mode: Mode) {
        if mode == self.mode {
            return;
        }
        let classic_pattern = matches!(mode, Mode::Pattern(_))
            && self
                .membership
                .as_ref()
                .is_some_and(|m| m.protocol() == GroupProtocol::Classic);
        // A classic pattern is matched against every topic; otherwise the
        // metadata covers the topics in use only.
        self.cluster.set_all_topics(classic_pattern);
        self.matched_generation = None;
        match &mode {
            Mode::Subscribed(topics) => {
                if let Some(m) = &mut self.membership {
                    m.subscribe(topics.clone());
                }
            }
            Mode::Pattern(pattern) => {
                if let Some(m) = &mut self.membership {
                    self.matched_generation = Some(self.cluster.metadata_generation());
                    m.subscribe_pattern(
                        pattern,
                        self.cluster.metadata(),
                        self.exclude_internal_topics,
                    );
                }
            }
            Mode::Assigned(tps) => {
                self.leave_group(now, "switching to manual assignment");
                self.fetcher.assign(tps.iter().cloned());
            }
            Mode::Idle => {
                self.leave_group(now, "unsubscribed");
                self.fetcher.assign(std::iter::empty());
            }
        }
        self.mode = mode;
        self.mode_generation += 1;
        self.prune_offset_store();
        self.update_topics();
    }

    /// Marks whether a `poll` is giving group events to the rebalance
    /// listener (see [`ConsumerCore::has_output`]).
    pub fn set_listener_busy(&mut self, busy: bool) {
        self.listener_busy = busy;
    }

    /// Whether group events wait for the rebalance listener.
    pub fn has_group_events(&self) -> bool {
        !self.group_events.is_empty()
    }

    /// Group events for the rebalance listener.
    pub fn take_group_event(&mut self) -> Option<GroupEvent> {
        self.group_events.pop_front()
    }

    /// A group event taken with [`ConsumerCore::take_group_event`] was given
    /// to the listener.
    pub fn group_event_delivered(&mut self) {
        if self
            .group_events
            .iter()
            .all(|e| !matches!(e, GroupEvent::Revoked(_)))
        {
            self.undelivered_revocations = 0;
            self.revoked_positions.clear();
            self.revoked_offsets.clear();
        }
    }

    /// Makes the group wait for the listener before rejoining.
    pub fn set_hold_for_listener(&mut self, hold: bool) {
        self.hold_for_listener = hold;
    }

    /// The positions the revoked partitions had, for the listener.
    pub fn revoked_positions(&self) -> &BTreeMap<TopicPartition, i64> {
        &self.revoked_positions
    }

    pub(super) fn leave_group(&mut self, now: Instant, reason: &str) {
        let now_request = self.membership.as_mut().and_then(|m| {
            let r = m.leave(reason);
            m.subscribe(BTreeSet::new());
            r
        });
        self.collect_group_events(now);
        if let Some(request) = now_request {
            let id = self.cluster.request(now, Target::Coordinator, request);
            self.in_flight
                .insert(id, Pending::Group(GroupRequestKind::Leave));
        }
    }

    /// Takes the membership's events: revoked partitions' offsets are
    /// committed first (auto-commit, as Java does in onJoinPrepare), then the
    /// fetcher follows the new assignment.
    fn collect_group_events(&mut self, now: Instant) {
        loop {
            let Some(e) = self.membership.as_mut().and_then(|m| m.poll_event()) else {
                return;
            };
            if let GroupEvent::Revoked(revoked) = &e {
                let positions = self.consumed_positions(Some(revoked));
                self.revoked_positions
                    .extend(positions.iter().map(|(tp, o)| (tp.clone(), o.offset)));
                let offsets = self.committable(Some(revoked));
                // Without automatic commits the application commits what
                // it processed (after a poll, or in its listener): the
                // group waits for the next poll, as the Java consumer
                // revokes only inside poll, and a commit until then
                // covers the revoked partitions too (Kafka accepts it: the
                // group waits for this member's JoinGroup).
                if self.hold_for_listener || !self.commits.is_auto() {
                    self.undelivered_revocations += 1;
                    self.revoked_offsets.extend(offsets.clone());
                }
                if self.commits.is_auto() && !offsets.is_empty() {
                    let request = self.send_commit(now, None, offsets);
                    self.commits.block_on(request);
                }
            }
            if let Some(m) = &self.membership {
                self.fetcher.assign(m.assignment().iter().cloned());
            }
            self.prune_offset_store();
            if matches!(e, GroupEvent::Assigned(_)) {
                self.rebalances += 1;
                self.last_rebalance = Some(now);
            }
            self.group_events.push_back(e);
            self.update_topics();
        }
    }

    /// Under a classic pattern subscription, matches the pattern again
    /// whenever the metadata changed (every `metadata.max.age.ms` at the
    /// latest): topics that appear or disappear change the subscription,
    /// and the member rejoins (as the Java client does).
    pub(super) fn drive_pattern(&mut self) {
        if self.closing || self.left_for_poll_timeout {
            return;
        }
        let (Mode::Pattern(pattern), Some(m)) = (&self.mode, &mut self.membership) else {
            return;
        };
        if m.protocol() != GroupProtocol::Classic {
            return;
        }
        let generation = self.cluster.metadata_generation();
        if self.matched_generation == Some(generation) {
            return;
        }
        self.matched_generation = Some(generation);
        let before = m.topics().clone();
        let now_matched = m.subscribe_pattern(
            pattern,
            self.cluster.metadata(),
            self.exclude_internal_topics,
        );
        if let Some(topics) = now_matched.filter(|t| *t != before) {
            log::info!(
                "pattern {pattern:?} now matches {} topic(s): {}",
                topics.len(),
                topics.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
    }

    pub(super) fn drive_group(&mut self, now: Instant) {
        self.collect_group_events(now);
        if self.closing || self.left_for_poll_timeout {
            return;
        }
        if let Some(id) = self.commits.blocking() {
            if self.in_flight.contains_key(&id) {
                return;
            }
            self.commits.block_on(None);
        }
        if self.undelivered_revocations > 0 {
            return;
        }
        let Some(m) = &mut self.membership else {
            return;
        };
        let request = m.poll_request(now, self.cluster.metadata());
        let awaiting = m.awaiting_metadata().is_some();
        // KIP-848 assigns by topic id: an id the metadata does not know is
        // a topic never asked for by name (a regex subscription's, or one
        // created since the last refresh); it is looked up by id.
        let unresolved = m.unresolved_topic_ids();
        if !unresolved.is_empty() {
            self.cluster.set_topic_ids(unresolved);
            // Sent now, not at a later deadline.
            self.cluster.handle_timeout(now);
        } else {
            self.cluster.set_topic_ids(unresolved);
        }
        self.collect_group_events(now);
        if awaiting {
            self.update_topics();
        }
        if let Some((kind, body)) = request {
            let id = if kind == GroupRequestKind::Join {
                self.cluster
                    .request_with_timeout(now, Target::Coordinator, body, self.join_timeout)
            } else {
                self.cluster.request(now, Target::Coordinator, body)
            };
            self.in_flight.insert(id, Pending::Group(kind));
        }
    }

    /// Starts closing: commit (when auto-commit is on), leave the group.
    /// Returns the commit to wait for, if any.
    pub fn begin_close(&mut self, now: Instant) -> Option<CommitId> {
        self.closing = true;
        (self.commits.is_auto() && self.group_id.is_some()).then(|| self.commit(now, None))
    }

    /// Closing, step two: gives up the partitions (the rebalance listener
    /// hears of it at the next delivery of group events, and may commit)
    /// and prepares the LeaveGroup that [`ConsumerCore::send_leave`] sends.
    pub fn prepare_leave(&mut self, now: Instant) {
        self.pending_leave = self
            .membership
            .as_mut()
            .and_then(|m| m.leave("the consumer is closing"));
        self.collect_group_events(now);
    }

    /// Whether commits the group must wait for (revocations) are done.
    pub fn revocation_commits_done(&self) -> bool {
        self.commits
            .blocking()
            .is_none_or(|id| !self.in_flight.contains_key(&id))
    }

    /// Closing, step three: sends the LeaveGroup prepared before, if any.
    pub fn send_leave(&mut self, now: Instant) -> Option<RequestId> {
        let request = self.pending_leave.take()?;
        let id = self.cluster.request(now, Target::Coordinator, request);
        self.in_flight
            .insert(id, Pending::Group(GroupRequestKind::Leave));
        Some(id)
    }

    /// Whether request `id` is still waiting for its response.
    pub fn is_in_flight(&self, id: RequestId) -> bool {
        self.in_flight.contains_key(&id)
    }
}
