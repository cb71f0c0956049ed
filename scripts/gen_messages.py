#!/usr/bin/env python3
"""Writes the Kafka message codecs in src/protocol/messages/*.rs and
src/protocol/group.rs from Kafka's JSON message schemas.

It also writes src/protocol/api/versions.rs, the table of the versions this
client speaks (`ApiKey::client_versions()`) and of where each API's flexible
versions begin (`ApiKey::first_flexible_version()`), so that `CLIENT_RANGES`
below is the one place the client's ranges are written down.

Usage: scripts/gen_messages.py [SCHEMA_DIR [OUT_DIR]]

SCHEMA_DIR holds the schemas (`FetchRequest.json`, ...) as they are in
apache/kafka `clients/src/main/resources/common/message/`; default: the
crate's `schemas/`. OUT_DIR is the crate root (default: the parent of this
script's directory). Run `cargo fmt` afterwards. `scripts/check_generated.sh`
runs this into a temporary directory and fails when the result differs from
the committed files.

What the generated code does, field by field, follows the schema:
- a field exists in the Rust struct when some version in the client's range
  (`CLIENT_RANGES` below, from which `ApiKey::client_versions()` is
  generated) carries it;
- it is written and read only at the versions its `versions` names; at other
  versions it is dropped silently when it holds its default or the schema
  marks it `ignorable`, and otherwise encoding fails with
  `EncodeError::FieldNotInVersion` (what Kafka's own generator does);
- a field nullable at some version is an `Option`; a null at a version where
  it may not be null is refused both ways;
- flexible versions (KIP-482) use compact strings, bytes and arrays and end
  each struct with a tagged-field section: tagged fields the schema knows are
  decoded into their fields (written only when they differ from their
  default), other tags are kept in `unknown_tagged_fields` and written back;
- every array read passes the smallest encoded size of one element at that
  version, so a hostile count cannot make a vector's capacity exceed the
  input.

Edit this script, not the files it writes.
"""
import json
import os
import re
import sys

INF = 0x7FFF

# (module, schema base name, lowest version, highest version): the versions
# this client implements. The only copy: `ApiKey::client_versions()` is
# generated from it (src/protocol/api/versions.rs). The base name is also the
# `ApiKey` variant. The floors are what Kafka 1.0-era brokers speak (record
# batches v2 start there; OffsetForLeaderEpoch 2 is Kafka 2.1).
CLIENT_RANGES = [
    ("api_versions", "ApiVersions", 0, 4),
    ("metadata", "Metadata", 1, 13),
    ("find_coordinator", "FindCoordinator", 0, 6),
    ("join_group", "JoinGroup", 2, 9),
    ("sync_group", "SyncGroup", 0, 5),
    ("heartbeat", "Heartbeat", 0, 4),
    ("leave_group", "LeaveGroup", 0, 5),
    ("offset_fetch", "OffsetFetch", 1, 9),
    ("offset_commit", "OffsetCommit", 2, 9),
    ("list_offsets", "ListOffsets", 1, 10),
    ("fetch", "Fetch", 4, 17),
    ("offset_for_leader_epoch", "OffsetForLeaderEpoch", 2, 4),
    ("sasl_handshake", "SaslHandshake", 0, 1),
    ("sasl_authenticate", "SaslAuthenticate", 0, 2),
    ("produce", "Produce", 3, 11),
    ("init_producer_id", "InitProducerId", 0, 5),
    ("create_topics", "CreateTopics", 2, 7),
    ("consumer_group_heartbeat", "ConsumerGroupHeartbeat", 0, 1),
]

# Modules written by hand: their ranges are in the version table, but no
# codec is generated for them. ApiVersions must be readable before any
# version is negotiated (KIP-511 fallback to v0), which its module handles.
HAND_WRITTEN = {"api_versions"}

# One line on what each API is for, and the KIPs that shaped it.
SUMMARIES = {
    "Metadata": (
        "the brokers of the cluster, and for each topic its partitions, their "
        "leaders and replicas.",
        "KIP-4 (controller id, racks, internal topics, null for all topics), "
        "KIP-78 (cluster id), KIP-320 (leader epochs), KIP-430 (authorized "
        "operations), KIP-482 (flexible versions), KIP-516 (topic ids), KIP-700 "
        "(cluster authorized operations moved to DescribeCluster), KIP-1102 "
        "(the top-level error code: REBOOTSTRAP_REQUIRED).",
    ),
    "FindCoordinator": (
        "which broker coordinates a consumer group (or a transaction). Versions "
        "0-3 ask for one key; version 4 and later ask for a list of keys and "
        "answer per key.",
        "KIP-98 (key type), KIP-482 (flexible versions), KIP-699 (batched keys), "
        "KIP-890 (TRANSACTION_ABORTABLE), KIP-932 (share groups).",
    ),
    "JoinGroup": (
        "joins a classic consumer group; the coordinator answers once every "
        "member has joined, naming the leader and (to the leader) every "
        "member's subscription.",
        "KIP-62 (rebalance timeout), KIP-394 (MEMBER_ID_REQUIRED on the first "
        "join), KIP-345 (static membership), KIP-482 (flexible versions), "
        "KIP-559 (protocol type and name), KIP-800 (join reason), KIP-814 (skip "
        "assignment).",
    ),
    "SyncGroup": (
        "the leader sends every member's assignment; every member receives "
        "its own.",
        "KIP-345 (static membership), KIP-482 (flexible versions), KIP-559 "
        "(protocol type and name).",
    ),
    "Heartbeat": (
        "keeps a classic group member alive and tells it when a rebalance "
        "starts.",
        "KIP-345 (static membership), KIP-482 (flexible versions).",
    ),
    "LeaveGroup": (
        "leaves a classic consumer group. Versions 0-2 name one member; "
        "version 3 and later a list of members.",
        "KIP-345 (batched leave with group instance ids), KIP-482 (flexible "
        "versions), KIP-800 (leave reason).",
    ),
    "OffsetFetch": (
        "the committed offsets of a group. Versions 1-7 ask for one group; "
        "version 8 and later for a list of groups.",
        "KIP-88 (null topics for all), KIP-320 (leader epochs), KIP-447 "
        "(require stable), KIP-482 (flexible versions), KIP-709 (batched "
        "groups), KIP-848 (member id and epoch).",
    ),
    "OffsetCommit": (
        "commits a group's offsets.",
        "KIP-211 (retention time removed), KIP-320 (leader epochs), KIP-345 "
        "(static membership), KIP-482 (flexible versions), KIP-848 (member "
        "epoch).",
    ),
    "ListOffsets": (
        "the offset of a partition at a timestamp, or its earliest or latest "
        "offset.",
        "KIP-79 (timestamps), KIP-98 (isolation level), KIP-320 (leader epochs), "
        "KIP-482 (flexible versions), KIP-734 (max timestamp), KIP-405 (local "
        "log start), KIP-1005 (last tiered offset), KIP-1075 (timeout).",
    ),
    "Fetch": (
        "reads record batches from partition leaders. From version 13 topics "
        "are named by topic id; the records come out as zero-copy `Bytes` "
        "slices of the received frame.",
        "KIP-74 (max bytes), KIP-98 (isolation level, aborted transactions), "
        "KIP-227 (fetch sessions), KIP-320 (leader epochs), KIP-110 (zstd), "
        "KIP-392 (rack id, preferred read replica), KIP-482 (flexible versions), "
        "KIP-516 (topic ids), KIP-405 (tiered storage), KIP-903 (replica "
        "state), KIP-951 (node endpoints), KIP-853 (directory id).",
    ),
    "OffsetForLeaderEpoch": (
        "the end offset of a leader epoch, to detect log truncation after a "
        "leader change.",
        "KIP-101 (the API), KIP-279 (leader epoch in the answer), KIP-320 "
        "(current leader epoch for fencing, replica id), KIP-482 (flexible "
        "versions).",
    ),
    "SaslHandshake": (
        "chooses a SASL mechanism.",
        "KIP-43 (the API), KIP-152 (version 1: SASL tokens travel in "
        "SaslAuthenticate).",
    ),
    "SaslAuthenticate": (
        "carries SASL tokens.",
        "KIP-152 (the API), KIP-368 (session lifetime), KIP-482 (flexible "
        "versions).",
    ),
    "Produce": (
        "writes record batches to partition leaders: the producer's request, "
        "also used by test tools and the mock cluster. The records are carried "
        "as `Bytes`.",
        "KIP-98 (transactional id), KIP-110 (zstd), KIP-467 (record errors), "
        "KIP-482 (flexible versions), KIP-951 (leader discovery), KIP-890 "
        "(TRANSACTION_ABORTABLE).",
    ),
    "InitProducerId": (
        "gives an idempotent or transactional producer its producer id and "
        "epoch. Without a transactional id any broker answers, with a new "
        "producer id each time; with one, the transaction coordinator answers, "
        "bumping the epoch of the id it already gave (fencing older producers). "
        "From version 3 the producer names its current id and epoch, to resume "
        "after an error.",
        "KIP-98 (the API), KIP-360 (producer id and epoch in the request, epoch "
        "bumps after errors), KIP-482 (flexible versions), KIP-588 "
        "(PRODUCER_FENCED), KIP-890 (TRANSACTION_ABORTABLE).",
    ),
    "CreateTopics": (
        "creates topics; used by test tools and the mock cluster.",
        "KIP-4 (the API), KIP-108 (validate only), KIP-464 (default partitions "
        "and replication), KIP-482 (flexible versions), KIP-525 (configs in "
        "the answer), KIP-599 (throttling), KIP-516 (topic ids).",
    ),
    "ConsumerGroupHeartbeat": (
        "the single request of the next-generation consumer group protocol: "
        "joins, heartbeats, reports owned partitions and receives assignments.",
        "KIP-848 (the API and the protocol).",
    ),
    "ConsumerProtocolSubscription": (
        "what a member of a classic group with protocol type \"consumer\" "
        "sends as its JoinGroup protocol metadata.",
        "KIP-429 (owned partitions, for cooperative rebalancing), KIP-792 "
        "(generation id), KIP-881 (rack id).",
    ),
    "ConsumerProtocolAssignment": (
        "what the leader of a classic group with protocol type \"consumer\" "
        "sends each member in SyncGroup.",
        "KIP-429 (cooperative rebalancing).",
    ),
}

PRIMITIVES = {
    "int8": ("i8", 1),
    "int16": ("i16", 2),
    "uint16": ("u16", 2),
    "int32": ("i32", 4),
    "uint32": ("u32", 4),
    "int64": ("i64", 8),
    "float64": ("f64", 8),
    "bool": ("bool", 1),
    "uuid": ("[u8; 16]", 16),
}
RUST_KEYWORDS = {"type", "match", "fn", "struct", "enum", "mod", "use", "ref", "move", "self"}


# --------------------------------------------------------------------------
# Schema reading


def load_schema(path):
    """Reads a schema: JSON with `//` comment lines. Returns (json, notes),
    where notes are the comment paragraphs before the field list (the
    schema's version history), without the license header."""
    with open(path) as f:
        lines = f.read().split("\n")
    body = []
    notes = []
    in_license = True
    seen_fields = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("//"):
            text = stripped[2:].strip()
            if in_license:
                if "limitations under the License" in text:
                    in_license = False
                continue
            if not seen_fields:
                notes.append(text)
            continue
        if re.match(r'\s*\{\s*"name"', line):
            seen_fields = True
        body.append(line)
    paragraphs = []
    current = []
    for text in notes:
        if text.startswith("- ") and current:
            # a list inside the comment: each item its own paragraph
            paragraphs.append(" ".join(current))
            current = []
        if not text:
            if current:
                paragraphs.append(" ".join(current))
                current = []
        else:
            current.append(text)
    if current:
        paragraphs.append(" ".join(current))
    return json.loads("\n".join(body)), paragraphs


class VR:
    """An inclusive version range; hi is INF for open-ended ranges."""

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    def __eq__(self, other):
        return isinstance(other, VR) and (self.lo, self.hi) == (other.lo, other.hi)

    def __repr__(self):
        return f"{self.lo}-{self.hi}"

    def versions(self):
        return range(self.lo, self.hi + 1)

    def contains(self, v):
        return self.lo <= v <= self.hi


def parse_vr(s):
    if s is None:
        return None
    s = str(s).strip()
    if s == "none":
        return None
    if s.endswith("+"):
        return VR(int(s[:-1]), INF)
    if "-" in s:
        a, b = s.split("-")
        return VR(int(a), int(b))
    return VR(int(s), int(s))


def inter(a, b):
    if a is None or b is None:
        return None
    lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
    return VR(lo, hi) if lo <= hi else None


def cond(r, ctx):
    """A Rust condition true exactly for the versions of r within ctx, or
    None when r covers ctx."""
    parts = []
    if r.lo > ctx.lo:
        parts.append(f"version >= {r.lo}")
    if r.hi < ctx.hi:
        parts.append(f"version <= {r.hi}")
    if not parts:
        return None
    if len(parts) == 2:
        if r.lo == r.hi:
            return f"version == {r.lo}"
        return f"({r.lo}..={r.hi}).contains(&version)"
    return parts[0]


def ncond(r, ctx):
    """A Rust condition true exactly for the versions of ctx outside r."""
    parts = []
    if r.lo > ctx.lo:
        parts.append(f"version < {r.lo}")
    if r.hi < ctx.hi:
        parts.append(f"version > {r.hi}")
    return " || ".join(parts) if parts else None


def snake(name):
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    s = s.lower()
    return f"r#{s}" if s in RUST_KEYWORDS else s


def doc_escape(text):
    text = text.replace("\\", "\\\\")
    for ch in "[]<>":
        text = text.replace(ch, "\\" + ch)
    # bare URLs become autolinks
    return re.sub(r"(https?://[^\s\\]+)", r"<\1>", text)


def wrap(text, width, prefix, cont=None):
    """Wraps text into lines of at most `width`, the first starting with
    `prefix`, the others with `cont` (default: `prefix`)."""
    cont = prefix if cont is None else cont
    words = text.split()
    lines, cur = [], ""
    for word in words:
        p = cont if lines else prefix
        if cur and len(p) + len(cur) + 1 + len(word) > width:
            lines.append(p + cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    if cur:
        lines.append((cont if lines else prefix) + cur)
    return lines or [prefix.rstrip()]


def describe_range(r):
    if r.hi == INF:
        return f"{r.lo}+"
    if r.lo == r.hi:
        return f"{r.lo}"
    return f"{r.lo}-{r.hi}"


# --------------------------------------------------------------------------
# Model


class Struct:
    def __init__(self, name, doc, ctx, flex, is_top):
        self.name = name
        self.doc = doc
        self.ctx = ctx  # versions in which this struct is encoded
        self.flex = flex  # flexible range of the message (VR or None)
        self.is_top = is_top
        self.fields = []

    def flex_in(self, ctx=None):
        return inter(self.flex, ctx or self.ctx)

    def flex_expr(self):
        f = self.flex_in()
        if f is None:
            return "false"
        if f == self.ctx:
            return "true"
        return "flexible"

    def has_tagged_section(self):
        return self.flex_in() is not None


class Field:
    pass


# Defaults the schemas leave out where Kafka's own default (0) would be a
# trap: (struct, field) -> (default, why).
DEFAULT_OVERRIDES = {
    ("ListOffsetsRequest", "replica_id"): (
        "-1",
        "The schema names no default; -1 (a consumer) is what clients send, "
        "a broker id would read past the high watermark.",
    ),
}

# Docs for structs used by more than one field, or whose field has no text.
STRUCT_DOCS = {
    "TopicPartition": "A topic and some of its partitions.",
    "TopicPartitions": "A topic, by id, and some of its partitions.",
}


def struct_doc(f, parent):
    name = f.schema_type.removeprefix("[]")
    if name in STRUCT_DOCS:
        return STRUCT_DOCS[name]
    if f.about.strip():
        return f.about.strip()
    return f"The value of `{parent}.{f.name}`."


def build_struct(name, doc, spec_fields, ctx, flex, common, is_top, structs):
    st = Struct(name, doc, ctx, flex, is_top)
    for spec in spec_fields:
        versions = inter(parse_vr(spec["versions"]), ctx)
        if versions is None:
            continue  # no version this client speaks carries the field
        f = Field()
        f.schema_name = spec["name"]
        f.name = snake(spec["name"])
        f.about = spec.get("about", "")
        f.versions = versions
        f.nullable = inter(parse_vr(spec.get("nullableVersions")), versions)
        tv = parse_vr(spec.get("taggedVersions"))
        f.tag = spec.get("tag")
        f.tagged = inter(tv, versions) if tv is not None else None
        if tv is not None:
            assert f.tagged == versions, f"{name}.{f.name}: tagged range differs from versions"
        f.ignorable = bool(spec.get("ignorable", False))
        f.default_raw = spec.get("default")
        f.default_note = None
        if (name, f.name) in DEFAULT_OVERRIDES:
            f.default_raw, f.default_note = DEFAULT_OVERRIDES[(name, f.name)]
        t = spec["type"]
        f.schema_type = t
        f.elem = None
        f.struct = None
        if t.startswith("[]"):
            f.kind = "array"
            inner = t[2:]
            if inner in PRIMITIVES or inner in ("string", "bytes"):
                f.elem = inner
            else:
                sub_fields = spec.get("fields")
                if sub_fields is None:
                    sub_fields = common[inner]
                f.struct = build_struct(inner, struct_doc(f, name), sub_fields, versions, flex, common, False, structs)
        elif t in PRIMITIVES:
            f.kind = t
        elif t in ("string", "bytes", "records"):
            f.kind = t
        else:
            f.kind = "struct"
            sub_fields = spec.get("fields")
            if sub_fields is None:
                sub_fields = common[t]
            f.struct = build_struct(t, struct_doc(f, name), sub_fields, versions, flex, common, False, structs)
        f.owner = st
        st.fields.append(f)
    structs.append(st)
    return st


# --------------------------------------------------------------------------
# Types, defaults, sizes


def base_type(f):
    if f.kind == "array":
        if f.struct:
            return f"Vec<{f.struct.name}>"
        return f"Vec<{elem_type(f.elem)}>"
    if f.kind in PRIMITIVES:
        return PRIMITIVES[f.kind][0]
    if f.kind == "string":
        return "String"
    if f.kind in ("bytes", "records"):
        return "Bytes"
    return f.struct.name


def elem_type(e):
    if e in PRIMITIVES:
        return PRIMITIVES[e][0]
    return {"string": "String", "bytes": "Bytes"}[e]


def is_option(f):
    return f.nullable is not None


def rust_type(f):
    t = base_type(f)
    return f"Option<{t}>" if is_option(f) else t


def int_literal(raw, rust):
    v = int(str(raw), 0)
    names = {
        "i8": (-(2**7), 2**7 - 1),
        "i16": (-(2**15), 2**15 - 1),
        "i32": (-(2**31), 2**31 - 1),
        "i64": (-(2**63), 2**63 - 1),
    }
    if rust in names:
        lo, hi = names[rust]
        if v == lo and v != 0:
            return f"{rust}::MIN"
        if v == hi:
            return f"{rust}::MAX"
    return str(v)


def base_default(f, raw):
    if f.kind in PRIMITIVES:
        rust = PRIMITIVES[f.kind][0]
        if f.kind == "bool":
            return "true" if str(raw).lower() == "true" else "false"
        if f.kind == "uuid":
            return "[0; 16]"
        if f.kind == "float64":
            return f"{float(raw or 0)}"
        return int_literal(raw if raw is not None else 0, rust)
    if f.kind == "string":
        if raw in (None, ""):
            return "String::new()"
        return f'"{raw}".to_owned()'
    if f.kind in ("bytes", "records"):
        return "Bytes::new()"
    if f.kind == "array":
        return "Vec::new()"
    return f"{f.struct.name}::default()"


def default_expr(f):
    raw = f.default_raw
    if is_option(f):
        # A field nullable wherever it exists defaults to null unless the
        # schema names another default; one nullable only in later versions
        # defaults to a value, so that the default encodes at every version.
        if raw == "null" or (raw is None and f.nullable == f.versions):
            return "None"
        return f"Some({base_default(f, raw)})"
    assert raw != "null", f"{f.owner.name}.{f.name}: null default on a non-nullable field"
    return base_default(f, raw)


TRIVIAL_DEFAULTS = {"0", "false", "String::new()", "Bytes::new()", "[0; 16]", "Vec::new()", "None", "0.0"}


def is_trivial_default(f):
    d = default_expr(f)
    return d in TRIVIAL_DEFAULTS or (f.struct is not None and d == f"{f.struct.name}::default()")


def non_default(f, acc):
    """A Rust expression true when `acc` does not hold the field's default."""
    d = default_expr(f)
    if d == "None":
        return f"{acc}.is_some()"
    if not is_option(f) and f.kind in ("array", "string", "bytes", "records"):
        return f"!{acc}.is_empty()"
    if f.kind == "bool" and not is_option(f):
        return acc if d == "false" else f"!{acc}"
    return f"{acc} != {d}"


def min_size(f, v):
    """Smallest encoded size of field f at version v (0 when tagged)."""
    st = f.owner
    flex = st.flex is not None and st.flex.contains(v)
    if f.tagged is not None:
        return 0
    if f.kind in PRIMITIVES:
        return PRIMITIVES[f.kind][1]
    if f.kind == "string":
        return 1 if flex else 2
    if f.kind in ("bytes", "records", "array"):
        return 1 if flex else 4
    if is_option(f):
        return 1
    return struct_min(f.struct, v)


def struct_min(st, v):
    total = sum(min_size(f, v) for f in st.fields if f.versions.contains(v))
    if st.flex is not None and st.flex.contains(v):
        total += 1
    return total


def elem_min_expr(f, site):
    """element_min for reading array field f inside struct `site`."""
    site_flex = site.flex_expr()
    if f.struct is None:
        if f.elem in PRIMITIVES:
            return str(PRIMITIVES[f.elem][1])
        # string or bytes elements
        flex_min, classic_min = 1, (2 if f.elem == "string" else 4)
    else:
        flex_vs = [v for v in f.versions.versions() if f.struct.flex is not None and f.struct.flex.contains(v)]
        classic_vs = [v for v in f.versions.versions() if not (f.struct.flex is not None and f.struct.flex.contains(v))]
        flex_min = min((struct_min(f.struct, v) for v in flex_vs), default=None)
        classic_min = min((struct_min(f.struct, v) for v in classic_vs), default=None)
    if site_flex == "true":
        return str(flex_min)
    if site_flex == "false":
        return str(classic_min)
    if flex_min is None:
        return str(classic_min)
    if classic_min is None:
        return str(flex_min)
    if flex_min == classic_min:
        return str(flex_min)
    return f"if flexible {{ {flex_min} }} else {{ {classic_min} }}"


# --------------------------------------------------------------------------
# Rendering


def what(f):
    return f'"{f.owner.name}.{f.name.removeprefix("r#")}"'


def field_doc(f):
    parts = [doc_escape(f.about.strip()) if f.about.strip() else f"The `{f.schema_name}` field."]
    ctx = f.owner.ctx
    if not parts[0].endswith("."):
        parts[0] += "."
    if f.versions != ctx:
        if f.versions.lo > ctx.lo and f.versions.hi >= ctx.hi:
            parts.append(f"Added in version {f.versions.lo}.")
        elif f.versions.hi < ctx.hi and f.versions.lo <= ctx.lo:
            parts.append(f"Removed after version {f.versions.hi}.")
        else:
            parts.append(f"Versions {describe_range(f.versions)}.")
    if f.tagged is not None:
        parts.append(f"Tagged field {f.tag}, written only when not at its default.")
    if is_option(f):
        if f.nullable == f.versions:
            parts.append("Nullable.")
        else:
            parts.append(f"Nullable from version {f.nullable.lo}.")
    d = default_expr(f)
    if not is_trivial_default(f):
        parts.append(f"Default `{d}`.")
    if f.default_note:
        parts.append(f.default_note)
    if f.versions != ctx:
        if f.ignorable:
            parts.append("Ignorable: dropped at other versions.")
        else:
            parts.append("Encoding at other versions fails unless it holds its default.")
    return " ".join(parts)


def render_struct(st, api_variant, request_of):
    out = []
    w = out.append
    derive_default = all(is_trivial_default(f) for f in st.fields)
    derives = "Debug, Clone, PartialEq, Eq" + (", Default" if derive_default else "")
    for line in wrap(doc_escape(st.doc), 80, "/// "):
        w(line)
    w(f"#[derive({derives})]")
    w(f"pub struct {st.name} {{")
    for f in st.fields:
        for line in wrap(field_doc(f), 80, "    /// "):
            w(line)
        w(f"    pub {f.name}: {rust_type(f)},")
    if st.has_tagged_section():
        w("    /// Tagged fields this client does not know, kept to be written back.")
        w("    pub unknown_tagged_fields: Vec<RawTaggedField>,")
    w("}")
    w("")
    if not derive_default:
        w(f"impl Default for {st.name} {{")
        w("    fn default() -> Self {")
        w(f"        {st.name} {{")
        for f in st.fields:
            w(f"            {f.name}: {default_expr(f)},")
        if st.has_tagged_section():
            w("            unknown_tagged_fields: Vec::new(),")
        w("        }")
        w("    }")
        w("}")
        w("")
    enc = render_encode(st)
    dec = render_decode(st)
    if st.is_top and api_variant is not None:
        lo, hi = st.ctx.lo, st.ctx.hi
        w(f"impl Message for {st.name} {{")
        w(f"    const API_KEY: ApiKey = ApiKey::{api_variant};")
        w(f"    const VERSIONS: VersionRange = VersionRange::new({lo}, {hi});")
        w("")
        w("    fn encode(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {")
        w("        check_encode_version::<Self>(version)?;")
        out.extend("        " + l if l else "" for l in enc)
        w("    }")
        w("")
        w("    fn decode(r: &mut Reader, version: i16) -> Result<Self, DecodeError> {")
        w("        check_decode_version::<Self>(version)?;")
        out.extend("        " + l if l else "" for l in dec)
        w("    }")
        w("}")
        w("")
        if request_of:
            w(f"impl Request for {st.name} {{")
            w(f"    type Response = {request_of};")
            w("}")
            w("")
    elif st.is_top:
        # A versioned data type (not an API message).
        lo, hi = st.ctx.lo, st.ctx.hi
        w(f"impl {st.name} {{")
        w("    /// The versions this client reads and writes.")
        w(f"    pub const VERSIONS: VersionRange = VersionRange::new({lo}, {hi});")
        w("")
        w("    /// Writes the body at `version` (without the leading version number).")
        w("    pub fn encode(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {")
        w("        if !Self::VERSIONS.contains(version) {")
        w(f'            return Err(EncodeError::UnsupportedVersion {{ api: "{st.name}", version }});')
        w("        }")
        out.extend("        " + l if l else "" for l in enc)
        w("    }")
        w("")
        w("    /// Reads the body at `version` (the leading version number already read).")
        w("    pub fn decode(r: &mut Reader, version: i16) -> Result<Self, DecodeError> {")
        w("        if !Self::VERSIONS.contains(version) {")
        w(f'            return Err(DecodeError::UnsupportedVersion {{ api: "{st.name}", version }});')
        w("        }")
        out.extend("        " + l if l else "" for l in dec)
        w("    }")
        w("}")
        w("")
    else:
        ev = version_param(enc)
        dv = version_param(dec)
        w(f"impl {st.name} {{")
        w(f"    fn encode(&self, w: &mut Writer, {ev}: i16) -> Result<(), EncodeError> {{")
        out.extend("        " + l if l else "" for l in enc)
        w("    }")
        w("")
        w(f"    fn decode(r: &mut Reader, {dv}: i16) -> Result<Self, DecodeError> {{")
        out.extend("        " + l if l else "" for l in dec)
        w("    }")
        w("}")
        w("")
    return out


def version_param(lines):
    """`version`, or `_version` when the body never reads it."""
    return "version" if re.search(r"\bversion\b", "\n".join(lines)) else "_version"


def flex_decl(st):
    if st.flex_expr() == "flexible":
        return [f"let flexible = version >= {st.flex.lo};"]
    return []


def enc_value(f, acc, flex):
    """Statements writing the value `acc` of field f (not tagged)."""
    wh = what(f)
    k = f.kind
    if k in PRIMITIVES:
        if k == "uuid":
            return [f"w.uuid(&{acc});"]
        return [f"w.{PRIMITIVES[k][0]}({acc});"]
    if k == "string":
        if is_option(f):
            return [f"w.nullable_string({wh}, {acc}.as_deref(), {flex})?;"]
        return [f"w.string({wh}, &{acc}, {flex})?;"]
    if k in ("bytes", "records"):
        if is_option(f):
            return [f"w.nullable_bytes({wh}, {acc}.as_deref(), {flex})?;"]
        return [f"w.bytes({wh}, &{acc}, {flex})?;"]
    if k == "array":
        if f.struct is not None:
            item = "|w, item| item.encode(w, version)"
        elif f.elem in PRIMITIVES:
            if f.elem == "uuid":
                item = "|w, v| {\n    w.uuid(v);\n    Ok(())\n}"
            else:
                item = f"|w, v| {{\n    w.{PRIMITIVES[f.elem][0]}(*v);\n    Ok(())\n}}"
        elif f.elem == "string":
            item = f"|w, v| w.string({wh}, v, {flex})"
        else:
            item = f"|w, v| w.bytes({wh}, v, {flex})"
        if is_option(f):
            return [f"w.nullable_array({wh}, {acc}.as_deref(), {flex}, {item})?;"]
        return [f"w.array({wh}, &{acc}, {flex}, {item})?;"]
    # struct
    if is_option(f):
        return [
            f"match &{acc} {{",
            "    None => w.i8(-1),",
            "    Some(v) => {",
            "        w.i8(1);",
            "        v.encode(w, version)?;",
            "    }",
            "}",
        ]
    return [f"{acc}.encode(w, version)?;"]


def dec_value(f, flex, site):
    """A Rust expression reading field f (not tagged)."""
    wh = what(f)
    k = f.kind
    if k in PRIMITIVES:
        if k == "uuid":
            return f"r.uuid({wh})?"
        return f"r.{PRIMITIVES[k][0]}({wh})?"
    if k == "string":
        return f"r.nullable_string({wh}, {flex})?" if is_option(f) else f"r.string({wh}, {flex})?"
    if k in ("bytes", "records"):
        return f"r.nullable_bytes({wh}, {flex})?" if is_option(f) else f"r.bytes({wh}, {flex})?"
    if k == "array":
        em = elem_min_expr(f, site)
        if f.struct is not None:
            item = f"|r| {f.struct.name}::decode(r, version)"
        elif f.elem in PRIMITIVES:
            item = f"|r| r.{'uuid' if f.elem == 'uuid' else PRIMITIVES[f.elem][0]}({wh})"
        elif f.elem == "string":
            item = f"|r| r.string({wh}, {flex})"
        else:
            item = f"|r| r.bytes({wh}, {flex})"
        fn = "nullable_array" if is_option(f) else "array"
        return f"r.{fn}({wh}, {flex}, {em}, {item})?"
    if is_option(f):
        return f"if r.i8({wh})? < 0 {{\n    None\n}} else {{\n    Some({f.struct.name}::decode(r, version)?)\n}}"
    return f"{f.struct.name}::decode(r, version)?"


def indent(lines, n=4):
    pad = " " * n
    res = []
    for line in lines:
        for sub in line.split("\n"):
            res.append(pad + sub if sub else "")
    return res


def render_encode(st):
    flex = st.flex_expr()
    lines = []
    lines += flex_decl(st)
    for f in st.fields:
        if f.tagged is not None:
            continue
        acc = f"self.{f.name}"
        body = []
        if is_option(f) and f.nullable != f.versions:
            assert f.nullable.hi == f.versions.hi
            not_nullable = ncond(f.nullable, f.versions)
            if "||" in not_nullable:
                not_nullable = f"({not_nullable})"
            body += [
                f"if {acc}.is_none() && {not_nullable} {{",
                f"    return Err(EncodeError::UnexpectedNull {{ what: {what(f)} }});",
                "}",
            ]
        body += enc_value(f, acc, flex)
        c = cond(f.versions, st.ctx)
        if c is None:
            lines += body
        else:
            lines.append(f"if {c} {{")
            lines += indent(body)
            if f.ignorable:
                lines.append("}")
            else:
                lines.append(f"}} else if {non_default(f, acc)} {{")
                lines.append(f"    return Err(not_in_version({what(f)}, version));")
                lines.append("}")
    # Tagged fields at versions without them.
    for f in st.fields:
        if f.tagged is None or f.ignorable:
            continue
        nc = ncond(f.versions, st.ctx)
        if nc is None:
            continue
        nc = f"({nc})" if "||" in nc else nc
        lines.append(f"if {nc} && {non_default(f, 'self.' + f.name)} {{")
        lines.append(f"    return Err(not_in_version({what(f)}, version));")
        lines.append("}")
    if st.has_tagged_section():
        tagged = [f for f in st.fields if f.tagged is not None]
        sec = []
        if tagged:
            sec.append("let mut tagged = Vec::new();")
            for f in sorted(tagged, key=lambda f: f.tag):
                acc = f"self.{f.name}"
                c = cond(f.tagged, st.flex_in())
                test = non_default(f, acc)
                if c:
                    test = f"{c} && {test}"
                value = tagged_enc_closure(f, acc)
                sec.append(f"if {test} {{")
                sec.append(f"    tagged.push(Writer::tagged({f.tag}, {value})?);")
                sec.append("}")
            sec.append("w.tagged_fields(&tagged, &self.unknown_tagged_fields);")
        else:
            sec.append("w.tagged_fields(&[], &self.unknown_tagged_fields);")
        if flex == "true":
            lines += sec
        else:
            lines.append("if flexible {")
            lines += indent(sec)
            lines.append("}")
    lines.append("Ok(())")
    return lines


def tagged_enc_closure(f, acc):
    stmts = enc_value(f, acc, "true")
    if len(stmts) == 1 and stmts[0].endswith("?;"):
        return "|w| " + stmts[0][:-2]
    inner = "\n".join("    " + s for s in "\n".join(stmts).split("\n"))
    return "|w| {\n" + inner + "\n    Ok(())\n}"


def render_decode(st):
    flex = st.flex_expr()
    lines = []
    lines += flex_decl(st)
    for f in st.fields:
        if f.tagged is not None:
            continue
        expr = dec_value(f, flex, st)
        if is_option(f) and f.nullable != f.versions:
            not_nullable = ncond(f.nullable, f.versions)
            expr = f"refuse_null({expr}, {not_nullable}, {what(f)})?"
        c = cond(f.versions, st.ctx)
        if c is None:
            lines += f"let {f.name} = {expr};".split("\n")
        else:
            lines.append(f"let {f.name} = if {c} {{")
            lines += indent(expr.split("\n"))
            lines.append("} else {")
            lines.append(f"    {default_expr(f)}")
            lines.append("};")
    if st.has_tagged_section():
        tagged = [f for f in st.fields if f.tagged is not None]
        for f in tagged:
            lines.append(f"let mut {f.name} = {default_expr(f)};")
        if tagged:
            sec = ["r.tagged_fields(|tag, r| {", "    match tag {"]
            for f in sorted(tagged, key=lambda f: f.tag):
                c = cond(f.tagged, st.flex_in())
                guard = f" if {c}" if c else ""
                val = tagged_dec_expr(f)
                sec.append(f"        {f.tag}{guard} => {f.name} = {val},")
            sec += ["        _ => return Ok(false),", "    }", "    Ok(true)", "})?"]
        else:
            sec = ["r.unknown_tagged_fields()?"]
        if flex == "true":
            lines.append(f"let unknown_tagged_fields = {sec[0]}")
            lines += sec[1:]
            lines[-1] += ";"
        else:
            lines.append("let unknown_tagged_fields = if flexible {")
            lines += indent(sec)
            lines.append("} else {")
            lines.append("    Vec::new()")
            lines.append("};")
    lines.append(f"Ok({st.name} {{")
    for f in st.fields:
        lines.append(f"    {f.name},")
    if st.has_tagged_section():
        lines.append("    unknown_tagged_fields,")
    lines.append("})")
    return lines


def tagged_dec_expr(f):
    # Tagged values are always in the compact encoding.
    expr = dec_value(f, "true", FakeFlexSite())
    return expr


class FakeFlexSite:
    def flex_expr(self):
        return "true"


# --------------------------------------------------------------------------
# Test strategies (proptest), generated next to the codecs


def strat_value(f):
    """A proptest strategy expression for a present field's value."""
    k = f.kind
    if k in PRIMITIVES:
        base = f"any::<{PRIMITIVES[k][0]}>().boxed()"
    elif k == "string":
        base = "testing::string()"
    elif k in ("bytes", "records"):
        base = "testing::bytes()"
    elif k == "array":
        if f.struct is not None:
            elem = f"{f.struct.name}::arb(version)"
        elif f.elem in PRIMITIVES:
            elem = f"any::<{PRIMITIVES[f.elem][0]}>()"
        elif f.elem == "string":
            elem = "testing::string()"
        else:
            elem = "testing::bytes()"
        base = f"proptest::collection::vec({elem}, 0..3).boxed()"
    else:
        base = f"{f.struct.name}::arb(version)"
    if is_option(f):
        c = cond(f.nullable, f.versions)
        if c is None:
            return f"proptest::option::of({base}).boxed()"
        return (
            f"if {c} {{\n    proptest::option::of({base}).boxed()\n}} else {{\n"
            f"    {base}.prop_map(Some).boxed()\n}}"
        )
    return base


def render_arb(st):
    out = []
    w = out.append
    w("#[cfg(test)]")
    w(f"impl {st.name} {{")
    w("    /// Values valid at `version`: fields the version lacks hold their defaults.")
    header_at = len(out)
    body = []
    names = []
    for f in st.fields:
        s = strat_value(f)
        c = cond(f.versions, st.ctx)
        names.append(f.name)
        if c is None:
            body += f"let {f.name} = {s};".split("\n")
        else:
            body.append(f"let {f.name} = if {c} {{")
            body += indent(s.split("\n"))
            body.append("} else {")
            body.append(f"    Just({default_expr(f)}).boxed()")
            body.append("};")
    if st.has_tagged_section():
        c = cond(st.flex_in(), st.ctx)
        names.append("unknown_tagged_fields")
        if c is None:
            body.append("let unknown_tagged_fields = testing::unknown_tagged_fields();")
        else:
            body.append(f"let unknown_tagged_fields = if {c} {{")
            body.append("    testing::unknown_tagged_fields()")
            body.append("} else {")
            body.append("    Just(Vec::new()).boxed()")
            body.append("};")
    if not names:
        body.append(f"Just({st.name} {{}}).boxed()")
    else:
        chunks = [names[i : i + 6] for i in range(0, len(names), 6)]
        tup = "(" + ", ".join("(" + ", ".join(c) + ",)" for c in chunks) + ",)"
        pat = "(" + ", ".join("(" + ", ".join(c) + ",)" for c in chunks) + ",)"
        body.append(f"{tup}")
        body.append(f"    .prop_map(|{pat}| {st.name} {{")
        for n in names:
            body.append(f"        {n},")
        body.append("    })")
        body.append("    .boxed()")
    out.insert(header_at, f"    pub(crate) fn arb({version_param(body)}: i16) -> BoxedStrategy<{st.name}> {{")
    out.extend(indent(body, 8))
    w("    }")
    w("}")
    w("")
    return out


# --------------------------------------------------------------------------
# Files


HEADER = [
    "// Generated by scripts/gen_messages.py from Kafka's message schemas",
    "// (clients/src/main/resources/common/message/*.json).",
    "// Edit the script, not this file.",
    "",
]


def module_doc(title, key, summary, schema_names, ctx, schema_valid, flex, kips, notes):
    out = []
    lines = wrap(f"{title} (key {key}): {summary}", 78, "//! ") if key is not None else wrap(
        f"{title}: {summary}", 78, "//! "
    )
    out += lines
    out.append("//!")
    names = ", ".join(f"`{n}.json`" for n in schema_names)
    if flex is None:
        flex_text = "never flexible"
    else:
        flex_text = f"flexible from version {flex.lo}"
    text = (
        f"Schemas: {names}. Versions {ctx.lo}-{ctx.hi} are implemented (the schemas "
        f"define {describe_range(schema_valid)}); {flex_text}."
    )
    out += wrap(text, 78, "//! ")
    out.append("//!")
    out += wrap(f"References: {kips}", 78, "//! ")
    for name, paras in notes:
        if not paras:
            continue
        out.append("//!")
        out.append(f"//! Version history, from the comments of `{name}.json`:")
        out.append("//!")
        out += note_lines(paras)
    return out


def note_lines(paras):
    """Schema comment paragraphs as a Markdown list; items of a list inside
    a comment (lines starting with "- ") are nested."""
    out = []
    for p in paras:
        if p.startswith("- "):
            out += wrap(doc_escape(p[2:]), 78, "//!   - ", "//!     ")
        else:
            out += wrap(doc_escape(p), 78, "//! - ", "//!   ")
    return out


def dedupe(structs):
    """Structs of the same name must be identical (after rendering); keep one."""
    seen = {}
    result = []
    for st, text in structs:
        body = [l for l in text if not l.startswith("///")]
        if st.name in seen:
            if seen[st.name] != body:
                raise SystemExit(f"two different structs named {st.name}")
            continue
        seen[st.name] = body
        result.append((st, text))
    return result


def order(top):
    """Depth-first: a struct, then the structs it uses, in field order."""
    res = [top]
    for f in top.fields:
        if f.struct is not None:
            res += order(f.struct)
    return res


def generate_api(schema_dir, module, base, lo, hi):
    req, req_notes = load_schema(os.path.join(schema_dir, f"{base}Request.json"))
    resp, resp_notes = load_schema(os.path.join(schema_dir, f"{base}Response.json"))
    assert req["apiKey"] == resp["apiKey"]
    ctx = VR(lo, hi)
    valid = parse_vr(req["validVersions"])
    assert valid.lo <= lo and hi <= valid.hi, f"{base}: {lo}-{hi} outside {valid}"
    assert parse_vr(resp["validVersions"]) == valid
    flex = parse_vr(req["flexibleVersions"])
    assert parse_vr(resp["flexibleVersions"]) == flex
    rendered = []
    for spec in (req, resp):
        common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
        structs = []
        doc = f"The body of a {base} {spec['type']}."
        top = build_struct(spec["name"], doc, spec["fields"], ctx, flex, common, True, structs)
        for st in order(top):
            request_of = f"{base}Response" if st is top and spec["type"] == "request" else None
            rendered.append((st, render_struct(st, base, request_of)))
    rendered = dedupe(rendered)
    summary, kips = SUMMARIES[base]
    out = list(HEADER)
    out += module_doc(base, req["apiKey"], summary, [f"{base}Request", f"{base}Response"], ctx, valid, flex, kips,
                      [(f"{base}Request", req_notes), (f"{base}Response", resp_notes)])
    out.append("")
    out += imports(rendered, message=True)
    out.append("")
    for st, text in rendered:
        out += text
    for st, _ in rendered:
        out += render_arb(st)
    out += render_tests([f"{base}Request", f"{base}Response"], base)
    return "\n".join(out).rstrip() + "\n"


def imports(rendered, message):
    uses_bytes = any(
        f.kind in ("bytes", "records") or (f.kind == "array" and f.elem == "bytes")
        for st, _ in rendered
        for f in st.fields
    )
    tagged = any(st.has_tagged_section() for st, _ in rendered)
    uses_nullcheck = any(
        is_option(f) and f.nullable != f.versions for st, _ in rendered for f in st.fields
    )
    uses_niv = any(
        f.versions != st.ctx and not f.ignorable for st, _ in rendered for f in st.fields
    )
    out = []
    helpers = []
    if message:
        helpers += ["check_decode_version", "check_encode_version", "Message", "Request"]
    if uses_niv:
        helpers.append("not_in_version")
    if uses_nullcheck:
        helpers.append("refuse_null")
    if message:
        out.append(f"use super::{{{', '.join(sorted(helpers, key=str.lower))}}};")
        out.append("use crate::protocol::api::{ApiKey, VersionRange};")
    else:
        if helpers:
            out.append(f"use crate::protocol::messages::{{{', '.join(sorted(helpers, key=str.lower))}}};")
        out.append("use crate::protocol::api::VersionRange;")
    codec = ["DecodeError", "EncodeError", "Reader", "Writer"]
    if tagged:
        codec.append("RawTaggedField")
    out.append(f"use crate::protocol::codec::{{{', '.join(sorted(codec))}}};")
    out.append("use bytes::Bytes;" if uses_bytes or not message else "")
    out.append("#[cfg(test)]")
    out.append("use crate::protocol::messages::testing;")
    out.append("#[cfg(test)]")
    out.append("use proptest::prelude::*;")
    return [l for l in out if l != ""]


def render_tests(names, variant):
    out = ["#[cfg(test)]", "mod tests {", "    use super::*;", ""]
    if variant:
        out.append("    #[test]")
        out.append("    fn versions_match_the_client_ranges() {")
        for n in names:
            out.append(f"        assert_eq!({n}::VERSIONS, ApiKey::{variant}.client_versions());")
        out.append("    }")
        out.append("")
    for n in names:
        out.append(f"    testing::message_properties!({snake(n)}, {n});")
    out.append("}")
    return out


def generate_group(schema_dir):
    rendered = []
    notes = []
    valid_all = []
    for name in ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment"):
        spec, paras = load_schema(os.path.join(schema_dir, f"{name}.json"))
        notes.append((name, paras))
        valid = parse_vr(spec["validVersions"])
        flex = parse_vr(spec["flexibleVersions"])
        assert flex is None, f"{name} is flexible in some version: review the framing"
        valid_all.append(valid)
        structs = []
        summary, _ = SUMMARIES[name]
        doc = f"{name}: {summary}"
        top = build_struct(name, doc, spec["fields"], valid, flex, {}, True, structs)
        for st in order(top):
            rendered.append((st, render_struct(st, None, None)))
    rendered = dedupe(rendered)
    out = list(HEADER)
    out += [
        "//! The \"consumer\" embedded protocol of classic groups: the subscription each",
        "//! member sends in JoinGroup and the assignment the leader sends in SyncGroup,",
        "//! both carried as opaque bytes by the group APIs.",
        "//!",
    ]
    out += wrap(
        "Schemas: `ConsumerProtocolSubscription.json` (versions "
        f"{describe_range(valid_all[0])}) and `ConsumerProtocolAssignment.json` (versions "
        f"{describe_range(valid_all[1])}), all implemented. Their `flexibleVersions` is "
        '"none": every version uses the classic encoding and has no tagged fields. '
        "On the wire each is an `int16` version followed by the body of that version "
        "([`ConsumerProtocolSubscription::to_bytes`], "
        "[`ConsumerProtocolSubscription::from_bytes`]). Java and librdkafka members of "
        "the same group read what this crate writes, and the reverse.",
        78,
        "//! ",
    )
    out.append("//!")
    out += wrap(f"References: {SUMMARIES['ConsumerProtocolSubscription'][1]}", 78, "//! ")
    for name, paras in notes:
        if paras:
            out.append("//!")
            out.append(f"//! Version history, from the comments of `{name}.json`:")
            out.append("//!")
            out += note_lines(paras)
    out.append("")
    out += imports(rendered, message=False)
    out.append("")
    for st, text in rendered:
        out += text
    out += GROUP_EXTRA
    for st, _ in rendered:
        out += render_arb(st)
    out += GROUP_TESTS
    return "\n".join(out).rstrip() + "\n"


GROUP_EXTRA = """
macro_rules! versioned_bytes {
    ($ty:ident) => {
        impl $ty {
            /// Writes the `int16` version, then the body at that version: the
            /// bytes that travel in JoinGroup (subscription) or SyncGroup
            /// (assignment).
            pub fn to_bytes(&self, version: i16) -> Result<Bytes, EncodeError> {
                let mut w = Writer::new();
                // Checked before the version number is written, so an
                // unsupported version leaves nothing half-written.
                if !Self::VERSIONS.contains(version) {
                    return Err(EncodeError::UnsupportedVersion {
                        api: stringify!($ty),
                        version,
                    });
                }
                w.i16(version);
                self.encode(&mut w, version)?;
                Ok(w.into_inner().freeze())
            }

            /// Reads the `int16` version and the body; returns the version
            /// found on the wire with the value.
            ///
            /// As Kafka's own `ConsumerProtocol` does, a version newer than
            /// this client knows is read as the newest known one (newer
            /// versions only append fields) and bytes after the known fields
            /// are ignored. A negative version is refused.
            pub fn from_bytes(bytes: Bytes) -> Result<(i16, Self), DecodeError> {
                let mut r = Reader::new(bytes);
                let version = r.i16("version")?;
                if version < Self::VERSIONS.min {
                    return Err(DecodeError::UnsupportedVersion {
                        api: stringify!($ty),
                        version,
                    });
                }
                let value = Self::decode(&mut r, version.min(Self::VERSIONS.max))?;
                Ok((version, value))
            }
        }
    };
}

versioned_bytes!(ConsumerProtocolSubscription);
versioned_bytes!(ConsumerProtocolAssignment);
""".split("\n")

GROUP_TESTS = """
#[cfg(test)]
mod tests {
    use super::*;

    proptest! {
        #[test]
        fn subscription_round_trips(
            (version, value) in (0i16..=3).prop_flat_map(|v| (Just(v), ConsumerProtocolSubscription::arb(v)))
        ) {
            let bytes = value.to_bytes(version).unwrap();
            prop_assert_eq!(ConsumerProtocolSubscription::from_bytes(bytes).unwrap(), (version, value));
        }

        #[test]
        fn assignment_round_trips(
            (version, value) in (0i16..=3).prop_flat_map(|v| (Just(v), ConsumerProtocolAssignment::arb(v)))
        ) {
            let bytes = value.to_bytes(version).unwrap();
            prop_assert_eq!(ConsumerProtocolAssignment::from_bytes(bytes).unwrap(), (version, value));
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = ConsumerProtocolSubscription::from_bytes(Bytes::from(bytes.clone()));
            let _ = ConsumerProtocolAssignment::from_bytes(Bytes::from(bytes));
        }
    }
}
""".split("\n")


def generate_versions(schema_dir):
    """The version table of `ApiKey`, in key order, from CLIENT_RANGES and
    the schemas' `apiKey` and `flexibleVersions`."""
    rows = []
    for _, base, lo, hi in CLIENT_RANGES:
        req, _ = load_schema(os.path.join(schema_dir, f"{base}Request.json"))
        valid = parse_vr(req["validVersions"])
        assert valid.lo <= lo and hi <= valid.hi, f"{base}: {lo}-{hi} outside {valid}"
        rows.append((req["apiKey"], base, lo, hi, parse_vr(req["flexibleVersions"])))
    rows.sort()
    out = [
        "// Generated by scripts/gen_messages.py from its CLIENT_RANGES table and the",
        "// schemas in schemas/. Edit the script, not this file.",
        "",
        "//! The versions this client speaks of each API and where each API's",
        "//! flexible versions begin: generated from the same ranges as the message",
        "//! codecs, so the two cannot disagree.",
        "",
        "use super::{ApiKey, VersionRange};",
        "",
        "impl ApiKey {",
        "    /// The versions this client speaks.",
        "    ///",
        "    /// The floor is what Kafka 1.0-era brokers speak (record batches v2",
        "    /// start there; OffsetForLeaderEpoch 2 is Kafka 2.1); the ceiling is the",
        "    /// newest `validVersions` of each schema.",
        "    pub const fn client_versions(self) -> VersionRange {",
        "        match self {",
    ]
    for _, base, lo, hi, _ in rows:
        out.append(f"            ApiKey::{base} => VersionRange::new({lo}, {hi}),")
    out += [
        "        }",
        "    }",
        "",
        "    /// The first flexible version (KIP-482) of this API, from the schema's",
        "    /// `flexibleVersions`; `None` when no version is flexible.",
        "    pub(crate) const fn first_flexible_version(self) -> Option<i16> {",
        "        match self {",
    ]
    for _, base, _, _, flex in rows:
        value = "None" if flex is None else f"Some({flex.lo})"
        out.append(f"            ApiKey::{base} => {value},")
    out += [
        "        }",
        "    }",
        "}",
        "",
        "#[cfg(test)]",
        "mod tests {",
        "    use super::*;",
        "",
        "    #[test]",
        "    fn key_numbers_match_the_schemas() {",
    ]
    for key, base, _, _, _ in rows:
        out.append(f"        assert_eq!(ApiKey::{base}.code(), {key});")
    out += [
        "    }",
        "}",
    ]
    return "\n".join(out) + "\n"


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def main(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    root_default = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    schema_dir = argv[1] if len(argv) > 1 else os.path.join(root_default, "schemas")
    root = argv[2] if len(argv) > 2 else root_default
    protocol = os.path.join(root, "src", "protocol")
    for module, base, lo, hi in CLIENT_RANGES:
        if module in HAND_WRITTEN:
            continue
        write(os.path.join(protocol, "messages", f"{module}.rs"), generate_api(schema_dir, module, base, lo, hi))
    write(os.path.join(protocol, "group.rs"), generate_group(schema_dir))
    write(os.path.join(protocol, "api", "versions.rs"), generate_versions(schema_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
