//! Partition assignors: which member of a group consumes which partition.
//!
//! In the classic group protocol the coordinator picks one member as the
//! group leader. The leader receives every member's subscription in its
//! JoinGroup response, runs the assignor the group agreed on, and sends the
//! result in its SyncGroup request. An assignor is therefore a pure function:
//! the members (with the topics they subscribe to, the partitions they say
//! they own and the generation they owned them in) and the partition count
//! of every topic go in, one list of partitions per member comes out.
//!
//! Three assignors are provided, named as on the wire so that lazykafka,
//! the Java client and librdkafka can share a group:
//!
//! | strategy | [`Assignor::name`] | [`Assignor::protocol`] |
//! |---|---|---|
//! | [`RangeAssignor`] | `range` | eager |
//! | [`RoundRobinAssignor`] | `roundrobin` | eager |
//! | [`CooperativeStickyAssignor`] | `cooperative-sticky` | cooperative (KIP-429) |
//!
//! The inputs are plain Rust values ([`GroupMember`]); converting them from
//! and to `ConsumerProtocolSubscription` / `ConsumerProtocolAssignment` is
//! the consumer's job. `docs/assignors.md` describes each algorithm.
//!
//! ```
//! use lazykafka::group::{Assignor, GroupMember, RangeAssignor, TopicPartition};
//! use std::collections::BTreeMap;
//!
//! let members = [GroupMember::new("m1", ["t"]), GroupMember::new("m2", ["t"])];
//! let partitions = BTreeMap::from([("t".to_owned(), 3)]);
//! let assignment = RangeAssignor.assign(&members, &partitions);
//! assert_eq!(assignment["m1"], [TopicPartition::new("t", 0), TopicPartition::new("t", 1)]);
//! assert_eq!(assignment["m2"], [TopicPartition::new("t", 2)]);
//! ```

use super::TopicPartition;
use crate::protocol::{Reader, Writer};
use bytes::Bytes;
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

/// How members hand partitions over during a rebalance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RebalanceProtocol {
    /// Every member revokes all its partitions before it rejoins, and
    /// receives a complete new assignment.
    Eager,
    /// Members keep their partitions while they rejoin (KIP-429); a
    /// partition that moves is first revoked by its owner and handed to its
    /// new owner in a follow-up rebalance.
    Cooperative,
}

impl RebalanceProtocol {
    /// The protocol of a member configured with `strategies`.
    ///
    /// As in the Java client, a member uses the highest protocol that every
    /// assignor it lists supports: [`Cooperative`](Self::Cooperative) only
    /// when every listed assignor is cooperative. So the default
    /// `range,cooperative-sticky` rebalances eagerly, which lets a group
    /// move from `range` to `cooperative-sticky` with two rolling restarts.
    ///
    /// ```
    /// use lazykafka::config::{AssignmentStrategy::*, RebalanceProtocol};
    ///
    /// assert_eq!(RebalanceProtocol::for_strategies(&[Range, CooperativeSticky]), RebalanceProtocol::Eager);
    /// assert_eq!(RebalanceProtocol::for_strategies(&[CooperativeSticky]), RebalanceProtocol::Cooperative);
    /// ```
    pub fn for_strategies(strategies: &[AssignmentStrategy]) -> RebalanceProtocol {
        strategies
            .iter()
            .map(|s| s.protocol())
            .min()
            .unwrap_or(RebalanceProtocol::Eager)
    }
}

/// The assignors this crate implements, as chosen by the
/// `partition.assignment.strategy` property.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AssignmentStrategy {
    /// `range`: each topic's partitions split into contiguous ranges, one
    /// per member subscribed to it (Java's `RangeAssignor`).
    Range,
    /// `roundrobin`: every partition dealt in turn to the members subscribed
    /// to its topic (Java's `RoundRobinAssignor`).
    RoundRobin,
    /// `cooperative-sticky`: balanced, keeping partitions where they are,
    /// under the cooperative rebalance protocol (KIP-429; Java's
    /// `CooperativeStickyAssignor`).
    CooperativeSticky,
}

impl AssignmentStrategy {
    unstable! {
        /// Every strategy, in the order of this enum.
        pub const ALL: [AssignmentStrategy; 3] = [
            AssignmentStrategy::Range,
            AssignmentStrategy::RoundRobin,
            AssignmentStrategy::CooperativeSticky,
        ];
    }

    /// The protocol name sent in JoinGroup, which every client of the group
    /// must agree on: `range`, `roundrobin` or `cooperative-sticky`.
    pub fn name(self) -> &'static str {
        self.assignor().name()
    }

    /// The Java client's class for the same assignor, which
    /// `partition.assignment.strategy` also accepts.
    pub fn java_class_name(self) -> &'static str {
        match self {
            AssignmentStrategy::Range => "org.apache.kafka.clients.consumer.RangeAssignor",
            AssignmentStrategy::RoundRobin => {
                "org.apache.kafka.clients.consumer.RoundRobinAssignor"
            }
            AssignmentStrategy::CooperativeSticky => {
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
            }
        }
    }

    /// The strategy named `name`: a protocol name ([`name`](Self::name)) or
    /// a Java class name ([`java_class_name`](Self::java_class_name)).
    ///
    /// ```
    /// use lazykafka::config::AssignmentStrategy;
    ///
    /// assert_eq!(AssignmentStrategy::from_name("roundrobin"), Some(AssignmentStrategy::RoundRobin));
    /// assert_eq!(
    ///     AssignmentStrategy::from_name("org.apache.kafka.clients.consumer.RangeAssignor"),
    ///     Some(AssignmentStrategy::Range)
    /// );
    /// assert_eq!(AssignmentStrategy::from_name("sticky"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<AssignmentStrategy> {
        AssignmentStrategy::ALL
            .into_iter()
            .find(|s| s.name() == name || s.java_class_name() == name)
    }

    unstable! {
        /// The assignor itself.
        pub fn assignor(self) -> &'static dyn Assignor {
            match self {
                AssignmentStrategy::Range => &RangeAssignor,
                AssignmentStrategy::RoundRobin => &RoundRobinAssignor,
                AssignmentStrategy::CooperativeSticky => &CooperativeStickyAssignor,
            }
        }
    }

    /// The highest rebalance protocol the assignor supports.
    pub fn protocol(self) -> RebalanceProtocol {
        self.assignor().protocol()
    }
}

impl fmt::Display for AssignmentStrategy {
    /// The protocol name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One member of a group as its leader sees it: what it subscribes to and
/// what it says it owns.
///
/// The fields mirror `ConsumerProtocolSubscription` v3 and the member list
/// of a JoinGroup response:
///
/// - `generation` comes from the subscription's `GenerationId` (v2+), with
///   -1 mapped to `None`. For an older subscription, Java's
///   cooperative-sticky assignor reads the generation from the user data;
///   [`decode_generation_user_data`] does the same.
/// - `rack` (v3+) is carried for completeness: rack-aware assignment
///   (KIP-881) needs the replicas' racks, which these assignors are not
///   given, so they ignore it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupMember {
    /// The member id the coordinator gave this member.
    pub member_id: String,
    /// `group.instance.id` of a static member (KIP-345).
    pub group_instance_id: Option<String>,
    /// The topics it subscribes to.
    pub topics: Vec<String>,
    /// The partitions it owned when it (re)joined (subscription v1+).
    pub owned_partitions: Vec<TopicPartition>,
    /// The generation in which it owned them; `None` when unknown.
    pub generation: Option<i32>,
    /// `client.rack` (subscription v3+).
    pub rack: Option<String>,
}

impl GroupMember {
    /// A dynamic member with a subscription and nothing owned.
    pub fn new<T: Into<String>>(
        member_id: impl Into<String>,
        topics: impl IntoIterator<Item = T>,
    ) -> Self {
        GroupMember {
            member_id: member_id.into(),
            topics: topics.into_iter().map(Into::into).collect(),
            ..GroupMember::default()
        }
    }

    /// Sets `group.instance.id`.
    pub fn with_group_instance_id(mut self, id: impl Into<String>) -> Self {
        self.group_instance_id = Some(id.into());
        self
    }

    /// Sets the partitions owned and the generation they were owned in; a
    /// negative generation (the wire's -1) means unknown.
    pub fn with_owned_partitions(
        mut self,
        partitions: impl IntoIterator<Item = TopicPartition>,
        generation: i32,
    ) -> Self {
        self.owned_partitions = partitions.into_iter().collect();
        self.generation = (generation >= 0).then_some(generation);
        self
    }

    /// Sets `client.rack`.
    pub fn with_rack(mut self, rack: impl Into<String>) -> Self {
        self.rack = Some(rack.into());
        self
    }
}

/// The result of an assignment: for every member id, its partitions, sorted.
///
/// Every member given to [`Assignor::assign`] has an entry, empty when it
/// gets nothing.
pub type GroupAssignment = BTreeMap<String, Vec<TopicPartition>>;

/// A partition assignor run by the group leader.
///
/// Implementations are pure and deterministic: the same members (in any
/// order) and partition counts always give the same assignment.
pub trait Assignor: fmt::Debug + Send + Sync {
    /// The protocol name in JoinGroup: `range`, `roundrobin`,
    /// `cooperative-sticky`.
    fn name(&self) -> &'static str;

    /// The highest rebalance protocol this assignor supports. A
    /// cooperative assignor also works under the eager protocol.
    fn protocol(&self) -> RebalanceProtocol;

    /// The `UserData` a member puts in its subscription for this assignor,
    /// given the generation of its current assignment. `None` (the
    /// default) writes a null.
    fn subscription_user_data(&self, generation: Option<i32>) -> Option<Bytes> {
        let _ = generation;
        None
    }

    /// Assigns the partitions of every subscribed topic.
    ///
    /// `partitions_per_topic` gives each topic's partition count (partitions
    /// are numbered from 0); a subscribed topic missing from it, or with a
    /// count of zero or less, is skipped, as Java does for topics without
    /// metadata. Member ids are unique in a group; if one repeats, its first
    /// entry is used.
    fn assign(
        &self,
        members: &[GroupMember],
        partitions_per_topic: &BTreeMap<String, i32>,
    ) -> GroupAssignment;
}

// ---------------------------------------------------------------------------
// Shared helpers

/// The members with duplicate ids dropped (first wins), sorted by member id.
fn unique_members(members: &[GroupMember]) -> Vec<&GroupMember> {
    let mut seen = BTreeSet::new();
    let mut out: Vec<&GroupMember> = members
        .iter()
        .filter(|m| seen.insert(m.member_id.as_str()))
        .collect();
    out.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    out
}

/// An empty entry for every member.
fn empty_assignment(members: &[&GroupMember]) -> GroupAssignment {
    members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect()
}

fn partition_count(partitions_per_topic: &BTreeMap<String, i32>, topic: &str) -> i32 {
    partitions_per_topic.get(topic).copied().unwrap_or(0).max(0)
}

/// The member order of Java's `AbstractPartitionAssignor.MemberInfo`: static
/// members first, by `group.instance.id`, so their place survives a restart
/// that changes their member id; then dynamic members by member id. (Member
/// id breaks ties between equal instance ids, which a coordinator does not
/// allow anyway, to keep the order total.)
fn java_member_order(a: &GroupMember, b: &GroupMember) -> Ordering {
    match (&a.group_instance_id, &b.group_instance_id) {
        (Some(x), Some(y)) => x.cmp(y).then_with(|| a.member_id.cmp(&b.member_id)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

fn subscribed_topics(member: &GroupMember) -> BTreeSet<&str> {
    member.topics.iter().map(String::as_str).collect()
}

// ---------------------------------------------------------------------------
// range

/// The `range` assignor (Java's `RangeAssignor`, librdkafka's `range`).
///
/// Topic by topic, the members subscribed to the topic are put in order
/// (static members first by `group.instance.id`, then the others by member
/// id) and each gets a contiguous range of partitions; when the count does
/// not divide evenly, the first members get one partition more. Every topic
/// starts again from the first member, so with many topics the first
/// members get more partitions in total; in exchange, members get the same
/// partition numbers of co-partitioned topics.
///
/// ```
/// use lazykafka::group::{Assignor, GroupMember, RangeAssignor, TopicPartition};
/// use std::collections::BTreeMap;
///
/// let members = [GroupMember::new("c0", ["t1", "t2"]), GroupMember::new("c1", ["t1", "t2"])];
/// let partitions = BTreeMap::from([("t1".to_owned(), 3), ("t2".to_owned(), 3)]);
/// let a = RangeAssignor.assign(&members, &partitions);
/// let tp = TopicPartition::new;
/// assert_eq!(a["c0"], [tp("t1", 0), tp("t1", 1), tp("t2", 0), tp("t2", 1)]);
/// assert_eq!(a["c1"], [tp("t1", 2), tp("t2", 2)]);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &'static str {
        "range"
    }

    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Eager
    }

    fn assign(
        &self,
        members: &[GroupMember],
        partitions_per_topic: &BTreeMap<String, i32>,
    ) -> GroupAssignment {
        let members = unique_members(members);
        let mut out = empty_assignment(&members);
        let mut members_per_topic: BTreeMap<&str, Vec<&GroupMember>> = BTreeMap::new();
        for &member in &members {
            for topic in subscribed_topics(member) {
                members_per_topic.entry(topic).or_default().push(member);
            }
        }
        for (topic, mut consumers) in members_per_topic {
            let count = partition_count(partitions_per_topic, topic);
            if count == 0 {
                continue;
            }
            consumers.sort_by(|a, b| java_member_order(a, b));
            // A group has far fewer than 2^31 members; saturate rather than wrap.
            let n = i32::try_from(consumers.len()).unwrap_or(i32::MAX);
            let per_member = count / n;
            let with_extra = count % n;
            for (i, member) in (0..n).zip(consumers) {
                let start = per_member * i + i.min(with_extra);
                let len = per_member + i32::from(i < with_extra);
                let partitions = out
                    .get_mut(&member.member_id)
                    .expect("every member has an entry");
                partitions.extend((start..start + len).map(|p| TopicPartition::new(topic, p)));
            }
        }
        for partitions in out.values_mut() {
            partitions.sort();
        }
        out
    }
}

// ---------------------------------------------------------------------------
// roundrobin

/// The `roundrobin` assignor (Java's `RoundRobinAssignor`, librdkafka's
/// `roundrobin`).
///
/// All partitions of all subscribed topics are listed by topic name, then
/// partition number, and dealt out one at a time to the members in order
/// (static members first by `group.instance.id`, then the others by member
/// id), going round; a member not subscribed to a partition's topic is
/// skipped for that partition. With equal subscriptions the counts differ by
/// at most one.
///
/// ```
/// use lazykafka::group::{Assignor, GroupMember, RoundRobinAssignor, TopicPartition};
/// use std::collections::BTreeMap;
///
/// let members = [GroupMember::new("c0", ["t1", "t2"]), GroupMember::new("c1", ["t1", "t2"])];
/// let partitions = BTreeMap::from([("t1".to_owned(), 3), ("t2".to_owned(), 3)]);
/// let a = RoundRobinAssignor.assign(&members, &partitions);
/// let tp = TopicPartition::new;
/// assert_eq!(a["c0"], [tp("t1", 0), tp("t1", 2), tp("t2", 1)]);
/// assert_eq!(a["c1"], [tp("t1", 1), tp("t2", 0), tp("t2", 2)]);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &'static str {
        "roundrobin"
    }

    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Eager
    }

    fn assign(
        &self,
        members: &[GroupMember],
        partitions_per_topic: &BTreeMap<String, i32>,
    ) -> GroupAssignment {
        let mut members = unique_members(members);
        let mut out = empty_assignment(&members);
        members.sort_by(|a, b| java_member_order(a, b));
        let subscriptions: Vec<BTreeSet<&str>> =
            members.iter().map(|m| subscribed_topics(m)).collect();
        let topics: BTreeSet<&str> = subscriptions.iter().flatten().copied().collect();
        let mut next = 0;
        for topic in topics {
            for partition in 0..partition_count(partitions_per_topic, topic) {
                // The topic came from some member's subscription, so this
                // finds a member within one turn.
                let Some(chosen) = (0..members.len())
                    .map(|step| (next + step) % members.len())
                    .find(|&i| subscriptions[i].contains(topic))
                else {
                    break;
                };
                out.get_mut(&members[chosen].member_id)
                    .expect("every member has an entry")
                    .push(TopicPartition::new(topic, partition));
                next = chosen + 1;
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------
// cooperative-sticky

/// The `cooperative-sticky` assignor (Java's `CooperativeStickyAssignor`,
/// librdkafka's `cooperative-sticky`; KIP-54, KIP-341, KIP-429).
///
/// It aims for, in this order:
///
/// 1. validity: a partition goes only to a member subscribed to its topic,
///    and to at most one member;
/// 2. balance: the loads are as even as the subscriptions allow (the sum
///    of the squared partition counts is the smallest possible; with equal
///    subscriptions, counts differ by at most one; in every case no
///    partition could move to a subscriber with two or more fewer);
/// 3. stickiness: among the most balanced assignments, one that leaves the
///    most partitions with their owners;
/// 4. the cooperative rule (KIP-429): a partition never moves directly from
///    one member to another within one rebalance. A partition that changes
///    owner is left out of this assignment, so its old owner revokes it;
///    the old owner then rejoins and the follow-up rebalance hands the
///    partition to its new owner.
///
/// Ownership claims come from each member's `owned_partitions` and
/// `generation` (`ConsumerProtocolSubscription` v1+ and v2+), not from user
/// data. Only members of the highest generation present keep their claims;
/// when two members of that generation claim the same partition, neither
/// keeps it, and it is withheld from everyone until both have revoked it.
/// (Members without a known generation keep their claims only when no
/// member's generation is known.) A partition is also withheld from a new
/// owner while any other member, even one of an older generation, still
/// claims it.
///
/// Because the target is optimal, the follow-up rebalance hands out every
/// withheld partition without moving any other, and a rebalance with
/// nothing changed returns every member's partitions unchanged.
///
/// Under the eager protocol members own nothing when they rejoin, so this
/// assignor then behaves as a balanced, deterministic assignor that
/// withholds nothing.
///
/// Cost: with equal subscriptions, at most partitions × members steps
/// (under 3 ms for 2000 partitions over 200 members); with different
/// subscriptions, a min-cost flow (about 40 ms for 1000 partitions over
/// 100 members, 250 ms for 2000 over 200; release builds).
///
/// ```
/// use lazykafka::group::{Assignor, CooperativeStickyAssignor, GroupMember, TopicPartition};
/// use std::collections::BTreeMap;
///
/// let tp = TopicPartition::new;
/// let partitions = BTreeMap::from([("t".to_owned(), 3)]);
/// // m1 owns all three partitions in generation 1; m2 joins.
/// let m1 = GroupMember::new("m1", ["t"]).with_owned_partitions([tp("t", 0), tp("t", 1), tp("t", 2)], 1);
/// let m2 = GroupMember::new("m2", ["t"]);
/// let first = CooperativeStickyAssignor.assign(&[m1, m2], &partitions);
/// // t-2 must move: m1 is told to revoke it, m2 does not get it yet.
/// assert_eq!(first["m1"], [tp("t", 0), tp("t", 1)]);
/// assert!(first["m2"].is_empty());
/// // After the revocation both rejoin (generation 2) and m2 gets t-2.
/// let m1 = GroupMember::new("m1", ["t"]).with_owned_partitions(first["m1"].clone(), 2);
/// let m2 = GroupMember::new("m2", ["t"]).with_owned_partitions([], 2);
/// let second = CooperativeStickyAssignor.assign(&[m1, m2], &partitions);
/// assert_eq!(second["m1"], [tp("t", 0), tp("t", 1)]);
/// assert_eq!(second["m2"], [tp("t", 2)]);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CooperativeStickyAssignor;

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &'static str {
        "cooperative-sticky"
    }

    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Cooperative
    }

    /// The generation as Java's `CooperativeStickyAssignor` writes it, for
    /// group leaders that read subscriptions older than v2.
    fn subscription_user_data(&self, generation: Option<i32>) -> Option<Bytes> {
        Some(encode_generation_user_data(generation))
    }

    fn assign(
        &self,
        members: &[GroupMember],
        partitions_per_topic: &BTreeMap<String, i32>,
    ) -> GroupAssignment {
        Sticky::new(members, partitions_per_topic).assign()
    }
}

/// The working state of one cooperative-sticky assignment. Members are
/// indexed in member-id order and partitions in (topic, partition) order;
/// every tie is broken by these indexes, so the result does not depend on
/// the order of the input.
struct Sticky<'a> {
    members: Vec<&'a GroupMember>,
    /// Topics subscribed by someone and with at least one partition, sorted.
    topics: Vec<&'a str>,
    /// Every partition to assign, as (index into `topics`, partition).
    partitions: Vec<(usize, i32)>,
    /// For each topic, the members subscribed to it, ascending.
    eligible: Vec<Vec<usize>>,
    /// For each partition, the member whose ownership claim stands.
    owner: Vec<Option<usize>>,
    /// For each partition, every member claiming it, whatever the
    /// generation.
    claimants: Vec<BTreeSet<usize>>,
    /// Whether every member subscribes to the same (existing) topics.
    equal_subscriptions: bool,
}

impl<'a> Sticky<'a> {
    fn new(members: &'a [GroupMember], partitions_per_topic: &BTreeMap<String, i32>) -> Self {
        let members = unique_members(members);
        let subscriptions: Vec<BTreeSet<&str>> =
            members.iter().map(|m| subscribed_topics(m)).collect();
        let topics: Vec<&str> = subscriptions
            .iter()
            .flatten()
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|t| partition_count(partitions_per_topic, t) > 0)
            .collect();
        let topic_index: BTreeMap<&str, usize> =
            topics.iter().enumerate().map(|(i, t)| (*t, i)).collect();
        let partitions: Vec<(usize, i32)> = topics
            .iter()
            .enumerate()
            .flat_map(|(t, name)| {
                (0..partition_count(partitions_per_topic, name)).map(move |p| (t, p))
            })
            .collect();
        let partition_index: BTreeMap<(usize, i32), usize> = partitions
            .iter()
            .enumerate()
            .map(|(i, tp)| (*tp, i))
            .collect();
        let eligible: Vec<Vec<usize>> = topics
            .iter()
            .map(|t| {
                (0..members.len())
                    .filter(|&m| subscriptions[m].contains(t))
                    .collect()
            })
            .collect();
        let member_topics: Vec<Vec<usize>> = (0..members.len())
            .map(|m| {
                (0..topics.len())
                    .filter(|&t| subscriptions[m].contains(topics[t]))
                    .collect()
            })
            .collect();
        let equal_subscriptions = member_topics.windows(2).all(|w| w[0] == w[1]);

        // Ownership claims, as Java's AbstractStickyAssignor weighs them:
        // only members of the highest generation present are current (all
        // members, when no generation is known); a partition claimed by two
        // current members stays with neither; and a claim on a topic the
        // member no longer subscribes to is not kept.
        let max_generation = members.iter().filter_map(|m| m.generation).max();
        let mut claimants = vec![BTreeSet::new(); partitions.len()];
        let mut current_claims: Vec<Vec<usize>> = vec![Vec::new(); partitions.len()];
        for (m, member) in members.iter().enumerate() {
            let current = max_generation.is_none() || member.generation == max_generation;
            for tp in &member.owned_partitions {
                let Some(&i) = topic_index
                    .get(tp.topic.as_str())
                    .and_then(|&t| partition_index.get(&(t, tp.partition)))
                else {
                    continue;
                };
                if claimants[i].insert(m) && current {
                    current_claims[i].push(m);
                }
            }
        }
        let owner = current_claims
            .iter()
            .zip(&partitions)
            .map(|(claims, &(t, _))| match claims[..] {
                [only] if subscriptions[only].contains(topics[t]) => Some(only),
                _ => None,
            })
            .collect();
        Sticky {
            members,
            topics,
            partitions,
            eligible,
            owner,
            claimants,
            equal_subscriptions,
        }
    }

    fn assign(self) -> GroupAssignment {
        let mut holder = self.target();
        // KIP-429: a partition whose owner changes is withheld from its new
        // owner until every other claimant has revoked it. A member keeps a
        // partition whose claim stands even when a stale claim names it too.
        for (i, slot) in holder.iter_mut().enumerate() {
            if let Some(m) = *slot {
                if self.owner[i] != Some(m) && self.claimants[i].iter().any(|&c| c != m) {
                    *slot = None;
                }
            }
        }
        let mut out = empty_assignment(&self.members);
        for (i, m) in holder.into_iter().enumerate() {
            if let Some(m) = m {
                let (t, p) = self.partitions[i];
                out.get_mut(&self.members[m].member_id)
                    .expect("every member has an entry")
                    .push(TopicPartition::new(self.topics[t], p));
            }
        }
        out
    }

    /// The balanced, sticky assignment before the cooperative rule: for
    /// each partition, its member. Among the most balanced assignments
    /// (smallest sum of squared member loads, which with equal
    /// subscriptions means loads differ by at most one) it keeps the most
    /// partitions with their owners.
    fn target(&self) -> Vec<Option<usize>> {
        if self.equal_subscriptions {
            self.quota_target()
        } else {
            self.flow_target()
        }
    }

    fn cost(&self, partition: usize, member: usize) -> i64 {
        i64::from(self.owner[partition] != Some(member))
    }

    /// Equal subscriptions: every member gets `P / n` partitions and `P % n`
    /// of them one more; those extra places go to the members owning the
    /// most, so the fewest partitions move. Each member keeps its first
    /// owned partitions up to its quota; the rest are dealt to the
    /// least-loaded members below quota.
    fn quota_target(&self) -> Vec<Option<usize>> {
        let n = self.members.len();
        let mut holder = vec![None; self.partitions.len()];
        if n == 0 {
            return holder;
        }
        let mut owned: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, owner) in self.owner.iter().enumerate() {
            if let Some(m) = *owner {
                owned[m].push(i);
            }
        }
        let (base, extra) = (self.partitions.len() / n, self.partitions.len() % n);
        let mut by_owned: Vec<usize> = (0..n).collect();
        by_owned.sort_by_key(|&m| (Reverse(owned[m].len()), m));
        let mut quota = vec![base; n];
        for &m in &by_owned[..extra] {
            quota[m] += 1;
        }
        let mut load = vec![0; n];
        for m in 0..n {
            for &i in owned[m].iter().take(quota[m]) {
                holder[i] = Some(m);
                load[m] += 1;
            }
        }
        for slot in holder.iter_mut().filter(|slot| slot.is_none()) {
            let m = (0..n)
                .filter(|&m| load[m] < quota[m])
                .min_by_key(|&m| (load[m], m))
                .expect("the quotas add up to the partition count");
            *slot = Some(m);
            load[m] += 1;
        }
        holder
    }

    /// Any subscriptions: a min-cost flow. Assigning a partition to a
    /// member that does not own it costs 1; a member's k-th partition costs
    /// `W * (2k - 1)`, so its load `L` costs `W * L^2`, with `W` larger than
    /// any number of moves. Partitions are added one at a time, each along
    /// a cheapest path in the residual graph (successive shortest paths),
    /// which keeps the assignment optimal at every step: most balanced
    /// first, then fewest moves.
    ///
    /// The residual graph is kept over members: a path enters the member
    /// that takes the new partition, then each member on it hands one of
    /// its partitions to the next, and the last one's load grows. Handing
    /// partition `q` from `x` to `y` costs `cost(q, y) - cost(q, x)`.
    fn flow_target(&self) -> Vec<Option<usize>> {
        let n = self.members.len();
        // Moves number at most P, and loads' squared sums differ by at
        // least 2, so W = P + 1 puts balance first.
        let weight = i64::try_from(self.partitions.len()).unwrap_or(i64::MAX / 4) + 1;
        let mut holder = vec![None; self.partitions.len()];
        let mut held: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
        for new in 0..self.partitions.len() {
            let Paths { dist, pred, .. } = self.shortest_paths(new, &held);
            let load_cost = |m: usize| {
                let load = i64::try_from(held[m].len()).unwrap_or(i64::MAX / 4);
                weight.saturating_mul(2 * load + 1)
            };
            let Some(end) = (0..n)
                .filter(|&m| dist[m] != i64::MAX)
                .min_by_key(|&m| (dist[m].saturating_add(load_cost(m)), m))
            else {
                continue; // no subscriber: cannot happen for a listed topic
            };
            let mut to = end;
            while let Some((q, from)) = pred[to] {
                if let Some(from) = from {
                    held[from].remove(&q);
                }
                held[to].insert(q);
                holder[q] = Some(to);
                match from {
                    Some(from) => to = from,
                    None => break,
                }
            }
        }
        holder
    }

    /// Cheapest paths from partition `new` to every member. Bellman-Ford
    /// with a queue: costs can be negative (handing a partition back to its
    /// owner), but the residual graph of an optimal assignment has no
    /// negative cycle.
    fn shortest_paths(&self, new: usize, held: &[BTreeSet<usize>]) -> Paths {
        let n = self.members.len();
        let mut paths = Paths {
            dist: vec![i64::MAX; n],
            pred: vec![None; n],
            queued: vec![false; n],
            queue: VecDeque::new(),
        };
        for &m in &self.eligible[self.partitions[new].0] {
            paths.relax(m, self.cost(new, m), (new, None));
        }
        // Without a negative cycle each member is queued at most n times;
        // the bound only keeps a bug from turning into a hang.
        let mut budget = n.saturating_mul(n).saturating_add(n);
        while let Some(x) = paths.queue.pop_front() {
            budget = budget.saturating_sub(1);
            if budget == 0 {
                debug_assert!(false, "negative cycle in the residual graph");
                break;
            }
            paths.queued[x] = false;
            let d = paths.dist[x];
            // Per topic, the partition of x cheapest to give away: one x
            // does not own (-1) before one it owns (0).
            let mut cheapest: BTreeMap<usize, (i64, usize)> = BTreeMap::new();
            for &q in &held[x] {
                let base = -self.cost(q, x);
                let entry = cheapest.entry(self.partitions[q].0).or_insert((base, q));
                if base < entry.0 {
                    *entry = (base, q);
                }
                // Handing a partition back to its owner costs nothing more.
                if let Some(owner) = self.owner[q] {
                    if owner != x {
                        paths.relax(owner, d + base, (q, Some(x)));
                    }
                }
            }
            for (t, (base, q)) in cheapest {
                for &y in &self.eligible[t] {
                    if y != x {
                        paths.relax(y, d + base + 1, (q, Some(x)));
                    }
                }
            }
        }
        paths
    }
}

/// The result of [`Sticky::shortest_paths`].
struct Paths {
    /// The cost of the cheapest path to each member (`i64::MAX`: none).
    dist: Vec<i64>,
    /// How each member is reached: the partition it receives, and from
    /// which member (`None` for the new partition).
    pred: Vec<Option<(usize, Option<usize>)>>,
    queued: Vec<bool>,
    queue: VecDeque<usize>,
}

impl Paths {
    fn relax(&mut self, member: usize, dist: i64, via: (usize, Option<usize>)) {
        if dist < self.dist[member] {
            self.dist[member] = dist;
            self.pred[member] = Some(via);
            if !self.queued[member] {
                self.queued[member] = true;
                self.queue.push_back(member);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// User data

/// Encodes the subscription user data of Java's `CooperativeStickyAssignor`:
/// a struct with one `int32` field, `generation` (-1 when unknown).
///
/// Java writes it so that a group leader reading a subscription older than
/// v2 (which has no `GenerationId`) still learns the member's generation;
/// lazykafka writes it for the same reason. The assignment's user data is
/// null for every assignor here.
///
/// ```
/// use lazykafka::group::assignor::{decode_generation_user_data, encode_generation_user_data};
///
/// let bytes = encode_generation_user_data(Some(7));
/// assert_eq!(&bytes[..], &[0, 0, 0, 7]);
/// assert_eq!(decode_generation_user_data(&bytes), Some(7));
/// assert_eq!(decode_generation_user_data(&encode_generation_user_data(None)), None);
/// ```
pub fn encode_generation_user_data(generation: Option<i32>) -> Bytes {
    let mut w = Writer::new();
    w.i32(generation.unwrap_or(-1));
    w.into_inner().freeze()
}

/// Reads a member's generation from sticky-assignor subscription user data,
/// for subscriptions older than v2; `None` when there is none to read or it
/// is negative (unknown).
///
/// Two layouts are understood:
/// - Java's `CooperativeStickyAssignor`: `int32 generation` (4 bytes);
/// - the eager sticky assignor's v1 layout, which librdkafka also writes for
///   `cooperative-sticky`: `[topic: string, partitions: [int32]]`
///   (the previous assignment), then `int32 generation`.
///
/// Anything else, including trailing bytes, gives `None`, as Java treats
/// undecodable user data as "no generation". This never panics and never
/// allocates more than the input's size.
pub fn decode_generation_user_data(user_data: &[u8]) -> Option<i32> {
    let mut r = Reader::new(Bytes::copy_from_slice(user_data));
    let generation = if user_data.len() == 4 {
        r.i32("generation").ok()?
    } else {
        // string (2-byte length) + array (4-byte count) is the smallest
        // element of the previous assignment.
        r.array("previous_assignment", false, 6, |r| {
            r.string("topic", false)?;
            r.array("partitions", false, 4, |r| r.i32("partition"))?;
            Ok(())
        })
        .ok()?;
        r.i32("generation").ok()?
    };
    r.finish().ok()?;
    (generation >= 0).then_some(generation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic, partition)
    }

    fn counts(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
        pairs.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    fn member(id: &str, topics: &[&str]) -> GroupMember {
        GroupMember::new(id, topics.iter().copied())
    }

    // ---- range (cases from Java's RangeAssignorTest) ----

    #[test]
    fn range_one_member_no_topic_and_nonexistent_topic() {
        let a = RangeAssignor.assign(&[member("c", &[])], &counts(&[("t", 3)]));
        assert_eq!(a, BTreeMap::from([("c".to_owned(), vec![])]));
        let a = RangeAssignor.assign(&[member("c", &["missing"])], &counts(&[("t", 3)]));
        assert_eq!(a["c"], []);
    }

    #[test]
    fn range_two_members_one_topic_one_partition() {
        let a = RangeAssignor.assign(
            &[member("c1", &["t"]), member("c2", &["t"])],
            &counts(&[("t", 1)]),
        );
        assert_eq!(a["c1"], [tp("t", 0)]);
        assert_eq!(a["c2"], []);
    }

    #[test]
    fn range_two_members_two_topics_six_partitions() {
        let a = RangeAssignor.assign(
            &[member("c1", &["t1", "t2"]), member("c0", &["t1", "t2"])],
            &counts(&[("t1", 3), ("t2", 3)]),
        );
        assert_eq!(
            a["c0"],
            [tp("t1", 0), tp("t1", 1), tp("t2", 0), tp("t2", 1)]
        );
        assert_eq!(a["c1"], [tp("t1", 2), tp("t2", 2)]);
    }

    #[test]
    fn range_mixed_subscriptions() {
        let a = RangeAssignor.assign(
            &[
                member("consumer1", &["topic1"]),
                member("consumer2", &["topic1", "topic2"]),
                member("consumer3", &["topic1"]),
            ],
            &counts(&[("topic1", 3), ("topic2", 2)]),
        );
        assert_eq!(a["consumer1"], [tp("topic1", 0)]);
        assert_eq!(
            a["consumer2"],
            [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)]
        );
        assert_eq!(a["consumer3"], [tp("topic1", 2)]);
    }

    #[test]
    fn range_orders_static_members_by_instance_id_first() {
        // Member ids sort the other way round; instance ids decide, and the
        // dynamic member comes last although its id sorts first.
        let members = [
            member("a-dynamic", &["t"]),
            member("m-2", &["t"]).with_group_instance_id("instance-1"),
            member("m-1", &["t"]).with_group_instance_id("instance-2"),
        ];
        let a = RangeAssignor.assign(&members, &counts(&[("t", 5)]));
        assert_eq!(a["m-2"], [tp("t", 0), tp("t", 1)]);
        assert_eq!(a["m-1"], [tp("t", 2), tp("t", 3)]);
        assert_eq!(a["a-dynamic"], [tp("t", 4)]);

        // A restart gives the static members new ids: same partitions.
        let restarted = [
            member("a-dynamic", &["t"]),
            member("z-9", &["t"]).with_group_instance_id("instance-1"),
            member("b-8", &["t"]).with_group_instance_id("instance-2"),
        ];
        let b = RangeAssignor.assign(&restarted, &counts(&[("t", 5)]));
        assert_eq!(b["z-9"], a["m-2"]);
        assert_eq!(b["b-8"], a["m-1"]);
    }

    #[test]
    fn duplicate_member_ids_keep_the_first_entry() {
        let members = [member("c", &["t1"]), member("c", &["t2"])];
        let a = RangeAssignor.assign(&members, &counts(&[("t1", 1), ("t2", 1)]));
        assert_eq!(a, BTreeMap::from([("c".to_owned(), vec![tp("t1", 0)])]));
    }

    // ---- roundrobin (cases from Java's RoundRobinAssignorTest) ----

    #[test]
    fn roundrobin_two_members_two_topics_six_partitions() {
        let a = RoundRobinAssignor.assign(
            &[member("c0", &["t1", "t2"]), member("c1", &["t1", "t2"])],
            &counts(&[("t1", 3), ("t2", 3)]),
        );
        assert_eq!(a["c0"], [tp("t1", 0), tp("t1", 2), tp("t2", 1)]);
        assert_eq!(a["c1"], [tp("t1", 1), tp("t2", 0), tp("t2", 2)]);
    }

    #[test]
    fn roundrobin_uneven_subscriptions_skip_members() {
        let a = RoundRobinAssignor.assign(
            &[
                member("consumer1", &["topic"]),
                member("consumer2", &["topic", "topic2"]),
                member("consumer3", &["topic"]),
            ],
            &counts(&[("topic", 3), ("topic2", 2)]),
        );
        assert_eq!(a["consumer1"], [tp("topic", 0)]);
        assert_eq!(
            a["consumer2"],
            [tp("topic", 1), tp("topic2", 0), tp("topic2", 1)]
        );
        assert_eq!(a["consumer3"], [tp("topic", 2)]);
    }

    #[test]
    fn roundrobin_static_members_keep_their_place() {
        let members = [
            member("consumer-b", &["t"]).with_group_instance_id("instance-1"),
            member("consumer-a", &["t"]).with_group_instance_id("instance-2"),
            member("consumer-c", &["t"]),
        ];
        let a = RoundRobinAssignor.assign(&members, &counts(&[("t", 4)]));
        assert_eq!(a["consumer-b"], [tp("t", 0), tp("t", 3)]);
        assert_eq!(a["consumer-a"], [tp("t", 1)]);
        assert_eq!(a["consumer-c"], [tp("t", 2)]);
    }

    // ---- cooperative-sticky (cases from Java's CooperativeStickyAssignorTest
    // and AbstractStickyAssignorTest) ----

    fn sticky(members: &[GroupMember], c: &BTreeMap<String, i32>) -> GroupAssignment {
        CooperativeStickyAssignor.assign(members, c)
    }

    #[test]
    fn sticky_one_member_gets_everything() {
        let a = sticky(&[member("c", &["t"])], &counts(&[("t", 3)]));
        assert_eq!(a["c"], [tp("t", 0), tp("t", 1), tp("t", 2)]);
        let a = sticky(&[member("c", &["missing"])], &counts(&[("t", 3)]));
        assert_eq!(a["c"], []);
    }

    #[test]
    fn sticky_member_joins_then_leaves() {
        let c = counts(&[("t", 3)]);
        let all = vec![tp("t", 0), tp("t", 1), tp("t", 2)];
        // c2 joins while c1 owns everything: c1 gives up t-2, which nobody
        // gets in this round.
        let first = sticky(
            &[
                member("c1", &["t"]).with_owned_partitions(all.clone(), 1),
                member("c2", &["t"]),
            ],
            &c,
        );
        assert_eq!(first["c1"], [tp("t", 0), tp("t", 1)]);
        assert_eq!(first["c2"], []);
        // Follow-up: c1 has revoked t-2.
        let second = sticky(
            &[
                member("c1", &["t"]).with_owned_partitions(first["c1"].clone(), 2),
                member("c2", &["t"]).with_owned_partitions([], 2),
            ],
            &c,
        );
        assert_eq!(second["c1"], [tp("t", 0), tp("t", 1)]);
        assert_eq!(second["c2"], [tp("t", 2)]);
        // c1 leaves: nobody else claims its partitions, so c2 gets them at
        // once and keeps its own.
        let third = sticky(
            &[member("c2", &["t"]).with_owned_partitions(second["c2"].clone(), 3)],
            &c,
        );
        assert_eq!(third["c2"], all);
    }

    #[test]
    fn sticky_reassignment_after_one_member_leaves_keeps_the_rest() {
        // Five topics of varied sizes, members with the first i+1 topics.
        let c = counts(&[("t1", 1), ("t2", 2), ("t3", 3), ("t4", 4), ("t5", 5)]);
        let names = ["t1", "t2", "t3", "t4", "t5"];
        let members: Vec<GroupMember> = (0..5)
            .map(|i| member(&format!("c{i}"), &names[..=i]))
            .collect();
        let first = sticky(&members, &c);
        assert_valid(&members, &c, &first, true);
        let rejoined: Vec<GroupMember> = members
            .iter()
            .filter(|m| m.member_id != "c2")
            .map(|m| {
                m.clone()
                    .with_owned_partitions(first[&m.member_id].clone(), 1)
            })
            .collect();
        let second = sticky(&rejoined, &c);
        assert_valid(&rejoined, &c, &second, true);
        // Nobody had to give anything up: everyone keeps what it had.
        for m in &rejoined {
            for tp in &first[&m.member_id] {
                assert!(
                    second[&m.member_id].contains(tp),
                    "{} lost {tp}",
                    m.member_id
                );
            }
        }
    }

    #[test]
    fn sticky_same_subscriptions_balance_without_moving_more_than_needed() {
        // Three members own 4/1/1 of six partitions: c1 gives up two, the
        // others keep theirs.
        let c = counts(&[("t", 6)]);
        let members = [
            member("c1", &["t"])
                .with_owned_partitions([tp("t", 0), tp("t", 1), tp("t", 2), tp("t", 3)], 5),
            member("c2", &["t"]).with_owned_partitions([tp("t", 4)], 5),
            member("c3", &["t"]).with_owned_partitions([tp("t", 5)], 5),
        ];
        let a = sticky(&members, &c);
        // c1 keeps its first two and revokes t-2 and t-3, which go to their
        // new owners in the follow-up.
        assert_eq!(a["c1"], [tp("t", 0), tp("t", 1)]);
        assert_eq!(a["c2"], [tp("t", 4)]);
        assert_eq!(a["c3"], [tp("t", 5)]);
        let rejoined: Vec<GroupMember> = members
            .iter()
            .map(|m| m.clone().with_owned_partitions(a[&m.member_id].clone(), 6))
            .collect();
        let b = sticky(&rejoined, &c);
        assert_eq!(b["c1"], [tp("t", 0), tp("t", 1)]);
        assert_eq!(b["c2"], [tp("t", 2), tp("t", 4)]);
        assert_eq!(b["c3"], [tp("t", 3), tp("t", 5)]);
    }

    #[test]
    fn sticky_partition_claimed_twice_in_one_generation_is_withheld() {
        // Java: testPartitionsTransferringOwnershipIncludeThePartitionClaimed
        // ByMultipleConsumersInSameGeneration.
        let c = counts(&[("t", 3)]);
        let members = [
            member("c1", &["t"]).with_owned_partitions([tp("t", 0), tp("t", 1)], 1),
            member("c2", &["t"]).with_owned_partitions([tp("t", 0), tp("t", 2)], 1),
            member("c3", &["t"]).with_owned_partitions([], 1),
        ];
        let a = sticky(&members, &c);
        assert_eq!(a["c1"], [tp("t", 1)]);
        assert_eq!(a["c2"], [tp("t", 2)]);
        assert_eq!(a["c3"], []);
        // Follow-up: t-0 has been revoked by both.
        let members = [
            member("c1", &["t"]).with_owned_partitions([tp("t", 1)], 2),
            member("c2", &["t"]).with_owned_partitions([tp("t", 2)], 2),
            member("c3", &["t"]).with_owned_partitions([], 2),
        ];
        assert_eq!(sticky(&members, &c)["c3"], [tp("t", 0)]);
    }

    #[test]
    fn sticky_highest_generation_wins_a_conflicting_claim() {
        // Java: testOwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration.
        let c = counts(&[("topic", 3), ("topic2", 3)]);
        let claimed = [tp("topic", 0), tp("topic", 2), tp("topic2", 1)];
        for stale in [
            member("c2", &["topic", "topic2"]).with_owned_partitions(claimed.clone(), 9),
            // Java: ...ForConsumerWithNoGeneration.
            member("c2", &["topic", "topic2"]).with_owned_partitions(claimed.clone(), -1),
        ] {
            let members = [
                member("c1", &["topic", "topic2"]).with_owned_partitions(claimed.clone(), 10),
                stale,
            ];
            let a = sticky(&members, &c);
            assert_eq!(a["c1"], claimed);
            assert_eq!(a["c2"], [tp("topic", 1), tp("topic2", 0), tp("topic2", 2)]);
        }
    }

    #[test]
    fn sticky_stale_claims_are_revoked_before_reassignment() {
        // Java: testEnsurePartitionsAssignedToHighestGeneration. Only c1's
        // claims (generation 10) count. Java hands topic2-1 straight to c2;
        // here it is withheld because c3, from an older generation, still
        // claims it and must revoke it first.
        let c = counts(&[("topic", 3), ("topic2", 3), ("topic3", 3)]);
        let all = ["topic", "topic2", "topic3"];
        let members = [
            member("c1", &all)
                .with_owned_partitions([tp("topic", 0), tp("topic2", 0), tp("topic3", 0)], 10),
            member("c2", &all)
                .with_owned_partitions([tp("topic", 1), tp("topic2", 1), tp("topic3", 1)], 9),
            member("c3", &all)
                .with_owned_partitions([tp("topic2", 1), tp("topic3", 0), tp("topic3", 2)], 8),
        ];
        let a = sticky(&members, &c);
        assert_eq!(a["c1"], [tp("topic", 0), tp("topic2", 0), tp("topic3", 0)]);
        assert_eq!(a["c2"], [tp("topic", 1), tp("topic3", 1)]);
        assert_eq!(a["c3"], [tp("topic", 2), tp("topic2", 2), tp("topic3", 2)]);
    }

    #[test]
    fn sticky_unsubscribed_topic_is_revoked_then_moved() {
        // c1 owns t2-0 but no longer subscribes to t2: the partition goes to
        // c2 only after c1 has revoked it.
        let c = counts(&[("t1", 2), ("t2", 1)]);
        let members = [
            member("c1", &["t1"]).with_owned_partitions([tp("t1", 0), tp("t2", 0)], 3),
            member("c2", &["t1", "t2"]).with_owned_partitions([tp("t1", 1)], 3),
        ];
        let a = sticky(&members, &c);
        assert_eq!(a["c1"], [tp("t1", 0)]);
        assert_eq!(a["c2"], [tp("t1", 1)]);
        let members = [
            member("c1", &["t1"]).with_owned_partitions([tp("t1", 0)], 4),
            member("c2", &["t1", "t2"]).with_owned_partitions([tp("t1", 1)], 4),
        ];
        let a = sticky(&members, &c);
        assert_eq!(a["c2"], [tp("t1", 1), tp("t2", 0)]);
    }

    #[test]
    fn sticky_ignores_claims_on_missing_topics_and_partitions() {
        let c = counts(&[("t", 2)]);
        let members = [member("c1", &["t"])
            .with_owned_partitions([tp("gone", 0), tp("t", 7), tp("t", -1), tp("t", 1)], 2)];
        assert_eq!(sticky(&members, &c)["c1"], [tp("t", 0), tp("t", 1)]);
    }

    #[test]
    fn sticky_balances_unequal_subscriptions() {
        // c0 can only take t1; c1 and c2 take both. t2's four partitions
        // must go to c1 and c2 so that c0 gets all of t1.
        let c = counts(&[("t1", 3), ("t2", 4)]);
        let members = [
            member("c0", &["t1"]),
            member("c1", &["t1", "t2"]),
            member("c2", &["t1", "t2"]),
        ];
        let a = sticky(&members, &c);
        assert_valid(&members, &c, &a, true);
        let sizes: Vec<usize> = a.values().map(Vec::len).collect();
        assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
    }

    #[test]
    fn names_and_protocols() {
        assert_eq!(RangeAssignor.name(), "range");
        assert_eq!(RoundRobinAssignor.name(), "roundrobin");
        assert_eq!(CooperativeStickyAssignor.name(), "cooperative-sticky");
        assert_eq!(RangeAssignor.protocol(), RebalanceProtocol::Eager);
        assert_eq!(RoundRobinAssignor.protocol(), RebalanceProtocol::Eager);
        assert_eq!(
            CooperativeStickyAssignor.protocol(),
            RebalanceProtocol::Cooperative
        );
        for s in AssignmentStrategy::ALL {
            assert_eq!(AssignmentStrategy::from_name(s.name()), Some(s));
            assert_eq!(AssignmentStrategy::from_name(s.java_class_name()), Some(s));
            assert_eq!(s.assignor().name(), s.to_string());
        }
        assert_eq!(
            RebalanceProtocol::for_strategies(&[]),
            RebalanceProtocol::Eager
        );
        assert_eq!(RangeAssignor.subscription_user_data(Some(3)), None);
    }

    #[test]
    fn generation_user_data() {
        assert_eq!(
            CooperativeStickyAssignor
                .subscription_user_data(Some(42))
                .as_deref(),
            Some(&[0, 0, 0, 42][..])
        );
        assert_eq!(
            &encode_generation_user_data(None)[..],
            &[0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(decode_generation_user_data(&[0, 0, 1, 0]), Some(256));
        assert_eq!(decode_generation_user_data(&[]), None);
        assert_eq!(decode_generation_user_data(&[0, 0, 1]), None);
        // The eager sticky layout: one topic "t" with partitions [0, 2],
        // then generation 5.
        let sticky_v1 = [
            0, 0, 0, 1, // one topic
            0, 1, b't', // "t"
            0, 0, 0, 2, // two partitions
            0, 0, 0, 0, 0, 0, 0, 2, // 0, 2
            0, 0, 0, 5, // generation
        ];
        assert_eq!(decode_generation_user_data(&sticky_v1), Some(5));
        // Trailing bytes, a truncated body or a hostile count: no generation.
        let mut trailing = sticky_v1.to_vec();
        trailing.push(0);
        assert_eq!(decode_generation_user_data(&trailing), None);
        assert_eq!(decode_generation_user_data(&sticky_v1[..10]), None);
        assert_eq!(
            decode_generation_user_data(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]),
            None
        );
        // The eager sticky v0 layout has no generation.
        assert_eq!(decode_generation_user_data(&sticky_v1[..19]), None);
    }

    // ---- properties ----

    /// Checks that `a` is a valid assignment of `c` to `members`: every
    /// member has an entry, each partition goes at most once, only to a
    /// subscriber, and (when `complete`) every partition of a subscribed
    /// topic is assigned.
    fn assert_valid(
        members: &[GroupMember],
        c: &BTreeMap<String, i32>,
        a: &GroupAssignment,
        complete: bool,
    ) {
        let members = unique_members(members);
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            members.iter().map(|m| &m.member_id).collect::<Vec<_>>()
        );
        let mut seen = BTreeSet::new();
        for m in &members {
            let partitions = &a[&m.member_id];
            assert!(partitions.windows(2).all(|w| w[0] < w[1]), "sorted");
            for tp in partitions {
                assert!(m.topics.contains(&tp.topic), "{tp} to a non-subscriber");
                assert!((0..partition_count(c, &tp.topic)).contains(&tp.partition));
                assert!(seen.insert(tp.clone()), "{tp} assigned twice");
            }
        }
        if complete {
            let subscribed: BTreeSet<&str> = members
                .iter()
                .flat_map(|m| m.topics.iter().map(String::as_str))
                .collect();
            for topic in subscribed {
                for p in 0..partition_count(c, topic) {
                    assert!(seen.contains(&tp(topic, p)), "{topic}-{p} unassigned");
                }
            }
        }
    }

    fn spread(a: &GroupAssignment) -> usize {
        let sizes = a.values().map(Vec::len);
        sizes.clone().max().unwrap_or(0) - sizes.min().unwrap_or(0)
    }

    /// No partition could move to a subscriber with two or more fewer.
    fn assert_locally_balanced(members: &[GroupMember], a: &GroupAssignment) {
        for m in unique_members(members) {
            for tp in &a[&m.member_id] {
                for other in unique_members(members) {
                    if other.topics.contains(&tp.topic) {
                        assert!(
                            a[&m.member_id].len() <= a[&other.member_id].len() + 1,
                            "{tp} could move from {} to {}",
                            m.member_id,
                            other.member_id
                        );
                    }
                }
            }
        }
    }

    const TOPICS: [&str; 5] = ["a", "b", "c", "d", "ghost"];

    prop_compose! {
        fn arb_counts()(n in proptest::collection::vec(0i32..8, 4)) -> BTreeMap<String, i32> {
            // "ghost" never has metadata.
            TOPICS[..4].iter().zip(n).map(|(t, n)| (t.to_string(), n)).collect()
        }
    }

    fn arb_topics() -> impl Strategy<Value = Vec<String>> {
        proptest::sample::subsequence(TOPICS.to_vec(), 0..=5)
            .prop_map(|ts| ts.into_iter().map(str::to_owned).collect())
    }

    prop_compose! {
        fn arb_member(id: usize)(
            topics in arb_topics(),
            instance in proptest::option::of(0..4usize),
            owned in proptest::collection::vec((0..5usize, -1i32..9), 0..8),
            generation in -1i32..4,
        ) -> GroupMember {
            let mut m = GroupMember::new(format!("m{id}"), topics)
                .with_owned_partitions(owned.into_iter().map(|(t, p)| tp(TOPICS[t], p)), generation);
            m.group_instance_id = instance.map(|i| format!("static-{i}"));
            m
        }
    }

    fn arb_members() -> impl Strategy<Value = Vec<GroupMember>> {
        (1..7usize).prop_flat_map(|n| (0..n).map(arb_member).collect::<Vec<_>>())
    }

    /// Members with one shared subscription.
    fn arb_equal_members() -> impl Strategy<Value = Vec<GroupMember>> {
        (arb_members(), arb_topics()).prop_map(|(mut members, topics)| {
            for m in &mut members {
                m.topics = topics.clone();
            }
            members
        })
    }

    fn sticky_holder_to_assignment(
        sticky: &Sticky<'_>,
        holder: &[Option<usize>],
    ) -> GroupAssignment {
        let mut out = empty_assignment(&sticky.members);
        for (i, m) in holder.iter().enumerate() {
            let (t, p) = sticky.partitions[i];
            out.get_mut(&sticky.members[m.unwrap()].member_id)
                .unwrap()
                .push(tp(sticky.topics[t], p));
        }
        out
    }

    /// What the sticky target minimizes: the sum of squared loads, then
    /// the partitions not left with their owner.
    fn objective(sticky: &Sticky<'_>, holder: &[Option<usize>]) -> (usize, usize) {
        let mut load = vec![0usize; sticky.members.len()];
        for m in holder.iter().flatten() {
            load[*m] += 1;
        }
        let moved = holder
            .iter()
            .zip(&sticky.owner)
            .filter(|(h, o)| h != o)
            .count();
        (load.iter().map(|l| l * l).sum(), moved)
    }

    /// The best objective over every assignment of partitions to
    /// subscribers (small inputs only).
    fn brute_force_optimum(sticky: &Sticky<'_>) -> (usize, usize) {
        fn go(sticky: &Sticky<'_>, holder: &mut Vec<Option<usize>>, best: &mut (usize, usize)) {
            let i = holder.len();
            if i == sticky.partitions.len() {
                *best = (*best).min(objective(sticky, holder));
                return;
            }
            for &m in &sticky.eligible[sticky.partitions[i].0] {
                holder.push(Some(m));
                go(sticky, holder, best);
                holder.pop();
            }
        }
        let mut best = (usize::MAX, usize::MAX);
        go(sticky, &mut Vec::new(), &mut best);
        best
    }

    fn eager() -> [&'static dyn Assignor; 2] {
        [&RangeAssignor, &RoundRobinAssignor]
    }

    /// One cooperative round trip: every member revokes what it was not
    /// assigned and rejoins with the next generation.
    fn rejoin(members: &[GroupMember], a: &GroupAssignment, generation: i32) -> Vec<GroupMember> {
        unique_members(members)
            .into_iter()
            .map(|m| {
                m.clone()
                    .with_owned_partitions(a[&m.member_id].clone(), generation)
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn eager_assignors_assign_every_partition_once(members in arb_members(), c in arb_counts()) {
            for assignor in eager() {
                assert_valid(&members, &c, &assignor.assign(&members, &c), true);
            }
        }

        #[test]
        fn eager_assignors_balance_equal_subscriptions(members in arb_equal_members(), c in arb_counts()) {
            prop_assert!(spread(&RoundRobinAssignor.assign(&members, &c)) <= 1);
            // Range balances each topic, not the total.
            let a = RangeAssignor.assign(&members, &c);
            for topic in c.keys() {
                let per_member = a.values().map(|ps| ps.iter().filter(|tp| &tp.topic == topic).count());
                let (max, min) = (per_member.clone().max().unwrap(), per_member.min().unwrap());
                prop_assert!(!members[0].topics.contains(topic) || max - min <= 1);
            }
        }

        #[test]
        fn assignors_are_deterministic_and_ignore_input_order(members in arb_members(), c in arb_counts()) {
            let mut reversed = members.clone();
            reversed.reverse();
            for s in AssignmentStrategy::ALL {
                let a = s.assignor().assign(&members, &c);
                prop_assert_eq!(&a, &s.assignor().assign(&members, &c));
                prop_assert_eq!(&a, &s.assignor().assign(&reversed, &c));
            }
        }

        #[test]
        fn cooperative_never_moves_a_partition_directly(members in arb_members(), c in arb_counts()) {
            let a = CooperativeStickyAssignor.assign(&members, &c);
            assert_valid(&members, &c, &a, false);
            let members = unique_members(&members);
            let max_generation = members.iter().filter_map(|m| m.generation).max();
            for m in &members {
                for tp in &a[&m.member_id] {
                    let others: Vec<_> = members.iter()
                        .filter(|o| o.member_id != m.member_id && o.owned_partitions.contains(tp))
                        .collect();
                    if others.is_empty() {
                        continue;
                    }
                    // Someone else claims it: then m must be its one valid
                    // owner, and the others' claims stale.
                    prop_assert!(m.owned_partitions.contains(tp), "{} moved to {}", tp, m.member_id);
                    prop_assert_eq!(m.generation, max_generation);
                    prop_assert!(others.iter().all(|o| o.generation != max_generation));
                }
            }
        }

        #[test]
        fn cooperative_follow_up_completes_and_stays(members in arb_members(), c in arb_counts()) {
            let first = CooperativeStickyAssignor.assign(&members, &c);
            let second_members = rejoin(&members, &first, 10);
            let second = CooperativeStickyAssignor.assign(&second_members, &c);
            assert_valid(&members, &c, &second, true);
            assert_locally_balanced(&second_members, &second);
            // Nothing was withheld or revoked in the follow-up...
            for (id, partitions) in &first {
                prop_assert!(partitions.iter().all(|tp| second[id].contains(tp)), "{} revoked again", id);
            }
            // ...and a third round changes nothing.
            let third = CooperativeStickyAssignor.assign(&rejoin(&second_members, &second, 11), &c);
            prop_assert_eq!(&second, &third);
        }

        #[test]
        fn sticky_balances_equal_subscriptions(members in arb_equal_members(), c in arb_counts()) {
            let first = CooperativeStickyAssignor.assign(&members, &c);
            let second = CooperativeStickyAssignor.assign(&rejoin(&members, &first, 10), &c);
            prop_assert!(spread(&second) <= 1, "{:?}", second);
            // Without claims, nothing is withheld: balanced at once.
            let fresh: Vec<GroupMember> = members.iter().map(|m| GroupMember {
                owned_partitions: vec![],
                ..m.clone()
            }).collect();
            let a = CooperativeStickyAssignor.assign(&fresh, &c);
            assert_valid(&fresh, &c, &a, true);
            prop_assert!(spread(&a) <= 1);
        }

        #[test]
        fn sticky_target_is_balanced(members in arb_members(), c in arb_counts()) {
            let sticky = Sticky::new(&members, &c);
            let target = sticky.target();
            prop_assert!(target.iter().all(Option::is_some));
            let a = sticky_holder_to_assignment(&sticky, &target);
            assert_valid(&members, &c, &a, true);
            assert_locally_balanced(&members, &a);
        }

        #[test]
        fn quota_and_flow_agree_on_equal_subscriptions(members in arb_equal_members(), c in arb_counts()) {
            let sticky = Sticky::new(&members, &c);
            prop_assert!(sticky.equal_subscriptions);
            prop_assert_eq!(
                objective(&sticky, &sticky.quota_target()),
                objective(&sticky, &sticky.flow_target())
            );
        }

        #[test]
        fn flow_is_optimal_on_small_groups(
            members in (1..4usize).prop_flat_map(|n| (0..n).map(arb_member).collect::<Vec<_>>()),
            n in proptest::collection::vec(0i32..3, 4),
        ) {
            let c: BTreeMap<String, i32> = TOPICS[..4].iter().zip(n).map(|(t, n)| (t.to_string(), n)).collect();
            let sticky = Sticky::new(&members, &c);
            let flow = objective(&sticky, &sticky.flow_target());
            prop_assert_eq!(flow, brute_force_optimum(&sticky));
        }

        #[test]
        fn user_data_decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_generation_user_data(&bytes);
        }

        #[test]
        fn generation_user_data_round_trips(generation in proptest::option::of(0i32..)) {
            prop_assert_eq!(decode_generation_user_data(&encode_generation_user_data(generation)), generation);
        }
    }
}
