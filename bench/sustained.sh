#!/usr/bin/env bash
# A sustained stream on a real kube-apiserver, side by side: pods created at a fixed rate
# on half-full nodes, each deleted a short life after its bind, scheduled by
# custom-scheduler and then by kube-scheduler v1.36.2 (each on a fresh control plane).
# Prints binds/s, create → bind percentiles, CPU seconds per 1,000 pods bound and
# resident memory over time, and writes the tables into bench/RESULTS.md. Needs KUBE_ASSETS.
# Usage: bench/sustained.sh [--rate 500 --seconds 600 --nodes 1000]
#        bench/sustained.sh --rate 50 --seconds 3600      # the hour-long run
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KUBE_ASSETS:?set KUBE_ASSETS to a folder with etcd, kube-apiserver and kube-scheduler}"
cargo build --release -p custom-scheduler -p custom-scheduler-testing --bin custom-scheduler --bin realapi >&2
rows=$(target/release/realapi sustained --scheduler target/release/custom-scheduler "$@")
table="Measured on $(date -u +%Y-%m-%d) with \`bench/sustained.sh${*:+ $*}\` on a $(nproc)-core machine (one kube-apiserver v1.36.2 and etcd 3.6 on loopback per scheduler; CPU and memory are the scheduler process's own).

${rows}"
python3 - "$table" <<'PY'
import re, sys
table = sys.argv[1].rstrip() + "\n"
text = open("bench/RESULTS.md").read()
start, end = "<!-- sustained-table-start -->", "<!-- sustained-table-end -->"
if start not in text:
    text += f"\n{start}\n{end}\n"
pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
text = pattern.sub(lambda _: f"{start}\n{table}{end}", text)
open("bench/RESULTS.md", "w").write(text)
PY
echo "bench/RESULTS.md updated" >&2
