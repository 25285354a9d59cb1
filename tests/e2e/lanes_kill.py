#!/usr/bin/env python3
"""A bulk lane lost in the middle of a copy ends the session with the lane's reason, not a hang
(docs/remoting.md, "Lanes and page-locked staging").

A guest with SLUICE_LANES=4 copies 256 MiB each way (large_copy); once the backend's log shows
its lanes open and lane 2 has carried 8 MiB of the copy (`ss -i`), its TCP connection is destroyed
(`ss -K`, both ends, as a lost network path would). The program must fail with a CUDA error
within the time limit (not hang), the backend must end the session naming the lane, and a new
session must work. Driver double only; needs `ss -K` (root). Exit status: 0 passed, 1 failed,
77 skipped.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402  (the e2e harness)

LANE_BYTES = 8 << 20
OPEN = re.compile(r"bulk lane 2 of 4 open \(port (\d+)")


class Skipped(Exception):
    """The machine cannot run the test (its kernel does not destroy sockets)."""


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(run.REPO, "build"), help="CMake build folder")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    backend_exe = os.path.join(build, "backend", "sluice-backend")
    driver = os.path.join(build, "tests", "double", "libsluice-driver-double.so")
    frontend = os.path.join(build, "frontend")
    prog = os.path.join(build, "tests", "cuda", "large_copy.shared")
    small = os.path.join(build, "tests", "cuda", "vector_add.shared")
    for path in (backend_exe, driver, os.path.join(frontend, "libcuda.so.1"), prog, small):
        if not os.path.exists(path):
            print(f"SKIP: {path} not built")
            return run.SKIP
    if os.geteuid() != 0 or not shutil.which("ss"):
        print("SKIP: needs root and ss (-K destroys the lane's connection)")
        return run.SKIP
    work = tempfile.mkdtemp(prefix="sluice-lanes-kill-")
    problems = []
    skipped = False
    backend = guest = None
    try:
        pki = os.path.join(work, "pki")
        subprocess.run([os.path.join(run.REPO, "scripts", "make-demo-pki"), pki], check=True,
                       stdout=subprocess.DEVNULL)
        port = run.free_port()
        allow = os.path.join(work, "allow")
        with open(allow, "w") as f:
            f.write(run.GUEST_UUID + "\n")
        fmt = dict(project=run.PROJECT, driver=driver, endpoint=f"tcp://127.0.0.1:{port}",
                   pki=pki, allow=allow)
        blog = os.path.join(work, "backend.log")
        with open(blog, "w") as logf:
            backend = subprocess.Popen(
                [backend_exe] + [a.format(**fmt) for a in run.BACKEND_ARGS], stdout=logf,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=run.die_with_parent)
        conf = os.path.join(work, "conf")
        os.mkdir(conf)
        with open(os.path.join(conf, "backend.conf"), "w") as f:
            f.write(f"endpoint = tcp://127.0.0.1:{port}\n")
        for src, dst in [("guest-a.pem", "client.pem"), ("guest-a.key", "client.key"),
                         ("ca.pem", "ca.pem")]:
            shutil.copy(os.path.join(pki, src), os.path.join(conf, dst))
        env = dict(os.environ, SLUICE_CONFIG_DIR=conf, LD_LIBRARY_PATH=frontend,
                   SLUICE_LANES="4", SLUICE_LARGE_COPY_MIB="256")
        env.pop("SLUICE_DIRECT", None)
        asan = run.asan_runtime(os.path.join(frontend, "libcuda.so.1"))
        if asan:
            env["LD_PRELOAD"] = asan
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        time.sleep(1.0)  # the backend binds
        outp = os.path.join(work, "guest.out")
        with open(outp, "w") as gout:
            guest = subprocess.Popen([prog], stdout=gout, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=run.die_with_parent)
        lane_port = None
        deadline = time.time() + 60
        while time.time() < deadline and lane_port is None and guest.poll() is None:
            m = OPEN.search(run.tail(blog, 1000))
            lane_port = m.group(1) if m else None
            time.sleep(0.2)
        if lane_port is None:
            problems.append("the backend's log never showed lane 2 of 4 open")
        else:
            moved = 0  # bytes the worker's end of lane 2 received: the copy is under way
            deadline = time.time() + 60
            while moved < LANE_BYTES and time.time() < deadline and guest.poll() is None:
                st = subprocess.run(["ss", "-tinH", f"( sport = :{lane_port} )"],
                                    capture_output=True, text=True).stdout
                got = re.findall(r"bytes_received:(\d+)", st)
                moved = max(int(x) for x in got) if got else 0
                time.sleep(0.05)
            print(f"lane 2 had carried {moved} bytes to the worker")
            if moved < LANE_BYTES or guest.poll() is not None:
                problems.append("the copy never got under way on lane 2 before the cut")
            r = subprocess.run(["ss", "-K", f"( sport = :{lane_port} or dport = :{lane_port} )"],
                               capture_output=True, text=True)
            print(f"cut lane 2 (port {lane_port}): ss -K rc {r.returncode}")
            left = subprocess.run(["ss", "-tnH", "state", "established",
                                   f"( sport = :{lane_port} )"],
                                  capture_output=True, text=True).stdout.strip()
            if left:  # ss -K needs the kernel's CONFIG_INET_DIAG_DESTROY, and says nothing
                print(f"SKIP: this kernel did not destroy the connection (ss -K): {left}")
                raise Skipped()
            t0 = time.time()
            try:
                rc = guest.wait(timeout=90)
                print(f"the guest ended {time.time() - t0:.1f} s after the cut, rc {rc}")
                if rc == 0:
                    problems.append("the program passed although its lane was cut mid-copy")
            except subprocess.TimeoutExpired:
                problems.append("the guest hangs 90 s after its lane was cut")
        out = open(outp, errors="replace").read()
        print(out.strip()[-2000:])
        log = run.tail(blog, 100000)
        if lane_port and not re.search(r"bulk lane \d+: ", log + out):
            problems.append("neither the backend's log nor the guest names the lost lane")
        if run.SANITIZER_REPORT.search(log):
            problems.append("a sanitizer report in the backend's log")
        env2 = dict(env)
        env2.pop("SLUICE_LARGE_COPY_MIB", None)
        r = subprocess.run([small], capture_output=True, env=env2, timeout=120,
                           stdin=subprocess.DEVNULL, preexec_fn=run.die_with_parent)
        if r.returncode != 0:
            problems.append("a new session after the cut failed: "
                            + (r.stdout + r.stderr).decode(errors="replace")[-1000:])
        if problems or os.environ.get("SLUICE_E2E_VERBOSE"):
            print("---- backend log\n" + run.tail(blog, 40))
    except Skipped:
        skipped = True
    except (subprocess.SubprocessError, OSError) as ex:
        problems.append(f"{type(ex).__name__}: {ex}")
    finally:
        if guest and guest.poll() is None:
            run.kill_group(guest, 1)
        if backend:
            run.kill_group(backend, 3)
        shutil.rmtree(work, ignore_errors=True)
    if skipped:
        return run.SKIP
    for x in problems:
        print(f"FAIL: {x}")
    print(("FAIL" if problems else "PASS") + " e2e.lanes_kill", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
