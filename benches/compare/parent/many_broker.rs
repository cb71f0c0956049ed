//! Where a many-partitions case (`sessions`, `sessions-rdmock`,
//! `rebalance`) runs: our mock or librdkafka's, behind one face that
//! fills and trickles a topic, and reads the request log.

use super::mock::Mock;
use crate::common;
use lazykafka::mock::MockRecord;
use std::time::Duration;

/// Where a many-partitions case runs: `lazykafka::mock` (fetch
/// sessions, a request log with bytes) or librdkafka's mock (no fetch
/// sessions; it holds an empty Fetch for the full wait), filled and
/// trickled through a librdkafka producer in this process.
pub(crate) enum ManyBroker {
    Ours(Mock),
    Rd {
        mock: common::mock::RawMock,
        producer: rdkafka::producer::BaseProducer,
    },
}

impl ManyBroker {
    /// Three brokers and `topic` of `partitions` partitions, partition `p`
    /// led by broker `p % 3 + 1`: our mock when `ours`, else librdkafka's.
    pub(crate) fn new(ours: bool, topic: &str, partitions: i32) -> ManyBroker {
        if ours {
            let mock = Mock::new(3);
            mock.create_topic_round_robin(topic, partitions, "many-partitions topic");
            return ManyBroker::Ours(mock);
        }
        use rdkafka::config::ClientConfig;
        let mock = common::mock::RawMock::new(3);
        // librdkafka's mock advertises group API versions its handlers
        // cannot read (see `RawMock::cap_group_versions`).
        mock.cap_group_versions();
        // With a replication factor of 1 the mock itself makes broker
        // `p % 3 + 1` lead partition `p` (`assign_replicas`). (Setting
        // each leader by hand, one request to its thread each, stalled
        // that thread at 2,000 partitions.)
        mock.create_topic(topic, partitions);
        let producer = ClientConfig::new()
            .set("bootstrap.servers", mock.bootstraps().join(","))
            .set("linger.ms", "0")
            .create()
            .expect("librdkafka producer");
        mock.start_tracking();
        ManyBroker::Rd { mock, producer }
    }

    /// The broker's name in the results.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            ManyBroker::Ours(_) => "mock",
            ManyBroker::Rd { .. } => "librdkafka-mock",
        }
    }

    pub(crate) fn bootstrap(&self) -> String {
        match self {
            ManyBroker::Ours(m) => m.bootstrap(),
            ManyBroker::Rd { mock, .. } => mock.bootstraps().join(","),
        }
    }

    pub(crate) fn ports(&self) -> Vec<u16> {
        match self {
            ManyBroker::Ours(m) => m.ports(),
            ManyBroker::Rd { mock, .. } => mock.ports(),
        }
    }

    /// Writes `n` records of `value` to `partition` (on librdkafka's
    /// mock, sent now and delivered in the background).
    pub(crate) fn produce(&self, topic: &str, partition: i32, n: usize, value: &str) {
        match self {
            ManyBroker::Ours(m) => {
                let _ = m.cluster.produce(
                    topic,
                    partition,
                    (0..n).map(|_| MockRecord::new(value.to_owned())),
                );
            }
            ManyBroker::Rd { producer, .. } => {
                use rdkafka::producer::BaseRecord;
                for _ in 0..n {
                    common::peers::send(
                        producer,
                        BaseRecord::<(), _>::to(topic)
                            .payload(value)
                            .partition(partition),
                    );
                }
                producer.poll(Duration::ZERO);
            }
        }
    }

    /// Waits until every record sent is delivered.
    pub(crate) fn flush(&self) {
        if let ManyBroker::Rd { producer, .. } = self {
            use rdkafka::producer::Producer as _;
            producer
                .flush(Duration::from_secs(120))
                .expect("fill librdkafka's mock");
        }
    }

    pub(crate) fn clear_requests(&self) {
        match self {
            ManyBroker::Ours(m) => m.clear_requests(),
            ManyBroker::Rd { mock, .. } => mock.clear_requests(),
        }
    }

    /// Fetch request bytes received so far (our mock only).
    pub(crate) fn fetch_bytes(&self) -> Option<u64> {
        match self {
            ManyBroker::Ours(m) => {
                Some(m.cluster.request_bytes(lazykafka::protocol::ApiKey::Fetch))
            }
            ManyBroker::Rd { .. } => None,
        }
    }

    /// Every request received since the last clear: API key and when
    /// (CLOCK_MONOTONIC µs), oldest first.
    pub(crate) fn requests_timed(&self) -> Vec<(i16, i64)> {
        let mut out: Vec<(i16, i64)> = match self {
            ManyBroker::Ours(m) => m
                .cluster
                .requests()
                .iter()
                .filter_map(|q| Some((q.api?.code(), m.mono_us(q.at))))
                .collect(),
            // librdkafka's mock stamps requests with rd_clock(),
            // CLOCK_MONOTONIC µs as well.
            ManyBroker::Rd { mock, .. } => mock
                .requests_timed()
                .into_iter()
                .map(|(_, api, t)| (api, t))
                .collect(),
        };
        out.sort_by_key(|(_, t)| *t);
        out
    }

    /// Fetch requests received between two CLOCK_MONOTONIC instants (µs).
    pub(crate) fn fetches_between(&self, from: i64, to: i64) -> usize {
        self.requests_timed()
            .iter()
            .filter(|(api, t)| *api == 1 && (from..=to).contains(t))
            .count()
    }
}
