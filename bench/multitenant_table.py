"""Formats two `simulate --workload MultiTenantGPU --output json` reports (quota tree,
then no quotas) as the README's MultiTenantGPU table."""
import json
import sys


def cells(path):
    d = json.load(open(path))
    w = d["workload"]
    teams = w["teams"]
    worst = max(teams, key=lambda t: teams[t]["largestGapGpus"])
    longest = max(teams, key=lambda t: teams[t]["longestOverTwentiethMinutes"])
    wait = w["guaranteedWaitMinutes"]
    victims = w["victimsPerReclaim"]
    lat = d["latencyMs"]
    return {
        "alloc": f"{w['allocatedMeanPercent']:.1f}% / {w['allocatedMinPercent']:.1f}%",
        "gap": f"{teams[worst]['largestGapGpus']:,} ({worst})",
        "longest": f"{teams[longest]['longestOverTwentiethMinutes']} min ({longest})",
        "wait": f"{wait['p50']:.0f} / {wait['p99']:.0f} min",
        "reclaims": f"{w['reclaims']}; {victims['mean']:.2f} / {victims['max']}" if w["reclaims"] else "0",
        "fewest": f"{victims.get('fewestMean', 0):.2f}; {victims.get('moreThanFewest', 0)} of {victims.get('measured', 0)}"
        if w["reclaims"]
        else "-",
        "bad": f"{w['quotasOverMax']}; {w['gangsPlacedInPart']}",
        "speed": f"{d['scheduled']:,}; {d['podsPerSecond']:.0f}; {lat['p50']:.2f} / {lat['p99']:.2f} ms; "
        f"{d.get('peakMemoryMib') or 0:.0f} MiB",
        "pods": d["scheduled"] + d["unschedulable"],
        "gpus": w["gpus"],
    }


on, off = cells(sys.argv[1]), cells(sys.argv[2])
rows = [
    ("GPUs allocated, mean / lowest (after the first tenth)", "alloc"),
    ("largest gap of a team to its fair share (GPUs)", "gap"),
    ("longest a team stayed more than 5% of the cluster off its share", "longest"),
    ("pods of a team within its guarantee: wait p50 / p99", "wait"),
    ("reclaims; victims per reclaim mean / max", "reclaims"),
    ("fewest pods of the node that would have sufficed, mean; reclaims that took more", "fewest"),
    ("quotas over `max`; gangs placed in part", "bad"),
    ("pods bound; pods/s; p50 / p99 per attempt; peak memory", "speed"),
]
print(f"| MultiTenantGPU ({on['gpus']:,} GPUs, about {round(on['pods'], -2):,} pods) | quota tree | no quotas |")
print("|---|---:|---:|")
for label, key in rows:
    print(f"| {label} | {on[key]} | {off[key]} |")
