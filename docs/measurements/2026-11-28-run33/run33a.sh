#!/bin/bash
# run 33, call A: copies behind busy work off the call path, a destroyed event's waits kept (the
# twenty-second session). The e2e programs on the real driver (concurrent_threads: two threads'
# device-to-host copies behind another thread's 1.5 s kernel, and destroying a polled event, must
# not hold the main thread's calls), concurrent_threads natively (the test's own expectations),
# then the whole data-path table, 4 lanes, with the previous build (.vbundle: the .bundle of run
# 32 call F, 08b81f5's tree) as the variant column, same machine, same rounds.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 python3 tests/e2e/run.py --build $B/build --real-driver > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
timeout 60 python3 tests/e2e/run.py --build $B/build --native -v --program concurrent_threads > $OUT/e2e-native-ct.txt 2>&1; echo "native concurrent_threads rc=$?"; grep -E "PASS|FAIL" $OUT/e2e-native-ct.txt | head -5
date
timeout 330 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --lanes 4 --variant-bundle $PWD/.vbundle --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "datapath rc=$?"; cat $OUT/dp.txt | tail -40
date
rm -f $OUT/*.backend.log
