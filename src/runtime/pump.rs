//! The driver loop, one pass at a time, for every user of the sockets: the
//! consumer's background task ([`super::engine`]) and [`ClusterDriver`]
//! (super::ClusterDriver), which differ only in what they drive and in
//! who wakes them.
//!
//! A pass:
//!
//! 1. drives the state machines at `now` (twice when something came due
//!    during the first step, such as a retry whose backoff ended as a
//!    response arrived), publishes their outputs, and takes their actions;
//! 2. performs the actions (connects are spawned; writes are awaited here,
//!    in order; a failed write closes its connection);
//! 3. reports progress and yields to the executor once, so the connect and
//!    reader tasks run even on a runtime with one thread;
//! 4. if nothing was acted on, waits for a socket report, a kick, or the
//!    next deadline *after* `now` (a deadline at or before `now` was acted
//!    on by the step; one still there waits for an input, not for time,
//!    and sleeping on it would be a busy loop), and feeds every report
//!    that is waiting to the cluster.

use super::signal::{yield_now, Signal};
use super::sockets::Sockets;
use crate::cluster::Cluster;
use futures::FutureExt;
use std::time::{Duration, Instant};

/// How long a pass waits when nothing at all is scheduled.
const IDLE_WAIT: Duration = Duration::from_secs(3600);

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
}

/// Access to the state machines: owned, or behind the lock the consumer
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
    /// Set after the actions of each pass.
    pub progress: Option<&'a Signal>,
    /// The wait ends at this time at the latest.
    pub until: Option<Instant>,
}

/// Steps 1 and 2 of a pass: drives, publishes, performs the actions;
/// returns whether there were any, and the next deadline after the step.
pub(crate) async fn act<M: Machine>(
    machine: &mut M,
    sockets: &mut Sockets,
) -> (bool, Option<Instant>) {
    let (actions, deadline) = machine.with(|d| {
        let now = Instant::now();
        d.drive(now);
        if d.next_deadline().is_some_and(|t| t <= now) {
            d.drive(now);
        }
        d.publish();
        let actions: Vec<_> = std::iter::from_fn(|| d.cluster().poll_action()).collect();
        (actions, d.next_deadline_after(now))
    });
    let acted = !actions.is_empty();
    for action in actions {
        if let Some((conn, error)) = sockets.perform(action).await {
            machine.with(|d| d.cluster().handle_closed(Instant::now(), conn, error));
        }
    }
    (acted, deadline)
}

/// One pass of the loop (see the [module documentation](self)).
pub(crate) async fn pass<M: Machine>(machine: &mut M, sockets: &mut Sockets, wake: Wake<'_>) {
    let (acted, deadline) = act(machine, sockets).await;
    if let Some(progress) = wake.progress {
        progress.notify();
    }
    yield_now().await;
    if acted {
        // Writes may have produced more to do (a failed write closes a
        // connection): the next pass drives again before waiting.
        return;
    }
    let wake_at = match (deadline, wake.until) {
        (Some(d), Some(u)) => Some(d.min(u)),
        (d, u) => d.or(u),
    };
    let timer = sockets
        .runtime()
        .sleep(wake_at.map_or(IDLE_WAIT, |t| t.saturating_duration_since(Instant::now())));
    let kicked = async {
        match wake.kick {
            Some(kick) => kick.wait().await,
            None => futures::future::pending().await,
        }
    };
    let input = futures::select! {
        input = sockets.next().fuse() => input,
        _ = kicked.fuse() => None,
        _ = timer.fuse() => None,
    };
    machine.with(|d| {
        let cluster = d.cluster();
        if let Some((id, input)) = input {
            sockets.feed(cluster, Instant::now(), id, input);
        }
        while let Some((id, input)) = sockets.try_next() {
            sockets.feed(cluster, Instant::now(), id, input);
        }
    });
}
