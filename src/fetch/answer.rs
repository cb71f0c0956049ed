//! What comes back: a request's answer ([`Fetcher::handle_response`]) or
//! its failure ([`Fetcher::handle_failure`]). A Fetch answer is read
//! against the members of its target as they were sent: each partition
//! it carries buffers records, moves its position, or fails; then stays
//! parked or leaves its target.

use super::buffer::{Buffer, MAX_PARTITION_OVERRIDE};
use super::failure::{Refusal, Retry};
use super::parked::Member;
use super::partition::PartitionState;
use super::position::{PosState, Position};
use super::replica::{leaves_replica, ReadReplica};
use super::request::{classify, ErrorClass, FIRST_TOPIC_ID_VERSION};
use super::{
    broker_of, Around, Asked, FetchError, FetchOutcome, FetchSent, FetchToken, Fetcher, InFlight,
    OffsetReset, TopicPartition,
};
use crate::cluster::{BrokerAddress, LeaderHint, RequestError, Response, Target};
use crate::protocol::messages::fetch::{
    AbortedTransaction as WireAborted, FetchResponse, FetchableTopicResponse, PartitionData,
};
use crate::protocol::{ApiKey, DecodeError, ErrorCode};
use crate::records::{self, PartialTail};
use crate::streak::Streak;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

impl Fetcher {
    /// Reads the response to a request planned by
    /// [`Fetcher::poll_requests`]: buffers records, moves resets along,
    /// and sorts errors into what the consumer must do.
    pub fn handle_response(
        &mut self,
        now: Instant,
        token: FetchToken,
        response: &Response,
    ) -> FetchOutcome {
        let mut outcome = FetchOutcome::default();
        let errors_before = self.reports.len();
        match self.in_flight.remove(&token) {
            Some(InFlight::Fetch(sent)) => self.handle_fetch(now, sent, response, &mut outcome),
            Some(InFlight::ListOffsets { broker, partitions }) => {
                self.dirty.extend(partitions.keys().cloned());
                let refresh = &mut outcome.refresh_metadata;
                self.handle_reset(now, broker, partitions, response, refresh)
            }
            Some(InFlight::Validate { broker, partitions }) => {
                self.dirty.extend(partitions.keys().cloned());
                let refresh = &mut outcome.refresh_metadata;
                self.handle_validation(now, broker, partitions, response, refresh)
            }
            None => log::debug!("response for unknown fetch token {token:?} ignored"),
        }
        outcome.errors = self.reports.len() - errors_before;
        outcome
    }

    /// The request of `token` got no response (connection lost, timeout,
    /// no common version, ...): its partitions back off and are asked
    /// again after `retry.backoff.ms`. Errors that will not pass by
    /// themselves are also reported.
    pub fn handle_failure(
        &mut self,
        now: Instant,
        token: FetchToken,
        error: &RequestError,
    ) -> FetchOutcome {
        let mut outcome = FetchOutcome::default();
        let generations = |asked: Asked| -> Vec<(TopicPartition, u64)> {
            asked.into_iter().map(|(tp, (g, _))| (tp, g)).collect()
        };
        let (broker, api, tps): (i32, ApiKey, Vec<(TopicPartition, u64)>) =
            match self.in_flight.remove(&token) {
                Some(InFlight::Fetch(sent)) => (
                    broker_of(sent.target),
                    ApiKey::Fetch,
                    self.fetch_failed(sent, error),
                ),
                Some(InFlight::ListOffsets { broker, partitions }) => {
                    (broker, ApiKey::ListOffsets, generations(partitions))
                }
                Some(InFlight::Validate { broker, partitions })
                    if matches!(error, RequestError::NoCommonVersion(_)) =>
                {
                    log::debug!(
                        "broker {broker} cannot validate positions ({error}); fetching without"
                    );
                    self.validation_unsupported(partitions);
                    return outcome;
                }
                Some(InFlight::Validate { broker, partitions }) => (
                    broker,
                    ApiKey::OffsetForLeaderEpoch,
                    generations(partitions),
                ),
                None => return outcome,
            };
        log::debug!("{api} request to broker {broker} failed: {error}");
        for (tp, generation) in tps {
            if let Some(st) = self.partitions.get_mut(&tp) {
                self.dirty.insert(tp);
                if st.generation == generation {
                    st.pos.clear_in_flight();
                    self.backoff.failed(&mut st.retry, now);
                }
            }
        }
        if !matches!(error, RequestError::Shutdown) {
            // A lost connection or timeout may mean the broker is gone
            // (the Java client refreshes metadata on disconnect); an
            // encoding failure may be a topic id the metadata lacked.
            outcome.refresh_metadata = true;
        }
        if !error.is_retriable() && !matches!(error, RequestError::Shutdown) {
            self.reports.push(FetchError::Request {
                broker,
                api,
                error: error.clone(),
            });
            outcome.errors = 1;
        }
        outcome
    }

    /// A Fetch sent as `sent` got no answer: its session ends (what the
    /// broker made of the request is unknown), a read replica's
    /// partitions go back to their leaders, and every member leaves the
    /// target. Returns them, with the generation each was sent under.
    fn fetch_failed(
        &mut self,
        sent: FetchSent,
        error: &RequestError,
    ) -> Vec<(TopicPartition, u64)> {
        self.sessions.lost(sent.target, sent.session.as_ref());
        if let Target::Replica(replica) = sent.target {
            // The Java consumer's `handleFetchFailure`: every partition
            // read from that replica goes back to its leader (after the
            // backoff).
            log::debug!(
                "fetching from read replica {replica} failed ({error}); fetching its partitions from their leaders"
            );
            self.drop_replica(replica);
        }
        self.release_target(sent.target)
            .into_iter()
            .map(|(tp, m)| (tp, m.generation))
            .collect()
    }

    /// Reads a Fetch answer: throttling, its session, its whole-response
    /// error, then each partition it carries.
    fn handle_fetch(
        &mut self,
        now: Instant,
        FetchSent { target, session }: FetchSent,
        response: &Response,
        outcome: &mut FetchOutcome,
    ) {
        let broker = broker_of(target);
        let resp = match decode_fetch(response) {
            Ok(r) => r,
            Err(source) => {
                log::warn!("cannot decode Fetch response of broker {broker}: {source}");
                self.reports.push(FetchError::Decode {
                    broker,
                    api: ApiKey::Fetch,
                    source,
                });
                self.back_off_target(now, target);
                return;
            }
        };
        if resp.throttle_time_ms > 0 {
            // KIP-219: the broker answered first and throttles after; do
            // not fetch from it again before the time is up.
            let wait = Duration::from_millis(resp.throttle_time_ms as u64);
            log::debug!("broker {broker} throttles fetches for {wait:?}");
            self.throttled.insert(broker, now + wait);
        }
        let top = ErrorCode::from_code(resp.error_code);
        if let Some(sent) = session {
            let none = BTreeMap::new();
            let members = self.parked.get(&target).map_or(&none, |p| &p.members);
            if !self
                .sessions
                .read_answer(target, sent, top, resp.session_id, members)
            {
                return;
            }
        }
        if top != ErrorCode::None {
            self.response_error(now, target, top, outcome);
            return;
        }
        self.reports.response_good(target);
        self.read_partitions(now, target, resp.responses, response.version, outcome);
        if !outcome.leader_hints.is_empty() {
            outcome.leader_endpoints = resp
                .node_endpoints
                .into_iter()
                .map(|e| BrokerAddress {
                    id: e.node_id,
                    host: e.host,
                    port: e.port,
                    rack: e.rack,
                })
                .collect();
        }
        // Partitions the response left out stay parked: the next Fetch
        // carries them again.
    }

    /// A Fetch answer from `target` with the whole-response error `top`:
    /// every member leaves the target and backs off; a read replica's
    /// partitions go back to their leaders (KIP-392).
    fn response_error(
        &mut self,
        now: Instant,
        target: Target,
        top: ErrorCode,
        outcome: &mut FetchOutcome,
    ) {
        let leader_error = classify(top) == ErrorClass::Leader;
        if let Target::Replica(replica) = target {
            self.drop_replica(replica);
            if leader_error || top == ErrorCode::OffsetOutOfRange {
                log::debug!(
                    "Fetch response of read replica {replica}: {top}; fetching from the leaders"
                );
                outcome.refresh_metadata |= leader_error;
                self.back_off_target(now, target);
                return;
            }
        }
        if leader_error {
            outcome.refresh_metadata = true;
        }
        self.reports.response_error(now, target, top);
        self.back_off_target(now, target);
    }

    /// Reads each partition of a good Fetch answer that its target's
    /// members hold (once each), then settles its membership.
    fn read_partitions(
        &mut self,
        now: Instant,
        target: Target,
        topics: Vec<FetchableTopicResponse>,
        version: i16,
        outcome: &mut FetchOutcome,
    ) {
        let by_id = version >= FIRST_TOPIC_ID_VERSION;
        let mut read = BTreeSet::new();
        for topic in topics {
            let name = if by_id {
                match self.topic_names.get(&topic.topic_id) {
                    Some(name) => name.clone(),
                    None => {
                        log::debug!("Fetch response names a topic id not asked for; ignored");
                        continue;
                    }
                }
            } else {
                topic.topic
            };
            for data in topic.partitions {
                let tp = TopicPartition::new(name.clone(), data.partition_index);
                // Each partition is read once, and only if it was asked
                // for, under the id it was asked for (a topic created
                // again under its name may be answered under its old id
                // too, until the broker's session forgets it).
                let Some(member) = self
                    .parked
                    .get(&target)
                    .and_then(|p| p.members.get(&tp))
                    .copied()
                    .filter(|m| !by_id || m.entry.topic_id == topic.topic_id)
                    .filter(|_| read.insert(tp.clone()))
                else {
                    continue;
                };
                self.handle_partition(now, target, tp.clone(), member, data, outcome);
                self.check_eof(&tp);
                self.settle_member(now, target, tp, &member);
            }
        }
    }

    /// After an answer carried `tp` (sent as `member` of `target`): one
    /// the answer left as it was sent (nothing buffered, no error, the
    /// same position: what a Fetch without a session says of most
    /// partitions) stays parked; any other leaves its target, to be
    /// looked at afresh.
    fn settle_member(&mut self, now: Instant, target: Target, tp: TopicPartition, member: &Member) {
        let max_bytes = self.config.max_partition_bytes;
        let stays = self.partitions.get(&tp).and_then(|st| {
            st.parked_as(now, target, member, max_bytes)
                .then(|| !st.caught_up())
        });
        let p = self.parked.get_mut(&target).expect("a member above");
        match stays {
            Some(behind) => p.still(&tp, behind),
            None => {
                p.leave(&tp);
                if let Some(st) = self.partitions.get_mut(&tp) {
                    if st.member == Some(target) {
                        st.member = None;
                    }
                    self.dirty.insert(tp);
                }
            }
        }
    }

    /// Whether an answer for `tp` sent as `s` still applies: the partition
    /// is assigned and [`PartitionState::answer_applies`].
    fn is_current(&self, tp: &TopicPartition, s: &Member) -> bool {
        self.partitions
            .get(tp)
            .is_some_and(|st| st.answer_applies(s))
    }

    /// Every member of `target` leaves it (its Fetch failed as a whole)
    /// and is marked dirty.
    fn release_target(&mut self, target: Target) -> BTreeMap<TopicPartition, Member> {
        let Some(p) = self.parked.get_mut(&target) else {
            return BTreeMap::new();
        };
        let members = p.release_all();
        for tp in members.keys() {
            if let Some(st) = self.partitions.get_mut(tp) {
                if st.member == Some(target) {
                    st.member = None;
                }
            }
            self.dirty.insert(tp.clone());
        }
        members
    }

    /// Like [`Fetcher::release_target`], and those whose answer would
    /// still have applied wait before they are asked again.
    fn back_off_target(&mut self, now: Instant, target: Target) {
        for (tp, m) in self.release_target(target) {
            if self.is_current(&tp, &m) {
                self.back_off(now, &tp);
            }
        }
    }

    /// Reads one partition of a good Fetch answer from `target`, sent as
    /// `s`: its error, its diverging epoch, or its records.
    fn handle_partition(
        &mut self,
        now: Instant,
        target: Target,
        tp: TopicPartition,
        s: Member,
        data: PartitionData,
        outcome: &mut FetchOutcome,
    ) {
        let broker = broker_of(target);
        let code = ErrorCode::from_code(data.error_code);
        // Looked up once, for the checks and `accept` alike: every
        // partition of every answer passes here, and each lookup compares
        // topic names.
        let (partitions, mut around) = self.split();
        let Some(st) = partitions.get_mut(&tp).filter(|st| st.answer_applies(&s)) else {
            log::debug!(
                "stale fetch data for {tp} at offset {} ignored",
                s.entry.fetch_offset
            );
            return;
        };
        let PosState::Valid(pos) = st.pos else {
            return;
        };
        // An answer to a Fetch ahead of the records still waiting (see
        // `PartitionState::fetch_from`) is kept only for its records:
        // anything else it says is met again by the Fetch from the
        // position once those are taken.
        let ahead = st.buffer.is_some();
        let diverging = &data.diverging_epoch;
        let diverges = diverging.epoch >= 0 || diverging.end_offset >= 0;
        if ahead && (code != ErrorCode::None || diverges) {
            log::debug!(
                "fetch of {tp} ahead from offset {} (broker {broker}): {code}; dropped until its waiting records are taken",
                s.entry.fetch_offset
            );
            return;
        }
        let pos = if ahead {
            Position {
                offset: s.entry.fetch_offset,
                leader_epoch: pos.leader_epoch,
            }
        } else {
            pos
        };
        if matches!(target, Target::Replica(_)) && leaves_replica(code) {
            around.replica_refused(st, now, &tp, pos, broker, code, outcome);
        } else if code == ErrorCode::None && diverges {
            // Fetch v12+: the leader compared `last_fetched_epoch` with
            // its log and found it diverging (KIP-320, as the Java
            // consumer reads it): no records come, the position is
            // settled as an OffsetForLeaderEpoch answer would settle it.
            let end = (diverging.epoch >= 0 && diverging.end_offset >= 0)
                .then_some((diverging.epoch, diverging.end_offset));
            around.apply_epoch_end(st, &tp, pos, end, s.entry.leader_epoch);
        } else if code != ErrorCode::None {
            around.partition_refused(st, now, tp, pos, broker, &data, outcome);
        } else {
            let lease = around.config.replica_lease;
            if accept(st, now, target, &tp, &data, lease) {
                *around.replicas = true;
            }
            let aborted = &data.aborted_transactions;
            if let Some(set) = data.records.filter(|b| !b.is_empty()) {
                let aborted = aborted_transactions(aborted);
                let arrived = Arrived {
                    pos,
                    ahead,
                    max_bytes: s.entry.max_bytes,
                    set,
                    aborted: &aborted,
                };
                around.buffer_records(st, tp, arrived, outcome);
            }
        }
    }
}

/// A record set a Fetch answer brought for a partition: fetched from
/// `pos`, `ahead` of the records waiting or not, asked with the partition
/// limit `max_bytes`, with the answer's aborted transactions.
struct Arrived<'a> {
    pos: Position,
    ahead: bool,
    max_bytes: i32,
    set: Bytes,
    aborted: &'a [records::AbortedTransaction],
}

/// The handlers of one partition's part of a Fetch answer: each gets the
/// partition's state, looked up once by [`Fetcher::handle_partition`].
impl Around<'_> {
    /// KIP-392, as the Java consumer's `FetchCollector`: a read replica
    /// answered `code` for `tp` at `pos`, one that sends the partition
    /// back to its leader ([`leaves_replica`]), which names a replica
    /// again if it still prefers one. It waits `retry.backoff.ms` first
    /// (the Java consumer does not), so that a leader that keeps naming a
    /// replica that keeps failing is not asked in a tight loop.
    #[allow(clippy::too_many_arguments)]
    fn replica_refused(
        &mut self,
        st: &mut PartitionState,
        now: Instant,
        tp: &TopicPartition,
        pos: Position,
        broker: i32,
        code: ErrorCode,
        outcome: &mut FetchOutcome,
    ) {
        log::debug!(
            "fetch of {tp} at {} from read replica {broker}: {code}; fetching from the leader",
            pos.offset
        );
        st.replica = None;
        if code == ErrorCode::FencedLeaderEpoch {
            st.checked_epoch = None;
        }
        outcome.refresh_metadata |= code != ErrorCode::OffsetOutOfRange;
        self.backoff.failed(&mut st.retry, now);
    }

    /// A partition error in a Fetch answer (not from a read replica that
    /// the partition leaves): a leader epoch that differs, an offset out
    /// of range (a reset, or a stop under `none`), or any other error
    /// (reported when due, retried after a backoff).
    #[allow(clippy::too_many_arguments)]
    fn partition_refused(
        &mut self,
        st: &mut PartitionState,
        now: Instant,
        tp: TopicPartition,
        pos: Position,
        broker: i32,
        data: &PartitionData,
        outcome: &mut FetchOutcome,
    ) {
        let code = ErrorCode::from_code(data.error_code);
        let policy = self.config.auto_offset_reset;
        // KIP-951 (Fetch v12+ carries it, brokers fill it from Kafka 3.7):
        // the broker names the partition's current leader; it is used at
        // once if newer than ours, without waiting for metadata.
        let leader = &data.current_leader;
        let hinted = matches!(
            code,
            ErrorCode::NotLeaderOrFollower | ErrorCode::FencedLeaderEpoch
        ) && leader.leader_id >= 0
            && leader.leader_epoch >= 0;
        if hinted {
            log::debug!(
                "fetch of {tp} from broker {broker}: {code}; the broker names leader {} (epoch {})",
                leader.leader_id,
                leader.leader_epoch
            );
            outcome.leader_hints.push(LeaderHint {
                topic: tp.topic.clone(),
                partition: tp.partition,
                leader: leader.leader_id,
                leader_epoch: leader.leader_epoch,
            });
        }
        match code {
            ErrorCode::FencedLeaderEpoch | ErrorCode::UnknownLeaderEpoch => {
                // Our leader epoch and the broker's differ: a leader
                // change we have not seen yet, or one the broker has not.
                // Whichever epoch the metadata gives next, the position
                // is validated against it before fetching on (KIP-320).
                log::debug!("fetch of {tp} from broker {broker}: {code}; validating the position against the next leader epoch");
                st.checked_epoch = None;
                // UNKNOWN_LEADER_EPOCH: the broker is behind our epoch;
                // the metadata is asked for only if it stays behind.
                let behind = code == ErrorCode::UnknownLeaderEpoch
                    && Streak::note(&mut st.retry.streak, code, now, self.backoff.max_gap())
                        .failures()
                        == 1;
                outcome.refresh_metadata |= !hinted && !behind;
                self.backoff.failed(&mut st.retry, now);
            }
            ErrorCode::OffsetOutOfRange if policy == OffsetReset::None => {
                log::info!(
                    "fetch offset {} is out of range for {tp} (log start {}, high watermark {}); auto.offset.reset is none",
                    pos.offset,
                    data.log_start_offset,
                    data.high_watermark
                );
                st.pos = PosState::Halted(pos);
                self.reports.push(FetchError::OffsetOutOfRange {
                    partition: tp,
                    offset: pos.offset,
                });
            }
            ErrorCode::OffsetOutOfRange => {
                log::info!(
                    "fetch offset {} is out of range for {tp} (log start {}, high watermark {}); resetting to the {policy} offset",
                    pos.offset,
                    data.log_start_offset,
                    data.high_watermark,
                );
                st.pos = PosState::auto_reset(policy);
                // Whatever was sent for the old position is stale.
                st.generation = self.generation();
            }
            other => {
                let refusal = Refusal {
                    api: ApiKey::Fetch,
                    broker,
                    partition: &tp,
                    code: other,
                };
                let refresh = self
                    .reports
                    .partition_error(&mut st.retry.streak, now, refusal);
                outcome.refresh_metadata |= refresh && !hinted;
                self.backoff.failed(&mut st.retry, now);
            }
        }
    }

    /// Buffers the record set `set` fetched for `tp` from `pos` (`ahead`
    /// of the records waiting, or from the position; `max_bytes`: the
    /// partition limit it was asked with): its records wait for
    /// `take_records`; a set with nothing to deliver moves the position
    /// past it; one that held only part of a batch too large for the
    /// limit has it asked for with a larger one.
    fn buffer_records(
        &mut self,
        st: &mut PartitionState,
        tp: TopicPartition,
        arrived: Arrived<'_>,
        outcome: &mut FetchOutcome,
    ) {
        let Arrived {
            pos,
            ahead,
            max_bytes,
            set,
            aborted,
        } = arrived;
        *self.next_buffer += 1;
        let decoding = (&self.decoders.checking, self.config.isolation);
        let arrival = Buffer::arrive(&tp, *self.next_buffer, set, aborted, pos.offset, decoding);
        if arrival.lazy.is_some() && self.config.check_crcs {
            self.crcs_pending.insert(tp.clone());
        }
        if ahead {
            // Nothing to deliver (a batch cut short, control batches
            // only): the Fetch from the position meets it again.
            if !arrival.nothing_to_deliver() {
                st.stats.records_fetched += arrival.decoded_now as u64;
                st.ahead = Some(Box::new(arrival.buffer));
            }
            return;
        }
        st.stats.records_fetched += arrival.decoded_now as u64;
        if arrival.whole_batch || arrival.lazy.is_some() {
            st.size_override = None;
        } else if arrival.buffer.error.is_none() {
            if let Some(tail) = arrival.partial_tail {
                self.partial_batch(st, &tp, pos, max_bytes, tail);
                return;
            }
        }
        if arrival.nothing_to_deliver() {
            // Nothing to deliver: move past control batches, aborted
            // transactions and compacted gaps now.
            let pos = Position {
                offset: arrival.buffer.next_offset,
                leader_epoch: pos.leader_epoch,
            };
            st.pos = match arrival.buffer.error {
                Some(e) => {
                    self.reports.push(e);
                    PosState::Halted(pos)
                }
                None => PosState::Valid(pos),
            };
            return;
        }
        outcome.records_buffered += arrival.records();
        st.buffer = Some(Box::new(arrival.buffer));
        self.ready.push_back(tp);
    }

    /// Only part of one batch came for `tp` at `pos`. When it is larger
    /// than the partition limit asked (`max_bytes`), ask for its size (a
    /// broker that keeps to KIP-74 sends a first batch whole anyway);
    /// when it is larger than this client takes, stop and say so. One cut
    /// by the response's `max_bytes` is just asked for again.
    fn partial_batch(
        &mut self,
        st: &mut PartitionState,
        tp: &TopicPartition,
        pos: Position,
        max_bytes: i32,
        tail: PartialTail,
    ) {
        match tail.declared_size {
            Some(size) if size > max_bytes.max(0) as usize => {
                if size <= MAX_PARTITION_OVERRIDE {
                    log::debug!("{tp}: a {size}-byte batch at offset {} did not fit; fetching it with a larger limit", pos.offset);
                    st.size_override = Some(size as i32);
                    *self.front_rank -= 1;
                    st.rank = *self.front_rank;
                } else {
                    self.reports.push(FetchError::RecordTooLarge {
                        partition: tp.clone(),
                        offset: pos.offset,
                        size: Some(size),
                    });
                    st.pos = PosState::Halted(pos);
                }
            }
            // Cut by the response's max_bytes: try again.
            _ => {}
        }
    }
}

/// `response` read as a Fetch answer.
fn decode_fetch(response: &Response) -> Result<FetchResponse, DecodeError> {
    if response.api == ApiKey::Fetch {
        response.decode::<FetchResponse>()
    } else {
        Err(DecodeError::InvalidValue {
            what: "response",
            reason: "not a Fetch response",
        })
    }
}

/// The aborted transactions of a partition's answer (read_committed).
fn aborted_transactions(aborted: &Option<Vec<WireAborted>>) -> Vec<records::AbortedTransaction> {
    aborted
        .iter()
        .flatten()
        .map(|t| records::AbortedTransaction {
            producer_id: t.producer_id,
            first_offset: t.first_offset,
        })
        .collect()
}

/// What a good answer for `tp` from `target` says besides its records:
/// the failures are over, the high watermark and last stable offset, the
/// bytes fetched, and the preferred read replica (KIP-392) the leader
/// names, for `lease`. True when it names a read replica.
fn accept(
    st: &mut PartitionState,
    now: Instant,
    target: Target,
    tp: &TopicPartition,
    data: &PartitionData,
    lease: Duration,
) -> bool {
    st.retry = Retry::default();
    st.high_watermark = (data.high_watermark >= 0).then_some(data.high_watermark);
    st.last_stable_offset = (data.last_stable_offset >= 0).then_some(data.last_stable_offset);
    if let Some(b) = &data.records {
        st.stats.bytes_fetched += b.len() as u64;
    }
    let named = data.preferred_read_replica;
    match ReadReplica::named(st.replica, target, named, now + lease) {
        None => false,
        Some(None) => {
            st.replica = None;
            false
        }
        Some(Some(replica)) => {
            log::debug!(
                "{tp}: broker {} names broker {named} as the preferred read replica for {lease:?}",
                broker_of(target)
            );
            st.replica = Some(replica);
            true
        }
    }
}
