//! Incremental fetch sessions (KIP-227) as a Kafka broker keeps them
//! (`FetchSession`, `FetchSessionCache` and `FetchManager.newContext` in
//! Apache Kafka), without IO: one cache per broker (`state.rs`'s
//! `Broker`). `api/fetch.rs` asks it how to serve each Fetch and hands it
//! the answer; `MockCluster` sizes, evicts and lists the sessions.
//!
//! ```text
//!  request (session_id, session_epoch)        context          answer's session_id
//!  ───────────────────────────────────        ───────          ───────────────────
//!  (any, -1)  FINAL_EPOCH                     sessionless      0 (closes session_id if set)
//!  (any,  0)  INITIAL_EPOCH                   full             a new session (epoch 1), or 0
//!                                                              when the cache has no room
//!  (id, e>0)  id unknown                      error            FETCH_SESSION_ID_NOT_FOUND, 0
//!  (id, e>0)  e != the session's epoch        error            INVALID_FETCH_SESSION_EPOCH, 0
//!  (id, e>0)  the session left empty          sessionless      0 (the session is closed)
//!  (id, e>0)  otherwise                       incremental      id; epoch e+1 next
//! ```

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::error::ErrorCode;
use crate::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchResponse, FetchTopic};

/// Kafka's `max.incremental.fetch.session.cache.slots` default.
pub(crate) const DEFAULT_SLOTS: usize = 1000;
/// Kafka's `min.incremental.fetch.session.eviction.ms` default.
pub(crate) const DEFAULT_EVICTION: Duration = Duration::from_secs(120);

/// A partition as a session names it: by topic id from Fetch v13
/// (KIP-516; the name is left empty), by name before (the id is zeros).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PartitionKey {
    pub topic_id: [u8; 16],
    pub topic: String,
    pub partition: i32,
}

impl PartitionKey {
    fn new(uses_ids: bool, topic: &str, topic_id: [u8; 16], partition: i32) -> Self {
        if uses_ids {
            PartitionKey {
                topic_id,
                topic: String::new(),
                partition,
            }
        } else {
            PartitionKey {
                topic_id: [0; 16],
                topic: topic.to_owned(),
                partition,
            }
        }
    }
}

/// Kafka's `CachedPartition`: what the client last asked for a partition,
/// and what the broker last told it.
#[derive(Debug, Clone)]
struct CachedPartition {
    key: PartitionKey,
    request: FetchPartition,
    high_watermark: i64,
    log_start_offset: i64,
}

impl CachedPartition {
    /// Kafka's `CachedPartition.maybeUpdateResponseData`: whether an
    /// incremental answer must carry the partition (records, a changed high
    /// watermark or log start, an error, a diverging epoch), remembering
    /// what it told the client.
    fn must_respond(&mut self, data: &crate::protocol::messages::fetch::PartitionData) -> bool {
        let mut must = data.records.as_ref().is_some_and(|r| !r.is_empty());
        if self.high_watermark != data.high_watermark {
            must = true;
            self.high_watermark = data.high_watermark;
        }
        if self.log_start_offset != data.log_start_offset {
            must = true;
            self.log_start_offset = data.log_start_offset;
        }
        if data.preferred_read_replica >= 0 {
            must = true;
        }
        if data.error_code != 0 {
            // Sent again once the error goes away.
            self.high_watermark = -1;
            must = true;
        }
        if data.diverging_epoch.epoch >= 0 {
            must = true;
        }
        must
    }
}

/// One session.
#[derive(Debug)]
struct Session {
    epoch: i32,
    uses_ids: bool,
    /// In Kafka's order: partitions that returned records move to the end,
    /// so under `max_bytes` every partition gets its turn.
    partitions: Vec<CachedPartition>,
    created: Instant,
    last_used: Instant,
}

/// A session as [`super::MockCluster::fetch_sessions`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockFetchSession {
    /// The broker keeping it.
    pub broker: i32,
    /// The session id.
    pub id: i32,
    /// The epoch the next incremental Fetch must carry.
    pub epoch: i32,
    /// The partitions in it.
    pub partitions: usize,
}

/// How a Fetch is served (Kafka's `FetchContext` kinds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Context {
    /// The request's partitions; no session (answer's id 0).
    Sessionless,
    /// The request's partitions; a session is made when answering.
    Full,
    /// The session's partitions; the answer carries only those that
    /// changed.
    Incremental { id: i32, epoch: i32 },
    /// A top-level error and no partitions.
    Error(ErrorCode),
}

/// The fetch session cache of one broker (Kafka's `FetchSessionCache`).
#[derive(Debug)]
pub(crate) struct FetchSessions {
    sessions: HashMap<i32, Session>,
    /// The most sessions kept; 0: none (every Fetch sessionless).
    pub slots: usize,
    /// A session unused this long may be evicted by any new one; one
    /// created longer ago may be evicted by a larger one.
    pub eviction: Duration,
    /// Drives session ids (a xorshift: positive, unique, reproducible).
    seed: u32,
}

impl FetchSessions {
    pub fn new(broker: i32) -> Self {
        FetchSessions {
            sessions: HashMap::new(),
            slots: DEFAULT_SLOTS,
            eviction: DEFAULT_EVICTION,
            seed: 0x9e37_79b9 ^ broker as u32,
        }
    }

    /// Kafka's `FetchManager.newContext`. For an incremental request it
    /// applies the request to the session (adds, updates, forgets) and
    /// moves the session to its next epoch.
    pub fn new_context(&mut self, now: Instant, version: i16, req: &FetchRequest) -> Context {
        // Before v7 there are no sessions.
        if version < 7 {
            return Context::Sessionless;
        }
        let uses_ids = version >= 13;
        if req.session_epoch == -1 || req.session_epoch == 0 {
            // Any session named in a full Fetch is closed.
            if req.session_id != 0 {
                self.sessions.remove(&req.session_id);
            }
            return if req.session_epoch == -1 {
                Context::Sessionless
            } else {
                Context::Full
            };
        }
        let Some(session) = self.sessions.get_mut(&req.session_id) else {
            return Context::Error(ErrorCode::FetchSessionIdNotFound);
        };
        if session.epoch != req.session_epoch {
            return Context::Error(ErrorCode::InvalidFetchSessionEpoch);
        }
        if session.uses_ids != uses_ids {
            // KIP-516: a session made with topic ids cannot go on without
            // them, nor the other way.
            return Context::Error(ErrorCode::FetchSessionTopicIdError);
        }
        // Kafka's `FetchSession.update`: listed partitions are added or
        // updated in place, forgotten ones removed.
        for t in &req.topics {
            for p in &t.partitions {
                let key = PartitionKey::new(uses_ids, &t.topic, t.topic_id, p.partition);
                match session.partitions.iter_mut().find(|c| c.key == key) {
                    Some(c) => c.request = p.clone(),
                    None => session.partitions.push(CachedPartition {
                        key,
                        request: p.clone(),
                        high_watermark: -1,
                        log_start_offset: -1,
                    }),
                }
            }
        }
        for t in &req.forgotten_topics_data {
            for &p in &t.partitions {
                let key = PartitionKey::new(uses_ids, &t.topic, t.topic_id, p);
                session.partitions.retain(|c| c.key != key);
            }
        }
        if session.partitions.is_empty() {
            self.sessions.remove(&req.session_id);
            return Context::Sessionless;
        }
        session.last_used = now;
        session.epoch = next_epoch(session.epoch);
        Context::Incremental {
            id: req.session_id,
            epoch: session.epoch,
        }
    }

    /// The partitions an incremental Fetch reads: every partition of the
    /// session, in its order, as request topics.
    pub fn session_topics(&self, id: i32) -> Vec<FetchTopic> {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for c in self.sessions.get(&id).map_or(&[][..], |s| &s.partitions) {
            match topics.last_mut() {
                Some(t) if t.topic == c.key.topic && t.topic_id == c.key.topic_id => {
                    t.partitions.push(c.request.clone());
                }
                _ => topics.push(FetchTopic {
                    topic: c.key.topic.clone(),
                    topic_id: c.key.topic_id,
                    partitions: vec![c.request.clone()],
                    ..FetchTopic::default()
                }),
            }
        }
        topics
    }

    /// Kafka's `FullFetchContext.updateAndGenerateResponseData`: a session
    /// holding the request's partitions and what the answer tells of them,
    /// when the cache has room; its id (0 when none was made).
    pub fn create(
        &mut self,
        now: Instant,
        version: i16,
        req: &FetchRequest,
        resp: &FetchResponse,
    ) -> i32 {
        let uses_ids = version >= 13;
        let mut partitions = Vec::new();
        for t in &req.topics {
            let answered = resp.responses.iter().find(|r| {
                if uses_ids {
                    r.topic_id == t.topic_id
                } else {
                    r.topic == t.topic
                }
            });
            for p in &t.partitions {
                let data = answered.and_then(|r| {
                    r.partitions
                        .iter()
                        .find(|d| d.partition_index == p.partition)
                });
                partitions.push(CachedPartition {
                    key: PartitionKey::new(uses_ids, &t.topic, t.topic_id, p.partition),
                    request: p.clone(),
                    high_watermark: data.map_or(-1, |d| d.high_watermark),
                    log_start_offset: data.map_or(-1, |d| d.log_start_offset),
                });
            }
        }
        if self.sessions.len() >= self.slots && !self.try_evict(now, partitions.len()) {
            return 0;
        }
        let id = self.new_id();
        self.sessions.insert(
            id,
            Session {
                epoch: next_epoch(0),
                uses_ids,
                partitions,
                created: now,
                last_used: now,
            },
        );
        id
    }

    /// Kafka's `IncrementalFetchContext.updateAndGenerateResponseData`:
    /// keeps in `resp` only the partitions that must be answered, moves
    /// those that returned records to the end of the session, and names the
    /// session. The session may have moved on (a duplicate request) or
    /// gone (evicted) while the Fetch waited: then an error.
    pub fn finish_incremental(&mut self, id: i32, epoch: i32, resp: &mut FetchResponse) {
        let Some(session) = self.sessions.get_mut(&id) else {
            *resp = error_response(ErrorCode::FetchSessionIdNotFound);
            return;
        };
        if session.epoch != epoch {
            *resp = error_response(ErrorCode::InvalidFetchSessionEpoch);
            return;
        }
        let uses_ids = session.uses_ids;
        for topic in &mut resp.responses {
            let (name, topic_id) = (topic.topic.clone(), topic.topic_id);
            topic.partitions.retain(|data| {
                let key = PartitionKey::new(uses_ids, &name, topic_id, data.partition_index);
                let Some(i) = session.partitions.iter().position(|c| c.key == key) else {
                    return false;
                };
                if !session.partitions[i].must_respond(data) {
                    return false;
                }
                if data.records.as_ref().is_some_and(|r| !r.is_empty()) {
                    let c = session.partitions.remove(i);
                    session.partitions.push(c);
                }
                true
            });
        }
        resp.responses.retain(|t| !t.partitions.is_empty());
        resp.session_id = id;
    }

    /// Drops the session (a Fetch error injected as
    /// FETCH_SESSION_ID_NOT_FOUND: the broker lost it).
    pub fn remove(&mut self, id: i32) -> bool {
        self.sessions.remove(&id).is_some()
    }

    /// Drops every session; how many there were.
    pub fn clear(&mut self) -> usize {
        let n = self.sessions.len();
        self.sessions.clear();
        n
    }

    /// The sessions, by id.
    pub fn snapshot(&self, broker: i32) -> Vec<MockFetchSession> {
        let mut out: Vec<MockFetchSession> = self
            .sessions
            .iter()
            .map(|(&id, s)| MockFetchSession {
                broker,
                id,
                epoch: s.epoch,
                partitions: s.partitions.len(),
            })
            .collect();
        out.sort_by_key(|s| s.id);
        out
    }

    /// Kafka's `FetchSessionCache.tryEvict` for a consumer's session of
    /// `size` partitions (consumers are never privileged): the least
    /// recently used session if it is stale (unused for `eviction`), else
    /// the smallest of those created more than `eviction` ago, if smaller
    /// than the new one.
    fn try_evict(&mut self, now: Instant, size: usize) -> bool {
        let Some((&lru, oldest)) = self
            .sessions
            .iter()
            .min_by_key(|(&id, s)| (s.last_used, id))
        else {
            return false;
        };
        if now.saturating_duration_since(oldest.last_used) > self.eviction {
            self.sessions.remove(&lru);
            return true;
        }
        let smallest = self
            .sessions
            .iter()
            .filter(|(_, s)| now.saturating_duration_since(s.created) > self.eviction)
            .min_by_key(|(&id, s)| (s.partitions.len(), id))
            .map(|(&id, s)| (id, s.partitions.len()));
        match smallest {
            // Kafka compares (size, id) with the new key's id 0: a session
            // of the same size is not evicted.
            Some((id, len)) if size > len => {
                self.sessions.remove(&id);
                true
            }
            _ => false,
        }
    }

    fn new_id(&mut self) -> i32 {
        loop {
            // xorshift32
            let mut x = self.seed;
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            self.seed = x;
            let id = (x & 0x7fff_ffff) as i32;
            if id != 0 && !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }
}

/// The epoch after `epoch`, wrapping to 1 (Kafka's
/// `FetchMetadata.nextEpoch`).
fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        // A sessionless request stays sessionless.
        epoch
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// An answer with a top-level error and nothing else (Kafka's
/// `SessionErrorContext`).
pub(crate) fn error_response(code: ErrorCode) -> FetchResponse {
    FetchResponse {
        error_code: code.code(),
        session_id: 0,
        ..Default::default()
    }
}

/// Whether an error injected for Fetch is a session error, answered at the
/// top level as a broker would.
pub(crate) fn is_session_error(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::FetchSessionIdNotFound
            | ErrorCode::InvalidFetchSessionEpoch
            | ErrorCode::FetchSessionTopicIdError
    )
}

#[cfg(test)]
mod tests;
