#!/usr/bin/env python3
"""CTest vm.*: a real guest. The tenant's CUDA programs run inside a booted VM that enrolled
from Nova-built metadata (docs/vm-testing.md):

  the image of scripts/guest-image (Debian's packages, the sluice_guest role applied)
  -> sluice-novahook, sluice-agent and its backends in a network namespace with a bridge
     (the compute host's side of the tenant network), dnsmasq for the instance's fixed IP
  -> the domain XML and its <nova:instance> metadata from Nova's own code (tests/vm/nova_side.py,
     Debian's python3-nova), booted by the machine's libvirtd, QEMU/TCG, tap on the bridge
  -> enrollment material as Nova delivers it: --source config-drive (a config drive built by
     Nova's ConfigDriveBuilder, its vendor_data2.json from nova-hook through Nova's DynamicJSON
     client) or --source metadata (Nova's InstanceMetadata served at 169.254.169.254)
  -> in the guest: sluice-enroll.service at boot, the user-data job (tests/vm/guest_job.py):
     the tests/cuda programs through the frontend, across the VM's network, to the backend
  -> the failure paths, the usage report, the revocation at virsh destroy

CI runs it on the DRIVER TEST DOUBLE (plumbing, never a GPU result); every message says so.
Exit status: 0 passed, 1 failed, 77 skipped (not root, no libvirtd/QEMU, no python3-nova, image
or build missing: the message says which).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "scripts", "demo"))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import guest_job  # noqa: E402
import pki as demo_pki  # noqa: E402
import scenarios  # noqa: E402
from guestvm import (Domain, SerialLog, VmError, VmNetwork, boot_files,  # noqa: E402
                     instance_spec, programs_disk)
from procs import Daemon, DemoError, daemon_env  # noqa: E402

SKIP = 77
NOVA_PYTHON = "/usr/bin/python3"
FLAVOR, PLAIN_FLAVOR = "g1.vm", "m1.small"
QUOTA_MIB = 256
ENROLL_PORT, BACKEND_PORT, NOVAHOOK_PORT, REGISTRY_PORT = 7400, 47000, 9443, 7410
T0 = time.time()


def say(text):
    print(f"vm [{time.time() - T0:6.1f} s] {text}", flush=True)


class Failed(Exception):
    pass


class VmTest:
    def __init__(self, args):
        self.args, self.build = args, os.path.abspath(args.build)
        self.image = os.path.abspath(args.image or os.path.join(self.build, "vm", "image"))
        self.daemons, self.failures = [], []
        self.net = self.domain = self.work = None
        self.instance, self.project, self.user = str(uuid.uuid4()), uuid.uuid4().hex, uuid.uuid4().hex
        self.say, self.quota_mib, self.backend_port = say, QUOTA_MIB, BACKEND_PORT
        self.plain_flavor = PLAIN_FLAVOR
        self.pending = self.t_destroy = None
        self.driver_note = ("on the DRIVER TEST DOUBLE (plumbing, not a GPU result)"
                            if not args.driver else f"on the driver {args.driver}")

    # ------------------------------------------------------------------ helpers

    def check(self, cond, what):
        if cond:
            say(f"ok: {what}")
        else:
            say(f"FAIL: {what}")
            self.failures.append(what)
        return cond

    def daemon(self, name, argv, env=None):
        d = Daemon(name, argv, os.path.join(self.work, f"{name}.log"), env or daemon_env())
        self.daemons.append(d)
        return d

    def nova(self, *args, netns=False):
        """tests/vm/nova_side.py with Debian's python3 (python3-nova)."""
        argv = [NOVA_PYTHON, os.path.join(HERE, "nova_side.py"), *args]
        if netns:
            argv = self.net.wrap(argv)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                           stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise Failed(f"nova_side.py {args[0]}: exit {r.returncode}: {r.stderr[-3000:]}")
        bad = [line for line in r.stderr.splitlines() if "Error from dynamic vendordata" in line]
        if bad:  # Nova stores {} for the target and goes on: the guest would get no token
            raise Failed(f"nova_side.py {args[0]}: Nova's DynamicJSON call failed: {bad[0]}")
        return r.stdout

    # ------------------------------------------------------------------ preconditions

    def preconditions(self):
        """None when everything is there, else why the test is skipped."""
        if os.geteuid() != 0:
            return "needs root (network namespace, libvirtd, QEMU)"
        for tool in ("virsh", "qemu-system-x86_64", "dnsmasq", "ip", "mke2fs", "openssl"):
            if not shutil.which(tool):
                return f"{tool} is not installed (scripts/install-deps)"
        if subprocess.run([NOVA_PYTHON, "-c", "import nova.virt.libvirt.config, libvirt"],
                          capture_output=True).returncode != 0:
            return (f"Debian's python3-nova and python3-libvirt are not installed for "
                    f"{NOVA_PYTHON} (scripts/install-deps)")
        need = [f"{self.image}/{f}" for f in ("vmlinuz", "initrd.img", "root.img")]
        need += [f"{self.build}/{f}" for f in (
            "agent/sluice-agent", "agent/sluice-agent-ca", "agent/sluice-usage",
            "nova-hook/sluice-novahook", "backend/sluice-backend",
            "tests/double/libsluice-driver-double.so", "tests/cuda/vector_add.static")]
        missing = [p for p in need if not os.path.exists(p)]
        if missing:
            return "not built: " + ", ".join(missing) + " (cmake --build; scripts/guest-image)"
        r = subprocess.run([os.path.join(REPO, "scripts", "start-libvirtd")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return (r.stderr or r.stdout).strip()
        return None

    # ------------------------------------------------------------------ the host side

    def start_host(self):
        self.work = tempfile.mkdtemp(prefix="sluice-vm.")
        os.chmod(self.work, 0o711)  # QEMU (libvirt-qemu) and the backends (nobody) go through
        self.net = VmNetwork()
        self.net.up()
        say(f"network namespace {self.net.ns}: bridge {self.net.host_ip}/24 + 169.254.169.254, "
            f"the instance's port {self.net.guest_ip}")
        self.pki = demo_pki.make(os.path.join(self.work, "pki"), "sluice-vm-host")
        self.mac = "fa:16:3e:%02x:%02x:%02x" % tuple(os.urandom(3))
        self.daemon("dnsmasq", self.net.dnsmasq_argv(self.mac, self.work))
        self.start_novahook()
        self.start_agent()

    def start_novahook(self):
        d = os.path.join(self.work, "novahook")
        os.makedirs(d)
        p = self.pki
        conf = os.path.join(d, "novahook.conf")
        with open(conf, "w") as f:
            f.write(f"""listen = 127.0.0.1:{NOVAHOOK_PORT}
path = /v1/vendordata
tls_cert = {p['server'][1]}
tls_key = {p['server'][0]}
client_ca = {p['nova_ca']}
client_cn = nova-api
token_key = {p['token_key']}
token_ttl = 600
agent_ca = {p['agent_ca']}
database = {d}/registry.db
registry_listen = 127.0.0.1:{REGISTRY_PORT}
registry_ca = {p['registry_ca']}
registry_cert = {p['registry_server'][1]}
registry_key = {p['registry_server'][0]}
registry_hosts = sluice-vm-host
""")
        self.novahook = self.daemon("sluice-novahook", self.net.wrap(
            [f"{self.build}/nova-hook/sluice-novahook", "--config", conf]))
        self.novahook.wait_for(r"registry channel listening", 30, "nova-hook's registry channel")

    def start_agent(self):
        d = os.path.join(self.work, "agent")
        for sub in ("", "state"):
            os.makedirs(os.path.join(d, sub), mode=0o755, exist_ok=True)
        p = self.pki
        driver = self.args.driver or f"{self.build}/tests/double/libsluice-driver-double.so"
        self.agent_conf = os.path.join(d, "agent.conf")
        with open(self.agent_conf, "w") as f:
            f.write(f"""libvirt_uri = qemu:///system
# the tenant network's side of this host: the bridge in the test's network namespace
enroll_listen = {self.net.host_ip}:{ENROLL_PORT}
advertise_address = {self.net.host_ip}
backend_bind = {self.net.host_ip}
backend_port_min = {BACKEND_PORT}
backend_port_max = {BACKEND_PORT}
backend_user = nobody
backend_group = nogroup
backend_path = {self.build}/backend/sluice-backend
driver_path = {driver}
backend_stop_grace = 2
run_dir = {d}/run
state_dir = {d}/state
ca_dir = {d}/ca
token_public_key = {p['token_pub']}
enroll_token_issuer = sluice-nova-hook
registry_endpoint = tcp://127.0.0.1:{REGISTRY_PORT}
registry_ca = {p['registry_ca']}
registry_cert = {p['registry_agent'][1]}
registry_key = {p['registry_agent'][0]}
registry_slots = 4
reboot_debounce = 1

[tier vm]
gpu_share = 1
memory_quota = {QUOTA_MIB}M
max_sessions = 8

[flavor {FLAVOR}]
tier = vm
""")
        ca_dir = os.path.join(d, "ca")
        subprocess.run([f"{self.build}/agent/sluice-agent-ca", "init", "--dir", ca_dir],
                       check=True, capture_output=True)
        self.ca_dir = ca_dir
        self.agent = self.daemon("sluice-agent", self.net.wrap(
            [f"{self.build}/agent/sluice-agent", "--config", self.agent_conf]),
            daemon_env({"SLUICE_LOG_LEVEL": "info"}))
        self.agent.wait_for(r"libvirt: connected to", 30, "the agent's libvirt connection")
        self.agent.wait_for(r"enrollment open on", 30, "the agent's enrollment server")
        self.agent.wait_for(r"registry \S+: connected, registered as", 30,
                            "the agent's registration with nova-hook")
        say(f"sluice-novahook and sluice-agent up in {self.net.ns}; backends {self.driver_note}")

    # ------------------------------------------------------------------ the instance

    def spec(self, user_data):
        return instance_spec(self.work, self.net, self.mac, (self.instance, self.project, self.user),
                             self.pki, NOVAHOOK_PORT, self.args.source, user_data, FLAVOR,
                             self.args.memory_mb)

    def make_disks(self, steps):
        b = self.work
        boot_files(self.image, b)
        stage = os.path.join(b, "progs")
        os.makedirs(f"{stage}/bin")
        os.makedirs(f"{stage}/lib")
        for name in scenarios.binaries(steps):
            shutil.copy(f"{self.build}/tests/cuda/{name}", f"{stage}/bin/{name}")
        cuda_lib = os.path.join(self.args.cuda_root, "lib64")
        for f in os.listdir(cuda_lib):
            if re.match(r"libcudart\.so\.\d+$", f):
                shutil.copy(os.path.join(cuda_lib, f), f"{stage}/lib/{f}")
        scenarios.expired_credentials(self, f"{stage}/expired")
        programs_disk(stage, f"{b}/progs.img")

    def boot(self, steps):
        spec = self.spec(guest_job.script(steps))
        self.spec_path = os.path.join(self.work, "instance.json")
        with open(self.spec_path, "w") as f:
            json.dump(spec, f, indent=1)
        self.make_disks(steps)
        t0 = time.time()
        xml = self.nova("domain", self.spec_path)
        with open(os.path.join(self.work, "domain.xml"), "w") as f:
            f.write(xml)
        say(f"domain XML and its Nova metadata from Nova's libvirt driver classes "
            f"({time.time() - t0:.1f} s)")
        # Nova's spawn: the domain is defined, then the config drive is built, then it starts
        # (LibvirtDriver._create_guest: Guest.create, post_xml_callback, launch).
        self.domain = Domain(spec["domain"])
        self.domain.define(os.path.join(self.work, "domain.xml"))
        say(f"virsh define {spec['domain']}")
        if self.args.source == "config-drive":
            self.agent.wait_for(rf"registry: {self.instance} placed", 60,
                                "the agent's placement of the defined instance")
            say("the agent placed the defined instance with nova-hook's registry")
            out = self.nova("config-drive", self.spec_path, "--out", f"{self.work}/disk.config",
                            netns=True)
            say(out.strip())
        else:
            self.metadata = self.daemon("metadata-service", self.net.wrap(
                [NOVA_PYTHON, os.path.join(HERE, "nova_side.py"), "metadata", self.spec_path,
                 "--listen", "169.254.169.254:80"]))
            self.metadata.wait_for(r"listening on", 300, "Nova's metadata service")
            say("metadata service at 169.254.169.254:80: Nova's InstanceMetadata, "
                "vendordata through Nova's DynamicJSON client")
        self.domain.start()
        self.net.attach_tap()
        self.t_start = time.time()
        say(f"virsh start {spec['domain']} (QEMU/TCG): instance {self.instance}, project "
            f"{self.project}, flavor {FLAVOR}, port {self.net.guest_ip} ({self.mac})")
        self.console = SerialLog(spec["boot"]["console_log"])
        self.results_log = SerialLog(spec["boot"]["results_log"])
        self.results = guest_job.Results()

    def watch(self, on_signal, timeout):
        """Reads the console and the job's serial port until DONE (or a timeout)."""
        end = time.time() + timeout
        shown = re.compile(r"guest-firstboot|sluice-enroll\[|Welcome|login:|Reached target.*"
                           r"(Multi-User|Network is Online)")
        while time.time() < end:
            for line in self.console.new_lines():
                if shown.search(line):
                    say(f"console | {line.strip()}")
            for line in self.results_log.new_lines():
                kind, detail = self.results.feed(line)
                if kind in ("begin", "start", "done", "signal", "fatal"):
                    say(f"guest   | {line}")
                elif kind == "end":
                    say(f"guest   | {line}")
                elif kind == "output" and self.args.verbose:
                    say(f"guest   |   {line}")
                if kind == "signal":
                    on_signal(detail)
                if kind == "fatal":
                    raise Failed(f"the guest's job: {detail}")
            if self.results.done or scenarios.tick(self):
                return
            if self.agent.proc.poll() is not None:
                raise Failed("sluice-agent exited")
            time.sleep(0.2)
        raise Failed(f"the guest's job did not finish within {timeout} s "
                     f"(steps seen: {', '.join(self.results.order) or 'none'})")

    # ------------------------------------------------------------------ run

    def run(self):
        steps = scenarios.steps(self)
        self.start_host()
        self.boot(steps)
        self.watch(lambda s: scenarios.on_signal(self, s), self.args.timeout)
        scenarios.verify(self)

    def dump(self):
        for d in self.daemons:
            lines = d.text().splitlines()[-40:]
            print(f"\n---- {d.name} ({d.log}), last lines ----\n" + "\n".join(lines), flush=True)
        if self.work:
            for name in ("console.log", "results.log"):
                text = SerialLog(os.path.join(self.work, name)).text()
                print(f"\n---- {name}, last lines ----\n" + "\n".join(text.splitlines()[-60:]))

    def cleanup(self):
        if self.domain:
            self.domain.remove()
        while self.daemons:
            self.daemons.pop().stop()
        if self.net:
            self.net.down()
        if self.work and not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        elif self.work:
            say(f"kept {self.work}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--image", help="scripts/guest-image's output (default BUILD/vm/image)")
    ap.add_argument("--source", choices=["config-drive", "metadata"], default="config-drive",
                    help="how Nova hands the instance its enrollment material")
    ap.add_argument("--programs", default="ci",
                    help="ci (a set that fits CI's time), all, or a comma-separated list")
    ap.add_argument("--driver", help="the backends' driver (default: the test double)")
    ap.add_argument("--cuda-root", default=os.environ.get("SLUICE_CUDA_ROOT", "/usr/local/cuda"))
    ap.add_argument("--memory-mb", type=int, default=512, help="the flavor's memory")
    ap.add_argument("--timeout", type=int, default=900, help="for the guest's job, seconds")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("-v", "--verbose", action="store_true", help="every line the job prints")
    args = ap.parse_args()
    t = VmTest(args)
    why = t.preconditions()
    if why:
        print(f"vm: skipped: {why}", file=sys.stderr)
        return SKIP

    def on_signal(signo, _frame):
        raise KeyboardInterrupt(f"signal {signo}")

    signal.signal(signal.SIGTERM, on_signal)
    rc = 0
    try:
        t.run()
        if t.failures:
            rc = 1
    except (Failed, VmError, DemoError, KeyboardInterrupt, subprocess.SubprocessError) as ex:
        print(f"vm: FAILED: {ex}", file=sys.stderr, flush=True)
        rc = 1
    except Exception:  # a bug of the test itself
        traceback.print_exc()
        rc = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if rc:
            t.dump()
        t.cleanup()
    if t.failures:
        print("vm: FAILED checks:\n  " + "\n  ".join(t.failures), file=sys.stderr)
    print(f"vm: {'passed' if rc == 0 else 'FAILED'} ({args.source}) in {time.time() - T0:.0f} s, "
          f"CUDA {t.driver_note}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
