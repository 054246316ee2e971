"""The week benchmark's measures, computed from the simulator's own records (`GET /_sim/records`).

Pure functions of the records: nothing here asks a contender what it did. Python standard library
only, so that `week.py` and its tests run anywhere Python 3 does.

Definitions (each one is what GUIDE.md's "A week in motion" section states):
- a node-minute is *overloaded* when the node is online and its CPU demand is above
  `CPU_LIMIT` of its CPUs, its memory demand above `MEM_LIMIT` of its memory, or its pressure
  stall (PSI) above `PSI_CPU_LIMIT` (cpu `some`) or `PSI_MEM_LIMIT` (memory `full`);
- a *ping-pong* is a migration that takes a guest back to a node it left less than
  `PING_PONG_SECS` earlier (counted once per return);
- *imbalance* is the spread (most minus least loaded online node, in percentage points) of memory
  in use and of CPU demand, averaged over the minutes sampled.
"""

CPU_LIMIT = 0.90
MEM_LIMIT = 0.95
PSI_CPU_LIMIT = 40.0
PSI_MEM_LIMIT = 10.0
PING_PONG_SECS = 6 * 3600
PLACED_WINDOW_SECS = 600
GIB = float(1 << 30)


def overloaded(s):
    """Whether one node sample counts as overloaded."""
    if not s["online"]:
        return False
    return (s["cpu_demand"] > CPU_LIMIT * s["maxcpu"]
            or s["mem_demand"] > MEM_LIMIT * s["maxmem"]
            or s.get("psi_cpu_some", 0.0) > PSI_CPU_LIMIT
            or s.get("psi_memory_full", 0.0) > PSI_MEM_LIMIT)


def sample_step(samples):
    """Seconds between two samples of one node (60 unless the records say otherwise)."""
    times = sorted({s["time"] for s in samples})
    steps = [b - a for a, b in zip(times, times[1:]) if b > a]
    return min(steps) if steps else 60


def overload(samples):
    """(overloaded node-minutes, guest-minutes on overloaded nodes)."""
    minutes = sample_step(samples) / 60.0
    node_min = guest_min = 0.0
    for s in samples:
        if overloaded(s):
            node_min += minutes
            guest_min += minutes * s["guests"]
    return node_min, guest_min


def imbalance(samples):
    """Time-averaged spread of (memory, CPU) use over online nodes, in percentage points."""
    by_time = {}
    for s in samples:
        if s["online"] and s["maxmem"] > 0 and s["maxcpu"] > 0:
            by_time.setdefault(s["time"], []).append(s)
    if not by_time:
        return 0.0, 0.0
    mem_sum = cpu_sum = 0.0
    for nodes in by_time.values():
        mem = [100.0 * n["mem"] / n["maxmem"] for n in nodes]
        cpu = [100.0 * n["cpu_demand"] / n["maxcpu"] for n in nodes]
        mem_sum += max(mem) - min(mem)
        cpu_sum += max(cpu) - min(cpu)
    return mem_sum / len(by_time), cpu_sum / len(by_time)


def ping_pongs(migrations):
    """Migrations that take a guest back to a node it left less than PING_PONG_SECS before."""
    done = sorted((m for m in migrations if m.get("ok") is not False), key=lambda m: m["start"])
    left = {}  # (vmid, node) -> when the guest last left it
    found = []
    for m in done:
        when = left.get((m["vmid"], m["to"]))
        if when is not None and m["start"] - when < PING_PONG_SECS:
            found.append(m)
        left[(m["vmid"], m["from"])] = m["end"] if m.get("end") is not None else m["start"]
    return found


def placed_on_overload(guests, samples):
    """Creations whose node is overloaded within PLACED_WINDOW_SECS after the creation."""
    by_node = {}
    for s in samples:
        if overloaded(s):
            by_node.setdefault(s["node"], []).append(s["time"])
    found = []
    for g in guests:
        if g["event"] != "created":
            continue
        if any(g["time"] <= t <= g["time"] + PLACED_WINDOW_SECS for t in by_node.get(g["node"], ())):
            found.append(g)
    return found


def api_calls(records, users, hours, nodes, start=None, end=None):
    """(calls per hour, calls per hour per node) made by the given users, in the simulated hours
    that start in [start, end) when given (the simulator counts calls per whole hour)."""
    total = sum(r["count"] for r in records.get("requests_per_hour", [])
                if r["user"] in users
                and (start is None or r["hour"] >= start - 3599)
                and (end is None or r["hour"] < end))
    per_hour = total / hours if hours > 0 else 0.0
    return per_hour, per_hour / nodes if nodes else 0.0


def calls_by_path(records, users):
    """The contender's API calls since the simulator started, per method and path, most first."""
    rows = [r for r in records.get("requests", []) if r["user"] in users]
    rows.sort(key=lambda r: (-r["count"], r["method"], r["path"]))
    return [{"method": r["method"], "path": r["path"], "count": r["count"]} for r in rows]


def measures(records, start, end, users, breaches=0):
    """Every measure of one run between simulated times `start` and `end`.

    `users` are the API principals of the contender (`user@realm!token`): migrations and calls
    they made count as its own; every migration counts, whoever started it, since a contender is
    judged by what happened to the cluster.
    """
    days = max(end - start, 1) / 86400.0
    samples = [s for s in records.get("node_samples", []) if start <= s["time"] < end]
    migrations = [m for m in records.get("migrations", []) if start <= m["start"] < end]
    guests = [g for g in records.get("guests", []) if start <= g["time"] < end]
    node_min, guest_min = overload(samples)
    mem, cpu = imbalance(samples)
    nodes = len({s["node"] for s in samples})
    per_hour, per_node = api_calls(records, users, (end - start) / 3600.0, nodes, start, end)
    return {
        "days": round(days, 3),
        "migrations": len(migrations),
        "migrations_per_day": round(len(migrations) / days, 2),
        "failed_migrations": sum(1 for m in migrations if m.get("ok") is False),
        "gib_copied": round(sum(m.get("bytes", 0) for m in migrations) / GIB, 2),
        "ping_pongs": len(ping_pongs(migrations)),
        "imbalance_memory_pp": round(mem, 2),
        "imbalance_cpu_pp": round(cpu, 2),
        "overload_node_minutes": round(node_min, 1),
        "overload_guest_minutes": round(guest_min, 1),
        "placed_on_overload": len(placed_on_overload(guests, samples)),
        "created": sum(1 for g in guests if g["event"] == "created"),
        "breaches": breaches,
        "api_calls_per_hour": round(per_hour, 1),
        "api_calls_per_hour_per_node": round(per_node, 2),
    }
