#!/usr/bin/env python3
"""The registry over the Sluice channel, end to end: the real sluice-novahook with
registry_listen, agents (nh_agent, i.e. nova-hook/registry_client.c) with certificates
CN=host-a / CN=host-b, OU=sluice-agent. Register, place, usage (with a duplicate), remove;
replies, then the store through sluice-registry and SQLite; refusals: a foreign CA, a non-agent
OU, a host outside registry_hosts, an agent speaking for another host, garbage (dropped, the
daemon keeps serving); SIGTERM, restart, nothing lost.
usage: test_registry_channel.py SLUICE_NOVAHOOK SLUICE_REGISTRY NH_AGENT"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nhtest  # noqa: E402

FAILS = []
P1, P2 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
OU = "sluice-agent"


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def inst(n):
    return f"11111111-0000-4000-8000-{n:012d}"


def make_agent_pki(d):
    ca = nhtest.make_ca(d, "registry-ca")
    p = {"ca": ca[1]}
    p["server"] = nhtest.make_leaf(d, "reg-server", ca, "localhost",
                                   "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                   "extendedKeyUsage=serverAuth", ou="sluice-novahook")
    for host in ("host-a", "host-b", "host-c"):
        p[host] = nhtest.make_leaf(d, host, ca, host, "extendedKeyUsage=clientAuth", ou=OU)
    p["guest"] = nhtest.make_leaf(d, "guest", ca, nhtest.INSTANCE, "extendedKeyUsage=clientAuth",
                                  ou=nhtest.PROJECT)
    rogue = nhtest.make_ca(d, "rogue-reg-ca")
    p["rogue"] = nhtest.make_leaf(d, "rogue-a", rogue, "host-a", "extendedKeyUsage=clientAuth",
                                  ou=OU)
    return p


DAEMONS = []


def start(binary, config):
    dm = nhtest.Daemon(binary, config)
    DAEMONS.append(dm)
    m = dm.wait_log(r"registry channel listening on (tcp://127\.0\.0\.1:\d+)")
    if not m:
        dm.proc.kill()
        raise RuntimeError("no registry channel:\n" + dm.text())
    return dm, m.group(1)


def agent(tool, ep, apki, who, *cmds):
    cert = apki[who]
    r = subprocess.run([tool, ep, apki["ca"], cert[1], cert[0], *cmds], capture_output=True,
                       text=True, timeout=30)
    if r.stderr.strip():
        print(r.stderr.strip())
    return r.returncode, r.stdout.splitlines()


def main():
    daemon_bin, cli, tool = sys.argv[1:4]
    t_start = time.time()
    with tempfile.TemporaryDirectory(prefix="nh-regch-") as d:
        pki = nhtest.make_pki(d)
        apki = make_agent_pki(d)
        db = nhtest.fresh_db(d)
        config = nhtest.write_config(d, pki, db, f"""registry_listen = 127.0.0.1:0
registry_ca = {apki['ca']}
registry_cert = {apki['server'][1]}
registry_key = {apki['server'][0]}
registry_hosts = host-a,host-b
""")
        dm, ep = start(daemon_bin, config)
        print(f"registry channel at {ep}")

        rc, out = agent(tool, ep, apki, "host-a",
                        "register", "host-a", "tcp://192.0.2.1:7400", "8",
                        "place", "host-a", inst(1), P1, "g1.small",
                        "place", "host-a", inst(2), P2, "g1.large",
                        "usage", "rec-1,rec-2", inst(1), P1,
                        "usage", "rec-2,rec-3", inst(1), P1,
                        "ping", "77",
                        "place", "host-b", inst(9), P1, "g1.small")
        print("\n".join(out))
        check(rc == 0 and len(out) == 7, "host-a: 7 replies")
        if len(out) == 7:
            check(out[0] == "ok registered", "register host-a")
            check(out[1] == "ok placed" and out[2] == "ok placed", "two placements")
            check(out[3] == "ok stored 2 new of 2 acked=rec-1,rec-2", "usage acked")
            check(out[4] == "ok stored 1 new of 2 acked=rec-2,rec-3",
                  "duplicate record acked again, stored once")
            check(out[5] == "ok pong pong=77", "ping answered")
            check(out[6].startswith("refused ") and "not the authenticated host" in out[6],
                  "host-a cannot place on host-b")

        rc, out = agent(tool, ep, apki, "host-b",
                        "ping", "1",
                        "register", "host-b", "tcp://192.0.2.2:7400", "4",
                        "place", "host-b", inst(3), P1, "g1.small",
                        "remove", "host-b", inst(3),
                        "remove", "host-b", inst(3),
                        "place", "host-b", inst(4), P2, "g1.small",
                        "register", "host-a", "tcp://192.0.2.66:7400", "99",
                        "remove", "host-a", inst(1),
                        "unregister", "host-a")
        print("\n".join(out))
        check(rc == 0 and len(out) == 9, "host-b: 9 replies")
        if len(out) == 9:
            check(out[0].startswith("refused ") and "not registered" in out[0],
                  "ping before register refused")
            check(out[1] == "ok registered" and out[2] == "ok placed", "host-b registered, placed")
            check(out[3] == "ok removed", "removed")
            check(out[4] == "ok was not placed on this host", "removal is idempotent")
            check(out[5] == "ok placed", "placed again")
            check(all(o.startswith("refused ") and "not the authenticated host" in o
                      for o in out[6:9]), "host-b cannot register/remove/unregister for host-a")

        rc, out = agent(tool, ep, apki, "rogue", "ping", "1")
        check(rc == 3 and out and out[0].startswith("connect-failed"),
              f"a certificate of another CA is refused ({out})")
        rc, out = agent(tool, ep, apki, "guest", "ping", "1")
        check(rc == 3 and out and out[0].startswith("connect-failed") and "OU" in out[0],
              f"a non-agent certificate (guest OU) is refused ({out})")
        rc, out = agent(tool, ep, apki, "host-c", "ping", "1")
        check(rc == 3 and out and "registry_hosts" in out[0],
              f"a host outside registry_hosts is refused ({out})")
        rc, out = agent(tool, ep, apki, "host-a", "ping", "2", "garbage")
        check(rc == 1 and len(out) == 2 and out[1].startswith("closed protocol "),
              f"garbage: the peer is dropped with SL_ERR_PROTOCOL ({out})")
        rc, out = agent(tool, ep, apki, "host-a", "ping", "3")
        check(rc == 0 and out == ["ok pong pong=3"], "the daemon keeps serving after garbage")
        check("not a RegistryRequest" in dm.text(), "garbage logged")

        def cli_json(*a):
            r = subprocess.run([cli, "--db", db, "--json", *a], capture_output=True, text=True)
            return r.returncode, json.loads(r.stdout) if r.returncode == 0 else None

        def check_store(when):
            rc, hosts = cli_json("hosts")
            got = sorted((h["host"], h["endpoint"], h["slots"]) for h in hosts or [])
            check(rc == 0 and got == [("host-a", "tcp://192.0.2.1:7400", 8),
                                      ("host-b", "tcp://192.0.2.2:7400", 4)],
                  f"{when}: sluice-registry hosts ({got})")
            rc, insts = cli_json("instances")
            got = sorted((i["instance"], i["host"], i["project"]) for i in insts or [])
            check(rc == 0 and got == [(inst(1), "host-a", P1), (inst(2), "host-a", P2),
                                      (inst(4), "host-b", P2)],
                  f"{when}: sluice-registry instances ({got})")
            rows = nhtest.query(db, "SELECT record_id, host, instance FROM usage_records "
                                    "ORDER BY record_id")
            check(rows == [(f"rec-{i}", "host-a", inst(1)) for i in (1, 2, 3)],
                  f"{when}: usage stored once each ({rows})")

        check_store("running")
        t0 = time.time()
        rc, took = dm.stop()
        check(rc == 0 and took < 5, f"SIGTERM: exit 0 in {took:.2f}s")
        check("shutting down" in dm.text(), "clean shutdown logged")

        dm, ep = start(daemon_bin, config)
        check_store("after restart")
        rc, out = agent(tool, ep, apki, "host-a", "ping", "4",
                        "usage", "rec-1", inst(1), P1)
        check(rc == 0 and out == ["ok pong pong=4", "ok stored 0 new of 1 acked=rec-1"],
              f"after restart: host-a still registered, redelivery acked, not stored ({out})")
        rc, took = dm.stop()
        check(rc == 0, "second daemon: exit 0")
        del t0
    print(f"{time.time() - t_start:.1f}s")
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        for dm in DAEMONS:  # a failure above must not leave a daemon behind
            if dm.proc.poll() is None:
                dm.proc.kill()
