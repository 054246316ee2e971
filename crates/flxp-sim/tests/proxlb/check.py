#!/usr/bin/env python3
"""Run ProxLB 2.x, unmodified, against a running `flxp sim` and check that its migrations land.

First a dry run (`-d -j`): ProxLB must read the cluster, plan at least one move, and change
nothing. Then a real run: every migration ProxLB starts (live VM migrations, a container restart
migration, an HA-managed VM through `hamigrate`) must end well as ProxLB follows it, and the
simulator must show each guest on the node ProxLB chose. Exits 0 when every check passed.

    check.py --python VENV/bin/python --host 127.0.0.1:8006 --token 'root@pam!check=<uuid>'
"""

import argparse
import json
import re
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

FAILURES = []


def check(cond, what):
    """Record a failed expectation instead of stopping at the first one."""
    print(f"  {'ok  ' if cond else 'FAIL'}  {what}")
    if not cond:
        FAILURES.append(what)
    return cond


def api(args, path):
    """GET an API path from the simulator with the token; returns `data`."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(f"https://{args.host}/api2/json{path}")
    req.add_header("Authorization", f"PVEAPIToken={args.token}")
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        return json.load(resp)["data"]


def placement(args):
    """vmid -> node of every guest, as the simulator sees it."""
    return {r["vmid"]: r["node"] for r in api(args, "/cluster/resources?type=vm")}


def config(args, directory):
    user, rest = args.token.split("!", 1)
    name, secret = rest.rsplit("=", 1)
    path = f"{directory}/proxlb.yaml"
    with open(path, "w") as f:
        f.write(f"""proxmox_api:
  hosts: ['{args.host}']
  user: {user}
  token_id: {name}
  token_secret: {secret}
  ssl_verification: false
  timeout: 10
proxmox_cluster:
  maintenance_nodes: []
  ignore_nodes: []
balancing:
  enable: true
  parallel: false
  live: true
  # The scenario has no storage entries: its disks are on the simulator's default shared
  # storage, so live migration needs no local-disk copy.
  with_local_disks: false
  balance_types: ['vm', 'ct']
  max_job_validation: 600
  balanciness: 5
  method: memory
  mode: used
service:
  daemon: false
  log_level: INFO
""")
    return path


def proxlb(args, cfg, *flags):
    """Runs ProxLB once; returns its combined output."""
    run = subprocess.run([args.python, "-m", "proxlb", "-c", cfg, *flags],
                         capture_output=True, text=True, timeout=args.timeout)
    out = run.stdout + run.stderr
    check(run.returncode == 0, f"proxlb {' '.join(flags) or '(real)'} exits 0 (got {run.returncode})")
    return out


def planned_moves(out):
    """vmid -> target node from the JSON that `-j` prints (guests whose target differs)."""
    start, end = out.find("\n{"), out.rfind("\n}")
    if start < 0 or end < 0:
        return {}
    data = json.loads(out[start + 1:end + 2])
    return {g["id"]: g["node_target"] for g in data["guests"].values()
            if g["node_target"] != g["node_current"]}


def started_moves(out, names):
    """vmid -> target node from the migrations ProxLB's log says it started."""
    moves = {}
    for m in re.finditer(r"Starting to migrate (?:VM|CT) guest (\S+) from (\S+) to (\S+)\.", out):
        moves[names[m.group(1)]] = m.group(3)
    return moves


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--timeout", type=int, default=300)
    args = ap.parse_args()

    before = placement(args)
    names = {r["name"]: r["vmid"] for r in api(args, "/cluster/resources?type=vm")}
    ha = {int(r["sid"].split(":")[1]) for r in api(args, "/cluster/ha/resources")}
    with tempfile.TemporaryDirectory() as d:
        cfg = config(args, d)

        print("### dry run")
        out = proxlb(args, cfg, "-d", "-j")
        plan = planned_moves(out)
        check(len(plan) > 0, f"the dry run plans moves: {plan}")
        check(placement(args) == before, "the dry run moves nothing")
        tasks = [t for t in api(args, "/cluster/tasks") if t["type"].endswith("migrate")]
        check(not tasks, f"the dry run starts no migration task: {tasks}")

        print("### real run")
        out = proxlb(args, cfg)
        moves = started_moves(out, names)
        check(len(moves) > 0, f"ProxLB starts migrations: {moves}")
        check(any(v in ha for v in moves), f"one of them is an HA-managed guest {sorted(ha)}")
        check(any(before[v] != t and v not in ha for v, t in moves.items()),
              "and others are not")
        for bad in ("CRITICAL", "did not complete successfully", "Traceback"):
            lines = [line for line in out.splitlines() if bad in line]
            check(not lines, f"no '{bad}' in ProxLB's output: {lines[:3]}")
        # HA migrations finish after the HA manager acted; ProxLB waited for them already.
        deadline = time.time() + 30
        while time.time() < deadline and any(placement(args)[v] != t for v, t in moves.items()):
            time.sleep(0.5)
        after = placement(args)
        for vmid, target in sorted(moves.items()):
            check(after[vmid] == target, f"guest {vmid} landed on {target} (is on {after[vmid]})")
        failed = [t["upid"] for t in api(args, "/cluster/tasks")
                  if t.get("status") not in (None, "OK")]
        check(not failed, f"no task failed: {failed}")

    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
