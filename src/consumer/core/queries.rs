//! The application's lookups that ask a broker and wait: offsets by time
//! or position (ListOffsets), committed offsets (OffsetFetch), the
//! partitions of a topic (Metadata), and the reading of their answers.

use super::super::offsets::{read_committed, CommittedOffsets, FetchCommitted, OffsetAndEpoch};
use super::{ConsumerCore, Pending};
use crate::cluster::{RequestBody, RequestError, Response, Retry, Target};
use crate::error::{Error, ErrorCode};
use crate::fetch::{read_list_offsets, OffsetAndTimestamp, OffsetSpec};
use crate::group::errors::{classify, GroupErrorClass};
use crate::group::TopicPartition;
use crate::protocol::ApiKey;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The application's lookups in flight and their answers.
#[derive(Debug)]
pub(super) struct Queries {
    /// The next lookup's number.
    next: u64,
    /// Answers not yet taken by their callers.
    answers: BTreeMap<u64, Result<Response, RequestError>>,
    /// Topics whose metadata a lookup needs, besides the mode's.
    topics: BTreeSet<String>,
}

impl Queries {
    pub(super) fn new() -> Self {
        Queries {
            next: 1,
            answers: BTreeMap::new(),
            topics: BTreeSet::new(),
        }
    }

    /// A new lookup's number.
    fn start(&mut self) -> u64 {
        let q = self.next;
        self.next += 1;
        q
    }

    /// Lookup `q` was answered.
    pub(super) fn answered(&mut self, q: u64, answer: Result<Response, RequestError>) {
        self.answers.insert(q, answer);
    }

    /// The answer to lookup `q`, once come.
    fn take(&mut self, q: u64) -> Option<Result<Response, RequestError>> {
        self.answers.remove(&q)
    }

    /// Adds `topics` to those a lookup needs; `true` when one is new.
    fn want(&mut self, topics: impl IntoIterator<Item = String>) -> bool {
        let before = self.topics.len();
        self.topics.extend(topics);
        self.topics.len() != before
    }

    /// The topics lookups need.
    pub(super) fn topics(&self) -> impl Iterator<Item = &String> {
        self.topics.iter()
    }
}

impl ConsumerCore {
    /// Sends the ListOffsets requests `query` needs (one per leader; the
    /// leaders must be known: [`ConsumerCore::want_leaders`]); returns
    /// the queries to wait for ([`ConsumerCore::take_query`]).
    pub fn query_offsets(
        &mut self,
        now: Instant,
        query: &BTreeMap<TopicPartition, OffsetSpec>,
    ) -> Vec<u64> {
        let plan = self
            .fetcher
            .list_offsets_requests(query, self.cluster.metadata());
        plan.requests
            .into_iter()
            .map(|(broker, body)| self.query(now, Target::Broker(broker), body))
            .collect()
    }

    /// Sends an arbitrary request (offsets queries); its response comes out
    /// of [`ConsumerCore::take_query`].
    pub fn query(&mut self, now: Instant, target: Target, body: Box<dyn RequestBody>) -> u64 {
        let q = self.queries.start();
        let id = self.cluster.request(now, target, body);
        self.in_flight.insert(id, Pending::Query(q));
        q
    }

    /// The response to query `q`, once known.
    pub fn take_query(&mut self, q: u64) -> Option<Result<Response, RequestError>> {
        self.queries.take(q)
    }

    /// Makes the metadata cover `topics` (for offsets queries), and returns
    /// the partitions among `partitions` whose leader is still unknown.
    pub fn want_leaders(
        &mut self,
        partitions: &BTreeSet<TopicPartition>,
    ) -> BTreeSet<TopicPartition> {
        if self
            .queries
            .want(partitions.iter().map(|tp| tp.topic.clone()))
        {
            self.update_topics();
        }
        let unknown: BTreeSet<TopicPartition> = partitions
            .iter()
            .filter(|tp| {
                self.cluster
                    .metadata()
                    .leader(&tp.topic, tp.partition)
                    .is_none()
            })
            .cloned()
            .collect();
        if !unknown.is_empty() {
            self.cluster.request_metadata_refresh_later();
        }
        unknown
    }

    /// Makes the metadata cover `topic` (for `partitions_for`), and returns
    /// its partitions once the metadata describes it with a leader for
    /// each; `Some(Err(code))` for a topic-level error that retrying can't
    /// fix, `None` while the answer is still to come.
    /// A topic still unknown (retriable error) once
    /// `topic.metadata.propagation.max.ms` passed since `asked` gives its
    /// error too.
    pub fn want_partitions(
        &mut self,
        topic: &str,
        now: Instant,
        asked: Instant,
    ) -> Option<Result<Vec<TopicPartition>, ErrorCode>> {
        if self.queries.want([topic.to_owned()]) {
            self.update_topics();
        }
        let metadata = self.cluster.metadata();
        let wanted = BTreeSet::from([topic.to_owned()]);
        if metadata.covers(&wanted) {
            let info = &metadata.topics[topic];
            return Some(Ok(info
                .partitions
                .keys()
                .map(|p| TopicPartition::new(topic, *p))
                .collect()));
        }
        if let Some(info) = metadata.topics.get(topic) {
            let waited = now.saturating_duration_since(asked) >= self.reports.propagation();
            if info.error != ErrorCode::None && (!info.error.is_retriable() || waited) {
                return Some(Err(info.error));
            }
        }
        self.cluster.request_metadata_refresh_later();
        None
    }

    /// The topic-level error the metadata holds for `topic`, if any.
    pub fn topic_error(&self, topic: &str) -> Option<ErrorCode> {
        self.cluster
            .metadata()
            .topics
            .get(topic)
            .map(|t| t.error)
            .filter(|e| *e != ErrorCode::None)
    }

    /// Reads committed offsets (for `committed()`), as a query.
    pub fn query_committed(
        &mut self,
        now: Instant,
        partitions: BTreeSet<TopicPartition>,
    ) -> Option<u64> {
        let group = self.group_id.clone()?;
        Some(self.query(
            now,
            Target::Coordinator,
            Box::new(FetchCommitted {
                group,
                partitions,
                require_stable: true,
            }),
        ))
    }

    /// The wait before a run of failures (`retry`) tries again, under the
    /// retry policy every request kind shares.
    pub fn retry_wait(&mut self, now: Instant, retry: &mut Retry) -> Duration {
        retry.failed(now, &self.retry_policy, self.rng.unit())
    }

    /// An application's committed-offsets lookup (`Consumer::committed`)
    /// refused with `code`, which passes by itself: the coordinator is
    /// looked up again when it moved; returns the wait before the next
    /// lookup.
    pub fn committed_lookup_failed(
        &mut self,
        now: Instant,
        code: ErrorCode,
        retry: &mut Retry,
    ) -> Duration {
        if classify(code) == GroupErrorClass::Coordinator {
            self.cluster.coordinator_unknown(now);
        }
        self.retry_wait(now, retry)
    }

    /// Decodes the response to a query [`ConsumerCore::query_offsets`]
    /// sent: each partition's offset (and timestamp), `None` where the
    /// broker knows none; a partition refused is an [`Error::Broker`].
    pub fn read_offsets_query(
        &self,
        response: &Response,
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndTimestamp>>, Error> {
        let listed = read_list_offsets(response).map_err(|source| Error::Decode {
            api: ApiKey::ListOffsets,
            addr: String::new(),
            source,
        })?;
        listed
            .into_iter()
            .map(|(tp, result)| {
                result
                    .map(|found| (tp, found))
                    .map_err(|code| Error::Broker {
                        api: ApiKey::ListOffsets,
                        code,
                    })
            })
            .collect()
    }

    /// Decodes a committed-offsets query response.
    pub fn read_committed_query(
        &self,
        response: &Response,
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndEpoch>>, Error> {
        let group = self.group_id.clone().unwrap_or_default();
        match read_committed(response, &group) {
            Ok(CommittedOffsets::Offsets(o)) => Ok(o),
            Ok(CommittedOffsets::Error(code)) => Err(Error::Group {
                group,
                api: ApiKey::OffsetFetch,
                code: Some(code),
                reason: format!("OffsetFetch failed: {code}"),
                stopped: false,
            }),
            Err(source) => Err(Error::Decode {
                api: ApiKey::OffsetFetch,
                addr: String::new(),
                source,
            }),
        }
    }
}
