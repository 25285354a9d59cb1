#!/usr/bin/env python3
"""The registry on disk and sluice-registry: several agents and placements seeded through the
registry handler; hosts / instances / stale as tables and JSON; a writer killed with SIGKILL
mid-stream loses no acknowledged usage record, and a restart finds everything; the usage report's
shared GPU time (GPU SHARED, gpu_shared_hours) from records that carry it, "not reported" where a
record of an older agent does not.
usage: test_registry_cli.py SLUICE_REGISTRY NH_SEED"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import nhtest

FAILS = []
P1, P2 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def inst(n):
    return f"11111111-0000-4000-8000-{n:012d}"


def main():
    cli, seed = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="nh-cli-") as d:
        db = nhtest.fresh_db(d)

        def s(*a):
            subprocess.run([seed, db, *a], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)

        def run(*a):
            r = subprocess.run([cli, "--db", db, *a], capture_output=True, text=True)
            return r.returncode, r.stdout, r.stderr

        now = int(time.time())
        s("register", "gpu-a", "tcp://192.0.2.1:7400", "8")
        s("register", "gpu-b", "tcp://192.0.2.2:7400", "4")
        s("register", "gpu-old", "tcp://192.0.2.9:7400", "2", str(now - 3600))
        s("place", "gpu-a", inst(1), P1, "g1.small")
        s("place", "gpu-a", inst(2), P2, "g1.large")
        s("place", "gpu-b", inst(3), P1, "g1.small")

        rc, out, _ = run("hosts")
        print(out)
        lines = out.splitlines()
        check(rc == 0 and len(lines) == 4, "hosts: header + 3 rows")
        check(lines[0].split()[:6] == ["HOST", "ENDPOINT", "SLOTS", "USED", "FREE", "GPUS"],
              "hosts header")
        check(lines[1].split()[:6] == ["gpu-a", "tcp://192.0.2.1:7400", "8", "2", "6", "1"],
              "gpu-a: 8 slots, 2 used, 6 free, 1 GPU")
        check(len({line.index("ENDPOINT") if i == 0 else line.index("tcp://")
                   for i, line in enumerate(lines)}) == 1, "columns aligned")

        rc, out, _ = run("--json", "hosts")
        hosts = json.loads(out)
        check([h["host"] for h in hosts] == ["gpu-a", "gpu-b", "gpu-old"], "hosts --json")
        check(hosts[1]["used"] == 1 and hosts[1]["gpus"][0]["name"] == "NVIDIA H200",
              "hosts --json: used and GPUs")

        rc, out, _ = run("instances", "--project", P1)
        print(out)
        rows = out.splitlines()[1:]
        check(rc == 0 and sorted(r.split()[0] for r in rows) == [inst(1), inst(3)],
              "instances --project")
        rc, out, _ = run("--json", "instances", "--host", "gpu-a")
        check({i["instance"] for i in json.loads(out)} == {inst(1), inst(2)},
              "instances --host --json")

        rc, out, _ = run("stale", "--older-than", "600")
        print(out)
        check(rc == 0 and [r.split()[0] for r in out.splitlines()[1:]] == ["gpu-old"],
              "stale --older-than 600: gpu-old only")
        rc, out, _ = run("--json", "stale")
        check([h["host"] for h in json.loads(out)] == ["gpu-old"], "stale --json")

        for args, what in [(["bogus"], "unknown command"), (["stale", "--older-than", "x"],
                           "bad --older-than"), (["instances", "--project", "x y"],
                           "bad --project"), (["hosts", "--host", "gpu-a"], "--host on hosts")]:
            rc, _, err = run(*args)
            check(rc == 2 and err, f"{what}: exit 2 with a message")
        r = subprocess.run([cli, "--db", f"{d}/missing.db", "hosts"], capture_output=True,
                           text=True)
        check(r.returncode == 1 and "registry store" in r.stderr, "missing database: exit 1")
        if nhtest.engine() == "mariadb":
            bad = db.replace("sluice:", "sluice:wrong", 1)
            r = subprocess.run([cli, "--db", bad, "hosts"], capture_output=True, text=True)
            check(r.returncode == 1 and "Access denied" in r.stderr and "wrong" not in r.stderr,
                  f"a wrong password: exit 1, the server's reason, no password shown "
                  f"({r.stderr.strip()})")

        # --- SIGKILL while storing usage: every acknowledged record survives
        p = subprocess.Popen([seed, db, "usage-loop", "gpu-a", "rec", "100000"],
                             stdout=subprocess.PIPE, text=True)
        acked = []
        for line in p.stdout:
            acked.append(line.split()[1])
            if len(acked) == 200:
                p.send_signal(signal.SIGKILL)
                break
        for line in p.stdout:  # acks already written before the kill
            acked.append(line.split()[1])
        p.wait()
        stored = {r[0] for r in nhtest.query(db, "SELECT record_id FROM usage_records")}
        if nhtest.engine() == "sqlite":
            jm = nhtest.query(db, "PRAGMA journal_mode")[0][0]
            check(jm == "wal", "database in WAL mode")
        check(set(acked) <= stored, f"killed writer: all {len(acked)} acked records stored "
                                    f"({len(stored)} in the table)")
        # redelivery after the restart stores nothing twice
        s("usage-loop", "gpu-a", "rec", "50")
        n = nhtest.query(db, "SELECT count(*) FROM usage_records")[0][0]
        check(n == len(stored | {f"rec-{i:06d}" for i in range(50)}),
              "redelivered records stored once")
        rc, out, _ = run("--json", "instances")
        check(len(json.loads(out)) == 3, "placements intact after the kill")

        # --- management: the schema version, retention now
        rc, out, _ = run("db-version")
        check(rc == 0 and "schema version 5" in out, f"db-version: {out.strip()}")
        before = nhtest.query(db, "SELECT count(*) FROM usage_records")[0][0]
        rc, out, _ = run("prune", "--days", "30")  # nh_seed's records ended in 1970
        after = nhtest.query(db, "SELECT count(*) FROM usage_records")[0][0]
        check(rc == 0 and out.startswith(f"removed {before} usage records") and after == 0,
              f"prune --days 30 removes the old records: {out.strip()}")
        rc, out, _ = run("prune", "--days", "30")
        check(rc == 0 and out.startswith("removed 0 usage records"), "prune again: nothing")
        rc, _, err = run("prune", "--days", "0")
        check(rc == 2 and "--days" in err, "prune --days 0: exit 2 with a message")
        rc, _, err = run("db-sync", "extra")
        check(rc == 2, "db-sync takes no argument")
        rc, _, err = run("token-keys", "spin", "--repository", f"{d}/keys")
        check(rc == 2 and "setup, rotate or public" in err, "token-keys: unknown action refused")
        shared_report(s, run, now)


def shared_report(s, run, now):
    """Two agents' records in one period: P1's instances with their shared time (5 s and 3 s
    of 8 s and 4 s busy), P2's from an agent older than the field (not reported)."""
    day = (now // 86400 - 2) * 86400
    t = day + 3600
    s("usage", "gpu-a", "22222222-0000-4000-8000-000000000001", inst(1), P1, str(t),
      str(t + 10), str(8 * 10**9), str(5 * 10**9))
    s("usage", "gpu-b", "22222222-0000-4000-8000-000000000002", inst(3), P1, str(t),
      str(t + 10), str(4 * 10**9), str(3 * 10**9))
    s("usage", "gpu-a", "22222222-0000-4000-8000-000000000003", inst(2), P2, str(t),
      str(t + 10), str(6 * 10**9))
    period = ["--from", time.strftime("%Y-%m-%d", time.gmtime(day)),
              "--to", time.strftime("%Y-%m-%d", time.gmtime(day + 86400))]
    rc, out, err = run("usage", *period, "--format", "csv")
    print(out, err)
    rows = [r.split(",") for r in out.strip().splitlines()]
    head = rows[0]
    check(rc == 0 and head[-1] == "gpu_shared_hours", "csv: gpu_shared_hours, the last column")
    col = {(r[0], r[3], r[4]): r for r in rows[1:]}
    sh = head.index("gpu_shared_hours")

    def near(v, want):
        return v != "" and abs(float(v) - want) < 1e-9

    check(near(col[("project", P1, "")][sh], 8 / 3600), "csv: P1's shared total 8 s")
    check(near(col[("instance", P1, inst(1))][sh], 5 / 3600)
          and near(col[("instance", P1, inst(3))][sh], 3 / 3600), "csv: P1's instances 5 s, 3 s")
    check(near(col[("instance", P1, inst(1))][head.index("gpu_hours")], 8 / 3600),
          "csv: the raw gpu_hours beside it")
    check(col[("project", P2, "")][sh] == "" and col[("instance", P2, inst(2))][sh] == "",
          "csv: P2 (an older agent) not reported: empty")
    rc, out, _ = run("usage", *period, "--format", "json")
    j = {t["tenant_id"]: t for t in json.loads(out)["tenant_usages"]}
    check(abs(j[P1]["total_gpu_shared_hours"] - 8 / 3600) < 1e-9
          and j[P2]["total_gpu_shared_hours"] is None
          and j[P2]["server_usages"][0]["gpu_shared_hours"] is None,
          "json: total_gpu_shared_hours 8 s for P1, null for P2")
    rc, out, _ = run("usage", *period)
    print(out)
    lines = out.splitlines()
    hdr = next(x for x in lines if x.startswith("PROJECT"))
    p2 = next(x for x in lines if x.startswith(P2))
    check("GPU SHARED" in hdr and p2[hdr.index("GPU SHARED") + 9] == "-",
          "table: GPU SHARED, '-' for P2")
    check(any("not reported: 1 record" in x for x in lines), "table: the legend says why")
    rc, out, _ = run("usage", *period, "--project", P2, "--format", "csv")
    check(rc == 0 and "gpu_shared_hours" not in out,
          "only older agents' records: no shared column, as before")
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
