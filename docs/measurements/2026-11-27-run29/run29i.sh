#!/bin/bash
# run 29, call I: sealed bulk on the direct channel too (bulk segments of 64 KiB or more): the
# data-path table with 4 lanes (3 rounds); the copies with SLUICE_SEALED_BULK=0 (2 rounds);
# bulkprof one stream sealed / not, 4 lanes.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
timeout 260 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --lanes 4 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -32 $OUT/dp.txt
SLUICE_SEALED_BULK=0 timeout 120 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 4 --bench-args "--only copies" --out $OUT/dp-unsealed.jsonl > $OUT/dp-unsealed.txt 2>&1; echo "dp0 rc=$?"; tail -8 $OUT/dp-unsealed.txt
LANES="1 1u 4" timeout 100 python3 .gpu/bulkprof.py > /dev/null 2>$OUT/err.txt; echo "rc=$?"
grep -E "^==|large copies" $OUT/bulkprof.txt | cut -c1-200
rm -f $OUT/*.backend.log
date
