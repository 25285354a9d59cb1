"""The demo's real guest (demo.py --guest vm, docs/demo.md): instead of a process on this host
playing the guest, a VM of the image scripts/guest-image builds, booted by libvirtd from a
domain whose Nova metadata and config drive Nova's own code makes (tests/vm/, Debian's
python3-nova), on a tap in a network namespace, so the agent sees the guest's own address. The
guest enrolls itself at boot (sluice-enroll.service) and runs the CUDA program as its user-data.
"""
import os
import re
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "vm"))
import guest_job  # noqa: E402
from guestvm import (Domain, SerialLog, VmError, VmNetwork, boot_files,  # noqa: E402
                     instance_spec, programs_disk)
from procs import DemoError  # noqa: E402

NOVA_PYTHON = "/usr/bin/python3"
NOVA_SIDE = os.path.join(REPO, "tests", "vm", "nova_side.py")


class VmGuest:
    def __init__(self, demo):
        self.d = demo
        self.image = os.path.join(demo.build, "vm", "image")
        missing = [f for f in ("vmlinuz", "initrd.img", "root.img")
                   if not os.path.exists(os.path.join(self.image, f))]
        if missing:
            raise DemoError(f"--guest vm: no guest image in {self.image} (scripts/guest-image "
                            f"--build {demo.build} makes it; scripts/run-demo --guest vm does)")
        ldd = subprocess.run(["ldd", demo.bin["libcuda"]], capture_output=True, text=True).stdout
        if "libasan" in ldd:
            raise DemoError("--guest vm: this build's libcuda.so.1 is sanitized and the guest "
                            "image has no ASan runtime: use a build without SLUICE_SANITIZE")
        if subprocess.run([NOVA_PYTHON, "-c", "import nova.virt.libvirt.config"],
                          capture_output=True).returncode != 0:
            raise DemoError("--guest vm: Debian's python3-nova is missing (scripts/install-deps)")
        self.net = VmNetwork()
        self.domain = None
        self.mac = "fa:16:3e:%02x:%02x:%02x" % tuple(os.urandom(3))

    @property
    def host_ip(self):
        return self.net.host_ip

    def wrap(self, argv):
        return self.net.wrap(argv)

    def network_up(self):
        try:
            self.net.up()
        except VmError as ex:
            raise DemoError(f"--guest vm: {ex}")
        self.d.daemon("dnsmasq", self.net.dnsmasq_argv(self.mac, self.d.work))

    def nova(self, *args):
        r = subprocess.run(self.net.wrap([NOVA_PYTHON, NOVA_SIDE, *args]), capture_output=True,
                           text=True, timeout=600, stdin=subprocess.DEVNULL)
        bad = [ln for ln in r.stderr.splitlines() if "Error from dynamic vendordata" in ln]
        if r.returncode != 0 or bad:
            raise DemoError(f"nova_side.py {args[0]}: {(bad or [r.stderr[-2000:]])[0]}")
        return r.stdout

    def boot(self, flavor):
        d, w = self.d, self.d.work
        say = d.say_
        prog = f"{d.args.program}.static"
        steps = [(prog, guest_job.program(prog))]
        stage = os.path.join(w, "progs")
        os.makedirs(f"{stage}/bin")
        shutil.copy(d.bin["program"], f"{stage}/bin/{prog}")
        boot_files(self.image, w)
        programs_disk(stage, f"{w}/progs.img", "64M")
        spec = instance_spec(w, self.net, self.mac, (d.instance, d.project, d.user), d.pki,
                             d.novahook_port, "config-drive", guest_job.script(steps),
                             flavor, domain=f"sluice-demo-vm-{os.getpid()}")
        spec_path = os.path.join(w, "instance.json")
        with open(spec_path, "w") as f:
            import json
            json.dump(spec, f, indent=1)
        xml = self.nova("domain", spec_path)
        with open(os.path.join(w, "domain.xml"), "w") as f:
            f.write(xml)
        say("domain XML and its <nova:instance> from Nova's libvirt driver (python3-nova)")
        self.domain = Domain(spec["domain"])
        self.domain.define(os.path.join(w, "domain.xml"))
        say(f"$ virsh define domain.xml   ({spec['domain']}: kernel, root disk {w}/disk.img, "
            f"programs disk, tap {self.net.tap})")
        d.agent.wait_for(rf"registry: {d.instance} placed", 60, "the placement of the instance")
        say("the agent placed the defined instance with nova-hook's registry, so nova-hook")
        say("answers the config drive's vendordata (Nova builds the drive before the start)")
        say(self.nova("config-drive", spec_path, "--out", f"{w}/disk.config").strip())
        self.domain.start()
        self.net.attach_tap()
        self.t_start = time.time()
        say(f"$ virsh start {spec['domain']}   (QEMU/TCG; its tap on the bridge "
            f"{self.net.host_ip}/24 in network namespace {self.net.ns})")
        self.console = SerialLog(spec["boot"]["console_log"])
        self.results = guest_job.Results()
        self.results_log = SerialLog(spec["boot"]["results_log"])

    def follow(self, until, timeout, what):
        """Prints the guest's console lines about enrollment and the job's lines until
        until() is true."""
        end = time.time() + timeout
        shown = re.compile(r"guest-firstboot|sluice-enroll\[|Welcome to")
        while time.time() < end:
            for line in self.console.new_lines():
                if shown.search(line):
                    self.d.say_("guest console | " + re.sub(r"\x1b\[[0-9;]*m", "", line.strip()))
            for line in self.results_log.new_lines():
                kind, _ = self.results.feed(line)
                if kind in ("output", "begin", "end"):
                    self.d.say_("guest job     | " + line)
            if until():
                return
            time.sleep(0.3)
        raise DemoError(f"the guest: no {what} after {timeout} s "
                        f"({time.time() - self.t_start:.0f} s since it started)")

    def cleanup(self):
        if self.domain:
            self.domain.remove()
            self.domain = None

    def network_down(self):
        self.net.down()
