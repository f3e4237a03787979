#!/usr/bin/env bash
# The same stream of rack-constrained GPU Jobs under the real Kueue v0.17.0, with
# custom-scheduler's placement admission check and without it (quota alone), each on a
# fresh kube-apiserver v1.36.2 with kube-controller-manager's Job controller. Writes the
# table into bench/RESULTS.md. Needs KUBE_ASSETS and KUEUE_BIN (.ci/install-tools).
# Usage: bench/kueue.sh [--jobs 150 --interval-ms 1000 --window 300 --seed 1 ...]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KUBE_ASSETS:?set KUBE_ASSETS to a folder with etcd, kube-apiserver and kube-controller-manager}"
: "${KUEUE_BIN:?set KUEUE_BIN to the Kueue manager .ci/install-tools builds}"
cargo build --release -p custom-scheduler -p custom-scheduler-testing --bin custom-scheduler --bin realapi >&2
rows=$(target/release/realapi kueue-stream --scheduler target/release/custom-scheduler --kueue "$KUEUE_BIN" "$@")
table="Measured on $(date -u +%Y-%m-%d) with \`bench/kueue.sh${*:+ $*}\` on a $(nproc)-core machine: 64 nodes of 8 GPUs in 8 racks, Jobs of 2 to 16 pods of 4 GPUs (8 to 64 GPUs) each needing one rack, one created a second, each running 20 to 60 s once all its pods are bound (the harness plays the kubelet), watched for 300 s; a ClusterQueue whose GPU quota is the cluster's 512.

${rows}"
python3 - "$table" <<'PY'
import re, sys
table = sys.argv[1].rstrip() + "\n"
text = open("bench/RESULTS.md").read()
start, end = "<!-- kueue-table-start -->", "<!-- kueue-table-end -->"
if start not in text:
    text += f"\n## Under Kueue: the placement admission check against quota alone\n\n{start}\n{end}\n"
pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
text = pattern.sub(lambda _: f"{start}\n{table}{end}", text)
open("bench/RESULTS.md", "w").write(text)
PY
echo "bench/RESULTS.md updated" >&2
