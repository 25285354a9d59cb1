#!/bin/bash
# run 34, call B: what the GPU-time accounting costs the data path's latency rows. The same build
# (b4f6e17's backend and frontend) through two backends in the same rounds: --measure events
# (the default: the "sluice" column) and --measure none (the "variant" column); then the
# accounting's own checks on the real driver at the default log level (gpu_time, quota, the
# async-launch overhead against --measure none: goal 3%).
source .bundle/env.sh; export PYTHONUNBUFFERED=1; B=$PWD/.bundle
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SLUICE_LOG_LEVEL=info timeout 240 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --bench-args "--only latency" --variant-bundle $B --variant-backend-args "--measure none" --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "datapath rc=$?"; tail -14 $OUT/dp.txt
for f in $OUT/dp.jsonl.backend.log $OUT/dp.jsonl.variant.backend.log; do echo "== $f"; grep -E "frames took|time went most" $f | cut -c1-300; done
date
timeout 200 python3 tests/e2e/accounting.py --build $B/build --real-driver --part gpu_time --part quota --part overhead --results $OUT/acct.jsonl > $OUT/acct.txt 2>&1; echo "accounting rc=$?"; grep -E "^(PASS|FAIL)|overhead|off by|FAIL:" $OUT/acct.txt
date
