#!/usr/bin/env python3
"""The guest VM on the GPU machine, against the real driver (tests/vm/gpu-run.sh runs this;
docs/vm-testing.md, "On the GPU machine").

The same image as CI's vm.* tests (scripts/guest-image), booted without libvirt (the GPU
machine has none): QEMU of ../shared/tools/qemu-bundle, TCG (KVM hangs there), the root disk,
a config drive made by Nova's ConfigDriveBuilder whose user-data runs the job of the programs
disk. The network (--net tap, the default): a tap made with ioctls alone (tests/vm/tapnet.py:
no ip(8), bridge or namespace; the GPU machine has none of them), the host's side 10.221.0.1,
the guest's static 10.221.0.2 through the kernel's ip= argument, so the backend sees the guest's
own address; where no tap can be made (no /dev/net/tun, no CAP_NET_ADMIN) the run says why and
falls back to QEMU's user networking (--net user: the guest reaches the host's 127.0.0.1 as
10.0.2.2, the backend sees 127.0.0.1). No agent and no enrollment there: the
backend runs with a throwaway PKI (scripts/make-demo-pki, as tests/e2e/run.py) and the job
installs the guest's credentials from the programs disk (enrollment is CI's vm.* tests).

Measured, in one call: sluice-bench-cuda natively, through Sluice from a host process, and
through Sluice from inside the guest (there: --latency, then --copies of 256 MiB alone,
--guest-copy-reps timed copies without an untimed one, as the emulated guest moves a few MB/s
over user networking; large_copy with --guest-large-copy-mib); sluice-vm-floors from
a host process and from the guest to a server on the host; the tests/cuda programs (static and
shared cudart) in the guest. Results under --out: vm-gpu.jsonl (a JSON line per program run and
per figure), vm-timing.md (the tables), console.log and results.log (the guest's serial ports),
backend.log, qemu.log.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import guest_job  # noqa: E402
import run as e2e  # noqa: E402
from guestvm import SerialLog, sh  # noqa: E402
from tapnet import TapError, TapNetwork  # noqa: E402

PORT, FLOORS_PORT = 47000, 47100
T0 = time.time()
TIMING = ["async empty launch", "launch + synchronize", "null round trip (event query) p50",
          "null round trip (event query) p99", "cudaMalloc + cudaFree 1 MiB",
          "H2D pageable 262144 KiB", "D2H pageable 262144 KiB", "H2D pinned 262144 KiB",
          "D2H pinned 262144 KiB"]
FIGURE = re.compile(r"^(\S.*?)\s{2,}(-?[0-9.]+) (\S+)$")


def say(text):
    print(f"gpu-vm [{time.time() - T0:6.1f} s] {text}", flush=True)


class Run:
    def __init__(self, a):
        self.a = a
        self.w = a.work
        self.c1, self.c2 = os.path.abspath(a.carry1), os.path.abspath(a.carry2)
        self.records, self.procs, self.net, self.net_note = [], [], None, ""
        self.driver = a.driver or e2e.real_driver()
        if not self.driver:
            raise SystemExit("gpu-vm: no NVIDIA libcuda.so.1 on this machine (--driver PATH)")
        self.driver_note = ("the real driver " + self.driver if not a.driver else
                            f"the driver {a.driver} (a rehearsal: not a GPU result unless it is "
                            "NVIDIA's)")

    def record(self, **kw):
        self.records.append(kw)

    def env(self, extra=None, frontend=False):
        e = dict(os.environ)
        libs = [f"{self.c1}/host/lib", f"{self.a.cuda_root}/lib64"]
        if frontend:
            libs.insert(0, f"{self.c1}/frontend")
        e["LD_LIBRARY_PATH"] = ":".join(libs + [e.get("LD_LIBRARY_PATH", "")])
        e.update(extra or {})
        return e

    # ------------------------------------------------------------------ setup

    def unpack(self):
        g = os.path.join(self.w, "guest")
        if not os.path.exists(os.path.join(g, "root.img")):
            os.makedirs(g, exist_ok=True)
            t0 = time.time()
            sh("tar", "-C", g, "-xJf", os.path.join(self.c2, "guest.tar.xz"), timeout=300)
            say(f"guest image unpacked in {time.time() - t0:.0f} s")
        self.g = g
        sh(os.path.join(REPO, "scripts", "make-demo-pki"), os.path.join(self.w, "pki"))

    def network(self):
        """A tap made with ioctls (tapnet.py), else QEMU's user networking, saying why."""
        if self.a.net in ("auto", "tap"):
            net = TapNetwork()
            try:
                net.up()
            except TapError as ex:
                self.net_note = f"no tap: {ex}"
                say(f"network: no tap here ({ex}); falling back to QEMU's user networking "
                    "(the backend will see the guest's connections from 127.0.0.1)")
            else:
                self.net, self.host_ip, self.mode = net, net.host_ip, "tap"
                self.cmdline_ip = (f" ip={net.guest_ip}::{net.host_ip}:{net.netmask}"
                                   "::ens2:off")
                say(f"network: tap {net.tap} (ioctls, no ip(8)), host {self.host_ip}/24, "
                    f"guest {net.guest_ip}{'; ' + net.note if net.note else ''}")
                self.net_note = net.note
                return
        self.host_ip, self.mode, self.cmdline_ip = "127.0.0.1", "user", ""

    def start(self, name, argv, env):
        log = open(os.path.join(self.w, f"{name}.log"), "w")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        return p

    def backend(self):
        pki = os.path.join(self.w, "pki")
        allow = os.path.join(self.w, "allow")
        with open(allow, "w") as f:
            f.write(e2e.GUEST_UUID + "\n")
        fmt = dict(project=e2e.PROJECT, driver=self.driver, pki=pki, allow=allow,
                   endpoint=f"tcp://{self.host_ip}:{PORT}")
        argv = [f"{self.c1}/host/bin/sluice-backend"] + [a.format(**fmt) for a in e2e.BACKEND_ARGS]
        self.start("backend", argv, self.env())
        self.start("floors", [f"{self.c1}/host/bin/sluice-vm-floors", "server", self.host_ip,
                              str(FLOORS_PORT)], self.env())
        time.sleep(2)
        # the credentials of the host process and of the guest (make-demo-pki's guest-a)
        for d, ep in [(os.path.join(self.w, "conf-host"), f"tcp://{self.host_ip}:{PORT}"),
                      (os.path.join(self.w, "creds"),
                       f"tcp://{self.host_ip if self.mode == 'tap' else '10.0.2.2'}:{PORT}")]:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "backend.conf"), "w") as f:
                f.write(f"endpoint = {ep}\n")
            for src, dst in [("guest-a.pem", "client.pem"), ("guest-a.key", "client.key"),
                             ("ca.pem", "ca.pem")]:
                shutil.copy(os.path.join(pki, src), os.path.join(d, dst))

    # ------------------------------------------------------------------ host-side figures

    def host_run(self, argv, env, timeout=120):
        """A host-side measurement; one that hangs is reported, the guest's part still runs."""
        try:
            return subprocess.run(argv, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as ex:
            say(f"{os.path.basename(argv[0])}: no end after {timeout} s: stopped")
            out = ex.stdout.decode() if isinstance(ex.stdout, bytes) else (ex.stdout or "")
            return subprocess.CompletedProcess(argv, 124, out, f"timed out after {timeout} s")

    def bench(self, where, env):
        t0 = time.time()
        r = self.host_run([f"{self.c1}/host/bin/sluice-bench-cuda"], env)
        self.figures(where, r.stdout)
        say(f"sluice-bench-cuda {where}: exit {r.returncode} in {time.time() - t0:.0f} s")
        if r.returncode:
            say(r.stderr[-2000:])

    def figures(self, where, text):
        for line in text.splitlines():
            m = FIGURE.match(line.strip())
            if m:
                self.record(kind="figure", where=where, figure=m.group(1),
                            value=float(m.group(2)), unit=m.group(3))

    def floors(self, where, text):
        m = re.search(r"FLOORS (\{.*\})", text)
        if m:
            self.record(kind="floors", where=where, **json.loads(m.group(1)))

    def host_side(self):
        self.bench("native", self.env({"SLUICE_CONFIG_DIR": "/nonexistent"}))
        self.bench("host process", self.env({"SLUICE_CONFIG_DIR": os.path.join(self.w, "conf-host"),
                                             "SLUICE_SERVER_NAME": "localhost"}, frontend=True))
        r = self.host_run([f"{self.c1}/host/bin/sluice-vm-floors", "client", self.host_ip,
                           str(FLOORS_PORT)], self.env())
        self.floors("host process", r.stdout)

    # ------------------------------------------------------------------ the guest

    def steps(self):
        """The programs first (their pass or fail is the result that must come back), then the
        bench's latency figures, its four 256 MiB copies (one timed copy each, no untimed one
        before: 40 s a copy over user networking under TCG on the GPU machine), the floors,
        within the guest's --timeout. large_copy moves --guest-large-copy-mib MiB."""
        names = e2e.PROGRAMS if self.a.programs == "all" else self.a.programs.split(",")
        env = {"SLUICE_LARGE_COPY_MIB": self.a.guest_large_copy_mib}
        s = [(f"{p}.{rt}", guest_job.program(f"{p}.{rt}", env if p == "large_copy" else None))
             for p in names for rt in ("static", "shared")]
        s.append(("bench", guest_job.program("sluice-bench-cuda") + " --latency"))
        s.append(("copies", guest_job.program("sluice-bench-cuda") + " --copies --copy-sizes "
                  f"262144 --copy-reps {self.a.guest_copy_reps} --no-warmup"))
        s.append(("floors", f"{guest_job.program('sluice-vm-floors')} client "
                            f"{self.host_ip if self.mode == 'tap' else '10.0.2.2'} {FLOORS_PORT}"))
        return s

    def progs_disk(self):
        stage = os.path.join(self.w, "progs")
        if os.path.exists(stage):
            shutil.rmtree(stage)
        shutil.copytree(os.path.join(self.g, "progs"), stage, symlinks=True)
        shutil.copytree(os.path.join(self.w, "creds"), os.path.join(stage, "creds"))
        setup = ("mkdir -p /etc/sluice && cp /mnt/progs/creds/* /etc/sluice/ && "
                 "chmod 600 /etc/sluice/client.key\nexport SLUICE_SERVER_NAME=localhost\n")
        if self.mode == "tap":  # no DHCP on the tap: the address of ip= set here as well
            setup += ("dev=$(ls /sys/class/net | grep -m1 '^en'); ip link set \"$dev\" up; "
                      f"ip addr replace {self.net.guest_ip}/24 dev \"$dev\"; "
                      "ip -br addr show \"$dev\"\n"
                      f"timeout 10 bash -c ': </dev/tcp/{self.net.host_ip}/{FLOORS_PORT}' && "
                      f"echo 'tap: {self.net.host_ip}:{FLOORS_PORT} reached' || "
                      f"echo 'tap: {self.net.host_ip}:{FLOORS_PORT} NOT reached (a firewall on "
                      "the host? try --net user)'\n")
        with open(os.path.join(stage, "job.sh"), "w") as f:
            f.write(guest_job.script(self.steps(), enroll_timeout=5, setup=setup))
        os.chmod(os.path.join(stage, "job.sh"), 0o755)
        img = os.path.join(self.w, "progs.img")
        sh("mke2fs", "-q", "-F", "-t", "ext4", "-L", "sluice-progs", "-d", stage, img, "1G")
        return img

    def qemu(self):
        disk = os.path.join(self.w, "disk.img")
        sh("cp", "--sparse=always", os.path.join(self.g, "root.img"), disk)
        progs = self.progs_disk()
        self.console = os.path.join(self.w, "console.log")
        self.results_path = os.path.join(self.w, "results.log")
        fds = (self.net.qemu_fd(),) if self.mode == "tap" else ()
        net = f"-netdev tap,id=n0,fd={fds[0]}" if fds else "-netdev user,id=n0"
        cmd = (f'source {self.c1}/qemu/env.sh && exec qemu-system-x86_64 $SLUICE_QEMU_ARGS '
               f'-accel tcg,thread=multi -machine pc -cpu max -smp {self.a.smp} -m {self.a.memory} '
               f'-nographic -nodefaults -monitor none -kernel {self.g}/vmlinuz '
               f'-initrd {self.g}/initrd.img -append "root=/dev/vda console=ttyS0 quiet'
               f'{self.cmdline_ip}" {net} -device virtio-net-pci,netdev=n0,addr=0x2,'
               f'mac=fa:16:3e:00:00:02,romfile= -drive file={disk},if=none,id=d0,format=raw '
               f'-device virtio-blk-pci,drive=d0,addr=0x4 -drive file={progs},if=none,id=d1,'
               f'format=raw,readonly=on -device virtio-blk-pci,drive=d1,addr=0x5 '
               f'-drive file={self.g}/config.iso,if=ide,index=3,media=cdrom,readonly=on '
               f'-chardev file,id=c0,path={self.console} -serial chardev:c0 '
               f'-chardev file,id=c1,path={self.results_path} -serial chardev:c1')
        log = open(os.path.join(self.w, "qemu.log"), "w")
        self.vm = subprocess.Popen(["bash", "-c", cmd], stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True, pass_fds=fds)
        self.procs.append(self.vm)
        say(f"QEMU/TCG started: {self.a.smp} vCPUs, {self.a.memory} MiB, network {self.mode}")

    def watch(self):
        res, log = guest_job.Results(), SerialLog(self.results_path)
        end = min(time.time() + self.a.timeout, T0 + self.a.budget)
        say(f"the guest's job has {end - time.time():.0f} s (--timeout {self.a.timeout}, "
            f"--budget {self.a.budget} for the whole run)")
        while time.time() < end and not res.done:
            for line in log.new_lines():
                kind, detail = res.feed(line)
                if kind in ("start", "begin", "end", "done", "fatal"):
                    say(f"guest | {line}")
                if kind == "fatal":
                    return res
            if self.vm.poll() is not None:
                say(f"QEMU exited ({self.vm.returncode})")
                break
            time.sleep(0.5)
        return res

    def guest_results(self, res):
        self.figures("guest VM", res.output("bench"))
        self.figures("guest VM", res.output("copies"))
        self.floors("guest VM", res.output("floors"))
        for name in res.order:
            st = res.steps[name]
            if name in ("bench", "copies", "floors", "enrollment"):
                self.record(kind="step", where="guest VM", name=name, rc=st["rc"],
                            seconds=st["s"])
                continue
            prog = name.rsplit(".", 1)[0]
            out = res.output(name)
            missing = e2e.check_output(prog, out) if st["rc"] is not None else ["no end"]
            self.record(kind="program", where="guest VM", name=prog, variant=name.rsplit(".")[-1],
                        rc=st["rc"], seconds=st["s"], ok=st["rc"] == 0 and not missing,
                        missing=[str(m) for m in missing], output_tail=out[-400:])

    # ------------------------------------------------------------------ results

    def report(self):
        out = self.a.out
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "vm-gpu.jsonl"), "w") as f:
            for r in self.records:
                f.write(json.dumps(r) + "\n")
        fig = {(r["where"], r["figure"]): r for r in self.records if r["kind"] == "figure"}
        peers = self.backend_peers()
        lines = [f"# VM on the GPU machine ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                 f"network {self.mode}, {self.driver_note})", "",
                 f"Network: {self.mode}{' (' + self.net_note + ')' if self.net_note else ''}; "
                 f"the backend saw sessions from {', '.join(peers) or 'nowhere'}.", "",
                 "| figure | native | host process | guest VM | guest / host process |",
                 "|---|---|---|---|---|"]
        for name in TIMING:
            v = [fig.get((w, name)) for w in ("native", "host process", "guest VM")]
            cell = [f"{x['value']:.2f} {x['unit']}" if x else "-" for x in v]
            ratio = (f"{v[2]['value'] / v[1]['value']:.2f}" if v[1] and v[2] and v[1]["value"]
                     else "-")
            lines.append(f"| {name} | {cell[0]} | {cell[1]} | {cell[2]} | {ratio} |")
        lines += ["", "| floor (64 B round trip, p50 / p99 us; stream GB/s) | host process | "
                  "guest VM |", "|---|---|---|"]
        fl = {r["where"]: r for r in self.records if r["kind"] == "floors"}
        for key, label in [("tcp_block", "TCP, blocking read"), ("tcp_poll", "TCP, busy-poll"),
                           ("zmq_block", "ZeroMQ DEALER/ROUTER, blocking"),
                           ("zmq_poll", "ZeroMQ DEALER/ROUTER, polled")]:
            c = [f"{fl[w][key + '_p50_us']:.1f} / {fl[w][key + '_p99_us']:.1f}" if w in fl
                 else "-" for w in ("host process", "guest VM")]
            lines.append(f"| {label} | {c[0]} | {c[1]} |")
        c = [f"{fl[w]['stream_gb_s']:.2f}" if w in fl else "-" for w in ("host process", "guest VM")]
        lines.append(f"| TCP stream 256 MiB | {c[0]} | {c[1]} |")
        steps = [r for r in self.records if r["kind"] == "step"]
        lines += ["", "guest steps: " + ", ".join(
            f"{r['name']} " + (f"rc {r['rc']} in {r['seconds']:.0f} s" if r["rc"] is not None
                               else "no end") for r in steps)]
        progs = [r for r in self.records if r["kind"] == "program"]
        ok = [r for r in progs if r["ok"]]
        lines += ["", f"tests/cuda in the guest VM ({self.driver_note}): {len(ok)} of "
                      f"{len(progs)} runs passed"]
        lines += [f"- FAILED {r['name']}.{r['variant']}: rc {r['rc']}, missing {r['missing']}"
                  for r in progs if not r["ok"]]
        with open(os.path.join(out, "vm-timing.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print("\n".join(lines), flush=True)
        for name in ("console.log", "results.log", "backend.log", "qemu.log"):
            p = os.path.join(self.w, name)
            if os.path.exists(p):
                shutil.copy(p, os.path.join(out, name))
        return 0 if progs and len(ok) == len(progs) else 1

    def backend_peers(self):
        """The addresses the backend logged sessions from ('connected from ADDR'), in order."""
        try:
            with open(os.path.join(self.w, "backend.log"), errors="replace") as f:
                text = f.read()
        except OSError:
            return []
        return list(dict.fromkeys(re.findall(r"connected from (\S+)", text)))

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, 15)
                    p.wait(10)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    os.killpg(p.pid, 9)
        if self.net:
            self.net.down()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--carry1", default=os.path.join(REPO, ".vmgpu1"))
    ap.add_argument("--carry2", default=os.path.join(REPO, ".vmgpu2"))
    ap.add_argument("--work", default="/tmp/sluice-vm-gpu")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/sluice-vm-gpu/out"))
    ap.add_argument("--programs", default="all", help="all, or a comma-separated list")
    ap.add_argument("--net", choices=["auto", "tap", "user"], default="tap",
                    help="tap (auto is the same): a tap made with ioctls, QEMU's user networking "
                         "where none can be made; user: QEMU's user networking")
    ap.add_argument("--smp", type=int, default=4)
    ap.add_argument("--memory", type=int, default=4096, help="MiB")
    ap.add_argument("--timeout", type=int, default=420, help="for the guest's job, seconds")
    ap.add_argument("--budget", type=int, default=450,
                    help="for the whole run, seconds: the guest's job ends by then at the latest "
                         "(the results and logs follow in seconds)")
    ap.add_argument("--guest-copy-reps", type=int, default=1,
                    help="timed 256 MiB copies per direction and memory kind in the guest")
    ap.add_argument("--guest-large-copy-mib", type=int, default=64,
                    help="SLUICE_LARGE_COPY_MIB of large_copy in the guest (the 256 MiB figures "
                         "are the bench's)")
    ap.add_argument("--cuda-root", default=os.environ.get("SLUICE_CUDA_ROOT", "/usr/local/cuda"))
    ap.add_argument("--driver", help="the backend's driver (default: NVIDIA's of this machine); "
                                     "the test double for a rehearsal without a GPU")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    r = Run(a)
    rc = 1
    try:
        r.unpack()
        r.network()
        r.backend()
        r.host_side()
        r.qemu()
        r.guest_results(r.watch())
    finally:
        r.cleanup()
        rc = r.report()
    return rc


if __name__ == "__main__":
    sys.exit(main())
