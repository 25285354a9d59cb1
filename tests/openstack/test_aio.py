#!/usr/bin/env python3
"""The all-in-one OpenStack of scripts/openstack-aio, driven only through OpenStack's own
interfaces (the `openstack` client, Placement's REST API with a Keystone token, libvirt):

  1. `openstack-aio up` (installs nothing; scripts/install-deps --openstack does), timed
  2. the Placement provider config of the sluice_agent role's template (CUSTOM_GPU_REMOTE_SLOT,
     total --slots, CUSTOM_GPU_REMOTING), read by the real nova-compute after a restart: the
     compute node's resource provider has that inventory and trait
  3. the GPU flavor made by nova-hook/openstack/bootstrap-flavors.sh with the real client; a
     plain flavor
  4. `server create --flavor g1.gold --nic none` -> ACTIVE; Placement holds an allocation of one
     CUSTOM_GPU_REMOTE_SLOT for the server; the libvirt domain (UUID = server id) runs and its
     Nova metadata names the flavor and the Keystone project
  5. a second GPU server while every slot is allocated: not scheduled (ERROR, "No valid host")
  6. a plain-flavor server: ACTIVE, no CUSTOM_GPU_REMOTE_SLOT in its allocation
  7. `server delete` of all: the allocations and the domains are gone

Sluice itself (nova-hook's vendordata, the agent, the guest image) is test_chain.py's
(openstack.chain); the image here is a blank disk (the domain runs SeaBIOS with nothing to
boot). Timings go to stdout as one JSON line (AIO_TIMINGS).
Root only (exit 77 otherwise); needs the packages of scripts/install-deps --openstack (exit 77
with the list when missing). Leaves the services up unless --down.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
NOVA_NS = "http://openstack.org/xmlns/libvirt/nova/1.1"


class Failed(Exception):
    pass


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Aio:
    def __init__(self, source, state):
        self.script = os.path.join(source, "scripts", "openstack-aio")
        self.source = source
        self.state = state
        self.env = dict(os.environ, SLUICE_AIO_DIR=state)
        if os.path.exists(os.path.join(state, "secrets", "admin")):
            self.load_env()  # else the first `up` makes them

    def load_env(self):
        """the admin credentials; again after `up`, which makes them on a fresh state folder"""
        out = self.sh([self.script, "env"])
        for line in out.splitlines():
            k, v = line.removeprefix("export ").split("=", 1)
            self.env[k] = v

    def sh(self, args, timeout=600, check=True, env=None):
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                           env=env or getattr(self, "env", None))
        if check and p.returncode != 0:
            raise Failed(f"{' '.join(args)} exited {p.returncode}:\n{p.stdout[-2000:]}"
                         f"\n{p.stderr[-3000:]}")
        return p.stdout

    def up(self, timeout):
        """`openstack-aio up`, its output passed through as it comes (its milestones, and on a
        failure the logs it names, are what CI shows); the services it starts outlive it."""
        p = subprocess.Popen([self.script, "up"], env=self.env, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            raise Failed(f"openstack-aio up did not finish in {timeout} s (its last lines above)")
        if rc != 0:
            raise Failed(f"openstack-aio up exited {rc} (above)")
        self.load_env()

    def os(self, *args, timeout=300):
        return self.sh(["openstack", *args], timeout=timeout)

    def os_json(self, *args):
        return json.loads(self.os(*args, "-f", "json"))

    def token(self):
        return self.os("token", "issue", "-f", "value", "-c", "id").strip()

    def placement(self, path):
        req = urllib.request.Request(f"http://127.0.0.1:8778{path}", headers={
            "X-Auth-Token": self.token(), "OpenStack-API-Version": "placement 1.36"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)


def wait_server(aio, sid, want, timeout=600):
    t0 = time.time()
    while time.time() - t0 < timeout:
        s = aio.os_json("server", "show", sid)
        if s["status"] in want:
            return s
        if s["status"] == "ERROR" and "ERROR" not in want:
            raise Failed(f"server {sid} went to ERROR: {s.get('fault')}")
        time.sleep(3)
    raise Failed(f"server {sid} not {want} after {timeout} s")


def domain_xml(uuid):
    p = subprocess.run(["virsh", "-c", "qemu:///system", "dumpxml", uuid], capture_output=True,
                       text=True, timeout=60)
    return p.stdout if p.returncode == 0 else None


def domain_state(uuid):
    p = subprocess.run(["virsh", "-c", "qemu:///system", "domstate", uuid], capture_output=True,
                       text=True, timeout=60)
    return p.stdout.strip() if p.returncode == 0 else None


def provider_config(aio, slots):
    """The role's template, rendered with jinja2 (what ansible's template module does)."""
    import jinja2
    src = open(os.path.join(aio.source, "nova-hook/openstack/provider.yaml.j2")).read()
    text = jinja2.Template(src, keep_trailing_newline=True).render(
        sluice_gpu_slots=slots, sluice_gpu_slots_reserved=0,
        nova_provider_config_dir=f"{aio.state}/etc/nova/provider_config")
    path = f"{aio.state}/etc/nova/provider_config/sluice.yaml"
    old = open(path).read() if os.path.exists(path) else None
    if old != text:
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o640)
        return True
    return False


def restart_compute(aio):
    pid = int(open(f"{aio.state}/run/nova-compute.pid").read().split()[0])
    os.killpg(pid, 15)
    for _ in range(150):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    aio.up(timeout=1200)


def compute_rp(aio):
    rps = aio.placement("/resource_providers")["resource_providers"]
    if len(rps) != 1:
        raise Failed(f"expected one resource provider (this host), Placement has {rps}")
    return rps[0]["uuid"]


def ensure_inventory(aio, slots, reuse, write=True):
    """provider.yaml read by nova-compute: the compute node's resource provider has
    CUSTOM_GPU_REMOTE_SLOT (total slots) and CUSTOM_GPU_REMOTING; returns its uuid. write=False:
    the file is there already (the sluice_agent role's, test_chain.py)."""
    if (write and provider_config(aio, slots)) or not reuse:
        restart_compute(aio)
    t0 = time.time()
    while time.time() - t0 < 300:
        rp = compute_rp(aio)
        inv = aio.placement(f"/resource_providers/{rp}/inventories")["inventories"]
        traits = aio.placement(f"/resource_providers/{rp}/traits")["traits"]
        if "CUSTOM_GPU_REMOTE_SLOT" in inv and "CUSTOM_GPU_REMOTING" in traits:
            if inv["CUSTOM_GPU_REMOTE_SLOT"]["total"] != slots:
                raise Failed(f"CUSTOM_GPU_REMOTE_SLOT total {inv['CUSTOM_GPU_REMOTE_SLOT']}"
                             f", expected {slots}")
            return rp
        time.sleep(3)
    raise Failed("nova-compute did not report CUSTOM_GPU_REMOTE_SLOT/CUSTOM_GPU_REMOTING to "
                 "Placement (provider.yaml; see log/nova-compute.log)")


def ensure_flavors(aio):
    """g1.gold by bootstrap-flavors.sh (the real client), the plain flavor aio.plain."""
    names = aio.os("flavor", "list", "--all", "-f", "value", "-c", "Name").split()
    if "g1.gold" not in names:
        aio.sh(["bash", os.path.join(aio.source, "nova-hook/openstack/bootstrap-flavors.sh"),
                "--tiers", "gold", "--ram", "256", "--vcpus", "1", "--disk", "1"])
    if "aio.plain" not in names:
        aio.os("flavor", "create", "--ram", "256", "--vcpus", "1", "--disk", "1", "aio.plain")
    specs = aio.os_json("flavor", "show", "g1.gold")["properties"]
    for k, v in (("resources:CUSTOM_GPU_REMOTE_SLOT", "1"),
                 ("trait:CUSTOM_GPU_REMOTING", "required")):
        if specs.get(k) != v:
            raise Failed(f"flavor g1.gold: {k} is {specs.get(k)!r}, expected {v!r}")


def run(args):
    timings = {}
    aio = Aio(args.source, args.state)
    servers = []

    def step(name, fn):
        t = time.time()
        r = fn()
        timings[name] = round(time.time() - t, 1)
        log(f"{name}: {timings[name]} s")
        return r

    if not args.reuse:
        step("aio_up", lambda: aio.up(timeout=1800))
    log(aio.sh([aio.script, "status"]).strip().replace("\n", "; "))

    # 2. provider.yaml read by nova-compute
    def inventory():
        return ensure_inventory(aio, args.slots, args.reuse)
    rp = step("provider_config", inventory)
    log(f"resource provider {rp}: CUSTOM_GPU_REMOTE_SLOT total {args.slots}, CUSTOM_GPU_REMOTING")

    # 3. flavors and image
    def flavors():
        ensure_flavors(aio)
        if "aio-blank" not in aio.os("image", "list", "-f", "value", "-c", "Name").split():
            with tempfile.TemporaryDirectory() as d:
                img = f"{d}/blank.qcow2"
                aio.sh(["qemu-img", "create", "-f", "qcow2", img, "1G"])
                aio.os("image", "create", "--disk-format", "qcow2", "--container-format",
                       "bare", "--file", img, "--public", "aio-blank")
    step("flavors_image", flavors)

    def create(name, flavor):
        s = aio.os_json("--os-compute-api-version", "2.37", "server", "create", "--flavor", flavor,
                        "--image", "aio-blank",
                        "--nic", "none", "--use-config-drive", name)
        servers.append(s["id"])
        return s["id"]

    try:
        # 4. the GPU server
        gpu = step("gpu_server_active", lambda: wait_server(aio, create("aio-gpu-1", "g1.gold"),
                                                            {"ACTIVE"}))["id"]
        alloc = aio.placement(f"/allocations/{gpu}")["allocations"]
        res = alloc.get(rp, {}).get("resources", {})
        if res.get("CUSTOM_GPU_REMOTE_SLOT") != 1:
            raise Failed(f"server {gpu}: Placement allocation {alloc} has no "
                         "CUSTOM_GPU_REMOTE_SLOT=1 on this host")
        log(f"Placement allocation of {gpu}: {res}")
        state, xml = domain_state(gpu), domain_xml(gpu)
        if state != "running" or xml is None:
            raise Failed(f"domain {gpu}: state {state!r} (expected running)")
        project = aio.os_json("project", "show", "admin")["id"]
        for want in (f'<nova:flavor name="g1.gold">', f'<nova:project uuid="{project}">'):
            if want not in xml:
                raise Failed(f"domain {gpu}: Nova metadata lacks {want}")
        log(f"domain {gpu} running, Nova metadata names g1.gold and project {project}")

        # 5. every slot allocated: Placement has no candidate, the scheduler none
        if args.slots == 1:
            s = step("gpu_server_refused", lambda: wait_server(
                aio, create("aio-gpu-2", "g1.gold"), {"ERROR"}))
            fault = json.dumps(s.get("fault"))
            if "No valid host" not in fault:
                raise Failed(f"second GPU server: ERROR but fault {fault}")
            if domain_state(s["id"]) is not None:
                raise Failed(f"second GPU server {s['id']}: a domain exists")
            log(f"second GPU server not scheduled: {s['fault']['message']}")

        # 6. a plain flavor gets no slot
        plain = step("plain_server_active", lambda: wait_server(
            aio, create("aio-plain", "aio.plain"), {"ACTIVE"}))["id"]
        res = aio.placement(f"/allocations/{plain}")["allocations"].get(rp, {}).get(
            "resources", {})
        if "CUSTOM_GPU_REMOTE_SLOT" in res:
            raise Failed(f"plain server {plain} was allocated a GPU slot: {res}")
        log(f"plain server {plain}: allocation {res}, no GPU slot")
    finally:
        # 7. delete all; nothing stays allocated or defined
        def delete():
            for sid in servers:
                aio.sh(["openstack", "server", "delete", "--wait", sid], timeout=600,
                       check=False)
        step("delete", delete)
    for sid in servers:
        if domain_xml(sid) is not None:
            raise Failed(f"server {sid}: domain still defined after delete")
        alloc = aio.placement(f"/allocations/{sid}")["allocations"]
        if alloc:
            raise Failed(f"server {sid}: allocation {alloc} left after delete")
    log("deleted: no domain, no allocation left")
    print("AIO_TIMINGS " + json.dumps(timings), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--state", default=os.environ.get("SLUICE_AIO_DIR", "/var/lib/sluice-aio"))
    ap.add_argument("--slots", type=int, default=1)
    ap.add_argument("--reuse", action="store_true",
                    help="do not restart nova-compute when provider.yaml is unchanged")
    ap.add_argument("--down", action="store_true", help="stop the services at the end")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root (services, libvirt's qemu:///system)")
        return SKIP
    aio = os.path.join(args.source, "scripts", "openstack-aio")
    p = subprocess.run([aio, "check"], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"SKIP: {p.stderr.strip()}")
        return SKIP
    try:
        run(args)
        log("PASS")
        return 0
    except (Failed, subprocess.TimeoutExpired) as e:
        log(f"FAIL: {e}")
        return 1
    finally:
        if args.down:
            subprocess.run([aio, "down"], env=dict(os.environ, SLUICE_AIO_DIR=args.state))


if __name__ == "__main__":
    sys.exit(main())
