#!/bin/bash
# run 28, call G: the final code (06bb47f) again: the data path (3 rounds, 4 lanes beside) and
# PyTorch's train_gpt and train_cnn with their step times (2 timing pairs).
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
timeout 200 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --lanes 4 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -37 $OUT/dp.txt
timeout 330 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t --timeout 100 --steps train_gpt,train_cnn --timing-pairs 2 > $OUT/pytorch.txt 2>&1; echo "pytorch rc=$?"; tail -30 $OUT/pytorch.txt
cp $OUT/t/results.jsonl $OUT/pytorch-results.jsonl; rm -rf $OUT/t $OUT/*.backend.log
date
