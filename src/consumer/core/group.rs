//! The group side of the consumer: the mode (subscribe, subscribe to a
//! pattern, assign, unsubscribe), the membership driven each step, its
//! events (assignments, revocations) for the fetcher and the rebalance
//! listener, and the steps of closing (commit, revoke, LeaveGroup).

use super::super::offsets::OffsetAndEpoch;
use super::{CommitId, ConsumerCore, Mode, Pending};
use crate::cluster::{RequestId, Target};
use crate::group::membership::{GroupEvent, GroupRequestKind};
use crate::group::{GroupProtocol, TopicPartition};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

/// Offsets by partition, as a commit takes them.
type Offsets = BTreeMap<TopicPartition, OffsetAndEpoch>;

/// The group's events on their way to the rebalance listener, what the
/// revocations among them hold back, and the count of rebalances.
#[derive(Debug, Default)]
pub(super) struct ListenerEvents {
    events: VecDeque<GroupEvent>,
    /// A `poll` is giving the events to the listener: they are not output
    /// for the other `poll`s meanwhile.
    busy: bool,
    /// With a rebalance listener, the group waits for `poll` to deliver
    /// revocations (so the listener can commit) before rejoining; so it
    /// does without automatic commits (so the application's commit after
    /// processing lands, see `revoked_offsets`).
    hold: bool,
    /// Revocations not yet given to the application: the group does not
    /// rejoin meanwhile.
    undelivered_revocations: usize,
    /// Positions of revoked partitions, for the listener.
    revoked_positions: BTreeMap<TopicPartition, i64>,
    /// What a commit of the consumed positions takes for the partitions
    /// revoked while the group waits for the next `poll`: their records
    /// were returned before the revocation, and the member is still in
    /// the generation that owned them.
    revoked_offsets: Offsets,
    /// Completed rebalances (assignments received), and when the last one
    /// completed.
    rebalances: u64,
    last_rebalance: Option<Instant>,
}

impl ListenerEvents {
    /// Whether events wait for a `poll` (not one giving them already).
    pub(super) fn has_output(&self) -> bool {
        !self.events.is_empty() && !self.busy
    }

    /// Partitions were revoked at `positions`, whose commit takes
    /// `offsets`. Unless commits are automatic and no listener holds the
    /// group, the group waits for a `poll` to give the application the
    /// revocation, and the application's next commit covers them.
    fn revoked(&mut self, positions: &Offsets, offsets: &Offsets, auto_commit: bool) {
        self.revoked_positions
            .extend(positions.iter().map(|(tp, o)| (tp.clone(), o.offset)));
        if self.hold || !auto_commit {
            self.undelivered_revocations += 1;
            self.revoked_offsets.extend(offsets.clone());
        }
    }

    /// Queues `event` for the listener, come at `now`.
    fn push(&mut self, now: Instant, event: GroupEvent) {
        if matches!(event, GroupEvent::Assigned(_)) {
            self.rebalances += 1;
            self.last_rebalance = Some(now);
        }
        self.events.push_back(event);
    }

    /// Whether the group must wait for a `poll` before rejoining.
    fn holds_rejoin(&self) -> bool {
        self.undelivered_revocations > 0
    }

    /// What a commit of consumed positions adds for partitions revoked
    /// since the last `poll`.
    pub(super) fn revoked_offsets(&self) -> &Offsets {
        &self.revoked_offsets
    }
}

impl ConsumerCore {
    /// Completed rebalances and when the last one completed (the core reads
    /// no clock: the caller turns it into wall time).
    pub fn rebalances(&self) -> (u64, Option<Instant>) {
        (self.listener.rebalances, self.listener.last_rebalance)
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
        self.listener.busy = busy;
    }

    /// Whether group events wait for the rebalance listener.
    pub fn has_group_events(&self) -> bool {
        !self.listener.events.is_empty()
    }

    /// Group events for the rebalance listener.
    pub fn take_group_event(&mut self) -> Option<GroupEvent> {
        self.listener.events.pop_front()
    }

    /// A group event taken with [`ConsumerCore::take_group_event`] was given
    /// to the listener.
    pub fn group_event_delivered(&mut self) {
        let listener = &mut self.listener;
        if listener
            .events
            .iter()
            .all(|e| !matches!(e, GroupEvent::Revoked(_)))
        {
            listener.undelivered_revocations = 0;
            listener.revoked_positions.clear();
            listener.revoked_offsets.clear();
        }
    }

    /// Makes the group wait for the listener before rejoining.
    pub fn set_hold_for_listener(&mut self, hold: bool) {
        self.listener.hold = hold;
    }

    /// The positions the revoked partitions had, for the listener.
    pub fn revoked_positions(&self) -> &BTreeMap<TopicPartition, i64> {
        &self.listener.revoked_positions
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
                let offsets = self.committable(Some(revoked));
                self.listener
                    .revoked(&positions, &offsets, self.commits.is_auto());
                // Without automatic commits the application commits what
                // it processed (after a poll, or in its listener): the
                // group waits for the next poll, as the Java consumer
                // revokes only inside poll, and a commit until then
                // covers the revoked partitions too (Kafka accepts it: the
                // group waits for this member's JoinGroup).
                if self.commits.is_auto() && !offsets.is_empty() {
                    let request = self.send_commit(now, None, offsets);
                    self.commits.block_on(request);
                }
            }
            if let Some(m) = &self.membership {
                self.fetcher.assign(m.assignment().iter().cloned());
            }
            self.prune_offset_store();
            self.listener.push(now, e);
            self.update_topics();
        }
    }

    /// Under a classic pattern subscription, matches the pattern again
    /// whenever the metadata changed (every `metadata.max.age.ms` at the
    /// latest): topics that appear or disappear change the subscription,
    /// and the member rejoins (as the Java client does).
    pub(super) fn drive_pattern(&mut self) {
        if self.closing || self.poll_interval.left() {
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
        if self.closing || self.poll_interval.left() {
            return;
        }
        if let Some(id) = self.commits.blocking() {
            if self.in_flight.contains_key(&id) {
                return;
            }
            self.commits.block_on(None);
        }
        if self.listener.holds_rejoin() {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(tp: &TopicPartition, offset: i64) -> Offsets {
        BTreeMap::from([(
            tp.clone(),
            OffsetAndEpoch {
                offset,
                leader_epoch: None,
            },
        )])
    }

    #[test]
    fn a_revocation_holds_the_rejoin_until_given_unless_commits_are_automatic() {
        let tp = TopicPartition::new("t", 0);
        let mut auto = ListenerEvents::default();
        auto.revoked(&offsets(&tp, 5), &offsets(&tp, 5), true);
        assert!(!auto.holds_rejoin(), "the automatic commit covers it");
        assert!(auto.revoked_offsets().is_empty());
        assert_eq!(auto.revoked_positions.get(&tp), Some(&5));

        let mut held = ListenerEvents {
            hold: true,
            ..ListenerEvents::default()
        };
        held.revoked(&offsets(&tp, 5), &offsets(&tp, 4), true);
        assert!(held.holds_rejoin(), "a listener holds the group");
        assert_eq!(held.revoked_offsets(), &offsets(&tp, 4));

        let mut manual = ListenerEvents::default();
        manual.revoked(&offsets(&tp, 5), &offsets(&tp, 5), false);
        assert!(
            manual.holds_rejoin(),
            "the application commits what it read"
        );
    }

    #[test]
    fn events_are_output_unless_a_poll_gives_them_already_and_assignments_count_rebalances() {
        let now = Instant::now();
        let tp = TopicPartition::new("t", 0);
        let mut events = ListenerEvents::default();
        assert!(!events.has_output());
        events.push(now, GroupEvent::Revoked(BTreeSet::from([tp.clone()])));
        assert_eq!(events.rebalances, 0);
        events.push(now, GroupEvent::Assigned(BTreeSet::from([tp])));
        assert_eq!((events.rebalances, events.last_rebalance), (1, Some(now)));
        assert!(events.has_output());
        events.busy = true;
        assert!(!events.has_output());
    }
}
