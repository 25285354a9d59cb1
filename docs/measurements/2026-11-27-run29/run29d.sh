#!/bin/bash
# run 29, call D: sealed lanes + a large host-to-device copy's pieces waited for once at its end
# (every call's pieces deferred; the first form of e-defer.diff, without its window of 3):
# bulkprof (4 and 8 lanes sealed, 4 lanes unsealed) and the data-path bench's copies with 4
# lanes (2 rounds).
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
LANES="4 8 4u" timeout 300 python3 .gpu/bulkprof.py > /dev/null 2>$OUT/err.txt; echo "rc=$?"
grep -E "^==|all threads" $OUT/bulkprof.txt
timeout 200 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 4 --bench-args "--only copies" --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -9 $OUT/dp.txt
date
