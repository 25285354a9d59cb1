"""What the VM test does inside the guest and checks on the host, per --source.

config-drive: the instance enrolls from its config drive at boot; the tests/cuda programs (static
  and shared cudart); the failure paths seen from inside: the memory quota hit, an expired
  certificate, the backend unreachable, a boot after the config drive's token expired; then
  virsh destroy while a session is open (the revocation is timed from the destroy).
metadata: the instance enrolls through the metadata service at 169.254.169.254; a few programs;
  a renewal (a fresh token per request); the instance revoked while a program runs (Nova's
  metadata rewritten live with a flavor that is not a GPU flavor); a program after that.
"""
import json
import os
import re
import subprocess
import tempfile
import time

import guest_job
import run as e2e  # tests/e2e/run.py: the programs and the output each must print

# The programs CI runs in the guest (each static and shared): every kind of call path, in a few
# minutes of TCG. --programs all runs tests/e2e/run.py's whole list.
CI_PROGRAMS = ["vector_add", "streams_events", "memcpy_to_symbol", "printf_kernel",
               "driver_api", "graph_kernel", "large_copy", "failures", "cross_session"]
LARGE_COPY_MIB = 16
EXPECT = {}  # step -> (rc: 0 | "nonzero", [patterns], what it shows)


def expect(name, rc, patterns, what):
    EXPECT[name] = (rc, patterns, what)


def programs(t):
    sel = t.args.programs
    if sel == "ci":
        return CI_PROGRAMS
    if sel == "all":
        return list(e2e.PROGRAMS)
    return [p for p in sel.split(",") if p]


def program_steps(t, names, variants=("static", "shared")):
    out = []
    for p in names:
        for rt in variants:
            n = f"{p}.{rt}"
            out.append((n, guest_job.program(n, {"SLUICE_LARGE_COPY_MIB": LARGE_COPY_MIB})))
            expect(n, 0, [f"PASS {p}"] + list(e2e.EXPECTED.get(p, [])),
                   f"{n} passes inside the guest")
    return out


def steps(t):
    EXPECT.clear()
    host = t.net.host_ip if t.net else "10.221.0.1"
    if t.args.source == "metadata":
        s = program_steps(t, ["vector_add"], ("shared",)) + program_steps(t, ["printf_kernel"],
                                                                          ("static",))
        s.append(("renew", "sluice-enroll --renew"))
        expect("renew", 0, [r"enrolled instance"],
               "sluice-enroll --renew gets a fresh token from the metadata service")
        s.append(("@signal", "revoke"))
        s.append(("revoked", guest_job.program("session_hold.static",
                                               {"SLUICE_HOLD_SECONDS": 240})))
        expect("revoked", 0, [r"SESSION OPEN", r"SESSION ENDED",
                              r"access revoked: no longer a GPU flavor",
                              r"CUDA_ERROR_DEVICE_UNAVAILABLE"],
               "a program running when the instance is revoked ends with the backend's reason")
        # the project's last GPU instance: the agent stopped its backend, nothing answers
        s.append(("after_revoke", guest_job.program("vector_add.static")))
        expect("after_revoke", "nonzero", [r"cannot connect to the Sluice backend",
                                           r"holds the connection back|nothing listens there"],
               "a program started after the revocation fails at once and says so")
        return s
    s = program_steps(t, programs(t))
    # GPU time the usage report must show: 100 launches of 20 ms (simulated on the double)
    s.append(("gpu_time", guest_job.program("gpu_time.static", {
        "SLUICE_GPU_TIME_LAUNCHES": 100, "SLUICE_GPU_TIME_US": 20000})))
    expect("gpu_time", 0, [r"PASS gpu_time", r"GPU_TIME launches=100"],
           "gpu_time runs 2 s of GPU time inside the guest")
    s.append(("quota", guest_job.program("mem_quota.static", {"SLUICE_QUOTA_MIB": t.quota_mib})))
    expect("quota", 0, [r"PASS mem_quota", r"MEM_QUOTA total=\d+ free=\d+ refused=[1-9]",
                        r"memory quota of \d+ MiB"],
           "the memory quota is hit: allocations refused, the frontend says it is the quota")
    s.append(("cert_expired",
              "SLUICE_CONFIG_DIR=/mnt/progs/expired " + guest_job.program("vector_add.static")))
    expect("cert_expired", "nonzero", [r"client certificate \S+ expired",
                                       r"run 'sudo sluice-enroll --renew'"],
           "an expired client certificate: the program says so and what to run")
    s.append(("unreachable",
              f"ip route add blackhole {host}/32; "
              f"SLUICE_CONNECT_TIMEOUT_MS=3000 {guest_job.program('vector_add.static')}; rc=$?; "
              f"ip route del blackhole {host}/32; exit $rc"))
    expect("unreachable", "nonzero", [r"cannot connect to the Sluice backend",
                                      r"holds the connection back|nothing listens there"],
           "the backend unreachable (the route to the host dropped): the program says so")
    s.append(("late_boot", LATE_BOOT))
    expect("late_boot", "nonzero", [r"config drive's token expired",
                                     r"then http://169\.254\.169\.254"],
           "a boot after the config drive's token expired: sluice-enroll says why, no silence")
    s.append(("@signal", "destroy"))
    s.append(("hold", guest_job.program("session_hold.static", {"SLUICE_HOLD_SECONDS": 300})))
    return s


# A boot long after the instance was created, seen from the guest: the clock moved past the
# config drive's token (its vendordata "expires"); the certificate files are gone (--dir
# elsewhere); no metadata service in this configuration. The clock is put back afterwards.
LATE_BOOT = r"""vd=/run/sluice/config-drive/openstack/latest/vendor_data2.json
ls -l $vd || exit 99
exp=$(grep -o '"expires": *[0-9]*' $vd | grep -o '[0-9]*$')
now=$(date +%s)
date -s @$((exp + 3600)) >/dev/null
sluice-enroll --renew --dir /tmp/late --timeout 5
rc=$?
date -s @$((now + 2)) >/dev/null
exit $rc"""


def binaries(step_list):
    names = set()
    for name, cmd in step_list:
        names.update(re.findall(r"/mnt/progs/bin/([\w.+-]+)", cmd))
    return sorted(names)


def expired_credentials(t, d):
    """A frontend config folder whose client certificate (signed by the host CA, for this
    instance and project) expired a week ago, as a guest holds after a long power-off."""
    os.makedirs(d)
    with tempfile.TemporaryDirectory() as w:
        conf = f"{w}/ca.cnf"
        with open(conf, "w") as f:
            f.write(f"""[ca]
default_ca = d
[d]
database = {w}/index.txt
new_certs_dir = {w}
certificate = {t.ca_dir}/ca.pem
private_key = {t.ca_dir}/ca.key
serial = {w}/serial
default_md = sha256
policy = p
[p]
organizationalUnitName = supplied
commonName = supplied
[ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
""")
        open(f"{w}/index.txt", "w").close()
        with open(f"{w}/serial", "w") as f:
            f.write("01\n")
        sh = lambda *a: subprocess.run(a, check=True, capture_output=True)  # noqa: E731
        sh("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
           "-nodes", "-keyout", f"{d}/client.key", "-out", f"{w}/req.csr",
           "-subj", f"/OU={t.project}/CN={t.instance}")
        past = time.gmtime(time.time() - 14 * 86400), time.gmtime(time.time() - 7 * 86400)
        sh("openssl", "ca", "-batch", "-config", conf, "-in", f"{w}/req.csr",
           "-out", f"{d}/client.pem", "-notext", "-extensions", "ext",
           "-startdate", time.strftime("%Y%m%d%H%M%SZ", past[0]),
           "-enddate", time.strftime("%Y%m%d%H%M%SZ", past[1]))
    with open(f"{t.ca_dir}/ca.pem") as src, open(f"{d}/ca.pem", "w") as dst:
        dst.write(src.read())
    with open(f"{d}/backend.conf", "w") as f:
        f.write(f"endpoint = tcp://{t.net.host_ip}:{t.backend_port}\n")
    os.chmod(f"{d}/client.key", 0o644)  # on a read-only disk, read by root anyway


# ------------------------------------------------------------------ the host's actions

def on_signal(t, word):
    t.pending = word


def tick(t):
    """Called while watching; returns True when the watch is over (the guest is gone)."""
    word = getattr(t, "pending", None)
    out = t.results.output(t.results.current or "")
    if word and "SESSION OPEN" in out:
        t.pending = None
        if word == "destroy":
            t.t_destroy = time.time()
            t.domain.destroy()
            t.say(f"virsh destroy {t.domain.name} with the guest's session open")
            return True
        if word == "revoke":
            t.t_revoke = time.time()
            t.nova("set-meta", t.spec_path, "--flavor", t.plain_flavor)
            t.say(f"Nova's Guest.set_metadata (live): the instance's flavor is now "
                  f"{t.plain_flavor}, not a GPU flavor ({time.time() - t.t_revoke:.1f} s)")
    return False


def verify(t):
    r = t.results
    for name, (rc, patterns, what) in EXPECT.items():
        st = r.steps.get(name)
        if st is None or st["rc"] is None:
            t.check(False, f"{what} (step {name} did not run to its end)")
            continue
        out = r.output(name)
        rc_ok = st["rc"] == 0 if rc == 0 else st["rc"] != 0
        missing = [getattr(p, "pattern", p) for p in patterns
                   if not (p.search(out) if isinstance(p, re.Pattern) else re.search(p, out, re.I))]
        ok = t.check(rc_ok and not missing,
                     f"{what} [{name}: exit {st['rc']}, {st['s']:.1f} s{', ' + t.driver_note if rc == 0 and '.' in name else ''}]"
                     + (f"; missing {missing}" if missing else ""))
        if not ok or t.args.verbose or name in ("quota", "cert_expired", "unreachable",
                                               "late_boot", "revoked", "after_revoke"):
            for line in out.splitlines()[-12:]:
                t.say(f"    {name} | {line}")
    enroll = r.output("enrollment")
    t.check(re.search(r"tcp://" + re.escape(t.net.host_ip), enroll) is not None,
            "the guest enrolled at boot (sluice-enroll.service) and its backend.conf points "
            "across the VM's network")
    m = re.search(r"enrolled instance " + re.escape(t.instance) + r" project (\S+) .* from (\S+) ",
                  t.agent.text())
    t.check(m is not None and m.group(1) == t.project and m.group(2) == t.net.guest_ip,
            f"the agent enrolled the instance from the guest's own port address "
            f"{t.net.guest_ip} (source-address check), project {t.project}")
    if t.args.source == "metadata":
        m = re.search(r"revoked \(no longer a GPU flavor\)", t.agent.text())
        t.check(m is not None, "the agent revoked the instance when its metadata lost the GPU "
                "flavor")
    else:
        usage(t)
        revocation(t)


def usage(t):
    end = time.time() + 30
    inst = None
    while time.time() < end and inst is None:
        r = subprocess.run([f"{t.build}/agent/sluice-usage", "--config", t.agent_conf,
                            "--format", "json"], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            for tenant in json.loads(r.stdout).get("tenant_usages", []):
                for s in tenant.get("server_usages", []):
                    if s.get("instance_id") == t.instance:
                        inst = (tenant.get("tenant_id"), s)
        if inst is None:
            time.sleep(1)
    t.check(inst is not None and inst[0] == t.project
            and inst[1].get("gpu_hours", 0) * 3600 >= 1.9 and inst[1].get("kernels", 0) >= 100,
            f"the usage report shows the instance's GPU time under project {t.project} "
            f"({t.driver_note})")
    if inst:
        s = inst[1]
        t.say(f"    usage | project {inst[0]} instance {s['instance_id']} flavor {s.get('flavor')} "
            f"gpu_hours {s.get('gpu_hours')} ({s.get('gpu_hours', 0) * 3600:.2f} s) "
            f"kernels {s.get('kernels')} "
            f"quota_refusals {s.get('quota_refusals')}")


def revocation(t):
    if not getattr(t, "t_destroy", None):
        t.check(False, "virsh destroy with an open session (the guest never opened it)")
        return
    pat_agent = re.compile(rf"instance {re.escape(t.instance)} \(project \S+\): revoked")
    pat_backend = re.compile(rf"instance {re.escape(t.instance)} revoked \(\S+\): (\d+) live")
    end = time.time() + 30
    seen = {}
    while time.time() < end and len(seen) < 2:
        text = t.agent.text()
        if "agent" not in seen and pat_agent.search(text):
            seen["agent"] = time.time() - t.t_destroy
        m = pat_backend.search(text)
        if "backend" not in seen and m:
            seen["backend"] = time.time() - t.t_destroy
            seen["sessions"] = int(m.group(1))
        time.sleep(0.05)
    t.check("agent" in seen and seen.get("sessions", 0) >= 1,
            f"virsh destroy ends the guest's session: agent revoked "
            f"{seen.get('agent', float('nan')):.1f} s and the backend ended "
            f"{seen.get('sessions', 0)} live session(s) {seen.get('backend', float('nan')):.1f} s "
            f"after the destroy (reboot debounce 1 s)")
    t.say("    (measured by polling the logs every 50 ms from the destroy)")
