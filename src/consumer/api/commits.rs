//! The consumer's commits: waited for (`commit`, `commit_offsets`) or
//! with a callback run inside a later call (`commit_async`), the committed
//! offsets read back from the coordinator (`committed`), and the offsets
//! the application stores for the next commit (`store_offset`).

use super::{at_offsets, or_refused, timed_out, Consumer, Link};
use crate::cluster::{Changes, Retry};
use crate::consumer::core::CommitId;
use crate::consumer::offsets::OffsetAndEpoch;
use crate::error::Error;
use crate::fetch::ConsumerRecord;
use crate::group::errors::{classify, GroupErrorClass};
use crate::group::TopicPartition;
use crate::protocol::ApiKey;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

pub(super) type CommitCallback = Box<dyn FnOnce(Result<(), Error>) + Send>;

/// Forgets the outcome of a commit nobody waits for any more (its `commit`
/// future was dropped, or it timed out), so outcomes do not pile up.
struct AbandonCommit {
    link: Option<Link>,
    id: CommitId,
}

impl AbandonCommit {
    /// The outcome was taken (`true`), or the wait timed out (`false`:
    /// the outcome still to come is dropped).
    fn answered(mut self, taken: bool) {
        if taken {
            self.link = None;
        }
    }
}

impl Drop for AbandonCommit {
    fn drop(&mut self) {
        if let Some(link) = self.link.take() {
            link.shared().lock().abandon_commit(self.id);
        }
    }
}

impl Consumer {
    /// Runs the callbacks of commits that finished, with no lock held.
    pub(super) fn run_commit_callbacks(&self) {
        // Taken out of the handle's lock, matched with their outcomes under
        // the state's, and those still waiting put back in front of any
        // added meanwhile: the two locks are never held together.
        let mut callbacks = std::mem::take(&mut self.local().callbacks);
        if callbacks.is_empty() {
            return;
        }
        let mut done = Vec::new();
        {
            let mut core = self.inner.link.shared().lock();
            let mut i = 0;
            while i < callbacks.len() {
                match core.take_commit_result(callbacks[i].0) {
                    Some(result) => done.push((callbacks.remove(i).1, result)),
                    None => i += 1,
                }
            }
        }
        if !callbacks.is_empty() {
            let mut local = self.local();
            callbacks.append(&mut local.callbacks);
            local.callbacks = callbacks;
        }
        if !done.is_empty() {
            self.inner.link.kick();
        }
        for (callback, result) in done {
            callback(result);
        }
    }

    /// Commits the consumed positions of every assigned partition (with
    /// `enable.auto.offset.store=false`: the offsets stored with
    /// [`Consumer::store_offset`]) and waits for the coordinator's answer.
    /// Without automatic commits a rebalance waits for the next `poll` to
    /// revoke partitions, as the Java consumer's does: until then the
    /// partitions revoked since the last `poll` are committed too.
    ///
    /// # Cancel safety
    ///
    /// The OffsetCommit is sent when the future is first polled. Dropped
    /// before the answer, the commit lands or not (there is no telling
    /// which: read it back with [`Consumer::committed`], or commit again),
    /// and the consumer stays usable: later polls and commits work, and
    /// the dropped commit's outcome is discarded. The same holds for
    /// [`Consumer::commit_offsets`].
    pub async fn commit(&self) -> Result<(), Error> {
        let link = self.start()?;
        let id = self.with_core(|core, now| core.commit(now, None));
        self.wait_commit(&link, id).await
    }

    /// Commits the given offsets (the next offset to consume, per
    /// partition) and waits for the answer.
    pub async fn commit_offsets(
        &self,
        offsets: impl IntoIterator<Item = (TopicPartition, i64)>,
    ) -> Result<(), Error> {
        let link = self.start()?;
        let offsets = at_offsets(offsets);
        let id = self.with_core(|core, now| core.commit(now, Some(offsets)));
        self.wait_commit(&link, id).await
    }

    /// Starts a commit of the consumed positions without waiting; `callback`
    /// runs with the outcome inside a later `poll` (or `commit`, `close`).
    pub fn commit_async(&self, callback: impl FnOnce(Result<(), Error>) + Send + 'static) {
        if let Err(e) = self.start() {
            callback(Err(e));
            return;
        }
        let id = self.with_core(|core, now| core.commit(now, None));
        self.local().callbacks.push((id, Box::new(callback)));
    }

    async fn wait_commit(&self, link: &Link, id: CommitId) -> Result<(), Error> {
        let timeout = self.inner.config.default_api_timeout();
        // Dropped before the answer (a timeout, `select!`): the commit may
        // still land, and its outcome is dropped when it comes.
        let abandon = AbandonCommit {
            link: Some(link.clone()),
            id,
        };
        let result = match link
            .wait(timeout, None, Changes::ANSWERS, move |core, _| {
                or_refused(core, |core| core.take_commit_result(id))
            })
            .await
        {
            Some(Ok(outcome)) => outcome.and_then(|r| r),
            Some(Err(_stopped)) => Err(Error::Closed),
            None => Err(timed_out(link, "commit", timeout)),
        };
        abandon.answered(!matches!(result, Err(Error::Timeout { .. })));
        self.run_callbacks();
        result
    }

    /// The committed offsets of `partitions` (`None` where nothing is
    /// committed), read from the group coordinator.
    pub async fn committed(
        &self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<BTreeMap<TopicPartition, Option<i64>>, Error> {
        let link = self.start()?;
        let partitions: BTreeSet<TopicPartition> = partitions.into_iter().collect();
        let timeout = self.inner.config.default_api_timeout();
        let deadline = Instant::now() + timeout;
        // A coordinator that moved, is loading its offsets or is briefly
        // unavailable is asked again under the retry policy, as the Java
        // client's `committed` does, until the call's timeout.
        let mut retry = Retry::default();
        loop {
            let Some(q) = self.with_core(|core, now| core.query_committed(now, partitions.clone()))
            else {
                return Err(Error::Config {
                    property: "group.id".into(),
                    reason: "committed offsets belong to a group; set group.id".into(),
                });
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let response = link
                .wait(left, None, Changes::ANSWERS, move |core, _| {
                    or_refused(core, |core| core.take_query(q))
                })
                .await
                .ok_or_else(|| timed_out(&link, "committed offsets lookup", timeout))?
                .map_err(|_stopped| Error::Closed)??;
            let outcome = match response {
                Ok(response) => self.read_core(|core| core.read_committed_query(&response)),
                Err(source) => Err(Error::Request {
                    api: ApiKey::OffsetFetch,
                    source,
                }),
            };
            let error = match outcome {
                Ok(offsets) => {
                    return Ok(offsets
                        .into_iter()
                        .map(|(tp, o)| (tp, o.map(|o| o.offset)))
                        .collect())
                }
                Err(e) => e,
            };
            let delay = match &error {
                Error::Group {
                    code: Some(code), ..
                } if matches!(
                    classify(*code),
                    GroupErrorClass::Coordinator | GroupErrorClass::Transient
                ) =>
                {
                    self.with_core(|core, now| core.committed_lookup_failed(now, *code, &mut retry))
                }
                Error::Request { .. } => {
                    self.peek_core(|core, now| core.retry_wait(now, &mut retry))
                }
                _ => return Err(error),
            };
            if Instant::now() + delay >= deadline {
                return Err(error);
            }
            log::debug!("committed offsets lookup: {error}; asked again in {delay:?}");
            link.timer(delay).await;
        }
    }

    /// Stores the offset after `record` (its offset + 1, with its leader
    /// epoch) as what the next commit takes for its partition: the record
    /// was processed. Needs `enable.auto.offset.store=false` (with the
    /// default `true`, commits take the consumed positions, and this is an
    /// [`Error::Config`]); the partition must be assigned
    /// ([`Error::NotAssigned`]). Auto-commit, [`Consumer::commit`],
    /// [`Consumer::commit_async`], a commit while revoking (auto-commit)
    /// and [`Consumer::close`] then commit only what was stored, as in
    /// librdkafka. Stored offsets of a partition are forgotten when it is
    /// no longer assigned. Opens nothing.
    ///
    /// ```
    /// use lazykafka::{Consumer, ConsumerConfig, TopicPartition};
    ///
    /// let config = ConsumerConfig::builder()
    ///     .bootstrap_servers("127.0.0.1:9")
    ///     .group_id("billing")
    ///     .enable_auto_offset_store(false)
    ///     .build()?;
    /// let consumer = Consumer::new(config)?;
    /// let tp = TopicPartition::new("invoices", 0);
    /// consumer.assign([tp.clone()])?;
    /// // After processing the record at offset 41:
    /// consumer.store_offsets([(tp.clone(), 42)])?;
    /// assert_eq!(consumer.stored_offsets()[&tp], 42);
    /// assert!(consumer.store_offsets([(TopicPartition::new("other", 0), 1)]).is_err());
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn store_offset(&self, record: &ConsumerRecord) -> Result<(), Error> {
        let tp = TopicPartition::new(record.topic(), record.partition());
        let o = OffsetAndEpoch {
            offset: record.offset().saturating_add(1),
            leader_epoch: record.leader_epoch(),
        };
        self.peek_core(|core, _| core.store_offsets(BTreeMap::from([(tp, o)])))
    }

    /// Stores offsets (the next offset to consume, per partition) for the
    /// next commit, as [`Consumer::store_offset`] does for one record. All
    /// or nothing: one partition not assigned stores none.
    pub fn store_offsets(
        &self,
        offsets: impl IntoIterator<Item = (TopicPartition, i64)>,
    ) -> Result<(), Error> {
        let offsets = at_offsets(offsets);
        self.peek_core(|core, _| core.store_offsets(offsets))
    }

    /// The offsets stored with [`Consumer::store_offset`] for the next
    /// commit (empty with `enable.auto.offset.store=true`).
    pub fn stored_offsets(&self) -> BTreeMap<TopicPartition, i64> {
        self.read_core(|core| {
            core.stored_offsets()
                .map(|s| s.iter().map(|(tp, o)| (tp.clone(), o.offset)).collect())
                .unwrap_or_default()
        })
    }
}
