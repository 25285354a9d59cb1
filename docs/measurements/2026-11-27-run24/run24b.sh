#!/bin/bash
# run 24, call B: the merged build of the twelfth session (shareable IPC, lanes, soak) on the GPU
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle; R=$PWD
nvidia-smi -L; date
timeout 100 python3 tests/e2e/run.py --build $B/build --real-driver -v --program shareable_ipc --program ipc --program vmm --program large_copy --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^(PASS|FAIL)" $OUT/e2e.txt
SLUICE_LANES=4 timeout 100 python3 tests/e2e/run.py --build $B/build --real-driver --program large_copy --large-copy-mib 256 > $OUT/e2e-lanes.txt 2>&1; echo "e2e lanes rc=$?"; grep -E "^(PASS|FAIL)" $OUT/e2e-lanes.txt
timeout 70 python3 tests/e2e/run.py --build $B/build --real-driver --ipc-attacks > $OUT/ipc-attacks.txt 2>&1; echo "attacks rc=$?"; tail -3 $OUT/ipc-attacks.txt; date
timeout 150 python3 tests/gpu/run_samples.py --bin /tmp/cs/cuda-samples/build/Samples --args /tmp/cs/cuda-samples/test_args.json --bundle $B --frontend $B/build/frontend --out $OUT/samples.jsonl --timeout 30 --only simpleIPC,streamOrderedAllocationIPC,memMapIPCDrv,nvJPEG,ptxjit > $OUT/samples.txt 2>&1; echo "samples rc=$?"; grep -E "native=|passes" $OUT/samples.txt; date
J=$(find /tmp/cs/cuda-samples/build/Samples -name nvJPEG -type f -executable | head -1)
( cd $(dirname $J) && timeout 40 python3 $R/tests/gpu/through_sluice.py --bundle $B --frontend $B/build/frontend --log-level debug --backend-log $OUT/nvjpeg-backend.log -- $J > $OUT/nvjpeg.out 2>&1; echo "nvjpeg rc=$?" ); tail -c 3000 $OUT/nvjpeg.out | tail -15
for n in 1 4; do SLUICE_LANES=$n timeout 100 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --out $OUT/datapath-lanes$n.jsonl > $OUT/datapath-lanes$n.txt 2>&1; echo "lanes $n rc=$?"; grep -E "floor|256 MiB|HOL|launch \+|item|first" $OUT/datapath-lanes$n.txt; done; date
