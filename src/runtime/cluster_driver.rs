//! Drives a [`Cluster`] with real sockets: the connection manager on its
//! own, for tools and tests that speak to brokers directly. It runs the
//! same [driver loop](super::drive_pass) as the client's background task, in
//! the caller's task instead of one of its own.

use super::drive_pass::{act, pass, Driven, Machine, Wake};
use super::sockets::{Readers, SocketOptions, SocketTable, Sockets};
use crate::cluster::{Cluster, RequestBody, RequestError, RequestId, Response, Target};
use crate::events::{ConnectionEvent, ConnectionInfo};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// A [`Cluster`] with its sockets, driven by whoever awaits
/// [`ClusterDriver::step`], [`ClusterDriver::wait_response`] or
/// [`ClusterDriver::run_until`]: no background task runs (connect and
/// socket-reader tasks are spawned on tokio when it is made inside a tokio
/// runtime, on async-std otherwise: see the [module documentation](super)).
#[derive(Debug)]
pub struct ClusterDriver {
    state: State,
    sockets: Sockets,
    table: SocketTable,
}

/// The cluster and the outputs it produced, not yet taken.
#[derive(Debug)]
struct State {
    cluster: Cluster,
    events: VecDeque<ConnectionEvent>,
    responses: HashMap<RequestId, Result<Response, RequestError>>,
}

impl Machine for State {
    fn with<R>(&mut self, f: impl FnOnce(&mut dyn Driven) -> R) -> R {
        f(self)
    }
}

impl Driven for State {
    fn cluster(&mut self) -> &mut Cluster {
        &mut self.cluster
    }

    fn drive(&mut self, now: Instant) {
        self.cluster.handle_timeout(now);
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.cluster.poll_timeout()
    }

    fn next_deadline_after(&self, now: Instant) -> Option<Instant> {
        self.cluster.poll_timeout().filter(|t| *t > now)
    }

    fn publish(&mut self) {
        while let Some(e) = self.cluster.poll_event() {
            self.events.push_back(e);
        }
        while let Some((id, r)) = self.cluster.poll_response() {
            self.responses.insert(id, r);
        }
    }
}

impl ClusterDriver {
    /// Wraps `cluster`. Nothing is connected and no task is started until a
    /// request needs it. The runtime is chosen here: tokio inside a tokio
    /// runtime (with the feature `runtime-tokio`), async-std otherwise.
    ///
    /// # Panics
    ///
    /// Built with the feature `runtime-tokio` alone, driving it (its first
    /// connect) panics where no tokio runtime is current and none was when
    /// it was made.
    pub fn new(cluster: Cluster, options: SocketOptions) -> Self {
        let sockets = Sockets::new(super::rt::auto(), options, Readers::Tasks);
        let table = sockets.table();
        ClusterDriver {
            state: State {
                cluster,
                events: VecDeque::new(),
                responses: HashMap::new(),
            },
            sockets,
            table,
        }
    }

    /// The state machine, for inputs that need no IO (topics, metadata
    /// refresh) and for getters.
    pub fn cluster(&mut self) -> &mut Cluster {
        &mut self.state.cluster
    }

    /// Queues a request; see [`Cluster::request`].
    pub fn request(&mut self, target: Target, body: Box<dyn RequestBody>) -> RequestId {
        let id = self.state.cluster.request(Instant::now(), target, body);
        // A request refused at once (wrong target, no group) is answered
        // already: take it now, so `wait_response` does not sleep first.
        self.state.publish();
        id
    }

    /// Takes the response to `id` if it has arrived.
    pub fn take_response(&mut self, id: RequestId) -> Option<Result<Response, RequestError>> {
        self.state.responses.remove(&id)
    }

    /// Runs until `id` is answered, or `timeout` passes (then `None`).
    pub async fn wait_response(
        &mut self,
        id: RequestId,
        timeout: Duration,
    ) -> Option<Result<Response, RequestError>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.take_response(id) {
                return Some(r);
            }
            if Instant::now() >= deadline {
                return None;
            }
            self.step(deadline).await;
        }
    }

    /// Runs until `done` holds, or `timeout` passes; returns whether it held.
    pub async fn run_until(
        &mut self,
        timeout: Duration,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            self.step(deadline).await;
        }
    }

    /// Connection events so far, oldest first.
    pub fn take_events(&mut self) -> Vec<ConnectionEvent> {
        self.state.events.drain(..).collect()
    }

    /// A snapshot of the live connections.
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.state.cluster.connections(Instant::now())
    }

    /// Closes every connection (event reason `shutdown`).
    pub fn shutdown(&mut self) {
        self.state.cluster.shutdown(Instant::now());
        while self.state.cluster.poll_action().is_some() {}
        self.table.close_all();
        self.state.publish();
    }

    /// One pass of the driver loop: does what the cluster asked; when that
    /// was nothing, waits for one socket report or the next deadline (at
    /// the latest `until`), hands every waiting report to the cluster, and
    /// does what that asked (such as closing a socket the broker closed).
    /// Responses and events are then ready to take.
    pub async fn step(&mut self, until: Instant) {
        let wake = Wake {
            until: Some(until),
            ..Wake::default()
        };
        pass(&mut self.state, &mut self.sockets, wake).await;
        // What the reports completed (responses, a closed connection) is
        // seen and acted on now rather than at the next pass.
        act(&mut self.state, &mut self.sockets).await;
    }
}

impl Drop for ClusterDriver {
    /// Closes every socket without blocking.
    fn drop(&mut self) {
        self.table.close_all();
    }
}
