//! Requests out: InitProducerId when a producer id or a new epoch is
//! needed, and Produce per leader, its batches drained from the
//! accumulator and stamped with their sequence numbers (idempotence).

use super::super::accumulator::{ProducerBatch, Stamp};
use super::entry_of;
use super::front::lock;
use super::{Pending, Pid, ProducerCore};
use crate::cluster::{RequestBody, Target};
use crate::group::TopicPartition;
use crate::protocol::messages::init_producer_id::InitProducerIdRequest;
use crate::protocol::messages::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use crate::protocol::{ApiKey, EncodeError, Message, Writer};
use std::collections::BTreeMap;
use std::time::Instant;

/// InitProducerId as this producer asks it: a broker too old to bump an
/// epoch (below v3, without `producer_id`/`producer_epoch` in the request)
/// is asked for a new producer id instead, as the Java client does.
#[derive(Debug)]
pub(super) struct InitPid(InitProducerIdRequest);

impl RequestBody for InitPid {
    fn api_key(&self) -> ApiKey {
        ApiKey::InitProducerId
    }

    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        if version < 3 {
            let fresh = InitProducerIdRequest {
                producer_id: -1,
                producer_epoch: -1,
                ..self.0.clone()
            };
            return fresh.encode(w, version);
        }
        self.0.encode(w, version)
    }
}

/// A Produce request, with the size of its record batches told ahead (its
/// frame is made that large at once, not grown as the batches are copied
/// in).
#[derive(Debug)]
pub(super) struct Produce {
    request: ProduceRequest,
    records: usize,
}

impl RequestBody for Produce {
    fn api_key(&self) -> ApiKey {
        ApiKey::Produce
    }

    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        self.request.encode(w, version)
    }

    fn size_hint(&self) -> usize {
        self.records
    }
}

impl ProducerCore {
    /// Asks for a producer id (or a new epoch) when one is needed.
    pub(super) fn producer_id(&mut self, now: Instant) {
        if !self.settings.idempotence || !self.pid_retry.ready(now) {
            return;
        }
        let (producer_id, producer_epoch) = match self.pid {
            Pid::None if !lock(&self.front).acc.is_empty() => (-1, -1),
            // A new epoch once nothing is in flight: the sequences restart.
            Pid::Bump { id, epoch } if self.produce_in_flight() == 0 => (id, epoch),
            _ => return,
        };
        let body = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: i32::MAX,
            producer_id,
            producer_epoch,
            ..Default::default()
        };
        let id = self
            .cluster
            .request(now, Target::AnyBroker, Box::new(InitPid(body)));
        self.in_flight.insert(id, Pending::InitPid);
        self.pid = Pid::Asking;
    }

    fn produce_in_flight(&self) -> usize {
        self.per_broker.values().sum()
    }

    pub(super) fn send_ready(&mut self, now: Instant) {
        // The metadata is borrowed field by field, not copied: this runs
        // at every step.
        let metadata = self.cluster.metadata();
        let front = lock(&self.front);
        let ready = front.acc.ready(now, |tp: &TopicPartition| {
            metadata.leader(&tp.topic, tp.partition)
        });
        drop(front);
        if !ready.unknown_leaders.is_empty() {
            self.cluster.request_metadata_refresh(now);
        }
        self.throttled.retain(|_, until| *until > now);
        for broker in ready.brokers {
            if self.throttled.contains_key(&broker) {
                // Throttled by a quota (KIP-219): sent when it ends.
                continue;
            }
            loop {
                if self.per_broker.get(&broker).copied().unwrap_or(0) >= self.settings.max_in_flight
                {
                    break;
                }
                let idempotence = self.settings.idempotence;
                let pid = self.pid;
                let sequences = &mut self.sequences;
                let metadata = self.cluster.metadata();
                let leader_of = |tp: &TopicPartition| metadata.leader(&tp.topic, tp.partition);
                // Taken under the front's lock, built (compressed,
                // checksummed) after it is released: an application's
                // `send` does not wait for that.
                let taken = lock(&self.front)
                    .acc
                    .take(now, broker, leader_of, |tp, info| {
                        if !idempotence {
                            return Some(None);
                        }
                        let Pid::Known { id, epoch } = pid else {
                            return None;
                        };
                        let seq = entry_of(sequences, tp);
                        match info.stamp {
                            // A retry goes alone, first among its partition's
                            // unresolved batches: order is kept.
                            Some(stamp) => (seq.in_flight == 0
                                && seq.unresolved.first() == Some(&stamp.base_sequence)
                                && stamp.epoch == epoch)
                                .then_some(Some(stamp)),
                            None => {
                                // A leader that knows nothing of this producer
                                // takes any sequence as its first. So until a
                                // batch of the epoch is written, one goes at a
                                // time, and never to another broker while
                                // earlier ones are in flight: a later batch
                                // could be written first (on a topic just
                                // created, the leader refuses the first
                                // requests with NOT_LEADER_OR_FOLLOWER and
                                // takes the next), and the earlier ones, sent
                                // again, would come after it.
                                if seq.in_flight >= 5
                                    || (seq.in_flight > 0
                                        && (!seq.acked || seq.in_flight_to != broker))
                                {
                                    return None;
                                }
                                let base = seq.next;
                                seq.next =
                                    seq.next.wrapping_add(info.record_count as i32) & i32::MAX;
                                seq.unresolved.insert(base);
                                Some(Some(Stamp {
                                    producer_id: id,
                                    epoch,
                                    base_sequence: base,
                                }))
                            }
                        }
                    });
                if taken.is_empty() {
                    break;
                }
                let drained = taken.build();
                for (batch, e) in drained.failed {
                    log::warn!("{}: a batch could not be encoded: {e}", batch.tp);
                    self.fail_encoding(&batch, &e);
                }
                if drained.batches.is_empty() {
                    break;
                }
                self.send_batches(now, broker, drained.batches);
            }
        }
    }

    fn send_batches(&mut self, now: Instant, broker: i32, batches: Vec<ProducerBatch>) {
        let mut topics: BTreeMap<&str, Vec<PartitionProduceData>> = BTreeMap::new();
        for b in &batches {
            let c = entry_of(&mut self.counters, &b.tp);
            c.batches += 1;
            c.bytes += b.bytes.len() as u64;
            c.uncompressed_bytes += b.size as u64;
            if b.attempts <= 1 {
                c.queue_time += now.saturating_duration_since(b.created);
                c.first_sent += 1;
            } else {
                c.retries += 1;
            }
            topics
                .entry(&b.tp.topic)
                .or_default()
                .push(PartitionProduceData {
                    index: b.tp.partition,
                    records: Some(b.bytes.clone()),
                    ..Default::default()
                });
            if let Some(seq) = self.sequences.get_mut(&b.tp) {
                seq.in_flight += 1;
                seq.in_flight_to = broker;
            }
        }
        let body = ProduceRequest {
            transactional_id: None,
            acks: self.settings.acks,
            timeout_ms: self
                .settings
                .request_timeout
                .as_millis()
                .min(i32::MAX as u128) as i32,
            topic_data: topics
                .into_iter()
                .map(|(name, partition_data)| TopicProduceData {
                    name: name.to_owned(),
                    partition_data,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let records = batches.iter().map(|b| b.bytes.len() + 64).sum();
        let body = Produce {
            request: body,
            records,
        };
        let target = Target::Broker(broker);
        let id = if self.settings.acks == 0 {
            // The broker answers nothing: the batches count as delivered
            // once the request is handed to the socket (offset unknown).
            self.cluster.request_unanswered(now, target, Box::new(body))
        } else {
            self.cluster.request(now, target, Box::new(body))
        };
        *self.per_broker.entry(broker).or_default() += 1;
        self.in_flight.insert(
            id,
            Pending::Produce {
                broker,
                batches,
                sent: now,
            },
        );
    }
}
