#!/bin/bash
# run 28, call E: A/B of the guest polling for the sender thread's send to end before it sleeps
# (sluice) against sleeping at once (variant = .bundle-base, the same build without it): the
# latency rows, 3 rounds, twice; then the whole data path.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
DP="python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend"
for k in 1 2; do
timeout 200 $DP --rounds 3 --variant-bundle .bundle-base --bench-args "--only latency,first" --out $OUT/lat$k.jsonl > $OUT/lat$k.txt 2>&1; echo "lat$k rc=$?"; grep -E "floor|first|launch|64 B|item|DtoH" $OUT/lat$k.txt
done
timeout 400 $DP --rounds 3 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -37 $OUT/dp.txt
cd $OUT && rm -f *.backend.log
date
