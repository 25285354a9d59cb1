#!/usr/bin/env python3
"""Ad hoc (run 29): where a 256 MiB copy's time goes. Each config (native, lanes 1/4/8) copies
256 MiB pageable and page-locked, each way, 8 times, and notes for every thread of the guest
(this process) and of the session's worker the CPU time it used (schedstat), its minor faults
and context switches during each phase."""
import ctypes, json, os, subprocess, sys, tempfile, time

SIZE = 256 << 20
N = 8


def threads(pid):
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for t in tids:
        d = "/proc/%d/task/%s/" % (pid, t)
        try:
            comm = open(d + "comm").read().strip()
            ns = int(open(d + "schedstat").read().split()[0])
            st = open(d + "stat").read().rsplit(")", 1)[1].split()
            minflt = int(st[7])
            vol = nv = 0
            for l in open(d + "status"):
                if l.startswith("voluntary_ctxt"):
                    vol = int(l.split()[1])
                elif l.startswith("nonvoluntary_ctxt"):
                    nv = int(l.split()[1])
            out[(pid, int(t))] = (comm, ns, minflt, vol, nv)
        except OSError:
            pass
    return out


def descendants(root):
    kids = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                pp = int(open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(pp, []).append(int(p))
            except OSError:
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append(k)
            todo.append(k)
    return out


def cpustat():
    f = open("/proc/stat").readline().split()[1:]
    v = [int(x) for x in f]  # user nice system idle iowait irq softirq steal
    return v


def snap(pids):
    s = {}
    for p in pids:
        s.update(threads(p))
    return s


def child():
    cu = ctypes.CDLL("libcuda.so.1")
    def ck(r, what):
        if r != 0:
            raise SystemExit("%s: %d" % (what, r))
    ck(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
    ck(cu.cuCtxSetCurrent(ctx), "setcurrent")
    d = ctypes.c_uint64()
    ck(cu.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(SIZE)), "alloc")
    lk = ctypes.c_void_p()
    ck(cu.cuMemAllocHost_v2(ctypes.byref(lk), ctypes.c_size_t(SIZE)), "allochost")
    ctypes.memset(lk, 7, SIZE)
    pg = ctypes.create_string_buffer(SIZE)
    ctypes.memset(pg, 7, SIZE)
    be = int(os.environ.get("BE_PID", "0"))
    res = []
    for how, host in (("pageable", ctypes.addressof(pg)), ("page-locked", lk.value)):
        for way in ("HtoD", "DtoH"):
            f = (lambda: cu.cuMemcpyHtoD_v2(d, ctypes.c_void_p(host), ctypes.c_size_t(SIZE))) if way == "HtoD" \
                else (lambda: cu.cuMemcpyDtoH_v2(ctypes.c_void_p(host), d, ctypes.c_size_t(SIZE)))
            ck(f(), "warm")
            pids = [os.getpid()] + (descendants(be) if be else [])
            a = snap(pids)
            c0 = cpustat()
            t0 = time.perf_counter()
            ts = []
            for _ in range(N):
                t = time.perf_counter()
                ck(f(), way)
                ts.append(time.perf_counter() - t)
            wall = time.perf_counter() - t0
            c1 = cpustat()
            b = snap(pids)
            hz = os.sysconf("SC_CLK_TCK")
            dc = [(y - x) / hz for x, y in zip(c0, c1)]
            machine = {"busy_cores": (sum(dc[:8]) - dc[3] - dc[4]) / wall, "softirq_cores": dc[6] / wall,
                       "sys_cores": dc[2] / wall, "idle_cores": dc[3] / wall, "steal_cores": dc[7] / wall}
            th = []
            for k, v in b.items():
                if k in a:
                    o = a[k]
                    th.append({"pid": k[0], "tid": k[1], "comm": v[0], "cpu_ms": (v[1] - o[1]) / 1e6,
                               "minflt": v[2] - o[2], "vcs": v[3] - o[3], "ivcs": v[4] - o[4]})
            th.sort(key=lambda x: -x["cpu_ms"])
            ts.sort()
            res.append({"copy": "%s %s" % (how, way), "gbps_median": SIZE / ts[len(ts) // 2] / 1e9,
                        "gbps_best": SIZE / ts[0] / 1e9, "wall_ms": wall * 1e3, "threads": th, "guest_pid": os.getpid(), "machine": machine})
    print(json.dumps(res))


def report(name, res, f):
    for r in res:
        f.write("== %s | %s: median %.2f GB/s, best %.2f; %d copies in %.0f ms\n" % (
            name, r["copy"], r["gbps_median"], r["gbps_best"], N, r["wall_ms"]))
        tot = 0
        for t in r["threads"]:
            if t["cpu_ms"] < 1 and t["minflt"] < 10:
                continue
            tot += t["cpu_ms"]
            f.write("   %-6s %-16s %8.1f ms %5.0f%%  minflt %7d  vcs %6d  ivcs %5d\n" % (
                "guest" if t["pid"] == r["guest_pid"] else "host",
                t["comm"], t["cpu_ms"], 100 * t["cpu_ms"] / r["wall_ms"], t["minflt"], t["vcs"], t["ivcs"]))
        f.write("   all threads: %.1f ms = %.1f cores; the machine: %s\n" % (tot, tot / r["wall_ms"],
                ", ".join("%s %.1f" % kv for kv in r["machine"].items())))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        return child()
    sys.path.insert(0, "tests/gpu")
    from run_samples import guest_library_path, start_backend
    B = os.path.abspath(".bundle"); OUT = os.environ.get("OUT", "/tmp")
    extra = sys.argv[1:]
    work = tempfile.mkdtemp(prefix="bp-")
    os.environ["SLUICE_LOG_LEVEL"] = "info"
    be, cfg = start_backend(B, work, "/usr/local/nvidia/lib64/libcuda.so.1", extra)
    fe = B + "/build/frontend"
    # "4" : 4 lanes; "4u": 4 lanes with SLUICE_SEALED_BULK=0 (bulk in TLS records)
    configs = [("native", None)] + [("lanes%s" % n, n) for n in os.environ.get("LANES", "1 4 8").split()]
    with open(OUT + "/bulkprof.txt", "a") as f:
        f.write("#### backend args %s; %d cpus\n" % (extra, os.cpu_count()))
        for name, n in configs:
            if n is None:
                env = dict(os.environ, LD_LIBRARY_PATH="/usr/local/nvidia/lib64:/usr/local/cuda/lib64:" + os.environ.get("LD_LIBRARY_PATH", ""))
            else:
                env = dict(os.environ, LD_LIBRARY_PATH=guest_library_path(fe) + ":/usr/local/cuda/lib64",
                           SLUICE_CONFIG_DIR=cfg, SLUICE_LOG_LEVEL="warning", SLUICE_LANES=n.rstrip("un"),
                           SLUICE_SEALED_BULK="0" if n.endswith("u") else "1",
                           **({"SLUICE_X_NODEFER": "1"} if n.endswith("n") else {}),
                           SLUICE_STATS="1", BE_PID=str(be.pid))
            p = subprocess.run([sys.executable, __file__, "child"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=240)
            if p.returncode != 0:
                f.write("== %s rc %d\n%s\n" % (name, p.returncode, p.stderr.decode(errors="replace")[-3000:]))
                continue
            report(name, json.loads(p.stdout.decode().strip().splitlines()[-1]), f)
            f.write("   stats: %s\n" % " | ".join(l for l in p.stderr.decode(errors="replace").splitlines() if "lane" in l or "stat" in l)[:600])
            f.flush()
    be.terminate(); be.wait(10)
    with open(OUT + "/bulkprof.txt", "a") as f:
        for l in open(work + "/backend.log"):
            if "large copies" in l or "lane" in l.lower():
                f.write(l.split(" [project")[0][:300] + "\n")
    print(open(OUT + "/bulkprof.txt").read())


main()
