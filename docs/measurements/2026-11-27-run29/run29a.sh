#!/bin/bash
# run 29, call A: where a 256 MiB copy's time goes, thread by thread (bulkprof.py), native and
# through Sluice with 1, 4 and 8 lanes.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning
date; nproc; lscpu | grep -E "Model name|Socket|Thread|NUMA node" 
LANES="1 4 8" timeout 400 python3 .gpu/bulkprof.py > /dev/null 2>$OUT/err.txt; echo "rc=$?"
cat $OUT/bulkprof.txt | head -400
date
