#!/usr/bin/env python3
"""Soak test: flxp's daemon against `flxp sim` under chaos, watched by an independent checker.

It starts the simulator on a free port, writes a flxp config with a short daemon interval and a low
threshold, starts `flxp daemon`, and then, until --migrations landed or --max-seconds passed:

- a seeded chaos loop injects API errors (10 % on GET and POST paths), latency and failing
  migrations, takes a node offline and back, toggles `flxp.maintenance` in a node's notes, changes
  guest memory so that balancing keeps happening, and `kill -9`s and restarts the daemon;
- a checker thread reads `/_sim/state` every ~75 ms and `/cluster/tasks` every ~0.5 s and checks,
  with its own code (nothing of flxp's): every guest on exactly one node and none lost; no node's
  memory (Sigma maxmem of running guests, a migrating guest counted on source and target) above its
  maxmem; the hard rules from the tags (anti-affinity, affinity, node pins) at every observed
  instant; from the task log, no two overlapping migrations of one guest and no flxp migration
  within the cooldown of the guest's previous one (unless it leaves a node in maintenance or fixes
  a broken rule of that guest); the daemon alive unless the chaos loop killed it.

It prints a summary and exits 1 on any violation. Python 3 standard library only.
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

# The helpers shared with the other checker script (soak or week), one directory up.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from simcheck import (  # noqa: E402
    FLXP_RULE_TAGS,
    anti_affinity_breaches,
    rules_of,
    stop,
    tag_list,
    wait_for_sim,
)

HERE = os.path.dirname(os.path.abspath(__file__))
MIGRATION_TYPES = {"qmigrate", "vzmigrate", "hamigrate", "harelocate"}
MOVE_TYPES = {"qmigrate", "vzmigrate"}
MAINT = re.compile(r"(?<![~\w.])flxp\.maintenance(?![\w.])")


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Api:
    """A tiny Proxmox API client (token auth, plain HTTP)."""

    def __init__(self, base, token):
        self.base = base.rstrip("/")  # http://host:port
        self.auth = f"PVEAPIToken={token}"

    def call(self, method, path, data=None, json_body=None, timeout=10):
        url = self.base + path
        headers = {"Authorization": self.auth}
        body = None
        if json_body is not None:
            body = json.dumps(json_body).encode()
            headers["Content-Type"] = "application/json"
        elif data is not None:
            body = urllib.parse.urlencode(data).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"null").get("data")

    def retry(self, method, path, tries=20, **kw):
        """Calls until it succeeds: injected errors are expected."""
        last = None
        for _ in range(tries):
            try:
                return self.call(method, path, **kw)
            except (urllib.error.URLError, OSError, ValueError) as e:
                last = e
                time.sleep(0.05)
        raise RuntimeError(f"{method} {path} failed {tries} times: {last}")


def who(task):
    """The principal that started a task: `user`, or `user!tokenid` for an API token."""
    tokenid = task.get("tokenid")
    return f"{task.get('user')}!{tokenid}" if tokenid else task.get("user")


class Checker(threading.Thread):
    """Watches the simulator and the task log; knows nothing of flxp's code."""

    def __init__(self, api, token_user, cooldown, affinity_grace):
        super().__init__(daemon=True)
        self.api = api
        self.token_user = token_user
        self.cooldown = cooldown
        self.affinity_grace = affinity_grace
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.tasks = {}  # upid -> task
        self.violations = []  # (sim time, kind, detail)
        self.active = {}  # (kind, subject) -> first seen, for one report per episode
        self.polls = 0
        self.task_polls = 0
        self.errors = 0
        self.expected = None  # vmids at the start
        self.timeline = []  # (sim time, maintenance nodes, guests breaking a rule, offline nodes)
        self.split_since = {}  # affinity group -> sim time first seen split with nothing in flight
        self.checked_upids = set()
        self.label = "VIOLATION"

    def violation(self, when, kind, subject, detail):
        key = (kind, subject)
        if key in self.active:
            return
        self.active[key] = when
        with self.lock:
            self.violations.append((when, kind, detail))
        log(f"{self.label} t={when} {kind}: {detail}")

    def clear(self, seen):
        for key in list(self.active):
            if key not in seen and key[0] in ("lost", "duplicate", "memory", "anti-affinity",
                                              "affinity", "pin", "node-mem"):
                del self.active[key]

    def check_state(self, s):
        now = s["time"]
        guests = {g["vmid"]: g for g in s["guests"]}
        nodes = {n["node"]: n for n in s["nodes"]}
        seen = set()

        def v(kind, subject, detail):
            seen.add((kind, subject))
            self.violation(now, kind, subject, detail)

        # Every guest exactly once.
        where = {}
        for n in s["nodes"]:
            for vmid in n["guests"]:
                where.setdefault(vmid, []).append(n["node"])
        if self.expected is None:
            self.expected = set(guests)
        for vmid in self.expected:
            if vmid not in guests or vmid not in where:
                v("lost", vmid, f"guest {vmid} is on no node")
        for vmid, ns in where.items():
            if len(ns) != 1:
                v("duplicate", vmid, f"guest {vmid} listed on {ns}")
            if vmid in guests and guests[vmid]["node"] not in ns:
                v("duplicate", vmid, f"guest {vmid} says node {guests[vmid]['node']}, listed on {ns}")

        # In flight: vmid -> target.
        inflight = {m["vmid"]: m["target"] for m in s.get("migrations", [])}
        # Where each running guest counts: its node, plus its target while migrating.
        counts = {}
        for g in guests.values():
            if not g["running"]:
                continue
            places = {g["node"]}
            if g["vmid"] in inflight:
                places.add(inflight[g["vmid"]])
            counts[g["vmid"]] = places

        # Memory: Sigma maxmem of running guests (migrating ones on both nodes) <= node maxmem.
        for name, n in nodes.items():
            committed = sum(guests[vm]["maxmem"] for vm, ps in counts.items() if name in ps)
            if committed > n["maxmem"]:
                members = sorted(vm for vm, ps in counts.items() if name in ps)
                v("memory", name, f"node {name} committed {committed / 2**30:.1f} GiB of "
                  f"{n['maxmem'] / 2**30:.1f} GiB (guests {members}, in flight {inflight})")
            if n["mem"] > n["maxmem"]:
                v("node-mem", name, f"node {name} uses {n['mem']} of {n['maxmem']} bytes")

        # Hard rules.
        rules = rules_of(guests, FLXP_RULE_TAGS)
        aff, pins = rules["aff"], rules["pin"]
        breaking = set()
        for group, node, vms in anti_affinity_breaches(rules["anti"], counts):
            breaking.update(vms)
            v("anti-affinity", (group, node),
              f"anti-affinity {group}: {sorted(vms)} on {node} (in flight {inflight})")
        for group, members in aff.items():
            running = [vm for vm in members if vm in counts]
            moving = [vm for vm in running if vm in inflight]
            homes = {guests[vm]["node"] for vm in running}
            if len(homes) > 1 and not moving:
                breaking.update(running)
                since = self.split_since.setdefault(group, now)
                if now - since > self.affinity_grace:
                    v("affinity", group, f"affinity {group} split over {sorted(homes)} for "
                      f"{now - since} s with nothing in flight")
            elif len(homes) <= 1:
                self.split_since.pop(group, None)
        for vm, allowed in pins.items():
            for p in counts.get(vm, ()):
                if p not in allowed:
                    breaking.add(vm)
                    v("pin", vm, f"guest {vm} pinned to {sorted(allowed)} counts on {p}")
        maint = {name for name, n in nodes.items() if MAINT.search(n.get("notes") or "")}
        offline = {name for name, n in nodes.items() if not n["online"]}
        self.timeline.append((now, maint, breaking, offline))
        if len(self.timeline) > 20000:
            del self.timeline[:5000]
        self.clear(seen)

    def excused(self, vmid, source, start):
        """A fix ignores the cooldown: leaving a node in maintenance or a broken rule of its own."""
        for t, maint, breaking, _ in reversed(self.timeline):
            if t < start - 3:
                break
            if t <= start + 1 and (source in maint or vmid in breaking):
                return True
        return False

    def check_tasks(self, now):
        by_vm = {}
        for t in self.tasks.values():
            if t.get("type") in MIGRATION_TYPES and str(t.get("id", "")).isdigit():
                by_vm.setdefault(int(t["id"]), []).append(t)
        for vmid, ts in by_vm.items():
            ts.sort(key=lambda t: (t["starttime"], t["upid"]))
            for i, t2 in enumerate(ts):
                if t2["upid"] in self.checked_upids:
                    continue
                mine = who(t2) == self.token_user
                end2 = t2.get("endtime") or now
                # Overlap: two real moves, or two flxp requests, of one guest at once.
                for t1 in ts[:i]:
                    end1 = t1.get("endtime") or now
                    both_moves = t1["type"] in MOVE_TYPES and t2["type"] in MOVE_TYPES
                    both_mine = mine and who(t1) == self.token_user
                    if (both_moves or both_mine) and t2["starttime"] < end1 and t1["starttime"] < end2:
                        self.violation(t2["starttime"], "overlap", (t1["upid"], t2["upid"]),
                                       f"guest {vmid}: {t1['type']} {t1['upid']} "
                                       f"[{t1['starttime']}, {t1.get('endtime')}] and {t2['type']} "
                                       f"{t2['upid']} [{t2['starttime']}, {t2.get('endtime')}] overlap")
                # Cooldown: measured from the previous migration's end (or start while running).
                if mine:
                    prev = [t1 for t1 in ts[:i] if t1["starttime"] <= t2["starttime"]]
                    # An HA guest's qmigrate by the CRM belongs to the request before it.
                    if prev:
                        last = max((t1.get("endtime") or t1["starttime"]) for t1 in prev)
                        ago = t2["starttime"] - last
                        if ago < self.cooldown - 1 and not self.excused(vmid, t2.get("node"),
                                                                        t2["starttime"]):
                            self.violation(t2["starttime"], "cooldown", t2["upid"],
                                           f"guest {vmid}: {t2['type']} {t2['upid']} started "
                                           f"{ago} s after its previous migration ended "
                                           f"(cooldown {self.cooldown} s), not a fix")
                if t2.get("endtime"):
                    self.checked_upids.add(t2["upid"])

    def poll_tasks(self):
        try:
            tasks = self.api.call("GET", "/api2/json/cluster/tasks", timeout=5)
        except (urllib.error.URLError, OSError, ValueError):
            self.errors += 1
            return
        self.task_polls += 1
        with self.lock:
            for t in tasks or []:
                if "upid" in t and "starttime" in t:
                    self.tasks[t["upid"]] = t

    def run(self):
        i = 0
        while not self.stop.is_set():
            try:
                s = self.api.call("GET", "/_sim/state", timeout=5)
                self.polls += 1
                self.check_state(s)
                if i % 6 == 0:
                    self.poll_tasks()
                    self.check_tasks(s["time"])
            except (urllib.error.URLError, OSError, ValueError, KeyError) as e:
                self.errors += 1
                if self.errors % 50 == 1:
                    log(f"checker read failed: {e}")
            i += 1
            time.sleep(0.075)

    def finish(self):
        self.poll_tasks()
        with self.lock:
            now = max((t.get("endtime") or t["starttime"] for t in self.tasks.values()), default=0)
        self.check_tasks(now)

    def migrations(self):
        with self.lock:
            ts = list(self.tasks.values())
        moves = [t for t in ts if t.get("type") in MOVE_TYPES and t.get("endtime")]
        ok = sum(1 for t in moves if t.get("status") == "OK")
        return ok, len(moves) - ok, sum(1 for t in ts if t.get("type") == "hamigrate")


class Daemon:
    """flxp daemon, restarted by the chaos loop only."""

    def __init__(self, flxp, config, logfile):
        self.cmd = [flxp, "daemon", "--config", config]
        self.logfile = logfile
        self.proc = None
        self.starts = 0

    def start(self):
        out = open(self.logfile, "ab")
        self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT,
                                     env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")})
        out.close()
        self.starts += 1

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc and self.alive():
            stop(self.proc, 15)


def start_sim(flxp, scenario, token, workdir):
    out = open(os.path.join(workdir, "sim.out"), "wb")
    err = open(os.path.join(workdir, "sim.log"), "wb")
    proc = subprocess.Popen([flxp, "sim", "--scenario", scenario, "--listen", "127.0.0.1:0",
                             "--token", token, "--time-scale", "1", "--http"],
                            stdout=out, stderr=err)
    (url,) = wait_for_sim(proc, workdir, ["base URL"], 300)
    return proc, url


CONFIG = """# Written by scripts/soak/soak.py: a short interval and a low threshold keep flxp migrating.
[zones.soak]
hosts = ["{host}"]
token = "{user}"
token-secret = "{secret}"
timeout-secs = 5

[placement]
reserve = "1GiB"
max-memory-commit = 1.0

[balance]
max-migrations = 10
cooldown-secs = {cooldown}

[balance.trigger]
threshold = 3
target = 1.5
hold = 1
margin = 0.05
min-gain = 0.1

[migration]
parallel = 4
per-node-in = 2
per-node-out = 2
timeout-secs = 60
poll-secs = 1
drain-timeout-secs = 5

[daemon]
interval-secs = 1
"""


def self_test(api, checker):
    """Breaks each invariant on purpose, by hand, and expects the checker to name it."""
    state = api.retry("GET", "/_sim/state")
    guests = {g["vmid"]: g for g in state["guests"]}
    checker.check_state(state)
    if checker.violations:
        raise SystemExit(f"self-test: the scenario starts broken: {checker.violations}")
    checker.start()

    def migrate(vmid, target):
        node = api.retry("GET", "/_sim/state")
        src = next(g["node"] for g in node["guests"] if g["vmid"] == vmid)
        api.retry("POST", f"/api2/json/nodes/{src}/qemu/{vmid}/migrate",
                  data={"target": target, "online": 1})
        for _ in range(100):
            s = api.retry("GET", "/_sim/state")
            if any(g["vmid"] == vmid and g["node"] == target and not g["lock"]
                   for g in s["guests"]):
                return
            time.sleep(0.1)
        raise SystemExit(f"self-test: migration of {vmid} to {target} did not land")

    db = sorted(v for v, g in guests.items() if "flxp.anti-affinity.db" in tag_list(g["tags"]))
    migrate(db[1], guests[db[0]]["node"])                       # anti-affinity
    pinned = next(v for v, g in guests.items()
                  if any(t.startswith("flxp.node.") for t in tag_list(g["tags"])))
    allowed = {t[len("flxp.node."):] for t in tag_list(guests[pinned]["tags"])
               if t.startswith("flxp.node.")}
    migrate(pinned, next(n for n in sorted(n["node"] for n in state["nodes"]) if n not in allowed))
    pair = sorted(v for v, g in guests.items()
                  if any(t.startswith("flxp.affinity.") for t in tag_list(g["tags"])))
    home = guests[pair[0]]["node"]
    migrate(pair[0], next(n["node"] for n in state["nodes"] if n["node"] != home))  # affinity
    plain = [v for v, g in sorted(guests.items()) if tag_list(g["tags"]) == ["soak"]]
    free = plain[0]
    other = next(n["node"] for n in state["nodes"] if n["node"] != guests[free]["node"])
    migrate(free, other)
    migrate(free, guests[free]["node"])                         # cooldown
    # Memory: pile plain guests onto one node until their maxmem passes its memory.
    full = "pve6"
    committed = sum(g["maxmem"] for g in guests.values() if g["node"] == full)
    for v in plain[1:]:
        if committed > 66 * 2**30:
            break
        if guests[v]["node"] != full:
            migrate(v, full)
            committed += guests[v]["maxmem"]
    time.sleep(checker.affinity_grace + 2)
    checker.stop.set()
    checker.join(timeout=10)
    checker.finish()
    found = {kind for _, kind, _ in checker.violations}
    want = {"anti-affinity", "pin", "affinity", "cooldown", "memory"}
    for when, kind, detail in checker.violations:
        print(f"    t={when} {kind}: {detail}")
    if want - found:
        print(f"self-test FAILED: the checker missed {sorted(want - found)}")
        return 1
    print(f"self-test passed: the checker found {sorted(found)}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flxp", required=True, help="the flxp binary")
    ap.add_argument("--scenario", default=os.path.join(HERE, "scenario.json"))
    ap.add_argument("--migrations", type=int, default=1000, help="stop after N landed migrations")
    ap.add_argument("--max-seconds", type=float, default=1200, help="hard stop")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--cooldown", type=int, default=10, help="the daemon's cooldown-secs")
    ap.add_argument("--affinity-grace", type=int, default=15,
                    help="seconds an affinity group may stay split with nothing in flight")
    ap.add_argument("--self-test", action="store_true",
                    help="no daemon: break each invariant by hand and expect the checker to see it")
    ap.add_argument("--workdir", default=None, help="logs and config (default: a temp dir)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    rng = random.Random(seed)
    log(f"seed {seed}")
    workdir = args.workdir or tempfile.mkdtemp(prefix="flxp-soak-")
    os.makedirs(workdir, exist_ok=True)
    log(f"workdir {workdir}")

    user = "root@pam!soak"
    secret = str(uuid.UUID(int=rng.getrandbits(128)))
    token = f"{user}={secret}"
    sim, url = start_sim(args.flxp, args.scenario, token, workdir)
    m = re.match(r"(https?://[^/]+)", url)
    host = m.group(1)
    api = Api(host, token)
    config = os.path.join(workdir, "flxp.toml")
    with open(config, "w") as f:
        f.write(CONFIG.format(host=host, user=user, secret=secret, cooldown=args.cooldown))

    if args.self_test:
        checker = Checker(api, user, args.cooldown, 2)
        checker.label = "self-test, broken on purpose:"
        try:
            return self_test(api, checker)
        finally:
            sim.send_signal(signal.SIGTERM)
            sim.wait(timeout=10)

    daemon = Daemon(args.flxp, config, os.path.join(workdir, "daemon.log"))
    checker = Checker(api, user, args.cooldown, args.affinity_grace)
    stats = {k: 0 for k in ("error-faults", "latency-faults", "failing-migrations", "fault-clears",
                            "offline", "online", "maintenance-on", "maintenance-off",
                            "usage-changes", "kill-9", "daemon-deaths")}
    start = time.monotonic()
    state = api.retry("GET", "/_sim/state")
    guests = {g["vmid"]: g for g in state["guests"]}
    node_names = [n["node"] for n in state["nodes"]]
    notes = {n["node"]: n.get("notes") or "" for n in state["nodes"]}
    checker.check_state(state)
    if checker.violations:
        log("the scenario breaks an invariant at the start: fix the scenario")
    checker.start()
    daemon.start()

    offline_until, offline_node = None, None
    maint_until, maint_node = None, None
    next_faults = time.monotonic() + rng.uniform(5, 15)
    next_kill = time.monotonic() + rng.uniform(10, 40)
    next_offline = time.monotonic() + rng.uniform(20, 60)
    next_maint = time.monotonic() + rng.uniform(15, 45)
    next_report = time.monotonic() + 15
    vmids = sorted(guests)
    reason = "max-seconds"
    try:
        while True:
            now = time.monotonic()
            ok, failed, _ = checker.migrations()
            if ok >= args.migrations:
                reason = "migrations"
                break
            if now - start >= args.max_seconds:
                break
            if now >= next_report:
                log(f"{now - start:.0f} s: {ok} migrations landed, {failed} failed, "
                    f"{daemon.starts - 1} restarts, {len(checker.violations)} violations")
                next_report = now + 15
            if not daemon.alive():
                stats["daemon-deaths"] += 1
                code = daemon.proc.returncode
                checker.violation(int(time.time()), "daemon", daemon.starts,
                                  f"flxp daemon exited by itself with {code} (see daemon.log)")
                daemon.start()
            # Load changes keep the balancer busy.
            for vm in rng.sample(vmids, rng.randint(1, 4)):
                frac = rng.choice([0.1, 0.2, 0.5, 0.8, 0.95])
                try:
                    api.call("POST", f"/_sim/guests/{vm}/usage",
                             json_body={"mem": int(guests[vm]["maxmem"] * frac)})
                    stats["usage-changes"] += 1
                except (urllib.error.URLError, OSError):
                    pass
            if now >= next_faults:
                kind = rng.choice(["errors", "latency", "fail", "all", "none"])
                spec = {"latency": [], "errors": [], "fail_migrations": []}
                if kind in ("errors", "all"):
                    for method in ("GET", "POST"):
                        for path in ("/cluster/*", "/nodes/*"):
                            spec["errors"].append({"path": path, "method": method, "rate": 0.1,
                                                   "status": rng.choice([500, 503, 595]),
                                                   "message": "soak: injected"})
                    stats["error-faults"] += 1
                if kind in ("latency", "all"):
                    spec["latency"].append({"path": "/nodes/*", "ms": rng.randint(20, 200)})
                    spec["latency"].append({"path": "/cluster/*", "ms": rng.randint(10, 100)})
                    stats["latency-faults"] += 1
                if kind in ("fail", "all"):
                    spec["fail_migrations"] = [
                        {"vmid": vm, "message": "soak: migration problems"}
                        for vm in rng.sample(vmids, 5)]
                    stats["failing-migrations"] += 1
                if kind == "none":
                    stats["fault-clears"] += 1
                api.retry("PUT", "/_sim/faults", json_body=spec)
                next_faults = now + rng.uniform(8, 20)
            if offline_node and now >= offline_until:
                api.retry("POST", f"/_sim/nodes/{offline_node}/status", json_body={"status": "online"})
                log(f"node {offline_node} online")
                stats["online"] += 1
                offline_node = None
                next_offline = now + rng.uniform(20, 60)
            elif not offline_node and now >= next_offline:
                offline_node = rng.choice(node_names)
                api.retry("POST", f"/_sim/nodes/{offline_node}/status", json_body={"status": "offline"})
                log(f"node {offline_node} offline")
                stats["offline"] += 1
                offline_until = now + rng.uniform(10, 30)
            if maint_node and now >= maint_until and maint_node != offline_node:
                api.retry("PUT", f"/api2/json/nodes/{maint_node}/config",
                          data={"description": notes[maint_node]})
                log(f"node {maint_node} maintenance off")
                stats["maintenance-off"] += 1
                maint_node = None
                next_maint = now + rng.uniform(15, 45)
            elif not maint_node and now >= next_maint:
                maint_node = rng.choice([n for n in node_names if n != offline_node])
                api.retry("PUT", f"/api2/json/nodes/{maint_node}/config",
                          data={"description": (notes[maint_node] + " flxp.maintenance").strip()})
                log(f"node {maint_node} maintenance on")
                stats["maintenance-on"] += 1
                maint_until = now + rng.uniform(15, 40)
            if now >= next_kill:
                daemon.kill9()
                stats["kill-9"] += 1
                time.sleep(rng.uniform(0, 2))
                daemon.start()
                next_kill = time.monotonic() + rng.uniform(10, 40)
            time.sleep(rng.uniform(0.3, 1.0))
    finally:
        daemon.stop()
        try:
            api.call("DELETE", "/_sim/faults")
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
        checker.stop.set()
        checker.join(timeout=10)
        checker.finish()
        stop(sim, 10)

    ok, failed, ha = checker.migrations()
    dur = time.monotonic() - start
    print()
    print(f"soak summary (seed {seed}, stopped by {reason} after {dur:.0f} s)")
    print(f"  migrations landed: {ok}  failed: {failed}  HA requests: {ha}")
    print(f"  daemon starts: {daemon.starts}  kill -9: {stats['kill-9']}  "
          f"died by itself: {stats['daemon-deaths']}")
    print("  chaos: " + ", ".join(f"{k} {v}" for k, v in stats.items()
                                  if k not in ("kill-9", "daemon-deaths")))
    print(f"  checker: {checker.polls} state polls, {checker.task_polls} task-log polls, "
          f"{len(checker.tasks)} tasks seen, {checker.errors} read errors")
    print(f"  violations: {len(checker.violations)}")
    for when, kind, detail in sorted(checker.violations, key=lambda v: v[0])[:100]:
        print(f"    t={when} {kind}: {detail}")
    print(f"  logs: {workdir}")
    return 1 if checker.violations else 0


if __name__ == "__main__":
    sys.exit(main())
