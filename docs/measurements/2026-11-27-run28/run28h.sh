#!/bin/bash
# run 28, call H: A/B of streams kept known idle across another stream's work (sluice) against
# 06bb47f (variant = .bundle-base): the head-of-line rows and the latency rows, 3 rounds, twice.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
DP="python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend"
for k in 1 2; do
timeout 240 $DP --rounds 3 --variant-bundle .bundle-base --bench-args "--only latency,hol" --out $OUT/ab$k.jsonl > $OUT/ab$k.txt 2>&1; echo "ab$k rc=$?"; grep -E "floor|launch|64 B|item|HOL" $OUT/ab$k.txt
done
rm -f $OUT/*.backend.log
date
