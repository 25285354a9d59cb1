# ad hoc (run 32, call E): .gpu/lat through Sluice with every spin off (SLUICE_SPIN_US=0,
# --spin-us 0), so that CPU time is work and wake-ups only: each thread's CPU time per call
# (schedstat over a 3 s window) and perf's profile of that window.
import os, sys, subprocess, time, signal, glob
sys.path.insert(0, "tests/gpu")
from run_samples import start_backend, guest_library_path
B = os.path.abspath(".bundle"); OUT = os.environ["OUT"]
spin = os.environ.get("SPIN", "0")
work = "/tmp/profw2"; os.makedirs(work, exist_ok=True)
be, cfg = start_backend(B, work, "/usr/local/nvidia/lib64/libcuda.so.1", ["--spin-us", spin])
env = dict(os.environ, LD_LIBRARY_PATH=guest_library_path(B + "/build/frontend") + ":/usr/local/cuda/lib64",
           SLUICE_CONFIG_DIR=cfg, SLUICE_LOG_LEVEL="warning", SLUICE_SPIN_US=spin)
perf = os.path.abspath(".gpu/perfb/bin/perf")
penv = dict(os.environ, LD_LIBRARY_PATH=os.path.abspath(".gpu/perfb/lib") + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
WANT = ("lat", "sl-", "ZMQbg", "sluice")
def snap():
    r = {}
    for t in glob.glob("/proc/[0-9]*/task/[0-9]*"):
        try:
            comm = open(t + "/comm").read().strip()
            if not comm.startswith(WANT):
                continue
            r[(t.split("/")[2], t.split("/")[4], comm)] = int(open(t + "/schedstat").read().split()[0])
        except OSError:
            pass
    return r
try:
    for mode, n in ((0, 30000), (2, 30000)):
        p = subprocess.Popen([".gpu/lat", str(mode), str(n)], env=env, stdout=subprocess.PIPE, text=True)
        time.sleep(2.0)
        a = snap(); t0 = time.time()
        data = f"{OUT}/perfs{spin}-{mode}.data"
        subprocess.run([perf, "record", "-a", "-g", "-F", "2999", "-o", data, "--", "sleep", "3"],
                       capture_output=True, text=True, env=penv)
        b = snap(); dt = time.time() - t0
        out = p.communicate(timeout=120)[0].strip()
        med = float(out.split("median ")[1].split(" us")[0])
        calls = dt * 1e6 / med
        print(out, f"| window {dt:.2f} s, about {calls:.0f} calls")
        rows = sorted(((b[k] - a.get(k, 0)) / calls / 1000, k) for k in b if k in a)
        for us, k in reversed(rows):
            if us > 0.05:
                print(f"   {k[2]:<14} pid {k[0]:>7} tid {k[1]:>7}: {us:6.2f} us CPU per call")
        for sort, name in (("comm,dso,sym", "sym"),):
            rep = subprocess.run([perf, "report", "-i", data, "--no-children", "--sort", sort, "-g", "none",
                                  "--percent-limit", "0.1"], capture_output=True, text=True, env=penv)
            open(f"{OUT}/perfs{spin}-{mode}-{name}.txt", "w").write(rep.stdout)
        rep = subprocess.run([perf, "report", "-i", data, "--children", "--sort", "comm,sym", "-g", "none",
                              "--percent-limit", "0.3"], capture_output=True, text=True, env=penv)
        open(f"{OUT}/perfs{spin}-{mode}-children.txt", "w").write(rep.stdout)
        os.remove(data)
finally:
    os.killpg(be.pid, signal.SIGTERM)
