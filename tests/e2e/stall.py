#!/usr/bin/env python3
"""One guest can never stall another (docs/security.md, "One session never stalls another").

A real sluice-backend on the driver test double, its control socket held by sluice-fake-agent
(pinging it every 200 ms, granting again every 500 ms), and sluice-stall-probe (stall_probe.c) as
the guests, on loopback. For each attack the probe runs a neighbour session of the same project
that times its round trips (cuCtxSynchronize) before, during and after the attack, and a session
of a third instance that the test revokes in the middle of the attack:

  announce  a CallFrame announcing 2^40 bytes of bulk, nothing after it: refused at once
  trickle   64 MiB of bulk announced, one byte every 200 ms: cut off under the floor rate
  noread    16 x 32 MiB of cuMemcpyDtoH_v2 whose replies are never read: cut off over the
            bound of replies waiting for it
  flood     1,100 connections from 127.0.0.2 with half a ClientHello and no certificate: a new
            credentialed session, from 127.0.0.1 and from 127.0.0.2, still opens and works

Each must hold: no neighbour round trip above 100 ms (plus the longest the machine itself
paused the probe meanwhile: a thread of the probe sleeping 1 ms at a time notes how late it
woke, which is the scheduler or a container's CPU quota, not the backend) and none failed; the attacker cut off
with its reason (to it where the channel can still say it, and in the backend's log); the
revoked session ended within 1 s of the Revoke; pongs, grant acks and the neighbour's usage
records kept coming on the control socket (every pong within 1 s); the backend still runs.

An attack whose only failures are time limits runs once more, and those limits are held on
the second run: a stall the backend causes comes back every time, a pause of a 2-core machine
shared with the attack's own work (noread copies 512 MiB in its worker) seldom twice in a row.
Round trips measure the machine as much as the backend: a baseline of 3 s without an attack
comes first, and when its own worst round trip is over 50 ms (a machine busy with other work)
the time limits (100 ms, 1 s) are reported but not held against the backend; everything else
still is. The same in a sanitizer build (-DSLUICE_SANITIZE=ON), whose allocator and checks
distort timings (on the development VM a neighbour's round trip around the noread cut took up
to 1.3 s there, with little CPU used by the backend's loop): the normal build is the one whose
times count. Driver double only: plumbing, never a GPU result. Exit status: 0 passed, 1 failed,
77 skipped.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import accounting  # noqa: E402  (issue_cert, read_events)
import run  # noqa: E402  (the e2e harness: PKI, process helpers)

NEIGHBOUR_MAX_MS = 100
BASELINE_MAX_MS = 50  # a worst round trip over this without an attack: the machine is too busy
GUEST_C = "5c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"  # the revoked one, same project
ATTACKS = {
    "announce": ("too-large", "over the 134217728-byte limit"),
    "trickle": ("timeout", "bulk too slow"),
    "noread": (None, "does not read what is sent to it"),
    "flood": ("ok", "1100 connections opened"),
}


def events(path):
    return accounting.read_events(path)


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.1)
    raise TimeoutError(f"no {what} within {timeout:.0f} s")


def timing(problem):
    """Whether a problem is a time limit (not held against the backend on a busy machine)."""
    return any(t in problem for t in ("round trip took", "a pong took", "took up to",
                                      "ms after the Revoke", "took "))


def baseline(ctx):
    """The neighbour's worst round trip with no attack: what this machine gives as it is."""
    pki = ctx["pki"]
    out = subprocess.run(
        [ctx["probe"], "--endpoint", ctx["endpoint"], "--ca", f"{pki}/ca.pem",
         "--cert", f"{pki}/guest-a.pem", "--key", f"{pki}/guest-a.key",
         "--attacker-cert", f"{pki}/guest-b.pem", "--attacker-key", f"{pki}/guest-b.key",
         "--attack", "none", "--window-ms", "3000"],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=60).stdout
    nb = json.loads(out.decode())["neighbour"]
    return nb["worst_ms"], nb["median_ms"], nb["rounds"]


def attack(ctx, name, agent, agent_out, backend, blog):
    """Runs one attack; returns the problems."""
    pki = ctx["pki"]
    victim = name != "flood"
    time.sleep(1.2)  # a previous attack's revoked instance: granted again (every 500 ms)
    argv = [ctx["probe"], "--endpoint", ctx["endpoint"], "--ca", f"{pki}/ca.pem",
            "--cert", f"{pki}/guest-a.pem", "--key", f"{pki}/guest-a.key",
            "--attacker-cert", f"{pki}/guest-b.pem", "--attacker-key", f"{pki}/guest-b.key",
            "--attack", name, "--window-ms", "30000" if name == "noread" else "4000"]
    if victim:
        argv += ["--victim-cert", f"{pki}/guest-c.pem", "--victim-key", f"{pki}/guest-c.key"]
    until = os.path.join(os.path.dirname(blog), "cut")
    if name == "noread":  # the probe stops waiting once the backend has cut it off
        argv += ["--until-file", until]
    before = len(events(agent_out))
    probe = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, preexec_fn=run.die_with_parent)
    if name == "noread":
        text = ATTACKS[name][1]

        def watch():
            end = time.time() + 40
            while time.time() < end and probe.poll() is None:
                if text in run.tail(blog, 400):
                    open(until, "w").close()
                    return
                time.sleep(0.05)
        threading.Thread(target=watch, daemon=True).start()
    if victim:  # revoke the third instance in the middle of the attack
        time.sleep(2.5)
        agent.stdin.write(f"revoke {GUEST_C}\n".encode())
        agent.stdin.flush()
    try:
        out, err = probe.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        probe.kill()
        out, err = probe.communicate()
    problems = []
    try:
        r = json.loads(out.decode())
    except ValueError:
        return [f"{name}: the probe said no result (exit {probe.returncode}): "
                f"{err.decode()[-2000:]}"]
    print(json.dumps(r, indent=1), flush=True)
    nb = r["neighbour"]
    if nb["failed"]:
        problems.append(f"{name}: the neighbour session failed: {nb['why']}")
    if nb["rounds"] < 20:
        problems.append(f"{name}: the neighbour made only {nb['rounds']} round trips")
    late = r.get("machine", {}).get("worst_late_ms", 0.0)
    if late > 1.0:
        print(f"{name}: meanwhile the machine woke a sleeping thread of the probe up to "
              f"{late:.1f} ms late", flush=True)
    if "worst_at_ms" in nb:
        print(f"{name}: the neighbour's slowest round trip ({nb['worst_ms']:.1f} ms) began "
              f"{nb['worst_at_ms'] - r['attack_start_ms']:+.0f} ms from the attack's start "
              f"(the attack lasted {r['attack_end_ms'] - r['attack_start_ms']:.0f} ms)",
              flush=True)
    if nb["worst_ms"] > NEIGHBOUR_MAX_MS + late:
        problems.append(f"{name}: a neighbour round trip took {nb['worst_ms']:.1f} ms "
                        f"(at most {NEIGHBOUR_MAX_MS} plus the machine's own pause of "
                        f"{late:.1f} ms)")
    code, text = ATTACKS[name]
    cut = r["cut"]
    if code and cut["code"] != code:
        problems.append(f"{name}: the attacker ended with {cut['code']}: {cut['why']} "
                        f"(expected {code})")
    if name != "noread" and text not in cut["why"]:
        problems.append(f"{name}: the attacker was not told why: {cut['why']}")
    if name != "flood" and text not in run.tail(blog, 400):
        problems.append(f"{name}: the backend's log does not say '{text}'")
    if name == "noread" and cut["code"] == "ok":
        problems.append("noread: the attacker was never cut off")
    for f in r.get("fresh", []):
        if f["code"] != "ok":
            problems.append(f"{name}: a new session from {f['source']} failed during the flood: "
                            f"{f['code']}: {f['why']}")
        elif f["ms"] > 2000:
            problems.append(f"{name}: a new session from {f['source']} took {f['ms']:.0f} ms")
    if name == "flood" and len(r.get("fresh", [])) != 2:
        problems.append("flood: the new sessions did not run")
    evs = events(agent_out)[before:]
    if victim:
        sent = [e for e in evs if e["type"] == "revoke_sent"]
        v = r.get("victim", {})
        if not sent:
            problems.append(f"{name}: the Revoke was not sent")
        elif v.get("code") != "revoked":
            problems.append(f"{name}: the revoked session ended with {v.get('code')}: "
                            f"{v.get('why')}")
        elif v["ended_ms"] - sent[0]["mono_ms"] > 1000:
            problems.append(f"{name}: the revoked session ended "
                            f"{v['ended_ms'] - sent[0]['mono_ms']:.0f} ms after the Revoke")
    pongs = [e for e in evs if e["type"] == "pong"]
    acks = [e for e in evs if e["type"] == "ack" and e.get("rtt_ms", -1) >= 0]
    usage = [e for e in evs if e["type"] == "usage"]
    if len(pongs) < 10:
        problems.append(f"{name}: {len(pongs)} pongs during the attack")
    elif max(p["rtt_ms"] for p in pongs) > 1000:
        problems.append(f"{name}: a pong took {max(p['rtt_ms'] for p in pongs):.0f} ms")
    if len(acks) < 4:
        problems.append(f"{name}: only {len(acks)} grant acks during the attack")
    elif max(a["rtt_ms"] for a in acks) > 1000:
        problems.append(f"{name}: grant acks during the attack took up to "
                        f"{max(a['rtt_ms'] for a in acks):.0f} ms")
    if not usage:
        problems.append(f"{name}: no usage record during the attack")
    if backend.poll() is not None:
        problems.append(f"{name}: the backend exited ({backend.returncode})")
    if victim:  # the next attack's victim must find its instance granted again
        done = len(events(agent_out))
        try:
            wait_for(lambda: sum(e["type"] == "ack" and e["ok"]
                                 for e in events(agent_out)[done:]) >= 2, 10,
                     "grant after the Revoke")
        except TimeoutError as ex:
            problems.append(f"{name}: {ex}")
    print(f"{name}: {len(pongs)} pongs (slowest {max([p['rtt_ms'] for p in pongs] or [0]):.1f} "
          f"ms), {len(acks)} grant acks, {len(usage)} usage records", flush=True)
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(run.REPO, "build"), help="CMake build folder")
    ap.add_argument("--attack", action="append", choices=list(ATTACKS), help="run only these")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    ctx = {"backend": os.path.join(build, "backend", "sluice-backend"),
           "agent": os.path.join(build, "tests", "e2e", "sluice-fake-agent"),
           "probe": os.path.join(build, "tests", "e2e", "sluice-stall-probe"),
           "driver": os.path.join(build, "tests", "double", "libsluice-driver-double.so")}
    for what, path in ctx.items():
        if not os.path.exists(path):
            print(f"SKIP: no {what} ({path})")
            return run.SKIP
    work = tempfile.mkdtemp(prefix="sluice-stall-")
    pki = ctx["pki"] = os.path.join(work, "pki")
    procs = []
    problems = []
    try:
        subprocess.run([os.path.join(run.REPO, "scripts", "make-demo-pki"), pki], check=True,
                       stdout=subprocess.DEVNULL)
        accounting.issue_cert(pki, "guest-c", run.PROJECT, GUEST_C)
        agent_out = os.path.join(work, "agent.jsonl")
        sock = os.path.join(work, "control.sock")
        grants = [f"{u},stall-test,1.0,0,0" for u in
                  (run.GUEST_UUID, accounting.GUEST_B, GUEST_C)]
        argv = [ctx["agent"], "--control", "ipc://" + sock, "--out", agent_out,
                "--project", run.PROJECT, "--ping-ms", "200", "--regrant-ms", "500", "--commands"]
        for g in grants:
            argv += ["--grant", g]
        agent = subprocess.Popen(argv, stdin=subprocess.PIPE, start_new_session=True,
                                 preexec_fn=run.die_with_parent)
        procs.append(agent)
        wait_for(lambda: any(e["type"] == "listening" for e in events(agent_out)), 10,
                 "listening fake agent")
        ctx["endpoint"] = f"tcp://127.0.0.1:{run.free_port()}"
        blog = os.path.join(work, "backend.log")
        with open(blog, "w") as logf:
            backend = subprocess.Popen(
                [ctx["backend"], "--project", run.PROJECT, "--listen", ctx["endpoint"],
                 "--cert", f"{pki}/server.pem", "--key", f"{pki}/server.key",
                 "--ca", f"{pki}/ca.pem", "--driver", ctx["driver"],
                 "--control", "ipc://" + sock, "--usage-interval", "1"],
                stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=run.die_with_parent)
        procs.append(backend)
        wait_for(lambda: sum(e["type"] == "ack" and e["ok"] for e in events(agent_out)) >= 3,
                 30, "grant acks")
        worst, median, rounds = baseline(ctx)
        sanitized = run.asan_runtime(ctx["backend"]) is not None
        busy = worst > BASELINE_MAX_MS or sanitized
        print(f"---- baseline: {rounds} round trips without an attack, median {median:.2f} ms, "
              f"worst {worst:.1f} ms" + (": a sanitizer build; time limits are reported, not held"
                                         if sanitized else
                                         f": over {BASELINE_MAX_MS} ms, this machine is busy "
                                         f"with other work; time limits are reported, not held"
                                         if busy else ""), flush=True)
        for name in args.attack or list(ATTACKS):
            print(f"---- {name}", flush=True)
            t0 = time.time()
            p = attack(ctx, name, agent, agent_out, backend, blog)
            if p and not busy and all(timing(x) for x in p):
                # a stall the backend causes comes back every time; a pause of this machine
                # (2 cores shared with the attack's own copying) seldom twice in a row
                for x in p:
                    print(f"ONCE: {x}; the attack runs again and the time limits are held "
                          f"on that run", flush=True)
                p = attack(ctx, name, agent, agent_out, backend, blog)
            if busy:
                for x in [x for x in p if timing(x)]:
                    print(f"NOT HELD ({'sanitizer build' if sanitized else 'busy machine'}): {x}")
                p = [x for x in p if not timing(x)]
            for x in p:
                print(f"FAIL: {x}")
            print(f"{'FAIL' if p else 'PASS'} e2e.stall.{name} {time.time() - t0:.1f}s",
                  flush=True)
            problems += p
        if run.SANITIZER_REPORT.search(run.tail(blog, 100000)):
            problems.append("a sanitizer report in the backend's log")
        if problems:
            print("---- backend log\n" + run.tail(blog, 60))
    except (TimeoutError, subprocess.SubprocessError, OSError) as ex:
        problems.append(f"{type(ex).__name__}: {ex}")
    finally:
        for p in reversed(procs):
            run.kill_group(p, 3)
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(("FAIL" if problems else "PASS") + " e2e.stall", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
