//! The group coordinator's lookup: FindCoordinator on the wire, the
//! coordinator found, and the lookup's retries while group requests wait
//! for it (a refusal reported once, then every [`REPORT_AGAIN_AFTER`](super::REPORT_AGAIN_AFTER)).

use super::backoff::{ExponentialBackoff, Refresh, Rng};
use super::conn::RequestBody;
use super::metadata::BrokerAddress;
use super::Problem;
use crate::protocol::messages::decode_response_body;
use crate::protocol::messages::find_coordinator::{
    FindCoordinatorRequest, FindCoordinatorResponse,
};
use crate::protocol::{ApiKey, DecodeError, EncodeError, ErrorCode, Message, Writer};
use crate::streak::Streak;
use bytes::Bytes;
use std::time::{Duration, Instant};

/// The coordinator of the group, once found, and its lookup.
#[derive(Debug, Default)]
pub(crate) struct CoordinatorLookup {
    /// The coordinator the last lookup found.
    coordinator: Option<BrokerAddress>,
    /// The lookup (FindCoordinator).
    refresh: Refresh,
    /// The run of refused lookups, reported at once, then again only
    /// every [`REPORT_AGAIN_AFTER`](super::REPORT_AGAIN_AFTER).
    refusal: Option<Streak<()>>,
}

impl CoordinatorLookup {
    /// The coordinator, once found.
    pub fn known(&self) -> Option<&BrokerAddress> {
        self.coordinator.as_ref()
    }

    /// Forgets the coordinator: the next group request looks it up again.
    pub fn forget(&mut self) {
        self.coordinator = None;
    }

    /// Whether a lookup is to go out for `group` when group requests
    /// wait (`needed`): none is known, and none is in flight or backing
    /// off at `now`.
    fn lookup_due(&self, now: Instant, needed: bool) -> bool {
        self.coordinator.is_none() && needed && self.refresh.may_send(now)
    }

    /// FindCoordinator for `group`, when a lookup is due at `now` (see
    /// [`CoordinatorLookup::lookup_due`]); it is then marked sent.
    pub fn request_due(
        &mut self,
        now: Instant,
        group: Option<&str>,
        needed: bool,
    ) -> Option<Box<dyn RequestBody>> {
        let group = group?;
        if !self.lookup_due(now, needed) {
            return None;
        }
        self.refresh.sent();
        Some(find_coordinator_request(group))
    }

    /// When the lookup waits for its backoff while group requests wait
    /// (`needed`) for a coordinator of `group` not known yet.
    pub fn next_due(&self, group: Option<&str>, needed: bool) -> Option<Instant> {
        if group.is_some() && self.coordinator.is_none() && needed {
            self.refresh.next_send()
        } else {
            None
        }
    }

    /// The lookup got no answer (lost with its connection, timed out).
    pub fn request_lost(&mut self) {
        self.refresh.in_flight = false;
    }

    /// The lookup's answer: the coordinator; or the broker's error, tried
    /// again after the retry backoff (a refusal, which does not pass by
    /// itself, is returned as the problem to report when due); or an
    /// answer that cannot be decoded, tried again after the backoff too.
    pub fn take_answer(
        &mut self,
        now: Instant,
        version: i16,
        body: Bytes,
        group: &str,
        backoff: &ExponentialBackoff,
        rng: &mut Rng,
    ) -> Result<Option<Problem>, DecodeError> {
        let code = match parse_find_coordinator(version, body, group) {
            Ok(Ok(coordinator)) => {
                self.refresh.succeeded();
                self.refusal = None;
                self.coordinator = Some(coordinator);
                return Ok(None);
            }
            Ok(Err(code)) => code,
            Err(e) => {
                self.refresh.failed(now, backoff, rng);
                return Err(e);
            }
        };
        log::debug!("FindCoordinator for {group:?}: {code}");
        self.refresh.failed(now, backoff, rng);
        // COORDINATOR_NOT_AVAILABLE and the like pass by themselves (a
        // coordinator being elected or loading); a refusal does not, and
        // is news.
        if code.is_retriable() {
            return Ok(None);
        }
        let run = Streak::note(&mut self.refusal, (), now, Duration::MAX);
        if run.due(now, Duration::ZERO) {
            run.mark_reported(now);
            return Ok(Some(Problem::CoordinatorRefused {
                group: group.to_owned(),
                code,
            }));
        }
        Ok(None)
    }
}

/// FindCoordinator for a group, written as v0-3 (one `key`) or v4+
/// (`coordinator_keys`, KIP-699) depending on the version negotiated.
#[derive(Debug)]
struct FindGroupCoordinator(String);

impl RequestBody for FindGroupCoordinator {
    fn api_key(&self) -> ApiKey {
        ApiKey::FindCoordinator
    }

    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        let request = if version >= 4 {
            FindCoordinatorRequest {
                coordinator_keys: vec![self.0.clone()],
                ..FindCoordinatorRequest::default()
            }
        } else {
            FindCoordinatorRequest {
                key: self.0.clone(),
                ..FindCoordinatorRequest::default()
            }
        };
        request.encode(w, version)
    }
}

/// FindCoordinator for `group`, at whichever version is negotiated.
pub(crate) fn find_coordinator_request(group: &str) -> Box<dyn RequestBody> {
    Box::new(FindGroupCoordinator(group.to_owned()))
}

/// Reads a FindCoordinator response: the coordinator, or the broker's error
/// for the group.
pub(crate) fn parse_find_coordinator(
    version: i16,
    body: Bytes,
    group: &str,
) -> Result<Result<BrokerAddress, ErrorCode>, DecodeError> {
    // An answer that refuses the lookup may carry what no valid answer
    // does (librdkafka's mock writes a null host beside its error code,
    // which the schema does not allow): below v4 the error code comes first
    // (after the throttle time from v1), and is acted on.
    let leading = (version < 4)
        .then(|| {
            let at = if version >= 1 { 4 } else { 0 };
            body.get(at..at + 2)
                .map(|b| ErrorCode::from_code(i16::from_be_bytes([b[0], b[1]])))
        })
        .flatten();
    let resp = match decode_response_body::<FindCoordinatorResponse>(body, version) {
        Ok((resp, _)) => resp,
        Err(e) => {
            return match leading {
                Some(code) if code != ErrorCode::None => Ok(Err(code)),
                _ => Err(e),
            }
        }
    };
    let (code, node_id, host, port) = if version >= 4 {
        match resp.coordinators.into_iter().find(|c| c.key == group) {
            Some(c) => (c.error_code, c.node_id, c.host, c.port),
            None => {
                return Err(DecodeError::InvalidValue {
                    what: "coordinators",
                    reason: "the group asked for is missing",
                })
            }
        }
    } else {
        (resp.error_code, resp.node_id, resp.host, resp.port)
    };
    Ok(match ErrorCode::from_code(code) {
        ErrorCode::None => Ok(BrokerAddress {
            id: node_id,
            host,
            port,
            rack: None,
        }),
        other => Err(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Reader;

    /// The group is named in `key` up to v3 and in `coordinator_keys` from
    /// v4 (KIP-699), at every version the client speaks.
    #[test]
    fn find_coordinator_names_the_group_at_every_version() {
        for version in 0..=6 {
            let mut w = Writer::new();
            find_coordinator_request("g1")
                .encode_body(&mut w, version)
                .unwrap();
            let bytes = w.into_inner().freeze();
            let r = FindCoordinatorRequest::decode(&mut Reader::new(bytes), version).unwrap();
            if version >= 4 {
                assert_eq!(r.coordinator_keys, vec!["g1".to_owned()], "v{version}");
            } else {
                assert_eq!(r.key, "g1", "v{version}");
            }
        }
    }
}
