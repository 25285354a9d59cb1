#!/bin/bash
# run 33, call D: the final code of the session (a settle of mapped memory behind busy work no
# longer waits on the session thread: concurrent_threads' thread F). The e2e programs on the
# real driver, concurrent_threads natively, then the whole data-path table with 4 lanes (3
# rounds), and PyTorch's CNN and GPT steps (2 timing pairs).
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 python3 tests/e2e/run.py --build $B/build --real-driver > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
timeout 60 python3 tests/e2e/run.py --build $B/build --native -v --program concurrent_threads > $OUT/e2e-native-ct.txt 2>&1; echo "native concurrent_threads rc=$?"; grep -E "PASS|FAIL" $OUT/e2e-native-ct.txt | head -5
date
timeout 300 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --lanes 4 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "datapath rc=$?"; tail -36 $OUT/dp.txt
date
timeout 200 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t --timeout 80 --steps train_cnn,train_gpt --timing-pairs 2 > $OUT/pytorch.txt 2>&1; echo "pytorch rc=$?"; grep -A3 "over all runs" $OUT/pytorch.txt
rm -rf $OUT/t
date
rm -f $OUT/*.backend.log
