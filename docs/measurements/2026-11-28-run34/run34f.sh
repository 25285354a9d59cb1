#!/bin/bash
# run 34, call F: train_cnn's step with the final code (.bundle, c7201c7's) and with the code
# before copies over 64 KiB took staging slots (.vbundle, 0abfcb4's backend and frontend), one
# after the other on one machine, 3 timing pairs each (native and Sluice alternating): call E
# measured CNN 1.17x in one run where call C had 0.945x.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning
rm -f .bundle/cuda.tar.xz
date
for i in 1 2; do for v in bundle vbundle; do
  B=$PWD/.$v
  timeout 110 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/$v$i --steps train_cnn --timing-pairs 2 --timeout 100 > $OUT/cnn-$v$i.txt 2>&1; echo "$v$i rc=$?"; grep -E "cnn_step_median" $OUT/cnn-$v$i.txt | tail -1
  rm -f $OUT/$v$i/*.log
done; done
date
