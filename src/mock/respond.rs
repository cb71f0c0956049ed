//! The answer to each request, without IO: a function of the cluster's
//! state, the request and the time. A request is answered now, or waits
//! ([`Reply::Later`]) for records (a Fetch below `min_bytes`) or for other
//! members (JoinGroup, SyncGroup); [`Waiting::poll`] says when its answer
//! is ready. The server threads (`server.rs`) call these under the state's
//! lock and do the waiting on a condition variable; the consumer's unit
//! tests (`consumer/pair.rs`) call them with a manual clock and no socket.
//!
//! This file checks a request (its connection's SASL state, its API and
//! version), hands its body to that API's handler under `api/` (one file
//! per request kind), frames the answer, and loses it when a test asked
//! for that (`MockCluster::push_lost_answers`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::api::{self, fetch::HeldFetch};
use super::group::Ticket;
use super::sasl::{self, ConnAuth, Gate};
use super::state::State;
use super::{BrokerClose, LostAnswer, MockEventKind};
use crate::error::ErrorCode;
use crate::protocol::frame::{decode_request, encode_response_with_capacity};
use crate::protocol::messages::api_versions::ApiVersionsRequest;
use crate::protocol::messages::Message;
use crate::protocol::{ApiKey, Reader, RequestHeader};

/// What a handler knows of a request besides its body: where it came
/// from, its version, its correlation id and its size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    /// The broker that got it.
    pub broker: i32,
    /// The connection it came on.
    pub conn: u64,
    /// The API version.
    pub version: i16,
    /// The correlation id its answer carries.
    pub correlation_id: i32,
    /// Its frame's size with the size prefix: what crossed the network.
    pub size: usize,
}

/// What to do after a request.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Send these bytes (one response frame).
    Reply(Bytes),
    /// Send this Fetch answer (with its version and correlation id),
    /// encoded by [`Answer::encoded`] after the state's lock is released:
    /// its records are copied into the frame, megabytes at a time, and the
    /// broker's other connections should not wait for that.
    Fetch(
        Box<crate::protocol::messages::fetch::FetchResponse>,
        i16,
        i32,
    ),
    /// A refusal after which the broker closes the connection (SASL).
    ReplyThenClose(Bytes, BrokerClose),
    /// Produce with `acks=0`: Kafka sends nothing back.
    Silent,
    /// Close the connection without an answer.
    Close(BrokerClose),
    /// The client closed the connection while its request was held (a
    /// Fetch waiting for records): nothing to answer, the thread ends.
    /// Only the server gives it (it looks at the socket); [`respond`] and
    /// [`Waiting::poll`] never do.
    PeerClosed,
}

impl Answer {
    /// The answer with a [`Answer::Fetch`] encoded as an [`Answer::Reply`]
    /// (in a buffer sized for its records up front); any other as it is.
    pub fn encoded(self) -> Answer {
        let Answer::Fetch(resp, version, correlation_id) = self else {
            return self;
        };
        // Records, plus room for each partition's and topic's fields.
        let capacity = resp.responses.iter().fold(256, |n, t| {
            n + 64
                + t.topic.len()
                + t.partitions.iter().fold(0, |n, p| {
                    n + 128
                        + p.records.as_ref().map_or(0, Bytes::len)
                        + 32 * p.aborted_transactions.as_ref().map_or(0, Vec::len)
                })
        });
        reply_with_capacity(&*resp, version, correlation_id, capacity)
    }
}

/// `body` framed as the answer of version `version` to request
/// `correlation_id`.
pub(crate) fn reply<M: Message>(body: &M, version: i16, correlation_id: i32) -> Answer {
    reply_with_capacity(body, version, correlation_id, 0)
}

fn reply_with_capacity<M: Message>(
    body: &M,
    version: i16,
    correlation_id: i32,
    capacity: usize,
) -> Answer {
    match encode_response_with_capacity(body, version, correlation_id, capacity) {
        Ok(bytes) => Answer::Reply(bytes),
        Err(e) => {
            log::debug!("mock: cannot encode {:?} v{version}: {e}", M::API_KEY);
            Answer::Close(BrokerClose::BadRequest)
        }
    }
}

/// Decodes a request body of the API the header named.
fn body<M: Message>(frame: Bytes) -> Result<M, Answer> {
    decode_request::<M>(frame)
        .map(|(_, m)| m)
        .map_err(|_| Answer::Close(BrokerClose::BadRequest))
}

/// Like [`body`], without refusing bytes after the body: Kafka parses a
/// request from its buffer and leaves whatever follows unread. librdkafka
/// (2.12, `rd_kafka_MetadataRequest0`) relies on that: a Metadata request
/// for every topic at v9+ keeps the four-byte placeholder of its topic
/// count (a compact null array, 0, followed by three zero bytes, read as
/// AllowAutoTopicCreation and IncludeTopicAuthorizedOperations false and
/// no tagged fields), so its own fields are left over at the end.
fn body_leaving_the_rest<M: Message>(frame: Bytes) -> Result<M, Answer> {
    let mut r = Reader::new(frame);
    RequestHeader::decode(&mut r)
        .and_then(|h| M::decode(&mut r, h.api_version))
        .map_err(|_| Answer::Close(BrokerClose::BadRequest))
}

/// The answer to a request: now, or once [`Waiting::poll`] has one.
#[derive(Debug)]
pub(crate) enum Reply {
    /// Answered.
    Now(Answer),
    /// Waits for records or for other members of a group.
    Later(Waiting),
}

/// A request whose answer waits (Kafka's purgatory).
#[derive(Debug)]
pub(crate) struct Waiting {
    received: Received,
    kind: WaitKind,
    /// The answer is to be lost (`MockCluster::push_lost_answers`).
    lost: Option<LostAnswer>,
}

/// What a waiting request waits for.
#[derive(Debug)]
pub(crate) enum WaitKind {
    /// A Fetch below `min_bytes`, until records come or its deadline.
    Fetch(Box<HeldFetch>),
    /// A JoinGroup parked until the join phase completes.
    Join(Ticket),
    /// A SyncGroup parked until the leader's assignments come.
    Sync(Ticket),
}

impl Waiting {
    /// Request `received`, waiting as `kind` says.
    pub fn new(received: Received, kind: WaitKind) -> Self {
        Waiting {
            received,
            kind,
            lost: None,
        }
    }

    /// The answer, once there is one at `now`. A request whose broker went
    /// down (or whose cluster shut down) gives up: a Fetch answers with
    /// what it has, a group request closes the connection.
    pub fn poll(&self, st: &mut State, now: Instant) -> Option<Answer> {
        self.poll_answer(st, now).map(|a| lose(a, self.lost))
    }

    fn poll_answer(&self, st: &mut State, now: Instant) -> Option<Answer> {
        let r = &self.received;
        match &self.kind {
            WaitKind::Fetch(held) => api::fetch::poll(st, r, held, now),
            WaitKind::Join(ticket) => match st.groups.poll_join(now, ticket) {
                Some(resp) => Some(reply(&resp, r.version, r.correlation_id)),
                None => self.abandon(st),
            },
            WaitKind::Sync(ticket) => match st.groups.poll_sync(now, ticket) {
                Some(resp) => Some(reply(&resp, r.version, r.correlation_id)),
                None => self.abandon(st),
            },
        }
    }

    /// When the answer may be ready without any other change of the state:
    /// a Fetch's `max_wait_ms`, or the coordinator's next deadline (its
    /// timer must run [`Groups::tick`](super::group::Groups::tick) then).
    pub fn wake_at(&self, st: &State) -> Option<Instant> {
        match &self.kind {
            WaitKind::Fetch(held) => Some(held.deadline()),
            WaitKind::Join(_) | WaitKind::Sync(_) => st.groups.next_deadline(),
        }
    }

    /// Forgets the request: its connection is gone.
    pub fn cancel(&self, st: &mut State) {
        match &self.kind {
            WaitKind::Fetch(_) => {}
            WaitKind::Join(ticket) | WaitKind::Sync(ticket) => st.groups.cancel(ticket),
        }
    }

    /// Whether this is a held Fetch, whose connection the server watches
    /// for the client's FIN while it waits.
    pub fn is_fetch(&self) -> bool {
        matches!(self.kind, WaitKind::Fetch(_))
    }

    /// A group request whose broker is gone closes its connection.
    fn abandon(&self, st: &mut State) -> Option<Answer> {
        if !abandoned(st, self.received.broker) {
            return None;
        }
        self.cancel(st);
        Some(Answer::Close(BrokerClose::Down))
    }
}

/// Whether a waiting request should give up: the cluster stops or its
/// broker went down (its connection is being closed).
pub(crate) fn abandoned(st: &State, broker: i32) -> bool {
    st.shutdown || !st.is_up(broker)
}

/// Notes a request in the event log and its `size` (the frame with its
/// size prefix: what crossed the network) in the request bytes; returns
/// the delay the broker adds before answering it (`MockCluster::set_delay`).
pub(crate) fn note_request(
    st: &mut State,
    broker: i32,
    conn: u64,
    (header, size): (&RequestHeader, usize),
    now: Instant,
) -> Duration {
    *st.request_bytes.entry(header.api_key).or_default() += size as u64;
    st.record(
        now,
        broker,
        MockEventKind::Request {
            connection: conn,
            api_key: header.api_key,
            api_version: header.api_version,
            correlation_id: header.correlation_id,
            client_id: header.client_id.clone(),
        },
    );
    st.brokers.get(&broker).map_or(Duration::ZERO, |b| b.delay)
}

/// Answers the request in `frame` (whose header is `header`) that
/// connection `conn` of `broker` sent, at `now`. The caller notes it first
/// ([`note_request`]) and tells waiting threads of the change afterwards.
/// A request that takes effect may have its answer lost
/// (`MockCluster::push_lost_answers`).
pub(crate) fn respond(
    st: &mut State,
    broker: i32,
    conn: u64,
    header: &RequestHeader,
    frame: Bytes,
    auth: &mut ConnAuth,
    now: Instant,
) -> Reply {
    let reply = respond_to(st, broker, conn, header, frame, auth, now);
    // A request refused by closing the connection had no effect to keep.
    if let Reply::Now(Answer::Close(_) | Answer::PeerClosed) = reply {
        return reply;
    }
    let lost = st
        .lost_answers
        .get_mut(&header.api_key)
        .and_then(VecDeque::pop_front);
    match reply {
        Reply::Now(answer) => Reply::Now(lose(answer, lost)),
        Reply::Later(mut waiting) => {
            waiting.lost = lost;
            Reply::Later(waiting)
        }
    }
}

/// The answer as it reaches the client when it is `lost`.
fn lose(answer: Answer, lost: Option<LostAnswer>) -> Answer {
    match (lost, answer) {
        (None, answer) => answer,
        (Some(LostAnswer::Close), Answer::Reply(_) | Answer::Fetch(..) | Answer::Silent) => {
            Answer::Close(BrokerClose::AnswerLost)
        }
        (Some(LostAnswer::Close), Answer::ReplyThenClose(..)) => {
            Answer::Close(BrokerClose::AnswerLost)
        }
        (Some(LostAnswer::Unanswered), Answer::Reply(_) | Answer::Fetch(..)) => Answer::Silent,
        (Some(LostAnswer::Unanswered), Answer::ReplyThenClose(_, reason)) => Answer::Close(reason),
        (Some(_), answer) => answer,
    }
}

/// [`respond`] before any answer is lost: the connection's SASL gate, the
/// API and version served, then the API's handler.
fn respond_to(
    st: &mut State,
    broker: i32,
    conn: u64,
    header: &RequestHeader,
    frame: Bytes,
    auth: &mut ConnAuth,
    now: Instant,
) -> Reply {
    let version = header.api_version;
    let corr = header.correlation_id;
    if let Gate::Close(reason) = sasl::gate(auth, ApiKey::from_code(header.api_key), now) {
        return Reply::Now(Answer::Close(reason));
    }
    let Some((api, range)) =
        ApiKey::from_code(header.api_key).and_then(|api| Some((api, st.served(api)?)))
    else {
        return Reply::Now(Answer::Close(BrokerClose::BadRequest));
    };
    if !range.contains(version) {
        if api == ApiKey::ApiVersions {
            // KIP-511: answer in v0 with the versions served, so the client
            // can pick one.
            let versions = api::api_versions::versions(st, Some(ErrorCode::UnsupportedVersion));
            return Reply::Now(reply(&versions, 0, corr));
        }
        return Reply::Now(Answer::Close(BrokerClose::BadRequest));
    }
    let r = Received {
        broker,
        conn,
        version,
        correlation_id: corr,
        size: frame.len() + 4,
    };
    let client_id = header.client_id.as_deref().unwrap_or_default();
    dispatch(st, &r, (api, client_id), frame, auth, now)
}

/// Hands the request's body to its API's handler (one file each under
/// `api/`); a body that cannot be decoded closes the connection.
fn dispatch(
    st: &mut State,
    r: &Received,
    (api, client_id): (ApiKey, &str),
    frame: Bytes,
    auth: &mut ConnAuth,
    now: Instant,
) -> Reply {
    use api::*;
    match api {
        ApiKey::ApiVersions => at_once(r, body::<ApiVersionsRequest>(frame), |_| {
            api_versions::answer(st, r)
        }),
        ApiKey::Metadata => at_once(r, body_leaving_the_rest(frame), |req| {
            metadata::answer(st, r, &req)
        }),
        ApiKey::FindCoordinator => {
            at_once(r, body(frame), |req| find_coordinator::answer(st, r, &req))
        }
        ApiKey::ListOffsets => at_once(r, body(frame), |req| list_offsets::answer(st, r, &req)),
        ApiKey::OffsetForLeaderEpoch => at_once(r, body(frame), |req| {
            offset_for_leader_epoch::answer(st, r, &req)
        }),
        ApiKey::CreateTopics => at_once(r, body(frame), |req| create_topics::answer(st, r, &req)),
        ApiKey::InitProducerId => {
            at_once(r, body(frame), |req| init_producer_id::answer(st, r, &req))
        }
        ApiKey::Heartbeat => at_once(r, body(frame), |req| heartbeat::answer(st, r, &req, now)),
        ApiKey::LeaveGroup => at_once(r, body(frame), |req| leave_group::answer(st, r, &req, now)),
        ApiKey::OffsetCommit => at_once(r, body(frame), |req| {
            offset_commit::answer(st, r, &req, now)
        }),
        ApiKey::OffsetFetch => {
            at_once(r, body(frame), |req| offset_fetch::answer(st, r, &req, now))
        }
        ApiKey::ConsumerGroupHeartbeat => at_once(r, body(frame), |req| {
            consumer_group_heartbeat::answer(st, r, &req, now)
        }),
        ApiKey::Produce => {
            now_or_close(body(frame), |req| Reply::Now(produce::respond(st, r, &req)))
        }
        ApiKey::SaslHandshake => now_or_close(body(frame), |req| {
            Reply::Now(sasl_handshake::respond(st, r, auth, &req))
        }),
        ApiKey::SaslAuthenticate => now_or_close(body(frame), |req| {
            Reply::Now(sasl_authenticate::respond(st, r, auth, &req, now))
        }),
        ApiKey::Fetch => now_or_close(body(frame), |req| fetch::respond(st, r, req, now)),
        ApiKey::JoinGroup => now_or_close(body(frame), |req| {
            join_group::respond(st, r, client_id, &req, now)
        }),
        ApiKey::SyncGroup => now_or_close(body(frame), |req| sync_group::respond(st, r, &req, now)),
    }
}

/// A request answered at once with the response `answer` gives for its
/// body, framed at its version.
fn at_once<M, R: Message>(
    r: &Received,
    decoded: Result<M, Answer>,
    answer: impl FnOnce(M) -> R,
) -> Reply {
    now_or_close(decoded, |req| {
        Reply::Now(reply(&answer(req), r.version, r.correlation_id))
    })
}

/// The reply `respond` gives for a decoded body; the connection closes
/// for one that could not be decoded.
fn now_or_close<M>(decoded: Result<M, Answer>, respond: impl FnOnce(M) -> Reply) -> Reply {
    match decoded {
        Ok(req) => respond(req),
        Err(refused) => Reply::Now(refused),
    }
}

#[cfg(test)]
mod tests;
