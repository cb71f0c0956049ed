//! The classic coordinator driven request by request with a manual
//! clock: rebalances, timers, static members, commits and offset fetches,
//! each answer checked to encode at its version.

use super::*;
use crate::error::ErrorCode;
use crate::protocol::messages::heartbeat::HeartbeatRequest;
use crate::protocol::messages::join_group::{JoinGroupRequest, JoinGroupRequestProtocol};
use crate::protocol::messages::leave_group::{LeaveGroupRequest, MemberIdentity};
use crate::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    OffsetCommitResponse,
};
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use crate::protocol::messages::sync_group::{SyncGroupRequest, SyncGroupRequestAssignment};
use crate::protocol::{Message, Writer};
use bytes::Bytes;

const GROUP: &str = "g";

/// A manual clock: `at(ms)` is `ms` after a fixed base.
struct Clock(Instant);

impl Clock {
    fn new() -> Self {
        Clock(Instant::now())
    }
    fn at(&self, ms: u64) -> Instant {
        self.0 + Duration::from_millis(ms)
    }
}

fn groups(initial_delay_ms: u64) -> Groups {
    Groups::new(GroupSettings {
        initial_rebalance_delay: Duration::from_millis(initial_delay_ms),
        min_session_timeout: Duration::from_millis(1_000),
        max_session_timeout: Duration::from_millis(60_000),
    })
}

/// Panics unless `m` encodes at `version`.
fn enc<M: Message>(m: &M, version: i16) {
    let mut w = Writer::new();
    m.encode(&mut w, version)
        .unwrap_or_else(|e| panic!("not encodable at v{version}: {e:?}"));
}

fn code(e: ErrorCode) -> i16 {
    e.code()
}

fn protocols(list: &[(&str, &'static [u8])]) -> Vec<JoinGroupRequestProtocol> {
    list.iter()
        .map(|(n, m)| JoinGroupRequestProtocol {
            name: (*n).to_owned(),
            metadata: Bytes::from_static(m),
            ..JoinGroupRequestProtocol::default()
        })
        .collect()
}

fn join_req(
    member_id: &str,
    rebalance_ms: i32,
    protos: &[(&str, &'static [u8])],
) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: GROUP.to_owned(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: rebalance_ms,
        member_id: member_id.to_owned(),
        protocol_type: "consumer".to_owned(),
        protocols: protocols(protos),
        ..JoinGroupRequest::default()
    }
}

const RANGE: &[(&str, &[u8])] = &[("range", b"sub")];

fn done<R>(step: Step<R>) -> R {
    match step {
        Step::Done(r) => r,
        Step::Wait(t) => panic!("expected an answer, got a wait on {t:?}"),
    }
}

fn wait<R: std::fmt::Debug>(step: Step<R>) -> Ticket {
    match step {
        Step::Wait(t) => t,
        Step::Done(r) => panic!("expected a wait, got {r:?}"),
    }
}

/// Joins as a new member at `version`, going through MEMBER_ID_REQUIRED
/// from v4; returns the step of the real join.
fn join_new(
    gs: &mut Groups,
    now: Instant,
    version: i16,
    client: &str,
    rebalance_ms: i32,
    protos: &[(&str, &'static [u8])],
) -> Step<JoinGroupResponse> {
    let mut req = join_req("", rebalance_ms, protos);
    if version >= 4 {
        let r = done(gs.join(now, version, client, &req));
        enc(&r, version);
        assert_eq!(r.error_code, code(ErrorCode::MemberIdRequired));
        req.member_id = r.member_id;
    }
    gs.join(now, version, client, &req)
}

fn sync_req(
    member_id: &str,
    generation: i32,
    assignments: &[(&str, &'static [u8])],
) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: GROUP.to_owned(),
        generation_id: generation,
        member_id: member_id.to_owned(),
        assignments: assignments
            .iter()
            .map(|(m, a)| SyncGroupRequestAssignment {
                member_id: (*m).to_owned(),
                assignment: Bytes::from_static(a),
                ..SyncGroupRequestAssignment::default()
            })
            .collect(),
        ..SyncGroupRequest::default()
    }
}

fn hb(gs: &mut Groups, now: Instant, version: i16, member_id: &str, generation: i32) -> i16 {
    let r = gs.heartbeat(
        now,
        version,
        &HeartbeatRequest {
            group_id: GROUP.to_owned(),
            generation_id: generation,
            member_id: member_id.to_owned(),
            ..HeartbeatRequest::default()
        },
    );
    enc(&r, version);
    r.error_code
}

/// A group with one member at generation 1, Stable; returns its id.
fn one_stable(gs: &mut Groups, now: Instant, version: i16) -> String {
    let j = done(join_new(gs, now, version, "c1", 30_000, RANGE));
    let s = done(gs.sync(
        now,
        3,
        &sync_req(&j.member_id, j.generation_id, &[(&j.member_id, b"a1")]),
    ));
    assert_eq!(s.error_code, 0);
    j.member_id
}

/// Two members at generation 2, Stable; returns (leader, follower).
fn two_stable(gs: &mut Groups, clock: &Clock) -> (String, String) {
    let a = one_stable(gs, clock.at(0), 5);
    let tb = wait(join_new(gs, clock.at(10), 5, "c2", 20_000, RANGE));
    let ja = done(gs.join(clock.at(20), 5, "c1", &join_req(&a, 30_000, RANGE)));
    let jb = gs.poll_join(clock.at(20), &tb).expect("b answered");
    let ts = wait(gs.sync(clock.at(30), 5, &sync_req(&jb.member_id, 2, &[])));
    done(gs.sync(
        clock.at(30),
        5,
        &sync_req(&a, 2, &[(&a, b"a2"), (&jb.member_id, b"b2")]),
    ));
    gs.poll_sync(clock.at(30), &ts).expect("b synced");
    assert_eq!(ja.leader, a);
    (a, jb.member_id)
}

#[test]
fn single_member_joins_syncs_and_heartbeats() {
    for version in [2i16, 3, 4, 5, 6, 7, 8, 9] {
        let clock = Clock::new();
        let mut gs = groups(0);
        let j = done(join_new(
            &mut gs,
            clock.at(0),
            version,
            "client-1",
            30_000,
            RANGE,
        ));
        enc(&j, version);
        assert_eq!(j.error_code, 0, "v{version}");
        assert_eq!(j.generation_id, 1);
        assert!(j.member_id.starts_with("client-1-"));
        assert_eq!(j.leader, j.member_id);
        assert_eq!(j.protocol_name.as_deref(), Some("range"));
        assert_eq!(
            j.protocol_type.as_deref(),
            if version >= 7 { Some("consumer") } else { None }
        );
        assert_eq!(j.members.len(), 1);
        assert_eq!(j.members[0].metadata, Bytes::from_static(b"sub"));
        assert_eq!(
            gs.snapshot(GROUP).unwrap().state,
            GroupState::CompletingRebalance
        );

        let sv = version.min(5);
        let s = done(gs.sync(
            clock.at(1),
            sv,
            &sync_req(&j.member_id, 1, &[(&j.member_id, b"assigned")]),
        ));
        enc(&s, sv);
        assert_eq!(s.error_code, 0);
        assert_eq!(s.assignment, Bytes::from_static(b"assigned"));
        let snap = gs.snapshot(GROUP).unwrap();
        assert_eq!(snap.state, GroupState::Stable);
        assert_eq!(snap.protocol.as_deref(), Some("range"));
        assert_eq!(snap.members[0].assignment, Bytes::from_static(b"assigned"));
        assert_eq!(snap.members[0].client_id, "client-1");

        let hv = version.min(4);
        assert_eq!(hb(&mut gs, clock.at(2), hv, &j.member_id, 1), 0);
        assert_eq!(
            hb(&mut gs, clock.at(2), hv, &j.member_id, 7),
            code(ErrorCode::IllegalGeneration)
        );
        assert_eq!(
            hb(&mut gs, clock.at(2), hv, "who", 1),
            code(ErrorCode::UnknownMemberId)
        );
        // A sync in Stable returns the stored assignment.
        let again = done(gs.sync(clock.at(3), sv, &sync_req(&j.member_id, 1, &[])));
        assert_eq!(again.assignment, Bytes::from_static(b"assigned"));
    }
}

#[test]
fn member_id_required_from_v4_only() {
    let clock = Clock::new();
    for version in [2i16, 3] {
        let mut gs = groups(0);
        let j = done(gs.join(clock.at(0), version, "c", &join_req("", 30_000, RANGE)));
        enc(&j, version);
        assert_eq!(j.error_code, 0);
        assert!(j.member_id.starts_with("c-"));
    }
    for version in [4i16, 6, 9] {
        let mut gs = groups(0);
        let r = done(gs.join(clock.at(0), version, "c", &join_req("", 30_000, RANGE)));
        enc(&r, version);
        assert_eq!(r.error_code, code(ErrorCode::MemberIdRequired));
        assert!(r.member_id.starts_with("c-") && r.member_id.len() > 10);
        assert!(gs.snapshot(GROUP).unwrap().members.is_empty());
        // The id is pending; unused, it expires with the session timeout.
        assert_eq!(gs.next_deadline(), Some(clock.at(10_000)));
        let j = done(gs.join(
            clock.at(1),
            version,
            "c",
            &join_req(&r.member_id, 30_000, RANGE),
        ));
        assert_eq!(j.error_code, 0);
        assert_eq!(j.member_id, r.member_id);
    }
    // Two MEMBER_ID_REQUIRED answers never share an id.
    let mut gs = groups(0);
    let a = done(gs.join(clock.at(0), 4, "c", &join_req("", 30_000, RANGE)));
    let b = done(gs.join(clock.at(0), 4, "c", &join_req("", 30_000, RANGE)));
    assert_ne!(a.member_id, b.member_id);
    // An unused pending id expires.
    gs.tick(clock.at(10_000));
    let late = done(gs.join(
        clock.at(10_001),
        4,
        "c",
        &join_req(&a.member_id, 30_000, RANGE),
    ));
    assert_eq!(late.error_code, code(ErrorCode::UnknownMemberId));
}

#[test]
fn join_errors() {
    let clock = Clock::new();
    let mut gs = groups(0);
    let mut req = join_req("", 30_000, RANGE);
    req.session_timeout_ms = 500;
    let r = done(gs.join(clock.at(0), 7, "c", &req));
    enc(&r, 7);
    assert_eq!(r.error_code, code(ErrorCode::InvalidSessionTimeout));
    req.session_timeout_ms = 60_001;
    assert_eq!(
        done(gs.join(clock.at(0), 5, "c", &req)).error_code,
        code(ErrorCode::InvalidSessionTimeout)
    );
    let r = done(gs.join(clock.at(0), 5, "c", &join_req("nobody", 30_000, RANGE)));
    enc(&r, 5);
    assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
    let mut empty = join_req("", 30_000, &[]);
    empty.protocols.clear();
    assert_eq!(
        done(gs.join(clock.at(0), 3, "c", &empty)).error_code,
        code(ErrorCode::InconsistentGroupProtocol)
    );
}

#[test]
fn second_member_triggers_a_rebalance() {
    for version in [3i16, 5, 9] {
        let clock = Clock::new();
        let mut gs = groups(0);
        let a = one_stable(&mut gs, clock.at(0), version);
        let tb = wait(join_new(
            &mut gs,
            clock.at(100),
            version,
            "c2",
            20_000,
            RANGE,
        ));
        assert_eq!(
            gs.snapshot(GROUP).unwrap().state,
            GroupState::PreparingRebalance
        );
        assert_eq!(gs.poll_join(clock.at(100), &tb), None);
        let hv = version.min(4);
        assert_eq!(
            hb(&mut gs, clock.at(200), hv, &a, 1),
            code(ErrorCode::RebalanceInProgress)
        );
        // The first member rejoins: everyone has joined.
        let ja = done(gs.join(clock.at(300), version, "c1", &join_req(&a, 30_000, RANGE)));
        let jb = gs.poll_join(clock.at(300), &tb).expect("b answered");
        enc(&ja, version);
        enc(&jb, version);
        assert_eq!((ja.generation_id, jb.generation_id), (2, 2));
        assert_eq!(ja.leader, a, "the old leader stays");
        assert_eq!(jb.leader, a);
        assert_eq!(ja.members.len(), 2);
        assert!(jb.members.is_empty());
        assert_eq!(
            ja.members
                .iter()
                .filter(|m| m.member_id == jb.member_id)
                .count(),
            1
        );

        let sv = version.min(5);
        let ts = wait(gs.sync(clock.at(400), sv, &sync_req(&jb.member_id, 2, &[])));
        assert_eq!(gs.poll_sync(clock.at(400), &ts), None);
        let sa = done(gs.sync(
            clock.at(500),
            sv,
            &sync_req(&a, 2, &[(&a, b"for-a"), (&jb.member_id, b"for-b")]),
        ));
        enc(&sa, sv);
        assert_eq!(sa.assignment, Bytes::from_static(b"for-a"));
        let sb = gs.poll_sync(clock.at(500), &ts).expect("b synced");
        enc(&sb, sv);
        assert_eq!(sb.error_code, 0);
        assert_eq!(sb.assignment, Bytes::from_static(b"for-b"));
        assert_eq!(hb(&mut gs, clock.at(600), hv, &jb.member_id, 2), 0);
        assert_eq!(gs.snapshot(GROUP).unwrap().state, GroupState::Stable);
    }
}

#[test]
fn waiting_sync_gets_rebalance_in_progress_when_a_rebalance_starts() {
    let clock = Clock::new();
    let mut gs = groups(0);
    let a = one_stable(&mut gs, clock.at(0), 5);
    let tb = wait(join_new(&mut gs, clock.at(10), 5, "c2", 20_000, RANGE));
    done(gs.join(clock.at(20), 5, "c1", &join_req(&a, 30_000, RANGE)));
    let b = gs.poll_join(clock.at(20), &tb).unwrap().member_id;
    let ts = wait(gs.sync(clock.at(30), 5, &sync_req(&b, 2, &[])));
    // A commit during CompletingRebalance is refused.
    let c = gs.commit(clock.at(31), 8, &commit_req(&b, 2, 5), &|_, _| true);
    assert_eq!(
        c.topics[0].partitions[0].error_code,
        code(ErrorCode::RebalanceInProgress)
    );
    // A third member arrives before the leader's sync.
    let tc = wait(join_new(&mut gs, clock.at(40), 5, "c3", 20_000, RANGE));
    let sb = gs.poll_sync(clock.at(40), &ts).expect("b answered");
    enc(&sb, 5);
    assert_eq!(sb.error_code, code(ErrorCode::RebalanceInProgress));
    let s = done(gs.sync(clock.at(41), 5, &sync_req(&a, 2, &[])));
    assert_eq!(s.error_code, code(ErrorCode::RebalanceInProgress));
    let s = done(gs.sync(clock.at(41), 5, &sync_req(&a, 1, &[])));
    assert_eq!(s.error_code, code(ErrorCode::IllegalGeneration));
    let s = done(gs.sync(clock.at(41), 5, &sync_req("stranger", 2, &[])));
    assert_eq!(s.error_code, code(ErrorCode::UnknownMemberId));
    assert_eq!(gs.poll_join(clock.at(41), &tc), None);
}

#[test]
fn sync_checks_protocol_type_and_name_from_v5() {
    let clock = Clock::new();
    let mut gs = groups(0);
    let a = one_stable(&mut gs, clock.at(0), 5);
    let mut req = sync_req(&a, 1, &[]);
    req.protocol_name = Some("roundrobin".to_owned());
    let r = done(gs.sync(clock.at(1), 5, &req));
    assert_eq!(r.error_code, code(ErrorCode::InconsistentGroupProtocol));
    req.protocol_name = Some("range".to_owned());
    req.protocol_type = Some("connect".to_owned());
    assert_eq!(
        done(gs.sync(clock.at(1), 5, &req)).error_code,
        code(ErrorCode::InconsistentGroupProtocol)
    );
    req.protocol_type = Some("consumer".to_owned());
    let ok = done(gs.sync(clock.at(1), 5, &req));
    enc(&ok, 5);
    assert_eq!(ok.error_code, 0);
    assert_eq!(ok.protocol_name.as_deref(), Some("range"));
    // A different protocol type cannot join.
    let mut other = join_req("", 30_000, RANGE);
    other.protocol_type = "connect".to_owned();
    let r = done(gs.join(clock.at(2), 7, "x", &other));
    assert_eq!(r.error_code, code(ErrorCode::InconsistentGroupProtocol));
}

#[test]
fn rebalance_timeout_removes_members_that_do_not_rejoin() {
    let clock = Clock::new();
    let mut gs = groups(0);
    let (a, b) = two_stable(&mut gs, &clock);
    // Keep both sessions alive until the rebalance.
    hb(&mut gs, clock.at(5_000), 4, &a, 2);
    hb(&mut gs, clock.at(5_000), 4, &b, 2);
    let tc = wait(join_new(&mut gs, clock.at(6_000), 5, "c3", 10_000, RANGE));
    let ta = wait(gs.join(clock.at(6_500), 5, "c1", &join_req(&a, 30_000, RANGE)));
    // b keeps heartbeating but never rejoins.
    for t in (7_000..36_000).step_by(3_000) {
        assert_eq!(
            hb(&mut gs, clock.at(t), 4, &b, 2),
            code(ErrorCode::RebalanceInProgress)
        );
        gs.tick(clock.at(t));
    }
    // The rebalance timeout is the largest of the members' (a's 30 s).
    assert_eq!(gs.next_deadline(), Some(clock.at(36_000)));
    gs.tick(clock.at(35_999));
    assert_eq!(gs.poll_join(clock.at(35_999), &ta), None);
    gs.tick(clock.at(36_000));
    let ja = gs.poll_join(clock.at(36_000), &ta).expect("a answered");
    let jc = gs.poll_join(clock.at(36_000), &tc).expect("c answered");
    enc(&ja, 5);
    assert_eq!(ja.generation_id, 3);
    assert_eq!(jc.generation_id, 3);
    assert_eq!(ja.members.len(), 2);
    let snap = gs.snapshot(GROUP).unwrap();
    assert!(snap.members.iter().all(|m| m.member_id != b));
    assert_eq!(
        hb(&mut gs, clock.at(36_001), 4, &b, 2),
        code(ErrorCode::UnknownMemberId)
    );
}

#[test]
fn leader_that_does_not_rejoin_is_replaced() {
    let clock = Clock::new();
    let mut gs = groups(0);
    let (a, b) = two_stable(&mut gs, &clock);
    // A follower with unchanged metadata gets the current generation at
    // once, without a rebalance.
    let same = done(gs.join(clock.at(1_000), 5, "c2", &join_req(&b, 20_000, RANGE)));
    assert_eq!((same.error_code, same.generation_id), (0, 2));
    assert!(same.members.is_empty());
    assert_eq!(gs.snapshot(GROUP).unwrap().state, GroupState::Stable);
    // New metadata does start one; the leader never rejoins.
    let tb = wait(gs.join(
        clock.at(1_000),
        5,
        "c2",
        &join_req(&b, 20_000, &[("range", b"new")]),
    ));
    gs.tick(clock.at(31_000));
    let jb = gs.poll_join(clock.at(31_000), &tb).expect("b answered");
    assert_eq!(jb.generation_id, 3);
    assert_eq!(jb.leader, b);
    assert_eq!(jb.members.len(), 1);
    assert_eq!(jb.members[0].metadata, Bytes::from_static(b"new"));
    assert!(gs
        .snapshot(GROUP)
        .unwrap()
        .members
        .iter()
        .all(|m| m.member_id != a));
}

#[test]
fn silent_member_expires_but_not_while_it_waits() {
    let clock = Clock::new();
    let mut gs = groups(0);
    let (a, b) = two_stable(&mut gs, &clock);
    // Sessions are 10 s; b's last reset was its sync at 30 ms.
    hb(&mut gs, clock.at(9_000), 4, &a, 2);
    assert_eq!(gs.next_deadline(), Some(clock.at(10_030)));
    gs.tick(clock.at(10_029));
    assert_eq!(gs.snapshot(GROUP).unwrap().members.len(), 2);
    gs.tick(clock.at(10_030));
    let snap = gs.snapshot(GROUP).unwrap();
    assert_eq!(snap.members.len(), 1);
    assert_eq!(snap.state, GroupState::PreparingRebalance);
    assert_eq!(
        hb(&mut gs, clock.at(10_031), 4, &b, 2),
        code(ErrorCode::UnknownMemberId)
    );
    assert_eq!(
        hb(&mut gs, clock.at(10_031), 4, &a, 2),
        code(ErrorCode::RebalanceInProgress)
    );
    // a rejoins and waits for nobody: the join completes at once.
    let ja = done(gs.join(clock.at(10_040), 4, "c1", &join_req(&a, 30_000, RANGE)));
    assert_eq!((ja.generation_id, ja.members.len()), (3, 1));
}

#[test]
fn members_waiting_in_join_do_not_expire() {
    let clock = Clock::new();
    let mut gs = groups(0);
    let (a, b) = two_stable(&mut gs, &clock);
    let tc = wait(join_new(&mut gs, clock.at(100), 5, "c3", 60_000, RANGE));
    let ta = wait(gs.join(clock.at(200), 5, "c1", &join_req(&a, 30_000, RANGE)));
    // b heartbeats until 20 s and never rejoins.
    for t in (1_000..=20_000).step_by(1_000) {
        hb(&mut gs, clock.at(t), 4, &b, 2);
        gs.tick(clock.at(t));
    }
    // a and c are past their 10 s sessions but still members.
    assert_eq!(gs.snapshot(GROUP).unwrap().members.len(), 3);
    assert_eq!(gs.next_deadline(), Some(clock.at(30_000)));
    gs.tick(clock.at(30_000));
    let ja = gs.poll_join(clock.at(30_000), &ta).expect("a answered");
    let jc = gs.poll_join(clock.at(30_000), &tc).expect("c answered");
    assert_eq!((ja.generation_id, jc.generation_id), (3, 3));
    assert_eq!(ja.members.len(), 2);
    assert!(ja.members.iter().all(|m| m.member_id != b));
}

#[test]
fn members_that_never_sync_are_removed_after_the_rebalance_timeout() {
    let clock = Clock::new();
    let mut gs = groups(0);
    let a = one_stable(&mut gs, clock.at(0), 5);
    let tb = wait(join_new(&mut gs, clock.at(10), 5, "c2", 20_000, RANGE));
    done(gs.join(clock.at(20), 5, "c1", &join_req(&a, 30_000, RANGE)));
    let b = gs.poll_join(clock.at(20), &tb).unwrap().member_id;
    // Only the leader syncs; b keeps heartbeating but never syncs.
    done(gs.sync(clock.at(30), 5, &sync_req(&a, 2, &[(&a, b"x"), (&b, b"y")])));
    for t in (1_000..30_000).step_by(1_000) {
        assert_eq!(hb(&mut gs, clock.at(t), 4, &b, 2), 0);
        hb(&mut gs, clock.at(t), 4, &a, 2);
        gs.tick(clock.at(t));
    }
    gs.tick(clock.at(30_020));
    let snap = gs.snapshot(GROUP).unwrap();
    assert_eq!(snap.members.len(), 1);
    assert_eq!(snap.state, GroupState::PreparingRebalance);
}

#[test]
fn leave_removes_members_and_empties_the_group() {
    let clock = Clock::new();
    // v0-2: one member, its error at the top level.
    for version in [0i16, 1, 2] {
        let mut gs = groups(0);
        let (a, b) = two_stable(&mut gs, &clock);
        let req = |m: &str| LeaveGroupRequest {
            group_id: GROUP.to_owned(),
            member_id: m.to_owned(),
            ..LeaveGroupRequest::default()
        };
        let r = gs.leave(clock.at(100), version, &req("ghost"));
        enc(&r, version);
        assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
        let r = gs.leave(clock.at(100), version, &req(&a));
        enc(&r, version);
        assert_eq!(r.error_code, 0);
        // The leader left: b is the only member and, alone, completes the
        // rebalance as soon as it rejoins.
        assert_eq!(
            hb(&mut gs, clock.at(110), 4, &b, 2),
            code(ErrorCode::RebalanceInProgress)
        );
        let jb = done(gs.join(clock.at(120), 5, "c2", &join_req(&b, 20_000, RANGE)));
        assert_eq!((jb.generation_id, jb.leader.as_str()), (3, b.as_str()));
        let r = gs.leave(clock.at(130), version, &req(&b));
        assert_eq!(r.error_code, 0);
        let snap = gs.snapshot(GROUP).unwrap();
        assert_eq!(snap.state, GroupState::Empty);
        assert_eq!(snap.generation_id, 4);
        assert!(snap.members.is_empty() && snap.leader.is_none());
        assert_eq!(gs.next_deadline(), None);
    }
    // v3+: a batch, one error per member.
    for version in [3i16, 4, 5] {
        let mut gs = groups(0);
        let (a, b) = two_stable(&mut gs, &clock);
        let r = gs.leave(
            clock.at(100),
            version,
            &LeaveGroupRequest {
                group_id: GROUP.to_owned(),
                members: [a.as_str(), "ghost", b.as_str()]
                    .iter()
                    .map(|m| MemberIdentity {
                        member_id: (*m).to_owned(),
                        ..MemberIdentity::default()
                    })
                    .collect(),
                ..LeaveGroupRequest::default()
            },
        );
        enc(&r, version);
        assert_eq!(r.error_code, 0);
        let codes: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
        assert_eq!(codes, vec![0, code(ErrorCode::UnknownMemberId), 0]);
        assert_eq!(r.members[1].member_id, "ghost");
        assert_eq!(gs.snapshot(GROUP).unwrap().state, GroupState::Empty);
    }
    let mut gs = groups(0);
    let r = gs.leave(
        clock.at(0),
        1,
        &LeaveGroupRequest {
            group_id: "nope".to_owned(),
            member_id: "m".to_owned(),
            ..LeaveGroupRequest::default()
        },
    );
    assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
}

#[test]
fn protocol_vote_picks_the_most_preferred_common_protocol() {
    let clock = Clock::new();
    let mut gs = groups(1_000);
    let prefs: [&[(&str, &[u8])]; 3] = [
        &[("range", b"1"), ("roundrobin", b"1"), ("sticky", b"1")],
        &[("roundrobin", b"2"), ("range", b"2")],
        &[("sticky", b"3"), ("roundrobin", b"3"), ("range", b"3")],
    ];
    // sticky is not supported by everyone; of the rest, roundrobin has
    // two first votes (members 2 and 3), range one.
    let tickets: Vec<Ticket> = prefs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            wait(join_new(
                &mut gs,
                clock.at(0),
                5,
                &format!("c{i}"),
                5_000,
                p,
            ))
        })
        .collect();
    // A member supporting none of the common protocols is refused.
    let r = done(gs.join(
        clock.at(1),
        5,
        "x",
        &join_req("", 5_000, &[("sticky", b"")]),
    ));
    assert_eq!(r.error_code, code(ErrorCode::InconsistentGroupProtocol));
    // Members arrived during the initial delay: it runs once more.
    gs.tick(clock.at(1_000));
    assert_eq!(gs.poll_join(clock.at(1_000), &tickets[0]), None);
    assert_eq!(gs.next_deadline(), Some(clock.at(2_000)));
    gs.tick(clock.at(2_000));
    let answers: Vec<JoinGroupResponse> = tickets
        .iter()
        .map(|t| gs.poll_join(clock.at(3_000), t).expect("answered"))
        .collect();
    for a in &answers {
        assert_eq!(a.protocol_name.as_deref(), Some("roundrobin"));
    }
    let leader = answers.iter().find(|a| !a.members.is_empty()).unwrap();
    // The leader gets each member's metadata for the chosen protocol.
    let metas: Vec<&[u8]> = leader.members.iter().map(|m| &m.metadata[..]).collect();
    assert_eq!(metas, vec![b"1", b"2", b"3"]);
    assert_eq!(
        gs.snapshot(GROUP).unwrap().protocol.as_deref(),
        Some("roundrobin")
    );
}

#[test]
fn initial_delay_waits_for_more_members() {
    let clock = Clock::new();
    let mut gs = groups(3_000);
    let ta = wait(join_new(&mut gs, clock.at(0), 5, "c1", 10_000, RANGE));
    assert_eq!(gs.next_deadline(), Some(clock.at(3_000)));
    let tb = wait(join_new(&mut gs, clock.at(1_000), 5, "c2", 10_000, RANGE));
    // Everyone has joined, but the initial delay still runs.
    assert_eq!(gs.poll_join(clock.at(1_000), &ta), None);
    gs.tick(clock.at(3_000));
    // A member arrived during the delay: another delay.
    assert_eq!(gs.poll_join(clock.at(3_000), &ta), None);
    assert_eq!(gs.next_deadline(), Some(clock.at(6_000)));
    gs.tick(clock.at(6_000));
    let ja = gs.poll_join(clock.at(6_000), &ta).expect("a answered");
    let jb = gs.poll_join(clock.at(6_000), &tb).expect("b answered");
    assert_eq!((ja.generation_id, jb.generation_id), (1, 1));
    assert_eq!(ja.leader, jb.leader);

    // The extensions stop when the rebalance timeout is used up.
    let mut gs = groups(3_000);
    let t0 = wait(join_new(&mut gs, clock.at(0), 5, "c0", 4_000, RANGE));
    wait(join_new(&mut gs, clock.at(1_000), 5, "c1", 4_000, RANGE));
    gs.tick(clock.at(3_000));
    assert_eq!(gs.next_deadline(), Some(clock.at(4_000)));
    wait(join_new(&mut gs, clock.at(3_500), 5, "c2", 4_000, RANGE));
    gs.tick(clock.at(4_000));
    let j = gs.poll_join(clock.at(4_000), &t0).expect("answered");
    assert_eq!(j.members.len(), 3);
}

#[test]
fn static_member_replacement_fences_the_old_id() {
    let clock = Clock::new();
    for version in [5i16, 9] {
        let mut gs = groups(0);
        let mut req = join_req("", 30_000, RANGE);
        req.group_instance_id = Some("inst-1".to_owned());
        // Static members skip MEMBER_ID_REQUIRED; the id starts with the
        // instance id.
        let j = done(gs.join(clock.at(0), version, "c1", &req));
        enc(&j, version);
        assert_eq!(j.error_code, 0);
        assert!(j.member_id.starts_with("inst-1-"));
        assert_eq!(j.members[0].group_instance_id.as_deref(), Some("inst-1"));
        let old = j.member_id.clone();
        done(gs.sync(clock.at(1), 5, &sync_req(&old, 1, &[(&old, b"mine")])));

        // The instance restarts: same instance id, empty member id.
        let j2 = done(gs.join(clock.at(100), version, "c1", &req));
        enc(&j2, version);
        assert_eq!(j2.error_code, 0);
        assert_ne!(j2.member_id, old);
        assert_eq!(j2.generation_id, 1, "no rebalance");
        if version >= 9 {
            assert!(j2.skip_assignment);
            assert_eq!(j2.leader, j2.member_id);
            assert_eq!(j2.members.len(), 1);
        } else {
            assert!(!j2.skip_assignment);
            assert_eq!(j2.leader, old);
            assert!(j2.members.is_empty());
        }
        let snap = gs.snapshot(GROUP).unwrap();
        assert_eq!(snap.state, GroupState::Stable);
        assert_eq!(snap.members[0].member_id, j2.member_id);
        assert_eq!(snap.members[0].assignment, Bytes::from_static(b"mine"));

        let with_instance = |m: &str| HeartbeatRequest {
            group_id: GROUP.to_owned(),
            generation_id: 1,
            member_id: m.to_owned(),
            group_instance_id: Some("inst-1".to_owned()),
            ..HeartbeatRequest::default()
        };
        let r = gs.heartbeat(clock.at(200), 4, &with_instance(&old));
        assert_eq!(r.error_code, code(ErrorCode::FencedInstanceId));
        let r = gs.heartbeat(clock.at(200), 4, &with_instance(&j2.member_id));
        assert_eq!(r.error_code, 0);
        let mut sync = sync_req(&old, 1, &[]);
        sync.group_instance_id = Some("inst-1".to_owned());
        assert_eq!(
            done(gs.sync(clock.at(200), 3, &sync)).error_code,
            code(ErrorCode::FencedInstanceId)
        );
        let mut commit = commit_req(&old, 1, 1);
        commit.group_instance_id = Some("inst-1".to_owned());
        let c = gs.commit(clock.at(200), 7, &commit, &|_, _| true);
        assert_eq!(
            c.topics[0].partitions[0].error_code,
            code(ErrorCode::FencedInstanceId)
        );

        // A changed protocol does rebalance.
        let mut changed = req.clone();
        changed.protocols = protocols(&[("roundrobin", b""), ("range", b"")]);
        let j3 = done(gs.join(clock.at(300), version, "c1", &changed));
        assert_eq!(j3.generation_id, 2);
        assert_eq!(j3.protocol_name.as_deref(), Some("roundrobin"));
    }
}

fn commit_req(member: &str, generation: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: GROUP.to_owned(),
        generation_id_or_member_epoch: generation,
        member_id: member.to_owned(),
        topics: vec![OffsetCommitRequestTopic {
            name: "t".to_owned(),
            partitions: vec![OffsetCommitRequestPartition {
                partition_index: 0,
                committed_offset: offset,
                committed_leader_epoch: 4,
                committed_metadata: Some("meta".to_owned()),
                ..OffsetCommitRequestPartition::default()
            }],
            ..OffsetCommitRequestTopic::default()
        }],
        ..OffsetCommitRequest::default()
    }
}

fn commit_code(r: &OffsetCommitResponse) -> i16 {
    r.topics[0].partitions[0].error_code
}

#[test]
fn commit_rules() {
    let clock = Clock::new();
    let all = |_: &str, _: i32| true;
    let mut gs = groups(0);
    // A simple commit creates the group.
    let r = gs.commit(clock.at(0), 2, &commit_req("", -1, 10), &all);
    enc(&r, 2);
    assert_eq!(commit_code(&r), 0);
    assert_eq!(gs.committed(GROUP, "t", 0), Some(10));
    assert_eq!(gs.snapshot(GROUP).unwrap().state, GroupState::Empty);
    // Unknown group with a generation: ILLEGAL_GENERATION, from v9
    // GROUP_ID_NOT_FOUND.
    let mut other = commit_req("m", 3, 1);
    other.group_id = "other".to_owned();
    assert_eq!(
        commit_code(&gs.commit(clock.at(0), 8, &other, &all)),
        code(ErrorCode::IllegalGeneration)
    );
    let r = gs.commit(clock.at(0), 9, &other, &all);
    enc(&r, 9);
    assert_eq!(commit_code(&r), code(ErrorCode::GroupIdNotFound));
    assert!(gs.snapshot("other").is_none());

    let a = one_stable(&mut gs, clock.at(0), 5);
    // The group has members now: no more simple commits.
    assert_eq!(
        commit_code(&gs.commit(clock.at(1), 5, &commit_req("", -1, 11), &all)),
        code(ErrorCode::UnknownMemberId)
    );
    assert_eq!(
        commit_code(&gs.commit(clock.at(1), 5, &commit_req(&a, 0, 11), &all)),
        code(ErrorCode::IllegalGeneration)
    );
    assert_eq!(
        commit_code(&gs.commit(clock.at(1), 5, &commit_req("x", 1, 11), &all)),
        code(ErrorCode::UnknownMemberId)
    );
    assert_eq!(gs.committed(GROUP, "t", 0), Some(10));
    let r = gs.commit(clock.at(1), 5, &commit_req(&a, 1, 12), &all);
    enc(&r, 5);
    assert_eq!(commit_code(&r), 0);
    assert_eq!(gs.committed(GROUP, "t", 0), Some(12));

    // During PreparingRebalance the current generation may still commit.
    wait(join_new(&mut gs, clock.at(2), 5, "c2", 30_000, RANGE));
    assert_eq!(
        gs.snapshot(GROUP).unwrap().state,
        GroupState::PreparingRebalance
    );
    assert_eq!(
        commit_code(&gs.commit(clock.at(3), 8, &commit_req(&a, 1, 13), &all)),
        0
    );
    assert_eq!(gs.committed(GROUP, "t", 0), Some(13));

    // Unknown partitions, and metadata over the limit.
    let none = |t: &str, p: i32| t == "t" && p == 0;
    let mut req = commit_req(&a, 1, 14);
    req.topics[0].partitions.push(OffsetCommitRequestPartition {
        partition_index: 9,
        committed_offset: 1,
        ..OffsetCommitRequestPartition::default()
    });
    let r = gs.commit(clock.at(4), 6, &req, &none);
    let codes: Vec<i16> = r.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, vec![0, code(ErrorCode::UnknownTopicOrPartition)]);
    assert_eq!(gs.committed(GROUP, "t", 9), None);
    let mut big = commit_req(&a, 1, 15);
    big.topics[0].partitions[0].committed_metadata = Some("x".repeat(5_000));
    assert_eq!(
        commit_code(&gs.commit(clock.at(4), 6, &big, &all)),
        code(ErrorCode::OffsetMetadataTooLarge)
    );
}

fn fetch_v7(topics: Option<Vec<(&str, Vec<i32>)>>, group: &str) -> OffsetFetchRequest {
    OffsetFetchRequest {
        group_id: group.to_owned(),
        topics: topics.map(|ts| {
            ts.into_iter()
                .map(|(n, ps)| OffsetFetchRequestTopic {
                    name: n.to_owned(),
                    partition_indexes: ps,
                    ..OffsetFetchRequestTopic::default()
                })
                .collect()
        }),
        ..OffsetFetchRequest::default()
    }
}

#[test]
fn offset_fetch_shapes() {
    let clock = Clock::new();
    let all = |_: &str, _: i32| true;
    let mut gs = groups(0);
    // Leader epoch stored from v6; v5 commits store none.
    gs.commit(clock.at(0), 6, &commit_req("", -1, 42), &all);
    let mut other = commit_req("", -1, 7);
    other.topics[0].name = "u".to_owned();
    other.topics[0].partitions[0].committed_metadata = None;
    gs.commit(clock.at(0), 5, &other, &all);

    // v7: top-level topics.
    let r = gs.fetch_offsets(
        clock.at(1),
        7,
        &fetch_v7(Some(vec![("t", vec![0, 1])]), GROUP),
    );
    enc(&r, 7);
    assert!(r.groups.is_empty());
    let p = &r.topics[0].partitions;
    assert_eq!(
        (p[0].committed_offset, p[0].committed_leader_epoch),
        (42, 4)
    );
    assert_eq!(p[0].metadata.as_deref(), Some("meta"));
    assert_eq!(
        (p[1].committed_offset, p[1].committed_leader_epoch),
        (-1, -1)
    );
    // Null topics: everything committed.
    let r = gs.fetch_offsets(clock.at(1), 7, &fetch_v7(None, GROUP));
    enc(&r, 7);
    let names: Vec<&str> = r.topics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["t", "u"]);
    assert_eq!(r.topics[1].partitions[0].committed_leader_epoch, -1);
    assert_eq!(r.topics[1].partitions[0].metadata.as_deref(), Some(""));
    // v1: encodable, no epochs.
    let r = gs.fetch_offsets(clock.at(1), 1, &fetch_v7(Some(vec![("t", vec![0])]), GROUP));
    enc(&r, 1);
    assert_eq!(r.topics[0].partitions[0].committed_offset, 42);
    // Unknown group: -1s.
    let r = gs.fetch_offsets(
        clock.at(1),
        7,
        &fetch_v7(Some(vec![("t", vec![0])]), "nope"),
    );
    assert_eq!(
        (r.error_code, r.topics[0].partitions[0].committed_offset),
        (0, -1)
    );

    // v8: the groups array.
    let req = OffsetFetchRequest {
        group_id: String::new(),
        topics: None,
        groups: vec![
            OffsetFetchRequestGroup {
                group_id: GROUP.to_owned(),
                topics: Some(vec![OffsetFetchRequestTopics {
                    name: "t".to_owned(),
                    partition_indexes: vec![0],
                    ..OffsetFetchRequestTopics::default()
                }]),
                ..OffsetFetchRequestGroup::default()
            },
            OffsetFetchRequestGroup {
                group_id: GROUP.to_owned(),
                topics: None,
                ..OffsetFetchRequestGroup::default()
            },
            OffsetFetchRequestGroup {
                group_id: "nope".to_owned(),
                topics: None,
                ..OffsetFetchRequestGroup::default()
            },
        ],
        ..OffsetFetchRequest::default()
    };
    for version in [8i16, 9] {
        let r = gs.fetch_offsets(clock.at(1), version, &req);
        enc(&r, version);
        assert!(r.topics.is_empty());
        assert_eq!(r.groups.len(), 3);
        let p = &r.groups[0].topics[0].partitions[0];
        assert_eq!((p.committed_offset, p.committed_leader_epoch), (42, 4));
        assert_eq!(r.groups[1].topics.len(), 2);
        assert!(r.groups[2].topics.is_empty());
        assert_eq!(r.groups[2].group_id, "nope");
    }
}

#[test]
fn pending_member_id_holds_the_join_phase() {
    let clock = Clock::new();
    let mut gs = groups(0);
    let a = one_stable(&mut gs, clock.at(0), 5);
    // b has its id but has not joined with it yet.
    let r = done(gs.join(clock.at(10), 5, "c2", &join_req("", 20_000, RANGE)));
    assert_eq!(r.error_code, code(ErrorCode::MemberIdRequired));
    // The leader rejoins (which always rebalances); everyone known has
    // joined, but the pending id keeps the phase open (Kafka's
    // hasAllMembersJoined).
    let ta = wait(gs.join(clock.at(20), 5, "c1", &join_req(&a, 30_000, RANGE)));
    assert_eq!(gs.poll_join(clock.at(20), &ta), None);
    // b's own join ends the phase: it is answered at once.
    let jb = done(gs.join(
        clock.at(30),
        5,
        "c2",
        &join_req(&r.member_id, 20_000, RANGE),
    ));
    let ja = gs.poll_join(clock.at(30), &ta).expect("a answered");
    assert_eq!((ja.generation_id, jb.generation_id), (2, 2));
    assert_eq!(ja.members.len(), 2);

    // An id never used expires after the session timeout and stops
    // holding the phase.
    let mut gs = groups(0);
    let a = one_stable(&mut gs, clock.at(0), 5);
    done(gs.join(clock.at(10), 5, "c2", &join_req("", 20_000, RANGE)));
    let ta = wait(gs.join(clock.at(20), 5, "c1", &join_req(&a, 30_000, RANGE)));
    assert_eq!(gs.next_deadline(), Some(clock.at(10_010)));
    gs.tick(clock.at(10_010));
    let ja = gs.poll_join(clock.at(10_010), &ta).expect("a answered");
    assert_eq!((ja.generation_id, ja.members.len()), (2, 1));
}

#[test]
fn cancelled_join_no_longer_blocks() {
    let clock = Clock::new();
    let mut gs = groups(0);
    let (a, b) = two_stable(&mut gs, &clock);
    let tb = wait(gs.join(
        clock.at(100),
        5,
        "c2",
        &join_req(&b, 20_000, &[("range", b"2")]),
    ));
    gs.cancel(&tb);
    // b's connection is gone: it no longer counts as waiting, and the
    // join completes once a rejoins.
    hb(&mut gs, clock.at(200), 4, &a, 2);
    let _ = wait(gs.join(clock.at(300), 5, "c1", &join_req(&a, 30_000, RANGE)));
    gs.tick(clock.at(30_300));
    assert!(gs
        .snapshot(GROUP)
        .unwrap()
        .members
        .iter()
        .all(|m| m.member_id != b));
}
