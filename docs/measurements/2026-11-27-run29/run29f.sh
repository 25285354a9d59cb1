#!/bin/bash
# run 29, call F: the final sealed-bulk code (no deferral) with an ad hoc switch of the channel's
# chunk size and ZeroMQ high-water mark (SLUICE_X_CHUNK, SLUICE_X_HWM: f-chunk.diff, not kept),
# 4 lanes, bulkprof: 256 KiB (the default) / 64 KiB / 1 MiB chunks; 256 KiB with HWM 256.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning
date
for cfg in "262144 64" "65536 64" "1048576 64" "262144 256" "262144 64"; do
  set -- $cfg
  echo "#### chunk $1 hwm $2" >> $OUT/bulkprof.txt
  SLUICE_X_CHUNK=$1 SLUICE_X_HWM=$2 LANES="4" timeout 100 python3 .gpu/bulkprof.py > /dev/null 2>>$OUT/err.txt; echo "rc=$?"
done
grep -E "^####|^==|all threads" $OUT/bulkprof.txt | grep -v native | cut -c1-200
date
