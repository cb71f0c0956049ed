//! CreateTopics: partitions round the brokers, or led by the first broker
//! of each replica assignment given; TOPIC_ALREADY_EXISTS,
//! INVALID_PARTITIONS (at most `topic::MAX_PARTITIONS`), `validate_only`.

use crate::error::ErrorCode;
use crate::mock::respond::Received;
use crate::mock::state::State;
use crate::mock::topic::MAX_PARTITIONS;
use crate::protocol::messages::create_topics::{
    CreatableTopic, CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse,
};
use crate::protocol::ApiKey;

/// The answer to a CreateTopics request.
pub(crate) fn answer(
    st: &mut State,
    r: &Received,
    req: &CreateTopicsRequest,
) -> CreateTopicsResponse {
    let error = st.take_error(r.broker, ApiKey::CreateTopics);
    let topics = req
        .topics
        .iter()
        .map(|t| create(st, r.version, req.validate_only, t, error))
        .collect();
    CreateTopicsResponse {
        topics,
        ..Default::default()
    }
}

/// Creates one topic (or checks that it could be, with `validate_only`).
fn create(
    st: &mut State,
    version: i16,
    validate_only: bool,
    t: &CreatableTopic,
    error: Option<ErrorCode>,
) -> CreatableTopicResult {
    let partitions = if t.num_partitions == -1 && t.assignments.is_empty() {
        1
    } else if t.num_partitions == -1 {
        t.assignments.len() as i32
    } else {
        t.num_partitions
    };
    let leaders: Option<Vec<i32>> = (!t.assignments.is_empty()).then(|| {
        let mut a: Vec<_> = t.assignments.iter().collect();
        a.sort_by_key(|a| a.partition_index);
        a.iter()
            .map(|a| a.broker_ids.first().copied().unwrap_or(-1))
            .collect()
    });
    let result = match error {
        Some(code) => Err(code),
        None if validate_only => {
            if st.topics.contains_key(&t.name) {
                Err(ErrorCode::TopicAlreadyExists)
            } else if !(1..=MAX_PARTITIONS).contains(&partitions) {
                Err(ErrorCode::InvalidPartitions)
            } else {
                Ok(())
            }
        }
        None => st.create_topic(&t.name, partitions, leaders.as_deref()),
    };
    let created = result.is_ok() && !validate_only;
    CreatableTopicResult {
        name: t.name.clone(),
        topic_id: match st.topics.get(&t.name) {
            Some(topic) if created && version >= 7 => topic.id,
            _ => [0; 16],
        },
        error_code: result.err().map_or(0, ErrorCode::code),
        num_partitions: if result.is_ok() { partitions } else { -1 },
        replication_factor: if result.is_ok() { 1 } else { -1 },
        configs: if version >= 5 { Some(Vec::new()) } else { None },
        ..Default::default()
    }
}
