#!/bin/bash
# run 33, call C: synchronous host-to-device copies behind busy work off the call path too
# (concurrent_threads' thread E: a cuMemcpyHtoD behind a kernel on the legacy stream). The e2e
# programs on the real driver, concurrent_threads natively, then the latency and head-of-line
# rows against the previous build (.vbundle) twice.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 python3 tests/e2e/run.py --build $B/build --real-driver > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
timeout 60 python3 tests/e2e/run.py --build $B/build --native -v --program concurrent_threads > $OUT/e2e-native-ct.txt 2>&1; echo "native concurrent_threads rc=$?"; grep -E "PASS|FAIL" $OUT/e2e-native-ct.txt | head -5
date
for i in 1 2; do
  timeout 150 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --variant-bundle $PWD/.vbundle --bench-args "--only latency,hol" --out $OUT/dp$i.jsonl > $OUT/dp$i.txt 2>&1; echo "datapath $i rc=$?"; grep -E "floor|launch|HtoD|item|HOL" $OUT/dp$i.txt
done
date
rm -f $OUT/*.backend.log
