#!/usr/bin/env python3
"""The usage JSON read by Nova's own client (Debian's python3-novaclient, run by /usr/bin/python3):
sluice-usage's JSON for every project and for one (--project) served at the paths of Nova's
os-simple-tenant-usage, and novaclient's usage.list(detailed=True) and usage.get(tenant) read the
same figures the report holds (docs/usage.md, "Reports").
usage: test_novaclient.py SLUICE_USAGE USAGE_SEED"""
import datetime
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading

DEBIAN_PYTHON = "/usr/bin/python3"
PERIOD = ["--from", "2026-11-01", "--to", "2026-11-04"]
PA = "a" * 32


def client(all_json, one_json):
    """In Debian's Python: novaclient against a server of the two documents."""
    from keystoneauth1 import session
    from novaclient import client as nc

    docs = {}
    for k, p in (("list", all_json), ("one", one_json)):
        with open(p) as f:
            docs[k] = f.read().encode()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            one = self.path.startswith("/os-simple-tenant-usage/")
            body = docs["one" if one else "list"]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    nova = nc.Client("2.1", session=session.Session(),
                     endpoint_override=f"http://127.0.0.1:{srv.server_port}")
    s, e = datetime.datetime(2026, 11, 1), datetime.datetime(2026, 11, 4)
    out = {"list": [(u.tenant_id, u.total_hours, [x["instance_id"] for x in u.server_usages])
                    for u in nova.usage.list(s, e, detailed=True)]}
    u = nova.usage.get(PA, s, e)
    out["get"] = (u.tenant_id, u.total_hours, [x["state"] for x in u.server_usages])
    print(json.dumps(out))


def main():
    usage, seed = sys.argv[1:3]
    if subprocess.run([DEBIAN_PYTHON, "-c", "import novaclient"],
                      capture_output=True).returncode != 0:
        print("FAIL Debian's python3-novaclient is not installed (scripts/install-deps)")
        return 1
    with tempfile.TemporaryDirectory(prefix="ag-usage-nc-") as d:
        db = f"{d}/usage.db"
        subprocess.run([seed, "agent", db], check=True, capture_output=True)
        for name, extra in (("all", []), ("one", ["--project", PA])):
            with open(f"{d}/{name}.json", "w") as f:
                subprocess.run([usage, "--db", db, *PERIOD, "--format", "json", *extra],
                               stdout=f, check=True)
        r = subprocess.run([DEBIAN_PYTHON, __file__, "--client", f"{d}/all.json",
                            f"{d}/one.json"], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            print(f"FAIL novaclient could not read the JSON:\n{r.stderr[-2000:]}")
            return 1
        got = json.loads(r.stdout.strip().splitlines()[-1])
        with open(f"{d}/all.json") as f:
            mine = json.load(f)["tenant_usages"]
    want = [[t["tenant_id"], t["total_hours"], [s["instance_id"] for s in t["server_usages"]]]
            for t in mine]
    ok = True
    if got["list"] != want:
        print(f"FAIL usage.list: {got['list']} != {want}")
        ok = False
    else:
        print(f"ok   novaclient usage.list(detailed=True): {len(want)} tenants, the same figures")
    if got["get"] != [PA, 78.0, ["active", "terminated"]]:
        print(f"FAIL usage.get({PA}): {got['get']}")
        ok = False
    else:
        print("ok   novaclient usage.get(tenant) reads the --project shape {\"tenant_usage\": ...}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--client":
        client(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.exit(main())
