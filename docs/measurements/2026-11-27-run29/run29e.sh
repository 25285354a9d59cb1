#!/bin/bash
# run 29, call E: sealed lanes + a large host-to-device copy's pieces waited for 3 calls later
# (copy.c, lanes.c defer; "4n": SLUICE_X_NODEFER=1, an ad hoc switch, not kept): bulkprof and
# the data-path bench's copies with 4 lanes (2 rounds).
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
LANES="4 4n 8 4 4n" timeout 300 python3 .gpu/bulkprof.py > /dev/null 2>$OUT/err.txt; echo "rc=$?"
grep -E "^==|all threads|large copies" $OUT/bulkprof.txt | cut -c1-260
timeout 200 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 4 --bench-args "--only copies" --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -9 $OUT/dp.txt
date
