#!/bin/bash
# run 30, call D: call C's base run again (it timed out at 170 s there), alone.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning
date; nvidia-smi --query-gpu=name --format=csv,noheader
for v in base; do
  B=$PWD/.bundle; [ $v = base ] && B=$PWD/.bundle-base
  timeout 280 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t-$v --timeout 80 --steps train_cnn,train_gpt --timing-pairs 2 > $OUT/pytorch-$v.txt 2>&1; echo "pytorch $v rc=$?"; grep -A3 "over all runs" $OUT/pytorch-$v.txt
  rm -rf $OUT/t-$v
done
date
