"""What scripts/soak/soak.py and scripts/week/week.py share: the hard rules read from guest tags,
the anti-affinity breaches among them, and starting and stopping `flxp sim` and other processes.

Both checkers keep to their own code, nothing of flxp's: this module is theirs alone. Python 3
standard library only.
"""
import os
import re
import signal
import subprocess
import sys
import time

# Rule kind and the tag prefixes that make one: flxp's only (the soak, which runs flxp alone).
FLXP_RULE_TAGS = (
    ("anti", ("flxp.anti-affinity.",)),
    ("aff", ("flxp.affinity.",)),
    ("pin", ("flxp.node.",)),
)


def tag_list(tags):
    """A guest's tags, as the list or the `;`, `,` or space separated string Proxmox sends."""
    if isinstance(tags, list):
        return [t for t in tags if t]
    return [t for t in re.split(r"[;, ]", tags or "") if t]


def rules_of(guests, rule_tags):
    """Hard rules from the tags of `guests` (vmid -> guest), by the prefixes of `rule_tags`:
    `{"anti": group -> vmids, "aff": group -> vmids, "pin": vmid -> nodes}`."""
    rules = {kind: {} for kind, _ in rule_tags}
    for g in guests.values():
        for t in tag_list(g.get("tags")):
            for kind, prefixes in rule_tags:
                for p in prefixes:
                    if t.startswith(p):
                        key = g["vmid"] if kind == "pin" else t[len(p):]
                        value = t[len(p):] if kind == "pin" else g["vmid"]
                        rules[kind].setdefault(key, set()).add(value)
    return rules


def anti_affinity_breaches(anti, places):
    """(group, node, vmids) for each node holding more than one guest of an anti-affinity group;
    `places` maps a running guest to the nodes it takes (two while it migrates)."""
    for group, members in anti.items():
        per_node = {}
        for vm in members:
            for p in places.get(vm, ()):
                per_node.setdefault(p, []).append(vm)
        for node, vms in per_node.items():
            if len(vms) > 1:
                yield group, node, vms


def wait_for_sim(proc, workdir, names, tries):
    """Waits, every 0.1 s at most `tries` times, until the output of `flxp sim` (`sim.out` in
    `workdir`) gives each of `names` (`base URL`, `fingerprint`); their values. Exits with the
    simulator's log (`sim.log`) when it stops or never gives them."""
    for _ in range(tries):
        with open(os.path.join(workdir, "sim.out")) as f:
            text = f.read()
        found = [re.search(rf"{name}:\s*(\S+)", text) for name in names]
        if all(found):
            return [m.group(1) for m in found]
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    with open(os.path.join(workdir, "sim.log")) as f:
        sys.stderr.write(f.read())
    raise SystemExit("flxp sim did not start")


def stop(proc, timeout):
    """Stops a process with SIGTERM, killing it when it has not ended after `timeout` seconds."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
