"""A Sluice compute host on this machine, real processes only, for the agent's crash, port and
accounting tests (test_restart.py): a libvirtd serving qemu:///system (scripts/start-libvirtd)
with diskless QEMU/TCG domains carrying Nova's metadata, the real sluice-agent (restarted and
killed at will), the real sluice-backend it spawns on the driver test double (plumbing only,
never a GPU result), sluice-enroll with enrollment tokens signed here (Ed25519 with the openssl
command line: the JWS nova-hook signs), and the nvcc-built programs of tests/cuda through our
libcuda.so.1. Needs root (libvirtd, backends run as nobody); everything is removed at the end."""
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

QEMU = "qemu:///system"
NOVA_NS = "http://openstack.org/xmlns/libvirt/nova/1.1"
FLAVOR = "g1.restart"
SANITIZER = re.compile(r"ERROR: (Address|Leak)Sanitizer|: runtime error: ")


class Fail(Exception):
    """A check failed; the message says which. The logs are printed by the caller."""


class Skip(Exception):
    """What the test needs is not built here (the nvcc-built programs)."""


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def free_ports(n):
    """n consecutive TCP ports on 127.0.0.1 that nothing uses now."""
    for base in range(47600, 48900, 7):
        ok = True
        for p in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise Fail("no free ports")


def virsh(*args, check=True, timeout=60):
    r = subprocess.run(["virsh", "-q", "-c", QEMU, *args], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise Fail(f"virsh {' '.join(args)}: {(r.stderr or r.stdout).strip()}")
    return r


def asan_runtime(lib):
    """The ASan runtime a sanitized libcuda.so.1 needs preloaded into NVIDIA's unsanitized
    program, or None (as tests/e2e/run.py)."""
    out = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    m = re.search(r"^\s*(libasan\.so[.0-9]*)\s*=>\s*(\S+)", out, re.M)
    return m.group(2) if m else None


class Stack:
    def __init__(self, build, source, name, ports=4):
        self.build, self.source, self.name = build, source, name
        self.bin = {
            "agent": f"{build}/agent/sluice-agent",
            "backend": f"{build}/backend/sluice-backend",
            "enroll": f"{build}/frontend/enroll/sluice-enroll",
            "usage": f"{build}/agent/sluice-usage",
            "libcuda": f"{build}/frontend/libcuda.so.1",
            "double": f"{build}/tests/double/libsluice-driver-double.so",
        }
        self.work = tempfile.mkdtemp(prefix=f"sluice-{name}.")
        os.chmod(self.work, 0o711)  # the backends (nobody) traverse it to run_dir, state_dir
        self.domains = {}  # name -> (instance uuid, project)
        self.agent = None
        self.log = os.path.join(self.work, "agent.log")
        # the backends' ports, then as many for the session workers' direct channels
        self.port_min = free_ports(2 * ports)
        self.port_max = self.port_min + ports - 1
        self.direct_min, self.direct_max = self.port_max + 1, self.port_max + ports
        self.enroll_port = self._enroll_port()
        self.programs = []

    def _enroll_port(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    # ------------------------------------------------------------------ setup and teardown

    def setup(self):
        missing = [p for p in self.bin.values() if not os.path.exists(p)]
        if missing:
            raise Fail("not built: " + ", ".join(missing))
        progs = [f"{self.build}/tests/cuda/{p}.static" for p in ("session_hold", "vector_add")]
        if not all(os.path.exists(p) for p in progs):
            raise Skip("the nvcc-built programs are not built (SLUICE_CUDA_TESTS=OFF)")
        r = subprocess.run([os.path.join(self.source, "scripts", "start-libvirtd")],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise Fail("libvirtd: " + (r.stderr or r.stdout).strip())
        for sub in ("state", "guests"):
            os.makedirs(os.path.join(self.work, sub), mode=0o755)
        self.token_key = os.path.join(self.work, "token.key")
        self.token_pub = os.path.join(self.work, "token.pub")
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", self.token_key],
                       check=True, capture_output=True)
        subprocess.run(["openssl", "pkey", "-in", self.token_key, "-pubout", "-out",
                        self.token_pub], check=True, capture_output=True)
        self.conf = os.path.join(self.work, "agent.conf")
        with open(self.conf, "w") as f:
            f.write(f"""libvirt_uri = {QEMU}
enroll_listen = 127.0.0.1:{self.enroll_port}
advertise_address = 127.0.0.1
backend_bind = 127.0.0.1
backend_port_min = {self.port_min}
backend_port_max = {self.port_max}
direct_port_min = {self.direct_min}
direct_port_max = {self.direct_max}
backend_user = nobody
backend_group = nogroup
backend_path = {self.bin['backend']}
driver_path = {self.bin['double']}
backend_stop_grace = 2
restart_backoff_max = 2
run_dir = {self.work}/run
state_dir = {self.work}/state
ca_dir = {self.work}/ca
token_public_key = {self.token_pub}
reboot_debounce = 1

[flavor {FLAVOR}]
gpu_share = 1
""")

    def cleanup(self):
        for p in self.programs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(signal.SIGTERM)
            try:
                self.agent.wait(20)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait()
        for pid in self.backend_pids().values():  # left by a killed agent
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for name in list(self.domains):
            virsh("destroy", name, check=False)
            virsh("undefine", name, check=False)
        shutil.rmtree(self.work, ignore_errors=True)

    def text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def sanitizer_reports(self):
        return SANITIZER.findall(self.text())

    # ------------------------------------------------------------------ the agent

    def start_agent(self):
        """A new sluice-agent; its log (and that of the backends it starts, which inherit it)
        is appended to one file across restarts. Returns the log offset at its start."""
        mark = len(self.text())
        env = dict(os.environ, SLUICE_LOG_LEVEL="info")
        keep = [p for p in env.get("LD_LIBRARY_PATH", "").split(":")
                if p and not os.path.exists(os.path.join(p, "libcuda.so.1"))]
        env["LD_LIBRARY_PATH"] = ":".join(keep)
        logf = open(self.log, "a")
        self.agent = subprocess.Popen([self.bin["agent"], "--config", self.conf], stdout=logf,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      env=env, start_new_session=True)
        logf.close()
        self.wait_log(r"enrollment open on", 20, mark)
        return mark

    def kill_agent(self):
        """kill -9 of the agent alone (its backends stay)."""
        self.agent.kill()
        self.agent.wait()

    def stop_agent(self):
        self.agent.send_signal(signal.SIGTERM)
        rc = self.agent.wait(30)
        if rc != 0:
            raise Fail(f"sluice-agent exited with status {rc} on SIGTERM")

    def wait_log(self, pattern, timeout, since=0):
        rx = re.compile(pattern, re.M)
        end = time.time() + timeout
        while True:
            m = rx.search(self.text(), since)
            if m:
                return m
            if self.agent and self.agent.poll() is not None and self.agent.returncode not in \
                    (0, -signal.SIGKILL):
                raise Fail(f"sluice-agent exited ({self.agent.returncode}) waiting for {pattern}")
            if time.time() > end:
                raise Fail(f"no {pattern!r} in the agent's log after {timeout} s")
            time.sleep(0.05)

    def backend_pids(self):
        """project -> pid of its running backend, from STATE_DIR/backends.state."""
        out = {}
        try:
            with open(os.path.join(self.work, "state", "backends.state")) as f:
                for line in f:
                    project, port, pid, _start, _used = line.split()
                    if int(pid):
                        out[project] = int(pid)
        except (OSError, ValueError):
            pass
        return out

    def ports(self):
        """project -> its kept port, from STATE_DIR/backends.state."""
        out = {}
        with open(os.path.join(self.work, "state", "backends.state")) as f:
            for line in f:
                project, port, *_ = line.split()
                out[project] = int(port)
        return out

    def wait_backend(self, project, since=0, timeout=30):
        """The project's backend said hello (after since); returns its pid."""
        m = self.wait_log(rf"project {project}: backend pid (\d+) ready", timeout, since)
        return int(m.group(1))

    # ------------------------------------------------------------------ domains

    def domain(self, name, project):
        """Defines and starts a diskless TCG domain with Nova's metadata for a GPU flavor whose
        port IP is 127.0.0.1 (the test's guests are processes on this host)."""
        virsh("destroy", name, check=False)
        virsh("undefine", name, check=False)
        instance = str(uuid.uuid4())
        emulator = shutil.which("qemu-system-x86_64") or "/usr/bin/qemu-system-x86_64"
        xml = f"""<domain type="qemu">
  <name>{name}</name>
  <uuid>{instance}</uuid>
  <description>Sluice agent test ({self.name}), safe to delete</description>
  <memory unit="MiB">64</memory>
  <vcpu>1</vcpu>
  <os><type arch="x86_64" machine="pc">hvm</type></os>
  <devices><emulator>{emulator}</emulator></devices>
  <metadata>
    <nova:instance xmlns:nova="{NOVA_NS}">
      <nova:name>{name}</nova:name>
      <nova:flavor name="{FLAVOR}"/>
      <nova:owner>
        <nova:user uuid="{uuid.uuid4().hex}">user</nova:user>
        <nova:project uuid="{project}">project</nova:project>
      </nova:owner>
      <nova:ports>
        <nova:port uuid="{uuid.uuid4()}">
          <nova:ip type="fixed" address="127.0.0.1" ipVersion="4"/>
        </nova:port>
      </nova:ports>
    </nova:instance>
  </metadata>
</domain>"""
        path = os.path.join(self.work, f"{name}.xml")
        with open(path, "w") as f:
            f.write(xml)
        self.domains[name] = (instance, project)
        virsh("define", path)
        virsh("start", name)
        return instance

    def start(self, name):
        virsh("start", name)

    def destroy(self, name):
        virsh("destroy", name)

    # ------------------------------------------------------------------ guests

    def token(self, instance, project):
        """A fresh enrollment token as nova-hook signs it (JWS, EdDSA)."""
        now = int(time.time())
        header = b64(json.dumps({"alg": "EdDSA", "typ": "JWT"}).encode())
        claims = b64(json.dumps({"iss": "test", "aud": "sluice-agent", "sub": instance,
                                 "project_id": project, "iat": now, "exp": now + 600,
                                 "jti": str(uuid.uuid4())}).encode())
        signing = f"{header}.{claims}".encode()
        data = os.path.join(self.work, "jws.in")
        with open(data, "wb") as f:
            f.write(signing)
        sig = subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", self.token_key,
                              "-rawin", "-in", data], check=True, capture_output=True).stdout
        return f"{header}.{claims}.{b64(sig)}"

    def guest(self, name):
        return os.path.join(self.work, "guests", name)

    def enroll(self, name, renew=False):
        """sluice-enroll for the domain's guest with a fresh token; (rc, output)."""
        instance, project = self.domains[name]
        with open(os.path.join(self.work, "ca", "ca.pem")) as f:
            ca = f.read()
        vd = os.path.join(self.work, f"vendor_data2-{name}.json")
        with open(vd, "w") as f:
            json.dump({"sluice": {"token": self.token(instance, project), "ca": ca,
                                  "enroll_endpoint": f"tcp://127.0.0.1:{self.enroll_port}"}}, f)
        argv = [self.bin["enroll"], "--source", vd, "--dir", self.guest(name)]
        r = subprocess.run(argv + (["--renew"] if renew else []), capture_output=True, text=True,
                           timeout=60)
        return r.returncode, r.stdout + r.stderr

    def env(self, name):
        env = dict(os.environ)
        env["SLUICE_CONFIG_DIR"] = self.guest(name)
        env["LD_LIBRARY_PATH"] = ":".join(
            p for p in [os.path.dirname(self.bin["libcuda"]), env.get("LD_LIBRARY_PATH", "")] if p)
        asan = asan_runtime(self.bin["libcuda"])
        if asan:
            env["LD_PRELOAD"] = asan
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        return env

    def program(self, name, guest, timeout=60):
        """Runs tests/cuda/<name>.static as the guest; (rc, output)."""
        path = f"{self.build}/tests/cuda/{name}.static"
        r = subprocess.run([path], capture_output=True, text=True, timeout=timeout,
                           env=self.env(guest), stdin=subprocess.DEVNULL)
        return r.returncode, r.stdout + r.stderr

    def hold(self, guest, seconds=180):
        """tests/cuda/session_hold as the guest, in the background; waits for SESSION OPEN."""
        out = os.path.join(self.work, f"hold-{guest}.log")
        env = self.env(guest)
        env["SLUICE_HOLD_SECONDS"] = str(seconds)
        with open(out, "w") as f:
            p = subprocess.Popen([f"{self.build}/tests/cuda/session_hold.static"], stdout=f,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                 start_new_session=True)
        p.out = out
        self.programs.append(p)
        self.wait_hold(p, "SESSION OPEN", 30)
        return p

    @staticmethod
    def hold_text(p):
        with open(p.out, errors="replace") as f:
            return f.read()

    def wait_hold(self, p, what, timeout):
        end = time.time() + timeout
        while what not in self.hold_text(p):
            if p.poll() is not None and what not in self.hold_text(p):
                raise Fail(f"session_hold exited ({p.returncode}) before {what!r}: "
                           f"{self.hold_text(p)[-500:]}")
            if time.time() > end:
                raise Fail(f"session_hold: no {what!r} after {timeout} s")
            time.sleep(0.05)
