#!/bin/bash
# run 30, call C: call B's PyTorch A/B in the other order (new first, then base), the same builds.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning
date; nvidia-smi --query-gpu=name --format=csv,noheader
for v in new base; do
  B=$PWD/.bundle; [ $v = base ] && B=$PWD/.bundle-base
  timeout 170 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t-$v --timeout 80 --steps train_cnn,train_gpt --timing-pairs 2 > $OUT/pytorch-$v.txt 2>&1; echo "pytorch $v rc=$?"; grep -A3 "over all runs" $OUT/pytorch-$v.txt
  rm -rf $OUT/t-$v
done
date
