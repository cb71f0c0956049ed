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
use std::time::Instant;

impl ConsumerCore {
    /// `enable.auto.offset.store=false`: commits take the offsets stored
    /// with [`ConsumerCore::store_offsets`] only.
    pub fn set_manual_offset_store(&mut self) {
        self.offset_store = Some(BTreeMap::new());
    }

    /// Stores offsets (the next offset to consume) for the next commit.
    /// Every partition must be assigned; nothing is stored otherwise.
    pub fn store_offsets(
        &mut self,
        offsets: BTreeMap<TopicPartition, OffsetAndEpoch>,
    ) -> Result<(), Error> {
        let Some(store) = self.offset_store.as_mut() else {
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
        self.offset_store.as_ref()
    }

    /// Forgets stored offsets of partitions no longer assigned (a partition
    /// assigned again later starts from its committed offset, not from an
    /// offset stored under an earlier assignment).
    pub(super) fn prune_offset_store(&mut self) {
        if let Some(store) = self.offset_store.as_mut() {
            let fetcher = &self.fetcher;
            store.retain(|tp, _| fetcher.is_assigned(tp));
        }
    }

    /// The caller stopped waiting for commit `id`: its outcome, when it
    /// comes, is dropped (the commit itself may still land).
    pub fn abandon_commit(&mut self, id: CommitId) {
        if self.commit_retries.remove(&id).is_some() {
            return;
        }
        if self.commit_results.remove(&id).is_none() {
            self.abandoned_commits.insert(id);
        }
    }

    /// Starts a commit of `offsets` (or of the consumed positions).
    pub fn commit(
        &mut self,
        now: Instant,
        offsets: Option<BTreeMap<TopicPartition, OffsetAndEpoch>>,
    ) -> CommitId {
        let id = CommitId(self.next_commit);
        self.next_commit += 1;
        let offsets = offsets.unwrap_or_else(|| {
            // The partitions revoked since the last poll too: their
            // records were returned before the revocation.
            let mut offsets = self.revoked_offsets.clone();
            offsets.extend(self.committable(None));
            offsets
        });
        self.send_commit(now, Some((id, Retry::default())), offsets);
        id
    }

    /// The outcome of commit `id`, once known.
    pub fn take_commit_result(&mut self, id: CommitId) -> Option<CommitResult> {
        self.commit_results.remove(&id)
    }

    /// Makes the group wait for commit `id` before rejoining.
    pub fn block_group_on_commit(&mut self, id: CommitId) {
        let request = self.in_flight.iter().find_map(|(rid, p)| match p {
            Pending::Commit(Some((c, _)), _) if *c == id => Some(*rid),
            _ => None,
        });
        if request.is_some() {
            self.blocking_commit = request;
        }
    }

    pub(super) fn drive_committed(&mut self, now: Instant) {
        if self.committed_in_flight || !self.committed_retry.ready(now) {
            return;
        }
        // Its wait is over: no deadline left in the past.
        self.committed_retry.clear_wait();
        let needed: BTreeSet<TopicPartition> = self.fetcher.needs_committed().into_iter().collect();
        if needed.is_empty() {
            return;
        }
        match &self.group_id {
            Some(group) => {
                self.committed_in_flight = true;
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
                self.committed_retry.succeeded();
                self.refusals_reported.remove(&ApiKey::OffsetFetch);
                o
            }
            Ok(Ok(CommittedOffsets::Error(code))) => {
                // Asked again under the retry policy, whatever the code: a
                // coordinator loading its offsets after a restart answers
                // COORDINATOR_LOAD_IN_PROGRESS for seconds.
                let delay = self
                    .committed_retry
                    .failed(now, &self.retry_policy, self.rng.unit());
                log::debug!("OffsetFetch for {group}: {code}; asked again in {delay:?}");
                match classify(code) {
                    GroupErrorClass::Coordinator => self.cluster.coordinator_unknown(now),
                    GroupErrorClass::Refused => self.report_refusal(now, ApiKey::OffsetFetch, code),
                    GroupErrorClass::Transient | GroupErrorClass::Rebalance => {}
                }
                return;
            }
            Ok(Err(e)) => {
                self.committed_retry
                    .failed(now, &self.retry_policy, self.rng.unit());
                self.errors.push_back(Error::Decode {
                    api: ApiKey::OffsetFetch,
                    addr: String::new(),
                    source: e,
                });
                return;
            }
            Err(e) => {
                let delay = self
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
        let (Some(interval), Some(due)) = (self.auto_commit, self.next_auto_commit) else {
            return;
        };
        if now < due || self.closing {
            return;
        }
        self.next_auto_commit = Some(now + interval);
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
        match &self.offset_store {
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
            .commit_retries
            .iter()
            .filter(|(_, (retry, _))| retry.ready(now))
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            if let Some((retry, offsets)) = self.commit_retries.remove(&id) {
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
                self.answers += 1;
                self.commit_results.insert(
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
                self.answers += 1;
                self.commit_results.insert(id, Ok(()));
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
                    self.refusals_reported.remove(&ApiKey::OffsetCommit);
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
            (Some((id, _)), _) if self.abandoned_commits.remove(&id) => {}
            // The application's commit is sent again under the retry policy
            // (as the Java consumer's commitSync does) until its caller
            // stops waiting (`default.api.timeout.ms`, which names the
            // last error).
            (Some((id, mut retry)), Err(e)) if again => {
                let delay = retry.failed(now, &self.retry_policy, self.rng.unit());
                log::debug!("commit {id:?}: {e}; sent again in {delay:?}");
                self.last_error = Some(e.to_string());
                self.commit_retries.insert(id, (retry, offsets));
            }
            (Some((id, _)), outcome) => {
                self.answers += 1;
                self.commit_results.insert(id, outcome);
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
            ) if classify(code) == GroupErrorClass::Refused => {
                self.report_refusal(now, ApiKey::OffsetCommit, code)
            }
            (None, Err(e)) if !e.is_retriable() => self.report(e),
            (None, Err(e)) => {
                log::info!("automatic commit for group {group:?} not done: {e} (committed again at the next interval)")
            }
            (None, Ok(())) => {}
        }
    }
}
