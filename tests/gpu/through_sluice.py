#!/usr/bin/env python3
"""Runs one command through Sluice on the GPU machine: starts a sluice-backend on the real
driver (as run_samples.py does), puts our libcuda.so.1 first on the library path and runs the
command with the guest's configuration; its exit status is the command's. At the end it prints
the backend's CPU time (server and session workers) on stderr.

usage: through_sluice.py --bundle DIR --frontend DIR [--log-level L] [--backend-log FILE]
                         [--backend-args 'FLAGS'] [--host-driver-files] -- CMD...
The command runs as in a guest: the host driver's user-space libraries hidden from it
(run_samples.guest_argv)."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_samples import guest_argv, guest_library_path, start_backend  # noqa: E402


def cpu_of(pid):
    """The backend's CPU time: its own (server thread) and its reaped session workers'."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return "unknown"
    hz = os.sysconf("SC_CLK_TCK")
    own = (int(v[11]) + int(v[12])) / hz   # utime, stime
    workers = (int(v[13]) + int(v[14])) / hz  # cutime, cstime
    return "%.2f s in the server, %.2f s in session workers" % (own, workers)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--frontend", required=True)
    ap.add_argument("--log-level", default="info")
    ap.add_argument("--backend-log", help="copy the backend's log here at the end")
    ap.add_argument("--driver", default="/usr/local/nvidia/lib64/libcuda.so.1")
    ap.add_argument("--backend-args", default="", help="more sluice-backend flags")
    ap.add_argument("--host-nvml", action="store_true",
                    help="leave the host's driver folders (NVML) on the library path")
    ap.add_argument("--host-driver-files", action="store_true",
                    help="leave the host driver's libraries (libnvcuvid...) visible to the command")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command")
    work = tempfile.mkdtemp(prefix="sluice-run-")
    be, cfg = start_backend(a.bundle, work, a.driver, a.backend_args.split())
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = guest_library_path(a.frontend, not a.host_nvml)
    env["SLUICE_CONFIG_DIR"] = cfg
    env["SLUICE_LOG_LEVEL"] = a.log_level
    env["TRITON_LIBCUDA_PATH"] = a.frontend
    try:
        hide = not (a.host_driver_files or a.host_nvml)
        rc = subprocess.run(guest_argv(cmd, hide), env=env).returncode
        time.sleep(0.5)  # the last session's worker exits and is reaped
        print("through_sluice: backend CPU %s" % cpu_of(be.pid), file=sys.stderr)
    finally:
        be.terminate()
        be.wait(timeout=10)
        if a.backend_log:
            shutil.copy(os.path.join(work, "backend.log"), a.backend_log)
    return rc


if __name__ == "__main__":
    sys.exit(main())
