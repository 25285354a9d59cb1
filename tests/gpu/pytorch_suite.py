#!/usr/bin/env python3
"""Stock PyTorch natively and through Sluice on the GPU machine, step by step, compared.

Each step of pytorch_steps.py runs in its own process: twice natively (the spread between two
native runs is the tolerance for steps that are not bit-deterministic) and then through Sluice
(our libcuda.so.1 first on the library path and the host's driver folders off it, as in a
guest, so PyTorch finds no NVML; a sluice-backend on the real driver on this machine). A value passes when it equals native exactly, or, where the two native runs differ,
when it is no further from the first native run than the native runs are from each other (x4).
Writes results.jsonl and each run's log under --out and prints a table; recorded in
docs/pytorch.md.

usage: pytorch_suite.py --bundle DIR --frontend DIR --out DIR [--steps a,b] [--timeout S]
                        [--sluice-runs N] [--timing-pairs N] [--log-level L]
"""
import argparse
import json
import statistics
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_samples import guest_library_path, start_backend  # noqa: E402

STEPS = ["discovery", "tensors", "matmul", "fft", "solve", "conv", "train_cnn", "train_gpt", "graphs",
         "compile"]


def run_step(step, env, out_json, log_path, timeout):
    t0 = time.time()
    with open(log_path, "w") as log:
        try:
            p = subprocess.run([sys.executable, os.path.join(HERE, "pytorch_steps.py"), step,
                                out_json], env=env, stdout=log, stderr=subprocess.STDOUT,
                               timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    res = {"rc": rc, "wall": time.time() - t0}
    if rc == 0:
        with open(out_json) as f:
            res.update(json.load(f))
    return res


def close(a, b, tol):
    if tol is None:
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, t) for x, y, t in zip(a, b, tol))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= tol
    return a == b


def spread(a, b):
    """Per-element tolerance from two native runs, or None where they must match exactly.
    A list whose native runs differ anywhere comes from a non-deterministic operation: each of
    its elements may then differ by 4x the largest relative spread seen in the list (at least
    1e-7 relative, float32's rounding), plus 4x its own spread."""
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        fl = [(x, y) for x, y in zip(a, b) if isinstance(x, float) and isinstance(y, float)]
        rel = max([abs(x - y) / max(abs(x), 1e-30) for x, y in fl] or [0.0])
        if rel == 0.0:
            return [spread(x, y) for x, y in zip(a, b)]
        rel = max(rel, 1e-7)
        return [4 * rel * abs(x) + 4 * abs(x - y) if (x, y) in fl else spread(x, y)
                for x, y in zip(a, b)]
    if isinstance(a, float) and isinstance(b, float) and a != b:
        return 4 * abs(a - b)
    return None


def compare(n1, n2, s):
    bad = []
    for k, want in n1["values"].items():
        got = s["values"].get(k)
        tol = spread(want, n2["values"].get(k))
        if got != want and (tol is None or not close(want, got, tol)):
            bad.append(k)
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--frontend", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", default=",".join(STEPS))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--sluice-runs", type=int, default=1,
                    help="runs through Sluice per step (a second one shows the image cache)")
    ap.add_argument("--log-level", default="info", help="SLUICE_LOG_LEVEL of the programs")
    ap.add_argument("--skip-native", action="store_true",
                    help="run only through Sluice (for diagnosing; nothing is compared)")
    ap.add_argument("--timing-pairs", type=int, default=0,
                    help="after the checks, N more native/Sluice runs of each step, alternating, "
                         "for step times: the machines' speed drifts by 20-30%% between runs, "
                         "so one run of each says little; the table shows medians and ranges")
    ap.add_argument("--driver", default="/usr/local/nvidia/lib64/libcuda.so.1")
    ap.add_argument("--backend-args", default="", help="more sluice-backend flags, e.g. '--measure none'")
    ap.add_argument("--host-nvml", action="store_true",
                    help="leave the host's driver folders on the Sluice runs' library path (before "
                         "the sixth session they were: PyTorch then read the host's NVML)")
    ap.add_argument("--variant", metavar="'ENV=V ... | BACKEND FLAGS'",
                    help="a second Sluice setting for --timing-pairs: each pair gets a third run "
                         "through a backend of its own with these flags and these variables "
                         "(e.g. 'SLUICE_SPIN_US=0 | --spin-us 0'); the table shows it as 'variant'")
    ap.add_argument("--variant-bundle", metavar="DIR",
                    help="the variant runs another build: its sluice-backend from DIR and its "
                         "libcuda.so.1 from DIR/build/frontend (a same-call A/B of two builds; "
                         "--variant may then be '|')")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="sluice-torch-")
    be, cfg = start_backend(a.bundle, work, a.driver, a.backend_args.split())
    native_env = dict(os.environ)

    def sluice_env(cfg_dir, frontend=a.frontend):
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = guest_library_path(frontend, not a.host_nvml)
        env["SLUICE_CONFIG_DIR"] = cfg_dir
        env["SLUICE_LOG_LEVEL"] = a.log_level
        env["TRITON_LIBCUDA_PATH"] = frontend
        return env

    sl_env = sluice_env(cfg)
    vbe, var_env = None, None
    if a.variant or a.variant_bundle:
        venv, _, vflags = (a.variant or "|").partition("|")
        vwork = os.path.join(work, "variant")
        os.makedirs(vwork)
        vbundle = os.path.abspath(a.variant_bundle) if a.variant_bundle else a.bundle
        vbe, vcfg = start_backend(vbundle, vwork, a.driver, vflags.split())
        var_env = sluice_env(vcfg, os.path.join(vbundle, "build", "frontend")
                             if a.variant_bundle else a.frontend)
        var_env.update(kv.split("=", 1) for kv in venv.split())
    rows = []
    try:
        with open(os.path.join(a.out, "results.jsonl"), "a") as res:
            for step in a.steps.split(","):
                runs = {}
                plan = [] if a.skip_native else [("native1", native_env), ("native2", native_env)]
                plan += [("sluice%d" % (i + 1), sl_env) for i in range(a.sluice_runs)]
                for i in range(0 if a.skip_native else a.timing_pairs):
                    plan += [("tnative%d" % (i + 1), native_env), ("tsluice%d" % (i + 1), sl_env)]
                    if var_env:
                        plan.append(("tvariant%d" % (i + 1), var_env))
                for mode, env in plan:
                    r = run_step(step, env, os.path.join(work, "%s-%s.json" % (step, mode)),
                                 os.path.join(a.out, "%s-%s.log" % (step, mode)), a.timeout)
                    runs[mode] = r
                    res.write(json.dumps({"step": step, "mode": mode, **r}) + "\n")
                    res.flush()
                s1 = runs["sluice1"]
                n1 = runs.get("native1", {"rc": "skipped"})
                n2 = runs.get("native2", {"rc": "skipped"})
                if a.skip_native:
                    verdict = "ran" if s1["rc"] == 0 else "FAIL (rc %s)" % s1["rc"]
                elif n1["rc"] != 0 or n2["rc"] != 0:
                    verdict = "native failed"
                elif s1["rc"] != 0:
                    verdict = "FAIL (rc %s)" % s1["rc"]
                else:
                    bad = compare(n1, n2, s1)
                    verdict = "pass" if not bad else "MISMATCH " + ",".join(bad)
                rows.append((step, n1, s1, verdict, runs))
                print("%-10s %s" % (step, verdict), flush=True)
    finally:
        for b in (be, vbe):
            if b:
                b.terminate()
                b.wait(timeout=10)
        os.system("cp %s/backend.log %s/ 2>/dev/null" % (work, a.out))
    print("\n%-10s %-24s %10s %10s %7s" % ("step", "result", "native s", "sluice s", "ratio"))
    for step, n1, s1, verdict, _ in rows:
        nt = n1.get("times", {}).get("step_total")
        st = s1.get("times", {}).get("step_total")
        ratio = "%.2f" % (st / nt) if nt and st else "-"
        print("%-10s %-24s %10s %10s %7s" % (step, verdict[:24], "%.2f" % nt if nt else "-",
                                            "%.2f" % st if st else "-", ratio))
        for k in sorted(s1.get("times", {})):
            if k.endswith("_step_median") or k.endswith("_first_step_since_start"):
                nv = n1.get("times", {}).get(k)
                sv = s1["times"][k]
                if nv:
                        print("  %-32s native %.4f  sluice %.4f  ratio %.3f" % (k, nv, sv, sv / nv))
    timing_table(rows)
    return 0 if all(r[3] in ("pass", "ran") for r in rows) else 1


def timing_table(rows):
    """Step-time medians over every run of each kind (checks and --timing-pairs runs)."""
    lines = []
    for step, _, _, _, runs in rows:
        keys = sorted({k for r in runs.values() for k in r.get("times", {})
                       if k.endswith("_step_median")})
        for k in keys:
            by = {"native": [], "sluice": [], "variant": []}
            for mode, r in runs.items():
                v = r.get("times", {}).get(k) if r.get("rc") == 0 else None
                kind = next(m for m in by if m in mode)
                if v:
                    by[kind].append(v * 1000)
            if len(by["native"]) < 2 or not by["sluice"]:
                continue
            med = {m: statistics.median(v) for m, v in by.items() if v}
            line = "  %-18s native %.3f ms [%.3f-%.3f] x%d" % (
                k, med["native"], min(by["native"]), max(by["native"]), len(by["native"]))
            for m in ("sluice", "variant"):
                if m in med:
                    line += "  %s %.3f ms [%.3f-%.3f] x%d ratio %.3f" % (
                        m, med[m], min(by[m]), max(by[m]), len(by[m]), med[m] / med["native"])
            lines.append(line)
    if lines:
        print("\nstep times over all runs (median [min-max] x runs):")
        print("\n".join(lines))
    startup_table(rows)


def startup_table(rows):
    """Interpreter start to the end of the first step: native, the step's first Sluice run and
    its later ones (the backend keeps module images across sessions: later runs send none)."""
    lines = []
    for step, _, _, _, runs in rows:
        keys = sorted({k for r in runs.values() for k in r.get("times", {})
                       if k.endswith("_first_step_since_start")})
        for k in keys:
            def of(pred):
                return [r["times"][k] for m, r in runs.items()
                        if pred(m) and r.get("rc") == 0 and k in r.get("times", {})]
            nat = of(lambda m: "native" in m)
            first = of(lambda m: m == "sluice1")
            later = of(lambda m: "sluice" in m and m != "sluice1")  # variants: own backend
            if not nat or not first:
                continue
            lines.append("  %-32s native %.2f s x%d  sluice first run %.2f s  later runs %s" % (
                k, statistics.median(nat), len(nat), first[0],
                "%.2f s x%d" % (statistics.median(later), len(later)) if later else "-"))
    if lines:
        print("\nstartup, interpreter start to the end of the first step (medians):")
        print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
