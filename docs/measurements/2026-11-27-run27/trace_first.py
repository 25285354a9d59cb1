#!/usr/bin/env python3
"""Ad hoc (run 27): sluice-bench-datapath --quick through Sluice with the frontend's debug log
(each synchronous call with its round trip), the backend at info; writes OUT/trace.txt and
OUT/trace-backend.log."""
import os, subprocess, sys, tempfile
sys.path.insert(0, "tests/gpu")
from run_samples import guest_library_path, start_backend
B = os.path.abspath(".bundle"); OUT = os.environ["OUT"]
work = tempfile.mkdtemp(prefix="trace-")
os.environ["SLUICE_LOG_LEVEL"] = "info"
be, cfg = start_backend(B, work, "/usr/local/nvidia/lib64/libcuda.so.1", [])
env = dict(os.environ, LD_LIBRARY_PATH=guest_library_path(B + "/build/frontend") + ":/usr/local/cuda/lib64",
           SLUICE_CONFIG_DIR=cfg, SLUICE_LOG_LEVEL="debug", SLUICE_STATS="1")
bench = B + "/build/tests/bench/sluice-bench-datapath"
for k in range(2):
    p = subprocess.run([bench, "--quick"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    with open(OUT + "/trace.txt", "a") as f:
        f.write("==== run %d rc %d\n" % (k, p.returncode))
        lines = p.stdout.decode(errors="replace").splitlines()
        f.write("\n".join(lines[:400] + ["..."] + lines[-60:]) + "\n")
be.terminate(); be.wait(10)
os.system("cp %s/backend.log %s/trace-backend.log" % (work, OUT))
