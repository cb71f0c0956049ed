//! The ApiVersions exchange against two independently written peers: the
//! tansu broker and librdkafka's mock cluster. Their ranges differ, so the
//! negotiated tables must differ in known ways.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use lazykafka::protocol::{ApiKey, ApiVersionTable, VersionRange};
use lazykafka::runtime::{BrokerConnection, ConnectOptions};
use rdkafka::mocking::MockCluster;

fn chosen(table: &ApiVersionTable, api: ApiKey) -> Option<i16> {
    table.version(api).ok()
}

#[test]
fn tansu_versions_are_negotiated() {
    crate::common::block_on(async {
        let Some(addr) = common::tansu_addr("tansu_versions_are_negotiated") else {
            return;
        };
        let conn = BrokerConnection::connect(&addr, ConnectOptions::default())
            .await
            .expect("connect to tansu");
        let v = conn.versions();
        // tansu 0.6.0 speaks ApiVersions up to v4, so no fallback is needed.
        assert_eq!(chosen(v, ApiKey::ApiVersions), Some(4));
        assert_eq!(chosen(v, ApiKey::Fetch), Some(17));
        assert_eq!(chosen(v, ApiKey::Metadata), Some(12));
        assert_eq!(chosen(v, ApiKey::FindCoordinator), Some(6));
        assert_eq!(chosen(v, ApiKey::JoinGroup), Some(9));
        assert_eq!(chosen(v, ApiKey::SyncGroup), Some(5));
        assert_eq!(chosen(v, ApiKey::OffsetFetch), Some(9));
        assert_eq!(chosen(v, ApiKey::OffsetCommit), Some(9));
        assert_eq!(chosen(v, ApiKey::Heartbeat), Some(4));
        assert_eq!(chosen(v, ApiKey::LeaveGroup), Some(5));
        assert_eq!(chosen(v, ApiKey::CreateTopics), Some(7));
        // The broker lists ListOffsets up to 9, below this client's ceiling of 10.
        assert_eq!(
            v.broker_range(ApiKey::ListOffsets),
            Some(VersionRange::new(0, 9))
        );
        assert_eq!(chosen(v, ApiKey::ListOffsets), Some(9));
        // tansu does not implement these; the table says so with the API's name.
        let err = v.version(ApiKey::OffsetForLeaderEpoch).unwrap_err();
        assert!(err.to_string().contains("OffsetForLeaderEpoch"), "{err}");
        assert_eq!(chosen(v, ApiKey::ConsumerGroupHeartbeat), None);
        conn.close().await;
    })
}

#[test]
fn librdkafka_mock_versions_are_negotiated_on_every_broker() {
    crate::common::block_on(async {
        let cluster = MockCluster::new(3).expect("librdkafka mock cluster");
        let servers = cluster.bootstrap_servers();
        let addrs: Vec<&str> = servers.split(',').collect();
        assert_eq!(addrs.len(), 3, "{servers}");
        for addr in addrs {
            let conn = BrokerConnection::connect(addr, ConnectOptions::default())
                .await
                .unwrap_or_else(|e| panic!("connect to mock broker {addr}: {e}"));
            let v = conn.versions();
            // The mock lists ApiVersions 0..=2 only. Our v4 request is refused
            // with UNSUPPORTED_VERSION, the exchange retries, and the range
            // then listed gives v2.
            assert_eq!(
                v.broker_range(ApiKey::ApiVersions),
                Some(VersionRange::new(0, 2))
            );
            assert_eq!(chosen(v, ApiKey::ApiVersions), Some(2));
            // Lower ceilings than tansu's (rdkafka-sys 4.10, librdkafka 2.12.1).
            assert_eq!(chosen(v, ApiKey::Fetch), Some(16));
            assert_eq!(chosen(v, ApiKey::ListOffsets), Some(7));
            assert_eq!(chosen(v, ApiKey::Metadata), Some(12));
            assert_eq!(chosen(v, ApiKey::FindCoordinator), Some(3));
            assert_eq!(chosen(v, ApiKey::JoinGroup), Some(6));
            assert_eq!(chosen(v, ApiKey::SyncGroup), Some(4));
            assert_eq!(chosen(v, ApiKey::LeaveGroup), Some(4));
            assert_eq!(chosen(v, ApiKey::OffsetFetch), Some(6));
            assert_eq!(chosen(v, ApiKey::OffsetCommit), Some(9));
            // The mock lists Heartbeat up to 5, above this client's ceiling of 4.
            assert_eq!(chosen(v, ApiKey::Heartbeat), Some(4));
            // Unlike tansu, the mock speaks OffsetForLeaderEpoch and KIP-848 ...
            assert_eq!(chosen(v, ApiKey::OffsetForLeaderEpoch), Some(2));
            assert_eq!(chosen(v, ApiKey::ConsumerGroupHeartbeat), Some(1));
            // ... but not CreateTopics.
            let err = v.version(ApiKey::CreateTopics).unwrap_err();
            assert!(err.to_string().contains("CreateTopics"), "{err}");
            conn.close().await;
        }
    })
}
