"""Sluice deployed into the all-in-one of scripts/openstack-aio by its own ansible roles, as an
operator deploys it, for tests/openstack/test_chain.py:

  - credentials: a throwaway PKI (scripts/demo/pki.py: nova-hook's server certificate and its
    CA, Nova's client certificate, the registry channel's certificates): the files an operator
    prepares on the deploy machine (the roles' *_src variables);
  - ansible-playbook ansible/site.yml (connection local, this machine in sluice_controllers and
    sluice_compute; the guest image is scripts/guest-image's, which applies sluice_guest):
    sluice_novahook installs the sluice-novahook package of scripts/build-packages, its
    credentials, /etc/sluice/novahook.conf, the nova.conf fragment into the all-in-one's
    $S/etc/nova/nova.conf.d/sluice.conf (which every Nova service reads) and makes the GPU
    flavor with the real `openstack` client (bootstrap-flavors.sh); sluice_agent installs the
    sluice-agent package, /etc/sluice/agent.conf (the flavor policy table: Zed writes no extra
    specs into the domain XML) and provider.yaml where the all-in-one's nova-compute reads it;
  - the daemons: started by the roles with sluice_*_service_manager: direct (this machine has
    no systemd as PID 1): /usr/bin/sluice-novahook as sluice and /usr/bin/sluice-agent as root,
    pid files in /run, logs in the all-in-one's log folder (sluice-novahook.log,
    sluice-agent.log).

What differs from a production host: the service manager (direct, not the packages' systemd
units), the addresses and folders of this one machine, and the backends' CUDA driver (the
build's driver test double: no GPU here).
"""
import json
import os
import pwd
import re
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "scripts", "demo"))
import pki as demo_pki  # noqa: E402

NOVAHOOK_PORT, REGISTRY_PORT, ENROLL_PORT = 9443, 7410, 7400
BACKEND_PORTS, DIRECT_PORTS = (47300, 47309), (47310, 47329)
VENDORDATA_URL = f"https://127.0.0.1:{NOVAHOOK_PORT}/v1/vendordata"
PID_FILES = {"sluice-novahook": "/run/sluice-novahook.pid", "sluice-agent": "/run/sluice-agent.pid"}
NOVAHOOK_STATE = "/var/lib/sluice-novahook"  # the agent owns /var/lib/sluice
PACKAGES = ("sluice-novahook", "sluice-agent")


class DeployError(Exception):
    pass


def pid_of(name):
    """The pid in the role's pid file when that process runs, else None."""
    try:
        pid = int(open(PID_FILES[name]).read().split()[0])
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError, IndexError):
        return None


class Service:
    """A daemon the role started: its log file (read from the start of this deployment) and
    its pid file. wait_for() has procs.Daemon's interface."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def wait_for(self, pattern, timeout, what=None):
        rx = re.compile(pattern, re.M)
        end = time.time() + timeout
        while True:
            m = rx.search(self.text())
            if m:
                return m
            if pid_of(self.name) is None:
                raise DeployError(f"{self.name} does not run ({PID_FILES[self.name]}) while "
                                  f"waiting for {what or pattern!r}; {self.log}:\n"
                                  f"{self.text()[-2000:]}")
            if time.time() > end:
                raise DeployError(f"{self.name}: no {what or pattern!r} after {timeout:.0f} s")
            time.sleep(0.05)


def stop_service(name):
    subprocess.run(["start-stop-daemon", "--stop", "--quiet", "--oknodo", "--retry",
                    "TERM/30/KILL/5", "--pidfile", PID_FILES[name], "--remove-pidfile",
                    "--name", name], timeout=120)


class Sluice:
    """The roles' run against this machine, and what it started."""

    def __init__(self, state, build, log_dir, slots, debs, os_env, advertise="127.0.0.1",
                 token_ttl=600):
        self.state, self.build, self.log_dir = state, os.path.abspath(build), log_dir
        self.work = os.path.join(state, "sluice")
        self.debs, self.os_env = debs, os_env
        self.slots, self.advertise, self.token_ttl = slots, advertise, token_ttl
        self.host = socket.gethostname()
        self.nova_conf = os.path.join(state, "etc", "nova", "nova.conf.d", "sluice.conf")
        self.nova_creds = os.path.join(state, "etc", "nova", "sluice")
        self.provider_yaml = os.path.join(state, "etc", "nova", "provider_config", "sluice.yaml")
        self.agent_conf, self.novahook_conf = "/etc/sluice/agent.conf", "/etc/sluice/novahook.conf"
        self.logs = {n: os.path.join(log_dir, f"{n}.log") for n in PID_FILES}
        self.started = False

    def binary(self, rel):
        p = os.path.join(self.build, rel)
        if not os.access(p, os.X_OK):
            raise DeployError(f"{p} is not built (cmake --build)")
        return p

    # ------------------------------------------------------------------ the deploy machine

    def credentials(self):
        """The files an operator prepares (the roles copy them onto the hosts); made once and
        kept (pki.json names them), so that a second run's roles find nothing changed."""
        index = os.path.join(self.work, "pki.json")
        try:
            with open(index) as f:
                self.pki = json.load(f)
            paths = [p for v in self.pki.values() for p in (v if isinstance(v, list) else [v])]
            if all(os.path.exists(p) for p in paths):
                return
        except (OSError, ValueError):
            pass
        self.pki = demo_pki.make(os.path.join(self.work, "pki"), self.host)
        with open(index, "w") as f:
            json.dump(self.pki, f, indent=1)

    def overrides(self):
        p = self.pki
        env = {k: v for k, v in self.os_env.items() if k.startswith("OS_")}
        env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        return {
            "sluice_packages_dir": self.debs,
            "sluice_source_dir": REPO,
            # sluice_novahook
            "sluice_novahook_service_manager": "direct",
            "sluice_novahook_direct_log_file": self.logs["sluice-novahook"],
            "sluice_novahook_direct_pid_file": PID_FILES["sluice-novahook"],
            "sluice_novahook_state_dir": NOVAHOOK_STATE,
            "sluice_novahook_listen": f"127.0.0.1:{NOVAHOOK_PORT}",
            "sluice_novahook_tls_cert_src": p["server"][1],
            "sluice_novahook_tls_key_src": p["server"][0],
            "sluice_novahook_client_ca_src": p["nova_ca"],
            "sluice_novahook_agent_ca_src": p["agent_ca"],
            "sluice_novahook_registry_listen": f"127.0.0.1:{REGISTRY_PORT}",
            "sluice_novahook_registry_ca_src": p["registry_ca"],
            "sluice_novahook_registry_cert_src": p["registry_server"][1],
            "sluice_novahook_registry_key_src": p["registry_server"][0],
            "sluice_novahook_registry_hosts": [self.host],
            "sluice_novahook_nova_conf_file": self.nova_conf,
            "sluice_novahook_nova_credentials_dir": self.nova_creds,
            "sluice_novahook_nova_server_ca_src": p["server_ca"],
            "sluice_novahook_nova_client_cert_src": p["nova"][1],
            "sluice_novahook_nova_client_key_src": p["nova"][0],
            "sluice_novahook_vendordata_url": VENDORDATA_URL,
            "sluice_novahook_token_ttl": self.token_ttl,
            "sluice_novahook_bootstrap_flavors": True,
            "sluice_novahook_flavor_tiers": ["gold"],
            "sluice_novahook_flavor_ram": 256,
            "sluice_novahook_flavor_vcpus": 1,
            "sluice_novahook_flavor_disk": 1,
            "sluice_novahook_openstack_environment": env,
            # sluice_agent
            "sluice_agent_service_manager": "direct",
            "sluice_agent_direct_log_file": self.logs["sluice-agent"],
            "sluice_agent_direct_pid_file": PID_FILES["sluice-agent"],
            "sluice_agent_enroll_listen": f"{self.advertise}:{ENROLL_PORT}",
            "sluice_agent_advertise_address": self.advertise,
            "sluice_agent_backend_bind": self.advertise,
            "sluice_agent_backend_port_min": BACKEND_PORTS[0],
            "sluice_agent_backend_port_max": BACKEND_PORTS[1],
            "sluice_agent_direct_port_min": DIRECT_PORTS[0],
            "sluice_agent_direct_port_max": DIRECT_PORTS[1],
            "sluice_agent_driver_path": self.binary("tests/double/libsluice-driver-double.so"),
            "sluice_agent_enroll_token_issuer": "sluice-nova-hook",
            "sluice_agent_registry_endpoint": f"tcp://127.0.0.1:{REGISTRY_PORT}",
            "sluice_agent_registry_ca_src": p["registry_ca"],
            "sluice_agent_registry_cert_src": p["registry_agent"][1],
            "sluice_agent_registry_key_src": p["registry_agent"][0],
            "sluice_agent_gpu_slots": self.slots,
            "sluice_agent_reboot_debounce": 1,
            "sluice_agent_nova_provider_config_dir": os.path.dirname(self.provider_yaml),
        }

    def inventory(self):
        path = os.path.join(self.work, "inventory.json")
        # Debian's python3 (the apt module needs python3-apt), whatever runs this test
        local = {"ansible_connection": "local",
                 "ansible_python_interpreter": "/usr/bin/python3"}
        inv = {"all": {"hosts": {"localhost": local}, "children": {
            "sluice_controllers": {"hosts": {"localhost": {}}},
            "sluice_compute": {"hosts": {"localhost": {}}},
            "sluice_guest_images": {"hosts": {}}}}}
        with open(path, "w") as f:
            json.dump(inv, f, indent=1)
        return path

    def playbook(self):
        """ansible-playbook ansible/site.yml against this machine; returns its output."""
        ov = os.path.join(self.work, "overrides.json")
        with open(ov, "w") as f:
            json.dump(self.overrides(), f, indent=1)
        os.chmod(ov, 0o600)
        r = subprocess.run(["ansible-playbook", "-i", self.inventory(), "-e", f"@{ov}",
                            os.path.join(REPO, "ansible", "site.yml")],
                           capture_output=True, text=True, timeout=1200,
                           env=dict(os.environ, ANSIBLE_NOCOLOR="1",
                                    ANSIBLE_LOCALHOST_WARNING="False"))
        with open(os.path.join(self.log_dir, "sluice-ansible.log"), "w") as f:
            f.write(r.stdout + r.stderr)
        if r.returncode != 0:
            raise DeployError(f"ansible-playbook ansible/site.yml: exit {r.returncode}\n"
                              f"{r.stdout[-4000:]}{r.stderr[-2000:]}")
        return r.stdout

    # ------------------------------------------------------------------ the run

    def deploy(self):
        """The roles' run: the daemons of an earlier run stopped first (their logs kept as
        .prev), so that the roles start them and this run's logs hold only this run."""
        os.makedirs(self.work, mode=0o755, exist_ok=True)
        self.stop_daemons()
        for log in self.logs.values():
            if os.path.exists(log):
                os.replace(log, log + ".prev")
        self.credentials()
        self.started = True
        out = self.playbook()
        recap = re.search(r"^localhost\s+: (.*)$", out, re.M)
        self.recap = recap.group(1).strip() if recap else "?"
        self.novahook = Service("sluice-novahook", self.logs["sluice-novahook"])
        self.agent = Service("sluice-agent", self.logs["sluice-agent"])
        self.novahook.wait_for(r"registry channel listening", 60, "nova-hook's registry channel")
        self.agent.wait_for(r"libvirt: connected to", 60, "the agent's libvirt connection")
        self.agent.wait_for(r"registry \S+: connected, registered as", 60,
                            "the agent's registration with nova-hook")

    def provenance(self):
        """What runs came from the roles: the packages installed, the files with the roles'
        markers, the processes' executables, command lines and users. Returns lines to log."""
        out = []
        for pkg in PACKAGES:
            r = subprocess.run(["dpkg-query", "-W", "-f", "${Status} ${Version}", pkg],
                               capture_output=True, text=True)
            if r.returncode != 0 or not r.stdout.startswith("install ok installed"):
                raise DeployError(f"package {pkg}: {r.stdout.strip() or r.stderr.strip()} "
                                  "(the role installs it)")
            out.append(f"package {pkg} {r.stdout.split()[-1]} installed")
        for path, marker in ((self.novahook_conf, "(role sluice_novahook)"),
                             (self.nova_conf, "(role sluice_novahook)"),
                             (self.agent_conf, "(role sluice_agent)")):
            head = open(path).read(400)
            if "Ansible managed" not in head or marker not in head:
                raise DeployError(f"{path}: no 'Ansible managed' {marker} header: not the "
                                  f"role's file")
            out.append(f"{path}: Ansible managed {marker}")
        for name, conf, user in (("sluice-novahook", self.novahook_conf, "sluice"),
                                 ("sluice-agent", self.agent_conf, "root")):
            pid = pid_of(name)
            if pid is None:
                raise DeployError(f"{name}: no process for {PID_FILES[name]}")
            argv = open(f"/proc/{pid}/cmdline").read().split("\0")[:-1]
            exe = os.readlink(f"/proc/{pid}/exe")
            uid = int(re.search(r"^Uid:\s+(\d+)", open(f"/proc/{pid}/status").read(),
                                re.M).group(1))
            want = [f"/usr/bin/{name}", "--config", conf]
            if argv != want or exe != want[0] or uid != pwd.getpwnam(user).pw_uid:
                raise DeployError(f"{name} pid {pid}: {argv} (exe {exe}, uid {uid}); expected "
                                  f"{want} as {user} (the package's binary, the role's config)")
            out.append(f"{name} pid {pid}: {' '.join(argv)} as {user}")
        return out

    def registry(self, *args):
        r = subprocess.run(["runuser", "-u", "sluice", "--", "/usr/bin/sluice-registry",
                            "--config", self.novahook_conf, *args], capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            raise DeployError(f"sluice-registry {' '.join(args)}: exit {r.returncode}: "
                              f"{r.stderr.strip()}")
        return r.stdout

    def usage(self):
        r = subprocess.run(["/usr/bin/sluice-usage", "--config", self.agent_conf,
                            "--format", "json"], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise DeployError(f"sluice-usage: exit {r.returncode}: {r.stderr.strip()}")
        return json.loads(r.stdout) if r.stdout.strip() else {}

    def stop_daemons(self):
        """The roles' daemons (by their pid files), then the backends the agent started that
        outlived it (by the pids its log named)."""
        backends = set()
        log = self.logs["sluice-agent"]
        if os.path.exists(log):
            backends = {int(p) for p in re.findall(r"backend pid (\d+) ready", open(
                log, errors="replace").read())}
        for name in ("sluice-agent", "sluice-novahook"):
            stop_service(name)
        for pid in backends:
            try:
                if os.readlink(f"/proc/{pid}/exe") == "/usr/bin/sluice-backend":
                    os.kill(pid, 9)
            except OSError:
                pass

    def stop(self):
        """The daemons, and the nova.conf fragment (Nova would go on calling a nova-hook that
        is gone: a logged error per instance, read at nova-compute's next start). The packages
        and /etc/sluice stay (the next run's roles find them)."""
        if not self.started:
            return
        self.stop_daemons()
        if os.path.exists(self.nova_conf):
            os.unlink(self.nova_conf)
