//! Position validation after a leader change (KIP-320): a position that
//! carries the leader epoch of the record before it is checked against
//! the leader (OffsetForLeaderEpoch) before it is fetched from under an
//! epoch it was not fetched under yet, and a log truncated below it
//! resets it or stops the partition ([`EpochEnd`]). A Fetch v12+
//! answer's `diverging_epoch` is read the same way.

use super::failure::Refusal;
use super::partition::PartitionState;
use super::position::{PosState, Position};
use super::{
    offsets, Around, Asked, FetchError, Fetcher, InFlight, OffsetReset, Planned, TopicPartition,
};
use crate::cluster::{Metadata, Response, Target};
use crate::protocol::messages::offset_for_leader_epoch::{
    EpochEndOffset, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use crate::protocol::{ApiKey, DecodeError, ErrorCode};
use std::collections::BTreeMap;
use std::time::Instant;

/// What becomes of a position once the leader says where its epoch ends
/// (`end`: epoch and end offset; `None` when the leader knows no such
/// epoch). The Java consumer's `SubscriptionState.maybeCompleteValidation`
/// (KIP-320):
///
/// - the end at or past the position: the position is good;
/// - the end below it: the log was truncated, records from the end on
///   differ from those delivered. With `auto.offset.reset`
///   earliest/latest the position moves back to the end offset (the
///   first offset that differs: nothing of the new log is skipped,
///   nothing it kept delivered twice); with `none`
///   [`FetchError::LogTruncation`] and the partition stops;
/// - no end known: the position cannot be placed in the new log;
///   earliest/latest reset as for an out-of-range offset, `none`
///   reports it as for a truncation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EpochEnd {
    /// The position is good.
    Valid,
    /// Truncated below it: the position moves back to `Position`.
    Truncated(Position),
    /// No end known: a reset under the policy.
    Reset,
    /// Truncated (or no end known) under `none`: the partition stops;
    /// the divergent end offset, when known.
    Halted(Option<i64>),
}

impl EpochEnd {
    /// Where the position `pos` goes under `policy` given the `end`.
    pub(super) fn of(pos: Position, end: Option<(i32, i64)>, policy: OffsetReset) -> EpochEnd {
        match end {
            Some((_, end_offset)) if end_offset >= pos.offset => EpochEnd::Valid,
            Some((end_epoch, end_offset)) if policy != OffsetReset::None => {
                EpochEnd::Truncated(Position {
                    offset: end_offset,
                    leader_epoch: Some(end_epoch),
                })
            }
            None if policy != OffsetReset::None => EpochEnd::Reset,
            _ => EpochEnd::Halted(end.map(|(_, o)| o)),
        }
    }
}

impl Fetcher {
    /// Moves positions whose leader epoch changed since they were last
    /// fetched under to `Validating` (KIP-320). Only positions that carry
    /// the epoch of the record before them can be checked (as the Java
    /// consumer: a plain `seek` carries none); the others just take the new
    /// epoch. Partitions with records buffered or a Fetch out are looked at
    /// once those are done: their position is still moving.
    /// Returns whether a position moved to `Validating`.
    pub(super) fn check_leader_epochs(&mut self, metadata: &Metadata) -> bool {
        let generation = self.metadata_generation;
        let mut moved = false;
        let Fetcher {
            partitions, dirty, ..
        } = self;
        for tp in dirty.iter() {
            let Some(st) = partitions.get_mut(tp) else {
                continue;
            };
            if !st.wants_epoch_check(generation) {
                continue;
            }
            let PosState::Valid(pos) = st.pos else {
                continue;
            };
            let current = offsets::leader_epoch(metadata, tp);
            if current < 0 || st.checked_epoch == Some(current) {
                st.epoch_agreed = generation.map(|g| (g, st.checked_epoch));
                continue;
            }
            match pos.leader_epoch {
                Some(epoch) => {
                    log::debug!(
                        "{tp}: leader epoch {current} is new to position {} (epoch {epoch}); validating it",
                        pos.offset
                    );
                    st.pos = PosState::Validating {
                        pos,
                        in_flight: false,
                    };
                    moved = true;
                }
                None => st.checked_epoch = Some(current),
            }
        }
        moved
    }

    /// One OffsetForLeaderEpoch (v2+: `current_leader_epoch` fences a stale
    /// leader) per leader for the positions to validate.
    pub(super) fn plan_validations(
        &mut self,
        now: Instant,
        metadata: &Metadata,
        out: &mut Planned,
    ) {
        // One pass over the dirty partitions, each looked up once: marked
        // in flight and put in its leader's request.
        let mut per_leader: BTreeMap<i32, (Vec<OffsetForLeaderTopic>, Asked)> = BTreeMap::new();
        for tp in &self.dirty {
            let Some(st) = self.partitions.get_mut(tp) else {
                continue;
            };
            if st.paused || st.backing_off(now) {
                continue;
            }
            let PosState::Validating {
                pos,
                in_flight: in_flight @ false,
            } = &mut st.pos
            else {
                continue;
            };
            let Some(leader) = metadata.leader(&tp.topic, tp.partition) else {
                continue;
            };
            *in_flight = true;
            let current = offsets::leader_epoch(metadata, tp);
            let partition = OffsetForLeaderPartition {
                partition: tp.partition,
                current_leader_epoch: current,
                leader_epoch: pos.leader_epoch.unwrap_or(-1),
                ..OffsetForLeaderPartition::default()
            };
            let (topics, sent) = per_leader.entry(leader).or_default();
            match topics.iter_mut().find(|t| t.topic == tp.topic) {
                Some(t) => t.partitions.push(partition),
                None => topics.push(OffsetForLeaderTopic {
                    topic: tp.topic.clone(),
                    partitions: vec![partition],
                    ..OffsetForLeaderTopic::default()
                }),
            }
            sent.insert(tp.clone(), (st.generation, current));
        }
        for (broker, (topics, sent)) in per_leader {
            let token = self.token();
            let request = OffsetForLeaderEpochRequest {
                // A consumer (v3+): the answer stops at the high watermark.
                replica_id: -1,
                topics,
                ..OffsetForLeaderEpochRequest::default()
            };
            let asked = InFlight::Validate {
                broker,
                partitions: sent,
            };
            self.in_flight.insert(token, asked);
            out.push((Target::Broker(broker), Box::new(request), token));
        }
    }

    /// Reads the OffsetForLeaderEpoch answer of `broker` to what `sent`
    /// asked: settles each position still waiting for it, or backs it off.
    pub(super) fn handle_validation(
        &mut self,
        now: Instant,
        broker: i32,
        sent: Asked,
        response: &Response,
        refresh_metadata: &mut bool,
    ) {
        let mut answers = read_epoch_ends(response);
        if let Err(source) = &answers {
            log::warn!("cannot decode OffsetForLeaderEpoch response of broker {broker}: {source}");
        }
        let (partitions, mut around) = self.split();
        // Each partition the answer may still move (its request's
        // generation, still validating), looked up once.
        for (tp, (generation, epoch)) in &sent {
            let Some(st) = partitions.get_mut(tp) else {
                continue;
            };
            let PosState::Validating { pos, .. } = st.pos else {
                continue;
            };
            if st.generation != *generation {
                continue;
            }
            st.pos.clear_in_flight();
            // Undecodable, or left out of the answer: ask again later.
            let Some(answer) = answers.as_mut().ok().and_then(|a| a.remove(tp)) else {
                around.backoff.failed(&mut st.retry, now);
                continue;
            };
            let code = ErrorCode::from_code(answer.error_code);
            if code != ErrorCode::None {
                let refusal = Refusal {
                    api: ApiKey::OffsetForLeaderEpoch,
                    broker,
                    partition: tp,
                    code,
                };
                *refresh_metadata |=
                    around
                        .reports
                        .partition_error(&mut st.retry.streak, now, refusal);
                around.backoff.failed(&mut st.retry, now);
                continue;
            }
            let end = (answer.end_offset >= 0 && answer.leader_epoch >= 0)
                .then_some((answer.leader_epoch, answer.end_offset));
            around.apply_epoch_end(st, tp, pos, end, *epoch);
        }
        if let Err(source) = answers {
            self.reports.push(FetchError::Decode {
                broker,
                api: ApiKey::OffsetForLeaderEpoch,
                source,
            });
        }
    }

    /// A broker without OffsetForLeaderEpoch v2+ cannot be asked (KIP-320
    /// needs the current leader epoch in it): the positions `sent` asked
    /// about are taken as they are, as the Java consumer does with such
    /// brokers.
    pub(super) fn validation_unsupported(&mut self, sent: Asked) {
        for (tp, (generation, epoch)) in sent {
            if let Some(st) = self.partitions.get_mut(&tp) {
                self.dirty.insert(tp);
                if st.generation == generation {
                    if let PosState::Validating { pos, .. } = st.pos {
                        st.pos = PosState::Valid(pos);
                        st.checked_epoch = (epoch >= 0).then_some(epoch);
                    }
                }
            }
        }
    }
}

/// Settling a position: for OffsetForLeaderEpoch answers and a Fetch
/// answer's diverging epoch alike, on the partition's state looked up once.
impl Around<'_> {
    /// Settles a position against where the leader says the position's
    /// epoch ends (`end`: epoch and end offset; `None` when the leader
    /// knows no such epoch), from OffsetForLeaderEpoch or a Fetch's
    /// `diverging_epoch`, as [`EpochEnd`] says. `leader_epoch`: the
    /// leader's epoch when asked, which the position agrees with once
    /// settled.
    pub(super) fn apply_epoch_end(
        &mut self,
        st: &mut PartitionState,
        tp: &TopicPartition,
        pos: Position,
        end: Option<(i32, i64)>,
        leader_epoch: i32,
    ) {
        let policy = self.config.auto_offset_reset;
        let generation = self.generation();
        st.retry = Default::default();
        let checked = (leader_epoch >= 0).then_some(leader_epoch);
        match EpochEnd::of(pos, end, policy) {
            EpochEnd::Valid => {
                log::debug!("{tp}: position {} validated", pos.offset);
                st.pos = PosState::Valid(pos);
                st.checked_epoch = checked;
            }
            EpochEnd::Truncated(at) => {
                log::warn!(
                    "log truncation detected for {tp}: the leader's log diverges at offset {} (epoch {}), below the position {}; resetting the position to {}",
                    at.offset,
                    at.leader_epoch.unwrap_or(-1),
                    pos.offset,
                    at.offset
                );
                st.pos = PosState::Valid(at);
                st.checked_epoch = checked;
                // Answers to requests sent for the old position are stale.
                st.generation = generation;
            }
            EpochEnd::Reset => {
                log::warn!(
                    "log truncation detected for {tp}: the leader knows no end for the epoch of position {}; resetting to the {policy} offset",
                    pos.offset,
                );
                st.pos = PosState::auto_reset(policy);
                st.generation = generation;
            }
            EpochEnd::Halted(divergent_offset) => {
                log::warn!(
                    "log truncation detected for {tp} at position {} (divergent end offset {divergent_offset:?}) and auto.offset.reset is none",
                    pos.offset
                );
                st.pos = PosState::Halted(pos);
                self.reports.push(FetchError::LogTruncation {
                    partition: tp.clone(),
                    offset: pos.offset,
                    divergent_offset,
                });
            }
        }
    }
}

/// The partitions of an OffsetForLeaderEpoch answer, each with what it
/// says.
fn read_epoch_ends(
    response: &Response,
) -> Result<BTreeMap<TopicPartition, EpochEndOffset>, DecodeError> {
    let resp = if response.api == ApiKey::OffsetForLeaderEpoch {
        response.decode::<OffsetForLeaderEpochResponse>()?
    } else {
        return Err(DecodeError::InvalidValue {
            what: "response",
            reason: "not an OffsetForLeaderEpoch response",
        });
    };
    let mut answers = BTreeMap::new();
    for topic in resp.topics {
        for p in topic.partitions {
            answers.insert(TopicPartition::new(topic.topic.clone(), p.partition), p);
        }
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    const POS: Position = Position {
        offset: 100,
        leader_epoch: Some(4),
    };

    #[test]
    fn an_end_at_or_past_the_position_validates_it_under_any_policy() {
        for policy in [
            OffsetReset::Earliest,
            OffsetReset::Latest,
            OffsetReset::None,
        ] {
            assert_eq!(EpochEnd::of(POS, Some((4, 100)), policy), EpochEnd::Valid);
            assert_eq!(EpochEnd::of(POS, Some((5, 250)), policy), EpochEnd::Valid);
        }
    }

    #[test]
    fn an_end_below_the_position_moves_it_back_there_or_halts_under_none() {
        let back = Position {
            offset: 90,
            leader_epoch: Some(3),
        };
        for policy in [OffsetReset::Earliest, OffsetReset::Latest] {
            assert_eq!(
                EpochEnd::of(POS, Some((3, 90)), policy),
                EpochEnd::Truncated(back)
            );
        }
        assert_eq!(
            EpochEnd::of(POS, Some((3, 90)), OffsetReset::None),
            EpochEnd::Halted(Some(90))
        );
    }

    #[test]
    fn no_end_known_resets_or_halts_under_none() {
        for policy in [OffsetReset::Earliest, OffsetReset::Latest] {
            assert_eq!(EpochEnd::of(POS, None, policy), EpochEnd::Reset);
        }
        assert_eq!(
            EpochEnd::of(POS, None, OffsetReset::None),
            EpochEnd::Halted(None)
        );
    }
}
