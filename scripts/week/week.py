#!/usr/bin/env python3
"""A week in motion: one contender balances a simulated cluster whose load follows a trace.

It starts `flxp sim` with a scenario and a load trace (generated for a family and seed, or read
from a file) at a time scale that makes one balancing round (`--round-secs` simulated seconds)
last `--round-real` real seconds, runs one contender on it, each unmodified, every round at the
same simulated interval, and stops after `--days` simulated days. Meanwhile a checker thread reads
`/_sim/state` every ~100 ms and counts hard-rule breaches (anti-affinity, affinity with nothing in
flight, node pins; flxp's and ProxLB's tags) at any instant. At the end it reads the simulator's
own records (`/_sim/records`) and prints the measures of `measure.py`; `--json` writes them.

Contenders:
- `flxp`: `flxp daemon` with the default config (only the zone and the round interval set);
- `flxp-cpu`: the same with `[balance] metric = "cpu"` (balances CPU use instead of memory);
- `pve-topsis`, `pve-bruteforce`: Proxmox VE 9.2's dynamic load balancer as flxp reimplements it
  (`flxp daemon` with `[balance] method = "pve-topsis"`, usage `dynamic`, Proxmox's CV measure,
  threshold 0.3, hold 3 rounds and margin 0.1; it moves HA-managed guests only, one per round);
- `proxlb`, `proxlb-cpsat`: ProxLB 2.3 (PyPI `proxlb`) run once per round (`service.daemon:
  false`), greedy or with its CP-SAT planner (PyPI `proxlb-solver`, `solver: {enable: true, mode:
  active}`); `--python` names the interpreter that has them (scripts/week.sh makes a venv).
  While one of its runs computes and migrates, simulated time runs at `--contender-scale` (1: real
  speed, as on a real cluster, which does not wait for it) and at the round's scale between runs,
  so that it runs every round however long a Python start and its hundreds of calls take; a run
  that still overruns its round delays the next (`rounds_run` against `rounds_due`).

Python 3 standard library only. `scripts/week.sh` builds flxp and calls this.
"""
import argparse
import json
import math
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import measure

# The helpers shared with the other checker script (soak or week), one directory up.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from simcheck import (  # noqa: E402
    anti_affinity_breaches,
    rules_of,
    stop,
    wait_for_sim,
)

CONTENDERS = ("flxp", "flxp-cpu", "pve-topsis", "pve-bruteforce", "proxlb", "proxlb-cpsat")
TLS = ssl.create_default_context()
TLS.check_hostname = False
TLS.verify_mode = ssl.CERT_NONE


def log(msg):
    print(f"[week {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Api:
    """A tiny Proxmox API client (token auth) for the simulator's API and its `/_sim` calls."""

    def __init__(self, base, token):
        self.base = base.rstrip("/")
        self.auth = f"PVEAPIToken={token}"

    def get(self, path, timeout=30):
        req = urllib.request.Request(self.base + path, headers={"Authorization": self.auth})
        with urllib.request.urlopen(req, timeout=timeout, context=TLS) as r:
            return json.loads(r.read() or b"null").get("data")

    def post(self, path, body, timeout=30):
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(),
                                     headers={"Authorization": self.auth,
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout, context=TLS) as r:
            return json.loads(r.read() or b"null").get("data")


RULE_TAGS = (
    ("anti", ("flxp.anti-affinity.", "plb_anti_affinity_")),
    ("aff", ("flxp.affinity.", "plb_affinity_")),
    ("pin", ("flxp.node.", "plb_pin_")),
)


class Checker(threading.Thread):
    """Counts hard-rule breaches at every observed instant; knows nothing of any contender."""

    def __init__(self, api, grace):
        super().__init__(daemon=True)
        self.api = api
        self.grace = grace
        self.stop = threading.Event()
        self.breaches = []  # (sim time, what), one per episode
        self.active = set()
        self.split_since = {}
        self.polls = 0
        self.errors = 0

    def check(self, s):
        now = s["time"]
        guests = {g["vmid"]: g for g in s["guests"]}
        inflight = {m["vmid"]: m["target"] for m in s.get("migrations", [])}
        places = {}
        for g in guests.values():
            if g["running"]:
                places[g["vmid"]] = {g["node"]} | ({inflight[g["vmid"]]} if g["vmid"] in inflight else set())
        # Hard rules from the tags, flxp's and ProxLB's.
        rules = rules_of(guests, RULE_TAGS)
        seen = set()

        def breach(key, what):
            seen.add(key)
            if key not in self.active:
                self.active.add(key)
                self.breaches.append((now, what))
                log(f"BREACH t={now}: {what}")

        for group, node, vms in anti_affinity_breaches(rules["anti"], places):
            breach(("anti", group, node), f"anti-affinity {group}: {sorted(vms)} on {node}")
        for group, members in rules["aff"].items():
            running = [vm for vm in members if vm in places]
            homes = {guests[vm]["node"] for vm in running}
            if len(homes) > 1 and not any(vm in inflight for vm in running):
                since = self.split_since.setdefault(group, now)
                if now - since > self.grace:
                    breach(("aff", group), f"affinity {group} split over {sorted(homes)}")
            else:
                self.split_since.pop(group, None)
        for vm, allowed in rules["pin"].items():
            for p in places.get(vm, ()):
                if p not in allowed:
                    breach(("pin", vm), f"guest {vm} pinned to {sorted(allowed)} is on {p}")
        self.active &= seen

    def run(self):
        while not self.stop.is_set():
            try:
                self.check(self.api.get("/_sim/state"))
                self.polls += 1
            except (urllib.error.URLError, OSError, ValueError, KeyError):
                self.errors += 1
            self.stop.wait(0.1)


def start_sim(args, tokens, workdir):
    """`flxp sim` on a free loopback port; returns (process, base URL, fingerprint)."""
    cmd = [args.flxp, "sim", "--scenario", args.scenario, "--listen", "127.0.0.1:0",
           "--time-scale", str(args.time_scale), "--seed", str(args.seed)]
    if args.trace_file:
        cmd += ["--trace-file", args.trace_file]
    else:
        cmd += ["--trace", args.trace, "--days", str(math.ceil(args.days) + 1)]
    for t in tokens:
        cmd += ["--token", t]
    with open(os.path.join(workdir, "sim.out"), "wb") as out, \
            open(os.path.join(workdir, "sim.log"), "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
    url, fingerprint = wait_for_sim(proc, workdir, ["base URL", "fingerprint"], 600)
    return proc, url, fingerprint


FLXP_CONFIG = """# Written by scripts/week/week.py.
[zones.week]
hosts = ["{host}"]
token = "{user}"
token-secret = "{secret}"
fingerprint = "{fingerprint}"

[daemon]
interval-secs = {interval}
{daemon}

# Migrations are followed every 2 simulated seconds, as flxp does by default in real time: at
# the benchmark's time scale the default 2 real seconds would be many simulated minutes.
[migration]
poll-secs = {poll}
{extra}"""

PVE_BALANCER = """
[balance]
method = "{method}"
usage = "dynamic"
measure = "cv"
return-hold-secs = 0         # Proxmox keeps no memory of earlier moves

[balance.trigger]
threshold = 0.3
hold = 3
margin = 0.1
"""

PROXLB_CONFIG = """proxmox_api:
  hosts: ['{host}']
  user: {user}
  token_id: {token_id}
  token_secret: {secret}
  ssl_verification: false
  timeout: 30
proxmox_cluster:
  maintenance_nodes: []
  ignore_nodes: []
balancing:
  enable: true
  enforce_affinity: true
  parallel: false
  live: true
  with_local_disks: true
  balance_types: ['vm', 'ct']
  max_job_validation: 1800
  balanciness: 5
  method: memory
  mode: used
service:
  daemon: false
  log_level: WARNING
{solver}"""


class Contender:
    """One contender's process(es), started and stopped by the run."""

    def __init__(self, args, host, fingerprint, token, workdir):
        self.args = args
        self.name = args.contender
        self.workdir = workdir
        self.user, rest = token.split("!", 1)
        self.token_id, self.secret = rest.rsplit("=", 1)
        self.principal = f"{self.user}!{self.token_id}"
        self.host = host
        self.fingerprint = fingerprint
        self.proc = None
        self.thread = None
        self.stop = threading.Event()
        self.rounds = 0
        self.late_rounds = 0
        self.log = open(os.path.join(workdir, f"{self.name}.log"), "ab")

    def start(self, sim_clock, api):
        if self.name.startswith("proxlb"):
            self.thread = threading.Thread(target=self.proxlb_loop, args=(sim_clock, api),
                                           daemon=True)
            self.thread.start()
            return
        extra = ""
        if self.name == "flxp-cpu":
            extra = '\n[balance]\nmetric = "cpu"\n'
        if self.name.startswith("pve-"):
            extra = PVE_BALANCER.format(method=self.name)
        daemon = ""
        if self.args.flxp_extra:
            lines = self.args.flxp_extra.replace("\\n", "\n")
            # Keys of [daemon] join the table the config already has (TOML has no second one).
            if lines.startswith("[daemon]\n"):
                daemon, _, lines = lines[len("[daemon]\n"):].partition("\n[")
                lines = "[" + lines if lines else ""
            extra += "\n" + lines + "\n"
        path = os.path.join(self.workdir, "flxp.toml")
        with open(path, "w") as f:
            f.write(FLXP_CONFIG.format(host=self.host, user=self.principal, secret=self.secret,
                                       fingerprint=self.fingerprint,
                                       interval=max(1, round(self.args.round_real)),
                                       poll=round(max(0.01, 2.0 / self.args.time_scale), 3),
                                       daemon=daemon,
                                       extra=extra))
        self.proc = subprocess.Popen([self.args.flxp, "daemon", "--config", path],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "RUST_LOG": "info"})

    def pace(self, api, scale):
        """Simulated time runs `scale` times real speed from now on."""
        api.post("/_sim/clock", {"time_scale": scale})

    def proxlb_loop(self, sim_clock, api):
        """ProxLB once per round at the same simulated interval, at `--contender-scale` while it
        runs; a run that still overruns its round delays the next."""
        solver = "" if self.name == "proxlb" else "solver:\n  enable: true\n  mode: active\n"
        path = os.path.join(self.workdir, "proxlb.yaml")
        with open(path, "w") as f:
            f.write(PROXLB_CONFIG.format(host=self.host, user=self.user, token_id=self.token_id,
                                         secret=self.secret, solver=solver))
        next_round = sim_clock()
        while not self.stop.is_set():
            now = sim_clock()
            if now < next_round:
                self.stop.wait(min(1.0, (next_round - now) / self.args.time_scale))
                continue
            if now > next_round + self.args.round_secs:
                self.late_rounds += 1
            next_round = max(next_round + self.args.round_secs, now)
            self.pace(api, self.args.contender_scale)
            try:
                self.proc = subprocess.Popen([self.args.python, "-m", "proxlb", "-c", path],
                                             stdout=self.log, stderr=subprocess.STDOUT)
                self.proc.wait()
            finally:
                self.pace(api, self.args.time_scale)
            self.rounds += 1

    def end(self):
        self.stop.set()
        if self.proc and self.proc.poll() is None:
            stop(self.proc, 60)
        if self.thread:
            self.thread.join(timeout=120)

    def alive(self):
        return self.thread.is_alive() if self.thread else self.proc.poll() is None


def table(rows):
    """Contenders side by side: one line per measure."""
    keys = list(rows[0]["measures"].keys())
    names = [r["contender"] for r in rows]
    width = max(len(k) for k in keys)
    cols = [max(len(n), 10) for n in names]
    out = [" " * width + "  " + "  ".join(n.rjust(c) for n, c in zip(names, cols))]
    for k in keys:
        out.append(k.ljust(width) + "  " + "  ".join(
            str(r["measures"][k]).rjust(c) for r, c in zip(rows, cols)))

    def rounds(r):
        # A daemon keeps its own interval; a one-shot contender's runs are counted.
        if "rounds_run" not in r:
            return "?"
        run = r["rounds_run"]
        return "daemon" if run is None else f"{run}/{r.get('rounds_due', '?')}"

    def per_round(r):
        # Calls per round the contender ran (a daemon: every round due).
        run = r.get("rounds_run") or r.get("rounds_due")
        calls = sum(c["count"] for c in r.get("api_calls_by_path", []))
        return f"{calls / run:.1f}" if run else "?"
    out.append("rounds_run".ljust(width) + "  " + "  ".join(
        rounds(r).rjust(c) for r, c in zip(rows, cols)))
    out.append("api_calls_per_round".ljust(width) + "  " + "  ".join(
        per_round(r).rjust(c) for r, c in zip(rows, cols)))
    return "\n".join(out)


def run(args):
    workdir = args.workdir or tempfile.mkdtemp(prefix="flxp-week-")
    os.makedirs(workdir, exist_ok=True)
    log(f"workdir {workdir}")
    bench = f"root@pam!bench={uuid.uuid4()}"
    contender_token = f"root@pam!{args.contender.replace('-', '')}={uuid.uuid4()}"
    sim, url, fingerprint = start_sim(args, [bench, contender_token], workdir)
    base = re.match(r"(https?://[^/]+)", url).group(1)
    host = base.split("://", 1)[1]
    api = Api(base, bench)
    checker = Checker(api, args.affinity_grace)
    contender = None
    try:
        first = api.get("/_sim/state")
        start = first["time"]
        end = start + args.days * 86400
        checker.check(first)
        checker.start()
        clock = lambda: api.get("/_sim/state")["time"]  # noqa: E731
        contender = Contender(args, host, fingerprint, contender_token, workdir)
        contender.start(clock, api)
        log(f"{args.contender} on {len(first['nodes'])} nodes, {len(first['guests'])} guests, "
            f"{args.days} simulated day(s) at {args.time_scale:g}x")
        died = None
        next_report = time.monotonic() + 30
        while True:
            now = clock()
            if now >= end:
                break
            if not contender.alive():
                died = f"{args.contender} stopped by itself (see {workdir}/{args.contender}.log)"
                log(died)
                break
            if time.monotonic() >= next_report:
                log(f"day {(now - start) / 86400:.2f} of {args.days}, {len(checker.breaches)} breaches")
                next_report = time.monotonic() + 30
            time.sleep(min(1.0, max(0.05, (end - now) / args.time_scale)))
        contender.end()
        checker.stop.set()
        checker.join(timeout=10)
        records = api.get(f"/_sim/records?since={start}", timeout=300)
        with open(os.path.join(workdir, "records.json"), "w") as f:
            json.dump(records, f)
        users = {contender.principal, contender.user}
        result = {
            "contender": args.contender,
            "trace": args.trace or args.trace_file,
            "seed": args.seed,
            "scenario": args.scenario,
            "start": start,
            "users": sorted(users),
            "round_secs": args.round_secs,
            "time_scale": args.time_scale,
            "nodes": len(first["nodes"]),
            "guests_at_start": len(first["guests"]),
            "measures": measure.measures(records, start, end, users, len(checker.breaches)),
            "breaches": [{"time": t, "what": w} for t, w in checker.breaches],
            "api_calls_by_path": measure.calls_by_path(records, users),
            "rounds_late": contender.late_rounds,
            # One-shot contenders: the rounds they ran against the rounds the days had.
            "rounds_run": contender.rounds if contender.thread else None,
            "rounds_due": math.ceil(args.days * 86400 / args.round_secs),
            "checker_polls": checker.polls,
            "error": died,
        }
        return result
    finally:
        if contender:
            contender.end()
        stop(sim, 20)


def remeasure(result_path, records_path, hours):
    """A run's result measured again over its first `hours` simulated hours (all when None): to
    compare contenders over the same window, or a run still going (its records fetched by hand)."""
    result = json.load(open(result_path))
    records = json.load(open(records_path))
    samples = records.get("node_samples", [])
    start = result.get("start") or min(s["time"] for s in samples)
    end = start + hours * 3600 if hours else max(s["time"] for s in samples) + 60
    # Results written before they listed the principals: the harness's token naming.
    users = set(result.get("users") or
                [f"root@pam!{result['contender'].replace('-', '')}", "root@pam"])
    window = [b for b in result.get("breaches", []) if b["time"] < end]
    result["measures"] = measure.measures(records, start, end, users, len(window))
    return result


def main():
    # SIGTERM unwinds like Ctrl-C, so that the simulator and the contender are stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flxp", required=True, help="the flxp binary")
    ap.add_argument("--python", default=sys.executable, help="the Python that has ProxLB")
    ap.add_argument("--scenario", default="demo", help="a scenario file or built-in name")
    ap.add_argument("--trace", help="a trace family (office-hours, night-batch, ...)")
    ap.add_argument("--trace-file", help="a trace file instead of a family")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--contender", choices=CONTENDERS, default="flxp")
    ap.add_argument("--round-secs", type=int, default=300, help="simulated seconds per round")
    ap.add_argument("--round-real", type=float, default=None,
                    help="real seconds per round (default 1, 5 for ProxLB: a Python start is slow)")
    ap.add_argument("--contender-scale", type=float, default=1.0,
                    help="time scale while a one-shot contender (ProxLB) runs (default 1: real speed)")
    ap.add_argument("--affinity-grace", type=int, default=600,
                    help="simulated seconds an affinity group may stay split with nothing in flight")
    ap.add_argument("--flxp-extra", metavar="TOML",
                    help="config lines added to a flxp contender's config (\\n for new lines), "
                         "to try a setting")
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--compare", nargs="+", metavar="JSON",
                    help="print result files side by side and exit")
    ap.add_argument("--workdir")
    ap.add_argument("--remeasure", nargs=2, metavar=("RESULT_JSON", "RECORDS_JSON"),
                    help="measure a run again over its first --hours simulated hours, from its result "
                         "and the simulator's records (the workdir's records.json, or GET /_sim/records "
                         "of a run still going), print the table and exit")
    ap.add_argument("--hours", type=float, help="with --remeasure: the window, from the run's start")
    args = ap.parse_args()
    if args.remeasure:
        print(table([remeasure(*args.remeasure, args.hours)]))
        return 0
    if args.compare:
        rows = [json.load(open(p)) for p in args.compare]
        print(table(rows))
        return 0
    if not args.trace and not args.trace_file:
        ap.error("give --trace FAMILY or --trace-file F")
    if args.round_real is None:
        args.round_real = 5.0 if args.contender.startswith("proxlb") else 1.0
    args.time_scale = args.round_secs / args.round_real
    result = run(args)
    print(table([result]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if result["error"]:
        return 1
    return 2 if result["measures"]["breaches"] else 0


if __name__ == "__main__":
    sys.exit(main())
