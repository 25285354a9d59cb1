#!/bin/bash
# run 28, call J: A/B of a launch joined to the synchronizing call that follows it (sluice) against
# 73990d5 (variant = .bundle-base): the latency, first-launch and head-of-line rows, 3 rounds, twice.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
DP="python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend"
for k in 1 2; do
timeout 240 $DP --rounds 3 --variant-bundle .bundle-base --bench-args "--only latency,first,hol" --out $OUT/ab$k.jsonl > $OUT/ab$k.txt 2>&1; echo "ab$k rc=$?"; grep -E "floor|launch|64 B|item|HOL|first" $OUT/ab$k.txt
done
rm -f $OUT/*.backend.log
date
