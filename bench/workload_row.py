"""Formats one `simulate --output json` report (stdin) as a README table row."""
import json
import sys

name = sys.argv[1]
d = json.load(sys.stdin)
mem = d.get("peakMemoryMib")
mem_text = f"{mem:.0f}" if mem is not None else "n/a"
preemptions = len(d.get("preemptions", []))
pre_text = f"{preemptions:,} ({preemptions / d['seconds']:,.0f}/s)" if preemptions and d["seconds"] > 0 else ""
print(
    f"| {name} | {d['nodes']} | {d['scheduled'] + d['unschedulable']} | {d['scheduled']} | "
    f"{d['podsPerSecond']:,.0f} | {d['latencyMs']['p50']:.3f} | {d['latencyMs']['p99']:.3f} | {mem_text} | {pre_text} |"
)
