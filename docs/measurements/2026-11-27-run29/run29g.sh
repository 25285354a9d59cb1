#!/bin/bash
# run 29, call G: the final code (sealed lanes, 1 MiB lane frames): the data-path table with 4
# lanes beside (3 rounds), bulkprof (4 and 8 lanes), the e2e programs on the real driver with
# 4 lanes.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
timeout 260 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --lanes 4 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -22 $OUT/dp.txt
LANES="4 8" timeout 100 python3 .gpu/bulkprof.py > /dev/null 2>$OUT/err.txt; echo "rc=$?"
grep -E "^==|large copies" $OUT/bulkprof.txt | cut -c1-200
SLUICE_LANES=4 timeout 200 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e-lanes4.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL|passed|failed" $OUT/e2e-lanes4.txt | tail -8
rm -f $OUT/*.backend.log
date
