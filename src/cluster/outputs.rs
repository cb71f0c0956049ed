//! What the connection manager hands out: the queues the runtime, the
//! observer, the callers and the application poll ([`Action`]s,
//! [`ConnectionEvent`]s, responses, [`Problem`]s), each in the order it
//! was written.

use super::conn::Conn;
use super::{Action, Problem, RequestError, RequestId, Response};
use crate::events::{ConnectionEvent, EventKind};
use std::collections::VecDeque;
use std::time::Instant;

/// A request's outcome, as [`Cluster::poll_response`](super::Cluster::poll_response)
/// hands it out.
pub(crate) type Outcome = (RequestId, Result<Response, RequestError>);

/// The connection manager's output queues, first in, first out.
#[derive(Debug, Default)]
pub(crate) struct Outputs {
    /// What the runtime must do.
    actions: VecDeque<Action>,
    /// What happened to connections.
    events: VecDeque<ConnectionEvent>,
    /// Requests finished.
    responses: VecDeque<Outcome>,
    /// Conditions for the application to hear of.
    problems: VecDeque<Problem>,
}

impl Outputs {
    /// Queues an action for the runtime.
    pub fn act(&mut self, action: Action) {
        self.actions.push_back(action);
    }

    /// Queues the outcome of request `id`.
    pub fn respond(&mut self, id: RequestId, outcome: Result<Response, RequestError>) {
        self.responses.push_back((id, outcome));
    }

    /// Queues the problem, if there is one.
    pub fn report(&mut self, problem: Option<Problem>) {
        self.problems.extend(problem);
    }

    /// Queues an event of `c` at `now`, its time counted from `epoch`, and
    /// logs it.
    pub fn event(&mut self, epoch: Instant, now: Instant, c: &Conn, kind: EventKind) {
        let event = ConnectionEvent {
            at: now.saturating_duration_since(epoch),
            kind,
            connection: c.id,
            broker: c.broker,
            addr: c.addr.clone(),
            purpose: c.purpose,
        };
        log::debug!("{event}");
        self.events.push_back(event);
    }

    /// The oldest action not yet taken.
    pub fn next_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The oldest event not yet taken.
    pub fn next_event(&mut self) -> Option<ConnectionEvent> {
        self.events.pop_front()
    }

    /// The oldest outcome not yet taken.
    pub fn next_response(&mut self) -> Option<Outcome> {
        self.responses.pop_front()
    }

    /// The oldest problem not yet taken.
    pub fn next_problem(&mut self) -> Option<Problem> {
        self.problems.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{ConnectionId, Purpose};
    use std::time::Duration;

    #[test]
    fn each_queue_hands_out_in_the_order_written() {
        let mut out = Outputs::default();
        out.act(Action::Close {
            conn: ConnectionId(2),
        });
        out.act(Action::Close {
            conn: ConnectionId(1),
        });
        out.respond(RequestId(7), Err(RequestError::Shutdown));
        out.respond(RequestId(3), Err(RequestError::NoGroup));
        out.report(None);
        assert_eq!(
            out.next_action(),
            Some(Action::Close {
                conn: ConnectionId(2)
            })
        );
        assert_eq!(
            out.next_action(),
            Some(Action::Close {
                conn: ConnectionId(1)
            })
        );
        assert_eq!(out.next_action(), None);
        assert_eq!(out.next_response().map(|(id, _)| id), Some(RequestId(7)));
        assert_eq!(out.next_response().map(|(id, _)| id), Some(RequestId(3)));
        assert_eq!(out.next_response(), None);
        assert_eq!(out.next_problem(), None);
    }

    #[test]
    fn an_event_is_timed_from_the_epoch_and_names_its_connection() {
        let epoch = Instant::now();
        let now = epoch + Duration::from_millis(1500);
        let c = Conn::new(
            ConnectionId(4),
            "b1:9092".into(),
            Some(1),
            Purpose::Leader,
            now,
            now + Duration::from_secs(10),
            1 << 20,
        );
        let mut out = Outputs::default();
        out.event(epoch, now, &c, EventKind::Connecting);
        let event = out.next_event().expect("queued");
        assert_eq!(event.at, Duration::from_millis(1500));
        assert_eq!(event.connection, ConnectionId(4));
        assert_eq!(event.broker, Some(1));
        assert_eq!(event.addr, "b1:9092");
        assert_eq!(event.purpose, Purpose::Leader);
        assert_eq!(event.kind, EventKind::Connecting);
        assert_eq!(out.next_event(), None);
    }
}
