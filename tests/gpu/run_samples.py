#!/usr/bin/env python3
"""Runs CUDA programs natively and through Sluice on the GPU machine, one backend on the real
driver for all of them, and compares. Used for NVIDIA's cuda-samples (built here from a fetched
copy kept in an ignored folder, never committed; the build recipe is in ../shared/GPU-TESTING.md)
and for sluice-bench-cuda. Writes one JSON line per (program, mode) and prints a table; the
results and commands are in docs/gpu-remoting.md.

usage: run_samples.py --bin DIR --bundle DIR --frontend DIR --out FILE [--args JSON]
                      [--only a,b] [--timeout S] [--save DIR] [--host-driver-files]
  --bin       folder with the executables (searched recursively; each runs in its own folder)
  --bundle    the device bundle: bin/sluice-backend, lib/ (libzmq...), make-demo-pki
  --frontend  folder holding our libcuda.so.1 (put first on the programs' library path only)
  --args      per-program arguments, in cuda-samples' test_args.json format
Programs through Sluice run as in a guest: the host driver's user-space libraries hidden from
them (guest_argv; --host-driver-files leaves them).
"""
import argparse, hashlib, json, os, re, shlex, shutil, signal, socket, subprocess, sys, tempfile, time

NUM = re.compile(rb"[-+]?\d+(\.\d+)?([eE][-+]?\d+)?")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


DRIVER_LIBS = ("libcuda.so.1", "libnvidia-ml.so.1")


def guest_library_path(frontend, hide_driver=True):
    """LD_LIBRARY_PATH for a program run through Sluice: our libcuda.so.1 first and, with
    hide_driver, without the folders holding the host's driver libraries (libcuda, NVML), as in
    a guest, which has none: a library that loads NVML by name (PyTorch does) then finds none."""
    keep = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d and not (
        hide_driver and any(os.path.exists(os.path.join(d, n)) for n in DRIVER_LIBS))]
    return ":".join([frontend] + keep)


DRIVER_FILES = re.compile(r"^(libcuda\.so|libnvcuvid\.so|libnvidia-[^ ]*\.so)")


def driver_files():
    """The host driver's user-space libraries that the loader's cache knows (libcuda, the video
    and JPEG engines' libnvcuvid, libnvidia-*): a guest has none of them."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    found = set()
    for line in out.splitlines():
        name, _, path = line.strip().partition(" => ")
        if DRIVER_FILES.match(name) and os.path.exists(path):
            found.add(os.path.realpath(path))
    return sorted(found)


def guest_argv(cmd, hide=True):
    """cmd run as in a guest: the host driver's user-space libraries hidden from it (each bound
    over by /dev/null in a mount namespace of its own, so a dlopen of one fails as it does where
    it is absent). Without it a library the guest would not have reaches the host's kernel
    driver behind Sluice's back: nvJPEG's hardware decoder (libnvcuvid) then waits forever for a
    context of ours. Needs root and unshare; otherwise cmd unchanged."""
    files = driver_files() if hide and os.geteuid() == 0 and shutil.which("unshare") else []
    if not files:
        return list(cmd)
    script = "".join("mount --bind /dev/null %s && " % shlex.quote(f) for f in files)
    return ["unshare", "-m", "sh", "-c", script + 'exec "$0" "$@"'] + list(cmd)


def start_backend(bundle, work, driver, extra=()):
    pki = os.path.join(work, "pki")
    subprocess.run(["bash", os.path.join(bundle, "make-demo-pki"), pki], check=True,
                   stdout=subprocess.DEVNULL)
    cn = subprocess.run(["openssl", "x509", "-in", os.path.join(pki, "guest-a.pem"), "-noout",
                         "-subject", "-nameopt", "multiline"], capture_output=True, text=True).stdout
    inst = re.search(r"commonName\s*=\s*(\S+)", cn).group(1)
    proj = re.search(r"organizationalUnitName\s*=\s*(\S+)", cn).group(1)
    with open(os.path.join(work, "allow"), "w") as f:
        f.write(inst + "\n")
    port = free_port()
    cfg = os.path.join(work, "guest")
    os.makedirs(cfg, exist_ok=True)
    for src, dst in (("guest-a.pem", "client.pem"), ("guest-a.key", "client.key"), ("ca.pem", "ca.pem")):
        with open(os.path.join(pki, src), "rb") as a, open(os.path.join(cfg, dst), "wb") as b:
            b.write(a.read())
    with open(os.path.join(cfg, "backend.conf"), "w") as f:
        f.write("endpoint = tcp://127.0.0.1:%d\n" % port)
    state = os.path.join(work, "state")  # the tenant's module images, kept across sessions
    os.makedirs(state, exist_ok=True)
    log = open(os.path.join(work, "backend.log"), "w")
    be = subprocess.Popen([os.path.join(bundle, "bin", "sluice-backend"), "--project", proj,
                           "--listen", "tcp://127.0.0.1:%d" % port,
                           "--cert", os.path.join(pki, "server.pem"),
                           "--key", os.path.join(pki, "server.key"),
                           "--ca", os.path.join(pki, "ca.pem"), "--driver", driver,
                           "--allow", os.path.join(work, "allow"),
                           "--state-dir", state] + list(extra),
                          stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    time.sleep(0.5)
    return be, cfg


def run(exe, args, env, timeout, guest=False):
    t0 = time.time()
    argv = guest_argv([exe] + args) if guest else [exe] + args
    try:
        p = subprocess.run(argv, cwd=os.path.dirname(exe), env=env, timeout=timeout,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, out = "timeout", e.stdout or b""
    return rc, out, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--args", default="")
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--driver", default="/usr/local/nvidia/lib64/libcuda.so.1")
    ap.add_argument("--frontend", required=True, help="folder holding our libcuda.so.1")
    ap.add_argument("--save", default="", help="folder for every run's full output")
    ap.add_argument("--backend-args", default="", help="more sluice-backend flags, e.g. '--measure none'")
    ap.add_argument("--host-driver-files", action="store_true",
                    help="leave the host driver's libraries visible to programs run through Sluice")
    a = ap.parse_args()
    cfgargs = json.load(open(a.args)) if a.args else {}
    exes = []
    for root, _, files in os.walk(a.bin):
        if "CMakeFiles" in root:
            continue
        for f in files:
            p = os.path.join(root, f)
            if os.access(p, os.X_OK) and not f.endswith((".so", ".py", ".sh")) and \
                    open(p, "rb").read(4) == b"\x7fELF":
                exes.append(p)
    exes.sort(key=os.path.basename)
    only = set(x for x in a.only.split(",") if x)
    work = tempfile.mkdtemp(prefix="sluice-samples.")
    be, cfg = start_backend(a.bundle, work, a.driver, a.backend_args.split())
    native_env = dict(os.environ)
    sluice_env = dict(os.environ, SLUICE_CONFIG_DIR=cfg, SLUICE_LOG_LEVEL="warning",
                      LD_LIBRARY_PATH=a.frontend + ":" + os.path.join(a.bundle, "lib") + ":" +
                      os.environ.get("LD_LIBRARY_PATH", ""))
    out = open(a.out, "w")
    rows = []
    for exe in exes:
        name = os.path.basename(exe)
        if only and name not in only:
            continue
        spec = cfgargs.get(name, {})
        if spec.get("skip"):
            continue
        runs = spec.get("runs") or [{"args": spec.get("args", [])}]
        args = runs[0].get("args", [])
        res = {}
        for mode, env in (("native", native_env), ("sluice", sluice_env)):
            if be.poll() is not None:
                be, cfg = start_backend(a.bundle, work, a.driver, a.backend_args.split())
            rc, o, secs = run(exe, args, env, a.timeout, guest=mode == "sluice" and not a.host_driver_files)
            masked = NUM.sub(b"#", o)
            if a.save:
                os.makedirs(a.save, exist_ok=True)
                open(os.path.join(a.save, "%s.%s.txt" % (name, mode)), "wb").write(o)
            res[mode] = (rc, o, masked, secs)
            out.write(json.dumps({"sample": name, "mode": mode, "rc": rc, "seconds": round(secs, 3),
                                  "sha256": hashlib.sha256(o).hexdigest(),
                                  "tail": o[-400:].decode("utf-8", "replace")}) + "\n")
            out.flush()
        n, s = res["native"], res["sluice"]
        same = "identical" if n[1] == s[1] else ("same-but-numbers" if n[2] == s[2] else "differs")
        rows.append((name, n[0], s[0], same, n[3], s[3]))
        print("%-36s native=%-7s sluice=%-7s %-16s %.2fs %.2fs" % rows[-1], flush=True)
    os.killpg(be.pid, signal.SIGTERM)
    passed_native = [r for r in rows if r[1] == 0]
    passed_both = [r for r in passed_native if r[2] == 0]
    print("native passes %d of %d; through Sluice %d of those" % (len(passed_native), len(rows),
                                                                   len(passed_both)))
    os.system("tail -50 %s/backend.log" % work)


if __name__ == "__main__":
    main()
