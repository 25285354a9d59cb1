#!/bin/bash
# run 27, call G: the soak, 8 tenants x 8 sessions (heavy=4,copy=1,light=2,idle=1), 300 s window,
# on the build with the channel's descriptor check and the abandoned session's final record.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
nvidia-smi -L; date
timeout 560 python3 tests/gpu/soak.py --bundle $B --frontend $B/build/frontend --real-driver --tenants 8 --sessions 8 --seconds 300 --out $OUT/soak.jsonl > $OUT/soak.txt 2>&1; echo "soak rc=$?"
grep -vE "^<" $OUT/soak.txt | tail -30
date
