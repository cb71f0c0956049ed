//! A client's background task: it owns the sockets and drives the client's
//! state machines between the application's calls, so heartbeats keep
//! flowing while the application works and records go out while it
//! appends more. It is started by the first call that needs the network
//! (never by `Consumer::new`, `subscribe` or `assign`) and stopped by
//! `close` or by dropping the client.
//!
//! The task and the calls share the client's core ([`Core`]) behind one
//! lock, taken for each use and never across an `.await`. The shared
//! state ([`Link::new`]) is made with the client, so the core lives in one
//! place from the start; the task that drives it comes at the first call
//! that needs the network.

use super::drive_pass::{pass, Driven, Machine, Wake};
use super::rt::{BoxFuture, Runtime};
use super::signal::Signal;
use super::sockets::{Readers, SocketOptions, SocketTable, Sockets};
use crate::cluster::{Changes, ClientCore as Core, Cluster};
use crate::events::EventHub;
use futures::channel::oneshot;
use futures::FutureExt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Evaluates a watch's condition (or, with `false`, only whether its call
/// still waits); returns whether the watch is done.
type WatchFn<C> = Box<dyn FnMut(&mut C, Instant, bool) -> bool + Send>;

/// A condition a waiting call registered: evaluated by the background task
/// after a step of the state machines that changed what it waits for
/// ([`Changes`]), and at its deadline. It holds the waiting call's
/// completion and sends its answer there; it is forgotten once answered,
/// or once the call stopped waiting (its future was dropped).
struct Watch<C> {
    run: WatchFn<C>,
    /// The kinds of change that may answer it.
    waits_for: Changes,
    /// When to evaluate it again even if nothing else happens.
    deadline: Option<Instant>,
}

impl<C> std::fmt::Debug for Watch<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("waits_for", &self.waits_for)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// A client's state and the conditions calls wait on, behind one lock
/// (taken for each use, never across an `.await`).
#[derive(Debug)]
pub(crate) struct State<C> {
    core: C,
    watches: Vec<Watch<C>>,
}

impl<C> Deref for State<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.core
    }
}

impl<C> DerefMut for State<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.core
    }
}

impl<C> State<C> {
    /// Evaluates at `now` the watches waiting for one of `changes` (or for
    /// any, when the client is refused) and those whose deadline came;
    /// forgets those done.
    fn run_watches(&mut self, now: Instant, changes: Changes) {
        let core = &mut self.core;
        self.watches.retain_mut(|w| {
            let due = changes.intersects(w.waits_for | Changes::REFUSED)
                || w.deadline.is_some_and(|d| d <= now);
            // Kept unless looked at and answered.
            !(due && (w.run)(core, now, true))
        });
    }

    /// Answers the watches whose condition holds now, from a call that
    /// changed the state without the task: `changes` says how (a `poll`
    /// that put decoded records back, which another waiting `poll` may
    /// take, tells [`Changes::OUTPUT`]).
    pub fn answer_watches(&mut self, changes: Changes) {
        self.run_watches(Instant::now(), changes);
    }

    /// Registers a watch (forgetting those whose callers went away).
    fn add_watch(&mut self, now: Instant, watch: Watch<C>) {
        let State { core, watches } = self;
        watches.retain_mut(|w| !(w.run)(core, now, false));
        watches.push(watch);
    }

    fn watch_deadline(&self) -> Option<Instant> {
        self.watches.iter().filter_map(|w| w.deadline).min()
    }
}

/// What a client shares with its background task.
#[derive(Debug)]
pub(crate) struct Shared<C> {
    state: Mutex<State<C>>,
    stop: AtomicBool,
    /// Set by the client when it changed the state: the task drives.
    kick: Signal,
}

impl<C> Shared<C> {
    /// Locks the client's state (a poisoned lock is taken over: the state
    /// machines hold no invariant a panic elsewhere could break half-way).
    pub fn lock(&self) -> MutexGuard<'_, State<C>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a waiting call holds: its answer, once the task sends it. `Err`
/// when the client stopped before answering.
pub(crate) type Answer<T> = BoxFuture<Result<T, oneshot::Canceled>>;

/// A cheap handle on the running background task, for waiting calls: it
/// neither owns nor stops the task.
#[derive(Debug)]
pub(crate) struct Link<C> {
    shared: Arc<Shared<C>>,
    rt: Arc<dyn Runtime>,
}

impl<C> Clone for Link<C> {
    fn clone(&self) -> Self {
        Link {
            shared: self.shared.clone(),
            rt: self.rt.clone(),
        }
    }
}

impl<C: Core> Link<C> {
    /// The state a client and its task share, made with the client: its
    /// calls use `core` through it at once, and the task, once
    /// [`BackgroundTask::start`] starts it, drives the same core. Nothing
    /// runs and nothing is opened until then.
    pub fn new(core: C, rt: Arc<dyn Runtime>) -> Link<C> {
        Link {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    core,
                    watches: Vec::new(),
                }),
                stop: AtomicBool::new(false),
                kick: Signal::default(),
            }),
            rt,
        }
    }

    /// The shared state.
    pub fn shared(&self) -> &Shared<C> {
        &self.shared
    }

    /// Wakes the task after the state was changed from outside.
    pub fn kick(&self) {
        self.shared.kick.notify();
    }

    /// A timer on the task's runtime.
    pub fn timer(&self, timeout: Duration) -> BoxFuture<()> {
        self.rt.sleep(timeout)
    }

    /// Registers `check`: evaluated now, then by the task after each step
    /// that changed one of `waits_for` (or refused the client), and at
    /// `deadline`, until it gives an answer, which the returned future
    /// completes with. The task is not woken (a waiting `poll` changes
    /// nothing it acts on): a `check` that may change the state (ask for a
    /// topic's metadata, say) goes through [`Link::wait`], which wakes it
    /// once.
    pub fn watch<T: Send + 'static>(
        &self,
        deadline: Option<Instant>,
        waits_for: Changes,
        mut check: impl FnMut(&mut C, Instant) -> Option<T> + Send + 'static,
    ) -> Answer<T> {
        let now = Instant::now();
        let mut state = self.shared.lock();
        if let Some(t) = check(&mut state.core, now) {
            return Box::pin(futures::future::ready(Ok(t)));
        }
        if self.shared.stop.load(Ordering::Acquire) {
            return Box::pin(futures::future::ready(Err(oneshot::Canceled)));
        }
        let (tx, rx) = oneshot::channel();
        let mut tx = Some(tx);
        let run = move |core: &mut C, now: Instant, evaluate: bool| {
            let Some(sender) = tx.as_ref() else {
                return true;
            };
            if sender.is_canceled() {
                return true;
            }
            if !evaluate {
                return false;
            }
            match check(core, now) {
                Some(t) => {
                    if let Some(sender) = tx.take() {
                        let _ = sender.send(t);
                    }
                    true
                }
                None => false,
            }
        };
        // Watches whose callers went away are dropped here too, so that
        // calls timing out while the task is idle leave nothing behind.
        state.add_watch(
            now,
            Watch {
                run: Box::new(run),
                waits_for,
                deadline,
            },
        );
        Box::pin(rx)
    }

    /// [`Link::watch`], waiting at most `timeout` (then `None`). The
    /// answer is `Err` when the client stopped before answering.
    pub async fn wait<T: Send + 'static>(
        &self,
        timeout: Duration,
        deadline: Option<Instant>,
        waits_for: Changes,
        check: impl FnMut(&mut C, Instant) -> Option<T> + Send + 'static,
    ) -> Option<Result<T, oneshot::Canceled>> {
        let answer = self.watch(deadline, waits_for, check);
        // The check may have changed the state: the task acts on it.
        self.kick();
        futures::select_biased! {
            a = answer.fuse() => Some(a),
            _ = self.rt.sleep(timeout).fuse() => None,
        }
    }
}

/// A client's handle on its running background task: the task stops when
/// it is dropped.
#[derive(Debug)]
pub(crate) struct BackgroundTask<C: Core> {
    link: Link<C>,
    table: SocketTable,
    events: Arc<EventHub>,
}

impl<C: Core> BackgroundTask<C> {
    /// Starts the task that drives `link`'s core (made with [`Link::new`]
    /// when the client was). `events` receive every connection event.
    pub fn start(
        link: Link<C>,
        options: SocketOptions,
        events: Arc<EventHub>,
    ) -> BackgroundTask<C> {
        let sockets = Sockets::new(link.rt.clone(), options, Readers::Inline);
        let table = sockets.table();
        let state = TaskState {
            shared: link.shared.clone(),
            events: events.clone(),
        };
        link.rt.spawn_driver(Box::pin(run(state, sockets)));
        BackgroundTask {
            link,
            table,
            events,
        }
    }

    /// Stops the task and closes every socket now, without waiting. Calls
    /// still waiting get `Err(Canceled)`.
    pub fn stop(&self) {
        let shared = &self.link.shared;
        shared.stop.store(true, Ordering::Release);
        let (watches, deferred) = {
            let mut state = shared.lock();
            state.core.shutdown(Instant::now());
            forward_events(&mut state.core, &self.events);
            (
                std::mem::take(&mut state.watches),
                state.core.take_deferred(),
            )
        };
        // Dropped and run outside the lock: they wake the callers.
        drop(watches);
        if let Some(work) = deferred {
            work();
        }
        self.table.close_all();
        self.events.close();
        self.link.kick();
    }
}

impl<C: Core> Drop for BackgroundTask<C> {
    fn drop(&mut self) {
        self.stop();
    }
}

fn forward_events<C: Core>(core: &mut C, hub: &EventHub) {
    hub.publish(std::iter::from_fn(|| core.poll_event()));
}

/// The background task's view of the state: the lock it shares with the
/// client, and the hub its events go to.
struct TaskState<C> {
    shared: Arc<Shared<C>>,
    events: Arc<EventHub>,
}

impl<C: Core> Machine for TaskState<C> {
    fn with<R>(&mut self, f: impl FnOnce(&mut dyn Driven) -> R) -> R {
        let (r, deferred) = {
            let mut state = self.shared.lock();
            let r = f(&mut Locked {
                state: &mut state,
                events: &self.events,
            });
            (r, state.core.take_deferred())
        };
        if let Some(work) = deferred {
            work();
        }
        r
    }
}

struct Locked<'a, C> {
    state: &'a mut State<C>,
    events: &'a EventHub,
}

impl<C: Core> Driven for Locked<'_, C> {
    fn cluster(&mut self) -> &mut Cluster {
        self.state.core.io()
    }

    fn drive(&mut self, now: Instant) {
        self.state.core.drive(now);
    }

    fn next_deadline(&self) -> Option<Instant> {
        min_some(self.state.core.next_deadline(), self.state.watch_deadline())
    }

    fn next_deadline_after(&self, now: Instant) -> Option<Instant> {
        let watch = self.state.watch_deadline().filter(|t| *t > now);
        min_some(self.state.core.next_deadline_after(now), watch)
    }

    fn publish(&mut self) {
        forward_events(&mut self.state.core, self.events);
        if !self.state.watches.is_empty() {
            let changes = self.state.core.take_changes();
            self.state.run_watches(Instant::now(), changes);
        }
    }

    fn after_actions(&mut self) {
        self.state.core.after_actions();
    }

    fn has_after_actions(&self) -> bool {
        self.state.core.has_after_actions()
    }
}

fn min_some(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

async fn run<C: Core>(mut state: TaskState<C>, mut sockets: Sockets) {
    let shared = state.shared.clone();
    while !shared.stop.load(Ordering::Acquire) {
        let wake = Wake {
            kick: Some(&shared.kick),
            until: None,
        };
        pass(&mut state, &mut sockets, wake).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A core that counts how often watches looked at it.
    #[derive(Default)]
    struct Looked(u32);

    /// A watch waiting for `waits_for` (and `deadline`) that never gives
    /// an answer, counting its evaluations in the core.
    fn counting(waits_for: Changes, deadline: Option<Instant>) -> Watch<Looked> {
        Watch {
            run: Box::new(|core: &mut Looked, _, evaluate| {
                if evaluate {
                    core.0 += 1;
                }
                false
            }),
            waits_for,
            deadline,
        }
    }

    #[test]
    fn a_watch_is_looked_at_for_its_changes_its_deadline_and_a_refusal_only() {
        let now = Instant::now();
        let deadline = now + Duration::from_secs(1);
        let mut state = State {
            core: Looked::default(),
            watches: Vec::new(),
        };
        state.add_watch(now, counting(Changes::METADATA, Some(deadline)));
        let looks = |state: &mut State<Looked>, at: Instant, changes: Changes| {
            state.run_watches(at, changes);
            state.core.0
        };
        assert_eq!(looks(&mut state, now, Changes::NONE), 0);
        assert_eq!(looks(&mut state, now, Changes::OUTPUT), 0);
        assert_eq!(
            looks(&mut state, now, Changes::ANSWERS | Changes::DELIVERIES),
            0
        );
        assert_eq!(looks(&mut state, now, Changes::METADATA), 1);
        assert_eq!(looks(&mut state, now, Changes::ALL), 2);
        assert_eq!(looks(&mut state, now, Changes::REFUSED), 3, "a refusal");
        assert_eq!(
            looks(&mut state, deadline, Changes::NONE),
            4,
            "its deadline"
        );
        assert_eq!(state.watches.len(), 1, "never answered: still waiting");

        // An answered watch is forgotten; so is one whose caller went away
        // (its run says so without evaluating), at the next registration.
        state.add_watch(
            now,
            Watch {
                run: Box::new(|core: &mut Looked, _, evaluate| {
                    core.0 += 100 * u32::from(evaluate);
                    evaluate
                }),
                waits_for: Changes::OUTPUT,
                deadline: None,
            },
        );
        assert_eq!(looks(&mut state, now, Changes::OUTPUT), 104, "answered");
        assert_eq!(state.watches.len(), 1);
        state.add_watch(
            now,
            Watch {
                run: Box::new(|_: &mut Looked, _, _| true),
                waits_for: Changes::OUTPUT,
                deadline: None,
            },
        );
        state.add_watch(now, counting(Changes::OUTPUT, None));
        assert_eq!(state.watches.len(), 2, "the gone one left at registration");
    }
}
