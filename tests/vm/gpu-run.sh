#!/usr/bin/env bash
# gpu-run.sh: the guest VM on the GPU machine (docs/vm-testing.md, "On the GPU machine").
# Prepared here by tests/vm/gpu-pack (two carries: .vmgpu1, .vmgpu2), run there in two calls to
# one warm machine:
#   tests/vm/gpu-run.sh check            carry .vmgpu1: QEMU, the host's programs; checks them
#   tests/vm/gpu-run.sh run [OPTIONS]    carry .vmgpu2: the guest; boots it, runs everything,
#                                        writes the results under $OUT (tests/vm/gpu_run.py)
# OPTIONS go to tests/vm/gpu_run.py (--programs, --net auto|tap|user, --smp, --memory, ...).
set -euo pipefail
cd "$(dirname "$0")/../.."
die() { echo "gpu-run: $*" >&2; exit 1; }
case ${1:-} in
  check)
    [ -f .vmgpu1/qemu/env.sh ] || die ".vmgpu1 is missing: carry it (tests/vm/gpu-pack makes it)"
    # shellcheck disable=SC1091
    (source .vmgpu1/qemu/env.sh && qemu-system-x86_64 --version | head -n1)
    LD_LIBRARY_PATH=.vmgpu1/host/lib ldd .vmgpu1/host/bin/sluice-backend | grep -q "not found" &&
      die "sluice-backend lacks libraries: $(LD_LIBRARY_PATH=.vmgpu1/host/lib ldd .vmgpu1/host/bin/sluice-backend | grep 'not found')"
    nvidia-smi -L || die "no NVIDIA GPU here"
    echo "gpu-run: .vmgpu1 is in place; now: tests/vm/gpu-run.sh run (carry .vmgpu2)" ;;
  run)
    shift
    [ -f .vmgpu1/qemu/env.sh ] || die ".vmgpu1 is missing: run 'check' with it carried first, on this warm machine"
    [ -f .vmgpu2/guest.tar.xz ] || die ".vmgpu2 is missing: carry it"
    PYTHONUNBUFFERED=1 exec python3 tests/vm/gpu_run.py "$@" ;;
  *) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
