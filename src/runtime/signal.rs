//! A wake-up that holds at most one pending notification: notifying twice
//! before the waiter looks is the same as notifying once. A client
//! wakes its background task with one, so however often it signals,
//! nothing queues up.

use futures::task::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

/// See the [module documentation](self). One waiter at a time.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    set: AtomicBool,
    waker: AtomicWaker,
}

impl Signal {
    /// Sets the signal and wakes the waiter, if any.
    pub fn notify(&self) {
        self.set.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Clears the signal; returns whether it was set.
    pub fn take(&self) -> bool {
        self.set.swap(false, Ordering::AcqRel)
    }

    /// Completes (and clears the signal) once it is set.
    #[cfg(test)]
    pub fn wait(&self) -> impl Future<Output = ()> + '_ {
        futures::future::poll_fn(move |cx| self.poll_wait(cx))
    }

    /// Waits for the signal as a poll function: ready (and cleared) when
    /// set, else the waker is registered.
    pub fn poll_wait(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.take() {
            return Poll::Ready(());
        }
        self.waker.register(cx.waker());
        // Set between the check and the registration: seen now.
        if self.take() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Gives the executor thread to other tasks once, whatever the runtime:
/// wakes itself and returns `Pending` on the first poll.
pub(crate) fn yield_now() -> impl Future<Output = ()> {
    struct YieldNow(bool);
    impl Future for YieldNow {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
    YieldNow(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn many_notifications_are_one() {
        let s = Signal::default();
        for _ in 0..1000 {
            s.notify();
        }
        assert!(s.wait().now_or_never().is_some());
        assert!(s.wait().now_or_never().is_none());
    }

    #[test]
    fn a_waiter_is_woken() {
        let s = std::sync::Arc::new(Signal::default());
        let t = {
            let s = s.clone();
            std::thread::spawn(move || futures::executor::block_on(s.wait()))
        };
        s.notify();
        t.join().unwrap();
    }

    #[test]
    fn yield_now_is_pending_once() {
        let mut y = Box::pin(yield_now());
        assert!(y.as_mut().now_or_never().is_none());
        assert!(y.now_or_never().is_some());
    }
}
