//! The requests not yet given to a connection, in the order they came,
//! and the numbering of the caller's requests ([`RequestId`]).

use super::conn::Queued;
use super::requests::Waiting;
use super::{RequestId, Target};
use std::collections::VecDeque;
use std::time::Instant;

/// The requests waiting for a connection, and the next request id.
#[derive(Debug)]
pub(crate) struct WaitingRequests {
    /// The requests, oldest first.
    queue: VecDeque<Waiting>,
    /// The id the next caller's request gets.
    next_id: u64,
}

impl Default for WaitingRequests {
    fn default() -> Self {
        WaitingRequests {
            queue: VecDeque::new(),
            next_id: 1,
        }
    }
}

impl WaitingRequests {
    /// A new request id: 1, then one more each time.
    pub fn next_id(&mut self) -> RequestId {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        id
    }

    /// Puts `queued` last in line for a connection to `target`.
    pub fn push(&mut self, target: Target, queued: Queued) {
        self.queue.push_back(Waiting { target, queued });
    }

    /// Whether no request waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether a request waits for a connection to `target`.
    pub fn wants(&self, target: Target) -> bool {
        self.queue.iter().any(|w| w.target == target)
    }

    /// The earliest deadline of a waiting request.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.queue.iter().map(|w| w.queued.deadline).min()
    }

    /// Takes out the requests whose deadline passed at `now`, oldest
    /// first; the others keep their order.
    pub fn take_expired(&mut self, now: Instant) -> Vec<Waiting> {
        let (expired, kept): (VecDeque<Waiting>, VecDeque<Waiting>) =
            std::mem::take(&mut self.queue)
                .into_iter()
                .partition(|w| now >= w.queued.deadline);
        self.queue = kept;
        expired.into()
    }

    /// Takes out every request, oldest first (to be given connections, or
    /// failed); those that still wait go back with [`WaitingRequests::restore`].
    pub fn take_all(&mut self) -> VecDeque<Waiting> {
        std::mem::take(&mut self.queue)
    }

    /// Puts back, in their order, the requests [`WaitingRequests::take_all`]
    /// took that still wait.
    pub fn restore(&mut self, still: VecDeque<Waiting>) {
        self.queue = still;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::requests::Origin;
    use crate::protocol::messages::metadata::MetadataRequest;
    use std::time::Duration;

    fn queued(id: u64, deadline: Instant) -> Queued {
        Queued {
            origin: Origin::User(RequestId(id)),
            body: Box::new(MetadataRequest::default()),
            deadline,
            answered: true,
        }
    }

    fn ids(waiting: &[Waiting]) -> Vec<Origin> {
        waiting.iter().map(|w| w.queued.origin).collect()
    }

    #[test]
    fn request_ids_count_from_one() {
        let mut w = WaitingRequests::default();
        assert_eq!(w.next_id(), RequestId(1));
        assert_eq!(w.next_id(), RequestId(2));
        assert_eq!(w.next_id(), RequestId(3));
    }

    #[test]
    fn expired_requests_leave_and_the_rest_keep_their_order() {
        let t = Instant::now();
        let s = Duration::from_secs(1);
        let mut w = WaitingRequests::default();
        w.push(Target::AnyBroker, queued(1, t + 3 * s));
        w.push(Target::Coordinator, queued(2, t + s));
        w.push(Target::Broker(1), queued(3, t + 5 * s));
        w.push(Target::AnyBroker, queued(4, t + 2 * s));
        assert_eq!(w.next_deadline(), Some(t + s));
        assert!(w.wants(Target::Coordinator));

        let expired = w.take_expired(t + 2 * s);
        assert_eq!(
            ids(&expired),
            [Origin::User(RequestId(2)), Origin::User(RequestId(4))]
        );
        assert!(!w.wants(Target::Coordinator));
        assert_eq!(w.next_deadline(), Some(t + 3 * s));
        let rest: Vec<Waiting> = w.take_all().into();
        assert_eq!(
            ids(&rest),
            [Origin::User(RequestId(1)), Origin::User(RequestId(3))]
        );
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
    }
}
