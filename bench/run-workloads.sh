#!/usr/bin/env bash
# Runs every scheduler_perf-style workload through `custom-scheduler simulate` (release
# build) and writes the results table into bench/RESULTS.md.
# Usage: bench/run-workloads.sh [extra simulate flags, e.g. --no-equivalence-cache]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p custom-scheduler >&2
bin=target/release/custom-scheduler
workloads=(SchedulingBasic SchedulingNodeAffinity SchedulingPodAntiAffinity SchedulingPodAffinity
           TopologySpreading PreferredTopologySpreading Unschedulable SchedulingGpu SchedulingGpuPacking
           SchedulingChurn PreemptionBasic SchedulingWithPVC SchedulingWithResourceClaimTemplate
           SchedulingWithResourceClaimTemplateToleration
           SteadyStateClusterResourceClaimTemplate/empty SteadyStateClusterResourceClaimTemplate/half
           SteadyStateClusterResourceClaimTemplate/full SteadyStateClusterResourceClaimTemplatePartitionable
           SteadyStateClusterResourceClaimTemplateConsumableCapacity ExtendedResource_25Classes)
rows=""
for w in "${workloads[@]}"; do
  echo "running $w" >&2
  rows+=$("$bin" simulate --workload "$w" --output json --seed 1 "$@" | python3 bench/workload_row.py "$w")$'\n'
done
# The same GPU workload with the gpu profile (DevicePacking) for comparison, and both
# with the GPUs published in ResourceSlices (`/dra`).
for w in SchedulingGpuPacking SchedulingGpuPacking/dra; do
  if [ "$w" != SchedulingGpuPacking ]; then
    echo "running $w" >&2
    rows+=$("$bin" simulate --workload "$w" --output json --seed 1 "$@" | python3 bench/workload_row.py "$w")$'\n'
  fi
  echo "running $w with the gpu profile" >&2
  rows+=$("$bin" simulate --workload "$w" --config deploy/examples/gpu-profile.yaml --output json --seed 1 "$@" \
    | python3 bench/workload_row.py "$w, gpu profile")$'\n'
done
cpu=$(nproc)
table="Measured on $(date -u +%Y-%m-%d) with \`bench/run-workloads.sh${*:+ $*}\` on a ${cpu}-core machine; every node is evaluated for every pod.

| workload | nodes | measured pods | scheduled | pods/s | p50 ms | p99 ms | peak MiB | preemptions |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
${rows}"
# Gang scheduling: GangTraining with the default and the gpu profile.
gang_rows=""
for w in GangTraining GangTraining/dra; do
  for profile in default gpu; do
    echo "running $w with the $profile profile" >&2
    flags=()
    [ "$profile" = gpu ] && flags=(--config deploy/examples/gpu-profile.yaml)
    gang_rows+=$("$bin" simulate --workload "$w" "${flags[@]}" --output json --seed 1 "$@" \
      | python3 bench/gang_summary.py "$w, $profile profile")$'\n'
  done
done
gang_table="| workload | nodes | jobs | jobs placed | jobs placed in part | GPUs allocated when the first job is refused | GPUs allocated at the end | pods/s | p50 ms | p99 ms | peak MiB |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${gang_rows}"
# Topology-aware gangs: GangTrainingTopology with the default and the gpu profile.
topology_rows=""
for profile in default gpu; do
  echo "running GangTrainingTopology with the $profile profile" >&2
  flags=()
  [ "$profile" = gpu ] && flags=(--config deploy/examples/gpu-profile.yaml)
  topology_rows+=$("$bin" simulate --workload GangTrainingTopology "${flags[@]}" --output json --seed 1 "$@" \
    | python3 bench/gang_summary.py "GangTrainingTopology, $profile profile" --racks 64)$'\n'
done
topology_table="| workload | nodes | jobs | jobs placed | jobs placed in part | jobs across racks | GPUs allocated when the first job is refused | GPUs allocated at the end | pods/s | p50 ms | p99 ms | peak MiB |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${topology_rows}"
# Quotas: MultiTenantGPU with the quota tree profile and without quotas.
echo "running MultiTenantGPU with and without quotas" >&2
"$bin" simulate --workload MultiTenantGPU --config deploy/examples/quota-tree-profile.yaml --output json --seed 1 "$@" >/tmp/multitenant-on.json
"$bin" simulate --workload MultiTenantGPU --output json --seed 1 "$@" >/tmp/multitenant-off.json
multitenant_table=$(python3 bench/multitenant_table.py /tmp/multitenant-on.json /tmp/multitenant-off.json)
python3 - "$table" "$gang_table" "$topology_table" "$multitenant_table" <<'PY'
import re, sys
text = open("bench/RESULTS.md").read()
for (start, end), table in zip(
    [
        ("<!-- perf-table-start -->", "<!-- perf-table-end -->"),
        ("<!-- gang-table-start -->", "<!-- gang-table-end -->"),
        ("<!-- topology-table-start -->", "<!-- topology-table-end -->"),
        ("<!-- multitenant-table-start -->", "<!-- multitenant-table-end -->"),
    ],
    sys.argv[1:],
):
    table = table.rstrip() + "\n"
    if start not in text:
        text += f"\n{start}\n{end}\n"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: f"{start}\n{table}{end}", text)
open("bench/RESULTS.md", "w").write(text)
PY
echo "bench/RESULTS.md updated" >&2
