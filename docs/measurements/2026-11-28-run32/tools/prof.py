# ad hoc (run 32, call D): .gpu/lat through Sluice on the real driver, with perf record -a -g over
# the middle of the run, then natively; perf's reports under $OUT.
import os, sys, subprocess, time, signal
sys.path.insert(0, "tests/gpu")
from run_samples import start_backend, guest_library_path
B = os.path.abspath(".bundle"); OUT = os.environ["OUT"]
work = "/tmp/profw"; os.makedirs(work, exist_ok=True)
be, cfg = start_backend(B, work, "/usr/local/nvidia/lib64/libcuda.so.1")
env = dict(os.environ, LD_LIBRARY_PATH=guest_library_path(B + "/build/frontend") + ":/usr/local/cuda/lib64",
           SLUICE_CONFIG_DIR=cfg, SLUICE_LOG_LEVEL="warning")
perf = os.path.abspath(".gpu/perfb/bin/perf")
penv = dict(os.environ, LD_LIBRARY_PATH=os.path.abspath(".gpu/perfb/lib") + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
try:
    for mode, n in ((0, 60000), (1, 50000), (2, 60000)):
        p = subprocess.Popen([".gpu/lat", str(mode), str(n)], env=env, stdout=subprocess.PIPE, text=True)
        time.sleep(2.0)
        data = f"{OUT}/perf{mode}.data"
        r = subprocess.run([perf, "record", "-a", "-g", "-F", "2999", "-o", data, "--", "sleep", "3"],
                           capture_output=True, text=True, env=penv)
        print("perf record rc", r.returncode, r.stderr[-300:])
        print(p.communicate(timeout=120)[0].strip())
        for sort, name in (("comm,dso", "dso"), ("comm,dso,sym", "sym")):
            rep = subprocess.run([perf, "report", "-i", data, "--no-children", "--sort", sort, "-g", "none",
                                  "--percent-limit", "0.15"], capture_output=True, text=True, env=penv)
            open(f"{OUT}/perf{mode}-{name}.txt", "w").write(rep.stdout)
        rep = subprocess.run([perf, "report", "-i", data, "--no-children", "--sort", "comm,sym", "-g",
                              "caller,0.5,callee", "--percent-limit", "1"], capture_output=True, text=True, env=penv)
        open(f"{OUT}/perf{mode}-calls.txt", "w").write(rep.stdout[:400000])
        os.remove(data)
    nenv = dict(os.environ)
    for mode, n in ((0, 20000), (1, 20000), (2, 20000)):
        print("native", subprocess.run([".gpu/lat", str(mode), str(n)], env=nenv, capture_output=True, text=True).stdout.strip())
finally:
    os.killpg(be.pid, signal.SIGTERM)
