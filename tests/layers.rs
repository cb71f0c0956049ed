//! The layer order of docs/architecture.md, checked on the source: each
//! pure or sans-IO layer names only the crate modules below it. `error`
//! wraps the errors of these layers, so a layer that used `crate::error`
//! (or `config`, whose parsing returns that `Error`) would form a cycle.

use std::fs;
use std::path::{Path, PathBuf};

/// Each layer and the crate modules it may use.
const LAYERS: &[(&str, &[&str])] = &[
    ("protocol", &[]),
    ("records", &["protocol"]),
    ("sasl", &[]),
    ("cluster", &["protocol", "events", "sasl"]),
    ("group", &["protocol", "cluster"]),
    (
        "fetch",
        &["protocol", "records", "cluster", "group", "events"],
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crate modules `source` names in code (`crate::x`), with their lines;
/// comments are skipped, so doc links to higher layers stay allowed.
fn crate_uses(source: &str) -> Vec<(usize, String)> {
    let mut uses = Vec::new();
    for (n, line) in source.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for (i, _) in line.match_indices("crate::") {
            let module: String = line[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            uses.push((n + 1, module));
        }
    }
    uses
}

#[test]
fn each_layer_uses_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (layer, allowed) in LAYERS {
        let mut files = Vec::new();
        let dir = src.join(layer);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
        let file = src.join(format!("{layer}.rs"));
        if file.is_file() {
            files.push(file);
        }
        assert!(!files.is_empty(), "no source for {layer}");
        for file in files {
            let source = fs::read_to_string(&file).unwrap();
            for (line, module) in crate_uses(&source) {
                if module != *layer && !allowed.contains(&module.as_str()) {
                    violations.push(format!("{}:{line}: crate::{module}", file.display()));
                }
            }
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn the_scan_sees_a_use_and_skips_a_comment() {
    let uses = crate_uses("use crate::error::ErrorCode;\n/// [`E`](crate::error::Error)\n");
    assert_eq!(uses, vec![(1, "error".to_owned())]);
}
