#!/usr/bin/env python3
"""CTest packages.install: Sluice's Debian packages, installed with apt on a clean Debian
bookworm host (tests/packages/container.py: a root filesystem from the package registry, used
as a container; not the build machine), then the demo's checks there: every program starts and
prints --help, the maintainer scripts made the users, folders and host CA, the units are where
Debian puts them, --check-config on the shipped configurations, sluice-agent starts far enough
to open its usage store, listen for enrollments and serve /metrics, sluice-novahook answers a
vendordata POST made with Nova's credentials, the guest's libcuda.so.1 loads by its soname, and
sluice-guest refuses a host with the NVIDIA driver. Removing sluice-guest takes libcuda.so.1
out of the loader's cache.

Exit status: 0 passed, 1 failed, 77 skipped (a sanitizer build, or not root).
usage: test_packages.py --debs DIR --source DIR --helper FILE [--cache DIR] [--keep]
"""
import argparse
import glob
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import container  # noqa: E402
from container import Failed  # noqa: E402

SKIP = 77
PACKAGES = ["sluice-agent", "sluice-novahook", "sluice-guest"]
PROGRAMS = ["/usr/bin/sluice-agent", "/usr/bin/sluice-agent-ca", "/usr/bin/sluice-backend",
            "/usr/bin/sluice-usage", "/usr/bin/sluice-novahook", "/usr/bin/sluice-registry",
            "/usr/sbin/sluice-enroll"]


def log(msg):
    print(f"packages.install: {msg}", flush=True)


def check(cond, msg):
    if not cond:
        raise Failed(msg)
    log(f"ok: {msg}")


def sh(*args, **kw):
    p = subprocess.run(list(args), capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise Failed(f"{' '.join(args)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
    return p.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise Failed(f"{what} exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise Failed(f"{what} does not listen on 127.0.0.1:{port} after {timeout} s")


def debs(d):
    out = {}
    for name in PACKAGES:
        found = glob.glob(f"{d}/{name}_*.deb")
        if len(found) != 1:
            raise Failed(f"{d}: {len(found)} {name}_*.deb files, want 1 (scripts/build-packages)")
        out[name] = found[0]
    return out


# ------------------------------------------------------------------ the .deb files themselves

def check_metadata(files):
    field = lambda f, k: sh("dpkg-deb", "-f", f, k).strip()  # noqa: E731
    dep = field(files["sluice-agent"], "Depends")
    check(all(f"{lib} (" in dep for lib in ("libmicrohttpd12", "libvirt0", "libzmq5",
                                            "libsqlite3-0", "libssl3")),
          f"sluice-agent's Depends come from its binaries (dpkg-shlibdeps): {dep}")
    check("libmicrohttpd12" in field(files["sluice-novahook"], "Depends"),
          "sluice-novahook depends on libmicrohttpd12")
    check("libcuda1" in field(files["sluice-guest"], "Conflicts"),
          "sluice-guest conflicts with Debian's NVIDIA libcuda1")
    listing = {n: sh("dpkg-deb", "-c", f) for n, f in files.items()}
    guest = listing["sluice-guest"]
    check("./usr/lib/sluice/libcuda.so.1" in guest and "x86_64-linux-gnu" not in guest,
          "the guest's libcuda.so.1 is in /usr/lib/sluice, never in the driver's folder")
    check("./usr/lib/sluice/libcuda.so.1" not in listing["sluice-agent"],
          "the host package has no libcuda.so.1")
    for n, f in files.items():
        d = tempfile.mkdtemp()
        sh("dpkg-deb", "-e", f, d)
        conff = open(f"{d}/conffiles").read().split() if os.path.exists(f"{d}/conffiles") else []
        shutil.rmtree(d)
        want = {"sluice-agent": ["/etc/sluice/agent.conf"],
                "sluice-novahook": ["/etc/sluice/novahook.conf"],
                "sluice-guest": ["/etc/ld.so.conf.d/sluice.conf"]}[n]
        check(conff == want, f"{n}: conffiles {conff}")


# ------------------------------------------------------------------ throwaway PKI (openssl CLI)

def make_pki(d):
    os.makedirs(d)

    def ca(name):
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
           "-nodes", "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.crt", "-days", "2",
           "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
           "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def leaf(name, signer, subj, ext):
        sh("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
           "-nodes", "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.csr", "-subj", subj)
        with open(f"{d}/{name}.ext", "w") as f:
            f.write(ext + "\n")
        sh("openssl", "x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/{signer}.crt",
           "-CAkey", f"{d}/{signer}.key", "-CAcreateserial", "-out", f"{d}/{name}.crt",
           "-days", "1", "-extfile", f"{d}/{name}.ext")

    ca("server-ca")
    leaf("server", "server-ca", "/CN=localhost",
         "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth")
    ca("nova-ca")
    leaf("nova", "nova-ca", "/CN=nova-api", "extendedKeyUsage=clientAuth")
    ca("registry-ca")
    leaf("registry", "registry-ca", "/CN=sluice-registry",
         "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth")
    ca("agent-ca")
    sh("openssl", "genpkey", "-algorithm", "ed25519", "-out", f"{d}/token.key")
    sh("openssl", "pkey", "-in", f"{d}/token.key", "-pubout", "-out", f"{d}/token.pub")


# ------------------------------------------------------------------ checks in the container

def install(c, files, work):
    check(c.run(["dpkg", "-s", "libmicrohttpd12"]).returncode != 0
          and c.run(["dpkg", "-s", "libzmq5"]).returncode != 0,
          "the clean host has none of Sluice's libraries (libmicrohttpd12, libzmq5)")
    os.makedirs(c.path("/tmp/debs"))
    for f in files.values():
        shutil.copy(f, c.path("/tmp/debs/"))
    c.sh("apt-get", "update", "-q", timeout=600)
    t = time.time()
    out = c.sh("apt-get", "install", "-y", "-q", "--no-install-recommends",
               *[f"/tmp/debs/{os.path.basename(f)}" for f in files.values()], timeout=900)
    with open(f"{work}/apt-install.log", "w") as f:
        f.write(out)
    check(all(c.run(["dpkg", "-s", p]).returncode == 0 for p in PACKAGES + ["libmicrohttpd12"]),
          f"apt installed the three packages and their dependencies from the registry "
          f"in {time.time() - t:.0f} s")


def check_installed(c):
    for prog in PROGRAMS:
        p = c.run([prog, "--help"])
        check(p.returncode == 0 and "usage" in (p.stdout + p.stderr).lower(),
              f"{prog} --help runs")
    st = lambda p: os.stat(c.path(p))  # noqa: E731
    grp = lambda name: int(c.sh("getent", "group", name).split(":")[2])  # noqa: E731
    check(c.run(["getent", "passwd", "sluice-backend"]).returncode == 0
          and c.run(["getent", "passwd", "sluice"]).returncode == 0,
          "system users sluice-backend (backends) and sluice (nova-hook) exist")
    s = st("/var/lib/sluice")
    check(s.st_uid == 0 and s.st_gid == grp("sluice-backend") and s.st_mode & 0o7777 == 0o750,
          "/var/lib/sluice is root:sluice-backend 0750")
    c.sh("sluice-agent-ca", "show", "--dir", "/var/lib/sluice/ca")
    check(st("/var/lib/sluice/ca").st_mode & 0o777 == 0o700,
          "the host CA was made at install (sluice-agent-ca show; folder 0700)")
    s = st("/etc/sluice/novahook")
    check(s.st_gid == grp("sluice") and s.st_mode & 0o7777 == 0o750,
          "/etc/sluice/novahook is root:sluice 0750")
    for unit in ("sluice-agent.service", "sluice-novahook.service", "sluice-enroll.service",
                 "sluice-enroll.timer"):
        check(os.path.isfile(c.path(f"/lib/systemd/system/{unit}")),
              f"{unit} in /lib/systemd/system")
    wants = c.path("/etc/systemd/system/multi-user.target.wants")
    check(not os.path.exists(f"{wants}/sluice-agent.service")
          and not os.path.exists(f"{wants}/sluice-novahook.service"),
          "the daemons are installed disabled (they need their configuration first)")
    link = c.path("/etc/systemd/system/timers.target.wants/sluice-enroll.timer")
    check(os.path.islink(link) and os.readlink(link) == "/lib/systemd/system/sluice-enroll.timer",
          "sluice-enroll.timer is enabled")
    p = c.run(["systemd-analyze", "verify", "/lib/systemd/system/sluice-agent.service",
               "/lib/systemd/system/sluice-novahook.service",
               "/lib/systemd/system/sluice-enroll.service",
               "/lib/systemd/system/sluice-enroll.timer"])
    check(p.returncode == 0 and not p.stderr.strip(),
          f"systemd-analyze verify accepts the installed units {p.stderr.strip()}")


def check_agent(c, pki, work):
    p = c.run(["sluice-agent", "--check-config"])
    said = (p.stdout + p.stderr).strip()
    check(p.returncode == 1 and "token_public_key /etc/sluice/nova-hook-token.pub" in said,
          f"--check-config on the shipped /etc/sluice/agent.conf names the missing nova-hook "
          f"key: {said.splitlines()[0] if said else ''}")
    shutil.copy(f"{pki}/token.pub", c.path("/etc/sluice/nova-hook-token.pub"))
    p = c.run(["sluice-agent", "--check-config"])
    check(p.returncode == 0, "--check-config passes on the shipped agent.conf with the key "
          f"{(p.stdout + p.stderr).strip()}")

    enroll, metrics = free_port(), free_port()
    conf = open(c.path("/etc/sluice/agent.conf")).read()
    conf = (conf.replace("libvirt_uri = qemu:///system", "libvirt_uri = test:///default")
            .replace("enroll_listen = 0.0.0.0:7400", f"enroll_listen = 127.0.0.1:{enroll}")
            .replace("advertise_address = 192.0.2.10", "advertise_address = 127.0.0.1")
            .replace("backend_bind = 0.0.0.0", "backend_bind = 127.0.0.1")
            .replace("#metrics_listen = 127.0.0.1:9464", f"metrics_listen = 127.0.0.1:{metrics}"))
    with open(c.path("/etc/sluice/agent-test.conf"), "w") as f:
        f.write(conf)
    ag = c.start(["sluice-agent", "--config", "/etc/sluice/agent-test.conf"],
                 f"{work}/agent.log", env={"SLUICE_LOG_LEVEL": "info"})
    wait_port(enroll, ag, "sluice-agent")
    check(os.path.exists(c.path("/var/lib/sluice/usage.db")),
          f"sluice-agent (libvirt test:///default) listens on 127.0.0.1:{enroll} and opened "
          "its usage store /var/lib/sluice/usage.db")
    wait_port(metrics, ag, "sluice-agent's metrics endpoint")
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10) as r:
        body = r.read().decode()
    check(r.status == 200 and "sluice_" in body,
          "GET /metrics answers (libmicrohttpd12 came with the package)")
    c.stop()


def check_novahook(c, pki, work):
    creds = c.path("/etc/sluice/novahook")
    gid = int(c.sh("getent", "group", "sluice").split(":")[2])
    uid = int(c.sh("getent", "passwd", "sluice").split(":")[2])
    for src, dst in [("server.crt", "server.crt"), ("server.key", "server.key"),
                     ("nova-ca.crt", "nova-client-ca.pem"), ("agent-ca.crt", "agent-ca.pem"),
                     ("registry-ca.crt", "registry-ca.pem"), ("registry.crt", "registry.crt"),
                     ("registry.key", "registry.key")]:
        shutil.copy(f"{pki}/{src}", f"{creds}/{dst}")
        os.chown(f"{creds}/{dst}", 0, gid)
        os.chmod(f"{creds}/{dst}", 0o640)
    shutil.copy(f"{pki}/token.key", f"{creds}/token.key")
    os.chown(f"{creds}/token.key", uid, gid)
    os.chmod(f"{creds}/token.key", 0o600)
    # sluice-agent is installed here too and owns /var/lib/sluice (root:sluice-backend): the
    # shipped database path is then refused by name, and a drop-in moves it (the role does)
    p = c.run(["runuser", "-u", "sluice", "--", "sluice-novahook", "--config",
               "/etc/sluice/novahook.conf", "--check-config"])
    said = (p.stdout + p.stderr).strip()
    check(p.returncode == 0 or ("/var/lib/sluice is not writable by sluice" in said
                                and "give that user write access" in said),
          "sluice-novahook --check-config on the shipped /etc/sluice/novahook.conf passes, or "
          f"names the agent's /var/lib/sluice as not writable and what to do: {said}")

    https, reg = free_port(), free_port()
    os.makedirs(c.path("/var/lib/sluice-novahook"))
    os.chown(c.path("/var/lib/sluice-novahook"), uid, gid)
    conf = open(c.path("/etc/sluice/novahook.conf")).read()
    conf = (conf.replace("listen = 192.0.2.20:9443", f"listen = 127.0.0.1:{https}")
            .replace("registry_listen = 192.0.2.20:7410", f"registry_listen = 127.0.0.1:{reg}")
            .replace("database = /var/lib/sluice/registry.db",
                     "database = /var/lib/sluice-novahook/registry.db"))
    with open(c.path("/etc/sluice/novahook-test.conf"), "w") as f:
        f.write(conf)
    p = c.run(["runuser", "-u", "sluice", "--", "sluice-novahook", "--config",
               "/etc/sluice/novahook-test.conf", "--check-config"])
    check(p.returncode == 0, "sluice-novahook --check-config passes as user sluice with its "
          f"credentials and its database in /var/lib/sluice-novahook {(p.stdout + p.stderr).strip()}")
    nh = c.start(["runuser", "-u", "sluice", "--", "sluice-novahook", "--config",
                  "/etc/sluice/novahook-test.conf"], f"{work}/novahook.log",
                 env={"SLUICE_LOG_LEVEL": "info"})
    wait_port(https, nh, "sluice-novahook")
    ctx = ssl.create_default_context(cafile=f"{pki}/server-ca.crt")
    ctx.load_cert_chain(f"{pki}/nova.crt", f"{pki}/nova.key")
    conn = http.client.HTTPSConnection("127.0.0.1", https, context=ctx, timeout=10)
    body = json.dumps({"instance-id": str(uuid.uuid4()), "project-id": uuid.uuid4().hex})
    conn.request("POST", "/v1/vendordata", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    answer = resp.read()
    check(resp.status == 200 and json.loads(answer) == {},
          f"sluice-novahook answers a vendordata POST with Nova's credentials: {resp.status}")
    out = c.sh("sluice-registry", "--db", "/var/lib/sluice-novahook/registry.db", "--json",
               "hosts")
    check(json.loads(out) == [], "sluice-registry reads the database (no agent yet)")
    c.stop()


def check_guest(c, helper, files):
    out = c.sh("ldconfig", "-p")
    check("libcuda.so.1 (libc6,x86-64) => /usr/lib/sluice/libcuda.so.1" in out,
          "ld.so.cache has /usr/lib/sluice/libcuda.so.1 (ld.so.conf.d/sluice.conf, trigger)")
    shutil.copy(helper, c.path("/tmp/load_cuda"))
    out = c.sh("/tmp/load_cuda")
    check("path=/usr/lib/sluice/libcuda.so.1" in out,
          f"a program loads libcuda.so.1 by its soname and calls it: {out.strip()}")
    p = c.run(["sluice-enroll", "--source", "/nonexistent/vendor_data2.json", "--dir",
               "/tmp/guest"])
    check(p.returncode != 0 and "/nonexistent/vendor_data2.json" in p.stdout + p.stderr,
          "sluice-enroll runs and names the vendordata it cannot read")

    c.sh("apt-get", "remove", "-y", "-q", "sluice-guest")
    check("libcuda.so.1" not in c.sh("ldconfig", "-p"),
          "removing sluice-guest takes libcuda.so.1 out of the loader's cache")
    # a host with the NVIDIA kernel driver loaded: /proc/driver/nvidia/version
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", c.path("/proc/driver")], check=True)
    try:
        os.makedirs(c.path("/proc/driver/nvidia"))
        with open(c.path("/proc/driver/nvidia/version"), "w") as f:
            f.write("NVRM version: test\n")
        deb = f"/tmp/debs/{os.path.basename(files['sluice-guest'])}"
        p = c.run(["apt-get", "install", "-y", "-q", deb])
        check(p.returncode != 0 and "NVIDIA kernel driver" in p.stdout + p.stderr,
              "sluice-guest refuses a host with the NVIDIA kernel driver loaded")
        c.sh("apt-get", "install", "-y", "-q", deb, env={"SLUICE_GUEST_ON_NVIDIA_HOST": "1"})
        log("ok: SLUICE_GUEST_ON_NVIDIA_HOST=1 installs it there (an image built on a GPU host)")
    finally:
        subprocess.run(["umount", c.path("/proc/driver")], check=False)


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--debs", required=True, help="folder of scripts/build-packages")
    ap.add_argument("--helper", required=True, help="the load_cuda test helper")
    ap.add_argument("--cache", default=container.DEFAULT_CACHE)
    ap.add_argument("--sanitize", default="OFF")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    a = ap.parse_args()
    if a.sanitize.upper() in ("ON", "1", "TRUE", "YES"):
        log("skipped: sanitizer build (the packages are tested from the normal build)")
        return SKIP
    if os.geteuid() != 0:
        log("skipped: needs root (chroot, mounts)")
        return SKIP
    missing = [t for t in ("mmdebstrap", "unshare", "chroot", "openssl", "dpkg-deb")
               if not shutil.which(t)]
    if missing:
        log(f"FAILED: {', '.join(missing)} not found: run scripts/install-deps")
        return 1
    rc = container.in_private_mount_namespace([sys.executable] + sys.argv)
    if rc is not None:
        return rc

    work = tempfile.mkdtemp(prefix="sluice-packages-")
    t0 = time.time()
    c = None
    try:
        files = debs(a.debs)
        check_metadata(files)
        tar = container.rootfs(a.cache, log)
        c = container.Container(tar, f"{work}/root", f"{a.cache}/apt-archives")
        make_pki(f"{work}/pki")
        install(c, files, work)
        check_installed(c)
        check_agent(c, f"{work}/pki", work)
        check_novahook(c, f"{work}/pki", work)
        check_guest(c, a.helper, files)
        log(f"PASSED in {time.time() - t0:.0f} s")
        return 0
    except (Failed, subprocess.TimeoutExpired, subprocess.CalledProcessError, OSError,
            ValueError) as e:
        log(f"FAILED: {e}")
        for name in ("agent.log", "novahook.log"):
            if os.path.exists(f"{work}/{name}"):
                print(f"--- {name}\n" + open(f"{work}/{name}").read()[-3000:])
        a.keep = True
        return 1
    finally:
        if c:
            c.close()
        if a.keep or container.mounted_under(work):
            log(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
