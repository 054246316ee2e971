#!/usr/bin/env python3
"""Writes scripts/soak/scenario.json: 6 nodes, 60 guests with hard rules none of which is broken
at the start, a few HA guests. Deterministic; rerun after editing to regenerate the scenario."""
import json
import os
import random

GIB = 1024**3
NODES = [f"pve{i}" for i in range(1, 7)]
rng = random.Random(10)

# Hard rules (tags) per vmid. HA guests carry none: the HA manager moves them by its own rules.
RULES = {}
for i, vmid in enumerate(range(100, 104)):       # anti-affinity db: 4 members, one per node
    RULES[vmid] = ("flxp.anti-affinity.db", NODES[i])
for i, vmid in enumerate(range(104, 107)):       # anti-affinity web: 3 members
    RULES[vmid] = ("flxp.anti-affinity.web", NODES[i + 3])
for vmid in (107, 108):                          # affinity pair a, together on pve1
    RULES[vmid] = ("flxp.affinity.a", "pve1")
for vmid in (109, 110):                          # affinity pair b, together on pve4
    RULES[vmid] = ("flxp.affinity.b", "pve4")
for vmid in (111, 112, 113):                     # pinned to pve1 or pve2
    RULES[vmid] = ("flxp.node.pve1;flxp.node.pve2", "pve2")
for vmid in (114, 115):                          # pinned to pve5 or pve6
    RULES[vmid] = ("flxp.node.pve5;flxp.node.pve6", "pve5")
RULES[116] = ("flxp.anti-affinity.db;flxp.node.pve5;flxp.node.pve6", "pve5")  # db too
HA = [150, 151, 152, 153]

guests = []
for vmid in range(100, 160):
    tags, node = RULES.get(vmid, ("soak", None))
    if node is None:
        node = NODES[vmid % len(NODES)]
    maxmem = rng.choice([2, 3, 4]) * GIB
    mem = int(maxmem * rng.uniform(0.3, 0.8))
    guests.append({
        "id": f"qemu/{vmid}", "type": "qemu", "vmid": vmid, "name": f"soak-{vmid}",
        "node": node, "status": "running", "maxmem": maxmem, "maxcpu": 2,
        "maxdisk": 32 * GIB, "template": 0, "cpu": round(rng.uniform(0.05, 0.5), 2),
        "mem": mem, "uptime": 3600, "disk": 0, "netin": 0, "netout": 0,
        "diskread": 0, "diskwrite": 0, "tags": tags if tags != "soak" else "soak",
    })

nodes = []
for n in NODES:
    used = 4 * GIB + sum(g["mem"] for g in guests if g["node"] == n)
    nodes.append({
        "id": f"node/{n}", "type": "node", "node": n, "status": "online", "maxcpu": 16,
        "cpu": 0.1, "maxmem": 64 * GIB, "mem": used, "maxdisk": 100 * GIB,
        "disk": 12 * GIB, "uptime": 864000, "level": "", "cgroup-mode": 2,
    })

scenario = {
    "resources": nodes + guests,
    "ha": {"resources": [{"sid": f"vm:{v}", "state": "started"} for v in HA]},
    "sim": {
        "cluster_name": "soak",
        # Fast live migrations (the simulator's minimum is 1 s) keep the soak's pace up.
        "migration_bandwidth": 16 * GIB,
        "ha_delay_secs": 1,
        "ha_fence_delay_secs": 600,
        "seed": 10,
    },
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenario.json")
with open(out, "w") as f:
    json.dump(scenario, f, indent=1)
    f.write("\n")
print(f"wrote {out}")
