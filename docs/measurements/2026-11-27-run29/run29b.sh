#!/bin/bash
# run 29, call B: sealed bulk on the lanes (and the guest's heap kept), thread by thread
# (bulkprof.py): native, one stream, 4 lanes sealed / unsealed, 8 lanes sealed; then the
# data-path bench's copies with 4 lanes (2 rounds).
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date; lscpu | grep -E "Model name|Socket|Thread|Core"
LANES="1 4 4u 8" timeout 300 python3 .gpu/bulkprof.py > /dev/null 2>$OUT/err.txt; echo "rc=$?"
grep -E "^==|all threads|ZMQbg.*minflt +[0-9]{4,}" $OUT/bulkprof.txt | head -80
timeout 200 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 4 --bench-args "--only copies" --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -15 $OUT/dp.txt
date
