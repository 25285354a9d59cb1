#!/bin/bash
# run 30, call B: A/B on one machine, the session's first code (e2d147e, .bundle-base) against
# its last (a2c16ed, .bundle): PyTorch train_cnn and train_gpt (2 timing pairs each), then the
# latency and matmul rows (2 rounds each), base first, then new, then base again for matmul.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning
date; nvidia-smi --query-gpu=name --format=csv,noheader
for v in base new; do
  B=$PWD/.bundle; [ $v = base ] && B=$PWD/.bundle-base
  timeout 170 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t-$v --timeout 80 --steps train_cnn,train_gpt --timing-pairs 2 > $OUT/pytorch-$v.txt 2>&1; echo "pytorch $v rc=$?"; grep -A3 "over all runs" $OUT/pytorch-$v.txt
  rm -rf $OUT/t-$v
done
date
for v in base new base new; do
  B=$PWD/.bundle; [ $v = base ] && B=$PWD/.bundle-base
  timeout 80 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --bench-args "--only latency,matmul" --out $OUT/dp-$v.jsonl >> $OUT/dp-$v.txt 2>&1; echo "dp $v rc=$?"
  grep -E "floor|launch \+ cuStream|64 B|item|async empty launch|matmul  " $OUT/dp-$v.txt | tail -7
done
rm -f $OUT/*.backend.log
date
