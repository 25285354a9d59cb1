#!/usr/bin/env python3
"""CTest ansible.novahook_ha: the sluice_novahook role's several-controllers path
(tasks/ha.yml, tasks/db_sync.yml) run for real against this machine with the local connection:
a shared MariaDB database (a database of its own on the `mariadb` fixture's server, TLS), the
token key repository made once and given to the service user, db-sync run once, novahook.conf
naming the database and the repository; then sluice-novahook, started as user sluice from what
the role installed, answers Nova's POST from the MariaDB registry; a second run changes nothing
and finds the schema current.

Exit status: 0 passed, 1 failed, 77 skipped (a sanitizer build, or not root).
usage: test_ha_role.py --source DIR --build DIR [--sanitize ON|OFF]"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ha"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit",
                                "novahook"))
import mariadb  # noqa: E402
import nhtest  # noqa: E402

SKIP = 77
REPO = "/etc/sluice/novahook/token-keys"


def log(msg):
    print(f"ansible.novahook_ha: {msg}", flush=True)


class Failed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failed(msg)
    log(f"ok: {msg}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def playbook(source, work, label):
    args = ["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", f"@{work}/vars.yml",
            f"{work}/play.yml"]
    t = time.time()
    p = subprocess.run(args, cwd=source, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_ROLES_PATH=
                                f"{source}/ansible/roles"))
    log(f"{label}: exit {p.returncode} in {time.time() - t:.0f} s")
    if p.returncode != 0:
        print(p.stdout[-6000:], p.stderr[-3000:], sep="\n")
        raise Failed(f"{label}: ansible-playbook failed")
    m = re.search(r"^localhost\s+:\s+ok=(\d+)\s+changed=(\d+)", p.stdout, re.M)
    return int(m.group(2)) if m else -1, p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--sanitize", default="OFF")
    a = ap.parse_args()
    if a.sanitize.upper() in ("ON", "1", "TRUE", "YES"):
        log("skipped: sanitizer build (the roles are tested from the normal build)")
        return SKIP
    if os.geteuid() != 0:
        log("skipped: needs root (it installs into /usr/bin, /etc and /var/lib)")
        return SKIP
    with open(os.environ["SLUICE_TEST_MARIADB"]) as f:
        db = mariadb.fresh_database(f.read().strip())
    daemon = None
    try:
        with tempfile.TemporaryDirectory(prefix="sluice-ha-role-") as work:
            os.chmod(work, 0o755)
            pki = nhtest.make_pki(work)
            port = free_port()
            with open(f"{work}/play.yml", "w") as f:
                f.write("- hosts: localhost\n  gather_facts: true\n  gather_subset: [min]\n"
                        "  roles:\n    - role: sluice_novahook\n")
            with open(f"{work}/vars.yml", "w") as f:
                json.dump({
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "sluice_build_dir": a.build, "sluice_source_dir": a.source,
                    "sluice_novahook_manage_packages": False,
                    "sluice_novahook_listen": f"127.0.0.1:{port}",
                    "sluice_novahook_state_dir": "/var/lib/sluice-novahook",
                    "sluice_novahook_tls_cert_src": pki["server"][1],
                    "sluice_novahook_tls_key_src": pki["server"][0],
                    "sluice_novahook_client_ca_src": pki["nova_ca"],
                    "sluice_novahook_agent_ca_src": pki["agent_ca"],
                    "sluice_novahook_install_nova_conf": False,
                    "sluice_novahook_database_connection": db,
                }, f)
            changed, out = playbook(a.source, work, "first run")
            check("sluice-registry" in out and changed > 0, f"first run: {changed} changes")
            st = os.stat(REPO)
            keys = sorted(os.listdir(REPO))
            check(keys[:2] == ["0", "1"] and st.st_mode & 0o777 == 0o700 and
                  all(os.stat(f"{REPO}/{k}").st_mode & 0o777 == 0o600 for k in keys),
                  f"token key repository {REPO} (0700, keys {keys} 0600)")
            conf = open("/etc/sluice/novahook.conf").read()
            check(f"token_key_repository = {REPO}" in conf and f"database = {db}" in conf and
                  os.stat("/etc/sluice/novahook.conf").st_mode & 0o777 == 0o640,
                  "novahook.conf (0640) names the shared database and the repository")
            pub = open("/etc/sluice/novahook/token.pub").read()
            check(pub.count("BEGIN PUBLIC KEY") == len(keys),
                  "token.pub: the public keys of every repository key (what agents get)")
            version = mariadb.run(db, "SELECT version FROM sluice_schema")[0][0]
            check(version == "3", f"db-sync ran: schema version {version}")
            p = subprocess.run(["runuser", "-u", "sluice", "--", "/usr/bin/sluice-novahook",
                                "--config", "/etc/sluice/novahook.conf", "--check-config"],
                               capture_output=True, text=True)
            check(p.returncode == 0, "sluice-novahook --check-config passes as user sluice "
                                     + (p.stdout + p.stderr).strip())
            daemon = subprocess.Popen(["runuser", "-u", "sluice", "--", "/usr/bin/sluice-novahook",
                                       "--config", "/etc/sluice/novahook.conf"],
                                      stderr=subprocess.PIPE, text=True)
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
            ctx = ssl.create_default_context(cafile=pki["server_ca"])
            ctx.load_cert_chain(pki["nova"][1], pki["nova"][0])
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
            conn.request("POST", "/v1/vendordata",
                         json.dumps({"instance-id": str(uuid.uuid4()),
                                     "project-id": uuid.uuid4().hex}),
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            body = r.read()
            check(r.status == 200 and json.loads(body) == {},
                  f"nova-hook on the MariaDB registry answers Nova: {r.status} {body!r}")
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(20)
            changed, out = playbook(a.source, work, "second run")
            check(changed == 0, f"second run: {changed} changes (idempotent; the schema found "
                                "current)")
    except Failed as e:
        log(f"FAILED: {e}")
        return 1
    finally:
        if daemon and daemon.poll() is None:
            daemon.kill()
        mariadb.run(db, "DROP DATABASE " + mariadb.parse(db)["db"])
    log("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
