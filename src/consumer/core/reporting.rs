//! What the application hears of, as errors of `poll` and warn lines:
//! connection and group problems, topics and partitions missing from the
//! metadata (`topic.metadata.propagation.max.ms`), and refusals by the
//! group coordinator (said at once, then every `REPORT_AGAIN_AFTER`).

use super::{ConsumerCore, Mode};
use crate::error::{Error, ErrorCode};
use crate::protocol::ApiKey;
use crate::streak::Streak;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

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

impl ConsumerCore {
    /// Hands what the cluster and the group report to the application:
    /// each becomes an error of `poll` and a warn line.
    pub(super) fn collect_problems(&mut self) {
        while let Some(problem) = self.cluster.poll_problem() {
            let error = Error::from_problem(problem);
            self.report(error);
        }
        if let Some(failure) = self.membership.as_mut().and_then(|m| m.take_failure()) {
            let group = self.group_id.clone().unwrap_or_default();
            self.report(Error::Group {
                group,
                api: failure.api,
                code: failure.code,
                reason: failure.reason,
                stopped: true,
            });
        }
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
        if self.errors.len() >= 64 {
            self.errors.pop_front();
        }
        self.errors.push_back(error);
    }

    /// Notes which wanted topics (and assigned partitions) the metadata
    /// lacks, and which assigned partitions it names no leader for, and
    /// reports those missing for `topic.metadata.propagation.max.ms` (at
    /// once for an error retrying can't fix, such as an authorization
    /// failure). Nothing is said before metadata arrived at all.
    pub(super) fn watch_topics(&mut self, now: Instant) {
        if self.cluster.metadata_generation() == 0 {
            return;
        }
        // Looked at again only when the metadata, the subscription or the
        // assignment changed, or while something is lacking: a quiet
        // consumer does not walk its partitions on every pass.
        let inputs = (
            self.cluster.metadata_generation(),
            self.mode_generation,
            self.fetcher.assignment_generation(),
        );
        if self.watched_quiet == Some(inputs) {
            return;
        }
        let wanted = self.wanted_in_metadata();
        let mut lacking = self.lacking_wanted(&wanted);
        lacking.extend(self.lacking_leaders(&wanted));
        self.watched_quiet = (lacking.is_empty()
            && self.fetcher.every_leader_known(self.cluster.metadata()))
        .then_some(inputs);
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

    /// The topics the mode names, and the partitions assigned by hand, as
    /// `(topic, None)` and `(topic, Some(partition))`.
    fn wanted_in_metadata(&self) -> BTreeSet<(String, Option<i32>)> {
        let mut wanted: BTreeSet<(String, Option<i32>)> = BTreeSet::new();
        match &self.mode {
            Mode::Idle => {}
            Mode::Subscribed(topics) => wanted.extend(topics.iter().map(|t| (t.clone(), None))),
            // A pattern names no topic: one it does not match is not
            // missing.
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

    /// Which of `wanted` the metadata lacks, with the error code that
    /// stands for it.
    fn lacking_wanted(
        &self,
        wanted: &BTreeSet<(String, Option<i32>)>,
    ) -> Vec<((String, Option<i32>), ErrorCode, Lack)> {
        let metadata = self.cluster.metadata();
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

    /// Partitions being fetched (assigned by hand or by the group) of a
    /// known topic whose metadata names no leader: nothing is fetched from
    /// them until it does. A partition the group assigned that the
    /// metadata lacks (one assigned by hand is among `wanted`) is lacking
    /// too.
    fn lacking_leaders(
        &self,
        wanted: &BTreeSet<(String, Option<i32>)>,
    ) -> Vec<((String, Option<i32>), ErrorCode, Lack)> {
        let metadata = self.cluster.metadata();
        let mut lacking = Vec::new();
        for tp in self.fetcher.leader_unknown(metadata) {
            let Some(t) = metadata
                .topics
                .get(&tp.topic)
                .filter(|t| t.error == ErrorCode::None && !t.partitions.is_empty())
            else {
                continue;
            };
            let key = (tp.topic.clone(), Some(tp.partition));
            let Some(p) = t.partitions.get(&tp.partition) else {
                // Assigned by the group but not in the metadata (assigned
                // by hand, it is among `wanted`).
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

    /// When each topic or partition missing from the metadata is due to be
    /// reported (again): deadlines of [`ConsumerCore::next_deadline`].
    pub(super) fn missing_report_deadlines(&self) -> impl Iterator<Item = Instant> + '_ {
        self.missing
            .values()
            .flatten()
            .map(|m| m.next_due(missing_grace(*m.what(), self.propagation)))
    }

    /// Reports a refusal by the group coordinator (`api`: the request it
    /// refused) at once, then again only every `REPORT_AGAIN_AFTER` while
    /// it lasts.
    pub(super) fn report_refusal(&mut self, now: Instant, api: ApiKey, code: ErrorCode) {
        let slot = self.refusals_reported.entry(api).or_default();
        let run = Streak::note(slot, (), now, Duration::MAX);
        if run.due(now, Duration::ZERO) {
            run.mark_reported(now);
            self.report(Error::Group {
                group: self.group_id.clone().unwrap_or_default(),
                api,
                code: Some(code),
                reason: format!("{api} failed: {code}"),
                stopped: false,
            });
        }
    }
}
