//! What the application hears of, as errors of `poll` and warn lines:
//! connection and group problems, topics and partitions missing from the
//! metadata (`topic.metadata.propagation.max.ms`), and refusals by the
//! group coordinator (said at once, then every `REPORT_AGAIN_AFTER`).
//! [`Reports`] owns what was said and when; the core tells it what it
//! sees.

use super::Mode;
use crate::cluster::{Cluster, Metadata};
use crate::error::{Error, ErrorCode};
use crate::fetch::Fetcher;
use crate::group::either_membership::GroupMembership;
use crate::protocol::ApiKey;
use crate::streak::Streak;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

/// Reported conditions kept for `poll` at most: a burst keeps the newest.
const MAX_ERRORS: usize = 64;

/// A topic or partition the metadata lacks: the run of metadata answers
/// that lack it with one error code (another code starts a new run).
pub(super) type Missing = Streak<ErrorCode>;

/// How long a topic or partition must be missing with `code` before it is
/// reported: `topic.metadata.propagation.max.ms` while the code may pass
/// (a topic being created), none for a refusal.
fn missing_grace(code: ErrorCode, propagation: Duration) -> Duration {
    if code.is_retriable() {
        propagation
    } else {
        Duration::ZERO
    }
}

/// What the metadata lacks for a wanted topic or partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lack {
    /// The topic (its error code).
    Topic,
    /// The partition: the topic has only this many.
    Partition { partitions: usize },
    /// The partition's leader.
    Leader,
}

/// A topic, or a partition of it, the metadata is watched for.
type Wanted = (String, Option<i32>);

/// What the consumer reported and when.
#[derive(Debug)]
pub(super) struct Reports {
    /// Errors for `poll`, oldest first.
    errors: VecDeque<Error>,
    /// The last failure reported, in words, for operations that time out.
    last_error: Option<String>,
    /// `topic.metadata.propagation.max.ms`: how long a topic may be
    /// missing from the metadata before the application hears of it.
    propagation: Duration,
    /// Topics (and assigned partitions, as `(topic, Some(partition))`)
    /// missing from the metadata: their runs, and when each was last
    /// reported.
    missing: BTreeMap<Wanted, Option<Missing>>,
    /// The inputs of the last [`Reports::watch_topics`] that found nothing
    /// lacking (metadata generation, mode generation, assignment
    /// generation): until one of them changes, there is nothing to look at.
    watched_quiet: Option<(u64, u64, u64)>,
    /// Refusals by the group coordinator (per API) and when each was last
    /// reported.
    refusals: BTreeMap<ApiKey, Option<Streak<()>>>,
}

impl Reports {
    pub(super) fn new(propagation: Duration) -> Self {
        Reports {
            errors: VecDeque::new(),
            last_error: None,
            propagation,
            missing: BTreeMap::new(),
            watched_quiet: None,
            refusals: BTreeMap::new(),
        }
    }

    /// Sets `topic.metadata.propagation.max.ms`.
    pub(super) fn set_propagation(&mut self, propagation: Duration) {
        self.propagation = propagation;
    }

    /// `topic.metadata.propagation.max.ms`.
    pub(super) fn propagation(&self) -> Duration {
        self.propagation
    }

    /// The last failure reported (or noted), in words.
    pub(super) fn last_error(&self) -> Option<&String> {
        self.last_error.as_ref()
    }

    /// Notes `failure` as the last one seen, without reporting it (a
    /// failure retried inside a call: a timeout names it).
    pub(super) fn note(&mut self, failure: String) {
        self.last_error = Some(failure);
    }

    /// Whether an error waits for `poll`.
    pub(super) fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// The oldest error waiting for `poll`.
    pub(super) fn take_error(&mut self) -> Option<Error> {
        self.errors.pop_front()
    }

    /// Queues `errors` for `poll` without logging them, after those
    /// waiting: each is a failure already taken from where it arose (the
    /// fetcher's, an unreadable answer), none is dropped.
    pub(super) fn queue(&mut self, errors: impl IntoIterator<Item = Error>) {
        self.errors.extend(errors);
    }

    /// Queues `error` for `poll` and logs it at warn level. Callers report
    /// a condition when it starts (and again only after it cleared, or
    /// after a long time), so neither the log nor the queue floods.
    pub(super) fn report(&mut self, error: Error) {
        let next = if error.is_fatal() {
            "the consumer cannot go on: close it"
        } else if error.is_retriable() {
            "the consumer goes on by itself"
        } else if matches!(
            error,
            Error::Authentication { .. }
                | Error::Connection { .. }
                | Error::BrokersUnreachable { .. }
                | Error::Group { .. }
                | Error::Topic { .. }
        ) {
            "tried again with a long backoff; it lasts until its cause is fixed"
        } else {
            "not retried"
        };
        log::warn!("{error} ({next})");
        self.last_error = Some(error.to_string());
        // Bounded: a burst of conditions keeps the newest.
        if self.errors.len() >= MAX_ERRORS {
            self.errors.pop_front();
        }
        self.errors.push_back(error);
    }

    /// Hands what the cluster and the group (`group`) report to the
    /// application: each becomes an error of `poll` and a warn line.
    pub(super) fn collect_problems(
        &mut self,
        cluster: &mut Cluster,
        membership: Option<&mut GroupMembership>,
        group: Option<&str>,
    ) {
        while let Some(problem) = cluster.poll_problem() {
            self.report(Error::from_problem(problem));
        }
        if let Some(failure) = membership.and_then(|m| m.take_failure()) {
            self.report(Error::Group {
                group: group.unwrap_or_default().to_owned(),
                api: failure.api,
                code: failure.code,
                reason: failure.reason,
                stopped: true,
            });
        }
    }

    /// Reports a refusal of `group`'s coordinator (`api`: the request it
    /// refused) at once, then again only every `REPORT_AGAIN_AFTER` while
    /// it lasts.
    pub(super) fn report_refusal(
        &mut self,
        now: Instant,
        group: Option<&str>,
        api: ApiKey,
        code: ErrorCode,
    ) {
        let slot = self.refusals.entry(api).or_default();
        let run = Streak::note(slot, (), now, Duration::MAX);
        if run.due(now, Duration::ZERO) {
            run.mark_reported(now);
            self.report(Error::Group {
                group: group.unwrap_or_default().to_owned(),
                api,
                code: Some(code),
                reason: format!("{api} failed: {code}"),
                stopped: false,
            });
        }
    }

    /// `api` was answered without a refusal: a later refusal is said at
    /// once.
    pub(super) fn refusal_ended(&mut self, api: ApiKey) {
        self.refusals.remove(&api);
    }

    /// Notes which wanted topics (those of `mode`, and partitions assigned
    /// by hand) the metadata lacks, and which partitions the fetcher
    /// fetches it names no leader for, and reports those missing for
    /// `topic.metadata.propagation.max.ms` (at once for an error retrying
    /// can't fix, such as an authorization failure). Nothing is said
    /// before metadata arrived at all. `mode_generation` grows whenever
    /// the mode is replaced.
    pub(super) fn watch_topics(
        &mut self,
        now: Instant,
        cluster: &Cluster,
        fetcher: &Fetcher,
        (mode, mode_generation): (&Mode, u64),
    ) {
        if cluster.metadata_generation() == 0 {
            return;
        }
        // Looked at again only when the metadata, the subscription or the
        // assignment changed, or while something is lacking: a quiet
        // consumer does not walk its partitions on every pass.
        let inputs = (
            cluster.metadata_generation(),
            mode_generation,
            fetcher.assignment_generation(),
        );
        if self.watched_quiet == Some(inputs) {
            return;
        }
        let metadata = cluster.metadata();
        let wanted = wanted_in_metadata(mode);
        let mut lacking = lacking_wanted(metadata, &wanted);
        lacking.extend(lacking_leaders(metadata, fetcher, &wanted));
        self.watched_quiet =
            (lacking.is_empty() && fetcher.every_leader_known(metadata)).then_some(inputs);
        let lacking_keys: BTreeSet<_> = lacking.iter().map(|(k, _, _)| k.clone()).collect();
        self.missing.retain(|k, _| lacking_keys.contains(k));
        for (key, code, lack) in lacking {
            let slot = self.missing.entry(key.clone()).or_default();
            let run = Missing::note(slot, code, now, Duration::MAX);
            if !run.due(now, missing_grace(code, self.propagation)) {
                continue;
            }
            run.mark_reported(now);
            let (topic, partition) = key;
            let error = match (lack, partition) {
                (Lack::Partition { partitions }, Some(partition)) => Error::UnknownPartition {
                    topic,
                    partition,
                    partitions,
                },
                (Lack::Leader, Some(partition)) => Error::NoLeader {
                    topic,
                    partition,
                    code,
                },
                _ => Error::Topic { topic, code },
            };
            self.report(error);
        }
    }

    /// When each topic or partition missing from the metadata is due to be
    /// reported (again): deadlines of the core's next step.
    pub(super) fn missing_report_deadlines(&self) -> impl Iterator<Item = Instant> + '_ {
        self.missing
            .values()
            .flatten()
            .map(|m| m.next_due(missing_grace(*m.what(), self.propagation)))
    }
}

/// The topics `mode` names, and the partitions assigned by hand, as
/// `(topic, None)` and `(topic, Some(partition))`.
fn wanted_in_metadata(mode: &Mode) -> BTreeSet<Wanted> {
    let mut wanted: BTreeSet<Wanted> = BTreeSet::new();
    match mode {
        Mode::Idle => {}
        Mode::Subscribed(topics) => wanted.extend(topics.iter().map(|t| (t.clone(), None))),
        // A pattern names no topic: one it does not match is not missing.
        Mode::Pattern(_) => {}
        Mode::Assigned(tps) => {
            for tp in tps {
                wanted.insert((tp.topic.clone(), None));
                wanted.insert((tp.topic.clone(), Some(tp.partition)));
            }
        }
    }
    wanted
}

/// Which of `wanted` `metadata` lacks, with the error code that stands for
/// it.
fn lacking_wanted(
    metadata: &Metadata,
    wanted: &BTreeSet<Wanted>,
) -> Vec<(Wanted, ErrorCode, Lack)> {
    let mut lacking = Vec::new();
    for key in wanted {
        let info = metadata.topics.get(&key.0);
        let code = match (info, key.1) {
            (None, _) => ErrorCode::UnknownTopicOrPartition,
            (Some(t), None) => t.error,
            (Some(t), Some(p)) => {
                if t.error == ErrorCode::None
                    && !t.partitions.is_empty()
                    && !t.partitions.contains_key(&p)
                {
                    ErrorCode::UnknownTopicOrPartition
                } else {
                    ErrorCode::None
                }
            }
        };
        if code != ErrorCode::None {
            let lack = match key.1 {
                None => Lack::Topic,
                Some(_) => Lack::Partition {
                    partitions: info.map_or(0, |t| t.partitions.len()),
                },
            };
            lacking.push((key.clone(), code, lack));
        }
    }
    lacking
}

/// Partitions `fetcher` fetches (assigned by hand or by the group) of a
/// known topic whose metadata names no leader: nothing is fetched from
/// them until it does. A partition the group assigned that the metadata
/// lacks (one assigned by hand is among `wanted`) is lacking too.
fn lacking_leaders(
    metadata: &Metadata,
    fetcher: &Fetcher,
    wanted: &BTreeSet<Wanted>,
) -> Vec<(Wanted, ErrorCode, Lack)> {
    let mut lacking = Vec::new();
    for tp in fetcher.leader_unknown(metadata) {
        let Some(t) = metadata
            .topics
            .get(&tp.topic)
            .filter(|t| t.error == ErrorCode::None && !t.partitions.is_empty())
        else {
            continue;
        };
        let key = (tp.topic.clone(), Some(tp.partition));
        let Some(p) = t.partitions.get(&tp.partition) else {
            // Assigned by the group but not in the metadata (assigned by
            // hand, it is among `wanted`).
            if !wanted.contains(&key) {
                lacking.push((
                    key,
                    ErrorCode::UnknownTopicOrPartition,
                    Lack::Partition {
                        partitions: t.partitions.len(),
                    },
                ));
            }
            continue;
        };
        let code = match p.error {
            ErrorCode::None => ErrorCode::LeaderNotAvailable,
            code => code,
        };
        lacking.push((key, code, Lack::Leader));
    }
    lacking
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_said_once_while_it_lasts_and_at_once_after_it_ended() {
        let now = Instant::now();
        let mut reports = Reports::new(Duration::from_secs(5));
        let code = ErrorCode::GroupAuthorizationFailed;
        reports.report_refusal(now, Some("g"), ApiKey::OffsetFetch, code);
        reports.report_refusal(now, Some("g"), ApiKey::OffsetFetch, code);
        assert!(matches!(
            reports.take_error(),
            Some(Error::Group { ref group, api: ApiKey::OffsetFetch, .. }) if group == "g"
        ));
        assert!(!reports.has_errors(), "said once");
        reports.refusal_ended(ApiKey::OffsetFetch);
        reports.report_refusal(now, Some("g"), ApiKey::OffsetFetch, code);
        assert!(reports.has_errors(), "a new refusal is said at once");
        assert!(reports
            .last_error()
            .is_some_and(|e| e.contains("OffsetFetch")));
    }

    #[test]
    fn errors_wait_for_poll_in_order_and_a_burst_keeps_the_newest() {
        let mut reports = Reports::new(Duration::from_secs(5));
        for i in 0..(MAX_ERRORS + 3) {
            reports.report(Error::Topic {
                topic: format!("t{i}"),
                code: ErrorCode::UnknownTopicOrPartition,
            });
        }
        let mut topics = Vec::new();
        while let Some(Error::Topic { topic, .. }) = reports.take_error() {
            topics.push(topic);
        }
        assert_eq!(topics.len(), MAX_ERRORS);
        assert_eq!(topics.first().map(String::as_str), Some("t3"));
        assert_eq!(
            topics.last().map(String::as_str),
            Some(format!("t{}", MAX_ERRORS + 2).as_str())
        );
    }
}
