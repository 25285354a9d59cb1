#!/bin/bash
# run 34, call E: the session's final code (c7201c7's; .bundle of call D). PyTorch's whole suite
# (every step once natively and once through Sluice, no timing pairs: mid-size copies now go
# through the staging slots), then the whole data-path table with 4 lanes, 2 rounds.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 320 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t --timeout 120 > $OUT/pytorch.txt 2>&1; echo "pytorch rc=$?"; head -30 $OUT/pytorch.txt
rm -f $OUT/t/backend.log $OUT/t/*.log
date
timeout 230 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 4 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "datapath rc=$?"; tail -32 $OUT/dp.txt
rm -f $OUT/*.backend.log
date
