#!/usr/bin/env python3
"""sluicegen: generates the Sluice wire from the API table (standard library only).

Inputs:  proto/api/cuda_driver.api (the table, source of truth for every per-call fact).
Outputs (into --out-dir, by the build):
  sluice_cuda.proto        one <Name>Request / <Name>Reply per call  (package sluice.cuda)
  sluice_session.proto     the envelope and session control          (package sluice.wire)
  wire_tables.c            the call table: names, flags and facts; every message descriptor
  call_facts.c             accessors of the facts' parameters (stream, bytes, quota, ...)
  frontend_stubs.c         cu* functions with the exact cuda.h signatures (generated frontends)
  frontend_refused.c       cu* definitions of the refused calls (sl_fe_refused)
  frontend_exports.c       sl_fe_export_table(): the sorted {name, address} of every export
  backend_handlers.c       the generated backend handlers (sl_be_gen_<name>)
  backend_table.c          the backend's static dispatch table (compiled into the backend)
  driver_api.c / .h        struct sl_driver_api (one function pointer per call) and its loader
  sluice/fe_calls.h        typed envelope helpers for hand-written frontend code
  sluice/backend_handlers.h  prototypes of the generated and hand-written handlers

Maintenance modes:
  --write-schema           also copy the two .proto files to proto/schema/ (commit them)
  --check-drift DIR        fail if the generated .proto files differ from those in DIR
  --check-stability DIR    fail if a field/oneof number in DIR's .proto files would change
"""
import argparse
import difflib
import os
import sys

sys.dont_write_bytecode = True  # keep proto/gen/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apitable  # noqa: E402
import gen_backend  # noqa: E402
import gen_facts  # noqa: E402
import gen_frontend  # noqa: E402
import gen_proto  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
check_stability = gen_proto.check_stability


def generate(calls):
    """{file name: text} of everything the build needs."""
    return {
        "sluice_cuda.proto": gen_proto.gen_cuda_proto(calls),
        "sluice_session.proto": gen_proto.gen_session_proto(calls),
        "wire_tables.c": gen_facts.wire_tables_c(calls),
        "call_facts.c": gen_facts.call_facts_c(calls),
        "frontend_stubs.c": gen_frontend.frontend_stubs_c(calls),
        "frontend_refused.c": gen_frontend.frontend_refused_c(calls),
        "frontend_exports.c": gen_frontend.frontend_exports_c(calls),
        "backend_handlers.c": gen_backend.backend_handlers_c(calls),
        "backend_table.c": gen_backend.backend_table_c(calls),
        "driver_api.c": gen_backend.driver_api_c(calls),
        "sluice/driver_api.h": gen_backend.driver_api_h(calls),
        "sluice/backend_handlers.h": gen_backend.backend_handlers_h(calls),
        "sluice/fe_calls.h": gen_frontend.fe_calls_h(calls),
        "sluice/wire_ids.h": gen_facts.wire_ids_h(calls),
        "sluice/handle_kinds.h": gen_facts.handle_kinds_h(),
    }


def write_if_changed(path, text):
    """Writes only when the content changes, so that the build does not recompile needlessly."""
    if os.path.exists(path) and open(path).read() == text:
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


PROTOS = ("sluice_cuda.proto", "sluice_session.proto")


def main():
    ap = argparse.ArgumentParser(description="Generate the Sluice wire from the API table.")
    ap.add_argument("--table", default=os.path.join(ROOT, "proto/api/cuda_driver.api"))
    ap.add_argument("--out-dir", help="where to write the generated files")
    ap.add_argument("--write-schema", action="store_true",
                    help="write the .proto files to proto/schema/ (to be committed)")
    ap.add_argument("--check-drift", metavar="DIR",
                    help="fail if DIR's .proto files differ from the generated ones")
    ap.add_argument("--check-stability", metavar="DIR",
                    help="fail if a number in DIR's .proto files would change")
    ap.add_argument("--stamp", help="touch this file when done (for the build)")
    args = ap.parse_args()
    try:
        calls = apitable.parse(args.table)
    except apitable.TableError as e:
        sys.exit(f"sluicegen: {e}")
    files = generate(calls)
    protos = {k: files[k] for k in PROTOS}
    schema_dir = os.path.join(ROOT, "proto/schema")
    if args.check_stability:
        problems = check_stability(args.check_stability, protos)
        if problems:
            sys.exit("sluicegen: refusing to change existing wire numbers (only additions are "
                     "allowed):\n  " + "\n  ".join(problems))
    if args.check_drift:
        drift = False
        for name, text in protos.items():
            path = os.path.join(args.check_drift, name)
            old = open(path).read() if os.path.exists(path) else ""
            if old != text:
                drift = True
                sys.stderr.writelines(difflib.unified_diff(
                    old.splitlines(True), text.splitlines(True), path, "generated", n=1))
        if drift:
            sys.exit("sluicegen: the committed .proto files are out of date; regenerate with\n"
                     "  python3 proto/gen/sluicegen.py --write-schema\n"
                     "or `cmake --build <build> --target regen-proto`, then commit proto/schema/.")
    if args.write_schema:
        problems = check_stability(schema_dir, protos)
        if problems:
            sys.exit("sluicegen: refusing to change existing wire numbers:\n  "
                     + "\n  ".join(problems))
        for name, text in protos.items():
            write_if_changed(os.path.join(schema_dir, name), text)
    if args.out_dir:
        for name, text in files.items():
            write_if_changed(os.path.join(args.out_dir, name), text)
    if args.stamp:
        with open(args.stamp, "w") as f:
            f.write("")


if __name__ == "__main__":
    main()


if __name__ == "__main__":
    main()
