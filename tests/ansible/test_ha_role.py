#!/usr/bin/env python3
"""CTest ansible.novahook_ha: the sluice_novahook role's several-controllers path
(tasks/ha.yml, tasks/db_sync.yml) run for real over ssh against a clean Debian bookworm host
(tests/packages/container.py, never the build machine), installing the sluice-novahook package
of packages.build: a shared MariaDB database (a database of its own on the `mariadb` fixture's
server, TLS; the container shares this machine's network), the token key repository made once
and given to the service user, db-sync run once, novahook.conf naming the database and the
repository; then sluice-novahook, started as user sluice, answers Nova's POST from the MariaDB
registry; a second run changes nothing and finds the schema current.

Exit status: 0 passed, 1 failed, 77 skipped (a sanitizer build, or not root).
usage: test_ha_role.py --source DIR --debs DIR [--cache DIR] [--sanitize ON|OFF] [--keep]"""
import argparse
import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ha"))
sys.path.insert(0, os.path.join(HERE, "..", "packages"))
sys.path.insert(0, HERE)
import container  # noqa: E402
import mariadb  # noqa: E402
import test_deploy as deploy  # noqa: E402
from container import Failed  # noqa: E402

SKIP = 77
HOST = "sluice-ha-ctl1"
REPO = "/etc/sluice/novahook/token-keys"


def log(msg):
    print(f"ansible.novahook_ha: {msg}", flush=True)


def check(cond, msg):
    if not cond:
        raise Failed(msg)
    log(f"ok: {msg}")


def playbook(ctx, label):
    args = ["ansible-playbook", "-i", f"{ctx.work}/inventory.yml", "-e",
            f"@{ctx.work}/vars.yml", f"{ctx.work}/play.yml"]
    t = time.time()
    p = subprocess.run(args, cwd=ctx.source, env=ctx.env, capture_output=True, text=True,
                       timeout=600)
    with open(f"{ctx.work}/{label}.log", "w") as f:
        f.write(p.stdout + p.stderr)
    log(f"{label}: exit {p.returncode} in {time.time() - t:.0f} s (log {ctx.work}/{label}.log)")
    if p.returncode != 0:
        print(p.stdout[-6000:], p.stderr[-3000:], sep="\n")
        raise Failed(f"{label}: ansible-playbook failed")
    r = deploy.recap(p.stdout)
    check(HOST in r, f"{label}: PLAY RECAP has {HOST}: {r}")
    return r[HOST], p.stdout


def write_play(ctx, db, ports, pki):
    with open(f"{ctx.work}/play.yml", "w") as f:
        f.write("- name: Controllers\n  hosts: sluice_controllers\n  gather_facts: true\n"
                "  roles:\n    - role: sluice_novahook\n")
    with open(f"{ctx.work}/inventory.yml", "w") as f:
        json.dump({"all": {"children": {"sluice_controllers": {"hosts": {HOST: {
            "ansible_host": "127.0.0.1", "ansible_port": ports["ssh"], "ansible_user": "root",
            "ansible_ssh_private_key_file": f"{ctx.work}/ssh/id_ed25519",
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no "
                                       "-o UserKnownHostsFile=/dev/null",
            "ansible_python_interpreter": "/usr/bin/python3", "ansible_become": False}}}}}}, f)
    with open(f"{ctx.work}/vars.yml", "w") as f:
        json.dump({
            "sluice_packages_dir": ctx.debs, "sluice_source_dir": ctx.source,
            "sluice_novahook_listen": f"127.0.0.1:{ports['https']}",
            "sluice_novahook_state_dir": "/var/lib/sluice-novahook",
            "sluice_novahook_tls_cert_src": f"{pki}/server.crt",
            "sluice_novahook_tls_key_src": f"{pki}/server.key",
            "sluice_novahook_client_ca_src": f"{pki}/nova-ca.crt",
            "sluice_novahook_agent_ca_src": f"{pki}/agent-ca.crt",
            "sluice_novahook_install_nova_conf": False,
            "sluice_novahook_database_connection": db,
        }, f)


def check_installed(ctx, db):
    c = ctx.c
    P = c.path  # noqa: N806
    st = os.stat(P(REPO))
    keys = sorted(os.listdir(P(REPO)))
    owner = c.sh("stat", "-c", "%U", REPO, f"{REPO}/0").split()
    check(keys[:2] == ["0", "1"] and st.st_mode & 0o777 == 0o700 and owner == ["sluice"] * 2 and
          all(os.stat(P(f"{REPO}/{k}")).st_mode & 0o777 == 0o600 for k in keys),
          f"token key repository {REPO} (sluice, 0700, keys {keys} 0600)")
    conf = open(P("/etc/sluice/novahook.conf")).read()
    check(f"token_key_repository = {REPO}" in conf and f"database = {db}" in conf and
          os.stat(P("/etc/sluice/novahook.conf")).st_mode & 0o777 == 0o640,
          "novahook.conf (0640) names the shared database and the repository")
    pub = open(P("/etc/sluice/novahook/token.pub")).read()
    check(pub.count("BEGIN PUBLIC KEY") == len(keys),
          "token.pub: the public keys of every repository key (what agents get)")
    version = mariadb.run(db, "SELECT version FROM sluice_schema")[0][0]
    check(version == "5", f"the role's db-sync made the schema: version {version}")
    c.sh("runuser", "-u", "sluice", "--", "/usr/bin/sluice-novahook", "--config",
         "/etc/sluice/novahook.conf", "--check-config")
    log("ok: sluice-novahook --check-config passes as user sluice")


def check_answers(ctx, port, pki):
    nh = ctx.c.start(["runuser", "-u", "sluice", "--", "/usr/bin/sluice-novahook", "--config",
                      "/etc/sluice/novahook.conf"], f"{ctx.work}/novahook.log",
                     env={"SLUICE_LOG_LEVEL": "info"})
    deploy.wait_port(port, nh, "sluice-novahook")
    ssl_ctx = ssl.create_default_context(cafile=f"{pki}/server-ca.crt")
    ssl_ctx.load_cert_chain(f"{pki}/nova.crt", f"{pki}/nova.key")
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ssl_ctx, timeout=10)
    conn.request("POST", "/v1/vendordata",
                 json.dumps({"instance-id": str(uuid.uuid4()), "project-id": uuid.uuid4().hex}),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    body = r.read()
    check(r.status == 200 and json.loads(body) == {},
          f"nova-hook on the MariaDB registry answers Nova: {r.status} {body!r}")
    ctx.c.stop()


class Ctx:
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--debs", required=True, help="folder of scripts/build-packages")
    ap.add_argument("--cache", default=container.DEFAULT_CACHE)
    ap.add_argument("--sanitize", default="OFF")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    a = ap.parse_args()
    if a.sanitize.upper() in ("ON", "1", "TRUE", "YES"):
        log("skipped: sanitizer build (the roles are tested from the normal build)")
        return SKIP
    if os.geteuid() != 0:
        log("skipped: needs root (chroot and mounts for the clean host)")
        return SKIP
    rc = container.in_private_mount_namespace([sys.executable] + sys.argv)
    if rc is not None:
        return rc
    with open(os.environ["SLUICE_TEST_MARIADB"]) as f:
        db = mariadb.fresh_database(f.read().strip())
    ctx = Ctx()
    ctx.source, ctx.debs = os.path.realpath(a.source), os.path.realpath(a.debs)
    ctx.work = tempfile.mkdtemp(prefix="sluice-ha-role-")
    os.chmod(ctx.work, 0o755)
    ctx.c = None
    ctx.env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                   ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_LOCAL_TEMP=f"{ctx.work}/tmp",
                   ANSIBLE_CONFIG=f"{ctx.work}/ansible.cfg",
                   ANSIBLE_ROLES_PATH=f"{ctx.source}/ansible/roles")
    with open(f"{ctx.work}/ansible.cfg", "w") as f:
        f.write("[ssh_connection]\npipelining = True\n")
    t0 = time.time()
    try:
        pki = f"{ctx.work}/pki"
        deploy.make_pki(pki)
        ports = {"ssh": deploy.free_port(), "https": deploy.free_port()}
        ctx.vars = {"ssh_port": ports["ssh"]}
        write_play(ctx, db, ports, pki)
        deploy.start_host(ctx, a.cache)
        # the database server's CA where the URL says (on a controller: the cloud's CA file)
        ca = mariadb.parse(db)["ssl_ca"]
        os.makedirs(os.path.dirname(ctx.c.path(ca)), exist_ok=True)
        shutil.copy(ca, ctx.c.path(ca))
        os.chmod(ctx.c.path(ca), 0o644)

        first, out = playbook(ctx, "run1")
        check(first.get("failed", 1) == 0 and first.get("changed", 0) > 0, f"first run: {first}")
        check_installed(ctx, db)
        check_answers(ctx, ports["https"], pki)
        second, out = playbook(ctx, "run2")
        if second.get("changed") != 0:
            print("\n".join(line for line in out.splitlines() if line.startswith("changed:")
                            or line.startswith("TASK")))
        check(second.get("changed") == 0 and second.get("failed") == 0,
              f"second run changes nothing (the schema found current): {second}")
        log(f"PASSED in {time.time() - t0:.0f} s")
        return 0
    except (Failed, subprocess.TimeoutExpired, subprocess.CalledProcessError, OSError,
            KeyError, ValueError, IndexError) as e:
        log(f"FAILED: {e}")
        for name in ("novahook.log", "sshd.log"):
            path = f"{ctx.work}/{name}"
            if os.path.exists(path):
                print(f"--- {name}\n" + open(path).read()[-3000:])
        a.keep = True
        return 1
    finally:
        if ctx.c:
            ctx.c.close()
        mariadb.run(db, "DROP DATABASE " + mariadb.parse(db)["db"])
        if a.keep or container.mounted_under(ctx.work):
            log(f"work folder kept: {ctx.work}")
        else:
            shutil.rmtree(ctx.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
