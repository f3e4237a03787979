"""Summarises a GangTraining `simulate --output json` report (stdin) as a README table row.

Workers are named gang-G-gN-K (job G, N GPUs each); a tenth of the nodes have 8 GPUs.
"""
import json
import re
import sys

label = sys.argv[1]
d = json.load(sys.stdin)
worker = re.compile(r"/gang-(\d+)-g(\d+)-\d+$")
jobs = {}
for placed, keys in ((True, d["placements"]), (False, d["failures"])):
    for key in keys:
        m = worker.search(key)
        if m:
            job = jobs.setdefault(int(m.group(1)), {"gpus": int(m.group(2)), "placed": 0, "size": 0})
            job["size"] += 1
            job["placed"] += placed
total_gpus = 8 * ((d["nodes"] + 9) // 10)
placed_jobs = [j for j in jobs if jobs[j]["placed"] == jobs[j]["size"]]
partial = [j for j in jobs if 0 < jobs[j]["placed"] < jobs[j]["size"]]
failed = sorted(j for j in jobs if jobs[j]["placed"] == 0)
first = failed[0] if failed else None
used = lambda upto: sum(jobs[j]["gpus"] * jobs[j]["placed"] for j in jobs if upto is None or j < upto)
at_first = f"{100 * used(first) / total_gpus:.1f}%" if first is not None else "never"
print(
    f"| {label} | {d['nodes']} | {len(jobs)} | {len(placed_jobs)} | {len(partial)} | {at_first} | "
    f"{100 * used(None) / total_gpus:.1f}% | {d['podsPerSecond']:,.0f} | {d['latencyMs']['p50']:.3f} | "
    f"{d['latencyMs']['p99']:.3f} | {d.get('peakMemoryMib', 0):.0f} |"
)
