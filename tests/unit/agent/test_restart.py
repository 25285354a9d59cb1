#!/usr/bin/env python3
"""The agent's guarantees across crashes and restarts, with real processes (stack.py): a real
libvirtd with TCG domains, the real sluice-agent and sluice-backend (on the driver test double),
sluice-enroll and CUDA programs through our libcuda.so.1.

  crash   (agent.crash_revocation) kill -9 of the agent with live sessions: the backend is not
          reachable by anyone else meanwhile and admits no new session; the restarted agent
          adopts it; a domain destroyed while no agent ran has its session ended and its
          certificate refused once the agent is back; a domain destroyed after the restart has
          its session ended within the revocation bound (15 s) and its certificate refused; a
          project enrolls after the restart.
  ports   (agent.ports_kept) two projects keep their backend ports across an agent restart, a
          backend kill -9 and an agent kill -9; a backend whose port was taken moves, and its
          guest finds it with sluice-enroll (a locate request) without a new certificate.
  usage   (agent.backend_killed_usage) kill -9 of a backend with a live session that used GPU
          time: the usage store holds the session's interval records and a final record marked
          closed_by_agent, and sluice-usage reports it.

usage: test_restart.py crash|ports|usage BUILD SOURCE
Exit status: 0 passed, 1 failed (the logs are printed), 77 skipped (not root)."""
import csv
import io
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stack import Fail, Skip, Stack  # noqa: E402

BOUND = 15.0  # the revocation bound (docs/agent.md): debounce + 1 s, at most 15 s


def say(text):
    print(f"test_restart: {text}", flush=True)


def check(cond, what):
    if not cond:
        raise Fail(what)


def project():
    return uuid.uuid4().hex


def refused_in_log(st, instance, since, timeout=10):
    return st.wait_log(rf"refused instance {instance} project \w+ from [^:]+: .*", timeout, since)


def crash(st):
    pa, pb = project(), project()
    st.start_agent()
    a1 = st.domain("sluice-t19-a1", pa)
    a2 = st.domain("sluice-t19-a2", pa)
    backend = st.wait_backend(pa)
    for name in ("sluice-t19-a1", "sluice-t19-a2"):
        rc, out = st.enroll(name)
        check(rc == 0, f"enroll {name}: {out}")
    h1, h2 = st.hold("sluice-t19-a1"), st.hold("sluice-t19-a2")
    say(f"project {pa[:8]}: backend pid {backend}, sessions of a1 and a2 live")

    st.kill_agent()
    time.sleep(0.5)
    check(os.path.exists(f"/proc/{backend}"), "the backend died with the agent")
    # no agent: no new session (nobody could revoke it)
    mark = len(st.text())
    rc, out = st.program("vector_add", "sluice-t19-a1")
    check(rc != 0, f"a session opened while no agent ran: {out}")
    m = refused_in_log(st, a1, mark)
    check("not connected" in m.group(0), f"refused for another reason: {m.group(0)}")
    say("agent killed: the backend lives on and admits no new session")
    st.destroy("sluice-t19-a2")  # while no agent watches

    t0 = time.time()
    mark = st.start_agent()
    st.wait_log(rf"project {pa}: adopting the backend pid {backend} ", 10, mark)
    st.wait_log(rf"project {pa}: backend pid {backend} ready .*adopted", 15, mark)
    st.wait_hold(h2, "SESSION ENDED", BOUND)
    took = time.time() - t0
    say(f"restarted agent adopted pid {backend}; a2 (destroyed meanwhile) ended {took:.1f} s "
        f"after the agent started")
    check(took < BOUND, f"a2's session ended {took:.1f} s after the restart")
    check("SESSION ENDED" not in st.hold_text(h1) and h1.poll() is None,
          "a1's session did not survive the agent's crash")
    mark = len(st.text())
    rc, out = st.program("vector_add", "sluice-t19-a2")
    check(rc != 0, f"a2's certificate opened a session after the restart: {out}")
    m = refused_in_log(st, a2, mark)
    check("no grant" in m.group(0), f"a2 refused for another reason: {m.group(0)}")

    # another project enrolls and computes after the restart
    st.domain("sluice-t19-b", pb)
    st.wait_backend(pb, mark)
    rc, out = st.enroll("sluice-t19-b")
    check(rc == 0, f"enroll b after the restart: {out}")
    rc, out = st.program("vector_add", "sluice-t19-b")
    check(rc == 0 and "PASS vector_add" in out, f"vector_add on b: {out}")
    ports = st.ports()
    check(ports[pa] != ports[pb], f"two projects share port {ports[pa]}")
    say(f"project {pb[:8]} enrolled after the restart; vector_add passed (port {ports[pb]})")

    st.start("sluice-t19-a2")  # keeps project a's backend up after a1 goes
    st.wait_log(rf"instance {a2} \(sluice-t19-a2, project {pa}, .*\): running", 30, mark)
    t0 = time.time()
    st.destroy("sluice-t19-a1")
    st.wait_hold(h1, "SESSION ENDED", BOUND)
    took = time.time() - t0
    say(f"a1 destroyed after the restart: its session ended after {took:.1f} s")
    check(took < BOUND, f"a1's session ended {took:.1f} s after the destroy")
    mark = len(st.text())
    rc, out = st.program("vector_add", "sluice-t19-a1")
    check(rc != 0, f"a1's certificate opened a session after the destroy: {out}")
    m = refused_in_log(st, a1, mark)
    check("no grant" in m.group(0), f"a1 refused for another reason: {m.group(0)}")
    st.stop_agent()
    check(not st.backend_pids(), f"backends left after the agent stopped: {st.backend_pids()}")


def ports(st):
    pa, pb = project(), project()
    st.start_agent()
    st.domain("sluice-t19-pa", pa)
    st.domain("sluice-t19-pb", pb)
    st.wait_backend(pa)
    st.wait_backend(pb)
    for name in ("sluice-t19-pa", "sluice-t19-pb"):
        rc, out = st.enroll(name)
        check(rc == 0, f"enroll {name}: {out}")
    first = st.ports()
    say(f"ports: {first}")

    def same(what):
        now = st.ports()
        check(now == first, f"{what}: ports {now}, were {first}")
        for name in ("sluice-t19-pa", "sluice-t19-pb"):
            rc, out = st.program("vector_add", name)
            check(rc == 0 and "PASS vector_add" in out, f"{what}: vector_add on {name}: {out}")
        say(f"{what}: same ports, both guests compute with their backend.conf")

    st.stop_agent()  # the backends stop with it
    mark = st.start_agent()
    st.wait_backend(pa, mark)
    st.wait_backend(pb, mark)
    same("agent stopped and started")

    pid = st.backend_pids()[pb]
    mark = len(st.text())
    os.kill(pid, signal.SIGKILL)
    st.wait_log(rf"project {pb}: backend pid (?!{pid}\b)\d+ ready", 30, mark)
    same("backend killed and restarted")

    st.kill_agent()
    mark = st.start_agent()
    st.wait_log(rf"project {pa}: backend pid \d+ ready .*adopted", 15, mark)
    st.wait_log(rf"project {pb}: backend pid \d+ ready .*adopted", 15, mark)
    same("agent killed and restarted")

    # project a's port is taken while its backend is down: the backend moves, and its guest
    # learns the new endpoint from the agent with the certificate it has
    st.stop_agent()
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", first[pa]))
    try:
        mark = st.start_agent()
        st.wait_log(rf"project {pa}: its port {first[pa]} is taken by another process", 30, mark)
        st.wait_backend(pa, mark)
        moved = st.ports()[pa]
        check(moved != first[pa] and moved != first[pb], f"moved to port {moved}")
        rc, out = st.program("vector_add", "sluice-t19-pa")
        check(rc != 0, "vector_add reached a backend at the old port")
        rc, out = st.enroll("sluice-t19-pa")
        check(rc == 0 and f"moved from tcp://127.0.0.1:{first[pa]} to tcp://127.0.0.1:{moved}"
              in out, f"sluice-enroll did not find the moved backend: {out}")
        check("enrolled instance" not in out, f"sluice-enroll enrolled anew: {out}")
        rc, out = st.program("vector_add", "sluice-t19-pa")
        check(rc == 0 and "PASS vector_add" in out, f"vector_add after the move: {out}")
        say(f"port {first[pa]} taken: the backend moved to {moved}; sluice-enroll found it "
            f"(locate), the certificate stayed")
    finally:
        squatter.close()
    st.stop_agent()


def usage(st):
    pa = project()
    st.start_agent()
    inst = st.domain("sluice-t19-u", pa)
    backend = st.wait_backend(pa)
    rc, out = st.enroll("sluice-t19-u")
    check(rc == 0, f"enroll: {out}")
    hold = st.hold("sluice-t19-u")
    db = os.path.join(st.work, "state", "usage.db")

    def records():
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT session_id, gpu_busy_ns, final, closed_by_agent, "
                               "measurement, start_ns, end_ns FROM records WHERE instance = ? "
                               "ORDER BY end_ns", (inst,)).fetchall()
        finally:
            con.close()

    # an interval record with GPU time first (every 10 s), then the backend is killed
    end = time.time() + 40
    while not any(r[1] > 0 and not r[2] for r in records()):
        check(time.time() < end, "no interval record with GPU time after 40 s")
        time.sleep(0.5)
    mark = len(st.text())
    os.kill(backend, signal.SIGKILL)
    st.wait_hold(hold, "SESSION ENDED", 30)
    st.wait_log(rf"project {pa}: session \d+ of instance {inst} closed by the agent", 15, mark)
    rows = records()
    say(f"records of the session: {rows}")
    intervals = [r for r in rows if not r[3]]
    closing = [r for r in rows if r[3]]
    check(intervals and all(r[1] > 0 for r in intervals[:1]), "interval records lost")
    check(len(closing) == 1, f"{len(closing)} closing records")
    sid, busy, final, _, measurement, start, stop = closing[0]
    check(final == 1 and busy == 0 and measurement == "none", f"closing record {closing[0]}")
    check(sid == intervals[-1][0] and start == intervals[-1][6] and stop >= start,
          "the closing record does not follow the session's last interval")
    out = subprocess.run([st.bin["usage"], "--config", st.conf, "--format", "csv"],
                         capture_output=True, text=True, check=True).stdout
    row = [r for r in csv.DictReader(io.StringIO(out)) if r["instance_id"] == inst]
    check(row and row[0]["closed_by_agent"] == "1", f"sluice-usage: {out}")
    out = subprocess.run([st.bin["usage"], "--config", st.conf], capture_output=True, text=True,
                         check=True).stdout
    check("CLOSED BY THE AGENT: 1 session" in out, f"sluice-usage table: {out}")
    say("killed backend: the session's records are stored, closed by the agent and reported")
    st.wait_backend(pa, mark)  # restarted
    st.stop_agent()


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("crash", "ports", "usage"):
        print(__doc__, file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        say("SKIP: needs root (libvirtd, backends as nobody)")
        return 77
    which, build, source = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    st = Stack(build, source, f"t19-{which}")
    t0 = time.time()
    try:
        st.setup()
        {"crash": crash, "ports": ports, "usage": usage}[which](st)
        reports = st.sanitizer_reports()
        if reports:
            raise Fail(f"sanitizer reports in the logs: {reports}")
        say(f"ok ({time.time() - t0:.0f} s)")
        return 0
    except Skip as ex:
        say(f"SKIP: {ex}")
        return 77
    except (Fail, subprocess.SubprocessError, OSError) as ex:
        say(f"FAIL: {ex}")
        print("---- agent and backend log (tail)", file=sys.stderr)
        print(st.text()[-12000:], file=sys.stderr)
        for p in st.programs:
            print(f"---- {p.out}", file=sys.stderr)
            print(Stack.hold_text(p)[-2000:], file=sys.stderr)
        return 1
    finally:
        st.cleanup()


if __name__ == "__main__":
    sys.exit(main())
