#!/bin/bash
# run 29, call H: the final code again (b101c9a; the bundle of call G): the data-path bench's
# copies with 4 lanes (3 rounds), bulkprof with 4, 8 and again 4 lanes.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
timeout 200 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --lanes 4 --bench-args "--only copies" --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -9 $OUT/dp.txt
LANES="4 8 4" timeout 100 python3 .gpu/bulkprof.py > /dev/null 2>$OUT/err.txt; echo "rc=$?"
grep -E "^==|large copies" $OUT/bulkprof.txt | cut -c1-200
rm -f $OUT/*.backend.log
date
