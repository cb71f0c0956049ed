//! Where a partition's position stands ([`PosState`]): waiting for its
//! committed offset, for a reset (ListOffsets) or a validation
//! (OffsetForLeaderEpoch, KIP-320), valid, or stopped; and the
//! [`Position`] itself.

use super::{OffsetReset, OffsetSpec, TopicPartition};

/// A position: the next offset to return, and the leader epoch of the
/// record before it (for OffsetCommit's `committed_leader_epoch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Position {
    pub(super) offset: i64,
    pub(super) leader_epoch: Option<i32>,
}

/// Where a partition's position stands.
///
/// ```text
///  assign ──> Initializing ──set_committed(Some)──────────────> Valid <──── seek
///                 │                                              │  ^
///                 ├─set_committed(None), policy earliest|latest─>│  │ ListOffsets answered
///                 │          Resetting <──── seek_to_*, OFFSET_OUT_OF_RANGE (policy)
///                 └─set_committed(None), policy none─> NoOffset  │
///                                                                └─> Halted (corrupt batch,
///                                                    batch too large, out of range with none)
///
///  Valid ──a leader epoch not fetched under yet──> Validating ──OffsetForLeaderEpoch──> Valid
///    (only a position that carries an epoch)           │  end offset below the position:
///                                                      ├─ policy earliest|latest ─> Valid at the end offset
///                                                      └─ policy none ─> Halted (LogTruncation)
///  NoOffset and Halted wait for a seek.
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PosState {
    /// Just assigned: the committed offset is wanted.
    Initializing,
    /// Waiting for ListOffsets. `auto` when `auto.offset.reset` caused it
    /// (logged at info), not the application.
    Resetting {
        spec: OffsetSpec,
        auto: bool,
        in_flight: bool,
    },
    /// No committed offset and `auto.offset.reset` none.
    NoOffset { reported: bool },
    /// Fetching from here.
    Valid(Position),
    /// Held back from fetching until the leader says where the position's
    /// epoch ends (OffsetForLeaderEpoch, KIP-320): the log may have been
    /// truncated below it by a leader change.
    Validating { pos: Position, in_flight: bool },
    /// Stopped at a fault that retrying cannot fix.
    Halted(Position),
}

impl PosState {
    /// A reset `auto.offset.reset` (`policy`: earliest or latest) asks
    /// for, not asked yet.
    pub(super) fn auto_reset(policy: OffsetReset) -> PosState {
        PosState::Resetting {
            spec: policy.spec(),
            auto: true,
            in_flight: false,
        }
    }

    /// Where a partition that waited for its committed offset goes with
    /// `committed` (offset and leader epoch; a negative offset counts as
    /// none): valid there, else a reset under `policy`, or with `none` no
    /// offset at all.
    pub(super) fn from_committed(
        tp: &TopicPartition,
        committed: Option<(i64, Option<i32>)>,
        policy: OffsetReset,
    ) -> PosState {
        match committed {
            Some((offset, leader_epoch)) if offset >= 0 => PosState::Valid(Position {
                offset,
                leader_epoch,
            }),
            _ => match policy {
                OffsetReset::Earliest | OffsetReset::Latest => {
                    log::debug!("{tp} has no committed offset; resetting to the {policy} offset");
                    PosState::auto_reset(policy)
                }
                OffsetReset::None => PosState::NoOffset { reported: false },
            },
        }
    }

    /// The position, when there is one: valid, being validated, or
    /// halted at it.
    pub(super) fn known(&self) -> Option<Position> {
        match *self {
            PosState::Valid(p) | PosState::Halted(p) | PosState::Validating { pos: p, .. } => {
                Some(p)
            }
            _ => None,
        }
    }

    /// Whether it waits for a ListOffsets not asked yet.
    pub(super) fn wants_reset(&self) -> bool {
        matches!(
            self,
            PosState::Resetting {
                in_flight: false,
                ..
            }
        )
    }

    /// Whether it waits for an OffsetForLeaderEpoch not asked yet.
    pub(super) fn wants_validation(&self) -> bool {
        matches!(
            self,
            PosState::Validating {
                in_flight: false,
                ..
            }
        )
    }

    /// Whether it wants a request of its leader: a Fetch (valid), or a
    /// reset or validation not asked yet.
    pub(super) fn wants_leader(&self) -> bool {
        matches!(self, PosState::Valid(_)) || self.wants_reset() || self.wants_validation()
    }

    /// The reset or validation asked for was answered (or failed): it may
    /// be asked again.
    pub(super) fn clear_in_flight(&mut self) {
        match self {
            PosState::Resetting { in_flight, .. } | PosState::Validating { in_flight, .. } => {
                *in_flight = false
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(offset: i64) -> Position {
        Position {
            offset,
            leader_epoch: Some(3),
        }
    }

    #[test]
    fn a_committed_offset_makes_a_valid_position_and_none_applies_the_policy() {
        let tp = TopicPartition::new("t", 0);
        let committed = Some((42, Some(3)));
        assert_eq!(
            PosState::from_committed(&tp, committed, OffsetReset::None),
            PosState::Valid(at(42))
        );
        for none in [None, Some((-1, None))] {
            assert_eq!(
                PosState::from_committed(&tp, none, OffsetReset::Earliest),
                PosState::Resetting {
                    spec: OffsetSpec::Earliest,
                    auto: true,
                    in_flight: false
                }
            );
            assert_eq!(
                PosState::from_committed(&tp, none, OffsetReset::Latest),
                PosState::auto_reset(OffsetReset::Latest)
            );
            assert_eq!(
                PosState::from_committed(&tp, none, OffsetReset::None),
                PosState::NoOffset { reported: false }
            );
        }
    }

    #[test]
    fn a_position_is_known_while_valid_validating_or_halted() {
        assert_eq!(PosState::Valid(at(1)).known(), Some(at(1)));
        let validating = PosState::Validating {
            pos: at(2),
            in_flight: true,
        };
        assert_eq!(validating.known(), Some(at(2)));
        assert_eq!(PosState::Halted(at(3)).known(), Some(at(3)));
        assert_eq!(PosState::Initializing.known(), None);
        assert_eq!(PosState::auto_reset(OffsetReset::Latest).known(), None);
        assert_eq!(PosState::NoOffset { reported: true }.known(), None);
    }

    #[test]
    fn a_request_answered_may_be_asked_again() {
        let mut reset = PosState::auto_reset(OffsetReset::Earliest);
        assert!(reset.wants_reset() && reset.wants_leader());
        if let PosState::Resetting { in_flight, .. } = &mut reset {
            *in_flight = true;
        }
        assert!(!reset.wants_reset() && !reset.wants_leader());
        reset.clear_in_flight();
        assert!(reset.wants_reset());

        let mut validating = PosState::Validating {
            pos: at(5),
            in_flight: true,
        };
        assert!(!validating.wants_validation() && !validating.wants_leader());
        validating.clear_in_flight();
        assert!(validating.wants_validation() && validating.wants_leader());

        let mut valid = PosState::Valid(at(5));
        valid.clear_in_flight();
        assert_eq!(valid, PosState::Valid(at(5)));
        assert!(valid.wants_leader());
        assert!(!PosState::Halted(at(5)).wants_leader());
    }
}
