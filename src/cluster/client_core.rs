//! A client's state machines as one unit, over the connection manager:
//! what a background task needs to drive them (the consumer's and the
//! producer's cores implement it; the runtime drives either through it,
//! naming neither).

use super::Cluster;
use crate::events::ConnectionEvent;
use std::time::Instant;

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
