#!/usr/bin/env python3
"""protodoc: writes docs/protocol-reference.md from the .proto files (standard library only).

Reads every proto/schema/*.proto and renders, per file: its header comment, package and
imports; the section comments (`// ----- title`) as headings; every message with its leading
comment, fields (number, name, type, label, comment), oneofs, nested enums and reserved numbers;
every enum with its values. The per-call messages of sluice_cuda.proto (`<Name>Request` /
`<Name>Reply`, each request commented `// call ID NAME`) are rendered as one table of calls,
joined with the members of the large oneofs that carry them (`Call.args`, `Reply.out`).

Only the subset of proto3 the schemas use is accepted (syntax, package, import, option,
message, enum, oneof, fields, map fields, reserved, // comments); anything else is an error
naming the file and line, so that the reference cannot silently leave something out.

Usage:
  protodoc.py [--schema DIR] --write [FILE]   write the reference (docs/protocol-reference.md)
  protodoc.py [--schema DIR] --check [FILE]   exit 1 when FILE differs from what would be written
  protodoc.py [--schema DIR]                  print the reference on stdout
"""
import argparse
import difflib
import os
import re
import sys

sys.dont_write_bytecode = True

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_OUT = os.path.join(ROOT, "docs", "protocol-reference.md")
DEFAULT_SCHEMA = os.path.join(ROOT, "proto", "schema")
# A oneof with more members than this, all of them messages of another file, is summarised in
# its message and listed in that file's table of calls instead.
BIG_ONEOF = 32

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
FULL_IDENT = r"\.?[A-Za-z_][A-Za-z0-9_.]*"
RE_SECTION = re.compile(r"^-{4,}\s*(.*?)\s*$")
RE_SYNTAX = re.compile(r'^syntax\s*=\s*"(proto[23])"\s*;$')
RE_PACKAGE = re.compile(r"^package\s+(" + FULL_IDENT + r")\s*;$")
RE_IMPORT = re.compile(r'^import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;$')
RE_OPTION = re.compile(r"^option\s+(.+?)\s*=\s*(.+?)\s*;$")
RE_MESSAGE = re.compile(r"^message\s+(" + IDENT + r")\s*\{$")
RE_ENUM = re.compile(r"^enum\s+(" + IDENT + r")\s*\{$")
RE_ONEOF = re.compile(r"^oneof\s+(" + IDENT + r")\s*\{$")
RE_FIELD = re.compile(r"^(repeated\s+|optional\s+)?(" + FULL_IDENT + r")\s+(" + IDENT +
                      r")\s*=\s*(\d+)\s*(\[.*\])?\s*;$")
RE_MAP = re.compile(r"^map\s*<\s*(" + FULL_IDENT + r")\s*,\s*(" + FULL_IDENT + r")\s*>\s+(" +
                    IDENT + r")\s*=\s*(\d+)\s*;$")
RE_ENUM_VALUE = re.compile(r"^(" + IDENT + r")\s*=\s*(-?\d+)\s*(\[.*\])?\s*;$")
RE_RESERVED = re.compile(r"^reserved\s+(.+?)\s*;$")
RE_CALL = re.compile(r"^call\s+(\d+)\s+(" + IDENT + r")$")


class ProtoError(Exception):
    pass


class Node:
    """A message, enum or oneof; fields/values/members in declaration order."""

    def __init__(self, kind, name, comment, line):
        self.kind = kind          # "message", "enum", "oneof"
        self.name = name
        self.comment = comment    # leading comment (text), may be ""
        self.trailing = ""        # comment after the opening brace
        self.line = line
        self.items = []           # fields / enum values / oneofs / nested nodes, in order
        self.reserved = []        # texts of reserved statements
        self.options = []


class Field:
    def __init__(self, label, type_, name, number, comment, line, oneof=None):
        self.label = label        # "", "repeated", "optional", "map"
        self.type = type_
        self.name = name
        self.number = number
        self.comment = comment
        self.line = line
        self.oneof = oneof


class EnumValue:
    def __init__(self, name, number, comment):
        self.name = name
        self.number = number
        self.comment = comment


class ProtoFile:
    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)
        self.header = ""
        self.syntax = ""
        self.package = ""
        self.imports = []
        self.options = []
        self.items = []           # ("section", title) or a Node, in order


def split_comment(raw):
    """(code, comment, comment column) of one line; // inside a string literal is code."""
    in_str = False
    for i, ch in enumerate(raw):
        if ch == '"':
            in_str = not in_str
        elif not in_str and raw.startswith("//", i):
            return raw[:i].strip(), raw[i + 2:].strip(), i
    if "/*" in raw:
        raise ProtoError("block comments are not supported")
    return raw.strip(), None, -1


def statements(code):
    """Split one line of code into statements: `message X { int32 a = 1; }` -> 4 pieces."""
    out, cur, in_str = [], "", False
    for ch in code:
        if ch == '"':
            in_str = not in_str
        if not in_str and ch == "}":
            if cur.strip():
                out.append(cur.strip())
            out.append("}")
            cur = ""
            continue
        cur += ch
        if not in_str and ch in "{;":
            out.append(cur.strip())
            cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


class Parser:
    def __init__(self, path):
        self.pf = ProtoFile(path)
        self.stack = []           # open Nodes
        self.pending = []         # comment lines waiting for the next declaration

    def where(self, n):
        return "%s:%d" % (self.pf.name, n)

    def take_pending(self, trailing=""):
        text = " ".join(self.pending + [trailing]).strip()
        self.pending.clear()
        return text

    def statement(self, code, trailing, n):
        """One statement; returns the item a continued trailing comment would extend."""
        pf, stack = self.pf, self.stack
        if code == "}":
            if not stack:
                raise ProtoError("%s: unbalanced '}'" % self.where(n))
            self.pending.clear()
            stack.pop()
            return None
        if not stack:
            for rx, act in ((RE_SYNTAX, lambda m: setattr(pf, "syntax", m.group(1))),
                            (RE_PACKAGE, lambda m: setattr(pf, "package", m.group(1))),
                            (RE_IMPORT, lambda m: pf.imports.append(m.group(1)))):
                m = rx.match(code)
                if m:
                    act(m)
                    self.pending.clear()
                    return None
        m = RE_OPTION.match(code)
        if m:
            (stack[-1].options if stack else pf.options).append("%s = %s" % m.groups())
            self.pending.clear()
            return None
        m = RE_MESSAGE.match(code) or RE_ENUM.match(code) or RE_ONEOF.match(code)
        if m:
            kind = code.split()[0]
            if kind == "oneof" and (not stack or stack[-1].kind != "message"):
                raise ProtoError("%s: oneof outside a message" % self.where(n))
            if stack and stack[-1].kind != "message":
                raise ProtoError("%s: %s inside a %s" % (self.where(n), kind, stack[-1].kind))
            node = Node(kind, m.group(1), self.take_pending(), n)
            node.trailing = trailing
            (stack[-1].items if stack else pf.items).append(node)
            stack.append(node)
            return None
        if not stack:
            raise ProtoError("%s: cannot read %r at file level" % (self.where(n), code))
        top = stack[-1]
        m = RE_RESERVED.match(code)
        if m and top.kind in ("message", "enum"):
            top.reserved.append(m.group(1))
            self.pending.clear()
            return None
        if top.kind == "enum":
            m = RE_ENUM_VALUE.match(code)
            if not m:
                raise ProtoError("%s: cannot read enum value %r" % (self.where(n), code))
            v = EnumValue(m.group(1), int(m.group(2)), self.take_pending(trailing))
            top.items.append(v)
            return v
        m = RE_MAP.match(code)
        if m:
            if top.kind == "oneof":
                raise ProtoError("%s: map field inside a oneof" % self.where(n))
            f = Field("map", "map<%s, %s>" % (m.group(1), m.group(2)), m.group(3),
                      int(m.group(4)), "", n)
        else:
            m = RE_FIELD.match(code)
            if not m:
                raise ProtoError("%s: cannot read field %r" % (self.where(n), code))
            label = (m.group(1) or "").strip()
            if top.kind == "oneof" and label:
                raise ProtoError("%s: %s field inside a oneof" % (self.where(n), label))
            f = Field(label, m.group(2), m.group(3), int(m.group(4)), "", n)
        f.comment = self.take_pending(trailing)
        if top.kind == "oneof":
            f.oneof = top.name
        top.items.append(f)
        return f

    def run(self):
        pf = self.pf
        with open(pf.path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        last, last_col = None, -1   # the item whose trailing comment may continue below
        seen_code = False
        header = []
        for n, raw in enumerate(lines, 1):
            try:
                code, comment, col = split_comment(raw)
            except ProtoError as e:
                raise ProtoError("%s: %s" % (self.where(n), e))
            if not code:
                if comment is None:                       # blank line
                    if not seen_code and self.pending:
                        header.extend(self.pending + [""])
                    self.pending.clear()
                    last = None
                    continue
                if last is not None and col == last_col:  # continues a trailing comment
                    last.comment = (last.comment + " " + comment).strip()
                    continue
                last = None
                m = RE_SECTION.match(comment)
                if m and seen_code and not self.stack:
                    self.pending.clear()
                    pf.items.append(("section", m.group(1)))
                    continue
                self.pending.append(comment)
                continue
            if not seen_code:
                header.extend(self.pending)
                self.pending.clear()
            seen_code = True
            last = None
            for i, piece in enumerate(statements(code)):
                # A trailing comment belongs to the line's first statement.
                item = self.statement(piece, (comment or "") if i == 0 else "", n)
                if i == 0 and comment and item is not None:
                    last, last_col = item, col
        if self.stack:
            raise ProtoError("%s: %s %s is not closed" % (pf.name, self.stack[-1].kind,
                                                          self.stack[-1].name))
        if not pf.syntax:
            raise ProtoError("%s: no syntax statement" % pf.name)
        pf.header = "\n".join(header).strip()
        check_numbers(pf)
        return pf


def parse(path):
    return Parser(path).run()


def check_numbers(pf):
    """Field numbers unique per message (oneof members included), enum values unique."""
    def walk(node, qual):
        if node.kind == "message":
            seen = {}
            for it in fields_of(node):
                if it.number in seen:
                    raise ProtoError("%s:%d: %s: field number %d used by %s and %s" % (
                        pf.name, it.line, qual, it.number, seen[it.number], it.name))
                seen[it.number] = it.name
        if node.kind == "enum":
            seen = set()
            for v in node.items:
                if v.number in seen and "allow_alias = true" not in node.options:
                    raise ProtoError("%s: enum %s: value %d twice" % (pf.name, qual, v.number))
                seen.add(v.number)
        for it in node.items:
            if isinstance(it, Node) and it.kind != "oneof":
                walk(it, qual + "." + it.name)
    for it in pf.items:
        if isinstance(it, Node):
            walk(it, it.name)


def fields_of(msg):
    """The message's fields, oneof members included, in declaration order."""
    out = []
    for it in msg.items:
        if isinstance(it, Field):
            out.append(it)
        elif isinstance(it, Node) and it.kind == "oneof":
            out.extend(it.items)
    return out


# ---------------------------------------------------------------- rendering

def md(text):
    """Escape what would break a Markdown table cell."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def code(text):
    return "`%s`" % text


def anchor(text):
    a = re.sub(r"[^a-z0-9 _-]", "", text.lower()).replace(" ", "-")
    return a


def qualify(pf, name):
    return "%s.%s" % (pf.package, name) if pf.package else name


def call_messages(pf):
    """{request name: (id, call name)} for a file whose requests carry `// call ID NAME`."""
    calls = {}
    for it in pf.items:
        if isinstance(it, Node) and it.kind == "message" and it.name.endswith("Request"):
            m = RE_CALL.match(it.trailing or "")
            if m:
                calls[it.name] = (int(m.group(1)), m.group(2))
    return calls


def type_link(t, scope, known):
    """A field type, linked when it is a message or enum documented here. Names resolve as
    protoc resolves them: from the innermost scope (the message) outwards."""
    if t.startswith("."):
        candidates = [t[1:]]
    else:
        parts = scope.split(".")
        candidates = [".".join(parts[:i] + [t]) for i in range(len(parts), -1, -1)]
    for c in candidates:
        if c in known:
            return "[%s](#%s)" % (code(t), known[c])
    return code(t)


def render_enum(out, node, qual):
    out.append("enum %s%s\n" % (code(qual), (": " + md(node.comment)) if node.comment else ""))
    out.append("| value | name | comment |")
    out.append("|---|---|---|")
    for v in node.items:
        out.append("| %d | %s | %s |" % (v.number, code(v.name), md(v.comment)))
    out.append("")


def render_message(out, pf, node, qual, known, big_oneofs):
    if node.comment:
        out.append(md(node.comment) + "\n")
    rows = []
    for it in node.items:
        if isinstance(it, Field):
            rows.append((it, ""))
        elif isinstance(it, Node) and it.kind == "oneof":
            if (qual, it.name) in big_oneofs:
                tbl = big_oneofs[(qual, it.name)]
                nums = [f.number for f in it.items]
                rows.append(("oneof-big", "oneof %s: %d members %d..%d, one per call; see [%s](#%s)"
                             % (code(it.name), len(it.items), min(nums), max(nums),
                                tbl[0], tbl[1])))
            else:
                for f in it.items:
                    rows.append((f, "oneof " + code(it.name)))
    if rows:
        out.append("| # | field | type | label | comment |")
        out.append("|---|---|---|---|---|")
        for f, label in rows:
            if f == "oneof-big":
                out.append("| | | | %s | |" % label)
                continue
            lab = label or f.label
            out.append("| %d | %s | %s | %s | %s |" % (
                f.number, code(f.name), type_link(f.type, qual, known), lab, md(f.comment)))
        out.append("")
    else:
        out.append("No fields.\n")
    if node.reserved:
        out.append("Reserved: %s.\n" % ", ".join(code(r) for r in node.reserved))
    for it in node.items:
        if isinstance(it, Node) and it.kind == "enum":
            render_enum(out, it, qual + "." + it.name)
        elif isinstance(it, Node) and it.kind == "message":
            out.append("Nested message %s:\n" % code(qual + "." + it.name))
            render_message(out, pf, it, qual + "." + it.name, known, big_oneofs)


def compact_fields(msg):
    parts = []
    for f in fields_of(msg):
        lab = (f.label + " ") if f.label and f.label != "map" else ""
        s = code("%s%s %s = %d" % (lab, f.type, f.name, f.number))
        if f.comment:
            s += " (%s)" % md(f.comment)
        parts.append(s)
    return "<br>".join(parts) if parts else "—"


def render(files):
    files = sorted(files, key=lambda p: (0 if not call_messages(p) else 1, p.name))
    out = []
    out.append("# Protocol reference\n")
    out.append("Generated by `proto/gen/protodoc.py` from `proto/schema/*.proto`. Do not edit: "
               "run `python3 proto/gen/protodoc.py --write` (or `cmake --build BUILD --target "
               "regen-protodoc`) after changing a schema; `ctest -R docs.protocol_reference` fails "
               "while this file is stale. How the messages travel (channel records, bulk, "
               "sessions) is explained in `docs/protocol.md` and `docs/channel.md`.\n")

    # Anchors for every message and enum (by package-qualified and by file-local name).
    known = {}
    headings = []
    for pf in files:
        for it in pf.items:
            if isinstance(it, Node):
                q = qualify(pf, it.name)
                a = anchor(q)
                known[q] = a
                for sub in it.items:
                    if isinstance(sub, Node) and sub.kind in ("enum", "message"):
                        known[q + "." + sub.name] = a
    # Big oneofs: members typed with another file's call messages.
    call_files = {pf.name: call_messages(pf) for pf in files}
    big_oneofs = {}
    # request/reply type (qualified) -> [(message.oneof, member name, number)]
    oneof_members = {}
    for pf in files:
        for it in pf.items:
            if not (isinstance(it, Node) and it.kind == "message"):
                continue
            for sub in it.items:
                if not (isinstance(sub, Node) and sub.kind == "oneof") \
                        or len(sub.items) <= BIG_ONEOF:
                    continue
                home = None
                for other in files:
                    pkg = other.package + "."
                    if other is not pf and call_files[other.name] and all(
                            f.type.lstrip(".").startswith(pkg) for f in sub.items):
                        home = other
                if home is None:
                    continue
                title = "Calls of %s" % home.name
                big_oneofs[(qualify(pf, it.name), sub.name)] = (title, anchor(title))
                for f in sub.items:
                    oneof_members.setdefault(f.type.lstrip("."), []).append(
                        ("%s.%s" % (it.name, sub.name), f.name, f.number))

    out.append("## Files\n")
    out.append("| file | package | messages | enums |")
    out.append("|---|---|---|---|")
    for pf in files:
        msgs = enums = 0
        stack = [it for it in pf.items if isinstance(it, Node)]
        while stack:
            nd = stack.pop()
            msgs += nd.kind == "message"
            enums += nd.kind == "enum"
            stack.extend(s for s in nd.items if isinstance(s, Node))
        out.append("| [%s](#%s) | %s | %d | %d |" % (code(pf.name), anchor(pf.name),
                                                   code(pf.package),
                                                   msgs, enums))
    out.append("")

    for pf in files:
        out.append("## %s\n" % pf.name)
        meta = ["package %s" % code(pf.package), "syntax %s" % code(pf.syntax)]
        if pf.imports:
            meta.append("imports " + ", ".join(code(i) for i in pf.imports))
        if pf.options:
            meta.append("options " + ", ".join(code(o) for o in pf.options))
        out.append("; ".join(meta) + ".\n")
        if pf.header:
            out.append("```text")
            out.append(pf.header)
            out.append("```\n")
        calls = call_files[pf.name]
        if calls:
            render_calls(out, pf, calls, oneof_members)
            continue
        level = "####" if any(isinstance(it, tuple) for it in pf.items) else "###"
        for it in pf.items:
            if isinstance(it, tuple):
                out.append("### %s\n" % it[1])
                continue
            q = qualify(pf, it.name)
            out.append("%s %s\n" % (level, q))
            if it.kind == "enum":
                render_enum(out, it, q)
            else:
                render_message(out, pf, it, q, known, big_oneofs)
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


def render_calls(out, pf, calls, oneof_members):
    msgs = {it.name: it for it in pf.items if isinstance(it, Node) and it.kind == "message"}
    used = set()
    title = "Calls of %s" % pf.name
    out.append("### %s\n" % title)
    out.append("One request and one reply message per call, package %s: `<Name>Request` holds "
               "the call's in and inout parameters, `<Name>Reply` its out and inout ones (field "
               "number = parameter position). The member column names the oneof member that "
               "carries them in the envelope (`%s`). %d calls.\n"
               % (code(pf.package), "`, `".join(sorted({w for v in oneof_members.values()
                                                       for w, _, _ in v})), len(calls)))
    out.append("| id | call | member | request `<Name>Request` | reply `<Name>Reply` |")
    out.append("|---|---|---|---|---|")
    for req_name, (cid, cname) in sorted(calls.items(), key=lambda kv: kv[1][0]):
        base = req_name[:-len("Request")]
        rep = msgs.get(base + "Reply")
        req = msgs[req_name]
        used.add(req_name)
        members = []
        for typ in (qualify(pf, req_name), qualify(pf, base + "Reply")):
            for where, mname, num in oneof_members.get(typ, []):
                members.append("%s %s" % (code(where), code("%s = %d" % (mname, num))))
        # The same member name and number in Call.args and Reply.out reads once.
        if len(members) == 2 and members[0].split(" ", 1)[1] == members[1].split(" ", 1)[1]:
            w0 = oneof_members[qualify(pf, req_name)][0]
            members = [code("%s = %d" % (w0[1], w0[2]))]
        if rep is not None:
            used.add(rep.name)
        out.append("| %d | %s | %s | %s | %s |" % (
            cid, code(cname), "<br>".join(members) or "—", compact_fields(req),
            compact_fields(rep) if rep is not None else "(no reply message)"))
    out.append("")
    rest = [it for it in pf.items if isinstance(it, Node) and it.name not in used]
    if rest:
        out.append("### Other messages of %s\n" % pf.name)
        for it in rest:
            q = qualify(pf, it.name)
            out.append("#### %s\n" % q)
            if it.kind == "enum":
                render_enum(out, it, q)
            else:
                render_message(out, pf, it, q, {}, {})


def load(schema_dir):
    names = sorted(n for n in os.listdir(schema_dir) if n.endswith(".proto"))
    if not names:
        raise ProtoError("no .proto files in %s" % schema_dir)
    return [parse(os.path.join(schema_dir, n)) for n in names]


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Write docs/protocol-reference.md from proto/schema/*.proto.")
    ap.add_argument("--schema", default=DEFAULT_SCHEMA, metavar="DIR",
                    help="folder of .proto files (default proto/schema)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", nargs="?", const=DEFAULT_OUT, metavar="FILE",
                      help="write the reference (default docs/protocol-reference.md)")
    mode.add_argument("--check", nargs="?", const=DEFAULT_OUT, metavar="FILE",
                      help="exit 1 if FILE differs from what --write would write")
    args = ap.parse_args(argv)
    try:
        text = render(load(args.schema))
    except (ProtoError, OSError) as e:
        print("protodoc: %s" % e, file=sys.stderr)
        return 2
    if args.write:
        old = None
        if os.path.exists(args.write):
            with open(args.write, encoding="utf-8") as f:
                old = f.read()
        if old != text:
            with open(args.write, "w", encoding="utf-8") as f:
                f.write(text)
            print("protodoc: wrote %s" % args.write)
        return 0
    if args.check:
        try:
            with open(args.check, encoding="utf-8") as f:
                old = f.read()
        except OSError as e:
            print("protodoc: %s" % e, file=sys.stderr)
            return 1
        if old == text:
            return 0
        diff = list(difflib.unified_diff(old.splitlines(), text.splitlines(), args.check,
                                         "generated", lineterm="", n=1))
        print("protodoc: %s is stale (%d diff lines); first differences:" % (args.check, len(diff)),
              file=sys.stderr)
        for line in diff[:40]:
            print("  " + line, file=sys.stderr)
        print("Regenerate it: python3 proto/gen/protodoc.py --write "
              "(or cmake --build BUILD --target regen-protodoc) and commit it.", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
