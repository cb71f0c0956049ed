//! Requests out: InitProducerId when a producer id or a new epoch is
//! needed, and Produce per leader, its batches drained from the
//! accumulator and stamped with their sequence numbers (idempotence).

use super::super::accumulator::ProducerBatch;
use super::entry_of;
use super::front::lock;
use super::ProducerCore;
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
        let front = &self.front;
        let waiting = || !lock(front).acc.is_empty();
        let in_flight = self.requests.produce_in_flight();
        let Some(body) = self.idempotence.request(now, waiting, in_flight) else {
            return;
        };
        let id = self
            .cluster
            .request(now, Target::AnyBroker, Box::new(InitPid(body)));
        self.requests.asked_pid(id);
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
        // Throttled by a quota (KIP-219): sent when it ends.
        self.requests.end_throttles(now);
        for broker in ready.brokers {
            while self.requests.may_send(broker, now) {
                let idempotence = &mut self.idempotence;
                let metadata = self.cluster.metadata();
                let leader_of = |tp: &TopicPartition| metadata.leader(&tp.topic, tp.partition);
                // Taken under the front's lock, built (compressed,
                // checksummed) after it is released: an application's
                // `send` does not wait for that.
                let taken = lock(&self.front)
                    .acc
                    .take(now, broker, leader_of, |tp, info| {
                        idempotence.stamp(tp, info.record_count, info.stamp, broker)
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
            self.idempotence.sent(&b.tp, broker);
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
        self.requests.produced(id, broker, batches, now);
    }
}
