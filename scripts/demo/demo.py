#!/usr/bin/env python3
"""The Sluice demo: the whole stack on one machine (docs/demo.md). Run it through
scripts/run-demo, which installs the dependencies and builds first; as root.

  libvirtd (or libvirt's test driver when no daemon can run) -> sluice-novahook (vendordata +
  registry) -> the host CA and sluice-agent -> a diskless guest domain with Nova metadata for a
  GPU flavor -> the agent starts the tenant's sluice-backend -> the "guest" fetches vendordata
  the way Nova serves it and enrolls with sluice-enroll -> a CUDA program runs through our
  libcuda.so.1 on that backend (the real GPU when this machine has an NVIDIA driver, else the
  driver test double) -> the usage report -> the domain stops, the agent revokes -> cleanup.

The "guest" is a process on this host, not code inside the domain (the domain has no disk):
it does what the guest's sluice-enroll and CUDA programs do, over the same channels.
Everything lives in a temporary folder and is removed at the end, also on failure or Ctrl-C.
Exit status: 0 done, 1 a step failed (the logs are printed), 77 skipped (not root).
"""
import argparse
import base64
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
import uuid

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (we run as root)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pki as demo_pki  # noqa: E402
from metadata import MetadataService  # noqa: E402
from procs import Daemon, DemoError, clean, daemon_env, free_port, run  # noqa: E402
from virt import DOMAIN, Libvirt, domain_xml, nova_metadata  # noqa: E402
from vmguest import VmGuest  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77
FLAVOR = "g1.demo"
STEPS = 10
WORK_PREFIX = "sluice-demo."
SANITIZER = re.compile(r"ERROR: (Address|Leak)Sanitizer|: runtime error: ")
# The unprivileged account the agent runs the tenant backends as. A deployment creates a
# sluice-backend user (ansible/); the demo borrows nobody/nogroup so it adds no account.
BACKEND_USER, BACKEND_GROUP = "nobody", "nogroup"


T0 = time.time()


def step(n, title):
    print(f"\n[{n}/{STEPS}] {title}   (+{time.time() - T0:.0f} s)", flush=True)


def say(text):
    print("  " + text, flush=True)


def real_driver():
    """The NVIDIA driver's libcuda.so.1 on this machine, or None (as tests/e2e/run.py)."""
    for p in ["/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"]:
        if os.path.exists(p):
            return p
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    m = re.search(r"libcuda\.so\.1 .*=> (\S+)", out)
    return m.group(1) if m else None


def asan_runtime(lib):
    """The ASan runtime a sanitized build's libcuda.so.1 needs preloaded into a program that is
    not sanitized (NVIDIA's cudart), or None (see tests/e2e/run.py)."""
    out = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    m = re.search(r"^\s*(libasan\.so[.0-9]*)\s*=>\s*(\S+)", out, re.M)
    return m.group(2) if m else None


def remove_stale_work():
    """Work folders of earlier runs that were killed (their demo.pid is not alive)."""
    for d in glob.glob(os.path.join(tempfile.gettempdir(), WORK_PREFIX + "*")):
        try:
            with open(os.path.join(d, "demo.pid")) as f:
                pid = int(f.read())
            if os.path.exists(f"/proc/{pid}"):
                continue
        except (OSError, ValueError):
            pass
        shutil.rmtree(d, ignore_errors=True)


class Demo:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.bin = {}
        self.daemons = []
        self.meta = None
        self.work = None
        self.virt = None
        self.t0 = time.time()
        self.host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:63] or "sluice-demo"
        self.instance = str(uuid.uuid4())
        self.project = uuid.uuid4().hex  # Keystone project ids: 32 hex digits
        self.user = uuid.uuid4().hex
        self.sanitizer_reports = []  # what printed one (a -DSLUICE_SANITIZE=ON build)
        self.vm = None  # --guest vm: the real guest (vmguest.py)
        self.say_ = say

    # ------------------------------------------------------------------ helpers

    def find_binaries(self):
        b = self.build
        want = {
            "agent": f"{b}/agent/sluice-agent", "agent-ca": f"{b}/agent/sluice-agent-ca",
            "novahook": f"{b}/nova-hook/sluice-novahook",
            "registry": f"{b}/nova-hook/sluice-registry",
            "backend": f"{b}/backend/sluice-backend",
            "enroll": f"{b}/frontend/enroll/sluice-enroll",
            "libcuda": f"{b}/frontend/libcuda.so.1",
            "double": f"{b}/tests/double/libsluice-driver-double.so",
            "program": f"{b}/tests/cuda/{self.args.program}.static",
        }
        missing = [p for p in want.values() if not os.path.exists(p)]
        if missing:
            raise DemoError("not built: " + ", ".join(missing) + " (scripts/run-demo builds them)")
        self.bin = want
        usage = f"{b}/agent/sluice-usage"
        self.bin["usage"] = usage if os.path.exists(usage) else None

    def cmd(self, argv, **kw):
        """procs.run, plus a look for sanitizer reports in the output."""
        rc, out = run(argv, **kw)
        if SANITIZER.search(out):
            self.sanitizer_reports.append(os.path.basename(argv[0]))
        return rc, out

    def daemon(self, name, argv, env=None):
        if self.vm and name != "dnsmasq":  # on the tenant network: in the guest's namespace
            argv = self.vm.wrap(argv)
        d = Daemon(name, argv, os.path.join(self.work, f"{name}.log"), env)
        self.daemons.append(d)
        return d

    # ------------------------------------------------------------------ steps

    def step_libvirt(self):
        step(1, "libvirt: the hypervisor the agent watches")
        self.virt = Libvirt(REPO, self.work)
        if self.args.libvirt != "test" and self.virt.start_daemon():
            say(f"{self.virt.uri}: {self.virt.note}")
            if self.args.guest == "vm":
                self.vm = VmGuest(self)
                self.vm.network_up()
                say(f"--guest vm: network namespace {self.vm.net.ns}, bridge "
                    f"{self.vm.host_ip}/24, the instance's port {self.vm.net.guest_ip} by DHCP")
            if self.virt.remove_leftover():
                say(f"removed the domain {DOMAIN} left over by an interrupted run")
            return
        if self.args.libvirt == "qemu" or self.args.guest == "vm":
            raise DemoError(f"no libvirtd: {self.virt.note}")
        why = "--libvirt test" if self.args.libvirt == "test" else self.virt.note
        say(f"NO libvirtd here ({why}): using libvirt's TEST DRIVER instead.")
        say("The test driver lives inside each process that opens it: the agent sees the demo's")
        say("domain running from its start, and the demo cannot stop it from outside (step 10).")

    def step_pki(self):
        step(2, "throwaway credentials (openssl CLI; deleted at the end)")
        self.pki = demo_pki.make(os.path.join(self.work, "pki"), self.host)
        say("nova-hook: HTTPS server certificate (SAN 127.0.0.1) and its Ed25519 token key")
        say("Nova: the client certificate nova-api presents to nova-hook (CN nova-api)")
        say(f"registry channel: a CA, nova-hook's certificate, this agent's (CN {self.host}, "
            f"OU sluice-agent)")

    def step_novahook(self):
        step(3, "sluice-novahook: vendordata over HTTPS for Nova, the registry for agents")
        d = os.path.join(self.work, "novahook")
        os.makedirs(d)
        self.registry_port = free_port()
        self.registry_db = os.path.join(d, "registry.db")
        p = self.pki
        conf = os.path.join(d, "novahook.conf")
        with open(conf, "w") as f:
            f.write(f"""# sluice-novahook, demo configuration (docs/nova-hook.md)
listen = 127.0.0.1:0
path = /v1/vendordata
tls_cert = {p['server'][1]}
tls_key = {p['server'][0]}
client_ca = {p['nova_ca']}
client_cn = nova-api
token_key = {p['token_key']}
token_ttl = 600
agent_ca = {p['agent_ca']}
database = {self.registry_db}
threads = 2
registry_listen = 127.0.0.1:{self.registry_port}
registry_ca = {p['registry_ca']}
registry_cert = {p['registry_server'][1]}
registry_key = {p['registry_server'][0]}
registry_hosts = {self.host}
""")
        self.cmd([self.bin["novahook"], "--config", conf, "--check-config"])
        self.novahook = self.daemon("sluice-novahook", [self.bin["novahook"], "--config", conf])
        m = self.novahook.wait_for(r"listening on https://127\.0\.0\.1:(\d+)/", 20,
                                   "its HTTPS listener")
        self.novahook.wait_for(r"registry channel listening", 10, "its registry channel")
        self.novahook_port = int(m.group(1))
        self.novahook.show_new(r"listening")

    def write_agent_config(self):
        d = os.path.join(self.work, "agent")
        # The backends run as nobody: the folders above run_dir and state_dir must be
        # traversable (mkdtemp made the work folder 0700); the agent makes the rest itself.
        os.chmod(self.work, 0o711)
        for sub in ("", "state"):
            os.makedirs(os.path.join(d, sub), mode=0o755, exist_ok=True)
            os.chmod(os.path.join(d, sub), 0o755)
        self.enroll_port, self.backend_port = free_port(), free_port()
        # the session workers' direct ports: the agent's default range, unless the backend's
        # port (any free one) fell in it, which the agent refuses
        clash = 48000 <= self.backend_port <= 49999
        self.direct_ports = (50000, 51999) if clash else (48000, 49999)
        # Issue 6's /metrics comes with sluice-usage; older agents refuse the key.
        self.metrics_port = free_port() if self.bin["usage"] else None
        host = self.vm.host_ip if self.vm else "127.0.0.1"
        metrics = f"metrics_listen = {host}:{self.metrics_port}\n" if self.metrics_port else ""
        self.driver = self.args.driver or (None if self.args.double else real_driver())
        self.on_gpu = self.driver is not None
        self.driver = self.driver or self.bin["double"]
        p = self.pki
        self.agent_conf = os.path.join(d, "agent.conf")
        with open(self.agent_conf, "w") as f:
            f.write(f"""# sluice-agent, demo configuration (docs/agent.md)
libvirt_uri = {self.virt.uri or 'qemu:///system'}
# Guests reach the enrollment server and the backends on this address: the loopback address
# for the demo's "guest" process, the bridge of the guest's network with --guest vm.
enroll_listen = {host}:{self.enroll_port}
advertise_address = {host}
backend_bind = {host}
backend_port_min = {self.backend_port}
backend_port_max = {self.backend_port}
direct_port_min = {self.direct_ports[0]}
direct_port_max = {self.direct_ports[1]}
backend_user = {BACKEND_USER}
backend_group = {BACKEND_GROUP}
backend_path = {self.bin['backend']}
# {'the NVIDIA driver of this machine' if self.on_gpu else
   'no NVIDIA driver here: the driver test double (plumbing only, never a GPU result)'}
driver_path = {self.driver}
backend_stop_grace = 2
run_dir = {d}/run
state_dir = {d}/state
ca_dir = {d}/ca
token_public_key = {p['token_pub']}
enroll_token_issuer = sluice-nova-hook
registry_endpoint = tcp://127.0.0.1:{self.registry_port}
registry_ca = {p['registry_ca']}
registry_cert = {p['registry_agent'][1]}
registry_key = {p['registry_agent'][0]}
registry_slots = 4
reboot_debounce = 1
{metrics}
[tier gold]
gpu_share = 1
memory_quota = 2G
max_sessions = 4

# The demo's GPU flavor (in a cloud: bootstrap-flavors.sh, with resources:CUSTOM_GPU_REMOTE_SLOT=1)
[flavor {FLAVOR}]
tier = gold
""")

    def step_agent(self):
        step(4, "the host CA and sluice-agent")
        self.write_agent_config()
        ca_dir = os.path.join(self.work, "agent", "ca")
        self.cmd([self.bin["agent-ca"], "init", "--dir", ca_dir])
        self.cmd([self.bin["agent"], "--config", self.agent_conf, "--check-config"])
        # info: the agent logs each registry report and enrollment at that level
        self.agent = self.daemon("sluice-agent", [self.bin["agent"], "--config", self.agent_conf],
                                 daemon_env({"SLUICE_LOG_LEVEL": "info"}))
        self.agent.wait_for(r"libvirt: connected to", 20, "its libvirt connection")
        self.agent.wait_for(r"enrollment open on", 20, "its enrollment server")
        self.agent.wait_for(r"registry \S+: connected, registered as", 20,
                            "its registration with nova-hook's registry")
        self.agent.show_new(r"libvirt:|enrollment open|registry|started|GPU")
        # the agent registered its GPUs (listed by the backend on the driver, never loaded by
        # the agent itself): the registry counts them
        self.cmd([self.bin["registry"], "--db", self.registry_db, "hosts"])
        _, out = self.cmd([self.bin["registry"], "--db", self.registry_db, "--json", "hosts"],
                          show=False)
        hosts = json.loads(out)
        if not hosts or not hosts[0]["gpus"]:
            raise DemoError(f"the registry knows no GPU of this host: {out}")
        say(f"driver for the backends: {self.driver}")
        say("  = " + ("the NVIDIA driver of this machine: CUDA runs on the real GPU" if self.on_gpu
                      else "the DRIVER TEST DOUBLE (no NVIDIA driver here): plumbing only"))

    def domain(self):
        meta = nova_metadata(self.instance, self.project, self.user, FLAVOR, "127.0.0.1")
        return domain_xml(self.virt.mode or "test", self.instance, meta)

    def step_domain(self):
        if self.vm:
            step(5, f"a Nova GPU instance, flavor {FLAVOR}: a real guest VM (--guest vm)")
            say(f"instance (= domain uuid) {self.instance}, project {self.project}")
            self.vm.boot(FLAVOR)
            self.wait_instance()
            return
        step(5, f"a Nova GPU instance: domain {DOMAIN}, flavor {FLAVOR}, with Nova's metadata")
        say(f"instance (= domain uuid) {self.instance}, project {self.project}")
        # The agent accepts an enrollment only from one of the instance's port IPs (agent/
        # enroll.c, check 7). The demo's "guest" is a process on this host reaching the agent
        # over loopback, so its source address is 127.0.0.1: that is the fixed IP written into
        # the port of this metadata. In a cloud it is the Neutron port's address, and the
        # agent refuses connections from anywhere else.
        say("port IP in the metadata: 127.0.0.1 (the demo's guest is a process on this host)")
        if self.virt.mode == "qemu":
            t0 = time.time()
            path = self.virt.define_and_start(self.domain())
            say(f"$ virsh -c {self.virt.uri} define {os.path.basename(path)} && virsh start "
                f"{DOMAIN}   (diskless QEMU/TCG guest; {time.time() - t0:.0f} s)")
        self.wait_instance()

    def wait_instance(self):
        pattern = rf"instance {self.instance} \(.*\): running, GPU flavor"
        self.agent.wait_for(pattern, 30, "the instance recognised as a GPU instance")
        self.agent.wait_for(rf"project {self.project}: backend pid \d+ ready", 30,
                            "the tenant backend's hello")
        self.agent.wait_for(rf"registry: {self.instance} placed", 15,
                            "the placement reported to the registry")
        self.agent.show_new(r"instance|backend|registry")
        self.cmd([self.bin["registry"], "--db", self.registry_db, "instances"])

    def step_enroll(self):
        step(6, "the guest enrolls: vendordata token -> sluice-enroll -> client certificate")
        if self.vm:
            say("inside the guest: sluice-enroll.service at boot reads the config drive's")
            say("vendor_data2.json (Nova's DynamicJSON call to nova-hook made it) (QEMU/TCG: minutes)")
            pat = re.compile(rf"enrolled instance {self.instance} .* from {self.vm.net.guest_ip} ")
            self.vm.follow(lambda: pat.search(self.agent.text()), 900, "enrollment")
            self.agent.show_new(r"enroll|grant")
            say(f"the agent enrolled the guest from its own port address {self.vm.net.guest_ip}")
            return
        self.meta = MetadataService(self.novahook_port, self.pki,
                                    {"127.0.0.1": (self.instance, self.project, "demo-vm")})
        say(f"metadata API stand-in (plays Nova's) at {self.meta.url}:")
        say("it POSTs the instance's ids to nova-hook with Nova's client certificate")
        self.guest_dir = os.path.join(self.work, "guest", "etc-sluice")  # /etc/sluice in a guest
        os.makedirs(os.path.dirname(self.guest_dir))
        rc, out = self.cmd([self.bin["enroll"], "--source", self.meta.url,
                            "--dir", self.guest_dir], check=False)
        for _source, _instance, status, data in self.meta.calls:
            tok = data.get("token", "")
            claims = {}
            if tok.count(".") == 2:
                body = tok.split(".")[1]
                claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            say(f"nova-hook answered {status}: token sub={claims.get('sub')} "
                f"project_id={claims.get('project_id')} exp in "
                f"{claims.get('exp', 0) - claims.get('iat', 0)} s, enroll_endpoint "
                f"{data.get('enroll_endpoint')}")
        self.agent.show_new(r"enroll|grant")
        if rc != 0:
            raise DemoError(f"sluice-enroll failed (exit status {rc})")
        say(f"files written for the frontend in {self.guest_dir}:")
        for name in sorted(os.listdir(self.guest_dir)):
            st = os.stat(os.path.join(self.guest_dir, name))
            say(f"  {oct(st.st_mode & 0o777)[2:]:>4}  {name}")
        with open(os.path.join(self.guest_dir, "backend.conf")) as f:
            for line in f.read().splitlines():
                say("    | " + line)
        # A stolen token is worth nothing once used: the same vendordata again is refused.
        replay = os.path.join(self.work, "guest", "vendor_data2.json")
        with open(replay, "w") as f:
            json.dump({"sluice": self.meta.calls[-1][3]}, f)
        say("the same token once more (as a thief would replay it) must be refused:")
        rc, _ = self.cmd([self.bin["enroll"], "--source", replay, "--renew", "--dir",
                          os.path.join(self.work, "guest", "replay")], check=False)
        self.agent.show_new(r"refused enrollment")
        if rc != 3:
            raise DemoError(f"a replayed token was not refused (sluice-enroll exit status {rc})")

    def step_cuda(self):
        where = ("on the REAL GPU" if self.on_gpu else
                 "on the DRIVER TEST DOUBLE (no GPU here: this proves the plumbing, "
                 "not a GPU result)")
        step(7, f"a CUDA program through Sluice, {where}")
        if self.vm:
            prog = f"{self.args.program}.static"
            say(f"inside the guest: the user-data job runs /mnt/progs/bin/{prog} (nvcc-built,")
            say("NVIDIA's static cudart) with the image's libcuda.so.1, across the VM's network")
            r = self.vm.results
            self.vm.follow(lambda: r.steps.get(prog, {}).get("rc") is not None, 600,
                           f"end of {prog}")
            self.agent.show_new(r"sluice-backend: session")
            if r.steps[prog]["rc"] != 0 or f"PASS {self.args.program}" not in r.output(prog):
                raise DemoError(f"{prog} failed in the guest (exit status {r.steps[prog]['rc']})")
            say(f"{self.args.program} passed inside the guest "
                + ("on the real GPU" if self.on_gpu else
                   "on the driver test double (not a GPU result)"))
            return
        program = self.bin["program"]
        frontend = os.path.dirname(self.bin["libcuda"])
        cuda_lib = os.path.join(self.args.cuda_root, "lib64")
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = ":".join(
            p for p in [frontend, cuda_lib, env.get("LD_LIBRARY_PATH", "")] if p)
        env["SLUICE_CONFIG_DIR"] = self.guest_dir
        asan = asan_runtime(self.bin["libcuda"])
        if asan:  # a sanitized build's libcuda.so.1 in NVIDIA's unsanitized program
            env["LD_PRELOAD"] = asan
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        say(f"{os.path.basename(program)}: nvcc-built, NVIDIA's static cudart, unchanged")
        say(f"LD_LIBRARY_PATH={frontend}:...  (our libcuda.so.1 first)")
        say(f"SLUICE_CONFIG_DIR={self.guest_dir}  (what sluice-enroll wrote)")
        rc, out = self.cmd([program], env=env, timeout=120, check=False)
        self.agent.show_new(r"sluice-backend: session")
        if rc != 0 or f"PASS {self.args.program}" not in out:
            raise DemoError(f"{self.args.program} failed (exit status {rc})")
        say(f"{self.args.program} passed " + ("on the real GPU" if self.on_gpu else
                                               "on the driver test double (not a GPU result)"))

    def step_usage(self):
        step(8, "the usage report (sluice-usage, from the agent's usage store)")
        if not self.bin["usage"]:
            say("sluice-usage is not built in this tree yet (issue 6): no report to print.")
            say("The backend's usage records reach the agent at session end; see docs/usage.md.")
            return
        argv = [self.bin["usage"], "--config", self.agent_conf]
        # The backend sends the session's usage record when the session ends; the agent stores
        # it durably before acknowledging it. Wait for it (a few seconds at most).
        end = time.time() + 10
        while time.time() < end:
            rc, out = self.cmd(argv + ["--format", "csv"], check=False, show=False)
            if rc == 0 and self.instance in out:
                break
            time.sleep(0.5)
        else:
            say(f"(no usage record of instance {self.instance} after 10 s)")
        self.agent.show_new(r"usage")
        self.cmd(argv, check=False)
        say("(also --format csv, json in the shape of Nova's os-simple-tenant-usage, svg)")
        url = f"http://{self.vm.host_ip if self.vm else '127.0.0.1'}:{self.metrics_port}/metrics"
        try:
            if self.vm:  # the agent listens in the guest network's namespace
                text = subprocess.run(self.vm.wrap([sys.executable, "-c",
                                      "import sys,urllib.request as u; sys.stdout.write("
                                      f"u.urlopen('{url}', timeout=5).read().decode())"]),
                                      capture_output=True, text=True, check=True).stdout
            else:
                with urllib.request.urlopen(url, timeout=5) as r:
                    text = r.read().decode()
        except (OSError, subprocess.CalledProcessError) as ex:
            raise DemoError(f"{url}: {ex}")
        # The instance's series, their labels printed once; then the agent's own gauges.
        series = re.findall(r"^(sluice_\w+)\{([^}]*instance_id=\"" + re.escape(self.instance)
                            + r"\"[^}]*)\} (\S+)$", text, re.M)
        labels = max((s[1] for s in series), key=len, default="")
        say(f"the agent's Prometheus metrics ({url}) of {{{labels}}}:")
        for name, _labels, value in series:
            say(f"    {name} {value}")
        for line in text.splitlines():
            if line.startswith("sluice_agent_"):
                say("    " + line)
        for want in ['sluice_agent_enrollments_total{result="OK"} 1',
                     'sluice_agent_enrollments_total{result="REPLAYED"} 1']:
            if want not in text:
                raise DemoError(f"the agent's metrics lack {want}")

    def step_stop(self):
        step(9, "the instance stops: the agent revokes it and stops the tenant backend")
        if self.virt.mode != "qemu":
            say("test driver: the domain lives in the agent's process and cannot be stopped from")
            say("here; the agent's own shutdown (step 10) ends the backend instead.")
            return
        self.cmd(["virsh", "-c", self.virt.uri, "destroy",
                  self.vm.domain.name if self.vm else DOMAIN])
        t0 = time.time()
        self.agent.wait_for(rf"instance {self.instance} \(project {self.project}\): revoked", 20,
                            "the revocation")
        self.agent.wait_for(rf"project {self.project}: backend stopped", 20,
                            "the backend's stop")
        self.agent.show_new(r"instance|backend|registry|revok")
        say(f"revoked and backend stopped {time.time() - t0:.1f} s after the destroy")
        self.virt.undefine()
        self.cmd([self.bin["registry"], "--db", self.registry_db, "instances"])

    def step_shutdown(self):
        step(10, "stop everything and clean up")
        self.cleanup(quiet=False)

    # ------------------------------------------------------------------ cleanup

    def cleanup(self, quiet=True):
        """Idempotent; runs on success, failure and signals."""
        if self.meta:
            self.meta.close()
            self.meta = None
        if self.vm:
            self.vm.cleanup()
        if self.virt:
            self.virt.undefine()
        while self.daemons:
            d = self.daemons.pop()
            rc = d.stop()
            if SANITIZER.search(d.text()):
                self.sanitizer_reports.append(f"{d.name} (log below)")
                print(f"---- {d.name}: sanitizer report ----\n" + d.text()[-6000:])
            if not quiet:
                d.show_new(r"stopp|shut|revok|signal")
                say(f"{d.name} stopped (exit status {rc})")
        if self.vm:
            self.vm.network_down()
        if self.virt:
            if self.virt.started or self.virt.systemd_started:
                self.virt.stop_daemon()
                if not quiet:
                    say("libvirtd stopped (the demo had started it)")
            self.virt = None
        if self.work and not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
            if not quiet:
                say(f"removed {self.work}")
        elif self.work and not quiet:
            say(f"kept {self.work} (--keep)")

    def dump_logs(self):
        for d in self.daemons:
            print(f"\n---- {d.name} log ({d.log}), last lines ----")
            lines = d.text().splitlines()[-40:]
            print("\n".join(clean(line) for line in lines) or "(empty)")

    # ------------------------------------------------------------------ main

    def run(self):
        self.find_binaries()
        remove_stale_work()
        self.work = tempfile.mkdtemp(prefix=WORK_PREFIX)
        with open(os.path.join(self.work, "demo.pid"), "w") as f:
            f.write(str(os.getpid()))
        print(f"Sluice demo: the whole stack on this machine (work folder {self.work})")
        self.step_libvirt()
        self.step_pki()
        self.step_novahook()
        if self.virt.mode is None and not self.vm:  # the test driver's file holds the domain
            self.virt.start_test_driver(self.domain())
        self.step_agent()
        self.step_domain()
        self.step_enroll()
        self.step_cuda()
        self.step_usage()
        self.step_stop()
        mode = self.virt.mode
        self.step_shutdown()
        print(f"\nDemo complete in {time.time() - self.t0:.0f} s: CUDA ran "
              + ("on the real GPU" if self.on_gpu else
                 "on the driver test double (plumbing, not a GPU result)")
              + f"; libvirt: {'libvirtd (QEMU/TCG guest)' if mode == 'qemu' else 'test driver'}"
              + ("; the guest was a real VM (--guest vm)." if self.args.guest == "vm" else "."))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="CMake build folder")
    ap.add_argument("--libvirt", choices=["auto", "qemu", "test"], default="auto",
                    help="auto: libvirtd, else the test driver (default); qemu: libvirtd or "
                         "fail; test: the test driver")
    drv = ap.add_mutually_exclusive_group()
    drv.add_argument("--double", action="store_true",
                     help="the driver test double even when an NVIDIA driver is present")
    drv.add_argument("--driver", help="the driver library the backends load")
    ap.add_argument("--program", default="vector_add",
                    help="the tests/cuda program to run (default vector_add)")
    ap.add_argument("--cuda-root", default=os.environ.get("SLUICE_CUDA_ROOT", "/usr/local/cuda"))
    ap.add_argument("--guest", choices=["process", "vm"], default="process",
                    help="process: a process on this host plays the guest (default); vm: a real "
                         "guest VM of scripts/guest-image's image (libvirtd, python3-nova)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs, configs)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("demo: skipped: needs root (libvirtd, backends run as nobody)", file=sys.stderr)
        return SKIP

    demo = Demo(args)

    def on_signal(signo, _frame):
        raise KeyboardInterrupt(f"signal {signo}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    rc = 0
    try:
        demo.run()
    except (DemoError, KeyboardInterrupt) as ex:
        print(f"\ndemo: FAILED: {ex or 'interrupted'}", file=sys.stderr, flush=True)
        demo.dump_logs()
        rc = 1
    except Exception as ex:  # a bug of the demo itself, or the openssl CLI failing
        traceback.print_exc()
        print(f"\ndemo: FAILED: {type(ex).__name__}: {ex}", file=sys.stderr, flush=True)
        demo.dump_logs()
        rc = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        demo.cleanup()
    if demo.sanitizer_reports:
        print("demo: FAILED: sanitizer reports from " + ", ".join(demo.sanitizer_reports),
              file=sys.stderr)
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
