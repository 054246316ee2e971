#!/usr/bin/env python3
"""Replay Proxmox's HA-manager CRS test scenarios decision by decision against flxp.

Usage: scripts/crs-replay.py PVE_HA_MANAGER_CHECKOUT [--flxp PATH] [--test NAME] [--keep DIR] [-v]

PVE_HA_MANAGER_CHECKOUT is a clone of https://git.proxmox.com/?p=pve-ha-manager.git (checked against
version 5.2.0). For every `src/test/test-crs-*` scenario the script rebuilds, from the scenario's
input files and its expected log (`log.expect`), the state the HA manager saw right before each of its
scheduling decisions, writes that state as a flxp snapshot, asks the built `flxp` binary for the same
decision and compares:

- `service <sid>: re-balance selected ... node <n> for startup`, `recover service '<sid>' from fenced
  node ... to node '<n>'`, `recovering service '<sid>' ... failed, no recovery node found` and the
  `migrate|relocate service '<sid>' to node '<n>'` a node shutdown causes: `flxp place --policy
  pve-static|pve-dynamic` with the service's size (the node left offline);
- `auto rebalance - migrate <sid> to <n> (expected change for imbalance from X to Y)`: `flxp balance
  --method pve-bruteforce|pve-topsis`, the move and both imbalances to two decimals;
- a scenario with auto-rebalance on and no such line: at the end, flxp must make no move either.

It prints per scenario and in total "N of M decisions reproduced" and lists the misses. Nothing of the
scenarios is stored; the snapshots are written to a temporary directory (kept with --keep).
Python 3 standard library only.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

MIB = 1024**2
DEFAULT_NODE = {"maxcpu": 24.0, "maxmem": 131072 * MIB}
DEFAULT_STATIC = {"maxcpu": 4.0, "maxmem": 4096 * MIB}
DEFAULT_DYNAMIC = {"cpu": 2.0, "mem": 2048 * MIB}

LINE = re.compile(r"^(\w+)\s+(\d+)\s+(\S+):\s(.*)$")


def read_json(path, default):
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return default
    return json.loads(text) if text.strip() else default


def read_rules(path):
    """Parses a section-config rules file into snapshot HA rules."""
    rules = []
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        return rules
    cur = None
    for line in lines:
        if not line.strip():
            cur = None
            continue
        if not line[0].isspace():
            kind, name = line.split(":", 1)
            cur = {"rule": name.strip(), "type": kind.strip()}
            rules.append(cur)
        elif cur is not None:
            key, _, value = line.strip().partition(" ")
            cur[key] = value.strip()
    for r in rules:
        for flag in ("strict", "disable"):
            if flag in r:
                r[flag] = int(r[flag])
    return rules


class Scenario:
    """The inputs of one test directory and the state the HA manager holds while its log runs."""

    def __init__(self, path):
        self.name = os.path.basename(path)
        self.path = path
        hw = read_json(os.path.join(path, "hardware_status"), None)
        if hw is None:
            hw = {n: {} for n in ("node1", "node2", "node3")}
        self.nodes = {
            n: {
                "maxcpu": float(v.get("maxcpu", DEFAULT_NODE["maxcpu"])),
                "maxmem": int(v.get("maxmem", DEFAULT_NODE["maxmem"])),
            }
            for n, v in hw.items()
        }
        self.config = read_json(os.path.join(path, "service_config"), {})
        for sd in self.config.values():
            state = sd.get("state") or "disabled"
            sd["state"] = "started" if state == "enabled" else state
        static = read_json(os.path.join(path, "static_service_stats"), None)
        if static is None:
            static = {sid: dict(DEFAULT_STATIC) for sid in self.config}
        self.static = static
        dynamic = read_json(os.path.join(path, "dynamic_service_stats"), None)
        if dynamic is None:
            dynamic = {sid: dict(DEFAULT_DYNAMIC) for sid in static}
        self.dynamic = dynamic
        dc = read_json(os.path.join(path, "datacenter.cfg"), {})
        self.crs = dc.get("crs", {})
        self.mode = self.crs.get("ha", "basic")
        self.rules = read_rules(os.path.join(path, "rules_config"))
        # Runtime state, rebuilt from the log.
        self.node_state = {n: "unknown" for n in self.nodes}
        ms = read_json(os.path.join(path, "manager_status"), {})
        self.node_state.update(ms.get("node_status", {}))
        self.ss = {  # sid -> {state, node, target}
            sid: {k: v for k, v in sd.items() if k in ("state", "node", "target")}
            for sid, sd in ms.get("service_status", {}).items()
        }
        self.lrm_running = {}  # sid -> (node, time the LRM reported it started)
        self.crm_round = 0

    # --- log events -------------------------------------------------------------------------

    def cmd(self, now, text):
        parts = text.split()
        if len(parts) >= 4 and parts[0] == "service" and parts[2] == "add":
            state = parts[4] if len(parts) > 4 else "started"
            self.config[parts[1]] = {"node": parts[3], "state": state}
            if len(parts) > 5 and parts[5] == "1":
                # Added as already running: its node's measurements hold it.
                self.lrm_running[parts[1]] = (parts[3], now)
            self.static.setdefault(parts[1], dict(DEFAULT_STATIC))
            self.dynamic.setdefault(parts[1], dict(DEFAULT_DYNAMIC))
            return
        if len(parts) == 3 and parts[0] == "service" and parts[2] in ("started", "stopped", "disabled", "ignored"):
            if parts[1] in self.config:
                self.config[parts[1]]["state"] = parts[2]
            return
        if len(parts) == 3 and parts[0] == "service" and parts[2] == "delete":
            self.config.pop(parts[1], None)
            return
        if len(parts) >= 3 and parts[0] == "service" and parts[2] in (
            "set-static-stats",
            "set-dynamic-stats",
        ):
            sid, action, params = parts[1], parts[2], parts[3:]
            target = self.static if action == "set-static-stats" else self.dynamic
            entry = target.setdefault(sid, {})
            for key, value in zip(params[::2], params[1::2]):
                entry[key] = float(value) * MIB if key in ("maxmem", "mem") else float(value)

    def crm(self, text):
        m = re.match(r"node '(\S+)': state changed from '\S+' => '(\S+)'", text)
        if m:
            self.node_state[m.group(1)] = m.group(2)
            return
        m = re.match(r"adding new service '(\S+)' on node '(\S+)'", text)
        if m:
            sid, node = m.groups()
            state = "request_start" if self.config[sid]["state"] == "started" else "request_stop"
            self.ss[sid] = {"state": state, "node": node}
            return
        m = re.match(
            r"service '(\S+)': state changed from '\S+' to '(\S+)'(?:\s+\(node = (\S+?)(?:, target = (\S+?))?\))?$",
            text,
        )
        if m:
            sid, state, node, target = m.groups()
            sd = self.ss.setdefault(sid, {})
            sd.update({"state": state})
            if node:
                sd["node"] = node
            sd.pop("target", None)
            if target:
                sd["target"] = target
            sd.pop("running", None)
            return
        m = re.match(r"removing stale service '(\S+)'", text)
        if m:
            self.ss.pop(m.group(1), None)

    def lrm(self, node, t, text):
        m = re.match(r"service status (\S+) started", text)
        if m:
            self.lrm_running[m.group(1)] = (node, t)
            return
        m = re.match(r"service status (\S+) stopped", text)
        if m:
            self.lrm_running.pop(m.group(1), None)
            return
        m = re.match(r"service (\S+) - end (?:migrate|relocate) to node", text)
        if m:
            self.lrm_running.pop(m.group(1), None)
            return
        if text.startswith("killed by poweroff") or text.startswith("status change active => lost"):
            for sid, (n, _) in list(self.lrm_running.items()):
                if n == node:
                    self.lrm_running.pop(sid)

    def hardware(self, text):
        m = re.match(r"server '(\S+)' stopped", text)
        if m:
            for sid, (n, _) in list(self.lrm_running.items()):
                if n == m.group(1):
                    self.lrm_running.pop(sid)

    # --- the state as Proxmox's usage sees it -------------------------------------------------

    def online(self):
        return [n for n, s in sorted(self.node_state.items()) if s == "online"]

    def running_flag(self, sid, now):
        """Proxmox's `running` flag: the CRM saw the LRM's successful start in a later round."""
        sd = self.ss.get(sid, {})
        lrm = self.lrm_running.get(sid)
        if sd.get("state") != "started" or lrm is None:
            return False
        node, t = lrm
        return node == sd.get("node") and now // 20 > t // 20

    def counted(self, sid, now):
        """Where Proxmox's usage counts a service: (current node, target node, running)."""
        sd = self.ss.get(sid)
        online = set(self.online())
        if sd is None:
            return None, None, False
        state, node, target = sd.get("state"), sd.get("node"), sd.get("target")
        if state in ("stopped", "request_start"):
            return None, None, False
        cur = None
        if state in ("started", "request_stop", "fence", "freeze", "error", "recovery", "migrate", "relocate"):
            cur = node if node in online else None
        tgt = None
        if state in ("migrate", "relocate", "request_start_balance"):
            tgt = target if target in online else None
        running = (state == "started" and self.running_flag(sid, now)) or (
            state != "started" and cur is not None
        )
        if cur is None:
            cur, tgt = tgt, None
        return cur, tgt, running

    def snapshot(self, now, omit=None):
        """The flxp snapshot of the state Proxmox scores on."""
        online = set(self.online())
        dynamic = self.mode == "dynamic"
        resources = []
        node_cpu = {n: 0.0 for n in self.nodes}
        node_mem = {n: 0 for n in self.nodes}
        if dynamic:
            # Measured node usage: what the LRMs report running (Sim::Hardware get_dynamic_node_stats).
            for sid, (node, _) in self.lrm_running.items():
                if self.config.get(sid, {}).get("node") is None:
                    continue
                d = self.dynamic.get(sid, {})
                node_cpu[node] += float(d.get("cpu", 0.0))
                node_mem[node] += int(d.get("mem", 0))
        for n, hw in sorted(self.nodes.items()):
            resources.append(
                {
                    "id": f"node/{n}",
                    "type": "node",
                    "node": n,
                    "status": "online" if n in online else "offline",
                    "maxcpu": hw["maxcpu"],
                    "maxmem": hw["maxmem"],
                    "cpu": node_cpu[n] / hw["maxcpu"] if hw["maxcpu"] else 0.0,
                    "mem": node_mem[n],
                }
            )
        ha_resources, ha_status = [], []
        tags = rule_tags(self.rules)
        for sid in sorted(self.config):
            if sid == omit:
                continue
            kind, vmid = sid.split(":")
            st = self.static.get(sid)
            if st is None:
                continue  # Proxmox cannot add a service without static stats either
            cur, tgt, running = self.counted(sid, now)
            lrm = self.lrm_running.get(sid)
            sd = self.ss.get(sid, {})
            node = cur or sd.get("node") or self.config[sid]["node"]
            status = "stopped"
            cpu, mem = 0.0, 0
            ha_state = None
            if dynamic:
                if lrm is not None:
                    node = lrm[0]
                    status = "running"
                    d = self.dynamic.get(sid, {})
                    cpu = float(d.get("cpu", 0.0)) / max(float(st["maxcpu"]), 1e-9) if st["maxcpu"] else 0.0
                    mem = int(d.get("mem", 0))
                if cur is not None and not running:
                    ha_state = "starting"  # counted at its configured size on top of the measurements
                    node = cur
            else:
                if cur is not None:
                    status = "running"
            entry = {
                "id": f"{'qemu' if kind == 'vm' else 'lxc'}/{vmid}",
                "type": "qemu" if kind == "vm" else "lxc",
                "vmid": int(vmid),
                "name": sid.replace(":", "-"),
                "node": node,
                "status": status,
                "maxcpu": float(st["maxcpu"]),
                "maxmem": int(st["maxmem"]),
                "cpu": cpu,
                "mem": mem,
            }
            if tags.get(sid):
                entry["tags"] = ";".join(tags[sid])
            resources.append(entry)
            ha_resources.append({"sid": sid, "type": kind, "state": self.config[sid]["state"]})
            status_entry = {
                "id": f"service:{sid}",
                "type": "service",
                "sid": sid,
                "node": node,
                "state": ha_state or ("started" if status == "running" else "stopped"),
                "crm_state": sd.get("state", "stopped"),
            }
            if ha_state == "starting":
                status_entry["crm_state"] = "started"
            if tgt is not None:
                status_entry["target"] = tgt
            ha_status.append(status_entry)
        crs = ",".join(
            [f"ha={self.mode}"] + [f"{k}={v}" for k, v in sorted(self.crs.items()) if k != "ha"]
        )
        return {
            "resources": resources,
            "ha": {"rules": self.rules, "resources": ha_resources, "status": ha_status},
            "options": {"crs": crs},
        }


def rule_tags(rules):
    """flxp tags that say what the HA rules say, for `flxp place` of a service (which has no sid)."""
    tags = {}
    for r in rules:
        if r.get("disable"):
            continue
        members = [s.strip() for s in r.get("resources", "").split(",") if s.strip()]
        if r.get("type") == "resource-affinity":
            prefix = "flxp.affinity." if r.get("affinity") == "positive" else "flxp.anti-affinity."
            for sid in members:
                tags.setdefault(sid, []).append(prefix + r["rule"].lower())
        elif r.get("type") == "node-affinity":
            nodes = [n.split(":")[0] for n in r.get("nodes", "").split(",") if n]
            prefix = "flxp.node." if r.get("strict") else "flxp.prefer-node."
            for sid in members:
                tags.setdefault(sid, []).extend(prefix + n for n in nodes)
    return tags


DIVERGENCE = "divergence"


def documented(reasons):
    """Whether flxp refused Proxmox's node only for a guest larger than the node (GUIDE.md,
    "Deliberate divergences"): more vCPUs than its CPUs, or more memory than it has."""
    return bool(reasons) and all(r.startswith(("cpu:", "memory:")) for r in reasons)


class Runner:
    def __init__(self, flxp, keep):
        self.flxp = flxp
        self.dir = keep or tempfile.mkdtemp(prefix="crs-replay-")
        os.makedirs(self.dir, exist_ok=True)
        self.count = 0
        # ha-manager 5.2.0 judges the raw CV against a raw threshold of 0.3 (Proxmox VE 9.2
        # normalises it to 0..=1, flxp's default for the pve-* methods).
        self.config = os.path.join(self.dir, "flxp.toml")
        with open(self.config, "w") as f:
            f.write('[balance]\nmeasure = "cv-raw"\n')

    def write(self, snap):
        self.count += 1
        path = os.path.join(self.dir, f"snap-{self.count:04}.json")
        with open(path, "w") as f:
            json.dump(snap, f, indent=1)
        return path

    def run(self, args):
        p = subprocess.run([self.flxp] + args, capture_output=True, text=True)
        try:
            return json.loads(p.stdout), p.stderr
        except json.JSONDecodeError:
            return None, (p.stdout + p.stderr).strip()

    def place(self, sc, sid, now):
        """flxp's node for the service, the snapshot's path and every node's verdict."""
        snap = sc.snapshot(now, omit=sid)
        path = self.write(snap)
        st = sc.static[sid]
        policy = "pve-dynamic" if sc.mode == "dynamic" else "pve-static"
        cores = float(st["maxcpu"])
        if cores <= 0:
            # A container without a CPU limit: Proxmox counts it at the CPU count of the node it
            # lands on. flxp's --cores needs a size; on nodes of one size that count is the same.
            sizes = {sc.nodes[n]["maxcpu"] for n in sc.online()}
            if len(sizes) != 1:
                return None, f"unlimited container on nodes of different sizes ({path})", {}
            cores = sizes.pop()
        args = ["place", "--from-file", path, "--json", "--policy", policy]
        args += ["--cores", repr(cores), "--memory", str(int(st["maxmem"]))]
        for tag in rule_tags(sc.rules).get(sid, []):
            args += ["--tag", tag]
        out, err = self.run(args)
        if out is None:
            return None, f"flxp failed: {err[:200]} ({path})", {}
        verdicts = {c.get("node"): c.get("reasons") or [] for c in out.get("candidates", [])}
        return out.get("node"), path, verdicts

    def balance(self, sc, now):
        snap = sc.snapshot(now)
        path = self.write(snap)
        method = "pve-" + sc.crs.get("ha-auto-rebalance-method", "bruteforce")
        args = ["balance", "--from-file", path, "--json", "--method", method, "--config", self.config]
        out, err = self.run(args)
        if out is None:
            return None, f"flxp failed: {err[:200]} ({path})"
        return out, path


def plan_move(out):
    """(sid, target, imbalance before, after) of a balance plan's first move, or None.

    The imbalances are Proxmox's raw CV when the plan measured in it (`cv-raw`, the pve-* default),
    else None."""
    plan = out.get("plan", out)
    moves = plan.get("migrations") or []
    if not moves:
        return None
    m = moves[0]
    kind = "ct" if m.get("kind") in ("lxc", "ct") else "vm"
    raw = plan.get("measure") == "cv-raw"
    before = plan.get("imbalance_before") if raw else None
    after = plan.get("imbalance_after") if raw else None
    return f"{kind}:{m.get('vmid')}", m.get("to"), before, after


def replay(path, runner):
    sc = Scenario(path)
    results = []  # (ok, description)
    lines = open(os.path.join(path, "log.expect")).read().splitlines()
    balance_seen = False
    failed = set()
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        _, t, who, text = m.groups()
        now = int(t)
        if who == "cmdlist":
            if text.startswith("execute "):
                sc.cmd(now, text[len("execute "):])
            continue
        if who == "hardware":
            sc.hardware(text)
            continue
        node, _, role = who.partition("/")
        if role == "lrm":
            sc.lrm(node, now, text)
            continue
        if role != "crm":
            continue
        d = re.match(r"service (\S+): re-balance selected (?:new|current) node (\S+) for startup", text)
        if d is None:
            d = re.match(r"recover service '(\S+)' from fenced node '\S+' to node '(\S+)'", text)
        if d is None:
            d = re.match(r"recovering service '(\S+)' from fenced node '\S+' failed, no recovery node found()", text)
        if d is None and not re.search(r"got crm command", text):
            d = re.match(r"(?:migrate|relocate) service '(\S+)' to node '(\S+)'", text)
            if d and sc.ss.get(d.group(1), {}).get("cmd"):
                d = None
        if d and not d.group(2):
            # HA retries a failed recovery every round; the decision counts once.
            if d.group(1) in failed:
                continue
            failed.add(d.group(1))
        if d:
            sid, want = d.group(1), d.group(2) or None
            got, info, verdicts = runner.place(sc, sid, now)
            ok = got == want
            desc = f"t={now} {sid}: Proxmox {want or 'no node'}, flxp {got or 'no node'}"
            if not ok and got is None and want is not None and documented(verdicts.get(want)):
                ok = DIVERGENCE
                desc += " (documented divergence: " + "; ".join(verdicts[want]) + ")"
            results.append((ok, desc, info))
            sc.crm(text)
            continue
        c = re.match(r"got crm command: (?:migrate|relocate) (\S+) ", text)
        if c is None:
            # A positive-affinity partner HA moves along with a commanded move.
            c = re.match(r"crm command '[^']*' - (?:migrate|relocate) service '(\S+)'", text)
        if c:
            sc.ss.setdefault(c.group(1), {})["cmd"] = True
            continue
        a = re.match(
            r"auto rebalance - (?:migrate|relocate) (\S+) to (\S+) \(expected change for imbalance from ([\d.]+) to ([\d.]+)\)",
            text,
        )
        if a:
            balance_seen = True
            sid, want, before, after = a.group(1), a.group(2), a.group(3), a.group(4)
            out, info = runner.balance(sc, now)
            got = plan_move(out) if isinstance(out, dict) else None
            if got is None:
                ok = False
                desc = f"t={now} auto rebalance: Proxmox {sid}->{want} ({before}->{after}), flxp no move"
            else:
                gb = f"{got[2]:.2f}" if got[2] is not None else "?"
                ga = f"{got[3]:.2f}" if got[3] is not None else "?"
                ok = got[0] == sid and got[1] == want and gb == before and ga == after
                desc = f"t={now} auto rebalance: Proxmox {sid}->{want} ({before}->{after}), flxp {got[0]}->{got[1]} ({gb}->{ga})"
            results.append((ok, desc, info))
            continue
        sc.crm(text)
        if text.startswith("service '") and "state changed" in text:
            sid = text.split("'")[1]
            sc.ss.get(sid, {}).pop("cmd", None)
    if sc.crs.get("ha-auto-rebalance") and not balance_seen:
        out, info = runner.balance(sc, 10**9)
        got = plan_move(out) if isinstance(out, dict) else ("?", "error", None, None)
        ok = got is None
        desc = "end: Proxmox no move, flxp " + ("no move" if ok else f"{got[0]}->{got[1]}")
        results.append((ok, desc, info))
    return sc.name, results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkout", help="a pve-ha-manager checkout")
    ap.add_argument("--flxp", default=None, help="the flxp binary (default: target/debug/flxp, then PATH)")
    ap.add_argument("--test", action="append", help="only this scenario (repeatable)")
    ap.add_argument("--keep", help="write the snapshots into this directory and keep them")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every decision, not only misses")
    args = ap.parse_args()
    flxp = args.flxp
    if flxp is None:
        here = os.path.dirname(os.path.abspath(__file__))
        for cand in ("target/debug/flxp", "target/release/flxp"):
            p = os.path.join(here, "..", cand)
            if os.path.exists(p):
                flxp = p
                break
        flxp = flxp or "flxp"
    testdir = os.path.join(args.checkout, "src", "test")
    if not os.path.isdir(testdir):
        sys.exit(f"{args.checkout}: no src/test directory; pass a pve-ha-manager checkout")
    if shutil.which(flxp) is None and not os.access(flxp, os.X_OK):
        sys.exit(f"{flxp}: no flxp binary; build it (cargo build -p flxp) or pass --flxp")
    names = sorted(n for n in os.listdir(testdir) if n.startswith("test-crs-"))
    if args.test:
        names = [n for n in names if n in args.test or n.removeprefix("test-crs-") in args.test]
    runner = Runner(flxp, args.keep)
    total = good = divergent = 0
    for name in names:
        name, results = replay(os.path.join(testdir, name), runner)
        n_ok = sum(1 for ok, _, _ in results if ok is True)
        n_div = sum(1 for ok, _, _ in results if ok == DIVERGENCE)
        total += len(results)
        good += n_ok
        divergent += n_div
        extra = f" ({n_div} documented divergences)" if n_div else ""
        print(f"{name}: {n_ok} of {len(results)} decisions reproduced{extra}")
        for ok, desc, info in results:
            if ok is not True or args.verbose:
                tag = {True: "ok  ", DIVERGENCE: "DIV "}.get(ok, "MISS")
                print(f"  {tag} {desc}" + ("" if ok else f"  [{info}]"))
    misses = total - good - divergent
    print(f"total: {good} of {total} decisions reproduced, {divergent} documented divergences, {misses} misses")
    return 0 if misses == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
