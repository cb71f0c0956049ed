//! Fetch: from the leader or a follower (KIP-392), answered at once when
//! it has `min_bytes` of records or something to say at once (an error,
//! a diverging epoch, a preferred read replica), otherwise held until
//! records arrive or `max_wait_ms` passes (Kafka's purgatory; the waiting
//! is [`Waiting`](crate::mock::respond::Waiting)'s). A request with a
//! fetch session (KIP-227) is served through the broker's session cache
//! (`fetch_session.rs`); once answered it is in the fetch log when that
//! is on (`MockCluster::record_fetches`).

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::error::ErrorCode;
use crate::mock::fetch_session::{self, Context};
use crate::mock::respond::{abandoned, Answer, Received, Reply, WaitKind, Waiting};
use crate::mock::state::{Partition, State, Topic};
use crate::mock::{BrokerClose, MockFetch};
use crate::protocol::messages::fetch::{
    EpochEndOffset as DivergingEpoch, FetchPartition, FetchRequest, FetchResponse, FetchTopic,
    FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use crate::protocol::ApiKey;

/// A Fetch held until it is due, with what its fetch session (KIP-227)
/// decided when it came.
#[derive(Debug)]
pub(crate) struct HeldFetch {
    req: FetchRequest,
    deadline: Instant,
    error: Option<ErrorCode>,
    context: Context,
    /// The partitions to answer: the request's, or its session's.
    topics: Vec<FetchTopic>,
}

impl HeldFetch {
    /// When the wait ends (`max_wait_ms` after it came).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// The answer to a Fetch request: now, or once it is due.
pub(crate) fn respond(st: &mut State, r: &Received, req: FetchRequest, now: Instant) -> Reply {
    let deadline = now + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let mut error = st.take_error(r.broker, ApiKey::Fetch);
    let Some(sessions) = st.brokers.get_mut(&r.broker).map(|b| &mut b.fetch_sessions) else {
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
        _ => sessions.new_context(now, r.version, &req),
    };
    let topics = match &context {
        Context::Incremental { id, .. } => sessions.session_topics(*id),
        _ => req.topics.clone(),
    };
    let held = HeldFetch {
        req,
        deadline,
        error,
        context,
        topics,
    };
    match poll(st, r, &held, now) {
        Some(answer) => Reply::Now(answer),
        None => Reply::Later(Waiting::new(*r, WaitKind::Fetch(Box::new(held)))),
    }
}

/// The answer to a held Fetch, if it is due at `now`.
pub(crate) fn poll(st: &mut State, r: &Received, held: &HeldFetch, now: Instant) -> Option<Answer> {
    ready(st, r, held, now).map(|resp| finish(st, r, held, resp, now))
}

/// The Fetch's answer if it is due at `now`: a session error, a partition
/// error or `min_bytes` of records, its wait is over, or its broker is gone.
fn ready(st: &State, r: &Received, held: &HeldFetch, now: Instant) -> Option<FetchResponse> {
    if let Context::Error(code) = held.context {
        return Some(fetch_session::error_response(code));
    }
    let min_bytes = usize::try_from(held.req.min_bytes).unwrap_or(0);
    let (resp, bytes, at_once) = read(
        st,
        r.broker,
        (r.version, &held.req.rack_id),
        held.req.max_bytes,
        &held.topics,
        held.error,
    );
    (at_once || bytes >= min_bytes.max(1) || now >= held.deadline || abandoned(st, r.broker))
        .then_some(resp)
}

/// A due Fetch's answer: the session made or continued, the fetch noted
/// in the log.
fn finish(
    st: &mut State,
    r: &Received,
    held: &HeldFetch,
    mut resp: FetchResponse,
    now: Instant,
) -> Answer {
    let version = r.version;
    if let Some(sessions) = st.brokers.get_mut(&r.broker).map(|b| &mut b.fetch_sessions) {
        match held.context {
            Context::Full => resp.session_id = sessions.create(now, version, &held.req, &resp),
            Context::Incremental { id, epoch } => sessions.finish_incremental(id, epoch, &mut resp),
            Context::Sessionless | Context::Error(_) => {}
        }
    }
    if st.fetches.is_some() {
        let record = describe(st, now, r, &held.req, &resp);
        if let Some(log) = st.fetches.as_mut() {
            log.push(record);
        }
    }
    Answer::Fetch(Box::new(resp), version, r.correlation_id)
}

/// Answers a Fetch of `topics` (the request's, or a fetch session's,
/// KIP-227) from a client in `rack` (RackId, v11+; empty for none) as
/// it stands now, with the bytes of records in it and whether it must
/// be answered at once (a partition with an error, a diverging epoch
/// or a preferred read replica).
pub(crate) fn read(
    st: &State,
    broker: i32,
    (version, rack): (i16, &str),
    max_bytes: i32,
    topics: &[FetchTopic],
    error: Option<ErrorCode>,
) -> (FetchResponse, usize, bool) {
    let mut read = Read {
        st,
        broker,
        version,
        rack,
        max_bytes: usize::try_from(max_bytes).unwrap_or(0),
        bytes: 0,
        at_once: false,
    };
    let responses: Vec<FetchableTopicResponse> =
        topics.iter().map(|t| read.topic(t, error)).collect();
    // KIP-951 (v16+): the addresses of the leaders named in
    // `current_leader`, as Kafka's `KafkaApis.handleFetchRequest` adds.
    let node_endpoints = if version >= 16 {
        let leaders = responses
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.current_leader.leader_id)
            .filter(|id| *id >= 0);
        st.endpoints(leaders)
            .into_iter()
            .map(|(node_id, host, port, rack)| NodeEndpoint {
                node_id,
                host,
                port,
                rack,
                unknown_tagged_fields: Vec::new(),
            })
            .collect()
    } else {
        Vec::new()
    };
    let response = FetchResponse {
        responses,
        node_endpoints,
        ..Default::default()
    };
    (response, read.bytes, read.at_once)
}

/// A Fetch answer being read from the logs.
struct Read<'a> {
    st: &'a State,
    broker: i32,
    version: i16,
    /// The client's rack (empty for none).
    rack: &'a str,
    /// The request's `max_bytes`, and the bytes of records read so far.
    max_bytes: usize,
    bytes: usize,
    /// A partition has something to say at once (an error, a diverging
    /// epoch, a preferred read replica).
    at_once: bool,
}

impl Read<'_> {
    /// One topic's partitions (named by id from v13).
    fn topic(&mut self, t: &FetchTopic, error: Option<ErrorCode>) -> FetchableTopicResponse {
        let (name, topic) = if self.version >= 13 {
            match self
                .st
                .topics
                .iter()
                .find(|(_, topic)| topic.id == t.topic_id)
            {
                Some((n, topic)) => (n.clone(), Some(topic)),
                None => (String::new(), None),
            }
        } else {
            (t.topic.clone(), self.st.topics.get(&t.topic))
        };
        let partitions = t
            .partitions
            .iter()
            .map(|p| self.partition(p, topic, error))
            .collect();
        FetchableTopicResponse {
            topic: name,
            topic_id: t.topic_id,
            partitions,
            unknown_tagged_fields: Vec::new(),
        }
    }

    /// One partition: its records, or why none.
    fn partition(
        &mut self,
        p: &FetchPartition,
        topic: Option<&Topic>,
        error: Option<ErrorCode>,
    ) -> PartitionData {
        let mut out = PartitionData {
            partition_index: p.partition,
            high_watermark: -1,
            ..Default::default()
        };
        let part = topic.and_then(|topic| topic.partitions.get(p.partition as usize));
        let code = match (error, topic, part) {
            (Some(code), _, _) => code,
            (None, None, _) if self.version >= 13 => ErrorCode::UnknownTopicId,
            (None, _, None) => ErrorCode::UnknownTopicOrPartition,
            (None, _, Some(part)) => {
                match self
                    .st
                    .check_replica(self.broker, part, p.current_leader_epoch)
                {
                    Err(code) if self.version >= 12 => {
                        out.current_leader = LeaderIdAndEpoch {
                            leader_id: self.st.live_leader(part),
                            leader_epoch: part.leader_epoch,
                            unknown_tagged_fields: Vec::new(),
                        };
                        code
                    }
                    Err(code) => code,
                    Ok(()) => self.replica(p, part, &mut out),
                }
            }
        };
        if code != ErrorCode::None {
            self.at_once = true;
        }
        out.error_code = code.code();
        if out.records.is_none() {
            out.records = Some(Bytes::new());
        }
        out
    }

    /// A partition this broker holds a copy of: the log's bounds, then a
    /// diverging epoch, an offset out of range, a preferred read replica,
    /// or the records from the fetch offset.
    fn replica(
        &mut self,
        p: &FetchPartition,
        part: &Partition,
        out: &mut PartitionData,
    ) -> ErrorCode {
        let log = &part.log;
        out.high_watermark = log.high_watermark();
        out.last_stable_offset = log.high_watermark();
        out.log_start_offset = log.log_start_offset();
        // v12+: a `last_fetched_epoch` is checked against the epoch cache,
        // as Kafka's `Partition.fetchRecords` does (KIP-320 for consumers).
        let end = (p.last_fetched_epoch >= 0).then(|| part.end_offset_for(p.last_fetched_epoch));
        if matches!(end, Some((_, -1))) {
            ErrorCode::OffsetOutOfRange
        } else if let Some((epoch, end_offset)) =
            end.filter(|&(e, o)| e < p.last_fetched_epoch || o < p.fetch_offset)
        {
            out.diverging_epoch = DivergingEpoch {
                epoch,
                end_offset,
                ..Default::default()
            };
            self.at_once = true;
            ErrorCode::None
        } else if p.fetch_offset < log.log_start_offset() || p.fetch_offset > log.high_watermark() {
            ErrorCode::OffsetOutOfRange
        } else if let Some(replica) = (part.leader == self.broker && self.version >= 11)
            .then(|| preferred_read_replica(self.st, part, self.rack))
            .flatten()
        {
            // Kafka's `ReplicaManager.readFromLocalLog`: a leader that
            // prefers another replica for this client sends no records,
            // and answers at once.
            out.preferred_read_replica = replica;
            self.at_once = true;
            ErrorCode::None
        } else {
            let room = self.max_bytes.saturating_sub(self.bytes);
            let want = usize::try_from(p.partition_max_bytes)
                .unwrap_or(0)
                .min(room);
            // The first batch of the response is sent whole even when
            // larger than the limits (KIP-74).
            let records = if want == 0 && self.bytes > 0 {
                Bytes::new()
            } else {
                log.read(p.fetch_offset, want.max(1))
            };
            self.bytes += records.len();
            out.records = Some(records);
            ErrorCode::None
        }
    }
}

/// The follower a leader names to a client in `rack` as the preferred
/// read replica of `part` (KIP-392), as Kafka's
/// `RackAwareReplicaSelector` picks: none when the client sends no rack
/// or the leader is in its rack; else a follower in that rack (in
/// sync: the mock's followers share the log; and up), the lowest id
/// first; none when no follower is.
fn preferred_read_replica(st: &State, part: &Partition, rack: &str) -> Option<i32> {
    if rack.is_empty() {
        return None;
    }
    let in_rack = |b: i32| {
        st.brokers
            .get(&b)
            .is_some_and(|b| b.rack.as_deref() == Some(rack))
    };
    if in_rack(part.leader) {
        return None;
    }
    part.followers
        .iter()
        .copied()
        .filter(|&b| st.is_up(b) && in_rack(b))
        .min()
}

/// A Fetch and its answer as [`MockCluster::fetches`] shows them, topic
/// ids (v13+) named.
///
/// [`MockCluster::fetches`]: crate::mock::MockCluster::fetches
fn describe(
    st: &State,
    now: Instant,
    r: &Received,
    req: &FetchRequest,
    resp: &FetchResponse,
) -> MockFetch {
    let version = r.version;
    let name = |topic: &str, id: &[u8; 16]| -> String {
        if version >= 13 {
            st.topics
                .iter()
                .find(|(_, t)| &t.id == id)
                .map_or_else(String::new, |(n, _)| n.clone())
        } else {
            topic.to_owned()
        }
    };
    MockFetch {
        at: now.saturating_duration_since(st.started),
        broker: r.broker,
        connection: r.conn,
        version,
        size: r.size,
        session_id: req.session_id,
        session_epoch: req.session_epoch,
        listed: req
            .topics
            .iter()
            .flat_map(|t| {
                let n = name(&t.topic, &t.topic_id);
                t.partitions.iter().map(move |p| (n.clone(), p.partition))
            })
            .collect(),
        forgotten: req
            .forgotten_topics_data
            .iter()
            .flat_map(|t| {
                let n = name(&t.topic, &t.topic_id);
                t.partitions.iter().map(move |&p| (n.clone(), p))
            })
            .collect(),
        error: ErrorCode::from_code(resp.error_code),
        response_session_id: resp.session_id,
        record_bytes: resp
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .filter_map(|p| p.records.as_ref())
            .map(Bytes::len)
            .sum(),
        preferred_read_replicas: resp
            .responses
            .iter()
            .flat_map(|t| {
                let n = name(&t.topic, &t.topic_id);
                t.partitions
                    .iter()
                    .filter(|p| p.preferred_read_replica >= 0)
                    .map(move |p| (n.clone(), p.partition_index, p.preferred_read_replica))
            })
            .collect(),
        answered: resp
            .responses
            .iter()
            .flat_map(|t| {
                let n = name(&t.topic, &t.topic_id);
                t.partitions
                    .iter()
                    .map(move |p| (n.clone(), p.partition_index))
            })
            .collect(),
    }
}
