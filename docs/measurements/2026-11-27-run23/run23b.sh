#!/bin/bash
# run 23, call B: the data path (head-of-line rows with blocking-sync waiters) and 64 sessions
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
nvidia-smi -L; date
timeout 170 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --out $OUT/datapath.jsonl > $OUT/datapath.txt 2>&1; echo "datapath rc=$?"; tail -30 $OUT/datapath.txt; date
timeout 150 python3 tests/gpu/sharing_bench.py --bundle $B --frontend $B/build/frontend --tenants 1 --sessions 64 --seconds 20 --mix heavy=5,light=2,copy=1 --out $OUT/share.jsonl > $OUT/share.txt 2>&1; echo "share rc=$?"; grep -A12 cpu_s_by_thread $OUT/share.txt | head -12; tail -5 $OUT/share.txt; date
