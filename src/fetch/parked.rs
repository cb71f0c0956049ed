//! The partitions parked at each fetch target ([`Parked`]): carried by
//! every Fetch to it without being looked at again, until an answer or
//! something else changes them (docs/fetching.md, "Parked partitions").

use super::session::SessionEntry;
use super::TopicPartition;
use std::collections::{BTreeMap, BTreeSet};

/// A partition parked in a target's Fetches: its place in the turn
/// order, and what is sent for it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Member {
    pub(super) rank: i64,
    /// The partition's generation when it joined (an answer read against
    /// another one is stale).
    pub(super) generation: u64,
    /// What is sent for it (`leader_epoch`: `current_leader_epoch`, -1
    /// when unknown).
    pub(super) entry: SessionEntry,
    /// Its position is below the last high watermark heard of.
    pub(super) behind: bool,
}

/// The partitions one target (a leader or a read replica) is fetched
/// from. A partition joins when a pass finds it fetchable there, and stays
/// while nothing changes it: every Fetch to the target carries it, without
/// the partition being looked at again. It leaves when an answer carries
/// it, when something changes it (a seek, a pause, a new leader, records
/// taken...; it is then marked dirty), or when the Fetch fails. So the
/// work of one answer follows the partitions it carries and those that
/// changed, not the partitions assigned.
///
/// While the target has a Fetch out its members stay as they were sent:
/// the answer is read against them.
#[derive(Debug, Default)]
pub(super) struct Parked {
    pub(super) members: BTreeMap<TopicPartition, Member>,
    /// How many members are [`Member::behind`].
    pub(super) behind: usize,
    /// Partitions that joined, left or changed since the last Fetch: with
    /// a fetch session, those an incremental Fetch lists or forgets.
    pub(super) changed: BTreeSet<TopicPartition>,
}

impl Parked {
    /// `tp` joins as `member` (or is sent anew, replacing what it was).
    pub(super) fn join(&mut self, tp: &TopicPartition, member: Member) {
        self.behind += usize::from(member.behind);
        if let Some(old) = self.members.insert(tp.clone(), member) {
            self.behind -= usize::from(old.behind);
        }
        self.changed.insert(tp.clone());
    }

    /// A member an answer carried stays, `behind` its high watermark or
    /// not.
    pub(super) fn still(&mut self, tp: &TopicPartition, behind: bool) {
        if let Some(m) = self.members.get_mut(tp) {
            self.behind = self.behind + usize::from(behind) - usize::from(m.behind);
            m.behind = behind;
        }
    }

    /// `tp` leaves; returns what it was, if it was a member.
    pub(super) fn leave(&mut self, tp: &TopicPartition) -> Option<Member> {
        let member = self.members.remove(tp)?;
        self.behind -= usize::from(member.behind);
        self.changed.insert(tp.clone());
        Some(member)
    }

    /// Every member leaves (the target's Fetch failed as a whole);
    /// returns them.
    pub(super) fn release_all(&mut self) -> BTreeMap<TopicPartition, Member> {
        let members = std::mem::take(&mut self.members);
        self.behind = 0;
        self.changed.extend(members.keys().cloned());
        members
    }

    /// The partitions that joined, left or changed since this was last
    /// called (the last Fetch).
    pub(super) fn take_changed(&mut self) -> BTreeSet<TopicPartition> {
        std::mem::take(&mut self.changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(rank: i64, behind: bool) -> Member {
        Member {
            rank,
            generation: 1,
            entry: SessionEntry {
                topic_id: [1; 16],
                fetch_offset: rank,
                max_bytes: 100,
                leader_epoch: 0,
                last_fetched_epoch: -1,
            },
            behind,
        }
    }

    #[test]
    fn it_counts_the_members_behind_as_they_join_stay_and_leave() {
        let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        let mut p = Parked::default();
        p.join(&a, member(1, true));
        p.join(&b, member(2, false));
        assert_eq!(p.behind, 1);
        // Joining again replaces: still one behind.
        p.join(&a, member(3, true));
        assert_eq!((p.members.len(), p.behind), (2, 1));
        p.still(&b, true);
        assert_eq!(p.behind, 2);
        p.still(&a, false);
        assert_eq!(p.behind, 1);
        assert_eq!(p.leave(&b).map(|m| m.rank), Some(2));
        assert_eq!(p.behind, 0);
        assert!(p.leave(&b).is_none());
        // Staying as what is not a member changes nothing.
        p.still(&b, true);
        assert_eq!(p.behind, 0);
    }

    #[test]
    fn what_joined_or_left_is_changed_until_taken() {
        let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        let mut p = Parked::default();
        p.join(&a, member(1, true));
        p.join(&b, member(2, true));
        assert_eq!(p.take_changed(), [a.clone(), b.clone()].into());
        p.still(&a, false);
        assert!(p.take_changed().is_empty(), "staying is no change");
        p.leave(&a);
        assert_eq!(p.take_changed(), [a.clone()].into());
        let released = p.release_all();
        assert_eq!(released.keys().collect::<Vec<_>>(), [&b]);
        assert_eq!((p.members.len(), p.behind), (0, 0));
        assert_eq!(p.take_changed(), [b].into());
    }
}
