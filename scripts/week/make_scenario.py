#!/usr/bin/env python3
"""Writes scripts/week/scenario.json: the week benchmark's cluster. 8 nodes of two sizes
(4 x 16 CPUs / 128 GiB, 4 x 32 CPUs / 256 GiB), 120 guests of 2-16 GiB and 1-4 vCPUs (about 230
vCPUs against 192 CPUs: a busy hour can overload a node while the cluster as a whole has room),
every guest HA-managed (Proxmox's dynamic balancer moves HA guests only), hard rules as ProxLB tags,
which flxp and ProxLB both read: four anti-affinity groups and two affinity pairs, none broken at
the start. Placed unevenly, as a cluster grown by hand is; the clock starts on a Monday.
Deterministic; rerun after editing to regenerate it."""
import json
import os
import random

GIB = 1024**3
NODES = [(f"pve{i}", 16, 128) if i <= 4 else (f"pve{i}", 32, 256) for i in range(1, 9)]
NAMES = [n for n, _, _ in NODES]
rng = random.Random(25)

rules = {}
for g, group in enumerate(("db", "web", "cache", "queue")):
    for i in range(4):
        rules[100 + 4 * g + i] = (f"plb_anti_affinity_{group}", NAMES[(2 * g + i) % 8])
for vmid, node in ((116, "pve2"), (117, "pve2"), (118, "pve7"), (119, "pve7")):
    rules[vmid] = (f"plb_affinity_{'ab'[vmid >= 118]}", node)

CAPACITY = {n: mem * GIB for n, _, mem in NODES}
committed = {n: 0 for n in NAMES}
guests = []
for vmid in range(100, 220):
    tags, node = rules.get(vmid, ("week", None))
    maxmem = rng.choice([2, 2, 4, 4, 4, 8, 8, 16]) * GIB
    if node is None:
        # Uneven: the first nodes got most guests, as on a cluster that grew one node at a time,
        # but none is committed past 80 % of its memory.
        node = NAMES[min(int(rng.expovariate(0.35)), 7)]
        while committed[node] + maxmem > 0.8 * CAPACITY[node]:
            node = NAMES[(NAMES.index(node) + 1) % 8]
    committed[node] += maxmem
    cores = rng.choice([1, 1, 2, 2, 2, 4])
    guests.append({
        "id": f"qemu/{vmid}", "type": "qemu", "vmid": vmid, "name": f"week-{vmid}",
        "node": node, "status": "running", "maxmem": maxmem, "maxcpu": cores,
        "maxdisk": 32 * GIB, "template": 0, "cpu": round(rng.uniform(0.05, 0.4), 2),
        "mem": int(maxmem * rng.uniform(0.3, 0.7)), "uptime": 86400, "disk": 0, "netin": 0,
        "netout": 0, "diskread": 0, "diskwrite": 0, "tags": tags,
    })

nodes = []
for n, cpus, mem in NODES:
    used = 4 * GIB + sum(g["mem"] for g in guests if g["node"] == n)
    nodes.append({
        "id": f"node/{n}", "type": "node", "node": n, "status": "online", "maxcpu": cpus,
        "cpu": 0.05, "maxmem": mem * GIB, "mem": min(used, mem * GIB), "maxdisk": 100 * GIB,
        "disk": 12 * GIB, "uptime": 864000, "level": "", "cgroup-mode": 2,
    })

scenario = {
    # Monday 2026-01-05 00:00 UTC: a week starts with a working day, so day 1 has office hours.
    "time": 1767571200,
    "resources": nodes + guests,
    "ha": {"resources": [{"sid": f"vm:{g['vmid']}", "state": "started"} for g in guests]},
    "sim": {"cluster_name": "week", "ha_delay_secs": 10, "seed": 25},
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenario.json")
with open(out, "w") as f:
    json.dump(scenario, f, indent=1)
    f.write("\n")
print(f"wrote {out}")
