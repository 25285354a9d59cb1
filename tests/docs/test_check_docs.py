#!/usr/bin/env python3
"""docs.checker_selftest: check_docs.py on a throwaway repository, one case per rule, so that
the docs check cannot quietly pass everything. usage: test_check_docs.py"""
import os
import stat
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_docs  # noqa: E402

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def write(root, rel, text, mode=0o644):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)
    os.chmod(p, mode)


FENCE = "```"


def case(root, build, body, index_extra=""):
    """Runs the check over docs/case.md holding body; returns (problems, warnings, notes)."""
    write(root, "docs/README.md", "| `case.md` | the case |\n" + index_extra)
    write(root, "docs/case.md", body)
    problems, warnings, notes, _ = check_docs.check(root, build, ["docs/case.md"])
    return problems, warnings, notes


def main():
    with tempfile.TemporaryDirectory(prefix="docs-check-test-") as root:
        build = os.path.join(root, "build")
        # a "Sluice program" of the build: --help succeeds, anything else fails
        write(root, "build/tool/sluice-fake", "#!/bin/sh\n[ \"$1\" = --help ]\n", 0o755)
        write(root, "tests/fake/test_fake.py",
              "subprocess.run([prog, '--db', db, 'hosts', '--json'])  # sluice-fake\n")
        write(root, "elsewhere/notes.txt", "sluice-fake --db hosts --json\n")

        p, _, _ = case(root, build, "text\n\n" + FENCE + "\nls\n" + FENCE + "\n")
        check(len(p) == 1 and "without an info string" in p[0], "a fence without a language")

        p, _, _ = case(root, build, "text\n\n    sluice-fake --help\n\n- item\n\n    continued\n")
        check(len(p) == 1 and "docs/case.md:3: indented code block" in p[0],
              "an indented block is refused, list content is not")

        p, _, _ = case(root, build, FENCE + "sh\nsluice-fake --help\n" + FENCE + "\n")
        check(len(p) == 1 and "has no marker" in p[0], "an unmarked command")

        p, _, _ = case(root, build, FENCE + "sh\n# needs OpenStack\nopenstack flavor list\n"
                       + FENCE + "\n")
        check(p == [], "needs OpenStack")

        p, _, _ = case(root, build,
                       FENCE + "sh\n# needs OpenStack (nova)\nnova list\n" + FENCE + "\n")
        check(p == [], "needs OpenStack with a reason")

        body = FENCE + "sh\n# tested by: tests/fake/test_fake.py\nsluice-fake --db /x.db hosts\n" \
            + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(p == [], "tested by: program, options and words found in the test")

        body = FENCE + "sh\n# tested by: tests/fake/test_fake.py\nsluice-fake --db x stale\n" \
            + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(len(p) == 1 and "'stale'" in p[0], "tested by: a word the test never uses")

        body = FENCE + "sh\n# tested by: tests/fake/test_fake.py\nsluice-other --db x\n" \
            + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(len(p) == 1 and "'sluice-other'" in p[0], "tested by: another program")

        body = FENCE + "sh\nsluice-fake --db /x.db hosts  # list [tested by: " \
            "tests/fake/test_fake.py]\n" + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(p == [], "a trailing marker covers its own command")

        body = FENCE + "sh\nsluice-fake --db x hosts  # [by hand: the reason]\nsluice-fake " \
            "--help\n" + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(len(p) == 1 and "has no marker" in p[0], "a trailing marker covers no other command")

        body = FENCE + "sh\n# tested by: elsewhere/notes.txt\nsluice-fake --db x hosts\n" \
            + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(len(p) == 1 and "must be a test or script" in p[0], "tested by: not a test")

        body = FENCE + "sh\n# tested by: tests/nope.py\nsluice-fake --db x hosts\n" + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(len(p) == 1 and "no such file" in p[0], "tested by: a missing file")

        body = FENCE + "sh\n# tested by: tests/fake/test_fake.py\ncd /tmp && echo hi && " \
            "sluice-fake --json hosts 2>&1 | cat\n" + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(p == [], "tested by: glue commands, pipes and redirections")

        write(root, "tests/fake/CMakeLists.txt", "add_test(NAME x COMMAND python3 run.py --build "
              "${CMAKE_BINARY_DIR} --program vector_add)\n")
        body = FENCE + "sh\n# tested by: tests/fake/CMakeLists.txt\npython3 tests/fake/run.py " \
            "--build build --program vector_add 0123abcd-0000-4000-8000-00000000beef\n" \
            + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(p == [], "tested by: python3 SCRIPT is the script; option values and ids are values")

        body = FENCE + "sh\n# tested by: tests/fake/CMakeLists.txt\npython3 tests/fake/run.py " \
            "--build build --native\n" + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(len(p) == 1 and "'--native'" in p[0], "tested by: an option the test never passes")

        p, _, _ = case(root, build, FENCE + "sh\n# run by the docs check\nsluice-fake --help\n"
                       + FENCE + "\n")
        check(p == [], "run by the docs check: exit 0")

        p, _, _ = case(root, build, FENCE + "sh\n# run by the docs check\nsluice-fake --bogus\n"
                       + FENCE + "\n")
        check(len(p) == 1 and "exited with 1" in p[0], "run by the docs check: a failing command")

        p, _, _ = case(root, build, FENCE + "sh\n# run by the docs check\nls /\n" + FENCE + "\n")
        check(len(p) == 1 and "runs only Sluice's programs" in p[0],
              "run by the docs check: only Sluice's programs")

        p, _, _ = case(root, None, FENCE + "sh\n# run by the docs check\nsluice-fake --help\n"
                       + FENCE + "\n")
        check(len(p) == 1 and "no --build" in p[0], "run by the docs check needs a build")

        p, _, notes = case(root, build, FENCE + "sh\n# by hand: needs the GPU machine\n"
                           "nvidia-smi\n" + FENCE + "\n")
        check(p == [] and len(notes) == 1 and "nvidia-smi" in notes[0],
              "by hand: accepted and listed")

        p, _, _ = case(root, build, FENCE + "sh\n# by hand:\nnvidia-smi\n" + FENCE + "\n")
        check(len(p) == 2 and "looks like a marker" in p[0], "by hand needs a reason")

        p, _, _ = case(root, build, FENCE + "sh\n# tested by:\nnvidia-smi\n" + FENCE + "\n")
        check(any("looks like a marker" in x for x in p), "tested by needs a file")

        body = FENCE + "console\n# run by the docs check\n$ sluice-fake --help\nsome output\n" \
            "$ sluice-fake \\\n    --help\n" + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(p == [], "console: prompts and continuations run, output ignored")

        body = FENCE + "console\n$ sluice-fake --help\n" + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(len(p) == 1 and "has no marker" in p[0], "console: an unmarked prompt")

        body = FENCE + "sh\n# needs OpenStack\nopenstack x\n# run by the docs check\n" \
            "sluice-fake --help\nsluice-fake --bogus\n" + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(len(p) == 1 and ":6:" in p[0], "a marker covers the commands below it only")

        body = FENCE + "sh\n# run by the docs check\ncat > f <<'EOF'\n--help\nEOF\n" \
            "sluice-fake \"$(cat f)\"\n" + FENCE + "\n"
        p, _, _ = case(root, build, body)
        check(p == [], "a here-document is part of its command (and runs)")

        p, _, _ = case(root, build, FENCE + "sh\n# needs OpenStack\nnova list\n")
        check(len(p) == 1 and "not closed" in p[0], "an unclosed fence")

        p, _, _ = case(root, build, FENCE + "text\nanything at all: $ rm -rf /\n" + FENCE + "\n")
        check(p == [], "text blocks are not commands")

        write(root, "docs/extra.md", "# extra\n")
        p, w, _ = case(root, build, "nothing\n", "| `missing.md` | later |\n")
        check(any("docs/extra.md is not listed" in x for x in p), "index: an unlisted document")
        check(any("missing.md" in x for x in w), "index: a listed document that is missing warns")

    print("%d check(s) failed" % len(FAILS) if FAILS else "all checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
