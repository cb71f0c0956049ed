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
/// (a few milliseconds for thousands of partitions over hundreds of
/// members); with different subscriptions, a min-cost flow, slower by
/// about two orders of magnitude at the same size.
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

/// Each partition's claimants (by index into `members`), and among them
/// the members of the highest generation present (all, when no
/// generation is known), from the partitions each member says it owns.
/// Claims on unknown topics or partitions are left out.
fn ownership_claims(
    members: &[&GroupMember],
    topic_index: &BTreeMap<&str, usize>,
    partition_index: &BTreeMap<(usize, i32), usize>,
) -> (Vec<BTreeSet<usize>>, Vec<Vec<usize>>) {
    let max_generation = members.iter().filter_map(|m| m.generation).max();
    let mut claimants = vec![BTreeSet::new(); partition_index.len()];
    let mut current_claims: Vec<Vec<usize>> = vec![Vec::new(); partition_index.len()];
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
    (claimants, current_claims)
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
        let (claimants, current_claims) =
            ownership_claims(&members, &topic_index, &partition_index);
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
mod tests;
