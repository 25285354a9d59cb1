#!/usr/bin/env bash
# Creates Sluice GPU flavors with the openstack CLI (run with admin credentials loaded).
# Each flavor asks Placement for one CUSTOM_GPU_REMOTE_SLOT on a host with the
# CUSTOM_GPU_REMOTING trait, and carries its SLA tier in the namespaced key sluice:sla.
# Only namespaced extra specs are ever set: an un-namespaced key would make
# AggregateInstanceExtraSpecsFilter reject every host.
#
# usage: bootstrap-flavors.sh [--dry-run] [--prefix g1] [--tiers bronze,silver,gold]
#                             [--ram MB] [--vcpus N] [--disk GB] [--private]
# Creates PREFIX.TIER for each tier (e.g. g1.gold). --dry-run prints the commands only.
set -euo pipefail

dry_run=0
prefix=g1
tiers=bronze,silver,gold
ram=8192
vcpus=4
disk=40
public=--public

die() { echo "bootstrap-flavors: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --prefix) prefix=${2:?--prefix needs a value}; shift ;;
    --tiers) tiers=${2:?--tiers needs a value}; shift ;;
    --ram) ram=${2:?--ram needs a value}; shift ;;
    --vcpus) vcpus=${2:?--vcpus needs a value}; shift ;;
    --disk) disk=${2:?--disk needs a value}; shift ;;
    --private) public=--private ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) die "unknown argument $1" ;;
  esac
  shift
done

[[ $prefix =~ ^[a-z][a-z0-9-]{0,31}$ ]] || die "--prefix '$prefix': lower-case letters, digits, '-'"
for n in "$ram" "$vcpus" "$disk"; do
  [[ $n =~ ^[0-9]{1,7}$ ]] || die "--ram, --vcpus and --disk take whole numbers ('$n')"
done
[ "$ram" -ge 64 ] && [ "$vcpus" -ge 1 ] || die "--ram must be >= 64 and --vcpus >= 1"

IFS=, read -r -a tier_list <<<"$tiers"
[ ${#tier_list[@]} -gt 0 ] || die "--tiers is empty"
for t in "${tier_list[@]}"; do
  # tier names end up in sluice:sla=<tier>, which the agent's flavor policy table resolves
  [[ $t =~ ^[a-z][a-z0-9_-]{0,31}$ ]] || die "tier '$t': lower-case letter first, then [a-z0-9_-], at most 32"
done

# The only extra-spec namespaces this script may write.
allowed_key() {
  case "$1" in
    resources:CUSTOM_GPU_REMOTE_SLOT|trait:CUSTOM_GPU_REMOTING|sluice:*) return 0 ;;
    *) return 1 ;;
  esac
}

run() {
  if [ "$dry_run" -eq 1 ]; then
    printf '%q ' "$@"; echo
  else
    "$@"
  fi
}

command -v openstack >/dev/null 2>&1 || [ "$dry_run" -eq 1 ] || die "the openstack CLI is not installed"

for t in "${tier_list[@]}"; do
  name="$prefix.$t"
  props=("resources:CUSTOM_GPU_REMOTE_SLOT=1" "trait:CUSTOM_GPU_REMOTING=required" "sluice:sla=$t")
  args=()
  for p in "${props[@]}"; do
    allowed_key "${p%%=*}" || die "refusing un-namespaced or foreign extra spec ${p%%=*}"
    args+=(--property "$p")
  done
  if [ "$dry_run" -eq 0 ] && openstack flavor show "$name" >/dev/null 2>&1; then
    echo "bootstrap-flavors: $name exists; updating its extra specs"
    run openstack flavor set "${args[@]}" "$name"
  else
    run openstack flavor create "$public" --ram "$ram" --vcpus "$vcpus" --disk "$disk" "${args[@]}" "$name"
  fi
done
