//! The assignors (range, round-robin, cooperative-sticky) on hand-built
//! groups, their user data, and properties over generated groups
//! (proptest).

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

fn sticky_holder_to_assignment(sticky: &Sticky<'_>, holder: &[Option<usize>]) -> GroupAssignment {
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
