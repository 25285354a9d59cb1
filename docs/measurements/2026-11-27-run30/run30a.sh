#!/bin/bash
# run 30, call A: busy streams watched (StreamDone) and the lanes' waiter fix: the whole data-path
# table with 4 lanes (2 rounds); the e2e programs on the real driver; lanes_copy and busy_query
# with SLUICE_LANES=4 and SLUICE_STATS=1; PyTorch train_cnn, train_gpt, graphs (1 timing pair).
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 240 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 4 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -32 $OUT/dp.txt
date
timeout 200 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
SLUICE_LANES=4 SLUICE_STATS=1 timeout 120 python3 tests/e2e/run.py --build $B/build --real-driver --program lanes_copy --program busy_query -v > $OUT/e2e-lanes4.txt 2>&1; echo "e2e lanes4 rc=$?"; grep -E "^PASS|^FAIL|busy streams|bulk lanes carried|lanes_copy:|busy_query:" $OUT/e2e-lanes4.txt | head -12
date
timeout 200 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t --timeout 90 --steps train_cnn,train_gpt,graphs --timing-pairs 1 > $OUT/pytorch.txt 2>&1; echo "pytorch rc=$?"; tail -14 $OUT/pytorch.txt
cp $OUT/t/results.jsonl $OUT/pytorch-results.jsonl 2>/dev/null; rm -rf $OUT/t $OUT/*.backend.log
date
