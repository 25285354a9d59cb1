#!/bin/bash
# run 28, call C: images stored off the call path (first launch in a new module), and an A/B of
# the guest sending the first async call after a quiet link itself (sluice) against handing it to
# its sender thread (variant = .bundle-base, the same build without that change); then the
# latency rows with the accounting's timing off (--measure none), to size its share.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
timeout 100 python3 .gpu/trace28.py > $OUT/trace-run.txt 2>&1; echo "trace rc=$?"; head -30 $OUT/trace-summary.txt
xz -dc $OUT/trace-backend.log.xz | grep -E "kernels listed" | head -4
DP="python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend"
timeout 300 $DP --rounds 2 --variant-bundle .bundle-base --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -36 $OUT/dp.txt
for k in 1 2; do
timeout 200 $DP --rounds 3 --variant-bundle .bundle-base --bench-args "--only latency,first" --out $OUT/lat$k.jsonl > $OUT/lat$k.txt 2>&1; echo "lat$k rc=$?"; grep -E "floor|first|launch|64 B|item|DtoH" $OUT/lat$k.txt
done
timeout 200 $DP --rounds 3 --backend-args "--measure none" --bench-args "--only latency" --out $OUT/nomeasure.jsonl > $OUT/nomeasure.txt 2>&1; echo "measure none rc=$?"; grep -E "floor|launch|64 B|item|DtoH" $OUT/nomeasure.txt
cd $OUT && tar cJf more.tar.xz trace-first.txt trace-matmul.txt lat1.jsonl lat2.jsonl nomeasure.jsonl lat1.txt lat2.txt nomeasure.txt && rm -f trace-first.txt trace-matmul.txt lat1.jsonl lat2.jsonl nomeasure.jsonl lat1.txt lat2.txt nomeasure.txt *.backend.log
date
