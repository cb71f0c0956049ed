//! The mock's network side: a listener thread per broker, a thread per
//! connection answering its requests in order (as a Kafka broker does: one
//! request per connection at a time), and a timer thread for the group
//! coordinator's deadlines. Blocking std sockets and threads keep the mock
//! independent of any async runtime.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::fetch_session::{self, Context};
use super::group::{Groups, Step, Ticket};
use super::sasl::{self as mock_sasl, ConnAuth, Gate};
use super::state::{self, State};
use super::{BrokerClose, ClosedBy, MockEventKind};
use crate::error::ErrorCode;
use crate::protocol::frame::{decode_request, encode_response};
use crate::protocol::messages::api_versions::ApiVersionsRequest;
use crate::protocol::messages::consumer_group_heartbeat::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use crate::protocol::messages::create_topics::CreateTopicsRequest;
use crate::protocol::messages::fetch::FetchRequest;
use crate::protocol::messages::find_coordinator::FindCoordinatorRequest;
use crate::protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};
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
use crate::protocol::{ApiKey, FrameDecoder, Reader, RequestHeader};

/// The largest request the mock reads (Kafka's `socket.request.max.bytes`).
const MAX_REQUEST: usize = 100 * 1024 * 1024;
/// How often a blocked read wakes to look at idle deadlines.
const READ_SLICE: Duration = Duration::from_millis(50);

/// What every thread shares.
pub(crate) struct Shared {
    pub state: Mutex<State>,
    /// Notified after every change of `state`.
    pub changed: Condvar,
    /// Open connections, to shut them from outside their thread.
    pub conns: Mutex<HashMap<u64, Conn>>,
    /// Every listener speaks TLS with this configuration, when set.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// An open connection as seen from outside its thread.
pub(crate) struct Conn {
    pub broker: i32,
    pub stream: TcpStream,
    /// Set by whoever closes it from the broker's side, before the shutdown.
    pub closing: Option<BrokerClose>,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking connection thread must not take the cluster down.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn conns(&self) -> MutexGuard<'_, HashMap<u64, Conn>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the client closed connection `conn` (its FIN is the next
    /// thing to read), looked at without reading or blocking. Bytes still
    /// unread (a pipelined request) count as open.
    fn peer_closed(&self, conn: u64) -> bool {
        let conns = self.conns();
        let Some(c) = conns.get(&conn) else {
            return false;
        };
        peer_closed(&c.stream)
    }

    /// Closes the connections `which` selects from the broker's side.
    pub fn close_connections(&self, reason: BrokerClose, which: impl Fn(u64, &Conn) -> bool) {
        for (&id, conn) in self.conns().iter_mut() {
            if which(id, conn) {
                conn.closing.get_or_insert(reason);
                let _ = conn.stream.shutdown(Shutdown::Both);
            }
        }
        self.changed.notify_all();
    }
}

/// Whether the peer of `stream` closed its side: a non-blocking peek reads
/// end-of-stream. (A blocking `peek` would wait for the read timeout the
/// connection's thread set on the shared socket.)
#[cfg(unix)]
fn peer_closed(stream: &TcpStream) -> bool {
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit()];
    let peeked = socket2::SockRef::from(stream)
        .recv_with_flags(&mut byte, libc::MSG_PEEK | libc::MSG_DONTWAIT);
    matches!(peeked, Ok(0))
}

/// Elsewhere a held Fetch ends at its deadline only.
#[cfg(not(unix))]
fn peer_closed(_stream: &TcpStream) -> bool {
    false
}

/// A broker's accept loop, running while the broker is up.
pub(crate) struct Listener {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl Listener {
    /// Starts accepting on `listener` for `broker`.
    pub fn start(shared: Arc<Shared>, broker: i32, listener: TcpListener) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("mock-broker-{broker}"))
            .spawn(move || {
                for stream in listener.incoming() {
                    if flag.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    accept(&shared, broker, stream);
                }
            })?;
        Ok(Listener {
            stop,
            addr,
            thread: Some(thread),
        })
    }

    /// Stops accepting and closes the listening socket.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocked accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept(shared: &Arc<Shared>, broker: i32, stream: TcpStream) {
    let now = Instant::now();
    let peer = match stream.peer_addr() {
        Ok(p) => p,
        Err(_) => return,
    };
    let _ = stream.set_nodelay(true);
    let Ok(outside) = stream.try_clone() else {
        return;
    };
    let id = {
        let mut st = shared.lock();
        if st.shutdown || !st.is_up(broker) {
            return;
        }
        st.next_connection += 1;
        let id = st.next_connection;
        st.record(
            now,
            broker,
            MockEventKind::Connected {
                connection: id,
                peer,
            },
        );
        id
    };
    shared.conns().insert(
        id,
        Conn {
            broker,
            stream: outside,
            closing: None,
        },
    );
    shared.changed.notify_all();
    let shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("mock-conn-{id}"))
        .spawn(move || {
            // Blocking reads wake every READ_SLICE to look at idle
            // deadlines; under TLS the handshake runs inside the first
            // reads, with the same slices.
            let _ = stream.set_read_timeout(Some(READ_SLICE));
            match shared.tls.clone() {
                None => serve_connection(&shared, broker, id, stream),
                Some(config) => match rustls::ServerConnection::new(config) {
                    Ok(tls) => {
                        serve_connection(&shared, broker, id, rustls::StreamOwned::new(tls, stream))
                    }
                    Err(e) => {
                        log::debug!("mock broker {broker}: no TLS for connection {id}: {e}");
                        let _ = stream.shutdown(Shutdown::Both);
                    }
                },
            }
        });
    if spawned.is_err() {
        log::debug!("mock broker {broker}: no thread for connection {id}");
    }
}

/// A connection's byte stream: plain TCP, or TLS over it.
trait Transport: Read + Write {
    /// The TCP socket underneath.
    fn tcp(&self) -> &TcpStream;
}

impl Transport for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

impl Transport for rustls::StreamOwned<rustls::ServerConnection, TcpStream> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref()
    }
}

/// Reads requests and answers them until either side closes.
fn serve_connection(shared: &Arc<Shared>, broker: i32, id: u64, mut stream: impl Transport) {
    let decoder = FrameDecoder::new(MAX_REQUEST);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut last_activity = Instant::now();
    let mut auth = ConnAuth::new(shared.lock().sasl.is_some());
    let closed_by = 'conn: loop {
        // Answer every whole request already read.
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => {
                    match answer(shared, broker, id, frame, &mut auth) {
                        Answer::Reply(bytes) => {
                            // The flush sends what TLS still holds.
                            if stream
                                .write_all(&bytes)
                                .and_then(|()| stream.flush())
                                .is_err()
                            {
                                break 'conn None;
                            }
                        }
                        Answer::ReplyThenClose(bytes, reason) => {
                            let _ = stream.write_all(&bytes).and_then(|()| stream.flush());
                            break 'conn Some(reason);
                        }
                        Answer::Silent => {}
                        Answer::Close(reason) => break 'conn Some(reason),
                        Answer::PeerClosed => break 'conn None,
                    }
                    last_activity = Instant::now();
                }
                Ok(None) => break,
                Err(_) => break 'conn Some(BrokerClose::BadRequest),
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => break None,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                last_activity = Instant::now();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                let idle = shared
                    .lock()
                    .brokers
                    .get(&broker)
                    .and_then(|b| b.idle_timeout);
                if idle.is_some_and(|idle| last_activity.elapsed() >= idle) {
                    break Some(BrokerClose::Idle);
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break None,
        }
    };
    let _ = stream.tcp().shutdown(Shutdown::Both);
    let conn = shared.conns().remove(&id);
    let by = match (closed_by, conn.and_then(|c| c.closing)) {
        (_, Some(reason)) => ClosedBy::Broker(reason),
        (Some(reason), None) => ClosedBy::Broker(reason),
        (None, None) => ClosedBy::Client,
    };
    let mut st = shared.lock();
    st.record(
        Instant::now(),
        broker,
        MockEventKind::Closed { connection: id, by },
    );
    drop(st);
    shared.changed.notify_all();
}

/// What to do after a request.
enum Answer {
    Reply(Bytes),
    /// A refusal after which the broker closes the connection (SASL).
    ReplyThenClose(Bytes, BrokerClose),
    /// Produce with `acks=0`: Kafka sends nothing back.
    Silent,
    Close(BrokerClose),
    /// The client closed the connection while its request was held (a
    /// Fetch waiting for records): nothing to answer, the thread ends.
    PeerClosed,
}

fn reply<M: Message>(body: &M, version: i16, correlation_id: i32) -> Answer {
    match encode_response(body, version, correlation_id) {
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

/// Sleeps `delay` unless the cluster shuts down first.
fn pause(shared: &Shared, delay: Duration) {
    if delay.is_zero() {
        return;
    }
    let deadline = Instant::now() + delay;
    let mut st = shared.lock();
    while !st.shutdown {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        st = shared
            .changed
            .wait_timeout(st, deadline - now)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

fn answer(shared: &Shared, broker: i32, conn: u64, frame: Bytes, auth: &mut ConnAuth) -> Answer {
    let now = Instant::now();
    let Ok(header) = RequestHeader::decode(&mut Reader::new(frame.clone())) else {
        return Answer::Close(BrokerClose::BadRequest);
    };
    let version = header.api_version;
    let corr = header.correlation_id;
    // The frame with its size prefix: what crossed the network.
    let size = frame.len() + 4;
    let (delay, served) = {
        let mut st = shared.lock();
        *st.request_bytes.entry(header.api_key).or_default() += size as u64;
        st.record(
            now,
            broker,
            MockEventKind::Request {
                connection: conn,
                api_key: header.api_key,
                api_version: version,
                correlation_id: corr,
                client_id: header.client_id.clone(),
            },
        );
        let delay = st.brokers.get(&broker).map_or(Duration::ZERO, |b| b.delay);
        let served = ApiKey::from_code(header.api_key).and_then(|api| Some((api, st.served(api)?)));
        (delay, served)
    };
    pause(shared, delay);
    if let Gate::Close(reason) = mock_sasl::gate(auth, ApiKey::from_code(header.api_key), now) {
        return Answer::Close(reason);
    }
    let Some((api, range)) = served else {
        return Answer::Close(BrokerClose::BadRequest);
    };
    if !range.contains(version) {
        if api == ApiKey::ApiVersions {
            // KIP-511: answer in v0 with the versions served, so the client
            // can pick one.
            let st = shared.lock();
            return reply(
                &st.api_versions(Some(ErrorCode::UnsupportedVersion)),
                0,
                corr,
            );
        }
        return Answer::Close(BrokerClose::BadRequest);
    }
    let client_id = header.client_id.unwrap_or_default();
    // The answers computed at once, under the lock, from the request.
    let at_once = |st: &mut State, req: AnyRequest| -> Box<dyn Encode> {
        let now = Instant::now();
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
            AnyRequest::OffsetFetch(req) => Box::new(offset_fetch(st, broker, version, &req)),
        }
    };
    let decoded = match api {
        ApiKey::ApiVersions => body::<ApiVersionsRequest>(frame).map(|_| AnyRequest::ApiVersions),
        ApiKey::Metadata => body(frame).map(AnyRequest::Metadata),
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
            return match body::<ProduceRequest>(frame) {
                Ok(req) => {
                    let mut st = shared.lock();
                    let error = st.take_error(broker, api);
                    let resp = st.produce(broker, &req, error);
                    drop(st);
                    shared.changed.notify_all();
                    if req.acks == 0 {
                        Answer::Silent
                    } else {
                        reply(&resp, version, corr)
                    }
                }
                Err(a) => a,
            };
        }
        ApiKey::SaslHandshake => {
            return match body::<SaslHandshakeRequest>(frame) {
                Ok(req) => {
                    let st = shared.lock();
                    let a = mock_sasl::handshake(st.sasl.as_ref(), auth, &req);
                    drop(st);
                    sasl_reply(a.response, a.close, version, corr)
                }
                Err(a) => a,
            };
        }
        ApiKey::SaslAuthenticate => {
            return match body::<SaslAuthenticateRequest>(frame) {
                Ok(req) => {
                    let mut st = shared.lock();
                    let now = Instant::now();
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
                    drop(st);
                    shared.changed.notify_all();
                    sasl_reply(a.response, a.close, version, corr)
                }
                Err(a) => a,
            };
        }
        ApiKey::Fetch => {
            return match body::<FetchRequest>(frame) {
                Ok(req) => fetch(shared, (broker, conn), (version, corr, size), &req),
                Err(a) => a,
            };
        }
        ApiKey::JoinGroup => {
            return match body::<JoinGroupRequest>(frame) {
                Ok(req) => join_group(shared, broker, version, corr, &client_id, &req),
                Err(a) => a,
            };
        }
        ApiKey::SyncGroup => {
            return match body::<SyncGroupRequest>(frame) {
                Ok(req) => sync_group(shared, broker, version, corr, &req),
                Err(a) => a,
            };
        }
    };
    match decoded {
        Ok(req) => {
            let mut st = shared.lock();
            let resp = at_once(&mut st, req);
            drop(st);
            shared.changed.notify_all();
            resp.frame(version, corr)
        }
        Err(a) => a,
    }
}

/// A request answered at once.
enum AnyRequest {
    ApiVersions,
    Metadata(MetadataRequest),
    FindCoordinator(FindCoordinatorRequest),
    ListOffsets(ListOffsetsRequest),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    CreateTopics(CreateTopicsRequest),
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
) -> OffsetFetchResponse {
    let now = Instant::now();
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

/// How often a held Fetch looks whether its client is still there.
const PEER_CHECK: Duration = Duration::from_millis(10);

/// A Fetch: answered at once when it has `min_bytes` of records or an
/// error, otherwise held until records arrive or `max_wait_ms` passes. A
/// request with a fetch session (KIP-227) is served through the broker's
/// session cache (`fetch_session.rs`).
///
/// While held it looks every [`PEER_CHECK`] whether the client closed the
/// connection (a consumer's `close` while its leader connections wait):
/// then the connection ends at once, as a broker's would when its reactor
/// sees the FIN, rather than when the wait is over.
fn fetch(
    shared: &Shared,
    (broker, conn): (i32, u64),
    (version, corr, size): (i16, i32, usize),
    req: &FetchRequest,
) -> Answer {
    let deadline = Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let mut st = shared.lock();
    let mut error = st.take_error(broker, ApiKey::Fetch);
    let Some(sessions) = st.brokers.get_mut(&broker).map(|b| &mut b.fetch_sessions) else {
        return Answer::Close(BrokerClose::Down);
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
        _ => sessions.new_context(Instant::now(), version, req),
    };
    let topics = match &context {
        Context::Incremental { id, .. } => sessions.session_topics(*id),
        _ => req.topics.clone(),
    };
    let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0);
    let mut resp = loop {
        if let Context::Error(code) = context {
            break fetch_session::error_response(code);
        }
        let (resp, bytes, errors) = st.fetch(broker, version, req.max_bytes, &topics, error);
        let now = Instant::now();
        if errors || bytes >= min_bytes.max(1) || now >= deadline || abandoned(&st, broker) {
            break resp;
        }
        st = shared
            .changed
            .wait_timeout(st, (deadline - now).min(PEER_CHECK))
            .unwrap_or_else(|e| e.into_inner())
            .0;
        drop(st);
        if shared.peer_closed(conn) {
            return Answer::PeerClosed;
        }
        st = shared.lock();
    };
    let now = Instant::now();
    if let Some(sessions) = st.brokers.get_mut(&broker).map(|b| &mut b.fetch_sessions) {
        match context {
            Context::Full => resp.session_id = sessions.create(now, version, req, &resp),
            Context::Incremental { id, epoch } => sessions.finish_incremental(id, epoch, &mut resp),
            Context::Sessionless | Context::Error(_) => {}
        }
    }
    if st.fetches.is_some() {
        let record = st.describe_fetch(now, (broker, conn), version, size, req, &resp);
        if let Some(log) = st.fetches.as_mut() {
            log.push(record);
        }
    }
    drop(st);
    reply(&resp, version, corr)
}

fn join_group(
    shared: &Shared,
    broker: i32,
    version: i16,
    corr: i32,
    client_id: &str,
    req: &JoinGroupRequest,
) -> Answer {
    let refused = |code: ErrorCode| JoinGroupResponse {
        error_code: code.code(),
        member_id: req.member_id.clone(),
        ..Default::default()
    };
    rebalance_step(
        shared,
        broker,
        (version, corr),
        (ApiKey::JoinGroup, &req.group_id),
        refused,
        |groups, now| groups.join(now, version, client_id, req),
        |groups, now, ticket| groups.poll_join(now, ticket),
    )
}

fn sync_group(
    shared: &Shared,
    broker: i32,
    version: i16,
    corr: i32,
    req: &SyncGroupRequest,
) -> Answer {
    let refused = |code: ErrorCode| SyncGroupResponse {
        error_code: code.code(),
        ..Default::default()
    };
    rebalance_step(
        shared,
        broker,
        (version, corr),
        (ApiKey::SyncGroup, &req.group_id),
        refused,
        |groups, now| groups.sync(now, version, req),
        |groups, now, ticket| groups.poll_sync(now, ticket),
    )
}

/// A JoinGroup or SyncGroup: refused before the coordinator sees it, or
/// answered at once, or held until the rebalance step it waits for is done
/// (or its broker goes down, which closes the connection).
fn rebalance_step<R: Message>(
    shared: &Shared,
    broker: i32,
    (version, corr): (i16, i32),
    (api, group): (ApiKey, &str),
    refused: impl FnOnce(ErrorCode) -> R,
    start: impl FnOnce(&mut Groups, Instant) -> Step<R>,
    poll: impl Fn(&mut Groups, Instant, &Ticket) -> Option<R>,
) -> Answer {
    let mut st = shared.lock();
    if let Some(code) = group_error(&mut st, broker, api, group) {
        return reply(&refused(code), version, corr);
    }
    let step = start(&mut st.groups, Instant::now());
    shared.changed.notify_all();
    let ticket = match step {
        Step::Done(resp) => return reply(&resp, version, corr),
        Step::Wait(ticket) => ticket,
    };
    loop {
        if let Some(resp) = poll(&mut st.groups, Instant::now(), &ticket) {
            return reply(&resp, version, corr);
        }
        if abandoned(&st, broker) {
            st.groups.cancel(&ticket);
            return Answer::Close(BrokerClose::Down);
        }
        let wait = next_wait(&st);
        st = shared
            .changed
            .wait_timeout(st, wait)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// How long a waiting request may sleep: until the coordinator's next
/// deadline (the timer thread ticks it and notifies), at most a second.
fn next_wait(st: &State) -> Duration {
    let max = Duration::from_secs(1);
    st.groups
        .next_deadline()
        .map_or(max, |d| {
            d.saturating_duration_since(Instant::now()).min(max)
        })
        .max(Duration::from_millis(1))
}

/// Runs the coordinator's deadlines (session expiry, rebalance timeouts)
/// until the cluster shuts down.
pub(crate) fn run_timer(shared: Arc<Shared>) {
    let mut st = shared.lock();
    while !st.shutdown {
        let now = Instant::now();
        if st.groups.next_deadline().is_some_and(|d| d <= now) {
            st.groups.tick(now);
            shared.changed.notify_all();
        }
        let wait = next_wait(&st);
        st = shared
            .changed
            .wait_timeout(st, wait)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}
