#!/usr/bin/env python3
"""The session worker's direct endpoint refuses everyone but its session's guest
(docs/security.md, "The session worker's endpoint").

A real sluice-backend on the driver test double, its control socket held by sluice-fake-agent
(grants for three instances of the project), and sluice-direct-probe (direct_probe.c) as the
guests, on loopback. The probe opens a session through the backend's port, reads the worker's
port and ticket from SessionAccept, then tries in turn: another instance's certificate, another
certificate of the session's own instance, garbage bytes, a wrong ticket (each refused, with the
reason to the client where the channel can say it), the right one (accepted; a call answered),
the same ticket again (refused), the workers' ports within --direct-ports, a call on the backend's channel while the direct one is open
(the session ends with the reason on both), the port after the session ended (nothing there),
a revocation of a third instance whose guest sits on its direct channel (closed as revoked, with
the agent's reason), a fresh session (works), and two sessions whose guest left its attached
direct channel unused and took the backend's channel, as one whose wait for the ticket's answer
timed out under load (their calls answered there, at once and 300 ms after the close; run 23's
"session worker died: exit status 0"). The backend must log each refusal and keep running. Driver double only: plumbing, never a GPU result. Exit status: 0 passed, 1 failed,
77 skipped.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import accounting  # noqa: E402  (issue_cert, GUEST_B)
import run  # noqa: E402  (the e2e harness: PKI, process helpers)
from stall import events, wait_for  # noqa: E402

GUEST_C = "5c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"  # the revoked one, same project

# check: (code expected, text the reason must hold; None: any)
EXPECT = {
    "admitted": ("ok", None),
    "wrong_identity": ("refused", "only the certificate its session was admitted with"),
    "other_cert": ("refused", "only the certificate its session was admitted with"),
    "garbage": ("ok", None),
    "wrong_ticket": ("refused", "wrong or already used ticket"),
    "attach": ("ok", None),
    "call": ("ok", None),
    "reused_ticket": ("refused", "direct channel is closed"),
    "parent_call": ("protocol", "calls on the backend's channel while"),
    "revoke_ready": ("ok", None),
    "revoke": ("revoked", "revoked by the test"),
    "fresh": ("ok", None),
    "gave_up_at_once": ("ok", None),
    "gave_up_later": ("ok", None),
}
LOGGED = ["direct endpoint refused instance 8a1e4c2b",
          "direct endpoint refused peer",
          "wrong or already used ticket"]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(run.REPO, "build"), help="CMake build folder")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    ctx = {"backend": os.path.join(build, "backend", "sluice-backend"),
           "agent": os.path.join(build, "tests", "e2e", "sluice-fake-agent"),
           "probe": os.path.join(build, "tests", "e2e", "sluice-direct-probe"),
           "driver": os.path.join(build, "tests", "double", "libsluice-driver-double.so")}
    for what, path in ctx.items():
        if not os.path.exists(path):
            print(f"SKIP: no {what} ({path})")
            return run.SKIP
    work = tempfile.mkdtemp(prefix="sluice-direct-")
    pki = os.path.join(work, "pki")
    procs = []
    problems = []
    blog = os.path.join(work, "backend.log")
    try:
        subprocess.run([os.path.join(run.REPO, "scripts", "make-demo-pki"), pki], check=True,
                       stdout=subprocess.DEVNULL)
        accounting.issue_cert(pki, "guest-c", run.PROJECT, GUEST_C)
        accounting.issue_cert(pki, "guest-a2", run.PROJECT, run.GUEST_UUID)  # a twin
        agent_out = os.path.join(work, "agent.jsonl")
        sock = os.path.join(work, "control.sock")
        argv = [ctx["agent"], "--control", "ipc://" + sock, "--out", agent_out,
                "--project", run.PROJECT, "--ping-ms", "200", "--commands"]
        for u in (run.GUEST_UUID, accounting.GUEST_B, GUEST_C):
            argv += ["--grant", f"{u},direct-test,1.0,0,0"]
        agent = subprocess.Popen(argv, stdin=subprocess.PIPE, start_new_session=True,
                                 preexec_fn=run.die_with_parent)
        procs.append(agent)
        wait_for(lambda: any(e["type"] == "listening" for e in events(agent_out)), 10,
                 "listening fake agent")
        endpoint = f"tcp://127.0.0.1:{run.free_port()}"
        lo = run.free_port()
        lo = min(lo, 65535 - 63)  # the workers' ports: --direct-ports lo..lo+63
        with open(blog, "w") as logf:
            backend = subprocess.Popen(
                [ctx["backend"], "--project", run.PROJECT, "--listen", endpoint,
                 "--cert", f"{pki}/server.pem", "--key", f"{pki}/server.key",
                 "--ca", f"{pki}/ca.pem", "--driver", ctx["driver"],
                 "--control", "ipc://" + sock, "--direct-ports", f"{lo}-{lo + 63}"],
                stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=run.die_with_parent)
        procs.append(backend)
        wait_for(lambda: sum(e["type"] == "ack" and e["ok"] for e in events(agent_out)) >= 3,
                 30, "grant acks")
        probe = subprocess.Popen(
            [ctx["probe"], "--endpoint", endpoint, "--ca", f"{pki}/ca.pem",
             "--cert", f"{pki}/guest-a.pem", "--key", f"{pki}/guest-a.key",
             "--other-cert", f"{pki}/guest-b.pem", "--other-key", f"{pki}/guest-b.key",
             "--twin-cert", f"{pki}/guest-a2.pem", "--twin-key", f"{pki}/guest-a2.key",
             "--victim-cert", f"{pki}/guest-c.pem", "--victim-key", f"{pki}/guest-c.key"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            preexec_fn=run.die_with_parent)
        got = {}
        deadline = time.time() + 90
        for line in probe.stdout:
            r = json.loads(line.decode())
            print(json.dumps(r), flush=True)
            got[r["check"]] = r
            if r["check"] == "revoke_ready" and r["code"] == "ok":
                agent.stdin.write(f"revoke {GUEST_C}\n".encode())
                agent.stdin.flush()
            if time.time() > deadline:
                break
        probe.wait(timeout=30)
        for check, (code, text) in EXPECT.items():
            r = got.get(check)
            if not r:
                problems.append(f"{check}: no result ({probe.stderr.read().decode()[-500:]})")
            elif r["code"] != code:
                problems.append(f"{check}: {r['code']}: {r['why']} (expected {code})")
            elif text and text not in r["why"]:
                problems.append(f"{check}: the reason does not say '{text}': {r['why']}")
        a = got.get("after_end")
        if not a or a["code"] == "ok":
            problems.append(f"after_end: the ended session's port still answered: {a}")
        log = run.tail(blog, 100000)
        for text in LOGGED:
            if text not in log:
                problems.append(f"the backend's log does not say '{text}'")
        ports = [int(m) for m in re.findall(r"channel: listening on tcp://127\.0\.0\.1:(\d+) "
                                            r"\(mutual TLS\) \[project=\S+ instance", log)]
        if len(ports) < 3 or any(p < lo or p > lo + 63 for p in ports):
            problems.append(f"the workers' ports {ports} are not all in --direct-ports "
                            f"{lo}-{lo + 63}")
        if backend.poll() is not None:
            problems.append(f"the backend exited ({backend.returncode})")
        if run.SANITIZER_REPORT.search(log):
            problems.append("a sanitizer report in the backend's log")
    except (TimeoutError, subprocess.SubprocessError, OSError, ValueError) as ex:
        problems.append(f"{type(ex).__name__}: {ex}")
    finally:
        for p in reversed(procs):
            run.kill_group(p, 3)
        for x in problems:
            print(f"FAIL: {x}")
        if problems:
            print("---- backend log\n" + run.tail(blog, 60))
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(("FAIL" if problems else "PASS") + " e2e.direct", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
