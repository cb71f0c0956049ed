//! What a test reads of a running cluster: the brokers' event and request
//! logs, the Fetch log, open connections, fetch sessions, request bytes,
//! groups and their commits, and what partitions keep of idempotent
//! producers.

use super::{
    GroupSnapshot, MockCluster, MockEvent, MockEventKind, MockFetch, MockFetchSession, MockRequest,
};
use crate::protocol::ApiKey;

impl MockCluster {
    /// Everything the brokers saw, in order.
    pub fn events(&self) -> Vec<MockEvent> {
        self.shared.lock().events.clone()
    }

    /// Forgets the events so far.
    pub fn clear_events(&self) {
        self.shared.lock().events.clear();
    }

    /// The requests the brokers received, in order.
    pub fn requests(&self) -> Vec<MockRequest> {
        self.shared
            .lock()
            .events
            .iter()
            .filter_map(|e| match e.kind {
                MockEventKind::Request {
                    connection,
                    api_key,
                    api_version,
                    ..
                } => Some(MockRequest {
                    at: e.at,
                    broker: e.broker,
                    connection,
                    api: ApiKey::from_code(api_key),
                    version: api_version,
                }),
                _ => None,
            })
            .collect()
    }

    /// The connections open now, as `(connection id, broker)`.
    pub fn open_connections(&self) -> Vec<(u64, i32)> {
        let conns = self.shared.conns.lock().unwrap_or_else(|e| e.into_inner());
        let mut open: Vec<(u64, i32)> = conns.iter().map(|(&id, c)| (id, c.broker)).collect();
        open.sort_unstable();
        open
    }

    /// The fetch sessions the brokers keep, by broker and id.
    pub fn fetch_sessions(&self) -> Vec<MockFetchSession> {
        let st = self.shared.lock();
        st.brokers
            .iter()
            .flat_map(|(&id, b)| b.fetch_sessions.snapshot(id))
            .collect()
    }

    /// Starts (or stops) recording each Fetch served with what it listed,
    /// forgot and got back ([`MockCluster::fetches`]). Off by default: a
    /// consumer of many partitions sends many of them.
    pub fn record_fetches(&self, on: bool) {
        let mut st = self.shared.lock();
        if !on {
            st.fetches = None;
        } else if st.fetches.is_none() {
            st.fetches = Some(Vec::new());
        }
    }

    /// The Fetch requests recorded since [`MockCluster::record_fetches`],
    /// in the order they were answered.
    pub fn fetches(&self) -> Vec<MockFetch> {
        self.shared.lock().fetches.clone().unwrap_or_default()
    }

    /// Bytes of requests of `api` received so far by every broker (each
    /// frame with its size prefix).
    pub fn request_bytes(&self, api: ApiKey) -> u64 {
        self.shared
            .lock()
            .request_bytes
            .get(&api.code())
            .copied()
            .unwrap_or(0)
    }

    /// A group as its coordinator sees it.
    pub fn group(&self, group: &str) -> Option<GroupSnapshot> {
        self.shared.lock().groups.snapshot(group)
    }

    /// The offset a group committed for a partition.
    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<i64> {
        self.shared.lock().groups.committed(group, topic, partition)
    }

    /// What a partition keeps of an idempotent producer: its epoch and
    /// last batches (see [idempotent producers](crate::mock#idempotent-producers));
    /// `None` when it has written nothing there.
    pub fn producer_state(
        &self,
        topic: &str,
        partition: i32,
        producer_id: i64,
    ) -> Option<MockProducerState> {
        self.with_partition(topic, partition, |p| {
            Ok(p.producers.get(producer_id).map(|entry| MockProducerState {
                epoch: entry.epoch,
                batches: entry
                    .batches
                    .iter()
                    .map(|b| MockProducerBatch {
                        first_sequence: b.first_seq(),
                        last_sequence: b.last_seq,
                        base_offset: b.first_offset(),
                        last_offset: b.last_offset,
                    })
                    .collect(),
            }))
        })
        .ok()
        .flatten()
    }
}

/// What a partition of the mock keeps of an idempotent producer
/// ([`MockCluster::producer_state`]), as Kafka's `ProducerStateEntry` does.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockProducerState {
    /// The producer's epoch there.
    pub epoch: i16,
    /// Its last batches there, at most 5, oldest first.
    pub batches: Vec<MockProducerBatch>,
}

/// One batch a producer wrote ([`MockProducerState::batches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockProducerBatch {
    /// The sequence of its first record.
    pub first_sequence: i32,
    /// The sequence of its last record.
    pub last_sequence: i32,
    /// The offset of its first record.
    pub base_offset: i64,
    /// The offset of its last record.
    pub last_offset: i64,
}
