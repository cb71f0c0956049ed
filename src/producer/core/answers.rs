//! The answers to the producer's requests: a producer id and epoch
//! (InitProducerId), and each Produce's batches delivered, sent again
//! (under the retry policy, in sequence order), split in two when too
//! large, or failed; a gap in a partition's sequences takes a new epoch
//! (KIP-360).

use super::super::accumulator::ProducerBatch;
use super::entry_of;
use super::front::lock;
use super::outcomes::{Part, Slot};
use super::requests::Pending;
use super::ProducerCore;
use crate::cluster::{BrokerAddress, LeaderHint, RequestError};
use crate::error::DeliveryError;
use crate::group::TopicPartition;
use crate::protocol::messages::init_producer_id::InitProducerIdResponse;
use crate::protocol::messages::produce::{PartitionProduceResponse, ProduceResponse};
use crate::protocol::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Errors a retry can cure (the Java client's `RetriableException`s for
/// Produce).
fn retriable(code: ErrorCode) -> bool {
    code.is_retriable()
}

/// What a retried batch's failure says of its partition's leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Leader {
    /// Nothing: sent again after the retry backoff.
    Same,
    /// It moved, to an unknown broker: metadata is refreshed, and the
    /// batch sent again after the retry backoff.
    Unknown,
    /// It moved to the broker the answer named (KIP-951), now in the
    /// metadata: sent there at once.
    Moved,
}

/// Errors that say the leader moved: the metadata is refreshed.
fn leader_moved(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NotLeaderOrFollower
            | ErrorCode::LeaderNotAvailable
            | ErrorCode::UnknownTopicOrPartition
            | ErrorCode::KafkaStorageError
            | ErrorCode::NotEnoughReplicas
    )
}

impl ProducerCore {
    pub(super) fn route_responses(&mut self, now: Instant) {
        while let Some((id, result)) = self.cluster.poll_response() {
            match self.requests.answered(id) {
                Some(Pending::InitPid) => self.handle_pid(now, result),
                Some(Pending::Produce {
                    broker,
                    batches,
                    sent,
                }) => {
                    for b in &batches {
                        self.idempotence.answered(&b.tp);
                        let c = entry_of(&mut self.counters, &b.tp);
                        c.latency += now.saturating_duration_since(sent);
                        c.answered += 1;
                    }
                    self.handle_produce(now, broker, batches, result);
                }
                None => {}
            }
        }
    }

    fn handle_pid(&mut self, now: Instant, result: Result<crate::cluster::Response, RequestError>) {
        let answer = result.map_err(|e| e.to_string()).and_then(|r| {
            r.decode::<InitProducerIdResponse>()
                .map_err(|e| e.to_string())
        });
        match answer {
            Ok(r) if r.error_code == 0 => {
                log::debug!("producer id {} epoch {}", r.producer_id, r.producer_epoch);
                // A new producer id or epoch: every partition's sequences
                // restart at 0, and batches waiting for a retry are
                // stamped anew in their order.
                self.idempotence.granted(r.producer_id, r.producer_epoch);
                let idempotence = &mut self.idempotence;
                let mut front = lock(&self.front);
                let waiting: Vec<TopicPartition> =
                    front.acc.partitions_with_data().cloned().collect();
                for tp in waiting {
                    let restamped = front
                        .acc
                        .restamp(&tp, |info| idempotence.restamp(&tp, info.record_count));
                    if let Err(e) = restamped {
                        log::warn!("{tp}: batches waiting for a retry could not be given the new epoch: {e}");
                    }
                }
            }
            other => {
                let code = other
                    .as_ref()
                    .ok()
                    .map(|r| ErrorCode::from_code(r.error_code));
                let why = match other {
                    Ok(r) => ErrorCode::from_code(r.error_code).to_string(),
                    Err(e) => e,
                };
                let unit = self.rng.unit();
                let delay = self
                    .idempotence
                    .refused(now, &self.settings.retry_backoff, unit);
                log::warn!("InitProducerId failed ({why}); asking again in {delay:?}");
                if let Some(
                    code @ (ErrorCode::ClusterAuthorizationFailed
                    | ErrorCode::TransactionalIdAuthorizationFailed),
                ) = code
                {
                    self.fail_waiting_for_pid(code);
                }
            }
        }
    }

    /// InitProducerId refused for want of rights (Kafka answers
    /// CLUSTER_AUTHORIZATION_FAILED to a principal with neither
    /// IdempotentWrite on the cluster nor Write on any topic): asking
    /// again does not cure it, so, as the Java producer does, the records
    /// waiting for a producer id fail with the code now rather than at
    /// `delivery.timeout.ms`. Nothing is in flight (nothing is sent without
    /// a producer id). A later record asks again, after the backoff, so
    /// an ACL granted meanwhile is picked up.
    fn fail_waiting_for_pid(&mut self, code: ErrorCode) {
        let batches = lock(&self.front).acc.abort_all();
        if batches.is_empty() {
            return;
        }
        let records: usize = batches.iter().map(|b| b.records.len()).sum();
        log::warn!("InitProducerId refused with {code}; the {records} records waiting for a producer id fail");
        let message = Some(
            "InitProducerId refused: an idempotent producer needs Write on a topic or IdempotentWrite on the cluster"
                .to_owned(),
        );
        for batch in batches {
            self.idempotence.forget(&batch.tp, batch.stamp);
            self.fail_batch(&batch, |tp| DeliveryError::Broker {
                topic: tp.topic.clone(),
                partition: tp.partition,
                code,
                message: message.clone(),
            });
        }
    }

    fn handle_produce(
        &mut self,
        now: Instant,
        broker: i32,
        batches: Vec<ProducerBatch>,
        result: Result<crate::cluster::Response, RequestError>,
    ) {
        if self.settings.acks == 0 && result.is_ok() {
            for batch in batches {
                self.complete(batch, -1, -1);
            }
            return;
        }
        let response = match result
            .map_err(|e| (e.is_retriable(), e.to_string()))
            .and_then(|r| {
                r.decode::<ProduceResponse>()
                    .map_err(|e| (true, format!("Produce answer unreadable: {e}")))
            }) {
            Ok(r) => r,
            Err((_, why)) => {
                // The request may or may not have been written: sent again
                // (with the same sequence numbers, so the broker keeps one
                // copy).
                for batch in batches {
                    self.retry(now, batch, why.clone(), Leader::Same);
                }
                return;
            }
        };
        if response.throttle_time_ms > 0 {
            // KIP-219: the broker answered at once and mutes our socket
            // for this long; nothing more goes to it until then (as the
            // Java client), so that nothing waits in its socket buffer.
            let wait = Duration::from_millis(response.throttle_time_ms as u64);
            log::debug!("broker {broker} throttles Produce for {wait:?} (quota)");
            self.requests.throttle(broker, now, wait);
        }
        let mut answers: BTreeMap<(String, i32), _> = BTreeMap::new();
        for topic in response.responses {
            for p in topic.partition_responses {
                answers.insert((topic.name.clone(), p.index), p);
            }
        }
        // KIP-951 (Produce v10+): a partition refused because the leader
        // moved comes with the new leader, taken at once when newer than
        // the metadata's.
        let hints: Vec<LeaderHint> = answers
            .iter()
            .filter(|(_, a)| {
                ErrorCode::from_code(a.error_code) == ErrorCode::NotLeaderOrFollower
                    && a.current_leader.leader_id >= 0
                    && a.current_leader.leader_epoch >= 0
            })
            .map(|((topic, partition), a)| LeaderHint {
                topic: topic.clone(),
                partition: *partition,
                leader: a.current_leader.leader_id,
                leader_epoch: a.current_leader.leader_epoch,
            })
            .collect();
        let moved: BTreeSet<(String, i32)> = if hints.is_empty() {
            BTreeSet::new()
        } else {
            let endpoints: Vec<BrokerAddress> = response
                .node_endpoints
                .into_iter()
                .map(|e| BrokerAddress {
                    id: e.node_id,
                    host: e.host,
                    port: e.port,
                    rack: e.rack,
                })
                .collect();
            self.cluster
                .apply_leader_hints(now, &hints, &endpoints)
                .into_iter()
                .collect()
        };
        for batch in batches {
            let key = (batch.tp.topic.clone(), batch.tp.partition);
            let moved = moved.contains(&key);
            let Some(answer) = answers.remove(&key) else {
                self.retry(
                    now,
                    batch,
                    "left out of the Produce answer".into(),
                    Leader::Same,
                );
                continue;
            };
            self.handle_partition_answer(now, batch, answer, moved);
        }
    }

    /// One batch's answer in a Produce response: delivered, sent again
    /// (after a new epoch, or split in two when too large; at once when
    /// the answer `moved` its leader, KIP-951), or failed.
    fn handle_partition_answer(
        &mut self,
        now: Instant,
        batch: ProducerBatch,
        answer: PartitionProduceResponse,
        moved: bool,
    ) {
        let code = ErrorCode::from_code(answer.error_code);
        match code {
            ErrorCode::None | ErrorCode::DuplicateSequenceNumber => {
                let append_time = answer.log_append_time_ms;
                self.complete(batch, answer.base_offset, append_time);
            }
            ErrorCode::OutOfOrderSequenceNumber | ErrorCode::UnknownProducerId => {
                // An earlier batch of the partition is not answered
                // yet (or failed, and a new epoch is on its way): this
                // one follows it again. Otherwise the broker lost this
                // producer's state (its records were deleted, say):
                // the producer takes a new epoch, whose sequences
                // start again at 0 (KIP-360), and sends it with those.
                if !self.idempotence.earlier_unresolved(&batch.tp, batch.stamp) {
                    log::warn!(
                        "{}: Produce refused with {code}; taking a new producer epoch",
                        batch.tp
                    );
                    self.idempotence.bump();
                }
                self.retry(now, batch, code.to_string(), Leader::Same);
            }
            // Too large for the broker (its `message.max.bytes`, or
            // the topic's `max.message.bytes`): split in two and sent
            // again, as the Java client does; a single record too
            // large fails below.
            ErrorCode::MessageTooLarge if batch.records.len() > 1 => {
                self.split(now, batch);
            }
            c if retriable(c) => {
                let leader = if moved {
                    Leader::Moved
                } else if leader_moved(c) {
                    Leader::Unknown
                } else {
                    Leader::Same
                };
                let why = match &answer.error_message {
                    Some(m) => format!("{c} ({m})"),
                    None => c.to_string(),
                };
                self.retry(now, batch, why, leader);
            }
            c => {
                log::warn!(
                    "{}: Produce refused with {c}{}; {} records fail",
                    batch.tp,
                    answer
                        .error_message
                        .as_deref()
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default(),
                    batch.records.len()
                );
                self.idempotence.forget(&batch.tp, batch.stamp);
                let message = answer.error_message.clone();
                self.fail_batch(&batch, |tp| DeliveryError::Broker {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    code: c,
                    message: message.clone(),
                });
            }
        }
    }

    /// Splits `batch`, refused as too large (MESSAGE_TOO_LARGE), into two
    /// halves queued in its place at once, each with the sequence numbers
    /// its records had (the broker wrote none of them), so the order and
    /// the exactly-once promise hold; each half is decided on its own. A
    /// half refused again is split again, down to single records.
    pub(super) fn split(&mut self, now: Instant, batch: ProducerBatch) {
        let halves = match batch.split() {
            Ok(halves) => halves,
            Err(e) => {
                log::warn!(
                    "{}: a batch refused as too large could not be split ({e}); {} records fail",
                    batch.tp,
                    batch.records.len()
                );
                self.fail_encoding(&batch, &e);
                return;
            }
        };
        log::info!(
            "{}: a batch of {} records ({} bytes) is too large for the broker (MESSAGE_TOO_LARGE); sending it again in two",
            batch.tp,
            batch.records.len(),
            batch.bytes.len()
        );
        let counters = entry_of(&mut self.counters, &batch.tp);
        counters.errors += 1;
        counters.splits += 1;
        let mut front = lock(&self.front);
        let slot = front.slots.remove(&batch.first());
        // The memory moves to the halves.
        front.acc.complete(&batch);
        for (half, start) in halves {
            self.idempotence.queued_again(&half.tp, half.stamp);
            if let Some(Part {
                outcome, start: s0, ..
            }) = slot.as_ref().and_then(|s| s.0.clone())
            {
                let from = s0 + start as u32;
                let part = Part {
                    outcome,
                    start: from,
                    end: from + half.records.len() as u32,
                };
                front.slots.insert(half.first(), Slot(Some(part)));
            }
            front.acc.reenqueue(half, now);
        }
        if let Some(mut slot) = slot {
            // Its records are the halves' now.
            slot.0 = None;
        }
    }

    /// Fails `batch`, which could not be encoded (or split), with
    /// `DeliveryError::Encode`; the gap in its sequences takes a new epoch.
    pub(super) fn fail_encoding(
        &mut self,
        batch: &ProducerBatch,
        e: &crate::records::RecordsError,
    ) {
        self.idempotence.forget(&batch.tp, batch.stamp);
        let reason = e.to_string();
        self.fail_batch(batch, |tp| DeliveryError::Encode {
            topic: tp.topic.clone(),
            partition: tp.partition,
            reason: reason.clone(),
        });
    }

    pub(super) fn retry(
        &mut self,
        now: Instant,
        batch: ProducerBatch,
        why: String,
        leader: Leader,
    ) {
        entry_of(&mut self.counters, &batch.tp).errors += 1;
        if leader == Leader::Unknown {
            self.cluster.request_metadata_refresh(now);
        }
        let timed_out =
            now.saturating_duration_since(batch.created) >= self.settings.delivery_timeout;
        // `attempts` counts sends, the first included: as the Java client,
        // a batch is sent up to `retries` + 1 times.
        if batch.attempts > self.settings.retries || timed_out {
            log::warn!(
                "{}: not delivered ({why}); {} records fail",
                batch.tp,
                batch.records.len()
            );
            self.idempotence.forget(&batch.tp, batch.stamp);
            let after = self.settings.delivery_timeout;
            self.fail_batch(&batch, |tp| DeliveryError::TimedOut {
                topic: tp.topic.clone(),
                partition: tp.partition,
                after,
                last: Some(why.clone()),
            });
            return;
        }
        log::debug!("{}: retrying a batch ({why})", batch.tp);
        // To a leader the answer named (KIP-951), at once: the backoff is
        // for a retry to the same place (as the Java producer, which skips
        // it when the leader changed). Only a newer leader epoch is taken,
        // so this cannot repeat without the leadership moving each time.
        let at_once = leader == Leader::Moved;
        let unit = if at_once { 0.0 } else { self.rng.unit() };
        let delay = self.retries.failed(
            now,
            &batch.tp,
            batch.records.len(),
            why,
            at_once,
            (&self.settings.retry_backoff, unit),
        );
        lock(&self.front).acc.reenqueue(batch, now + delay);
    }

    /// What the metadata says is wrong with `tp`'s leader, if anything: a
    /// partition without a leader, or a leader the metadata lists no
    /// address for (a broker that is down).
    pub(super) fn leader_trouble(&self, tp: &TopicPartition) -> Option<String> {
        let metadata = self.cluster.metadata();
        let Some(topic) = metadata.topics.get(&tp.topic) else {
            return Some(format!("no metadata for topic {}", tp.topic));
        };
        let Some(p) = topic.partitions.get(&tp.partition) else {
            return Some(format!("{tp} is not in the metadata"));
        };
        if p.leader < 0 {
            return Some(format!("{tp} has no leader ({})", p.error));
        }
        if !metadata.brokers.contains_key(&p.leader) {
            return Some(format!(
                "{tp}'s leader, broker {}, is not among the live brokers the metadata lists",
                p.leader
            ));
        }
        None
    }
}
