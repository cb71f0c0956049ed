//! librdkafka's mock cluster through raw `rdkafka-sys` calls, for what the
//! `rdkafka::mocking` wrapper does not expose: request tracking, coordinator
//! placement, broker down/up.

use rdkafka_sys as sys;
use std::ffi::{CStr, CString};

/// A mock cluster of `n` brokers (ids 1..=n) on loopback, in this process.
pub struct RawMock {
    rk: *mut sys::rd_kafka_t,
    mc: *mut sys::rd_kafka_mock_cluster_t,
}

// The mock cluster runs its own thread; its handle may be used from any
// thread (librdkafka serialises calls on its op queue).
unsafe impl Send for RawMock {}
// For the same reason, shared references may be used from several threads
// at once (each call takes the cluster's lock or posts to its queue).
unsafe impl Sync for RawMock {}

impl RawMock {
    pub fn new(brokers: i32) -> Self {
        unsafe {
            let conf = sys::rd_kafka_conf_new();
            let mut errstr = [0 as std::os::raw::c_char; 512];
            // LAZYKAFKA_TEST_LOG=debug: the mock's own log (group states,
            // elections, session expiries) on stderr.
            if std::env::var("LAZYKAFKA_TEST_LOG").is_ok_and(|v| v == "debug") {
                let (k, v) = (
                    CString::new("debug").unwrap(),
                    CString::new("mock").unwrap(),
                );
                let set = sys::rd_kafka_conf_set(
                    conf,
                    k.as_ptr(),
                    v.as_ptr(),
                    errstr.as_mut_ptr(),
                    errstr.len(),
                );
                assert_eq!(set, sys::rd_kafka_conf_res_t::RD_KAFKA_CONF_OK);
            }
            // A producer handle with no bootstrap servers connects nowhere;
            // it only hosts the mock cluster.
            let rk = sys::rd_kafka_new(
                sys::rd_kafka_type_t::RD_KAFKA_PRODUCER,
                conf,
                errstr.as_mut_ptr(),
                errstr.len(),
            );
            assert!(
                !rk.is_null(),
                "rd_kafka_new: {}",
                CStr::from_ptr(errstr.as_ptr()).to_string_lossy()
            );
            let mc = sys::rd_kafka_mock_cluster_new(rk, brokers);
            assert!(!mc.is_null(), "rd_kafka_mock_cluster_new failed");
            // The first join otherwise waits ~3 s.
            sys::rd_kafka_mock_group_initial_rebalance_delay_ms(mc, 0);
            RawMock { rk, mc }
        }
    }

    /// `host:port` of each broker, in broker-id order.
    pub fn bootstraps(&self) -> Vec<String> {
        let s = unsafe { CStr::from_ptr(sys::rd_kafka_mock_cluster_bootstraps(self.mc)) };
        s.to_string_lossy().split(',').map(str::to_owned).collect()
    }

    /// The ports of the brokers, in broker-id order.
    pub fn ports(&self) -> Vec<u16> {
        self.bootstraps()
            .iter()
            .map(|a| a.rsplit(':').next().unwrap().parse().unwrap())
            .collect()
    }

    pub fn create_topic(&self, topic: &str, partitions: i32) {
        let t = CString::new(topic).unwrap();
        let err = unsafe { sys::rd_kafka_mock_topic_create(self.mc, t.as_ptr(), partitions, 1) };
        assert_eq!(err, sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
    }

    pub fn set_leader(&self, topic: &str, partition: i32, broker: i32) {
        let t = CString::new(topic).unwrap();
        let err = unsafe {
            sys::rd_kafka_mock_partition_set_leader(self.mc, t.as_ptr(), partition, broker)
        };
        assert_eq!(err, sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
    }

    /// Makes `broker` the partition's follower: the leader answers a Fetch
    /// (v11+) with it as the preferred read replica (KIP-392), whatever
    /// the client's rack, and sends no records then; the follower serves
    /// Fetch. -1 undoes it.
    pub fn set_follower(&self, topic: &str, partition: i32, broker: i32) {
        let t = CString::new(topic).unwrap();
        let err = unsafe {
            sys::rd_kafka_mock_partition_set_follower(self.mc, t.as_ptr(), partition, broker)
        };
        assert_eq!(err, sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
    }

    /// The follower's log start and high watermark (-1: the leader's): a
    /// follower behind the leader.
    pub fn set_follower_wmarks(&self, topic: &str, partition: i32, lo: i64, hi: i64) {
        let t = CString::new(topic).unwrap();
        let err = unsafe {
            sys::rd_kafka_mock_partition_set_follower_wmarks(self.mc, t.as_ptr(), partition, lo, hi)
        };
        assert_eq!(err, sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
    }

    /// The rack Metadata reports for `broker`.
    pub fn set_rack(&self, broker: i32, rack: &str) {
        let r = CString::new(rack).unwrap();
        let err = unsafe { sys::rd_kafka_mock_broker_set_rack(self.mc, broker, r.as_ptr()) };
        assert_eq!(err, sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
    }

    pub fn set_group_coordinator(&self, group: &str, broker: i32) {
        let kind = CString::new("group").unwrap();
        let key = CString::new(group).unwrap();
        let err = unsafe {
            sys::rd_kafka_mock_coordinator_set(self.mc, kind.as_ptr(), key.as_ptr(), broker)
        };
        assert_eq!(err, sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
    }

    /// Delays every response of `broker` by `rtt_ms`.
    pub fn set_rtt(&self, broker: i32, rtt_ms: i32) {
        unsafe { sys::rd_kafka_mock_broker_set_rtt(self.mc, broker, rtt_ms) };
    }

    /// Advertises `broker` as `host:port` in Metadata and FindCoordinator
    /// (it still listens where it did): for a TLS front such as stunnel.
    pub fn advertise(&self, broker: i32, host: &str, port: u16) {
        let host = CString::new(host).unwrap();
        unsafe {
            sys::rd_kafka_mock_broker_set_host_port(self.mc, broker, host.as_ptr(), i32::from(port))
        };
    }

    pub fn broker_down(&self, broker: i32) {
        unsafe { sys::rd_kafka_mock_broker_set_down(self.mc, broker) };
    }

    pub fn broker_up(&self, broker: i32) {
        unsafe { sys::rd_kafka_mock_broker_set_up(self.mc, broker) };
    }

    /// Limits the versions the mock advertises for `api_key`.
    pub fn set_apiversion(&self, api_key: i16, min: i16, max: i16) {
        let err = unsafe { sys::rd_kafka_mock_set_apiversion(self.mc, api_key, min, max) };
        assert_eq!(err, sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
    }

    /// The mock advertises group API versions its handlers cannot read (all
    /// beyond what librdkafka's own client sends): JoinGroup v6 and SyncGroup
    /// v4 (flexible) have their array counts read as int32, LeaveGroup v3+ is
    /// read as v0-2. Tests that use groups cap those versions.
    pub fn cap_group_versions(&self) {
        self.set_apiversion(11, 0, 5); // JoinGroup
        self.set_apiversion(14, 0, 3); // SyncGroup
        self.set_apiversion(13, 0, 2); // LeaveGroup
    }

    pub fn start_tracking(&self) {
        unsafe { sys::rd_kafka_mock_start_request_tracking(self.mc) };
    }

    /// Every request received since tracking started: (broker id, API key,
    /// when, in librdkafka's monotonic microseconds).
    pub fn requests_timed(&self) -> Vec<(i32, i16, i64)> {
        unsafe {
            let mut n = 0usize;
            let reqs = sys::rd_kafka_mock_get_requests(self.mc, &mut n);
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let r = *reqs.add(i);
                out.push((
                    sys::rd_kafka_mock_request_id(r),
                    sys::rd_kafka_mock_request_api_key(r),
                    sys::rd_kafka_mock_request_timestamp(r),
                ));
            }
            if !reqs.is_null() {
                sys::rd_kafka_mock_request_destroy_array(reqs, n);
            }
            out
        }
    }

    /// Every request received since tracking started: (broker id, API key).
    pub fn requests(&self) -> Vec<(i32, i16)> {
        self.requests_timed()
            .into_iter()
            .map(|(broker, api, _)| (broker, api))
            .collect()
    }
}

impl RawMock {
    /// The next `errors.len()` requests of `api_key` (to any broker) are
    /// answered with these errors, in order.
    /// Metadata answers `err` for `topic` until it is set back to
    /// `RD_KAFKA_RESP_ERR_NO_ERROR`.
    pub fn set_topic_error(&self, topic: &str, err: sys::rd_kafka_resp_err_t) {
        let t = CString::new(topic).unwrap();
        unsafe { sys::rd_kafka_mock_topic_set_error(self.mc, t.as_ptr(), err) };
    }

    pub fn push_request_errors(&self, api_key: i16, errors: &[sys::rd_kafka_resp_err_t]) {
        unsafe {
            sys::rd_kafka_mock_push_request_errors_array(
                self.mc,
                api_key,
                errors.len(),
                errors.as_ptr(),
            )
        };
    }

    /// The heartbeat interval and session timeout the consumer groups of
    /// KIP-848 get (librdkafka's mock defaults: 3 s and 45 s).
    pub fn set_consumer_group_timing(&self, heartbeat_ms: i32, session_ms: i32) {
        unsafe {
            sys::rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(self.mc, heartbeat_ms);
            sys::rd_kafka_mock_set_group_consumer_session_timeout_ms(self.mc, session_ms);
        }
    }

    /// Forgets the requests tracked so far (tracking goes on).
    pub fn clear_requests(&self) {
        unsafe { sys::rd_kafka_mock_clear_requests(self.mc) };
    }
}

impl Drop for RawMock {
    fn drop(&mut self) {
        unsafe {
            sys::rd_kafka_mock_cluster_destroy(self.mc);
            sys::rd_kafka_destroy(self.rk);
        }
    }
}
