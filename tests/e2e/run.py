#!/usr/bin/env python3
"""End-to-end harness: runs the CUDA test programs of tests/cuda through Sluice.

  guest program (NVIDIA's cudart) -> our libcuda.so.1 (frontend) -> TLS in ZeroMQ
      -> sluice-backend -> a driver: the test double (CI, no GPU) or the real libcuda (GPU)

Modes:
  (default)        through Sluice, backend on the driver test double of <build>
  --real-driver    through Sluice, backend on the real driver (GPU machine)
  --driver PATH    through Sluice, backend on PATH
  --native         the same programs without Sluice, on whatever libcuda the system has

Each program gets its own throwaway backend (isolated; killed afterwards, also on failure).
The PKI is made once per run with scripts/make-demo-pki. --results FILE appends one JSON line
per run: name, variant, mode, rc, ok, seconds, output digest, reason.
The driver test double proves plumbing, never a GPU result.

Exit status: 0 all passed, 1 some failed, 77 skipped (frontend or backend not built).
"""
import argparse
import ctypes
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SKIP = 77

PROGRAMS = ["vector_add", "streams_events", "memcpy_to_symbol", "host_callback", "printf_kernel",
            "many_launches", "large_copy", "failures", "cross_session", "driver_api",
            "mem_pool", "graph_kernel", "texture_objects", "mapped_memory",
            "graph_host", "graph_mem", "graph_cond", "stream_attr", "link_jit", "vmm",
            "concurrent_threads", "managed_memory", "memcpy_default", "launch_checks",
            "driver_semantics", "device_assert", "mem_free",
            "alloc_cache", "capture_host", "mapped_large", "ipc", "shareable_ipc",
            "lanes_copy", "busy_query"]

# Output every run must contain, besides "PASS <name>".
EXPECTED = {
    "printf_kernel": [f"sluice-printf block {b} thread {t} value {40 + 4 * b + t}"
                      for b in range(2) for t in range(4)],
    "failures": [re.compile(r"failures: \d+ clean errors, context still usable")],
    "cross_session": ["cross_session: read of the other session's"],
    "graph_host": ["graph_host: 6 host node calls"],
    "capture_host": ["capture_host: 3 host function calls, 6 launches checked"],
    "managed_memory": ["managed_memory: host and kernels shared 100000 ints, a list of 1000"],
    "busy_query": ["busy_query: polling loops end with the kernels' results"],
    "lanes_copy": ["lanes_copy: 10 round trips of 1-40 MiB checked, 2 of them concurrent, then"],
    "ipc": ["ipc: the importer read 65536 ints of this process",
            "ipc(importer): forged memory handle -> cudaError"],
    "shareable_ipc": ["shareable_ipc: the importer read 65536 ints of a pool allocation",
                      "shareable_ipc(importer): a pipe as a pool handle -> CUDA_ERROR",
                      "shareable_ipc(importer): a pool handle as an allocation handle -> CUDA_ERROR"],
}
TIMEOUT = {"large_copy": 300, "many_launches": 300, "lanes_copy": 300}
GUEST_UUID = "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60"  # CN of make-demo-pki's guest-a
PROJECT = "f241e906010e4917ae8153f4fb8aa021"  # its OU

# How sluice-backend is started; edit here if its flags change.
BACKEND_ARGS = ["--driver", "{driver}", "--listen", "{endpoint}", "--project", "{project}", "--cert", "{pki}/server.pem",
                "--key", "{pki}/server.key", "--ca", "{pki}/ca.pem", "--allow", "{allow}"]

PR_SET_PDEATHSIG = 1


def die_with_parent():
    """preexec_fn: the child gets SIGKILL if the harness dies (e.g. a CTest timeout)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_first(patterns):
    for pat in patterns:
        hits = sorted(glob.glob(pat, recursive=True))
        if hits:
            return hits[0]
    return None


def real_driver():
    for p in ["/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"]:
        if os.path.exists(p):
            return p
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        m = re.search(r"libcuda\.so\.1 .*=> (\S+)", out)
        return m.group(1) if m else None
    except OSError:
        return None


def kill_group(proc, grace=5.0):
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def asan_runtime(lib):
    """The AddressSanitizer runtime lib links against (a -DSLUICE_SANITIZE=ON build), or None.
    A sanitized libcuda.so.1 inside a program that is not sanitized (NVIDIA's cudart, nvcc's
    code) only works with the runtime loaded first, so such runs get it in LD_PRELOAD."""
    try:
        out = subprocess.run(["ldd", lib], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for line in out.splitlines():
        m = re.match(r"\s*(libasan\.so[.0-9]*)\s*=>\s*(\S+)", line)
        if m:
            return m.group(2) if os.path.exists(m.group(2)) else m.group(1)
    return None


SANITIZER_REPORT = re.compile(r"ERROR: (Address|Leak)Sanitizer|: runtime error: ")


def tail(path, n=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(no log)\n"


class Backend:
    def __init__(self, args, pki, work, driver, env_extra=None, extra_args=(), allow_also=()):
        self.port = free_port()
        self.endpoint = f"tcp://127.0.0.1:{self.port}"
        self.log = os.path.join(work, f"backend-{self.port}.log")
        allow = os.path.join(work, f"allow-{self.port}")
        with open(allow, "w") as f:
            f.write("".join(u + "\n" for u in (GUEST_UUID,) + tuple(allow_also)))
        fmt = dict(project=PROJECT, driver=driver, endpoint=self.endpoint, pki=pki, allow=allow)
        argv = [args.backend] + [a.format(**fmt) for a in BACKEND_ARGS] + args.backend_arg + \
            list(extra_args)
        env = dict(os.environ)
        # Never our libcuda.so.1 on the backend's path; keep the rest (the GPU machine finds
        # libzmq and friends through LD_LIBRARY_PATH).
        keep = [p for p in env.get("LD_LIBRARY_PATH", "").split(":")
                if p and not os.path.exists(os.path.join(p, "libcuda.so.1"))]
        env["LD_LIBRARY_PATH"] = ":".join(keep)
        if args.double_mem_mib:
            env["SLUICE_DOUBLE_MEM_MIB"] = str(args.double_mem_mib)
        env.update(env_extra or {})
        self.argv = argv
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(argv, stdout=self.logf, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=die_with_parent)
        # a fresh folder: a later backend may get the same free port
        self.conf = tempfile.mkdtemp(prefix=f"conf-{self.port}-", dir=work)
        with open(os.path.join(self.conf, "backend.conf"), "w") as f:
            f.write(f"endpoint = {self.endpoint}\n")
        for src, dst in [("guest-a.pem", "client.pem"), ("guest-a.key", "client.key"),
                         ("ca.pem", "ca.pem")]:
            shutil.copy(os.path.join(pki, src), os.path.join(self.conf, dst))

    def wait_ready(self, timeout=20.0):
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                return f"backend exited {self.proc.returncode} before listening"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return None
            except OSError:
                time.sleep(0.1)
        return "backend not listening after %.0fs" % timeout

    def stop(self):
        kill_group(self.proc)
        self.logf.close()
        return self.proc.returncode


def check_output(name, out):
    missing = []
    for want in [f"PASS {name}"] + EXPECTED.get(name, []):
        ok = want.search(out) if isinstance(want, re.Pattern) else want in out
        if not ok:
            missing.append(want.pattern if isinstance(want, re.Pattern) else want)
    return missing


def run_one(args, name, variant, mode, pki, work, driver, frontend_dir):
    exe = os.path.join(args.programs_dir, f"{name}.{variant}")
    rec = dict(name=name, variant=variant, mode=mode, rc=None, ok=False, seconds=None,
               output_sha256=None, reason="")
    env = dict(os.environ)
    env["SLUICE_LARGE_COPY_MIB"] = str(args.large_copy_mib)
    cuda_lib = os.path.join(args.cuda_root, "lib64")
    backend = None
    try:
        if mode == "native":
            env["SLUICE_E2E_NATIVE"] = "1"
            env["LD_LIBRARY_PATH"] = ":".join(
                p for p in [cuda_lib, env.get("LD_LIBRARY_PATH", "")] if p)
        else:
            env.pop("SLUICE_E2E_NATIVE", None)
            backend = Backend(args, pki, work, driver)
            why = backend.wait_ready()
            if why:
                rec["reason"] = why
                return rec, backend
            env["SLUICE_CONFIG_DIR"] = backend.conf
            env["LD_LIBRARY_PATH"] = ":".join(
                p for p in [frontend_dir, cuda_lib, env.get("LD_LIBRARY_PATH", "")] if p)
            if args.asan_runtime:
                # The program is not sanitized; our libcuda.so.1 is. Leak checking is off: the
                # program's cudart never frees its globals, and the frontend's own leaks are the
                # unit tests' business (frontend.* under ASan).
                env["LD_PRELOAD"] = ":".join(
                    p for p in [args.asan_runtime, env.get("LD_PRELOAD", "")] if p)
                env["ASAN_OPTIONS"] = ":".join(  # the last setting wins: leak checks off
                    p for p in [env.get("ASAN_OPTIONS", ""), "detect_leaks=0"] if p)
        t0 = time.time()
        proc = subprocess.Popen([exe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=die_with_parent)
        try:
            out, _ = proc.communicate(timeout=TIMEOUT.get(name, args.timeout))
            rec["rc"] = proc.returncode
        except subprocess.TimeoutExpired:
            kill_group(proc, 1)
            out, _ = proc.communicate()
            rec["rc"] = -9
            rec["reason"] = "timeout"
        rec["seconds"] = round(time.time() - t0, 3)
        text = out.decode(errors="replace")
        rec["output_sha256"] = hashlib.sha256(out).hexdigest()
        rec["output"] = text
        missing = check_output(name, text)
        if rec["rc"] != 0 and not rec["reason"]:
            rec["reason"] = f"exit status {rec['rc']}"
        elif missing and not rec["reason"]:
            rec["reason"] = "output lacks: " + "; ".join(missing)
        if SANITIZER_REPORT.search(text) and not rec["reason"]:
            rec["reason"] = "sanitizer report in the program's output"
        rec["ok"] = rec["rc"] == 0 and not missing and not SANITIZER_REPORT.search(text)
        return rec, backend
    finally:
        if backend:
            backend.stop()
            # A sanitized backend reports and may go on (or die between calls): its log decides.
            try:
                with open(backend.log, errors="replace") as f:
                    blog = f.read()
            except OSError:
                blog = ""
            if SANITIZER_REPORT.search(blog):
                rec["ok"] = False
                rec["reason"] = (rec["reason"] + "; " if rec["reason"] else "") + \
                    "sanitizer report in the backend's log"


CRASH_KERNEL = "_Z4vaddPKfS0_Pfi"  # vector_add's kernel: the double abort()s in its launch


def guest_env(args, backend, frontend_dir):
    env = dict(os.environ)
    env.pop("SLUICE_E2E_NATIVE", None)
    env["SLUICE_CONFIG_DIR"] = backend.conf
    env["LD_LIBRARY_PATH"] = ":".join(
        p for p in [frontend_dir, os.path.join(args.cuda_root, "lib64"),
                    env.get("LD_LIBRARY_PATH", "")] if p)
    if args.asan_runtime:
        env["LD_PRELOAD"] = ":".join(p for p in [args.asan_runtime, env.get("LD_PRELOAD", "")]
                                     if p)
        env["ASAN_OPTIONS"] = ":".join(p for p in [env.get("ASAN_OPTIONS", ""), "detect_leaks=0"]
                                       if p)  # the last setting wins: leak checks off
    return env


def worker_crash(args, pki, work, driver, frontend_dir):
    """One backend, three sessions: A (session_hold) runs throughout; B (vector_add) kills its
    session worker (the double abort()s in its kernel launch) and must get a clean error, not a
    hang; C (printf_kernel), new after the crash, must pass; A must never notice."""
    exe = lambda name: os.path.join(args.programs_dir, f"{name}.static")
    backend = Backend(args, pki, work, driver, {"SLUICE_DOUBLE_CRASH_KERNEL": CRASH_KERNEL})
    problems = []
    hold = None
    try:
        why = backend.wait_ready()
        if why:
            return [why]
        env = guest_env(args, backend, frontend_dir)
        henv = dict(env, SLUICE_HOLD_SECONDS="6")
        hold = subprocess.Popen([exe("session_hold")], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=henv, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=die_with_parent)
        first = hold.stdout.readline().decode(errors="replace")
        if "SESSION OPEN" not in first:
            return [f"session A did not open: {first.strip()}"]
        t0 = time.time()
        b = subprocess.run([exe("vector_add")], capture_output=True, env=env, timeout=60,
                           stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        bout = (b.stdout + b.stderr).decode(errors="replace")
        print(f"session B (crashing worker): rc={b.returncode} {time.time() - t0:.2f}s")
        print("  " + "\n  ".join(bout.strip().splitlines()[-4:]))
        if b.returncode == 0 or "PASS vector_add" in bout:
            problems.append("session B passed although its worker crashed")
        c = subprocess.run([exe("printf_kernel")], capture_output=True, env=env, timeout=60,
                           stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        cout = (c.stdout + c.stderr).decode(errors="replace")
        print(f"session C (new after the crash): rc={c.returncode}")
        if c.returncode != 0 or check_output("printf_kernel", cout):
            problems.append("session C failed: " + cout[-2000:])
        hout, _ = hold.communicate(timeout=60)
        hout = first + hout.decode(errors="replace")
        print(f"session A (concurrent): rc={hold.returncode}, "
              f"{hout.count('TICK')} ticks, last: {hout.strip().splitlines()[-1]}")
        if hold.returncode != 2 or "SESSION NEVER ENDED" not in hout:
            problems.append("session A was disturbed: " + hout[-1000:])
        if backend.proc.poll() is not None:
            problems.append(f"the backend exited ({backend.proc.returncode})")
    except subprocess.TimeoutExpired as ex:
        problems.append(f"timeout: {ex.cmd}")
    finally:
        if hold:
            kill_group(hold, 1)
        backend.stop()
    blog = tail(backend.log, 400)
    if not re.search(r"session worker died: signal 6", blog):
        problems.append("the backend's log lacks 'session worker died: signal 6'")
    if SANITIZER_REPORT.search(blog):
        problems.append("sanitizer report in the backend's log")
    if problems or args.verbose:
        print("---- backend log ----\n" + tail(backend.log, 60).rstrip() + "\n----")
    return problems


IMAGES_LINE = re.compile(r"session (\d+): module images: (\d+) received \([^)]*\), (\d+) taken "
                         r"from the backend's cache or image store without their bytes, (\d+) "
                         r"asked for again")


def image_store(args, pki, work, driver, frontend_dir):
    """One backend with a state folder, the same program twice with SLUICE_LOAD_AS=0: the first
    session sends its module image with its first slLoadImage (the backend's SessionAccept
    hinted no image, so no round trip asks for it), the second finds it in the tenant's image
    store and sends no bytes (each session has a worker process of its own, so only the store on
    disk carries it over). A third run as a program runs by default: its small image, hinted,
    still travels with its bytes, in the load the guest does not wait for (slLoadImageAs,
    docs/remoting.md). What each session received is read from the backend's own summary
    line."""
    state = os.path.join(work, "state")
    os.makedirs(state)
    backend = Backend(args, pki, work, driver, extra_args=["--state-dir", state])
    problems = []
    try:
        why = backend.wait_ready()
        if why:
            return [why]
        env = dict(guest_env(args, backend, frontend_dir), SLUICE_LOG_LEVEL="debug")
        for run in (1, 2, 3):
            run_env = dict(env, SLUICE_LOAD_AS="0") if run < 3 else env
            p = subprocess.run([os.path.join(args.programs_dir, "vector_add.static")],
                               capture_output=True, env=run_env, timeout=60,
                               stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
            out = (p.stdout + p.stderr).decode(errors="replace")
            print(f"run {run}: rc={p.returncode}")
            if p.returncode != 0 or "PASS vector_add" not in out:
                problems.append(f"run {run} failed: " + out[-1500:])
        backend.stop()
        seen = {}
        for m in IMAGES_LINE.finditer(tail(backend.log, 400)):
            seen[int(m.group(1))] = tuple(int(m.group(i)) for i in (2, 3, 4))
        runs = [seen[k] for k in sorted(seen)]
        print(f"module images (received, taken without bytes, asked for again) per session: "
              f"{runs}")
        if len(runs) != 3:
            problems.append(f"expected the images line of 3 sessions, found {len(runs)}")
        else:
            if runs[0][0] < 1:
                problems.append("the first run sent no image (was the store not empty?)")
            if runs[1][0] != 0 or runs[1][1] < 1:
                problems.append(f"the second run sent {runs[1][0]} image(s) again and took "
                                f"{runs[1][1]} from the store")
            if runs[2][0] != 1 or runs[2][1] != 0:
                problems.append(f"the third run (the load without a reply) sent {runs[2][0]} "
                                f"image(s) and took {runs[2][1]} from the store: expected its "
                                "one small image with its bytes")
            if runs[0][2] or runs[1][2] or runs[2][2]:
                problems.append("a session was asked for an image again (FILE_NOT_FOUND): the "
                                "hints did not say what the backend holds")
        images = [f for f in os.listdir(os.path.join(state, "images")) if len(f) == 64]
        if not images:
            problems.append("nothing in STATE/images")
    except (subprocess.TimeoutExpired, OSError) as ex:
        problems.append(f"{type(ex).__name__}: {ex}")
    finally:
        backend.stop()
    if SANITIZER_REPORT.search(tail(backend.log, 400)):
        problems.append("sanitizer report in the backend's log")
    if problems or args.verbose:
        print("---- backend log ----\n" + tail(backend.log, 40).rstrip() + "\n----")
    return problems


def ipc_attacks(args, pki, work, driver, frontend_dir):
    """CUDA IPC tokens (docs/security.md, "IPC handles"): tests/e2e/ipc_attacks.py."""
    import ipc_attacks as attacks
    return attacks.run(sys.modules[__name__], args, pki, work, driver, frontend_dir)


SCENARIOS = {"worker_crash": (worker_crash, ["session_hold", "vector_add", "printf_kernel"]),
             "image_store": (image_store, ["vector_add"]),
             "ipc_attacks": (ipc_attacks, ["ipc", "shareable_ipc"])}


def check_table(args):
    """The kernels the programs define (host stubs named by the mangled device name) must all be
    in the double's table, or a launch through the double fails with CUDA_ERROR_NOT_FOUND."""
    with open(args.double, "rb") as f:
        blob = f.read()
    bad = 0
    for obj in sorted(glob.glob(os.path.join(args.programs_dir, "*.o"))):
        out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] == "T" and parts[2].startswith("_Z") \
                    and "__device_stub__" not in parts[2]:
                found = (b"\0" + parts[2].encode() + b"\0") in blob
                print(f"{os.path.basename(obj)}: {parts[2]} {'ok' if found else 'MISSING'}")
                bad += not found
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="CMake build folder")
    ap.add_argument("--program", action="append", choices=PROGRAMS,
                    help="run only these (repeatable); default all")
    ap.add_argument("--variant", choices=["static", "shared", "both"], default="both",
                    help="cudart linkage of the programs to run")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--driver", help="driver library for the backend (default: the double)")
    mode.add_argument("--real-driver", action="store_true",
                      help="backend on the real libcuda.so.1 (/usr/local/nvidia/lib64 or ldconfig)")
    mode.add_argument("--native", action="store_true", help="run without Sluice, for comparison")
    mode.add_argument("--image-store", action="store_true",
                      help="a program run twice against one backend sends its module image once "
                           "(driver double only)")
    mode.add_argument("--check-table", action="store_true",
                      help="check the programs' kernel names against the double's table")
    ap.add_argument("--backend", help="sluice-backend binary (default: found in --build)")
    ap.add_argument("--frontend-dir", help="folder holding our libcuda.so.1 (default: found)")
    ap.add_argument("--programs-dir", help="folder of the built programs (<build>/tests/cuda)")
    ap.add_argument("--double", help="the driver double (<build>/tests/double/...so)")
    ap.add_argument("--backend-arg", action="append", default=[],
                    help="extra argument for sluice-backend (repeatable)")
    ap.add_argument("--cuda-root", default=os.environ.get("SLUICE_CUDA_ROOT", "/usr/local/cuda"))
    ap.add_argument("--results", help="append JSON lines here")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per program")
    ap.add_argument("--large-copy-mib", type=int, default=256)
    ap.add_argument("--expect-output", action="append", default=[], metavar="REGEX",
                    help="each program's output must match REGEX (e.g. SLUICE_STATS's lanes line)")
    ap.add_argument("--reject-output", action="append", default=[], metavar="REGEX",
                    help="no program's output may match REGEX (e.g. a call SLUICE_STATS names)")
    ap.add_argument("--expect-backend-log", action="append", default=[], metavar="REGEX",
                    help="each program's backend log must match REGEX (e.g. its lanes opened)")
    ap.add_argument("--double-mem-mib", type=int, default=0,
                    help="device memory of the double (SLUICE_DOUBLE_MEM_MIB)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs, PKI)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every program's output")
    ap.add_argument("--worker-crash", action="store_true",
                    help="the session-worker crash test (driver double only): one crashing "
                         "session, one concurrent and one new session that must go on")
    ap.add_argument("--ipc-attacks", action="store_true",
                    help="CUDA IPC handles from another instance, another backend, forged, and "
                         "after their exporter ended: all refused (driver double only)")
    args = ap.parse_args()
    args.asan_runtime = None

    build = os.path.abspath(args.build)
    args.programs_dir = args.programs_dir or os.path.join(build, "tests", "cuda")
    args.double = args.double or os.path.join(build, "tests", "double",
                                              "libsluice-driver-double.so")
    if args.check_table:
        return check_table(args)

    mode = "native" if args.native else ("sluice-gpu" if (args.real_driver or args.driver)
                                         else "sluice-double")
    driver = frontend_dir = None
    if mode != "native":
        driver = args.driver or (real_driver() if args.real_driver else args.double)
        args.backend = args.backend or find_first([os.path.join(build, "backend",
                                                                "sluice-backend"),
                                                   os.path.join(build, "**", "sluice-backend")])
        lib = find_first([os.path.join(build, "frontend", "libcuda.so.1"),
                          os.path.join(build, "frontend", "**", "libcuda.so.1")])
        frontend_dir = args.frontend_dir or (os.path.dirname(lib) if lib else None)
        args.asan_runtime = asan_runtime(os.path.join(frontend_dir, "libcuda.so.1")) \
            if frontend_dir else None
        if args.asan_runtime:
            print(f"frontend built with AddressSanitizer: programs run with "
                  f"LD_PRELOAD={args.asan_runtime} ASAN_OPTIONS=detect_leaks=0", flush=True)
        for what, path in [("driver", driver), ("sluice-backend", args.backend),
                           ("frontend libcuda.so.1 folder", frontend_dir)]:
            if not path or not os.path.exists(path):
                print(f"SKIP: no {what} ({path or 'not found'})")
                return SKIP
    variants = ["static", "shared"] if args.variant == "both" else [args.variant]
    names = args.program or PROGRAMS
    scenario = "worker_crash" if args.worker_crash else (
        "image_store" if args.image_store else ("ipc_attacks" if args.ipc_attacks else None))
    if scenario:
        fn, needs = SCENARIOS[scenario]
        if mode == "native" or (mode != "sluice-double" and scenario != "ipc_attacks"):
            print(f"SKIP: --{scenario.replace('_', '-')} needs the driver double")
            return SKIP
        for n in needs:
            if not os.path.exists(os.path.join(args.programs_dir, f"{n}.static")):
                print(f"SKIP: {n}.static not built in {args.programs_dir}")
                return SKIP
        work = tempfile.mkdtemp(prefix="sluice-e2e-")
        try:
            pki = os.path.join(work, "pki")
            subprocess.run([os.path.join(REPO, "scripts", "make-demo-pki"), pki], check=True,
                           stdout=subprocess.DEVNULL)
            problems = fn(args, pki, work, driver, frontend_dir)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for p in problems:
            print(f"FAIL: {p}")
        print(("FAIL" if problems else "PASS") + f" e2e.{scenario}", flush=True)
        return 1 if problems else 0
    for n in names:
        for v in variants:
            if not os.path.exists(os.path.join(args.programs_dir, f"{n}.{v}")):
                print(f"SKIP: {n}.{v} not built in {args.programs_dir}")
                return SKIP

    work = tempfile.mkdtemp(prefix="sluice-e2e-")
    pki = os.path.join(work, "pki")
    failed = 0
    try:
        if mode != "native":
            subprocess.run([os.path.join(REPO, "scripts", "make-demo-pki"), pki], check=True,
                           stdout=subprocess.DEVNULL)
        for n in names:
            for v in variants:
                rec, backend = run_one(args, n, v, mode, pki, work, driver, frontend_dir)
                blog = tail(backend.log, 4000) if backend else ""
                for rx in args.expect_backend_log:
                    if rec["ok"] and not re.search(rx, blog):
                        rec["ok"] = False
                        rec["reason"] = f"the backend's log lacks {rx!r}"
                for rx in args.expect_output:
                    if rec["ok"] and not re.search(rx, rec.get("output", "")):
                        rec["ok"] = False
                        rec["reason"] = f"the program's output lacks {rx!r}"
                for rx in args.reject_output:
                    if rec["ok"] and re.search(rx, rec.get("output", "")):
                        rec["ok"] = False
                        rec["reason"] = f"the program's output matches {rx!r}"
                status = "PASS" if rec["ok"] else "FAIL"
                secs = rec["seconds"] if rec["seconds"] is not None else 0
                print(f"{status} e2e.{n}.{v} [{mode}] rc={rec['rc']} {secs:.2f}s"
                      + (f" ({rec['reason']})" if rec["reason"] else ""), flush=True)
                if not rec["ok"] or args.verbose:
                    print("---- program output ----")
                    print(rec.get("output", "(none)")[-int(os.environ.get("SLUICE_E2E_OUTPUT_TAIL", "6000")):].rstrip())
                    if backend:
                        print("---- backend: " + " ".join(backend.argv))
                        print(tail(backend.log, 60).rstrip())
                    print("----", flush=True)
                failed += not rec["ok"]
                if args.results:
                    rec.pop("output", None)
                    with open(args.results, "a") as f:
                        f.write(json.dumps(rec) + "\n")
    finally:
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
