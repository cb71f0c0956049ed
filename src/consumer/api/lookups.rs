//! The consumer's lookups that ask the cluster and wait: offsets by time,
//! first and end offsets (ListOffsets), and the partitions of a topic
//! (Metadata).

use super::{or_refused, timed_out, Consumer};
use crate::cluster::Changes;
use crate::error::Error;
use crate::fetch::{OffsetAndTimestamp, OffsetSpec};
use crate::group::TopicPartition;
use crate::protocol::ApiKey;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

impl Consumer {
    /// For each partition, the earliest offset whose timestamp is at or
    /// after the given one (milliseconds since the Unix epoch), with that
    /// record's timestamp; `None` where no such record exists. Asks each
    /// partition's leader (ListOffsets), so it may open leader connections.
    ///
    /// ```
    /// # // The same body on whichever runtime feature is enabled.
    /// # let body = async {
    /// # use lazykafka::mock::{MockCluster, MockRecord};
    /// # let mock = MockCluster::new(3).unwrap();
    /// # mock.create_topic_with_leaders("invoices", &[1, 3]).unwrap();
    /// # for p in 0..2 {
    /// #     let records = (0..3).map(|i| MockRecord::new(format!("{p}-{i}")).timestamp(1000 * (i + 1)));
    /// #     mock.produce("invoices", p, records).unwrap();
    /// # }
    /// # let bootstrap = mock.bootstrap_servers();
    /// use lazykafka::{Consumer, ConsumerConfig, TopicPartition};
    ///
    /// let config = ConsumerConfig::builder().bootstrap_servers(&bootstrap).build()?;
    /// let consumer = Consumer::new(config)?;
    /// let p0 = TopicPartition::new("invoices", 0);
    /// // Records at 1000, 2000 and 3000 ms: the first at or after 1500 is offset 1.
    /// let found = consumer.offsets_for_times([(p0.clone(), 1500)]).await?;
    /// let hit = found[&p0].expect("a record at or after 1500 ms");
    /// assert_eq!((hit.offset, hit.timestamp), (1, 2000));
    /// consumer.assign([p0.clone()])?;
    /// consumer.seek(&p0, hit.offset)?;
    /// # consumer.close().await?;
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    pub async fn offsets_for_times(
        &self,
        timestamps: impl IntoIterator<Item = (TopicPartition, i64)>,
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndTimestamp>>, Error> {
        let query = timestamps
            .into_iter()
            .map(|(tp, t)| (tp, OffsetSpec::Timestamp(t)))
            .collect();
        self.list_offsets(query).await
    }

    /// The first offset of each partition.
    pub async fn beginning_offsets(
        &self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<BTreeMap<TopicPartition, i64>, Error> {
        let query = partitions
            .into_iter()
            .map(|tp| (tp, OffsetSpec::Earliest))
            .collect();
        Ok(Self::offsets_only(self.list_offsets(query).await?))
    }

    /// The offset after the last record of each partition (the high
    /// watermark, or the last stable offset under read_committed).
    ///
    /// ```
    /// # // The same body on whichever runtime feature is enabled.
    /// # let body = async {
    /// # use lazykafka::mock::{MockCluster, MockRecord};
    /// # let mock = MockCluster::new(3).unwrap();
    /// # mock.create_topic_with_leaders("invoices", &[1, 3]).unwrap();
    /// # for p in 0..2 {
    /// #     let records = (0..3).map(|i| MockRecord::new(format!("{p}-{i}")).timestamp(1000 * (i + 1)));
    /// #     mock.produce("invoices", p, records).unwrap();
    /// # }
    /// # let bootstrap = mock.bootstrap_servers();
    /// use lazykafka::{Consumer, ConsumerConfig, TopicPartition};
    ///
    /// let config = ConsumerConfig::builder().bootstrap_servers(&bootstrap).build()?;
    /// let consumer = Consumer::new(config)?;
    /// let partitions = [TopicPartition::new("invoices", 0), TopicPartition::new("invoices", 1)];
    /// let ends = consumer.end_offsets(partitions.clone()).await?;
    /// let starts = consumer.beginning_offsets(partitions.clone()).await?;
    /// let lag: i64 = partitions.iter().map(|p| ends[p] - starts[p]).sum();
    /// assert_eq!(lag, 6);
    /// # consumer.close().await?;
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    pub async fn end_offsets(
        &self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<BTreeMap<TopicPartition, i64>, Error> {
        let query = partitions
            .into_iter()
            .map(|tp| (tp, OffsetSpec::Latest))
            .collect();
        Ok(Self::offsets_only(self.list_offsets(query).await?))
    }

    fn offsets_only(
        listed: BTreeMap<TopicPartition, Option<OffsetAndTimestamp>>,
    ) -> BTreeMap<TopicPartition, i64> {
        listed
            .into_iter()
            .filter_map(|(tp, o)| o.map(|o| (tp, o.offset)))
            .collect()
    }

    async fn list_offsets(
        &self,
        query: BTreeMap<TopicPartition, OffsetSpec>,
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndTimestamp>>, Error> {
        let link = self.start()?;
        let timeout = self.inner.config.default_api_timeout();
        let deadline = Instant::now() + timeout;
        let partitions: BTreeSet<TopicPartition> = query.keys().cloned().collect();
        // The leaders must be known first.
        link.wait(timeout, None, Changes::METADATA, move |core, _| {
            or_refused(core, |core| {
                core.want_leaders(&partitions).is_empty().then_some(())
            })
        })
        .await
        .ok_or_else(|| timed_out(&link, "offsets lookup (leaders unknown)", timeout))?
        .map_err(|_stopped| Error::Closed)??;
        let queries = link.shared().lock().query_offsets(Instant::now(), &query);
        link.kick();
        let mut out = BTreeMap::new();
        for q in queries {
            let left = deadline.saturating_duration_since(Instant::now());
            let response = link
                .wait(left, None, Changes::ANSWERS, move |core, _| {
                    or_refused(core, |core| core.take_query(q))
                })
                .await
                .ok_or_else(|| timed_out(&link, "offsets lookup", timeout))?
                .map_err(|_stopped| Error::Closed)??
                .map_err(|source| Error::Request {
                    api: ApiKey::ListOffsets,
                    source,
                })?;
            out.extend(self.read_core(|core| core.read_offsets_query(&response))?);
        }
        Ok(out)
    }

    /// The partitions of `topic`, in order, as the cluster metadata
    /// describes them (for assigning every partition of a topic).
    ///
    /// Waits up to `default.api.timeout.ms` until the metadata covers the
    /// topic with a leader for each partition, so it may open a connection
    /// (a bootstrap one when none is live). A topic the broker does not
    /// know (and does not create under `allow.auto.create.topics`) ends in
    /// [`Error::Topic`] with its error code once
    /// `topic.metadata.propagation.max.ms` passed, or at once for an error
    /// retrying can't fix (authorization, invalid name). When no broker
    /// answers, [`Error::Timeout`] names the last failure (a refused
    /// connection, say).
    ///
    /// ```
    /// # // The same body on whichever runtime feature is enabled.
    /// # let body = async {
    /// # let mock = lazykafka::mock::MockCluster::new(3).unwrap();
    /// # mock.create_topic("invoices", 3).unwrap();
    /// # let bootstrap = mock.bootstrap_servers();
    /// use lazykafka::{Consumer, ConsumerConfig};
    ///
    /// let config = ConsumerConfig::builder()
    ///     .bootstrap_servers(&bootstrap)
    ///     .build()?;
    /// let consumer = Consumer::new(config)?;
    /// let partitions = consumer.partitions_for("invoices").await?;
    /// assert_eq!(partitions.len(), 3);
    /// consumer.assign(partitions)?;
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    pub async fn partitions_for(&self, topic: &str) -> Result<Vec<TopicPartition>, Error> {
        let link = self.start()?;
        let timeout = self.inner.config.default_api_timeout();
        let asked = Instant::now();
        // Looked at again when the metadata changes, and once the topic's
        // propagation time is over (a retriable error is final then).
        let propagation = asked + self.inner.config.topic_metadata_propagation_max();
        let wanted = topic.to_owned();
        match link
            .wait(
                timeout,
                Some(propagation),
                Changes::METADATA,
                move |core, now| or_refused(core, |core| core.want_partitions(&wanted, now, asked)),
            )
            .await
        {
            Some(Ok(Ok(Ok(partitions)))) => Ok(partitions),
            Some(Ok(Err(refused))) => Err(refused),
            Some(Ok(Ok(Err(code)))) => Err(Error::Topic {
                topic: topic.to_owned(),
                code,
            }),
            Some(Err(_stopped)) => Err(Error::Closed),
            None => match self.read_core(|core| core.topic_error(topic)) {
                Some(code) => Err(Error::Topic {
                    topic: topic.to_owned(),
                    code,
                }),
                None => Err(timed_out(
                    &link,
                    "partitions lookup (topic metadata)",
                    timeout,
                )),
            },
        }
    }
}
