//! Fetch sessions (KIP-227), one per leader connection and one per
//! replica connection, kept as the Java client's `FetchSessionHandler`
//! keeps them ([`Sessions`]): what the next Fetch to a target lists,
//! alters and forgets, and what its answer's session id and error do to
//! the session.

use super::parked::Member;
use super::{describe, TopicPartition};
use crate::cluster::Target;
use crate::protocol::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};

/// What a fetch session (KIP-227) holds for one partition: what was last
/// sent for it. A partition whose values changed is listed again in the
/// next incremental Fetch; one left unchanged is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SessionEntry {
    pub(super) topic_id: [u8; 16],
    pub(super) fetch_offset: i64,
    pub(super) max_bytes: i32,
    pub(super) leader_epoch: i32,
    pub(super) last_fetched_epoch: i32,
}

/// A fetch session with one broker (KIP-227), as the Java client's
/// `FetchSessionHandler` keeps it.
#[derive(Debug)]
struct FetchSession {
    id: i32,
    /// The epoch of the next incremental request (1, 2, ... wrapping to
    /// 1).
    epoch: i32,
    /// The generation of the connection it was made on (see
    /// [`Sessions::set_generations`]): it ends with that connection.
    connection: u64,
    /// The partitions the broker holds in it.
    partitions: BTreeMap<TopicPartition, SessionEntry>,
}

/// The session side of a Fetch in flight.
#[derive(Debug)]
pub(super) struct SessionSent {
    /// 0 for a full Fetch that asks for a new session (which then holds
    /// every member of the target, as sent).
    pub(super) id: i32,
    pub(super) connection: u64,
    /// An incremental Fetch's changes to the session: the partitions
    /// listed (with what was sent) and those forgotten (`None`).
    pub(super) changes: Vec<(TopicPartition, Option<SessionEntry>)>,
}

/// The session side of the next Fetch to a target: its session id and
/// epoch, the members it lists (every member in a full Fetch; in an
/// incremental one those added or changed), those it forgets (name and
/// topic id), and what to remember of it until it is answered.
#[derive(Debug)]
pub(super) struct SessionRequest<'a> {
    pub(super) id: i32,
    pub(super) epoch: i32,
    pub(super) listed: Vec<(&'a TopicPartition, &'a Member)>,
    pub(super) forgotten: Vec<(TopicPartition, [u8; 16])>,
    /// `None` without sessions.
    pub(super) sent: Option<SessionSent>,
}

/// The fetch sessions of one fetcher, by connection target: by leader
/// (`Target::Broker`) and by read replica (`Target::Replica`).
#[derive(Debug)]
pub(super) struct Sessions {
    /// `fetch.sessions.enable`: without, every Fetch is a full one
    /// (`session_id` 0, `session_epoch` -1).
    enabled: bool,
    sessions: BTreeMap<Target, FetchSession>,
    /// The connection generation of each leader and read replica (see
    /// [`Sessions::set_generations`]).
    connections: BTreeMap<Target, u64>,
}

impl Sessions {
    /// No session yet; `enabled`: `fetch.sessions.enable`.
    pub(super) fn new(enabled: bool) -> Self {
        Sessions {
            enabled,
            sessions: BTreeMap::new(),
            connections: BTreeMap::new(),
        }
    }

    /// How many connections to each broker have closed, for the leader
    /// connections (`replica` false) or the replica connections: a
    /// session made on a connection that is gone ends with it.
    pub(super) fn set_generations(&mut self, replica: bool, generations: &BTreeMap<i32, u64>) {
        let of_kind = |t: &Target| matches!(t, Target::Replica(_)) == replica;
        self.connections.retain(|t, _| !of_kind(t));
        for (&broker, &generation) in generations {
            let target = if replica {
                Target::Replica(broker)
            } else {
                Target::Broker(broker)
            };
            self.connections.insert(target, generation);
        }
        let connections = &self.connections;
        self.sessions.retain(|target, session| {
            if !of_kind(target) {
                return true;
            }
            let live = connections.get(target).copied().unwrap_or(0) == session.connection;
            if !live {
                log::debug!(
                    "fetch session {} with {} ended with its connection",
                    session.id,
                    describe(*target)
                );
            }
            live
        });
    }

    /// The session with `target`, when there is one: its id and the
    /// epoch of the next request.
    pub(super) fn get(&self, target: Target) -> Option<(i32, i32)> {
        self.sessions.get(&target).map(|s| (s.id, s.epoch))
    }

    /// What the next Fetch to `target` says of its session, given the
    /// target's `members` and those `changed` since its last Fetch.
    ///
    /// KIP-227: a full Fetch lists every member; an incremental one only
    /// those added or changed since the session last heard of them, and
    /// forgets those that left (paused, buffered, backing off, moved,
    /// unassigned: they come back as added). The broker answers for every
    /// partition it holds.
    pub(super) fn next_request<'a>(
        &self,
        target: Target,
        members: &'a BTreeMap<TopicPartition, Member>,
        changed: BTreeSet<TopicPartition>,
    ) -> SessionRequest<'a> {
        let connection = self.connections.get(&target).copied().unwrap_or(0);
        let session = self
            .sessions
            .get(&target)
            .filter(|s| self.enabled && s.connection == connection);
        let (id, epoch) = match session {
            Some(s) => (s.id, s.epoch),
            None if self.enabled => (0, 0),
            None => (0, -1),
        };
        let mut listed: Vec<(&TopicPartition, &Member)> = Vec::new();
        let mut forgotten = Vec::new();
        let mut changes = Vec::new();
        match session {
            None => listed.extend(members.iter()),
            Some(s) => {
                for tp in changed {
                    match (members.get_key_value(&tp), s.partitions.get(&tp)) {
                        (Some((_, m)), Some(held)) if *held == m.entry => {}
                        (Some((key, m)), held) => {
                            // A topic deleted and created again under its
                            // name has a new id: the broker keys its
                            // session by id, so the old one is forgotten
                            // as well (the Java client's "replaced"
                            // partitions), else it stays in the session
                            // and is answered INCONSISTENT_TOPIC_ID on
                            // every Fetch.
                            if let Some(held) = held.filter(|h| {
                                h.topic_id != m.entry.topic_id
                                    && h.topic_id != [0; 16]
                                    && m.entry.topic_id != [0; 16]
                            }) {
                                forgotten.push((tp.clone(), held.topic_id));
                            }
                            listed.push((key, m));
                            changes.push((tp, Some(m.entry)));
                        }
                        (None, Some(held)) => {
                            forgotten.push((tp.clone(), held.topic_id));
                            changes.push((tp, None));
                        }
                        (None, None) => {}
                    }
                }
            }
        }
        SessionRequest {
            id,
            epoch,
            listed,
            forgotten,
            sent: self.enabled.then_some(SessionSent {
                id,
                connection,
                changes,
            }),
        }
    }

    /// A Fetch to `target` sent as `sent` got no answer: what the broker
    /// made of it is unknown, so the session cannot go on.
    pub(super) fn lost(&mut self, target: Target, sent: Option<&SessionSent>) {
        if sent.is_some() {
            self.sessions.remove(&target);
        }
    }

    /// Reads the session side of an answer from `target` to a Fetch sent
    /// as `sent`: its whole-response error `code` and its `session_id`.
    /// `members`: the target's members, as sent (a new session holds them
    /// all). Returns whether the rest of the answer is to be read: not
    /// when the broker evicted or lost the session (FETCH_SESSION_ID_NOT_FOUND,
    /// INVALID_FETCH_SESSION_EPOCH: not the application's business, and
    /// nothing to wait for; the next Fetch is a full one).
    pub(super) fn read_answer(
        &mut self,
        target: Target,
        sent: SessionSent,
        code: ErrorCode,
        session_id: i32,
        members: &BTreeMap<TopicPartition, Member>,
    ) -> bool {
        if code != ErrorCode::None {
            // Any error ends the session (the Java client's
            // `FetchSessionHandler.handleResponse`): the next Fetch is a
            // full one asking for a new session.
            self.sessions.remove(&target);
            let lost = sent.id != 0
                && matches!(
                    code,
                    ErrorCode::FetchSessionIdNotFound | ErrorCode::InvalidFetchSessionEpoch
                );
            if lost {
                log::debug!(
                    "fetch session {} with {}: {code}; fetching in full",
                    sent.id,
                    describe(target)
                );
            }
            return !lost;
        }
        if sent.id == 0 {
            if session_id != 0 {
                log::debug!(
                    "fetch session {session_id} with {} begins",
                    describe(target)
                );
                // It holds every member, as sent (none has left yet: the
                // partitions the answer carries leave after this).
                let partitions = members
                    .iter()
                    .map(|(tp, m)| (tp.clone(), m.entry))
                    .collect();
                self.sessions.insert(
                    target,
                    FetchSession {
                        id: session_id,
                        epoch: 1,
                        connection: sent.connection,
                        partitions,
                    },
                );
            }
            // A session id 0 back: the broker keeps no session (its
            // cache is full, or it has none); every Fetch stays full.
        } else if session_id != sent.id {
            // The broker closed the session (KIP-227: an incremental
            // Fetch that left it empty is served sessionless, id 0); the
            // answer is still good, the next Fetch is full.
            log::debug!(
                "fetch session {} with {} closed by the broker",
                sent.id,
                describe(target)
            );
            self.sessions.remove(&target);
        } else if let Some(s) = self.sessions.get_mut(&target) {
            s.epoch = if s.epoch == i32::MAX { 1 } else { s.epoch + 1 };
            for (tp, entry) in sent.changes {
                match entry {
                    Some(entry) => s.partitions.insert(tp, entry),
                    None => s.partitions.remove(&tp),
                };
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(offset: i64) -> Member {
        Member {
            rank: offset,
            generation: 1,
            entry: SessionEntry {
                topic_id: [1; 16],
                fetch_offset: offset,
                max_bytes: 100,
                leader_epoch: 0,
                last_fetched_epoch: -1,
            },
            behind: true,
        }
    }

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn names(request: &SessionRequest<'_>) -> Vec<i32> {
        request.listed.iter().map(|(tp, _)| tp.partition).collect()
    }

    const LEADER: Target = Target::Broker(1);

    /// Sessions with one begun with `LEADER` (id 9) holding `members`.
    fn begun(members: &BTreeMap<TopicPartition, Member>) -> Sessions {
        let mut s = Sessions::new(true);
        let full = s.next_request(LEADER, members, BTreeSet::new());
        assert_eq!((full.id, full.epoch), (0, 0));
        let sent = full.sent.expect("sessions on");
        assert!(s.read_answer(LEADER, sent, ErrorCode::None, 9, members));
        assert_eq!(s.get(LEADER), Some((9, 1)));
        s
    }

    #[test]
    fn without_sessions_every_fetch_is_full() {
        let members: BTreeMap<_, _> = [(tp(0), member(5)), (tp(1), member(6))].into();
        let s = Sessions::new(false);
        let request = s.next_request(LEADER, &members, [tp(1)].into());
        assert_eq!((request.id, request.epoch), (0, -1));
        assert_eq!(names(&request), [0, 1]);
        assert!(request.sent.is_none());
    }

    #[test]
    fn a_session_lists_what_changed_and_forgets_what_left() {
        let mut members: BTreeMap<_, _> = [(tp(0), member(5)), (tp(1), member(6))].into();
        let mut s = begun(&members);
        // Nothing changed: nothing listed.
        let request = s.next_request(LEADER, &members, [tp(0)].into());
        assert_eq!((request.id, request.epoch, names(&request)), (9, 1, vec![]));
        // One moved on, one left, one joined.
        members.insert(tp(0), member(7));
        members.remove(&tp(1));
        members.insert(tp(2), member(1));
        let changed = [tp(0), tp(1), tp(2), tp(3)].into();
        let request = s.next_request(LEADER, &members, changed);
        assert_eq!(names(&request), [0, 2]);
        assert_eq!(request.forgotten, [(tp(1), [1; 16])]);
        let sent = request.sent.expect("sessions on");
        assert!(s.read_answer(LEADER, sent, ErrorCode::None, 9, &members));
        assert_eq!(s.get(LEADER), Some((9, 2)));
        // The session now holds what was sent: nothing to list.
        let changed = [tp(0), tp(1), tp(2)].into();
        let request = s.next_request(LEADER, &members, changed);
        assert!(request.listed.is_empty() && request.forgotten.is_empty());
    }

    /// A topic deleted and created again (same name, new id): the next
    /// incremental Fetch lists the partition under its new id and forgets
    /// it under the old one, which the broker's session is keyed by.
    #[test]
    fn a_new_topic_id_forgets_the_old_one() {
        let mut members: BTreeMap<_, _> = [(tp(0), member(5)), (tp(1), member(6))].into();
        let mut s = begun(&members);
        let mut again = member(0);
        again.entry.topic_id = [2; 16];
        members.insert(tp(0), again);
        let request = s.next_request(LEADER, &members, [tp(0)].into());
        assert_eq!(names(&request), [0]);
        assert_eq!(request.listed[0].1.entry.topic_id, [2; 16]);
        assert_eq!(request.forgotten, [(tp(0), [1; 16])]);
        let sent = request.sent.expect("sessions on");
        assert!(s.read_answer(LEADER, sent, ErrorCode::None, 9, &members));
        // The session holds the new id now: nothing more to forget.
        let request = s.next_request(LEADER, &members, [tp(0)].into());
        assert!(request.listed.is_empty() && request.forgotten.is_empty());
    }

    #[test]
    fn a_broker_without_room_for_a_session_gets_full_fetches() {
        let members: BTreeMap<_, _> = [(tp(0), member(5))].into();
        let mut s = Sessions::new(true);
        let sent = s.next_request(LEADER, &members, BTreeSet::new()).sent;
        assert!(s.read_answer(LEADER, sent.expect("on"), ErrorCode::None, 0, &members));
        assert_eq!(s.get(LEADER), None);
        let request = s.next_request(LEADER, &members, BTreeSet::new());
        assert_eq!(
            (request.id, request.epoch, names(&request)),
            (0, 0, vec![0])
        );
    }

    #[test]
    fn an_error_a_closed_session_or_no_answer_ends_it() {
        let members: BTreeMap<_, _> = [(tp(0), member(5))].into();
        // Evicted: the answer is not read.
        let mut s = begun(&members);
        let sent = s.next_request(LEADER, &members, BTreeSet::new()).sent;
        let code = ErrorCode::FetchSessionIdNotFound;
        assert!(!s.read_answer(LEADER, sent.expect("on"), code, 0, &members));
        assert_eq!(s.get(LEADER), None);
        // Another error: it ends, and the answer is read (for its error).
        let mut s = begun(&members);
        let sent = s.next_request(LEADER, &members, BTreeSet::new()).sent;
        let code = ErrorCode::NotLeaderOrFollower;
        assert!(s.read_answer(LEADER, sent.expect("on"), code, 9, &members));
        assert_eq!(s.get(LEADER), None);
        // Closed by the broker (id 0 back): the answer is good.
        let mut s = begun(&members);
        let sent = s.next_request(LEADER, &members, BTreeSet::new()).sent;
        assert!(s.read_answer(LEADER, sent.expect("on"), ErrorCode::None, 0, &members));
        assert_eq!(s.get(LEADER), None);
        // No answer.
        let mut s = begun(&members);
        let sent = s.next_request(LEADER, &members, BTreeSet::new()).sent;
        s.lost(LEADER, sent.as_ref());
        assert_eq!(s.get(LEADER), None);
    }

    #[test]
    fn a_session_ends_with_its_connection_and_only_its_kind_is_looked_at() {
        let members: BTreeMap<_, _> = [(tp(0), member(5))].into();
        let mut s = begun(&members);
        let replica = Target::Replica(1);
        let sent = s.next_request(replica, &members, BTreeSet::new()).sent;
        assert!(s.read_answer(replica, sent.expect("on"), ErrorCode::None, 4, &members));
        // The replica connection to broker 1 closed once: only its
        // session ends.
        s.set_generations(true, &[(1, 1)].into());
        assert_eq!((s.get(LEADER), s.get(replica)), (Some((9, 1)), None));
        // A session made on the new connection lives on it.
        let request = s.next_request(replica, &members, BTreeSet::new());
        assert_eq!(request.sent.as_ref().map(|s| s.connection), Some(1));
        s.set_generations(false, &[(1, 1)].into());
        assert_eq!(s.get(LEADER), None);
    }
}
