#!/usr/bin/env python3
"""style.layout: the shape issue 17 asked of frontend/, backend/ and the driver test double
(tests/double/), checked on every CI run.

- no circle in the include graph of a component that spans families: a module is a .c file and
  its header (folder/name), its family the folder and the name's stem before the first '_'
  (api/graph_host.c is family api/graph); a circle inside one family is allowed;
- one header per file: what a header declares is defined in the .c file of the same name (a
  function defined elsewhere in the component means a header shared by several files);
- no hand-written .c file over MAX_LINES lines;
- no mutable global shared between files: no `extern` declaration of non-const data in a header;
- the call id is switched on only in generated code: no `case SL_CALL_` and no
  `call_id == SL_CALL_` / `!= SL_CALL_` in hand-written code (the table's facts say what a call is);
- the frontend builds no envelope by hand: no `args_case =` / `.call_id =` (SL_FE_CALL/SET).
Usage: check_layout.py [repository root]"""
import os
import re
import sys

MAX_LINES = 700
COMPONENTS = ("frontend", "backend", "tests/double")
SKIP = ("frontend/enroll/", "frontend/gen/")


def sources(root, comp):
    out = []
    for dirpath, _, files in os.walk(os.path.join(root, comp)):
        for f in files:
            if f.endswith((".c", ".h")):
                rel = os.path.relpath(os.path.join(dirpath, f), root)
                if not rel.startswith(SKIP):
                    out.append(rel)
    return sorted(out)


def module_of(rel, comp):
    inner = os.path.relpath(rel, comp)
    return os.path.splitext(inner)[0]


def family_of(module):
    folder, name = os.path.split(module)
    return os.path.join(folder, name.split("_")[0])


def strip_comments(text):
    """Comments out, line numbers kept."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def include_graph(root, comp, files):
    by_name = {}
    for rel in files:
        if rel.endswith(".h"):
            by_name.setdefault(os.path.basename(rel), []).append(rel)
    graph = {}
    for rel in files:
        src = module_of(rel, comp)
        graph.setdefault(src, set())
        here = os.path.dirname(rel)
        for inc in re.findall(r'^#include "([^"]+)"', open(os.path.join(root, rel)).read(), re.M):
            cand = os.path.normpath(os.path.join(here, inc))
            if cand not in files:
                cand = os.path.normpath(os.path.join(comp, inc))
            if cand not in files:
                hits = by_name.get(os.path.basename(inc), [])
                cand = hits[0] if len(hits) == 1 else None
            if cand:
                dst = module_of(cand, comp)
                if dst != src:
                    graph[src].add(dst)
    return graph


def sccs(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


FUNC_DEF = re.compile(r"^[A-Za-z_][\w \*]*?\b(\w+)\s*\([^;{]*\)\s*(?:__attribute__\(\(.*?\)\)\s*)?\{",
                      re.M | re.S)
FUNC_DECL = re.compile(r"^[A-Za-z_][\w \*]*?\b(\w+)\s*\([^;{]*\)\s*(?:__attribute__\(\(.*?\)\)\s*)?;",
                       re.M | re.S)


def one_header_per_file(root, comp, files, problems):
    defined = {}
    for rel in files:
        if rel.endswith(".c"):
            code = strip_comments(open(os.path.join(root, rel)).read())
            for m in FUNC_DEF.finditer(code):
                if not m.group(0).lstrip().startswith("static"):
                    defined.setdefault(m.group(1), rel)
    for rel in files:
        if not rel.endswith(".h"):
            continue
        own = rel[:-2] + ".c"
        code = strip_comments(open(os.path.join(root, rel)).read())
        for m in FUNC_DECL.finditer(code):
            where = defined.get(m.group(1))
            if where and where != own:
                problems.append(f"{rel}: declares {m.group(1)}, defined in {where} (one header "
                                "per file)")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))))
    problems = []
    for comp in COMPONENTS:
        files = sources(root, comp)
        one_header_per_file(root, comp, files, problems)
        for c in sccs(include_graph(root, comp, files)):
            if len(c) > 1 and len({family_of(m) for m in c}) > 1:
                problems.append(f"{comp}: include circle across families: {' -> '.join(c)}")
        for rel in files:
            text = open(os.path.join(root, rel)).read()
            code = strip_comments(text)
            lines = text.count("\n")
            if rel.endswith(".c") and lines > MAX_LINES:
                problems.append(f"{rel}: {lines} lines (at most {MAX_LINES})")
            if rel.endswith(".h"):
                for m in re.finditer(r"^\s*extern\s+(?!const\b)(?!\"C\")([^;(]*);", code, re.M):
                    problems.append(f"{rel}: a mutable global shared between files: "
                                    f"extern {m.group(1).strip()}")
            for pat, what in ((r"case\s+SL_CALL_\w", "a switch on call ids"),
                              (r"call_id\s*[!=]=\s*SL_CALL_\w", "a comparison with a call id")):
                for m in re.finditer(pat, code):
                    line = code[:m.start()].count("\n") + 1
                    problems.append(f"{rel}:{line}: {what} (use the table's facts)")
            if comp == "frontend":
                for pat in (r"args_case\s*=[^=]", r"call_id\s*=\s*SL_CALL_\w"):
                    for m in re.finditer(pat, code):
                        line = code[:m.start()].count("\n") + 1
                        problems.append(f"{rel}:{line}: an envelope built by hand "
                                        "(SL_FE_CALL/SL_FE_SET)")
    for p in problems:
        print(p)
    print(f"style.layout: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
