#!/usr/bin/env python3
"""Renders the Mermaid sequence diagram of docs/connection-lifecycle.md to SVG.

The Markdown page keeps the diagram's source in a ```mermaid block; this
script reads that block and writes docs/connection-lifecycle.svg beside it,
so the page shows the diagram on any Markdown viewer, with or without
Mermaid support. Python 3 standard library only.

    python3 scripts/render_sequence.py           # regenerate the SVG
    python3 scripts/render_sequence.py --check   # exit 1 if the SVG is stale

The Mermaid subset understood (anything else is an error naming the line):

    sequenceDiagram
    autonumber
    participant ID [as LABEL]      actor ID [as LABEL]
    A->>B: text    A-->>B: text    (also -> and --> : no arrow head)
    Note over A: text   Note over A,B: text
    Note right of A: text   Note left of A: text
    loop TEXT ... end   opt TEXT ... end   rect rgb(r, g, b) ... end
    %% comment

`<br/>` in any text starts a new line. The output is deterministic: the same
source always gives the same bytes.
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MD = ROOT / "docs" / "connection-lifecycle.md"

# Layout, in pixels. Text is monospace, so its width is known from its length.
FONT_SIZE = 13
CHAR_W = 7.9  # advance of one DejaVu Sans Mono glyph at 13 px (0.602 em)
LINE_H = 17
MARGIN = 20
BOX_PAD_X = 12
BOX_PAD_Y = 8
MIN_BOX_W = 120
MIN_GAP = 30  # between two participant boxes
LABEL_PAD = 26  # free space around a message label between its lifelines
NOTE_PAD_X = 10
NOTE_PAD_Y = 6
FRAME_PAD = 16  # a loop/opt/rect frame around its content
FRAME_NEST = 8  # extra room per nesting level
FONT = "'DejaVu Sans Mono', Menlo, Consolas, 'Liberation Mono', monospace"

COLORS = {
    "line": "#4a4a4a",
    "lifeline": "#9aa5b1",
    "box_fill": "#eef2f7",
    "box_stroke": "#4a5868",
    "note_fill": "#fff7d6",
    "note_stroke": "#c9a227",
    "frame": "#6b7785",
    "frame_tag": "#e4e9f0",
    "number": "#34495e",
    "text": "#1b1f23",
}


class DiagramError(Exception):
    pass


def lines_of(text):
    """Splits a label on <br>, <br/> and <br />."""
    return [part.strip() for part in re.split(r"<br\s*/?>", text.strip(), flags=re.I)]


def text_width(lines):
    return max((len(line) for line in lines), default=0) * CHAR_W


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def num(value):
    """A coordinate, without needless decimals (keeps the SVG stable)."""
    value = round(value, 1)
    return str(int(value)) if value == int(value) else str(value)


# ---------------------------------------------------------------- parsing


class Participant:
    def __init__(self, pid, label, kind):
        self.id = pid
        self.label = lines_of(label)
        self.kind = kind  # "participant" or "actor"
        self.index = 0
        self.x = 0.0  # centre
        self.w = 0.0


MESSAGE = re.compile(r"^(?P<src>[^\s\-:>][^:>]*?)\s*(?P<arrow>-->>|->>|-->|->)\s*(?P<dst>[^:]+?)\s*:\s*(?P<text>.*)$")
NOTE = re.compile(r"^note\s+(?P<where>over|right of|left of)\s+(?P<who>[^:]+?)\s*:\s*(?P<text>.*)$", re.I)
PARTICIPANT = re.compile(r"^(?P<kind>participant|actor)\s+(?P<id>[^\s]+)(?:\s+as\s+(?P<label>.+))?$")
BLOCK = re.compile(r"^(?P<kind>loop|opt|rect)\b\s*(?P<text>.*)$")
RGB = re.compile(r"^rgba?\(\s*\d+\s*,\s*\d+\s*,\s*\d+\s*(?:,\s*[\d.]+\s*)?\)$")


def parse(source):
    """Parses the Mermaid text into participants and a tree of items."""
    participants = {}
    order = []
    root = {"type": "root", "items": [], "depth": -1}
    stack = [root]
    autonumber = False
    seen_header = False

    def participant(pid, lineno):
        pid = pid.strip()
        if pid not in participants:
            if not pid or re.search(r"\s", pid):
                raise DiagramError(f"line {lineno}: bad participant name {pid!r}")
            participants[pid] = Participant(pid, pid, "participant")
            order.append(pid)
        return participants[pid]

    for lineno, raw in enumerate(source.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("%%"):
            continue
        if not seen_header:
            if line != "sequenceDiagram":
                raise DiagramError(f"line {lineno}: expected 'sequenceDiagram', found {line!r}")
            seen_header = True
            continue
        if line == "autonumber":
            autonumber = True
            continue
        m = PARTICIPANT.match(line)
        if m:
            pid = m.group("id")
            if pid in participants:
                raise DiagramError(f"line {lineno}: participant {pid!r} declared twice or after use")
            participants[pid] = Participant(pid, m.group("label") or pid, m.group("kind"))
            order.append(pid)
            continue
        m = NOTE.match(line)
        if m:
            who = [participant(p, lineno) for p in m.group("who").split(",")]
            where = m.group("where").lower()
            if len(who) > 2 or (len(who) == 2 and where != "over"):
                raise DiagramError(f"line {lineno}: a note is over one or two participants, or beside one")
            stack[-1]["items"].append({"type": "note", "where": where, "who": who, "text": lines_of(m.group("text"))})
            continue
        m = BLOCK.match(line)
        if m:
            kind, text = m.group("kind"), m.group("text").strip()
            if kind == "rect" and not RGB.match(text):
                raise DiagramError(f"line {lineno}: rect takes a colour, rgb(r, g, b) or rgba(r, g, b, a)")
            block = {"type": kind, "text": text, "items": [], "depth": len(stack) - 1}
            stack[-1]["items"].append(block)
            stack.append(block)
            continue
        if line == "end":
            if len(stack) == 1:
                raise DiagramError(f"line {lineno}: 'end' without an open block")
            stack.pop()
            continue
        m = MESSAGE.match(line)
        if m:
            src = participant(m.group("src"), lineno)
            dst = participant(m.group("dst"), lineno)
            if src is dst:
                raise DiagramError(f"line {lineno}: messages to self are not supported")
            arrow = m.group("arrow")
            stack[-1]["items"].append(
                {
                    "type": "message",
                    "src": src,
                    "dst": dst,
                    "dashed": arrow.startswith("--"),
                    "head": arrow.endswith(">>"),
                    "text": lines_of(m.group("text")),
                }
            )
            continue
        raise DiagramError(f"line {lineno}: not understood: {line!r}")
    if not seen_header:
        raise DiagramError("no 'sequenceDiagram' header")
    if len(stack) != 1:
        raise DiagramError(f"{len(stack) - 1} block(s) not closed with 'end'")
    if not order:
        raise DiagramError("no participants")
    parts = [participants[p] for p in order]
    for i, p in enumerate(parts):
        p.index = i
    return parts, root, autonumber


def mermaid_block(markdown):
    """The first ```mermaid block that holds a sequence diagram."""
    for m in re.finditer(r"^```mermaid[ \t]*\n(.*?)^```[ \t]*$", markdown, re.M | re.S):
        if m.group(1).lstrip().startswith("sequenceDiagram"):
            return m.group(1)
    raise DiagramError("no ```mermaid block with a sequenceDiagram")


# ---------------------------------------------------------------- layout


def walk(items):
    for item in items:
        yield item
        if "items" in item:
            yield from walk(item["items"])


def layout_columns(parts, root):
    """Places the lifelines so that every label fits between its ends."""
    box_h = 0
    for p in parts:
        p.w = max(MIN_BOX_W, text_width(p.label) + 2 * BOX_PAD_X)
        box_h = max(box_h, len(p.label) * LINE_H + 2 * BOX_PAD_Y + (26 if p.kind == "actor" else 0))
    gaps = [parts[i].w / 2 + parts[i + 1].w / 2 + MIN_GAP for i in range(len(parts) - 1)]
    spans = []
    for item in walk(root["items"]):
        if item["type"] == "message":
            a, b = sorted((item["src"].index, item["dst"].index))
            spans.append((a, b, text_width(item["text"]) + 2 * LABEL_PAD))
        elif item["type"] == "note" and item["where"] != "over":
            # A side note must fit between its lifeline and the next one.
            p = item["who"][0]
            need = text_width(item["text"]) + 2 * NOTE_PAD_X + 16
            if item["where"] == "right of" and p.index + 1 < len(parts):
                spans.append((p.index, p.index + 1, need))
            elif item["where"] == "left of" and p.index > 0:
                spans.append((p.index - 1, p.index, need))
    # Short spans first, so that a long label widens gaps only as needed.
    for a, b, need in sorted(spans, key=lambda s: (s[1] - s[0], s[0], s[2])):
        have = sum(gaps[a:b])
        if have < need:
            extra = (need - have) / (b - a)
            for i in range(a, b):
                gaps[i] += extra
    x = MARGIN + parts[0].w / 2
    for i, p in enumerate(parts):
        if i:
            x += gaps[i - 1]
        p.x = x
    return box_h


def note_box(item):
    w = text_width(item["text"]) + 2 * NOTE_PAD_X
    h = len(item["text"]) * LINE_H + 2 * NOTE_PAD_Y
    who = item["who"]
    if item["where"] == "over":
        left = min(p.x for p in who)
        right = max(p.x for p in who)
        if len(who) == 2:
            left, right = left - 24, right + 24
            if right - left < w:
                mid = (left + right) / 2
                left, right = mid - w / 2, mid + w / 2
        else:
            left, right = left - w / 2, left + w / 2
    elif item["where"] == "right of":
        left = who[0].x + 12
        right = left + w
    else:
        right = who[0].x - 12
        left = right - w
    return left, right, h


class Canvas:
    def __init__(self):
        self.back = []  # rect fills
        self.frames = []  # loop/opt outlines
        self.front = []  # notes, messages

    def text(self, x, y, lines, anchor="middle", size=FONT_SIZE, weight=None, fill=COLORS["text"]):
        """Lines of text; y is the baseline of the first line."""
        out = []
        attrs = f'text-anchor="{anchor}" font-size="{size}"'
        if weight:
            attrs += f' font-weight="{weight}"'
        if fill != COLORS["text"]:
            attrs += f' fill="{fill}"'
        for i, line in enumerate(lines):
            out.append(f'<text x="{num(x)}" y="{num(y + i * LINE_H)}" {attrs}>{esc(line)}</text>')
        return out


def place_items(items, y, canvas, state):
    """Lays out items from y down; returns (new y, x extent of the content)."""
    lo, hi = float("inf"), float("-inf")
    for item in items:
        kind = item["type"]
        if kind == "message":
            src, dst = item["src"], item["dst"]
            lines = item["text"]
            y += 8 + len(lines) * LINE_H
            x1, x2 = src.x, dst.x
            mid = (x1 + x2) / 2
            canvas.front += canvas.text(mid, y - len(lines) * LINE_H + 10, lines)
            y += 6
            direction = 1 if x2 > x1 else -1
            end = x2 - direction * 2  # the head's tip touches the lifeline
            dash = ' stroke-dasharray="6,4"' if item["dashed"] else ""
            head = ' marker-end="url(#head)"' if item["head"] else ""
            canvas.front.append(
                f'<line x1="{num(x1)}" y1="{num(y)}" x2="{num(end)}" y2="{num(y)}" '
                f'stroke="{COLORS["line"]}" stroke-width="1.4"{dash}{head}/>'
            )
            if state["autonumber"]:
                state["n"] += 1
                canvas.front.append(
                    f'<circle cx="{num(x1)}" cy="{num(y)}" r="9" fill="{COLORS["number"]}"/>'
                )
                canvas.front += canvas.text(x1, y + 3.5, [str(state["n"])], size=10, weight="bold", fill="#ffffff")
            lo, hi = min(lo, x1, x2), max(hi, x1, x2)
            y += 12
        elif kind == "note":
            left, right, h = note_box(item)
            y += 8
            canvas.front.append(
                f'<rect x="{num(left)}" y="{num(y)}" width="{num(right - left)}" height="{num(h)}" '
                f'fill="{COLORS["note_fill"]}" stroke="{COLORS["note_stroke"]}" rx="2"/>'
            )
            canvas.front += canvas.text((left + right) / 2, y + NOTE_PAD_Y + 12.5, item["text"])
            lo, hi = min(lo, left), max(hi, right)
            y += h + 8
        else:  # loop, opt, rect
            top = y + 6
            label_h = 0 if kind == "rect" else LINE_H + 10
            y = top + label_h + 4
            inner_y, (ilo, ihi) = place_items(item["items"], y, canvas, state)
            if ilo == float("inf"):
                raise DiagramError(f"empty {kind} block")
            pad = FRAME_PAD + FRAME_NEST * max(0, 2 - item["depth"])
            left, right = ilo - pad, ihi + pad
            bottom = inner_y + 10
            if kind == "rect":
                canvas.back.append(
                    f'<rect x="{num(left)}" y="{num(top)}" width="{num(right - left)}" '
                    f'height="{num(bottom - top)}" fill="{item["text"]}" rx="4"/>'
                )
            else:
                tag_w = len(kind) * CHAR_W + 18
                cond = f"[{item['text']}]" if item["text"] else ""
                right = max(right, left + tag_w + 10 + len(cond) * CHAR_W + 12)
                tag_h = LINE_H + 4
                canvas.frames.append(
                    f'<rect x="{num(left)}" y="{num(top)}" width="{num(right - left)}" '
                    f'height="{num(bottom - top)}" fill="none" stroke="{COLORS["frame"]}" stroke-width="1"/>'
                )
                canvas.frames.append(
                    f'<path d="M{num(left)},{num(top)} h{num(tag_w)} v{num(tag_h - 6)} '
                    f'l-6,6 h{num(-(tag_w - 6))} z" fill="{COLORS["frame_tag"]}" '
                    f'stroke="{COLORS["frame"]}" stroke-width="1"/>'
                )
                canvas.frames += canvas.text(left + tag_w / 2 - 2, top + 15, [kind], weight="bold")
                if cond:
                    canvas.frames += canvas.text(left + tag_w + 10, top + 15, [cond], anchor="start")
            lo, hi = min(lo, left), max(hi, right)
            y = bottom + 4
    return y, (lo, hi)


def render(source):
    parts, root, autonumber = parse(source)
    box_h = layout_columns(parts, root)
    canvas = Canvas()
    state = {"autonumber": autonumber, "n": 0}
    top = MARGIN
    y_start = top + box_h + 6
    y_end, (lo, hi) = place_items(root["items"], y_start, canvas, state)
    y_end += 10
    left = min([lo, MARGIN] + [p.x - p.w / 2 for p in parts])
    right = max([hi] + [p.x + p.w / 2 for p in parts])
    shift = MARGIN - left if left < MARGIN else 0
    width = right + shift + MARGIN
    height = y_end + box_h + MARGIN

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{num(width)}" height="{num(height)}" '
        f'viewBox="0 0 {num(width)} {num(height)}" font-family="{esc(FONT)}" '
        f'font-size="{FONT_SIZE}" fill="{COLORS["text"]}">',
        "<defs>",
        '<marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" '
        f'orient="auto" markerUnits="userSpaceOnUse"><path d="M0,0 L10,5 L0,10 z" fill="{COLORS["line"]}"/></marker>',
        "</defs>",
        f'<rect width="{num(width)}" height="{num(height)}" fill="#ffffff"/>',
        f'<g transform="translate({num(shift)},0)">',
    ]
    out += canvas.back
    for p in parts:
        out.append(
            f'<line x1="{num(p.x)}" y1="{num(top + box_h)}" x2="{num(p.x)}" y2="{num(y_end)}" '
            f'stroke="{COLORS["lifeline"]}" stroke-width="1"/>'
        )
    out += canvas.frames
    out += canvas.front
    for y in (top, y_end):
        for p in parts:
            out += participant_box(canvas, p, y, box_h)
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def participant_box(canvas, p, y, box_h):
    left = p.x - p.w / 2
    out = [
        f'<rect x="{num(left)}" y="{num(y)}" width="{num(p.w)}" height="{num(box_h)}" '
        f'fill="{COLORS["box_fill"]}" stroke="{COLORS["box_stroke"]}" stroke-width="1.2" rx="4"/>'
    ]
    text_top = y + (box_h - len(p.label) * LINE_H) / 2
    if p.kind == "actor":
        # A small figure above the name.
        cx, hy = p.x, y + 12
        stroke = f'stroke="{COLORS["box_stroke"]}" stroke-width="1.4" fill="none"'
        out += [
            f'<circle cx="{num(cx)}" cy="{num(hy)}" r="5" {stroke}/>',
            f'<path d="M{num(cx)},{num(hy + 5)} v9 M{num(cx - 7)},{num(hy + 9)} h14 '
            f'M{num(cx)},{num(hy + 14)} l-6,7 M{num(cx)},{num(hy + 14)} l6,7" {stroke}/>',
        ]
        text_top += 13
    out += canvas.text(p.x, text_top + 12.5, p.label, weight="bold")
    return out


# ---------------------------------------------------------------- main


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the SVG is missing or stale")
    parser.add_argument("--markdown", type=Path, default=DEFAULT_MD, help="page holding the ```mermaid block")
    parser.add_argument("--svg", type=Path, help="output (default: the page's path with .svg)")
    args = parser.parse_args(argv)
    svg_path = args.svg or args.markdown.with_suffix(".svg")
    try:
        svg = render(mermaid_block(args.markdown.read_text(encoding="utf-8")))
    except (DiagramError, OSError) as e:
        print(f"render_sequence: {args.markdown}: {e}", file=sys.stderr)
        return 2
    if args.check:
        try:
            current = svg_path.read_text(encoding="utf-8")
        except OSError as e:
            print(f"render_sequence: {svg_path}: {e}", file=sys.stderr)
            return 1
        if current != svg:
            print(
                f"render_sequence: {svg_path} is stale; run: python3 scripts/render_sequence.py",
                file=sys.stderr,
            )
            return 1
        return 0
    svg_path.write_text(svg, encoding="utf-8")
    print(f"wrote {svg_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
