//! The answer to each request, without IO: a function of the cluster's
//! state, the request and the time. A request is answered now, or waits
//! ([`Reply::Later`]) for records (a Fetch below `min_bytes`) or for other
//! members (JoinGroup, SyncGroup); [`Waiting::poll`] says when its answer
//! is ready. The server threads (`server.rs`) call these under the state's
//! lock and do the waiting on a condition variable; the consumer's unit
//! tests call them with a manual clock and no socket.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::fetch_session::{self, Context};
use super::group::{Groups, Step, Ticket};
use super::sasl::{self as mock_sasl, ConnAuth, Gate};
use super::state::{self, State};
use super::{BrokerClose, LostAnswer, MockEventKind};
use crate::error::ErrorCode;
use crate::protocol::frame::{decode_request, encode_response_with_capacity};
use crate::protocol::messages::api_versions::ApiVersionsRequest;
use crate::protocol::messages::consumer_group_heartbeat::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use crate::protocol::messages::create_topics::CreateTopicsRequest;
use crate::protocol::messages::fetch::{FetchRequest, FetchResponse, FetchTopic};
use crate::protocol::messages::find_coordinator::FindCoordinatorRequest;
use crate::protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use crate::protocol::messages::init_producer_id::InitProducerIdRequest;
use crate::protocol::messages::join_group::{JoinGroupRequest, JoinGroupResponse};
use crate::protocol::messages::leave_group::{LeaveGroupRequest, LeaveGroupResponse};
use crate::protocol::messages::list_offsets::ListOffsetsRequest;
use crate::protocol::messages::metadata::MetadataRequest;
use crate::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
};
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchResponse, OffsetFetchResponseGroup,
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use crate::protocol::messages::offset_for_leader_epoch::OffsetForLeaderEpochRequest;
use crate::protocol::messages::produce::ProduceRequest;
use crate::protocol::messages::sasl_authenticate::SaslAuthenticateRequest;
use crate::protocol::messages::sasl_handshake::SaslHandshakeRequest;
use crate::protocol::messages::sync_group::{SyncGroupRequest, SyncGroupResponse};
use crate::protocol::messages::Message;
use crate::protocol::{ApiKey, Reader, RequestHeader};

/// What to do after a request.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Send these bytes (one response frame).
    Reply(Bytes),
    /// Send this Fetch answer (with its version and correlation id),
    /// encoded by [`Answer::encoded`] after the state's lock is released:
    /// its records are copied into the frame, megabytes at a time, and the
    /// broker's other connections should not wait for that.
    Fetch(Box<FetchResponse>, i16, i32),
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

fn reply<M: Message>(body: &M, version: i16, correlation_id: i32) -> Answer {
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

/// A SASL answer, closing the connection after a refusal (as Kafka does).
fn sasl_reply<M: Message>(body: M, close: bool, version: i16, correlation_id: i32) -> Answer {
    match reply(&body, version, correlation_id) {
        Answer::Reply(bytes) if close => {
            Answer::ReplyThenClose(bytes, BrokerClose::AuthenticationFailed)
        }
        other => other,
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
    broker: i32,
    version: i16,
    corr: i32,
    kind: WaitKind,
    /// The answer is to be lost (`MockCluster::push_lost_answers`).
    lost: Option<LostAnswer>,
}

#[derive(Debug)]
enum WaitKind {
    /// A Fetch below `min_bytes`, until records come or `deadline`.
    Fetch(Box<HeldFetch>),
    /// A JoinGroup parked until the join phase completes.
    Join(Ticket),
    /// A SyncGroup parked until the leader's assignments come.
    Sync(Ticket),
}

impl Waiting {
    /// The answer, once there is one at `now`. A request whose broker went
    /// down (or whose cluster shut down) gives up: a Fetch answers with
    /// what it has, a group request closes the connection.
    pub fn poll(&self, st: &mut State, now: Instant) -> Option<Answer> {
        self.poll_answer(st, now).map(|a| lose(a, self.lost))
    }

    fn poll_answer(&self, st: &mut State, now: Instant) -> Option<Answer> {
        let (version, corr) = (self.version, self.corr);
        match &self.kind {
            WaitKind::Fetch(held) => fetch_ready(st, self.broker, version, held, now)
                .map(|resp| finish_fetch(st, self.broker, version, corr, held, resp, now)),
            WaitKind::Join(ticket) => match st.groups.poll_join(now, ticket) {
                Some(resp) => Some(reply(&resp, version, corr)),
                None => self.abandon(st),
            },
            WaitKind::Sync(ticket) => match st.groups.poll_sync(now, ticket) {
                Some(resp) => Some(reply(&resp, version, corr)),
                None => self.abandon(st),
            },
        }
    }

    /// When the answer may be ready without any other change of the state:
    /// a Fetch's `max_wait_ms`, or the coordinator's next deadline (its
    /// timer must run [`Groups::tick`] then).
    pub fn wake_at(&self, st: &State) -> Option<Instant> {
        match &self.kind {
            WaitKind::Fetch(held) => Some(held.deadline),
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
        if !abandoned(st, self.broker) {
            return None;
        }
        self.cancel(st);
        Some(Answer::Close(BrokerClose::Down))
    }
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

/// [`respond`] before any answer is lost.
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
    // The frame with its size prefix: what crossed the network.
    let size = frame.len() + 4;
    if let Gate::Close(reason) = mock_sasl::gate(auth, ApiKey::from_code(header.api_key), now) {
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
            return Reply::Now(reply(
                &st.api_versions(Some(ErrorCode::UnsupportedVersion)),
                0,
                corr,
            ));
        }
        return Reply::Now(Answer::Close(BrokerClose::BadRequest));
    }
    let client_id = header.client_id.clone().unwrap_or_default();
    let answer = |a: Result<Answer, Answer>| Reply::Now(a.unwrap_or_else(|a| a));
    // The answers computed at once, under the lock, from the request.
    let at_once = |st: &mut State, req: AnyRequest| -> Box<dyn Encode> {
        match req {
            AnyRequest::ApiVersions => {
                let error = st.take_error(broker, api);
                Box::new(st.api_versions(error))
            }
            AnyRequest::Metadata(req) => {
                let error = st.take_error(broker, api);
                Box::new(st.metadata(version, &req, error))
            }
            AnyRequest::FindCoordinator(req) => {
                let error = st.take_error(broker, api);
                Box::new(st.find_coordinator(version, &req, error))
            }
            AnyRequest::ListOffsets(req) => {
                let error = st.take_error(broker, api);
                Box::new(st.list_offsets(broker, &req, error))
            }
            AnyRequest::OffsetForLeaderEpoch(req) => {
                let error = st.take_error(broker, api);
                Box::new(st.offset_for_leader_epoch(broker, &req, error))
            }
            AnyRequest::CreateTopics(req) => {
                let error = st.take_error(broker, api);
                Box::new(st.create_topics(version, &req, error))
            }
            AnyRequest::InitProducerId(req) => {
                let error = st.take_error(broker, api);
                Box::new(st.init_producer_id(broker, version, &req, error))
            }
            AnyRequest::Heartbeat(req) => {
                Box::new(match group_error(st, broker, api, &req.group_id) {
                    Some(code) => HeartbeatResponse {
                        error_code: code.code(),
                        ..Default::default()
                    },
                    None => st.groups.heartbeat(now, version, &req),
                })
            }
            AnyRequest::LeaveGroup(req) => {
                Box::new(match group_error(st, broker, api, &req.group_id) {
                    Some(code) => LeaveGroupResponse {
                        error_code: code.code(),
                        ..Default::default()
                    },
                    None => st.groups.leave(now, version, &req),
                })
            }
            AnyRequest::OffsetCommit(req) => {
                Box::new(match group_error(st, broker, api, &req.group_id) {
                    Some(code) => commit_error(&req, code),
                    None if st.consumer_groups.contains(&req.group_id) => {
                        // A consumer group (KIP-848): the member epoch is
                        // checked here; the offsets are stored as for a
                        // group without members.
                        match st.consumer_groups.validate_commit(
                            &req.group_id,
                            &req.member_id,
                            req.generation_id_or_member_epoch,
                        ) {
                            Err(code) => commit_error(&req, code),
                            Ok(()) => {
                                let mut simple = req.clone();
                                simple.generation_id_or_member_epoch = -1;
                                simple.member_id = String::new();
                                simple.group_instance_id = None;
                                let topics = &st.topics;
                                let exists =
                                    |t: &str, p: i32| state::partition_exists(topics, t, p);
                                st.groups.commit(now, version, &simple, &exists)
                            }
                        }
                    }
                    None => {
                        let topics = &st.topics;
                        let exists = |t: &str, p: i32| state::partition_exists(topics, t, p);
                        st.groups.commit(now, version, &req, &exists)
                    }
                })
            }
            AnyRequest::ConsumerGroupHeartbeat(req) => {
                Box::new(match group_error(st, broker, api, &req.group_id) {
                    Some(code) => ConsumerGroupHeartbeatResponse {
                        error_code: code.code(),
                        member_epoch: -1,
                        ..Default::default()
                    },
                    None => {
                        let view = st
                            .topics
                            .iter()
                            .map(|(name, t)| (name.clone(), (t.id, t.partitions.len() as i32)))
                            .collect();
                        st.consumer_groups.heartbeat(now, version, &req, &view)
                    }
                })
            }
            AnyRequest::OffsetFetch(req) => Box::new(offset_fetch(st, broker, version, &req, now)),
        }
    };
    let decoded = match api {
        ApiKey::ApiVersions => body::<ApiVersionsRequest>(frame).map(|_| AnyRequest::ApiVersions),
        ApiKey::Metadata => body_leaving_the_rest(frame).map(AnyRequest::Metadata),
        ApiKey::FindCoordinator => body(frame).map(AnyRequest::FindCoordinator),
        ApiKey::ListOffsets => body(frame).map(AnyRequest::ListOffsets),
        ApiKey::OffsetForLeaderEpoch => body(frame).map(AnyRequest::OffsetForLeaderEpoch),
        ApiKey::CreateTopics => body(frame).map(AnyRequest::CreateTopics),
        ApiKey::Heartbeat => body(frame).map(AnyRequest::Heartbeat),
        ApiKey::LeaveGroup => body(frame).map(AnyRequest::LeaveGroup),
        ApiKey::OffsetCommit => body(frame).map(AnyRequest::OffsetCommit),
        ApiKey::OffsetFetch => body(frame).map(AnyRequest::OffsetFetch),
        ApiKey::ConsumerGroupHeartbeat => body(frame).map(AnyRequest::ConsumerGroupHeartbeat),
        ApiKey::Produce => {
            return answer(body::<ProduceRequest>(frame).map(|req| {
                let error = st.take_error(broker, api);
                let resp = st.produce(broker, &req, error);
                if req.acks == 0 {
                    Answer::Silent
                } else {
                    reply(&resp, version, corr)
                }
            }));
        }
        ApiKey::InitProducerId => body(frame).map(AnyRequest::InitProducerId),
        ApiKey::SaslHandshake => {
            return answer(body::<SaslHandshakeRequest>(frame).map(|req| {
                let a = mock_sasl::handshake(st.sasl.as_ref(), auth, &req);
                sasl_reply(a.response, a.close, version, corr)
            }));
        }
        ApiKey::SaslAuthenticate => {
            return answer(body::<SaslAuthenticateRequest>(frame).map(|req| {
                let a = mock_sasl::authenticate(st.sasl.as_ref(), auth, version, &req, now);
                if let Some((mechanism, principal)) = a.authenticated {
                    st.record(
                        now,
                        broker,
                        MockEventKind::Authenticated {
                            connection: conn,
                            mechanism,
                            principal,
                        },
                    );
                }
                sasl_reply(a.response, a.close, version, corr)
            }));
        }
        ApiKey::Fetch => {
            return match body::<FetchRequest>(frame) {
                Ok(req) => fetch(st, (broker, conn), (version, corr, size), req, now),
                Err(a) => Reply::Now(a),
            };
        }
        ApiKey::JoinGroup => {
            return match body::<JoinGroupRequest>(frame) {
                Ok(req) => join_group(st, broker, (version, corr), &client_id, &req, now),
                Err(a) => Reply::Now(a),
            };
        }
        ApiKey::SyncGroup => {
            return match body::<SyncGroupRequest>(frame) {
                Ok(req) => sync_group(st, broker, (version, corr), &req, now),
                Err(a) => Reply::Now(a),
            };
        }
    };
    answer(decoded.map(|req| at_once(st, req).frame(version, corr)))
}

/// A request answered at once.
enum AnyRequest {
    ApiVersions,
    Metadata(MetadataRequest),
    FindCoordinator(FindCoordinatorRequest),
    ListOffsets(ListOffsetsRequest),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    CreateTopics(CreateTopicsRequest),
    InitProducerId(InitProducerIdRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest),
}

/// A response body of any API, framed at the request's version.
trait Encode {
    fn frame(&self, version: i16, correlation_id: i32) -> Answer;
}

impl<M: Message> Encode for M {
    fn frame(&self, version: i16, correlation_id: i32) -> Answer {
        reply(self, version, correlation_id)
    }
}

/// The error a group request gets before the coordinator sees it: an
/// injected one, or NOT_COORDINATOR when another broker coordinates.
fn group_error(st: &mut State, broker: i32, api: ApiKey, group: &str) -> Option<ErrorCode> {
    if let Some(code) = st.take_error(broker, api) {
        return Some(code);
    }
    (st.coordinator(group) != broker).then_some(ErrorCode::NotCoordinator)
}

fn commit_error(req: &OffsetCommitRequest, code: ErrorCode) -> OffsetCommitResponse {
    OffsetCommitResponse {
        topics: req
            .topics
            .iter()
            .map(|t| OffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| OffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code.code(),
                        unknown_tagged_fields: Vec::new(),
                    })
                    .collect(),
                unknown_tagged_fields: Vec::new(),
            })
            .collect(),
        ..Default::default()
    }
}

fn offset_fetch(
    st: &mut State,
    broker: i32,
    version: i16,
    req: &OffsetFetchRequest,
    now: Instant,
) -> OffsetFetchResponse {
    if version >= 8 {
        // Each group has its own coordinator; answer those this broker
        // coordinates and refuse the others.
        let injected = st.take_error(broker, ApiKey::OffsetFetch);
        let mut resp = st.groups.fetch_offsets(now, version, req);
        for g in &mut resp.groups {
            let refused = injected.or_else(|| {
                (st.coordinator(&g.group_id) != broker).then_some(ErrorCode::NotCoordinator)
            });
            if let Some(code) = refused {
                *g = OffsetFetchResponseGroup {
                    group_id: g.group_id.clone(),
                    error_code: code.code(),
                    ..Default::default()
                };
            }
        }
        return resp;
    }
    match group_error(st, broker, ApiKey::OffsetFetch, &req.group_id) {
        None => st.groups.fetch_offsets(now, version, req),
        // v1 has no top-level error: every partition carries it.
        Some(code) if version < 2 => OffsetFetchResponse {
            topics: req
                .topics
                .iter()
                .flatten()
                .map(|t| OffsetFetchResponseTopic {
                    name: t.name.clone(),
                    partitions: t
                        .partition_indexes
                        .iter()
                        .map(|&p| OffsetFetchResponsePartition {
                            partition_index: p,
                            committed_offset: -1,
                            error_code: code.code(),
                            ..Default::default()
                        })
                        .collect(),
                    unknown_tagged_fields: Vec::new(),
                })
                .collect(),
            ..Default::default()
        },
        Some(code) => OffsetFetchResponse {
            error_code: code.code(),
            ..Default::default()
        },
    }
}

/// Whether a waiting request should give up: the cluster stops or its
/// broker went down (its connection is being closed).
fn abandoned(st: &State, broker: i32) -> bool {
    st.shutdown || !st.is_up(broker)
}

/// A Fetch held until it is due, with what its fetch session (KIP-227)
/// decided when it came.
#[derive(Debug)]
struct HeldFetch {
    conn: u64,
    size: usize,
    req: FetchRequest,
    deadline: Instant,
    error: Option<ErrorCode>,
    context: Context,
    /// The partitions to answer: the request's, or its session's.
    topics: Vec<FetchTopic>,
}

/// A Fetch: answered at once when it has `min_bytes` of records or an
/// error, otherwise held until records arrive or `max_wait_ms` passes. A
/// request with a fetch session (KIP-227) is served through the broker's
/// session cache (`fetch_session.rs`); once answered it is in the fetch
/// log when that is on (`MockCluster::record_fetches`).
fn fetch(
    st: &mut State,
    (broker, conn): (i32, u64),
    (version, corr, size): (i16, i32, usize),
    req: FetchRequest,
    now: Instant,
) -> Reply {
    let deadline = now + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let mut error = st.take_error(broker, ApiKey::Fetch);
    let Some(sessions) = st.brokers.get_mut(&broker).map(|b| &mut b.fetch_sessions) else {
        return Reply::Now(Answer::Close(BrokerClose::Down));
    };
    let context = match error {
        Some(code) if fetch_session::is_session_error(code) => {
            // Injected as the broker would answer it: at the top level, the
            // session lost for FETCH_SESSION_ID_NOT_FOUND.
            error = None;
            if code == ErrorCode::FetchSessionIdNotFound {
                sessions.remove(req.session_id);
            }
            Context::Error(code)
        }
        _ => sessions.new_context(now, version, &req),
    };
    let topics = match &context {
        Context::Incremental { id, .. } => sessions.session_topics(*id),
        _ => req.topics.clone(),
    };
    let held = HeldFetch {
        conn,
        size,
        req,
        deadline,
        error,
        context,
        topics,
    };
    match fetch_ready(st, broker, version, &held, now) {
        Some(resp) => Reply::Now(finish_fetch(st, broker, version, corr, &held, resp, now)),
        None => Reply::Later(Waiting {
            broker,
            version,
            corr,
            kind: WaitKind::Fetch(Box::new(held)),
            lost: None,
        }),
    }
}

/// The Fetch's answer if it is due at `now`: a session error, a partition
/// error or `min_bytes` of records, its wait is over, or its broker is gone.
fn fetch_ready(
    st: &State,
    broker: i32,
    version: i16,
    held: &HeldFetch,
    now: Instant,
) -> Option<FetchResponse> {
    if let Context::Error(code) = held.context {
        return Some(fetch_session::error_response(code));
    }
    let min_bytes = usize::try_from(held.req.min_bytes).unwrap_or(0);
    let (resp, bytes, errors) = st.fetch(
        broker,
        (version, &held.req.rack_id),
        held.req.max_bytes,
        &held.topics,
        held.error,
    );
    (errors || bytes >= min_bytes.max(1) || now >= held.deadline || abandoned(st, broker))
        .then_some(resp)
}

/// A due Fetch's answer: the session made or continued, the fetch noted
/// in the log.
fn finish_fetch(
    st: &mut State,
    broker: i32,
    version: i16,
    corr: i32,
    held: &HeldFetch,
    mut resp: FetchResponse,
    now: Instant,
) -> Answer {
    if let Some(sessions) = st.brokers.get_mut(&broker).map(|b| &mut b.fetch_sessions) {
        match held.context {
            Context::Full => resp.session_id = sessions.create(now, version, &held.req, &resp),
            Context::Incremental { id, epoch } => sessions.finish_incremental(id, epoch, &mut resp),
            Context::Sessionless | Context::Error(_) => {}
        }
    }
    if st.fetches.is_some() {
        let record = st.describe_fetch(
            now,
            (broker, held.conn),
            version,
            held.size,
            &held.req,
            &resp,
        );
        if let Some(log) = st.fetches.as_mut() {
            log.push(record);
        }
    }
    Answer::Fetch(Box::new(resp), version, corr)
}

fn join_group(
    st: &mut State,
    broker: i32,
    (version, corr): (i16, i32),
    client_id: &str,
    req: &JoinGroupRequest,
    now: Instant,
) -> Reply {
    let refused = |code: ErrorCode| JoinGroupResponse {
        error_code: code.code(),
        member_id: req.member_id.clone(),
        ..Default::default()
    };
    rebalance_step(
        st,
        (broker, version, corr),
        (ApiKey::JoinGroup, &req.group_id),
        refused,
        |groups| groups.join(now, version, client_id, req),
        WaitKind::Join,
    )
}

fn sync_group(
    st: &mut State,
    broker: i32,
    (version, corr): (i16, i32),
    req: &SyncGroupRequest,
    now: Instant,
) -> Reply {
    let refused = |code: ErrorCode| SyncGroupResponse {
        error_code: code.code(),
        ..Default::default()
    };
    rebalance_step(
        st,
        (broker, version, corr),
        (ApiKey::SyncGroup, &req.group_id),
        refused,
        |groups| groups.sync(now, version, req),
        WaitKind::Sync,
    )
}

/// A JoinGroup or SyncGroup: refused before the coordinator sees it, or
/// answered at once, or parked until the rebalance step it waits for is
/// done (or its broker goes down, which closes the connection).
fn rebalance_step<R: Message>(
    st: &mut State,
    (broker, version, corr): (i32, i16, i32),
    (api, group): (ApiKey, &str),
    refused: impl FnOnce(ErrorCode) -> R,
    start: impl FnOnce(&mut Groups) -> Step<R>,
    parked: impl FnOnce(Ticket) -> WaitKind,
) -> Reply {
    if let Some(code) = group_error(st, broker, api, group) {
        return Reply::Now(reply(&refused(code), version, corr));
    }
    match start(&mut st.groups) {
        Step::Done(resp) => Reply::Now(reply(&resp, version, corr)),
        Step::Wait(ticket) => Reply::Later(Waiting {
            broker,
            version,
            corr,
            kind: parked(ticket),
            lost: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::group::GroupSettings;
    use crate::protocol::frame::{decode_response, encode_request};
    use crate::protocol::messages::metadata::MetadataResponse;
    use std::collections::BTreeMap;
    use std::net::SocketAddr;
    use std::time::Duration;

    /// librdkafka's Metadata request for every topic at v9+: a compact
    /// null topic array written in a four-byte placeholder, so three zero
    /// bytes come before the request's own fields, which are left over.
    #[test]
    fn a_metadata_request_with_bytes_after_its_body_is_answered() {
        let now = Instant::now();
        let addrs = BTreeMap::from([(1, SocketAddr::from(([127, 0, 0, 1], 9092)))]);
        let settings = GroupSettings {
            initial_rebalance_delay: Duration::ZERO,
            min_session_timeout: Duration::from_millis(100),
            max_session_timeout: Duration::from_secs(60),
        };
        let mut st = State::new(now, addrs, settings);
        st.create_topic("t", 1, None).unwrap();
        let request = MetadataRequest {
            topics: None,
            ..MetadataRequest::default()
        };
        let framed = encode_request(&request, 12, 7, Some("rdkafka")).unwrap();
        let mut frame = framed.slice(4..).to_vec();
        frame.extend_from_slice(&[0, 0, 0]);
        let frame = Bytes::from(frame);
        let header = RequestHeader::decode(&mut Reader::new(frame.clone())).unwrap();
        let mut auth = ConnAuth::new(false);
        let Reply::Now(Answer::Reply(bytes)) =
            respond(&mut st, 1, 1, &header, frame, &mut auth, now)
        else {
            panic!("not answered");
        };
        let (_, md) = decode_response::<MetadataResponse>(bytes.slice(4..), 12).unwrap();
        assert_eq!(md.topics.len(), 1);
        assert_eq!(md.topics[0].name.as_deref(), Some("t"));
    }

    /// A Fetch answer leaves the lock unencoded; encoded, it is the frame
    /// `encode_response` writes, at the flexible and the older versions.
    #[test]
    fn a_fetch_answer_is_encoded_after_the_lock_as_encode_response_would() {
        use crate::protocol::frame::encode_response;
        use crate::protocol::messages::fetch::{FetchableTopicResponse, PartitionData};
        let resp = FetchResponse {
            responses: vec![FetchableTopicResponse {
                topic: "t".into(),
                partitions: (0..3)
                    .map(|p| PartitionData {
                        partition_index: p,
                        high_watermark: 10,
                        records: Some(Bytes::from(vec![p as u8; 70_000])),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        for version in [11, 12, 16] {
            let Answer::Reply(bytes) = Answer::Fetch(Box::new(resp.clone()), version, 9).encoded()
            else {
                panic!("a Fetch answer encodes to a reply");
            };
            assert_eq!(
                bytes,
                encode_response(&resp, version, 9).unwrap(),
                "v{version}"
            );
        }
        assert!(matches!(Answer::Silent.encoded(), Answer::Silent));
    }

    /// Idempotent producers through whole request frames, at the oldest and
    /// newest Produce and InitProducerId versions.
    mod idempotence {
        use super::*;
        use crate::mock::group::GroupSettings;
        use crate::protocol::frame::{decode_response, encode_request};
        use crate::protocol::messages::init_producer_id::InitProducerIdResponse;
        use crate::protocol::messages::produce::{
            PartitionProduceData, ProduceResponse, TopicProduceData,
        };
        use crate::protocol::messages::Request;
        use crate::records::RecordBatchBuilder;
        use std::collections::BTreeMap;
        use std::net::SocketAddr;

        fn cluster(brokers: i32) -> (State, Instant) {
            let now = Instant::now();
            let addrs = (1..=brokers)
                .map(|id| (id, SocketAddr::from(([127, 0, 0, 1], 9000 + id as u16))))
                .collect::<BTreeMap<_, _>>();
            let settings = GroupSettings {
                initial_rebalance_delay: Duration::ZERO,
                min_session_timeout: Duration::from_millis(100),
                max_session_timeout: Duration::from_secs(60),
            };
            let mut st = State::new(now, addrs, settings);
            st.create_topic("t", 1, Some(&[1])).unwrap();
            (st, now)
        }

        /// Sends `req` at `version` to broker `broker`: the answer as it
        /// reaches the client, decoded when there is one.
        fn send<R: Request>(
            st: &mut State,
            broker: i32,
            req: &R,
            version: i16,
        ) -> Result<R::Response, Answer> {
            let framed = encode_request(req, version, 3, Some("test")).unwrap();
            let frame = framed.slice(4..);
            let header = RequestHeader::decode(&mut Reader::new(frame.clone())).unwrap();
            let mut auth = ConnAuth::new(false);
            match respond(st, broker, 1, &header, frame, &mut auth, Instant::now()) {
                Reply::Now(Answer::Reply(bytes)) => {
                    Ok(decode_response::<R::Response>(bytes.slice(4..), version)
                        .unwrap()
                        .1)
                }
                Reply::Now(other) => Err(other),
                Reply::Later(_) => panic!("held"),
            }
        }

        fn batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
            let mut b = RecordBatchBuilder::new(0).producer(pid, epoch, seq);
            for i in 0..n {
                b.append(5000 + i as i64, None, Some(b"v"), &[]).unwrap();
            }
            b.build().unwrap()
        }

        fn produce_request(records: Bytes) -> ProduceRequest {
            ProduceRequest {
                acks: -1,
                timeout_ms: 1000,
                topic_data: vec![TopicProduceData {
                    name: "t".into(),
                    partition_data: vec![PartitionProduceData {
                        index: 0,
                        records: Some(records),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }
        }

        /// (error, base offset, log append time) of partition 0.
        fn produce(st: &mut State, version: i16, records: Bytes) -> (ErrorCode, i64, i64) {
            let resp: ProduceResponse = send(st, 1, &produce_request(records), version).unwrap();
            let p = &resp.responses[0].partition_responses[0];
            (
                ErrorCode::from_code(p.error_code),
                p.base_offset,
                p.log_append_time_ms,
            )
        }

        fn high_watermark(st: &State) -> i64 {
            st.topics["t"].partitions[0].log.high_watermark()
        }

        fn init(
            st: &mut State,
            broker: i32,
            version: i16,
            txn: Option<&str>,
        ) -> InitProducerIdResponse {
            let req = InitProducerIdRequest {
                transactional_id: txn.map(str::to_owned),
                transaction_timeout_ms: 60_000,
                ..Default::default()
            };
            send(st, broker, &req, version).unwrap()
        }

        #[test]
        fn a_producer_id_then_its_batches_in_order_once_each() {
            for (init_version, produce_version) in [(0, 3), (5, 11)] {
                let (mut st, _) = cluster(1);
                let id = init(&mut st, 1, init_version, None);
                assert_eq!((id.error_code, id.producer_epoch), (0, 0));
                let pid = id.producer_id;
                let v = produce_version;
                assert_eq!(
                    produce(&mut st, v, batch(pid, 0, 0, 3)),
                    (ErrorCode::None, 0, -1)
                );
                // The same batch again (a retry whose answer was lost): its
                // offsets, and its max timestamp as the append time, as
                // Kafka answers a duplicate; nothing written.
                assert_eq!(
                    produce(&mut st, v, batch(pid, 0, 0, 3)),
                    (ErrorCode::None, 0, 5002)
                );
                assert_eq!(high_watermark(&st), 3);
                assert_eq!(
                    produce(&mut st, v, batch(pid, 0, 3, 2)),
                    (ErrorCode::None, 3, -1)
                );
                // A gap, and a partial repeat: out of order.
                let out_of_order = ErrorCode::OutOfOrderSequenceNumber;
                assert_eq!(produce(&mut st, v, batch(pid, 0, 6, 1)).0, out_of_order);
                assert_eq!(produce(&mut st, v, batch(pid, 0, 4, 1)).0, out_of_order);
                // A new epoch from sequence 0 fences the old one.
                assert_eq!(
                    produce(&mut st, v, batch(pid, 1, 0, 1)),
                    (ErrorCode::None, 5, -1)
                );
                assert_eq!(
                    produce(&mut st, v, batch(pid, 0, 5, 1)).0,
                    ErrorCode::InvalidProducerEpoch
                );
                // A producer id with no sequence: refused as Kafka's
                // LogValidator does.
                assert_eq!(
                    produce(&mut st, v, batch(pid, 1, -1, 1)).0,
                    ErrorCode::InvalidRecord
                );
                assert_eq!(high_watermark(&st), 6);
                // Refusals carry the log start offset (from Produce v5), as
                // Kafka's do.
                let resp: ProduceResponse =
                    send(&mut st, 1, &produce_request(batch(pid, 1, 9, 1)), v).unwrap();
                let p = &resp.responses[0].partition_responses[0];
                let log_start = if v >= 5 { 0 } else { -1 };
                assert_eq!(
                    (p.error_code, p.base_offset, p.log_start_offset),
                    (45, -1, log_start)
                );
            }
        }

        #[test]
        fn a_producer_the_partition_does_not_know_is_not_refused() {
            // No UNKNOWN_PRODUCER_ID since KIP-360: any sequence is taken.
            let (mut st, _) = cluster(1);
            assert_eq!(
                produce(&mut st, 11, batch(77, 4, 1000, 2)),
                (ErrorCode::None, 0, -1)
            );
            assert_eq!(
                produce(&mut st, 11, batch(77, 4, 1002, 1)),
                (ErrorCode::None, 2, -1)
            );
        }

        #[test]
        fn a_lost_answer_takes_effect_and_the_retry_is_a_duplicate() {
            let (mut st, _) = cluster(1);
            let pid = init(&mut st, 1, 4, None).producer_id;
            st.lost_answers
                .entry(ApiKey::Produce.code())
                .or_default()
                .extend([LostAnswer::Close, LostAnswer::Unanswered]);
            let req = produce_request(batch(pid, 0, 0, 2));
            let lost = send(&mut st, 1, &req, 11).unwrap_err();
            assert!(
                matches!(lost, Answer::Close(BrokerClose::AnswerLost)),
                "{lost:?}"
            );
            assert_eq!(high_watermark(&st), 2, "appended all the same");
            let lost = send(&mut st, 1, &req, 11).unwrap_err();
            assert!(matches!(lost, Answer::Silent), "{lost:?}");
            assert_eq!(high_watermark(&st), 2, "a duplicate, not appended");
            // Nothing more to lose: the third try is answered, with the
            // first one's offsets.
            assert_eq!(
                produce(&mut st, 11, batch(pid, 0, 0, 2)),
                (ErrorCode::None, 0, 5001)
            );
            assert_eq!(high_watermark(&st), 2);
        }

        #[test]
        fn a_lost_answer_waits_for_a_request_that_is_served() {
            let (mut st, _) = cluster(1);
            st.lost_answers
                .entry(ApiKey::InitProducerId.code())
                .or_default()
                .push_back(LostAnswer::Close);
            // A version the broker does not serve closes the connection
            // without effect: the loss is still to come.
            st.versions.insert(
                ApiKey::InitProducerId.code(),
                crate::protocol::VersionRange::new(0, 3),
            );
            let req = InitProducerIdRequest {
                transaction_timeout_ms: 1,
                ..Default::default()
            };
            let refused = send(&mut st, 1, &req, 4).unwrap_err();
            assert!(
                matches!(refused, Answer::Close(BrokerClose::BadRequest)),
                "{refused:?}"
            );
            assert_eq!(st.lost_answers[&ApiKey::InitProducerId.code()].len(), 1);
            let lost = send(&mut st, 1, &req, 3).unwrap_err();
            assert!(
                matches!(lost, Answer::Close(BrokerClose::AnswerLost)),
                "{lost:?}"
            );
            // The id was given all the same: the next one is another.
            assert_eq!(init(&mut st, 1, 3, None).producer_id, 1);
        }

        #[test]
        fn transactional_ids_go_to_their_coordinator_and_bump_the_epoch() {
            let (mut st, _) = cluster(3);
            st.coordinators.insert("tx".into(), 2);
            let other = init(&mut st, 1, 4, Some("tx"));
            assert_eq!(other.error_code, ErrorCode::NotCoordinator.code());
            let first = init(&mut st, 2, 4, Some("tx"));
            assert_eq!((first.error_code, first.producer_epoch), (0, 0));
            let second = init(&mut st, 2, 0, Some("tx"));
            assert_eq!(
                (second.producer_id, second.producer_epoch),
                (first.producer_id, 1)
            );
            // Its batches at epoch 0 are fenced once epoch 1 wrote.
            let pid = first.producer_id;
            assert_eq!(produce(&mut st, 11, batch(pid, 0, 0, 1)).0, ErrorCode::None);
            assert_eq!(produce(&mut st, 11, batch(pid, 1, 0, 1)).0, ErrorCode::None);
            assert_eq!(
                produce(&mut st, 11, batch(pid, 0, 1, 1)).0,
                ErrorCode::InvalidProducerEpoch
            );
        }

        #[test]
        fn an_injected_error_answers_init_producer_id_with_no_id() {
            let (mut st, _) = cluster(1);
            st.errors
                .entry(ApiKey::InitProducerId.code())
                .or_default()
                .push_back(ErrorCode::CoordinatorLoadInProgress);
            let resp = init(&mut st, 1, 4, None);
            assert_eq!(
                (resp.error_code, resp.producer_id, resp.producer_epoch),
                (ErrorCode::CoordinatorLoadInProgress.code(), -1, -1)
            );
            assert_eq!(init(&mut st, 1, 4, None).producer_id, 0, "no id was used");
        }

        #[test]
        fn a_truncated_log_forgets_the_producer_state_of_what_it_lost() {
            let (mut st, _) = cluster(1);
            let pid = init(&mut st, 1, 4, None).producer_id;
            assert_eq!(produce(&mut st, 11, batch(pid, 0, 0, 2)).1, 0);
            assert_eq!(produce(&mut st, 11, batch(pid, 0, 2, 2)).1, 2);
            // An unclean election loses the second batch: sent again, it
            // is written again (at its old offsets), not a duplicate.
            st.topics.get_mut("t").unwrap().partitions[0].truncate_to(2);
            assert_eq!(
                produce(&mut st, 11, batch(pid, 0, 2, 2)),
                (ErrorCode::None, 2, -1)
            );
            assert_eq!(high_watermark(&st), 4);
            // And what was kept is still known: its repeat is a duplicate.
            assert_eq!(
                produce(&mut st, 11, batch(pid, 0, 0, 2)),
                (ErrorCode::None, 0, 5001)
            );
        }
    }
}
