//! KIP-392 on the mock's side: racks, followers serving Fetch, and the
//! preferred read replica a leader names (Kafka's
//! `RackAwareReplicaSelector`).

use super::{fetch, metadata};
use crate::error::ErrorCode;
use crate::mock::group::GroupSettings;
use crate::mock::respond::Received;
use crate::mock::state::State;
use crate::protocol::messages::fetch::{FetchPartition, FetchTopic};
use crate::protocol::messages::metadata::MetadataRequest;
use crate::records::RecordBatchBuilder;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Brokers 1..=4 in racks r1, r2, r2, r4; topic "t" led by 1 with
/// followers 2 and 3, holding 5 records.
fn state() -> State {
    let addrs = (1..=4)
        .map(|id| (id, SocketAddr::from(([127, 0, 0, 1], 9000 + id as u16))))
        .collect();
    let settings = GroupSettings {
        initial_rebalance_delay: Duration::ZERO,
        min_session_timeout: Duration::from_millis(100),
        max_session_timeout: Duration::from_secs(60),
    };
    let mut st = State::new(Instant::now(), addrs, settings);
    for (id, rack) in [(1, "r1"), (2, "r2"), (3, "r2"), (4, "r4")] {
        st.brokers.get_mut(&id).unwrap().rack = Some(rack.into());
    }
    st.create_topic("t", 1, Some(&[1])).unwrap();
    let part = &mut st.topics.get_mut("t").unwrap().partitions[0];
    part.followers = vec![2, 3];
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..5 {
        b.append(i, None, Some(b"v"), &[]).unwrap();
    }
    part.log.append(&b.build().unwrap(), 0).unwrap();
    st
}

fn topics() -> Vec<FetchTopic> {
    vec![FetchTopic {
        topic: "t".into(),
        partitions: vec![FetchPartition {
            partition: 0,
            fetch_offset: 0,
            partition_max_bytes: 1 << 20,
            current_leader_epoch: 0,
            ..Default::default()
        }],
        ..Default::default()
    }]
}

/// (error, preferred read replica, record bytes, answer at once) of a
/// Fetch of t-0 from offset 0 to `broker` at `version` from `rack`.
fn fetch(st: &State, broker: i32, version: i16, rack: &str) -> (ErrorCode, i32, usize, bool) {
    let (resp, bytes, now) = fetch::read(st, broker, (version, rack), 1 << 20, &topics(), None);
    let p = &resp.responses[0].partitions[0];
    (
        ErrorCode::from_code(p.error_code),
        p.preferred_read_replica,
        bytes,
        now,
    )
}

#[test]
fn a_leader_names_the_lowest_follower_in_the_clients_rack_and_sends_no_records() {
    let st = state();
    let (code, replica, bytes, now) = fetch(&st, 1, 11, "r2");
    assert_eq!((code, replica, bytes), (ErrorCode::None, 2, 0));
    assert!(now, "answered at once, not held for max_wait_ms");
}

#[test]
fn no_preferred_replica_without_a_rack_match_or_before_v11() {
    let st = state();
    // No rack, the leader's own rack, a rack with no follower, and a
    // version without the field: the leader serves the records.
    for (version, rack) in [(12, ""), (12, "r1"), (12, "r4"), (10, "r2")] {
        let (code, replica, bytes, _) = fetch(&st, 1, version, rack);
        assert_eq!(
            (code, replica),
            (ErrorCode::None, -1),
            "v{version} {rack:?}"
        );
        assert!(bytes > 0, "v{version} {rack:?}");
    }
}

#[test]
fn a_follower_that_is_down_is_not_named() {
    let mut st = state();
    st.brokers.get_mut(&2).unwrap().up = false;
    assert_eq!(fetch(&st, 1, 12, "r2").1, 3);
    st.brokers.get_mut(&3).unwrap().up = false;
    let (_, replica, bytes, _) = fetch(&st, 1, 12, "r2");
    assert_eq!(replica, -1);
    assert!(bytes > 0);
}

#[test]
fn followers_serve_fetch_and_other_brokers_do_not() {
    let st = state();
    for follower in [2, 3] {
        let (code, replica, bytes, _) = fetch(&st, follower, 12, "r2");
        assert_eq!((code, replica), (ErrorCode::None, -1), "{follower}");
        assert!(
            bytes > 0,
            "a follower sends records, never a replica to go to"
        );
    }
    assert_eq!(fetch(&st, 4, 12, "r2").0, ErrorCode::NotLeaderOrFollower);
}

#[test]
fn metadata_lists_racks_replicas_and_the_isr() {
    let mut st = state();
    st.brokers.get_mut(&3).unwrap().up = false;
    let r = Received {
        broker: 1,
        conn: 1,
        version: 12,
        correlation_id: 0,
        size: 0,
    };
    let resp = metadata::answer(&mut st, &r, &MetadataRequest::default());
    let racks: Vec<(i32, Option<String>)> = resp
        .brokers
        .iter()
        .map(|b| (b.node_id, b.rack.clone()))
        .collect();
    assert_eq!(
        racks,
        [
            (1, Some("r1".into())),
            (2, Some("r2".into())),
            (4, Some("r4".into()))
        ]
    );
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.replica_nodes, [1, 2, 3]);
    assert_eq!(p.isr_nodes, [1, 2]);
    assert_eq!(p.offline_replicas, [3]);
}
