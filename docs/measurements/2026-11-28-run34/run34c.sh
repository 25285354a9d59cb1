#!/bin/bash
# run 34, call C: the twenty-third session's code (sealed frames wiped on a failed tag, the
# staging budget, synchronous rectangle and array copies behind busy work off the call path).
# The e2e programs on the real driver (concurrent_threads with its rectangle threads G, H, I),
# concurrent_threads natively twice (the test's own expectations of the driver), then PyTorch's
# whole suite (every step once natively and once through Sluice, no timing pairs).
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 tests/e2e/run.py --build $B/build --real-driver > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
grep -A3 "concurrent_threads" $OUT/e2e.txt | grep -E "FAIL|PASS" | head -4
for i in 1 2; do timeout 60 python3 tests/e2e/run.py --build $B/build --native -v --program concurrent_threads > $OUT/e2e-native-ct$i.txt 2>&1; echo "native concurrent_threads rc=$?"; grep -E "PASS|FAIL" $OUT/e2e-native-ct$i.txt | head -5; done
date
timeout 330 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t --timeout 120 > $OUT/pytorch.txt 2>&1; echo "pytorch rc=$?"; head -40 $OUT/pytorch.txt
rm -f $OUT/t/backend.log $OUT/t/*.log
date
