#!/bin/bash
# run 34, call A: measuring an uncapped session's timed runs after a batch, the clock or the idle
# thread instead of after every frame (the twenty-third session). The data path's latency rows
# (the async empty launch among them) with the previous build (.vbundle: b4f6e17) as the variant
# column, same machine, same rounds, both backends at info level (each session's "frames took"
# and "its thread's time went most to" lines); the accounting's own checks on the real driver
# (kernel_ns within 2% of the device's clock, the caps, the async-launch overhead); the e2e
# programs on the real driver.
source .bundle/env.sh; export PYTHONUNBUFFERED=1; B=$PWD/.bundle
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SLUICE_LOG_LEVEL=info timeout 240 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --bench-args "--only latency" --variant-bundle $PWD/.vbundle --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "datapath rc=$?"; tail -22 $OUT/dp.txt
for f in $OUT/dp.jsonl.backend.log $OUT/dp.jsonl.variant.backend.log; do echo "== $f"; grep -E "frames took|time went most" $f | cut -c1-400; done
date
export SLUICE_LOG_LEVEL=warning
timeout 200 python3 tests/e2e/accounting.py --build $B/build --real-driver --results $OUT/acct.jsonl > $OUT/acct.txt 2>&1; echo "accounting rc=$?"; tail -15 $OUT/acct.txt
date
timeout 150 python3 tests/e2e/run.py --build $B/build --real-driver > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
date
