#!/bin/bash
# run 22, call B: timings (issue 18 data path, cache on/off; driver facts; issue 25 sharing)
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
nvidia-smi -L; date
timeout 170 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --out $OUT/cache-on.jsonl > $OUT/cache-on.txt 2>&1; echo "datapath rc=$?"; tail -30 $OUT/cache-on.txt; date
SLUICE_ALLOC_CACHE=0 timeout 130 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --out $OUT/cache-off.jsonl > $OUT/cache-off.txt 2>&1; grep -i "alloc" $OUT/cache-off.txt; date
timeout 30 $B/build/tests/bench/sluice-driver-facts > $OUT/facts-native.jsonl 2>&1
timeout 60 python3 tests/gpu/through_sluice.py --bundle $B --frontend $B/build/frontend -- $B/build/tests/bench/sluice-driver-facts > $OUT/facts-sluice.jsonl 2>&1; echo "facts rc=$?"; date
timeout 150 python3 tests/gpu/sharing_bench.py --bundle $B --frontend $B/build/frontend --tenants 1 --sessions 64 --seconds 20 --mix heavy=5,light=2,copy=1 --out $OUT/share.jsonl > $OUT/share.txt 2>&1; echo "share rc=$?"; tail -30 $OUT/share.txt; date
