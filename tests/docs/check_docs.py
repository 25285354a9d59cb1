#!/usr/bin/env python3
"""The docs check: every command shown in the documentation is accounted for.

Files: README.md, docs/**/*.md (docs/measurements/ excepted) and ansible/**/*.md: what an
operator, a tenant or a newcomer reads.

Rules:
1. Every fenced code block has an info string (```sh, ```console, ```text, ```ini, ...), and
   there are no indented code blocks (four spaces after a blank line, outside a list): either
   could hide commands from this check.
2. Blocks tagged sh, bash, shell or console hold commands: in sh/bash/shell blocks every line
   that is not blank or a `#` comment (continued with a trailing backslash); in console blocks
   the lines that start with `$ ` (the rest is output). Every command must stand below one of
   these marker lines of the same block (a marker applies until the next one):
     # needs OpenStack            run on hosts of a deployed cloud (nova, placement, systemd
                                  units, installed configs); nothing here can run it. May go
                                  on with ": why" or " (why)"
     # by hand: REASON            not run by any test, and REASON says why (e.g. "needs the
                                  GPU machine": the runs behind measured figures). The check
                                  lists every such command in its output, so none hides
     # tested by: FILE [FILE...]  FILE (under tests/, scripts/ or .ci/) runs this command: each
                                  simple command's program (its basename, or the script's for
                                  python3/bash/sh SCRIPT) and every option and plain-word
                                  argument (a subcommand) must occur in FILE's text. Values
                                  (paths, numbers, addresses, ids, quoted or $-strings, the word
                                  right after an option) may differ
     # run by the docs check      this check runs it (bash, the build's programs and scripts/
                                  first on PATH) and wants exit status 0; the commands of one
                                  block run in order in one fresh temporary folder; only
                                  Sluice's own programs and scripts (and the glue) may run
   A command's own comment may end with "[tested by: FILE]" or "[by hand: REASON]": that marker
   covers that command alone (the README's first block keeps its two commands on two lines).
   `cd`, `echo`, `export`, `cp`, `mkdir`, `rm`, `cat`, `sleep`, `true`, `source` and `.` are
   glue and not checked by `tested by`; a marker never makes a command silently pass.
3. docs/README.md lists every docs/*.md (a listed file that does not exist is a warning).

usage: check_docs.py --repo DIR [--build DIR] [FILE.md ...]
Exit status 0 when every rule holds, 1 otherwise (one line per problem: FILE:LINE: what).
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True

COMMAND_LANGS = {"sh", "bash", "shell", "console"}
GLUE = {"cd", "echo", "export", "cp", "mkdir", "rm", "cat", "sleep", "true", "source", "."}
PREFIXES = {"sudo", "env", "exec", "time"}
TESTED_DIRS = ("tests/", "scripts/", ".ci/")
SKIP_DIRS = {"docs/measurements"}
RE_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
RE_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
RE_MARK_OPENSTACK = re.compile(r"^#\s*needs OpenStack(\s*[:(].*)?\s*$")
RE_MARK_HAND = re.compile(r"^#\s*by hand:\s*(\S.*?)\s*$")
RE_MARK_TESTED = re.compile(r"^#\s*tested by:\s*(\S.*?)\s*$")
RE_MARK_RUN = re.compile(r"^#\s*run by the docs check\s*$")
# A marker for one command only, at the end of its line's comment (the README's two commands):
#   ./scripts/run-tests   # what it does [tested by: .ci/run]
RE_TRAILING = re.compile(r"^(.*?\S)\s+#.*\[(tested by|by hand):\s*([^\]]+?)\s*\]\s*$")
RE_PLAIN_WORD = re.compile(r"^[a-z][a-z0-9_-]*$")
RE_HEX_ID = re.compile(r"^(?=.*[0-9])[0-9a-f-]{8,}$")   # ids and uuids are values, not words
INTERPRETERS = {"python3", "python", "bash", "sh"}
MARKERS = ("'# needs OpenStack', '# tested by: FILE', '# run by the docs check', "
           "'# by hand: REASON'")
OPERATORS = {"&&", "||", "|", ";", "&", "(", ")", "<(", ">(", "$(", "|&", ";;"}
REDIRECTS = {">", ">>", "<", "<<<", ">&", "&>", "2>", "2>>", ">|", "<&"}


class Problem(Exception):
    pass


class Command:
    def __init__(self, path, line, text, mode, arg, head=None):
        self.path, self.line, self.text = path, line, text
        self.head = head if head is not None else text  # the command line, without here-doc
        self.mode, self.arg = mode, arg   # mode: openstack, gpu, tested, run, None


def md_files(repo):
    out = ["README.md"] if os.path.exists(os.path.join(repo, "README.md")) else []
    for top in ("docs", "ansible"):
        out.extend(md_under(repo, top))
    return out


def md_under(repo, top):
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(repo, top)):
        rel = os.path.relpath(dirpath, repo)
        rel = "" if rel == "." else rel.replace(os.sep, "/")
        dirnames[:] = sorted(
            d for d in dirnames
            if not d.startswith(".") and not d.startswith("build") and d != "node_modules"
            and d != "__pycache__" and (rel + "/" + d).lstrip("/") not in SKIP_DIRS)
        for name in sorted(filenames):
            if name.endswith(".md"):
                out.append(os.path.join(rel, name) if rel else name)
    return out


RE_LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")


def indented_blocks(text):
    """Line numbers of indented code blocks: a line indented by 4+ spaces after a blank line,
    outside fenced blocks and lists."""
    out = []
    in_fence, in_list, prev_blank = None, False, True
    for n, line in enumerate(text.split("\n"), 1):
        m = RE_FENCE.match(line)
        if m:
            if in_fence is None:
                in_fence = m.group(2)[0]
            elif m.group(2)[0] == in_fence and not m.group(3).strip():
                in_fence = None
            prev_blank = False
            continue
        if in_fence is not None:
            continue
        blank = not line.strip()
        if not blank:
            if RE_LIST_ITEM.match(line):
                in_list = True
            elif not line.startswith(" "):
                in_list = False
            elif prev_blank and line.startswith("    ") and not in_list:
                out.append(n)
        prev_blank = blank
    return out


def blocks(text):
    """(info string, first content line number, [lines]) of every fenced block; raises on an
    unclosed fence."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = RE_FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        start = i + 1
        body = []
        i += 1
        while i < len(lines):
            m2 = RE_FENCE.match(lines[i])
            if m2 and m2.group(2)[0] == fence[0] and len(m2.group(2)) >= len(fence) \
                    and not m2.group(3).strip():
                break
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        else:
            raise Problem("%d: the fenced block opened here is not closed" % start)
        out.append((info, start + 1, body))
        i += 1
    return out


def block_commands(path, info, first, body):
    """The commands of one block with the marker that covers each; problems as strings."""
    lang = info.split()[0].lower() if info else ""
    console = lang == "console"
    mode, arg = None, None
    cmds, problems = [], []
    i = 0
    while i < len(body):
        raw = body[i].rstrip()
        n = first + i
        i += 1
        s = raw.strip()
        if not s:
            continue
        if console and not s.startswith("$ ") and s != "$":
            if s.startswith("#"):
                mode, arg = marker(s, mode, arg, path, n, problems)
            continue                                   # output
        if s.startswith("#"):
            mode, arg = marker(s, mode, arg, path, n, problems)
            continue
        if console:
            s = s[1:].strip()
        own = None
        t = RE_TRAILING.match(s)
        if t:
            s = t.group(1)
            own = ("tested", t.group(3).split()) if t.group(2) == "tested by" else \
                ("hand", t.group(3))
        text = s
        while text.endswith("\\") and i < len(body):
            text = text[:-1] + " " + body[i].strip()
            i += 1
        head = text
        m = re.search(r"<<-?\s*['\"]?([A-Za-z_]+)['\"]?", text)
        if m:                                          # a here-document: part of the command
            end = m.group(1)
            doc = []
            while i < len(body) and body[i].strip() != end:
                doc.append(body[i])
                i += 1
            i += 1
            text = "\n".join([text] + doc + [end])
        cmds.append(Command(path, n, text, *(own or (mode, arg)), head))
    return cmds, problems


def marker(s, mode, arg, path, n, problems):
    if RE_MARK_OPENSTACK.match(s):
        return "openstack", None
    m = RE_MARK_HAND.match(s)
    if m:
        return "hand", m.group(1)
    if RE_MARK_RUN.match(s):
        return "run", None
    m = RE_MARK_TESTED.match(s)
    if m:
        return "tested", m.group(1).split()
    if re.match(r"^#\s*(needs|tested|run by|by hand)\b", s):
        problems.append("%s:%d: %r looks like a marker but is not one of: %s"
                        % (path, n, s, MARKERS))
    return mode, arg


def simple_commands(text):
    """Split a command line into simple commands (lists of words); redirections dropped."""
    lex = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        toks = list(lex)
    except ValueError as e:
        raise Problem("cannot split %r: %s" % (text, e))
    out, cur, skip = [], [], False
    for t in toks:
        if skip:
            skip = False
            continue
        if t in OPERATORS or set(t) <= set(";&|()"):
            if cur:
                out.append(cur)
            cur = []
            continue
        if t in REDIRECTS or set(t) <= set("<>&"):
            skip = True                                # the redirection's target
            if cur and cur[-1].isdigit():
                cur.pop()                              # the fd of 2>
            continue
        if t == "$" or t.startswith("$("):
            continue
        cur.append(t)
    if cur:
        out.append(cur)
    return out


def program_and_args(words):
    while words and (RE_ASSIGN.match(words[0]) or words[0] in PREFIXES):
        words = words[1:]
    if not words:
        return None, []
    if os.path.basename(words[0]) in INTERPRETERS and len(words) > 1 \
            and not words[1].startswith("-"):
        return words[1], words[2:]                     # the script is the program
    return words[0], words[1:]


def required_words(args):
    """Options (their name, before any '=') and plain lowercase words (subcommands); values are
    not required: paths, numbers, ids, quoted text, and the word right after an option."""
    req = []
    after_option = False
    for a in args:
        if a.startswith("-") and len(a) > 1 and not a[1:].isdigit():
            req.append(a.split("=", 1)[0])
            after_option = "=" not in a
            continue
        if RE_PLAIN_WORD.match(a) and not RE_HEX_ID.match(a) and not after_option:
            req.append(a)
        after_option = False
    return req


def contains_word(text, word):
    pattern = r"(?<![A-Za-z0-9_-])" + re.escape(word) + r"(?![A-Za-z0-9_-])"
    return re.search(pattern, text) is not None


def check_tested(cmd, repo, cache):
    problems = []
    texts = []
    for f in cmd.arg:
        if not f.startswith(TESTED_DIRS):
            problems.append("%s:%d: '# tested by: %s': the file must be a test or script under %s"
                            % (cmd.path, cmd.line, f, ", ".join(TESTED_DIRS)))
            continue
        p = os.path.join(repo, f)
        if f not in cache:
            try:
                with open(p, encoding="utf-8", errors="replace") as fh:
                    cache[f] = fh.read()
            except OSError:
                cache[f] = None
        if cache[f] is None:
            problems.append("%s:%d: '# tested by: %s': no such file" % (cmd.path, cmd.line, f))
            continue
        texts.append(cache[f])
    if problems:
        return problems
    text = "\n".join(texts)
    try:
        simple = simple_commands(cmd.head)
    except Problem as e:
        return ["%s:%d: %s" % (cmd.path, cmd.line, e)]
    for words in simple:
        prog, args = program_and_args(words)
        if prog is None or os.path.basename(prog) in GLUE:
            continue
        missing = [w for w in [os.path.basename(prog)] + required_words(args)
                   if not contains_word(text, w)]
        if missing:
            problems.append("%s:%d: `%s`: %s does not contain %s (is this the command the test "
                            "runs?)" % (cmd.path, cmd.line, " ".join(words), " ".join(cmd.arg),
                                        ", ".join("'%s'" % w for w in missing)))
    return problems


def build_programs(build):
    """basename -> folder of every executable file of the build (CMakeFiles excluded)."""
    progs = {}
    if not build:
        return progs
    for dirpath, dirnames, filenames in os.walk(build):
        dirnames[:] = [d for d in dirnames if d != "CMakeFiles" and not d.startswith(".")]
        for name in filenames:
            p = os.path.join(dirpath, name)
            if name.startswith("sluice") and os.access(p, os.X_OK) and "." not in name:
                progs.setdefault(name, dirpath)
    return progs


def check_run(cmd, repo, build, progs, tmp):
    if not build:
        return ["%s:%d: `%s` is marked '# run by the docs check' but no --build was given"
                % (cmd.path, cmd.line, cmd.head)]
    try:
        simple = simple_commands(cmd.head)
    except Problem as e:
        return ["%s:%d: %s" % (cmd.path, cmd.line, e)]
    scripts = os.path.join(repo, "scripts")
    for words in simple:
        prog, _ = program_and_args(words)
        if prog is None or prog in GLUE:
            continue
        base = os.path.basename(prog)
        if base not in progs and not os.path.exists(os.path.join(scripts, base)) \
                and base.startswith("sluice"):
            return ["%s:%d: `%s`: %s is not built in %s (build everything before the docs "
                    "check)" % (cmd.path, cmd.line, cmd.head, base, build)]
        if base not in progs and not os.path.exists(os.path.join(scripts, base)):
            return ["%s:%d: `%s`: the docs check runs only Sluice's programs (built in %s) and "
                    "scripts/; %s is neither" % (cmd.path, cmd.line, cmd.head, build, prog)]
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(sorted(set(progs.values())) + [scripts, env.get("PATH", "")])
    env["SLUICE_REPO"] = repo
    try:
        r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd.text], cwd=tmp, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return ["%s:%d: `%s` ran longer than 60 s" % (cmd.path, cmd.line, cmd.head)]
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        return ["%s:%d: `%s` exited with %d: %s" % (cmd.path, cmd.line, cmd.head, r.returncode,
                                                    " / ".join(tail))]
    return []


def check_index(repo):
    problems, warnings = [], []
    index = os.path.join(repo, "docs", "README.md")
    if not os.path.exists(index):
        return ["docs/README.md: missing (the index of the documents)"], []
    with open(index, encoding="utf-8") as f:
        text = f.read()
    listed = set(re.findall(r"`([A-Za-z0-9_.-]+\.md)`", text)) | set(
        re.findall(r"\]\(([A-Za-z0-9_.-]+\.md)\)", text))
    have = {n for n in os.listdir(os.path.join(repo, "docs")) if n.endswith(".md")}
    for n in sorted(have - listed - {"README.md"}):
        problems.append("docs/README.md: docs/%s is not listed in the index" % n)
    for n in sorted(listed - have):
        warnings.append("docs/README.md: lists %s, which does not exist (yet)" % n)
    return problems, warnings


def check(repo, build, files):
    problems, warnings, counts, by_hand = [], [], {}, []
    progs = build_programs(build)
    cache = {}
    for rel in files:
        with open(os.path.join(repo, rel), encoding="utf-8") as f:
            text = f.read()
        try:
            bl = blocks(text)
        except Problem as e:
            problems.append("%s:%s" % (rel, e))
            continue
        for n in indented_blocks(text):
            problems.append("%s:%d: indented code block: use a fenced block with an info string "
                            "(sh or console for commands, text for anything else)" % (rel, n))
        for info, first, body in bl:
            if not info:
                problems.append("%s:%d: fenced block without an info string: tag it (sh or "
                                "console for commands, text for output and diagrams)"
                                % (rel, first - 1))
                continue
            if info.split()[0].lower() not in COMMAND_LANGS:
                continue
            cmds, probs = block_commands(rel, info, first, body)
            problems.extend(probs)
            tmp = None                                 # one folder per block, made on demand
            for c in cmds:
                counts[c.mode] = counts.get(c.mode, 0) + 1
                if c.mode is None:
                    problems.append("%s:%d: `%s` has no marker: put one of %s on a line above it "
                                    "in its block" % (rel, c.line, c.head, MARKERS))
                elif c.mode == "hand":
                    by_hand.append("%s:%d: by hand (%s): %s" % (rel, c.line, c.arg, c.head))
                elif c.mode == "tested":
                    problems.extend(check_tested(c, repo, cache))
                elif c.mode == "run":
                    if tmp is None:
                        tmp = tempfile.TemporaryDirectory(prefix="docs-check-")
                    problems.extend(check_run(c, repo, build, progs, tmp.name))
            if tmp is not None:
                tmp.cleanup()
    p, w = check_index(repo)
    return problems + p, warnings + w, by_hand, counts


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check the commands shown in the documentation.")
    ap.add_argument("--repo", required=True, help="the repository root")
    ap.add_argument("--build", help="a build folder (for '# run by the docs check' commands)")
    ap.add_argument("files", nargs="*", help="Markdown files relative to --repo (default: all)")
    args = ap.parse_args(argv)
    repo = os.path.abspath(args.repo)
    if not os.path.isdir(repo):
        print("check_docs: --repo %s is not a folder" % args.repo, file=sys.stderr)
        return 2
    build = os.path.abspath(args.build) if args.build else None
    files = args.files or md_files(repo)
    problems, warnings, by_hand, counts = check(repo, build, files)
    for h in by_hand:
        print("note: " + h)
    for w in warnings:
        print("warning: " + w)
    for p in problems:
        print(p)
    names = {"openstack": "need OpenStack", "hand": "by hand",
             "tested": "tested by a named file", "run": "run by this check", None: "unmarked"}
    print("%d files, commands: %s; %d problems" % (
        len(files),
        ", ".join("%d %s" % (counts[k], names[k]) for k in names if k in counts) or "none",
        len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
