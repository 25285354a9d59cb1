"""libvirt for the demo: a libvirtd serving qemu:///system (started when none runs, stopped again
at the end when the demo started it), or libvirt's test driver when no daemon can run; and the
guest domain that carries Nova's metadata."""
import os
import re
import shutil
import signal
import subprocess
import time

from procs import DemoError

QEMU_URI = "qemu:///system"
NOVA_NS = "http://openstack.org/xmlns/libvirt/nova/1.1"
DOMAIN = "sluice-demo"
# Marks the domain as the demo's (with the pid of the run): a domain of that name is removed
# only when it carries this and its run is gone (an interrupted run's leftover).
DESCRIPTION = "Sluice demo instance (scripts/run-demo), safe to delete; run pid"


def _virsh(uri, *args, timeout=30):
    return subprocess.run(["virsh", "-q", "-c", uri, *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _probe():
    try:
        return _virsh(QEMU_URI, "uri", timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _pids(name):
    r = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True)
    return {int(p) for p in r.stdout.split()}


class Libvirt:
    """mode 'qemu' (a real libvirtd, the domain is a diskless QEMU/TCG guest) or 'test' (the test
    driver: the domain exists inside the agent's own process, see start_test_driver)."""

    def __init__(self, repo, work):
        self.repo, self.work = repo, work
        self.mode = self.uri = None
        self.started = []  # pids of daemons this demo started
        self.systemd_started = False
        self.domain_defined = False
        self.note = ""

    # ------------------------------------------------------------------ the daemon

    def start_daemon(self):
        """qemu:///system reachable: True (self.note says whether the demo started it)."""
        if shutil.which("virsh") is None:
            self.note = "virsh not installed (scripts/install-deps installs libvirt-clients)"
            return False
        if _probe():
            self.mode, self.uri, self.note = "qemu", QEMU_URI, "libvirtd already running"
            return True
        with open("/proc/1/comm") as f:
            systemd = f.read().strip() == "systemd"
        before = _pids("libvirtd") | _pids("virtlogd")
        r = subprocess.run([os.path.join(self.repo, "scripts", "start-libvirtd")],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            lines = (r.stdout + r.stderr).strip().splitlines()
            self.note = lines[-1] if lines else f"start-libvirtd: exit status {r.returncode}"
            return False
        if systemd and subprocess.run(["systemctl", "is-active", "--quiet", "libvirtd"],
                                      capture_output=True).returncode == 0:
            self.systemd_started = True  # it was not answering before: systemd started it now
        else:  # scripts/start-libvirtd ran the daemons itself (containers)
            self.started = sorted((_pids("libvirtd") | _pids("virtlogd")) - before)
        self.mode, self.uri = "qemu", QEMU_URI
        self.note = "libvirtd started by the demo (stopped again at the end)"
        return True

    def start_test_driver(self, xml):
        """libvirt's test driver from a file: every process that opens test:///FILE gets its
        own in-memory copy of the domains in FILE, running. The agent sees our domain running
        at start, but nothing outside the agent's process can start or stop it."""
        path = os.path.join(self.work, "libvirt-test-driver.xml")
        with open(path, "w") as f:
            f.write(f"<node>\n{xml}\n</node>\n")
        self.mode, self.uri = "test", "test://" + path

    def stop_daemon(self):
        """Only what start_daemon started, by pid (or through systemd)."""
        if self.systemd_started:
            subprocess.run(["systemctl", "stop", "libvirtd"], capture_output=True)
        for pid in self.started:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.time() + 10
        while any(os.path.exists(f"/proc/{p}") for p in self.started) and time.time() < end:
            time.sleep(0.1)

    # ------------------------------------------------------------------ the domain

    def remove_leftover(self):
        """A domain of an interrupted earlier run (same name, our description) goes first."""
        r = _virsh(self.uri, "desc", DOMAIN)
        if r.returncode != 0:
            return False
        m = re.search(re.escape(DESCRIPTION) + r" (\d+)", r.stdout)
        if not m:
            raise DemoError(f"a domain named {DOMAIN} exists and is not the demo's; "
                            f"rename or remove it first")
        if int(m.group(1)) != os.getpid() and os.path.exists(f"/proc/{m.group(1)}"):
            raise DemoError(f"another demo (pid {m.group(1)}) is running; wait for it")
        _virsh(self.uri, "destroy", DOMAIN)
        _virsh(self.uri, "undefine", DOMAIN)
        return True

    def define_and_start(self, xml):
        path = os.path.join(self.work, f"{DOMAIN}.xml")
        with open(path, "w") as f:
            f.write(xml)
        # Set first: a signal may interrupt virsh after libvirtd defined the domain.
        self.domain_defined = True
        for args in (["define", path], ["start", DOMAIN]):
            r = _virsh(self.uri, *args, timeout=60)
            if r.returncode != 0:
                raise DemoError(f"virsh {args[0]}: {(r.stderr or r.stdout).strip()}")
        return path

    def destroy(self):
        r = _virsh(self.uri, "destroy", DOMAIN)
        if r.returncode != 0:
            raise DemoError(f"virsh destroy: {(r.stderr or r.stdout).strip()}")

    def undefine(self):
        if self.mode == "qemu" and self.domain_defined:
            _virsh(self.uri, "destroy", DOMAIN)
            _virsh(self.uri, "undefine", DOMAIN)
            self.domain_defined = False


def nova_metadata(instance, project, user, flavor, ip):
    """The <nova:instance> element Nova's libvirt driver writes into the domain's <metadata>
    (namespace 1.1, the shape of Nova's own test data: see agent/novameta.h)."""
    return f"""<nova:instance xmlns:nova="{NOVA_NS}">
      <nova:package version="sluice-demo"/>
      <nova:name>demo-vm</nova:name>
      <nova:creationTime>{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())}</nova:creationTime>
      <nova:flavor name="{flavor}">
        <nova:memory>64</nova:memory>
        <nova:disk>0</nova:disk>
        <nova:swap>0</nova:swap>
        <nova:ephemeral>0</nova:ephemeral>
        <nova:vcpus>1</nova:vcpus>
      </nova:flavor>
      <nova:owner>
        <nova:user uuid="{user}">demo-user</nova:user>
        <nova:project uuid="{project}">demo-project</nova:project>
      </nova:owner>
      <nova:ports>
        <nova:port uuid="6d1c3f3e-0a5b-4f1e-9c7a-5e1ce0de0001">
          <nova:ip type="fixed" address="{ip}" ipVersion="4"/>
        </nova:port>
      </nova:ports>
    </nova:instance>"""


def domain_xml(mode, instance, metadata):
    """A diskless guest: QEMU/TCG (no KVM needed) for libvirtd, type 'test' for the test driver.
    The domain uuid is the Nova instance uuid, as Nova makes it."""
    if mode == "test":
        return f"""<domain type="test">
  <name>{DOMAIN}</name>
  <uuid>{instance}</uuid>
  <description>{DESCRIPTION} {os.getpid()}</description>
  <memory unit="MiB">64</memory>
  <os><type>hvm</type></os>
  <metadata>
    {metadata}
  </metadata>
</domain>"""
    emulator = shutil.which("qemu-system-x86_64") or "/usr/bin/qemu-system-x86_64"
    return f"""<domain type="qemu">
  <name>{DOMAIN}</name>
  <uuid>{instance}</uuid>
  <description>{DESCRIPTION} {os.getpid()}</description>
  <memory unit="MiB">64</memory>
  <vcpu>1</vcpu>
  <os><type arch="x86_64" machine="pc">hvm</type></os>
  <devices><emulator>{emulator}</emulator></devices>
  <metadata>
    {metadata}
  </metadata>
</domain>"""
