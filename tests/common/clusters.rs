//! The two mock clusters the lifecycle tests run against with the same
//! assertions: librdkafka's (a peer nobody here wrote) and
//! `lazykafka::mock::MockCluster` (built on this crate's protocol layer, so
//! never the only judge).

use super::mock::RawMock;
use lazykafka::mock::MockCluster;
use lazykafka::protocol::ApiKey;
use lazykafka::ErrorCode;

/// Runs each named `async fn name<C: TestCluster>()` as two tests,
/// `librdkafka_mock::name` and `lazykafka_mock::name`.
#[allow(unused_macros)]
macro_rules! on_both_mocks {
    ($($name:ident),* $(,)?) => {
        mod librdkafka_mock {
            $(
                #[test]
                fn $name() {
                    crate::common::block_on(super::$name::<crate::common::mock::RawMock>())
                }
            )*
        }
        mod lazykafka_mock {
            $(
                #[test]
                fn $name() {
                    crate::common::block_on(super::$name::<lazykafka::mock::MockCluster>())
                }
            )*
        }
    };
}

/// Runs each named `async fn name<C: TestCluster>()` on librdkafka 2.16's
/// mock cluster (a child process, [`super::mock216::Mock216`]) as
/// `librdkafka216_mock::name`, skipped without `LAZYKAFKA_PYTHON` (a
/// failure then under `LAZYKAFKA_REQUIRE_BROKER=1`).
#[allow(unused_macros)]
macro_rules! on_mock216 {
    ($($name:ident),* $(,)?) => {
        mod librdkafka216_mock {
            $(
                #[test]
                fn $name() {
                    if crate::common::mock216::python(stringify!($name)).is_none() {
                        return;
                    }
                    crate::common::block_on(super::$name::<crate::common::mock216::Mock216>())
                }
            )*
        }
    };
}

/// What a lifecycle test needs of a mock cluster.
pub trait TestCluster {
    /// A cluster of `brokers` brokers (ids 1..=n), no topics, requests
    /// tracked.
    fn start(brokers: i32) -> Self
    where
        Self: Sized;
    /// Creates a topic; partition `i` is led by broker `leaders[i]`.
    fn create_topic(&self, topic: &str, leaders: &[i32]);
    /// Places a group's coordinator.
    fn set_coordinator(&self, group: &str, broker: i32);
    /// Delays a broker's answers.
    fn set_delay(&self, broker: i32, millis: u64);
    /// Forgets the requests seen so far (tracking goes on).
    fn clear_requests(&self);
    /// For messages.
    fn name(&self) -> &'static str;
    /// `host:port` of each broker, in broker-id order (ids from 1).
    fn bootstraps(&self) -> Vec<String>;
    /// The requests the brokers received so far, as `(broker, api key)`.
    fn requests(&self) -> Vec<(i32, i16)>;
    /// When each request of `api` arrived (to any broker), oldest first,
    /// from an origin of the cluster's own.
    fn request_times(&self, api: ApiKey) -> Vec<std::time::Duration>;
    /// Takes a broker down (its sockets closed, connects refused).
    fn broker_down(&self, broker: i32);
    /// Brings it back.
    fn broker_up(&self, broker: i32);
    /// Moves a partition's leadership.
    fn set_leader(&self, topic: &str, partition: i32, broker: i32);
    /// Leaves a partition led by `broker` without a leader. librdkafka's
    /// mock names none (leader -1) while every broker stays up;
    /// `lazykafka::mock` has no leaderless state of its own, so `broker`
    /// goes down (its Metadata then answers LEADER_NOT_AVAILABLE).
    fn remove_leader(&self, topic: &str, partition: i32, broker: i32);
    /// Readies the cluster for [`TestCluster::remove_leader`]: call it
    /// before the consumer connects.
    fn prepare_leaderless(&self) {}
    /// Gives the partition its leader `broker` back.
    fn restore_leader(&self, topic: &str, partition: i32, broker: i32);
    /// Answers the next `count` requests of `api` with `code`.
    fn push_errors(&self, api: ApiKey, code: ErrorCode, count: usize);
    /// Answers Metadata requests for `topic` with `code` as the topic's
    /// error until called with `None` (librdkafka's mocks inject no
    /// Metadata errors by count).
    fn set_metadata_error(&self, topic: &str, code: Option<ErrorCode>);
    /// The heartbeat interval and session timeout of KIP-848 groups.
    fn set_consumer_group_timing(&self, heartbeat_ms: i32, session_ms: i32);
    /// The least time between two resolutions of a KIP-848 group's regex
    /// subscriptions for new topics.
    fn set_regex_refresh(&self, millis: u64);

    /// The brokers' ports, in broker-id order.
    fn ports(&self) -> Vec<u16> {
        self.bootstraps()
            .iter()
            .map(|a| a.rsplit(':').next().unwrap().parse().unwrap())
            .collect()
    }

    /// `bootstrap.servers`.
    fn bootstrap(&self) -> String {
        self.bootstraps().join(",")
    }
}

/// The layout both clusters get: 3 brokers, topic `t` with partition 0 on
/// broker 1 and partition 1 on broker 3, group `g` coordinated by broker 2,
/// requests tracked.
pub fn standard<C: TestCluster>() -> C {
    let mock = C::start(3);
    mock.create_topic("t", &[1, 3]);
    mock.set_coordinator("g", 2);
    mock
}

/// When each request of `api` among `requests` (broker, API key, when in
/// librdkafka's monotonic microseconds) arrived, oldest first.
pub fn times_of(api: ApiKey, requests: Vec<(i32, i16, i64)>) -> Vec<std::time::Duration> {
    let mut times: Vec<i64> = requests
        .into_iter()
        .filter(|(_, key, _)| *key == api.code())
        .map(|(_, _, at)| at)
        .collect();
    times.sort_unstable();
    times
        .into_iter()
        .map(|us| std::time::Duration::from_micros(us.max(0) as u64))
        .collect()
}

/// [`standard`] on librdkafka's mock.
pub fn librdkafka() -> RawMock {
    standard()
}

/// [`standard`] on `lazykafka::mock`.
pub fn ours() -> MockCluster {
    standard()
}

impl TestCluster for RawMock {
    fn start(brokers: i32) -> Self {
        let mock = RawMock::new(brokers);
        mock.cap_group_versions();
        mock.start_tracking();
        mock
    }
    fn create_topic(&self, topic: &str, leaders: &[i32]) {
        RawMock::create_topic(self, topic, leaders.len() as i32);
        for (p, &b) in leaders.iter().enumerate() {
            RawMock::set_leader(self, topic, p as i32, b);
        }
    }
    fn set_coordinator(&self, group: &str, broker: i32) {
        self.set_group_coordinator(group, broker)
    }
    fn set_delay(&self, broker: i32, millis: u64) {
        self.set_rtt(broker, millis as i32)
    }
    fn clear_requests(&self) {
        RawMock::clear_requests(self)
    }
    fn name(&self) -> &'static str {
        "librdkafka mock"
    }
    fn bootstraps(&self) -> Vec<String> {
        RawMock::bootstraps(self)
    }
    fn requests(&self) -> Vec<(i32, i16)> {
        RawMock::requests(self)
    }
    fn request_times(&self, api: ApiKey) -> Vec<std::time::Duration> {
        times_of(api, self.requests_timed())
    }
    fn broker_down(&self, broker: i32) {
        RawMock::broker_down(self, broker)
    }
    fn broker_up(&self, broker: i32) {
        RawMock::broker_up(self, broker)
    }
    fn set_leader(&self, topic: &str, partition: i32, broker: i32) {
        RawMock::set_leader(self, topic, partition, broker)
    }
    fn prepare_leaderless(&self) {
        // librdkafka's mock (2.12.1) crashes answering a Fetch v10+ for a
        // partition without a leader: the NOT_LEADER_OR_FOLLOWER answer
        // names the current leader (KIP-951) through the missing one's
        // pointer (rd_kafka_mock_handle_Fetch). Below v10 it adds none.
        self.set_apiversion(ApiKey::Fetch.code(), 0, 9);
    }
    fn remove_leader(&self, topic: &str, partition: i32, _broker: i32) {
        RawMock::set_leader(self, topic, partition, -1)
    }
    fn restore_leader(&self, topic: &str, partition: i32, broker: i32) {
        RawMock::set_leader(self, topic, partition, broker)
    }
    fn push_errors(&self, api: ApiKey, code: ErrorCode, count: usize) {
        self.push_request_errors(api.code(), &vec![rd_err(code); count]);
    }
    fn set_metadata_error(&self, topic: &str, code: Option<ErrorCode>) {
        let err = code.map_or(
            rdkafka_sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
            rd_err,
        );
        self.set_topic_error(topic, err);
    }

    fn set_consumer_group_timing(&self, heartbeat_ms: i32, session_ms: i32) {
        RawMock::set_consumer_group_timing(self, heartbeat_ms, session_ms)
    }
    fn set_regex_refresh(&self, _millis: u64) {
        // Nothing to set: librdkafka's mock matches a member's regex
        // against every topic at each of its heartbeats
        // (rd_kafka_mock_cgrp_consumer_member_subscribed_topic_names_set).
    }
}

impl TestCluster for MockCluster {
    fn start(brokers: i32) -> Self {
        MockCluster::new(brokers).expect("mock cluster")
    }
    fn create_topic(&self, topic: &str, leaders: &[i32]) {
        self.create_topic_with_leaders(topic, leaders).unwrap()
    }
    fn set_coordinator(&self, group: &str, broker: i32) {
        MockCluster::set_coordinator(self, group, broker).unwrap()
    }
    fn set_delay(&self, broker: i32, millis: u64) {
        MockCluster::set_delay(self, broker, std::time::Duration::from_millis(millis)).unwrap()
    }
    fn clear_requests(&self) {
        self.clear_events()
    }
    fn name(&self) -> &'static str {
        "lazykafka mock"
    }
    fn bootstraps(&self) -> Vec<String> {
        self.broker_ids()
            .into_iter()
            .map(|id| self.broker_addr(id).unwrap().to_string())
            .collect()
    }
    fn requests(&self) -> Vec<(i32, i16)> {
        MockCluster::requests(self)
            .into_iter()
            .filter_map(|r| Some((r.broker, r.api?.code())))
            .collect()
    }
    fn request_times(&self, api: ApiKey) -> Vec<std::time::Duration> {
        let mut times: Vec<std::time::Duration> = MockCluster::requests(self)
            .into_iter()
            .filter(|r| r.api == Some(api))
            .map(|r| r.at)
            .collect();
        times.sort_unstable();
        times
    }
    fn broker_down(&self, broker: i32) {
        MockCluster::broker_down(self, broker).unwrap()
    }
    fn broker_up(&self, broker: i32) {
        MockCluster::broker_up(self, broker).unwrap()
    }
    fn set_leader(&self, topic: &str, partition: i32, broker: i32) {
        MockCluster::set_leader(self, topic, partition, broker).unwrap()
    }
    fn remove_leader(&self, _topic: &str, _partition: i32, broker: i32) {
        MockCluster::broker_down(self, broker).unwrap()
    }
    fn restore_leader(&self, _topic: &str, _partition: i32, broker: i32) {
        MockCluster::broker_up(self, broker).unwrap()
    }
    fn push_errors(&self, api: ApiKey, code: ErrorCode, count: usize) {
        MockCluster::push_errors(self, api, &vec![code; count])
    }
    fn set_metadata_error(&self, _topic: &str, code: Option<ErrorCode>) {
        // Every topic of the next Metadata answers gets it, as long as
        // the errors pushed last.
        match code {
            Some(code) => MockCluster::push_errors(self, ApiKey::Metadata, &[code; 1000]),
            None => MockCluster::clear_errors(self, ApiKey::Metadata),
        }
    }
    fn set_consumer_group_timing(&self, heartbeat_ms: i32, session_ms: i32) {
        MockCluster::set_consumer_group_timing(
            self,
            std::time::Duration::from_millis(heartbeat_ms as u64),
            std::time::Duration::from_millis(session_ms as u64),
        )
    }
    fn set_regex_refresh(&self, millis: u64) {
        MockCluster::set_consumer_group_regex_refresh(
            self,
            std::time::Duration::from_millis(millis),
        )
    }
}

/// librdkafka's name for a broker error code.
fn rd_err(code: ErrorCode) -> rdkafka_sys::rd_kafka_resp_err_t {
    use rdkafka_sys::rd_kafka_resp_err_t as E;
    match code {
        ErrorCode::GroupAuthorizationFailed => E::RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED,
        ErrorCode::TopicAuthorizationFailed => E::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
        ErrorCode::FencedMemberEpoch => E::RD_KAFKA_RESP_ERR_FENCED_MEMBER_EPOCH,
        ErrorCode::GroupMaxSizeReached => E::RD_KAFKA_RESP_ERR_GROUP_MAX_SIZE_REACHED,
        ErrorCode::KafkaStorageError => E::RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR,
        ErrorCode::CoordinatorLoadInProgress => E::RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode::CoordinatorNotAvailable => E::RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE,
        ErrorCode::NotCoordinator => E::RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
        ErrorCode::RebalanceInProgress => E::RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS,
        ErrorCode::UnknownMemberId => E::RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID,
        ErrorCode::IllegalGeneration => E::RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION,
        ErrorCode::NotLeaderOrFollower => E::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        ErrorCode::LeaderNotAvailable => E::RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
        ErrorCode::InvalidRecord => E::RD_KAFKA_RESP_ERR_INVALID_RECORD,
        ErrorCode::UnknownProducerId => E::RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID,
        ErrorCode::NotEnoughReplicas => E::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
        ErrorCode::MessageTooLarge => E::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE,
        other => panic!("no librdkafka name for {other} here yet"),
    }
}
