#!/bin/bash
# run 18: issue 18's direct channel on the GPU (A/B in one call)
source .bundle/env.sh; export SLUICE_LOG_LEVEL=warning PYTHONUNBUFFERED=1; B=$PWD/.bundle; V=$PWD/.bundle-base
nvidia-smi -L
timeout 200 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --variant-bundle $V --rounds 3 --out $OUT/direct.jsonl > $OUT/direct.txt 2>&1; echo "datapath rc=$?"
SLUICE_DIRECT=0 timeout 130 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --out $OUT/parent.jsonl > $OUT/parent.txt 2>&1; echo "parent rc=$?"
timeout 200 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"
tail -5 $OUT/e2e.txt
