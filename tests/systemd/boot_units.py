#!/usr/bin/env python3
"""CTest systemd.novahook_boot: sluice-novahook.service as committed, started by a real systemd.

These machines have no systemd as PID 1, so the test boots one in a container: systemd-nspawn
on an overlay of this machine's own root file system (writes go to a tmpfs and vanish), with
the unit of the source tree, the freshly built sluice-novahook at the unit's path, a throwaway
PKI and configuration, and a probe unit that waits, records what systemd says of the service
and powers the container off. The service must be running after 10 s, never restarted, with
its vendordata listener and its registry channel up: its sandbox (system call filter, address
families, read-only paths) must let its libraries work, which no static check can see (libzmq
aborted under the unit's first filter: docs/deployment.md, "systemd hardening").

Exit status: 0 passed, 1 failed, 77 skipped (not root, no systemd-nspawn, no overlayfs).
usage: boot_units.py --source DIR --build DIR
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "unit", "novahook"))

PROBE = """[Unit]
Description=boot_units probe
After=sluice-novahook.service
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'sleep 10; systemctl show -p ActiveState,SubState,NRestarts sluice-novahook \
> /probe/show.txt; journalctl -b --no-pager -u sluice-novahook > /probe/journal.txt 2>&1; \
systemctl poweroff'
"""
TARGET = """[Unit]
Description=boot_units target
Requires=basic.target
Wants=sluice-novahook.service boot-units-probe.service
After=basic.target
"""


def skip(why):
    print(f"boot_units: skipped: {why}")
    sys.exit(77)


def run(*args, **kw):
    return subprocess.run(list(args), check=True, **kw)


def prepare(root, source, build, pki_dir):
    import nhtest  # the nova-hook tests' throwaway PKI (openssl CLI)
    # An empty /dev for nspawn, a machine id of its own, no state or unit of this host's.
    for name in os.listdir(f"{root}/dev"):
        p = f"{root}/dev/{name}"
        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
    with open(f"{root}/etc/machine-id", "w") as f:
        f.write(subprocess.run(["systemd-id128", "new"], capture_output=True, text=True,
                               check=True).stdout)
    for p in ("var/lib/sluice", "var/lib/sluice-novahook", "etc/sluice",
              "etc/systemd/system/sluice-novahook.service.d", "var/log/journal"):
        shutil.rmtree(f"{root}/{p}", ignore_errors=True)
    if subprocess.run(["chroot", root, "getent", "passwd", "sluice"],
                      capture_output=True).returncode != 0:
        run("useradd", "--root", root, "--system", "--user-group", "--no-create-home", "sluice")
    shutil.copy(f"{build}/nova-hook/sluice-novahook", f"{root}/usr/bin/sluice-novahook")
    shutil.copy(f"{source}/nova-hook/systemd/sluice-novahook.service",
                f"{root}/etc/systemd/system/sluice-novahook.service")
    with open(f"{root}/etc/systemd/system/boot-units-probe.service", "w") as f:
        f.write(PROBE)
    with open(f"{root}/etc/systemd/system/boot-units.target", "w") as f:
        f.write(TARGET)
    # PKI and configuration, readable by the service's user only
    pki = nhtest.make_pki(pki_dir)
    reg_ca = nhtest.make_ca(pki_dir, "registry-ca")
    reg = nhtest.make_leaf(pki_dir, "reg-server", reg_ca, "localhost",
                           "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                           "extendedKeyUsage=serverAuth", ou="sluice-novahook")
    etc = f"{root}/etc/sluice/novahook"
    os.makedirs(etc)

    def put(src, name):
        shutil.copy(src, f"{etc}/{name}")
        return f"/etc/sluice/novahook/{name}"
    conf = f"""# systemd.novahook_boot
listen = 127.0.0.1:40527
tls_cert = {put(pki['server'][1], 'server.crt')}
tls_key = {put(pki['server'][0], 'server.key')}
client_ca = {put(pki['nova_ca'], 'nova-client-ca.pem')}
client_cn = nova-api
token_key = {put(pki['token_key'], 'token.key')}
agent_ca = {put(pki['agent_ca'], 'agent-ca.pem')}
database = /var/lib/sluice/registry.db
threads = 2
registry_listen = 127.0.0.1:40423
registry_ca = {put(reg_ca[1], 'registry-ca.pem')}
registry_cert = {put(reg[1], 'registry.crt')}
registry_key = {put(reg[0], 'registry.key')}
registry_hosts = boot-units-host
"""
    with open(f"{root}/etc/sluice/novahook.conf", "w") as f:
        f.write(conf)
    run("chroot", root, "chown", "-R", "root:sluice", "/etc/sluice")
    run("chroot", root, "chmod", "-R", "u=rwX,g=rX,o=", "/etc/sluice")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        skip("not root")
    if not shutil.which("systemd-nspawn"):
        skip("no systemd-nspawn (package systemd-container)")
    tmp = tempfile.mkdtemp(prefix="sluice-boot-units-", dir="/dev/shm")
    root, upper, work, probe = (f"{tmp}/{n}" for n in ("root", "upper", "work", "probe"))
    for d in (root, upper, work, probe, f"{tmp}/pki"):
        os.makedirs(d)
    if subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                       f"lowerdir=/,upperdir={upper},workdir={work}", root]).returncode != 0:
        shutil.rmtree(tmp)
        skip("cannot mount an overlay of / (overlayfs)")
    try:
        prepare(root, a.source, a.build, f"{tmp}/pki")
        os.makedirs(f"{root}/probe", exist_ok=True)
        boot = subprocess.run(
            ["timeout", "180", "systemd-nspawn", "-q", "-D", root, "--register=no",
             "--keep-unit", "--link-journal=no", "--private-network",
             "--machine=sluice-boot-units", f"--bind={probe}:/probe",
             "--boot", "systemd.unit=boot-units.target"],
            capture_output=True, text=True)
        show = journal = ""
        if os.path.exists(f"{probe}/show.txt"):
            show = open(f"{probe}/show.txt").read()
            journal = open(f"{probe}/journal.txt").read()
        print(journal)
        print(show)
        state = dict(line.split("=", 1) for line in show.split())
        problems = []
        if not show:
            problems.append(f"the container's probe recorded nothing (nspawn exit "
                            f"{boot.returncode}):\n{boot.stdout[-3000:]}{boot.stderr[-2000:]}")
        elif (state.get("ActiveState"), state.get("SubState")) != ("active", "running"):
            problems.append(f"sluice-novahook is {state.get('ActiveState')}/"
                            f"{state.get('SubState')} after 10 s, not active/running")
        if show and state.get("NRestarts") != "0":
            problems.append(f"sluice-novahook restarted {state.get('NRestarts')} times")
        for want in ("listening on https://127.0.0.1:40527", "registry channel listening on"):
            if show and want not in journal:
                problems.append(f"its journal lacks \"{want}\"")
        for p in problems:
            print(f"boot_units: FAILED: {p}")
        if not problems:
            print("boot_units: sluice-novahook.service runs under systemd with its sandbox")
        return 1 if problems else 0
    finally:
        subprocess.run(["umount", "-l", root])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
