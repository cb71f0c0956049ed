//! A client's state machines as one unit, over the connection manager:
//! what a background task needs to drive them (the consumer's and the
//! producer's cores implement it; the runtime drives either through it,
//! naming neither).

use super::Cluster;
use crate::events::ConnectionEvent;
use std::ops::{BitOr, BitOrAssign};
use std::time::Instant;

/// Kinds of change in a client's state that a waiting call can wait for.
/// After each step the background task looks again only at the calls
/// waiting for a kind that changed ([`ClientCore::take_changes`]), and at
/// each call's own deadline; every call looks again when the client is
/// [refused](Changes::REFUSED).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changes(u8);

impl Changes {
    /// Nothing changed.
    pub const NONE: Changes = Changes(0);
    /// `poll` has something to take: records, an error, a group event.
    pub const OUTPUT: Changes = Changes(1);
    /// A request a call waits for was answered or failed: a commit, an
    /// offsets or committed-offsets lookup, leaving the group.
    pub const ANSWERS: Changes = Changes(1 << 1);
    /// The metadata changed: topics, partitions, leaders, or the client
    /// gave up waiting for a topic.
    pub const METADATA: Changes = Changes(1 << 2);
    /// Records were delivered or failed: memory was freed, a flush may be
    /// done.
    pub const DELIVERIES: Changes = Changes(1 << 3);
    /// The client is refused by every broker it knows: a waiting call
    /// says so at once.
    pub const REFUSED: Changes = Changes(1 << 4);
    /// Every kind.
    pub const ALL: Changes = Changes((1 << 5) - 1);

    /// Whether `self` and `other` share a kind.
    pub fn intersects(self, other: Changes) -> bool {
        self.0 & other.0 != 0
    }
}

impl BitOr for Changes {
    type Output = Changes;
    fn bitor(self, other: Changes) -> Changes {
        Changes(self.0 | other.0)
    }
}

impl BitOrAssign for Changes {
    fn bitor_assign(&mut self, other: Changes) {
        self.0 |= other.0;
    }
}

/// A client's state machines, as its background task drives them: the
/// connection manager, one step of everything else, and what they say.
pub trait ClientCore: Send + 'static {
    /// The connection manager.
    fn io(&mut self) -> &mut Cluster;
    /// One step at `now` (after inputs, at deadlines).
    fn drive(&mut self, now: Instant);
    /// The earliest deadline, past ones included.
    fn next_deadline(&self) -> Option<Instant>;
    /// The earliest deadline after `now`.
    fn next_deadline_after(&self, now: Instant) -> Option<Instant>;
    /// What is left once a pass's actions are carried out.
    fn after_actions(&mut self) {}
    /// Whether [`ClientCore::after_actions`] has anything to do (asked
    /// before the actions, so that a pass with nothing left takes the lock
    /// once less).
    fn has_after_actions(&self) -> bool {
        false
    }
    /// What changed since the last call, of what calls wait for (asked
    /// after a step while calls wait; a kind may be told that did not
    /// change, never the other way round: a kind left untold leaves the
    /// calls waiting for it asleep until their deadline).
    fn take_changes(&mut self) -> Changes;
    /// The next connection event for the client's listeners.
    fn poll_event(&mut self) -> Option<ConnectionEvent>;
    /// Closes every connection (the task stops).
    fn shutdown(&mut self, now: Instant);
    /// Work to do once the lock on the core is released (waking the
    /// callers whose outcome was decided), if any.
    fn take_deferred(&mut self) -> Option<Deferred> {
        None
    }
}

/// Work a core hands out to run outside its lock.
pub type Deferred = Box<dyn FnOnce() + Send>;
