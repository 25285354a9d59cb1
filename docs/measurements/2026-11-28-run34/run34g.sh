#!/bin/bash
# run 34, call G: the latency rows of the final code (.bundle, c7201c7's) on a fresh machine, with
# 0abfcb4's code as the variant column: call E, which ran them after PyTorch's suite on the same
# machine, measured launch + sync 137-152 us where call D (on a fresh machine) had 103-111.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
rm -f .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uptime
timeout 150 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --bench-args "--only latency" --variant-bundle $PWD/.vbundle --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "datapath rc=$?"; tail -18 $OUT/dp.txt
rm -f $OUT/*.backend.log
date
