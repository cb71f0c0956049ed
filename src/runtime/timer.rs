//! The clients' timers on async-std: one thread for the process that
//! sleeps until the earliest deadline and wakes its task.
//!
//! async-std's own timers live in async-io's reactor: arming one writes to
//! the reactor's notification descriptor, and its expiry is a reactor
//! tick. While a `block_on` runs (async-std's executor threads always run
//! one), async-io's driver thread answers every tick with up to ten timed
//! futex waits (50 µs to 10 ms) before it blocks again. A consumer polled
//! in a loop (`poll(100 ms)`) arms and fires a timer per call, so most of
//! its idle cost was the reactor's, not its own (docs/benchmarks.md, "Why
//! idle cost more on async-std"). Here a timer that is armed costs a lock
//! and, when it is the new earliest deadline, a condition-variable notify;
//! one that fires costs the thread's wake-up and the task's wake. No
//! reactor is involved, so the driver thread stays asleep. On Linux the
//! thread sleeps in a read of a timerfd instead, which the thread that
//! arms an earlier timer sets itself: the timer thread then wakes only to
//! fire timers (see [`Bell`]).
//!
//! The thread (`lazykafka-timer`) starts with the first timer made, that
//! is inside the first `poll`, never in `Consumer::new`. If it cannot be
//! started, timers fall back to async-std's. Timers are `Instant`-based:
//! a deadline that has passed is ready when polled, whatever the thread
//! did.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The armed timers, earliest first, and what the thread waits for.
#[derive(Debug, Default)]
struct Armed {
    /// Keyed by deadline, then by an id that makes keys unique.
    timers: BTreeMap<(Instant, u64), Waker>,
    /// The next id.
    next_id: u64,
    /// Whether the thread is waiting: for the earliest deadline, or, when
    /// there is none, for a notify ([`Bell::Condvar`], which needs a
    /// notify to move it) or for the timerfd to be set ([`Bell::Fd`]).
    waiting: bool,
    /// When the thread's timerfd rings, if it is set ([`Bell::Fd`]).
    rings_at: Option<Instant>,
    /// How many times the thread has come back from waiting.
    wakeups: u64,
}

/// What the thread sleeps on until the earliest deadline.
#[derive(Debug)]
enum Bell {
    /// A timerfd (Linux), read by the thread: a timer armed earlier than
    /// the one it rings for sets it anew from the arming thread, and the
    /// sleeping thread wakes only when it rings. A `poll(100 ms)` loop
    /// thus costs the thread one wake-up per call, not two (one to take
    /// the new deadline, one to fire it).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    Fd(std::os::fd::OwnedFd),
    /// A condition variable, notified when a timer is armed earlier than
    /// the deadline the thread waits for.
    Condvar(Condvar),
}

/// The process's timer thread: see the [module documentation](self).
#[derive(Debug)]
pub(crate) struct TimerThread {
    armed: Mutex<Armed>,
    bell: Bell,
}

impl Default for TimerThread {
    fn default() -> Self {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
            // `Instant` is CLOCK_MONOTONIC on Linux.
            if let Ok(fd) = timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::CLOEXEC) {
                return TimerThread {
                    armed: Mutex::default(),
                    bell: Bell::Fd(fd),
                };
            }
        }
        TimerThread {
            armed: Mutex::default(),
            bell: Bell::Condvar(Condvar::new()),
        }
    }
}

/// Sets `fd` to ring at `at` (as soon as possible if that has passed),
/// or clears it.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn set_fd(fd: &std::os::fd::OwnedFd, at: Option<Instant>) {
    use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags, Timespec};
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let value = match at {
        // A zero value would clear it: 1 ns at least. A deadline past
        // the range of a timespec is put a day ahead; the thread looks
        // again then.
        Some(at) => Timespec::try_from(
            at.saturating_duration_since(Instant::now())
                .clamp(Duration::from_nanos(1), Duration::from_secs(86_400)),
        )
        .unwrap_or(zero),
        None => zero,
    };
    let spec = Itimerspec {
        it_interval: zero,
        it_value: value,
    };
    // Fails only for an invalid descriptor or value, neither of which
    // can be made here.
    let set = timerfd_settime(fd, TimerfdTimerFlags::empty(), &spec);
    debug_assert!(set.is_ok(), "timerfd_settime: {set:?}");
}

impl TimerThread {
    /// The process's timer thread, started on first use; `None` if it
    /// could not be started.
    fn get() -> Option<&'static TimerThread> {
        static THREAD: OnceLock<Option<&'static TimerThread>> = OnceLock::new();
        *THREAD.get_or_init(|| {
            let timers: &'static TimerThread = Box::leak(Box::default());
            std::thread::Builder::new()
                .name("lazykafka-timer".into())
                .spawn(move || timers.run())
                .ok()
                .map(|_| timers)
        })
    }

    fn lock(&self) -> MutexGuard<'_, Armed> {
        // The lock is never held across user code, so it cannot be
        // poisoned by a panic there; recover the state if it is anyway.
        self.armed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Arms a timer; returns its key. (Wakers are cloned and dropped
    /// outside the lock: a waker's code may arm or drop a timer itself.)
    fn arm(&self, deadline: Instant, waker: &Waker) -> (Instant, u64) {
        let waker = waker.clone();
        let mut armed = self.lock();
        let key = (deadline, armed.next_id);
        armed.next_id += 1;
        armed.timers.insert(key, waker);
        // The thread must look again only if it would sleep past this
        // one: when it is the new earliest.
        let earliest = armed.timers.first_key_value().map(|(k, _)| *k) == Some(key);
        match &self.bell {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            Bell::Fd(fd) => {
                // Set only to ring sooner: a bell set for an earlier
                // time (one that has rung included: the thread is about
                // to look at every timer anyway) is left alone.
                if earliest && armed.rings_at.is_none_or(|at| deadline < at) {
                    set_fd(fd, Some(deadline));
                    armed.rings_at = Some(deadline);
                }
            }
            Bell::Condvar(changed) => {
                if armed.waiting && earliest {
                    armed.waiting = false;
                    drop(armed);
                    changed.notify_one();
                }
            }
        }
        key
    }

    /// Replaces an armed timer's waker; returns false if it already fired.
    fn rearm(&self, key: (Instant, u64), waker: &Waker) -> bool {
        let new = waker.clone();
        let mut armed = self.lock();
        let Some(w) = armed.timers.get_mut(&key) else {
            return false;
        };
        if w.will_wake(&new) {
            return true;
        }
        let old = std::mem::replace(w, new);
        drop(armed);
        drop(old);
        true
    }

    /// Disarms a timer (a no-op if it fired). The thread may still wake
    /// at its deadline, once, and finds nothing to do then.
    fn disarm(&self, key: (Instant, u64)) {
        let removed = {
            let mut armed = self.lock();
            armed.timers.remove(&key)
        };
        drop(removed);
    }

    /// Takes every timer due at `now`, for waking.
    fn take_due(armed: &mut Armed, now: Instant, due: &mut Vec<Waker>) {
        while let Some(entry) = armed.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            due.push(entry.remove());
        }
    }

    /// The thread: waits for the earliest deadline, wakes what is due
    /// (outside the lock), and again.
    fn run(&self) {
        let mut due = Vec::new();
        let mut armed = self.lock();
        loop {
            Self::take_due(&mut armed, Instant::now(), &mut due);
            if !due.is_empty() {
                drop(armed);
                for waker in due.drain(..) {
                    // A waker that panics must not take every other
                    // timer of the process down with this thread.
                    let woken = std::panic::catch_unwind(AssertUnwindSafe(|| waker.wake()));
                    if woken.is_err() {
                        log::warn!("a task's waker panicked when its timer fired");
                    }
                }
                armed = self.lock();
                continue;
            }
            let next = armed.timers.first_key_value().map(|(key, _)| key.0);
            armed.waiting = true;
            armed = match &self.bell {
                #[cfg(any(target_os = "linux", target_os = "android"))]
                Bell::Fd(fd) => {
                    set_fd(fd, next);
                    armed.rings_at = next;
                    drop(armed);
                    // Returns when the timerfd rings (8 bytes: how many
                    // times), or early on a signal; either way the
                    // timers are looked at again.
                    let _ = rustix::io::read(fd, &mut [0u8; 8]);
                    self.lock()
                }
                Bell::Condvar(changed) => match next {
                    Some(at) => {
                        let left = at.saturating_duration_since(Instant::now());
                        changed
                            .wait_timeout(armed, left)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                    None => changed.wait(armed).unwrap_or_else(|e| e.into_inner()),
                },
            };
            armed.waiting = false;
            armed.wakeups += 1;
        }
    }
}

/// Completes at `deadline`, woken by the [`TimerThread`].
#[derive(Debug)]
pub(crate) struct Sleep {
    deadline: Instant,
    timers: &'static TimerThread,
    /// Set once armed.
    key: Option<(Instant, u64)>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            if let Some(key) = self.key.take() {
                self.timers.disarm(key);
            }
            return Poll::Ready(());
        }
        match self.key {
            // Still armed: only the waker may have changed. (A timer fires
            // only once its deadline has passed, which was checked above.)
            Some(key) if self.timers.rearm(key, cx.waker()) => {}
            _ => {
                let key = self.timers.arm(self.deadline, cx.waker());
                self.key = Some(key);
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.timers.disarm(key);
        }
    }
}

/// A timer of `duration` on the [`TimerThread`], or async-std's if that
/// thread cannot be started.
pub(crate) fn sleep(duration: Duration) -> super::rt::BoxFuture<()> {
    // A duration too long for an `Instant` never ends.
    let Some(deadline) = Instant::now().checked_add(duration) else {
        return Box::pin(futures::future::pending());
    };
    match TimerThread::get() {
        Some(timers) => Box::pin(Sleep {
            deadline,
            timers,
            key: None,
        }),
        None => Box::pin(async_std::task::sleep(duration)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its wakes.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn wakes(count: &Arc<Count>) -> usize {
        count.0.load(Ordering::SeqCst)
    }

    fn poll_once(sleep: &mut Sleep, count: &Arc<Count>) -> Poll<()> {
        let waker = Waker::from(count.clone());
        Pin::new(sleep).poll(&mut Context::from_waker(&waker))
    }

    /// Waits up to 10 s for `cond`.
    fn wait_for(what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A timer thread of the test's own, so that no other test's timers
    /// wake it.
    fn own_thread() -> &'static TimerThread {
        let timers: &'static TimerThread = Box::leak(Box::default());
        std::thread::spawn(move || timers.run());
        timers
    }

    /// The same on a condition variable, as where there is no timerfd.
    fn own_condvar_thread() -> &'static TimerThread {
        let timers: &'static TimerThread = Box::leak(Box::new(TimerThread {
            armed: Mutex::default(),
            bell: Bell::Condvar(Condvar::new()),
        }));
        std::thread::spawn(move || timers.run());
        timers
    }

    fn sleep_for(timers: &'static TimerThread, ms: u64) -> Sleep {
        Sleep {
            deadline: Instant::now() + Duration::from_millis(ms),
            timers,
            key: None,
        }
    }

    /// Runs `scenario` until it reports that the machine kept to its
    /// timing (a step done before a deadline it must precede), at most 20
    /// times.
    fn on_time(scenario: impl Fn() -> bool) {
        assert!(
            (0..20).any(|_| scenario()),
            "the machine never kept to the scenario's timing"
        );
    }

    #[test]
    fn wakes_after_the_deadline_and_is_then_ready() {
        let count = Arc::new(Count::default());
        let armed_at = Instant::now();
        let mut sleep = sleep_for(own_thread(), 30);
        assert!(poll_once(&mut sleep, &count).is_pending());
        wait_for("the wake", || wakes(&count) == 1);
        assert!(armed_at.elapsed() >= Duration::from_millis(30));
        assert!(poll_once(&mut sleep, &count).is_ready());
    }

    /// Arms a 60 s timer, lets the thread wait for it, arms one due in
    /// `ms` and waits for that one to fire; returns how many times the
    /// thread woke in between. The 60 s timer stays armed and unfired.
    fn a_sooner_timer(timers: &'static TimerThread, ms: u64) -> u64 {
        let late = Arc::new(Count::default());
        let early = Arc::new(Count::default());
        let mut long = sleep_for(timers, 60_000);
        assert!(poll_once(&mut long, &late).is_pending());
        // The thread waits towards the long deadline, alone: only the
        // sooner timer can move it.
        wait_for("the thread to wait", || timers.lock().waiting);
        let before = timers.lock().wakeups;
        let mut short = sleep_for(timers, ms);
        assert!(poll_once(&mut short, &early).is_pending());
        wait_for("the short timer", || wakes(&early) == 1);
        assert!(poll_once(&mut short, &early).is_ready());
        wait_for("the thread to wait again", || timers.lock().waiting);
        assert_eq!(wakes(&late), 0);
        assert!(poll_once(&mut long, &late).is_pending());
        // Read before the timers are dropped: dropping one takes the lock.
        let after = timers.lock().wakeups;
        after - before
    }

    /// On Linux the thread sleeps on a timerfd: the sooner timer does not
    /// wake it before its deadline; it wakes once, to fire it.
    #[test]
    fn an_earlier_timer_armed_later_moves_the_waiting_thread() {
        let timers = own_thread();
        let woke = a_sooner_timer(timers, 20);
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            assert!(matches!(timers.bell, Bell::Fd(_)));
            assert_eq!(woke, 1, "woken only to fire");
        }
        assert!(woke >= 1);
    }

    /// Where there is no timerfd, the sooner timer notifies the thread,
    /// which then wakes again to fire it.
    #[test]
    fn on_a_condition_variable_an_earlier_timer_notifies_the_waiting_thread() {
        assert!(a_sooner_timer(own_condvar_thread(), 30) >= 2);
    }

    #[test]
    fn a_dropped_timer_never_wakes() {
        let timers = own_thread();
        on_time(|| {
            let dropped = Arc::new(Count::default());
            let kept = Arc::new(Count::default());
            let mut first = sleep_for(timers, 20);
            let mut second = sleep_for(timers, 40);
            let first_due = first.deadline;
            assert!(poll_once(&mut first, &dropped).is_pending());
            assert!(poll_once(&mut second, &kept).is_pending());
            drop(first);
            let in_time = Instant::now() < first_due;
            // The later timer fires, so the earlier one's deadline is past.
            wait_for("the kept timer", || wakes(&kept) == 1);
            if in_time {
                assert_eq!(wakes(&dropped), 0);
            }
            in_time
        });
    }

    #[test]
    fn a_repoll_moves_the_wake_to_the_new_waker() {
        let timers = own_thread();
        on_time(|| {
            let old = Arc::new(Count::default());
            let new = Arc::new(Count::default());
            let mut sleep = sleep_for(timers, 20);
            assert!(poll_once(&mut sleep, &old).is_pending());
            if poll_once(&mut sleep, &new).is_ready() {
                return false;
            }
            wait_for("the new waker", || wakes(&new) == 1);
            assert_eq!(wakes(&old), 0);
            true
        });
    }

    /// A deadline already passed is ready at once and gives the timer
    /// thread nothing to do: the thread is not woken for it (it wakes only
    /// to fire timers, docs/architecture.md), and the waker is not called
    /// later.
    #[test]
    fn a_passed_deadline_is_ready_at_once_and_wakes_neither_the_thread_nor_the_task() {
        let timers = own_thread();
        wait_for("the thread to wait", || timers.lock().waiting);
        let before = timers.lock().wakeups;
        let count = Arc::new(Count::default());
        let mut sleep = sleep_for(timers, 0);
        assert!(poll_once(&mut sleep, &count).is_ready());
        // Nothing armed and the timerfd not set: the thread has nothing
        // that could wake it or the task later.
        let armed = timers.lock();
        assert!(armed.timers.is_empty(), "{:?}", armed.timers);
        assert_eq!(armed.rings_at, None);
        assert_eq!(armed.wakeups, before);
        drop(armed);
        assert_eq!(wakes(&count), 0);
    }

    /// Wakes by panicking.
    struct Panics;

    impl std::task::Wake for Panics {
        fn wake(self: Arc<Self>) {
            panic!("a waker that panics");
        }
    }

    #[test]
    fn a_waker_that_panics_leaves_the_thread_running() {
        let timers = own_thread();
        let mut bad = sleep_for(timers, 5);
        let waker = Waker::from(Arc::new(Panics));
        assert!(Pin::new(&mut bad)
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        let count = Arc::new(Count::default());
        let mut good = sleep_for(timers, 30);
        assert!(poll_once(&mut good, &count).is_pending());
        wait_for("the timer after the panic", || wakes(&count) == 1);
    }

    #[test]
    fn the_process_thread_starts_once() {
        let first = TimerThread::get().expect("the timer thread starts");
        let second = TimerThread::get().expect("the timer thread starts");
        assert!(std::ptr::eq(first, second));
    }
}
