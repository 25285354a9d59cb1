#!/usr/bin/env python3
"""docs.protodoc_selftest: proto/gen/protodoc.py on small schemas: what it renders (nested enums,
one-line messages, continued trailing comments, sections, oneofs, reserved numbers, the table
of calls) and what it refuses (syntax it does not know, duplicate numbers), so that the
protocol reference cannot silently leave something out. usage: test_protodoc.py"""
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "proto", "gen"))
import protodoc  # noqa: E402

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


CONTROL = """// Header line one.
// Header line two.
syntax = "proto3";

package demo.ctl;

// ---------------------------------------------------------------- first section

// A request.
message Req {
  string name = 1;          // the name
  uint64 size = 2;          // its size, which needs
                            // two lines to explain
  enum Mode {
    MODE_UNSPECIFIED = 0;
    FAST = 1;               // quick
  }
  Mode mode = 3;
  repeated Item items = 4;
  oneof kind {
    Item one = 10;
    Ping ping = 11;
  }
  reserved 5 to 9;
}

message Item { string id = 1; }
message Ping { uint64 nonce = 1; }
"""

CALLS = """syntax = "proto3";
package demo.calls;

message FooRequest {  // call 7 cuFoo
  uint32 flags = 1;
  uint64 data = 2;  // byte length; the data travels as bulk
}
message FooReply {
  int32 out = 3;
}
"""

ENVELOPE = """syntax = "proto3";
package demo.env;
import "calls.proto";

message Envelope {
  uint64 seq = 1;
  oneof args {
%s  }
}
"""


def render(files):
    with tempfile.TemporaryDirectory(prefix="protodoc-test-") as d:
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        return protodoc.render(protodoc.load(d))


def refused(text, needle):
    try:
        render({"x.proto": text})
    except protodoc.ProtoError as e:
        return needle in str(e)
    return False


def main():
    members = "".join("    demo.calls.FooRequest m%d = %d;\n" % (i, 100 + i) for i in range(40))
    doc = render({"ctl.proto": CONTROL, "calls.proto": CALLS, "env.proto": ENVELOPE % members})
    check("Header line one.\nHeader line two." in doc, "the file's header comment")
    check("### first section" in doc, "a section comment becomes a heading")
    check("#### demo.ctl.Req" in doc and "A request." in doc, "a message with its comment")
    check("| 2 | `size` | `uint64` |  | its size, which needs two lines to explain |" in doc,
          "a trailing comment continued on the next line")
    check("enum `demo.ctl.Req.Mode`" in doc and "| 1 | `FAST` | quick |" in doc, "a nested enum")
    check("| 3 | `mode` | [`Mode`](#democtlreq) |" in doc, "a nested type resolves and links")
    check("| 4 | `items` | [`Item`](#democtlitem) | repeated |" in doc, "repeated label and link")
    check("| 10 | `one` | [`Item`](#democtlitem) | oneof `kind` |" in doc,
          "a small oneof's members")
    check("Reserved: `5 to 9`." in doc, "reserved numbers")
    check("#### demo.ctl.Ping" in doc and "| 1 | `nonce` | `uint64` |" in doc,
          "a message written on one line")
    check("oneof `args`: 40 members 100..139, one per call" in doc, "a large oneof is summarised")
    check("| 7 | `cuFoo` |" in doc and "`uint64 data = 2` (byte length; the data travels as bulk)"
          in doc and "`int32 out = 3`" in doc, "the table of calls: request and reply fields")
    check("`m0 = 100`" in doc, "the table of calls names the oneof member")

    check(refused('syntax = "proto3";\nservice S { rpc A(B) returns (C); }\n', "cannot read"),
          "an unknown construct is refused")
    check(refused('syntax = "proto3";\nmessage M { int32 a = 1; int32 b = 1; }\n', "used by"),
          "a duplicate field number is refused")
    check(refused('syntax = "proto3";\nmessage M {\n  int32 a = 1;\n', "not closed"),
          "an unclosed message is refused")
    check(refused('message M { int32 a = 1; }\n', "no syntax"), "a file without syntax")
    check(refused('syntax = "proto3";\n/* block */\nmessage M {}\n', "block comments"),
          "block comments are refused")

    with tempfile.TemporaryDirectory(prefix="protodoc-test-") as d:
        schema = os.path.join(d, "schema")
        os.mkdir(schema)
        with open(os.path.join(schema, "ctl.proto"), "w") as f:
            f.write(CONTROL)
        out = os.path.join(d, "ref.md")
        rc_write = protodoc.main(["--schema", schema, "--write", out])
        rc_same = protodoc.main(["--schema", schema, "--check", out])
        with open(out, "a") as f:
            f.write("edited by hand\n")
        rc_stale = protodoc.main(["--schema", schema, "--check", out])
        check(rc_write == 0 and rc_same == 0 and rc_stale == 1,
              "--check passes on what --write wrote and fails once it is edited")

    print("%d check(s) failed" % len(FAILS) if FAILS else "all checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
