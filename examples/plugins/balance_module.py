#!/usr/bin/env python3
"""flxp balance plugin: move running VMs from the fullest node (by memory share) to the emptiest.

Usage in flxp.toml, then `flxp balance --method drain-fullest`:

    [[plugin]]
    name = "drain-fullest"
    kind = "balance"
    command = ["/usr/bin/python3", "/etc/flxp/plugins/balance_module.py", "2"]

The argument is how many migrations to propose (default 1). flxp checks every proposal with its
own rules (capacity, affinity, pins, locks, HA, budget) on the state the earlier ones leave and
refuses unsafe ones with the reason; a plugin only proposes.
"""
import json
import sys


def main():
    request = json.load(sys.stdin)
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    nodes = [n for n in request["nodes"] if n["status"] == "online" and not n["maintenance"]]
    if len(nodes) < 2:
        json.dump({"protocol": 1, "kind": "balance", "migrations": []}, sys.stdout)
        return
    share = {n["name"]: n["memory_used"] / max(n["memory_total"], 1) for n in nodes}
    fullest = max(share, key=share.get)
    emptiest = min(share, key=share.get)
    guests = [
        g for g in request["guests"]
        if g["node"] == fullest and g["running"] and g["type"] == "qemu"
    ]
    guests.sort(key=lambda g: (g["memory"], g["vmid"]))
    migrations = [
        {"vmid": g["vmid"], "target": emptiest,
         "reason": f"{fullest} is the fullest node ({share[fullest]:.0%} memory used)"}
        for g in guests[:count]
    ]
    json.dump({"protocol": 1, "kind": "balance", "migrations": migrations}, sys.stdout)


if __name__ == "__main__":
    main()
