#!/bin/bash
# run 28, call O: A/B of a kernel launched by its function in the context (sluice) against 2d046fd
# (variant = .bundle-base, launched by the CUkernel): the latency rows (async launch among them),
# 3 rounds, twice.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
DP="python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend"
for k in 1 2; do
timeout 240 $DP --rounds 3 --variant-bundle .bundle-base --bench-args "--only latency" --out $OUT/ab$k.jsonl > $OUT/ab$k.txt 2>&1; echo "ab$k rc=$?"; grep -E "floor|launch|64 B|item" $OUT/ab$k.txt
done
rm -f $OUT/*.backend.log
date
