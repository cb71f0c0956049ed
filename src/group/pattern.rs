//! Topic patterns: the regular expressions of
//! `Consumer::subscribe_pattern`.
//!
//! A pattern is written in RE2 syntax (the `regex` crate's), the family of
//! RE2/J, which Kafka brokers compile KIP-848 regex subscriptions with. It
//! must match a topic's *whole* name, as both the broker
//! (`Pattern.matcher(topic).matches()`) and the Java client's classic
//! pattern subscription do: `pay.*` matches `payments`, not `repayments`.
//!
//! Under the classic protocol the consumer matches the pattern itself,
//! against metadata for every topic ([`TopicPattern::matching_topics`]);
//! under the consumer protocol (KIP-848) it sends the pattern as
//! SubscribedTopicRegex and the coordinator resolves it.

use crate::cluster::Metadata;
use crate::protocol::ErrorCode;
use regex::{Regex, RegexBuilder};
use std::collections::BTreeSet;
use std::fmt;

/// The most memory a compiled pattern may take (the `regex` crate's
/// program size and lazy DFA cache): a topic pattern is small, and a huge
/// one is refused when subscribing rather than grown without bound.
const SIZE_LIMIT: usize = 1 << 20;

/// A pattern that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    /// The pattern as given.
    pub pattern: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "topic pattern {:?}: {}", self.pattern, self.reason)
    }
}

impl std::error::Error for PatternError {}

/// A compiled topic pattern. Two patterns are equal when their sources
/// are.
///
/// ```
/// use lazykafka::group::TopicPattern;
///
/// let p = TopicPattern::new("pay(ments|outs)-[0-9]+")?;
/// assert!(p.matches("payments-1"));
/// assert!(!p.matches("repayments-1"), "the whole name must match");
/// assert!(TopicPattern::new("pay(").is_err());
/// # Ok::<(), lazykafka::group::PatternError>(())
/// ```
#[derive(Clone)]
pub struct TopicPattern {
    source: String,
    /// `source` anchored at both ends.
    whole: Regex,
}

impl TopicPattern {
    /// Compiles `pattern`; an empty pattern, a syntax error or a pattern
    /// too large to compile is a [`PatternError`].
    pub fn new(pattern: &str) -> Result<TopicPattern, PatternError> {
        let error = |reason: String| PatternError {
            pattern: pattern.to_owned(),
            reason,
        };
        if pattern.is_empty() {
            // Kafka reads an empty SubscribedTopicRegex as no regex at all.
            return Err(error("an empty pattern matches no topic".into()));
        }
        let build = |source: &str| {
            RegexBuilder::new(source)
                .size_limit(SIZE_LIMIT)
                .dfa_size_limit(SIZE_LIMIT)
                .build()
        };
        // The pattern alone first, so that an unbalanced one is refused
        // rather than completed by the anchoring group around it.
        build(pattern).map_err(|e| error(e.to_string()))?;
        let whole = build(&format!(r"\A(?:{pattern})\z")).map_err(|e| error(e.to_string()))?;
        Ok(TopicPattern {
            source: pattern.to_owned(),
            whole,
        })
    }

    /// The pattern as given (what SubscribedTopicRegex carries).
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `topic`'s whole name matches.
    pub fn matches(&self, topic: &str) -> bool {
        self.whole.is_match(topic)
    }

    /// The topics of `metadata` that the pattern matches, as the Java
    /// client's classic consumer chooses them: topics the metadata
    /// describes without error, and no internal topic (such as
    /// `__consumer_offsets`) when `exclude_internal` (the
    /// `exclude.internal.topics` property) is set.
    pub fn matching_topics(&self, metadata: &Metadata, exclude_internal: bool) -> BTreeSet<String> {
        metadata
            .topics
            .iter()
            .filter(|(name, t)| {
                t.error == ErrorCode::None
                    && !(exclude_internal && t.is_internal)
                    && self.matches(name)
            })
            .map(|(name, _)| name.clone())
            .collect()
    }
}

impl PartialEq for TopicPattern {
    fn eq(&self, other: &TopicPattern) -> bool {
        self.source == other.source
    }
}

impl Eq for TopicPattern {}

impl fmt::Debug for TopicPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TopicPattern").field(&self.source).finish()
    }
}

impl fmt::Display for TopicPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::TopicInfo;

    fn topic(error: ErrorCode, internal: bool) -> TopicInfo {
        TopicInfo {
            error,
            topic_id: [1; 16],
            is_internal: internal,
            partitions: Default::default(),
        }
    }

    #[test]
    fn the_whole_name_must_match() {
        let p = TopicPattern::new("orders-.*").unwrap();
        assert!(p.matches("orders-eu"));
        assert!(p.matches("orders-"));
        assert!(!p.matches("old-orders-eu"));
        // An alternation is anchored as a whole, not only its ends.
        let p = TopicPattern::new("a|b").unwrap();
        assert!(p.matches("a") && p.matches("b"));
        assert!(!p.matches("ab") && !p.matches("xa"));
        // Anchors the user wrote change nothing; (?m) inside stays inside.
        let p = TopicPattern::new("^t$").unwrap();
        assert!(p.matches("t") && !p.matches("tt"));
        let p = TopicPattern::new("(?m)t$").unwrap();
        assert!(!p.matches("t\nu"));
    }

    #[test]
    fn bad_patterns_are_refused_with_the_reason() {
        for bad in ["", "orders-(", "a)|(b", "[z-a]", "x{99999999}"] {
            let e = TopicPattern::new(bad).unwrap_err();
            assert_eq!(e.pattern, bad);
            assert!(!e.reason.is_empty(), "{bad:?}");
        }
        // Larger than the size limit once compiled: refused, not built.
        let e = TopicPattern::new(r"\w{2000}").unwrap_err();
        assert!(e.reason.contains("size limit"), "{}", e.reason);
    }

    #[test]
    fn re2_syntax_as_the_broker_reads_it() {
        // Character classes, counted repetition, non-greedy and Perl
        // classes are RE2 (and RE2/J); look-around and backreferences are
        // not, in either.
        let p = TopicPattern::new(r"[a-c]{2}\d+\.v.*?").unwrap();
        assert!(p.matches("ab12.v1"));
        assert!(TopicPattern::new(r"(?=x)").is_err());
        assert!(TopicPattern::new(r"(a)\1").is_err());
    }

    #[test]
    fn matching_topics_leaves_out_errors_and_internal_topics() {
        let mut md = Metadata::default();
        md.topics
            .insert("__consumer_offsets".into(), topic(ErrorCode::None, true));
        md.topics.insert("_t".into(), topic(ErrorCode::None, false));
        md.topics.insert(
            "_gone".into(),
            topic(ErrorCode::UnknownTopicOrPartition, false),
        );
        md.topics
            .insert("other".into(), topic(ErrorCode::None, false));
        let p = TopicPattern::new("_.*").unwrap();
        assert_eq!(
            p.matching_topics(&md, true),
            BTreeSet::from(["_t".to_owned()])
        );
        assert_eq!(
            p.matching_topics(&md, false),
            BTreeSet::from(["__consumer_offsets".to_owned(), "_t".to_owned()])
        );
    }
}
