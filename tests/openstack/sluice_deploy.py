"""Sluice deployed into the all-in-one of scripts/openstack-aio as an operator deploys it, for
tests/openstack/test_chain.py:

  - credentials: a throwaway PKI (scripts/demo/pki.py: nova-hook's server certificate and its
    CA, Nova's client certificate, the token key, the registry channel's certificates), copied
    under the file names the roles install;
  - configuration: novahook.conf, the nova.conf fragment and agent.conf (with the flavor policy
    table naming g1.bronze/g1.silver/g1.gold, as Zed writes no extra specs into the domain XML)
    rendered by ansible from the roles' templates (sluice-configs.yml); the fragment goes to
    the all-in-one's $S/etc/nova/nova.conf.d/sluice.conf, which every Nova service reads;
  - the daemons: sluice-novahook and sluice-agent from the build folder, as root, logging to
    the all-in-one's log folder (sluice-novahook.log, sluice-agent.log).

The roles themselves (Debian packages, systemd units) run in ansible.deploy's container; here
the same files drive the build's binaries. agent.conf's paths of the sluice-agent package
(/usr/bin/sluice-backend, /run/sluice, /var/lib/sluice, /etc/sluice/...) become the build
folder's and $S/sluice's.
"""
import json
import os
import shutil
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "scripts", "demo"))
import pki as demo_pki  # noqa: E402
from procs import Daemon, daemon_env  # noqa: E402

NOVAHOOK_PORT, REGISTRY_PORT, ENROLL_PORT = 9443, 7410, 7400
BACKEND_PORTS, DIRECT_PORTS = (47300, 47309), (47310, 47329)
VENDORDATA_URL = f"https://127.0.0.1:{NOVAHOOK_PORT}/v1/vendordata"


class DeployError(Exception):
    pass


def _copy(src, dst, mode=0o640, group=None):
    shutil.copyfile(src, dst)
    os.chmod(dst, mode)
    if group:
        shutil.chown(dst, group=group)


class Sluice:
    """The two daemons and their files under STATE/sluice."""

    def __init__(self, state, build, log_dir, slots, advertise="127.0.0.1", token_ttl=600):
        self.state, self.build, self.log_dir = state, os.path.abspath(build), log_dir
        self.work = os.path.join(state, "sluice")
        self.slots, self.advertise, self.token_ttl = slots, advertise, token_ttl
        self.host = socket.gethostname()
        self.daemons = []
        self.nova_conf = os.path.join(state, "etc", "nova", "nova.conf.d", "sluice.conf")

    def binary(self, rel):
        p = os.path.join(self.build, rel)
        if not os.access(p, os.X_OK):
            raise DeployError(f"{p} is not built (cmake --build)")
        return p

    # ------------------------------------------------------------------ files

    def credentials(self):
        w = self.work
        shutil.rmtree(w, ignore_errors=True)
        os.makedirs(w, mode=0o755)
        p = self.pki = demo_pki.make(os.path.join(w, "pki"), self.host)
        nh = os.path.join(w, "novahook")
        os.makedirs(nh, mode=0o750)
        for src, name in ((p["server"][1], "server.crt"), (p["server"][0], "server.key"),
                          (p["nova_ca"], "nova-client-ca.pem"), (p["token_key"], "token.key"),
                          (p["agent_ca"], "agent-ca.pem"), (p["registry_ca"], "registry-ca.pem"),
                          (p["registry_server"][1], "registry.crt"),
                          (p["registry_server"][0], "registry.key")):
            _copy(src, os.path.join(nh, name))
        # Nova's side (sluice_novahook_nova_credentials_dir): readable by the group nova
        self.nova_creds = os.path.join(self.state, "etc", "nova", "sluice")
        os.makedirs(self.nova_creds, mode=0o750, exist_ok=True)
        shutil.chown(self.nova_creds, group="nova")
        for src, name in ((p["server_ca"], "novahook-server-ca.pem"),
                          (p["nova"][1], "nova-client.crt"), (p["nova"][0], "nova-client.key")):
            _copy(src, os.path.join(self.nova_creds, name), group="nova")
        ag = os.path.join(w, "agent")
        for sub in ("", "etc", "run", "state"):
            os.makedirs(os.path.join(ag, sub), mode=0o755, exist_ok=True)
        for src, name in ((p["registry_ca"], "registry-ca.pem"),
                          (p["registry_agent"][1], "agent-cert.pem"),
                          (p["registry_agent"][0], "agent-key.pem"),
                          (p["token_pub"], "nova-hook-token.pub")):
            _copy(src, os.path.join(ag, "etc", name))
        subprocess.run([self.binary("agent/sluice-agent-ca"), "init", "--dir",
                        os.path.join(ag, "ca")], check=True, capture_output=True)

    def overrides(self):
        w = self.work
        return {
            "sluice_out": w,
            "sluice_source_dir": REPO,
            # sluice_novahook
            "sluice_novahook_credentials_dir": os.path.join(w, "novahook"),
            "sluice_novahook_state_dir": os.path.join(w, "novahook"),
            "sluice_novahook_listen": f"127.0.0.1:{NOVAHOOK_PORT}",
            "sluice_novahook_registry_listen": f"127.0.0.1:{REGISTRY_PORT}",
            "sluice_novahook_registry_hosts": [self.host],
            "sluice_novahook_nova_conf_file": self.nova_conf,
            "sluice_novahook_nova_credentials_dir": self.nova_creds,
            "sluice_novahook_vendordata_url": VENDORDATA_URL,
            "sluice_novahook_token_ttl": self.token_ttl,
            # sluice_agent
            "sluice_agent_enroll_listen": f"{self.advertise}:{ENROLL_PORT}",
            "sluice_agent_advertise_address": self.advertise,
            "sluice_agent_backend_bind": self.advertise,
            "sluice_agent_backend_port_min": BACKEND_PORTS[0],
            "sluice_agent_backend_port_max": BACKEND_PORTS[1],
            "sluice_agent_direct_port_min": DIRECT_PORTS[0],
            "sluice_agent_direct_port_max": DIRECT_PORTS[1],
            "sluice_agent_backend_user": "nobody",
            "sluice_agent_backend_group": "nogroup",
            "sluice_agent_driver_path": os.path.join(
                self.build, "tests/double/libsluice-driver-double.so"),
            "sluice_agent_enroll_token_issuer": "sluice-nova-hook",
            "sluice_agent_token_public_key_file": os.path.join(
                w, "agent", "etc", "nova-hook-token.pub"),
            "sluice_agent_registry_endpoint": f"tcp://127.0.0.1:{REGISTRY_PORT}",
            "sluice_agent_gpu_slots": self.slots,
            "sluice_agent_reboot_debounce": 1,
        }

    def render(self):
        """ansible-playbook sluice-configs.yml with this deployment's extra vars."""
        ov = os.path.join(self.work, "overrides.json")
        with open(ov, "w") as f:
            json.dump(self.overrides(), f, indent=1)
        r = subprocess.run(["ansible-playbook", "-i", "localhost,", "-e", f"@{ov}",
                            os.path.join(HERE, "sluice-configs.yml")],
                           capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, ANSIBLE_NOCOLOR="1",
                                    ANSIBLE_LOCALHOST_WARNING="False"))
        if r.returncode != 0:
            raise DeployError(f"ansible-playbook sluice-configs.yml: exit {r.returncode}\n"
                              f"{r.stdout[-3000:]}{r.stderr[-2000:]}")
        ag = os.path.join(self.work, "agent")
        conf = os.path.join(self.work, "agent.conf")
        paths = (("/usr/bin/sluice-backend", self.binary("backend/sluice-backend")),
                 ("/var/lib/sluice/ca", f"{ag}/ca"), ("/var/lib/sluice", f"{ag}/state"),
                 ("/run/sluice", f"{ag}/run"), ("/etc/sluice", f"{ag}/etc"))
        lines = []
        for line in open(conf).read().split("\n"):
            key, eq, value = line.partition(" = ")
            for pkg, here in paths:
                if eq and (value == pkg or value.startswith(pkg + "/")):
                    line = f"{key} = {here}{value[len(pkg):]}"
                    break
            lines.append(line)
        with open(conf, "w") as f:
            f.write("\n".join(lines))
        self.agent_conf, self.novahook_conf = conf, os.path.join(self.work, "novahook.conf")

    # ------------------------------------------------------------------ daemons

    def daemon(self, name, argv, env=None):
        d = Daemon(name, argv, os.path.join(self.log_dir, f"{name}.log"), env or daemon_env())
        self.daemons.append(d)
        return d

    def start(self):
        self.novahook = self.daemon("sluice-novahook", [
            self.binary("nova-hook/sluice-novahook"), "--config", self.novahook_conf],
            daemon_env({"SLUICE_LOG_LEVEL": "info"}))
        self.novahook.wait_for(r"registry channel listening", 60, "nova-hook's registry channel")
        self.agent = self.daemon("sluice-agent", [
            self.binary("agent/sluice-agent"), "--config", self.agent_conf],
            daemon_env({"SLUICE_LOG_LEVEL": "info"}))
        self.agent.wait_for(r"libvirt: connected to", 60, "the agent's libvirt connection")
        self.agent.wait_for(r"registry \S+: connected, registered as", 60,
                            "the agent's registration with nova-hook")

    def registry(self, *args):
        r = subprocess.run([self.binary("nova-hook/sluice-registry"), "--config",
                            self.novahook_conf, *args], capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            raise DeployError(f"sluice-registry {' '.join(args)}: exit {r.returncode}: "
                              f"{r.stderr.strip()}")
        return r.stdout

    def usage(self):
        r = subprocess.run([self.binary("agent/sluice-usage"), "--config", self.agent_conf,
                            "--format", "json"], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise DeployError(f"sluice-usage: exit {r.returncode}: {r.stderr.strip()}")
        return json.loads(r.stdout) if r.stdout.strip() else {}

    def stop(self):
        """The daemons, and the nova.conf fragment (Nova would go on calling a nova-hook that
        is gone: a logged error per instance, read at nova-compute's next start)."""
        while self.daemons:
            self.daemons.pop().stop()
        if os.path.exists(self.nova_conf):
            os.unlink(self.nova_conf)
