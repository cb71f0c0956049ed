//! Produce: each partition's record set appended as Kafka's leader does
//! (every batch checked, then the idempotent producers' epochs and
//! sequences, `producers.rs`); a repeat of a batch already written is
//! answered with its offsets and not written again; a partition this
//! broker does not lead is refused naming its leader (KIP-951); `acks=0`
//! gets no answer, as in Kafka.

use bytes::Bytes;

use crate::error::ErrorCode;
use crate::mock::log::{AppendError, PartitionLog};
use crate::mock::producers::Outcome;
use crate::mock::respond::{reply, Answer, Received};
use crate::mock::state::State;
use crate::protocol::messages::produce::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, ProduceRequest, ProduceResponse,
    TopicProduceResponse,
};
use crate::protocol::ApiKey;

/// The answer to a Produce request: none with `acks=0`.
pub(crate) fn respond(st: &mut State, r: &Received, req: &ProduceRequest) -> Answer {
    let error = st.take_error(r.broker, ApiKey::Produce);
    let resp = produce(st, r.broker, r.version, req, error);
    if req.acks == 0 {
        Answer::Silent
    } else {
        reply(&resp, r.version, r.correlation_id)
    }
}

/// Appends the request's batches to the partitions `broker` leads (none
/// with an injected `error`).
fn produce(
    st: &mut State,
    broker: i32,
    version: i16,
    req: &ProduceRequest,
    error: Option<ErrorCode>,
) -> ProduceResponse {
    let mut responses = Vec::new();
    let mut leaders = Vec::new();
    for t in &req.topic_data {
        let mut partition_responses = Vec::new();
        for p in &t.partition_data {
            let mut out = PartitionProduceResponse {
                index: p.index,
                base_offset: -1,
                log_append_time_ms: -1,
                log_start_offset: -1,
                ..Default::default()
            };
            let code = match error {
                Some(code) => code,
                None => append(st, broker, (&t.name, p.index), p.records.as_ref(), &mut out),
            };
            // KIP-951 (v10+): a partition this broker does not lead is
            // refused naming its leader, as Kafka's `ReplicaManager` does.
            if code == ErrorCode::NotLeaderOrFollower && version >= 10 {
                if let Some(part) = st
                    .topics
                    .get(&t.name)
                    .and_then(|topic| topic.partitions.get(p.index as usize))
                {
                    let leader = st.live_leader(part);
                    if leader >= 0 {
                        out.current_leader = LeaderIdAndEpoch {
                            leader_id: leader,
                            leader_epoch: part.leader_epoch,
                            unknown_tagged_fields: Vec::new(),
                        };
                        leaders.push(leader);
                    }
                }
            }
            out.error_code = code.code();
            partition_responses.push(out);
        }
        responses.push(TopicProduceResponse {
            name: t.name.clone(),
            partition_responses,
            unknown_tagged_fields: Vec::new(),
        });
    }
    let node_endpoints = st
        .endpoints(leaders)
        .into_iter()
        .map(|(node_id, host, port, rack)| NodeEndpoint {
            node_id,
            host,
            port,
            rack,
            unknown_tagged_fields: Vec::new(),
        })
        .collect();
    ProduceResponse {
        responses,
        node_endpoints,
        ..Default::default()
    }
}

/// Appends one partition's record set of a Produce, as Kafka's leader
/// does: every batch well-formed (else CORRUPT_MESSAGE, or
/// UNSUPPORTED_FOR_MESSAGE_FORMAT below v2), a batch with a producer id
/// has a sequence (`LogValidator`: else INVALID_RECORD), then the
/// producers' epochs and sequences (`mock::producers`): a repeat of a
/// batch already written is answered with its offsets (and its
/// timestamp as the log append time, as `UnifiedLog.append` reports a
/// duplicate) and not written again.
fn append(
    st: &mut State,
    broker: i32,
    (topic, partition): (&str, i32),
    records: Option<&Bytes>,
    out: &mut PartitionProduceResponse,
) -> ErrorCode {
    let up = st.is_up(broker);
    let Some(part) = st
        .topics
        .get_mut(topic)
        .and_then(|t| t.partitions.get_mut(partition as usize))
    else {
        return ErrorCode::UnknownTopicOrPartition;
    };
    if part.leader != broker || !up {
        return ErrorCode::NotLeaderOrFollower;
    }
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return ErrorCode::InvalidRecord;
    };
    let batches = match PartitionLog::parse(records) {
        Ok(batches) => batches,
        Err(AppendError::Corrupt) => return ErrorCode::CorruptMessage,
        Err(AppendError::OldFormat) => return ErrorCode::UnsupportedForMessageFormat,
    };
    // From here on Kafka's answers carry the log start offset, errors
    // included (`ReplicaManager.appendToLocalLog`).
    out.log_start_offset = part.log.log_start_offset();
    if batches
        .iter()
        .any(|b| b.producer_id >= 0 && b.base_sequence < 0)
    {
        return ErrorCode::InvalidRecord;
    }
    let outcome = match part.producers.check(&batches, part.log.high_watermark()) {
        Ok(outcome) => outcome,
        Err(code) => return code,
    };
    match outcome {
        Outcome::Duplicate(original) => {
            out.base_offset = original.first_offset();
            out.log_append_time_ms = original.timestamp;
        }
        Outcome::Append(updated) => {
            out.base_offset = part.log.append_parsed(records, &batches, part.leader_epoch);
            part.producers.update(updated);
        }
    }
    ErrorCode::None
}
