#!/bin/bash
# run 32, call F: the final code (the load's helper shared by both loads): the e2e programs on the
# real driver, then PyTorch train_cnn and train_gpt (2 timing pairs each) with the load without a
# reply (SLUICE_LOAD_AS=1, the default) and without (0), same build, same machine.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 tests/e2e/run.py --build $B/build --real-driver > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
date
for a in 0 1; do
  SLUICE_LOAD_AS=$a timeout 200 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t-as$a --timeout 80 --steps train_cnn,train_gpt --timing-pairs 2 > $OUT/pytorch-as$a.txt 2>&1; echo "pytorch load_as=$a rc=$?"; grep -A3 "over all runs" $OUT/pytorch-as$a.txt
  rm -rf $OUT/t-as$a
  date
done
rm -f $OUT/*.backend.log
