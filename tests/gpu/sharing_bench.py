#!/usr/bin/env python3
"""GPU sharing at scale, natively and through Sluice in one run (issue 25; docs/accounting.md).

T tenants x M sessions of tests/cuda/share_mix (roles heavy, light, copy, idle in the proportions
of --mix), all measuring the same window of --seconds, first natively (every process on the
host's driver) and then through Sluice (one sluice-backend per tenant on the real driver, each
session a guest process with our libcuda.so.1). Reports per mode: heavy kernels completed
(throughput, Sluice / native), each tenant's share of the heavy kernels' device time, the light
sessions' launch + synchronize latency (p50, p99 over all light sessions), copy GB/s, the GPU's
utilisation (nvidia-smi, sampled), and for Sluice the CPU seconds of every thread of the backends
and their session workers over the window (by thread name), the backends' RSS before, at the end
of the window and after the sessions closed, and how their workers ended.
Writes one JSON line per mode to --out and prints a table. Never a CI test (timings).

usage: sharing_bench.py --bundle DIR --frontend DIR --out FILE [--tenants T] [--sessions M]
                        [--mix heavy=5,light=2,copy=0,idle=1] [--seconds S] [--modes native,sluice]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_samples import guest_library_path, start_backend  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def roles_of(mix, m):
    """the roles of one tenant's m sessions, in the proportions of mix"""
    parts = [(k, float(v)) for k, v in (p.split("=") for p in mix.split(",")) if float(v) > 0]
    total = sum(w for _, w in parts)
    out = []
    for i, (k, w) in enumerate(parts):
        n = round(m * w / total) if i < len(parts) - 1 else m - len(out)
        out += [k] * max(0, n)
    return out[:m]


def parse(line):
    kv = dict(p.split("=", 1) for p in line.split()[1:])
    return {k: (v if k == "role" else float(v)) for k, v in kv.items()}


def tree(pid):
    """pid and its descendants (the backend and its session workers)"""
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            kids = open(f"/proc/{p}/task/{p}/children").read().split()
        except OSError:
            kids = []
        todo += [int(k) for k in kids]
    return pids


def thread_cpu(pids):
    """{(process kind, thread name): cpu seconds} for every thread of pids"""
    out = {}
    for p in pids:
        kind = "backend" if p == pids[0] else "worker"
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            try:
                s = open(f"/proc/{p}/task/{t}/stat").read()
            except OSError:
                continue
            name = s[s.index("(") + 1:s.rindex(")")]
            f = s[s.rindex(")") + 2:].split()
            out[(kind, name, p, t)] = (int(f[11]) + int(f[12])) / TICK
    return out


def rss_mb(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def run_mode(mode, a, work):
    backends, envs = [], []
    for t in range(a.tenants):
        if mode == "sluice":
            d = os.path.join(work, f"tenant{t}")
            os.makedirs(d, exist_ok=True)
            be, cfg = start_backend(a.bundle, d, a.driver, a.backend_args.split())
            backends.append(be)
            envs.append(dict(os.environ, SLUICE_CONFIG_DIR=cfg, SLUICE_LOG_LEVEL="warning",
                             LD_LIBRARY_PATH=guest_library_path(a.frontend) + ":" +
                             os.path.join(a.bundle, "lib")))
        else:
            envs.append(dict(os.environ))
    time.sleep(1.0 if mode == "sluice" else 0)
    rss0 = [rss_mb(b.pid) for b in backends]
    start_ns = time.time_ns() + int(a.lead * 1e9)
    procs = []
    for t in range(a.tenants):
        for role in roles_of(a.mix, a.sessions):
            env = dict(envs[t], SLUICE_MIX_SECONDS=str(a.seconds), SLUICE_MIX_START_NS=str(start_ns))
            procs.append((t, role, subprocess.Popen([a.program, role], env=env, text=True,
                                                    stdout=subprocess.PIPE,
                                                    stderr=subprocess.STDOUT)))
    util = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu",
                             "--format=csv,noheader,nounits", "-lms", "500"],
                            stdout=subprocess.PIPE, text=True) if shutil.which("nvidia-smi") else None
    time.sleep(max(0, (start_ns - time.time_ns()) / 1e9) + 0.2)
    cpu0 = {}
    for b in backends:
        cpu0.update(thread_cpu(tree(b.pid)))
    time.sleep(max(0.1, a.seconds - 0.4))
    cpu1 = {}
    for b in backends:
        cpu1.update(thread_cpu(tree(b.pid)))
    rss1 = [rss_mb(b.pid) for b in backends]
    results, failed = [], []
    for t, role, p in procs:
        try:
            out, _ = p.communicate(timeout=a.seconds + a.lead + 120)
        except subprocess.TimeoutExpired:
            p.kill()
            out = (p.communicate()[0] or "") + "\n(timeout)"
        line = next((x for x in out.splitlines() if x.startswith("SHARE_MIX ")), None)
        if p.returncode != 0 or not line:
            failed.append({"tenant": t, "role": role, "rc": p.returncode, "tail": out[-600:]})
            continue
        r = parse(line)
        r["tenant"] = t
        results.append(r)
    ended = time.time()
    samples = []
    if util:
        util.terminate()
        samples = [int(x) for x in util.communicate()[0].split() if x.strip().isdigit()]
    # the window's samples only (the first and last seconds are start-up and drain)
    busy = samples[2:-4] if len(samples) > 8 else samples
    time.sleep(a.settle)
    rss2 = [rss_mb(b.pid) for b in backends]
    workers_left = [len(tree(b.pid)) - 1 for b in backends]
    for b in backends:
        b.terminate()
    for b in backends:
        try:
            b.wait(timeout=20)
        except subprocess.TimeoutExpired:
            b.kill()
    kills = 0
    for t in range(len(backends)):
        log = open(os.path.join(work, f"tenant{t}", "backend.log"), errors="replace").read()
        kills += log.count("grace period")
        if any(f["tenant"] == t for f in failed):  # kept beside --out: why a session failed
            with open(f"{a.out}.{mode}.tenant{t}.backend.log", "w") as keep:
                keep.write(log)
    heavy = [r for r in results if r["role"] == "heavy"]
    light = [r for r in results if r["role"] == "light"]
    copy = [r for r in results if r["role"] == "copy"]
    dev = {}
    for r in heavy:
        dev[r["tenant"]] = dev.get(r["tenant"], 0) + r["device_ns"]
    total_dev = sum(dev.values()) or 1
    cpu = {}
    for k, v in cpu1.items():
        kind, name = k[0], k[1]
        cpu[f"{kind}:{name}"] = cpu.get(f"{kind}:{name}", 0) + v - cpu0.get(k, 0)
    row = {
        "mode": mode, "tenants": a.tenants, "sessions": a.sessions, "mix": a.mix,
        "seconds": a.seconds, "failed": failed,
        "heavy_kernels": sum(r["ops"] for r in heavy),
        "heavy_device_s": total_dev / 1e9 if heavy else 0,
        "tenant_share": {t: round(v / total_dev, 4) for t, v in sorted(dev.items())},
        "light_p50_us": max((r["lat_p50_us"] for r in light), default=0),
        "light_p99_us": max((r["lat_p99_us"] for r in light), default=0),
        "light_p99_median_us": sorted(r["lat_p99_us"] for r in light)[len(light) // 2] if light else 0,
        "light_ops": sum(r["ops"] for r in light),
        "copy_gb_s": sum(r["bytes"] for r in copy) / a.seconds / 1e9,
        "gpu_util_mean": round(sum(busy) / len(busy), 1) if busy else None,
        "backend_rss_mb": {"before": rss0, "window_end": rss1, "after_close": rss2},
        "workers_left_after_settle": workers_left, "grace_kills": kills,
        "cpu_s_by_thread": {k: round(v, 2) for k, v in sorted(cpu.items(), key=lambda x: -x[1])
                            if v >= 0.05},
        "drain_s": round(ended - start_ns / 1e9 - a.seconds, 2),
    }
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--frontend", required=True, help="folder holding our libcuda.so.1")
    ap.add_argument("--out", required=True)
    ap.add_argument("--program", default="", help="share_mix (default: the bundle's static one)")
    ap.add_argument("--tenants", type=int, default=1)
    ap.add_argument("--sessions", type=int, default=64, help="sessions per tenant")
    ap.add_argument("--mix", default="heavy=5,light=2,copy=0,idle=1")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--lead", type=float, default=8, help="seconds for every process to start")
    ap.add_argument("--settle", type=float, default=3, help="seconds after the last exit before "
                    "the backends' RSS and workers are read")
    ap.add_argument("--modes", default="native,sluice")
    ap.add_argument("--driver", default="/usr/local/nvidia/lib64/libcuda.so.1")
    ap.add_argument("--backend-args", default="")
    a = ap.parse_args()
    if not a.program:
        a.program = os.path.join(a.bundle, "build", "tests", "cuda", "share_mix.static")
    rows = []
    with open(a.out, "a") as out:
        for mode in a.modes.split(","):
            with tempfile.TemporaryDirectory(prefix="sluice-share.") as work:
                row = run_mode(mode, a, work)
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(json.dumps(row, indent=1))
    by = {r["mode"]: r for r in rows}
    if "native" in by and "sluice" in by:
        n, s = by["native"], by["sluice"]
        print(f"\n{a.tenants} tenants x {a.sessions} sessions ({a.mix}), {a.seconds} s window")
        print(f"heavy kernels: native {n['heavy_kernels']}, Sluice {s['heavy_kernels']} "
              f"({s['heavy_kernels'] / max(1, n['heavy_kernels']):.3f}x)")
        print(f"light p99 (worst / median session): native {n['light_p99_us']:.0f} / "
              f"{n['light_p99_median_us']:.0f} us, Sluice {s['light_p99_us']:.0f} / "
              f"{s['light_p99_median_us']:.0f} us")
        print(f"GPU utilisation: native {n['gpu_util_mean']}%, Sluice {s['gpu_util_mean']}%")
    return 1 if any(r["failed"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
