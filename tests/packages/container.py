"""A clean Debian bookworm host for the package and deployment tests: a root filesystem made
from the package registry with mmdebstrap (cached as a tar file), unpacked into a folder and
used as a container with chroot in a private mount namespace. Not the build machine: nothing of
Sluice and none of its libraries are there until apt installs the packages.

systemd is not PID 1 in it (nor on the CI machine), so services are started by hand; the
network is the host's (apt reaches the registry, tests use loopback ports).

Used by tests/packages/test_packages.py and tests/ansible/test_deploy.py.
"""
import os
import shutil
import subprocess
import time

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# What a Debian server that ansible can manage has; none of Sluice's libraries.
INCLUDE = ["systemd", "python3", "openssh-server", "ca-certificates"]
DEFAULT_CACHE = "/var/cache/sluice-tests"


class Failed(Exception):
    pass


def in_private_mount_namespace(argv):
    """Re-executes argv under unshare --mount (private propagation) unless already there: the
    container's mounts vanish with the test, whatever happens."""
    if os.environ.get("SLUICE_TEST_MNTNS") == "1":
        return None
    env = dict(os.environ, SLUICE_TEST_MNTNS="1")
    return subprocess.call(["unshare", "--mount", "--propagation", "private", "--"] + argv,
                           env=env)


def rootfs(cache, log):
    """CACHE/bookworm-rootfs.tar, made once with mmdebstrap (a few minutes, network)."""
    tar = os.path.join(cache, f"{SUITE}-rootfs.tar")
    stamp = " ".join(INCLUDE)
    if os.path.isfile(tar) and os.path.exists(tar + ".include") and \
            open(tar + ".include").read().strip() == stamp:
        return tar
    if os.path.isdir(tar):  # made by a version that let mmdebstrap guess the format
        shutil.rmtree(tar)
    os.makedirs(cache, exist_ok=True)
    t = time.time()
    log(f"making the {SUITE} root filesystem (mmdebstrap, once; cached in {tar})")
    tmp = tar + ".tmp"
    if os.path.isdir(tmp):
        shutil.rmtree(tmp)
    # --format: mmdebstrap guesses it from the name, and TAR.tmp would be a directory
    p = subprocess.run(["mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar",
                        "--include=" + ",".join(INCLUDE), SUITE, tmp, MIRROR],
                       capture_output=True, text=True, timeout=1500)
    if p.returncode != 0:
        raise Failed(f"mmdebstrap failed: {p.stderr[-3000:]}")
    os.replace(tmp, tar)
    with open(tar + ".include", "w") as f:
        f.write(stamp + "\n")
    log(f"root filesystem made in {time.time() - t:.0f} s")
    return tar


def mounted_under(d):
    """Whether anything is still mounted below d (then it must not be deleted)."""
    d = os.path.realpath(d) + "/"
    with open("/proc/self/mounts") as f:
        return any(line.split()[1].startswith(d) for line in f)


class Container:
    """A root filesystem unpacked into DIR, with /proc, /dev and /sys, run with chroot."""

    def __init__(self, tar, root, apt_cache):
        self.root = root
        self.procs = []
        os.makedirs(root)
        subprocess.run(["tar", "-xf", tar, "-C", root], check=True)
        shutil.copy("/etc/resolv.conf", f"{root}/etc/resolv.conf")
        subprocess.run(["mount", "-t", "proc", "proc", f"{root}/proc"], check=True)
        subprocess.run(["mount", "--rbind", "/dev", f"{root}/dev"], check=True)
        subprocess.run(["mount", "--rbind", "/sys", f"{root}/sys"], check=True)
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", f"{root}/run"], check=True)
        # downloaded .deb files survive the container (the dependencies are fetched once)
        os.makedirs(apt_cache, exist_ok=True)
        subprocess.run(["mount", "--bind", apt_cache, f"{root}/var/cache/apt/archives"],
                       check=True)
        # no service starts while packages install (systemd is not PID 1 here anyway)
        with open(f"{root}/usr/sbin/policy-rc.d", "w") as f:
            f.write("#!/bin/sh\nexit 101\n")
        os.chmod(f"{root}/usr/sbin/policy-rc.d", 0o755)

    def path(self, p):
        return self.root + p

    def run(self, args, timeout=300, env=None, input=None):
        e = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
             "DEBIAN_FRONTEND": "noninteractive", "HOME": "/root"}
        e.update(env or {})
        return subprocess.run(["chroot", self.root] + list(args), capture_output=True,
                              text=True, timeout=timeout, env=e, input=input)

    def sh(self, *args, **kw):
        p = self.run(args, **kw)
        if p.returncode != 0:
            raise Failed(f"in the container: {' '.join(args)}: exit {p.returncode}\n"
                         f"{p.stdout[-3000:]}{p.stderr[-3000:]}")
        return p.stdout

    def start(self, args, log_path, env=None):
        e = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        e.update(env or {})
        f = open(log_path, "w")
        p = subprocess.Popen(["chroot", self.root] + list(args), stdout=f,
                             stderr=subprocess.STDOUT, env=e)
        self.procs.append(p)
        return p

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs.clear()

    def close(self):
        self.stop()
        subprocess.run(["umount", "-R", self.root + "/var/cache/apt/archives"],
                       capture_output=True)
        for m in ("/run", "/sys", "/dev", "/proc"):
            subprocess.run(["umount", "-R", "-l", self.root + m], capture_output=True)
