//! What the fetcher holds of one assigned partition ([`PartitionState`]):
//! its position, pause, buffered records, retry wait, the target it is
//! parked at, the leader epoch it agrees with and its read replica; and
//! the rules read off them (whether it is fetchable, from where, whether
//! a pass must look at it again).

use super::buffer::Buffer;
use super::failure::Retry;
use super::parked::Member;
use super::position::{PosState, Position};
use super::replica::ReadReplica;
use super::{PartitionCounters, TopicPartition};
use crate::cluster::{Metadata, Target};
use crate::records::IsolationLevel;
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug)]
pub(super) struct PartitionState {
    pub(super) topic: Arc<str>,
    /// Changes whenever the position is set from outside the fetch flow
    /// (assign, seek, reset): answers to requests sent before are stale.
    pub(super) generation: u64,
    /// Fetch order: lower first. A partition moves to the end when records
    /// of it are taken, so one busy partition cannot starve the others
    /// under `max_bytes`.
    pub(super) rank: i64,
    pub(super) paused: bool,
    pub(super) pos: PosState,
    pub(super) buffer: Option<Box<Buffer>>,
    /// The answer to a Fetch ahead of `buffer`: taken from once `buffer`
    /// is used up, if it starts where `buffer` ends.
    pub(super) ahead: Option<Box<Buffer>>,
    /// The target whose Fetches carry this partition (see `Parked`): it
    /// is in flight whenever that target has a Fetch out.
    pub(super) member: Option<Target>,
    pub(super) retry: Retry,
    /// A larger `partition_max_bytes` after a batch did not fit.
    pub(super) size_override: Option<i32>,
    /// The high watermark of the last good answer for this partition.
    pub(super) high_watermark: Option<i64>,
    /// The last stable offset of the last good answer (Fetch v4+).
    pub(super) last_stable_offset: Option<i64>,
    /// The position at which the end of the log was last reported
    /// (`enable.partition.eof`): said again only at another position.
    pub(super) eof_at: Option<i64>,
    /// Counters for [`Fetcher::partition_stats`](super::Fetcher::partition_stats).
    pub(super) stats: PartitionCounters,
    /// The leader epoch (from the metadata) the position is known to agree
    /// with: it was fetched, reset or validated under it. When the
    /// metadata shows another, the log may have been truncated by the
    /// leader change, and a position that carries an epoch is validated
    /// before it is fetched from again (KIP-320).
    pub(super) checked_epoch: Option<i32>,
    /// The metadata generation and `checked_epoch` at which the leader
    /// epoch was last found to agree: while both are the same, it still
    /// does (no lookup on every pass).
    pub(super) epoch_agreed: Option<(u64, Option<i32>)>,
    /// The preferred read replica the leader named (KIP-392), fetched from
    /// instead of the leader until its lease ends or it fails.
    pub(super) replica: Option<ReadReplica>,
}

impl PartitionState {
    /// Whether an answer to a Fetch sent as `s` still applies: nothing
    /// moved the position meanwhile (`generation`), and it was fetched
    /// from the position with no records waiting, or ahead of the records
    /// waiting (see [`PartitionState::fetch_from`]).
    pub(super) fn answer_applies(&self, s: &Member) -> bool {
        let from = s.entry.fetch_offset;
        self.generation == s.generation
            && match (&self.pos, &self.buffer) {
                (PosState::Valid(p), None) => p.offset == from,
                (PosState::Valid(_), Some(b)) => {
                    self.ahead.is_none() && b.end.map(|e| e.next_offset) == Some(from)
                }
                _ => false,
            }
    }

    /// A partition just assigned: it waits for its committed offset.
    /// `member`: the target its earlier self is still parked at, if any
    /// (assigned again before that membership ended: it takes it over).
    pub(super) fn new(
        tp: &TopicPartition,
        generation: u64,
        rank: i64,
        member: Option<Target>,
    ) -> Self {
        PartitionState {
            topic: Arc::from(tp.topic.as_str()),
            generation,
            rank,
            paused: false,
            pos: PosState::Initializing,
            buffer: None,
            ahead: None,
            member,
            retry: Retry::default(),
            size_override: None,
            high_watermark: None,
            last_stable_offset: None,
            eof_at: None,
            stats: PartitionCounters::default(),
            checked_epoch: None,
            epoch_agreed: None,
            replica: None,
        }
    }

    /// Sets the position from outside the fetch flow (a seek, a reset
    /// asked for) under a new `generation`: what was fetched or asked for
    /// the old one is dropped. Returns whether records were buffered.
    pub(super) fn set_position(&mut self, pos: PosState, generation: u64) -> bool {
        self.pos = pos;
        self.generation = generation;
        self.size_override = None;
        self.eof_at = None;
        self.checked_epoch = None;
        let had = self.buffer.is_some();
        self.drop_buffered();
        had
    }

    /// Whether its retry wait ended by `now` (and is still to be cleared).
    pub(super) fn retry_due(&self, now: Instant) -> bool {
        self.retry.due(now)
    }

    /// Whether [`Fetcher::check_leader_epochs`](super::Fetcher::check_leader_epochs) looks at its leader epoch
    /// under metadata `generation`: a valid position that is not paused,
    /// has nothing buffered and no Fetch out, and whose epoch was not
    /// found to agree under this generation and checked epoch.
    pub(super) fn wants_epoch_check(&self, generation: Option<u64>) -> bool {
        matches!(self.pos, PosState::Valid(_))
            && !self.paused
            && self.buffer.is_none()
            && self.member.is_none()
            && generation.is_none_or(|g| self.epoch_agreed != Some((g, self.checked_epoch)))
    }

    /// Whether it waits after a failure at `now`.
    pub(super) fn backing_off(&self, now: Instant) -> bool {
        self.retry.backing_off(now)
    }

    /// Whether the position has reached the last high watermark heard of
    /// (a Fetch for it would long-poll).
    pub(super) fn caught_up(&self) -> bool {
        matches!((self.pos, self.high_watermark), (PosState::Valid(pos), Some(hw)) if pos.offset >= hw)
    }

    /// Where a Fetch for this partition would start, if it is to be
    /// fetched now: at the position when nothing is buffered, or ahead of
    /// the buffered records (once per buffer) when the last answer showed
    /// more after them.
    pub(super) fn fetch_from(&self, now: Instant) -> Option<Position> {
        let PosState::Valid(pos) = self.pos else {
            return None;
        };
        if self.paused || self.member.is_some() || self.backing_off(now) {
            return None;
        }
        let Some(buffer) = &self.buffer else {
            return Some(pos);
        };
        let end = buffer.end?;
        let more = self.high_watermark.is_some_and(|hw| end.next_offset < hw);
        (self.ahead.is_none()
            && !buffer.ahead_sent
            && buffer.error.is_none()
            && end.next_offset > pos.offset
            && more)
            .then(|| Position {
                offset: end.next_offset,
                leader_epoch: (end.leader_epoch >= 0)
                    .then_some(end.leader_epoch)
                    .or(pos.leader_epoch),
            })
    }

    /// Drops every record fetched for this partition and not returned.
    pub(super) fn drop_buffered(&mut self) {
        self.buffer = None;
        self.ahead = None;
    }

    /// Whether it is still fetched as `member` of `target` says, after an
    /// answer: nothing buffered, no error or wait, the same position,
    /// generation, size and read replica.
    pub(super) fn parked_as(
        &self,
        now: Instant,
        target: Target,
        member: &Member,
        max_bytes: i32,
    ) -> bool {
        let same_replica = match (target, self.replica) {
            (Target::Broker(_), None) => true,
            (Target::Replica(r), Some(replica)) => replica.broker == r,
            _ => false,
        };
        self.member == Some(target)
            && same_replica
            && !self.paused
            && self.buffer.is_none()
            && !self.backing_off(now)
            && self.generation == member.generation
            && self.size_override.unwrap_or(max_bytes) == member.entry.max_bytes
            && matches!(self.pos, PosState::Valid(p)
                if p.offset == member.entry.fetch_offset
                    && p.leader_epoch.unwrap_or(-1) == member.entry.last_fetched_epoch)
    }

    /// Whether a pass of [`Fetcher::poll_requests`](super::Fetcher::poll_requests) must look at it again
    /// (it stays among the [`Fetcher`](super::Fetcher)'s `dirty` partitions): it waits
    /// for its target's Fetch to be answered, for a retry wait or a free
    /// target, or for a reset or validation to be asked. One that waits
    /// for the application (paused, records buffered, stopped by a fault)
    /// or for an answer is marked again by what changes it.
    pub(super) fn needs_look(&self, now: Instant) -> bool {
        if self.member.is_some() {
            return true;
        }
        // A reset is asked for even while paused.
        if self.pos.wants_reset() {
            return true;
        }
        if self.paused {
            return false;
        }
        match self.pos {
            PosState::Valid(_) => {
                self.buffer.is_none() || self.backing_off(now) || self.fetch_from(now).is_some()
            }
            pos => pos.wants_validation(),
        }
    }

    /// Where it is fetched from: its preferred read replica while it has
    /// one (KIP-392), else its leader; `None` while the metadata knows no
    /// leader (the Java consumer needs the leader either way: it carries
    /// the leader epoch sent along).
    pub(super) fn read_target(&self, tp: &TopicPartition, metadata: &Metadata) -> Option<Target> {
        let leader = metadata.leader(&tp.topic, tp.partition)?;
        Some(match self.replica {
            Some(r) => Target::Replica(r.broker),
            None => Target::Broker(leader),
        })
    }

    /// The end of its log as the last answer gave it: the last stable
    /// offset under `read_committed` (the high watermark when there is
    /// none), else the high watermark.
    pub(super) fn log_end(&self, isolation: IsolationLevel) -> Option<i64> {
        match isolation {
            IsolationLevel::ReadCommitted => self.last_stable_offset.or(self.high_watermark),
            IsolationLevel::ReadUncommitted => self.high_watermark,
        }
    }
}
