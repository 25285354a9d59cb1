#!/bin/bash
# run 31, call E: the whole data-path table of this session's code (632638d; 555fab6 changes a
# test only) with 4 lanes, 2 rounds: every row, native, Sluice and lanes4 in one run.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 300 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 4 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -34 $OUT/dp.txt
rm -f $OUT/*.backend.log
date
