//! The driver loop, one pass at a time, for every user of the sockets: the
//! clients' background task ([`super::background_task`]) and
//! [`ClusterDriver`](super::ClusterDriver), which differ only in what they drive and in
//! who wakes them.
//!
//! A pass:
//!
//! 1. drives the state machines at `now` (twice when something came due
//!    during the first step, such as a retry whose backoff ended as a
//!    response arrived), publishes their outputs, and takes their actions;
//! 2. performs the actions (connects are spawned; writes are awaited here,
//!    in order; a failed write closes its connection), then does what was
//!    left for after them ([`Driven::after_actions`]: the CRC check of the
//!    record sets that just came, once the next Fetch is sent), taking the
//!    lock for it only when the step said there is such work
//!    ([`Driven::has_after_actions`]);
//! 3. if something was acted on, ends: the next pass drives again
//!    (after [`BUSY_PASSES`] passes in a row that acted or found an input
//!    waiting, it first yields to the executor, so that the connect and
//!    reader tasks run even on a runtime with one thread);
//! 4. otherwise waits for a socket
//!    report, a kick, or the next deadline *after* `now` (a deadline at or
//!    before `now` was acted on by the step; one still there waits for an
//!    input, not for time, and sleeping on it would be a busy loop),
//!    counts the pass as busy if the wait did not suspend (an input was
//!    already waiting, as it is on the first pass after a wake-up), and
//!    feeds the reports that
//!    are waiting to the cluster: all of them, unless they bring
//!    [`FEED_BUDGET`] bytes or more, after which the rest wait for the next
//!    pass (a large response is acted on, its next Fetch sent, before the
//!    other connections' responses are read).

use super::signal::{yield_now, Signal};
use super::sockets::Sockets;
use crate::cluster::Cluster;
use std::time::{Duration, Instant};

/// How long a pass waits when nothing at all is scheduled.
const IDLE_WAIT: Duration = Duration::from_secs(3600);

/// How many passes in a row may act or find an input waiting before the
/// loop yields to the executor (so that connect and reader tasks run even
/// on a runtime with one thread, when every pass finds something to do).
/// Not after each: on a multi-thread executor every yield wakes a sleeping
/// worker for nothing, and the first pass after a wake-up always finds
/// the input it was woken for.
const BUSY_PASSES: u32 = 8;

/// How many bytes of frames one pass feeds at most before it acts (the
/// frame that crosses the line is fed whole).
pub(crate) const FEED_BUDGET: usize = 256 * 1024;

/// The state machines a pass drives.
pub(crate) trait Driven {
    /// The connection manager.
    fn cluster(&mut self) -> &mut Cluster;
    /// One step at `now`.
    fn drive(&mut self, now: Instant);
    /// The earliest deadline, past ones included.
    fn next_deadline(&self) -> Option<Instant>;
    /// The earliest deadline after `now`.
    fn next_deadline_after(&self, now: Instant) -> Option<Instant>;
    /// Hands events and responses to whoever waits for them.
    fn publish(&mut self);
    /// What is left to do once the actions are performed (the requests
    /// they held are on their way): the CRC check of the record sets that
    /// came, after the Fetch that follows them is sent.
    fn after_actions(&mut self) {}
    /// Whether [`Driven::after_actions`] has anything to do.
    fn has_after_actions(&self) -> bool {
        false
    }
}

/// Access to the state machines: owned, or behind the lock the client
/// shares with its background task (taken for each use, never across an
/// `.await`).
pub(crate) trait Machine {
    /// Runs `f` on the state machines.
    fn with<R>(&mut self, f: impl FnOnce(&mut dyn Driven) -> R) -> R;
}

/// What, besides sockets and time, ends a pass's wait, and what it tells.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Wake<'a> {
    /// Ends the wait when set (the state was changed from outside).
    pub kick: Option<&'a Signal>,
    /// The wait ends at this time at the latest.
    pub until: Option<Instant>,
}

/// What [`act`] did and found.
pub(crate) struct Acted {
    /// Whether there were actions.
    pub acted: bool,
    /// The next deadline after the step.
    pub deadline: Option<Instant>,
}

/// Steps 1 and 2 of a pass: drives, publishes, performs the actions.
pub(crate) async fn act<M: Machine>(machine: &mut M, sockets: &mut Sockets) -> Acted {
    let (actions, deadline, later) = machine.with(|d| {
        let now = Instant::now();
        d.drive(now);
        if d.next_deadline().is_some_and(|t| t <= now) {
            d.drive(now);
        }
        d.publish();
        let actions: Vec<_> = std::iter::from_fn(|| d.cluster().poll_action()).collect();
        (actions, d.next_deadline_after(now), d.has_after_actions())
    });
    let acted = !actions.is_empty();
    for action in actions {
        if let Some((conn, error)) = sockets.perform(action).await {
            machine.with(|d| d.cluster().handle_closed(Instant::now(), conn, error));
        }
    }
    // The lock is taken again only when there is something left to do.
    if later {
        machine.with(|d| d.after_actions());
    }
    Acted { acted, deadline }
}

/// One pass of the loop (see the [module documentation](self)).
pub(crate) async fn pass<M: Machine>(machine: &mut M, sockets: &mut Sockets, wake: Wake<'_>) {
    let Acted { acted, deadline } = act(machine, sockets).await;
    if acted {
        // Writes may have produced more to do (a failed write closes a
        // connection): the next pass drives again before waiting. It
        // yields to the executor only
        // after [`BUSY_PASSES`] busy passes in a row: a pass that acted
        // usually ends in a wait that suspends.
        busy(sockets).await;
        return;
    }
    let wake_at = match (deadline, wake.until) {
        (Some(d), Some(u)) => d.min(u),
        (d, u) => d.or(u).unwrap_or_else(|| Instant::now() + IDLE_WAIT),
    };
    let (input, suspended) = sockets.wait(wake_at, wake.kick).await;
    if suspended {
        sockets.busy_passes = 0;
    } else {
        // Something was ready at once: after a few such passes, give the
        // executor thread to the other tasks, so that a flood of inputs
        // cannot keep the connect tasks from running on a runtime with
        // one thread.
        busy(sockets).await;
    }
    machine.with(|d| {
        let cluster = d.cluster();
        let mut fed = 0;
        if let Some(report) = input {
            fed += report.len();
            sockets.feed(cluster, Instant::now(), report);
        }
        while fed < FEED_BUDGET {
            let Some(report) = sockets.try_next() else {
                break;
            };
            fed += report.len();
            sockets.feed(cluster, Instant::now(), report);
        }
    });
}

/// Counts a busy pass; yields to the executor after [`BUSY_PASSES`] in a
/// row.
async fn busy(sockets: &mut Sockets) {
    sockets.busy_passes += 1;
    if sockets.busy_passes >= BUSY_PASSES {
        sockets.busy_passes = 0;
        yield_now().await;
    }
}
