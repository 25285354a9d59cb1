#!/usr/bin/env python3
"""CTest ansible.deploy: the ansible roles, linted, syntax-checked and run for real against a
clean Debian bookworm host (tests/packages/container.py: a container made from the package
registry, never the build machine), reached over ssh (tests/ansible/inventory.yml: controller,
GPU host and guest image at once), installing the Debian packages of packages.build. Then checks
that what they installed works, that a second run changes nothing, and that the roles refuse
what Placement would refuse (sluice_agent_gpu_slots: 0).

Exit status: 0 passed, 1 failed, 77 skipped (a sanitizer build, or not root).
usage: test_deploy.py --source DIR --debs DIR [--cache DIR] [--sanitize ON|OFF] [--keep]
"""
import argparse
import base64
import configparser
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "packages"))
import container  # noqa: E402
from container import Failed  # noqa: E402

SKIP = 77
HOST_CN = "ci-gpu-host"


def log(msg):
    print(f"ansible.deploy: {msg}", flush=True)


def check(cond, msg):
    if not cond:
        raise Failed(msg)
    log(f"ok: {msg}")


def run(args, cwd=None, env=None, timeout=300, input=None):
    p = subprocess.run(args, cwd=cwd, env=env, timeout=timeout, input=input,
                       capture_output=True, text=True)
    return p


def sh(*args, **kw):
    p = run(list(args), **kw)
    if p.returncode != 0:
        raise Failed(f"{' '.join(args)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
    return p.stdout


# ------------------------------------------------------------------ throwaway PKI (openssl CLI)

def make_ca(d, name):
    key, crt = f"{d}/{name}.key", f"{d}/{name}.crt"
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
       "-nodes", "-keyout", key, "-out", crt, "-days", "2", "-subj", f"/CN={name}",
       "-addext", "basicConstraints=critical,CA:TRUE",
       "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return key, crt


def make_leaf(d, name, ca, subj, ext):
    key, csr, crt, extfile = (f"{d}/{name}.key", f"{d}/{name}.csr", f"{d}/{name}.crt",
                              f"{d}/{name}.ext")
    sh("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
       "-nodes", "-keyout", key, "-out", csr, "-subj", subj)
    with open(extfile, "w") as f:
        f.write(ext + "\n")
    sh("openssl", "x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial",
       "-out", crt, "-days", "1", "-extfile", extfile)


def make_pki(d):
    """nova-hook's HTTPS server (server-ca), Nova's client (nova-ca), the registry channel
    (registry-ca signs both ends), the fallback agent CA."""
    os.makedirs(d)
    server_ca = make_ca(d, "server-ca")
    make_leaf(d, "server", server_ca, "/CN=localhost",
              "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth")
    nova_ca = make_ca(d, "nova-ca")
    make_leaf(d, "nova", nova_ca, "/CN=nova-api", "extendedKeyUsage=clientAuth")
    reg_ca = make_ca(d, "registry-ca")
    make_leaf(d, "registry", reg_ca, "/CN=sluice-registry",
              "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth")
    make_leaf(d, "agent", reg_ca, f"/CN={HOST_CN}/OU=sluice-agent",
              "extendedKeyUsage=clientAuth")
    make_ca(d, "agent-ca")


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


# ------------------------------------------------------------------ ansible

def recap(output):
    """{host: {ok, changed, failed, ...}} from the PLAY RECAP of the default callback."""
    hosts = {}
    for m in re.finditer(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$", output.split("PLAY RECAP")[-1],
                         re.M):
        hosts[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return hosts


def playbook(ctx, label, extra=(), want_fail=False):
    args = ["ansible-playbook", "-i", "tests/ansible/inventory.yml", "-e",
            f"@{ctx.work}/ci-vars.yml", *extra, "ansible/site.yml"]
    t = time.time()
    p = run(args, cwd=ctx.source, env=ctx.env, timeout=900)
    with open(f"{ctx.work}/{label}.log", "w") as f:
        f.write(p.stdout + p.stderr)
    log(f"{label}: {' '.join(args)}: exit {p.returncode} in {time.time() - t:.0f} s "
        f"(log {ctx.work}/{label}.log)")
    if want_fail:
        return p.returncode, p.stdout + p.stderr
    if p.returncode != 0:
        print(p.stdout[-6000:], p.stderr[-3000:], sep="\n")
        raise Failed(f"{label}: ansible-playbook failed")
    r = recap(p.stdout)
    check("sluice-ci-host" in r, f"{label}: PLAY RECAP has sluice-ci-host: {r}")
    return r["sluice-ci-host"], p.stdout


# ------------------------------------------------------------------ the checks

def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def make_token(ctx, key, instance, project):
    """A token exactly as nova-hook signs it (docs/nova-hook.md, "Token format"), made with the
    key the role installed: the agent must accept its signature."""
    now = int(time.time())
    hdr = b64url(json.dumps({"alg": "EdDSA", "typ": "JWT"}).encode())
    claims = {"iss": "sluice-nova-hook", "aud": "sluice-agent", "sub": instance,
              "project_id": project, "iat": now, "exp": now + 600, "jti": str(uuid.uuid4())}
    pl = b64url(json.dumps(claims).encode())
    msg = f"{ctx.work}/token.msg"
    with open(msg, "w") as f:
        f.write(f"{hdr}.{pl}")
    sig = subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", key, "-rawin", "-in", msg],
                         check=True, capture_output=True).stdout
    return f"{hdr}.{pl}.{b64url(sig)}"


def check_files(ctx):
    v, c = ctx.vars, ctx.c
    P = c.path  # noqa: N806
    mode = lambda p: os.stat(P(p)).st_mode & 0o7777  # noqa: E731
    for pkg in ("sluice-agent", "sluice-novahook", "sluice-guest", "libmicrohttpd12"):
        check(c.run(["dpkg", "-s", pkg]).returncode == 0,
              f"{pkg} installed by the roles (apt, with its dependencies)")
    for b in ["sluice-agent", "sluice-agent-ca", "sluice-backend", "sluice-usage",
              "sluice-novahook", "sluice-registry"]:
        c.sh(f"/usr/bin/{b}", "--help")
    log("ok: the packaged programs run (--help)")
    check(mode("/var/lib/sluice/ca") == 0o700 and mode("/var/lib/sluice/ca/ca.key") == 0o600,
          "host CA in /var/lib/sluice/ca (0700, ca.key 0600)")
    c.sh("/usr/bin/sluice-agent-ca", "show", "--dir", "/var/lib/sluice/ca")
    check(mode("/etc/sluice/novahook/token.key") == 0o600, "token key 0600")

    # the units: the packages', no copy in /etc/systemd/system; the drop-in for the state dir
    for unit, src in [("sluice-agent.service", "agent/systemd/sluice-agent.service"),
                      ("sluice-novahook.service", "nova-hook/systemd/sluice-novahook.service")]:
        check(open(P(f"/lib/systemd/system/{unit}")).read() == open(f"{ctx.source}/{src}").read()
              and not os.path.exists(P(f"/etc/systemd/system/{unit}")),
              f"{unit} is the package's ({src}), not overridden")
    dropin = open(P("/etc/systemd/system/sluice-novahook.service.d/state-dir.conf")).read()
    check("ReadWritePaths=/var/lib/sluice-novahook" in dropin,
          "nova-hook drop-in points at /var/lib/sluice-novahook")
    conf = open(P("/etc/sluice/agent.conf")).read()
    check(f"metrics_listen = 127.0.0.1:{v['metrics_port']}" in conf,
          "sluice_agent_metrics_listen is in agent.conf")

    # Placement: where nova-compute reads it ([compute] provider_config_location)
    prov = yaml.safe_load(open(P("/etc/nova/provider_config/sluice.yaml")))
    p0 = prov["providers"][0]
    slot = p0["inventories"]["additional"][0]["CUSTOM_GPU_REMOTE_SLOT"]
    check(prov["meta"]["schema_version"] == "1.0" and slot["total"] == v["slots"]
          and slot["max_unit"] == 1 and p0["traits"]["additional"] == ["CUSTOM_GPU_REMOTING"]
          and p0["identification"]["uuid"] == "$COMPUTE_NODE",
          f"/etc/nova/provider_config/sluice.yaml: {v['slots']} CUSTOM_GPU_REMOTE_SLOT, "
          "trait CUSTOM_GPU_REMOTING")

    # nova.conf fragment: in nova.conf.d, naming our URL and files that exist
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(P("/etc/nova/nova.conf.d/sluice.conf"))
    check(cp["api"]["vendordata_dynamic_targets"] == f"sluice@{v['url']}"
          and "DynamicJSON" in cp["api"]["vendordata_providers"],
          f"/etc/nova/nova.conf.d/sluice.conf: vendordata_dynamic_targets = sluice@{v['url']}")
    files = [cp["api"]["vendordata_dynamic_ssl_certfile"]] + [
        cp["vendordata_dynamic_auth"][k] for k in ("certfile", "keyfile")]
    check(all(os.path.isfile(P(f)) for f in files), f"nova.conf fragment files exist: {files}")

    # firewall: written, not applied; valid where nft can check it
    nft = open(P("/etc/nftables.d/sluice-agent.nft")).read()
    check(f"tcp dport {{ {v['enroll_port']}, 47000-47999, 48000-49999 }}" in nft and "10.0.0.0/8" in nft,
          "nftables rule for the enrollment and backend ports written")
    if shutil.which("nft"):
        p = run(["nft", "-c", "-f", P("/etc/nftables.d/sluice-agent.nft")])
        check(p.returncode == 0, f"nft -c accepts the rule file {p.stderr.strip()}")
    else:
        log("nft is not installed: the rule file's syntax is not checked")

    # the guest: the package's library (the system's libcuda.so.1), sluice-enroll, the timer
    check("=> /usr/lib/sluice/libcuda.so.1" in c.sh("ldconfig", "-p"),
          "libcuda.so.1 is /usr/lib/sluice/libcuda.so.1 in the loader's cache")
    c.sh("/usr/sbin/sluice-enroll", "--help")
    link = P("/etc/systemd/system/timers.target.wants/sluice-enroll.timer")
    check(os.path.islink(link) and os.readlink(link) == "/lib/systemd/system/sluice-enroll.timer",
          "sluice-enroll.timer enabled (the package's)")
    out = c.sh("/usr/share/sluice/bootstrap-flavors.sh", "--dry-run")
    check(out.count("openstack flavor create") == 3 and "sluice:sla=gold" in out,
          "installed bootstrap-flavors.sh --dry-run prints the three flavors")


def check_services(ctx):
    v, c = ctx.vars, ctx.c
    env = {"SLUICE_LOG_LEVEL": "info"}
    c.sh("/usr/bin/sluice-agent", "--config", "/etc/sluice/agent.conf", "--check-config")
    log("ok: sluice-agent --check-config passes with the installed config")
    # as the service user: proves the file owners and modes let it read what it needs
    c.sh("runuser", "-u", "sluice", "--", "/usr/bin/sluice-novahook", "--config",
         "/etc/sluice/novahook.conf", "--check-config")
    log("ok: sluice-novahook --check-config passes as user sluice")

    nh = c.start(["runuser", "-u", "sluice", "--", "/usr/bin/sluice-novahook", "--config",
                  "/etc/sluice/novahook.conf"], f"{ctx.work}/novahook.log", env=env)
    wait_port(v["https_port"], nh, "sluice-novahook")

    # Nova's side: a POST with the installed client credentials gets 200 {} (not placed)
    ssl_ctx = ssl.create_default_context(cafile=c.path("/etc/nova/sluice/novahook-server-ca.pem"))
    ssl_ctx.load_cert_chain(c.path("/etc/nova/sluice/nova-client.crt"),
                            c.path("/etc/nova/sluice/nova-client.key"))
    conn = http.client.HTTPSConnection("127.0.0.1", v["https_port"], context=ssl_ctx, timeout=10)
    body = json.dumps({"instance-id": str(uuid.uuid4()), "project-id": uuid.uuid4().hex})
    conn.request("POST", "/v1/vendordata", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    answer = resp.read()
    check(resp.status == 200 and json.loads(answer) == {},
          f"nova-hook answers Nova's credentials: {resp.status} {answer!r}")

    ag = c.start(["/usr/bin/sluice-agent", "--config", "/etc/sluice/agent.conf"],
                 f"{ctx.work}/agent.log", env=env)
    wait_port(v["enroll_port"], ag, "sluice-agent")
    log("ok: sluice-agent runs on test:///default and listens for enrollments")
    wait_port(v["metrics_port"], ag, "sluice-agent's metrics endpoint")
    with urllib.request.urlopen(f"http://127.0.0.1:{v['metrics_port']}/metrics",
                                timeout=10) as r:
        check(r.status == 200 and "sluice_" in r.read().decode(),
              "GET /metrics answers on sluice_agent_metrics_listen")

    # the agent registers with nova-hook's registry (installed credentials on both ends)
    end, hosts = time.time() + 20, []
    while time.time() < end and not hosts:
        out = c.run(["/usr/bin/sluice-registry", "--db", "/var/lib/sluice-novahook/registry.db",
                     "--json", "hosts"]).stdout
        hosts = [h for h in (json.loads(out) if out.strip() else []) if h.get("host") == HOST_CN]
        time.sleep(0.5)
    check(hosts and hosts[0].get("slots") == v["slots"],
          f"the agent registered with nova-hook as {HOST_CN}: {hosts}")

    # enrollment: TLS to the agent verified with the installed host CA; a token signed with the
    # installed nova-hook key passes the signature check and is refused for the domain only
    ca = c.sh("/usr/bin/sluice-agent-ca", "show", "--pem", "--dir", "/var/lib/sluice/ca")
    token = make_token(ctx, c.path("/etc/sluice/novahook/token.key"), str(uuid.uuid4()),
                       uuid.uuid4().hex)
    with open(c.path("/tmp/vendor_data2.json"), "w") as f:
        json.dump({"sluice": {"token": token, "ca": ca,
                              "enroll_endpoint": f"tcp://127.0.0.1:{v['enroll_port']}",
                              "expires": int(time.time()) + 600}}, f)
    p = c.run(["/usr/sbin/sluice-enroll", "--source", "/tmp/vendor_data2.json", "--dir",
               "/tmp/guest", "--timeout", "10"], timeout=30)
    said = (p.stdout + p.stderr).strip()
    check(p.returncode == 3 and "UNKNOWN_DOMAIN" in said,
          "installed sluice-enroll reaches the agent over TLS (host CA), token signature "
          f"accepted, refused as UNKNOWN_DOMAIN: exit {p.returncode}: {said}")
    c.stop()


def check_refusals(ctx):
    """What Placement or the hardened units would refuse, the roles refuse first."""
    for extra, words in [(["-e", "sluice_agent_gpu_slots=0"],
                          ["sluice_agent_gpu_slots must be an integer from 1 to 4096 (got '0')",
                           "HTTP 400"]),
                         (["-e", "sluice_agent_enroll_listen=127.0.0.1:700"],
                          ["must lie in 1024..65535"])]:
        # straight to the agent role's checks (the nova-hook play has nothing to do again)
        rc, out = playbook(ctx, "refuse", ["--start-at-task", "sluice_agent : Check the addresses",
                                           *extra], want_fail=True)
        check(rc != 0 and all(w in out for w in words),
              f"{' '.join(extra)}: the sluice_agent role refuses it ({words[0]})")


def start_host(ctx, cache):
    """The clean host: the cached bookworm root filesystem, sshd on a loopback port."""
    tar = container.rootfs(cache, log)
    ctx.c = container.Container(tar, f"{ctx.work}/root", f"{cache}/apt-archives")
    os.makedirs(f"{ctx.work}/ssh")
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{ctx.work}/ssh/id_ed25519")
    os.makedirs(ctx.c.path("/root/.ssh"), mode=0o700, exist_ok=True)
    shutil.copy(f"{ctx.work}/ssh/id_ed25519.pub", ctx.c.path("/root/.ssh/authorized_keys"))
    os.makedirs(ctx.c.path("/run/sshd"), mode=0o755, exist_ok=True)
    port = ctx.vars["ssh_port"]
    sshd = ctx.c.start(["/usr/sbin/sshd", "-D", "-e", "-p", str(port), "-o",
                        "ListenAddress=127.0.0.1", "-o", "PermitRootLogin=prohibit-password"],
                       f"{ctx.work}/sshd.log")
    wait_port(port, sshd, "sshd in the container")
    log(f"ok: clean bookworm host up, sshd on 127.0.0.1:{port}")


# ------------------------------------------------------------------ main

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
    missing = [t for t in ("ansible-playbook", "ansible-lint", "openssl", "ssh", "ssh-keygen",
                           "mmdebstrap", "unshare", "chroot") if not shutil.which(t)]
    if missing:
        log(f"FAILED: {', '.join(missing)} not found: run scripts/install-deps")
        return 1
    rc = container.in_private_mount_namespace([sys.executable] + sys.argv)
    if rc is not None:
        return rc

    ctx = Ctx()
    ctx.source, ctx.debs = os.path.realpath(a.source), os.path.realpath(a.debs)
    ctx.work = tempfile.mkdtemp(prefix="sluice-ansible-")
    os.chmod(ctx.work, 0o755)
    ctx.c = None
    ctx.env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                   ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_LOCAL_TEMP=f"{ctx.work}/tmp",
                   ANSIBLE_CONFIG=f"{ctx.work}/ansible.cfg", PY_COLORS="0")
    with open(f"{ctx.work}/ansible.cfg", "w") as f:
        f.write("[ssh_connection]\npipelining = True\n")
    t0 = time.time()
    try:
        make_pki(f"{ctx.work}/pki")
        ctx.vars = {"enroll_port": free_port(), "registry_port": free_port(),
                    "https_port": free_port(), "metrics_port": free_port(),
                    "ssh_port": free_port(), "slots": 4}
        ctx.vars["url"] = f"https://127.0.0.1:{ctx.vars['https_port']}/v1/vendordata"
        with open(f"{ctx.work}/ci-vars.yml", "w") as f:
            json.dump({"sluice_packages_dir": ctx.debs, "sluice_ci_dir": ctx.work,
                       "sluice_ci_ssh_port": ctx.vars["ssh_port"],
                       "sluice_ci_enroll_port": ctx.vars["enroll_port"],
                       "sluice_ci_registry_port": ctx.vars["registry_port"],
                       "sluice_ci_https_port": ctx.vars["https_port"],
                       "sluice_ci_metrics_port": ctx.vars["metrics_port"]}, f)

        p = run(["ansible-lint"], cwd=f"{ctx.source}/ansible", env=ctx.env)
        if p.returncode != 0:
            print(p.stdout, p.stderr)
        check(p.returncode == 0,
              "ansible-lint (ansible/.ansible-lint, production profile) is clean")
        for inv in ("ansible/inventory/hosts.yml", "tests/ansible/inventory.yml"):
            sh("ansible-playbook", "-i", inv, "-e", f"@{ctx.work}/ci-vars.yml", "--syntax-check",
               "ansible/site.yml", cwd=ctx.source, env=ctx.env)
            log(f"ok: ansible-playbook -i {inv} --syntax-check ansible/site.yml")

        start_host(ctx, a.cache)
        check(ctx.c.run(["dpkg", "-s", "libmicrohttpd12"]).returncode != 0,
              "the clean host has none of Sluice's libraries (libmicrohttpd12)")
        first, out = playbook(ctx, "run1")
        check(first.get("failed", 1) == 0 and first.get("unreachable", 1) == 0,
              f"first run: {first}")
        check_files(ctx)
        check_services(ctx)

        second, out = playbook(ctx, "run2")
        if second.get("changed") != 0:
            print("\n".join(line for line in out.splitlines() if line.startswith("changed:")
                            or line.startswith("TASK")))
        check(second.get("changed") == 0 and second.get("failed") == 0,
              f"second run changes nothing: {second}")
        check_refusals(ctx)
        log(f"PASSED in {time.time() - t0:.0f} s")
        return 0
    except (Failed, subprocess.TimeoutExpired, subprocess.CalledProcessError, OSError,
            KeyError, ValueError) as e:
        log(f"FAILED: {e}")
        for name in ("agent.log", "novahook.log", "sshd.log"):
            path = f"{ctx.work}/{name}"
            if os.path.exists(path):
                print(f"--- {name}\n" + open(path).read()[-3000:])
        a.keep = True
        return 1
    finally:
        if ctx.c:
            ctx.c.close()
        if a.keep or container.mounted_under(ctx.work):
            log(f"work folder kept: {ctx.work}")
        else:
            shutil.rmtree(ctx.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
