//! What goes to the application: records taken from the buffers
//! ([`Fetcher::take_records`], or [`Fetcher::take_ready`] and
//! [`Fetcher::put_decoded`] with the decoding done elsewhere), positions
//! moving as they are, the end of a partition reached, and the errors
//! queued ([`Fetcher::take_errors`]).

use super::buffer::{crcs_hold, Buffer, DecodeJob, Decoded};
use super::partition::PartitionState;
use super::position::{PosState, Position};
use super::{Around, ConsumerRecord, FetchError, Fetcher, TopicPartition};
use std::sync::Arc;

impl Fetcher {
    /// Whether record sets wait for [`Fetcher::check_pending_crcs`].
    pub fn has_pending_crcs(&self) -> bool {
        !self.crcs_pending.is_empty()
    }

    /// Checks the CRC-32C of every large record set fetched since the
    /// last call, so that taking its records parses them without checking
    /// them again. A driver calls it after sending the requests
    /// [`Fetcher::poll_requests`] planned, so that the next Fetch goes out
    /// before the check; without it (or before it), [`Fetcher::take_records`]
    /// checks each batch as it parses it. A set whose check fails is
    /// parsed the same way: its records before the faulty batch are
    /// returned, then the partition stops with
    /// [`FetchError::CorruptRecords`] naming it.
    pub fn check_pending_crcs(&mut self) {
        for tp in std::mem::take(&mut self.crcs_pending) {
            let Some(st) = self.partitions.get_mut(&tp) else {
                continue;
            };
            // A set checked already is skipped; one that failed is looked
            // at again only when its partition brings another.
            for buffer in [st.buffer.as_mut(), st.ahead.as_mut()]
                .into_iter()
                .flatten()
                .filter(|b| !b.crcs_checked)
            {
                buffer.crcs_checked = crcs_hold(&buffer.undecoded);
            }
        }
    }

    /// Up to `max` records (`max.poll.records`), advancing positions past
    /// them. Partitions take turns: one with records left after its turn
    /// goes to the back of the line, so a busy partition cannot hold the
    /// others back. Paused partitions keep their records for later.
    ///
    /// Large record sets are decoded here as their records are wanted; a
    /// caller that must not hold the fetcher meanwhile uses
    /// [`Fetcher::take_ready`] and [`Fetcher::put_decoded`], which this
    /// runs in turn.
    pub fn take_records(&mut self, max: usize) -> Vec<ConsumerRecord> {
        let mut out = Vec::new();
        loop {
            let jobs = self.take_ready(max, &mut out);
            if jobs.is_empty() {
                return out;
            }
            for job in jobs {
                self.put_decoded(job.run());
            }
        }
    }

    /// [`Fetcher::take_records`] without decoding: adds to `out` up to
    /// `max` of the records decoded already, and returns the chunks to
    /// decode next (for partitions whose decoded records ran out), to run
    /// anywhere ([`DecodeJob::run`]) and hand back with
    /// [`Fetcher::put_decoded`]; then take again. A partition whose chunk
    /// is out is skipped until it is back. A chunk is handed out also when
    /// the records taken reached `max`, so that once it is back the
    /// fetcher knows whether the partition's buffer is used up (and the
    /// partition can be fetched again).
    pub fn take_ready(&mut self, max: usize, out: &mut Vec<ConsumerRecord>) -> Vec<DecodeJob> {
        let mut jobs = Vec::new();
        let mut passed = 0;
        let (partitions, mut around) = self.split();
        while out.len() < max && passed < around.ready.len() {
            let Some(tp) = around.ready.pop_front() else {
                break;
            };
            let Some(st) = partitions.get_mut(&tp) else {
                continue;
            };
            let Some(buffer) = st.buffer.as_mut() else {
                continue;
            };
            if st.paused || buffer.decoding {
                around.ready.push_back(tp);
                passed += 1;
                continue;
            }
            passed = 0;
            let PosState::Valid(mut pos) = st.pos else {
                st.drop_buffered();
                *around.drained += 1;
                around.dirty.insert(tp);
                continue;
            };
            let taken = take_from(buffer, &mut pos, &st.topic, tp.partition, max, out);
            if taken > 0 {
                *around.next_rank += 1;
                st.rank = *around.next_rank;
            }
            st.stats.records_consumed += taken;
            st.pos = PosState::Valid(pos);
            if buffer.records.len() > 0 {
                around.ready.push_back(tp);
            } else if buffer.error.is_none() && !buffer.undecoded.is_empty() {
                buffer.decoding = true;
                jobs.push(DecodeJob {
                    tp: tp.clone(),
                    buffer: buffer.id,
                    decoder: *around.decoders.get(buffer.crcs_checked),
                    isolation: around.config.isolation,
                    undecoded: buffer.undecoded.clone(),
                    from: pos.offset,
                    floor: buffer.next_offset,
                });
                around.ready.push_back(tp);
            } else if around.finish_buffer(st, &tp) {
                around.ready.push_back(tp);
            }
        }
        jobs
    }

    /// Puts a chunk decoded by a [`DecodeJob`] back into the buffer it
    /// came from; dropped if that buffer is gone meanwhile (a seek, a new
    /// assignment: its records would have been dropped too).
    pub fn put_decoded(&mut self, decoded: Decoded) {
        let (partitions, mut around) = self.split();
        let Some(st) = partitions.get_mut(&decoded.tp) else {
            return;
        };
        let Some(buffer) = st.buffer.as_mut().filter(|b| b.id == decoded.buffer) else {
            return;
        };
        buffer.decoding = false;
        st.stats.records_fetched += decoded.records.len() as u64;
        buffer.records = decoded.records.into_iter();
        buffer.next_offset = buffer.next_offset.max(decoded.next_offset);
        buffer.undecoded = decoded.rest;
        if decoded.error.is_some() {
            buffer.error = decoded.error;
        }
        // Known used up now, not at the next take: the partition is
        // fetchable again. (It is in `ready` since its chunk went out.)
        if buffer.used_up() && matches!(st.pos, PosState::Valid(_)) {
            let follows = around.finish_buffer(st, &decoded.tp);
            if !follows {
                around.ready.retain(|t| t != &decoded.tp);
            }
        }
    }

    /// With `enable.partition.eof`: says once that `tp` reached the end
    /// of its log ([`Around::check_eof`]).
    pub(super) fn check_eof(&mut self, tp: &TopicPartition) {
        let (partitions, mut around) = self.split();
        if let Some(st) = partitions.get_mut(tp) {
            around.check_eof(st, tp);
        }
    }

    /// How many partition buffers [`Fetcher::take_records`] has emptied so
    /// far. A change means a partition can be fetched again: taking records
    /// that leave every buffer non-empty changes nothing to fetch.
    pub fn drained(&self) -> u64 {
        self.drained
    }

    /// Whether [`Fetcher::take_records`] would return records now (records
    /// of paused partitions do not count).
    pub fn has_buffered(&self) -> bool {
        self.ready.iter().any(|tp| {
            self.partitions
                .get(tp)
                .is_some_and(|st| !st.paused && st.buffer.as_ref().is_some_and(|b| !b.decoding))
        })
    }

    /// Whether [`Fetcher::take_errors`] has something to say.
    pub fn has_errors(&self) -> bool {
        !self.reports.is_empty() || self.no_offset_unreported
    }

    /// The errors since the last call, oldest first. A
    /// [`FetchError::NoOffset`] names every partition without a committed
    /// offset under `auto.offset.reset=none`; it comes again when another
    /// partition joins them.
    pub fn take_errors(&mut self) -> Vec<FetchError> {
        let mut out = Vec::new();
        if std::mem::take(&mut self.no_offset_unreported)
            && self
                .partitions
                .values()
                .any(|st| st.pos == PosState::NoOffset { reported: false })
        {
            let mut partitions = Vec::new();
            for (tp, st) in &mut self.partitions {
                if let PosState::NoOffset { reported } = &mut st.pos {
                    *reported = true;
                    partitions.push(tp.clone());
                }
            }
            out.push(FetchError::NoOffset { partitions });
        }
        self.reports.take_into(&mut out);
        out
    }
}

/// Adds to `out` (up to `max` in all) the records of `buffer` at or after
/// `pos`, moving `pos` past each. Returns how many it added.
fn take_from(
    buffer: &mut Buffer,
    pos: &mut Position,
    topic: &Arc<str>,
    partition: i32,
    max: usize,
    out: &mut Vec<ConsumerRecord>,
) -> u64 {
    let mut taken = 0;
    while out.len() < max {
        let Some(record) = buffer.records.next() else {
            break;
        };
        // The one place records leave: never below the position, so
        // offsets handed out only increase.
        if record.offset() < pos.offset {
            continue;
        }
        pos.offset = record.offset().saturating_add(1);
        pos.leader_epoch = record.as_record().leader_epoch().or(pos.leader_epoch);
        out.push(ConsumerRecord {
            topic: topic.clone(),
            partition,
            record,
        });
        taken += 1;
    }
    taken
}

/// Ending a partition's buffer, and saying it reached the end of its
/// log, on the partition's state looked up once.
impl Around<'_> {
    /// Ends a partition's buffer whose records were all taken (its
    /// position [`PosState::Valid`]): the position moves past its last
    /// batch, its error (if any) is reported and halts the partition, and
    /// the answer fetched ahead follows on if it starts exactly there.
    /// Returns whether a buffer follows.
    pub(super) fn finish_buffer(&mut self, st: &mut PartitionState, tp: &TopicPartition) -> bool {
        let PosState::Valid(mut pos) = st.pos else {
            return false;
        };
        let Some(buffer) = st.buffer.take() else {
            return false;
        };
        self.dirty.insert(tp.clone());
        pos.offset = pos.offset.max(buffer.next_offset);
        let error = buffer.error;
        st.buffer = st
            .ahead
            .take()
            .filter(|next| error.is_none() && next.from == pos.offset);
        *self.drained += 1;
        st.pos = match error {
            Some(e) => {
                self.reports.push(e);
                PosState::Halted(pos)
            }
            None => PosState::Valid(pos),
        };
        let follows = st.buffer.is_some();
        if !follows {
            self.check_eof(st, tp);
        }
        follows
    }

    /// With `enable.partition.eof`: says once that `tp` reached the end
    /// of its log, when its position (with nothing buffered before it) is
    /// at the end the last answer gave (the last stable offset under
    /// `read_committed`) and that was not said at this position already.
    /// A paused partition says nothing: it is fetched, and says it, once
    /// resumed.
    /// It follows the errors and records taken before it.
    pub(super) fn check_eof(&mut self, st: &mut PartitionState, tp: &TopicPartition) {
        if !self.config.partition_eof {
            return;
        }
        let PosState::Valid(pos) = st.pos else {
            return;
        };
        let end = st.log_end(self.config.isolation);
        let at_end = end.is_some_and(|end| pos.offset >= end);
        if !at_end
            || st.paused
            || st.buffer.is_some()
            || st.ahead.is_some()
            || st.eof_at == Some(pos.offset)
        {
            return;
        }
        st.eof_at = Some(pos.offset);
        self.reports.push(FetchError::PartitionEof {
            partition: tp.clone(),
            offset: pos.offset,
        });
    }
}
