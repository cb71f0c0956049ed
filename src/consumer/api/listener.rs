//! The rebalance listener: the trait the application implements, the
//! [`Revocation`] it may commit through, and the delivery of group events
//! to it from inside `poll`, with no lock held.

use super::{at_offsets, Consumer};
use crate::error::Error;
use crate::group::membership::GroupEvent;
use crate::group::TopicPartition;
use std::collections::{BTreeMap, BTreeSet};

/// Told of partition assignment changes, from inside [`Consumer::poll`]
/// (as the Java client's `ConsumerRebalanceListener`).
///
/// The group does not move on until `poll` has called the listener: a
/// commit made in [`RebalanceListener::on_partitions_revoked`] through the
/// [`Revocation`] lands before the partitions go to another member.
pub trait RebalanceListener: Send {
    /// Partitions newly assigned to this consumer. Called after every
    /// completed rebalance, with an empty set when nothing new came (under
    /// `cooperative-sticky`, partitions kept are not repeated), as the Java
    /// client does (KIP-429).
    fn on_partitions_assigned(&mut self, partitions: &BTreeSet<TopicPartition>) {
        let _ = partitions;
    }

    /// Partitions given up in an orderly rebalance.
    fn on_partitions_revoked(
        &mut self,
        partitions: &BTreeSet<TopicPartition>,
        revocation: &mut Revocation<'_>,
    ) {
        let _ = (partitions, revocation);
    }

    /// Partitions lost (session expired, fenced): another member may own
    /// them already, so committing for them would fail.
    fn on_partitions_lost(&mut self, partitions: &BTreeSet<TopicPartition>) {
        let _ = partitions;
    }
}

/// What a [`RebalanceListener`] may do while partitions are revoked.
pub struct Revocation<'a> {
    consumer: &'a Consumer,
    positions: BTreeMap<TopicPartition, i64>,
}

impl std::fmt::Debug for Revocation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revocation")
            .field("positions", &self.positions)
            .finish_non_exhaustive()
    }
}

impl Revocation<'_> {
    /// The consumed positions the revoked partitions had.
    pub fn positions(&self) -> BTreeMap<TopicPartition, i64> {
        self.positions.clone()
    }

    /// Commits `offsets` before the group moves on. A refusal is logged at
    /// warn level; use [`Revocation::commit_with`] to handle it.
    pub fn commit(&mut self, offsets: BTreeMap<TopicPartition, i64>) {
        self.commit_with(offsets, |result| {
            if let Err(e) = result {
                log::warn!("a commit made while revoking partitions failed: {e}");
            }
        });
    }

    /// Commits `offsets` before the group moves on; `callback` runs with
    /// the outcome inside a later `poll` (or `close`), like
    /// [`Consumer::commit_async`]'s.
    pub fn commit_with(
        &mut self,
        offsets: BTreeMap<TopicPartition, i64>,
        callback: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) {
        let offsets = at_offsets(offsets);
        let id = self.consumer.with_core(|core, now| {
            let id = core.commit(now, Some(offsets));
            core.block_group_on_commit(id);
            id
        });
        self.consumer
            .local()
            .callbacks
            .push((id, Box::new(callback)));
    }
}

/// Ends the delivery of group events by one `poll` (see
/// [`Consumer::deliver_group_events`]), whatever way it ends, the
/// listener's panic included.
struct Delivering<'a> {
    consumer: &'a Consumer,
    listener: Option<Box<dyn RebalanceListener>>,
}

impl Drop for Delivering<'_> {
    fn drop(&mut self) {
        self.consumer
            .with_core(|core, _| core.set_listener_busy(false));
        let mut local = self.consumer.local();
        local.delivering = false;
        // A listener given meanwhile (a new subscription) replaces it.
        if local.listener.is_none() {
            local.listener = self.listener.take();
        }
    }
}

impl Consumer {
    pub(super) fn run_callbacks(&self) {
        self.deliver_group_events();
        self.run_commit_callbacks();
    }

    /// Gives the group events to the rebalance listener, with no lock held
    /// (the listener may call the consumer), one `poll` at a time: another
    /// `poll` meanwhile leaves them to this one.
    pub(super) fn deliver_group_events(&self) {
        // This `poll` delivers (under the handle's lock), then marks the
        // events as being given (under the state's): the two locks are
        // never held together. With no event after all, it stands down.
        let listener = {
            let mut local = self.local();
            if local.delivering {
                return;
            }
            local.delivering = true;
            local.listener.take()
        };
        let events = self.peek_core(|core, _| {
            let events = core.has_group_events();
            if events {
                core.set_listener_busy(true);
            }
            events
        });
        if !events {
            let mut local = self.local();
            local.delivering = false;
            if local.listener.is_none() {
                local.listener = listener;
            }
            return;
        }
        let mut delivering = Delivering {
            consumer: self,
            listener,
        };
        while let Some(event) = self.peek_core(|core, _| core.take_group_event()) {
            if let Some(listener) = delivering.listener.as_mut() {
                match &event {
                    GroupEvent::Assigned(p) => listener.on_partitions_assigned(p),
                    GroupEvent::Revoked(p) => {
                        let positions = self.read_core(|core| core.revoked_positions().clone());
                        let mut revocation = Revocation {
                            consumer: self,
                            positions,
                        };
                        listener.on_partitions_revoked(p, &mut revocation);
                    }
                    GroupEvent::Lost(p) => listener.on_partitions_lost(p),
                }
            }
            self.with_core(|core, _| core.group_event_delivered());
        }
    }
}
