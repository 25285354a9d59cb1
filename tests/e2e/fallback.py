#!/usr/bin/env python3
"""A guest that cannot reach its session worker's direct endpoint keeps the backend's channel
(docs/remoting.md, "The direct channel").

The backend listens on 127.0.0.2 and the guest reaches it only through a TCP relay on
127.0.0.1 (as a VM whose user networking forwards one port): the worker's endpoint (127.0.0.2,
a free port) is named in SessionAccept, the guest tries it on the host it knows (127.0.0.1),
where nothing listens, gives up after its 3 s attempt with one warning, and its calls take the
backend's channel: the program passes. Driver double only. Exit status: 0 passed, 1 failed,
77 skipped.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402  (the e2e harness)

PROGRAM = "vector_add"
WARNING = "direct endpoint tcp://127.0.0.1:"


def relay(listener, target):
    """Forwards every connection to listener to target, both ways, until the test ends."""
    def pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    while True:
        try:
            c, _ = listener.accept()
        except OSError:
            return
        u = socket.create_connection(target)
        threading.Thread(target=pump, args=(c, u), daemon=True).start()
        threading.Thread(target=pump, args=(u, c), daemon=True).start()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(run.REPO, "build"), help="CMake build folder")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    backend_exe = os.path.join(build, "backend", "sluice-backend")
    driver = os.path.join(build, "tests", "double", "libsluice-driver-double.so")
    frontend = os.path.join(build, "frontend")
    prog = os.path.join(build, "tests", "cuda", f"{PROGRAM}.static")
    for path in (backend_exe, driver, os.path.join(frontend, "libcuda.so.1"), prog):
        if not os.path.exists(path):
            print(f"SKIP: {path} not built")
            return run.SKIP
    work = tempfile.mkdtemp(prefix="sluice-fallback-")
    problems = []
    backend = None
    try:
        pki = os.path.join(work, "pki")
        subprocess.run([os.path.join(run.REPO, "scripts", "make-demo-pki"), pki], check=True,
                       stdout=subprocess.DEVNULL)
        with socket.socket() as s:
            s.bind(("127.0.0.2", 0))
            port = s.getsockname()[1]
        allow = os.path.join(work, "allow")
        with open(allow, "w") as f:
            f.write(run.GUEST_UUID + "\n")
        fmt = dict(project=run.PROJECT, driver=driver, endpoint=f"tcp://127.0.0.2:{port}",
                   pki=pki, allow=allow)
        blog = os.path.join(work, "backend.log")
        with open(blog, "w") as logf:
            backend = subprocess.Popen(
                [backend_exe] + [a.format(**fmt) for a in run.BACKEND_ARGS], stdout=logf,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=run.die_with_parent)
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        threading.Thread(target=relay, args=(listener, ("127.0.0.2", port)),
                         daemon=True).start()
        conf = os.path.join(work, "conf")
        os.mkdir(conf)
        with open(os.path.join(conf, "backend.conf"), "w") as f:
            f.write(f"endpoint = tcp://127.0.0.1:{listener.getsockname()[1]}\n")
        for src, dst in [("guest-a.pem", "client.pem"), ("guest-a.key", "client.key"),
                         ("ca.pem", "ca.pem")]:
            shutil.copy(os.path.join(pki, src), os.path.join(conf, dst))
        env = dict(os.environ, SLUICE_CONFIG_DIR=conf, LD_LIBRARY_PATH=frontend)
        env.pop("SLUICE_DIRECT", None)
        asan = run.asan_runtime(os.path.join(frontend, "libcuda.so.1"))
        if asan:
            env["LD_PRELOAD"] = asan
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        time.sleep(1.0)  # the backend binds
        r = subprocess.run([prog], capture_output=True, env=env, timeout=120,
                           stdin=subprocess.DEVNULL, preexec_fn=run.die_with_parent)
        out = (r.stdout + r.stderr).decode(errors="replace")
        print(out.strip())
        if r.returncode != 0 or run.check_output(PROGRAM, out):
            problems.append(f"{PROGRAM} failed over the fallback (rc {r.returncode})")
        if out.count(WARNING) != 1:
            problems.append(f"the guest did not say once that the direct endpoint cannot be used "
                            f"('{WARNING}...' {out.count(WARNING)} times)")
        log = run.tail(blog, 100000)
        if "calls come on the direct channel" in log:
            problems.append("the backend says the calls came on the direct channel")
        if run.SANITIZER_REPORT.search(log):
            problems.append("a sanitizer report in the backend's log")
        if problems:
            print("---- backend log\n" + run.tail(blog, 40))
    except (subprocess.SubprocessError, OSError) as ex:
        problems.append(f"{type(ex).__name__}: {ex}")
    finally:
        if backend:
            run.kill_group(backend, 3)
        shutil.rmtree(work, ignore_errors=True)
    for x in problems:
        print(f"FAIL: {x}")
    print(("FAIL" if problems else "PASS") + " e2e.direct_fallback", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
