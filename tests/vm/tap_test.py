#!/usr/bin/env python3
"""vm.tap_ioctls: the GPU machine's tap (tests/vm/tapnet.py) made here without ip(8).

Checks, as root (exit 77 otherwise), with PATH emptied so that no program can be run:
  - the tap is up, a tap without packet information and with virtio-net headers, and holds
    the host's address with a /24 (a socket binds to it; the guest's address is routed to it);
  - its descriptor passed to a child (as to QEMU) keeps it alive after ours closes; it goes
    away with the child;
  - as an unprivileged user the tap is refused with a message naming CAP_NET_ADMIN, and
    tests/vm/gpu_run.py's network step then falls back to user networking, saying why;
  - a bad address is refused by name and leaves no tap behind;
  - a missing /dev/net/tun is made from /sys/class/misc/tun/dev (a /dev without devtmpfs), and
    where the kernel has no tun the message says so.
"""
import os
import socket
import subprocess
import sys
import stat
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from tapnet import IFF_NO_PI, IFF_TAP, IFF_UP, IFF_VNET_HDR, TapError, TapNetwork  # noqa: E402

FAILS = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}", flush=True)
    if not cond:
        FAILS.append(what)


def sysfs(tap, name):
    try:
        with open(f"/sys/class/net/{tap}/{name}") as f:
            return int(f.read().strip(), 16)
    except OSError:
        return None


def exists(tap):
    return os.path.exists(f"/sys/class/net/{tap}")


def unprivileged(code):
    """code in a Python run as nobody; its stdout."""
    r = subprocess.run(["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup",
                        "--clear-groups", sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=60, cwd="/",
                       env={"PYTHONPATH": os.pathsep.join([HERE, os.path.join(
                           os.path.dirname(os.path.dirname(HERE)), "tests", "e2e")])})
    return r.stdout + r.stderr


def main():
    if os.geteuid() != 0:
        print("vm.tap_ioctls: skipped: not root (a tap needs CAP_NET_ADMIN)")
        return 77
    if not os.path.exists("/dev/net/tun"):
        print("vm.tap_ioctls: skipped: no /dev/net/tun here")
        return 77
    path = os.environ.get("PATH", "")
    os.environ["PATH"] = ""  # tapnet must not need ip(8) or any other program
    subnet = f"10.229.{os.getpid() % 200 + 20}"
    net = TapNetwork(subnet=subnet)
    try:
        net.up()
        flags, tun = sysfs(net.tap, "flags"), sysfs(net.tap, "tun_flags")
        check(flags is not None and flags & IFF_UP, f"{net.tap} is up (flags {flags:#x})")
        want = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR
        check(tun is not None and tun & want == want, f"{net.tap}: tap, no PI, vnet_hdr "
              f"(tun_flags {tun:#x})")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((net.host_ip, 0))
            check(True, f"a socket binds to {net.host_ip}")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((net.guest_ip, 9))
            check(s.getsockname()[0] == net.host_ip,
                  f"{net.guest_ip} is reached from {s.getsockname()[0]} (the /24 on the tap)")
        fd = net.qemu_fd()
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                 pass_fds=(fd,))
        net.down()
        check(exists(net.tap), "the tap lives on while the child (QEMU) holds its descriptor")
        child.kill()
        child.wait()
        for _ in range(50):
            if not exists(net.tap):
                break
            time.sleep(0.1)
        check(not exists(net.tap), "the tap is gone with the child")
    finally:
        net.down()

    bad = TapNetwork(subnet="10.999.0", tag=os.getpid() + 1)
    try:
        bad.up()
        check(False, "a bad address is refused")
    except TapError as ex:
        check("SIOCSIFADDR 10.999.0.1" in str(ex), f"a bad address is refused: {ex}")
    check(not exists(bad.tap), "and leaves no tap behind")

    with tempfile.TemporaryDirectory() as d:
        sys_dev = os.path.join(d, "dev")
        with open(sys_dev, "w") as f:
            f.write("10:200\n")
        node = os.path.join(d, "net", "tun")
        t = TapNetwork(subnet=subnet)
        made = t.tun_node(dev=node, sysfs=sys_dev)
        st = os.stat(made)
        check(stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 10 and
              os.minor(st.st_rdev) == 200, f"a missing node is made: {t.note}")
        try:
            t.tun_node(dev=os.path.join(d, "none", "tun"), sysfs=os.path.join(d, "nosuch"))
            check(False, "no tun in the kernel is refused")
        except TapError as ex:
            check("the kernel has no tun device" in str(ex), f"no tun in the kernel: {ex}")

    os.environ["PATH"] = path
    out = unprivileged("from tapnet import TapNetwork, TapError\n"
                       "try:\n    TapNetwork(subnet='10.229.9').up()\n"
                       "except TapError as ex:\n    print('REFUSED', ex)\n")
    check("REFUSED" in out and "CAP_NET_ADMIN" in out, f"unprivileged: {out.strip()}")
    out = unprivileged(
        "import types, gpu_run\n"
        "a = types.SimpleNamespace(net='tap', work='/tmp', carry1='/tmp', carry2='/tmp', "
        "driver='/nonexistent/libcuda.so.1')\n"
        "r = gpu_run.Run(a)\nr.network()\nprint('MODE', r.mode, r.host_ip, '|', r.net_note)\n")
    check("MODE user 127.0.0.1 | no tap: " in out and "CAP_NET_ADMIN" in out,
          f"gpu_run falls back: {out.strip()}")
    print(f"vm.tap_ioctls: {'FAILED: ' + '; '.join(FAILS) if FAILS else 'passed'}")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
