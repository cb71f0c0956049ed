//! The examples' logger: the library's `log` lines on standard error, one
//! per line, as `warn: lazykafka: ...`.
//!
//! `RUST_LOG` picks the level as `env_logger` reads it, for the common
//! forms: a level alone (`debug`), or `target=level` entries separated by
//! commas (`lazykafka=debug`, `lazykafka::cluster=trace,warn`); the entry
//! with the longest target that starts a record's target wins, and a level
//! alone sets the rest. Levels: `off`, `error`, `warn` (the default),
//! `info`, `debug`, `trace`.

use log::{Level, LevelFilter, Log, Metadata, Record};
use std::io::Write;

struct StderrLogger {
    /// `(target prefix, level)`, the longest prefix first; `""` for the
    /// default.
    directives: Vec<(String, LevelFilter)>,
}

impl StderrLogger {
    fn level_for(&self, target: &str) -> LevelFilter {
        self.directives
            .iter()
            .find(|(prefix, _)| target.starts_with(prefix.as_str()))
            .map_or(LevelFilter::Warn, |(_, level)| *level)
    }
}

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= self.level_for(metadata.target())
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
            Level::Trace => "trace",
        };
        let crate_name = record.target().split("::").next().unwrap_or_default();
        // One line, whatever the message holds.
        let message = record.args().to_string().replace(['\n', '\r'], " ");
        let _ = writeln!(std::io::stderr(), "{level}: {crate_name}: {message}");
    }

    fn flush(&self) {}
}

/// Parses `RUST_LOG` (see the module documentation); `None` when unset.
fn directives(spec: Option<&str>) -> Vec<(String, LevelFilter)> {
    let mut out: Vec<(String, LevelFilter)> = Vec::new();
    for entry in spec.unwrap_or("warn").split(',').map(str::trim) {
        let (target, level) = match entry.rsplit_once('=') {
            Some((target, level)) => (target, level),
            None => match entry.parse::<LevelFilter>() {
                Ok(_) => ("", entry),
                // A target alone means every level of it.
                Err(_) => (entry, "trace"),
            },
        };
        if let Ok(level) = level.parse::<LevelFilter>() {
            out.push((target.to_owned(), level));
        }
    }
    out.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
    out
}

/// Installs the logger (once; a second call changes nothing).
pub fn init() {
    let spec = std::env::var("RUST_LOG").ok();
    let directives = directives(spec.as_deref());
    let max = directives
        .iter()
        .map(|(_, level)| *level)
        .max()
        .unwrap_or(LevelFilter::Warn);
    // Lives as long as the process (set_logger takes a 'static logger).
    let logger: &'static StderrLogger = Box::leak(Box::new(StderrLogger { directives }));
    if log::set_logger(logger).is_ok() {
        log::set_max_level(max);
    }
}
