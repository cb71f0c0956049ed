//! The public API, listed: `docs/public-api.txt` is every item an
//! application can name without the `unstable-internals` feature, with its
//! signature, fields, variants, trait impls and auto traits, rendered from
//! rustdoc's JSON output (`cargo rustdoc -- --output-format json`; the
//! format is unstable, so the stable toolchain is asked for it with
//! `RUSTC_BOOTSTRAP=1`). The test fails when the code and the listing part:
//! a change to the public API is then a change to that file too, in the
//! same commit. It also fails when the two runtime features build different
//! APIs, when a public signature names a type the application cannot name,
//! and when the documentation of a public item, README.md or an example
//! names a module that is public only with `unstable-internals`.
//!
//! Regenerate the listing after a deliberate change with
//! `LAZYKAFKA_WRITE_DOCS=1 cargo test --test public_api`.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const LISTING: &str = "docs/public-api.txt";

/// The modules public only with `unstable-internals`.
const INTERNAL: [&str; 8] = [
    "cluster", "fetch", "group", "protocol", "records", "runtime", "sasl", "tls",
];

/// The feature sets a user builds: each runtime, every codec, the mock.
const FEATURE_SETS: [&str; 2] = [
    "runtime-async-std,gzip,snappy,lz4,zstd,mock",
    "runtime-tokio,gzip,snappy,lz4,zstd,mock",
];

/// The auto traits listed (losing one breaks callers that rely on it).
const AUTO_TRAITS: [&str; 3] = ["Send", "Sync", "Unpin"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// rustdoc's JSON for the library built with `features` (and no others).
fn rustdoc_json(features: &str) -> Value {
    // The tests' own target directory (the parent of their scratch
    // directory): the dependencies are already checked there with these
    // features (by `cargo clippy` and `cargo doc`, in the test command), so
    // only the library is documented again; a directory of its own would
    // check every dependency twice more. Cargo holds its lock only while it
    // builds, not while tests run.
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is <target>/tmp")
        .to_path_buf();
    let out = Command::new(env!("CARGO"))
        .current_dir(root())
        .env("RUSTC_BOOTSTRAP", "1")
        .env_remove("RUSTDOCFLAGS")
        .args(["rustdoc", "--lib", "--quiet", "--no-default-features"])
        .args(["--features", features])
        .arg("--target-dir")
        .arg(&target)
        .args(["--", "-Z", "unstable-options", "--output-format", "json"])
        .output()
        .expect("run cargo rustdoc");
    assert!(
        out.status.success(),
        "cargo rustdoc --features {features} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = std::fs::read(target.join("doc/lazykafka.json")).expect("read lazykafka.json");
    serde_json::from_slice(&json).expect("parse lazykafka.json")
}

/// One kind of an item (`{"struct": {...}}`): its name and its body.
fn inner(item: &Value) -> (&str, &Value) {
    let map = item["inner"]
        .as_object()
        .expect("an item's inner is an object");
    let (kind, body) = map.iter().next().expect("an item has a kind");
    (kind.as_str(), body)
}

struct Api<'a> {
    index: &'a Map<String, Value>,
    paths: &'a Map<String, Value>,
    format: u64,
    /// Every public item (by id) with every path it can be named by.
    public: BTreeMap<String, BTreeSet<String>>,
    /// Types named in public signatures that no public path reaches.
    leaks: BTreeSet<String>,
    /// Lines keyed by (path, rank) so that each item's lines stay together.
    lines: BTreeSet<(String, u8, String)>,
}

impl<'a> Api<'a> {
    fn new(doc: &'a Value) -> Api<'a> {
        let mut api = Api {
            index: doc["index"].as_object().expect("index"),
            paths: doc["paths"].as_object().expect("paths"),
            format: doc["format_version"].as_u64().expect("format_version"),
            public: BTreeMap::new(),
            leaks: BTreeSet::new(),
            lines: BTreeSet::new(),
        };
        let root = doc["root"].to_string();
        api.walk(&root, "lazykafka", &mut BTreeSet::new());
        api
    }

    fn item(&self, id: &str) -> Option<&'a Value> {
        self.index.get(id)
    }

    /// Collects the items a module makes public, following re-exports.
    fn walk(&mut self, module: &str, path: &str, seen: &mut BTreeSet<String>) {
        if !seen.insert(module.to_owned()) {
            return;
        }
        let Some(m) = self.item(module) else { return };
        self.public
            .entry(module.to_owned())
            .or_default()
            .insert(path.to_owned());
        for child in inner(m).1["items"].as_array().expect("module items") {
            let id = child.to_string();
            let Some(item) = self.item(&id) else { continue };
            if item["visibility"] != "public" {
                continue;
            }
            let (kind, body) = inner(item);
            let (target, name) = if kind == "use" {
                let Some(target) = body["id"].as_u64().map(|t| t.to_string()) else {
                    continue;
                };
                if body["is_glob"] == true {
                    self.walk(&target, path, seen);
                    continue;
                }
                (target, body["name"].as_str().unwrap_or_default().to_owned())
            } else {
                (id, item["name"].as_str().unwrap_or_default().to_owned())
            };
            let Some(t) = self.item(&target) else {
                continue;
            };
            let child_path = format!("{path}::{name}");
            if inner(t).0 == "module" {
                self.walk(&target, &child_path, seen);
            } else {
                self.public.entry(target).or_default().insert(child_path);
            }
        }
    }

    /// The path an item is listed under: the longest (the item in its
    /// module rather than its re-export at the crate root), then the first.
    fn canonical(&self, id: &str) -> Option<&str> {
        let paths = self.public.get(id)?;
        paths
            .iter()
            .max_by(|a, b| {
                let depth = |p: &str| p.matches("::").count();
                depth(a).cmp(&depth(b)).then(b.cmp(a))
            })
            .map(String::as_str)
    }

    /// How a signature names the item `id`.
    fn name_of(&mut self, id: &Value, written: &str) -> String {
        let key = id.to_string();
        if let Some(p) = self.canonical(&key) {
            return p.to_owned();
        }
        match self.paths.get(&key) {
            Some(p) if p["crate_id"] == 0 => {
                let path: Vec<&str> = p["path"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                let path = path.join("::");
                self.leaks.insert(path.clone());
                format!("<private {path}>")
            }
            Some(p) => p["path"]
                .as_array()
                .and_then(|a| a.last())
                .and_then(Value::as_str)
                .unwrap_or(written)
                .to_owned(),
            None => written.rsplit("::").next().unwrap_or(written).to_owned(),
        }
    }

    fn path(&mut self, p: &Value) -> String {
        let name = self.name_of(&p["id"], p["path"].as_str().unwrap_or_default());
        format!("{name}{}", self.args(&p["args"]))
    }

    fn args(&mut self, args: &Value) -> String {
        if args.is_null() {
            return String::new();
        }
        if let Some(a) = args.get("angle_bracketed") {
            let mut parts = Vec::new();
            for arg in a["args"].as_array().unwrap() {
                parts.push(if let Some(t) = arg.get("type") {
                    self.ty(t)
                } else if let Some(l) = arg.get("lifetime") {
                    l.as_str().unwrap().to_owned()
                } else if let Some(c) = arg.get("const") {
                    c["expr"].as_str().unwrap_or("_").to_owned()
                } else {
                    "_".to_owned()
                });
            }
            for c in a["constraints"].as_array().unwrap() {
                let name = format!("{}{}", c["name"].as_str().unwrap(), self.args(&c["args"]));
                let binding = &c["binding"];
                parts.push(if let Some(t) = binding.get("equality") {
                    let value = t.get("type").map(|t| self.ty(t)).unwrap_or_default();
                    format!("{name} = {value}")
                } else {
                    format!("{name}: {}", self.bounds(&binding["constraint"]))
                });
            }
            if parts.is_empty() {
                String::new()
            } else {
                format!("<{}>", parts.join(", "))
            }
        } else if let Some(p) = args.get("parenthesized") {
            let inputs: Vec<String> = p["inputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| self.ty(t))
                .collect();
            let output = match &p["output"] {
                Value::Null => String::new(),
                t => format!(" -> {}", self.ty(t)),
            };
            format!("({}){output}", inputs.join(", "))
        } else {
            panic!(
                "generic args of an unknown shape (rustdoc JSON format {}): {args}",
                self.format
            )
        }
    }

    fn bounds(&mut self, bounds: &Value) -> String {
        let mut parts = Vec::new();
        for b in bounds.as_array().into_iter().flatten() {
            if let Some(t) = b.get("trait_bound") {
                let hrtb = self.hrtb(&t["generic_params"]);
                let modifier = match t["modifier"].as_str() {
                    Some("maybe") => "?",
                    Some("maybe_const") => "~const ",
                    _ => "",
                };
                parts.push(format!("{hrtb}{modifier}{}", self.path(&t["trait"])));
            } else if let Some(l) = b.get("outlives") {
                parts.push(l.as_str().unwrap().to_owned());
            } else if let Some(u) = b.get("use") {
                parts.push(format!("use<{}>", self.plain_list(u)));
            } else {
                panic!(
                    "a bound of an unknown shape (rustdoc JSON format {}): {b}",
                    self.format
                )
            }
        }
        parts.join(" + ")
    }

    fn plain_list(&self, v: &Value) -> String {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|x| match x {
                Value::String(s) => s.clone(),
                Value::Object(o) => o
                    .values()
                    .next()
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn hrtb(&mut self, params: &Value) -> String {
        let params = self.generic_params(params);
        if params.is_empty() {
            String::new()
        } else {
            format!("for{params} ")
        }
    }

    fn ty(&mut self, t: &Value) -> String {
        let (kind, v) = t
            .as_object()
            .and_then(|o| o.iter().next())
            .unwrap_or_else(|| {
                panic!(
                    "a type of an unknown shape (rustdoc JSON format {}): {t}",
                    self.format
                )
            });
        match kind.as_str() {
            "resolved_path" => self.path(v),
            "generic" | "primitive" => v.as_str().unwrap().to_owned(),
            "tuple" => {
                let parts: Vec<String> = v.as_array().unwrap().iter().map(|t| self.ty(t)).collect();
                if parts.len() == 1 {
                    format!("({},)", parts[0])
                } else {
                    format!("({})", parts.join(", "))
                }
            }
            "slice" => format!("[{}]", self.ty(v)),
            "array" => format!(
                "[{}; {}]",
                self.ty(&v["type"]),
                v["len"].as_str().unwrap_or("_")
            ),
            "borrowed_ref" => {
                let lifetime = v["lifetime"]
                    .as_str()
                    .map(|l| format!("{l} "))
                    .unwrap_or_default();
                let m = if v["is_mutable"] == true { "mut " } else { "" };
                format!("&{lifetime}{m}{}", self.ty(&v["type"]))
            }
            "raw_pointer" => {
                let m = if v["is_mutable"] == true {
                    "mut"
                } else {
                    "const"
                };
                format!("*{m} {}", self.ty(&v["type"]))
            }
            "impl_trait" => format!("impl {}", self.bounds(v)),
            "dyn_trait" => {
                let mut parts = Vec::new();
                for t in v["traits"].as_array().unwrap() {
                    let hrtb = self.hrtb(&t["generic_params"]);
                    parts.push(format!("{hrtb}{}", self.path(&t["trait"])));
                }
                if let Some(l) = v["lifetime"].as_str() {
                    parts.push(l.to_owned());
                }
                format!("dyn {}", parts.join(" + "))
            }
            "function_pointer" => {
                let hrtb = self.hrtb(&v["generic_params"]);
                format!("{hrtb}fn{}", self.sig(&v["sig"], false))
            }
            "qualified_path" => {
                let self_ty = self.ty(&v["self_type"]);
                let name = v["name"].as_str().unwrap();
                match &v["trait"] {
                    Value::Null => format!("{self_ty}::{name}"),
                    tr => format!("<{self_ty} as {}>::{name}", self.path(tr)),
                }
            }
            "infer" => "_".to_owned(),
            "pat" => self.ty(&v["type"]),
            _ => panic!(
                "a type of an unknown kind {kind} (rustdoc JSON format {})",
                self.format
            ),
        }
    }

    fn generic_params(&mut self, params: &Value) -> String {
        let mut parts = Vec::new();
        for p in params.as_array().into_iter().flatten() {
            let name = p["name"].as_str().unwrap();
            let kind = &p["kind"];
            if let Some(l) = kind.get("lifetime") {
                let outlives = self.plain_list(&l["outlives"]);
                parts.push(if outlives.is_empty() {
                    name.to_owned()
                } else {
                    format!("{name}: {}", outlives.replace(", ", " + "))
                });
            } else if let Some(t) = kind.get("type") {
                if t["is_synthetic"] == true {
                    continue;
                }
                let bounds = self.bounds(&t["bounds"]);
                let mut s = name.to_owned();
                if !bounds.is_empty() {
                    s = format!("{s}: {bounds}");
                }
                if !t["default"].is_null() {
                    s = format!("{s} = {}", self.ty(&t["default"]));
                }
                parts.push(s);
            } else if let Some(c) = kind.get("const") {
                parts.push(format!("const {name}: {}", self.ty(&c["type"])));
            }
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("<{}>", parts.join(", "))
        }
    }

    fn where_clause(&mut self, generics: &Value) -> String {
        let mut parts = Vec::new();
        for w in generics["where_predicates"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(b) = w.get("bound_predicate") {
                let hrtb = self.hrtb(&b["generic_params"]);
                let ty = self.ty(&b["type"]);
                parts.push(format!("{hrtb}{ty}: {}", self.bounds(&b["bounds"])));
            } else if let Some(l) = w.get("lifetime_predicate") {
                let outlives = self.plain_list(&l["outlives"]).replace(", ", " + ");
                parts.push(format!("{}: {outlives}", l["lifetime"].as_str().unwrap()));
            } else if let Some(e) = w.get("eq_predicate") {
                let lhs = self.ty(&e["lhs"]);
                let rhs = e["rhs"].get("type").map(|t| self.ty(t)).unwrap_or_default();
                parts.push(format!("{lhs} = {rhs}"));
            }
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" where {}", parts.join(", "))
        }
    }

    /// `(inputs) -> output`, with `self` spelled as a receiver.
    fn sig(&mut self, sig: &Value, method: bool) -> String {
        let mut inputs = Vec::new();
        for (i, input) in sig["inputs"].as_array().unwrap().iter().enumerate() {
            let name = input[0].as_str().unwrap();
            let ty = &input[1];
            if method && i == 0 && name == "self" {
                let receiver = if ty == &serde_json::json!({"generic": "Self"}) {
                    "self".to_owned()
                } else if ty["borrowed_ref"]["type"] == serde_json::json!({"generic": "Self"}) {
                    let r = &ty["borrowed_ref"];
                    let lifetime = r["lifetime"]
                        .as_str()
                        .map(|l| format!("{l} "))
                        .unwrap_or_default();
                    let m = if r["is_mutable"] == true { "mut " } else { "" };
                    format!("&{lifetime}{m}self")
                } else {
                    format!("self: {}", self.ty(ty))
                };
                inputs.push(receiver);
            } else {
                inputs.push(format!("{name}: {}", self.ty(ty)));
            }
        }
        let output = match &sig["output"] {
            Value::Null => String::new(),
            t => format!(" -> {}", self.ty(t)),
        };
        format!("({}){output}", inputs.join(", "))
    }

    fn function(&mut self, path: &str, f: &Value, method: bool) -> String {
        let h = &f["header"];
        let mut q = String::new();
        for (flag, word) in [
            ("is_const", "const "),
            ("is_async", "async "),
            ("is_unsafe", "unsafe "),
        ] {
            if h[flag] == true {
                q.push_str(word);
            }
        }
        let generics = self.generic_params(&f["generics"]["params"]);
        let sig = self.sig(&f["sig"], method);
        let wc = self.where_clause(&f["generics"]);
        format!("pub {q}fn {path}{generics}{sig}{wc}")
    }

    fn add(&mut self, path: &str, rank: u8, line: String) {
        self.lines.insert((path.to_owned(), rank, line));
    }

    fn attrs(item: &Value) -> String {
        let non_exhaustive = item["attrs"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|a| a.to_string().contains("non_exhaustive"));
        if non_exhaustive {
            "#[non_exhaustive] ".to_owned()
        } else {
            String::new()
        }
    }

    fn fields(&mut self, owner: &str, ids: &Value) -> bool {
        let mut stripped = false;
        for (i, f) in ids.as_array().into_iter().flatten().enumerate() {
            if f.is_null() {
                stripped = true;
                continue;
            }
            let field = self.item(&f.to_string()).expect("field");
            if field["visibility"] != "public" && field["visibility"] != "default" {
                stripped = true;
                continue;
            }
            let name = field["name"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| i.to_string());
            let ty = self.ty(inner(field).1);
            let path = format!("{owner}::{name}");
            self.add(&path, 2, format!("pub field {path}: {ty}"));
        }
        stripped
    }

    fn impls(&mut self, path: &str, impls: &Value) {
        for id in impls.as_array().into_iter().flatten() {
            let Some(imp) = self.item(&id.to_string()) else {
                continue;
            };
            let (_, imp) = inner(imp);
            if !imp["blanket_impl"].is_null() {
                continue;
            }
            let generics = self.generic_params(&imp["generics"]["params"]);
            let wc = self.where_clause(&imp["generics"]);
            let for_ty = self.ty(&imp["for"]);
            match &imp["trait"] {
                Value::Null => {
                    for item in imp["items"].as_array().unwrap() {
                        let Some(item) = self.item(&item.to_string()) else {
                            continue;
                        };
                        if item["visibility"] != "public" {
                            continue;
                        }
                        self.member(path, item);
                    }
                }
                tr => {
                    let trait_name = tr["path"].as_str().unwrap_or_default();
                    let trait_name = trait_name.rsplit("::").next().unwrap();
                    let auto = AUTO_TRAITS.contains(&trait_name);
                    // `StructuralPartialEq` comes with `derive(PartialEq)`,
                    // which is listed.
                    if (imp["is_synthetic"] == true && !auto) || trait_name == "StructuralPartialEq"
                    {
                        continue;
                    }
                    let tr = self.path(tr);
                    let neg = if imp["is_negative"] == true { "!" } else { "" };
                    let mut assoc = Vec::new();
                    for item in imp["items"].as_array().unwrap() {
                        let Some(item) = self.item(&item.to_string()) else {
                            continue;
                        };
                        if let ("assoc_type", t) = inner(item) {
                            let ty = t["type"].as_object().map(|_| self.ty(&t["type"]));
                            let name = item["name"].as_str().unwrap();
                            assoc.push(format!("type {name} = {}", ty.unwrap_or_default()));
                        }
                    }
                    let assoc = if assoc.is_empty() {
                        String::new()
                    } else {
                        format!(" {{ {} }}", assoc.join("; "))
                    };
                    let rank = if imp["is_synthetic"] == true { 4 } else { 3 };
                    self.add(
                        path,
                        rank,
                        format!("impl{generics} {neg}{tr} for {for_ty}{wc}{assoc}"),
                    );
                }
            }
        }
    }

    /// An associated item: a method, a constant, a type.
    fn member(&mut self, owner: &str, item: &Value) {
        let name = item["name"].as_str().unwrap();
        let path = format!("{owner}::{name}");
        match inner(item) {
            ("function", f) => {
                let mut line = self.function(&path, f, true);
                if f["has_body"] == true && owner_is_trait(self, owner) {
                    line.push_str(" (provided)");
                }
                self.add(&path, 2, line);
            }
            ("assoc_const", c) => {
                let ty = self.ty(&c["type"]);
                self.add(&path, 2, format!("pub const {path}: {ty}"));
            }
            ("assoc_type", t) => {
                let bounds = self.bounds(&t["bounds"]);
                let line = if bounds.is_empty() {
                    format!("pub type {path}")
                } else {
                    format!("pub type {path}: {bounds}")
                };
                self.add(&path, 2, line);
            }
            (kind, _) => panic!("an associated item of kind {kind}"),
        }
    }

    fn render(&mut self) {
        let public: Vec<(String, BTreeSet<String>)> = self
            .public
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (id, paths) in public {
            let item = self.item(&id).expect("item");
            let path = self.canonical(&id).unwrap().to_owned();
            for other in paths.iter().filter(|p| **p != path) {
                self.add(other, 0, format!("pub use {other} = {path}"));
            }
            let attrs = Self::attrs(item);
            let (kind, body) = inner(item);
            match kind {
                "module" => self.add(&path, 1, format!("pub mod {path}")),
                "struct" => {
                    let generics = self.generic_params(&body["generics"]["params"]);
                    let wc = self.where_clause(&body["generics"]);
                    let shape = &body["kind"];
                    let stripped = if let Some(p) = shape.get("plain") {
                        self.fields(&path, &p["fields"]) || p["has_stripped_fields"] == true
                    } else if let Some(t) = shape.get("tuple") {
                        self.fields(&path, t)
                    } else {
                        false
                    };
                    let more = if stripped { " { private fields }" } else { "" };
                    self.add(
                        &path,
                        1,
                        format!("{attrs}pub struct {path}{generics}{wc}{more}"),
                    );
                    self.impls(&path, &body["impls"]);
                }
                "enum" => {
                    let generics = self.generic_params(&body["generics"]["params"]);
                    let wc = self.where_clause(&body["generics"]);
                    self.add(&path, 1, format!("{attrs}pub enum {path}{generics}{wc}"));
                    for v in body["variants"].as_array().unwrap() {
                        let variant = self.item(&v.to_string()).expect("variant");
                        let vattrs = Self::attrs(variant);
                        let vpath = format!("{path}::{}", variant["name"].as_str().unwrap());
                        let vk = &inner(variant).1["kind"];
                        let shape = if let Some(t) = vk.get("tuple") {
                            let tys: Vec<String> = t
                                .as_array()
                                .unwrap()
                                .iter()
                                .map(|f| {
                                    let f = self.item(&f.to_string()).expect("variant field");
                                    self.ty(inner(f).1)
                                })
                                .collect();
                            format!("({})", tys.join(", "))
                        } else if let Some(s) = vk.get("struct") {
                            let mut fs = Vec::new();
                            for f in s["fields"].as_array().unwrap() {
                                let f = self.item(&f.to_string()).expect("variant field");
                                let name = f["name"].as_str().unwrap().to_owned();
                                fs.push(format!("{name}: {}", self.ty(inner(f).1)));
                            }
                            format!(" {{ {} }}", fs.join(", "))
                        } else {
                            String::new()
                        };
                        self.add(&vpath, 2, format!("{vattrs}pub variant {vpath}{shape}"));
                    }
                    self.impls(&path, &body["impls"]);
                }
                "trait" => {
                    let generics = self.generic_params(&body["generics"]["params"]);
                    let bounds = self.bounds(&body["bounds"]);
                    let bounds = if bounds.is_empty() {
                        String::new()
                    } else {
                        format!(": {bounds}")
                    };
                    let wc = self.where_clause(&body["generics"]);
                    let mut q = String::new();
                    if body["is_unsafe"] == true {
                        q.push_str("unsafe ");
                    }
                    let dyn_ok = if body["is_dyn_compatible"] == false {
                        " (not dyn-compatible)"
                    } else {
                        ""
                    };
                    self.add(
                        &path,
                        1,
                        format!("pub {q}trait {path}{generics}{bounds}{wc}{dyn_ok}"),
                    );
                    for m in body["items"].as_array().unwrap() {
                        let m = self.item(&m.to_string()).expect("trait item");
                        self.member(&path, m);
                    }
                }
                "function" => {
                    let line = self.function(&path, body, false);
                    self.add(&path, 1, line);
                }
                "constant" => {
                    let ty = self.ty(&body["type"]);
                    self.add(&path, 1, format!("pub const {path}: {ty}"));
                }
                "static" => {
                    let ty = self.ty(&body["type"]);
                    self.add(&path, 1, format!("pub static {path}: {ty}"));
                }
                "type_alias" => {
                    let generics = self.generic_params(&body["generics"]["params"]);
                    let ty = self.ty(&body["type"]);
                    self.add(&path, 1, format!("pub type {path}{generics} = {ty}"));
                }
                "macro" => self.add(&path, 1, format!("pub macro {path}!")),
                other => panic!("a public item of kind {other} at {path}"),
            }
        }
    }

    fn listing(&self) -> String {
        let mut out = String::from(
            "# The public API of lazykafka without `unstable-internals`, with every\n\
             # runtime feature. Generated by tests/public_api.rs from rustdoc's JSON;\n\
             # regenerate with `LAZYKAFKA_WRITE_DOCS=1 cargo test --test public_api`.\n",
        );
        for (_, _, line) in &self.lines {
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    /// Public items whose documentation names an internal module's path.
    fn docs_naming_internals(&self) -> Vec<String> {
        let mut found = Vec::new();
        let mut ids: BTreeSet<String> = self.public.keys().cloned().collect();
        // Their members too: fields, variants, methods.
        for id in self.public.keys() {
            let item = &self.index[id];
            collect_member_ids(self, inner(item).1, &mut ids);
        }
        for id in ids {
            let Some(item) = self.item(&id) else { continue };
            let docs = item["docs"].as_str().unwrap_or_default();
            if let Some(hit) = internal_path_in(docs) {
                let name = self
                    .canonical(&id)
                    .map(str::to_owned)
                    .or_else(|| item["name"].as_str().map(str::to_owned))
                    .unwrap_or(id.clone());
                found.push(format!("{name}: {hit}"));
            }
        }
        found
    }
}

fn owner_is_trait(api: &Api<'_>, owner: &str) -> bool {
    api.public
        .iter()
        .any(|(id, paths)| paths.contains(owner) && inner(&api.index[id]).0 == "trait")
}

fn collect_member_ids(api: &Api<'_>, body: &Value, ids: &mut BTreeSet<String>) {
    let mut add = |v: &Value| {
        for x in v.as_array().into_iter().flatten() {
            if !x.is_null() {
                ids.insert(x.to_string());
            }
        }
    };
    add(&body["variants"]);
    add(&body["items"]);
    if let Some(p) = body["kind"].get("plain") {
        add(&p["fields"]);
    }
    for v in body["variants"].as_array().into_iter().flatten() {
        if let Some(variant) = api.item(&v.to_string()) {
            if let Some(s) = inner(variant).1["kind"].get("struct") {
                add(&s["fields"]);
            }
        }
    }
    for imp in body["impls"].as_array().into_iter().flatten() {
        if let Some(imp) = api.item(&imp.to_string()) {
            let imp = inner(imp).1;
            if imp["trait"].is_null() && imp["blanket_impl"].is_null() {
                add(&imp["items"]);
            }
        }
    }
}

/// The first `lazykafka::<internal module>::` in `text`, if any.
fn internal_path_in(text: &str) -> Option<String> {
    INTERNAL.iter().find_map(|m| {
        let needle = format!("lazykafka::{m}::");
        text.find(&needle).map(|at| {
            let line = text[at..].lines().next().unwrap_or_default();
            line.chars().take(80).collect()
        })
    })
}

fn write_docs() -> bool {
    std::env::var_os("LAZYKAFKA_WRITE_DOCS").is_some_and(|v| v == "1")
}

#[test]
fn the_public_api_is_the_listed_one() {
    let mut listings = Vec::new();
    for features in FEATURE_SETS {
        let doc = rustdoc_json(features);
        let mut api = Api::new(&doc);
        api.render();
        assert!(
            api.leaks.is_empty(),
            "with --features {features}, public signatures name types that only \
             `unstable-internals` makes nameable (re-export them in a public module, \
             or keep the signature crate-private): {:#?}",
            api.leaks
        );
        let docs = api.docs_naming_internals();
        assert!(
            docs.is_empty(),
            "the documentation of public items names paths public only with \
             `unstable-internals` (name the public path instead): {docs:#?}"
        );
        listings.push((features, api.listing()));
    }
    let (first_features, first) = &listings[0];
    for (features, listing) in &listings[1..] {
        if listing != first {
            let a: BTreeSet<&str> = first.lines().collect();
            let b: BTreeSet<&str> = listing.lines().collect();
            panic!(
                "--features {first_features} and --features {features} build different \
                 public APIs:\nonly in the first: {:#?}\nonly in the second: {:#?}",
                a.difference(&b).collect::<Vec<_>>(),
                b.difference(&a).collect::<Vec<_>>()
            );
        }
    }
    let path = root().join(LISTING);
    if write_docs() {
        std::fs::write(&path, first).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if &committed != first {
        let a: BTreeSet<&str> = committed.lines().collect();
        let b: BTreeSet<&str> = first.lines().collect();
        panic!(
            "the public API differs from {LISTING}.\n\
             Gone from the code: {:#?}\nNew in the code: {:#?}\n\
             If the change is deliberate, regenerate the listing with \
             `LAZYKAFKA_WRITE_DOCS=1 cargo test --test public_api` and commit it \
             (with a CHANGELOG.md entry).",
            a.difference(&b).collect::<Vec<_>>(),
            b.difference(&a).collect::<Vec<_>>()
        );
    }
}

/// What an application reads first names no internal path: README.md and
/// the examples (but `api_versions`, which shows the protocol layer and
/// needs `unstable-internals`).
#[test]
fn readme_and_examples_name_public_paths_only() {
    let mut files = vec![root().join("README.md")];
    let mut dirs = vec![root().join("examples")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name() != Some("api_versions.rs".as_ref())
            {
                files.push(path);
            }
        }
    }
    assert!(files.len() > 5, "the examples were not found: {files:?}");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        if let Some(hit) = internal_path_in(&text) {
            found.push(format!("{}: {hit}", rel(file)));
        }
    }
    assert!(
        found.is_empty(),
        "these name paths public only with `unstable-internals`: {found:#?}"
    );
}

/// The checks above can fail: the scanner sees an internal path.
#[test]
fn an_internal_path_is_seen() {
    assert_eq!(
        internal_path_in("use lazykafka::protocol::ApiKey;\n"),
        Some("lazykafka::protocol::ApiKey;".to_owned())
    );
    assert_eq!(internal_path_in("use lazykafka::error::ApiKey;"), None);
    // A log target is a module path, not a Rust path to an item.
    assert_eq!(internal_path_in("RUST_LOG=lazykafka::cluster=trace"), None);
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}
