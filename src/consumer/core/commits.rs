//! Commits: the offsets the application stores
//! (`enable.auto.offset.store=false`), its commits and the automatic ones
//! (`enable.auto.commit`, and those of revoked partitions before a rejoin),
//! their answers and retries, and the committed offsets a partition starts
//! from (OffsetFetch).

use super::super::offsets::{
    read_commit, read_committed, CommitOffsets, CommittedOffsets, FetchCommitted, OffsetAndEpoch,
};
use super::{CommitId, CommitResult, ConsumerCore, Mode, Pending};
use crate::cluster::{RequestError, RequestId, Response, Retry, Target};
use crate::error::{Error, ErrorCode};
use crate::group::errors::{classify, GroupErrorClass};
use crate::group::TopicPartition;
use crate::protocol::ApiKey;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Offsets by partition, as a commit takes them.
type Offsets = BTreeMap<TopicPartition, OffsetAndEpoch>;

/// The commits' own state: the application's commits and their outcomes,
/// the automatic ones' timer, the offsets the application stored, and the
/// committed-offsets lookup a partition starts from.
#[derive(Debug)]
pub(super) struct Commits {
    /// The next commit's number.
    next: u64,
    /// Outcomes not yet taken by their callers.
    results: BTreeMap<CommitId, CommitResult>,
    /// Commits whose caller stopped waiting (a dropped `commit` future):
    /// their outcome is dropped when it comes.
    abandoned: BTreeSet<CommitId>,
    /// The application's commits refused with an error that passes (a
    /// coordinator that moved or is loading, a lost connection): sent
    /// again once their retry wait ends, until the caller stops waiting.
    retries: BTreeMap<CommitId, (Retry, Offsets)>,
    /// `enable.auto.offset.store=false`: the offsets the application
    /// stored, which commits take instead of the consumed positions.
    store: Option<Offsets>,
    /// `auto.commit.interval.ms`, with `enable.auto.commit` and a group.
    auto: Option<Duration>,
    /// When the next automatic commit is due (from the first `poll`).
    next_auto: Option<Instant>,
    /// A commit that must finish before the group may rejoin (offsets of
    /// revoked partitions).
    blocking: Option<RequestId>,
    /// The OffsetFetch of positions to start from: in flight, and its run
    /// of failures.
    committed_in_flight: bool,
    committed_retry: Retry,
}

impl Commits {
    pub(super) fn new(auto: Option<Duration>) -> Self {
        Commits {
            next: 1,
            results: BTreeMap::new(),
            abandoned: BTreeSet::new(),
            retries: BTreeMap::new(),
            store: None,
            auto,
            next_auto: None,
            blocking: None,
            committed_in_flight: false,
            committed_retry: Retry::default(),
        }
    }

    /// A new commit's number.
    fn start(&mut self) -> CommitId {
        let id = CommitId(self.next);
        self.next += 1;
        id
    }

    /// Whether commits are automatic (`enable.auto.commit`).
    pub(super) fn is_auto(&self) -> bool {
        self.auto.is_some()
    }

    /// Starts the automatic commits' timer at `now` (the first `poll`);
    /// `true` when it started.
    pub(super) fn start_auto(&mut self, now: Instant) -> bool {
        match (self.next_auto, self.auto) {
            (None, Some(interval)) => {
                self.next_auto = Some(now + interval);
                true
            }
            _ => false,
        }
    }

    /// Whether an automatic commit is due at `now`; the next one is then
    /// due an interval later.
    fn auto_due(&mut self, now: Instant) -> bool {
        let (Some(interval), Some(due)) = (self.auto, self.next_auto) else {
            return false;
        };
        if now < due {
            return false;
        }
        self.next_auto = Some(now + interval);
        true
    }

    /// The group may not rejoin before request `id` (a commit of revoked
    /// partitions) is answered.
    pub(super) fn block_on(&mut self, id: Option<RequestId>) {
        self.blocking = id;
    }

    /// The commit the group waits for before rejoining, if any.
    pub(super) fn blocking(&self) -> Option<RequestId> {
        self.blocking
    }

    /// Whether the committed-offsets lookup may be sent at `now`: none in
    /// flight and its retry wait over (no deadline is then left in the
    /// past).
    fn committed_ready(&mut self, now: Instant) -> bool {
        if self.committed_in_flight || !self.committed_retry.ready(now) {
            return false;
        }
        self.committed_retry.clear_wait();
        true
    }

    /// The committed-offsets lookup was answered (or failed).
    pub(super) fn committed_answered(&mut self) {
        self.committed_in_flight = false;
    }

    /// The deadlines of the commits' own timers.
    pub(super) fn deadlines(&self) -> impl Iterator<Item = Instant> + '_ {
        let retries = self.retries.values().filter_map(|(r, _)| r.not_before());
        [self.next_auto, self.committed_retry.not_before()]
            .into_iter()
            .flatten()
            .chain(retries)
    }
}

impl ConsumerCore {
    /// `enable.auto.offset.store=false`: commits take the offsets stored
    /// with [`ConsumerCore::store_offsets`] only.
    pub fn set_manual_offset_store(&mut self) {
        self.commits.store = Some(BTreeMap::new());
    }

    /// Stores offsets (the next offset to consume) for the next commit.
    /// Every partition must be assigned; nothing is stored otherwise.
    pub fn store_offsets(
        &mut self,
        offsets: BTreeMap<TopicPartition, OffsetAndEpoch>,
    ) -> Result<(), Error> {
        let Some(store) = self.commits.store.as_mut() else {
            return Err(Error::Config {
                property: "enable.auto.offset.store".into(),
                reason: "offsets are stored automatically; set enable.auto.offset.store=false to store them with store_offset".into(),
            });
        };
        if let Some(tp) = offsets.keys().find(|tp| !self.fetcher.is_assigned(tp)) {
            return Err(Error::NotAssigned {
                operation: "store_offset",
                partition: tp.clone(),
            });
        }
        store.extend(offsets);
        Ok(())
    }

    /// The offsets stored for the next commit (`None` with
    /// `enable.auto.offset.store=true`).
    pub fn stored_offsets(&self) -> Option<&BTreeMap<TopicPartition, OffsetAndEpoch>> {
        self.commits.store.as_ref()
    }

    /// Forgets stored offsets of partitions no longer assigned (a partition
    /// assigned again later starts from its committed offset, not from an
    /// offset stored under an earlier assignment).
    pub(super) fn prune_offset_store(&mut self) {
        if let Some(store) = self.commits.store.as_mut() {
            let fetcher = &self.fetcher;
            store.retain(|tp, _| fetcher.is_assigned(tp));
        }
    }

    /// The caller stopped waiting for commit `id`: its outcome, when it
    /// comes, is dropped (the commit itself may still land).
    pub fn abandon_commit(&mut self, id: CommitId) {
        let commits = &mut self.commits;
        if commits.retries.remove(&id).is_some() {
            return;
        }
        if commits.results.remove(&id).is_none() {
            commits.abandoned.insert(id);
        }
    }

    /// Starts a commit of `offsets` (or of the consumed positions).
    pub fn commit(
        &mut self,
        now: Instant,
        offsets: Option<BTreeMap<TopicPartition, OffsetAndEpoch>>,
    ) -> CommitId {
        let id = self.commits.start();
        let offsets = offsets.unwrap_or_else(|| {
            // The partitions revoked since the last poll too: their
            // records were returned before the revocation.
            let mut offsets = self.listener.revoked_offsets().clone();
            offsets.extend(self.committable(None));
            offsets
        });
        self.send_commit(now, Some((id, Retry::default())), offsets);
        id
    }

    /// The outcome of commit `id`, once known.
    pub fn take_commit_result(&mut self, id: CommitId) -> Option<CommitResult> {
        self.commits.results.remove(&id)
    }

    /// Makes the group wait for commit `id` before rejoining.
    pub fn block_group_on_commit(&mut self, id: CommitId) {
        let request = self.in_flight.iter().find_map(|(rid, p)| match p {
            Pending::Commit(Some((c, _)), _) if *c == id => Some(*rid),
            _ => None,
        });
        if request.is_some() {
            self.commits.block_on(request);
        }
    }

    pub(super) fn drive_committed(&mut self, now: Instant) {
        if !self.commits.committed_ready(now) {
            return;
        }
        let needed: BTreeSet<TopicPartition> = self.fetcher.needs_committed().into_iter().collect();
        if needed.is_empty() {
            return;
        }
        match &self.group_id {
            Some(group) => {
                self.commits.committed_in_flight = true;
                let id = self.cluster.request(
                    now,
                    Target::Coordinator,
                    Box::new(FetchCommitted {
                        group: group.clone(),
                        partitions: needed.clone(),
                        require_stable: true,
                    }),
                );
                self.in_flight.insert(id, Pending::Committed(needed));
            }
            None => {
                // No group: nothing is committed; auto.offset.reset decides.
                for tp in needed {
                    self.fetcher.set_committed(&tp, None);
                }
            }
        }
    }

    pub(super) fn handle_committed(
        &mut self,
        now: Instant,
        partitions: BTreeSet<TopicPartition>,
        result: Result<Response, RequestError>,
    ) {
        let group = self.group_id.clone().unwrap_or_default();
        let offsets = match result.map(|r| read_committed(&r, &group)) {
            Ok(Ok(CommittedOffsets::Offsets(o))) => {
                self.commits.committed_retry.succeeded();
                self.reports.refusal_ended(ApiKey::OffsetFetch);
                o
            }
            Ok(Ok(CommittedOffsets::Error(code))) => {
                // Asked again under the retry policy, whatever the code: a
                // coordinator loading its offsets after a restart answers
                // COORDINATOR_LOAD_IN_PROGRESS for seconds.
                let delay =
                    self.commits
                        .committed_retry
                        .failed(now, &self.retry_policy, self.rng.unit());
                log::debug!("OffsetFetch for {group}: {code}; asked again in {delay:?}");
                match classify(code) {
                    GroupErrorClass::Coordinator => self.cluster.coordinator_unknown(now),
                    GroupErrorClass::Refused => self.reports.report_refusal(
                        now,
                        self.group_id.as_deref(),
                        ApiKey::OffsetFetch,
                        code,
                    ),
                    GroupErrorClass::Transient | GroupErrorClass::Rebalance => {}
                }
                return;
            }
            Ok(Err(e)) => {
                self.commits
                    .committed_retry
                    .failed(now, &self.retry_policy, self.rng.unit());
                self.reports.queue([Error::Decode {
                    api: ApiKey::OffsetFetch,
                    addr: String::new(),
                    source: e,
                }]);
                return;
            }
            Err(e) => {
                let delay =
                    self.commits
                        .committed_retry
                        .failed(now, &self.retry_policy, self.rng.unit());
                log::debug!(
                    "OffsetFetch for {group} got no response: {e}; asked again in {delay:?}"
                );
                return;
            }
        };
        for tp in partitions {
            let committed = offsets.get(&tp).copied().flatten();
            let applied = self
                .fetcher
                .set_committed(&tp, committed.map(|o| (o.offset, o.leader_epoch)));
            if applied && committed.is_none() {
                // Said only once the coordinator answered: before that,
                // nothing is known about committed offsets.
                log::info!(
                    "{tp} has no committed offset in group {group:?}; starting from auto.offset.reset"
                );
            }
        }
    }

    pub(super) fn drive_auto_commit(&mut self, now: Instant) {
        if self.closing || !self.commits.auto_due(now) {
            return;
        }
        let stable = self.membership.as_ref().is_some_and(|m| m.is_stable());
        if self.group_id.is_some() && (stable || matches!(self.mode, Mode::Assigned(_))) {
            let offsets = self.committable(None);
            if !offsets.is_empty() {
                self.send_commit(now, None, offsets);
            }
        }
    }

    /// What a commit of owned partitions (all, or those in `only`) takes:
    /// the consumed positions, or with `enable.auto.offset.store=false`
    /// the offsets the application stored.
    pub(super) fn committable(
        &self,
        only: Option<&BTreeSet<TopicPartition>>,
    ) -> BTreeMap<TopicPartition, OffsetAndEpoch> {
        match &self.commits.store {
            None => self.consumed_positions(only),
            Some(stored) => stored
                .iter()
                .filter(|(tp, _)| {
                    self.fetcher.is_assigned(tp) && only.is_none_or(|o| o.contains(*tp))
                })
                .map(|(tp, o)| (tp.clone(), *o))
                .collect(),
        }
    }

    /// The positions of owned partitions (all, or those in `only`).
    pub(super) fn consumed_positions(
        &self,
        only: Option<&BTreeSet<TopicPartition>>,
    ) -> BTreeMap<TopicPartition, OffsetAndEpoch> {
        self.fetcher
            .positions()
            .into_iter()
            .filter(|(tp, _)| only.is_none_or(|o| o.contains(tp)))
            .map(|(tp, (offset, leader_epoch))| {
                (
                    tp,
                    OffsetAndEpoch {
                        offset,
                        leader_epoch,
                    },
                )
            })
            .collect()
    }

    /// Sends again the application's commits whose retry wait ended.
    pub(super) fn drive_commit_retries(&mut self, now: Instant) {
        let due: Vec<CommitId> = self
            .commits
            .retries
            .iter()
            .filter(|(_, (retry, _))| retry.ready(now))
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            if let Some((retry, offsets)) = self.commits.retries.remove(&id) {
                self.send_commit(now, Some((id, retry)), offsets);
            }
        }
    }

    /// Sends an OffsetCommit; `id` is the application's commit (with its
    /// run of failures so far), `None` an automatic one. Returns the
    /// request, when one was sent.
    pub(super) fn send_commit(
        &mut self,
        now: Instant,
        id: Option<(CommitId, Retry)>,
        offsets: BTreeMap<TopicPartition, OffsetAndEpoch>,
    ) -> Option<RequestId> {
        let Some(group) = self.group_id.clone() else {
            if let Some((id, _)) = id {
                self.told.answered();
                self.commits.results.insert(
                    id,
                    Err(Error::Config {
                        property: "group.id".into(),
                        reason: "committing offsets needs a group.id".into(),
                    }),
                );
            }
            return None;
        };
        if offsets.is_empty() {
            if let Some((id, _)) = id {
                log::info!("nothing to commit: no assigned partition has a position yet");
                self.told.answered();
                self.commits.results.insert(id, Ok(()));
            }
            return None;
        }
        let (generation, member_id, instance) = match &self.membership {
            // In a generation, also while revoking before a rejoin: a commit
            // with generation -1 would be refused by a group with members.
            Some(m) => match m.commit_generation() {
                Some((generation, member)) => (
                    generation,
                    member.to_owned(),
                    m.group_instance_id().map(str::to_owned),
                ),
                // Manual assignment, or between generations: a "simple"
                // commit.
                None => (-1, String::new(), m.group_instance_id().map(str::to_owned)),
            },
            None => (-1, String::new(), None),
        };
        let body = CommitOffsets {
            group,
            generation,
            member_id,
            group_instance_id: instance,
            offsets: offsets.clone(),
        };
        let rid = self
            .cluster
            .request(now, Target::Coordinator, Box::new(body));
        self.in_flight.insert(rid, Pending::Commit(id, offsets));
        Some(rid)
    }

    pub(super) fn handle_commit(
        &mut self,
        now: Instant,
        id: Option<(CommitId, Retry)>,
        offsets: BTreeMap<TopicPartition, OffsetAndEpoch>,
        result: Result<Response, RequestError>,
    ) {
        let (outcome, again) = self.read_commit_answer(now, offsets.len(), result);
        self.settle_commit(now, id, offsets, outcome, again);
    }

    /// The outcome of an OffsetCommit of `count` offsets, and whether the
    /// same commit may be sent again (the coordinator moved or is loading,
    /// the connection was lost).
    fn read_commit_answer(
        &mut self,
        now: Instant,
        count: usize,
        result: Result<Response, RequestError>,
    ) -> (CommitResult, bool) {
        match result {
            Err(e) => {
                let again = e.is_retriable();
                (
                    Err(Error::Request {
                        api: ApiKey::OffsetCommit,
                        source: e,
                    }),
                    again,
                )
            }
            Ok(r) => match read_commit(&r) {
                Ok(None) => {
                    log::debug!("committed {count} offsets");
                    self.reports.refusal_ended(ApiKey::OffsetCommit);
                    (Ok(()), false)
                }
                Ok(Some(code)) => self.commit_refused(now, code),
                Err(source) => (
                    Err(Error::Decode {
                        api: ApiKey::OffsetCommit,
                        addr: String::new(),
                        source,
                    }),
                    false,
                ),
            },
        }
    }

    /// An OffsetCommit refused with `code`: what the group makes of it,
    /// the error, and whether the same commit may be sent again.
    fn commit_refused(&mut self, now: Instant, code: ErrorCode) -> (CommitResult, bool) {
        let group = self.group_id.clone().unwrap_or_default();
        let class = classify(code);
        match class {
            GroupErrorClass::Coordinator => self.cluster.coordinator_unknown(now),
            // STALE_MEMBER_EPOCH (KIP-848, OffsetCommit v9): the member's
            // epoch moved on; a heartbeat at once brings the current one
            // for the next commit.
            GroupErrorClass::Rebalance => {
                // News of a rebalance only for a stable member; one already
                // rejoining (a commit of revoked partitions) would otherwise
                // rejoin once more after this round, and again, forever.
                if let Some(m) = self.membership.as_mut().filter(|m| m.is_stable()) {
                    m.request_rejoin("a commit was refused for a rebalance");
                }
            }
            GroupErrorClass::Transient | GroupErrorClass::Refused => {}
        }
        // FENCED_LEADER_EPOCH: the coordinator knows a newer leader epoch
        // of a partition than the commit carries (the epoch of the last
        // record read there, KIP-320), so the same offsets are refused
        // again; the next commit, after records of the new epoch, carries
        // it. Neither the Java consumer nor librdkafka retries it. (Kafka's
        // coordinator does not check the epoch; librdkafka's mock cluster
        // does.)
        let stale_epoch = code == ErrorCode::FencedLeaderEpoch;
        let reason = match class {
            GroupErrorClass::Rebalance => format!(
                "OffsetCommit refused with {code}: the group is rebalancing (the member rejoins by itself); the offsets were not committed: commit again once the partitions are assigned"
            ),
            _ if stale_epoch => format!(
                "OffsetCommit refused with {code}: the broker knows a newer leader epoch than the last record read; the offsets were not committed: commit again after reading on"
            ),
            _ => format!("OffsetCommit failed: {code}"),
        };
        let again = matches!(
            class,
            GroupErrorClass::Coordinator | GroupErrorClass::Transient
        ) && !stale_epoch;
        (
            Err(Error::Group {
                group,
                api: ApiKey::OffsetCommit,
                code: Some(code),
                reason,
                stopped: false,
            }),
            again,
        )
    }

    /// Hands the outcome of commit `id` (`None`: an automatic one) to its
    /// caller, or sends it again when `again` says it may pass.
    fn settle_commit(
        &mut self,
        now: Instant,
        id: Option<(CommitId, Retry)>,
        offsets: BTreeMap<TopicPartition, OffsetAndEpoch>,
        outcome: CommitResult,
        again: bool,
    ) {
        let group = self.group_id.clone().unwrap_or_default();
        match (id, outcome) {
            (Some((id, _)), _) if self.commits.abandoned.remove(&id) => {}
            // The application's commit is sent again under the retry policy
            // (as the Java consumer's commitSync does) until its caller
            // stops waiting (`default.api.timeout.ms`, which names the
            // last error).
            (Some((id, mut retry)), Err(e)) if again => {
                let delay = retry.failed(now, &self.retry_policy, self.rng.unit());
                log::debug!("commit {id:?}: {e}; sent again in {delay:?}");
                self.reports.note(e.to_string());
                self.commits.retries.insert(id, (retry, offsets));
            }
            (Some((id, _)), outcome) => {
                self.told.answered();
                self.commits.results.insert(id, outcome);
            }
            // An automatic commit: one retrying can't fix (authorization,
            // say) reaches `poll`; a rebalance or a coordinator that moved
            // is routine (the next interval commits again, with the
            // positions of the partitions then owned).
            (
                None,
                Err(Error::Group {
                    code: Some(code), ..
                }),
            ) if classify(code) == GroupErrorClass::Refused => self.reports.report_refusal(
                now,
                self.group_id.as_deref(),
                ApiKey::OffsetCommit,
                code,
            ),
            (None, Err(e)) if !e.is_retriable() => self.reports.report(e),
            (None, Err(e)) => {
                log::info!("automatic commit for group {group:?} not done: {e} (committed again at the next interval)")
            }
            (None, Ok(())) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automatic_commits_start_at_the_first_poll_and_fall_due_each_interval() {
        let now = Instant::now();
        let second = Duration::from_secs(1);
        let mut manual = Commits::new(None);
        assert!(!manual.start_auto(now) && !manual.auto_due(now + 10 * second));
        let mut commits = Commits::new(Some(second));
        assert!(!commits.auto_due(now + 10 * second), "not before a poll");
        assert!(commits.start_auto(now));
        assert!(!commits.start_auto(now + second), "started once");
        assert!(!commits.auto_due(now));
        assert_eq!(commits.deadlines().collect::<Vec<_>>(), [now + second]);
        assert!(commits.auto_due(now + second));
        assert!(
            !commits.auto_due(now + second),
            "the next one an interval later"
        );
        assert!(commits.auto_due(now + 2 * second));
        assert_ne!(commits.start(), commits.start(), "each commit its number");
    }

    #[test]
    fn the_committed_lookup_waits_for_its_answer_and_its_backoff() {
        let now = Instant::now();
        let policy = crate::cluster::ExponentialBackoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
            jitter: 0.0,
        };
        let mut commits = Commits::new(None);
        assert!(commits.committed_ready(now));
        commits.committed_in_flight = true;
        assert!(!commits.committed_ready(now), "one in flight");
        commits.committed_answered();
        let delay = commits.committed_retry.failed(now, &policy, 0.5);
        assert!(!commits.committed_ready(now), "backing off");
        assert_eq!(commits.deadlines().collect::<Vec<_>>(), [now + delay]);
        assert!(commits.committed_ready(now + delay));
        assert_eq!(
            commits.deadlines().count(),
            0,
            "no deadline left in the past"
        );
    }
}
