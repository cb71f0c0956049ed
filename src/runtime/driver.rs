//! Drives a [`Cluster`] with real sockets on async-std: the connection
//! manager on its own, for tools and tests that speak to brokers directly.

use super::sockets::{SocketOptions, SocketTable, Sockets};
use crate::cluster::{Cluster, RequestBody, RequestError, RequestId, Response, Target};
use crate::events::{ConnectionEvent, ConnectionInfo};
use futures::FutureExt;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// A [`Cluster`] with its sockets.
#[derive(Debug)]
pub struct ClusterDriver {
    cluster: Cluster,
    sockets: Sockets,
    table: SocketTable,
    events: VecDeque<ConnectionEvent>,
    responses: HashMap<RequestId, Result<Response, RequestError>>,
}

impl ClusterDriver {
    /// Wraps `cluster`. Nothing is connected and no task is started until a
    /// request needs it.
    pub fn new(cluster: Cluster, options: SocketOptions) -> Self {
        let sockets = Sockets::new(options);
        let table = sockets.table();
        ClusterDriver {
            cluster,
            sockets,
            table,
            events: VecDeque::new(),
            responses: HashMap::new(),
        }
    }

    /// The state machine, for inputs that need no IO (topics, metadata
    /// refresh) and for getters.
    pub fn cluster(&mut self) -> &mut Cluster {
        &mut self.cluster
    }

    /// Queues a request; see [`Cluster::request`].
    pub fn request(&mut self, target: Target, body: Box<dyn RequestBody>) -> RequestId {
        let id = self.cluster.request(Instant::now(), target, body);
        // A request refused at once (wrong target, no group) is answered
        // already: take it now, so `wait_response` does not sleep first.
        self.collect_outputs();
        id
    }

    /// Takes the response to `id` if it has arrived.
    pub fn take_response(&mut self, id: RequestId) -> Option<Result<Response, RequestError>> {
        self.responses.remove(&id)
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
        self.events.drain(..).collect()
    }

    /// A snapshot of the live connections.
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.cluster.connections(Instant::now())
    }

    /// Closes every connection (event reason `shutdown`).
    pub fn shutdown(&mut self) {
        self.cluster.shutdown(Instant::now());
        while self.cluster.poll_action().is_some() {}
        self.table.close_all();
        self.collect_outputs();
    }

    /// Does what the cluster asked, then waits for one socket report or the
    /// next deadline (at the latest `until`) and hands it to the cluster.
    pub async fn step(&mut self, until: Instant) {
        self.apply_actions().await;
        let wake = self.cluster.poll_timeout().map_or(until, |t| t.min(until));
        let sleep = wake.saturating_duration_since(Instant::now());
        let input = futures::select! {
            input = self.sockets.next().fuse() => input,
            _ = async_std::task::sleep(sleep).fuse() => None,
        };
        match input {
            Some((id, input)) => self
                .sockets
                .feed(&mut self.cluster, Instant::now(), id, input),
            None => self.cluster.handle_timeout(Instant::now()),
        }
        // Take every report already waiting before acting again.
        while let Some((id, input)) = self.sockets.try_next() {
            self.sockets
                .feed(&mut self.cluster, Instant::now(), id, input);
        }
        self.apply_actions().await;
    }

    fn collect_outputs(&mut self) {
        while let Some(e) = self.cluster.poll_event() {
            self.events.push_back(e);
        }
        while let Some((id, r)) = self.cluster.poll_response() {
            self.responses.insert(id, r);
        }
    }

    async fn apply_actions(&mut self) {
        while let Some(action) = self.cluster.poll_action() {
            if let Some((conn, error)) = self.sockets.perform(action).await {
                self.cluster.handle_closed(Instant::now(), conn, error);
            }
        }
        self.collect_outputs();
    }
}

impl Drop for ClusterDriver {
    /// Closes every socket without blocking.
    fn drop(&mut self) {
        self.table.close_all();
    }
}
