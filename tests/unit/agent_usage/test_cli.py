#!/usr/bin/env python3
"""sluice-usage and sluice-registry usage end to end: the report fixture written into an agent
usage store and into a registry database (usage_seed), then the command lines: every format
(sluice-usage must print exactly the golden files the library test renders), --output,
--project, --config, the errors and their exit statuses. The JSON is checked against the shape
of Nova's os-simple-tenant-usage, the CSV with the csv module, the SVG with xml.etree.
usage: test_cli.py SLUICE_USAGE SLUICE_REGISTRY USAGE_SEED GOLDEN_DIR"""
import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_svg  # noqa: E402

PA = "a" * 32
PB = "b" * 32
U1 = "11111111-0000-4000-8000-000000000001"
PERIOD = ["--from", "2026-11-01", "--to", "2026-11-04"]
EXT = {"table": "txt", "csv": "csv", "json": "json", "svg": "svg"}
NOVA_SERVER = {"instance_id", "name", "flavor", "hours", "local_gb", "memory_mb", "vcpus",
               "tenant_id", "started_at", "ended_at", "state", "uptime"}
NOVA_TENANT = {"tenant_id", "start", "stop", "total_hours", "total_local_gb_usage",
               "total_memory_mb_usage", "total_vcpus_usage", "server_usages"}


def run(*args, rc=0):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=60)
    if p.returncode != rc:
        raise AssertionError(f"{args}: exit {p.returncode}, wanted {rc}\n{p.stdout}\n{p.stderr}")
    return p


V1 = [
    "CREATE TABLE agents (host TEXT PRIMARY KEY NOT NULL, endpoint TEXT NOT NULL, slots INTEGER "
    "NOT NULL, gpus TEXT NOT NULL, version TEXT NOT NULL, ca_pem TEXT, registered INTEGER NOT "
    "NULL, last_seen INTEGER NOT NULL)",
    "CREATE TABLE placements (instance TEXT PRIMARY KEY NOT NULL, project TEXT NOT NULL, flavor "
    "TEXT NOT NULL, host TEXT NOT NULL REFERENCES agents(host) ON DELETE CASCADE, since INTEGER "
    "NOT NULL)",
    "CREATE INDEX placements_host ON placements(host)",
    "CREATE INDEX placements_project ON placements(project)",
    "CREATE TABLE usage (record_id TEXT PRIMARY KEY NOT NULL, host TEXT NOT NULL, instance TEXT "
    "NOT NULL, project TEXT NOT NULL, flavor TEXT NOT NULL, gpu_uuid TEXT NOT NULL, session_id "
    "INTEGER NOT NULL, interval_start_ns INTEGER NOT NULL, interval_end_ns INTEGER NOT NULL, "
    "gpu_busy_ns INTEGER NOT NULL, kernel_ns INTEGER NOT NULL, kernels INTEGER NOT NULL, "
    "bytes_htod INTEGER NOT NULL, bytes_dtoh INTEGER NOT NULL, memory_high_water INTEGER NOT "
    "NULL, calls INTEGER NOT NULL, errors INTEGER NOT NULL, throttled_ns INTEGER NOT NULL, "
    "quota_refusals INTEGER NOT NULL, measurement TEXT NOT NULL, final INTEGER NOT NULL, "
    "received INTEGER NOT NULL)",
    "CREATE INDEX usage_project ON usage(project, interval_start_ns)",
    "PRAGMA user_version = 1",
]


def make_v1(path):
    """A registry database as schema version 1 left it: one host, one placement since
    2026-10-15, one usage record of that instance."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")
    for stmt in V1:
        db.execute(stmt)
    db.execute("INSERT INTO agents VALUES ('gpu-old', 'tcp://192.0.2.9:7400', 2, '[]', '', NULL, "
               "1, 1)")
    db.execute("INSERT INTO placements VALUES ('cccccccc-0000-4000-8000-000000000001', ?, "
               "'g1.small', 'gpu-old', 1792022400)", ("c" * 32,))
    db.execute("INSERT INTO usage VALUES ('cccc0001-0000-4000-8000-000000000001', 'gpu-old', "
               "'cccccccc-0000-4000-8000-000000000001', ?, 'g1.small', '', 1, "
               "1792026000000000000, 1792026010000000000, 1000000000, 0, 5, 0, 0, 0, 0, 0, 0, 0, "
               "'events', 0, 1)", ("c" * 32,))
    db.commit()
    db.close()


def check_json(text, tenants, one=False):
    """Nova's shapes: every tenant {"tenant_usages": [...]}; one (--project) {"tenant_usage":
    {...}}, as GET /os-simple-tenant-usage/{tenant_id} answers."""
    doc = json.loads(text)
    if one:
        assert list(doc) == ["tenant_usage"], doc.keys()
        doc = {"tenant_usages": [doc["tenant_usage"]] if doc["tenant_usage"] else []}
    else:
        assert list(doc) == ["tenant_usages"], doc.keys()
    got = [t["tenant_id"] for t in doc["tenant_usages"]]
    assert got == tenants, got
    for t in doc["tenant_usages"]:
        assert NOVA_TENANT <= set(t), NOVA_TENANT - set(t)
        for s in t["server_usages"]:
            assert NOVA_SERVER <= set(s), NOVA_SERVER - set(s)
            assert s["tenant_id"] == t["tenant_id"]
            assert s["state"] in ("active", "terminated"), s["state"]  # Nova's vm_states
            assert (s["ended_at"] is None) == (s["state"] == "active"), s
            for k in ("gpu_hours", "kernel_hours", "entitled_gpu_hours", "throttled_hours"):
                assert isinstance(s[k], float), k
    return doc


def main():
    usage, registry, seed, golden = sys.argv[1:5]
    with tempfile.TemporaryDirectory(prefix="ag-usage-cli-") as d:
        db = f"{d}/usage.db"
        run(seed, "agent", db)
        # every format equals the library's golden rendering of the same data
        for fmt, ext in EXT.items():
            out = subprocess.run([usage, "--db", db, *PERIOD, "--format", fmt],
                                 capture_output=True, timeout=60, check=True).stdout
            with open(f"{golden}/report.{ext}", "rb") as f:
                want = f.read()
            assert out == want, f"sluice-usage --format {fmt} differs from report.{ext}"
        run(usage, "--db", db, *PERIOD, "--format", "svg", "--output", f"{d}/chart.svg")
        assert check_svg.check(f"{d}/chart.svg") > 0
        assert not os.path.exists(f"{d}/chart.svg.tmp")
        doc = check_json(run(usage, "--db", db, *PERIOD, "--format", "json").stdout, [PA, PB])
        u1 = doc["tenant_usages"][0]["server_usages"][0]
        assert u1["instance_id"] == U1 and u1["name"] == "web-1" and u1["state"] == "active"
        assert abs(u1["gpu_hours"] - 2.5) < 1e-9 and abs(u1["hours"] - 60) < 1e-9
        assert abs(u1["entitled_gpu_hours"] - 30) < 1e-9 and u1["ended_at"] is None
        rows = list(csv.DictReader(io.StringIO(
            run(usage, "--db", db, *PERIOD, "--format", "csv").stdout)))
        assert [r["level"] for r in rows] == ["project", "instance", "instance", "project",
                                              "instance"]
        assert rows[2]["name"] == 'batch "x", 2', rows[2]["name"]
        check_json(run(usage, "--db", db, *PERIOD, "--project", PB, "--format", "json").stdout,
                   [PB], one=True)
        check_json(run(usage, "--db", db, *PERIOD, "--project", "d" * 32, "--format",
                       "json").stdout, [], one=True)
        # --config: the agent's configuration names the store
        conf = f"{d}/agent.conf"
        with open(conf, "w") as f:
            f.write(f"advertise_address = 127.0.0.1\ntoken_public_key = /dev/null\n"
                    f"state_dir = {d}\nusage_db = {db}\n")
        assert run(usage, "--config", conf, *PERIOD).stdout == \
            open(f"{golden}/report.txt").read()
        # the default period (this month so far) works on any date
        run(usage, "--db", db)
        # errors
        assert "--from" in run(usage, "--help").stdout
        assert "--format" in run(usage, "--db", db, "--format", "png", rc=2).stderr
        assert "--from" in run(usage, "--db", db, "--from", "2026-13-01", rc=2).stderr
        assert "--to" in run(usage, "--db", db, "--from", "2026-11-04", "--to", "2026-11-01",
                             rc=2).stderr
        assert "--project" in run(usage, "--db", db, "--project", "x y", rc=2).stderr
        run(usage, "--db", db, "--config", conf, rc=2)
        run(usage, "--db", db, "stray", rc=2)
        assert "usage store" in run(usage, "--db", f"{d}/missing.db", rc=1).stderr
        run(usage, "--db", db, "--output", f"{d}/no/such/dir/out.txt", rc=1)

        # the registry: same records (pushed twice, stored once), placement history
        rdb = f"{d}/registry.db"
        run(seed, "registry", rdb)
        doc = check_json(run(registry, "--db", rdb, "usage", *PERIOD, "--format",
                             "json").stdout, [PA, PB])
        servers = {s["instance_id"]: s for t in doc["tenant_usages"] for s in t["server_usages"]}
        assert abs(servers[U1]["gpu_hours"] - 2.5) < 1e-9
        assert servers[U1]["kernels"] == 8000 and servers[U1]["records"] == 4
        assert servers[U1]["existence"] == "lifetime"
        assert servers["11111111-0000-4000-8000-000000000002"]["state"] == "terminated"
        check_json(run(registry, "--db", rdb, "--json", "usage", *PERIOD).stdout, [PA, PB])
        check_json(run(registry, "--db", rdb, "usage", *PERIOD, "--project", PA, "--format",
                       "json").stdout, [PA], one=True)
        table = run(registry, "--db", rdb, "usage", *PERIOD).stdout
        assert PA in table and PB in table and "TOTAL" in table, table
        run(registry, "--db", rdb, "usage", *PERIOD, "--format", "svg", "--output",
            f"{d}/cluster.svg")
        check_svg.check(f"{d}/cluster.svg")
        assert "--format" in run(registry, "--db", rdb, "usage", "--format", "x", rc=2).stderr
        run(registry, "--db", rdb, "--host", "gpu-a", "usage", rc=2)
        run(registry, "--db", rdb, "--from", "2026-11-01", "hosts", rc=2)
        assert "usage" in run(registry, "--help").stdout
        # the other commands still read the migrated database
        assert "gpu-a" in run(registry, "--db", rdb, "hosts").stdout

        # a registry database of schema version 1 (before usage reports): the CLI says to
        # run db-sync; the daemon's read-write open of a SQLite file upgrades it (to 5: the
        # usage table renamed usage_records, gpu_shared_ns added), keeping placements and usage
        old = f"{d}/registry-v1.db"
        make_v1(old)
        assert "db-sync" in run(registry, "--db", old, "usage", rc=1).stderr
        run(seed, "registry", old)
        doc = check_json(run(registry, "--db", old, "usage", "--from", "2026-10-01", "--to",
                             "2026-11-04", "--format", "json").stdout, [PA, PB, "c" * 32])
        old_server = doc["tenant_usages"][2]["server_usages"][0]
        assert old_server["instance_id"] == "cccccccc-0000-4000-8000-000000000001"
        assert old_server["existence"] == "lifetime" and old_server["kernels"] == 5
        db = sqlite3.connect(old)
        assert db.execute("PRAGMA user_version").fetchone()[0] == 5
        db.close()
        # the session closed by the agent, in both stores' reports (docs/usage.md)
        for argv in ([usage, "--db", f"{d}/usage.db"], [registry, "--db", rdb, "usage"]):
            rows = list(csv.DictReader(io.StringIO(run(*argv, *PERIOD, "--format", "csv").stdout)))
            assert [r["closed_by_agent"] for r in rows] == ["1", "0", "1", "0", "0"], rows
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
