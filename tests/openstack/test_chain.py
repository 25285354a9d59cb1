#!/usr/bin/env python3
"""CTest openstack.chain: Sluice inside the all-in-one of scripts/openstack-aio, every arrow of
issue 23's chain driven through OpenStack's own interfaces (the `openstack` client) and asserted
on what each service logged or stored (docs/openstack-aio.md, "The chain"):

  1. the all-in-one up; provider.yaml read by nova-compute; the flavors (test_aio.py's steps)
  2. Sluice deployed by its roles (sluice_deploy.py): ansible-playbook ansible/site.yml against
     this machine (connection local): sluice_novahook (the package, novahook.conf, the nova.conf
     fragment with vendordata_dynamic_targets = sluice@nova-hook, the GPU flavor by its
     bootstrap) and sluice_agent (the package, agent.conf with its flavor policy table,
     provider.yaml), both daemons started by the roles without systemd
     (sluice_*_service_manager: direct); asserted that what runs came from the roles (packages,
     the files' role headers, the processes' command lines); nova-compute restarted to read the
     fragment; the agent registered with nova-hook's registry
  3. the real guest image (scripts/guest-image: vmlinuz, initrd.img, root.img) in Glance as a
     kernel, a ramdisk and a raw root disk with kernel_id, ramdisk_id and os_command_line
  4. `openstack server create --flavor g1.gold --image sluice-guest --nic net-id=<sluice-net>`
     (the all-in-one's flat provider network, DHCP by Neutron's agent) with a config drive
     (nova.conf force_config_drive): ACTIVE with a port on sluice-net, whose fixed IP Nova wrote
     into the domain's <nova:ports>; the agent recognised the instance as a GPU flavor by its
     policy table and placed it in nova-hook's registry (agent's and nova-hook's logs,
     `sluice-registry instances`); nova-compute asked sluice-novahook for vendordata
     (nova-hook's log: a token issued for the instance and its Keystone project); the config
     drive's openstack/latest/vendor_data2.json holds the "sluice" key (token, CA, the agent's
     enrollment endpoint on the provider network's host address); the guest booted the image, read the config
     drive, enrolled at first boot from its port's address (the agent's log: the source-address
     check saw the port's fixed IP) and ran tests/cuda's vector_add on the backend (the driver
     double), which the user-data script fetched from the host over the same network
     (`openstack console log show`: guest-firstboot, the enrollment, the program's PASS);
     `sluice-usage` shows its GPU time under the Keystone project
  5. a plain flavor on the same host: the agent logs "not a GPU flavor", nova-hook answers its
     vendordata request with nothing ("not on a Sluice host")
  6. `openstack server delete` while tests/cuda's session_hold holds a session from the guest:
     the agent logs the undefine and revokes the instance, the backend ends the live session
     (timed from the delete), nova-hook removes the placement; `sluice-registry usage` and `sluice-usage` show the instance and its
     GPU time under its Keystone project

With --nic-none (or without the network agents' packages) step 4 is the first configuration of
issue 23: `--nic none`, the guest reads the config drive and cannot reach the agent (asserted),
and there is no GPU time. Root only, the packages of scripts/install-deps --openstack, Sluice's
packages (packages.build's BUILD/deb, a fixture), the build's driver double and tests/cuda's
vector_add.static and session_hold.static, and the guest image (exit 77 naming what is
missing). Timings: one JSON line (CHAIN_TIMINGS).
"""
import argparse
import functools
import glob
import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from sluice_deploy import DeployError, Sluice  # noqa: E402
from test_aio import (SKIP, Aio, Failed, compute_rp, domain_xml, ensure_flavors,  # noqa: E402
                      ensure_inventory, log, restart_compute, wait_server)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts", "demo"))
from procs import DemoError  # noqa: E402

IMAGE, KERNEL, RAMDISK = "sluice-guest", "sluice-guest-kernel", "sluice-guest-ramdisk"
CMDLINE = "root=/dev/vda console=ttyS0 systemd.show_status=1"
NET_NAME, NET_HOST, PROGRAM_PORT = "sluice-net", "10.222.0.1", 7480  # scripts/openstack-aio
PROGRAM = "vector_add.static"
# tests/cuda's session_hold: a session kept busy (a call every 100 ms) until a call fails
HOLD, HOLD_SECONDS = "session_hold.static", 3600
# With a network: the user-data script waits for the enrollment sluice-enroll.service does at
# boot, fetches a tests/cuda program from the host (HTTP/1.0 over bash's /dev/tcp: the image has
# no curl) and runs it; everything goes to the serial console (`openstack console log show`).
USER_DATA_NET = r"""#!/bin/bash
vd=/run/guest-firstboot/config-drive/openstack/latest/vendor_data2.json
ep=$(grep -o '"enroll_endpoint": *"[^"]*"' "$vd" 2>/dev/null)
echo "chain: vendor_data2.json sluice ${ep:-MISSING}"
echo "chain: address $(ip -4 -o addr show scope global | awk '{print $2, $4}' | tr '\n' ' ')"
for _ in $(seq 1 450); do
  [ -s /etc/sluice/client.pem ] && ! systemctl is-active -q sluice-enroll.service && break
  systemctl is-failed -q sluice-enroll.service && break
  sleep 2
done
journalctl -b -u sluice-enroll.service --no-pager -o cat | grep '^sluice-enroll: ' | tail -n 4 |
  sed 's/^/chain: enroll | /'
fetch() {
  exec 3<>/dev/tcp/@HOST@/@PORT@ || return 1
  printf 'GET /%s HTTP/1.0\r\nHost: @HOST@\r\n\r\n' "$1" >&3
  IFS= read -r status <&3
  case $status in "HTTP/1."?" 200"*) ;; *) echo "chain: fetch $1: $status"; return 2 ;; esac
  while IFS= read -r line <&3; do [ "${line%$'\r'}" = "" ] && break; done
  cat <&3 >"$2"
  exec 3<&-
}
if [ -s /etc/sluice/client.pem ]; then
  echo "chain: enrolled, backend $(grep -o 'tcp://[^ ]*' /etc/sluice/backend.conf | head -n 1)"
  # /root: /run and /tmp may be noexec
  if fetch @PROGRAM@ /root/@PROGRAM@; then
    chmod 0755 /root/@PROGRAM@
    /root/@PROGRAM@ 2>&1 | sed 's/^/chain: program | /'
    echo "chain: program exit ${PIPESTATUS[0]}"
  fi
  # a session that lives on until `openstack server delete` ends it (its own unit: it outlives
  # this script; its output goes to the journal and the console)
  if fetch @HOLD@ /root/@HOLD@; then
    chmod 0755 /root/@HOLD@
    systemd-run --unit=chain-hold -E SLUICE_HOLD_SECONDS=@HOLD_SECONDS@ \
      -p StandardOutput=journal+console /root/@HOLD@
    for _ in $(seq 1 120); do
      journalctl -u chain-hold.service --no-pager -o cat | grep -q '^SESSION' && break
      sleep 1
    done
    journalctl -u chain-hold.service --no-pager -o cat | grep -m 1 '^SESSION' |
      sed 's/^/chain: hold | /'
  fi
else
  echo "chain: not enrolled"
fi
echo "chain: done"
"""
# Without a network (--nic none): what the guest sees of Sluice's vendordata and the result of
# its enrollment unit.
USER_DATA = r"""#!/bin/bash
vd=/run/guest-firstboot/config-drive/openstack/latest/vendor_data2.json
ep=$(grep -o '"enroll_endpoint": *"[^"]*"' "$vd" 2>/dev/null)
echo "chain: vendor_data2.json sluice ${ep:-MISSING}"
for _ in $(seq 1 120); do
  journalctl -u sluice-enroll.service --no-pager -o cat | grep -q '^sluice-enroll: ' && break
  sleep 2
done
journalctl -u sluice-enroll.service --no-pager -o cat | grep '^sluice-enroll: ' | head -n 2 |
  sed 's/^/chain: enroll | /'
echo "chain: done"
"""


def ensure_image(aio, image_dir):
    """The guest image in Glance; uploaded again when scripts/guest-image made a new one."""
    files = [os.path.join(image_dir, f) for f in ("vmlinuz", "initrd.img", "root.img")]
    stamp = "-".join(f"{int(os.stat(p).st_mtime)}.{os.stat(p).st_size}" for p in files)
    images = {i["Name"]: i["ID"] for i in aio.os_json("image", "list")}
    if IMAGE in images:
        props = aio.os_json("image", "show", IMAGE).get("properties", {})
        if props.get("sluice_build") == stamp:
            return images[IMAGE], False
    for name in (IMAGE, KERNEL, RAMDISK):
        if name in images:
            aio.os("image", "delete", images[name])
    kernel = aio.os_json("image", "create", "--disk-format", "aki", "--container-format", "aki",
                         "--file", files[0], "--public", KERNEL)["id"]
    ramdisk = aio.os_json("image", "create", "--disk-format", "ari", "--container-format",
                          "ari", "--file", files[1], "--public", RAMDISK)["id"]
    root = json.loads(aio.os("image", "create", "--disk-format", "raw", "--container-format",
                             "bare", "--file", files[2], "--property", f"kernel_id={kernel}",
                             "--property", f"ramdisk_id={ramdisk}",
                             "--property", f"os_command_line={CMDLINE}",
                             "--property", f"sluice_build={stamp}", "--public", IMAGE,
                             "-f", "json", timeout=900))["id"]
    return root, True


def config_drive_file(state, sid, path):
    """A file of the instance's config drive as nova-compute wrote it (ISO 9660, Rock Ridge)."""
    iso = os.path.join(state, "nova", "instances", sid, "disk.config")
    if not os.path.exists(iso):
        raise Failed(f"server {sid}: no config drive at {iso}")
    r = subprocess.run(["isoinfo", "-R", "-i", iso, "-x", path], capture_output=True, timeout=60)
    if r.returncode != 0 or not r.stdout:
        raise Failed(f"{iso}: no {path} ({r.stderr.decode(errors='replace').strip()})")
    return r.stdout.decode()


def server_usage(report, project, sid):
    """The instance's row of a usage report in Nova's os-simple-tenant-usage shape (one
    "tenant_usage" with --project, else a "tenant_usages" list)."""
    tenants = report.get("tenant_usages") or [report.get("tenant_usage") or {}]
    return next((u for t in tenants if t.get("tenant_id") == project
                 for u in t.get("server_usages", []) if u.get("instance_id") == sid), None)


def wait_log(daemon, pattern, timeout, what):
    try:
        return daemon.wait_for(pattern, timeout, what)
    except DemoError as e:
        raise Failed(str(e)) from None


class ProgramServer:
    """The tests/cuda program for the guest, served over HTTP on the provider network's host
    address (the guest fetches it in its user-data script)."""

    def __init__(self, path):
        handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                    directory=os.path.dirname(path))
        handler.log_message = lambda *a: None
        self.httpd = http.server.ThreadingHTTPServer((NET_HOST, PROGRAM_PORT), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Chain:
    def __init__(self, args):
        self.args, self.timings, self.servers = args, {}, []
        self.aio = Aio(args.source, args.state)
        self.net = None if args.nic_none else NET_NAME
        self.sluice = Sluice(args.state, args.build, os.path.join(args.state, "log"), args.slots,
                             args.debs, self.aio.env,
                             advertise=NET_HOST if self.net else "127.0.0.1",
                             token_ttl=args.token_ttl)

    def step(self, name, fn):
        t = time.time()
        r = fn()
        self.timings[name] = round(time.time() - t, 1)
        log(f"{name}: {self.timings[name]} s")
        return r

    def ok(self, what):
        log(f"ok: {what}")

    def create(self, name, flavor, image, user_data=None):
        nic = f"net-id={self.net_id}" if self.net else "none"
        argv = ["--os-compute-api-version", "2.37", "server", "create", "--flavor", flavor,
                "--image", image, "--nic", nic, "--use-config-drive"]
        if user_data:
            argv += ["--user-data", user_data]
        s = self.aio.os_json(*argv, name)
        self.servers.append(s["id"])
        return s["id"]

    def console(self, sid):
        return self.aio.sh(["openstack", "console", "log", "show", sid], timeout=120,
                           check=False)

    # ------------------------------------------------------------------ steps

    def deploy(self):
        """The roles against this machine."""
        s = self.sluice
        # the role's flavor bootstrap makes g1.gold (test_aio.py's run may have left one)
        if "g1.gold" in self.aio.os("flavor", "list", "--all", "-f", "value", "-c",
                                    "Name").split():
            self.aio.os("flavor", "delete", "g1.gold")
        s.deploy()
        self.ok(f"ansible-playbook ansible/site.yml (sluice_novahook, sluice_agent; connection "
                f"local, sluice_*_service_manager direct): {s.recap}")
        text = open(s.nova_conf).read()
        for want in ("vendordata_providers = StaticJSON,DynamicJSON",
                     f"vendordata_dynamic_targets = sluice@https://127.0.0.1:9443/v1/vendordata",
                     f"certfile = {s.nova_creds}/nova-client.crt"):
            if want not in text:
                raise Failed(f"{s.nova_conf}: no '{want}'")
        text = open(s.agent_conf).read()
        if not re.search(r"^\[flavor g1\.gold\]\ntier = gold$", text, re.M):
            raise Failed(f"{s.agent_conf}: no [flavor g1.gold] with tier gold")
        if not re.search(rf"^token_ttl = {s.token_ttl}$", open(s.novahook_conf).read(), re.M):
            raise Failed(f"{s.novahook_conf}: no token_ttl = {s.token_ttl}")
        prov = open(s.provider_yaml).read() if os.path.exists(s.provider_yaml) else ""
        if "CUSTOM_GPU_REMOTE_SLOT" not in prov or f"total: {self.args.slots}" not in prov:
            raise Failed(f"{s.provider_yaml}: not the role's provider config with "
                         f"CUSTOM_GPU_REMOTE_SLOT total {self.args.slots}")
        for line in s.provenance():
            self.ok(f"from the roles: {line}")
        self.ok(f"the roles' files: {s.novahook_conf} (token_ttl {s.token_ttl}), {s.agent_conf} "
                f"([flavor g1.gold] tier gold, advertise {s.advertise}), the nova.conf fragment "
                f"{s.nova_conf}, {s.provider_yaml}")
        specs = self.aio.os_json("flavor", "show", "g1.gold")["properties"]
        if specs.get("sluice:sla") != "gold" or \
                specs.get("resources:CUSTOM_GPU_REMOTE_SLOT") != "1":
            raise Failed(f"flavor g1.gold (the role's bootstrap-flavors.sh): {specs}")
        self.ok(f"flavor g1.gold by the role's bootstrap (the real openstack client): {specs}")
        self.ok(f"sluice-novahook on 127.0.0.1:9443 and sluice-agent up; the agent registered "
                f"as {s.host} with nova-hook's registry")

    def gpu_server(self, image):
        s, aio = self.sluice, self.aio
        with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
            if self.net:
                f.write(USER_DATA_NET.replace("@HOST@", NET_HOST).replace(
                    "@PORT@", str(PROGRAM_PORT)).replace("@PROGRAM@", PROGRAM).replace(
                    "@HOLD@", HOLD).replace("@HOLD_SECONDS@", str(HOLD_SECONDS)))
            else:
                f.write(USER_DATA)
        try:
            sid = self.step("gpu_server_active", lambda: wait_server(
                aio, self.create("chain-gpu", "g1.gold", image, f.name), {"ACTIVE"},
                timeout=self.args.timeout))["id"]
        finally:
            os.unlink(f.name)
        project = aio.os_json("server", "show", sid)["project_id"]
        self.gpu, self.project = sid, project
        xml = domain_xml(sid) or ""
        if "<kernel>" not in xml or "<initrd>" not in xml or CMDLINE not in xml:
            raise Failed(f"domain {sid}: not booted from the image's kernel, ramdisk and "
                         f"os_command_line")
        self.ok(f"server {sid} ACTIVE (project {project}); nova-compute booted the image's "
                f"kernel and ramdisk with '{CMDLINE}'")
        if self.net:
            self.port_ip = self.port_address(sid, xml)
        m = wait_log(s.agent, rf"instance {sid} \((\S+), project {project}, flavor g1\.gold\): "
                     r"running, GPU flavor", 60, "the agent recognising the GPU instance")
        self.ok(f"agent: {m.group(0)}")
        wait_log(s.novahook, rf"instance {sid} \(project {project}, flavor g1\.gold\) placed on "
                 rf"{re.escape(s.host)}", 60, "the placement in nova-hook's registry")
        listed = json.loads(s.registry("--json", "instances", "--project", project))
        rows = listed if isinstance(listed, list) else listed.get("instances", [])
        if not any(sid in json.dumps(r) for r in rows):
            raise Failed(f"sluice-registry instances --project {project}: {sid} not listed")
        self.ok(f"sluice-registry instances lists {sid} on {s.host}")
        m = wait_log(s.novahook, rf"vendordata HTTP \d+ in \d+ us: instance {sid}[^\n]*", 60,
                     "nova-compute's vendordata request")
        line = m.group(0)
        if "token" not in line or "issued" not in line:
            raise Failed(f"nova-hook answered nova-compute's vendordata request without a token: "
                         f"{line} (the agent's placement came after Nova's request?)")
        self.ok(f"nova-hook: {line}")
        vd = json.loads(config_drive_file(self.args.state, sid,
                                          "/openstack/latest/vendor_data2.json"))
        sl = vd.get("sluice") or {}
        endpoint = want = f"tcp://{s.advertise}:7400"
        if sl.get("enroll_endpoint") != want or not sl.get("token") or "BEGIN CERT" not in sl.get(
                "ca", ""):
            raise Failed(f"config drive of {sid}: vendor_data2.json sluice = {sl!r} (expected "
                         f"a token, a CA and the endpoint {want})")
        self.ok(f"the config drive's vendor_data2.json: sluice.enroll_endpoint {want}, a token "
                f"(expires {sl.get('expires')}), the host CA")

        def booted():
            t0 = time.time()
            while time.time() - t0 < self.args.timeout:
                text = self.console(sid)
                if "chain: done" in text:
                    return text
                time.sleep(10)
            raise Failed(f"server {sid}: the guest's first boot did not finish within "
                         f"{self.args.timeout} s; console:\n{self.console(sid)[-3000:]}")
        text = self.step("guest_firstboot", booted)
        for want in (f"guest-firstboot: instance {sid} from the config drive",
                     f"chain: vendor_data2.json sluice \"enroll_endpoint\": \"{want}\""):
            if want not in text:
                raise Failed(f"console of {sid}: no '{want}'")
        for line in text.splitlines():
            if re.search(r"guest-firstboot: |chain: |sluice-enroll: ", line):
                log(f"  console | {line.strip()}")
        if self.net:
            self.guest_ran(sid, project, text)
            return
        tried = f"chain: enroll | sluice-enroll: cannot reach the agent at {endpoint}"
        if tried not in text:
            raise Failed(f"console of {sid}: no '{tried}' (the guest's enrollment attempt)")
        self.ok("the guest booted, read the config drive, saw nova-hook's vendordata and "
                "tried the agent's endpoint (no network with --nic none: it cannot reach it)")

    def port_address(self, sid, xml):
        """The server's port on sluice-net: ACTIVE, its fixed IP in the domain's <nova:ports>."""
        ports = self.aio.os_json("port", "list", "--server", sid, "--long")
        if len(ports) != 1:
            raise Failed(f"server {sid}: {len(ports)} ports (expected one on {NET_NAME})")
        port = ports[0]
        ips = port.get("Fixed IP Addresses") or []
        ip = ips[0].get("ip_address") if ips and isinstance(ips[0], dict) else None
        if not ip or port.get("Status") != "ACTIVE":
            raise Failed(f"server {sid}: port {port}: no fixed IP or not ACTIVE")
        if not re.search(rf'<nova:ip type="fixed" address="{re.escape(ip)}"', xml):
            raise Failed(f"domain {sid}: <nova:ports> does not name the port's fixed IP {ip}")
        self.ok(f"port {port.get('ID')} on {NET_NAME}: ACTIVE, fixed IP {ip}, in the domain's "
                f"<nova:ports> (Nova wrote it)")
        return ip

    def guest_ran(self, sid, project, text):
        s = self.sluice
        if f"chain: address ens3 {self.port_ip}/" not in text and \
                not re.search(rf"chain: address \S+ {re.escape(self.port_ip)}/", text):
            raise Failed(f"console of {sid}: the guest has not the port's address {self.port_ip} "
                         f"(Neutron's DHCP)")
        self.ok(f"the guest got its port's address {self.port_ip} from Neutron's DHCP agent")
        m = wait_log(s.agent, rf"enrolled instance {sid} project (\S+) [^\n]*? from (\S+) "
                     r"\(client[^\n]*", 60, "the agent's enrollment of the guest")
        if m.group(1) != project or m.group(2) != self.port_ip:
            raise Failed(f"agent: {m.group(0)} (expected project {project} from "
                         f"{self.port_ip}, the port's fixed IP)")
        self.ok(f"agent: {m.group(0).strip()} (the source-address check saw the port's fixed IP)")
        if "token expired" in text:
            raise Failed(f"console of {sid}: the config drive's token expired before the "
                         f"guest's first enrollment (token_ttl {s.token_ttl} s; --token-ttl):\n"
                         f"{text[-3000:]}")
        if "chain: enrolled, backend tcp://" + NET_HOST not in text:
            raise Failed(f"console of {sid}: the guest did not enroll (or its backend.conf does "
                         f"not point at {NET_HOST}):\n{text[-3000:]}")
        name = PROGRAM.split(".")[0]
        if f"chain: program | PASS {name}" not in text or "chain: program exit 0" not in text:
            raise Failed(f"console of {sid}: {PROGRAM} did not pass in the guest:\n"
                         f"{text[-3000:]}")
        self.ok(f"the guest enrolled at first boot and ran {PROGRAM} on its backend: PASS {name}")
        self.hold_session(sid, project, text)
        u = self.step("usage_agent", lambda: self.wait_usage(
            lambda: server_usage(s.usage(), project, sid), 120, "sluice-usage"))
        self.ok(f"sluice-usage: {sid} under project {project}: gpu_hours {u.get('gpu_hours')} "
                f"({u.get('gpu_hours', 0) * 3600:.4f} s), kernels {u.get('kernels')}")

    def hold_session(self, sid, project, text):
        """tests/cuda's session_hold runs in the guest: its session is open at the backend."""
        if "chain: hold | SESSION OPEN" not in text:
            raise Failed(f"console of {sid}: {HOLD} did not open its session:\n{text[-3000:]}")
        rx = rf"session (\d+) instance {sid} project {project}: opened \(guest pid (\d+)[^\n]*"
        wait_log(self.sluice.agent, rx, 60, "the holding session at the backend")
        opened = list(re.finditer(rx, self.sluice.agent.text()))
        self.hold = opened[-1].group(1)
        closed = re.search(rf"session {self.hold} instance {sid} project \S+: closing",
                           self.sluice.agent.text())
        if len(opened) < 2 or closed:
            raise Failed(f"backend: the holding session is not the open second session of {sid} "
                         f"({len(opened)} opened, session {self.hold} closing: {bool(closed)})")
        self.ok(f"backend: {opened[-1].group(0).strip()} ({HOLD}, still open)")

    @staticmethod
    def wait_usage(get, timeout, what):
        t0, u = time.time(), None
        while time.time() - t0 < timeout:
            u = get()
            if u and u.get("gpu_hours", 0) > 0 and u.get("kernels", 0) >= 1:
                return u
            time.sleep(3)
        raise Failed(f"{what}: no GPU time for the instance after {timeout} s: {u}")

    def plain_server(self, image):
        s = self.sluice
        sid = self.step("plain_server_active", lambda: wait_server(
            self.aio, self.create("chain-plain", "aio.plain", image), {"ACTIVE"},
            timeout=self.args.timeout))["id"]
        wait_log(s.agent, rf"instance {sid} \(\S+, project \S+, flavor aio\.plain\): running, "
                 r"not a GPU flavor", 60, "the agent ignoring the plain instance")
        wait_log(s.novahook, rf"vendordata HTTP 200 in \d+ us: instance {sid}: not on a Sluice "
                 r"host", 60, "nova-hook's empty answer for the plain instance")
        self.ok(f"plain server {sid}: the agent says not a GPU flavor, nova-hook gave no "
                "vendordata")
        self.delete(sid)

    def delete(self, sid):
        self.aio.sh(["openstack", "server", "delete", "--wait", sid], timeout=600)
        self.servers.remove(sid)

    def gpu_delete(self):
        s, sid = self.sluice, self.gpu
        if self.net:
            self.revoke_live(sid)
        else:
            self.step("gpu_server_delete", lambda: self.delete(sid))
        m = wait_log(s.agent, rf"instance {sid} \(\S+\): [^\n]*undefined[^\n]*", 60,
                     "the agent's revocation at the undefine")
        self.ok(f"agent: {m.group(0)}")
        m = wait_log(s.agent, rf"instance {sid} \(project {self.project}\): revoked [^\n]*", 60,
                     "the revocation at the project's backend")
        self.ok(f"agent: {m.group(0)}")
        m = wait_log(s.novahook, rf"instance {sid} removed from [^\n]*", 60,
                     "the placement's removal")
        self.ok(f"nova-hook: {m.group(0)}")
        def registry_usage():
            return server_usage(json.loads(s.registry("usage", "--project", self.project,
                                                      "--format", "json")), self.project, sid)
        if self.net:
            u = self.step("usage_registry", lambda: self.wait_usage(
                registry_usage, 180, f"sluice-registry usage --project {self.project}"))
        else:
            u = registry_usage()
        if not u:
            raise Failed(f"sluice-registry usage --project {self.project}: no {sid}")
        self.ok(f"sluice-registry usage: {sid} under project {self.project}: flavor "
                f"{u.get('flavor')}, {u.get('existence')} {u.get('hours')} h, state "
                f"{u.get('state')}, gpu_hours {u.get('gpu_hours')}")
        u = server_usage(s.usage(), self.project, sid)
        if not u or (self.net and not u.get("gpu_hours")):
            raise Failed(f"sluice-usage (the agent's store): no {sid} (or no GPU time) under "
                         f"{self.project}: {u}")
        self.ok(f"sluice-usage: {sid} under project {self.project}: flavor {u.get('flavor')}, "
                f"{u.get('existence')} {u.get('hours')} h, gpu_hours {u.get('gpu_hours')}")

    def revoke_live(self, sid):
        """`openstack server delete` while the holding session lives: the backend ends it
        (its revocation names one live session, the session closes). Timed from the delete's
        start to each log line's appearance (polled every 50 ms; the daemons' lines carry no
        time), and to the client's return (--wait: the server gone)."""
        s, log_ = self.sluice, self.sluice.agent
        t0 = time.time()
        p = subprocess.Popen(["openstack", "server", "delete", "--wait", sid], env=self.aio.env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_log(log_, rf"instance {sid} \(\S+\): destroyed", 600, "the domain's end")
            self.timings["delete_to_destroyed"] = round(time.time() - t0, 2)
            wait_log(log_, rf"instance {sid} \(\S+\): undefined", 600, "the undefine")
            self.timings["delete_to_undefined"] = round(time.time() - t0, 2)
            m = wait_log(log_, rf"instance {sid} revoked \(([^)]*)\): (\d+) live sessions? "
                         r"ended[^\n]*", 600, "the backend's revocation of the instance")
            self.timings["delete_to_backend_revoked"] = round(time.time() - t0, 2)
            c = wait_log(log_, rf"session {self.hold} instance {sid} from \S+ closed: "
                         r"revoked[^\n]*", 60, "the holding session's end by the revocation")
            self.timings["delete_to_session_closed"] = round(time.time() - t0, 2)
        finally:
            out, _ = p.communicate(timeout=600)
        self.timings["gpu_server_delete"] = round(time.time() - t0, 1)
        if p.returncode != 0:
            raise Failed(f"openstack server delete --wait {sid}: exit {p.returncode}: {out}")
        self.servers.remove(sid)
        if int(m.group(2)) < 1:
            raise Failed(f"backend: {m.group(0)}: the holding session was not live at the "
                         f"revocation (ended otherwise before?)")
        self.ok(f"backend: {m.group(0).strip()}")
        self.ok(f"backend: {c.group(0).strip()}")
        t = self.timings
        self.ok(f"from `openstack server delete`: domain destroyed {t['delete_to_destroyed']} s, "
                f"undefined {t['delete_to_undefined']} s, revoked at the backend "
                f"{t['delete_to_backend_revoked']} s, the live session closed "
                f"{t['delete_to_session_closed']} s; the client returned (server gone) "
                f"{t['gpu_server_delete']} s")

    def run(self):
        args, aio = self.args, self.aio
        if not args.reuse:
            self.step("aio_up", lambda: aio.up(timeout=1800))
        self.step("sluice_deploy", self.deploy)
        # nova-compute reads the fragment and provider.yaml at start (the files the fragment
        # names at each request): restarted when the roles wrote either after its start
        started = os.stat(os.path.join(args.state, "run", "nova-compute.pid")).st_mtime
        s = self.sluice
        if not args.reuse or any(os.stat(f).st_mtime > started
                                 for f in (s.nova_conf, s.provider_yaml)):
            self.step("nova_compute_restart", lambda: restart_compute(aio))
        self.step("provider_config", lambda: ensure_inventory(aio, args.slots, True,
                                                              write=False))
        compute_rp(aio)
        self.step("flavors", lambda: ensure_flavors(aio))
        image, new = self.step("image_upload", lambda: ensure_image(aio, args.image))
        log(f"image {IMAGE} {image} ({'uploaded' if new else 'already in Glance'})")
        programs = None
        if self.net:
            net = aio.os_json("network", "show", NET_NAME)
            self.net_id = net["id"]
            log(f"network {NET_NAME} {self.net_id} ({net.get('provider:network_type')} on "
                f"{net.get('provider:physical_network')}, subnets {net.get('subnets')})")
            programs = ProgramServer(args.program)
        try:
            self.gpu_server(image)
            self.plain_server(image)
            self.gpu_delete()
        finally:
            if programs:
                programs.stop()
            for sid in list(self.servers):
                aio.sh(["openstack", "server", "delete", "--wait", sid], timeout=600,
                       check=False)
        print("CHAIN_TIMINGS " + json.dumps(self.timings), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--image", help="scripts/guest-image's output (default BUILD/vm/image)")
    ap.add_argument("--debs", help="scripts/build-packages' output, the roles' "
                    "sluice_packages_dir (default BUILD/deb: packages.build)")
    ap.add_argument("--state", default=os.environ.get("SLUICE_AIO_DIR", "/var/lib/sluice-aio"))
    ap.add_argument("--slots", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=1200, help="per server, seconds")
    ap.add_argument("--reuse", action="store_true", help="the all-in-one is up already")
    ap.add_argument("--nic-none", action="store_true",
                    help="servers without a network (the first configuration; no enrollment)")
    ap.add_argument("--token-ttl", type=int, default=3600,
                    help="nova-hook's token_ttl here (the role's default is 600; a first boot "
                    "under TCG takes longer: docs/openstack-aio.md)")
    ap.add_argument("--down", action="store_true", help="stop the services at the end")
    args = ap.parse_args()
    args.image = os.path.abspath(args.image or os.path.join(args.build, "vm", "image"))
    args.program = os.path.join(os.path.abspath(args.build), "tests", "cuda", PROGRAM)
    args.debs = os.path.abspath(args.debs or os.path.join(args.build, "deb"))
    if os.environ.get("SLUICE_OPENSTACK_CHAIN") != "1":
        print("SKIP: the chain takes 13-25 minutes (a guest's first boot under TCG): it runs only "
              "with SLUICE_OPENSTACK_CHAIN=1, the pre-landing command of docs/openstack-aio.md")
        return SKIP
    if os.geteuid() != 0:
        print("SKIP: needs root (services, libvirt's qemu:///system)")
        return SKIP
    script = os.path.join(args.source, "scripts", "openstack-aio")
    p = subprocess.run([script, "check"], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"SKIP: {p.stderr.strip()}")
        return SKIP
    if not args.nic_none:
        p = subprocess.run([script, "check-network"], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"SKIP: {p.stderr.strip()} (or --nic-none)")
            return SKIP
        for prog in (args.program, os.path.join(os.path.dirname(args.program), HOLD)):
            if not os.access(prog, os.X_OK):
                print(f"SKIP: no {prog} (tests/cuda, needs nvcc; or --nic-none)")
                return SKIP
    debs = {pkg: glob.glob(os.path.join(args.debs, f"{pkg}_*.deb"))
            for pkg in ("sluice-novahook", "sluice-agent")}
    if any(len(found) != 1 for found in debs.values()):
        print(f"SKIP: {args.debs} does not hold one sluice-novahook and one sluice-agent "
              f"package: scripts/build-packages {args.debs} (the roles install them)")
        return SKIP
    missing = [f for f in ("vmlinuz", "initrd.img", "root.img")
               if not os.path.exists(os.path.join(args.image, f))]
    if missing:
        print(f"SKIP: no guest image in {args.image} ({', '.join(missing)}: scripts/guest-image "
              f"or ctest -R vm.image)")
        return SKIP
    chain = None
    try:
        chain = Chain(args)
        chain.run()
        log("PASS")
        return 0
    except (Failed, DeployError, DemoError, subprocess.SubprocessError) as e:
        log(f"FAIL: {e}")
        return 1
    finally:
        if chain:
            chain.sluice.stop()
        if args.down:
            subprocess.run([script, "down"], env=dict(os.environ, SLUICE_AIO_DIR=args.state))


if __name__ == "__main__":
    sys.exit(main())
