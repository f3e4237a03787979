"""Summarises a GangTraining or GangTrainingTopology `simulate --output json` report
(stdin) as a README table row.

Workers are named gang-G-gN-K (job G, N GPUs each). GangTraining: a tenth of the nodes
have 8 GPUs. With `--racks SIZE` (GangTrainingTopology): every node (node-I) has 8 GPUs
and is in rack I // SIZE, and the row counts the jobs placed across racks.
"""
import json
import re
import sys

label = sys.argv[1]
rack_size = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--racks" else None
d = json.load(sys.stdin)
worker = re.compile(r"/gang-(\d+)-g(\d+)-\d+$")
jobs = {}
for placed, entries in ((True, d["placements"]), (False, d["failures"])):
    for key, value in entries.items():
        m = worker.search(key)
        if m:
            job = jobs.setdefault(int(m.group(1)), {"gpus": int(m.group(2)), "placed": 0, "size": 0, "racks": set()})
            job["size"] += 1
            job["placed"] += placed
            if placed and rack_size:
                job["racks"].add(int(value.rsplit("-", 1)[1]) // rack_size)
total_gpus = 8 * d["nodes"] if rack_size else 8 * ((d["nodes"] + 9) // 10)
placed_jobs = [j for j in jobs if jobs[j]["placed"] == jobs[j]["size"]]
partial = [j for j in jobs if 0 < jobs[j]["placed"] < jobs[j]["size"]]
across = f" {sum(1 for j in jobs if len(jobs[j]['racks']) > 1)} |" if rack_size else ""
failed = sorted(j for j in jobs if jobs[j]["placed"] == 0)
first = failed[0] if failed else None
used = lambda upto: sum(jobs[j]["gpus"] * jobs[j]["placed"] for j in jobs if upto is None or j < upto)
at_first = f"{100 * used(first) / total_gpus:.1f}%" if first is not None else "never"
print(
    f"| {label} | {d['nodes']} | {len(jobs)} | {len(placed_jobs)} | {len(partial)} |{across} {at_first} | "
    f"{100 * used(None) / total_gpus:.1f}% | {d['podsPerSecond']:,.0f} | {d['latencyMs']['p50']:.3f} | "
    f"{d['latencyMs']['p99']:.3f} | {d.get('peakMemoryMib', 0):.0f} |"
)
