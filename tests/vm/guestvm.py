"""A real guest for Sluice's tests and demo: the compute host's side of a tenant network in a
network namespace, and the guest's domain on the real libvirtd.

  network namespace sluice-vm-TAG (made here, deleted at the end)
    bridge br-gpu: HOST_IP/24 (where the agent and the backends listen) and 169.254.169.254
    (the metadata service), dnsmasq serving the instance's fixed IP by DHCP (as Neutron's DHCP
    agent does), the instance's tap
  libvirtd (the machine's own, qemu:///system): the domain, QEMU/TCG (KVM hangs here: no
    nested VMX), its tap made beforehand (managed='no') and moved into the namespace once QEMU
    holds it, so the agent sees connections from the guest's own port address

Processes that must be on the tenant network (sluice-novahook, the agent and its backends,
the metadata service) run in the namespace: wrap(argv).
"""
import os
import re
import shutil
import subprocess
import time

NS_PREFIX = "sluice-vm-"
BRIDGE = "br-gpu"
METADATA_IP = "169.254.169.254"


class VmError(Exception):
    """Something the guest machinery could not do; the message says what."""


def sh(*args, check=True, timeout=60):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise VmError(f"{' '.join(args)}: {(r.stderr or r.stdout).strip()}")
    return r


def stale_namespaces():
    """Namespaces of earlier runs whose process is gone (the name ends in its pid)."""
    out = sh("ip", "netns", "list", check=False).stdout
    for name in re.findall(rf"^({re.escape(NS_PREFIX)}\d+)", out, re.M):
        pid = int(name[len(NS_PREFIX):])
        if not os.path.exists(f"/proc/{pid}"):
            yield name


class VmNetwork:
    """The namespace, its bridge and addresses, dnsmasq, the tap."""

    def __init__(self, subnet="10.221.0", tag=None):
        tag = tag or os.getpid()
        self.ns = f"{NS_PREFIX}{tag}"
        self.host_ip, self.guest_ip = f"{subnet}.1", f"{subnet}.2"
        self.cidr = f"{subnet}.0/24"
        self.tap = f"slvm{tag % 10**8}"
        self.up_done = False

    def wrap(self, argv):
        return ["ip", "netns", "exec", self.ns] + list(argv)

    def up(self):
        for old in stale_namespaces():
            sh("ip", "netns", "del", old, check=False)
        if not os.path.exists("/dev/net/tun"):
            raise VmError("/dev/net/tun is missing: the guest's tap cannot be made")
        sh("ip", "netns", "add", self.ns)
        self.up_done = True
        n = ["ip", "-n", self.ns]
        sh(*n, "link", "set", "lo", "up")
        sh(*n, "link", "add", BRIDGE, "type", "bridge")
        sh(*n, "addr", "add", f"{self.host_ip}/24", "dev", BRIDGE)
        sh(*n, "addr", "add", f"{METADATA_IP}/32", "dev", BRIDGE)
        sh(*n, "link", "set", BRIDGE, "up")
        sh("ip", "tuntap", "add", "dev", self.tap, "mode", "tap")

    def attach_tap(self):
        """After QEMU opened the tap: into the namespace, onto the bridge."""
        sh("ip", "link", "set", self.tap, "netns", self.ns)
        sh("ip", "-n", self.ns, "link", "set", self.tap, "master", BRIDGE)
        sh("ip", "-n", self.ns, "link", "set", self.tap, "up")

    def dnsmasq_argv(self, mac, work):
        return self.wrap([
            "dnsmasq", "--keep-in-foreground", "--log-facility=-", "--log-dhcp", "--no-resolv",
            "--no-hosts", "--port=0", "--user=root", f"--interface={BRIDGE}", "--bind-interfaces",
            f"--dhcp-range={self.guest_ip},{self.guest_ip},255.255.255.0,12h",
            f"--dhcp-host={mac},{self.guest_ip}", f"--dhcp-option=option:router,{self.host_ip}",
            "--dhcp-authoritative", f"--dhcp-leasefile={work}/dnsmasq.leases",
            f"--pid-file={work}/dnsmasq.pid"])

    def down(self):
        if self.up_done:
            sh("ip", "netns", "del", self.ns, check=False)  # the tap goes with it
            self.up_done = False
        sh("ip", "link", "del", self.tap, check=False)  # if it never moved


class Domain:
    """The guest's libvirt domain on qemu:///system (virsh)."""

    def __init__(self, name, uri="qemu:///system"):
        self.name, self.uri = name, uri
        self.defined = False

    def virsh(self, *args, check=True, timeout=60):
        return sh("virsh", "-q", "-c", self.uri, *args, check=check, timeout=timeout)

    def define(self, xml_path):
        self.defined = True  # before: a signal may come after libvirtd defined it
        self.virsh("define", xml_path)

    def start(self):
        self.virsh("start", self.name, timeout=120)

    def destroy(self):
        self.virsh("destroy", self.name)

    def remove(self):
        if self.defined:
            self.virsh("destroy", self.name, check=False)
            self.virsh("undefine", self.name, check=False)
            self.defined = False


class SerialLog:
    """A serial port libvirt writes to a file: read what is new, line by line."""

    def __init__(self, path):
        self.path, self.pos, self.partial = path, 0, ""

    def new_lines(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except OSError:
            return []
        self.pos += len(data)
        text = self.partial + data.decode("utf-8", "replace").replace("\r", "")
        lines = text.split("\n")
        self.partial = lines.pop()
        return lines

    def text(self):
        try:
            with open(self.path, "rb") as f:
                return f.read().decode("utf-8", "replace").replace("\r", "")
        except OSError:
            return ""


def wait_until(cond, timeout, what, poll=0.2):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(poll)
    raise VmError(f"no {what} after {timeout:.0f} s")


def instance_spec(work, net, mac, ids, pki, novahook_port, source, user_data, flavor="g1.vm",
                  memory_mb=512, domain=None):
    """What tests/vm/nova_side.py makes Nova's artifacts from: the instance (ids: uuid,
    project, user), its port on net, Nova's vendordata target (nova-hook on novahook_port with
    Nova's client certificate of pki), the boot files in work."""
    uuid, project, user = ids
    return {
        "uuid": uuid, "domain": domain or f"instance-{os.getpid():08x}", "name": "gpu-vm",
        "hostname": "gpu-vm", "project_id": project, "project_name": "vm-project",
        "user_id": user, "user_name": "vm-user",
        "image_ref": "3e7c1b9a-5d2f-4a61-9b8e-0c1d2e3f4a5b",
        "flavor": {"name": flavor, "memory_mb": memory_mb, "vcpus": 1, "root_gb": 1},
        "user_data": user_data, "config_drive": source == "config-drive",
        "port": {"id": "6d1c3f3e-0a5b-4f1e-9c7a-5e1ce0de0002", "mac": mac, "ip": net.guest_ip,
                 "cidr": net.cidr, "gateway": net.host_ip,
                 "network_id": "0c4f8d8e-0000-4000-8000-000000000001", "tap": net.tap},
        "vendordata": {"url": f"https://127.0.0.1:{novahook_port}/v1/vendordata",
                       "server_ca": pki["server_ca"], "cert": pki["nova"][1],
                       "key": pki["nova"][0]},
        "boot": {"kernel": f"{work}/vmlinuz", "initrd": f"{work}/initrd.img",
                 "cmdline": "root=/dev/vda console=ttyS0 quiet systemd.show_status=1",
                 "disk": f"{work}/disk.img", "extra_disks": [f"{work}/progs.img"],
                 "config_drive": f"{work}/disk.config" if source == "config-drive" else None,
                 "console_log": f"{work}/console.log", "results_log": f"{work}/results.log"},
    }


def boot_files(image, work):
    """The kernel and initramfs next to the instance's own copy of the root disk (sparse), as
    Nova's raw image backend copies the base image per instance."""
    for f in ("vmlinuz", "initrd.img"):
        shutil.copy(os.path.join(image, f), os.path.join(work, f))
    sh("cp", "--sparse=always", os.path.join(image, "root.img"), f"{work}/disk.img")


def programs_disk(stage, img, size="256M"):
    """An ext4 image of the folder stage, label sluice-progs (mke2fs -d: no loop device)."""
    sh("mke2fs", "-q", "-F", "-t", "ext4", "-L", "sluice-progs", "-d", stage, img, size)
