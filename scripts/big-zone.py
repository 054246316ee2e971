#!/usr/bin/env python3
"""big-zone.py OUT NODES GUESTS_PER_NODE: a large flxp-sim snapshot (a resources array) with uneven load and
a few rules, for timing planners at scale (BENCHMARKS.md, "Rolling maintenance dry run").

Nodes n0000.. of 512 GiB and 64 cores; node i carries 40%..160% of GUESTS_PER_NODE guests (i mod 10), each of
2, 4, 8 or 16 GiB (70% used), up to 480 GiB a node. Every 50th guest joins an anti-affinity group (groups of
three), every 97th an affinity group, every 211th is pinned to its node and the next. Seeded: the same
arguments give the same file."""
import json
import random
import sys

out, count, per_node = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(7)
GIB = 1 << 30
nodes = [f"n{i:04d}" for i in range(count)]
res = [{"id": f"node/{n}", "type": "node", "node": n, "status": "online", "maxmem": 512 * GIB,
        "mem": 8 * GIB, "maxcpu": 64, "cpu": 0.05} for n in nodes]
used = {n: 8 * GIB for n in nodes}
vmid = 100
for i, n in enumerate(nodes):
    for _ in range(int(per_node * (0.4 + 1.2 * (i % 10) / 9))):
        vmid += 1
        mem = rng.choice([2, 4, 4, 8, 16])
        if used[n] + mem * GIB > 480 * GIB:
            break
        used[n] += int(mem * 0.7 * GIB)
        tags = []
        if vmid % 50 == 0:
            tags.append(f"flxp.anti-affinity.g{vmid // 150}")
        if vmid % 97 == 0:
            tags.append(f"flxp.affinity.a{vmid // 970}")
        if vmid % 211 == 0:
            tags += [f"flxp.node.{n}", f"flxp.node.{nodes[(i + 1) % count]}"]
        guest = {"id": f"qemu/{vmid}", "type": "qemu", "node": n, "vmid": vmid, "name": f"vm{vmid}",
                 "status": "running", "maxmem": mem * GIB, "mem": int(mem * 0.7 * GIB), "maxcpu": 4,
                 "cpu": rng.random() * 0.5}
        if tags:
            guest["tags"] = ";".join(tags)
        res.append(guest)
for r in res:
    if r["type"] == "node":
        r["mem"] = used[r["node"]]
with open(out, "w") as f:
    json.dump(res, f)
print(out, count, "nodes", sum(1 for r in res if r["type"] == "qemu"), "guests")
