#!/usr/bin/env bash
# Side-by-side on a real kube-apiserver: the same backlog drained by custom-scheduler, by
# kube-scheduler v1.36.2 (a profile named custom-scheduler) and by a null binder that binds
# round-robin without scheduling (the ceiling the API server allows), all at client QPS
# 5000. Writes the table into bench/RESULTS.md. Needs KUBE_ASSETS (etcd, kube-apiserver,
# kube-scheduler). Usage: bench/realapi.sh [--sizes 500x1000,5000x5000]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KUBE_ASSETS:?set KUBE_ASSETS to a folder with etcd, kube-apiserver and kube-scheduler}"
cargo build --release -p custom-scheduler -p custom-scheduler-testing --bin custom-scheduler --bin realapi >&2
rows=$(target/release/realapi compare --scheduler target/release/custom-scheduler "$@")
table="Measured on $(date -u +%Y-%m-%d) with \`bench/realapi.sh${*:+ $*}\` on a $(nproc)-core machine: one kube-apiserver v1.36.2 and etcd 3.6 on loopback per size, the backlog created before each scheduler starts, times from the scheduler's process start as seen by a watch.

${rows}"
python3 - "$table" <<'PY'
import re, sys
table = sys.argv[1].rstrip() + "\n"
text = open("bench/RESULTS.md").read()
start, end = "<!-- realapi-table-start -->", "<!-- realapi-table-end -->"
if start not in text:
    text += f"\n{start}\n{end}\n"
pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
text = pattern.sub(lambda _: f"{start}\n{table}{end}", text)
open("bench/RESULTS.md", "w").write(text)
PY
echo "bench/RESULTS.md updated" >&2
