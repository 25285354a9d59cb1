#!/usr/bin/env python3
"""The soak benchmark (issue 25; docs/accounting.md, "Soak"): T tenants, each one sluice-backend
with its own SLA (a GPU-share cap, the caps adding up to at most 100%, and a memory quota), x M
sessions of tests/cuda/share_mix (heavy, copy, light and idle roles, --mix) on one GPU for
--seconds, every backend's records going to a fake agent (tests/e2e/fake_agent.c).

  guests (share_mix) -> our libcuda.so.1 -> sluice-backend of their tenant (--control) -> the
      real driver (GPU machine, --bundle) or the driver test double (CI, --build)

Every --sample seconds it samples each backend's and each of its workers' RSS and open
descriptors; the backends send usage records every --interval seconds (--usage-interval); during
the window's warm-up each tenant starts --probes copy sessions past its quota. At the end it
checks, one PASS/FAIL line each:
  shares     each capped tenant's GPU time (its records' busy time per second, after the
             warm-up) within --share-tol points of its cap: every tenant runs heavy sessions,
             each of which alone would keep the GPU busy (oversubscribed)
  starvation every regular session ended well; every heavy session made progress in every usage
             interval inside the window (kernels in each of its records there); every light
             session reports its latency p99 (the light and copy sessions' intervals without
             progress are counted and reported)
  quota      every probe refused with the quota's reason and counted in its records
             (quota_refusals), no regular session refused, the regular sessions' high-water
             marks add up to at most the quota
  flat       after the warm-up: backends' and workers' RSS grew at most --rss-slack MB (the
             highest in the window's last third against the highest before it) and their
             descriptors are equal (the first sample against the last one)
  closed     after the sessions closed: every worker ended on its own (none killed after the
             grace period), the backends' RSS within --rss-slack MB of their baseline (taken
             after one short session per tenant) and their descriptors at the baseline's count
  billing    the tenants' shared (apportioned) GPU time adds up to the union of every session's
             busy intervals within --bill-tol, through the agent's own checks, store and
             apportioning (tests/e2e/sluice-share-check); the raw sum is reported beside it
Under ASan the RSS and the shares are reported, not checked (timings, the allocator's quarantine).
Writes JSON lines (config, samples, sessions, checks, summary) to --out and a summary to stdout.
On the driver double every figure is the double's simulated time: plumbing, never a GPU result.
Exit status: 0 passed, 1 failed, 77 skipped (something not built).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
sys.path.insert(0, HERE)
import accounting as A  # noqa: E402  (Tenant: a backend with its fake agent; issue_cert)
import run  # noqa: E402  (process helpers)
import soak_checks as C  # noqa: E402
from sharing_bench import parse, roles_of  # noqa: E402  (share_mix's roles and its line)

COPY_MIB = 64  # what share_mix's copy role allocates on the device
QUOTA_ROOM_MIB = 32  # above the regular sessions' memory: the small allocations, never a copy
OPENED = 1


def default_caps(n):
    """caps adding up to at most 100%: weights 2 for the first half of the tenants, 3 for the
    rest, in whole percent (8 tenants: 10/10/10/10/15/15/15/15)"""
    w = [2 if i < n // 2 else 3 for i in range(n)]
    return [int(100 * x / sum(w)) / 100 for x in w]


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def workers(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


class Events:
    """The session events a fake agent wrote, read as they come (its file grows by whole lines;
    the usage records, read at the end, are skipped here)."""

    def __init__(self, path):
        self.path, self.offset, self.opened = path, 0, []

    def poll(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            if line.startswith(b'{"type":"session"'):
                e = json.loads(line)
                if e["kind"] == OPENED:
                    self.opened.append(e["session_id"])


class Soak:
    def __init__(self, a, ctx):
        self.a, self.ctx = a, ctx
        self.tenants = []
        self.lock = threading.Lock()
        self.out = open(a.out, "a")

    def emit(self, obj):
        with self.lock:
            self.out.write(json.dumps(obj) + "\n")
            self.out.flush()

    # ------------------------------------------------------------------ tenants and sessions

    def start_tenants(self):
        a, ctx = self.a, self.ctx
        roles = roles_of(a.mix, a.sessions)
        ncopy = roles.count("copy")
        for i, cap in enumerate(a.caps):
            name = f"soak{i}"
            project = f"50a4{i:028x}"
            uuid = f"50ac0000-0000-4000-8000-{i:012x}"
            A.issue_cert(ctx.pki, name, project, uuid)
            quota = (ncopy * COPY_MIB + QUOTA_ROOM_MIB) << 20
            flavor = f"soak.c{round(cap * 100)}"
            t = A.Tenant(ctx, name, project, [(uuid, flavor, cap, quota, 0)], resend=30,
                         interval=a.interval, max_sessions=a.sessions + a.probes + 4,
                         agent_seconds=int(a.seconds + a.lead + 600))
            self.tenants.append({"name": name, "cap": cap, "quota": quota, "obj": t,
                                 "events": Events(t.agent.out), "roles": roles,
                                 "sessions": [], "probes": [], "warm": [], "records": []})

    def open_sessions(self, role_of, env, kind):
        """starts one share_mix guest per tenant (role_of(t): its role, None for none) and waits
        for their sessions to open: a tenant's sessions open one after another, so its new
        OPENED event is this one's. From the main thread only: a guest dies with the thread
        that started it (PR_SET_PDEATHSIG)."""
        started = []
        for t in self.tenants:
            role = role_of(t)
            if role is None:
                continue
            t["events"].poll()
            n0 = len(t["events"].opened)
            p = t["obj"].start("share_mix", t["name"], env, args=[role])
            s = {"role": role, "session_id": None, "proc": p, "rc": None, "out": "",
                 "mix": None, "exited": None}
            t[kind].append(s)
            started.append((t, s, n0))
        new = [s for _, s, _ in started]
        end = time.time() + 60
        while started and time.time() < end:
            for t, s, n0 in list(started):
                t["events"].poll()
                if len(t["events"].opened) > n0:
                    s["session_id"] = t["events"].opened[n0]
                if s["session_id"] is not None or s["proc"].poll() is not None:
                    started.remove((t, s, n0))
            time.sleep(0.02)
        return new

    def each_tenant(self, fn):
        th = [threading.Thread(target=fn, args=(t,)) for t in self.tenants]
        for x in th:
            x.start()
        for x in th:
            x.join()

    def mix_env(self, seconds, start_ns=None):
        env = {"SLUICE_MIX_SECONDS": str(seconds), "SLUICE_MIX_KERNEL_US": str(self.a.kernel_us)}
        if start_ns:
            env["SLUICE_MIX_START_NS"] = str(start_ns)
        return env

    @staticmethod
    def finish(s, timeout):
        try:
            out, _ = s["proc"].communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            run.kill_group(s["proc"], 1)
            out, _ = s["proc"].communicate()
            out += b"\n(killed: timeout)"
        s["rc"] = s["proc"].returncode
        s["out"] = out.decode(errors="replace")
        line = next((x for x in s["out"].splitlines() if x.startswith("SHARE_MIX ")), None)
        s["mix"] = parse(line) if line else None
        if s["exited"] is None:
            s["exited"] = time.time()

    # ------------------------------------------------------------------ samples

    def sample(self, t_rel):
        bs = []
        for t in self.tenants:
            pid = t["obj"].proc.pid
            bs.append({"rss_kb": rss_kb(pid), "fds": fds(pid),
                       "workers": {w: [rss_kb(w), fds(w)] for w in workers(pid)}})
        s = {"t": round(t_rel, 2), "backends": bs}
        self.emit({"type": "sample", "t": s["t"], "backends": [
            {"rss_kb": b["rss_kb"], "fds": b["fds"],
             "workers": {str(k): v for k, v in b["workers"].items()}} for b in bs]})
        return s

    def settled(self, t):
        """the backend's RSS (lowest over 3 s: it gives memory back 0.5 s after the last
        session, docs/backend.md "Memory") and descriptors with no session"""
        pid = t["obj"].proc.pid
        low, end = rss_kb(pid), time.time() + 3
        while time.time() < end:
            time.sleep(0.1)
            low = min(low, rss_kb(pid))
        return {"rss_kb": low, "fds": fds(pid)}

    def wait_workers_gone(self, t, timeout=30):
        pid = t["obj"].proc.pid
        end = time.time() + timeout
        while time.time() < end:
            if not workers(pid):
                return time.time()
            time.sleep(0.01)
        return None

    # ------------------------------------------------------------------ the run

    def run(self):
        a = self.a
        self.start_tenants()
        # one short session per tenant first: one-time allocations are not a leak
        for s in self.open_sessions(lambda t: "copy", self.mix_env(0.5), "warm"):
            self.finish(s, 60)
        for t in self.tenants:
            self.wait_workers_gone(t)
        base = [None] * len(self.tenants)

        def baseline(t):
            base[self.tenants.index(t)] = self.settled(t)
        self.each_tenant(baseline)
        start_ns = time.time_ns() + int(a.lead * 1e9)
        env = self.mix_env(a.seconds, start_ns)
        for i in range(a.sessions):
            self.open_sessions(lambda t: t["roles"][i] if i < len(t["roles"]) else None, env,
                               "sessions")
        late = (time.time_ns() - start_ns) / 1e9
        if late > 0:
            print(f"  note: the sessions opened {late:.1f} s after the window's start (--lead)")
        t0 = start_ns / 1e9
        # the probes ask past the quota during the warm-up, whose samples the flatness check
        # leaves out (a slow probe's worker would hide the window's last third from it)
        probe_at = [(k + 0.5) * a.warmup / 2 / a.probes for k in range(a.probes)]
        probes, samples, k = [], [], 0
        regular = []
        while True:
            due = t0 + k * a.sample
            if due > t0 + a.seconds - 0.5:  # the guests stop at the window's end
                break
            time.sleep(max(0, due - time.time()))
            samples.append(self.sample(time.time() - t0))
            if not regular:  # the workers of the regular sessions
                regular = [set(b["workers"]) for b in samples[-1]["backends"]]
            for at in [x for x in probe_at if k * a.sample <= x < (k + 1) * a.sample]:
                probes += self.open_sessions(lambda t: "copy", self.mix_env(1), "probes")
            k += 1
        for s in probes:
            self.finish(s, 60)
        # the guests end on their own at the window's end: note when, then their outputs
        pending = [s for t in self.tenants for s in t["sessions"]]
        end = time.time() + 120
        while time.time() < end and any(s["exited"] is None for s in pending):
            for s in pending:
                if s["exited"] is None and s["proc"].poll() is not None:
                    s["exited"] = time.time()
            time.sleep(0.01)
        for s in pending:
            self.finish(s, 5)
        after = [None] * len(self.tenants)

        def closed(t):
            i = self.tenants.index(t)
            gone = self.wait_workers_gone(t)
            last = max((s["exited"] for s in t["sessions"]), default=time.time())
            log = open(t["obj"].log, errors="replace").read()
            after[i] = dict(self.settled(t), workers_left=len(workers(t["obj"].proc.pid)),
                            gone_s=None if gone is None else round(max(0, gone - last), 3),
                            grace_kills=log.count("killed after the grace period"))
        self.each_tenant(closed)
        problems = self.collect_records()
        return self.report(start_ns, samples, regular, base, after, problems)

    def collect_records(self):
        """waits for every session's final record, stops the backends, reads the records"""
        problems = []
        for t in self.tenants:
            ids = {s["session_id"] for k in ("sessions", "probes", "warm") for s in t[k]
                   if s["session_id"] is not None}
            try:
                t["obj"].agent.wait_for(
                    lambda evs: ids <= {e["session_id"] for e in evs
                                        if e["type"] == "usage" and e["final"]}, 30,
                    f"{t['name']}: the final records of {len(ids)} sessions")
            except TimeoutError as ex:
                problems.append(str(ex))
        for t in self.tenants:
            problems += t["obj"].stop()
            t["records"] = A.unique(t["obj"].agent.usage())
        return problems

    def share_check(self):
        out = subprocess.run([self.ctx.share_check, "--per-record",
                              os.path.join(self.ctx.work, "soak.db")] +
                             [t["obj"].agent.out for t in self.tenants],
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"sluice-share-check failed: {out.stderr[-800:]}")
        return json.loads(out.stdout)

    def report(self, start_ns, samples, regular, base, after, problems):
        a = self.a
        w0, w1 = start_ns, start_ns + int(a.seconds * 1e9)
        t_check = time.time()
        agent = self.share_check()
        t_check = time.time() - t_check
        by_id = agent.get("shared_by_record", {})
        rss_checked = not self.ctx.asan_runtime
        slack = int(a.rss_slack * 1024)
        checks = [
            ("shares",) + C.check_shares(self.tenants, w0 + int(a.warmup * 1e9), w1, by_id,
                                         a.share_tol / 100, rss_checked),
            ("starvation",) + C.check_starvation(self.tenants, w0, w1),
            ("quota",) + C.check_quota(self.tenants),
            ("flat",) + C.check_flat(samples, a.warmup, a.seconds, regular, slack, rss_checked,
                                     int(a.worker_rss_slack * 1024)),
            ("closed",) + C.check_after_close(base, after, slack, rss_checked),
            ("billing",) + C.check_billing([r for t in self.tenants for r in t["records"]],
                                           agent, a.bill_tol / 100),
        ]
        if problems:
            checks.append(("harness", False, "; ".join(problems), {}))
        for t in self.tenants:
            for s in t["sessions"] + t["probes"]:
                recs = C.of_session(t, s)
                self.emit({"type": "session", "tenant": t["name"], "role": s["role"],
                           "probe": s in t["probes"], "session_id": s["session_id"],
                           "rc": s["rc"], "mix": s["mix"], "records": len(recs),
                           "raw_ns": sum(r["gpu_busy_ns"] for r in recs),
                           "shared_ns": sum(by_id.get(r["record_id"], 0) for r in recs)})
        for name, ok, detail, fig in checks:
            self.emit({"type": "check", "check": name, "ok": ok, "detail": detail,
                       "figures": fig})
        ok = all(c[1] for c in checks)
        self.emit({"type": "summary", "ok": ok, "mode": self.ctx.mode,
                   "wall_s": round(time.time() - a.t_start, 1),
                   "share_check_s": round(t_check, 1)})
        self.summary(checks, w0, w1)
        return ok

    def summary(self, checks, w0, w1):
        a = self.a
        print(f"\nsoak: {len(self.tenants)} tenants x {a.sessions} sessions ({a.mix}), "
              f"{a.seconds:.0f} s window, usage records every {a.interval} s, RSS and "
              f"descriptors sampled every {a.sample} s, on "
              f"{self.ctx.device}")
        if self.ctx.mode == "double":
            print("  (the driver double's simulated figures: plumbing, never a GPU result)")
        print(f"  {'tenant':8} {'cap':>5} {'measured':>9} {'billed':>7} {'throttled':>10} "
              f"{'heavy kernels':>14} {'light p99 ms':>13} {'copy GB/s':>10}")
        fig = checks[0][3]
        for t in self.tenants:
            f = fig[t["name"]]
            mix = [s["mix"] for s in t["sessions"] if s["mix"]]
            kern = sum(m["ops"] for m in mix if m["role"] == "heavy")
            p99 = max((m["lat_p99_us"] for m in mix if m["role"] == "light"), default=0)
            gbs = sum(m["bytes"] for m in mix if m["role"] == "copy") / a.seconds / 1e9
            print(f"  {t['name']:8} {t['cap']:5.0%} {f['raw']:9.1%} {f['shared']:7.1%} "
                  f"{f['throttled_s']:9.1f}s {int(kern):14d} {p99 / 1e3:13.1f} {gbs:10.2f}")
        for name, ok, detail, _ in checks:
            print(f"{'PASS' if ok else 'FAIL'} soak.{name}: {detail}")
        print(f"soak: {'PASS' if all(c[1] for c in checks) else 'FAIL'} in "
              f"{time.time() - a.t_start:.0f} s; JSON lines in {a.out}")


def device_name(real):
    if real and shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    return "the real driver" if real else "the driver test double"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="CMake build folder")
    ap.add_argument("--bundle", help="the GPU bundle (scripts/gpu-bundle): its build/ and lib/, "
                    "the real driver")
    ap.add_argument("--frontend", help="folder holding our libcuda.so.1 (default: the build's)")
    ap.add_argument("--driver", help="driver library for the backends")
    ap.add_argument("--real-driver", action="store_true")
    ap.add_argument("--cuda-root", default=os.environ.get("SLUICE_CUDA_ROOT", "/usr/local/cuda"))
    ap.add_argument("--tenants", type=int, default=8)
    ap.add_argument("--sessions", type=int, default=8, help="sessions per tenant")
    ap.add_argument("--mix", default="heavy=4,copy=1,light=2,idle=1")
    ap.add_argument("--caps", help="per tenant, percent, comma-separated (default: weights 2 "
                    "and 3 adding up to 100)")
    ap.add_argument("--seconds", type=float, default=420, help="the window")
    ap.add_argument("--sample", type=float, default=5, help="seconds between samples of RSS "
                    "and descriptors")
    ap.add_argument("--interval", type=int, default=10, help="each backend's --usage-interval: "
                    "the intervals every session must make progress in")
    ap.add_argument("--warmup", type=float, help="seconds of the window before the share and "
                    "flatness checks look (default: max(2 intervals, 10%% of the window))")
    ap.add_argument("--lead", type=float, help="seconds for the sessions to open before the "
                    "window (default 8 + 0.5 per session of a tenant; 3 under ASan)")
    ap.add_argument("--probes", type=int, default=2, help="sessions past the quota per tenant")
    ap.add_argument("--kernel-us", type=float, default=1000, help="heavy sessions' kernels")
    ap.add_argument("--share-tol", type=float, default=5, help="points")
    ap.add_argument("--bill-tol", type=float, default=2, help="percent")
    ap.add_argument("--rss-slack", type=float, default=4, help="MB")
    ap.add_argument("--worker-rss-slack", type=float, help="MB (default: --rss-slack)")
    ap.add_argument("--out", required=True, help="JSON lines are appended here")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    a = ap.parse_args()
    a.t_start = time.time()
    a.caps = [float(x) / 100 for x in a.caps.split(",")] if a.caps else default_caps(a.tenants)
    if len(a.caps) != a.tenants or not all(0 < c <= 1 for c in a.caps) or sum(a.caps) > 1.0001:
        ap.error(f"--caps: {a.tenants} shares in (0, 100] adding up to at most 100")
    a.warmup = a.warmup if a.warmup is not None else max(2 * a.interval, 0.1 * a.seconds)
    a.worker_rss_slack = a.worker_rss_slack if a.worker_rss_slack is not None else a.rss_slack
    if a.warmup + 3 * max(a.interval, a.sample) > a.seconds:
        ap.error("--seconds must leave three usage intervals and samples after the warm-up")
    if a.bundle:
        a.bundle = os.path.abspath(a.bundle)
        a.build = os.path.join(a.bundle, "build")
        lib = os.path.join(a.bundle, "lib")  # what scripts/gpu-bundle's env.sh adds
        os.environ["LD_LIBRARY_PATH"] = ":".join(
            x for x in [lib, os.environ.get("LD_LIBRARY_PATH", "")] if x)
    build = os.path.abspath(a.build)
    ctx = A.Ctx()
    ctx.build = build
    real = bool(a.real_driver or a.bundle or a.driver)
    ctx.driver = a.driver or (run.real_driver() if real else os.path.join(
        build, "tests", "double", "libsluice-driver-double.so"))
    if ctx.driver and "driver-double" in os.path.basename(ctx.driver):
        real = False  # --driver naming the double
    ctx.mode = "gpu" if real else "double"
    ctx.backend = os.path.join(build, "backend", "sluice-backend")
    ctx.fake_agent = os.path.join(build, "tests", "e2e", "sluice-fake-agent")
    ctx.share_check = os.path.join(build, "tests", "e2e", "sluice-share-check")
    ctx.programs = os.path.join(build, "tests", "cuda")
    ctx.frontend_dir = os.path.abspath(a.frontend) if a.frontend else os.path.join(
        build, "frontend")
    ctx.cuda_root = a.cuda_root
    for what, path in [("driver", ctx.driver), ("sluice-backend", ctx.backend),
                       ("sluice-fake-agent", ctx.fake_agent), ("sluice-share-check",
                                                               ctx.share_check),
                       ("frontend", os.path.join(ctx.frontend_dir, "libcuda.so.1")),
                       ("share_mix", os.path.join(ctx.programs, "share_mix.static"))]:
        if not path or not os.path.exists(path):
            print(f"SKIP: no {what} ({path or 'not found'})")
            return run.SKIP
    ctx.asan_runtime = run.asan_runtime(os.path.join(ctx.frontend_dir, "libcuda.so.1"))
    a.lead = a.lead if a.lead is not None else 8 + (3 if ctx.asan_runtime else 0.5) * a.sessions
    ctx.device = device_name(real)
    ctx.work = tempfile.mkdtemp(prefix="sluice-soak-")
    ctx.pki = os.path.join(ctx.work, "pki")
    soak, ok = None, False
    try:
        subprocess.run([os.path.join(REPO, "scripts", "make-demo-pki"), ctx.pki], check=True,
                       stdout=subprocess.DEVNULL)
        soak = Soak(a, ctx)
        soak.emit({"type": "config", "mode": ctx.mode, "device": ctx.device,
                   "tenants": a.tenants, "sessions": a.sessions, "mix": a.mix,
                   "caps": a.caps, "seconds": a.seconds, "sample": a.sample,
                   "interval": a.interval,
                   "warmup": a.warmup, "probes": a.probes, "kernel_us": a.kernel_us,
                   "roles": roles_of(a.mix, a.sessions)})
        ok = soak.run()
    except (TimeoutError, RuntimeError, subprocess.SubprocessError, OSError) as ex:
        print(f"FAIL soak: {type(ex).__name__}: {ex}")
        ok = False
    finally:
        for t in soak.tenants if soak else []:
            for s in t["sessions"] + t["probes"] + t["warm"]:
                run.kill_group(s["proc"], 1)
            t["obj"].stop()
        if not ok or a.keep:
            for t in soak.tenants if soak and not ok else []:
                print(f"---- {t['obj'].log}\n" + run.tail(t["obj"].log, 30))
        if a.keep:
            print(f"work folder kept: {ctx.work}")
        else:
            shutil.rmtree(ctx.work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
