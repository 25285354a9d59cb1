#!/bin/bash
# run 33, call F: PyTorch's whole suite on the session's final code (every step once natively
# and once through Sluice, no timing pairs): the copies, host-to-device copies and settles that
# now wait off the call path behind busy work, under PyTorch's own programs.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
rm -f .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 500 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t --timeout 120 > $OUT/pytorch.txt 2>&1; echo "pytorch rc=$?"; cat $OUT/pytorch.txt | head -40
rm -f $OUT/t/backend.log $OUT/t/*.log
date
