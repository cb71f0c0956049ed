//! The fetch session cache driven request by request: sessions opened,
//! continued, refused, closed and evicted as Kafka's `FetchManager` does.

use super::*;
use crate::protocol::messages::fetch::{FetchableTopicResponse, ForgottenTopic, PartitionData};
use bytes::Bytes;

fn part(partition: i32, offset: i64) -> FetchPartition {
    FetchPartition {
        partition,
        fetch_offset: offset,
        partition_max_bytes: 1024,
        ..FetchPartition::default()
    }
}

fn request(id: i32, epoch: i32, parts: &[(i32, i64)], forget: &[i32]) -> FetchRequest {
    FetchRequest {
        session_id: id,
        session_epoch: epoch,
        topics: if parts.is_empty() {
            Vec::new()
        } else {
            vec![FetchTopic {
                topic: "t".into(),
                partitions: parts.iter().map(|&(p, o)| part(p, o)).collect(),
                ..FetchTopic::default()
            }]
        },
        forgotten_topics_data: if forget.is_empty() {
            Vec::new()
        } else {
            vec![ForgottenTopic {
                topic: "t".into(),
                partitions: forget.to_vec(),
                ..ForgottenTopic::default()
            }]
        },
        ..FetchRequest::default()
    }
}

/// An answer for partitions `(partition, high watermark, records?)`.
fn response(parts: &[(i32, i64, bool)]) -> FetchResponse {
    FetchResponse {
        responses: vec![FetchableTopicResponse {
            topic: "t".into(),
            partitions: parts
                .iter()
                .map(|&(p, hw, records)| PartitionData {
                    partition_index: p,
                    high_watermark: hw,
                    log_start_offset: 0,
                    records: Some(if records {
                        Bytes::from_static(b"batch")
                    } else {
                        Bytes::new()
                    }),
                    ..PartitionData::default()
                })
                .collect(),
            ..FetchableTopicResponse::default()
        }],
        ..FetchResponse::default()
    }
}

fn answered(resp: &FetchResponse) -> Vec<i32> {
    resp.responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.partition_index))
        .collect()
}

fn session_partitions(s: &FetchSessions, id: i32) -> Vec<(i32, i64)> {
    s.session_topics(id)
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.fetch_offset)))
        .collect()
}

/// A full Fetch makes a session at epoch 1; returns its id.
fn open(s: &mut FetchSessions, now: Instant, parts: &[(i32, i64)]) -> i32 {
    let req = request(0, 0, parts, &[]);
    assert_eq!(s.new_context(now, 12, &req), Context::Full);
    let hw: Vec<_> = parts.iter().map(|&(p, _)| (p, 10, false)).collect();
    let id = s.create(now, 12, &req, &response(&hw));
    assert!(id > 0);
    id
}

#[test]
fn a_full_fetch_opens_a_session_that_incremental_fetches_continue() {
    let now = Instant::now();
    let mut s = FetchSessions::new(1);
    let id = open(&mut s, now, &[(0, 10), (1, 10), (2, 10)]);
    assert_eq!(s.snapshot(1)[0].epoch, 1);
    // Epoch 1: partition 1 moves on, 2 is forgotten, 3 is added.
    let req = request(id, 1, &[(1, 12), (3, 0)], &[2]);
    assert_eq!(
        s.new_context(now, 12, &req),
        Context::Incremental { id, epoch: 2 }
    );
    assert_eq!(session_partitions(&s, id), [(0, 10), (1, 12), (3, 0)]);
    // Only what changed is answered: 3 is new (its high watermark was
    // never told), 1 has records; 0 has nothing new.
    let mut resp = response(&[(0, 10, false), (1, 14, true), (3, 5, false)]);
    s.finish_incremental(id, 2, &mut resp);
    assert_eq!(resp.session_id, id);
    assert_eq!(answered(&resp), [1, 3]);
    // 1 returned records: it goes to the back of the session.
    assert_eq!(session_partitions(&s, id), [(0, 10), (3, 0), (1, 12)]);
    // Nothing changed at all: an empty answer.
    let req = request(id, 2, &[], &[]);
    assert_eq!(
        s.new_context(now, 12, &req),
        Context::Incremental { id, epoch: 3 }
    );
    let mut resp = response(&[(0, 10, false), (3, 5, false), (1, 14, false)]);
    s.finish_incremental(id, 3, &mut resp);
    assert!(resp.responses.is_empty());
    assert_eq!(resp.session_id, id);
}

#[test]
fn errors_are_answered_and_sent_again_once_gone() {
    let now = Instant::now();
    let mut s = FetchSessions::new(1);
    let id = open(&mut s, now, &[(0, 10)]);
    s.new_context(now, 12, &request(id, 1, &[], &[]));
    let mut resp = response(&[(0, -1, false)]);
    resp.responses[0].partitions[0].error_code = ErrorCode::NotLeaderOrFollower.code();
    s.finish_incremental(id, 2, &mut resp);
    assert_eq!(answered(&resp), [0]);
    // The same high watermark as before the error is news again.
    s.new_context(now, 12, &request(id, 2, &[], &[]));
    let mut resp = response(&[(0, 10, false)]);
    s.finish_incremental(id, 3, &mut resp);
    assert_eq!(answered(&resp), [0]);
}

#[test]
fn wrong_epochs_and_unknown_ids_are_refused() {
    let now = Instant::now();
    let mut s = FetchSessions::new(1);
    let id = open(&mut s, now, &[(0, 10)]);
    assert_eq!(
        s.new_context(now, 12, &request(id, 2, &[], &[])),
        Context::Error(ErrorCode::InvalidFetchSessionEpoch)
    );
    assert_eq!(
        s.new_context(now, 12, &request(id + 1, 1, &[], &[])),
        Context::Error(ErrorCode::FetchSessionIdNotFound)
    );
    // The session survives a wrong epoch: the right one still works.
    assert_eq!(
        s.new_context(now, 12, &request(id, 1, &[], &[])),
        Context::Incremental { id, epoch: 2 }
    );
    // A session made with names cannot go on with topic ids (v13+).
    assert_eq!(
        s.new_context(now, 13, &request(id, 2, &[], &[])),
        Context::Error(ErrorCode::FetchSessionTopicIdError)
    );
    // An answer for an epoch the session left (a duplicate request).
    let mut resp = response(&[(0, 10, true)]);
    s.finish_incremental(id, 1, &mut resp);
    assert_eq!(resp.error_code, ErrorCode::InvalidFetchSessionEpoch.code());
    assert_eq!(resp.session_id, 0);
}

#[test]
fn final_epoch_is_sessionless_and_full_fetches_close_the_named_session() {
    let now = Instant::now();
    let mut s = FetchSessions::new(1);
    assert_eq!(
        s.new_context(now, 12, &request(0, -1, &[(0, 0)], &[])),
        Context::Sessionless
    );
    assert_eq!(
        s.new_context(now, 6, &request(0, 0, &[(0, 0)], &[])),
        Context::Sessionless
    );
    let id = open(&mut s, now, &[(0, 10)]);
    assert_eq!(
        s.new_context(now, 12, &request(id, -1, &[(0, 0)], &[])),
        Context::Sessionless
    );
    assert!(s.snapshot(1).is_empty(), "closed by the final epoch");
    let id = open(&mut s, now, &[(0, 10)]);
    assert_eq!(
        s.new_context(now, 12, &request(id, 0, &[(0, 0)], &[])),
        Context::Full
    );
    assert!(s.snapshot(1).is_empty(), "closed by a new full Fetch");
}

#[test]
fn a_session_left_empty_is_closed() {
    let now = Instant::now();
    let mut s = FetchSessions::new(1);
    let id = open(&mut s, now, &[(0, 10), (1, 10)]);
    assert_eq!(
        s.new_context(now, 12, &request(id, 1, &[], &[0, 1])),
        Context::Sessionless
    );
    assert!(s.snapshot(1).is_empty());
}

#[test]
fn the_cache_is_bounded_and_evicts_as_kafka_does() {
    let t0 = Instant::now();
    let mut s = FetchSessions::new(1);
    s.slots = 2;
    s.eviction = Duration::from_secs(10);
    let small = open(&mut s, t0, &[(0, 0)]);
    let big = open(&mut s, t0, &[(0, 0), (1, 0), (2, 0)]);
    // Full, nothing stale, nothing old enough: no session (id 0).
    let req = request(0, 0, &[(0, 0), (1, 0), (2, 0), (3, 0)], &[]);
    assert_eq!(s.create(t0, 12, &req, &response(&[])), 0);
    // Old enough: a larger session evicts the smallest one...
    let t1 = t0 + Duration::from_secs(11);
    s.new_context(t1, 12, &request(small, 1, &[], &[]));
    s.new_context(t1, 12, &request(big, 1, &[], &[]));
    let one = request(0, 0, &[(5, 0)], &[]);
    assert_eq!(s.create(t1, 12, &one, &response(&[])), 0, "not larger");
    let two = request(0, 0, &[(5, 0), (6, 0)], &[]);
    let new = s.create(t1, 12, &two, &response(&[]));
    assert!(new > 0);
    let ids: Vec<i32> = s.snapshot(1).iter().map(|x| x.id).collect();
    assert!(ids.contains(&big) && ids.contains(&new) && !ids.contains(&small));
    // ...and any session evicts one unused for longer than the eviction
    // time (the least recently used).
    let t2 = t1 + Duration::from_secs(5);
    s.new_context(t2, 12, &request(new, 1, &[], &[]));
    let t3 = t1 + Duration::from_secs(11);
    assert!(s.create(t3, 12, &one, &response(&[])) > 0);
    let ids: Vec<i32> = s.snapshot(1).iter().map(|x| x.id).collect();
    assert!(!ids.contains(&big) && ids.contains(&new));
    // No slots: no sessions at all.
    s.slots = 0;
    s.clear();
    assert_eq!(s.create(t3, 12, &one, &response(&[])), 0);
}

#[test]
fn topic_ids_key_the_session_from_v13() {
    let now = Instant::now();
    let mut s = FetchSessions::new(1);
    let mut req = request(0, 0, &[(0, 10)], &[]);
    req.topics[0].topic = String::new();
    req.topics[0].topic_id = [7; 16];
    assert_eq!(s.new_context(now, 13, &req), Context::Full);
    let id = s.create(now, 13, &req, &response(&[]));
    let mut next = request(id, 1, &[(0, 11)], &[]);
    next.topics[0].topic = String::new();
    next.topics[0].topic_id = [7; 16];
    s.new_context(now, 13, &next);
    let topics = s.session_topics(id);
    assert_eq!(topics.len(), 1);
    assert_eq!(topics[0].topic_id, [7; 16]);
    assert_eq!(
        topics[0].partitions[0].fetch_offset, 11,
        "updated, not added"
    );
}

#[test]
fn session_ids_are_positive_and_unique() {
    let now = Instant::now();
    let mut s = FetchSessions::new(3);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        let id = open(&mut s, now, &[(0, 0)]);
        assert!(id > 0 && seen.insert(id));
    }
    assert_eq!(next_epoch(i32::MAX), 1);
}
