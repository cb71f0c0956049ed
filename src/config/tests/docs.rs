//! docs/configuration.md against the property tables: its tables of
//! properties are rendered from them (and rewritten by
//! `LAZYKAFKA_WRITE_DOCS=1 cargo test --lib config::tests::docs`), and
//! every property a page under docs/ names is one a client reads, or one
//! listed here as named but not read.

use crate::config::table::PropertyDoc;
use crate::config::{common, consumer, producer, ConsumerConfig, ProducerConfig};
use crate::error::Error;

const HEADER: &str =
    "| property | typed API | default | meaning | validation |\n|---|---|---|---|---|\n";

fn row(doc: &PropertyDoc) -> String {
    format!(
        "| `{}`{} | {} | {} | {} | {} |\n",
        doc.name, doc.note, doc.typed, doc.default, doc.meaning, doc.validation
    )
}

/// The consumer's table: every property it takes, in the order of
/// `ConsumerConfig::PROPERTIES`, then the setters that are code.
fn consumer_table() -> String {
    let mut out = HEADER.to_owned();
    for name in ConsumerConfig::PROPERTIES {
        let doc = consumer::DOCS
            .iter()
            .chain(common::DOCS)
            .find(|d| d.name == *name)
            .unwrap_or_else(|| panic!("{name} has no row in a table"));
        out.push_str(&row(doc));
    }
    for [typed, default, meaning, validation] in common::CODE_DOCS {
        out.push_str(&format!(
            "| — | {typed} | {default} | {meaning} | {validation} |\n"
        ));
    }
    out
}

/// The producer's table: its own properties, in the order of
/// `ProducerConfig::PROPERTIES` (the shared ones are the consumer's table).
fn producer_table() -> String {
    let mut out = HEADER.to_owned();
    for name in ProducerConfig::PROPERTIES {
        if let Some(doc) = producer::DOCS.iter().find(|d| d.name == *name) {
            out.push_str(&row(doc));
        }
    }
    out
}

fn begin(table: &str) -> String {
    format!("<!-- properties:{table}:begin (generated from src/config/*/properties.rs) -->\n")
}

fn end(table: &str) -> String {
    format!("<!-- properties:{table}:end -->")
}

/// `doc` with the text between `table`'s markers replaced by `rendered`.
fn with_table(doc: &str, table: &str, rendered: &str) -> String {
    let (begin, end) = (begin(table), end(table));
    let start = doc
        .find(&begin)
        .unwrap_or_else(|| panic!("docs/configuration.md lacks {begin:?}"))
        + begin.len();
    let stop = start
        + doc[start..]
            .find(&end)
            .unwrap_or_else(|| panic!("docs/configuration.md lacks {end:?}"));
    format!("{}{rendered}{}", &doc[..start], &doc[stop..])
}

#[test]
fn the_property_tables_in_docs_are_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let fresh = with_table(&doc, "consumer", &consumer_table());
    let fresh = with_table(&fresh, "producer", &producer_table());
    if fresh == doc {
        return;
    }
    if std::env::var_os("LAZYKAFKA_WRITE_DOCS").is_some_and(|v| v == "1") {
        std::fs::write(path, fresh).unwrap();
        return;
    }
    panic!(
        "docs/configuration.md's property tables are not what the tables in \
         src/config/*/properties.rs say; run LAZYKAFKA_WRITE_DOCS=1 cargo test --lib \
         config::tests::docs and commit the result. Expected:\n{}{}",
        consumer_table(),
        producer_table()
    );
}

#[test]
fn every_property_is_in_a_table_once() {
    let sorted = |names: Vec<&'static str>| {
        let mut names = names;
        names.sort_unstable();
        names
    };
    let consumer: Vec<&str> = common::PROPERTIES
        .iter()
        .chain(consumer::PROPERTIES)
        .copied()
        .collect();
    assert_eq!(
        sorted(consumer),
        sorted(ConsumerConfig::PROPERTIES.to_vec())
    );
    let producer: Vec<&str> = common::PROPERTIES
        .iter()
        .chain(producer::PROPERTIES)
        .copied()
        .collect();
    assert_eq!(
        sorted(producer),
        sorted(ProducerConfig::PROPERTIES.to_vec())
    );
}

/// Names the docs give in backticks, dotted like properties, that no
/// client reads: other systems' settings, and properties refused with a
/// reason. Each must be named somewhere under docs/ (so that the list
/// does not outlive the text).
const NAMED_BUT_NOT_READ: &[&str] = &[
    // Brokers' and topics' settings.
    "auto.create.topics.enable",
    "broker.rack",
    "connections.max.reauth.ms",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.regex.refresh.interval.ms",
    "group.consumer.session.timeout.ms",
    "group.initial.rebalance.delay.ms",
    "max.incremental.fetch.session.cache.slots",
    "max.message.bytes",
    "message.timestamp.type",
    "min.incremental.fetch.session.eviction.ms",
    "producer.id.expiration.ms",
    "replica.selector.class",
    "share.version",
    "socket.request.max.bytes",
    "transaction.max.timeout.ms",
    "transaction.partition.verification",
    "transaction.version",
    // librdkafka's and the Java client's, which no client here has.
    "batch.num.messages",
    "enable.sparse.connections",
    "partitioner.adaptive.partitioning.enable",
    "partitioner.availability.timeout.ms",
    "queue.buffering.max.messages",
    "queued.max.messages.kbytes",
    "socket.nagle.disable",
    // Refused, with the reason (docs/configuration.md says which).
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "key.deserializer",
    "key.serializer",
    "partitioner.class",
    "transaction.timeout.ms",
    "transactional.id",
    "value.deserializer",
    "value.serializer",
    // Not a property: a function of another client (franz-go).
    "consumer.init",
];

/// Whether a client reads `name`: setting it is accepted, or refused only
/// for its value.
fn a_client_reads(name: &str) -> bool {
    let reads = |result: Result<(), Error>| match result {
        Ok(()) => true,
        Err(Error::Config { reason, .. }) => reason.starts_with("invalid value"),
        Err(_) => false,
    };
    // Each client ignores the other's properties (one map serves both):
    // a property is read by the client it belongs to.
    (!super::super::producer::producer_only(name)
        && reads(ConsumerConfig::builder().set(name, "0").map(drop)))
        || (!super::super::consumer::consumer_only(name)
            && reads(ProducerConfig::builder().set(name, "0").map(drop)))
}

/// The backticked names under docs/ that look like properties: dotted
/// lower-case words, outside code blocks, before any `=` or space.
fn names_in_docs() -> Vec<(String, String)> {
    const NOT_PROPERTIES: [&str; 9] =
        ["md", "rs", "toml", "json", "txt", "svg", "sh", "go", "html"];
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/docs");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let page = path.file_name().unwrap().to_string_lossy().into_owned();
        let prose = text.split("```").step_by(2).collect::<Vec<_>>().join("\n");
        for (i, span) in prose.split('`').enumerate() {
            if i % 2 == 0 || span.contains('\n') {
                continue;
            }
            let name = span.split(['=', ' ']).next().unwrap_or_default();
            let words: Vec<&str> = name.split('.').collect();
            let looks_like_a_property = words.len() > 1
                && name.starts_with(|c: char| c.is_ascii_lowercase())
                && words.iter().all(|w| {
                    !w.is_empty()
                        && w.chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                })
                && !NOT_PROPERTIES.contains(words.last().unwrap());
            if looks_like_a_property {
                names.push((page.clone(), name.to_owned()));
            }
        }
    }
    names
}

#[test]
fn every_property_the_docs_name_is_read() {
    let names = names_in_docs();
    for (page, name) in &names {
        assert!(
            a_client_reads(name) || NAMED_BUT_NOT_READ.contains(&name.as_str()),
            "docs/{page} names `{name}`, which neither client reads (or add it to \
             NAMED_BUT_NOT_READ, if the page means another system's setting)"
        );
    }
    for listed in NAMED_BUT_NOT_READ {
        assert!(
            names.iter().any(|(_, name)| name == listed),
            "{listed} is named nowhere under docs/ any more"
        );
        assert!(!a_client_reads(listed), "{listed} is read by a client");
    }
}
