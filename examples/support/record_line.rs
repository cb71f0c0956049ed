//! The JSON line the `consume` example writes for each record, shared with
//! the same command line on librdkafka in `benches/compare.rs`, so that
//! both write exactly the same line.

use serde::Serialize;
use std::borrow::Cow;

/// One record on stdout.
#[derive(Serialize)]
pub struct RecordLine<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Cow<'a, str>>,
    pub value: Option<Cow<'a, str>>,
}
