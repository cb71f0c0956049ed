//! The consumer's background task: it owns the sockets and drives the
//! consumer's state between polls, so heartbeats keep flowing while the
//! application works. It is started by the first `poll` (never by
//! `Consumer::new`, `subscribe` or `assign`) and stopped by `close` or by
//! dropping the consumer.

use super::pump::{pass, Driven, Machine, Wake};
use super::rt::{BoxFuture, Runtime};
use super::signal::Signal;
use super::sockets::{Readers, SocketOptions, SocketTable, Sockets};
use crate::cluster::Cluster;
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
    /// Set by the task at the end of each burst of steps: a waiting
    /// [`Engine::wait_for`] looks again.
    progress: Signal,
    /// Set with `progress` when the application has something to take: a
    /// waiting `poll` looks again.
    ready: Signal,
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
    rt: Arc<dyn Runtime>,
}

impl Engine {
    /// Starts the task for `core`. `events` receive every connection event.
    pub fn start(
        core: ConsumerCore,
        options: SocketOptions,
        events: Arc<EventHub>,
        rt: Arc<dyn Runtime>,
    ) -> Engine {
        let shared = Arc::new(Shared {
            core: Mutex::new(core),
            stop: Mutex::new(false),
            kick: Signal::default(),
            progress: Signal::default(),
            ready: Signal::default(),
        });
        let sockets = Sockets::new(rt.clone(), options, Readers::Inline);
        let table = sockets.table();
        let state = EngineState {
            shared: shared.clone(),
            events: events.clone(),
        };
        rt.spawn_driver(Box::pin(run(state, sockets)));
        Engine {
            shared,
            table,
            events,
            rt,
        }
    }

    /// The shared state.
    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The shared state, for a guard that outlives a borrow of the engine.
    pub fn shared_arc(&self) -> Arc<Shared> {
        self.shared.clone()
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
            _ = self.rt.sleep(timeout).fuse() => false,
        }
    }

    /// Forgets earlier reports that the application has something to
    /// take: only a report after this call wakes [`Engine::ready_or`].
    pub fn drain_ready(&mut self) {
        self.shared.ready.take();
    }

    /// A timer on the task's runtime, for [`Engine::ready_or`]: one timer
    /// for a whole wait made of several, rather than one for each (each
    /// new timer costs the runtime's timer thread a wake-up).
    pub fn timer(&self, timeout: Duration) -> BoxFuture<()> {
        self.rt.sleep(timeout)
    }

    /// Waits until the task reports that the application has something
    /// to take, or `timer` fired; returns whether it reported. A timer
    /// that fired must not be passed again.
    pub async fn ready_or(&mut self, timer: &mut BoxFuture<()>) -> bool {
        futures::select! {
            _ = self.shared.ready.wait().fuse() => true,
            _ = timer.fuse() => false,
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

/// The background task's view of the state: the lock it shares with the
/// consumer, and the hub its events go to.
struct EngineState {
    shared: Arc<Shared>,
    events: Arc<EventHub>,
}

impl Machine for EngineState {
    fn with<R>(&mut self, f: impl FnOnce(&mut dyn Driven) -> R) -> R {
        let mut core = self.shared.lock();
        f(&mut Locked {
            core: &mut core,
            events: &self.events,
        })
    }
}

struct Locked<'a> {
    core: &'a mut ConsumerCore,
    events: &'a EventHub,
}

impl Driven for Locked<'_> {
    fn cluster(&mut self) -> &mut Cluster {
        &mut self.core.cluster
    }

    fn drive(&mut self, now: Instant) {
        self.core.drive(now);
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.core.next_deadline()
    }

    fn next_deadline_after(&self, now: Instant) -> Option<Instant> {
        self.core.next_deadline_after(now)
    }

    fn publish(&mut self) {
        forward_events(self.core, self.events);
    }

    fn has_output(&self) -> bool {
        self.core.has_output()
    }

    fn after_actions(&mut self) {
        self.core.fetcher.check_pending_crcs();
    }
}

async fn run(mut state: EngineState, mut sockets: Sockets) {
    let shared = state.shared.clone();
    while !*shared.stop.lock().unwrap_or_else(PoisonError::into_inner) {
        let wake = Wake {
            kick: Some(&shared.kick),
            progress: Some(&shared.progress),
            ready: Some(&shared.ready),
            until: None,
        };
        pass(&mut state, &mut sockets, wake).await;
    }
}
