//! Where a consumer group's members should be and how they get there:
//! the regex subscriptions resolved, the subscription metadata, the
//! target assignment computed by the assignor (`uniform`, sticky; or
//! `range`), and each member moved towards its target (Kafka's
//! `CurrentAssignmentBuilder`: revoke first, then assign what others have
//! released).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::{Group, Member, Owned, TopicView, DEFAULT_ASSIGNOR};
use crate::group::TopicPattern;

impl Group {
    /// The topics member `m` subscribes to: by name, and through its
    /// regex as last resolved.
    fn member_topics<'a>(&'a self, m: &'a Member) -> impl Iterator<Item = &'a String> + 'a {
        let through_regex = m
            .regex
            .as_ref()
            .and_then(|r| self.resolved.get(r))
            .into_iter()
            .flatten();
        m.topics.iter().chain(through_regex)
    }

    /// Drops the resolutions of regexes no member subscribes to anymore.
    pub(super) fn forget_unused_regexes(&mut self) {
        let used: BTreeSet<&String> = self
            .members
            .values()
            .filter_map(|m| m.regex.as_ref())
            .collect();
        self.resolved.retain(|r, _| used.contains(r));
    }

    /// Resolves the group's regexes when one was never resolved, or when
    /// the last resolution is older than `interval` and the cluster's
    /// topics changed since (Kafka's `maybeUpdateRegularExpressions`,
    /// done at once here instead of on an executor). Returns whether a
    /// resolution changed.
    pub(super) fn resolve_regexes(
        &mut self,
        now: Instant,
        topics: &TopicView,
        interval: Duration,
    ) -> bool {
        self.forget_unused_regexes();
        let regexes: BTreeSet<String> = self
            .members
            .values()
            .filter_map(|m| m.regex.clone())
            .collect();
        if regexes.is_empty() {
            return false;
        }
        let names: BTreeSet<String> = topics.keys().cloned().collect();
        let unresolved = regexes.iter().any(|r| !self.resolved.contains_key(r));
        let stale = self.last_resolution.is_none_or(|t| now >= t + interval)
            && names != self.resolved_against;
        if !unresolved && !stale {
            return false;
        }
        let mut resolved = BTreeMap::new();
        for r in regexes {
            // Validated when it came in.
            let matched = match TopicPattern::new(&r) {
                Ok(p) => names.iter().filter(|t| p.matches(t)).cloned().collect(),
                Err(_) => BTreeSet::new(),
            };
            resolved.insert(r, matched);
        }
        self.last_resolution = Some(now);
        self.resolved_against = names;
        let changed = resolved != self.resolved;
        self.resolved = resolved;
        changed
    }

    /// Recomputes the subscribed topics' ids and partition counts; returns
    /// whether they changed (a topic created, grown or deleted).
    pub(super) fn update_subscription_metadata(&mut self, topics: &TopicView) -> bool {
        let subscribed: BTreeSet<&String> = self
            .members
            .values()
            .flat_map(|m| self.member_topics(m))
            .collect();
        let metadata: TopicView = subscribed
            .into_iter()
            .filter_map(|t| topics.get(t).map(|v| (t.clone(), *v)))
            .collect();
        if metadata == self.subscription_metadata {
            return false;
        }
        self.subscription_metadata = metadata;
        true
    }

    /// Removes members whose session ended (Kafka's session timer).
    pub(super) fn expire(&mut self, now: Instant) {
        let before = self.members.len();
        self.members.retain(|_, m| m.session_deadline > now);
        if self.members.len() != before {
            self.epoch += 1;
            let view = self.last_view.clone();
            self.compute_target(&view);
        }
    }

    /// The target assignment at the group epoch.
    pub(super) fn compute_target(&mut self, topics: &TopicView) {
        self.last_view = topics.clone();
        let assignor = self
            .members
            .values()
            .find_map(|m| m.assignor.clone())
            .unwrap_or_else(|| DEFAULT_ASSIGNOR.to_owned());
        let ids: Vec<String> = self.members.keys().cloned().collect();
        let mut target: BTreeMap<String, Owned> =
            ids.iter().map(|id| (id.clone(), Owned::new())).collect();
        let subscriptions: BTreeMap<&String, BTreeSet<&String>> = self
            .members
            .iter()
            .map(|(id, m)| (id, self.member_topics(m).collect()))
            .collect();
        let wanted: BTreeSet<&String> = subscriptions.values().flatten().copied().collect();
        for topic in wanted {
            let Some((id, count)) = topics.get(topic) else {
                continue;
            };
            let subscribers: Vec<&String> = ids
                .iter()
                .filter(|m| subscriptions[*m].contains(topic))
                .collect();
            let shares = if assignor == "range" {
                range(&subscribers, *count)
            } else {
                let current: BTreeMap<&String, BTreeSet<i32>> = subscribers
                    .iter()
                    .map(|m| {
                        let held = self
                            .target
                            .get(*m)
                            .and_then(|t| t.get(id))
                            .cloned()
                            .unwrap_or_default();
                        (*m, held)
                    })
                    .collect();
                uniform(&subscribers, *count, &current)
            };
            for (member, partitions) in shares {
                if !partitions.is_empty() {
                    target
                        .get_mut(member)
                        .expect("a member")
                        .insert(*id, partitions);
                }
            }
        }
        self.target = target;
        self.target_epoch = self.epoch;
    }

    /// Moves one member towards its target (Kafka's
    /// `CurrentAssignmentBuilder`): revoke first, then assign what others
    /// have released.
    pub(super) fn reconcile(&mut self, member_id: &str) {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let held_by_others: Owned = {
            let mut out = Owned::new();
            for (id, m) in &self.members {
                if id != member_id {
                    for (t, ps) in m.assigned.iter().chain(m.revoking.iter()) {
                        out.entry(*t).or_default().extend(ps);
                    }
                }
            }
            out
        };
        let target_epoch = self.target_epoch;
        let m = self.members.get_mut(member_id).expect("present");
        if !m.revoking.is_empty() {
            return;
        }
        if m.epoch >= target_epoch && m.assigned == target {
            return;
        }
        let mut revoke = Owned::new();
        for (t, ps) in &m.assigned {
            let keep = target.get(t);
            let gone: BTreeSet<i32> = ps
                .iter()
                .filter(|p| !keep.is_some_and(|k| k.contains(p)))
                .copied()
                .collect();
            if !gone.is_empty() {
                revoke.insert(*t, gone);
            }
        }
        if !revoke.is_empty() {
            // UNREVOKED_PARTITIONS: the member keeps its epoch until it
            // acknowledges.
            for (t, ps) in &revoke {
                if let Some(a) = m.assigned.get_mut(t) {
                    a.retain(|p| !ps.contains(p));
                }
            }
            m.assigned.retain(|_, ps| !ps.is_empty());
            m.revoking = revoke;
            return;
        }
        let mut next = Owned::new();
        for (t, ps) in &target {
            let free: BTreeSet<i32> = ps
                .iter()
                .filter(|p| !held_by_others.get(t).is_some_and(|h| h.contains(p)))
                .copied()
                .collect();
            if !free.is_empty() {
                next.insert(*t, free);
            }
        }
        m.assigned = next;
        if m.epoch != target_epoch {
            m.previous_epoch = m.epoch;
            m.epoch = target_epoch;
        }
    }
}

/// Kafka's range assignor for one topic: members in id order, contiguous
/// ranges, the first `count % n` members one more.
fn range<'a>(members: &[&'a String], count: i32) -> Vec<(&'a String, BTreeSet<i32>)> {
    let n = members.len() as i32;
    if n == 0 {
        return Vec::new();
    }
    let (quota, extra) = (count / n, count % n);
    let mut start = 0;
    members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let len = quota + i32::from((i as i32) < extra);
            let share = (start..start + len).collect();
            start += len;
            (*m, share)
        })
        .collect()
}

/// A uniform, sticky assignment of one topic: every member keeps what it
/// had up to its quota; the rest goes to the members with the fewest.
fn uniform<'a>(
    members: &[&'a String],
    count: i32,
    current: &BTreeMap<&'a String, BTreeSet<i32>>,
) -> Vec<(&'a String, BTreeSet<i32>)> {
    let n = members.len() as i32;
    if n == 0 {
        return Vec::new();
    }
    let (quota, extra) = (count / n, count % n);
    let mut shares: Vec<(&String, BTreeSet<i32>)> = Vec::new();
    let mut taken = BTreeSet::new();
    let mut extra_left = extra;
    for m in members {
        let mut keep = BTreeSet::new();
        for p in current.get(m).into_iter().flatten() {
            let cap = quota + i32::from(extra_left > 0);
            if (keep.len() as i32) < cap && *p < count && taken.insert(*p) {
                keep.insert(*p);
            }
        }
        if keep.len() as i32 > quota {
            extra_left -= 1;
        }
        shares.push((*m, keep));
    }
    for p in 0..count {
        if taken.contains(&p) {
            continue;
        }
        let (_, share) = shares
            .iter_mut()
            .min_by_key(|(m, s)| (s.len(), *m))
            .expect("members");
        share.insert(p);
    }
    shares
}
