#!/bin/bash
# run 29, call C: is the machine's CPU the limit? bulkprof with the machine's /proc/stat per
# phase (busy, softirq, idle cores), the CPU's AES features and OpenSSL's AES-GCM rate on 256 KiB.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning
date; grep -o -w -E "aes|vaes|vpclmulqdq|avx2|avx512f|pclmulqdq" /proc/cpuinfo | sort | uniq -c
openssl speed -evp aes-128-gcm -bytes 262144 -seconds 2 2>/dev/null | tail -2

LANES="4 4u 8" timeout 300 python3 .gpu/bulkprof.py > /dev/null 2>$OUT/err.txt; echo "rc=$?"
grep -E "^==|all threads" $OUT/bulkprof.txt
date
