//! The consumer's background task: it owns the sockets and drives the
//! consumer's state between polls, so heartbeats keep flowing while the
//! application works. It is started by the first `poll` (never by
//! `Consumer::new`, `subscribe` or `assign`) and stopped by `close` or by
//! dropping the consumer.

use super::signal::{yield_now, Signal};
use super::sockets::{SocketOptions, SocketTable, Sockets};
use crate::consumer::core::ConsumerCore;
use crate::events::EventHub;
use futures::FutureExt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How often [`Engine::wait_for`] wakes the task again while its condition
/// does not hold (a check may have changed the state).
const RECHECK_KICK: Duration = Duration::from_millis(10);

/// What the consumer shares with its background task.
#[derive(Debug)]
pub(crate) struct Shared {
    core: Mutex<ConsumerCore>,
    stop: Mutex<bool>,
    /// Set by the consumer when it changed the state: the task drives.
    kick: Signal,
    /// Set by the task after each step: a waiting `poll` looks again.
    progress: Signal,
}

impl Shared {
    /// Locks the consumer's state (a poisoned lock is taken over: the state
    /// machines hold no invariant a panic elsewhere could break half-way).
    pub fn lock(&self) -> MutexGuard<'_, ConsumerCore> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The consumer's handle on its running background task.
#[derive(Debug)]
pub(crate) struct Engine {
    shared: Arc<Shared>,
    table: SocketTable,
    events: Arc<EventHub>,
}

impl Engine {
    /// Starts the task for `core`. `events` receive every connection event.
    pub fn start(core: ConsumerCore, options: SocketOptions, events: Arc<EventHub>) -> Engine {
        let shared = Arc::new(Shared {
            core: Mutex::new(core),
            stop: Mutex::new(false),
            kick: Signal::default(),
            progress: Signal::default(),
        });
        let sockets = Sockets::new(options);
        let table = sockets.table();
        async_std::task::spawn(run(shared.clone(), sockets, events.clone()));
        Engine {
            shared,
            table,
            events,
        }
    }

    /// The shared state.
    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Wakes the task after the state was changed from outside.
    pub fn kick(&self) {
        self.shared.kick.notify();
    }

    /// Forgets progress reported so far: only progress after this call
    /// wakes [`Engine::next_progress`]. Call it before changing the state
    /// and kicking the task, so the task's answer to the change is not
    /// missed.
    pub fn drain_progress(&mut self) {
        self.shared.progress.take();
    }

    /// Waits until the task made progress, or `timeout` passed; returns
    /// whether it made progress.
    pub async fn next_progress(&mut self, timeout: Duration) -> bool {
        futures::select! {
            _ = self.shared.progress.wait().fuse() => true,
            _ = async_std::task::sleep(timeout).fuse() => false,
        }
    }

    /// Waits at most `timeout` for a condition on the state. `check` may
    /// change the state: the task is woken after the first check, then at
    /// most every [`RECHECK_KICK`] while the condition does not hold.
    ///
    /// (Every wake-up of the task reports progress, and progress wakes this
    /// wait: waking the task after every check would make the two wake each
    /// other in a busy loop until the answer arrives, a core's worth of CPU
    /// for a round trip.)
    pub async fn wait_for<T>(
        &mut self,
        timeout: Duration,
        mut check: impl FnMut(&mut ConsumerCore) -> Option<T>,
    ) -> Option<T> {
        let deadline = Instant::now() + timeout;
        let mut kicked: Option<Instant> = None;
        loop {
            self.drain_progress();
            if let Some(t) = check(&mut self.shared.lock()) {
                return Some(t);
            }
            let now = Instant::now();
            if kicked.is_none_or(|at| now.saturating_duration_since(at) >= RECHECK_KICK) {
                self.kick();
                kicked = Some(now);
            }
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                return None;
            }
            self.next_progress(left.min(RECHECK_KICK)).await;
        }
    }

    /// Stops the task and closes every socket now, without waiting.
    pub fn stop(&self) {
        *self
            .shared
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        {
            let mut core = self.shared.lock();
            core.cluster.shutdown(Instant::now());
            forward_events(&mut core, &self.events);
            while core.cluster.poll_action().is_some() {}
        }
        self.table.close_all();
        self.events.close();
        self.kick();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
    }
}

fn forward_events(core: &mut ConsumerCore, hub: &EventHub) {
    hub.publish(std::iter::from_fn(|| core.cluster.poll_event()));
}

async fn run(shared: Arc<Shared>, mut sockets: Sockets, events: Arc<EventHub>) {
    loop {
        if *shared.stop.lock().unwrap_or_else(PoisonError::into_inner) {
            return;
        }
        // One step of the state machines, then their IO.
        let (actions, deadline) = {
            let mut core = shared.lock();
            let now = Instant::now();
            core.drive(now);
            if core.next_deadline().is_some_and(|d| d <= now) {
                // Something came due during the step (a retry whose backoff
                // ended as a response arrived): act on it now.
                core.drive(now);
            }
            forward_events(&mut core, &events);
            let mut actions = Vec::new();
            while let Some(a) = core.cluster.poll_action() {
                actions.push(a);
            }
            // Deadlines at or before `now` were acted on by this step; one
            // still there waits for an input, not for time (sleeping on it
            // would be a busy loop).
            (actions, core.next_deadline_after(now))
        };
        let acted = !actions.is_empty();
        for action in actions {
            if let Some((conn, error)) = sockets.perform(action).await {
                let mut core = shared.lock();
                core.cluster.handle_closed(Instant::now(), conn, error);
            }
        }
        shared.progress.notify();
        // Let the connect and reader tasks run even on a runtime with one
        // thread, whatever this pass found to do.
        yield_now().await;
        if acted {
            // Writes may have produced more to do (a failed write closes a
            // connection); drive again before waiting.
            continue;
        }
        let sleep = deadline.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        });
        let input = futures::select! {
            input = sockets.next().fuse() => input,
            _ = shared.kick.wait().fuse() => None,
            _ = async_std::task::sleep(sleep).fuse() => None,
        };
        let mut core = shared.lock();
        if let Some((id, input)) = input {
            sockets.feed(&mut core.cluster, Instant::now(), id, input);
        }
        while let Some((id, input)) = sockets.try_next() {
            sockets.feed(&mut core.cluster, Instant::now(), id, input);
        }
    }
}
