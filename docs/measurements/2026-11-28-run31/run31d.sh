#!/bin/bash
# run 31, call D: A/B on one machine, the previous code (1d5309a, .bundle-base, lean) against this
# session's (.bundle: short bulk in its MESSAGE's TLS record, the outbox taken along by a
# synchronous call, SLUICE_FLUSH_HOLD_US=5): the latency and first-launch rows with the previous
# code as the variant column (3 rounds), then PyTorch train_cnn and train_gpt (2 timing pairs
# each), base first, then new.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle; V=$PWD/.bundle-base
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --variant-bundle $V --rounds 3 --bench-args "--only latency,first" --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; grep -E "floor|launch|64 B|4 B|KiB|first|figure" $OUT/dp.txt | tail -12
date
for v in base new; do
  P=$B; [ $v = base ] && P=$V
  timeout 190 python3 tests/gpu/pytorch_suite.py --bundle $P --frontend $P/build/frontend --out $OUT/t-$v --timeout 80 --steps train_cnn,train_gpt --timing-pairs 2 > $OUT/pytorch-$v.txt 2>&1; echo "pytorch $v rc=$?"; grep -A3 "over all runs" $OUT/pytorch-$v.txt
  rm -rf $OUT/t-$v
  date
done
rm -f $OUT/*.backend.log
