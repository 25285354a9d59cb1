#!/bin/bash
# run 26, call G: lanes sending reply pieces without a copy (sl_server_send_lend); staging slots
# on and off in the same call; 4 and 8 lanes
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle; R=$PWD
nvidia-smi -L; date
SLUICE_LANES=4 timeout 100 python3 tests/e2e/run.py --build $B/build --real-driver --program large_copy --program lanes_copy --program mapped_memory --large-copy-mib 256 > $OUT/e2e-lanes.txt 2>&1; echo "e2e lanes rc=$?"; grep -E "^(PASS|FAIL)" $OUT/e2e-lanes.txt
for v in "4 slots" "4 noslots" "8 slots"; do set -- $v
  a=""; [ $2 = noslots ] && a="--staging-slots 0"
  timeout 150 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes $1 --backend-args "$a" --out $OUT/dp-$1-$2.jsonl > $OUT/dp-$1-$2.txt 2>&1; echo "lanes $1 $2 rc=$?"; grep -E "floor|256 MiB" $OUT/dp-$1-$2.txt
done; date
